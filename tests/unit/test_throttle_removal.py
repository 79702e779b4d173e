"""Removing a wave's throttles when a broker does not answer: ``KafkaAdminHook.delete_throttle_configs`` tells a
request nobody answered (a broker down or restarting: transient) from a refusal (fatal), and the wave's finish
waits for the broker to answer instead of failing the wave whose data is already copied.

``hooks.kafka_admin.AdminClient`` is replaced by :class:`SilentBrokers`: IncrementalAlterConfigs of a broker in
``silent`` times out (librdkafka's ``_TIMED_OUT``) as long as that broker is down, of one in ``refusing`` fails with
``INVALID_CONFIG``; every other resource succeeds.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowFailException
from confluent_kafka import KafkaError, KafkaException
from hooks import kafka_admin
from hooks.kafka_admin import KafkaAdminHook
from kafka_ops.plan_files import Move
from runtime.failures import is_transient


class SilentBrokers:
    """confluent-kafka's AdminClient, for IncrementalAlterConfigs only."""

    silent: dict[str, int] = {}  # broker id -> how many more calls it does not answer
    refusing: set[str] = set()
    deleted: set[str] = set()  # topics that no longer exist
    calls: list[str] = []

    def __init__(self, config: dict[str, Any], **kwargs: Any) -> None:
        pass

    def poll(self, timeout: float = 0) -> int:
        return 0

    def incremental_alter_configs(self, resources: list[Any], request_timeout: float) -> dict[Any, Future]:
        out = {}
        for res in resources:
            SilentBrokers.calls.append(f"{res.restype.name.lower()} {res.name}")
            future: Future = Future()
            if res.name in SilentBrokers.silent and SilentBrokers.silent[res.name] > 0:
                SilentBrokers.silent[res.name] -= 1
                future.set_exception(KafkaException(KafkaError(
                    KafkaError._TIMED_OUT, "Failed while waiting for response from broker: Local: Timed out")))
            elif res.name in SilentBrokers.deleted:
                future.set_exception(KafkaException(KafkaError(
                    KafkaError.UNKNOWN_TOPIC_OR_PART, f"The topic '{res.name}' does not exist.")))
            elif res.name in SilentBrokers.refusing:
                future.set_exception(KafkaException(KafkaError(KafkaError.INVALID_CONFIG, "no such config")))
            else:
                future.set_result(None)
            out[res] = future
        return out


@pytest.fixture
def hook(monkeypatch: pytest.MonkeyPatch) -> KafkaAdminHook:
    monkeypatch.setattr(kafka_admin, "AdminClient", SilentBrokers)
    SilentBrokers.silent, SilentBrokers.refusing, SilentBrokers.calls, SilentBrokers.deleted = {}, set(), [], set()
    return KafkaAdminHook(bootstrap_servers="127.0.0.1:1", request_timeout_s=1)


def test_a_broker_that_does_not_answer_is_a_transient_failure_naming_it(hook: KafkaAdminHook) -> None:
    SilentBrokers.silent = {"0": 1}
    with pytest.raises(KafkaException) as raised:
        hook.delete_throttle_configs([0, 1], ["orders"])
    assert is_transient(raised.value)
    assert "broker 0" in str(raised.value) and "broker 1" not in str(raised.value)
    assert SilentBrokers.calls == ["broker 0", "broker 1", "topic orders"], "every resource was tried"
    hook.delete_throttle_configs([0, 1], ["orders"])  # broker 0 back: the same call succeeds


def test_a_refusal_is_not_transient_even_beside_a_broker_that_does_not_answer(hook: KafkaAdminHook) -> None:
    SilentBrokers.silent, SilentBrokers.refusing = {"0": 5}, {"1"}
    with pytest.raises(RuntimeError, match=r"refused for 2 resources: broker 0: .*Timed out.*; broker 1: .*no such"):
        hook.delete_throttle_configs([0, 1], [])


