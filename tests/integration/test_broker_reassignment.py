"""Behaviours 9 and 10 (the throttle's effect) of issue 2 on a sandbox of this module: partition
reassignment through kafka-python's AlterPartitionReassignments and through ZooKeeper's
``/admin/reassign_partitions``, progress in ListPartitionReassignments, Metadata and DescribeLogDirs,
cancel, rejection of unknown brokers, and replication throttles slowing the copy.

Reassigned partitions are ``clicks`` ones (24 MiB each: a copy takes seconds at the sandbox's
replication rate, so progress is observable). Each test leaves the cluster healthy, with no
reassignment in progress and no throttle set.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from broker_support import SLOT_REASSIGNMENT, kadmin, log_dir_sizes, module_sandbox
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from kafka import KafkaAdminClient, TopicPartition
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import ConfigResourceType
from observers import ClusterView, admin, snapshot, wait_for

from sandbox import settings
from sandbox.broker import zkpaths
from sandbox.testing import RunningSandbox

pytestmark = [pytest.mark.sandbox, pytest.mark.destructive]

TOPIC = "clicks"
INITIAL_BYTES = settings.WORKLOAD_TOPICS[TOPIC][2]
INVALID_REPLICATION_ASSIGNMENT = 39


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningSandbox]:
    with module_sandbox(request, tmp_path_factory, SLOT_REASSIGNMENT, brokers=3, racks=3) as running:
        yield running


@pytest.fixture
def sb(cluster: RunningSandbox) -> Iterator[RunningSandbox]:
    cluster.wait_healthy(timeout_s=30)
    yield cluster
    client = kadmin(cluster)
    try:
        wait_for(lambda: client.list_partition_reassignments() == {}, 30, what="no reassignment in progress")
    finally:
        client.close()
    cluster.wait_healthy(timeout_s=30)


@pytest.fixture
def kafka_python(cluster: RunningSandbox) -> Iterator[KafkaAdminClient]:
    client = kadmin(cluster)
    yield client
    client.close()


@dataclass
class Sample:
    at: float
    ongoing: dict | None  # ListPartitionReassignments entry of the partition (None: not listed)
    replicas: tuple[int, ...]  # Metadata
    isr: tuple[int, ...]
    new_size: int | None  # DescribeLogDirs of the new replica's broker (None: no replica there)
    leader_size: int


def movable(view: ClusterView, used: set[int] = frozenset()) -> tuple[int, list[int], int]:
    """A clicks partition led by its preferred replica and not yet used: (partition, replicas, the broker
    that does not host it)."""
    for p in sorted(view.partitions, key=lambda p: p.partition):
        if p.topic == TOPIC and p.partition not in used and p.leader == p.replicas[0] and len(p.isr) == 2:
            spare = next(b for b in sorted(view.brokers) if b not in p.replicas)
            return p.partition, list(p.replicas), spare
    raise AssertionError("no movable clicks partition")


def track(sb: RunningSandbox, client: KafkaAdminClient, partition: int, new: int, until, timeout_s: float
          ) -> list[Sample]:
    """Sample the partition's reassignment from outside every ~0.2 s until ``until(sample)`` is true."""
    confluent = admin(sb.bootstrap_servers)
    tp = TopicPartition(TOPIC, partition)
    samples: list[Sample] = []

    def sample() -> bool:
        ongoing = client.list_partition_reassignments([tp]).get(tp)
        p = snapshot(confluent).partition(TOPIC, partition)
        new_size = log_dir_sizes(client, new, {TOPIC: [partition]}).get((TOPIC, partition))
        on_leader = log_dir_sizes(client, p.leader, {TOPIC: [partition]}).get((TOPIC, partition))
        if on_leader is None:  # Metadata named the old leader, which already dropped its replica: ask again
            return False
        samples.append(Sample(time.monotonic(), ongoing, p.replicas, p.isr,
                              None if new_size is None else new_size["partition_size"], on_leader["partition_size"]))
        return until(samples[-1])

    wait_for(sample, timeout_s, interval_s=0.15, what=f"{TOPIC}-{partition}'s reassignment")
    return samples


def copy_rate(samples: list[Sample]) -> float:
    """Bytes/s the new replica grew while it was copying (between its first and last partial sizes)."""
    copying = [s for s in samples if s.new_size is not None and 0 < s.new_size < s.leader_size - 256 * 1024]
    assert len(copying) >= 2, f"too few samples of a partial copy: {samples}"
    first, last = copying[0], copying[-1]
    return (last.new_size - first.new_size) / (last.at - first.at)


