"""``run_outcome``: the run's last task, the teardown of ``check_and_lock``: it releases the cluster lock if this run
holds it, and makes the run's final state what happened.

Airflow leaves teardowns to run when a run is marked failed (it fails the running tasks, skips the pending ones
and sets no run state while a teardown is pending) and, by default, ignores a teardown's state and judges the
run by its leaf tasks, which such a run has skipped: the run would end green. This teardown has
``on_failure_fail_dagrun``: it is the run's one leaf, so the run ends as it does, and it fails when any other
task of the run failed (``kafka_ops.run_outcome``: refused, failed, or stopped from outside). Its trigger rule is
``all_done``: it also runs after a refusal before the lock (a teardown's default, ``all_done_setup_success``,
would be skipped there and the skip would count as success).

When every other task of the run succeeded (or was skipped: an empty roll, a rejected approval) and every roll
finished, it first waits until the whole cluster is healthy (``operators.cluster_checks.wait_for_cluster``, kind
``healthy``: no offline partition, no URP, leaders balanced; one look in a dry run). The run's roll records stay
(every node in them done): clearing a run that succeeded, or one of its broker tasks, finds each node finished and
restarts none again (to roll again, trigger a new run); ``kafka_ops_roll_records_cleanup`` deletes them
``keep_days`` after the run ended (``kafka_ops.stale_rolls``). A cluster still unhealthy at
``healthcheck_timeout_s`` fails the run here: clearing this task checks again. Then it releases the lock (after
failures too: ``runtime.lock_holding.release_lock``), writes the run's note (rewritten, not appended: a resumed
run's note says how the resume ended) and logs the full report. One task, not three: a task start costs 0.3-0.5 s on
a real Airflow (a ``final_health`` task of its own ran before this one until 2026-11-29, an ``unlock_cluster`` one
between them until 2026-11-27). A lock it cannot release (the lock store unreachable for ``lock_timeout_s``) fails
the run, the note saying how to break the lock by hand.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from airflow.sdk.exceptions import AirflowFailException
from kafka_ops.run_outcome import TaskFailure, advice, first_failure, headline, other_failures, outcome_of
from runtime import run_report
from runtime.failures import reason
from runtime.lock_holding import holder_of, release_lock
from runtime.run_note import MAP_INDEX_MARK, note_outcome

from operators.cluster_checks import wait_for_cluster
from operators.cluster_operator import ClusterOperator


class RunOutcomeOperator(ClusterOperator):
    """After a run that did all its work, wait until the cluster is healthy (its roll records stay: a clear resumes
    nothing); then
    release the cluster lock if this run holds it, report the run, and fail it when any other task failed or the
    cluster did not get healthy (the teardown of ``check_and_lock``, after the body: ``groups.cluster_guard``).

    :param settings: ``cluster``, ``dry_run``, ``healthcheck_interval_s`` and ``healthcheck_timeout_s`` (the final
        health wait; values or ``FromParam``).
    :param operation: what the run does ("rolling restart"), for the note's first line.
    :param roll_ids: the run's rolls, each reported with what it did (from its record).
    :param reporting_task_ids: the run's tasks that say what they did (``ClusterOperator.note_line``: a broker stop
        or start, a config change, a metadata.version bump): each that succeeded gets its line in the note, after the
        plan's.
    :param lock_task_id: the task that takes the lock: a run in which it never ran (refused before it) holds no
        lock, and the lock store is not asked.
    :param lock_timeout_s: how long transient errors of the lock store are retried, seconds.
    :raises AirflowFailException: the run was refused, failed or stopped (its first failure named), the cluster was
        not healthy by ``healthcheck_timeout_s``, or the lock could not be released.
    """

    ui_color = "#fff4d6"

    def __init__(self, *, settings: dict, operation: str, roll_ids: list[str] | None = None,
                 reporting_task_ids: list[str] | None = None, lock_task_id: str = "check_and_lock",
                 lock_timeout_s: float = 300, **kwargs: Any) -> None:
        super().__init__(settings=settings, **kwargs)
        self.operation = operation
        self.roll_ids = list(roll_ids or [])
        self.reporting_task_ids = list(reporting_task_ids or [])
        self.lock_task_id = lock_task_id
        self.lock_timeout_s = lock_timeout_s

    def release(self, context: Any, lock_task_ran: bool, refused: bool = False) -> tuple[str, str | None]:
        """Release the lock if this run holds it (after :meth:`resolve`): (the note's line about the lock, the error
        when it could not: the lock store unreachable for ``lock_timeout_s``). A run whose lock task never ran
        (``lock_task_ran`` False) or refused the run before asking for the lock (``refused``), or a cluster whose
        profile is unreadable, has no lock of this run to release: the lock store is not asked."""
        if not lock_task_ran or refused:
            return (f"cluster lock: never taken ({self.lock_task_id} "
                    f"{'refused the run first' if refused else 'did not run'})"), None
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
        return ("cluster lock not held by this run at its end (never taken, or released by the task that failed)",
                None)

    def final_health(self, context: Any) -> tuple[str | None, TaskFailure | None]:
        """The end of a run that did all its work (after :meth:`resolve`): wait until the cluster is healthy.
        Returns (the note's line about the cluster's health, None) or (None, this task's failure: still unhealthy
        at ``healthcheck_timeout_s``, or unreadable). The roll records are kept either way: a clear of this run
        reads them and restarts no node again."""
        try:
            health = wait_for_cluster(self, "healthy")
        except AirflowFailException as exc:
            self.log.error("final health: %s", exc)
            return None, TaskFailure(self.task_id, error=f"final health: {reason(exc)}", at=time.time())
        self.log.info("final health: %s; the run did its work: its roll records are kept (a clear of this run "
                      "restarts no node again; kafka_ops_roll_records_cleanup deletes them keep_days after the run)",
                      health)
        return f"final health: {health}", None

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
        # the records say what each roll did
        rolls, unfinished = run_report.roll_lines(context, self.roll_ids, dry, bool(failures))
        health = None
        if unreadable is None and outcome_of(failures, unfinished) == "succeeded":
            health, unhealthy = self.final_health(context)
            if unhealthy is not None:
                failures = [*failures, unhealthy]
        # states unread: the lock task may have run, so release if held (a release only ever frees this run's lock)
        lock_line, lock_error = self.release(context, crumbs is None or run_report.ran(crumbs, self.lock_task_id),
                                             any(f.task_id == self.lock_task_id and f.refused for f in failures))
        if lock_error:
            failures = [*failures, TaskFailure(self.task_id, error=lock_error)]
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
        if health:
            items.append(health)
        next_step = advice(outcome, ti.dag_id, ti.run_id, down)
        if next_step:  # before the details: a note too long for Airflow's limit loses its last items, never this
            items.append(next_step)
        items += run_report.plan_lines(context, crumbs, dry)
        items += run_report.done_lines(context, crumbs, self.reporting_task_ids, dry)
        items += rolls
        items.append(lock_line)
        first_line = headline(outcome, self.operation, str(cfg["cluster"]), first, dry)
        self.log.log(logging.INFO if outcome == "succeeded" else logging.ERROR, "%s", first_line)
        for item in items:
            self.log.log(logging.WARNING if item.startswith("next:") else logging.INFO, "%s", item)
        # which map index is which node helps only to clear tasks (airflow tasks clear -m): not after a success
        note_outcome(context, first_line, items, self.log,
                     keep_mark=None if outcome == "succeeded" else MAP_INDEX_MARK)
        if outcome != "succeeded":
            raise AirflowFailException(
                f"the run {outcome}" + (f" at {first.name}" if first else "") + (f": {first.error}" if first and
                                                                                first.error else ""))
        return outcome
