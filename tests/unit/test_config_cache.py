"""KafkaAdminHook's config cache (``cache_configs=True``) and request counter, without a cluster.

``hooks.kafka_admin.AdminClient`` is replaced by :class:`FakeAdmin`, which answers ``list_topics``,
``describe_cluster`` and ``describe_configs`` from a hand-made cluster (``FakeAdmin.topics``, broker and
topic configs) with ready futures, and records every topic DescribeConfigs call (the topic names asked).
"""

from __future__ import annotations

import math
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import ElectionType, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import ConfigSource, ResourceType
from hooks import kafka_admin
from hooks.kafka_admin import KafkaAdminHook
from kafka_ops.profile import ClusterProfile
from probes.cluster import ClusterProber

BROKERS = (0, 1, 2)
TOPIC_OVERRIDE = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
BROKER_DEFAULT = ConfigSource.DEFAULT_CONFIG.value


def _done(value: Any = None, error: BaseException | None = None) -> Future:
    future: Future = Future()
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)
    return future


def _entry(value: str, source: int) -> SimpleNamespace:
    return SimpleNamespace(value=value, source=source)


class FakeAdmin:
    """Stands in for confluent-kafka's AdminClient; the class attribute ``current`` is the last one built.

    ``topics``: name -> partition count (RF 3, every replica in the ISR); ``min_isr``: topic -> its
    ``min.insync.replicas`` override; ``broker_min_isr``: the brokers' default. ``topic_calls`` holds one
    list of topic names per topic DescribeConfigs call and ``topic_via`` the broker each went to (librdkafka sends a
    request holding one BROKER resource to that broker, topic resources included; else to the controller the last
    Metadata named), ``broker_calls`` the broker ids asked for their own configs alone.
    ``vanish_on_describe``: topics answered UNKNOWN_TOPIC_OR_PART (deleted after the Metadata);
    ``fail_topic_calls``: the indexes (in ``topic_calls``) of calls whose futures time out.
    ``controllers``: the controller ids the next Metadata answers name, one each (then ``controller``);
    ``silent``: brokers that crashed a moment ago, still in the Metadata: DescribeConfigs of such a broker, and
    DescribeCluster while the last Metadata named one the controller, time out (librdkafka waits for the broker);
    ``never_answer``: brokers whose DescribeConfigs answer never comes (the future stays pending).
    """

    current: FakeAdmin | None = None

    def __init__(self, conf: dict, logger: Any = None) -> None:
        self.conf = conf
        self.topics: dict[str, int] = {}
        self.min_isr: dict[str, int] = {}
        self.broker_min_isr = 2
        self.topic_calls: list[list[str]] = []
        self.topic_via: list[int] = []
        self.topic_timeouts: list[float] = []
        self.broker_calls: list[str] = []
        self.vanish_on_describe: set[str] = set()
        self.fail_topic_calls: set[int] = set()
        self.controller = 1
        self.controllers: list[int] = []
        self.named = 1
        self.silent: set[int] = set()
        self.never_answer: set[int] = set()
        self.cluster_calls = 0
        FakeAdmin.current = self

    def poll(self, timeout: float) -> int:
        return 0

    def list_topics(self, timeout: float) -> SimpleNamespace:
        brokers = {b: SimpleNamespace(id=b, host=f"b{b}", port=9092) for b in BROKERS}
        topics = {}
        for name, count in self.topics.items():
            parts = {}
            for p in range(count):
                replicas = [BROKERS[(p + j) % len(BROKERS)] for j in range(3)]
                parts[p] = SimpleNamespace(id=p, leader=replicas[0], replicas=replicas, isrs=list(replicas))
            topics[name] = SimpleNamespace(topic=name, partitions=parts)
        self.named = self.controllers.pop(0) if self.controllers else self.controller
        return SimpleNamespace(brokers=brokers, topics=topics, controller_id=self.named)

    def describe_cluster(self, request_timeout: float) -> Future:
        self.cluster_calls += 1
        if self.named in self.silent:
            return _done(error=KafkaException(KafkaError(KafkaError._TIMED_OUT, "Timed out waiting for controller")))
        nodes = [SimpleNamespace(id=b, rack=f"rack-{b}") for b in BROKERS]
        return _done(SimpleNamespace(controller=SimpleNamespace(id=self.named), nodes=nodes))

    def describe_configs(self, resources: list, request_timeout: float) -> dict:
        out = {}
        if all(r.restype == ResourceType.BROKER for r in resources):
            self.broker_calls.extend(r.name for r in resources)
            for r in resources:
                if int(r.name) in self.never_answer:
                    out[r] = Future()
                    continue
                if int(r.name) in self.silent:
                    out[r] = _done(error=KafkaException(KafkaError(KafkaError._TIMED_OUT, "waiting for broker")))
                    continue
                out[r] = _done(
                    {
                        kafka_admin.MIN_INSYNC: _entry(str(self.broker_min_isr), BROKER_DEFAULT),
                        kafka_admin.LEADER_IMBALANCE: _entry("10", BROKER_DEFAULT),
                    }
                )
            return out
        routed = [int(r.name) for r in resources if r.restype == ResourceType.BROKER]
        assert len(routed) <= 1, "librdkafka: only one ConfigResource of type BROKER is allowed per call"
        via = routed[0] if routed else self.named
        call = len(self.topic_calls)
        self.topic_calls.append([r.name for r in resources if r.restype == ResourceType.TOPIC])
        self.topic_via.append(via)
        self.topic_timeouts.append(request_timeout)
        for r in resources:
            if via in self.never_answer:
                out[r] = Future()
            elif call in self.fail_topic_calls or via in self.silent:
                out[r] = _done(error=KafkaException(KafkaError(KafkaError._TIMED_OUT)))
            elif r.restype == ResourceType.BROKER:
                out[r] = _done({kafka_admin.MIN_INSYNC: _entry(str(self.broker_min_isr), BROKER_DEFAULT)})
            elif r.name in self.vanish_on_describe or r.name not in self.topics:
                out[r] = _done(error=KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)))
            elif r.name in self.min_isr:
                out[r] = _done({kafka_admin.MIN_INSYNC: _entry(str(self.min_isr[r.name]), TOPIC_OVERRIDE)})
            else:
                out[r] = _done({kafka_admin.MIN_INSYNC: _entry(str(self.broker_min_isr), BROKER_DEFAULT)})
        return out

    def described_topics(self, since: int = 0) -> list[str]:
        """Topic names asked by the topic DescribeConfigs calls from call ``since`` on, sorted."""
        return sorted(t for call in self.topic_calls[since:] for t in call)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> type[FakeAdmin]:
    monkeypatch.setattr(kafka_admin, "AdminClient", FakeAdmin)
    FakeAdmin.current = None
    return FakeAdmin


