"""Batches for a rolling restart: which brokers may be down at the same time.

A serial roll (``kafka_ops.restart_plan``) restarts one broker per batch. On a large, rack-aware cluster
that is slow and needlessly cautious: brokers that share no in-sync replicas of any partition can be
stopped together without any partition losing more than one in-sync replica. :func:`plan_batches` groups
an already computed restart order into batches whose *joint* absence is as safe as stopping one broker:

* the min-ISR rule of :func:`kafka_ops.health.restart_blockers` (Strimzi KafkaRoller's ``canRoll``,
  KafkaAvailability) applied to the set of brokers instead of one broker, and
* every partition keeps a leader candidate (an in-sync replica outside the batch), so a batch never takes
  a partition offline.

pinterest/orion (``ConcurrentKafkaAction``: a dependency edge between two brokers that replicate the same
partition) and Strimzi's "Kafka Roller 2.0" proposal (strimzi/proposals: "batch the nodes that do not have
any partitions in common", then drop nodes that would hurt availability) batch brokers that share no
partition at all (:func:`disjoint_batches`, kept for comparison in ``bench/batch_sizes.py``); that rule
looks at replica lists only, not at ISR state or ``min.insync.replicas``. On a cluster with RF
equal to the number of racks and rack-aware placement both rules give the rack batches; they part where
``|replicas| - min.insync.replicas >= 2`` (e.g. RF 3 with the default ``min.insync.replicas`` 1), where
ours may stop two replicas of a partition at once, and on partitions already short of in-sync replicas,
where ours is stricter.

Pure Python, no Airflow imports. Assumes Kafka's invariant ``isr`` is a subset of ``replicas`` (a broker's
partitions are those with a replica on it, as in :meth:`ClusterState.partitions_on`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field

from kafka_ops.cluster import ClusterState, Partition
from kafka_ops.health import (
    Verdict,
    leader_imbalance,
    offline_partitions,
    restart_blockers,
    restart_gate_parts,
    under_replicated_partitions,
)

#: Allowed values of ``batch_by``: ``"none"`` = any brokers the joint rule allows; ``"rack"`` = brokers of
#: one ``broker.rack`` per batch.
BATCH_BY = ("none", "rack")


def _ids(values: Iterable[int]) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


@dataclass(frozen=True)
class Batch:
    """Brokers restarted together: all stopped, all started, then the gate before the next batch.

    :param broker_ids: broker ids in restart order (the order they appear in the roll's order).
    :param reasons: why the batch is what it is, for the log and the Grid view, e.g.
        ``"broker 2 alone: it is the controller"``, ``"brokers of rack r1 only (batch_by=rack)"``,
        ``"broker 5 not with [1, 3]: orders-3 would keep isr [7] below min.insync.replicas 2"``.
    """

    broker_ids: tuple[int, ...]
    reasons: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "broker_ids", tuple(self.broker_ids))
        object.__setattr__(self, "reasons", tuple(self.reasons))

    @property
    def label(self) -> str:
        """``"broker 2"`` for one broker, ``"brokers 0, 3, 6"`` for more."""
        if len(self.broker_ids) == 1:
            return f"broker {self.broker_ids[0]}"
        return "brokers " + ", ".join(str(b) for b in self.broker_ids)


# -- validation -----------------------------------------------------------------------------------


def _check_brokers(state: ClusterState, ids: Iterable[object], what: str) -> list[int]:
    """``ids`` as a list; ValueError for non-integers, duplicates or unregistered ids (all named)."""
    out = list(ids)
    bad = [v for v in out if isinstance(v, bool) or not isinstance(v, int)]
    if bad:
        raise ValueError(f"{what} must be integer broker ids, got {bad!r}")
    dups = sorted(b for b, n in Counter(out).items() if n > 1)
    if dups:
        raise ValueError(f"duplicate broker ids in the {what}: {dups}")
    known = set(state.broker_ids)
    unknown = sorted(b for b in out if b not in known)
    if unknown:
        raise ValueError(f"unknown broker ids {unknown}; registered brokers are {state.broker_ids}")
    return out  # type: ignore[return-value]


def _check_max_parallel(max_parallel: object) -> int:
    if isinstance(max_parallel, bool) or not isinstance(max_parallel, int) or max_parallel < 1:
        raise ValueError(f"max_parallel must be an integer >= 1, got {max_parallel!r}")
    return max_parallel


# -- the joint rule, one set at a time --------------------------------------------------------------


def _violation(p: Partition, m: int, joint: Collection[int]) -> tuple[str, list[int]] | None:
    """How ``p`` forbids stopping the brokers ``joint`` together (2+ brokers): None when it does not, else
    ``(kind, rest)`` with kind ``"under"`` (|isr| < m already, |replicas| > m), ``"offline"`` (no in-sync
    replica would be left) or ``"below"`` (rest below m), and ``rest`` = the ISR members outside ``joint``."""
    rest = [r for r in p.isr if r not in joint]
    if len(p.replicas) > m and len(set(p.isr)) < m:
        return "under", rest
    if not rest:
        return "offline", rest
    if len(p.replicas) > m and len(set(rest)) < m:
        return "below", rest
    return None


def _fragment(p: Partition, m: int, joint: Collection[int]) -> str:
    """The planner's short reason: ``"orders-3 isr [1] already below min.insync.replicas 2"``,
    ``"orders-3 would keep no in-sync replica (isr [1, 5])"``,
    ``"orders-3 would keep isr [7] below min.insync.replicas 2"``."""
    kind, rest = _violation(p, m, joint) or ("", [])
    if kind == "under":
        return f"{p.name} isr {_ids(p.isr)} already below min.insync.replicas {m}"
    if kind == "offline":
        return f"{p.name} would keep no in-sync replica (isr {_ids(p.isr)})"
    if kind == "below":
        return f"{p.name} would keep isr {_ids(rest)} below min.insync.replicas {m}"
    return f"{p.name} blocks"  # not reached: the planner's counts and _violation agree


def stop_gate(state: ClusterState, broker_ids: Sequence[int], already_stopped: Collection[int] = ()) \
        -> tuple[list[Verdict], Verdict | None]:
    """The cluster's part of the gate before stopping ``broker_ids`` together, in two parts: (what makes the stop
    unsafe, the leader imbalance or None when it is not judged). One broker not yet stopped:
    :func:`kafka_ops.health.restart_gate_parts`. A batch: offline partitions, :func:`can_stop_together`, URP and
    the leader imbalance; when ``already_stopped`` holds brokers of the batch (a resumed batch) their URPs and the
    leadership they gave up are expected, so only offline partitions and min ISR are judged.

    The caller checks that every broker of the batch is registered first (``can_stop_together`` raises for ids it
    does not know).
    """
    if len(broker_ids) == 1 and not already_stopped:
        return restart_gate_parts(state, broker_ids[0])
    blockers = can_stop_together(state, broker_ids)
    safety = [offline_partitions(state), Verdict(not blockers, blockers, "can-stop-together")]
    if already_stopped:
        return safety, None
    return [*safety, under_replicated_partitions(state)], leader_imbalance(state)


def can_stop_together(state: ClusterState, broker_ids: Collection[int]) -> list[str]:
    """Reasons the brokers ``broker_ids`` may not be down at the same time; ``[]`` = safe.

    One broker: exactly :func:`kafka_ops.health.restart_blockers` (its reasons, e.g. ``"orders-3:
    stopping broker 2 would leave isr [1] below min.insync.replicas 2 (isr [1, 2], replicas [1, 2, 3])"``).
    Two or more (the batch B): for every partition with a replica in B, with m its effective
    ``min.insync.replicas`` (topic override, else the broker default; ``state.min_insync_replicas``):

    * (a) min ISR, when ``|replicas| > m``: blocks when ``|isr| < m`` already, or ``|isr - B| < m``;
      partitions with ``|replicas| <= m`` are excepted, as in ``restart_blockers`` (Strimzi's canRoll);
    * (b) leader candidate, for every partition (RF 1 too): blocks when ``isr - B`` is empty, i.e. the
      batch would take the last in-sync replica offline and the partition with it.

    One reason per blocking partition, e.g. ``"orders-3: stopping brokers [1, 5] would leave isr [7] below
    min.insync.replicas 2 (isr [1, 5, 7], replicas [1, 5, 7])"`` or ``"t-0: stopping brokers [3] would leave
    no in-sync replica (isr [3], replicas [3])"`` (the brokers named are the batch's replicas of t-0).
    Scans every partition (O(partitions)); the planner keeps incremental counts instead.

    :raises ValueError: unknown broker ids (all named), duplicates, non-integers.
    """
    ids = _check_brokers(state, broker_ids, "brokers to stop")
    if not ids:
        return []
    if len(ids) == 1:
        return [reason for _, reason in restart_blockers(state, ids[0])]
    joint = set(ids)
    reasons = []
    for p in state.partitions:
        if joint.isdisjoint(p.replicas):
            continue
        m = state.min_insync_replicas(p.topic)
        found = _violation(p, m, joint)
        if found is None:
            continue
        kind, rest = found
        stopped = _ids(sorted(joint.intersection(p.replicas)))
        detail = f"(isr {_ids(p.isr)}, replicas {_ids(p.replicas)})"
        if kind == "under":
            reasons.append(
                f"{p.name}: isr {_ids(p.isr)} already below min.insync.replicas {m} (replicas {_ids(p.replicas)})"
            )
        elif kind == "offline":
            reasons.append(f"{p.name}: stopping brokers {stopped} would leave no in-sync replica {detail}")
        else:
            reasons.append(
                f"{p.name}: stopping brokers {stopped} would leave isr {_ids(rest)} below "
                f"min.insync.replicas {m} {detail}"
            )
    return reasons


# -- planners -----------------------------------------------------------------------------------------


@dataclass
class _Open:
    """A batch being filled.

    :param members: broker ids, in order. :param rack: the rack of its brokers (``batch_by="rack"``).
    :param reasons: the :class:`Batch` reasons so far.
    :param joinable: False for a broker that may only go alone (fails the joint rule by itself).
    :param isr_in_batch: partition index -> how many of the members are in its ISR (plan_batches).
    :param held: partition indexes with a replica on a member (disjoint_batches).
    """

    members: list[int]
    rack: str | None
    reasons: list[str]
    joinable: bool = True
    isr_in_batch: dict[int, int] = field(default_factory=dict)
    held: set[int] = field(default_factory=set)


def _controller_last(state: ClusterState, order: list[int]) -> tuple[list[int], Batch | None]:
    """(order without the controller, the controller's own batch or None when it is not restarted)."""
    ctrl, moved = _controller_apart(state, order)
    if ctrl is None:
        return order, None
    return [b for b in order if b != ctrl], Batch((ctrl,), (f"broker {ctrl} alone: it is the controller", *moved))


def _controller_apart(state: ClusterState, order: list[int]) -> tuple[int | None, list[str]]:
    """(the controller when ``order`` restarts it, else None; the reason when ``order`` did not have it last)."""
    ctrl = state.controller_id
    if ctrl < 0 or ctrl not in order:
        return None, []
    if order[-1] == ctrl:
        return ctrl, []
    return ctrl, [f"broker {ctrl} goes last: it is the controller (it was at position "
                  f"{order.index(ctrl) + 1} of {len(order)} in the order)"]


def plan_batches(
    state: ClusterState, order: Sequence[int], max_parallel: int = 1, batch_by: str = "none",
    voters: Collection[int] = (), controller_last: bool = True,
) -> list[Batch]:
    """Group the restart ``order`` into batches of brokers that may be down at the same time.

    :param state: the cluster snapshot the plan is made from (ISR as of now).
    :param order: broker ids in restart order, as :func:`kafka_ops.restart_plan.restart_order` gives them
        (controller last).
    :param max_parallel: at most this many brokers per batch (>= 1); 1 = the serial roll: one broker per
        batch, in ``order``.
    :param batch_by: ``"none"``: any brokers the joint rule allows; ``"rack"``: brokers of one
        ``broker.rack`` per batch (every broker in ``order`` needs a rack).
    :param voters: brokers of ``order`` that are KRaft quorum voters too (combined nodes,
        ``process.roles=broker,controller``): at most one per batch, as a controller roll stops one controller at
        a time (a quorum of 3 voters survives one down).
    :param controller_last: move the controller (``state.controller_id``) last (default); False keeps it where
        ``order`` has it (the roll's ``keep_order``).
    :returns: batches in restart order; every broker of ``order`` is in exactly one.
    :raises ValueError: unknown ids in ``order`` (all named), duplicates (named), non-integers;
        ``max_parallel`` not an integer >= 1; ``batch_by`` not in :data:`BATCH_BY`; with
        ``batch_by="rack"``, brokers in ``order`` without ``broker.rack`` (named).

    Rules:

    * Joint rule (:func:`can_stop_together`): brokers share a batch only when their joint absence
      (a) keeps every partition with ``|replicas| > m`` at ``|isr - batch| >= m`` (m = effective
      ``min.insync.replicas``), a partition already at ``|isr| < m`` blocking every broker holding a replica
      of it from sharing a batch, RF <= m partitions excepted as in ``restart_blockers``; and (b) leaves
      ``isr - batch`` non-empty for every partition they hold (RF 1 included). A batch of one broker is
      always formed: it is the serial roll's batch, and the gate (``can_restart``) decides when it may go;
      a broker that fails (a) or (b) on its own stays alone (reason ``"broker 4 alone: t-0 would keep no
      in-sync replica (isr [4])"``).
    * ``batch_by="rack"``: a batch holds brokers of one rack only.
    * At most one of ``voters`` per batch (reason ``"broker 2 not with [0]: both are KRaft voters (one quorum
      member down at a time)"``).
    * The controller (``state.controller_id``, when in ``order``; ZooKeeper mode) goes last, once: it joins the
      latest opened batch it is compatible with (same rules), which then goes last with the controller as its
      last broker; the roll stops it once its batch-mates are gone (``operators.broker_roll``), so their
      controlled shutdowns go through it and the controller moves once, at the end (Kafka's rolling-restart
      practice, without a batch of its own). With no compatible batch (``max_parallel`` 1, its rack's batches
      full, the joint rule) it is alone and last. If ``order`` does not have it last, it is moved last and a
      reason says so; with ``controller_last=False`` (the roll's ``keep_order`` on a list of brokers: the operator's
      order, kafka_roller's) it stays where ``order`` has it, placed like any other broker.
    * At most ``max_parallel`` brokers per batch.
    * Greedy, order-preserving: walk ``order``; each broker joins the first open batch (in the order
      batches were opened) it is compatible with (same rack for ``rack``, fewer than ``max_parallel``
      members, joint rule holds), else opens a new batch. Batches are emitted in the order they were
      opened, the controller's batch last; within a batch brokers keep ``order``'s relative order, the
      controller last.

    Cost: one pass over the partitions to index, per broker, the partitions it holds; a batch keeps the
    count of its brokers in each partition's ISR, so testing a broker against a batch visits only that
    broker's partitions (100 brokers x 100,000 partitions RF 3: well under a second).
    """
    walk = _check_brokers(state, order, "restart order")
    max_parallel = _check_max_parallel(max_parallel)
    if batch_by not in BATCH_BY:
        raise ValueError(f"batch_by must be one of {BATCH_BY}, got {batch_by!r}")
    racks = {b.id: b.rack for b in state.brokers}
    if batch_by == "rack":
        rackless = [b for b in walk if racks[b] is None]
        if rackless:
            raise ValueError(
                f"batch_by='rack' needs broker.rack on every broker to restart; brokers without a rack: {rackless}"
            )
    ctrl, moved = _controller_apart(state, walk) if controller_last else (None, [])
    quorum = {int(v) for v in voters}
    wanted = set(walk)
    walk = [b for b in walk if b != ctrl]

    # Index: per partition its slack (how many of its ISR members a batch may take), per broker the
    # partitions it holds as (partition index, broker in ISR).
    # slack = |isr| - m when |replicas| > m (rule a, which implies b), else |isr| - 1 (rule b only).
    # A batch is safe iff, for every partition it holds, (its brokers in the ISR) <= slack; slack < 0
    # (already under min ISR, or no ISR) blocks any batch holding a replica.
    held: dict[int, list[tuple[int, int]]] = {b: [] for b in wanted}
    slack: list[int] = []
    min_isr: dict[str, int] = {}
    partitions = state.partitions
    for i, p in enumerate(partitions):
        m = min_isr.get(p.topic)
        if m is None:
            m = min_isr[p.topic] = state.min_insync_replicas(p.topic)
        isr = set(p.isr)
        slack.append(len(isr) - (m if len(p.replicas) > m else 1))
        for r in set(p.replicas):
            if r in wanted:
                held[r].append((i, 1 if r in isr else 0))

    def fragment(i: int, joint: Collection[int]) -> str:
        p = partitions[i]
        return _fragment(p, min_isr[p.topic], joint)

    def alone(b: int) -> str | None:
        """Why ``b`` may not share a batch at all (it fails rule a or b by itself), else None."""
        i = next((i for i, in_isr in held[b] if in_isr > slack[i]), None)
        return None if i is None else f"broker {b} alone: {fragment(i, (b,))}"

    def place(b: int, candidates: Iterable[_Open], rejected: list[str]) -> _Open | None:
        """The first of ``candidates`` ``b`` may join (None when none), the joint rule's refusals added."""
        parts = held[b]
        for ob in candidates:
            if not ob.joinable or len(ob.members) >= max_parallel:
                continue
            if batch_by == "rack" and ob.rack != racks[b]:
                continue
            if b in quorum and quorum.intersection(ob.members):
                rejected.append(f"broker {b} not with {_ids(ob.members)}: both are KRaft voters (one quorum member "
                                "down at a time)")
                continue
            get = ob.isr_in_batch.get
            conflict = next((i for i, in_isr in parts if get(i, 0) + in_isr > slack[i]), None)
            if conflict is None:
                return ob
            rejected.append(f"broker {b} not with {_ids(ob.members)}: {fragment(conflict, set(ob.members) | {b})}")
        return None

    def join(ob: _Open, b: int, rejected: list[str]) -> None:
        ob.members.append(b)
        ob.reasons.extend(rejected)
        counts = ob.isr_in_batch
        for i, in_isr in held[b]:
            if in_isr:
                counts[i] = counts.get(i, 0) + 1

    batches: list[_Open] = []
    for b in walk:
        why = alone(b)
        if why is not None:
            batches.append(_Open([b], racks[b], [why], joinable=False))
            continue
        rejected: list[str] = []
        placed = place(b, batches, rejected)
        if placed is None:
            placed = _Open([], racks[b], [])
            if batch_by == "rack":
                placed.reasons.append(f"brokers of rack {racks[b]} only (batch_by=rack)")
            batches.append(placed)
        join(placed, b, rejected)

    if ctrl is not None:
        why = alone(ctrl)
        rejected = []
        host = None if why is not None else place(ctrl, reversed(batches), rejected)
        if host is None:
            batches.append(_Open([ctrl], racks[ctrl], [f"broker {ctrl} alone: it is the controller"]
                                 + ([why] if why is not None else []) + rejected + moved))
        else:
            mates = _ids(host.members)
            join(host, ctrl, rejected)
            host.reasons.append(f"broker {ctrl} last, with {mates}: it is the controller; it stops once they "
                                "are gone (one controller move, at the end)")
            host.reasons.extend(moved)
            batches.remove(host)
            batches.append(host)
    return [Batch(tuple(ob.members), tuple(ob.reasons)) for ob in batches]


def disjoint_batches(state: ClusterState, order: Sequence[int], max_parallel: int) -> list[Batch]:
    """Partition-disjoint batches: brokers go together only when no partition has replicas on two of them.

    The rule of pinterest/orion's concurrent actions (``ConcurrentKafkaAction.generateDependencyGraph``:
    brokers replicating the same partition depend on each other) and of Strimzi's "Kafka Roller 2.0"
    proposal ("batch the nodes that do not have any partitions in common"; Strimzi then also drops nodes
    failing its availability check, which this function does not); it looks at replica lists only, not at
    ISR state or ``min.insync.replicas``. Kept as the reference for ``bench/batch_sizes.py``.

    Same walk as :func:`plan_batches` (greedy, order-preserving, first open batch that fits, at most
    ``max_parallel`` per batch, the controller alone and last). Same errors for ``order`` and
    ``max_parallel``. Reasons name one shared partition per rejection, e.g.
    ``"broker 5 not with [1, 3]: shares orders-3 (replicas [3, 5, 8])"``.
    """
    walk = _check_brokers(state, order, "restart order")
    max_parallel = _check_max_parallel(max_parallel)
    walk, ctrl_batch = _controller_last(state, walk)
    wanted = set(walk)
    held: dict[int, list[int]] = {b: [] for b in walk}
    for i, p in enumerate(state.partitions):
        for r in set(p.replicas):
            if r in wanted:
                held[r].append(i)

    batches: list[_Open] = []
    for b in walk:
        parts = held[b]
        rejected: list[str] = []
        placed = None
        for ob in batches:
            if len(ob.members) >= max_parallel:
                continue
            shared = next((i for i in parts if i in ob.held), None)
            if shared is None:
                placed = ob
                break
            p = state.partitions[shared]
            rejected.append(f"broker {b} not with {_ids(ob.members)}: shares {p.name} (replicas {_ids(p.replicas)})")
        if placed is None:
            placed = _Open([], None, [])
            batches.append(placed)
        placed.members.append(b)
        placed.reasons.extend(rejected)
        placed.held.update(parts)

    out = [Batch(tuple(ob.members), tuple(ob.reasons)) for ob in batches]
    if ctrl_batch is not None:
        out.append(ctrl_batch)
    return out
