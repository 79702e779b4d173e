"""The KRaft-mode sandbox (``sandbox up --mode kraft``): 3 dedicated controllers (node ids 100-102) and 3
brokers, no ZooKeeper for Kafka. Observed from outside only: kafka-python (DescribeQuorum, features,
UpdateFeatures, reassignments), confluent-kafka (metadata, CreateTopics, an acks=all producer), ``kafka-service``
over SSH on the controller hosts with host key checking, ``sandbox crash-broker`` and Burrow's HTTP API.
Each test starts from and restores a healthy cluster with all three controllers running.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from broker_support import SLOT_KRAFT, QuickWatcher, module_sandbox
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, TopicPartition
from observers import admin, wait_for

from sandbox import settings
from sandbox.testing import RunningSandbox

pytestmark = [pytest.mark.sandbox, pytest.mark.destructive]

CONTROLLERS = [100, 101, 102]


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningSandbox]:
    with module_sandbox(request, tmp_path_factory, SLOT_KRAFT, brokers=3, racks=3, mode="kraft",
                        controllers=3) as running:
        yield running


def quorum(client: KafkaAdminClient) -> dict:
    """DescribeQuorum's partition entry (leader_id, leader_epoch, high_watermark, current_voters, observers)."""
    return client.describe_metadata_quorum()["topics"][0]["partitions"][0]


def led_quorum(client: KafkaAdminClient) -> dict | None:
    """The quorum when it has a leader (None while an election runs or no controller answers)."""
    try:
        found = quorum(client)
    except Exception:  # noqa: BLE001 - a broker or the leader may be moving
        return None
    return found if found["leader_id"] in CONTROLLERS else None


def controller_service(cluster: RunningSandbox, node: int, action: str) -> str:
    code, out, err = cluster.ssh(node, f"kafka-service {action}")
    assert code == 0, f"kafka-service {action} on controller {node}: {out} {err}"
    return out


@pytest.fixture
def healthy(cluster: RunningSandbox) -> Iterator[RunningSandbox]:
    """Every controller running and caught up, every broker registered, URP 0; restored after the test."""
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)

    def all_caught_up() -> bool:
        q = led_quorum(client)
        return bool(q) and all(v["log_end_offset"] >= q["high_watermark"] - 5 for v in q["current_voters"])

    wait_for(all_caught_up, 20, what="every voter caught up")
    cluster.wait_healthy(timeout_s=30)
    yield cluster
    for node in CONTROLLERS:
        controller_service(cluster, node, "start")
    for broker in (0, 1, 2):
        cluster.ssh(broker, "kafka-service start")
    wait_for(all_caught_up, 30, what="every voter caught up again")
    cluster.wait_healthy(timeout_s=60)
    client.close()


def test_the_cluster_describes_its_quorum_and_features_to_real_clients(healthy: RunningSandbox) -> None:
    client = KafkaAdminClient(bootstrap_servers=healthy.bootstrap_servers)
    described = client.describe_metadata_quorum()
    q = described["topics"][0]["partitions"][0]
    assert described["topics"][0]["topic_name"] == "__cluster_metadata"
    assert q["leader_id"] in CONTROLLERS and q["leader_epoch"] >= 1 and q["high_watermark"] > 0
    assert sorted(v["replica_id"] for v in q["current_voters"]) == CONTROLLERS
    assert sorted(o["replica_id"] for o in q["observers"]) == [0, 1, 2]  # the brokers replicate the log
    for voter in q["current_voters"]:
        assert voter["last_fetch_timestamp"] > 0 and voter["last_caught_up_timestamp"] > 0
    # v2 (KIP-853): the voters' endpoints, each controller on a host of its own
    hosts = {n["node_id"]: n["listeners"][0]["host"] for n in described["nodes"]}
    assert hosts == {c["id"]: c["host"] for c in healthy.env["controllers"]}

    features = client.describe_features()["metadata.version"]
    assert features["supported"] == (7, 25)  # Kafka 4.0: 3.3-IV3 .. 4.0-IV3
    assert features["finalized"] == (25, 25)

    # clients never see controllers: Metadata and DescribeCluster name a broker as "controller"
    confluent = admin(healthy.bootstrap_servers)
    md = confluent.list_topics(timeout=10)
    assert sorted(md.brokers) == [0, 1, 2] and md.controller_id in (0, 1, 2)
    assert confluent.describe_cluster().result().controller.id in (0, 1, 2)

    # the profile Airflow gets has no ZooKeeper, and names the controller hosts
    assert "zookeeper_connect" not in healthy.env
    env_text = (healthy.workdir / "airflow.env").read_text()
    profile = json.loads(env_text.split("AIRFLOW_CONN_KAFKA_SANDBOX=", 1)[1].split("\n", 1)[0].strip("'"))["extra"]
    assert "zookeeper" not in profile
    assert profile["controller_hosts"] == {str(c["id"]): c["host"] for c in healthy.env["controllers"]}
    # Burrow rates the workload's groups from __consumer_offsets (its kafka module; no ZooKeeper offsets)
    for group in settings.WORKLOAD_GROUPS:
        assert healthy.group_status(group) == "OK"
    client.close()