def test_reassignment_through_alter_partition_reassignments(sb: RunningSandbox, kafka_python) -> None:
    view = snapshot(admin(sb.bootstrap_servers))
    partition, original, new = movable(view)
    old_leader, kept = original
    target = [new, kept]  # the current leader leaves: leadership has to move
    tp = TopicPartition(TOPIC, partition)
    began = time.monotonic()
    assert kafka_python.alter_partition_reassignments({tp: target}) == {tp: None}
    samples = track(sb, kafka_python, partition, new, lambda s: s.ongoing is None and s.replicas == tuple(target), 60)
    done = time.monotonic()
    during = [s for s in samples if s.ongoing is not None]
    assert during, "the reassignment never showed in ListPartitionReassignments"
    for s in during:  # KIP-455: replicas = target + old, adding = new ones, removing = old ones
        assert s.ongoing == {"replicas": [new, kept, old_leader], "adding_replicas": [new],
                             "removing_replicas": [old_leader]}, s
    assert any(s.replicas == (new, kept, old_leader) and new not in s.isr for s in during)  # Metadata shows the move
    rate = copy_rate(samples)
    print(f"\n{TOPIC}-{partition} {original} -> {target}: {INITIAL_BYTES / 2**20:.0f} MiB copied at "
          f"{rate / 2**20:.1f} MiB/s (replication rate {settings.REPLICATION_BYTES_PER_S / 2**20:.0f} MiB/s), "
          f"done in {done - began:.1f} s")
    assert rate >= 0.4 * settings.REPLICATION_BYTES_PER_S  # an unthrottled copy runs at the replication rate
    final = snapshot(admin(sb.bootstrap_servers)).partition(TOPIC, partition)
    assert final.replicas == tuple(target) and set(final.isr) == set(target)
    assert final.leader == new  # the old leader left: the first in-sync target replica leads
    # the new replica holds the whole log; the removed one is deleted from its broker
    sizes = log_dir_sizes(kafka_python, new, {TOPIC: [partition]})
    assert sizes[(TOPIC, partition)]["partition_size"] >= INITIAL_BYTES
    wait_for(lambda: (TOPIC, partition) not in log_dir_sizes(kafka_python, old_leader), 10,
             what=f"the old replica to be deleted from broker {old_leader}")


def test_reassignment_through_zookeeper(sb: RunningSandbox, kafka_python) -> None:
    view = snapshot(admin(sb.bootstrap_servers))
    partition, original, new = movable(view)
    leader, follower = original
    target = [leader, new]  # the leader stays; its follower is replaced
    document = {"version": 1, "partitions": [{"topic": TOPIC, "partition": partition, "replicas": target}]}
    topic_json: list[dict] = []
    with sb.zk() as zk:
        zk.create(zkpaths.REASSIGN, json.dumps(document).encode())  # what kafka-reassign-partitions.sh --zookeeper did

        def done(sample: Sample) -> bool:
            if sample.ongoing is None and sample.replicas == tuple(target):
                return True
            topic_json.append(json.loads(zk.get(zkpaths.topic_path(TOPIC))[0]))
            return False

        samples = track(sb, kafka_python, partition, new, done, 60)
        wait_for(lambda: not zk.exists(zkpaths.REASSIGN), 10, what="the controller to delete its request node")
        stored = json.loads(zk.get(zkpaths.topic_path(TOPIC))[0])
    during = [s for s in samples if s.ongoing is not None]
    assert during and all(s.ongoing == {"replicas": [leader, new, follower], "adding_replicas": [new],
                                        "removing_replicas": [follower]} for s in during), during
    # Kafka's topic znode carries the move while it runs (version 3 adding/removing_replicas) ...
    assert any(t["partitions"][str(partition)] == [leader, new, follower]
               and t["adding_replicas"].get(str(partition)) == [new]
               and t["removing_replicas"].get(str(partition)) == [follower] for t in topic_json)
    # ... and the target assignment afterwards
    assert stored["partitions"][str(partition)] == target
    assert str(partition) not in stored["adding_replicas"] and str(partition) not in stored["removing_replicas"]
    final = snapshot(admin(sb.bootstrap_servers)).partition(TOPIC, partition)
    assert final.replicas == tuple(target) and set(final.isr) == set(target) and final.leader == leader
    wait_for(lambda: (TOPIC, partition) not in log_dir_sizes(kafka_python, follower), 10,
             what=f"the old replica to be deleted from broker {follower}")


def test_unknown_broker_rejected(sb: RunningSandbox, kafka_python) -> None:
    view = snapshot(admin(sb.bootstrap_servers))
    partition, original, _ = movable(view)
    tp = TopicPartition(TOPIC, partition)
    result = kafka_python.alter_partition_reassignments({tp: [original[0], 99]})
    assert result[tp] is not None and result[tp].errno == INVALID_REPLICATION_ASSIGNMENT, result
    assert kafka_python.list_partition_reassignments() == {}
    # the ZooKeeper path: the controller rejects it too (logs it, deletes the request, changes nothing)
    with sb.zk() as zk:
        zk.create(zkpaths.REASSIGN, json.dumps({"version": 1, "partitions": [
            {"topic": TOPIC, "partition": partition, "replicas": [original[0], 99]}]}).encode())
        wait_for(lambda: not zk.exists(zkpaths.REASSIGN), 10, what="the controller to drop the invalid request")
    assert kafka_python.list_partition_reassignments() == {}
    assert snapshot(admin(sb.bootstrap_servers)).partition(TOPIC, partition).replicas == tuple(original)


