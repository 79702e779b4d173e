"""Executing a reassignment plan: throttles, progress, stuck waves, and the checks before an operation.

Works on :class:`kafka_ops.plan_files.Wave` / :class:`~kafka_ops.plan_files.Move` (a loaded plan)
and :class:`kafka_ops.cluster.ClusterState` (a snapshot). Pure: no Airflow, no I/O. Sizes are bytes,
rates bytes per second, times seconds.

Throttles follow ``kafka-reassign-partitions.sh --execute --throttle`` (KIP-73, Kafka's
ReassignPartitionsCommand): topic configs ``leader.replication.throttled.replicas`` /
``follower.replication.throttled.replicas`` name the replicas whose replication traffic is limited,
broker configs ``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate`` set the
limit. Kafka only throttles replicas that are out of the ISR, so replication of partitions already
in sync is not slowed down.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafka_ops.cluster import ClusterState
from kafka_ops.plan_files import Wave, format_bytes
from kafka_ops.quorum import controllers_not_brokers

#: Broker configs (dynamic, per broker) holding the throttle rate, bytes/s (KIP-73).
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
#: Topic configs listing throttled replicas as ``"partition:broker"`` entries, comma-separated (KIP-73).
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
#: Config names to delete on teardown (what ``--verify`` removes once a reassignment is complete;
#: Kafka's tool also removes ``replica.alter.log.dirs.io.max.bytes.per.second``, which this module
#: never sets, so an operator's value of it is left alone).
THROTTLE_BROKER_KEYS = (LEADER_RATE, FOLLOWER_RATE)
THROTTLE_TOPIC_KEYS = (LEADER_REPLICAS, FOLLOWER_REPLICAS)


def _ids(values: Iterable[Any]) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


# -- throttles --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Throttles:
    """What to throttle while a wave runs.

    :param leader_replicas: topic -> ``"partition:broker"`` entries for the topic config
        ``leader.replication.throttled.replicas``: the current replicas of each partition that
        copies data (any of them may be the leader serving the new replicas).
    :param follower_replicas: topic -> entries for ``follower.replication.throttled.replicas``: the
        adding replicas (the brokers that fetch the copy).
    :param brokers: every broker that sends or receives: current replicas of those partitions plus
        the adding replicas; each gets ``leader.replication.throttled.rate`` and
        ``follower.replication.throttled.rate``.

    Topics sorted by name, entries by (partition, broker) numerically, brokers ascending.
    """

    leader_replicas: dict[str, list[str]]
    follower_replicas: dict[str, list[str]]
    brokers: tuple[int, ...]


def wave_throttles(wave: Wave) -> Throttles:
    """The throttles ``kafka-reassign-partitions.sh --execute --throttle`` sets for ``wave``.

    Kafka's ReassignPartitionsCommand: ``calculateLeaderThrottles`` (every source = current
    replica), ``calculateFollowerThrottles`` (every destination not already a source = adding
    replica), ``calculateReassigningBrokers`` (sources and destinations). Moves that copy nothing
    (only the replica order changes) are left out: Kafka's tool lists their replicas too, but they
    are in sync and so never throttled anyway.
    """
    leaders: dict[str, set[tuple[int, int]]] = {}
    followers: dict[str, set[tuple[int, int]]] = {}
    brokers: set[int] = set()
    for m in wave.moves:
        adding = m.adding
        if not adding:
            continue
        leaders.setdefault(m.topic, set()).update((m.partition, b) for b in m.current)
        followers.setdefault(m.topic, set()).update((m.partition, b) for b in adding)
        brokers.update(m.current)
        brokers.update(adding)

    def entries(by_topic: dict[str, set[tuple[int, int]]]) -> dict[str, list[str]]:
        return {t: [f"{p}:{b}" for p, b in sorted(by_topic[t])] for t in sorted(by_topic)}

    return Throttles(entries(leaders), entries(followers), tuple(sorted(brokers)))


def throttle_configs(
    throttles: Throttles, rate_bytes_per_s: int
) -> tuple[dict[int, dict[str, str]], dict[str, dict[str, str]]]:
    """Config values to set (incremental AlterConfigs SET) for ``throttles`` at ``rate_bytes_per_s``.

    :returns: ``(broker_configs, topic_configs)``: broker id -> {``leader.replication.throttled.rate``,
        ``follower.replication.throttled.rate``: rate as a string}; topic -> {
        ``leader.replication.throttled.replicas``, ``follower.replication.throttled.replicas``:
        comma-joined entries} (a key with no entries is left out). Setting them replaces earlier
        values, e.g. the previous wave's; delete :data:`THROTTLE_BROKER_KEYS` /
        :data:`THROTTLE_TOPIC_KEYS` on teardown.
    :raises ValueError: the rate is not a positive integer (bytes/s).
    """
    if isinstance(rate_bytes_per_s, bool) or not isinstance(rate_bytes_per_s, int) or rate_bytes_per_s <= 0:
        raise ValueError(f"throttle rate must be a positive integer (bytes/s), got {rate_bytes_per_s!r}")
    rate = str(rate_bytes_per_s)
    broker_configs = {b: {LEADER_RATE: rate, FOLLOWER_RATE: rate} for b in throttles.brokers}
    topic_configs: dict[str, dict[str, str]] = {}
    for topic in sorted(set(throttles.leader_replicas) | set(throttles.follower_replicas)):
        cfg = {}
        for key, by_topic in (
            (LEADER_REPLICAS, throttles.leader_replicas),
            (FOLLOWER_REPLICAS, throttles.follower_replicas),
        ):
            if by_topic.get(topic):
                cfg[key] = ",".join(by_topic[topic])
        topic_configs[topic] = cfg
    return broker_configs, topic_configs


# -- progress ---------------------------------------------------------------------------------------


def ongoing_partitions(reassignments: Iterable[Mapping[str, Any]]) -> set[tuple[str, int]]:
    """``{(topic, partition)}`` from ``KafkaAdminHook.list_partition_reassignments()`` output."""
    return {(r["topic"], r["partition"]) for r in reassignments}


def replica_sizes(normalized_log_dirs: Iterable[Mapping[str, Any]]) -> dict[tuple[str, int, int], int]:
    """``(topic, partition, broker) -> size in bytes`` from DescribeLogDirs rows.

    :param normalized_log_dirs: ``hooks.kafka_admin.normalize_log_dirs`` output (what
        ``KafkaAdminHook.describe_log_dirs`` returns): rows ``{"broker", "log_dir", "topic",
        "partition", "size_bytes", "offset_lag", "is_future"}``, or ``{"broker", "log_dir",
        "error_code"}`` for a failed log dir (skipped).

    Future replicas (``is_future``: a copy moving between log dirs of one broker, KIP-113) are
    skipped: a replica added by a reassignment is written in place. Should a replica show up in
    two log dirs, the larger size counts.
    """
    out: dict[tuple[str, int, int], int] = {}
    for row in normalized_log_dirs:
        if row.get("error_code") or row.get("is_future") or row.get("topic") is None:
            continue
        key = (row["topic"], row["partition"], row["broker"])
        out[key] = max(out.get(key, 0), int(row.get("size_bytes") or 0))
    return out


def format_duration(seconds: float) -> str:
    """``"40 s"``, ``"1 min 40 s"``, ``"2 h 5 min"`` (rounded to the second)."""
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s" if s % 60 else f"{s // 60} min"
    return f"{s // 3600} h {s % 3600 // 60} min" if s % 3600 // 60 else f"{s // 3600} h"


@dataclass(frozen=True)
class WaveProgress:
    """How far a running wave is.

    :param wave: the wave's 1-based index. :param waves_total: waves in the plan, or None.
    :param bytes_total: bytes the wave copies (:attr:`Wave.bytes`; 0 = sizes unknown).
    :param bytes_copied: bytes on the adding replicas so far (see :func:`wave_progress`).
    :param moves_done: moves no longer being reassigned. :param moves_total: moves in the wave.
    :param elapsed_s: seconds since the wave was submitted.
    :param rate_bytes_per_s: ``bytes_copied / elapsed_s`` (average since the start), None when
        ``elapsed_s`` is 0.
    :param eta_s: ``(bytes_total - bytes_copied) / rate``, None when the rate is unknown or 0.
    """

    wave: int
    waves_total: int | None
    bytes_total: int
    bytes_copied: int
    moves_done: int
    moves_total: int
    elapsed_s: float
    rate_bytes_per_s: float | None
    eta_s: float | None

    @property
    def done(self) -> bool:
        """True when no move of the wave is still being reassigned."""
        return self.moves_done == self.moves_total

    def describe(self) -> str:
        """``"wave 2/5: 0.4 of 1.2 GB copied (33 %), 12 of 34 moves done, 8.1 MB/s, about 1 min 40 s left"``.

        The copied amount uses the total's unit; the percentage is rounded down (100 % only when
        everything is copied). Without sizes: ``"wave 2/5: sizes unknown, 12 of 34 moves done"``.
        A finished wave ends in ``"done"`` instead of the time left.
        """
        head = f"wave {self.wave}/{self.waves_total}" if self.waves_total else f"wave {self.wave}"
        parts = []
        if self.bytes_total > 0:
            unit, scale = ("GB", 1e9) if self.bytes_total >= 1e9 else ("MB", 1e6)
            pct = 100 * self.bytes_copied // self.bytes_total
            parts.append(f"{self.bytes_copied / scale:.1f} of {self.bytes_total / scale:.1f} {unit} copied ({pct} %)")
        else:
            parts.append("sizes unknown")
        parts.append(f"{self.moves_done} of {self.moves_total} moves done")
        if self.bytes_total > 0 and self.rate_bytes_per_s is not None:
            parts.append(f"{format_bytes(self.rate_bytes_per_s)}/s")
        if self.done:
            parts.append("done")
        elif self.bytes_total > 0:
            parts.append(f"about {format_duration(self.eta_s)} left" if self.eta_s is not None else "time left unknown")
        return f"{head}: {', '.join(parts)}"


def wave_progress(
    wave: Wave,
    replica_sizes: Mapping[tuple[str, int, int], int],
    ongoing: set[tuple[str, int]],
    elapsed_s: float,
    waves_total: int | None = None,
) -> WaveProgress:
    """Progress of a submitted wave from DescribeLogDirs sizes and ListPartitionReassignments.

    :param replica_sizes: :func:`replica_sizes` of a fresh DescribeLogDirs.
    :param ongoing: partitions still being reassigned (:func:`ongoing_partitions`); a wave partition
        not in it is done (the wave is assumed to be submitted as a whole).
    :param elapsed_s: seconds since the wave was submitted (>= 0).
    :param waves_total: number of waves, for :meth:`WaveProgress.describe`.

    Bytes copied, per adding replica: the full partition size once the partition is done, else
    ``min(size on the adding broker, partition size)`` (a partition keeps growing while it moves;
    the plan's size is the snapshot's). Raises ValueError for a negative ``elapsed_s``.
    """
    if elapsed_s < 0:
        raise ValueError(f"elapsed_s must be >= 0, got {elapsed_s}")
    copied = 0
    done = 0
    for m in wave.moves:
        adding = m.adding
        if m.key not in ongoing:
            done += 1
            copied += m.size_bytes * len(adding)
            continue
        copied += sum(min(replica_sizes.get((m.topic, m.partition, b), 0), m.size_bytes) for b in adding)
    rate = copied / elapsed_s if elapsed_s > 0 else None
    remaining = max(0, wave.bytes - copied)
    eta = remaining / rate if rate else None
    return WaveProgress(
        wave=wave.index,
        waves_total=waves_total,
        bytes_total=wave.bytes,
        bytes_copied=copied,
        moves_done=done,
        moves_total=len(wave.moves),
        elapsed_s=elapsed_s,
        rate_bytes_per_s=rate,
        eta_s=eta,
    )


def stuck_partitions(wave: Wave, ongoing: set[tuple[str, int]]) -> list[str]:
    """Names (``"orders-3"``) of the wave's partitions still being reassigned, in wave order.

    Call it when the wave's time is up: these are the partitions to report (or cancel, with
    ``"replicas": None`` in AlterPartitionReassignments). Empty = the wave finished.
    """
    return [m.name for m in wave.moves if m.key in ongoing]


# -- checks before an operation ------------------------------------------------------------------------


def replica_counts(state: ClusterState) -> dict[int, int]:
    """Broker id -> how many replicas ``state``'s partitions assign to it (brokers holding none left out)."""
    counts: dict[int, int] = {}
    for p in state.partitions:
        for b in p.replicas:
            counts[b] = counts.get(b, 0) + 1
    return counts


