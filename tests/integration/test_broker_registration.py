"""Behaviours 1 and 2 of issue 2 on the shared sandbox (read only): brokers registered in ZooKeeper with
Kafka's JSON, Metadata listing exactly the live brokers, one controller that every observer agrees on.
What changes when a broker or the controller stops is in test_broker_lifecycle.py."""

from __future__ import annotations

import json
import time

import pytest
from broker_support import kadmin
from observers import admin, registration, snapshot

from sandbox.testing import RunningSandbox

pytestmark = pytest.mark.sandbox

REGISTRATION_KEYS = {"features", "listener_security_protocol_map", "endpoints", "jmx_port", "port", "host",
                     "version", "timestamp", "rack"}


def test_live_brokers_registered_with_kafka_json(sandbox: RunningSandbox) -> None:
    active = sandbox.broker_ids[: sandbox.active_count]
    spares = sandbox.broker_ids[sandbox.active_count:]
    now_ms = time.time() * 1000
    with sandbox.zk() as zk:
        assert sorted(int(b) for b in zk.get_children("/brokers/ids")) == active
        for broker in active:
            data, stat = zk.get(f"/brokers/ids/{broker}")
            assert stat.ephemeralOwner != 0, f"/brokers/ids/{broker} must be ephemeral (the broker's session)"
            entry = json.loads(data)
            env = sandbox.broker(broker)
            assert set(entry) == REGISTRATION_KEYS, entry
            assert entry["host"] == env["host"] and entry["port"] == env["port"] == 9092
            assert entry["endpoints"] == [f"PLAINTEXT://{env['host']}:{env['port']}"]
            assert entry["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
            assert entry["rack"] == env["rack"] == f"rack-{broker % 3}"
            assert entry["version"] == 5 and entry["jmx_port"] == -1
            # Kafka writes the registration time as a string of epoch milliseconds
            assert isinstance(entry["timestamp"], str) and entry["timestamp"].isdigit()
            assert now_ms - 3_600_000 < int(entry["timestamp"]) <= now_ms + 1000
        for spare in spares:  # a prepared host whose broker is not started is not registered
            assert registration(zk, spare) is None


def test_metadata_lists_the_registered_brokers_only(sandbox: RunningSandbox) -> None:
    active = sandbox.broker_ids[: sandbox.active_count]
    view = snapshot(admin(sandbox.bootstrap_servers))
    assert sorted(view.brokers) == active  # the spare host (no broker process) is not listed
    md = admin(sandbox.bootstrap_servers).list_topics(timeout=10)
    with sandbox.zk() as zk:
        for broker in active:
            entry = registration(zk, broker)
            assert (md.brokers[broker].host, md.brokers[broker].port) == (entry["host"], entry["port"])
    client = kadmin(sandbox)
    try:
        described = client.describe_cluster()
    finally:
        client.close()
    assert sorted(b["broker_id"] for b in described["brokers"]) == active
    assert {b["broker_id"]: b["rack"] for b in described["brokers"]} == {b: f"rack-{b % 3}" for b in active}
    # every replica of every partition sits on a registered broker, every partition is led
    assert all(set(p.replicas) <= set(active) and p.leader in active for p in view.partitions)


def test_one_controller_every_observer_agrees_on(sandbox: RunningSandbox) -> None:
    with sandbox.zk() as zk:
        data, stat = zk.get("/controller")
        controller = json.loads(data)
        epoch = int(zk.get("/controller_epoch")[0])
    assert stat.ephemeralOwner != 0
    assert set(controller) == {"version", "brokerid", "timestamp"} and controller["version"] == 1
    assert epoch >= 1
    broker = controller["brokerid"]
    assert broker in sandbox.broker_ids[: sandbox.active_count]
    confluent = admin(sandbox.bootstrap_servers)
    assert confluent.list_topics(timeout=10).controller_id == broker  # Metadata
    assert confluent.describe_cluster().result().controller.id == broker  # DescribeCluster (librdkafka)
    client = kadmin(sandbox)
    try:
        assert client.describe_cluster()["controller_id"] == broker  # DescribeCluster (kafka-python)
    finally:
        client.close()
