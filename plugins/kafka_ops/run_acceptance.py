"""What a scale-out or decommission run found when it was first accepted, and which of the cluster's changes since
are that run's own work.

A run's ``validate`` step refuses a scale-out onto a broker that already holds replicas and a decommission of a broker
that is neither registered nor holding replicas (``kafka_ops.reassignment.check_scale_out`` /
``check_decommission``). Both are what the run itself leaves behind: a run cleared whole after it moved partitions
or stopped brokers (the advice for a run stopped from outside, or the UI's "Clear Run" on a run that succeeded) would
be refused by its own work. The first try of a run that is accepted records the asked brokers as it found them
(:func:`acceptance`, kept in the run's directory); a later try of the same run reads the record back
(:func:`own_work`) and tells its own work from anyone else's:

- scale-out: a new broker that held no replica when the run was accepted and is registered and holds replicas now
  received them from this run (its waves; the run's later steps, which compare every move with the cluster, go on
  from there);
- decommission: a broker that was registered (live) when the run was accepted and is now neither registered, nor
  fenced (KRaft: registered but down), nor holding a replica, was drained and stopped by this run (a KRaft broker
  also unregistered).

Pure: no Airflow, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kafka_ops.cluster import ClusterState
from kafka_ops.reassignment import replica_counts

#: The record's layout version (``"version"``); a record of another version is not read (no own work).
RECORD_VERSION = 1
#: The record's file name in the run's directory.
RECORD_FILE = "accepted.json"


def acceptance(mode: str, brokers: Iterable[int], state: ClusterState, at: str) -> dict[str, Any]:
    """The record of a run's first accepted try: ``{"version": 1, "mode": "scale-out" | "decommission", "brokers":
    [ids asked, sorted], "registered": [those of them registered (live) then], "replicas": {"id": replicas held then},
    "at": at}`` (``at``: when, ISO 8601 text, for the log lines of a later try)."""
    ids = sorted({int(b) for b in brokers})
    counts = replica_counts(state)
    return {"version": RECORD_VERSION, "mode": mode, "brokers": ids,
            "registered": [b for b in ids if state.has_broker(b)],
            "replicas": {str(b): int(counts.get(b, 0)) for b in ids}, "at": at}


@dataclass(frozen=True)
class OwnWork:
    """What of the cluster now is the run's own work (:func:`own_work`).

    :param moved_here: scale-out: new brokers holding replicas only this run can have moved to them (ids, sorted).
    :param stopped: decommission: brokers this run drained and stopped (ids, sorted).
    :param lines: one log line per broker above, saying why it counts as the run's own work.
    """

    moved_here: tuple[int, ...] = ()
    stopped: tuple[int, ...] = ()
    lines: tuple[str, ...] = ()

    def decommission_done(self, brokers: Iterable[int]) -> bool:
        """Every one of ``brokers`` (a decommission's, non-empty) was drained and stopped by the run: nothing is left
        to do."""
        ids = {int(b) for b in brokers}
        return bool(ids) and ids.issubset(self.stopped)


def _record_ids(record: Mapping[str, Any], key: str) -> set[int] | None:
    values = record.get(key)
    if not isinstance(values, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return None
    return set(values)


def own_work(record: Mapping[str, Any] | None, mode: str, brokers: Iterable[int], state: ClusterState,
             fenced: Iterable[int] = ()) -> OwnWork:
    """The run's own work in ``state`` (the cluster now), by the record of its first accepted try (``record``:
    :func:`acceptance`'s dict, or None when the run has none: its first try). A record of another mode, other brokers
    (params are fixed for a run: another run's directory reused), another version or a broken layout counts nothing
    (the checks refuse as for a new run). ``fenced``: KRaft brokers registered but down (DescribeCluster v2).

    Returns :class:`OwnWork` (empty without a usable record)."""
    ids = sorted({int(b) for b in brokers})
    if not isinstance(record, Mapping) or record.get("version") != RECORD_VERSION or record.get("mode") != mode:
        return OwnWork()
    asked = _record_ids(record, "brokers")
    registered_then = _record_ids(record, "registered")
    held = record.get("replicas")
    if asked != set(ids) or registered_then is None or not isinstance(held, Mapping):
        return OwnWork()
    try:
        held_then = {int(b): int(n) for b, n in held.items()}
    except (TypeError, ValueError):
        return OwnWork()
    at = str(record.get("at") or "its first try")
    counts = replica_counts(state)
    lines = []
    if mode == "scale-out":
        moved = [b for b in ids if held_then.get(b) == 0 and counts.get(b, 0) and state.has_broker(b)]
        lines = [f"broker {b} holds {counts[b]} replicas this run moved to it (it held none when the run was "
                 f"accepted at {at}): resuming" for b in moved]
        return OwnWork(moved_here=tuple(moved), lines=tuple(lines))
    down = {int(b) for b in fenced}
    stopped = [b for b in ids if b in registered_then and not state.has_broker(b) and b not in down
               and not counts.get(b, 0)]
    lines = [f"broker {b} was drained and stopped by this run (registered when the run was accepted at {at}; now "
             f"unregistered and holding no replica)" for b in stopped]
    return OwnWork(stopped=tuple(stopped), lines=tuple(lines))
