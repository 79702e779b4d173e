"""The window gate: before a broker, a batch or a wave starts, go on only inside the DAG's maintenance window.

The window is the DAG's own timetable's (``kafka_timetables.MaintenanceWindowTimetable``); a DAG scheduled
otherwise (or manual-only) has no window and the gate always passes. Outside the window, per the
``window_policy`` param:

- ``wait`` (default): the task waits for the next opening *deferred* (``DateTimeTrigger``: no worker slot
  held, the run's cluster lock kept), then checks again. Waits of a minute or less are slept in the task
  instead: a trigger that fires within seconds of its deferral is exactly the case of the Airflow 3.3
  scheduler race apache/airflow#72716.
- ``fail``: the task fails at once, naming the window and when it opens next; nothing was touched.

The gate is asked only before a unit of work starts: a broker (or wave) that began inside the window
finishes even when the window closes meanwhile, so a window never closes mid-broker.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from airflow.sdk.exceptions import AirflowFailException
from kafka_ops.windows import MaintenanceWindow, judge

from runtime import stopping
from runtime.grid import show_step

#: Waits up to this many seconds are slept in the task; longer ones are deferred.
DEFER_OVER_S = 60.0
POLICIES = ("wait", "fail")


def dag_window(context: Any) -> MaintenanceWindow | None:
    """The maintenance window of the running DAG's timetable, or None (no window: always open)."""
    dag = context.get("dag")
    window = getattr(getattr(dag, "timetable", None), "window", None)
    return window if isinstance(window, MaintenanceWindow) else None


def window_gate(operator: Any, context: Any, *, what: str, policy: str, dry_run: bool,
                resume_method: str = "execute_in_window", label: Callable[[str], None] | None = None,
                now: Callable[[], datetime] = lambda: datetime.now(UTC),
                sleep: Callable[[float], None] = stopping.pause) -> None:
    """Return when ``what`` may start now; otherwise wait (deferring ``operator``) or fail, per ``policy``.

    :param what: the unit of work in words ("broker 3 (2/6)", "wave 2/5"), first in every log line.
    :param policy: ``wait`` or ``fail`` (the ``window_policy`` param).
    :param dry_run: log what the window says and go on (a dry run never waits).
    :param resume_method: the operator's method the trigger resumes (it must run the unit from its start,
        gate included).
    :param label: shows the current step in the Grid (default: the task's own label).
    :raises AirflowFailException: outside the window with ``policy="fail"``, or an unknown policy.
    :raises airflow.sdk.exceptions.TaskDeferred: (from ``operator.defer``) waiting for the next opening.
    """
    window = dag_window(context)
    if window is None:
        return
    if policy not in POLICIES:
        raise AirflowFailException(f"window_policy {policy!r}: must be one of {list(POLICIES)}")
    log = operator.log
    while True:
        at = now()
        verdict = judge(window, at)
        if verdict.open:
            log.info("%s may start: %s", what, verdict.message)
            return
        if dry_run:
            log.warning("DRY RUN: %s would NOT start now: %s (window_policy=%s)", what, verdict.message, policy)
            return
        if policy == "fail":
            raise AirflowFailException(f"{what} NOT started: {verdict.message} (window_policy=fail; nothing "
                                       "touched)")
        wait_s = (verdict.opens - at).total_seconds()
        (label or (lambda s: show_step(context, s)))(f"waiting for the window ({verdict.opens:%H:%M} UTC)")
        log.warning("%s waits: %s", what, verdict.message)
        if wait_s > DEFER_OVER_S:
            from airflow.providers.standard.triggers.temporal import DateTimeTrigger

            operator.defer(trigger=DateTimeTrigger(moment=verdict.opens), method_name=resume_method)
        sleep(max(0.0, wait_s) + 0.2)
        stopping.check(f"{what}: going on once the window opened")
