"""The replicas a broker hosts: simulated logs (offsets and sizes, no record bytes), produce
traffic on the partitions it leads, replication from leaders, ISR tracking as a leader.

The model, per replica: ``leo`` (log end offset, messages) and ``size_bytes``. A leader appends
``produce_msgs_per_s`` messages of ``settings.MESSAGE_BYTES`` while its ISR satisfies
``min.insync.replicas`` (what an ``acks=all`` producer needs). A follower fetches every
``settings.REPLICA_FETCH_INTERVAL_S`` and copies the missing bytes at most at
``settings.REPLICATION_BYTES_PER_S``, or at the throttle when the replica is listed in the topic's
``follower.replication.throttled.replicas`` (this broker's ``follower.replication.throttled.rate``)
or ``leader.replication.throttled.replicas`` (the leader's ``leader.replication.throttled.rate``)
and is not in the ISR (Kafka throttles only out-of-sync replicas, KIP-73).

As in Kafka, the leader's high watermark is the smallest LEO in the ISR; a follower joins the ISR
when its LEO reaches the high watermark, and leaves it when it has not caught up to the leader's
LEO for ``replica.lag.time.max.ms``. ISR changes go to the controller (AlterPartition).
State is persisted in ``log.dirs/replicas.json`` so a restarted broker resumes behind by its
downtime times the produce rate.

Topics with real records (created through CreateTopics, ``TopicInfo.records``) do not grow by
themselves: their replicas hold a :class:`sandbox.broker.records.PartitionLog`, ``leo`` and
``size_bytes`` follow that log, and followers copy the leader's batches over the side channel
(``record_fetch``, a long poll like Kafka's replica fetcher: the leader answers at once when it has
data the follower lacks or a newer high watermark, else after ``RECORD_FETCH_MAX_WAIT_S``). The
follower sends its log end offset and the leader epoch of its last batch; when its log diverges
from the leader's (it holds batches the leader lacks after an election) the leader tells it where to
truncate (the end offset of that epoch in the leader's log, KIP-101/KIP-279) before it copies more.
The high watermark of such a partition is the smallest log end offset the ISR members reported,
never lower than the one the replica knew before (a new leader starts from the high watermark it
learnt as a follower and knows its followers' offsets only after their next fetch), so a batch is
acknowledged to an ``acks=all`` producer only once every ISR member holds it. No unclean election:
only ISR members become leaders (see :mod:`sandbox.broker.controller`).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from sandbox import settings
from sandbox.broker.metadata import MetadataCache, PartitionState
from sandbox.broker.records import PartitionLog

RECORD_FETCH_MAX_WAIT_S = 0.5  # a follower's record fetch waits this long for new data at most
RECORD_FETCH_MAX_BYTES = 1024 * 1024  # per partition and round (replica.fetch.max.bytes)

log = logging.getLogger(__name__)


@dataclass
class Replica:
    """A local replica's log: ``leo`` in messages (float while appending), ``size_bytes``."""

    leo: float = 0.0
    size_bytes: float = 0.0
    log_start: int = 0
    hw: int = 0  # record topics: the high watermark this replica knows (as leader or from its leader)


@dataclass
class FollowerState:
    """What a leader knows of one follower (Kafka's ``Replica`` in ``Partition``)."""

    leo: float = 0.0
    last_caught_up: float = field(default_factory=time.monotonic)
    last_fetch_leader_leo: float = 0.0
    last_fetch_time: float = field(default_factory=time.monotonic)


