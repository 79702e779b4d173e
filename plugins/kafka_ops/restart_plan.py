"""Restart order for a rolling restart, and the resume rule.

Order (kafka_roller): a full restart takes every broker, sorted by id, with the controller moved
last so the controller fails over once, at the end; a given subset keeps the caller's order, and
the controller still goes last unless ``keep_order`` (kafka_roller does no reordering of a subset;
we move the controller by default because a controller restart is the costliest). Batches hold one
broker: never touch the next broker before the previous one has caught up (Zalando's ops notes,
seed 004; Strimzi's KafkaRoller restarts one pod at a time).

Resume: a broker whose ZooKeeper registration timestamp (``/brokers/ids/<id>`` ``"timestamp"``, ms)
is at or after the run's start counts as already restarted by this run and is skipped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime


def _check_ids(values: Iterable[object], what: str) -> list[int]:
    ids = list(values)
    bad = [v for v in ids if isinstance(v, bool) or not isinstance(v, int)]
    if bad:
        raise ValueError(f"{what} must be integer broker ids, got {bad!r}")
    return ids  # type: ignore[return-value]


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
        move_controller = True
    else:
        order = _check_ids(requested, "requested brokers")
        dups = sorted({b for b in order if order.count(b) > 1})
        if dups:
            raise ValueError(f"duplicate broker ids in the restart list: {dups}")
        unknown = [b for b in order if b not in known]
        if unknown:
            raise ValueError(f"unknown broker ids {unknown}; registered brokers are {known}")
        move_controller = not keep_order
    if move_controller and controller_id is not None and controller_id in order:
        order = [b for b in order if b != controller_id] + [controller_id]
    return order


def batches(order: Sequence[int], size: int = 1) -> list[list[int]]:
    """Split ``order`` into consecutive batches of ``size`` brokers (rolling restarts use 1).

    :raises ValueError: ``size`` < 1.
    """
    if size < 1:
        raise ValueError(f"batch size must be >= 1, got {size}")
    return [list(order[i : i + size]) for i in range(0, len(order), size)]


@dataclass(frozen=True)
class RestartPlan:
    """A resolved restart order with the reasons behind it (for the log and the Grid view).

    :param order: broker ids in restart order.
    :param batches: ``order`` split into batches of 1.
    :param controller_id: controller at planning time (-1 = unknown).
    :param reasons: human-readable notes, e.g. ``"broker 2 goes last: it is the controller"``.
    """

    order: list[int]
    batches: list[list[int]]
    controller_id: int
    reasons: list[str] = field(default_factory=list)


def plan_restart(
    known_broker_ids: Iterable[int],
    controller_id: int | None,
    requested: Sequence[int] | None = None,
    *,
    keep_order: bool = False,
) -> RestartPlan:
    """:func:`restart_order` plus batches of 1 and the reasons. Same arguments and errors."""
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
    return RestartPlan(order=order, batches=batches(order, 1), controller_id=ctrl, reasons=reasons)


# -- resume ----------------------------------------------------------------------------------------


def to_epoch_ms(moment: datetime) -> int:
    """A timezone-aware datetime as ms since the epoch.

    :raises ValueError: naive datetime (its zone is ambiguous; Airflow's dates are aware, UTC).
    """
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"datetime must be timezone-aware, got naive {moment.isoformat()}")
    return int(moment.timestamp() * 1000)


def already_restarted(registration_timestamp_ms: int | None, run_start_ms: int) -> bool:
    """True when the broker registered at or after the run started (``timestamp >= run start``).

    :param registration_timestamp_ms: ``/brokers/ids/<id>`` ``"timestamp"`` in ms since the epoch,
        or None when the broker is not registered (down: not restarted yet).
    :param run_start_ms: the run's start, ms since the epoch (see :func:`to_epoch_ms`).

    The timestamp is written by the broker's own clock; keep broker and Airflow clocks in sync
    (NTP). A broker that re-registered after a ZooKeeper session expiry also looks restarted.
    """
    if registration_timestamp_ms is None:
        return False
    return registration_timestamp_ms >= run_start_ms


def pending_brokers(
    order: Sequence[int],
    registration_timestamps_ms: Mapping[int, int | None],
    run_start_ms: int,
) -> list[int]:
    """Brokers of ``order`` not yet restarted in this run (order kept).

    :param registration_timestamps_ms: broker id -> registration timestamp (ms) or None; brokers
        missing from the mapping count as not restarted.
    """
    return [b for b in order if not already_restarted(registration_timestamps_ms.get(b), run_start_ms)]


def resolve_groups(requested: list[str] | None, profile_groups: tuple[str, ...]) -> list[str] | None:
    """Which Burrow groups the gate watches: ``None`` = no lag gate, ``[]`` = the profile's list,
    else the given list (duplicates dropped, order kept). An empty result means no lag gate too."""
    if requested is None:
        return None
    groups = list(dict.fromkeys(requested or profile_groups))
    return groups or None
