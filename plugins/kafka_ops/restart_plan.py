"""Restart order for a roll, who is down, whether a reassignment is in the way, and which Burrow groups the lag
gate watches.

Order (kafka_roller): a full restart takes every broker, sorted by id, with the controller moved
last so the controller fails over once, at the end; a given subset keeps the caller's order, and
the controller still goes last unless ``keep_order`` (kafka_roller does no reordering of a subset;
we move the controller by default because a controller restart is the costliest). Batches hold one
broker: never touch the next broker before the previous one has caught up (Zalando's ops notes,
seed 004; Strimzi's KafkaRoller restarts one pod at a time).

Resume is the roll's own record (``kafka_ops.roll``), not registration timestamps.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafka_ops.plan_files import reassignment_in_progress


def _check_ids(values: Iterable[object], what: str) -> list[int]:
    ids = list(values)
    bad = [v for v in ids if isinstance(v, bool) or not isinstance(v, int)]
    if bad:
        raise ValueError(f"{what} must be integer broker ids, got {bad!r}")
    return ids  # type: ignore[return-value]


def moves_controller_last(requested: Sequence[int] | None, keep_order: bool) -> bool:
    """Whether a roll moves the controller last: always for a full roll (``requested`` empty), for a list of
    brokers unless ``keep_order`` (the operator's order, kafka_roller's). The one rule for the order
    (:func:`restart_order`) and the batches (``kafka_ops.batches.plan_batches(controller_last=...)``)."""
    return not (requested and keep_order)


def restart_order(
    known_broker_ids: Iterable[int],
    controller_id: int | None,
    requested: Sequence[int] | None = None,
    *,
    keep_order: bool = False,
) -> list[int]:
    """Broker ids in restart order.

    :param known_broker_ids: registered broker ids (e.g. ``ClusterState.broker_ids``).
    :param controller_id: the active controller's id; None or -1 = unknown (no reordering).
    :param requested: broker ids to restart; None or empty = all known brokers, sorted by id.
    :param keep_order: for an explicit ``requested`` list, keep it exactly (do not move the
        controller last). A full restart always puts the controller last.
    :returns: list of broker ids.
    :raises ValueError: ``requested`` names unknown brokers (all named), repeats ids (named), or
        holds non-integers.
    """
    known = sorted(set(_check_ids(known_broker_ids, "known broker ids")))
    if not requested:
        order = list(known)
    else:
        order = _check_ids(requested, "requested brokers")
        dups = sorted({b for b in order if order.count(b) > 1})
        if dups:
            raise ValueError(f"duplicate broker ids in the restart list: {dups}")
        unknown = [b for b in order if b not in known]
        if unknown:
            raise ValueError(f"unknown broker ids {unknown}; registered brokers are {known}")
    if moves_controller_last(requested, keep_order) and controller_id is not None and controller_id in order:
        order = [b for b in order if b != controller_id] + [controller_id]
    return order


@dataclass(frozen=True)
class RestartPlan:
    """A resolved restart order with the reasons behind it (for the log and the Grid view).

    :param order: broker ids in restart order.
    :param controller_id: controller at planning time (-1 = unknown).
    :param reasons: human-readable notes, e.g. ``"broker 2 goes last: it is the controller"``.
    """

    order: list[int]
    controller_id: int
    reasons: list[str] = field(default_factory=list)


def plan_restart(
    known_broker_ids: Iterable[int],
    controller_id: int | None,
    requested: Sequence[int] | None = None,
    *,
    keep_order: bool = False,
) -> RestartPlan:
    """:func:`restart_order` plus the reasons. Same arguments and errors."""
    order = restart_order(known_broker_ids, controller_id, requested, keep_order=keep_order)
    ctrl = -1 if controller_id is None else controller_id
    reasons = []
    if not requested:
        reasons.append(f"all registered brokers, by id: {sorted(order)}")
    else:
        reasons.append(f"requested brokers: {list(requested)}")
    if ctrl in order:
        if order[-1] == ctrl and (not requested or not keep_order):
            reasons.append(f"broker {ctrl} goes last: it is the controller")
        elif keep_order:
            reasons.append(f"broker {ctrl} is the controller; keep_order keeps it at position "
                           f"{order.index(ctrl) + 1}")
    elif ctrl >= 0:
        reasons.append(f"controller {ctrl} is not restarted")
    else:
        reasons.append("controller unknown: no reordering")
    return RestartPlan(order=order, controller_id=ctrl, reasons=reasons)


# -- who is down ----------------------------------------------------------------------------------


def down_brokers(live_ids: Iterable[int], replica_ids: Iterable[int], requested: Sequence[int] | None) -> list[str]:
    """Refusals for brokers that are down when a roll is planned (empty = none).

    The brokers a cluster knows are the live registrations plus every id in a replica list: a broker that
    holds replicas but is not registered is down (stopped, crashed, or left stopped by an earlier run). A
    roll never drops such a broker silently: "all brokers" is refused while any is down, and so is naming
    one. Naming only live brokers while another is down is left to the gate (which holds on the URP).
    """
    live = set(live_ids)
    down = sorted(set(replica_ids) - live)
    if not down:
        return []
    named = sorted(set(requested or []) & set(down))
    if named:
        return [f"broker {b} is down (it holds replicas but is not registered): start it first" for b in named]
    if not requested:
        return [f"brokers {down} are down (they hold replicas but are not registered): a roll of every broker "
                "would leave them out; start them first, or name the brokers to restart"]
    return []


def _reassigning(ongoing: Sequence[Mapping[str, Any]], limit: int) -> str:
    """``"2 partitions: orders-3: adding [4], removing [1]; orders-7: ..."``, at most ``limit`` named."""
    lines = reassignment_in_progress(ongoing[:limit])
    more = f"; {len(ongoing) - limit} more" if len(ongoing) > limit else ""
    return f"{len(ongoing)} partition{'s' * (len(ongoing) != 1)}: {'; '.join(lines)}{more}"


def reassignment_refusal(ongoing: Sequence[Mapping[str, Any]], limit: int = 5) -> str | None:
    """The refusal of a roll planned while partitions are being reassigned; None when none is.

    A reassignment's new replicas are out of sync until it ends (Kafka lists them as ``adding_replicas``,
    KIP-455), so the gate before each broker, which waits for a cluster without under-replicated partitions,
    would wait on a copy that may take hours, and a stop in between restarts the copy's fetchers. The roll is
    refused before anything is touched; the operator lets the reassignment finish or cancels it.

    :param ongoing: ``runtime.reassignments.Reassignments.ongoing()`` output: ``[{"topic", "partition",
        "adding_replicas", "removing_replicas", ...}]``.
    :param limit: how many partitions the refusal names (the count names all).
    """
    if not ongoing:
        return None
    return (f"a partition reassignment is in progress ({_reassigning(ongoing, limit)}): its new replicas stay out of "
            "sync until it ends, so every gate would wait on them; let it finish (kafka-reassign-partitions.sh "
            "--verify) or cancel it (--cancel), then trigger the roll again")


def reassignment_hold(ongoing: Sequence[Mapping[str, Any]], limit: int = 5) -> str | None:
    """What a gate that gave up on URPs adds when partitions are being reassigned; None when none is.

    The roll's plan refuses a reassignment in progress (:func:`reassignment_refusal`), so one seen when a gate gives
    up was started during the roll (by hand, or by a tool such as Cruise Control): its new replicas are out of sync
    until it ends (``adding_replicas``, KIP-455) and hold the gate on them as URPs.

    :param ongoing: / :param limit: as for :func:`reassignment_refusal`.
    """
    if not ongoing:
        return None
    return (f"a partition reassignment started during the roll is in progress ({_reassigning(ongoing, limit)}): its "
            "new replicas stay out of sync until it ends; let it finish or cancel it (kafka-reassign-partitions.sh "
            "--cancel), then clear this task")


def resolve_groups(requested: list[str] | None, profile_groups: tuple[str, ...]) -> list[str] | None:
    """Which Burrow groups the gate watches: ``None`` = no lag gate, ``[]`` = the profile's list,
    else the given list (duplicates dropped, order kept). An empty result means no lag gate too."""
    if requested is None:
        return None
    groups = list(dict.fromkeys(requested or profile_groups))
    return groups or None