def test_update_features_follows_kafkas_rules(healthy: RunningSandbox) -> None:
    client = KafkaAdminClient(bootstrap_servers=healthy.bootstrap_servers)
    too_new = client.update_features({"metadata.version": ("UPGRADE", 26)})["metadata.version"]
    assert "InvalidUpdateVersion" in too_new and "only supports versions 7-25" in too_new
    unsafe = client.update_features({"metadata.version": ("UNSAFE_DOWNGRADE", 24)})["metadata.version"]
    assert "Unsafe metadata.version downgrades are not supported" in unsafe
    no_flag = client.update_features({"metadata.version": ("UPGRADE", 24)})["metadata.version"]
    assert "downgrade" in no_flag
    lossy = client.update_features({"metadata.version": ("SAFE_DOWNGRADE", 22)})["metadata.version"]
    assert "might delete metadata" in lossy  # 4.0-IV1 (23) changed the format
    assert client.describe_features()["metadata.version"]["finalized"] == (25, 25)  # nothing applied

    assert client.update_features({"metadata.version": ("SAFE_DOWNGRADE", 24)})["metadata.version"] == "OK"
    wait_for(lambda: client.describe_features()["metadata.version"]["finalized"] == (24, 24), 10,
             what="metadata.version 24 on the answering broker")
    assert client.update_features({"metadata.version": ("UPGRADE", 25)})["metadata.version"] == "OK"
    # every broker serves the new level (each reads it from its copy of the metadata log)
    for broker in healthy.env["brokers"][:3]:
        one = KafkaAdminClient(bootstrap_servers=f"{broker['host']}:{broker['port']}")
        wait_for(lambda c=one: c.describe_features()["metadata.version"]["finalized"] == (25, 25), 10,
                 what=f"metadata.version 25 on broker {broker['id']}")
        one.close()
    client.close()


def test_stopping_the_active_controller_moves_leadership_and_it_rejoins(healthy: RunningSandbox) -> None:
    client = KafkaAdminClient(bootstrap_servers=healthy.bootstrap_servers)
    before = quorum(client)
    leader, epoch = before["leader_id"], before["leader_epoch"]
    with QuickWatcher(healthy.bootstrap_servers) as watcher:
        stopped_at = time.time()
        controller_service(healthy, leader, "stop")
        after = wait_for(lambda: (q := led_quorum(client)) and q["leader_id"] != leader and q, 10,
                         what="a new active controller")
        elected_s = time.time() - stopped_at
        assert after["leader_epoch"] > epoch
        gone = next(v for v in after["current_voters"] if v["replica_id"] == leader)
        assert gone["log_end_offset"] < after["high_watermark"] or gone["last_fetch_timestamp"] < stopped_at * 1000
        # metadata still changes while one voter is down: a new topic is created and led
        name = f"kraft-while-down-{int(time.time())}"
        confluent = admin(healthy.bootstrap_servers)  # kept referenced: a collected client cancels its futures
        confluent.create_topics([NewTopic(name, 3, 3)])[name].result(15)
        controller_service(healthy, leader, "start")
        back = wait_for(lambda: (q := led_quorum(client)) and all(
            v["log_end_offset"] >= q["high_watermark"] for v in q["current_voters"] if v["replica_id"] == leader) and q,
            15, what=f"controller {leader} caught up again")
    # the restarted voter follows the new leader without an election (pre-vote, KIP-996)
    assert back["leader_id"] == after["leader_id"] and back["leader_epoch"] == after["leader_epoch"]
    assert elected_s < 5.0, f"a new leader took {elected_s:.1f} s"
    assert not watcher.ever_offline(), watcher.ever_offline()[:2]
    assert all(sorted(v.brokers) == [0, 1, 2] for v in watcher.views), "a broker was fenced"
    client.close()