def test_a_topic_deleted_since_the_plan_has_no_throttle_to_remove_or_set(hook: KafkaAdminHook) -> None:
    """Kafka deletes a topic's configs with it: its UNKNOWN_TOPIC_OR_PARTITION is no error, the topic is returned;
    every other resource is still sent."""
    SilentBrokers.deleted = {"gone"}
    assert hook.delete_throttle_configs([0], ["gone", "orders"]) == ["gone"]
    assert SilentBrokers.calls == ["broker 0", "topic gone", "topic orders"]
    assert hook.alter_throttle_configs({0: {"leader.replication.throttled.rate": "1"}},
                                       {"gone": {"leader.replication.throttled.replicas": "0:0"},
                                        "orders": {"leader.replication.throttled.replicas": "0:0"}}) == ["gone"]
    assert hook.delete_throttle_configs([0], ["orders"]) == []


def test_an_unknown_broker_is_still_an_error_beside_a_deleted_topic(hook: KafkaAdminHook) -> None:
    SilentBrokers.deleted, SilentBrokers.refusing = {"gone"}, {"1"}
    with pytest.raises(RuntimeError, match=r"refused for 1 resources: broker 1: .*no such"):
        hook.delete_throttle_configs([1], ["gone"])


class WaveAdmin:
    """The admin hook as ``_finish`` uses it: ``delete_throttle_configs`` of the real hook (over
    :class:`SilentBrokers`) and a Metadata that shows every move at its target."""

    def __init__(self, hook: KafkaAdminHook, moves: list[Any]) -> None:
        self.hook, self.moves = hook, moves

    def delete_throttle_configs(self, brokers: list[int], topics: list[str]) -> list[str]:
        return self.hook.delete_throttle_configs(brokers, topics)

    def cluster_state(self, configs: bool = True) -> Any:
        return SimpleNamespace(partitions=[SimpleNamespace(topic=m.topic, partition=m.partition, replicas=m.replicas)
                                           for m in self.moves])


def finish(hook: KafkaAdminHook, monkeypatch: pytest.MonkeyPatch, wait_s: float = 30.0) -> dict:
    from operators import reassignment_wave
    from operators.reassignment_wave import ReassignmentWaveOperator

    monkeypatch.setattr(reassignment_wave, "THROTTLE_REMOVAL_WAIT_S", wait_s)
    monkeypatch.setattr(reassignment_wave.time, "sleep", lambda s: None)  # the waits' pauses
    moves = [Move("orders", 0, replicas=(0, 1, 2), current=(0, 1, 3)), Move("gone", 0, replicas=(2,), current=(3,))]
    shown = [m for m in moves if m.topic not in SilentBrokers.deleted]  # a deleted topic is not in the metadata
    operator = SimpleNamespace(log=logging.getLogger("test"))
    return ReassignmentWaveOperator._finish(operator, WaveAdmin(hook, shown), SimpleNamespace(moves=tuple(moves)),
                                            "wave 1/1", {2: {}}, {"orders": {}, "gone": {}}, {"wave": 1})


def test_the_wave_finish_waits_for_a_broker_back_then_goes_on(hook: KafkaAdminHook, monkeypatch) -> None:
    """``ReassignmentWaveOperator._finish``: polls through the unanswered tries and passes once the broker answers
    (the wave succeeds); a refusal fails the wave at once, naming it."""
    SilentBrokers.silent, SilentBrokers.deleted = {"2": 3}, {"gone"}
    assert finish(hook, monkeypatch) == {"wave": 1, "not_moved": ["gone-0"]}, "the deleted topic's move is named"
    assert SilentBrokers.calls.count("broker 2") == 4, SilentBrokers.calls
    SilentBrokers.calls, SilentBrokers.refusing = [], {"2"}
    with pytest.raises(AirflowFailException, match=r"wave 1/1: copied, but its throttles were not removed: .*"
                                                   r"no such config.*waiting cannot fix this"):
        finish(hook, monkeypatch)
    assert SilentBrokers.calls.count("broker 2") == 1


