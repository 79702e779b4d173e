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
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from sandbox import settings
from sandbox.broker.metadata import MetadataCache, PartitionState

log = logging.getLogger(__name__)


@dataclass
class Replica:
    """A local replica's log: ``leo`` in messages (float while appending), ``size_bytes``."""

    leo: float = 0.0
    size_bytes: float = 0.0
    log_start: int = 0


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
            if key not in self.replicas:
                info = self.cache.topics[p.topic]
                seeded = self.broker_id not in p.adding and info.initial_bytes > 0
                size = float(info.initial_bytes) if seeded else 0.0
                self.replicas[key] = Replica(leo=size / settings.MESSAGE_BYTES, size_bytes=size)
            if p.leader == self.broker_id and self.leader_epochs.get(key) != p.leader_epoch:
                now = time.monotonic()
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
            rate = self.cache.topics[p.topic].produce_msgs_per_s
            rate = settings.PRODUCE_MSGS_PER_S if rate is None else float(rate)
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
        """The smallest LEO across the ISR (Kafka's high watermark), as seen by the leader."""
        replica = self.replicas.get(p.key)
        if replica is None:
            return 0
        followers = self.followers.get(p.key, {})
        leos = [replica.leo] + [followers[r].leo for r in p.isr if r != self.broker_id and r in followers]
        return int(min(leos))

    def on_follower_fetch(self, follower: int, topic: str, partition: int, leo: float) -> dict:
        """Answer a follower's fetch: our LEO/size/HW; record its progress. May request ISR expansion
        (returned under ``"expand"``) when the follower reached the high watermark."""
        p = self.cache.partition(topic, partition)
        replica = self.replicas.get((topic, partition))
        if p is None or replica is None or p.leader != self.broker_id:
            return {"error": 6}  # NOT_LEADER_OR_FOLLOWER
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
            if p.key in self.replicas and p.leader not in (-1, self.broker_id) and p.leader in self.cache.brokers:
                plan.setdefault(p.leader, []).append(p)
        return plan

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
