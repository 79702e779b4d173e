"""Where the lock topic's replicas go (``hooks.kafka_lock.rack_spread``): one per rack before any rack gets a
second, only live brokers given; and ``KafkaLockStore.placement``, which leaves out a chosen broker that does not
answer (its admin hook's reads replaced: no servers)."""

from __future__ import annotations

import random

import pytest
from hooks.kafka_lock import KafkaLockStore, rack_spread
from kafka_ops.cluster import Broker, ClusterState
from kafka_ops.profile import ClusterProfile

SIX = {0: "rack-0", 1: "rack-1", 2: "rack-2", 3: "rack-0", 4: "rack-1", 5: "rack-2"}


@pytest.mark.parametrize("seed", range(20))
def test_three_replicas_over_three_racks_take_one_broker_of_each(seed: int) -> None:
    chosen = rack_spread(SIX, 3, random.Random(seed))
    assert len(set(chosen)) == 3 and sorted(SIX[b] for b in chosen) == ["rack-0", "rack-1", "rack-2"]


def test_fewer_racks_than_replicas_share_only_what_they_must_and_spread_over_brokers() -> None:
    two_racks = {0: "a", 1: "b", 2: "a", 3: "b", 4: "a"}
    for seed in range(20):
        chosen = rack_spread(two_racks, 3, random.Random(seed))
        assert len(set(chosen)) == 3 and {two_racks[b] for b in chosen} == {"a", "b"}
    seen = {b for seed in range(50) for b in rack_spread(SIX, 3, random.Random(seed))}
    assert seen == set(SIX), "not always the same brokers"


def test_without_racks_any_distinct_brokers_and_too_few_brokers_refused() -> None:
    assert sorted(rack_spread({0: None, 1: None, 2: None}, 3)) == [0, 1, 2]
    assert len(set(rack_spread({0: None, 1: None, 2: None, 3: None}, 2))) == 2
    with pytest.raises(ValueError, match="3 replicas need 3 brokers, 2 given"):
        rack_spread({0: "a", 1: "b"}, 3)


def store_over(racks: dict[int, str | None], silent: set[int], monkeypatch: pytest.MonkeyPatch,
               asked: list[list[int]]) -> KafkaLockStore:
    """A lock store whose hook sees ``racks`` live and whose ApiVersions go unanswered by ``silent``."""
    store = KafkaLockStore(ClusterProfile(cluster="c", bootstrap_servers="127.0.0.1:1"))
    state = ClusterState(brokers=tuple(Broker(b, f"h{b}", 9092, rack) for b, rack in racks.items()), partitions=())

    def unanswered(addresses: dict[int, str]) -> dict[int, str]:
        asked.append(sorted(addresses))
        return {b: "ECONNREFUSED" for b in addresses if b in silent}

    monkeypatch.setattr(store.hook, "cluster_state", lambda configs: state)
    monkeypatch.setattr(store.hook, "unanswered_brokers", unanswered)
    return store


@pytest.mark.parametrize("turn", range(10))  # the picks are random: some pick broker 1 first, some do not
def test_a_chosen_broker_that_does_not_answer_is_left_out_and_the_pick_made_again(
        turn: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A broker crashed a moment ago is still in the Metadata: the placement asks the chosen brokers, and picks
    again without the silent one (still one per rack: its rack has another broker)."""
    asked: list[list[int]] = []
    replicas = store_over(SIX, {1}, monkeypatch, asked).placement()
    assert 1 not in replicas and len(set(replicas)) == 3
    assert sorted(SIX[b] for b in replicas) == ["rack-0", "rack-1", "rack-2"]
    assert all(len(a) == 3 for a in asked) and len(asked) == (2 if 1 in asked[0] else 1), asked


def test_fewer_answering_brokers_lower_the_replication_factor_none_answering_gives_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    three = {0: "a", 1: "b", 2: "c"}
    assert sorted(store_over(three, {1}, monkeypatch, []).placement()) == [0, 2]
    assert len(store_over(three, {0, 1, 2}, monkeypatch, []).placement()) == 1, "CreateTopics is left to fail"


def test_the_break_hint_asks_for_the_client_settings_of_a_secured_cluster() -> None:
    """The command that removes a stuck lock by hand: on a cluster that authenticates, kafka-topics.sh needs the
    connection's security settings (``--command-config``); no secret is in the hint."""
    plain = KafkaLockStore(ClusterProfile.from_connection_fields("c", "b1:9092,b2:9092", {}))
    assert plain.break_hint == "kafka-topics.sh --bootstrap-server b1:9092 --delete --topic kafka-ops.operation-lock"
    secured = KafkaLockStore(ClusterProfile.from_connection_fields(
        "c", "b1:9094", {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, login="ops", password="pw"))
    assert secured.break_hint == (
        "kafka-topics.sh --bootstrap-server b1:9094 --command-config <a client.properties with the connection's "
        "security settings> --delete --topic kafka-ops.operation-lock")
    assert "pw" not in secured.break_hint
    plain.close()
    secured.close()
