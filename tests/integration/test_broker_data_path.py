"""Issue 17 (first part): the sandbox brokers' real data path, observed from outside with real clients.

One sandbox of this module (3 brokers in 3 racks, ``broker_support.SLOT_DATA_PATH``); tests that stop
brokers restore a healthy cluster before they end. Clients: confluent-kafka (AdminClient, an idempotent
``acks=all`` Producer, Consumer, through :class:`sandbox.traffic.Traffic`), kafka-python (admin,
producer, consumer, offsets, DescribeLogDirs), and raw requests encoded with kio for what clients do not
expose (a Fetch sent to a chosen broker, hand-made producer sequences built with kafka-python's
``DefaultRecordBatchBuilder``).
"""

from __future__ import annotations

import datetime
import io
import socket
import struct
import time
from collections.abc import Iterator

import kio.schema.fetch.v11.request as fetch_v11
import kio.schema.metadata.v12.request as metadata_v12
import kio.schema.offset_for_leader_epoch.v4.request as epoch_v4
import kio.schema.produce.v9.request as produce_v9
import pytest
from broker_support import SLOT_DATA_PATH, kadmin, log_dir_sizes, module_sandbox, restore, start_broker, stop_broker
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import ConfigResource, NewTopic, OffsetSpec, ResourceType
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition
from kafka.admin import NewTopic as KNewTopic
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer
from observers import admin, wait_for

from sandbox.broker.protocol import build
from sandbox.testing import RunningSandbox
from sandbox.traffic import Traffic, ensure_topic

pytestmark = [pytest.mark.sandbox, pytest.mark.destructive]

PRODUCE, FETCH, INIT_PRODUCER_ID = 0, 1, 22
NONE, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS = 0, 6, 19
OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH = 45, 47


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningSandbox]:
    with module_sandbox(request, tmp_path_factory, SLOT_DATA_PATH, brokers=3, racks=3) as running:
        yield running


@pytest.fixture
def healthy(cluster: RunningSandbox) -> Iterator[RunningSandbox]:
    """The module's sandbox, healthy at the start; stopped brokers are started again afterwards."""
    cluster.wait_healthy(timeout_s=30)
    yield cluster
    restore(cluster)


