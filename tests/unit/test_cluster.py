"""ClusterState snapshot, its helpers and JSON round trip."""

import json

import pytest
from kafka_ops.cluster import (
    Broker,
    ClusterState,
    Partition,
)


def make_state(**kwargs):
    brokers = (Broker(2, "h2", 9092, "r2"), Broker(1, "h1", 9092, "r1"), Broker(3, "h3", 9092))
    partitions = (
        Partition("orders", 1, leader=2, replicas=[2, 3, 1], isr=[2, 3, 1]),
        Partition("orders", 0, leader=1, replicas=[1, 2, 3], isr=[1, 2]),
        Partition("billing", 0, leader=-1, replicas=[3, 1], isr=[3]),
    )
    defaults = dict(brokers=brokers, partitions=partitions, controller_id=2)
    defaults.update(kwargs)
    return ClusterState(**defaults)


def test_brokers_and_partitions_are_sorted_and_tupled():
    state = make_state()
    assert state.broker_ids == [1, 2, 3]
    assert [p.name for p in state.partitions] == ["billing-0", "orders-0", "orders-1"]
    assert state.partition("orders", 1).replicas == (2, 3, 1)
    assert isinstance(state.partition("orders", 0).isr, tuple)
    assert state.topics == ["billing", "orders"]


def test_partition_properties():
    p = Partition("orders", 3, leader=2, replicas=[1, 2, 3], isr=[2, 3])
    assert p.name == "orders-3"
    assert p.preferred_leader == 1
    assert not p.is_led_by_preferred
    assert p.is_under_replicated
    assert not p.is_offline
    offline = Partition("orders", 4, leader=-1, replicas=[1], isr=[])
    assert offline.is_offline and offline.is_under_replicated
    assert Partition("t", 0, leader=-1, replicas=[]).preferred_leader is None
    healthy = Partition("t", 0, leader=1, replicas=[1, 2], isr=[2, 1])
    assert healthy.is_led_by_preferred and not healthy.is_under_replicated


def test_helpers_on_broker():
    state = make_state()
    assert [p.name for p in state.partitions_on(3)] == ["billing-0", "orders-0", "orders-1"]
    assert [p.name for p in state.partitions_on(2)] == ["orders-0", "orders-1"]
    assert [p.name for p in state.partitions_led_by(1)] == ["orders-0"]
    assert state.partitions_led_by(3) == []
    assert [p.name for p in state.partitions_preferring(3)] == ["billing-0"]
    assert [p.name for p in state.offline_partitions()] == ["billing-0"]
    assert [p.name for p in state.under_replicated_partitions()] == ["billing-0", "orders-0"]


def test_broker_lookup():
    state = make_state()
    assert state.broker(1) == Broker(1, "h1", 9092, "r1")
    assert state.has_broker(3) and not state.has_broker(9)
    with pytest.raises(KeyError, match="broker 9 is not registered"):
        state.broker(9)
    with pytest.raises(KeyError, match="orders-7"):
        state.partition("orders", 7)


def test_min_insync_override_and_default():
    state = make_state(topic_min_insync={"orders": 2}, default_min_insync=1)
    assert state.min_insync_replicas("orders") == 2
    assert state.min_insync_replicas("billing") == 1
    assert make_state().min_insync_replicas("orders") == 1  # Kafka's default


def test_defaults_are_kafkas():
    state = ClusterState(brokers=(), partitions=())
    assert state.controller_id == -1
    assert state.default_min_insync == 1
    assert state.leader_imbalance_percentage == 10


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(brokers=(Broker(1, "a", 1), Broker(1, "b", 1))), "duplicate broker ids in cluster state: \\[1\\]"),
        (
            dict(partitions=(Partition("t", 0, 1, [1]), Partition("t", 0, 2, [2]))),
            "duplicate partition in cluster state: t-0",
        ),
        (dict(default_min_insync=0), "min.insync.replicas must be >= 1"),
        (dict(topic_min_insync={"orders": 0}), "orders: min.insync.replicas must be >= 1"),
        (dict(leader_imbalance_percentage=-1), "leader.imbalance.per.broker.percentage"),
        (dict(controller_id="2"), "controller id must be an integer"),
    ],
)
def test_invalid_state_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_state(**kwargs)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(partition=-1), "partition must be >= 0"),
        (dict(replicas=[1, "2"]), "t-0 replicas must be an integer"),
        (dict(isr="12"), "t-0 isr must be a list of broker ids"),
        (dict(leader=True), "t-0 leader must be an integer"),
    ],
)
def test_invalid_partition_rejected(kwargs, message):
    args = dict(topic="t", partition=0, leader=1, replicas=[1], isr=[1])
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        Partition(**args)


def test_invalid_broker_rejected():
    with pytest.raises(ValueError, match="broker id must be >= 0"):
        Broker(-1, "h", 9092)


def test_json_round_trip():
    state = make_state(topic_min_insync={"orders": 2}, default_min_insync=2, leader_imbalance_percentage=20)
    data = json.loads(json.dumps(state.to_dict()))
    assert data["brokers"][0] == {"id": 1, "host": "h1", "port": 9092, "rack": "r1"}
    assert data["partitions"][1] == {
        "topic": "orders", "partition": 0, "leader": 1, "replicas": [1, 2, 3], "isr": [1, 2]
    }
    again = ClusterState.from_dict(data)
    assert again == state
    assert again.min_insync_replicas("orders") == 2
    assert again.leader_imbalance_percentage == 20


def test_from_dict_uses_kafka_defaults_for_missing_optional_keys():
    state = ClusterState.from_dict(
        {"brokers": [{"id": 1, "host": "h", "port": 9092}], "partitions": [
            {"topic": "t", "partition": 0, "leader": 1, "replicas": [1]}]}
    )
    assert state.controller_id == -1
    assert state.default_min_insync == 1
    assert state.leader_imbalance_percentage == 10
    assert state.partition("t", 0).isr == ()
    assert state.broker(1).rack is None


def test_overrides_are_read_only():
    state = make_state(topic_min_insync={"orders": 2})
    with pytest.raises(TypeError):
        state.topic_min_insync["orders"] = 3


def test_down_broker_ids_are_replica_holders_that_are_not_registered():
    from kafka_ops.cluster import Broker, ClusterState, Partition

    state = ClusterState(brokers=(Broker(0, "h0", 9092),),
                         partitions=(Partition("t", 0, leader=0, replicas=(0, 2), isr=(0,)),
                                     Partition("t", 1, leader=-1, replicas=(1,), isr=())))
    assert state.down_broker_ids == [1, 2]
