"""Migrate a ZooKeeper-mode cluster to KRaft (KIP-866, Kafka 3.9), and revert a migration that is not finalized.
Rules and sources: ``kafka_ops.migration``.

``kafka_zk_to_kraft`` (task ids, in order): ``check_and_lock`` (ZooKeeper: the lock stays there
for the whole run) -> ``check_migration`` (where the cluster is, from the cluster itself; refused before anything is
touched: brokers not on 3.9 or not at IBP 3.9, generated broker ids, controller ids equal to broker ids, no
controller hosts or one that does not answer over SSH, no place for the metadata log, a reassignment running,
offline or under-replicated partitions; a dry run logs every edit per host) -> ``provision_controllers`` (phase 1:
server.properties, ``kafka-storage format`` with the cluster's id, start; waits for a quorum leader and
ZkMigrationReady) -> roll ``migrate_brokers`` (phase 2: each broker restarted with the migration flag and the
quorum settings) -> ``wait_migrated`` (``/migration``, ``/controller`` held by the KRaft controller) ->
``approve_kraft_brokers`` -> roll ``kraft_brokers`` (phase 3: ``process.roles=broker``, ``node.id`` = the old
``broker.id``, no ``zookeeper.*``) -> ``wait_kraft_brokers`` (no broker registered in ZooKeeper) ->
``approve_finalize`` (the point of no return) -> controller roll ``finalize`` (phase 4: the flag and
``zookeeper.connect`` removed, one controller at a time, the quorum leader last) -> ``wait_finalized``
(DescribeQuorum through the brokers, metadata.version) -> ``run_outcome`` (teardown: the final health check, the
lock released, the run's note).

Each roll restarts only the nodes whose running state is not yet the phase's (their running config, or a
controller's ApiVersions), so a run started on a half-migrated cluster continues from there and a cleared task
resumes without restarting a node twice. Each edit keeps a backup of server.properties beside it.

``kafka_zk_to_kraft_revert``: ``check_migration`` (refused once a controller is finalized) -> roll
``zookeeper_brokers`` (KRaft brokers back to ZooKeeper mode with the flag, from their ZooKeeper-mode backup) ->
``deprovision_controllers`` (stopped, metadata log removed, ``/controller`` and ``/migration`` deleted) -> roll
``drop_flag`` (the flag and the quorum settings removed) -> ``wait_zookeeper`` -> ``run_outcome``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.sdk import DAG, Param, TriggerRule
from groups.broker_roll import broker_roll
from groups.cluster_guard import cluster_guard
from groups.controller_roll import controller_roll
from kafka_ops import migration
from kafka_ops.roll_spec import ClusterMode, RollSpec
from operators.migration import (
    DeprovisionControllersOperator,
    MigrationApprovalOperator,
    MigrationCheckOperator,
    MigrationWaitOperator,
    ProvisionControllersOperator,
)
from runtime.migration_steps import before_start, broker_facts, controller_facts
from runtime.params import FromParam
from runtime.settings_table import params

from operations.operation_dag import operation_dag
from operations.roll_params import roll_params

OPERATION = "ZooKeeper-to-KRaft migration"
REVERT = "ZooKeeper-to-KRaft revert"
STEP_SETTINGS = {name: FromParam(name) for name in ("cluster", "dry_run", "healthcheck_interval_s",
                                                    "healthcheck_timeout_s")}
#: Every broker is planned; each roll's needs-action rule decides who restarts.
EVERY_BROKER = {"brokers": [], "keep_order": False}


def broker_spec(roll_id: str, kind: str, needs_action: Any, operation: str, tooltip: str) -> RollSpec:
    """A roll of every broker that edits its file by ``kind`` (``runtime.migration_steps.before_start``) while
    it is down, restarting only the brokers ``needs_action`` names (their running config, read at their turn)."""
    return RollSpec(roll_id, operation=operation, needs_action=needs_action, facts=broker_facts,
                    before_start=before_start(kind), settings=EVERY_BROKER, tooltip=tooltip)


def finalize_spec() -> RollSpec:
    """Phase 4: every controller that still runs with the flag, one at a time, the quorum leader last; exists in a
    migrating run only (a dry run that starts before phase 1 plans nothing)."""
    return RollSpec("finalize", operation=OPERATION, needs_action=migration.needs_finalize, facts=controller_facts,
                    before_start=before_start("finalize"), modes=frozenset({ClusterMode.MIGRATING}),
                    skip_reason="no KRaft controller runs yet (a dry run before phase 1): nothing to finalize",
                    settings={"roles": "all", "controllers": []},
                    tooltip="phase 4: controllers without the migration flag, the quorum leader last")


def _migration_params(*own: str) -> dict[str, Param]:
    """``cluster``, ``dry_run``, the roll params (not ``brokers`` / ``keep_order``: every broker is in each roll),
    then ``own``."""
    roll = roll_params()
    for name in ("brokers", "keep_order"):
        roll.pop(name)
    return {**roll, **params(*own)}


def zk_to_kraft_dag(dag_id: str = "kafka_zk_to_kraft", *, schedule: Any = None,
                    defaults: Mapping[str, Any] | None = None) -> DAG:
    """The migration DAG (see the module docstring)."""
    with operation_dag(
        dag_id,
        description="Migrate a ZooKeeper-mode cluster (Kafka 3.9) to KRaft: controllers, two broker rolls, finalize",
        doc_md=__doc__,
        schedule=schedule,
        defaults=defaults,
        params=_migration_params("approve_kraft_brokers", "approve_finalize"),
    ) as dag:
        cluster_guard(
            [MigrationCheckOperator(settings=STEP_SETTINGS),
             ProvisionControllersOperator(task_id="provision_controllers", settings=STEP_SETTINGS),
             broker_roll(broker_spec("migrate_brokers", "migrate", migration.needs_flag, OPERATION,
                                     "phase 2: each broker restarted with the migration flag")),
             MigrationWaitOperator(task_id="wait_migrated", until="migrated", settings=STEP_SETTINGS),
             MigrationApprovalOperator(task_id="approve_kraft_brokers", approves="kraft_brokers"),
             broker_roll(broker_spec("kraft_brokers", "kraft", migration.needs_kraft, OPERATION,
                                     "phase 3: each broker restarted as a KRaft broker")),
             MigrationWaitOperator(task_id="wait_kraft_brokers", until="kraft_brokers", settings=STEP_SETTINGS),
             MigrationApprovalOperator(task_id="approve_finalize", approves="finalize"),
             controller_roll(finalize_spec()),
             MigrationWaitOperator(task_id="wait_finalized", until="finalized", settings=STEP_SETTINGS,
                                   trigger_rule=TriggerRule.NONE_FAILED)],
            operation=OPERATION,
        )
    return dag


def zk_to_kraft_revert_dag(dag_id: str = "kafka_zk_to_kraft_revert", *, schedule: Any = None,
                           defaults: Mapping[str, Any] | None = None) -> DAG:
    """The revert DAG (see the module docstring)."""
    with operation_dag(
        dag_id,
        description="Revert a ZooKeeper-to-KRaft migration that is not finalized: back to ZooKeeper mode",
        doc_md=__doc__,
        schedule=schedule,
        defaults=defaults,
        params=_migration_params(),
    ) as dag:
        cluster_guard(
            [MigrationCheckOperator(settings=STEP_SETTINGS, direction="revert"),
             broker_roll(broker_spec("zookeeper_brokers", "zookeeper", migration.needs_zookeeper, REVERT,
                                     "revert: KRaft brokers back to ZooKeeper mode with the migration flag")),
             DeprovisionControllersOperator(task_id="deprovision_controllers", settings=STEP_SETTINGS),
             broker_roll(broker_spec("drop_flag", "drop_flag", migration.needs_flag_removed, REVERT,
                                     "revert: each broker restarted without the migration flag")),
             MigrationWaitOperator(task_id="wait_zookeeper", until="zookeeper", settings=STEP_SETTINGS)],
            operation=REVERT,
        )
    return dag