def partition_info(sb: RunningSandbox, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """``{partition: (leader, replicas, isr)}`` from confluent-kafka metadata, once every partition has a
    leader (right after CreateTopics, brokers other than the controller may still answer leader -1 for a
    moment: their metadata refresh follows the controller's, as in ZK-mode Kafka)."""
    client = admin(sb.bootstrap_servers)

    def read() -> dict | None:
        md = client.list_topics(topic, timeout=10)
        info = {p.id: (p.leader, list(p.replicas), list(p.isrs)) for p in md.topics[topic].partitions.values()}
        return info if info and all(leader >= 0 for leader, _, _ in info.values()) else None

    return wait_for(read, 10, what=f"leaders of {topic}")


def address(sb: RunningSandbox, broker: int) -> tuple[str, int]:
    entry = sb.broker(broker)
    return entry["host"], entry["port"]


# --- raw requests (kio) ------------------------------------------------------------------------------


def kio_call(host: str, port: int, api_key: int, version: int, **fields):
    """Encode a request of ``api_key``/``version`` from ``fields`` (nested entities built by the caller),
    send it, and return the decoded kio response entity."""
    request_cls = load_request_schema(api_key, version)
    header_cls = request_cls.__header_schema__
    buffer = io.BytesIO()
    entity_writer(header_cls)(buffer, build(header_cls, request_api_key=api_key, request_api_version=version,
                                            correlation_id=17, client_id="data-path-tests"))
    entity_writer(request_cls)(buffer, build(request_cls, **fields))
    frame = buffer.getvalue()
    with socket.create_connection((host, port), timeout=15) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", _read(sock, 4))[0]
        payload = _read(sock, size)
    response_cls = load_response_schema(api_key, version)
    header, offset = entity_reader(response_cls.__header_schema__)(payload, 0)
    assert header.correlation_id == 17
    body, _ = entity_reader(response_cls)(payload, offset)
    return body


def _read(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("connection closed")
        data += chunk
    return data


def raw_fetch(sb: RunningSandbox, broker: int, topic: str, partition: int, offset: int = 0):
    """Fetch v11 (topic names) of one partition from ``broker``: its PartitionData."""
    m = fetch_v11
    body = kio_call(*address(sb, broker), FETCH, 11, replica_id=-1, max_wait=datetime.timedelta(milliseconds=100),
                    min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                    topics=(m.FetchTopic(topic=topic, partitions=(build(
                        m.FetchPartition, partition=partition, current_leader_epoch=-1, fetch_offset=offset,
                        log_start_offset=-1, partition_max_bytes=1 << 20),)),),
                    forgotten_topics_data=(), rack_id="")
    (topic_answer,) = body.responses
    (part,) = topic_answer.partitions
    return part


def raw_produce(sb: RunningSandbox, broker: int, topic: str, partition: int, records: bytes, acks: int = -1):
    """Produce v9 of one batch to ``broker``: ``(error code, base offset)``."""
    m = produce_v9
    body = kio_call(*address(sb, broker), PRODUCE, 9, transactional_id=None, acks=acks,
                    timeout=datetime.timedelta(seconds=10),
                    topic_data=(m.TopicProduceData(name=topic, partition_data=(
                        m.PartitionProduceData(index=partition, records=records),)),))
    (part,) = body.responses[0].partition_responses
    return int(part.error_code), int(part.base_offset)


def produce_once_led(sb: RunningSandbox, broker: int, topic: str, partition: int, records: bytes,
                     timeout_s: float = 10.0) -> tuple[int, int]:
    """:func:`raw_produce`, sent again while ``broker`` answers NOT_LEADER_OR_FOLLOWER: right after a topic is
    created the other brokers' metadata may already name ``broker`` the leader before ``broker`` itself has
    read it (ZooKeeper-mode Kafka, until its LeaderAndIsr arrives; clients retry the same way)."""
    answers: list[tuple[int, int]] = []

    def accepted() -> tuple[int, int] | None:
        answers.append(raw_produce(sb, broker, topic, partition, records))
        return answers[-1] if answers[-1][0] != NOT_LEADER_OR_FOLLOWER else None

    return wait_for(accepted, timeout_s, what=f"broker {broker} to lead {topic}-{partition}")


def batch(producer_id: int, epoch: int, base_sequence: int, count: int = 3) -> bytes:
    """A RecordBatch v2 of ``count`` records (kafka-python's builder, CRC included)."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=producer_id, producer_epoch=epoch,
                                        base_sequence=base_sequence, batch_size=1 << 20)
    now = int(time.time() * 1000)
    for i in range(count):
        builder.append(i, timestamp=now, key=f"k{base_sequence + i}".encode(), value=b"v", headers=[])
    return bytes(builder.build())


# --- CreateTopics ------------------------------------------------------------------------------------


def test_create_topic_rf3_min_isr2_rack_aware(healthy: RunningSandbox) -> None:
    sb = healthy
    client = admin(sb.bootstrap_servers)
    new = NewTopic("dp-create", 6, 3, config={"min.insync.replicas": "2"})
    client.create_topics([new], request_timeout=20)["dp-create"].result(timeout=30)
    racks = {b["id"]: b["rack"] for b in sb.env["brokers"]}
    info = partition_info(sb, "dp-create")
    assert sorted(info) == list(range(6))
    for leader, replicas, isr in info.values():
        assert len(replicas) == 3 and leader == replicas[0] and sorted(isr) == sorted(replicas)
        assert len({racks[r] for r in replicas}) == 3  # one replica per rack
    assert {replicas[0] for _, replicas, _ in info.values()} == {0, 1, 2}  # preferred leaders spread
    (future,) = client.describe_configs([ConfigResource(ResourceType.TOPIC, "dp-create")]).values()
    assert future.result()["min.insync.replicas"].value == "2"
    with sb.zk() as zk:  # the znodes of ZK-mode Kafka
        assert zk.exists("/brokers/topics/dp-create/partitions/5/state")
        assert b'"min.insync.replicas":"2"' in zk.get("/config/topics/dp-create")[0]

    with pytest.raises(KafkaException) as raised:
        client.create_topics([NewTopic("dp-create", 1, 3)], request_timeout=20)["dp-create"].result(timeout=30)
    assert raised.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    with pytest.raises(KafkaException) as raised:
        client.create_topics([NewTopic("dp-rf4", 1, 4)], request_timeout=20)["dp-rf4"].result(timeout=30)
    assert raised.value.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR
    assert "dp-rf4" not in client.list_topics(timeout=10).topics

    python = kadmin(sb)
    try:
        answer = python.create_topics([KNewTopic("dp-python", 2, 3)])
        assert answer["topics"][0]["error_code"] == NONE, answer
        assert python.delete_topics(["dp-python"])["topics"][0]["error_code"] == NONE
        assert "dp-python" not in python.list_topics()
    finally:
        python.close()


# --- produce / fetch / list offsets -----------------------------------------------------------------


def test_idempotent_acks_all_messages_read_back_in_order(healthy: RunningSandbox) -> None:
    sb = healthy
    ensure_topic(sb.bootstrap_servers, "dp-traffic", partitions=3)
    with Traffic(sb.bootstrap_servers, "dp-traffic", rate_per_s=None) as traffic:
        time.sleep(3)
        result = traffic.stop()
    print(f"\nacks=all idempotent: {result.to_dict()}")
    assert result.ok, result.to_dict()
    assert result.acknowledged > 1000 and result.errors == {} and result.unresolved == 0
    assert result.read == result.acknowledged

    # ListOffsets: earliest 0, latest = what was acknowledged, for both clients
    parts = [KTopicPartition("dp-traffic", p) for p in range(3)]
    confluent = admin(sb.bootstrap_servers)
    latest = {tp.partition: f.result().offset for tp, f in confluent.list_offsets(
        {TopicPartition("dp-traffic", p): OffsetSpec.latest() for p in range(3)}).items()}
    earliest = {tp.partition: f.result().offset for tp, f in confluent.list_offsets(
        {TopicPartition("dp-traffic", p): OffsetSpec.earliest() for p in range(3)}).items()}
    consumer = KafkaConsumer(bootstrap_servers=sb.bootstrap_servers.split(","), enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=3000)
    try:
        assert {tp.partition: o for tp, o in consumer.end_offsets(parts).items()} == latest
        assert {tp.partition: o for tp, o in consumer.beginning_offsets(parts).items()} == earliest == {
            0: 0, 1: 0, 2: 0}
        assert sum(latest.values()) == result.acknowledged
        # kafka-python reads the same records
        consumer.assign(parts)
        seen = {}
        while sum(seen.values()) < result.acknowledged:
            batch_ = consumer.poll(timeout_ms=3000, max_records=10000)
            if not batch_:
                break
            for tp, messages in batch_.items():
                seen[tp.partition] = seen.get(tp.partition, 0) + len(messages)
        assert seen == latest
    finally:
        consumer.close()

    # every ISR replica holds every byte (DescribeLogDirs on each broker)
    python = kadmin(sb)
    try:
        def sizes() -> list[set[int]] | None:
            per_partition = [set() for _ in range(3)]
            for broker in sb.broker_ids:
                for (_topic, p), part in log_dir_sizes(python, broker, {"dp-traffic": [0, 1, 2]}).items():
                    per_partition[p].add(part["partition_size"])
            return per_partition if all(len(s) == 1 for s in per_partition) else None

        assert wait_for(sizes, 10, what="equal replica sizes")
    finally:
        python.close()


def test_fetch_from_a_non_leader_is_refused(healthy: RunningSandbox) -> None:
    sb = healthy
    ensure_topic(sb.bootstrap_servers, "dp-fetch", partitions=1)
    producer = KafkaProducer(bootstrap_servers=sb.bootstrap_servers.split(","), acks="all")
    try:
        for i in range(10):
            producer.send("dp-fetch", key=b"%d" % i, value=b"value-%d" % i, partition=0)
        producer.flush(timeout=30)
    finally:
        producer.close()
    leader, replicas, isr = partition_info(sb, "dp-fetch")[0]
    answer = raw_fetch(sb, leader, "dp-fetch", 0)
    assert int(answer.error_code) == NONE and answer.high_watermark == 10
    values = [r.value for b in MemoryRecords(bytes(answer.records)) for r in b]
    assert values == [b"value-%d" % i for i in range(10)]
    for follower in (r for r in replicas if r != leader):
        answer = raw_fetch(sb, follower, "dp-fetch", 0)
        assert int(answer.error_code) == NOT_LEADER_OR_FOLLOWER
        assert not answer.records
    assert int(raw_fetch(sb, leader, "dp-fetch", 0, offset=11).error_code) == 1  # OFFSET_OUT_OF_RANGE


def test_producer_sequence_rules(healthy: RunningSandbox) -> None:
    sb = healthy
    ensure_topic(sb.bootstrap_servers, "dp-sequence", partitions=1)
    leader = partition_info(sb, "dp-sequence")[0][0]
    init = kio_call(*address(sb, leader), INIT_PRODUCER_ID, 4, transactional_id=None,
                    transaction_timeout=datetime.timedelta(seconds=60), producer_id=-1, producer_epoch=-1)
    assert int(init.error_code) == NONE and init.producer_epoch == 0
    pid = int(init.producer_id)
    assert produce_once_led(sb, leader, "dp-sequence", 0, batch(pid, 0, 0)) == (NONE, 0)
    assert raw_produce(sb, leader, "dp-sequence", 0, batch(pid, 0, 0)) == (NONE, 0)  # duplicate: same offset
    assert raw_produce(sb, leader, "dp-sequence", 0, batch(pid, 0, 5))[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert raw_produce(sb, leader, "dp-sequence", 0, batch(pid, 0, 3)) == (NONE, 3)
    assert raw_produce(sb, leader, "dp-sequence", 0, batch(pid, 1, 4))[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert raw_produce(sb, leader, "dp-sequence", 0, batch(pid, 1, 0)) == (NONE, 6)  # a new epoch starts at 0
    assert raw_produce(sb, leader, "dp-sequence", 0, batch(pid, 0, 6))[0] == INVALID_PRODUCER_EPOCH
    follower = next(r for r in partition_info(sb, "dp-sequence")[0][1] if r != leader)
    assert raw_produce(sb, follower, "dp-sequence", 0, batch(pid, 1, 3))[0] == NOT_LEADER_OR_FOLLOWER
    answer = raw_fetch(sb, leader, "dp-sequence", 0)
    assert [r.offset for b in MemoryRecords(bytes(answer.records)) for r in b] == list(range(9))


# --- ISR and failures --------------------------------------------------------------------------------


def test_acks_all_with_one_isr_member_gets_not_enough_replicas(healthy: RunningSandbox) -> None:
    sb = healthy
    ensure_topic(sb.bootstrap_servers, "dp-min-isr", partitions=1)
    leader, replicas, _ = partition_info(sb, "dp-min-isr")[0]
    others = [r for r in replicas if r != leader]
    for broker in others:
        stop_broker(sb, broker)
    wait_for(lambda: partition_info(sb, "dp-min-isr")[0][2] == [leader], 15, what="ISR = the leader alone")

    delivered: list = []
    producer = Producer({"bootstrap.servers": sb.bootstrap_servers, "acks": "all", "retries": 0,
                         "enable.idempotence": False, "message.timeout.ms": 10000})
    producer.produce("dp-min-isr", b"refused", partition=0, on_delivery=lambda err, msg: delivered.append(err))
    producer.flush(15)
    assert [e.code() if e else None for e in delivered] == [KafkaError.NOT_ENOUGH_REPLICAS]
    assert raw_produce(sb, leader, "dp-min-isr", 0, batch(-1, -1, -1))[0] == NOT_ENOUGH_REPLICAS
    assert raw_produce(sb, leader, "dp-min-isr", 0, batch(-1, -1, -1), acks=1) == (NONE, 0)  # acks=1 is fine
    answer = raw_fetch(sb, leader, "dp-min-isr", 0)
    assert answer.high_watermark == 3  # the ISR is the leader alone: its log end offset

    for broker in others:
        start_broker(sb, broker)
    sb.wait_healthy(timeout_s=60)
    delivered.clear()
    producer.produce("dp-min-isr", b"accepted", partition=0, on_delivery=lambda err, msg: delivered.append(err))
    producer.flush(15)
    assert delivered == [None]
    for broker in replicas:  # the restarted replicas copied the batch written while they were away
        assert wait_for(lambda b=broker: log_size(sb, b, "dp-min-isr") == log_size(sb, leader, "dp-min-isr"),
                        10, what="replicas in sync")


def log_size(sb: RunningSandbox, broker: int, topic: str) -> int:
    client = kadmin(sb)
    try:
        return log_dir_sizes(client, broker, {topic: [0]})[(topic, 0)]["partition_size"]
    finally:
        client.close()


def test_leader_restart_during_traffic_loses_no_acknowledged_message(healthy: RunningSandbox) -> None:
    sb = healthy
    ensure_topic(sb.bootstrap_servers, "dp-restart", partitions=3)
    traffic = Traffic(sb.bootstrap_servers, "dp-restart", rate_per_s=2000).start()
    try:
        time.sleep(2)
        leader = partition_info(sb, "dp-restart")[0][0]
        stop_broker(sb, leader)  # controlled shutdown: leadership moves to the other ISR members
        time.sleep(2)
        start_broker(sb, leader)
        sb.wait_healthy(timeout_s=60)
        time.sleep(1)
    finally:
        result = traffic.stop()
    print(f"\nleader {leader} restarted during traffic: {result.to_dict()}")
    assert result.acknowledged > 5000, result.to_dict()
    assert result.lost == [] and result.ok, result.to_dict()
    assert result.unresolved == 0


def test_offset_for_leader_epoch_tells_where_each_epoch_ends(healthy: RunningSandbox) -> None:
    """OffsetForLeaderEpoch (KIP-101/KIP-320) after a leader change: the old epoch ends where the new leader's
    first batch begins, the current one at the log end; a stale current epoch is fenced, a follower refuses."""
    sb = healthy
    topic = "dp-epochs"
    ensure_topic(sb.bootstrap_servers, topic, partitions=1)
    producer = Producer({"bootstrap.servers": sb.bootstrap_servers, "acks": "all", "enable.idempotence": True})

    def produce(count: int) -> None:
        for i in range(count):
            producer.produce(topic, value=f"m{i}".encode(), partition=0)
        assert producer.flush(30) == 0

    def epoch_now() -> tuple[int, int]:
        """(leader, leader epoch) of partition 0 from a Metadata v12 answer of any live broker."""
        for broker in (0, 1, 2):
            try:
                body = kio_call(*address(sb, broker), 3, 12, topics=(metadata_v12.MetadataRequestTopic(
                    topic_id=None, name=topic),), allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False)
            except OSError:
                continue
            p = body.topics[0].partitions[0]
            return int(p.leader_id), int(p.leader_epoch)
        raise AssertionError("no broker answered Metadata")

    produce(5)
    first_leader, first_epoch = epoch_now()
    stop_broker(sb, first_leader)  # controlled shutdown: another ISR member leads in a new epoch
    new_leader, new_epoch = wait_for(lambda: (e := epoch_now())[0] not in (-1, first_leader) and e, 15,
                                     what="a new leader")
    assert new_epoch > first_epoch
    produce(3)
    start_broker(sb, first_leader)
    sb.wait_healthy(timeout_s=60)

    def ask(broker: int, asked: int, current: int = -1):
        host, port = address(sb, broker)
        body = kio_call(host, port, 23, 4, replica_id=-1, topics=(epoch_v4.OffsetForLeaderTopic(
            topic=topic, partitions=(epoch_v4.OffsetForLeaderPartition(
                partition=0, current_leader_epoch=current, leader_epoch=asked),)),))
        answer = body.topics[0].partitions[0]
        return int(answer.error_code), answer.leader_epoch, answer.end_offset

    leader, epoch = epoch_now()
    assert ask(leader, first_epoch) == (NONE, first_epoch, 5)  # the old epoch ends where the new leader began
    assert ask(leader, epoch, epoch) == (NONE, new_epoch, 8)  # the latest batches' epoch ends at the log end
    assert ask(leader, first_epoch, first_epoch)[0] == 74  # FENCED_LEADER_EPOCH: the client's epoch is stale
    follower = next(b for b in (0, 1, 2) if b != leader)
    assert ask(follower, epoch)[0] == NOT_LEADER_OR_FOLLOWER