def test_the_quorum_loses_a_majority_and_recovers(healthy: RunningSandbox) -> None:
    client = KafkaAdminClient(bootstrap_servers=healthy.bootstrap_servers)
    leader = quorum(client)["leader_id"]
    followers = [c for c in CONTROLLERS if c != leader]
    confluent = admin(healthy.bootstrap_servers)
    controller_service(healthy, followers[0], "stop")
    # one of three down: the quorum still commits
    name = f"kraft-one-down-{int(time.time())}"
    confluent.create_topics([NewTopic(name, 1, 3)])[name].result(15)
    controller_service(healthy, followers[1], "stop")
    # two of three down: no majority; the leader resigns (check-quorum) and metadata cannot change
    wait_for(lambda: led_quorum(client) is None, 10, what="the quorum to lose its leader")
    stuck = f"kraft-no-quorum-{int(time.time())}"
    with pytest.raises(Exception):  # noqa: B017, PT011 - a timeout or NOT_CONTROLLER, whichever comes first
        confluent.create_topics([NewTopic(stuck, 1, 3)], request_timeout=5)[stuck].result(8)
    # brokers keep serving what they know meanwhile
    assert sorted(AdminClient({"bootstrap.servers": healthy.bootstrap_servers}).list_topics(timeout=10).brokers) \
        == [0, 1, 2]
    for node in followers:
        controller_service(healthy, node, "start")
    recovered = wait_for(lambda: led_quorum(client), 15, what="a leader again")
    assert recovered["leader_id"] in CONTROLLERS
    again = f"kraft-recovered-{int(time.time())}"
    confluent.create_topics([NewTopic(again, 1, 3)])[again].result(15)
    client.close()


def test_a_broker_that_stops_heartbeating_is_fenced_and_unfenced_on_restart(healthy: RunningSandbox) -> None:
    confluent = admin(healthy.bootstrap_servers)
    led_by_1 = [(t, p.id) for t, m in confluent.list_topics(timeout=10).topics.items()
                for p in m.partitions.values() if p.leader == 1]
    assert led_by_1
    with QuickWatcher(healthy.bootstrap_servers) as watcher:
        killed_at = time.time()
        result = healthy.cli("crash-broker", "1")
        assert result.returncode == 0 and "fences it after" in result.stderr, result.stderr
        wait_for(lambda: 1 not in confluent.list_topics(timeout=5).brokers, 15, what="broker 1 fenced")
        fenced_s = time.time() - killed_at
        md = confluent.list_topics(timeout=10)
        assert all(md.topics[t].partitions[p].leader not in (1, -1) for t, p in led_by_1)
        client = KafkaAdminClient(bootstrap_servers=healthy.bootstrap_servers)
        wait_for(lambda: 1 not in [o["replica_id"] for o in quorum(client)["observers"]
                                   if o["last_fetch_timestamp"] > (time.time() - 3) * 1000], 10,
                 what="broker 1 no longer fetching the metadata log")
        code, out, _ = healthy.ssh(1, "kafka-service start")
        assert code == 0, out
        wait_for(lambda: 1 in confluent.list_topics(timeout=5).brokers, 20, what="broker 1 unfenced")
    # fenced after broker.session.timeout.ms without heartbeats, not at once (a crash is no clean shutdown)
    assert settings.BROKER_SESSION_TIMEOUT_S - 1 <= fenced_s <= settings.BROKER_SESSION_TIMEOUT_S + 4, fenced_s
    assert not watcher.ever_offline(), watcher.ever_offline()[:2]  # RF 3 everywhere: others lead
    healthy.wait_healthy(timeout_s=60)
    client.close()


def test_admin_requests_reach_the_active_controller_through_any_broker(healthy: RunningSandbox) -> None:
    """Reassignment and preferred election requests sent to a broker are forwarded (KIP-590) and carried
    out by the active controller."""
    client = KafkaAdminClient(bootstrap_servers=healthy.bootstrap_servers)
    confluent = admin(healthy.bootstrap_servers)
    name = f"kraft-move-{int(time.time())}"
    confluent.create_topics([NewTopic(name, 1, 2)])[name].result(15)

    def partition():
        return confluent.list_topics(name, timeout=5).topics[name].partitions[0]

    wait_for(lambda: partition().leader >= 0, 10, what="the new topic led")
    first = partition()
    newcomer = next(b for b in (0, 1, 2) if b not in first.replicas)
    target = [newcomer, first.leader]  # the leader stays in the target set: only the election moves it
    client.alter_partition_reassignments({TopicPartition(name, 0): target})
    wait_for(lambda: partition().replicas == target and sorted(partition().isrs) == sorted(target), 30,
             what="the reassignment to finish")
    assert client.list_partition_reassignments() == {}
    assert partition().leader == first.leader
    client.elect_leaders(0, {name: [0]})
    wait_for(lambda: partition().leader == newcomer, 10, what=f"the preferred leader {newcomer} elected")
    client.close()


def test_down_stops_the_brokers_cleanly_before_the_controllers(fresh_sandbox) -> None:
    """``sandbox down`` on a KRaft sandbox: every broker first, each by its controlled shutdown (no SIGKILL: the
    active controller is still there to answer it), then the controllers."""
    from sandbox.cluster import down
    from sandbox.layout import Workdir

    sandbox = fresh_sandbox(mode="kraft", controllers=3)
    sandbox.wait_healthy(timeout_s=120)
    stopped = [name for name in down(Workdir.at(sandbox.workdir), say=lambda _: None) if name.startswith("broker-")]
    assert stopped == ["broker-0", "broker-1", "broker-2", "broker-100", "broker-101", "broker-102"], stopped