def incremental(sb: RunningSandbox, kind: ResourceType, name: str, ops: dict[str, str | None]) -> None:
    client = admin(sb.bootstrap_servers)
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET if v is not None
                           else AlterConfigOpType.DELETE) for k, v in ops.items()]
    for future in client.incremental_alter_configs([ConfigResource(kind, name, incremental_configs=entries)],
                                                   request_timeout=10).values():
        future.result()


THROTTLE = 512 * 1024  # bytes/s: the leader's throttle; the follower's is twice that (the lower one applies)


def test_throttled_reassignment_copies_at_the_throttle_and_cancel_restores(sb: RunningSandbox, kafka_python) -> None:
    view = snapshot(admin(sb.bootstrap_servers))
    partition, original, new = movable(view)
    leader, kept = original
    target = [new, kept]
    tp = TopicPartition(TOPIC, partition)
    # what kafka-reassign-partitions.sh --throttle sets: rates on the brokers, throttled replica lists on the topic
    incremental(sb, ResourceType.BROKER, str(leader), {"leader.replication.throttled.rate": str(THROTTLE)})
    incremental(sb, ResourceType.BROKER, str(new), {"follower.replication.throttled.rate": str(2 * THROTTLE)})
    result = kafka_python.alter_configs([KConfigResource(ConfigResourceType.TOPIC, TOPIC, configs={
        "leader.replication.throttled.replicas": f"{partition}:{leader},{partition}:{kept}",
        "follower.replication.throttled.replicas": f"{partition}:{new}"})], incremental=False)
    assert result == {"topic": {TOPIC: "OK"}}
    try:
        with sb.zk() as zk:
            assert json.loads(zk.get(f"/config/brokers/{leader}")[0]) == {
                "version": 1, "config": {"leader.replication.throttled.rate": str(THROTTLE)}}
            assert json.loads(zk.get(f"/config/brokers/{new}")[0]) == {
                "version": 1, "config": {"follower.replication.throttled.rate": str(2 * THROTTLE)}}
            assert json.loads(zk.get(f"/config/topics/{TOPIC}")[0])["config"][
                "follower.replication.throttled.replicas"] == f"{partition}:{new}"
        assert kafka_python.alter_partition_reassignments({tp: target}) == {tp: None}
        began = time.monotonic()
        samples = track(sb, kafka_python, partition, new,
                        lambda s: s.new_size is not None and s.new_size >= 3 * THROTTLE, 30)
        rate = copy_rate(samples)
        print(f"\nthrottled copy of {TOPIC}-{partition} to broker {new}: {rate / 1024:.0f} KiB/s (leader throttle "
              f"{THROTTLE / 1024:.0f} KiB/s, follower throttle {2 * THROTTLE / 1024:.0f} KiB/s, unthrottled "
              f"{settings.REPLICATION_BYTES_PER_S / 1024:.0f} KiB/s) over {time.monotonic() - began:.1f} s")
        assert 0.6 * THROTTLE <= rate <= 1.4 * THROTTLE
        assert all(s.ongoing is not None and new not in s.isr for s in samples)  # far from done
        # cancel (replicas None): the original replica set comes back and the new copy is dropped. The order is
        # Kafka's: originReplicas = (target ++ original).distinct minus the adding replicas (ReplicaAssignment)
        assert kafka_python.alter_partition_reassignments({tp: None}) == {tp: None}
        wait_for(lambda: kafka_python.list_partition_reassignments() == {}, 10, what="the cancel")
        restored = [r for r in dict.fromkeys(target + original) if r != new]
        assert set(restored) == set(original)
        final = wait_for(lambda: (p := snapshot(admin(sb.bootstrap_servers)).partition(TOPIC, partition))
                         and p.replicas == tuple(restored) and p, 10, what="the original replicas")
        assert final.leader == leader and set(final.isr) == set(original)  # leadership never moved
        wait_for(lambda: (TOPIC, partition) not in log_dir_sizes(kafka_python, new), 10,
                 what=f"the cancelled copy to be deleted from broker {new}")
        with sb.zk() as zk:
            stored = json.loads(zk.get(zkpaths.topic_path(TOPIC))[0])
        assert stored["partitions"][str(partition)] == restored and stored["adding_replicas"] == {}
    finally:
        incremental(sb, ResourceType.BROKER, str(leader), {"leader.replication.throttled.rate": None})
        incremental(sb, ResourceType.BROKER, str(new), {"follower.replication.throttled.rate": None})
        incremental(sb, ResourceType.TOPIC, TOPIC, {"leader.replication.throttled.replicas": None,
                                                   "follower.replication.throttled.replicas": None})
    with sb.zk() as zk:
        assert json.loads(zk.get(f"/config/topics/{TOPIC}")[0]) == {"version": 1, "config": {}}