def _duplicates(ids: Sequence[int]) -> list[int]:
    return sorted(b for b, n in Counter(ids).items() if n > 1)


#: At most this many topics are named in rack-diversity refusals (one reason each, plus a count).
MAX_RACK_REASONS = 5


def check_decommission(state: ClusterState, brokers: Iterable[int], voters: Iterable[int] = (),
                       fenced: Iterable[int] = (), stopped_by_run: Iterable[int] = ()) -> list[str]:
    """Why decommissioning ``brokers`` must be refused; [] = it may go ahead. ``voters``: the KRaft metadata
    quorum's voter ids (DescribeQuorum; empty in ZooKeeper mode). ``fenced``: brokers a KRaft cluster has
    registered but fenced (down; DescribeCluster v2, KIP-1073): known, though Metadata leaves them out, so one
    stopped without being unregistered may be decommissioned (its registration removed). ``stopped_by_run``: brokers
    this run drained and stopped itself in an earlier try (``kafka_ops.run_acceptance.own_work``): known, not
    refused as unknown; when some of ``brokers`` are and others not (a stop step that stopped part of them), the run
    is refused, naming the brokers left to decommission (its plan cannot drain brokers no longer registered).

    Refusals:

    - no broker given; a broker id listed twice;
    - unknown ids: neither registered (live, or fenced) nor holding replicas (a down broker that still holds
      replicas is known and may be decommissioned), ``"unknown broker ids [7]: not registered and holding no
      replicas (registered: [1, 2, 3])"``; one of them a voter of the quorum and no broker: named as a KRaft
      controller;
    - fewer brokers would remain than the largest replication factor (Kafka cannot place RF
      replicas on distinct brokers), naming a topic with that RF;
    - with racks set on the brokers (``broker.rack``): a partition spanning more racks than the
      remaining brokers have, since its rack diversity could not be kept (the planner refuses the
      same), ``"rack diversity: after removing [3, 4] only racks [rack-a, rack-b] remain, fewer than this topic
      spans: t (RF 3 over 3 racks)"``: one reason naming each such topic (its widest partition), at most
      :data:`MAX_RACK_REASONS` of them and a count of the rest.

    - a broker that is a voter too (a KRaft combined node, ``process.roles=broker,controller``):
      decommissioning it would stop a quorum member for good, and the quorum keeps counting it (its
      majority needs it), ``"brokers [2] are voters of the KRaft metadata quorum [0, 1, 2] too ..."``.

    The active controller may be decommissioned (no refusal): in ZooKeeper mode another broker wins
    the ``/controller`` election when it stops; dedicated KRaft controllers are no brokers.
    """
    ids = list(brokers)
    if not ids:
        return ["no brokers given to decommission"]
    dups = _duplicates(ids)
    if dups:
        return [f"broker ids listed twice: {_ids(dups)}"]
    registered = state.broker_ids
    counts = replica_counts(state)
    down = set(fenced)
    done = {int(b) for b in stopped_by_run}
    if done and done.issuperset(ids):
        return []
    if done:
        rest = [b for b in ids if b not in done]
        return [f"brokers {_ids(sorted(done & set(ids)))} were drained and stopped by an earlier try of this run, "
                f"brokers {_ids(rest)} were not: trigger a decommission of {_ids(rest)} (this run's plan cannot "
                f"drain brokers no longer registered)"]
    unknown = [b for b in ids if b not in registered and not counts.get(b) and b not in down]
    controllers = controllers_not_brokers(unknown, [int(v) for v in voters], registered)
    if controllers:
        return [f"{controllers}: a decommission drains and stops brokers; a controller leaves the quorum with "
                "kafka-metadata-quorum remove-controller (KIP-853)"]
    if unknown:
        fenced_text = f"; registered but fenced: {_ids(sorted(down))}" if down else ""
        return [
            f"unknown broker ids {_ids(unknown)}: not registered and holding no replicas "
            f"(registered: {_ids(registered)}{fenced_text})"
        ]
    gone = set(ids)
    remaining = [b for b in registered if b not in gone]
    removing = _ids(sorted(ids))
    reasons = []
    quorum = sorted({int(v) for v in voters})
    combined = sorted(gone & set(quorum))
    if combined:
        reasons.append(
            f"brokers {_ids(combined)} are voters of the KRaft metadata quorum {_ids(quorum)} too (combined mode, "
            f"process.roles=broker,controller): decommissioning them would stop quorum members for good while the "
            f"quorum still counts them; remove them from the quorum first (KIP-853: kafka-metadata-quorum "
            f"remove-controller) or decommission other brokers"
        )
    if state.partitions:
        max_rf = max(len(p.replicas) for p in state.partitions)
        if len(remaining) < max_rf:
            topic = min(p.topic for p in state.partitions if len(p.replicas) == max_rf)
            reasons.append(
                f"after removing {removing} only {len(remaining)} brokers remain ({_ids(remaining)}), fewer "
                f"than the replication factor {max_rf} of topic {topic}"
            )
    racks = {b.id: b.rack for b in state.brokers}
    if any(racks.values()):
        left = sorted({racks[b] for b in remaining if racks[b]})
        worst: dict[str, tuple[int, int]] = {}
        for p in state.partitions:
            spans = len({racks[r] for r in p.replicas if racks.get(r)})
            if spans > len(left) and (p.topic not in worst or spans > worst[p.topic][1]):
                worst[p.topic] = (len(p.replicas), spans)
        if worst:
            shown = ", ".join(f"{topic} (RF {worst[topic][0]} over {worst[topic][1]} racks)"
                              for topic in sorted(worst)[:MAX_RACK_REASONS])
            more = len(worst) - MAX_RACK_REASONS
            reasons.append(
                f"rack diversity: after removing {removing} only racks {_ids(left)} remain, fewer than "
                f"{'these topics span' if len(worst) > 1 else 'this topic spans'}: {shown}"
                + (f" and {more} more topic{'s' if more > 1 else ''}" if more > 0 else "")
            )
    return reasons


