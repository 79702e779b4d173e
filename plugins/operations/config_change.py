"""Change broker configs: dynamic keys applied live, read-only keys by editing ``server.properties`` and rolling only
the brokers whose file and running config differ (rules and sources: ``kafka_ops.config_change``).

Shape (task ids, in order): ``check_and_lock`` -> ``plan_config`` (every broker's DescribeConfigs
and the in-scope brokers' server.properties read; refused before anything is touched: unknown keys with a "did
you mean", wrong types, passwords, per-broker keys with the cluster scope, Kafka's thread-pool 2x rule, the ELR
rules of min.insync.replicas on Kafka 4.1+, and whatever Kafka's own ``validateOnly`` check refuses; the
per-broker diff logged: dynamic / server.properties / unchanged / restart) -> ``apply_config`` (dynamic keys sent
with IncrementalAlterConfigs to the cluster-wide default or per broker and verified on every broker in scope;
then every in-scope broker's server.properties edited, comments and order kept, a backup beside it, read back)
-> roll ``restart`` (each broker at its turn: its file compared with its running config; only brokers that differ
restart, each with its reason, e.g. "queued.max.requests 400 in server.properties, the broker runs 500
(DEFAULT_CONFIG, read-only): restart"; the others are left alone with theirs) -> ``run_outcome``
(teardown: the final health check, the lock released, the run's note).

A re-run after success has nothing to do: the dynamic values are already set at the scope's level, the files
already hold the values and the brokers run them. The dry run logs the per-broker diff, what would be sent and
written, and which brokers would restart; it touches nothing (Kafka's ``validateOnly`` check changes nothing).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.sdk import DAG, Param
from groups.broker_roll import broker_roll
from groups.cluster_guard import cluster_guard
from kafka_ops import config_change
from kafka_ops.roll_spec import RollSpec
from operators.config_change import OPERATION, ConfigApplyOperator, ConfigPlanOperator
from runtime.config_steps import facts
from runtime.params import FromParam
from runtime.settings_table import params

from operations.operation_dag import operation_dag
from operations.roll_params import roll_params

#: What the plan and the roll's needs-action rule read.
CHANGE_SETTINGS = {name: FromParam(name) for name in ("cluster", "changes", "scope", "dry_run",
                                                      "healthcheck_interval_s", "healthcheck_timeout_s")}


def restart_spec() -> RollSpec:
    """The roll after the edit: every broker planned, each restarted only when its file and running config differ
    (``kafka_ops.config_change.needs_restart`` over ``runtime.config_steps.facts``)."""
    return RollSpec("restart", operation=OPERATION, needs_action=config_change.needs_restart, facts=facts,
                    settings={"brokers": [], "keep_order": False, "changes": FromParam("changes"),
                              "scope": FromParam("scope")},
                    tooltip="config change: brokers whose server.properties differs from their running config "
                            "restart, one (or a batch) at a time")


def _config_change_params() -> dict[str, Param]:
    """The form: ``cluster``, ``dry_run``, ``changes``, ``scope``, then the roll's params (the brokers a roll
    covers follow from the scope: no ``brokers`` / ``keep_order``)."""
    roll = roll_params()
    for name in ("brokers", "keep_order"):
        roll.pop(name)
    head = {"cluster": roll.pop("cluster"), "dry_run": roll.pop("dry_run"), **params("changes", "scope")}
    return {**head, **roll}


def config_change_dag(dag_id: str = "kafka_config_change", *, schedule: Any = None,
                      defaults: Mapping[str, Any] | None = None) -> DAG:
    """The config-change DAG (see the module docstring); ``schedule`` / ``defaults`` as in
    ``operations.operation_dag.operation_dag``."""
    with operation_dag(
        dag_id,
        description="Change broker configs: dynamic keys live, read-only keys in server.properties with a roll of "
                    "only the brokers that differ",
        doc_md=__doc__,
        schedule=schedule,
        defaults=defaults,
        params=_config_change_params(),
    ) as dag:
        cluster_guard(
            [ConfigPlanOperator(task_id="plan_config", settings=CHANGE_SETTINGS),
             ConfigApplyOperator(task_id="apply_config", settings=CHANGE_SETTINGS),
             broker_roll(restart_spec())],
            operation=OPERATION,
        )
    return dag