def make_hook(cache: bool, topics: dict[str, int], **min_isr: int) -> tuple[KafkaAdminHook, FakeAdmin]:
    hook = KafkaAdminHook(bootstrap_servers="127.0.0.1:1", request_timeout_s=1, cache_configs=cache)
    admin = hook.get_conn()
    assert isinstance(admin, FakeAdmin), "the hook builds its client with hooks.kafka_admin.AdminClient"
    admin.topics = dict(topics)
    admin.min_isr = {k.replace("_", "-"): v for k, v in min_isr.items()}
    return hook, admin


def names(n: int, prefix: str = "t") -> dict[str, int]:
    return {f"{prefix}{i:04d}": 2 for i in range(n)}


def poll_cost(hook: KafkaAdminHook, **kwargs: Any) -> tuple[Any, dict[str, int]]:
    """(cluster state, requests this call sent by API name)."""
    before = dict(hook.requests)
    state = hook.cluster_state(**kwargs)
    return state, {k: v - before.get(k, 0) for k, v in hook.requests.items() if v - before.get(k, 0)}


# --- cached ----------------------------------------------------------------------------------------


def test_first_poll_reads_every_topic_then_none(fake: type[FakeAdmin]) -> None:
    hook, admin = make_hook(True, names(450), t0007=3)
    state, cost = poll_cost(hook)
    assert admin.described_topics() == sorted(names(450)), "every topic read once"
    assert [len(c) for c in admin.topic_calls] == [200, 200, 50], "batches of 200"
    assert admin.broker_calls == ["1"], "the controller's defaults"
    assert cost == {"Metadata": 1, "DescribeCluster": 1, "DescribeConfigs": 1 + 3}
    assert state.default_min_insync == 2 and dict(state.topic_min_insync) == {"t0007": 3}

    for _ in range(3):
        again, cost = poll_cost(hook)
        assert cost == {"Metadata": 1, "DescribeCluster": 1}, "cached polls send no DescribeConfigs"
        assert again == state
    assert len(admin.topic_calls) == 3 and admin.broker_calls == ["1"]
    assert hook.requests == {"Metadata": 4, "DescribeCluster": 4, "DescribeConfigs": 4}