def check_scale_out(state: ClusterState, new_brokers: Iterable[int], registered_ok: bool = True,
                    voters: Iterable[int] = (), moved_here: Iterable[int] = ()) -> list[str]:
    """Why a scale-out onto ``new_brokers`` must be refused; [] = it may go ahead.

    Refusals: no broker given; a negative id; an id listed twice; an id that is a registered broker
    already holding replicas (``"broker 3 already holds 12 replicas: this is a rebalance, not a
    scale-out"``); an id that is not registered but still listed as a replica (a down broker, not a
    new one); an id of a KRaft controller (``voters``: the metadata quorum's, DescribeQuorum) that is no
    broker (a dedicated controller receives no partitions).

    :param registered_ok: True (default): new brokers need not be registered yet (planning ahead,
        before they start). False: every new broker must be registered now (before executing:
        AlterPartitionReassignments refuses targets that are not live brokers).
    :param moved_here: new brokers whose replicas this run moved to them in an earlier try
        (``kafka_ops.run_acceptance.own_work``): their replicas are not refused (the run goes on from there).
    """
    ids = list(new_brokers)
    if not ids:
        return ["no new brokers given"]
    negative = [b for b in ids if b < 0]
    if negative:
        return [f"broker ids must be >= 0, got {_ids(negative)}"]
    reasons = []
    dups = _duplicates(ids)
    if dups:
        reasons.append(f"broker ids listed twice: {_ids(dups)}")
    registered = set(state.broker_ids)
    counts = replica_counts(state)
    unique = list(dict.fromkeys(ids))
    own = {int(b) for b in moved_here}
    for b in unique:
        n = counts.get(b, 0)
        if b in own:  # registered, holding what this run moved there
            continue
        if n and b in registered:
            reasons.append(f"broker {b} already holds {n} replicas: this is a rebalance, not a scale-out")
        elif n:
            reasons.append(f"broker {b} is not registered but still holds {n} replicas: a down broker, not a new one")
    voter_ids = {int(v) for v in voters}
    controllers = controllers_not_brokers(unique, voter_ids, registered)
    if controllers:
        reasons.append(f"{controllers}: a controller holds no partitions; give the ids of new brokers")
    if not registered_ok:
        absent = [b for b in unique if b not in registered and not counts.get(b) and b not in voter_ids]
        if absent:
            reasons.append(
                f"new brokers {_ids(absent)} are not registered (registered: {_ids(sorted(registered))}): "
                "start them first, or set start_new_brokers to have the run start them (hosts from the "
                "connection's broker_hosts)"
            )
    return reasons


def partitions_on(state: ClusterState, broker_ids: Iterable[int]) -> list[str]:
    """Names of partitions with a replica assigned to any of ``broker_ids`` (``[]`` = holds nothing)."""
    ids = set(broker_ids)
    return [p.name for p in state.partitions if ids.intersection(p.replicas)]


def leaders_on(state: ClusterState, broker_ids: Iterable[int]) -> list[str]:
    """Names of partitions currently led by any of ``broker_ids`` (``[]`` = leads nothing)."""
    ids = set(broker_ids)
    return [p.name for p in state.partitions if p.leader in ids]
