"""Issue 17 (group part): the sandbox brokers' group coordinator, observed with real clients.

One sandbox of this module (3 brokers in 3 racks, ``broker_support.SLOT_GROUPS``); a test that stops a
broker starts it again before it ends. Clients: confluent-kafka (``Consumer.subscribe``, AdminClient),
kafka-python (``KafkaConsumer(group_id=...)``, ``KafkaAdminClient``), raw kio requests (FindCoordinator,
a Fetch of ``__consumer_offsets``), Burrow's HTTP API, and the brokers' ``server.log`` for the request
versions the clients sent.
"""

from __future__ import annotations

import datetime
import importlib
import re
import statistics
import time
from collections.abc import Iterator

import pytest
from broker_support import SLOT_GROUPS, module_sandbox, restore, start_broker, stop_broker
from confluent_kafka import Consumer, ConsumerGroupState, KafkaException, Producer, TopicPartition
from kafka import KafkaConsumer, OffsetAndMetadata
from kafka import TopicPartition as KTopicPartition
from kafka.admin import KafkaAdminClient
from kio.index import load_payload_module
from kio.serial import entity_reader
from kio.serial.readers import read_int16
from kio.static.constants import EntityType
from observers import admin, wait_for
from test_broker_data_path import address, kio_call, partition_info, raw_fetch

from sandbox import burrow, settings
from sandbox.broker.group_records import decode, partition_for, read_records
from sandbox.broker.protocol import supported_apis
from sandbox.testing import RunningSandbox
from sandbox.traffic import Traffic, ensure_topic

pytestmark = [pytest.mark.sandbox, pytest.mark.destructive]

FIND_COORDINATOR = 10
GROUP_APIS = {8: "OffsetCommit", 9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat",
              13: "LeaveGroup", 14: "SyncGroup", 15: "DescribeGroups", 16: "ListGroups"}


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningSandbox]:
    with module_sandbox(request, tmp_path_factory, SLOT_GROUPS, brokers=3, racks=3) as running:
        yield running


@pytest.fixture
def healthy(cluster: RunningSandbox) -> Iterator[RunningSandbox]:
    """The module's sandbox, healthy at the start; stopped brokers are started again afterwards."""
    cluster.wait_healthy(timeout_s=30)
    yield cluster
    restore(cluster)