def test_override_is_kept_on_cached_polls(fake: type[FakeAdmin]) -> None:
    hook, admin = make_hook(True, {"orders": 3, "audit": 1, "logs": 2}, audit=3)
    for _ in range(3):
        state = hook.cluster_state()
        assert dict(state.topic_min_insync) == {"audit": 3}
        assert state.default_min_insync == 2 and state.leader_imbalance_percentage == 10
    assert admin.described_topics() == ["audit", "logs", "orders"], "read on the first poll only"


def test_a_new_topic_is_read_alone_on_the_poll_that_first_sees_it(fake: type[FakeAdmin]) -> None:
    hook, admin = make_hook(True, names(3))
    hook.cluster_state()
    calls = len(admin.topic_calls)
    admin.topics["fresh"] = 4
    admin.min_isr["fresh"] = 3
    state, cost = poll_cost(hook)
    assert admin.topic_calls[calls:] == [["fresh"]], "only the new topic"
    assert cost == {"Metadata": 1, "DescribeCluster": 1, "DescribeConfigs": 1}
    assert dict(state.topic_min_insync) == {"fresh": 3}
    assert len(state.partitions) == 3 * 2 + 4
    _, cost = poll_cost(hook)
    assert cost == {"Metadata": 1, "DescribeCluster": 1}, "and not again"


def test_a_vanished_topic_leaves_the_cache(fake: type[FakeAdmin]) -> None:
    hook, admin = make_hook(True, {"a": 1, "b": 1, "c": 1}, b=3)
    hook.cluster_state()
    assert sorted(hook._topic_min_insync) == ["a", "b", "c"]
    del admin.topics["b"]
    state, cost = poll_cost(hook)
    assert sorted(hook._topic_min_insync) == ["a", "c"]
    assert cost == {"Metadata": 1, "DescribeCluster": 1} and dict(state.topic_min_insync) == {}
    # created again (another override): a poll saw it gone, so it is read afresh
    admin.topics["b"] = 1
    admin.min_isr["b"] = 2
    calls = len(admin.topic_calls)
    state = hook.cluster_state()
    assert admin.topic_calls[calls:] == [["b"]]
    assert dict(state.topic_min_insync) == {"b": 2}, "a topic override equal to the default still counts"


def test_a_topic_deleted_between_metadata_and_describe_is_skipped_not_cached(fake: type[FakeAdmin]) -> None:
    hook, admin = make_hook(True, {"a": 1, "b": 1})
    admin.vanish_on_describe = {"b"}
    state = hook.cluster_state()
    assert {p.topic for p in state.partitions} == {"a", "b"} and sorted(hook._topic_min_insync) == ["a"]
    admin.vanish_on_describe = set()
    calls = len(admin.topic_calls)
    hook.cluster_state()
    assert admin.topic_calls[calls:] == [["b"]], "still in the Metadata: asked again"


def test_a_failed_poll_keeps_the_batches_it_read(fake: type[FakeAdmin]) -> None:
    hook, admin = make_hook(True, names(450))
    admin.fail_topic_calls = {1, 2}  # the second batch, and again when asked of another broker
    with pytest.raises(KafkaException, match="Timed out"):
        hook.cluster_state()
    assert admin.topic_via[1:3] == [1, 0], "the broker that answered the first batch, then another"
    assert len(hook._topic_min_insync) == 200
    calls = len(admin.topic_calls)
    hook.cluster_state()
    assert admin.described_topics(calls) == sorted(names(450))[200:], "only what the failed poll lacked"


