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

from typing import Any

from airflow.sdk import TaskGroup
from kafka_ops.roll_spec import RollSpec
from operators.broker_roll import BrokerRollOperator
from operators.node_roll import ACTIVE_PER_ROLL
from operators.roll_plan import RollPlanOperator
from runtime.params import FromParam

#: The settings a roll reads, by default from the DAG params of the same names.
ROLL_SETTINGS: dict[str, Any] = {
    name: FromParam(name)
    for name in ("cluster", "brokers", "keep_order", "consumer_groups", "pre_stop", "pre_start", "stop_command",
                 "start_command", "healthcheck_interval_s", "healthcheck_timeout_s", "lag_ok_consecutive",
                 "fix_leader_imbalance", "soak_s", "dry_run", "max_parallel", "batch_by", "window_policy")
}

#: The broker task's map index template: the label its plan computed ("broker 3 (2/3)", "... · dry run"),
#: which the scheduler also gives the instance before it runs (``runtime.pending_labels``).
LABEL = "{{ task.batch['grid_label'] }}"
TOOLTIP = "one broker (or batch) at a time: gate, stop, start, caught up, leadership back"


def broker_roll(spec: RollSpec | str, *, plan_trigger_rule: str = "all_success",
                broker_trigger_rule: str = "all_success") -> TaskGroup:
    """Build the roll's task group inside the current DAG context.

    :param spec: what the roll does (``kafka_ops.roll_spec.RollSpec``: its id, needs-action rule and facts,
        before-start step, cluster modes, settings overriding :data:`ROLL_SETTINGS`); a bare roll id is a plain
        restart of every planned broker. The cluster, broker list, intervals, lag gate, commands and dry run come
        from the DAG params by default. A ``roles`` setting (``FromParam("roles")``) makes the plan return no batch
        for ``roles=controllers``. In a mode the spec rules out the plan logs its ``skip_reason`` and is empty;
        what follows the group then needs ``none_failed``.
    :param plan_trigger_rule: the plan task's trigger rule: ``none_failed`` when it follows a roll that may be
        empty (a zero-length mapped task is *skipped*, which ``all_success`` would pass on), as the upgrade's
        phases after a phase that had nothing to do.
    :param broker_trigger_rule: the broker task's trigger rule: ``none_failed`` when it follows a roll that may
        be empty (a zero-length mapped task is *skipped*, which ``all_success`` would pass on), as after the
        controller roll in the rolling restart, whose plans run ahead; a failed upstream still stops it.
    """
    spec = RollSpec(spec) if isinstance(spec, str) else spec
    cfg = {**ROLL_SETTINGS, **spec.settings}
    with TaskGroup(group_id=spec.roll_id, tooltip=spec.tooltip or TOOLTIP) as group:
        plan = RollPlanOperator(task_id="plan", roll_id=spec.roll_id, settings=cfg, trigger_rule=plan_trigger_rule,
                                modes=spec.modes, skip_reason=spec.skip_reason, labels_for=group.child_id("broker"))
        BrokerRollOperator.partial(
            task_id="broker", roll_id=spec.roll_id, settings=cfg, operation=spec.operation,
            before_start=spec.before_start, needs_action=spec.needs_action, facts=spec.facts,
            map_index_template=LABEL,
            # one batch at a time: each instance acts only once the roll's record says the batches before it are
            # done; the next one starts beside the acting one and waits in its task (operators.node_roll:
            # ACTIVE_PER_ROLL); no retries, since an instance waiting to retry would let the next one start
            max_active_tis_per_dagrun=ACTIVE_PER_ROLL, retries=0, trigger_rule=broker_trigger_rule,
        ).expand(batch=plan.output)
    return group
