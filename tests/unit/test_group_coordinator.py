"""The sandbox broker's group coordinator state machine (sandbox/broker/groups.py) without a cluster:
JoinGroup / SyncGroup / Heartbeat / LeaveGroup / OffsetCommit on a coordinator whose appends to
``__consumer_offsets`` are recorded instead of written."""

from __future__ import annotations

import asyncio
import datetime
import threading
from types import SimpleNamespace

from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from sandbox.broker.group_records import decode
from sandbox.broker.groups import COMPLETING, OFFSETS_TOPIC, PREPARING, STABLE, GroupCoordinator
from sandbox.broker.protocol import Request, build


def run_in_own_loop(coroutine_function) -> None:
    """``asyncio.run`` in a thread of its own: another test of the session (Playwright's sync API) may keep an
    event loop running in the main thread, where ``asyncio.run`` refuses to start."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            asyncio.run(coroutine_function())
        except BaseException as exc:  # re-raised in the test's thread
            errors.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "the scenario did not end within 60 s"
    if errors:
        raise errors[0]


def coordinator() -> tuple[GroupCoordinator, list]:
    """A coordinator owning every partition of a 10-partition offsets topic; ``appended`` collects the
    ``(partition, records)`` it would append."""
    partitions = {p: SimpleNamespace(partition=p) for p in range(10)}
    broker = SimpleNamespace(
        config=SimpleNamespace(broker_id=0, inter_broker_protocol_version="3.6",
                               properties={"group.initial.rebalance.delay.ms": "0"}),
        cache=SimpleNamespace(topics={OFFSETS_TOPIC: SimpleNamespace(partitions=partitions),
                                      "t": SimpleNamespace(partitions={0: object()})},
                              partition=lambda topic, p: object() if (topic, p) == ("t", 0) else None))
    coord = GroupCoordinator(broker)
    coord.owned = set(range(10))
    appended: list = []

    async def append(partition, records):
        appended.append((partition, records))
        return ErrorCode.none

    coord.append = append
    return coord, appended


def request(api_key: int, version: int, **fields) -> Request:
    cls = load_payload_module(api_key, version, EntityType.request)
    name = {11: "JoinGroupRequest", 14: "SyncGroupRequest", 12: "HeartbeatRequest", 13: "LeaveGroupRequest",
            8: "OffsetCommitRequest"}[api_key]
    return Request(api_key, version, 1, "client", build(getattr(cls, name), **fields), "/127.0.0.1")


def join(member_id: str = "", metadata: bytes = b"sub") -> Request:
    m = load_payload_module(11, 5, EntityType.request)
    return request(11, 5, group_id="g", session_timeout=datetime.timedelta(seconds=10),
                   rebalance_timeout=datetime.timedelta(seconds=30), member_id=member_id, group_instance_id=None,
                   protocol_type="consumer", protocols=(m.JoinGroupRequestProtocol(name="range", metadata=metadata),))


def heartbeat(coord: GroupCoordinator, member_id: str, generation: int) -> ErrorCode:
    return coord.heartbeat(request(12, 3, group_id="g", generation_id=generation, member_id=member_id,
                                   group_instance_id=None)).error_code


def test_join_sync_rebalance_and_expiry() -> None:
    async def scenario() -> None:
        coord, appended = coordinator()
        first = await coord.join_group(join())
        assert first.error_code == ErrorCode.member_id_required and first.member_id.startswith("client-")
        a = first.member_id
        joined = await coord.join_group(join(a))
        assert (joined.error_code, joined.generation_id, joined.leader) == (ErrorCode.none, 1, a)
        assert [(x.member_id, x.metadata) for x in joined.members] == [(a, b"sub")]
        group = coord.groups["g"]
        assert group.state == COMPLETING
        m = load_payload_module(14, 3, EntityType.request)
        assignments = (m.SyncGroupRequestAssignment(member_id=a, assignment=b"all"),)
        synced = await coord.sync_group(request(14, 3, group_id="g", generation_id=1, member_id=a,
                                                group_instance_id=None, assignments=assignments))
        assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"all") and group.state == STABLE
        (stored,) = [decode(k, v) for _p, records in appended for k, v in records]
        assert stored.kind == "group" and stored.stored.members[0].assignment == b"all"

        b = (await coord.join_group(join())).member_id  # a second member: A must rejoin
        waiting_b = asyncio.ensure_future(coord.join_group(join(b)))
        await asyncio.sleep(0)
        assert group.state == PREPARING
        assert heartbeat(coord, a, 1) == ErrorCode.rebalance_in_progress
        assert heartbeat(coord, "nobody", 1) == ErrorCode.unknown_member_id
        rejoined = await coord.join_group(join(a))
        answer_b = await waiting_b
        assert rejoined.generation_id == answer_b.generation_id == 2
        assert len(rejoined.members) == 2 and answer_b.members == ()  # only the leader gets the members
        assert heartbeat(coord, a, 1) == ErrorCode.illegal_generation
        assert heartbeat(coord, a, 2) == ErrorCode.none  # CompletingRebalance

        group.members[b].last_heartbeat -= 11  # B's session (10 s) runs out
        coord.tick()
        assert b not in group.members and group.state == PREPARING

        m8 = load_payload_module(8, 8, EntityType.request)
        committed = await coord.offset_commit(request(
            8, 8, group_id="g", generation_id_or_member_epoch=2, member_id=a, group_instance_id=None,
            topics=(m8.OffsetCommitRequestTopic(name="t", partitions=(
                m8.OffsetCommitRequestPartition(partition_index=0, committed_offset=5, committed_leader_epoch=-1,
                                                committed_metadata="x"),
                m8.OffsetCommitRequestPartition(partition_index=1, committed_offset=5, committed_leader_epoch=-1,
                                                committed_metadata="x"))),)))
        errors = {p.partition_index: p.error_code for p in committed.topics[0].partitions}
        assert errors == {0: ErrorCode.none, 1: ErrorCode.unknown_topic_or_partition}  # members may commit
        assert group.offsets[("t", 0)].offset == 5

        left = coord.leave_group(request(13, 1, group_id="g", member_id=a))
        assert left.error_code == ErrorCode.none and not group.members
        assert group.state == "Empty" and group.generation == 3

    run_in_own_loop(scenario)