def test_partial_polls_read_only_their_topics_and_keep_the_others(fake: type[FakeAdmin]) -> None:
    hook, admin = make_hook(True, {"a": 1, "b": 1, "c": 1}, c=3)
    state = hook.cluster_state(topics=["a"])
    assert admin.topic_calls == [["a"]] and dict(state.topic_min_insync) == {}
    state = hook.cluster_state()
    assert admin.topic_calls == [["a"], ["b", "c"]] and dict(state.topic_min_insync) == {"c": 3}
    state = hook.cluster_state(topics=["a"])
    assert len(admin.topic_calls) == 2 and sorted(hook._topic_min_insync) == ["a", "b", "c"]
    assert dict(state.topic_min_insync) == {}, "overrides of the asked topics only"


def test_changes_during_the_hooks_life_are_seen_only_by_the_next_hook(fake: type[FakeAdmin]) -> None:
    hook, admin = make_hook(True, {"a": 1, "b": 1})
    hook.cluster_state()
    admin.min_isr["a"] = 3
    admin.broker_min_isr = 1
    state = hook.cluster_state()
    assert dict(state.topic_min_insync) == {} and state.default_min_insync == 2, "the cached values"


def test_the_cache_outlives_the_client(fake: type[FakeAdmin]) -> None:
    hook, admin = make_hook(True, {"a": 1}, a=3)
    hook.cluster_state()
    hook.close()
    fresh = hook.get_conn()
    assert fresh is not admin
    fresh.topics = dict(admin.topics)
    state = hook.cluster_state()
    assert fresh.topic_calls == [] and fresh.broker_calls == [] and dict(state.topic_min_insync) == {"a": 3}


def test_metadata_only_polls_send_two_requests_and_fill_no_cache(fake: type[FakeAdmin]) -> None:
    hook, admin = make_hook(True, names(10))
    state, cost = poll_cost(hook, configs=False)
    assert cost == {"Metadata": 1, "DescribeCluster": 1}
    assert admin.topic_calls == [] and hook._topic_min_insync == {} and hook._broker_defaults is None
    assert state.controller_id == 1 and [b.rack for b in state.brokers] == ["rack-0", "rack-1", "rack-2"]


# --- uncached (the default) ------------------------------------------------------------------------


def test_uncached_hook_reads_everything_every_time(fake: type[FakeAdmin]) -> None:
    hook, admin = make_hook(False, names(450), t0001=3)
    assert hook.cache_configs is False
    states = []
    for i in range(3):
        state, cost = poll_cost(hook)
        states.append(state)
        assert admin.described_topics(3 * i) == sorted(names(450))
        assert cost == {"Metadata": 1, "DescribeCluster": 1, "DescribeConfigs": 1 + math.ceil(450 / 200)}
    assert admin.broker_calls == ["1", "1", "1"]
    assert states[0] == states[1] == states[2] and dict(states[0].topic_min_insync) == {"t0001": 3}
    assert hook._topic_min_insync == {} and hook._broker_defaults is None, "nothing kept"
    admin.min_isr["t0002"] = 4
    assert dict(hook.cluster_state().topic_min_insync) == {"t0001": 3, "t0002": 4}, "changes seen at once"


def test_cached_and_uncached_snapshots_agree(fake: type[FakeAdmin]) -> None:
    topics = {"orders": 3, "audit": 1, "__consumer_offsets": 5}
    cached, a1 = make_hook(True, topics, audit=3, orders=2)
    plain, a2 = make_hook(False, topics, audit=3, orders=2)
    assert cached.cluster_state() == plain.cluster_state()
    assert cached.cluster_state() == plain.cluster_state()


# --- the prober ------------------------------------------------------------------------------------


def test_prober_reads_topic_configs_once_per_prober(fake: type[FakeAdmin]) -> None:
    with ClusterProber(ClusterProfile(cluster="c", bootstrap_servers="127.0.0.1:1"), request_timeout_s=1) as prober:
        assert prober.admin.cache_configs is True
        admin = prober.admin.get_conn()
        admin.topics = names(250)
        assert prober.look("gate", 1).ok
        assert len(admin.topic_calls) == 2
        for kind, broker in (("gate", 1), ("healthy", None), ("leadership", 2), ("gone", 1), ("caught_up", 0)):
            prober.look(kind, broker)
        assert len(admin.topic_calls) == 2 and admin.broker_calls == ["1"], "no config read after the first"
        assert prober.admin.requests == {"Metadata": 6, "DescribeCluster": 4, "DescribeConfigs": 3}, \
            "gone and caught_up send the Metadata alone"