def test_a_broker_down_for_good_fails_the_wave_after_the_wait(hook: KafkaAdminHook, monkeypatch) -> None:
    SilentBrokers.silent = {"2": 10**6}
    with pytest.raises(AirflowFailException, match=r"not removed: .*broker 2.*remove_throttles tries again"):
        finish(hook, monkeypatch, wait_s=0.05)


class ReachableBrokers:
    """``KafkaAdminHook`` as ``RemoveThrottlesOperator`` uses it: brokers ``live`` in the metadata; records the
    throttle deletions it is asked for."""

    live: list[int] = []
    deleted: list[tuple[list[int], list[str]]] = []
    gone: list[str] = []  # topics that no longer exist

    def __init__(self, **kwargs: Any) -> None:
        pass

    def __enter__(self) -> ReachableBrokers:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def cluster_state(self, configs: bool = True) -> Any:
        return SimpleNamespace(broker_ids=list(ReachableBrokers.live))

    def delete_throttle_configs(self, brokers: list[int], topics: list[str]) -> list[str]:
        ReachableBrokers.deleted.append((list(brokers), list(topics)))
        return [t for t in topics if t in ReachableBrokers.gone]


def throttle_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The operator's warnings about throttles (not Airflow's own about running outside its task runner)."""
    return [r.getMessage() for r in caplog.records
            if r.name == "remove_throttles" and r.levelno == logging.WARNING and "throttle" in r.getMessage()]


def test_remove_throttles_names_the_brokers_it_could_not_reach(monkeypatch, tmp_path, caplog) -> None:
    """A broker down when ``remove_throttles`` runs keeps its throttle rates (its own dynamic config): the task
    removes what it can reach, reports only that as removed, names the others in ``brokers_down`` and logs the
    kafka-configs.sh command that clears them."""
    from operators import reassignment_wave
    from operators.reassignment_wave import RemoveThrottlesOperator

    moves = [SimpleNamespace(topic="orders", current=(0, 1), replicas=(1, 2)),
             SimpleNamespace(topic="payments", current=(3, 0), replicas=(0, 1))]
    monkeypatch.setattr(reassignment_wave, "load_plan", lambda *a, **k: SimpleNamespace(moves=moves))
    monkeypatch.setattr(reassignment_wave, "run_directory", lambda context: tmp_path)
    monkeypatch.setattr(reassignment_wave, "KafkaAdminHook", ReachableBrokers)
    monkeypatch.setattr(RemoveThrottlesOperator, "profile", property(lambda self: SimpleNamespace()))
    monkeypatch.setattr(RemoveThrottlesOperator, "log", property(lambda self: logging.getLogger("remove_throttles")))
    operator = RemoveThrottlesOperator(task_id="remove_throttles", settings={"cluster": "c", "dry_run": False})
    ReachableBrokers.live, ReachableBrokers.deleted, ReachableBrokers.gone = [0, 1, 3], [], []
    with caplog.at_level(logging.WARNING):
        result = operator.execute({"params": {}})
    assert result == {"brokers": [0, 1, 3], "topics": ["orders", "payments"], "topics_deleted": [],
                      "brokers_down": [2]}
    assert ReachableBrokers.deleted == [([0, 1, 3], ["orders", "payments"])]
    warned = throttle_warnings(caplog)
    assert len(warned) == 1 and "brokers [2] are not in the metadata" in warned[0], warned
    assert "kafka-configs.sh --entity-type brokers" in warned[0]

    ReachableBrokers.live, ReachableBrokers.deleted = [0, 1, 2, 3], []  # every broker back: nothing named
    caplog.clear()
    assert operator.execute({"params": {}})["brokers_down"] == []
    assert ReachableBrokers.deleted == [([0, 1, 2, 3], ["orders", "payments"])]
    assert throttle_warnings(caplog) == []

    ReachableBrokers.gone = ["payments"]  # deleted since the plan: its configs went with it
    caplog.clear()
    with caplog.at_level(logging.INFO):
        result = operator.execute({"params": {}})
    assert result["topics"] == ["orders"] and result["topics_deleted"] == ["payments"], result
    assert any("1 topics (topics ['payments'] deleted since the plan" in r.getMessage() for r in caplog.records)
