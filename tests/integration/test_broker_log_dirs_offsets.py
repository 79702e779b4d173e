"""Behaviours 11 and 12 of issue 2 on the shared sandbox (read only): DescribeLogDirs reports every
replica's size in bytes, growing with the produce rate; ListOffsets answers the current versions the
clients send and v0, the version Burrow 1.2.1 (sarama) sends, with log end offsets that grow."""

from __future__ import annotations

import io
import struct
import time

import pytest
from broker_support import kadmin, log_dir_sizes, raw_request
from confluent_kafka import Consumer, TopicPartition
from kafka import TopicPartition as KTopicPartition
from kafka.admin import OffsetSpec
from kio.serial.writers import write_int32, write_int64, write_legacy_array_length, write_legacy_string
from observers import admin, snapshot, wait_for

from sandbox import settings
from sandbox.testing import RunningSandbox

pytestmark = pytest.mark.sandbox

LIST_OFFSETS = 2
LATEST, EARLIEST = -1, -2
NOT_LEADER_OR_FOLLOWER = 6
PRODUCE_BYTES_PER_S = settings.PRODUCE_MSGS_PER_S * settings.MESSAGE_BYTES


@pytest.fixture
def kafka_python(sandbox: RunningSandbox):
    client = kadmin(sandbox)
    yield client
    client.close()


# --- DescribeLogDirs ----------------------------------------------------------------------------


def test_describe_log_dirs_lists_every_replica_with_its_size(sandbox: RunningSandbox, kafka_python) -> None:
    view = snapshot(admin(sandbox.bootstrap_servers))
    for broker in sorted(view.brokers):
        sizes = log_dir_sizes(kafka_python, broker)
        hosted = {(p.topic, p.partition) for p in view.partitions if broker in p.replicas}
        assert set(sizes) == hosted, f"broker {broker}: DescribeLogDirs lists exactly the replicas it hosts"
        for (topic, _partition), entry in sizes.items():
            initial = settings.WORKLOAD_TOPICS.get(topic, (0, 0, 0))[2]
            assert entry["partition_size"] >= initial, (topic, entry)  # created with initial bytes, then grows
            # offset_lag (the sandbox reports a follower's distance to its leader's log end; Kafka reports
            # 0 for current replicas): an in-sync replica is never more than replica.lag.time.max behind
            assert 0 <= entry["offset_lag"] <= 2 * settings.PRODUCE_MSGS_PER_S * settings.REPLICA_LAG_TIME_MAX_S


def test_log_dir_size_grows_with_the_produce_rate(sandbox: RunningSandbox, kafka_python) -> None:
    view = snapshot(admin(sandbox.bootstrap_servers))
    partitions = [p for p in view.partitions if p.topic == "orders"][:4]
    leaders = {p.leader for p in partitions}
    wanted = {"orders": [p.partition for p in partitions]}

    def sample() -> tuple[float, dict[tuple[str, int], int]]:
        sizes: dict[tuple[str, int], int] = {}
        for broker in leaders:
            found = log_dir_sizes(kafka_python, broker, wanted)
            sizes.update({(p.topic, p.partition): found[(p.topic, p.partition)]["partition_size"]
                          for p in partitions if p.leader == broker})
        return time.monotonic(), sizes

    t1, first = sample()
    # wait until every partition grew by about 2.5 s worth of traffic (a deadline, not a sleep)
    t2, second = wait_for(
        lambda: (s := sample()) and all(s[1][k] - first[k] >= 2.5 * PRODUCE_BYTES_PER_S for k in first) and s,
        15, interval_s=0.25, what="log dir sizes to grow")
    for key in first:
        rate = (second[key] - first[key]) / (t2 - t1)
        print(f"{key}: {rate:.0f} B/s (produce rate {PRODUCE_BYTES_PER_S:.0f} B/s)")
        assert 0.5 * PRODUCE_BYTES_PER_S <= rate <= 1.5 * PRODUCE_BYTES_PER_S, (key, rate)


# --- ListOffsets ----------------------------------------------------------------------------------