def test_looks_after_a_stop_do_not_wait_for_a_controller(fake: type[FakeAdmin],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """librdkafka sends DescribeCluster to the controller and waits while none is known: right after the
    ZooKeeper-mode controller stopped, a ``gone`` look waited 15 s for it on the sandbox. The looks of the waits
    after a stop (gone, registered, caught up) need only brokers, leaders and ISRs: they read the Metadata alone,
    and a hook asked for that refuses to combine it with configs (their broker defaults are the controller's)."""
    def waits_for_a_controller(self: FakeAdmin, request_timeout: float) -> Future:
        raise AssertionError("DescribeCluster sent: it waits for a controller while the controller moves")

    with ClusterProber(ClusterProfile(cluster="c", bootstrap_servers="127.0.0.1:1"), request_timeout_s=1) as prober:
        prober.admin.get_conn().topics = names(3)
        monkeypatch.setattr(FakeAdmin, "describe_cluster", waits_for_a_controller)
        assert not prober.look("gone", 1).ok, "broker 1 is in the metadata"
        assert prober.look("registered", 1).ok and prober.look("caught_up", 1).ok
        state = prober.state(configs=False)
        assert prober.admin.requests == {"Metadata": 4}
        assert state.controller_id == 1, "Metadata's controller id"
        assert [b.rack for b in state.brokers] == [None, None, None], "racks unknown without DescribeCluster"
        with pytest.raises(ValueError, match="configs=True needs DescribeCluster"):
            prober.admin.cluster_state(configs=True, describe_cluster=False)


def test_request_counts_at_2000_topics_of_5_partitions(fake: type[FakeAdmin]) -> None:
    """The bench's target size (which the sandbox cannot host): 13 requests per config-reading poll before
    (Metadata, DescribeCluster, DescribeConfigs for the broker and 10 batches of 200 topics), 2 after."""
    topics = {f"t{i:04d}": 5 for i in range(2000)}
    plain, _ = make_hook(False, topics)
    cached, _ = make_hook(True, topics)
    for _ in range(3):
        assert poll_cost(plain)[1] == {"Metadata": 1, "DescribeCluster": 1, "DescribeConfigs": 11}
    assert poll_cost(cached)[1] == {"Metadata": 1, "DescribeCluster": 1, "DescribeConfigs": 11}
    for _ in range(3):
        assert poll_cost(cached)[1] == {"Metadata": 1, "DescribeCluster": 1}
    assert poll_cost(cached, configs=False)[1] == {"Metadata": 1, "DescribeCluster": 1}


# --- a broker that crashed a moment ago, still in the Metadata ---------------------------------------------------
# librdkafka sends DescribeCluster to the broker the last Metadata named the controller and waits for it; a KRaft
# broker names a random broker it believes alive (KIP-590), the crashed one included until the controller fences it.
# On the sandbox a gate's first look after a voter crashed took 45 s and failed. Topic DescribeConfigs go to a broker
# the hook chooses (any broker answers them).


def test_a_silent_controller_is_not_waited_out_when_the_metadata_names_another(fake: type[FakeAdmin]) -> None:
    hook, admin = make_hook(True, {"a": 1}, a=3)
    admin.silent, admin.controllers = {2}, [2, 0]
    state, cost = poll_cost(hook)
    assert admin.cluster_calls == 2, "DescribeCluster asked again after a fresh Metadata"
    assert cost == {"Metadata": 2, "DescribeCluster": 2, "DescribeConfigs": 2}
    assert state.controller_id == 0 and [b.rack for b in state.brokers] == ["rack-0", "rack-1", "rack-2"]
    assert admin.broker_calls == ["0"] and dict(state.topic_min_insync) == {"a": 3}


def test_a_controller_silent_twice_keeps_the_racks_read_and_reads_new_topic_configs_elsewhere(
        fake: type[FakeAdmin]) -> None:
    hook, admin = make_hook(True, {"a": 1}, a=3)
    first = hook.cluster_state()
    assert admin.topic_via == [1], "the topic configs through the broker whose defaults answered (the controller)"
    admin.silent, admin.controller = {1}, 1  # the controller of ZooKeeper mode crashed: the Metadata names it on
    state, cost = poll_cost(hook)
    assert cost == {"Metadata": 1 + kafka_admin.METADATA_PICKS, "DescribeCluster": 1}, \
        "the same broker named by every fresh Metadata: not asked again"
    assert state == first, "the racks of the last DescribeCluster, the cached configs"
    admin.topics["b"] = 1
    state = hook.cluster_state()
    assert dict(state.topic_min_insync) == {"a": 3}
    assert admin.topic_calls == [["a"], ["b"]] and admin.topic_via == [1, 0], \
        "a new topic's configs asked of a broker that answers, the silent controller not asked"


def test_an_uncached_look_reads_every_config_from_brokers_that_answer_while_the_controller_is_silent(
        fake: type[FakeAdmin]) -> None:
    hook, admin = make_hook(False, {"a": 1}, a=3)
    admin.silent = {1}
    state, cost = poll_cost(hook)
    assert cost == {"Metadata": 1 + kafka_admin.METADATA_PICKS, "DescribeCluster": 1, "DescribeConfigs": 2}
    assert admin.broker_calls == ["0"], "the broker defaults of a broker that answers, the silent one not asked"
    assert admin.topic_via == [0], "the topic configs through the broker that answered"
    assert hook._topic_config_readers() == [0, 2, 1], "the broker that left DescribeCluster unanswered last"
    assert state.default_min_insync == 2 and dict(state.topic_min_insync) == {"a": 3}
    assert [b.rack for b in state.brokers] == [None, None, None], "no racks read yet: unknown"


def test_the_broker_defaults_come_from_another_broker_when_the_controller_does_not_answer(
        fake: type[FakeAdmin]) -> None:
    """DescribeCluster answered, naming a broker that crashed a moment ago (its Metadata is a moment old): its
    DescribeConfigs answer never comes; after a second alone the next brokers are asked too and the first answer
    counts, instead of the whole request timeout (15 s on a gate) per broker."""
    import time

    hook, admin = make_hook(True, {"a": 1})
    hook.request_timeout_s = 30
    admin.never_answer = {1}
    began = time.monotonic()
    state, cost = poll_cost(hook)
    took = time.monotonic() - began
    assert admin.broker_calls == ["1", "0", "2"] and cost["DescribeConfigs"] == 3 + 1
    assert state.default_min_insync == 2
    assert kafka_admin.DEFAULTS_PREFERENCE_S <= took < 10, took
    admin.never_answer = set()
    fresh, _ = make_hook(False, {"a": 1})
    fresh.cluster_state()
    assert FakeAdmin.current.broker_calls == ["1"], "a controller that answers is the only broker asked"


# --- ElectLeaders: how long the hook waits for the answer ------------------------------------------------------------

class Unanswered(Future):
    """An ElectLeaders answer that never comes: ``result`` records the time it was given and times out at once."""

    waited: list[float | None] = []

    def result(self, timeout: float | None = None) -> Any:
        Unanswered.waited.append(timeout)
        raise TimeoutError


def test_an_election_waits_for_its_answer_at_most_its_timeout(fake) -> None:
    """``elect_preferred_leaders`` gives up on an answer that does not come after ``timeout_s``
    (:data:`~hooks.kafka_admin.ELECTION_ANSWER_S` by default, far below librdkafka's own 15 s: its callers poll the
    metadata and see an election that took effect anyway) and says what it waited for."""
    hook, _ = make_hook(False, {})
    FakeAdmin.elect_leaders = lambda self, election_type, partitions: Unanswered()
    Unanswered.waited = []
    try:
        with pytest.raises(TimeoutError, match=r"no ElectLeaders answer within 3 s for 1 partitions \(the election"):
            hook.elect_preferred_leaders([("t", 0)])
        with pytest.raises(TimeoutError, match="within 0.05 s for every partition"):
            hook.elect_preferred_leaders(None, timeout_s=0.05)
    finally:
        del FakeAdmin.elect_leaders
    assert Unanswered.waited == [kafka_admin.ELECTION_ANSWER_S, 0.05] and kafka_admin.ELECTION_ANSWER_S == 3.0
    assert hook.requests["ElectLeaders"] == 2


def test_elections_go_through_a_client_of_their_own_with_their_wait_as_its_request_timeout(fake) -> None:
    """A broker holds an ElectLeaders answer until its metadata shows the new leaders (at most the request's
    TimeoutMs, librdkafka's ``socket.timeout.ms``) and reads nothing more from that connection meanwhile: the
    elections' client is not the looks' (whose Metadata and DescribeCluster would wait behind it), and its
    ``socket.timeout.ms`` is the election's wait, so the broker holds one at most that long. librdkafka's own
    timeout (``_TIMED_OUT``) is "no answer" as ours is; other errors are raised as they are."""
    hook, looks = make_hook(False, {})
    sent: list[tuple[FakeAdmin, Any]] = []

    def elect(self, election_type, partitions):
        sent.append((self, election_type))
        if len(sent) == 2:
            return _done(error=KafkaException(KafkaError(KafkaError._TIMED_OUT, "Timed out in queue")))
        if len(sent) == 3:
            return _done(error=KafkaException(KafkaError(KafkaError.CLUSTER_AUTHORIZATION_FAILED)))
        return _done({TopicPartition("t", 0): None})

    FakeAdmin.elect_leaders = elect
    try:
        assert hook.elect_preferred_leaders([("t", 0)]) == {"t-0": None}
        with pytest.raises(TimeoutError, match="no ElectLeaders answer within 3 s"):
            hook.elect_preferred_leaders([("t", 0)])
        with pytest.raises(KafkaException, match="CLUSTER_AUTHORIZATION_FAILED"):
            hook.elect_preferred_leaders([("t", 0)])
        hook.elect_preferred_leaders([("t", 0)], timeout_s=0.5)
    finally:
        del FakeAdmin.elect_leaders
    electors = [client for client, _ in sent]
    assert all(client is not looks for client in electors), "an election went through the looks' client"
    assert electors[0] is electors[1] is electors[2], "one elections' client per wait, kept"
    assert [c.conf["socket.timeout.ms"] for c in electors] == [3000, 3000, 3000, 500]
    assert looks.conf["socket.timeout.ms"] == 1000, "the looks' client keeps the hook's request timeout"
    assert [kind for _, kind in sent] == [ElectionType.PREFERRED] * 4
    hook.close()
    assert hook._electors == {}


def test_unanswered_topic_configs_are_asked_once_more_of_another_broker(fake: type[FakeAdmin]) -> None:
    """Topic DescribeConfigs go to the broker whose DescribeConfigs answered last (any broker answers them; the
    request holds that broker's BROKER resource, so librdkafka sends it there rather than to the broker the
    Metadata names the controller, which a KRaft broker picks at random, KIP-590). Unanswered within
    ``CONTROLLER_ANSWER_S``, they are asked once of another broker of the Metadata, with the full request timeout;
    the broker that was silent is asked last by the look's later batches. No Metadata is read for it."""
    hook, admin = make_hook(True, {"a": 1, "b": 1}, b=3)
    admin.fail_topic_calls = {0}
    state = hook.cluster_state()
    assert dict(state.topic_min_insync) == {"b": 3} and admin.topic_via == [1, 0]
    assert hook.requests["Metadata"] == 1
    assert hook._topic_config_readers() == [0, 1, 2], "the broker that answered last first; then the rest by id"

    hook, admin = make_hook(True, {"a": 1})
    hook.request_timeout_s = 30
    hook.cluster_state()
    admin.silent, admin.controller = {1}, 0  # broker 1, which answered, crashed; the Metadata names 0 now
    admin.topics["b"] = 1
    assert dict(hook.cluster_state().topic_min_insync) == {}
    admin.topics["c"] = 1
    hook.cluster_state()
    assert admin.topic_via == [1, 1, 0, 0], "b asked of broker 1, then of 0; c of 0 at once"
    assert admin.topic_timeouts == [kafka_admin.CONTROLLER_ANSWER_S, kafka_admin.CONTROLLER_ANSWER_S, 30,
                                    kafka_admin.CONTROLLER_ANSWER_S]
