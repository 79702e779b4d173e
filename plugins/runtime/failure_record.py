"""Each failed task records why, for the run's closing note: Airflow's ``on_failure_callback`` of every task of
an operation (``operations.operation_dag``) pushes an XCom :data:`FAILURE_KEY` on the failed task instance:
``{"error": one line, "refused": bool, "stopped": bool, "at": seconds since the epoch}``.
``operators.run_outcome`` reads it back to name the first task that failed and its reason. A task cleared for a
resume starts without it (Airflow drops a task instance's XComs when it runs again), so a resumed run's note never
quotes a stale error. A task failed from outside (marked failed, a killed worker) records nothing, or, when it was
waiting and stopped at Airflow's SIGTERM (``runtime.stopping.TaskStopped``), ``"stopped": true``: either way the
note says the run was stopped.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from runtime.failures import RunRefused, reason
from runtime.stopping import TaskStopped

log = logging.getLogger(__name__)

FAILURE_KEY = "kafka_ops_failure"


def failure_record(exc: BaseException | None, now: float | None = None) -> dict[str, Any]:
    """The XCom value for a task that failed with ``exc`` (None: no exception known)."""
    return {"error": reason(exc) if exc is not None else "", "refused": isinstance(exc, RunRefused),
            "stopped": isinstance(exc, TaskStopped), "at": time.time() if now is None else now}


def record_failure(context: Any) -> None:
    """``on_failure_callback``: push :func:`failure_record` of ``context["exception"]`` on the failed task
    instance. Never raises (a failure callback's error would only hide the task's own)."""
    try:
        context["ti"].xcom_push(key=FAILURE_KEY, value=failure_record(context.get("exception")))
    except Exception as exc:  # noqa: BLE001 - best effort: the task's log has the reason anyway
        log.warning("the failure's reason was not recorded for the run's note: %s", exc)
