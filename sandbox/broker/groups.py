"""The group coordinator of a sandbox broker: Kafka's classic group protocol and committed offsets.

Served APIs: FindCoordinator (10), JoinGroup (11), Heartbeat (12), LeaveGroup (13), SyncGroup (14),
DescribeGroups (15), ListGroups (16), OffsetCommit (8), OffsetFetch (9). The rules follow Kafka 3.x's
``GroupCoordinator`` / ``GroupMetadataManager`` (ZK mode, the "classic" protocol; KIP-848's consumer
protocol is not served):

- Coordinator: group ``g`` lives in partition ``abs(hashCode(g)) % partitions`` of ``__consumer_offsets``
  (:func:`sandbox.broker.group_records.partition_for`); its coordinator is that partition's leader.
  FindCoordinator answers it from any broker; COORDINATOR_NOT_AVAILABLE while the partition has no
  leader, and when the topic does not exist yet, which it then creates (ZK-mode auto-creation of an
  internal topic: ``offsets.topic.num.partitions`` partitions, RF ``min(offsets.topic.replication.factor,
  live brokers)``, real records). Other brokers answer NOT_COORDINATOR to group requests.
- Loading: when a broker becomes the leader of an offsets partition it reads that partition's log from
  the start (its own replica: it was in the ISR) and rebuilds the groups and offsets stored there; when it
  loses the leadership it drops them and answers its waiting JoinGroup / SyncGroup calls NOT_COORDINATOR,
  so clients look the coordinator up again.
- Rebalance (Kafka's states Empty, PreparingRebalance, CompletingRebalance, Stable, Dead): a JoinGroup
  with an empty member id gets MEMBER_ID_REQUIRED and a new id (v4+, KIP-394); a join moves the group to
  PreparingRebalance, which ends when every member has rejoined or at the largest rebalance timeout
  (members that did not rejoin are removed); a first join of an empty group waits
  ``group.initial.rebalance.delay.ms`` longer while members keep arriving. The join answer carries the
  new generation, the protocol voted for by all members, the leader, and (to the leader only) every
  member's subscription; SyncGroup from the leader stores the assignments (a group metadata record,
  acks=all) and the group becomes Stable. Heartbeat answers REBALANCE_IN_PROGRESS while a rebalance
  runs, ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID to stale members; a member whose heartbeats stop for its
  session timeout is removed and the group rebalances; LeaveGroup removes members at once.
- Offsets: OffsetCommit appends one offset commit record per partition to the group's partition and
  answers once every ISR member holds them (Kafka's acks=-1 append, ``offsets.commit.timeout.ms``);
  NOT_ENOUGH_REPLICAS and timeouts answer COORDINATOR_NOT_AVAILABLE, a lost leadership NOT_COORDINATOR
  (``GroupMetadataManager.storeOffsets``' mapping). Simple consumers (generation -1, no members) commit to
  an Empty group. OffsetFetch answers from memory (-1 for partitions without a commit).

Differences from Kafka: no static membership semantics beyond storing ``group.instance.id`` (KIP-345),
no ``group.max.size``, no offset expiry or group deletion (DeleteGroups, OffsetDelete), no transactional
offsets, no compaction of ``__consumer_offsets`` (its log only grows).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from sandbox.broker import zkpaths
from sandbox.broker.config import parse_version
from sandbox.broker.group_records import (
    CommittedOffset,
    RecordFormatError,
    StoredGroup,
    StoredMember,
    build_batch,
    decode,
    group_metadata_key,
    group_metadata_value,
    offset_commit_key,
    offset_commit_value,
    partition_for,
    read_records,
)
from sandbox.broker.protocol import Request, build, response_module
from sandbox.broker.records import parse_batches

if TYPE_CHECKING:
    from sandbox.broker.server import Broker

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
EMPTY, PREPARING, COMPLETING, STABLE, DEAD = "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"
GROUP_KEY, TRANSACTION_KEY = 0, 1  # FindCoordinator key types
# Kafka's defaults for the keys absent from server.properties
GROUP_DEFAULTS = {
    "group.min.session.timeout.ms": "6000",
    "group.max.session.timeout.ms": "1800000",
    "group.initial.rebalance.delay.ms": "3000",
    "offsets.topic.num.partitions": "50",
    "offsets.topic.replication.factor": "3",
    "offsets.commit.timeout.ms": "5000",
    "offset.metadata.max.bytes": "4096",
}
# errors of the offsets append, as GroupMetadataManager maps them for clients
APPEND_ERRORS = {
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
}


@dataclass
class Member:
    """A group member: timeouts in seconds, ``protocols`` ``[(name, metadata)]`` in the member's order,
    ``join`` / ``sync`` the futures of its waiting JoinGroup / SyncGroup (None when not waiting),
    ``last_heartbeat`` in ``time.monotonic()`` seconds."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_s: float
    rebalance_timeout_s: float
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join: asyncio.Future | None = None
    sync: asyncio.Future | None = None
    last_heartbeat: float = field(default_factory=time.monotonic)

    def metadata(self, protocol: str | None) -> bytes:
        """The member's subscription for ``protocol`` (b"" when it did not offer it)."""
        return next((data for name, data in self.protocols if name == protocol), b"")