def test_list_offsets_current_versions_grow(sandbox: RunningSandbox, kafka_python) -> None:
    consumer = Consumer({"bootstrap.servers": sandbox.bootstrap_servers, "group.id": "broker-tests-offsets",
                         "enable.auto.commit": False, "log_level": 0})
    try:
        tp = TopicPartition("payments", 1)
        low, high = consumer.get_watermark_offsets(tp, timeout=10)  # ListOffsets (librdkafka's version)
        assert low == 0 and high > 0
        ktp = KTopicPartition("payments", 1)
        latest = kafka_python.list_partition_offsets({ktp: OffsetSpec.LATEST})[ktp].offset
        earliest = kafka_python.list_partition_offsets({ktp: OffsetSpec.EARLIEST})[ktp].offset
        assert earliest == 0 and latest >= high
        grown = wait_for(lambda: consumer.get_watermark_offsets(tp, timeout=10)[1] >= latest + 20, 10,
                         what="the log end offset to grow")
        assert grown
        later = kafka_python.list_partition_offsets({ktp: OffsetSpec.LATEST})[ktp].offset
        assert later >= latest + 20
    finally:
        consumer.close()


def list_offsets_v0(host: str, port: int, topic: str, partitions: list[int], timestamp: int
                    ) -> dict[int, tuple[int, list[int]]]:
    """ListOffsets v0 as sarama 1.22 (Burrow 1.2.1) sends it, encoded by hand (Kafka's
    ListOffsetsRequest v0: replica_id, [topic, [partition, timestamp, max_num_offsets]]); returns
    ``{partition: (error code, offsets)}`` decoded from the v0 response."""
    body = io.BytesIO()
    write_int32(body, -1)  # replica_id: a client
    write_legacy_array_length(body, 1)
    write_legacy_string(body, topic)
    write_legacy_array_length(body, len(partitions))
    for partition in partitions:
        write_int32(body, partition)
        write_int64(body, timestamp)
        write_int32(body, 1)  # max_num_offsets
    payload = raw_request(host, port, LIST_OFFSETS, 0, body.getvalue())
    pos = 0

    def take(fmt: str):
        nonlocal pos
        values = struct.unpack_from(fmt, payload, pos)
        pos += struct.calcsize(fmt)
        return values[0] if len(values) == 1 else values

    answers: dict[int, tuple[int, list[int]]] = {}
    assert take(">i") == 1  # topics
    length = take(">h")
    name = payload[pos: pos + length].decode()
    pos += length
    assert name == topic
    for _ in range(take(">i")):
        partition, error = take(">i"), take(">h")
        answers[partition] = (error, [take(">q") for _ in range(take(">i"))])
    assert pos == len(payload), "trailing bytes in the ListOffsets v0 response"
    return answers


def test_list_offsets_v0_log_end_offsets_grow(sandbox: RunningSandbox) -> None:
    md = admin(sandbox.bootstrap_servers).list_topics("clicks", timeout=10)
    by_leader: dict[int, list[int]] = {}
    for partition in md.topics["clicks"].partitions.values():
        by_leader.setdefault(partition.leader, []).append(partition.id)
    leader, partitions = sorted(by_leader.items())[0]
    host, port = md.brokers[leader].host, md.brokers[leader].port
    consumer = Consumer({"bootstrap.servers": sandbox.bootstrap_servers, "group.id": "broker-tests-v0",
                         "log_level": 0})
    try:
        before = {p: consumer.get_watermark_offsets(TopicPartition("clicks", p), timeout=10)[1] for p in partitions}
        first = list_offsets_v0(host, port, "clicks", partitions, LATEST)
        after = {p: consumer.get_watermark_offsets(TopicPartition("clicks", p), timeout=10)[1] for p in partitions}
    finally:
        consumer.close()
    for p in partitions:
        error, offsets = first[p]
        assert error == 0 and len(offsets) == 1, first
        assert before[p] <= offsets[0] <= after[p], (p, before[p], offsets, after[p])
    earliest = list_offsets_v0(host, port, "clicks", partitions, EARLIEST)
    assert all(earliest[p] == (0, [0]) for p in partitions), earliest

    def grown():
        now = list_offsets_v0(host, port, "clicks", partitions, LATEST)
        return all(now[p][1][0] >= first[p][1][0] + 20 for p in partitions) and now

    assert wait_for(grown, 10, interval_s=0.25, what="v0 log end offsets to grow")
    # a broker that does not lead the partition says so (sarama then refreshes its metadata)
    other = next(b for b in md.brokers if b != leader)
    refused = list_offsets_v0(md.brokers[other].host, md.brokers[other].port, "clicks", partitions[:1], LATEST)
    assert refused == {partitions[0]: (NOT_LEADER_OR_FOLLOWER, [])}