class ReplicaManager:
    """Local replicas of broker ``broker_id`` and their roles (leader / follower)."""

    def __init__(self, broker_id: int, log_dir: Path, cache: MetadataCache, lag_time_max_s: float) -> None:
        self.broker_id = broker_id
        self.log_dir = log_dir
        self.cache = cache
        self.lag_time_max_s = lag_time_max_s
        self.replicas: dict[tuple[str, int], Replica] = {}
        self.followers: dict[tuple[str, int], dict[int, FollowerState]] = {}
        self.leader_epochs: dict[tuple[str, int], int] = {}
        # partition -> (when an ISR change was requested, the ISR it was requested from)
        self.pending_isr: dict[tuple[str, int], tuple[float, list[int]]] = {}
        self.logs: dict[tuple[str, int], PartitionLog] = {}
        self._changed: asyncio.Event | None = None
        self.fetching = True
        self._last_tick = time.monotonic()
        self._last_fetch = time.monotonic()

    # --- persistence --------------------------------------------------------------------------
    @property
    def state_file(self) -> Path:
        return self.log_dir / "replicas.json"

    def load(self) -> None:
        """Read the replicas persisted by the previous run (none on a fresh host)."""
        if self.state_file.exists():
            data = json.loads(self.state_file.read_text())
            for name, values in data.items():
                topic, _, partition = name.rpartition("-")
                self.replicas[(topic, int(partition))] = Replica(**values)

    def save(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps({f"{t}-{p}": asdict(r) for (t, p), r in self.replicas.items()}))
        tmp.replace(self.state_file)

    # --- metadata ---------------------------------------------------------------------------------
    def on_metadata(self) -> None:
        """Create replicas newly assigned here, drop those moved away, reset leader bookkeeping."""
        assigned = {p.key: p for p in self.cache.partitions() if self.broker_id in p.replicas}
        for key, p in assigned.items():
            info = self.cache.topics[p.topic]
            if key not in self.replicas:
                seeded = self.broker_id not in p.adding and info.initial_bytes > 0 and not info.records
                size = float(info.initial_bytes) if seeded else 0.0
                self.replicas[key] = Replica(leo=size / settings.MESSAGE_BYTES, size_bytes=size)
            if info.records and key not in self.logs:
                self._open_log(p, info.topic_id_text)
            if p.leader == self.broker_id and self.leader_epochs.get(key) != p.leader_epoch:
                now = time.monotonic()
                known = self.followers.get(key, {})
                if info.records:  # followers' offsets are unknown until they fetch (Kafka: -1)
                    self.followers[key] = {
                        r: known.get(r) or FollowerState(leo=0.0, last_caught_up=now)
                        for r in p.replicas
                        if r != self.broker_id
                    }
                else:
                    self.followers[key] = {
                        r: FollowerState(leo=self.replicas[key].leo if r in p.isr else 0.0, last_caught_up=now)
                        for r in p.replicas
                        if r != self.broker_id
                    }
                self.leader_epochs[key] = p.leader_epoch
            elif p.leader != self.broker_id:
                self.followers.pop(key, None)
                self.leader_epochs.pop(key, None)
            pending = self.pending_isr.get(key)
            if pending is not None and pending[1] != p.isr:  # the controller applied a change
                self.pending_isr.pop(key, None)
        for key in list(self.replicas):
            if key not in assigned:
                log.info("deleting replica %s-%s (no longer assigned here)", *key)
                del self.replicas[key]
                self.followers.pop(key, None)
                plog = self.logs.pop(key, None)
                if plog is not None:
                    plog.delete()
        self.notify()

    # --- record logs --------------------------------------------------------------------------------
    def _open_log(self, p: PartitionState, topic_id: str | None) -> None:
        plog = PartitionLog.open(self.log_dir / f"{p.topic}-{p.partition}", topic_id)
        self.logs[p.key] = plog
        replica = self.replicas[p.key]
        replica.leo, replica.size_bytes, replica.log_start = plog.leo, plog.size_bytes, plog.log_start
        replica.hw = min(replica.hw, plog.leo)

    def is_records(self, topic: str) -> bool:
        """True when ``topic`` holds real records (created through CreateTopics)."""
        info = self.cache.topics.get(topic)
        return bool(info and info.records)

    def sync(self, key: tuple[str, int]) -> None:
        """Copy a record log's end offset and size into its :class:`Replica` (what DescribeLogDirs,
        ListOffsets and the persisted state read)."""
        plog, replica = self.logs.get(key), self.replicas.get(key)
        if plog is not None and replica is not None:
            replica.leo, replica.size_bytes, replica.log_start = plog.leo, plog.size_bytes, plog.log_start
            replica.hw = min(replica.hw, plog.leo)

    def notify(self) -> None:
        """Wake everything waiting for a log or high-watermark change (acks=all produces, long-poll
        fetches of clients and followers); they check their own condition again."""
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    async def wait_change(self, timeout_s: float) -> None:
        """Wait at most ``timeout_s`` seconds for the next :meth:`notify` (returns on either)."""
        if timeout_s <= 0:
            return
        if self._changed is None:
            self._changed = asyncio.Event()
        try:
            await asyncio.wait_for(self._changed.wait(), timeout_s)
        except TimeoutError:
            pass

    # --- leader side ------------------------------------------------------------------------------
    def led_partitions(self) -> list[PartitionState]:
        return [p for p in self.cache.partitions() if p.leader == self.broker_id and p.key in self.replicas]

    def min_isr(self, topic: str, default: int) -> int:
        value = self.cache.topic_config(topic, "min.insync.replicas")
        return int(value) if value else default

    def produce_tick(self, default_min_isr: int) -> list[tuple[PartitionState, list[int]]]:
        """Append simulated traffic on led partitions; return ISR changes to request
        (``[(partition, new_isr)]``) for followers that fell behind ``replica.lag.time.max.ms``."""
        now = time.monotonic()
        dt = min(now - self._last_tick, 1.0)
        self._last_tick = now
        changes = []
        for p in self.led_partitions():
            replica = self.replicas[p.key]
            info = self.cache.topics[p.topic]
            rate = settings.PRODUCE_MSGS_PER_S if info.produce_msgs_per_s is None else float(info.produce_msgs_per_s)
            if info.records:
                rate = 0.0  # real records only: the log grows by Produce requests
            if len(p.isr) >= min(self.min_isr(p.topic, default_min_isr), len(p.replicas)):
                replica.leo += rate * dt
                replica.size_bytes += rate * dt * settings.MESSAGE_BYTES
            followers = self.followers.get(p.key, {})
            lagging = [
                r for r in p.isr
                if r != self.broker_id and now - followers.get(r, FollowerState()).last_caught_up > self.lag_time_max_s
            ]
            if lagging and not self._pending(p.key):
                changes.append((p, [r for r in p.isr if r not in lagging]))
        return changes

    def high_watermark(self, p: PartitionState) -> int:
        """The smallest LEO across the ISR (Kafka's high watermark), as seen by the leader.

        Record topics: followers whose offset is not known yet count as 0, and the result never falls
        below the high watermark the replica knew before (stored in ``Replica.hw``)."""
        replica = self.replicas.get(p.key)
        if replica is None:
            return 0
        followers = self.followers.get(p.key, {})
        plog = self.logs.get(p.key)
        if plog is None:
            leos = [replica.leo] + [followers[r].leo for r in p.isr if r != self.broker_id and r in followers]
            return int(min(leos))
        leos = [plog.leo] + [followers[r].leo if r in followers else 0 for r in p.isr if r != self.broker_id]
        replica.hw = min(max(replica.hw, int(min(leos))), plog.leo)
        return replica.hw

    def on_follower_fetch(self, follower: int, topic: str, partition: int, leo: float) -> dict:
        """Answer a follower's fetch: our LEO/size/HW; record its progress. May request ISR expansion
        (returned under ``"expand"``) when the follower reached the high watermark."""
        p = self.cache.partition(topic, partition)
        replica = self.replicas.get((topic, partition))
        if p is None or replica is None or p.leader != self.broker_id:
            return {"error": 6}  # NOT_LEADER_OR_FOLLOWER
        if p.key in self.logs:  # a record topic: only the record fetch may move it
            return {"error": 6}
        return self._track_follower(p, replica, follower, leo)

    def _track_follower(self, p: PartitionState, replica: Replica, follower: int, leo: float) -> dict:
        now = time.monotonic()
        state = self.followers.setdefault(p.key, {}).setdefault(follower, FollowerState(last_caught_up=0.0))
        if leo >= replica.leo:
            state.last_caught_up = now
        elif leo >= state.last_fetch_leader_leo:
            state.last_caught_up = state.last_fetch_time
        state.leo = min(leo, replica.leo)
        state.last_fetch_leader_leo = replica.leo
        state.last_fetch_time = now
        hw = self.high_watermark(p)
        answer = {"error": 0, "leo": replica.leo, "size": replica.size_bytes, "hw": hw}
        if follower not in p.isr and follower in p.replicas and leo >= hw and not self._pending(p.key):
            answer["expand"] = [r for r in p.replicas if r in p.isr or r == follower]
        return answer

    def on_record_fetch(self, follower: int, topic: str, partition: int, leo: int, last_epoch: int) -> dict:
        """Answer a follower's record fetch (leader side). ``leo`` is the follower's log end offset,
        ``last_epoch`` the leader epoch of its last batch (-1 when empty).

        Returns ``{"error": 0, "leo", "hw", "size", "log_start", "batches": [base64, ...]}`` (batches
        from ``leo``, at most ``RECORD_FETCH_MAX_BYTES`` bytes, the first one whole), with
        ``"expand"`` (the ISR to request) when the follower reached the high watermark, or with
        ``"truncate": offset, "epoch": e`` instead of batches when the follower's log may diverge from
        ours: ``e`` is our largest epoch ``<= last_epoch``, ``offset`` its end in our log; the follower
        truncates to the smaller of that and its own end of ``e`` (KIP-279), then fetches again.
        ``{"error": 6}`` (NOT_LEADER_OR_FOLLOWER) when this broker does not lead the partition.
        """
        p = self.cache.partition(topic, partition)
        replica = self.replicas.get((topic, partition))
        plog = self.logs.get((topic, partition))
        if p is None or replica is None or plog is None or p.leader != self.broker_id:
            return {"error": 6}
        if last_epoch >= 0:
            found, end = plog.end_for_epoch(last_epoch)
            if found != last_epoch or leo > end:  # the follower's log may diverge from ours after `end`
                return {"error": 0, "leo": plog.leo, "hw": self.high_watermark(p), "size": plog.size_bytes,
                        "log_start": plog.log_start, "truncate": end, "epoch": found}
        hw_before = replica.hw
        answer = self._track_follower(p, replica, follower, float(leo))
        if answer["hw"] > hw_before:
            self.notify()  # acks=all producers and long-polling consumers may go on
        answer["log_start"] = plog.log_start
        answer["batches"] = [
            base64.b64encode(chunk).decode() for chunk in plog.read(leo, RECORD_FETCH_MAX_BYTES, plog.leo)
        ]
        return answer

    def record_fetch_pending(self, follower_partitions: list[list]) -> bool:
        """True when a record fetch of ``[[topic, partition, leo, last_epoch, known_hw], ...]`` should be
        answered now: we have batches the follower lacks, a newer high watermark, or lost leadership."""
        for topic, partition, leo, _epoch, known_hw in follower_partitions:
            p = self.cache.partition(topic, partition)
            plog = self.logs.get((topic, partition))
            if p is None or plog is None or p.leader != self.broker_id:
                return True
            if plog.leo != leo or self.high_watermark(p) > known_hw:
                return True
        return False

    def _pending(self, key: tuple[str, int]) -> bool:
        pending = self.pending_isr.get(key)
        return pending is not None and time.monotonic() - pending[0] < 1.0

    def mark_pending(self, key: tuple[str, int]) -> None:
        """An ISR change for ``key`` was sent to the controller: send no other for a second, or until
        the metadata shows a different ISR (an AlterPartition in flight, as Kafka tracks it)."""
        p = self.cache.partition(*key)
        self.pending_isr[key] = (time.monotonic(), list(p.isr) if p else [])

    # --- follower side ----------------------------------------------------------------------------
    def fetch_plan(self) -> dict[int, list[PartitionState]]:
        """Partitions to fetch this round, grouped by their live leader broker."""
        plan: dict[int, list[PartitionState]] = {}
        if not self.fetching:
            return plan
        for p in self.cache.partitions():
            if p.key in self.logs:
                continue  # record topics: see record_fetch_plan
            if p.key in self.replicas and p.leader not in (-1, self.broker_id) and p.leader in self.cache.brokers:
                plan.setdefault(p.leader, []).append(p)
        return plan

    def record_fetch_plan(self) -> dict[int, list[PartitionState]]:
        """Record-topic partitions this broker follows, grouped by their live leader broker."""
        plan: dict[int, list[PartitionState]] = {}
        if not self.fetching:
            return plan
        for p in self.cache.partitions():
            if p.key in self.logs and p.key in self.replicas and p.leader not in (-1, self.broker_id) \
                    and p.leader in self.cache.brokers:
                plan.setdefault(p.leader, []).append(p)
        return plan

    def record_fetch_request(self, parts: list[PartitionState]) -> list[list]:
        """The ``partitions`` of a record fetch: ``[[topic, partition, leo, last_epoch, known_hw], ...]``."""
        rows = []
        for p in parts:
            plog = self.logs[p.key]
            rows.append([p.topic, p.partition, plog.leo, plog.last_epoch, self.replicas[p.key].hw])
        return rows

    def apply_record_fetch(self, leader: int, parts: list[PartitionState], answers: list[dict]) -> None:
        """Follower side: truncate where the leader says our log diverges, append the batches it sent,
        learn its high watermark. Answers of a leader that no longer leads the partition are dropped."""
        for p, answer in zip(parts, answers, strict=False):
            current = self.cache.partition(p.topic, p.partition)
            plog = self.logs.get(p.key)
            if answer.get("error") or plog is None or current is None or current.leader != leader:
                continue
            if "truncate" in answer:  # KIP-279: also up to our own end of the epoch the leader found
                target = int(answer["truncate"])
                if answer.get("epoch", -1) >= 0:
                    target = min(target, plog.end_for_epoch(int(answer["epoch"]))[1])
                plog.truncate_to(target)
            elif plog.leo > answer["leo"]:
                plog.truncate_to(int(answer["leo"]))
            for chunk in answer.get("batches", []):
                if plog.append_replicated(base64.b64decode(chunk)) is None:
                    break
            replica = self.replicas[p.key]
            replica.hw = max(replica.hw, min(int(answer["hw"]), plog.leo))
            self.sync(p.key)

    def throttled(self, p: PartitionState) -> float | None:
        """The throttle rate (bytes/s) that applies to our replica of ``p``, or None (KIP-73)."""
        if self.broker_id in p.isr:
            return None
        rates = []
        follower_list = self.cache.topic_config(p.topic, "follower.replication.throttled.replicas") or ""
        if _listed(follower_list, p.partition, self.broker_id):
            rate = self.cache.broker_config(self.broker_id, "follower.replication.throttled.rate")
            if rate:
                rates.append(float(rate))
        leader_list = self.cache.topic_config(p.topic, "leader.replication.throttled.replicas") or ""
        if _listed(leader_list, p.partition, p.leader):
            rate = self.cache.broker_config(p.leader, "leader.replication.throttled.rate")
            if rate:
                rates.append(float(rate))
        return min(rates) if rates else None

    def apply_fetch(self, answers: list[tuple[PartitionState, dict]], dt: float) -> None:
        """Copy bytes from leaders' answers within this round's budgets (unthrottled and throttled).

        A budget is shared max-min fairly among the replicas that miss bytes (water-filling): replicas
        that only miss the last round's produce take that, a lagging or new replica gets the rest. So a
        broker whose other replicas are all in sync catches up (or copies a reassigned partition) at
        the full replication rate, as a Kafka follower fills its fetch responses with the lagging
        partition's data; splitting the budget evenly across every hosted partition would slow it down
        by the number of partitions on the broker."""
        needs = []
        for p, answer in answers:
            if answer.get("error"):
                continue
            replica = self.replicas.get(p.key)
            if replica is None:
                continue
            if replica.leo > answer["leo"]:  # truncate to the leader's log (new leader epoch)
                replica.leo, replica.size_bytes = answer["leo"], answer["size"]
                continue
            needs.append((replica, answer, self.throttled(p)))
        groups: dict[float | None, list[tuple[Replica, dict]]] = {}
        for replica, answer, rate in needs:
            groups.setdefault(rate, []).append((replica, answer))
        for rate, members in groups.items():
            budget = (settings.REPLICATION_BYTES_PER_S if rate is None else rate) * dt
            members.sort(key=lambda m: max(m[1]["size"] - m[0].size_bytes, 0.0))
            for left, (replica, answer) in zip(range(len(members), 0, -1), members, strict=True):
                missing_bytes = max(answer["size"] - replica.size_bytes, 0.0)
                missing_msgs = max(answer["leo"] - replica.leo, 0.0)
                step = min(missing_bytes, budget / left)
                budget -= step
                if missing_bytes <= 0 or step >= missing_bytes:
                    replica.leo, replica.size_bytes = answer["leo"], max(answer["size"], replica.size_bytes)
                else:
                    replica.size_bytes += step
                    replica.leo += missing_msgs * step / missing_bytes


def _listed(throttled_replicas: str, partition: int, broker: int) -> bool:
    """Kafka's ``*.replication.throttled.replicas`` syntax: ``*`` or ``partition:broker,...``."""
    value = throttled_replicas.strip()
    if value == "*":
        return True
    return f"{partition}:{broker}" in {item.strip() for item in value.split(",") if item.strip()}
