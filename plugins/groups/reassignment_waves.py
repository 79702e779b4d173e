"""``reassignment_waves(mode)``: snapshot -> plan (SparkSubmitOperator) -> check the plan -> the waves (one
mapped task per wave, one at a time, labelled "wave i/n (x GB, y moves)") -> remove throttles (after
the waves whatever their outcome) -> preferred leaders (also after a plan without moves, whose wave task
Airflow marks skipped). The shared middle of scale-out and decommission.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.sdk import TaskGroup, TriggerRule
from operators.cluster_snapshot import SnapshotOperator
from operators.leadership import ElectLeadersOperator
from operators.reassignment_plan import CheckPlanOperator, PlannerSubmitOperator
from operators.reassignment_wave import ReassignmentWaveOperator, RemoveThrottlesOperator
from runtime.params import FromParam

WAVE_SETTINGS: dict[str, Any] = {
    name: FromParam(name)
    for name in ("cluster", "brokers", "dry_run", "throttle_bytes_per_s", "wave_bytes", "wave_moves_per_broker",
                 "max_bytes", "verify_interval_s", "verify_timeout_s", "cancel_on_timeout",
                 "healthcheck_interval_s", "healthcheck_timeout_s", "window_policy")
}

#: The wave task's map index template: the label the plan check computed ("wave 1/3 (1.2 GB, 34 moves)",
#: "... · dry run"), which the scheduler also gives the instance before it runs (``runtime.pending_labels``).
WAVE_LABEL = "{{ task.wave['grid_label'] }}"


def reassignment_waves(mode: str, *, operation: str, settings: Mapping[str, Any] | None = None,
                       group_id: str = "reassign") -> TaskGroup:
    """The task group (ids ``<group_id>.snapshot``, ``.plan``, ``.check_plan``, ``.wave``,
    ``.remove_throttles``, ``.preferred_leaders``), built inside the current DAG context.

    :param mode: the planner's mode (``scale-out``, ``decommission``).
    :param operation: the lock's operation label.
    :param settings: overrides of :data:`WAVE_SETTINGS`.
    """
    cfg = {**WAVE_SETTINGS, **(settings or {})}
    with TaskGroup(group_id=group_id, tooltip="snapshot, plan, throttled waves, throttles removed") as group:
        snapshot = SnapshotOperator(task_id="snapshot", mode=mode, settings=cfg)
        plan = PlannerSubmitOperator(task_id="plan", mode=mode, settings=cfg)
        check = CheckPlanOperator(task_id="check_plan", settings=cfg, labels_for=group.child_id("wave"))
        waves = ReassignmentWaveOperator.partial(
            task_id="wave", settings=cfg, operation=operation, map_index_template=WAVE_LABEL,
            # one wave at a time; no retries (an instance waiting to retry would let the next wave start)
            max_active_tis_per_dagrun=1, retries=0,
        ).expand(wave=check.output)
        unthrottle = RemoveThrottlesOperator(task_id="remove_throttles", settings=cfg)
        # none_failed: a plan with no moves maps the wave task over nothing, which Airflow marks skipped; under
        # all_success that skip would skip the election and every task after the group (a decommission of a
        # broker that holds nothing would end "success" without stopping or unregistering it)
        elect = ElectLeadersOperator(task_id="preferred_leaders", settings=cfg, operation=operation,
                                     trigger_rule=TriggerRule.NONE_FAILED)
        snapshot >> plan >> check >> waves >> unthrottle
        # the election also hangs on the waves themselves: remove_throttles runs whatever their outcome
        # (all_done) and must not make a failed wave look like success downstream
        [waves, unthrottle] >> elect
    return group
