"""Health rules for cluster operations; each returns a :class:`Verdict` with the reasons it failed.

Pure functions over a :class:`kafka_ops.cluster.ClusterState` (and Burrow statuses for consumer
lag). The gates and waits (``probes.cluster``) apply these rules and log ``verdict.message()`` verbatim, so
every reason names the partition, broker or consumer group at fault, e.g. ``"orders-3: leader -1 (offline), isr [2]"``.

Rules and where they come from:

* :func:`offline_partitions` - no partition without a leader (Kafka's OfflinePartitionsCount;
  kafka_roller's health check).
* :func:`under_replicated_partitions` - no URP (Kafka's UnderReplicatedPartitions; kafka_roller).
* :func:`leader_imbalance` - per-broker leader imbalance <= ``leader.imbalance.per.broker.percentage``
  (Kafka controller's auto leader rebalance; kafka_roller).
* :func:`can_restart` - stopping the broker drops no partition below ``min.insync.replicas``
  (Strimzi KafkaRoller's ``canRoll`` / KafkaAvailability rule).
* :func:`consumer_lag` - every watched group is OK in Burrow (kafka_roller's ``consumer_health``);
  :func:`burrow_watches` - the cluster Burrow judges is this one.
* :func:`brokers_answer` - every broker a stop relies on answers a request sent to it (a hung broker stays in the
  metadata until its session expires).
* :func:`cluster_health` and :func:`restart_gate` combine them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kafka_ops.cluster import ClusterState, Partition


@dataclass(frozen=True)
class Verdict:
    """The outcome of a health rule.

    :param ok: True when the rule passes.
    :param reasons: why it fails, one line per partition / broker / group at fault (empty when ok).
    :param rule: short rule name (``"offline"``, ``"urp"``, ``"leader-imbalance"``, ``"can-restart"``,
        ``"consumer-lag"``, or a combination's name).
    :param parts: for a combined verdict (:func:`combine`), the verdicts it was built from.
    """

    ok: bool
    reasons: list[str] = field(default_factory=list)
    rule: str = ""
    parts: tuple[Verdict, ...] = ()

    def __bool__(self) -> bool:
        return self.ok

    def message(self, limit: int = 20) -> str:
        """One line for logs and exceptions.

        ``"<rule>: OK"``, or ``"<rule>: r1; r2; ... and N more"``; a combined verdict lists each failing
        part with its count, so one noisy rule cannot hide the others:
        ``"gate broker 1: urp (39): r1; r2; ... and 37 more | can-restart (28): ..."``.

        :param limit: at most this many reasons are spelled out in total (at least one per failing
            part); large clusters can have thousands.
        """
        head = f"{self.rule}: " if self.rule else ""
        if self.ok:
            return f"{head}OK"
        failed = [p for p in self.parts if not p.ok]
        if failed:
            per_part = max(1, limit // len(failed))
            texts = []
            for part in failed:
                shown = part.reasons[:per_part]
                more = len(part.reasons) - len(shown)
                text = "; ".join(shown) if shown else "failed"
                if more > 0:
                    text += f"; ... and {more} more"
                texts.append(f"{part.rule or 'rule'} ({len(part.reasons)}): {text}")
            return head + " | ".join(texts)
        shown = self.reasons[:limit]
        more = len(self.reasons) - len(shown)
        text = "; ".join(shown) if shown else "failed"
        if more > 0:
            text += f"; ... and {more} more"
        return head + text

    def __str__(self) -> str:
        return self.message()

    def to_dict(self) -> dict[str, object]:
        """``{"ok", "rule", "reasons"}``, JSON-able (for XCom); ``parts`` are not included."""
        return {"ok": self.ok, "rule": self.rule, "reasons": list(self.reasons)}


def _verdict(rule: str, reasons: list[str]) -> Verdict:
    return Verdict(ok=not reasons, reasons=reasons, rule=rule)


def _count(n: int, noun: str) -> str:
    """``"1 partition"``, ``"3 partitions"``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _ids(values: Iterable[int]) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


def combine(verdicts: Sequence[Verdict], rule: str = "gate") -> Verdict:
    """All of ``verdicts`` must pass. Reasons are concatenated in order, each prefixed with its rule.

    An empty sequence passes.
    """
    reasons = [f"{v.rule}: {r}" if v.rule else r for v in verdicts for r in v.reasons]
    failed_without_reason = [v for v in verdicts if not v.ok and not v.reasons]
    reasons += [f"{v.rule or 'rule'}: failed" for v in failed_without_reason]
    return Verdict(ok=all(v.ok for v in verdicts), reasons=reasons, rule=rule, parts=tuple(verdicts))


# -- partition health ----------------------------------------------------------------------------


def offline_partitions(state: ClusterState) -> Verdict:
    """Fails when any partition has no leader (``leader == -1``).

    Source: Kafka's ``kafka.controller:type=KafkaController,name=OfflinePartitionsCount``; kafka_roller's
    health check ("one or more offline partitions" = unhealthy).
    Reason format: ``"orders-3: leader -1 (offline), isr [2]"``.
    """
    return _verdict(
        "offline",
        [f"{p.name}: leader -1 (offline), isr {_ids(p.isr)}" for p in state.offline_partitions()],
    )


def under_replicated_partitions(state: ClusterState) -> Verdict:
    """Fails when any partition has fewer in-sync replicas than replicas (``|isr| < |replicas|``).

    Source: Kafka's ``kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions`` (URP);
    kafka_roller's health check ("one or more under replicated partitions" = unhealthy).
    Reason format: ``"orders-3: under-replicated, isr [1] of replicas [1, 2, 3] (missing [2, 3])"``.
    """
    reasons = []
    for p in state.under_replicated_partitions():
        missing = [r for r in p.replicas if r not in p.isr]
        reasons.append(
            f"{p.name}: under-replicated, isr {_ids(p.isr)} of replicas {_ids(p.replicas)} "
            f"(missing {_ids(missing)})"
        )
    return _verdict("urp", reasons)


def brokers_answer(unanswered: Mapping[int, str]) -> Verdict:
    """Every broker a stop relies on answers a request sent to it (``unanswered``: broker id -> why not, as
    ``hooks.kafka_admin.KafkaAdminHook.unanswered_brokers`` reports them; empty = all answered).

    The metadata cannot show a hung broker (a long GC pause, a stalled disk, a frozen VM) until its session expires
    (``zookeeper.session.timeout.ms``, 18 s by default; KRaft ``broker.session.timeout.ms``, 9 s) or the leaders drop
    it from their ISRs (``replica.lag.time.max.ms``, 30 s); until then a stop's controlled shutdown may move
    leadership onto it, and the min-ISR check counts it in-sync. Reason format: ``"broker 3 does not answer (no
    answer within 5.0 s): it is still in the metadata, so it looks in-sync; a hung broker stays there until its
    session expires"``.
    """
    return _verdict("answers", [
        f"broker {b} does not answer ({why}): it is still in the metadata, so it looks in-sync; a hung broker stays "
        "there until its session expires" for b, why in sorted(unanswered.items())])


def start_needs_answer(unanswered: Sequence[str]) -> Verdict:
    """What a stopped node registers with when it starts answers now (``unanswered``: one line per service that does
    not, as ``runtime.start_dependencies`` words them, e.g. ``"ZooKeeper zk1:2181/kafka does not answer:
    KazooTimeoutError: ..."``; empty = all answer; ``kafka_ops.start_needs`` says what that is by node and mode).

    While ZooKeeper (ZooKeeper mode) or the KRaft quorum leader does not answer, the metadata keeps calling the
    cluster healthy (nothing can change it), but a node stopped then stays down: a ZooKeeper-mode broker exits when it
    cannot connect within ``zookeeper.connection.timeout.ms``, a KRaft broker when it cannot register within
    ``initial.broker.registration.timeout.ms``; and no controller can move the stopped broker's leaders, so the
    partitions it led stay unavailable until the service is back. Reason format: ``"ZooKeeper zk1:2181/kafka does
    not answer: KazooTimeoutError: Connection time-out: a node stopped now could not register when started again,
    and nothing could move its leaders meanwhile"``.
    """
    return _verdict("registers-with", [
        f"{why}: a node stopped now could not register when started again, and nothing could move its leaders "
        "meanwhile" for why in unanswered])


def broker_caught_up(state: ClusterState, broker_id: int) -> Verdict:
    """Fails while ``broker_id`` is missing from the ISR of any partition it hosts.

    The per-broker form of "URP = 0" for the step after a restart: the restarted broker has caught
    up with every leader and rejoined every ISR (Kafka: a follower joins the ISR once its log end
    offset reaches the leader's high watermark). Unlike the cluster-wide URP rule it still holds
    when another broker is down, which a resumed run can meet.
    Reason format: ``"orders-3: broker 2 not in isr [1, 3] (leader 1)"`` (the leader adds a caught-up follower
    to the ISR, AlterPartition to the controller: one leader behind every such partition while the broker runs points
    at that leader); a partition without a leader says so: ``"orders-3: OFFLINE (no leader; isr [2], replicas down
    [2])"``.
    """
    reasons = []
    for p in state.partitions_on(broker_id):
        if broker_id in p.isr:
            continue
        if p.is_offline:
            down = [r for r in p.replicas if not state.has_broker(r)]
            reasons.append(f"{p.name}: OFFLINE (no leader; isr {_ids(p.isr)}, replicas down {_ids(down)})")
        else:
            reasons.append(f"{p.name}: broker {broker_id} not in isr {_ids(p.isr)} (leader {p.leader})")
    return _verdict("caught-up", reasons)


def broker_leadership(state: ClusterState, broker_id: int, max_percentage: float | None = None) -> Verdict:
    """Fails while ``broker_id`` does not lead enough of the partitions it is the preferred leader of.

    The per-broker form of :func:`leader_imbalance` (same rule, Kafka's
    ``leader.imbalance.per.broker.percentage``), for the step after a preferred leader election.
    Reason format: ``"broker 2 leads 3 of its 12 preferred partitions (75% imbalance > 10%): orders-1, ..."``.
    """
    limit = state.leader_imbalance_percentage if max_percentage is None else max_percentage
    preferred = state.partitions_preferring(broker_id)
    not_led = [p for p in preferred if p.leader != broker_id]
    if not preferred or 100.0 * len(not_led) / len(preferred) <= limit:
        return _verdict("leadership", [])
    pct = 100.0 * len(not_led) / len(preferred)
    names = ", ".join(p.name for p in not_led[:10]) + (", ..." if len(not_led) > 10 else "")
    return _verdict("leadership", [
        f"broker {broker_id} leads {len(preferred) - len(not_led)} of its {len(preferred)} preferred partitions "
        f"({pct:.0f}% imbalance > {limit:g}%): {names}"
    ])


def leader_imbalance_ratios(state: ClusterState) -> dict[int, tuple[int, int]]:
    """Per broker: (partitions it should lead but does not, partitions it should lead).

    "Should lead" = the broker is the partition's preferred leader (first replica). Only brokers
    that are the preferred leader of at least one partition appear (registered or not). Offline
    partitions count as not led by their preferred leader.
    """
    counts: dict[int, list[int]] = {}
    for p in state.partitions:
        preferred = p.preferred_leader
        if preferred is None:
            continue
        entry = counts.setdefault(preferred, [0, 0])
        entry[1] += 1
        if p.leader != preferred:
            entry[0] += 1
    return {b: (c[0], c[1]) for b, c in sorted(counts.items())}


def leader_imbalance(state: ClusterState, max_percentage: float | None = None) -> Verdict:
    """Fails when a broker's leader imbalance exceeds ``leader.imbalance.per.broker.percentage``.

    Rule (Kafka's controller, ``KafkaController.checkAndTriggerAutoLeaderRebalance``, the check behind
    ``auto.leader.rebalance.enable``): for each broker B, let P(B) be the partitions whose preferred
    leader (first replica) is B and N(B) those of P(B) whose current leader is not B. The imbalance
    ``100 * |N(B)| / |P(B)|`` (percent) must be <= ``leader.imbalance.per.broker.percentage``
    (Kafka default 10). kafka_roller uses the same rule for cluster health.

    :param max_percentage: threshold in percent; None = ``state.leader_imbalance_percentage``
        (read from the controller's config by the admin hook).
    Reason format: ``"broker 2: leader imbalance 50.0% > 10% (1 of 2 preferred partitions led
    elsewhere: orders-1 led by 1)"``; at most 5 partitions are listed per broker.
    """
    threshold = state.leader_imbalance_percentage if max_percentage is None else max_percentage
    reasons = []
    for broker_id, (not_led, total) in leader_imbalance_ratios(state).items():
        pct = 100.0 * not_led / total
        if pct > threshold:
            elsewhere = [p for p in state.partitions_preferring(broker_id) if p.leader != broker_id]
            listed = ", ".join(f"{p.name} led by {p.leader}" for p in elsewhere[:5])
            if len(elsewhere) > 5:
                listed += f", ... {len(elsewhere) - 5} more"
            reasons.append(
                f"broker {broker_id}: leader imbalance {pct:.1f}% > {threshold:g}% "
                f"({not_led} of {total} preferred partitions led elsewhere: {listed})"
            )
    return _verdict("leader-imbalance", reasons)


def only_leader_imbalance(verdict: Verdict) -> bool:
    """True when ``verdict`` fails and each of its failing rules is :func:`leader_imbalance` (``"leader-imbalance"``;
    a combined verdict's parts are read): no safety problem, what one preferred leader election
    (:func:`imbalance_elections`) fixes."""
    failing = [part for part in (verdict.parts or (verdict,)) if not part.ok]
    return bool(failing) and all(part.rule == "leader-imbalance" for part in failing)


def imbalance_elections(state: ClusterState, max_percentage: float | None = None) -> list[tuple[str, int]]:
    """The partitions a preferred leader election would fix a :func:`leader_imbalance` with: for each broker over
    the threshold, the partitions it should lead (first replica) but does not, where it is registered and in the
    ISR (an election the controller can do at once; ``kafka-leader-election.sh --election-type PREFERRED``).
    ``(topic, partition)`` pairs, sorted; ``[]`` when no broker is over the threshold.

    :param max_percentage: as in :func:`leader_imbalance` (None = ``leader.imbalance.per.broker.percentage``).
    """
    threshold = state.leader_imbalance_percentage if max_percentage is None else max_percentage
    over = [b for b, (not_led, total) in leader_imbalance_ratios(state).items() if 100.0 * not_led / total > threshold]
    return leadership_elections(state, over)


def leadership_elections(state: ClusterState, brokers: Iterable[int]) -> list[tuple[str, int]]:
    """The partitions whose preferred leader (first replica) is one of ``brokers`` and is not leading, where that
    broker is registered and in the ISR: what one preferred leader election (KIP-460, ``kafka-leader-election.sh
    --election-type PREFERRED``) gives back to brokers just restarted together. ``(topic, partition)`` pairs,
    sorted."""
    wanted = {b for b in brokers if state.has_broker(b)}
    return sorted((p.topic, p.partition) for p in state.partitions
                  if p.preferred_leader in wanted and p.leader != p.preferred_leader and p.preferred_leader in p.isr)


def restart_blockers(state: ClusterState, broker_id: int) -> list[tuple[Partition, str]]:
    """Partitions on ``broker_id`` that stopping it would push below ``min.insync.replicas``.

    See :func:`can_restart` for the rule. Returns (partition, reason) pairs.
    """
    blockers = []
    for p in state.partitions_on(broker_id):
        m = state.min_insync_replicas(p.topic)
        if len(p.replicas) <= m:
            # RF <= min.insync.replicas: any single stop makes it unwritable; Strimzi lets it roll.
            continue
        isr_n = len(p.isr)
        if isr_n < m:
            blockers.append(
                (p, f"{p.name}: isr {_ids(p.isr)} already below min.insync.replicas {m} "
                    f"(replicas {_ids(p.replicas)})")
            )
        elif isr_n == m and broker_id in p.isr:
            rest = [r for r in p.isr if r != broker_id]
            blockers.append(
                (p, f"{p.name}: stopping broker {broker_id} would leave isr {_ids(rest)} below "
                    f"min.insync.replicas {m} (isr {_ids(p.isr)}, replicas {_ids(p.replicas)})")
            )
    return blockers


def unavoidable_outages(state: ClusterState, broker_ids: Iterable[int], limit: int = 10) -> list[str]:
    """What a restart of ``broker_ids`` cannot keep available, one line per topic (at most ``limit`` lines, then
    one counting the rest): the partitions :func:`restart_blockers` lets roll because no wait helps them, as
    Strimzi's ``canRoll`` does:

    - a single replica (RF 1): offline while its broker restarts, ``"topic dev-logs: 3 partitions with one
      replica (on brokers [0, 1]) offline while the broker restarts"``;
    - RF <= ``min.insync.replicas`` (RF > 1): ``acks=all`` writes are refused (NotEnoughReplicas) while any of its
      replicas' brokers restarts, ``"topic audit: RF 2 <= min.insync.replicas 2: acks=all writes to its 3
      partitions refused while a replica's broker restarts"`` (only known when ``state`` was read with the topic
      configs; without them ``min.insync.replicas`` is the broker default as read).

    [] when every partition on those brokers can stay available.
    """
    ids = set(broker_ids)
    single: dict[str, tuple[int, set[int]]] = {}
    tight: dict[str, tuple[int, int, int]] = {}
    for p in state.partitions:
        if not ids.intersection(p.replicas):
            continue
        rf, m = len(p.replicas), state.min_insync_replicas(p.topic)
        if rf == 1:
            count, on = single.get(p.topic, (0, set()))
            single[p.topic] = (count + 1, on | set(p.replicas))
        elif rf <= m:
            count = tight.get(p.topic, (0, rf, m))[0]
            tight[p.topic] = (count + 1, rf, m)
    lines = [f"topic {t}: {_count(n, 'partition')} with one replica (on brokers {_ids(sorted(on))}) offline while "
             f"the broker restarts" for t, (n, on) in sorted(single.items())]
    lines += [f"topic {t}: RF {rf} <= min.insync.replicas {m}: acks=all writes to its {_count(n, 'partition')} "
              f"refused while a replica's broker restarts" for t, (n, rf, m) in sorted(tight.items())]
    if len(lines) > limit:
        lines = lines[:limit] + [f"and {len(lines) - limit} more topics"]
    return lines


def can_restart(state: ClusterState, broker_id: int) -> Verdict:
    """Fails when stopping ``broker_id`` would leave a partition below ``min.insync.replicas``.

    Rule (Strimzi KafkaRoller's ``canRoll``, KafkaAvailability): for each partition with a replica on
    the broker and ``|replicas| > m`` (m = the topic's ``min.insync.replicas`` override, else the broker
    default): block if ``|isr| < m`` (already under min ISR), or ``|isr| == m`` and the broker is in
    the ISR (stopping it would make acks=all producers fail with NotEnoughReplicas). Partitions with
    ``|replicas| <= m`` never block (they cannot survive any restart with acks=all anyway).
    A broker with no replicas can always restart.
    Reason format: ``"orders-3: stopping broker 2 would leave isr [1] below min.insync.replicas 2
    (isr [1, 2], replicas [1, 2, 3])"``.
    """
    return _verdict("can-restart", [reason for _, reason in restart_blockers(state, broker_id)])


def cluster_health(state: ClusterState, max_imbalance_percentage: float | None = None) -> Verdict:
    """kafka_roller's cluster health: no offline partitions, no URP, leader imbalance within bounds.

    :param max_imbalance_percentage: None = ``state.leader_imbalance_percentage``.
    """
    return combine(
        [
            offline_partitions(state),
            under_replicated_partitions(state),
            leader_imbalance(state, max_imbalance_percentage),
        ],
        rule="cluster-health",
    )


# -- consumer lag (Burrow) -----------------------------------------------------------------------

#: Burrow v3 consumer group statuses. Only OK passes.


@dataclass(frozen=True)
class PartitionLag:
    """A partition Burrow flags for a group.

    :param topic: topic name. :param partition: partition index.
    :param status: Burrow partition status (OK, WARN, STOP, STALL, REWIND, ...).
    :param lag: current lag in messages (offsets), or None when Burrow gives none.
    """

    topic: str
    partition: int
    status: str
    lag: int | None = None

    def describe(self) -> str:
        """``"orders-3 STALL lag 1200"``."""
        lag = f" lag {self.lag}" if self.lag is not None else ""
        return f"{self.topic}-{self.partition} {self.status}{lag}"


@dataclass(frozen=True)
class ConsumerGroupStatus:
    """Burrow's evaluation of one consumer group
    (``GET /v3/kafka/<cluster>/consumer/<group>/lag``: the status with every partition).

    :param group: consumer group id.
    :param status: Burrow status string; ``"NOTFOUND"`` also for an HTTP 404 (group unknown).
    :param total_lag: total lag in messages, or None.
    :param partitions: partitions in trouble (not OK).
    :param message: Burrow's message or the HTTP error, for the log.
    :param complete: Burrow's ``complete``: the share (0.0-1.0) of the group's partitions whose window of
        stored commits is full (``storage.intervals`` commits); None when not given.
    :param window: the span (start ms, end ms) of commit timestamps that every partition's window covers
        (the latest partition window start, the earliest partition window end), or None when unknown.
    """

    group: str
    status: str
    total_lag: int | None = None
    partitions: tuple[PartitionLag, ...] = ()
    message: str = ""
    complete: float | None = None
    window: tuple[int, int] | None = None

    @property
    def ok(self) -> bool:
        """True only for status ``OK``."""
        return self.status == "OK"

    def window_s(self, since_ms: int | None = None) -> float:
        """Seconds of commits Burrow judged for every partition of the group, counted from ``since_ms`` (ms;
        None = the whole window); 0.0 when the windows are not all full (``complete`` < 1: Burrow's evaluator
        rates a partition with fewer stored commits as OK without judging it) or unknown."""
        if self.window is None or self.complete is None or self.complete < 1.0:
            return 0.0
        start, end = self.window
        if since_ms is not None:
            start = max(start, since_ms)
        return max(0.0, (end - start) / 1000)


def judged_window_s(statuses: Iterable[ConsumerGroupStatus], since_ms: int | None = None) -> float:
    """The seconds of commits over which Burrow rated every group OK: the shortest :meth:`ConsumerGroupStatus.
    window_s` of the groups (from ``since_ms``), 0.0 when any group is not OK or has no full window, or when
    there is no group.

    Burrow rates a group over a sliding window of its last ``storage.intervals`` commits per partition (Burrow's
    evaluator rules: stopped, stalled, rewinding or lag growing over the window are not OK), so an OK whose
    window spans S seconds says what OK polls over S seconds would say; a lag gate's hysteresis
    (``lag_ok_consecutive`` polls ``healthcheck_interval_s`` apart) is met when S covers it."""
    spans = [s.window_s(since_ms) if s.ok else 0.0 for s in statuses]
    return min(spans) if spans else 0.0


def consumer_lag(statuses: Iterable[ConsumerGroupStatus]) -> Verdict:
    """Fails unless every group's Burrow status is ``OK``.

    Source: kafka_roller's ``consumer_health`` pre-stop check via Burrow; Burrow's consumer status
    evaluation (OK / WARN / ERR / STOP / STALL / REWIND; NOTFOUND = Burrow does not know the group,
    which fails: an unknown group is not a healthy one). An empty list passes (nothing watched).
    Reason format: ``"group billing: ERR, total lag 5400 (orders-3 STALL lag 1200)"``.
    """
    reasons = []
    for s in statuses:
        if s.ok:
            continue
        text = f"group {s.group}: {s.status}"
        if s.status == "NOTFOUND":
            text += " (Burrow does not know this group)"
        if s.total_lag is not None:
            text += f", total lag {s.total_lag}"
        if s.partitions:
            shown = ", ".join(pl.describe() for pl in s.partitions[:5])
            if len(s.partitions) > 5:
                shown += f", ... {len(s.partitions) - 5} more"
            text += f" ({shown})"
        reasons.append(text)
    return _verdict("consumer-lag", reasons)


def _host(server: str) -> str:
    """``"b1:9092"`` -> ``"b1"``, ``"[::1]:9092"`` -> ``"::1"`` (lowercase; ``urllib.parse``'s reading)."""
    from urllib.parse import urlsplit

    return urlsplit(f"//{server.strip()}").hostname or ""


def _resolved(host: str) -> set[str]:
    """The IP addresses ``host`` resolves to (empty when it does not)."""
    import socket

    try:
        return {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError:
        return set()


def burrow_watches(burrow_servers: Iterable[str], broker_addresses: Iterable[str],
                   resolve: Callable[[str], set[str]] = _resolved) -> bool:
    """Whether the cluster Burrow watches (its configured ``servers``, ``host:port``) is the one whose brokers are
    at ``broker_addresses`` (``host:port`` of the listener this product uses): one of Burrow's servers is on a
    broker's host. Ports are not compared: Burrow often reads another listener of the same brokers (a PLAINTEXT
    one inside the network while operators' tools use SASL_SSL); host names are compared as given
    (case-insensitive), else by the addresses they resolve to (``resolve``, a name and its IP).
    """
    burrow = {_host(s) for s in burrow_servers if s.strip()}
    brokers = {_host(a) for a in broker_addresses if a.strip()}
    if burrow & brokers:
        return True
    burrow_ips = set().union(*(resolve(h) for h in burrow)) if burrow else set()
    return bool(burrow_ips & set().union(*(resolve(h) for h in brokers))) if brokers else False


# -- the gate before restarting a broker ---------------------------------------------------------


def restart_gate_parts(state: ClusterState, broker_id: int, max_imbalance_percentage: float | None = None) \
        -> tuple[list[Verdict], Verdict]:
    """:func:`restart_gate` in its two parts: (what makes the stop unsafe: offline partitions, URP,
    :func:`can_restart`; the leader imbalance, no safety problem: one preferred leader election fixes it,
    :func:`imbalance_elections`)."""
    safety = [offline_partitions(state), under_replicated_partitions(state), can_restart(state, broker_id)]
    return safety, leader_imbalance(state, max_imbalance_percentage)


def restart_gate(
    state: ClusterState,
    broker_id: int,
    max_imbalance_percentage: float | None = None,
) -> Verdict:
    """The cluster's part of the gate before stopping ``broker_id`` in a rolling restart (the consumer-lag
    part is Burrow's, :func:`consumer_lag`, kept with its OK streak by ``runtime.lag_watch``).

    Passes only when: no offline partitions, no URP, :func:`can_restart` (min-ISR safety, Strimzi's canRoll),
    leader imbalance per broker within ``leader.imbalance.per.broker.percentage`` (:func:`restart_gate_parts`).

    :param max_imbalance_percentage: None = ``state.leader_imbalance_percentage``.
    Reasons are prefixed with the failing rule, e.g. ``"urp: orders-3: under-replicated, ..."``.
    """
    safety, imbalance = restart_gate_parts(state, broker_id, max_imbalance_percentage)
    return combine([*safety, imbalance], rule=f"gate broker {broker_id}")
