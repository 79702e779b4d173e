"""``run_outcome``: the run's last task, a teardown that makes the run's final state what happened.

Airflow leaves teardowns to run when a run is marked failed (it fails the running tasks, skips the pending ones
and sets no run state while a teardown is pending) and, by default, ignores a teardown's state and judges the
run by its leaf tasks, which such a run has skipped: the run would end green. This teardown has
``on_failure_fail_dagrun``: it is the run's one leaf, so the run ends as it does, and it fails when any other
task of the run failed (``kafka_ops.run_outcome``: refused, failed, or stopped from outside). Its trigger rule is
``all_done``: it also runs after a refusal before the lock (a teardown's default, ``all_done_setup_success``,
would be skipped there and the skip would count as success).

It writes the run's note (rewritten, not appended: a resumed run's note says how the resume ended) and logs
the full report.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk.exceptions import AirflowFailException
from kafka_ops.run_outcome import advice, first_failure, headline, other_failures, outcome_of
from runtime import run_report
from runtime.run_note import note_outcome

from operators.cluster_operator import ClusterOperator


class RunOutcomeOperator(ClusterOperator):
    """Report the run and fail it when any other task failed (use as the teardown after ``unlock_cluster``).

    :param settings: ``cluster`` and ``dry_run`` (values or ``FromParam``).
    :param operation: what the run does ("rolling restart"), for the note's first line.
    :param roll_ids: the run's rolls, each reported with what it did.
    :param unlock_task_id: the task that released the lock (its XCom: True = released, False = not held).
    :raises AirflowFailException: the run was refused, failed or stopped (its first failure named).
    """

    ui_color = "#fff4d6"

    def __init__(self, *, settings: dict, operation: str, roll_ids: list[str] | None = None,
                 unlock_task_id: str = "unlock_cluster", **kwargs: Any) -> None:
        super().__init__(settings=settings, **kwargs)
        self.operation = operation
        self.roll_ids = list(roll_ids or [])
        self.unlock_task_id = unlock_task_id

    def execute(self, context: Any) -> str:
        cfg = self.resolve(context)
        ti = context["ti"]
        dry = self.dry_run
        try:
            failures = run_report.failed_tasks(context, exclude={self.task_id})
            unreadable = None
        except Exception as exc:  # noqa: BLE001 - without the states the run cannot be judged: say so, fail
            failures, unreadable = [], f"task states unreadable: {exc}"[:300]
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
        released = ti.xcom_pull(task_ids=self.unlock_task_id, map_indexes=-1)
        items.append("cluster lock " + ("released" if released else "not held by this run at its end (released "
                                         "earlier, or never taken)" if released is False else "state unknown"))
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
