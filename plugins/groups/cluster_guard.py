"""``cluster_guard(body, ...)``: what every operation DAG wraps its body in.

``check_params`` (conf keys, params, profile, commands; before anything else) -> ``lock_cluster`` (setup) -> body
(its parts in order; a part that is a list runs its tasks side by side) -> ``final_health`` (the cluster healthy,
then the run's roll records deleted and the lock released) -> ``run_outcome`` (the teardown, also after failures:
the lock released if this run still holds it, the run's note, and the run's final state: ``operators.run_outcome``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import TriggerRule
from operators.cluster_checks import CheckParamsOperator, FinalHealthOperator
from operators.cluster_lock import LOCK_SETTINGS, LockClusterOperator
from operators.controller_roll import ControllerPlanOperator
from operators.roll_plan import RollPlanOperator
from operators.run_outcome import RunOutcomeOperator
from runtime.params import FromParam

GUARD_SETTINGS: dict[str, Any] = {
    **LOCK_SETTINGS,
    **{name: FromParam(name) for name in ("dry_run", "healthcheck_interval_s", "healthcheck_timeout_s",
                                          "pre_stop", "pre_start", "stop_command", "start_command")},
}


def task_in(group: Any, task_id: str) -> Any:
    """The task ``task_id`` of task group ``group`` (``task_in(roll, "plan")`` is ``<roll_id>.plan``), to wire a
    group's tasks into different parts of a body. Raises KeyError naming the group's tasks if it has none such."""
    child = group.child_id(task_id)
    if child not in group.children:
        raise KeyError(f"task group {group.group_id!r} has no task {task_id!r} (it has {sorted(group.children)})")
    return group.children[child]


def roll_ids_in(parts: Sequence[Any]) -> list[str]:
    """The roll ids of the rolls among ``parts`` (tasks, task groups and side-by-side lists of them, in order),
    read from their plan tasks (``RollPlanOperator`` / ``ControllerPlanOperator``: a roll's one unmapped task with a
    ``roll_id``): what ``final_health`` deletes and ``run_outcome`` summarises. Raises ValueError on a roll id
    used twice."""
    from airflow.sdk import TaskGroup

    found: list[str] = []

    def visit(node: Any) -> None:
        if isinstance(node, (list, tuple)):
            for child in node:
                visit(child)
        elif isinstance(node, TaskGroup):
            for child in node.children.values():
                visit(child)
        elif isinstance(node, (RollPlanOperator, ControllerPlanOperator)):
            if node.roll_id in found:
                raise ValueError(f"roll id {node.roll_id!r} is used by two rolls of one DAG")
            found.append(node.roll_id)

    for part in parts:
        visit(part)
    return found


def cluster_guard(body: Any, *, operation: str,
                  settings: Mapping[str, Any] | None = None, final_trigger_rule: str = "all_success") -> Any:
    """Wire ``body`` (a task or task group, or a list of parts in order) between the lock and the final
    health check. A part that is itself a list of tasks runs them side by side: each waits for the part before,
    the next part waits for all of them (the rolling restart checks the hosts while its rolls plan). Returns the
    last teardown (``run_outcome``). The rolls inside ``body`` (:func:`roll_ids_in`) are the ones whose records
    ``final_health`` deletes when the run succeeds: no list kept by hand.

    :param operation: the lock's label ("rolling restart").
    :param settings: overrides of :data:`GUARD_SETTINGS` (a DAG without command params passes ``{"pre_stop":
        None, ...}``).
    :param final_trigger_rule: ``final_health``'s trigger rule. The default ``all_success`` skips it (and so
        the deletion of the roll records) when the body's last task was skipped; a body that may end in an empty
        roll (a zero-length mapped task is skipped: a rolling restart with ``roles=controllers``) passes
        ``none_failed``, so the final check still runs, and still does not run after a failure. The parts of
        ``body`` are chained as given: a part that may follow an empty roll sets its own trigger rule.
        Two side-by-side parts cannot follow one another (Airflow chains no list to a list).
    """
    cfg = {**GUARD_SETTINGS, **(settings or {})}
    parts = list(body) if isinstance(body, (list, tuple)) else [body]
    roll_ids = roll_ids_in(parts)
    check = CheckParamsOperator(task_id="check_params", settings=cfg)
    lock = LockClusterOperator(task_id="lock_cluster", settings=cfg, operation=operation)
    final = FinalHealthOperator(task_id="final_health", roll_ids=roll_ids, settings=cfg,
                                trigger_rule=final_trigger_rule)
    outcome = RunOutcomeOperator(task_id="run_outcome", settings=cfg, operation=operation, roll_ids=roll_ids,
                                 final_task_id=final.task_id, lock_task_id=lock.task_id)
    check >> lock >> parts[0]
    for before, after in zip(parts, parts[1:], strict=False):
        before >> after
    parts[-1] >> final >> outcome
    # lock_cluster's teardown and the run's one leaf (on_failure_fail_dagrun); all_done: it runs after a refusal
    # before the lock as well, and after the lock task failed (it releases only this run's lock)
    outcome.as_teardown(setups=lock, on_failure_fail_dagrun=True)
    outcome.trigger_rule = TriggerRule.ALL_DONE
    return outcome
