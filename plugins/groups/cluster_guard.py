"""``cluster_guard(body, ...)``: what every operation DAG wraps its body in.

``check_and_lock`` (the setup: conf keys, params, profile, commands checked before anything else, then the cluster
lock taken) -> body (its parts in order; a part that is a list runs its tasks side by side) -> ``run_outcome`` (the
teardown, also after failures: after a run that did its work the cluster healthy and the run's roll records deleted;
the lock released if this run still holds it, the run's note, and the run's final state: ``operators.run_outcome``).
Two tasks around the body, not four: each task start costs 0.3-0.5 s on a real Airflow, on every run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import TriggerRule
from operators.cluster_lock import LOCK_SETTINGS, LockClusterOperator
from operators.cluster_operator import ClusterOperator
from operators.controller_roll import ControllerPlanOperator
from operators.roll_plan import RollPlanOperator
from operators.run_outcome import RunOutcomeOperator
from runtime.params import FromParam

GUARD_SETTINGS: dict[str, Any] = {
    **LOCK_SETTINGS,
    **{name: FromParam(name) for name in ("dry_run", "healthcheck_interval_s", "healthcheck_timeout_s",
                                          "fix_leader_imbalance", "pre_stop", "pre_start", "stop_command",
                                          "start_command")},
}


def task_in(group: Any, task_id: str) -> Any:
    """The task ``task_id`` of task group ``group`` (``task_in(roll, "plan")`` is ``<roll_id>.plan``), to wire a
    group's tasks into different parts of a body. Raises KeyError naming the group's tasks if it has none such."""
    child = group.child_id(task_id)
    if child not in group.children:
        raise KeyError(f"task group {group.group_id!r} has no task {task_id!r} (it has {sorted(group.children)})")
    return group.children[child]


def _tasks_in(parts: Sequence[Any]) -> list[Any]:
    """The tasks among ``parts`` (tasks, task groups and side-by-side lists of them), in order."""
    from airflow.sdk import TaskGroup

    found: list[Any] = []

    def visit(node: Any) -> None:
        if isinstance(node, (list, tuple)):
            for child in node:
                visit(child)
        elif isinstance(node, TaskGroup):
            for child in node.children.values():
                visit(child)
        else:
            found.append(node)

    for part in parts:
        visit(part)
    return found


def reporting_task_ids(parts: Sequence[Any]) -> list[str]:
    """The ids of the tasks among ``parts`` that say in the run's note what they did (their operator overrides
    ``ClusterOperator.note_line``: a broker stop or start, a config change, a metadata.version bump), in order:
    what ``run_outcome`` asks for those lines (``runtime.run_report.done_lines``)."""
    return [task.task_id for task in _tasks_in(parts) if isinstance(task, ClusterOperator)
            and type(task).note_line is not ClusterOperator.note_line]


def roll_ids_in(parts: Sequence[Any]) -> list[str]:
    """The roll ids of the rolls among ``parts`` (tasks, task groups and side-by-side lists of them, in order),
    read from their plan tasks (``RollPlanOperator`` / ``ControllerPlanOperator``: a roll's one unmapped task with a
    ``roll_id``): what ``run_outcome`` summarises, and deletes once the cluster is healthy at the end. Raises
    ValueError on a roll id used twice."""
    found: list[str] = []
    for node in _tasks_in(parts):
        if isinstance(node, (RollPlanOperator, ControllerPlanOperator)):
            if node.roll_id in found:
                raise ValueError(f"roll id {node.roll_id!r} is used by two rolls of one DAG")
            found.append(node.roll_id)
    return found


def cluster_guard(body: Any, *, operation: str, settings: Mapping[str, Any] | None = None) -> Any:
    """Wire ``body`` (a task or task group, or a list of parts in order) between ``check_and_lock`` and
    ``run_outcome``. A part that is itself a list of tasks runs them side by side: each waits for the part before,
    the next part waits for all of them (the rolling restart checks the hosts while its rolls plan). Returns the
    teardown (``run_outcome``). The rolls inside ``body`` (:func:`roll_ids_in`) are the ones whose records
    ``run_outcome`` deletes when the run did its work and the cluster is healthy: no list kept by hand.

    :param operation: the lock's label ("rolling restart").
    :param settings: overrides of :data:`GUARD_SETTINGS` (a DAG without command params passes ``{"pre_stop":
        None, ...}``).

    The parts of ``body`` are chained as given, and the part after the one that follows a side-by-side part waits
    for that side-by-side part too (an empty roll's plan skips its mapped task before its siblings end). A part that
    may follow an empty roll (a *skipped* mapped task) sets its own trigger rule (``none_failed``). ``run_outcome``
    runs whatever the body's states (``all_done``); it judges the run by them. Two side-by-side parts cannot follow
    one another (Airflow chains no list to a list).
    """
    cfg = {**GUARD_SETTINGS, **(settings or {})}
    parts = list(body) if isinstance(body, (list, tuple)) else [body]
    roll_ids = roll_ids_in(parts)
    lock = LockClusterOperator(task_id="check_and_lock", settings=cfg, operation=operation)
    outcome = RunOutcomeOperator(task_id="run_outcome", settings=cfg, operation=operation, roll_ids=roll_ids,
                                 reporting_task_ids=reporting_task_ids(parts), lock_task_id=lock.task_id)
    lock >> parts[0]
    for before, after in zip(parts, parts[1:], strict=False):
        before >> after
    # a roll's plan inside a side-by-side part skips the next part (its empty mapped task) as it ends, maybe before
    # its siblings end (operators.node_roll.RollPlanBase): the part after that waits for every sibling itself
    for siblings, after in zip(parts, parts[2:], strict=False):
        if isinstance(siblings, (list, tuple)):
            for sibling in siblings:
                sibling >> after
    parts[-1] >> outcome
    # check_and_lock's teardown and the run's one leaf (on_failure_fail_dagrun); all_done: it runs after a refusal
    # in check_and_lock as well (it releases only this run's lock), and after any failure of the body
    outcome.as_teardown(setups=lock, on_failure_fail_dagrun=True)
    outcome.trigger_rule = TriggerRule.ALL_DONE
    return outcome
