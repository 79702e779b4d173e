"""Which roll records may go: the rules of the ``kafka_ops_roll_records_cleanup`` DAG.

A roll's record (``runtime.roll_store``: one Airflow Variable ``kafka_ops_roll__<dag_id>__<run_id>__<roll_id>`` per
run and roll) is what a run resumed by clearing its tasks reads, so that no broker is restarted twice: a failed
run's clear restarts only the brokers not done, a succeeded run's clear none. Runs keep their records when they
end, and nothing else would ever delete them. The rules:

- the run no longer exists (deleted, or its DAG is gone: ``runtime.roll_store.parse_key`` finds no DAG of this
  Airflow in the key): delete, nothing can resume it;
- the run is queued or running: keep;
- the run failed or succeeded: keep while it may still be cleared, that is for ``keep_days`` after it ended; then
  delete (a clear after that starts the roll over: a new plan, every broker of it restarted again).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

DAY_S = 86400.0


@dataclass(frozen=True)
class Verdict:
    """Whether the record goes, and why (one line naming the run's state)."""

    delete: bool
    why: str


def _ended_s(run: Mapping[str, Any]) -> float | None:
    end = run.get("end_date")
    if not end:
        return None
    try:
        return datetime.fromisoformat(str(end).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def verdict(run: Mapping[str, Any] | None, now_s: float, keep_days: float) -> Verdict:
    """What happens to a record whose run is ``run`` (the REST API's DAG run: ``state``, ``end_date`` ISO 8601;
    None: no such run), ``now_s`` seconds since the epoch, ended runs kept ``keep_days`` days after their end."""
    if run is None:
        return Verdict(True, "its run no longer exists")
    state = str(run.get("state") or "")
    if state not in ("failed", "success"):
        return Verdict(False, f"its run is {state or 'in an unknown state'}")
    ended_as = "failed" if state == "failed" else "succeeded"
    ended = _ended_s(run)
    if ended is None:
        return Verdict(False, f"its run {ended_as}; its end is not known, so it is kept")
    age_days = max(0.0, now_s - ended) / DAY_S
    if age_days > keep_days:
        return Verdict(True, f"its run {ended_as} {age_days:.1f} days ago (kept {keep_days:g} days)")
    cleared = ("clearing its failed tasks can resume it" if state == "failed"
               else "clearing it restarts no broker again")
    return Verdict(False, f"its run {ended_as} {age_days:.1f} days ago: kept {keep_days - age_days:.1f} more days, "
                          f"while {cleared}")