@dataclass
class Group:
    """One group's state on its coordinator (Kafka's ``GroupMetadata``). ``offsets`` maps
    ``(topic, partition)`` to the committed offset; ``pending`` new member ids (MEMBER_ID_REQUIRED given,
    not joined yet) to the monotonic time they expire; ``join_deadline`` ends a PreparingRebalance;
    ``initial`` marks the delayed first join of an empty group (``initial_limit`` bounds its extensions);
    ``sync_deadline`` ends a CompletingRebalance whose leader never sent its SyncGroup."""

    group_id: str
    partition: int
    state: str = EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending: dict[str, float] = field(default_factory=dict)
    offsets: dict[tuple[str, int], CommittedOffset] = field(default_factory=dict)
    join_deadline: float = 0.0
    initial: bool = False
    initial_limit: float = 0.0
    sync_deadline: float = 0.0
    state_timestamp_ms: int = -1

    def candidates(self) -> list[str]:
        """Protocols every member supports, in the order of the first member's preference."""
        members = list(self.members.values())
        if not members:
            return []
        names = [name for name, _ in members[0].protocols]
        return [n for n in names if all(any(n == p for p, _ in m.protocols) for m in members[1:])]

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """Kafka's ``GroupMetadata.supportsProtocols``: an empty group takes any non-empty protocol type
        and list; otherwise the type must match and one offered protocol must be supported by all."""
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        offered = {name for name, _ in protocols}
        return protocol_type == self.protocol_type and any(c in offered for c in self.candidates())

    def select_protocol(self) -> str | None:
        """Kafka's vote: each member votes for its most preferred protocol among the candidates."""
        candidates = self.candidates()
        votes = {c: 0 for c in candidates}
        for m in self.members.values():
            choice = next((name for name, _ in m.protocols if name in votes), None)
            if choice is not None:
                votes[choice] += 1
        return max(candidates, key=lambda c: votes[c]) if candidates else None

    def stored(self) -> StoredGroup:
        """The group metadata record's content."""
        return StoredGroup(
            protocol_type=self.protocol_type or "", generation=self.generation, protocol=self.protocol,
            leader=self.leader, state_timestamp_ms=self.state_timestamp_ms,
            members=tuple(StoredMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                       int(m.rebalance_timeout_s * 1000), int(m.session_timeout_s * 1000),
                                       m.metadata(self.protocol), m.assignment)
                          for m in self.members.values()))


def group_metadata_version(inter_broker_protocol_version: str) -> int:
    """The GroupMetadataValue version Kafka writes at an IBP: 3 from 2.3, 2 from 2.1, else 1."""
    ibp = parse_version(inter_broker_protocol_version)
    return 3 if ibp >= (2, 3) else 2 if ibp >= (2, 1) else 1


