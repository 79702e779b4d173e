"""Behaviours 8 and 10 (storage) of issue 2 on the shared sandbox: broker and topic configs through
DescribeConfigs (confluent-kafka and kafka-python), changes through IncrementalAlterConfigs and
AlterConfigs stored the way Kafka stores them in ZooKeeper. Every test reverts what it changes.
The throttle's effect on a reassignment is in test_broker_reassignment.py."""

from __future__ import annotations

import json
from collections.abc import Iterator

import javaproperties
import pytest
from broker_support import kadmin
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, ResourceType
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import ConfigResourceType
from observers import wait_for

from sandbox.testing import RunningSandbox

pytestmark = pytest.mark.sandbox

LONG_MAX = "9223372036854775807"  # Kafka's default for the replication throttle rates (no throttle)


@pytest.fixture
def kafka_python(sandbox: RunningSandbox) -> Iterator:
    client = kadmin(sandbox)
    yield client
    client.close()


def confluent_admin(sandbox: RunningSandbox):
    from observers import admin

    return admin(sandbox.bootstrap_servers)


def confluent_describe(sandbox: RunningSandbox, kind: ResourceType, name: str) -> dict[str, ConfigEntry]:
    client = confluent_admin(sandbox)  # held until the future resolves (a dropped client cancels it)
    (future,) = client.describe_configs([ConfigResource(kind, name)], request_timeout=10).values()
    return future.result()


def kafka_python_describe(client, kind: ConfigResourceType, name: str) -> dict[str, dict]:
    answer = client.describe_configs([KConfigResource(kind, name)], config_filter="ALL")
    key = "broker" if kind == ConfigResourceType.BROKER else "topic"
    return answer[key][name]


def incremental(sandbox: RunningSandbox, kind: ResourceType, name: str, ops: dict[str, str | None]) -> None:
    """IncrementalAlterConfigs through confluent-kafka: SET for values, DELETE for None."""
    entries = [
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET) if value is not None
        else ConfigEntry(key, None, incremental_operation=AlterConfigOpType.DELETE)
        for key, value in ops.items()
    ]
    client = confluent_admin(sandbox)
    futures = client.incremental_alter_configs([ConfigResource(kind, name, incremental_configs=entries)],
                                               request_timeout=10)
    for future in futures.values():
        future.result()


def broker_entry(sandbox: RunningSandbox, broker: int, key: str, value: str) -> ConfigEntry | None:
    """The broker's DescribeConfigs entry ``key`` once it has ``value`` (None before)."""
    entry = confluent_describe(sandbox, ResourceType.BROKER, str(broker))[key]
    return entry if entry.value == value else None


def server_properties(sandbox: RunningSandbox, broker: int) -> dict[str, str]:
    with open(sandbox.host_dir(broker).server_properties, encoding="utf-8") as handle:
        return dict(javaproperties.load(handle))


def zk_json(sandbox: RunningSandbox, path: str) -> dict | None:
    with sandbox.zk() as zk:
        if not zk.exists(path):
            return None
        return json.loads(zk.get(path)[0])


def config_changes(sandbox: RunningSandbox) -> dict[str, dict]:
    """``/config/changes/config_change_<seq>`` notifications: {node name: JSON}."""
    with sandbox.zk() as zk:
        return {name: json.loads(zk.get(f"/config/changes/{name}")[0]) for name in zk.get_children("/config/changes")}


def test_broker_min_insync_and_imbalance_from_server_properties(sandbox: RunningSandbox, kafka_python) -> None:
    for broker in sandbox.broker_ids[: sandbox.active_count]:
        props = server_properties(sandbox, broker)
        assert props["min.insync.replicas"] == "2"
        confluent = confluent_describe(sandbox, ResourceType.BROKER, str(broker))
        python = kafka_python_describe(kafka_python, ConfigResourceType.BROKER, str(broker))
        for key in ("min.insync.replicas", "leader.imbalance.per.broker.percentage"):
            assert confluent[key].value == props[key], key
            assert confluent[key].source == ConfigSource.STATIC_BROKER_CONFIG.value, key
            assert python[key]["value"] == props[key], key
            assert python[key]["config_source"] == "STATIC_BROKER_CONFIG", key
        assert python["leader.imbalance.per.broker.percentage"]["value"] == "10"


