"""``broker_roll(roll_id, ...)``: one roll of brokers as a task group, the building block of every
operation that restarts brokers (rolling restart; upgrade phases; stopping drained brokers).

Tasks (ids derived from ``roll_id``): ``<roll_id>.plan`` (validate, freeze the plan in the roll's record)
-> ``<roll_id>.broker`` (mapped over the plan's batches, strictly one after another, labelled
"broker <id> (<batch>/<batches>)", or "brokers 0, 3, 6 (1/4)" for a batch that goes down together).
Each roll has its own record, so one DAG run can hold
several rolls over the same brokers (an upgrade restarts every broker once per phase) and a resumed run
continues each roll where it stopped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.sdk import TaskGroup
from kafka_ops.roll import NeedsAction, requested
from operators.broker_roll import BrokerRollOperator
from operators.roll_plan import RollPlanOperator
from runtime.params import FromParam
from runtime.roll_hooks import BeforeStart, Facts

#: The settings a roll reads, by default from the DAG params of the same names.
ROLL_SETTINGS: dict[str, Any] = {
    name: FromParam(name)
    for name in ("cluster", "brokers", "keep_order", "consumer_groups", "pre_stop", "pre_start", "stop_command",
                 "start_command", "healthcheck_interval_s", "healthcheck_timeout_s", "lag_ok_consecutive",
                 "soak_s", "dry_run", "max_parallel", "batch_by", "window_policy")
}

#: The broker task's map index template: the label its plan computed ("broker 3 (2/3)", "... · dry run"),
#: which the scheduler also gives the instance before it runs (``runtime.pending_labels``).
LABEL = "{{ task.batch['grid_label'] }}"


def broker_roll(
    roll_id: str,
    *,
    settings: Mapping[str, Any] | None = None,
    operation: str = "rolling restart",
    before_start: BeforeStart | None = None,
    needs_action: NeedsAction = requested,
    facts: Facts | None = None,
    plan_trigger_rule: str = "all_success",
    only_in: str | None = None,
    skip_reason: str = "",
    tooltip: str = "one broker (or batch) at a time: gate, stop, start, caught up, leadership back",
) -> TaskGroup:
    """Build the roll's task group inside the current DAG context.

    :param roll_id: a task-id-safe name, unique in the DAG ("restart", "binaries", "ibp").
    :param settings: overrides of :data:`ROLL_SETTINGS` (values or ``FromParam``); the cluster, broker list,
        intervals, lag gate, commands and dry run come from the DAG params by default.
    :param before_start: / :param needs_action: / :param facts: see ``operators.broker_roll``.
    :param plan_trigger_rule: the plan task's trigger rule: ``none_failed`` when it follows a roll that may be
        empty (a zero-length mapped task is *skipped*, which ``all_success`` would pass on), as after the
        controller roll in the rolling restart. A ``roles`` setting (``FromParam("roles")``) makes the plan
        return no batch for ``roles=controllers``; without it every planned broker is rolled.
    :param only_in: / :param skip_reason: a roll of one cluster mode only (``"zookeeper"`` | ``"kraft"``): in
        the other mode the plan logs ``skip_reason`` and is empty (see ``operators.roll_plan.RollPlanOperator``);
        what follows the group then needs ``none_failed``.
    """
    cfg = {**ROLL_SETTINGS, **(settings or {})}
    with TaskGroup(group_id=roll_id, tooltip=tooltip) as group:
        plan = RollPlanOperator(task_id="plan", roll_id=roll_id, settings=cfg, trigger_rule=plan_trigger_rule,
                                only_in=only_in, skip_reason=skip_reason, labels_for=group.child_id("broker"))
        BrokerRollOperator.partial(
            task_id="broker", roll_id=roll_id, settings=cfg, operation=operation, before_start=before_start,
            needs_action=needs_action, facts=facts, map_index_template=LABEL,
            # one broker at a time: a running (or deferred) instance blocks the next, and the scheduler starts
            # them in map-index order; no retries, since an instance waiting to retry would not block
            max_active_tis_per_dagrun=1, retries=0,
        ).expand(batch=plan.output)
    return group