class GroupCoordinator:
    """The groups of the ``__consumer_offsets`` partitions this broker leads, and the group APIs.

    :meth:`on_metadata` (after every metadata refresh) loads and unloads partitions; :meth:`tick`
    (every 0.1 s) expires sessions and ends rebalances whose time is up; :attr:`handlers` maps API keys
    to the request handlers (request in, kio response entity or a coroutine giving it out).
    """

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.groups: dict[str, Group] = {}
        self.owned: set[int] = set()  # offsets partitions whose groups are loaded here
        self.handlers = {
            8: self.offset_commit,
            9: self.offset_fetch,
            10: self.find_coordinator,
            11: self.join_group,
            12: self.heartbeat,
            13: self.leave_group,
            14: self.sync_group,
            15: self.describe_groups,
            16: self.list_groups,
        }

    # --- configuration ---------------------------------------------------------------------------
    def config(self, key: str) -> int:
        """An integer broker config of the group coordinator (server.properties, else Kafka's default)."""
        return int(self.broker.config.properties.get(key, GROUP_DEFAULTS[key]))

    @property
    def cache(self):
        return self.broker.cache

    @property
    def broker_id(self) -> int:
        return self.broker.config.broker_id

    def partition_count(self) -> int:
        """Partitions of ``__consumer_offsets``: the topic's, else ``offsets.topic.num.partitions``."""
        info = self.cache.topics.get(OFFSETS_TOPIC)
        return len(info.partitions) if info else self.config("offsets.topic.num.partitions")

    def partition_of(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition that stores ``group_id`` (Kafka's ``partitionFor``)."""
        return partition_for(group_id, self.partition_count())

    def coordinator_error(self, group_id: str) -> ErrorCode | None:
        """None when this broker coordinates ``group_id``; else NOT_COORDINATOR or
        COORDINATOR_NOT_AVAILABLE (the offsets topic does not exist yet)."""
        if OFFSETS_TOPIC not in self.cache.topics:
            return ErrorCode.coordinator_not_available
        if self.partition_of(group_id) not in self.owned:
            return ErrorCode.not_coordinator
        return None

    # --- loading and unloading ------------------------------------------------------------------------
    def on_metadata(self) -> None:
        """Load the partitions of ``__consumer_offsets`` this broker now leads, unload those it lost."""
        info = self.cache.topics.get(OFFSETS_TOPIC)
        led = set()
        if info is not None:
            for p in info.partitions.values():
                if p.leader == self.broker_id and p.key in self.broker.replicas.logs:
                    led.add(p.partition)
        for partition in sorted(self.owned - led):
            self.unload(partition)
        for partition in sorted(led - self.owned):
            self.load(partition)

    def load(self, partition: int) -> None:
        """Rebuild the groups of ``partition`` from its log (offset commits, group metadata, tombstones);
        groups stored with members come back Stable (their members must heartbeat within their session
        timeout), the others Empty."""
        began = time.monotonic()
        plog = self.broker.replicas.logs[(OFFSETS_TOPIC, partition)]
        offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
        stored: dict[str, StoredGroup | None] = {}
        count = 0
        for _offset, key, value in read_records(b"".join(plog.read(plog.log_start, 1 << 62, plog.leo))):
            count += 1
            try:
                record = decode(key or b"", value)
            except RecordFormatError as exc:
                log.warning("__consumer_offsets-%s: skipping a record: %s", partition, exc)
                continue
            if record.kind == "offset":
                group_offsets = offsets.setdefault(record.group, {})
                if record.committed is None:
                    group_offsets.pop((record.topic, record.partition), None)
                else:
                    group_offsets[(record.topic, record.partition)] = record.committed
            else:
                stored[record.group] = record.stored
        now = time.monotonic()
        for group_id in set(offsets) | {g for g, s in stored.items() if s is not None}:
            group = Group(group_id, partition, offsets=offsets.get(group_id, {}))
            meta = stored.get(group_id)
            if meta is not None:
                group.generation, group.protocol_type = meta.generation, meta.protocol_type
                group.protocol, group.leader = meta.protocol, meta.leader
                group.state_timestamp_ms = meta.state_timestamp_ms
                for m in meta.members:
                    group.members[m.member_id] = Member(
                        m.member_id, m.group_instance_id, m.client_id, m.client_host, m.session_timeout_ms / 1000,
                        m.rebalance_timeout_ms / 1000, [(meta.protocol or "", m.subscription)], m.assignment,
                        last_heartbeat=now)
                group.state = STABLE if group.members else EMPTY
            self.groups[group_id] = group
        self.owned.add(partition)
        log.info("loaded __consumer_offsets-%s: %s records, %s groups in %.3f s", partition, count,
                 sum(1 for g in self.groups.values() if g.partition == partition), time.monotonic() - began)

    def unload(self, partition: int) -> None:
        """Drop the groups of ``partition`` (leadership moved); waiting calls get NOT_COORDINATOR."""
        self.owned.discard(partition)
        for group_id in [g for g, group in self.groups.items() if group.partition == partition]:
            group = self.groups.pop(group_id)
            group.state = DEAD
            for m in group.members.values():
                self._answer_join(m, {"error": ErrorCode.not_coordinator, "member_id": m.member_id})
                self._answer_sync(m, ErrorCode.not_coordinator)
        log.info("unloaded __consumer_offsets-%s", partition)

    # --- appends to __consumer_offsets ------------------------------------------------------------------
    async def append(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> ErrorCode:
        """Append ``records`` as one batch to our leader replica of the group's partition and wait until
        every ISR member holds it (acks=-1, ``offsets.commit.timeout.ms``). Returns the client-facing
        error (:data:`APPEND_ERRORS`), NONE on success."""
        key = (OFFSETS_TOPIC, partition)
        replicas = self.broker.replicas
        p = self.cache.partition(*key)
        plog = replicas.logs.get(key)
        if p is None or plog is None or p.leader != self.broker_id:
            return ErrorCode.not_coordinator
        if len(p.isr) < self.broker.apis.min_isr(OFFSETS_TOPIC):
            return APPEND_ERRORS[ErrorCode.not_enough_replicas]
        (batch,) = parse_batches(build_batch(records))
        stored = plog.append_as_leader(batch, p.leader_epoch)
        replicas.sync(key)
        replicas.notify()
        truncations, required = plog.truncations, stored.last_offset + 1
        deadline = time.monotonic() + self.config("offsets.commit.timeout.ms") / 1000
        while True:
            p = self.cache.partition(*key)
            if p is None or p.leader != self.broker_id or replicas.logs.get(key) is not plog \
                    or plog.truncations != truncations:
                return ErrorCode.not_coordinator
            if replicas.high_watermark(p) >= required:
                return ErrorCode.none
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return APPEND_ERRORS[ErrorCode.request_timed_out]
            await replicas.wait_change(remaining)

    async def store_group(self, group: Group) -> ErrorCode:
        """Write ``group``'s metadata record (Kafka's ``storeGroup``)."""
        version = group_metadata_version(self.broker.config.inter_broker_protocol_version)
        return await self.append(group.partition, [(group_metadata_key(group.group_id),
                                                    group_metadata_value(group.stored(), version))])

    def _store_in_background(self, group: Group) -> None:
        async def store() -> None:
            error = await self.store_group(group)
            if error != ErrorCode.none:
                log.warning("storing group %s (generation %s) failed: %s", group.group_id, group.generation,
                            error.name)

        asyncio.get_running_loop().create_task(store())

    # --- the state machine ----------------------------------------------------------------------------
    def _set_state(self, group: Group, state: str) -> None:
        group.state = state
        group.state_timestamp_ms = int(time.time() * 1000)

    @staticmethod
    def _answer_join(member: Member, result: dict) -> None:
        if member.join is not None and not member.join.done():
            member.join.set_result(result)
        member.join = None

    @staticmethod
    def _answer_sync(member: Member, error: ErrorCode, assignment: bytes = b"") -> None:
        if member.sync is not None and not member.sync.done():
            member.sync.set_result((error, assignment))
        member.sync = None

    def prepare_rebalance(self, group: Group, reason: str) -> None:
        """Move ``group`` to PreparingRebalance (Kafka's ``prepareRebalance``): pending SyncGroups get
        REBALANCE_IN_PROGRESS; the join ends when all members rejoined or at the largest rebalance
        timeout, after ``group.initial.rebalance.delay.ms`` for a group that was empty."""
        if group.state == PREPARING:
            return
        now = time.monotonic()
        if group.state == COMPLETING:
            for m in group.members.values():
                m.assignment = b""
                self._answer_sync(m, ErrorCode.rebalance_in_progress)
        limit = now + max((m.rebalance_timeout_s for m in group.members.values()), default=0.0)
        group.initial = group.state == EMPTY
        if group.initial:
            group.initial_limit = limit
            group.join_deadline = min(now + self.config("group.initial.rebalance.delay.ms") / 1000, limit)
        else:
            group.join_deadline = limit
        self._set_state(group, PREPARING)
        log.info("group %s (generation %s) rebalances: %s", group.group_id, group.generation, reason)

    def maybe_complete_join(self, group: Group) -> None:
        """End the PreparingRebalance of ``group`` when every member rejoined (not during the initial
        delay) or its deadline passed."""
        if group.state != PREPARING:
            return
        everyone = all(m.join is not None for m in group.members.values()) and not group.pending
        if (everyone and not group.initial) or time.monotonic() >= group.join_deadline:
            self.complete_join(group)

    def complete_join(self, group: Group) -> None:
        """Kafka's ``onCompleteJoin``: drop members that did not rejoin, start the next generation
        (CompletingRebalance, or Empty without members, then stored), answer every waiting JoinGroup."""
        for m in [m for m in group.members.values() if m.join is None]:
            self.remove_member(group, m, "did not rejoin in time", rebalance=False)
        group.generation += 1
        group.initial = False
        if group.members:
            group.protocol = group.select_protocol()
            if group.leader not in group.members:
                group.leader = next(iter(group.members))
            self._set_state(group, COMPLETING)
            group.sync_deadline = time.monotonic() + max(m.rebalance_timeout_s for m in group.members.values())
        else:
            group.protocol, group.leader = None, None
            self._set_state(group, EMPTY)
            self._store_in_background(group)
        log.info("group %s: generation %s with %s members (protocol %s, leader %s)", group.group_id,
                 group.generation, len(group.members), group.protocol, group.leader)
        now = time.monotonic()
        for m in group.members.values():
            m.last_heartbeat = now
            self._answer_join(m, self._join_result(group, m))

    def _join_result(self, group: Group, member: Member) -> dict:
        members = []
        if member.member_id == group.leader:
            members = [(m.member_id, m.group_instance_id, m.metadata(group.protocol)) for m in group.members.values()]
        return {"error": ErrorCode.none, "generation": group.generation, "protocol_type": group.protocol_type,
                "protocol": group.protocol, "leader": group.leader or "", "member_id": member.member_id,
                "members": members}

    def remove_member(self, group: Group, member: Member, why: str, *, rebalance: bool = True) -> None:
        """Remove ``member`` (left, expired, or did not rejoin); its waiting calls get UNKNOWN_MEMBER_ID.
        With ``rebalance`` the group rebalances (or its running join may now complete)."""
        group.members.pop(member.member_id, None)
        if group.leader == member.member_id:
            group.leader = next(iter(group.members), None)
        self._answer_join(member, {"error": ErrorCode.unknown_member_id, "member_id": member.member_id})
        self._answer_sync(member, ErrorCode.unknown_member_id)
        log.info("group %s: member %s removed (%s)", group.group_id, member.member_id, why)
        if not rebalance:
            return
        if group.state in (STABLE, COMPLETING):
            self.prepare_rebalance(group, f"member {member.member_id} {why}")
        if group.state == PREPARING:
            self.maybe_complete_join(group)

    def tick(self) -> None:
        """Expire pending members and sessions, end joins and syncs whose time is up."""
        now = time.monotonic()
        for group in list(self.groups.values()):
            for member_id, deadline in list(group.pending.items()):
                if now >= deadline:
                    del group.pending[member_id]
            for m in list(group.members.values()):
                if m.join is None and m.sync is None and now - m.last_heartbeat > m.session_timeout_s:
                    self.remove_member(group, m, f"session timed out ({m.session_timeout_s:g} s)")
            if group.state == PREPARING:
                self.maybe_complete_join(group)
            elif group.state == COMPLETING and now >= group.sync_deadline:
                for m in [m for m in group.members.values() if m.sync is None]:
                    self.remove_member(group, m, "sent no SyncGroup in time", rebalance=False)
                self.prepare_rebalance(group, "the SyncGroup timed out")

    # --- FindCoordinator (10) -------------------------------------------------------------------------
    def _ensure_offsets_topic(self) -> None:
        """Create ``__consumer_offsets`` in ZooKeeper, as a ZK-mode broker auto-creates an internal topic."""
        live = [(b.id, b.rack) for b in self.cache.brokers.values()]
        if not live:
            return
        rf = min(self.config("offsets.topic.replication.factor"), len(live))
        try:
            zkpaths.create_topic(self.broker.zk, OFFSETS_TOPIC, self.config("offsets.topic.num.partitions"), rf, live,
                                 configs={"cleanup.policy": "compact"}, records=True)
            log.info("created %s (RF %s) for the group coordinator", OFFSETS_TOPIC, rf)
        except ValueError:
            pass  # created meanwhile (by another broker)
        self.broker.schedule_refresh()

    def locate(self, key_type: int, key: str) -> tuple[ErrorCode, str | None, Any]:
        """``(error, message, broker)`` for a FindCoordinator key; ``broker`` a :class:`BrokerInfo` or None."""
        if key_type == TRANSACTION_KEY:
            return ErrorCode.transactional_id_authorization_failed, "the sandbox serves no transactions", None
        if key_type != GROUP_KEY:
            return ErrorCode.invalid_request, f"unknown coordinator key type {key_type}", None
        info = self.cache.topics.get(OFFSETS_TOPIC)
        if info is None:
            self._ensure_offsets_topic()
            return ErrorCode.coordinator_not_available, f"creating {OFFSETS_TOPIC}", None
        p = info.partitions.get(self.partition_of(key))
        broker = self.cache.brokers.get(p.leader) if p is not None else None
        if broker is None:
            return ErrorCode.coordinator_not_available, "the group's partition has no leader", None
        return ErrorCode.none, None, broker

    def find_coordinator(self, request: Request) -> Any:
        m = response_module(10, request.api_version)
        body = request.body
        if request.api_version >= 4:
            answers = []
            for key in body.coordinator_keys:
                error, message, broker = self.locate(body.key_type, key)
                answers.append(build(m.Coordinator, key=key, node_id=broker.id if broker else -1,
                                     host=broker.host if broker else "", port=broker.port if broker else -1,
                                     error_code=error, error_message=message))
            return build(m.FindCoordinatorResponse, coordinators=tuple(answers))
        error, message, broker = self.locate(getattr(body, "key_type", GROUP_KEY), body.key)
        return build(m.FindCoordinatorResponse, error_code=error, error_message=message,
                     node_id=broker.id if broker else -1, host=broker.host if broker else "",
                     port=broker.port if broker else -1)

    # --- JoinGroup (11) ---------------------------------------------------------------------------------
    async def join_group(self, request: Request) -> Any:
        """JoinGroup (rules in the module docstring); waits until the rebalance completes."""
        version = request.api_version
        m = response_module(11, version)
        result = await self._join(request)

        def nullable(text: str | None) -> str | None:
            return text if version >= 7 else (text or "")

        ok = result["error"] == ErrorCode.none
        return build(m.JoinGroupResponse, error_code=result["error"],
                     generation_id=result.get("generation", -1) if ok else -1,
                     protocol_type=nullable(result.get("protocol_type")) if ok else nullable(None),
                     protocol_name=nullable(result.get("protocol")) if ok else nullable(None),
                     leader=result.get("leader", "") if ok else "", skip_assignment=False,
                     member_id=result.get("member_id", ""),
                     members=tuple(build(m.JoinGroupResponseMember, member_id=mid, group_instance_id=instance,
                                         metadata=data) for mid, instance, data in result.get("members", ())))

    async def _join(self, request: Request) -> dict:
        body = request.body
        group_id, member_id = body.group_id, body.member_id
        error = self.coordinator_error(group_id)
        if error is not None:
            return {"error": error, "member_id": member_id}
        if not group_id:
            return {"error": ErrorCode.invalid_group_id, "member_id": member_id}
        session_s = body.session_timeout.total_seconds()
        if not (self.config("group.min.session.timeout.ms") / 1000 <= session_s
                <= self.config("group.max.session.timeout.ms") / 1000):
            return {"error": ErrorCode.invalid_session_timeout, "member_id": member_id}
        rebalance_s = body.rebalance_timeout.total_seconds() if request.api_version >= 1 else session_s
        protocols = [(p.name, bytes(p.metadata)) for p in body.protocols]
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return {"error": ErrorCode.unknown_member_id, "member_id": member_id}
            group = self.groups[group_id] = Group(group_id, self.partition_of(group_id))
        if group.state == DEAD:
            return {"error": ErrorCode.coordinator_not_available, "member_id": member_id}
        if not group.supports(body.protocol_type, protocols):
            return {"error": ErrorCode.inconsistent_group_protocol, "member_id": member_id}
        instance = getattr(body, "group_instance_id", None)
        new = not member_id
        if new:
            member_id = f"{request.client_id or 'client'}-{uuid.uuid4()}"
            if request.api_version >= 4:  # KIP-394: the client must join again with this id
                group.pending[member_id] = time.monotonic() + session_s
                return {"error": ErrorCode.member_id_required, "member_id": member_id}
        member = group.members.get(member_id)
        if member is None:
            if member_id not in group.pending and not (new and request.api_version < 4):
                return {"error": ErrorCode.unknown_member_id, "member_id": member_id}
            group.pending.pop(member_id, None)
            member = Member(member_id, instance, request.client_id or "", request.client_host, session_s,
                            rebalance_s, protocols)
            group.members[member_id] = member
            if group.protocol_type is None or len(group.members) == 1:
                group.protocol_type = body.protocol_type
            if group.leader is None:
                group.leader = member_id
            if group.state == PREPARING and group.initial:  # InitialDelayedJoin: wait for more members
                group.join_deadline = min(
                    time.monotonic() + self.config("group.initial.rebalance.delay.ms") / 1000,
                    max(group.initial_limit, time.monotonic() + rebalance_s))
            self.prepare_rebalance(group, f"new member {member_id} joined")
        else:
            unchanged = member.protocols == protocols
            member.session_timeout_s, member.rebalance_timeout_s = session_s, rebalance_s
            member.last_heartbeat = time.monotonic()
            if group.state == COMPLETING and unchanged:
                return self._join_result(group, member)
            if group.state == STABLE and unchanged and member_id != group.leader:
                return self._join_result(group, member)
            member.protocols = protocols
            if group.state in (STABLE, COMPLETING):
                self.prepare_rebalance(group, f"member {member_id} joined again")
        if member.join is not None:  # a join sent again while the first still waits
            self._answer_join(member, {"error": ErrorCode.rebalance_in_progress, "member_id": member_id})
        member.join = asyncio.get_running_loop().create_future()
        future = member.join
        self.maybe_complete_join(group)
        return await future

    # --- SyncGroup (14) -----------------------------------------------------------------------------------
    async def sync_group(self, request: Request) -> Any:
        """SyncGroup: the leader's assignments are stored, then every member gets its own."""
        m = response_module(14, request.api_version)
        error, assignment = await self._sync(request)
        group = self.groups.get(request.body.group_id)
        ok = error == ErrorCode.none and group is not None
        return build(m.SyncGroupResponse, error_code=error, assignment=assignment,
                     protocol_type=group.protocol_type if ok else None, protocol_name=group.protocol if ok else None)

    async def _sync(self, request: Request) -> tuple[ErrorCode, bytes]:
        body = request.body
        error = self.coordinator_error(body.group_id)
        if error is not None:
            return error, b""
        group = self.groups.get(body.group_id)
        member = group.members.get(body.member_id) if group else None
        if group is None or member is None:
            return ErrorCode.unknown_member_id, b""
        if body.generation_id != group.generation:
            return ErrorCode.illegal_generation, b""
        protocol_type, protocol_name = getattr(body, "protocol_type", None), getattr(body, "protocol_name", None)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
                protocol_name is not None and protocol_name != group.protocol):
            return ErrorCode.inconsistent_group_protocol, b""
        if group.state == EMPTY:
            return ErrorCode.unknown_member_id, b""
        if group.state == PREPARING:
            return ErrorCode.rebalance_in_progress, b""
        if group.state == DEAD:
            return ErrorCode.coordinator_not_available, b""
        member.last_heartbeat = time.monotonic()
        if group.state == STABLE:
            return ErrorCode.none, member.assignment
        member.sync = asyncio.get_running_loop().create_future()
        future = member.sync
        if body.member_id == group.leader:
            assignments = {a.member_id: bytes(a.assignment) for a in body.assignments}
            asyncio.get_running_loop().create_task(self._complete_sync(group, group.generation, assignments))
        return await future

    async def _complete_sync(self, group: Group, generation: int, assignments: dict[str, bytes]) -> None:
        for m in group.members.values():
            m.assignment = assignments.get(m.member_id, b"")
        error = await self.store_group(group)
        if self.groups.get(group.group_id) is not group or group.state != COMPLETING \
                or group.generation != generation:
            return  # the group moved on (rebalance, unload) while the record was written
        if error != ErrorCode.none:
            for m in group.members.values():
                m.assignment = b""
                self._answer_sync(m, error)
            self.prepare_rebalance(group, f"storing the assignment failed ({error.name})")
            return
        self._set_state(group, STABLE)
        for m in group.members.values():
            self._answer_sync(m, ErrorCode.none, m.assignment)
        log.info("group %s: generation %s stable", group.group_id, generation)

    # --- Heartbeat (12) --------------------------------------------------------------------------------------
    def heartbeat(self, request: Request) -> Any:
        m = response_module(12, request.api_version)
        body = request.body
        error = self.coordinator_error(body.group_id)
        if error is None:
            group = self.groups.get(body.group_id)
            member = group.members.get(body.member_id) if group else None
            if group is None or group.state == EMPTY or member is None:
                error = ErrorCode.unknown_member_id
            elif group.state == DEAD:
                error = ErrorCode.coordinator_not_available
            elif body.generation_id != group.generation:
                error = ErrorCode.illegal_generation
            else:
                member.last_heartbeat = time.monotonic()
                error = ErrorCode.rebalance_in_progress if group.state == PREPARING else ErrorCode.none
        return build(m.HeartbeatResponse, error_code=error)

    # --- LeaveGroup (13) -------------------------------------------------------------------------------------
    def leave_group(self, request: Request) -> Any:
        m = response_module(13, request.api_version)
        body = request.body
        if request.api_version >= 3:
            leaving = [(x.member_id, x.group_instance_id) for x in body.members]
        else:
            leaving = [(body.member_id, None)]
        error = self.coordinator_error(body.group_id)
        if error is not None:
            return build(m.LeaveGroupResponse, error_code=error, members=())
        group = self.groups.get(body.group_id)
        results = []
        for member_id, instance in leaving:
            member = group.members.get(member_id) if group else None
            if group is not None and member_id in group.pending:
                del group.pending[member_id]
                self.maybe_complete_join(group)
                results.append((member_id, instance, ErrorCode.none))
            elif member is None:
                results.append((member_id, instance, ErrorCode.unknown_member_id))
            else:
                self.remove_member(group, member, "left the group")
                results.append((member_id, instance, ErrorCode.none))
        if request.api_version < 3:
            return build(m.LeaveGroupResponse, error_code=results[0][2])
        return build(m.LeaveGroupResponse, error_code=ErrorCode.none, members=tuple(
            build(m.MemberResponse, member_id=mid, group_instance_id=instance, error_code=e)
            for mid, instance, e in results))

    # --- OffsetCommit (8) -----------------------------------------------------------------------------------
    def _commit_check(self, body: Any) -> ErrorCode:
        """Kafka's ``validateOffsetCommit`` for a group commit (NONE: the commit may be written)."""
        error = self.coordinator_error(body.group_id)
        if error is not None:
            return error
        generation = body.generation_id_or_member_epoch
        group = self.groups.get(body.group_id)
        if group is None:
            if generation >= 0:
                return ErrorCode.illegal_generation
            self.groups[body.group_id] = Group(body.group_id, self.partition_of(body.group_id))
            return ErrorCode.none
        if group.state == DEAD:
            return ErrorCode.coordinator_not_available
        if generation < 0 and group.state == EMPTY:
            return ErrorCode.none  # a simple consumer: the group only stores offsets
        if group.state == COMPLETING:
            return ErrorCode.rebalance_in_progress
        member = group.members.get(body.member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if generation != group.generation:
            return ErrorCode.illegal_generation
        member.last_heartbeat = time.monotonic()
        return ErrorCode.none

    async def offset_commit(self, request: Request) -> Any:
        """OffsetCommit: one offset commit record per partition, answered after the acks=-1 append."""
        m = response_module(8, request.api_version)
        body = request.body
        error = self._commit_check(body)
        now_ms = int(time.time() * 1000)
        max_metadata = self.config("offset.metadata.max.bytes")
        results: dict[tuple[str, int], ErrorCode] = {}
        accepted: dict[tuple[str, int], CommittedOffset] = {}
        for topic in body.topics:
            for part in topic.partitions:
                key = (topic.name, part.partition_index)
                metadata = part.committed_metadata or ""
                if error != ErrorCode.none:
                    results[key] = error
                elif self.cache.partition(*key) is None:
                    results[key] = ErrorCode.unknown_topic_or_partition
                elif len(metadata.encode()) > max_metadata:
                    results[key] = ErrorCode.offset_metadata_too_large
                else:
                    accepted[key] = CommittedOffset(int(part.committed_offset),
                                                    int(getattr(part, "committed_leader_epoch", -1)), metadata, now_ms)
        if accepted:
            group = self.groups[body.group_id]
            written = await self.append(group.partition, [
                (offset_commit_key(body.group_id, t, p), offset_commit_value(c)) for (t, p), c in accepted.items()])
            if written == ErrorCode.none and self.groups.get(body.group_id) is group:
                group.offsets.update(accepted)
            for key in accepted:
                results[key] = written
        by_topic: dict[str, list] = {}
        for (topic, partition), code in results.items():
            by_topic.setdefault(topic, []).append(build(m.OffsetCommitResponsePartition, partition_index=partition,
                                                        error_code=code))
        return build(m.OffsetCommitResponse, topics=tuple(
            build(m.OffsetCommitResponseTopic, name=t, partitions=tuple(ps)) for t, ps in by_topic.items()))

    # --- OffsetFetch (9) ---------------------------------------------------------------------------------------
    def _fetch_offsets(self, group_id: str, wanted: list[tuple[str, list[int]]] | None
                       ) -> tuple[ErrorCode, dict[str, list[tuple[int, CommittedOffset | None]]]]:
        error = self.coordinator_error(group_id)
        if error is not None:
            return error, {t: [(p, None) for p in ps] for t, ps in (wanted or [])}
        group = self.groups.get(group_id)
        offsets = group.offsets if group else {}
        found: dict[str, list[tuple[int, CommittedOffset | None]]] = {}
        if wanted is None:
            for (t, p), committed in sorted(offsets.items()):
                found.setdefault(t, []).append((p, committed))
        else:
            for t, ps in wanted:
                found[t] = [(p, offsets.get((t, p))) for p in ps]
        return ErrorCode.none, found

    def offset_fetch(self, request: Request) -> Any:
        m = response_module(9, request.api_version)
        body = request.body
        version = request.api_version

        def topics_of(mod_topic, mod_partition, found, per_partition_error):
            return tuple(build(mod_topic, name=t, partitions=tuple(
                build(mod_partition, partition_index=p, committed_offset=c.offset if c else -1,
                      committed_leader_epoch=c.leader_epoch if c else -1, metadata=c.metadata if c else "",
                      error_code=per_partition_error) for p, c in parts)) for t, parts in found.items())

        if version >= 8:
            groups = []
            for g in body.groups:
                wanted = None if g.topics is None else [(t.name, list(t.partition_indexes)) for t in g.topics]
                error, found = self._fetch_offsets(g.group_id, wanted)
                groups.append(build(m.OffsetFetchResponseGroup, group_id=g.group_id, error_code=error,
                                    topics=topics_of(m.OffsetFetchResponseTopics, m.OffsetFetchResponsePartitions,
                                                     found if error == ErrorCode.none else {}, ErrorCode.none)))
            return build(m.OffsetFetchResponse, groups=tuple(groups))
        wanted = None if body.topics is None else [(t.name, list(t.partition_indexes)) for t in body.topics]
        error, found = self._fetch_offsets(body.group_id, wanted)
        if version == 1:  # no top-level error: every partition carries it
            return build(m.OffsetFetchResponse, topics=topics_of(
                m.OffsetFetchResponseTopic, m.OffsetFetchResponsePartition, found, error))
        return build(m.OffsetFetchResponse, error_code=error, topics=topics_of(
            m.OffsetFetchResponseTopic, m.OffsetFetchResponsePartition,
            found if error == ErrorCode.none else {}, ErrorCode.none))

    # --- ListGroups (16) / DescribeGroups (15) ------------------------------------------------------------------
    def list_groups(self, request: Request) -> Any:
        """The groups this broker coordinates (every broker answers for its own, as Kafka does)."""
        m = response_module(16, request.api_version)
        states = {s.lower() for s in getattr(request.body, "states_filter", ()) or ()}
        types = {t.lower() for t in getattr(request.body, "types_filter", ()) or ()}
        listed = [g for g in self.groups.values() if g.state != DEAD
                  and (not states or g.state.lower() in states) and (not types or "classic" in types)]
        return build(m.ListGroupsResponse, error_code=ErrorCode.none, groups=tuple(
            build(m.ListedGroup, group_id=g.group_id, protocol_type=g.protocol_type or "", group_state=g.state,
                  group_type="classic") for g in sorted(listed, key=lambda g: g.group_id)))

    def describe_groups(self, request: Request) -> Any:
        """DescribeGroups: state, protocol and members (subscriptions and assignments only when Stable,
        as Kafka's ``GroupMetadata.summary``); an unknown group is reported Dead."""
        m = response_module(15, request.api_version)
        described = []
        for group_id in request.body.groups:
            error = self.coordinator_error(group_id)
            group = self.groups.get(group_id) if error is None else None
            members = ()
            if group is not None:
                stable = group.state == STABLE
                members = tuple(build(m.DescribedGroupMember, member_id=x.member_id,
                                      group_instance_id=x.group_instance_id, client_id=x.client_id,
                                      client_host=x.client_host,
                                      member_metadata=x.metadata(group.protocol) if stable else b"",
                                      member_assignment=x.assignment if stable else b"")
                                for x in group.members.values())
            described.append(build(
                m.DescribedGroup, error_code=error or ErrorCode.none, group_id=group_id,
                group_state=group.state if group else ("" if error else DEAD),
                protocol_type=(group.protocol_type or "") if group else "",
                protocol_data=(group.protocol or "") if group and group.state == STABLE else "",
                members=members, authorized_operations=-2147483648))
        return build(m.DescribeGroupsResponse, groups=tuple(described))