def test_topic_min_insync_override_and_revert(sandbox: RunningSandbox, kafka_python) -> None:
    topic = "audit"
    before = confluent_describe(sandbox, ResourceType.TOPIC, topic)["min.insync.replicas"]
    assert (before.value, before.source) == ("2", ConfigSource.STATIC_BROKER_CONFIG.value)  # the broker default
    try:
        # IncrementalAlterConfigs (confluent-kafka)
        incremental(sandbox, ResourceType.TOPIC, topic, {"min.insync.replicas": "1"})
        entry = confluent_describe(sandbox, ResourceType.TOPIC, topic)["min.insync.replicas"]
        assert (entry.value, entry.source) == ("1", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
        python = kafka_python_describe(kafka_python, ConfigResourceType.TOPIC, topic)["min.insync.replicas"]
        assert (python["value"], python["config_source"]) == ("1", "DYNAMIC_TOPIC_CONFIG")
        stored = zk_json(sandbox, f"/config/topics/{topic}")
        assert stored["version"] == 1 and stored["config"]["min.insync.replicas"] == "1", stored
        # AlterConfigs, the legacy request that replaces the topic's whole override set (kafka-python)
        result = kafka_python.alter_configs([KConfigResource(
            ConfigResourceType.TOPIC, topic, configs={"min.insync.replicas": "2", "retention.ms": "3600000"})],
            incremental=False)
        assert result == {"topic": {topic: "OK"}}, result
        python = kafka_python_describe(kafka_python, ConfigResourceType.TOPIC, topic)
        assert (python["min.insync.replicas"]["value"], python["min.insync.replicas"]["config_source"]) == (
            "2", "DYNAMIC_TOPIC_CONFIG")
        assert python["retention.ms"]["value"] == "3600000"
        assert confluent_describe(sandbox, ResourceType.TOPIC, topic)["min.insync.replicas"].source == (
            ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
        assert zk_json(sandbox, f"/config/topics/{topic}") == {
            "version": 1, "config": {"min.insync.replicas": "2", "retention.ms": "3600000"}}
    finally:
        incremental(sandbox, ResourceType.TOPIC, topic, {"min.insync.replicas": None, "retention.ms": None})
    after = confluent_describe(sandbox, ResourceType.TOPIC, topic)["min.insync.replicas"]
    assert (after.value, after.source) == ("2", ConfigSource.STATIC_BROKER_CONFIG.value)
    stored = zk_json(sandbox, f"/config/topics/{topic}")["config"]
    assert "min.insync.replicas" not in stored and "retention.ms" not in stored, stored


def test_dynamic_throttle_configs_stored_like_kafka(sandbox: RunningSandbox, kafka_python) -> None:
    topic = "payments"
    seen = set(config_changes(sandbox))
    try:
        incremental(sandbox, ResourceType.BROKER, "1", {"follower.replication.throttled.rate": "1048576"})
        result = kafka_python.alter_configs(
            [KConfigResource(ConfigResourceType.BROKER, "2", configs={"leader.replication.throttled.rate": "2097152"})],
            incremental=False)
        assert result == {"broker": {"2": "OK"}}, result
        incremental(sandbox, ResourceType.TOPIC, topic, {
            "leader.replication.throttled.replicas": "0:2,1:2",
            "follower.replication.throttled.replicas": "0:1",
        })
        assert zk_json(sandbox, "/config/brokers/1") == {
            "version": 1, "config": {"follower.replication.throttled.rate": "1048576"}}
        assert zk_json(sandbox, "/config/brokers/2") == {
            "version": 1, "config": {"leader.replication.throttled.rate": "2097152"}}
        assert zk_json(sandbox, f"/config/topics/{topic}") == {"version": 1, "config": {
            "leader.replication.throttled.replicas": "0:2,1:2", "follower.replication.throttled.replicas": "0:1"}}
        # each change is announced to the brokers with a sequential /config/changes/config_change_ node
        new = {name: data for name, data in config_changes(sandbox).items() if name not in seen}
        assert all(name.startswith("config_change_") and len(name) == len("config_change_") + 10 for name in new)
        assert sorted(d["entity_path"] for d in new.values()) == ["brokers/1", "brokers/2", f"topics/{topic}"]
        assert all(d["version"] == 2 for d in new.values())
        # the brokers serve the new values, reported as dynamic
        # a broker applies its dynamic configs when the /config/changes notification reaches it
        # (asynchronously, like Kafka's DynamicConfigManager): wait for that
        follower = wait_for(lambda: broker_entry(sandbox, 1, "follower.replication.throttled.rate", "1048576"),
                            10, what="broker 1 to apply its follower throttle")
        assert follower.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value and not follower.is_read_only

        def leader_rate() -> dict:
            configs = kafka_python_describe(kafka_python, ConfigResourceType.BROKER, "2")
            return configs["leader.replication.throttled.rate"]

        wait_for(lambda: leader_rate()["value"] == "2097152", 10, what="broker 2 to apply its leader throttle")
        assert leader_rate()["config_source"] == "DYNAMIC_BROKER_CONFIG"
        replicas = confluent_describe(sandbox, ResourceType.TOPIC, topic)["leader.replication.throttled.replicas"]
        assert (replicas.value, replicas.source) == ("0:2,1:2", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    finally:
        incremental(sandbox, ResourceType.BROKER, "1", {"follower.replication.throttled.rate": None})
        incremental(sandbox, ResourceType.BROKER, "2", {"leader.replication.throttled.rate": None})
        incremental(sandbox, ResourceType.TOPIC, topic, {
            "leader.replication.throttled.replicas": None, "follower.replication.throttled.replicas": None})
    assert zk_json(sandbox, "/config/brokers/1") == {"version": 1, "config": {}}
    assert zk_json(sandbox, "/config/brokers/2") == {"version": 1, "config": {}}
    assert zk_json(sandbox, f"/config/topics/{topic}") == {"version": 1, "config": {}}
    rate = wait_for(lambda: broker_entry(sandbox, 1, "follower.replication.throttled.rate", LONG_MAX), 10,
                    what="broker 1 to drop its follower throttle")
    assert rate.source == ConfigSource.DEFAULT_CONFIG.value
