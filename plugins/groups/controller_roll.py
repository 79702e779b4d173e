"""``controller_roll(roll_id, ...)``: one roll of KRaft controllers as a task group, the controller side of
every operation that restarts nodes (the rolling restart; the upgrade's binaries phase on the controllers,
roll ``controller_binaries``).

Tasks (ids derived from ``roll_id``): ``<roll_id>.plan`` (the mode and the ``roles`` param decide whether
there is anything to do; validate and freeze the order: followers by id, the quorum leader last) ->
``<roll_id>.controller`` (mapped over the plan, strictly one after another, labelled "controller 101 (2/3)",
" · active" for the quorum leader). The plan returns an empty list on a ZooKeeper-mode cluster and for
``roles=brokers``: Airflow then marks the mapped task *skipped*, so what follows the group must run with a
trigger rule that lets a skip through (``none_failed``; see ``operations.rolling_restart``).

Each roll has its own record (``runtime.roll_store``), so a resumed run continues where this roll stopped and
never restarts a controller it finished.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import TaskGroup
from kafka_ops.roll_spec import RollSpec
from operators.controller_roll import ControllerPlanOperator, ControllerRollOperator
from operators.node_roll import ACTIVE_PER_ROLL
from runtime.params import FromParam

#: The settings a controller roll reads, by default from the DAG params of the same names.
CONTROLLER_SETTINGS: dict[str, Any] = {
    name: FromParam(name)
    for name in ("cluster", "roles", "controllers", "healthcheck_interval_s", "healthcheck_timeout_s", "soak_s",
                 "dry_run", "window_policy")
}

#: The controller task's map index template: its item's label ("controller 101 (3/3) · active"), computed by
#: the plan (and again when the quorum leader moves), which the scheduler also gives the instance before it runs.
LABEL = "{{ task.item['grid_label'] }}"
TOOLTIP = "KRaft controllers one at a time, the quorum leader last: gate, stop, gone, start, back"


def controller_roll(spec: RollSpec | str = "controllers", *, plan_trigger_rule: str = "all_success") -> TaskGroup:
    """Build the controller roll's task group inside the current DAG context.

    :param spec: what the roll does (``kafka_ops.roll_spec.RollSpec``; a bare roll id is a plain restart of every
        voter). Its settings override :data:`CONTROLLER_SETTINGS`: a DAG without the ``roles`` / ``controllers``
        params passes ``{"roles": "all", "controllers": []}`` (every voter on a KRaft cluster, an empty roll in
        ZooKeeper mode; ``"controllers"`` would fail a ZooKeeper-mode run); also ``quorum_fetch_timeout_ms`` (the
        cluster's ``controller.quorum.fetch.timeout.ms``, default 2,000) and ``command_timeout_s`` (SSH commands,
        default 300). Its hooks are called with the controller's step dict (``{"id", "host", "role":
        "controller", ...}``).
    :param plan_trigger_rule: the plan task's trigger rule (``none_failed`` when it follows a roll that may be
        empty, i.e. skipped).
    """
    spec = RollSpec(spec) if isinstance(spec, str) else spec
    cfg = {**CONTROLLER_SETTINGS, **spec.settings}
    with TaskGroup(group_id=spec.roll_id, tooltip=spec.tooltip or TOOLTIP) as group:
        plan = ControllerPlanOperator(task_id="plan", roll_id=spec.roll_id, settings=cfg,
                                      trigger_rule=plan_trigger_rule, labels_for=group.child_id("controller"),
                                      modes=spec.modes, skip_reason=spec.skip_reason)
        ControllerRollOperator.partial(
            task_id="controller", roll_id=spec.roll_id, settings=cfg, operation=spec.operation,
            before_start=spec.before_start, needs_action=spec.needs_action, facts=spec.facts,
            map_index_template=LABEL,
            # one controller at a time: each instance acts only once the roll's record says the ones before it
            # are done; the next one starts beside the acting one and waits in its task (operators.node_roll:
            # ACTIVE_PER_ROLL); no retries, since an instance waiting to retry would let the next one start
            max_active_tis_per_dagrun=ACTIVE_PER_ROLL, retries=0,
        ).expand(item=plan.output)
    return group
