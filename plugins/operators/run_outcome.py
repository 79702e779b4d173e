"""``run_outcome``: the run's last task, the teardown of ``lock_cluster``: it releases the cluster lock if this run
holds it, and makes the run's final state what happened.

Airflow leaves teardowns to run when a run is marked failed (it fails the running tasks, skips the pending ones
and sets no run state while a teardown is pending) and, by default, ignores a teardown's state and judges the
run by its leaf tasks, which such a run has skipped: the run would end green. This teardown has
``on_failure_fail_dagrun``: it is the run's one leaf, so the run ends as it does, and it fails when any other
task of the run failed (``kafka_ops.run_outcome``: refused, failed, or stopped from outside). Its trigger rule is
``all_done``: it also runs after a refusal before the lock (a teardown's default, ``all_done_setup_success``,
would be skipped there and the skip would count as success).

It releases the lock first (``runtime.lock_holding.release_lock``: after failures too; on success ``final_health``
has released it already, the lock store is not asked again, and the note says which task did), then writes the run's
note (rewritten, not appended: a resumed run's note says how the resume ended) and logs the full report. One task,
not two: a task start costs 0.4-3 s on a real Airflow (an ``unlock_cluster`` task of its own ran between
``final_health`` and this one until 2026-11-27). A lock it cannot release (the lock store unreachable for
``lock_timeout_s``) fails the run, the note saying how to break the lock by hand.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk.exceptions import AirflowFailException
from kafka_ops.run_outcome import TaskFailure, advice, first_failure, headline, other_failures, outcome_of
from runtime import run_report
from runtime.lock_holding import holder_of, release_lock
from runtime.run_note import note_outcome

from operators.cluster_operator import ClusterOperator


class RunOutcomeOperator(ClusterOperator):
    """Release the cluster lock if this run holds it, report the run, and fail it when any other task failed
    (the teardown of ``lock_cluster``, after ``final_health``: ``groups.cluster_guard``).

    :param settings: ``cluster`` and ``dry_run`` (values or ``FromParam``).
    :param operation: what the run does ("rolling restart"), for the note's first line.
    :param roll_ids: the run's rolls, each reported with what it did.
    :param final_task_id: the task that may have released the lock before (its XCom's ``lock_released``).
    :param lock_task_id: the task that takes the lock: a run in which it never ran (refused before it) holds no
        lock, and the lock store is not asked.
    :param lock_timeout_s: how long transient errors of the lock store are retried, seconds.
    :raises AirflowFailException: the run was refused, failed or stopped (its first failure named), or the lock
        could not be released.
    """

    ui_color = "#fff4d6"

    def __init__(self, *, settings: dict, operation: str, roll_ids: list[str] | None = None,
                 final_task_id: str = "final_health", lock_task_id: str = "lock_cluster",
                 lock_timeout_s: float = 300, **kwargs: Any) -> None:
        super().__init__(settings=settings, **kwargs)
        self.operation = operation
        self.roll_ids = list(roll_ids or [])
        self.final_task_id = final_task_id
        self.lock_task_id = lock_task_id
        self.lock_timeout_s = lock_timeout_s

    def release(self, context: Any, lock_task_ran: bool, final_succeeded: bool = False) -> tuple[str, str | None]:
        """Release the lock if this run holds it (after :meth:`resolve`): (the note's line about the lock, the error
        when it could not: the lock store unreachable for ``lock_timeout_s``). A run whose lock task never ran
        (``lock_task_ran`` False: refused before it), or a cluster whose profile is unreadable, has no lock of this
        run to release: the lock store is not asked. Nor is it when the final task succeeded in its latest try
        (``final_succeeded``) and says it released the lock: nothing of the run takes the lock after it (a
        ZooKeeper session, or a lock topic's read and write, saved at the end of every successful run). A final
        task that did not run again after a clear keeps its old XCom, hence the state as well."""
        if not lock_task_ran:
            return f"cluster lock: never taken ({self.lock_task_id} did not run)", None
        released_by_final = f"cluster lock released by {self.final_task_id} once the cluster was healthy"
        if final_succeeded and self._final_released(context):
            return released_by_final, None
        try:
            profile = self.profile
        except Exception as exc:  # noqa: BLE001 - nothing could have been locked on a cluster we cannot even read
            self.log.warning("no lock to release: %s", exc)
            return "cluster lock: none (the cluster's profile is unreadable)", None
        try:
            released = release_lock(profile, holder_of(context), self.log, self.lock_timeout_s)
        except AirflowFailException as exc:
            return "cluster lock NOT released", str(exc)
        if released:
            return "cluster lock released", None
        if self._final_released(context):
            return released_by_final, None
        return ("cluster lock not held by this run at its end (never taken, or released by the task that failed)",
                None)

    def _final_released(self, context: Any) -> bool:
        final = context["ti"].xcom_pull(task_ids=self.final_task_id, map_indexes=-1)
        return isinstance(final, dict) and bool(final.get("lock_released"))

    def execute(self, context: Any) -> str:
        cfg = self.resolve(context)
        ti = context["ti"]
        dry = self.dry_run
        try:
            crumbs = run_report.task_states(context)
            failures = run_report.failed_tasks(context, crumbs, exclude={self.task_id})
            unreadable = None
        except Exception as exc:  # noqa: BLE001 - without the states the run cannot be judged: say so, fail
            crumbs, failures, unreadable = None, [], f"task states unreadable: {exc}"[:300]
        # states unread: the lock task may have run, so release if held (a release only ever frees this run's lock)
        lock_line, lock_error = self.release(context, crumbs is None or run_report.ran(crumbs, self.lock_task_id),
                                             crumbs is not None and run_report.succeeded(crumbs, self.final_task_id))
        if lock_error:
            failures = [*failures, TaskFailure(self.task_id, error=lock_error)]
        rolls, unfinished = run_report.roll_lines(context, self.roll_ids, dry, bool(failures))
        first = first_failure(failures)
        outcome = outcome_of(failures, unfinished) if unreadable is None else "failed"
        items: list[str] = []
        if unreadable:
            items.append(unreadable)
        also = other_failures(failures, first)
        if also:
            items.append(also)
        down: list[int] = []
        try:
            profile = self.profile
        except Exception as exc:  # noqa: BLE001 - e.g. a run refused for its unknown connection
            items.append(f"cluster {cfg['cluster']!r}: {exc}"[:300])
        else:
            line, down = run_report.cluster_line(profile)
            items.append(line)
        items += rolls
        items.append(lock_line)
        next_step = advice(outcome, ti.dag_id, ti.run_id, down)
        if next_step:
            items.append(next_step)
        first_line = headline(outcome, self.operation, str(cfg["cluster"]), first, dry)
        self.log.log(logging.INFO if outcome == "succeeded" else logging.ERROR, "%s", first_line)
        for item in items:
            self.log.log(logging.WARNING if item.startswith("next:") else logging.INFO, "%s", item)
        note_outcome(context, first_line, items, self.log)
        if outcome != "succeeded":
            raise AirflowFailException(
                f"the run {outcome}" + (f" at {first.name}" if first else "") + (f": {first.error}" if first and
                                                                                first.error else ""))
        return outcome