def produce(sb: RunningSandbox, topic: str, count: int, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": sb.bootstrap_servers, "acks": "all"})
    for i in range(count):
        producer.produce(topic, key=b"%d" % i, value=b"value-%d" % i, partition=i % partitions)
    assert producer.flush(30) == 0


def find_coordinator(sb: RunningSandbox, group: str, broker: int | None = None) -> int:
    """FindCoordinator v3 (raw) for ``group``, asked of ``broker`` (default: the first live one),
    retried while the answer is COORDINATOR_NOT_AVAILABLE / an unreachable broker."""
    def ask() -> tuple[int] | None:
        target = broker if broker is not None else sb.registered_brokers()[0]
        try:
            answer = kio_call(*address(sb, target), FIND_COORDINATOR, 3, key=group, key_type=0)
        except OSError:
            return None
        return (int(answer.node_id),) if int(answer.error_code) == 0 else None

    return wait_for(ask, 30, what=f"the coordinator of {group}")[0]


def consumer(sb: RunningSandbox, group: str, assigned: dict, name: str, **config) -> tuple:
    """A confluent-kafka group member and its ``on_assign`` / ``on_revoke`` callbacks for ``subscribe``:
    ``assigned[name]`` follows its assignment (partition numbers)."""
    c = Consumer({"bootstrap.servers": sb.bootstrap_servers, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "heartbeat.interval.ms": 1000, "session.timeout.ms": 10000,
                  "client.id": name, **config})

    def on_assign(_c, parts) -> None:
        assigned[name] = sorted(tp.partition for tp in parts)

    def on_revoke(_c, _parts) -> None:
        assigned[name] = []

    return c, on_assign, on_revoke


# --- rebalancing ----------------------------------------------------------------------------------------


def test_two_confluent_consumers_split_the_partitions_and_rebalance_when_one_leaves(healthy: RunningSandbox) -> None:
    sb = healthy
    ensure_topic(sb.bootstrap_servers, "grp-split", partitions=6)
    produce(sb, "grp-split", 600, 6)
    assigned: dict[str, list[int]] = {}
    members = []
    for name in ("c1", "c2"):
        c, on_assign, on_revoke = consumer(sb, "split-group", assigned, name)
        c.subscribe(["grp-split"], on_assign=on_assign, on_revoke=on_revoke)
        members.append(c)
    c1, c2 = members
    read: dict[str, set[tuple[int, int]]] = {"c1": set(), "c2": set()}
    began = time.monotonic()
    try:
        while time.monotonic() - began < 60:
            for name, c in (("c1", c1), ("c2", c2)):
                msg = c.poll(0.1)
                if msg is not None and not msg.error():
                    read[name].add((msg.partition(), msg.offset()))
            if len(read["c1"] | read["c2"]) == 600 and assigned.get("c1") and assigned.get("c2"):
                break
        split = time.monotonic() - began
        assert sorted(assigned["c1"] + assigned["c2"]) == list(range(6)), assigned
        assert assigned["c1"] and assigned["c2"], assigned
        assert len(read["c1"] | read["c2"]) == 600 and not read["c1"] & read["c2"]
        assert {p for p, _ in read["c1"]} <= set(assigned["c1"]) and {p for p, _ in read["c2"]} <= set(assigned["c2"])
        c1.commit(asynchronous=False)
        c2.commit(asynchronous=False)

        client = admin(sb.bootstrap_servers)
        (described,) = client.describe_consumer_groups(["split-group"]).values()
        group = described.result(timeout=15)
        assert group.state == ConsumerGroupState.STABLE and len(group.members) == 2
        assert group.partition_assignor == "range"

        left = time.monotonic()
        c2.close()  # LeaveGroup: c1 learns of the rebalance from its next heartbeat
        while time.monotonic() - left < 30 and assigned.get("c1") != list(range(6)):
            c1.poll(0.1)
        rebalance_s = time.monotonic() - left
        assert assigned["c1"] == list(range(6))
        committed = c1.committed([TopicPartition("grp-split", p) for p in range(6)], timeout=15)
        assert [tp.offset for tp in committed] == [100] * 6
        listed = client.list_consumer_groups().result(timeout=15)
        assert "split-group" in {g.group_id for g in listed.valid}
        print(f"\ntwo members assigned and 600 messages read in {split:.2f} s; "
              f"rebalance after a LeaveGroup {rebalance_s:.2f} s (heartbeat.interval.ms=1000)")
        assert rebalance_s < 10
    finally:
        c1.close()


# --- offsets --------------------------------------------------------------------------------------------


def test_kafka_python_group_commits_and_fetches_offsets(healthy: RunningSandbox) -> None:
    sb = healthy
    ensure_topic(sb.bootstrap_servers, "grp-kp", partitions=3)
    produce(sb, "grp-kp", 90, 3)
    servers = sb.bootstrap_servers.split(",")
    kc = KafkaConsumer("grp-kp", bootstrap_servers=servers, group_id="kp-group", auto_offset_reset="earliest",
                       enable_auto_commit=False, session_timeout_ms=10000, heartbeat_interval_ms=1000)
    try:
        seen = 0
        deadline = time.monotonic() + 30
        while seen < 90 and time.monotonic() < deadline:
            seen += sum(len(batch) for batch in kc.poll(timeout_ms=500).values())
        assert seen == 90
        assert sorted(tp.partition for tp in kc.assignment()) == [0, 1, 2]
        kc.commit()
        latencies = []
        for i in range(20):  # explicit commits with metadata: each waits for every ISR replica
            started = time.monotonic()
            kc.commit({KTopicPartition("grp-kp", 0): OffsetAndMetadata(10 + i, f"m-{i}", -1)})
            latencies.append(time.monotonic() - started)
        kc.commit({KTopicPartition("grp-kp", 0): OffsetAndMetadata(30, "done", -1)})
        assert [kc.committed(KTopicPartition("grp-kp", p)) for p in range(3)] == [30, 30, 30]
    finally:
        kc.close()
    print(f"\nkafka-python commit latency: median {statistics.median(latencies) * 1000:.1f} ms, "
          f"max {max(latencies) * 1000:.1f} ms (acks=all on RF 3)")

    client = KafkaAdminClient(bootstrap_servers=servers, request_timeout_ms=10000)
    try:
        offsets = client.list_group_offsets("kp-group")["kp-group"]  # OffsetFetch v8 (KIP-709)
        assert {tp.partition: om.offset for tp, om in offsets.items()} == {0: 30, 1: 30, 2: 30}
        assert offsets[KTopicPartition("grp-kp", 0)].metadata == "done"
        described = client.describe_groups(["kp-group"])["kp-group"]
        assert described["group_state"] == "Empty" and described["members"] == []  # closed: LeaveGroup
        assert "kp-group" in {g["group_id"] for g in client.list_groups()}
    finally:
        client.close()

    again = KafkaConsumer("grp-kp", bootstrap_servers=servers, group_id="kp-group", enable_auto_commit=False,
                          session_timeout_ms=10000, heartbeat_interval_ms=1000)
    try:  # a new member starts at the committed offsets: nothing to read
        deadline = time.monotonic() + 30
        while not again.assignment() and time.monotonic() < deadline:
            assert not again.poll(timeout_ms=500)
        assert {tp.partition: again.position(tp) for tp in again.assignment()} == {0: 30, 1: 30, 2: 30}
    finally:
        again.close()


def test_unknown_member_and_illegal_generation(healthy: RunningSandbox) -> None:
    sb = healthy
    ensure_topic(sb.bootstrap_servers, "grp-errors", partitions=1)
    coordinator = find_coordinator(sb, "errors-group")
    heartbeat = kio_call(*address(sb, coordinator), 12, 4, group_id="errors-group", generation_id=1,
                         member_id="nobody", group_instance_id=None)
    assert int(heartbeat.error_code) == 25  # UNKNOWN_MEMBER_ID
    other = next(b for b in sb.registered_brokers() if b != coordinator)
    answer = kio_call(*address(sb, other), 12, 4, group_id="errors-group", generation_id=1, member_id="nobody",
                      group_instance_id=None)
    assert int(answer.error_code) == 16  # NOT_COORDINATOR
    m = load_payload_module(11, 7, EntityType.request)
    join = kio_call(*address(sb, coordinator), 11, 7, group_id="errors-group",
                    session_timeout=datetime.timedelta(seconds=10), rebalance_timeout=datetime.timedelta(seconds=10),
                    member_id="", group_instance_id=None, protocol_type="consumer",
                    protocols=(m.JoinGroupRequestProtocol(name="range", metadata=b""),))
    assert int(join.error_code) == 79 and join.member_id  # MEMBER_ID_REQUIRED (KIP-394) with the id to use
    join = kio_call(*address(sb, coordinator), 11, 7, group_id="errors-group",
                    session_timeout=datetime.timedelta(seconds=10), rebalance_timeout=datetime.timedelta(seconds=10),
                    member_id=join.member_id, group_instance_id=None, protocol_type="consumer",
                    protocols=(m.JoinGroupRequestProtocol(name="range", metadata=b""),))
    assert int(join.error_code) == 0 and join.leader == join.member_id and join.generation_id == 1
    assert [x.member_id for x in join.members] == [join.member_id]
    stale = kio_call(*address(sb, coordinator), 12, 4, group_id="errors-group", generation_id=0,
                     member_id=join.member_id, group_instance_id=None)
    assert int(stale.error_code) == 22  # ILLEGAL_GENERATION
    waiting = kio_call(*address(sb, coordinator), 12, 4, group_id="errors-group", generation_id=1,
                       member_id=join.member_id, group_instance_id=None)
    assert int(waiting.error_code) == 0  # CompletingRebalance: heartbeats are fine
    left = kio_call(*address(sb, coordinator), 13, 4, group_id="errors-group",
                    members=(load_payload_module(13, 4, EntityType.request).MemberIdentity(
                        member_id=join.member_id, group_instance_id=None),))
    assert [int(x.error_code) for x in left.members] == [0]


def test_committed_offsets_survive_a_restart_of_the_coordinator(healthy: RunningSandbox) -> None:
    sb = healthy
    ensure_topic(sb.bootstrap_servers, "grp-restart", partitions=3)
    produce(sb, "grp-restart", 30, 3)
    group = "restart-group"
    coordinator = find_coordinator(sb, group)
    offsets_partition = partition_for(group, settings.CONSUMER_OFFSETS_PARTITIONS)
    assert coordinator == partition_info(sb, "__consumer_offsets")[offsets_partition][0]
    assigned: dict[str, list[int]] = {}
    c, on_assign, on_revoke = consumer(sb, group, assigned, "survivor")
    c.subscribe(["grp-restart"], on_assign=on_assign, on_revoke=on_revoke)
    try:
        wait_for(lambda: c.poll(0.2) is None and assigned.get("survivor") == [0, 1, 2], 30, what="an assignment")
        c.commit(offsets=[TopicPartition("grp-restart", p, 7 + p) for p in range(3)], asynchronous=False)

        stop_broker(sb, coordinator)  # controlled shutdown: the offsets partition moves to another ISR replica
        moved_to = find_coordinator(sb, group)
        assert moved_to != coordinator

        def commit_again() -> bool:
            c.poll(0.1)
            try:
                c.commit(offsets=[TopicPartition("grp-restart", 0, 9)], asynchronous=False)
                return True
            except KafkaException:  # NOT_COORDINATOR until the client looked the coordinator up again
                return False

        began = time.monotonic()
        wait_for(commit_again, 30, what="a commit to the new coordinator")
        print(f"\ncoordinator {coordinator} stopped; broker {moved_to} took over, first commit after "
              f"{time.monotonic() - began:.2f} s")
        fresh = Consumer({"bootstrap.servers": sb.bootstrap_servers, "group.id": group})
        try:
            committed = fresh.committed([TopicPartition("grp-restart", p) for p in range(3)], timeout=15)
        finally:
            fresh.close()
        assert [tp.offset for tp in committed] == [9, 8, 9]
        python = KafkaAdminClient(bootstrap_servers=sb.bootstrap_servers.split(","), request_timeout_ms=10000)
        try:  # the new coordinator loaded the member from the group metadata record
            state = python.describe_groups([group])[group]
        finally:
            python.close()
        assert state["group_state"] == "Stable" and [m["client_id"] for m in state["members"]] == ["survivor"]

        start_broker(sb, coordinator)
        sb.wait_healthy(timeout_s=60)
    finally:
        c.close()


# --- the records of __consumer_offsets ----------------------------------------------------------------------


def test_consumer_offsets_records_are_in_kafkas_format(healthy: RunningSandbox) -> None:
    sb = healthy
    ensure_topic(sb.bootstrap_servers, "grp-format", partitions=3)
    produce(sb, "grp-format", 30, 3)
    group = "format-group"
    servers = sb.bootstrap_servers.split(",")
    kc = KafkaConsumer("grp-format", bootstrap_servers=servers, group_id=group, auto_offset_reset="earliest",
                       enable_auto_commit=False, session_timeout_ms=10000, heartbeat_interval_ms=1000)
    try:
        deadline = time.monotonic() + 30
        while not kc.assignment() and time.monotonic() < deadline:
            kc.poll(timeout_ms=500)
        member_id = kc._coordinator._generation.member_id
        kc.commit({KTopicPartition("grp-format", p): OffsetAndMetadata(3 + p, f"meta-{p}", -1) for p in range(3)})
    finally:
        kc.close()

    partition = partition_for(group, settings.CONSUMER_OFFSETS_PARTITIONS)
    leader = partition_info(sb, "__consumer_offsets")[partition][0]

    def group_records() -> list:
        answer = raw_fetch(sb, leader, "__consumer_offsets", partition)
        assert int(answer.error_code) == 0
        return [r for r in (decode(key, value) for _offset, key, value in read_records(bytes(answer.records)))
                if r.group == group]

    # the coordinator writes the emptied group after the LeaveGroup of close(): wait for it, not for a time
    deadline = time.monotonic() + 30
    while True:
        mine = group_records()
        groups = [r for r in mine if r.kind == "group"]
        if (groups and groups[-1].stored.members == ()) or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    commits = {(r.topic, r.partition): r for r in mine if r.kind == "offset"}
    assert {k: (r.key_version, r.value_version, r.committed.offset, r.committed.metadata)
            for k, r in commits.items()} == {("grp-format", p): (1, 3, 3 + p, f"meta-{p}") for p in range(3)}
    assert all(abs(r.committed.commit_timestamp_ms / 1000 - time.time()) < 60 for r in commits.values())
    metadata = [r for r in mine if r.kind == "group"]
    stable = next(r for r in metadata if r.stored.members)  # written when the group became Stable
    assert (stable.key_version, stable.value_version) == (2, 3)
    assert stable.stored.protocol_type == "consumer" and stable.stored.protocol == "range"
    (member,) = stable.stored.members
    assert member.member_id == member_id == stable.stored.leader and member.client_host.startswith("/127.")
    assert member.session_timeout_ms == 10000
    version, used = read_int16(member.assignment, 0)  # ConsumerProtocolAssignment, decoded by kio
    assignment_cls = importlib.import_module(
        f"kio.schema.consumer_protocol_assignment.v{version}.data").ConsumerProtocolAssignment
    assignment, _ = entity_reader(assignment_cls)(member.assignment, used)
    assert [(tp.topic, sorted(tp.partitions)) for tp in assignment.assigned_partitions] == [("grp-format", [0, 1, 2])]
    empty = metadata[-1]  # the member left: generation + 1, no members
    assert empty.stored.members == () and empty.stored.generation == stable.stored.generation + 1


# --- Burrow ---------------------------------------------------------------------------------------------


def test_burrow_rates_a_real_consumer_group(healthy: RunningSandbox) -> None:
    sb = healthy
    group = "burrow-real"
    ensure_topic(sb.bootstrap_servers, "grp-burrow", partitions=3)
    traffic = Traffic(sb.bootstrap_servers, "grp-burrow", rate_per_s=200, group=group).start()
    statuses: list[tuple[float, str, int]] = []
    began = time.monotonic()

    def status() -> dict:
        found = burrow.group_status(sb.burrow_url, group, sb.env["burrow_cluster"])
        statuses.append((round(time.monotonic() - began, 1), found.get("status"), found.get("totallag", 0)))
        return found

    try:
        wait_for(lambda: group in burrow.consumers(sb.burrow_url, sb.env["burrow_cluster"]), 60,
                 what=f"Burrow listing {group}")
        ok = wait_for(lambda: (s := status()).get("status") == "OK" and s.get("partition_count") == 3 and s, 60,
                      what=f"Burrow rating {group} OK")
        listed_after = time.monotonic() - began
        assert ok["totallag"] < 200 * 3, ok  # a following consumer: at most a few commit intervals behind

        traffic.stop_reading()
        stopped = time.monotonic()
        lagging = wait_for(lambda: (s := status()).get("totallag", 0) > 400 and s, 30,
                           what=f"Burrow seeing the lag of {group}")
        lag_after = time.monotonic() - stopped
        rated = wait_for(lambda: (s := status()).get("status") in ("WARN", "ERR") and s, 60,
                         what=f"Burrow rating the stopped {group}")
        print(f"\nBurrow: {group} listed and OK after {listed_after:.1f} s; after the consumer stopped, lag "
              f"{lagging['totallag']} seen after {lag_after:.1f} s, status {rated['status']} after "
              f"{time.monotonic() - stopped:.1f} s; partitions {[p['status'] for p in rated['partitions']]}")
    finally:
        traffic.resume_reading()
        result = traffic.stop()
    assert result.ok and result.lost == [], result.to_dict()


# --- client versions ------------------------------------------------------------------------------------------


def test_clients_use_group_api_versions_the_broker_advertises(cluster: RunningSandbox) -> None:
    """The brokers log the first request of each (API, version, client software): the group API versions
    librdkafka and kafka-python sent in this module's tests, all within the advertised ranges."""
    pattern = re.compile(r"first (\w+)Request v(\d+) from (.+?) \(client id")
    names = {name: key for key, name in GROUP_APIS.items()}
    sent: dict[str, dict[str, set[int]]] = {}
    for broker in cluster.broker_ids:
        log = cluster.host_dir(broker).server_log
        for name, version, who in pattern.findall(log.read_text(errors="replace")):
            if name in names:
                # "confluent-kafka-python 2.16.1-rdkafka-2.16.0", "kafka-python 3.0.12" (KIP-511 names)
                software = ("librdkafka" if "rdkafka" in who
                            else "kafka-python" if who.startswith("kafka-python") else who)
                sent.setdefault(software, {}).setdefault(name, set()).add(int(version))
    advertised = supported_apis(settings.DEFAULT_KAFKA_VERSION)
    print("\ngroup API versions sent: " + "; ".join(
        f"{who}: " + ", ".join(f"{n} v{'/'.join(map(str, sorted(v)))}" for n, v in sorted(apis.items()))
        for who, apis in sorted(sent.items())))
    assert {"librdkafka", "kafka-python"} <= set(sent), sent
    for apis in sent.values():
        for name, versions in apis.items():
            lo, hi = advertised[names[name]]
            assert all(lo <= v <= hi for v in versions), (name, versions)
    assert {"FindCoordinator", "JoinGroup", "SyncGroup", "Heartbeat", "OffsetCommit", "OffsetFetch"} <= set(
        sent["librdkafka"])
