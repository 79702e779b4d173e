"""Upgrade a Kafka cluster, ZooKeeper mode or KRaft, one roll per phase, each stopping itself when the cluster
or its consumers get unhealthy. The mode is decided at run time, once, under the cluster lock
(``runtime.cluster_mode``: the cluster answers DescribeQuorum or not); every task says which path it takes.

Shape (task ids, in order): ``check_and_lock`` -> ``check_upgrade`` (the path logged; every
broker's and, on KRaft, every controller's release read over SSH; refused before anything is touched: a
malformed or older target, nodes on more than two releases, a phase list that skips a needed step, and on
KRaft a malformed, too new or lower ``metadata_version``) -> roll ``pin`` (ZooKeeper mode:
``inter.broker.protocol.version`` written where absent, = the running release; KRaft: plans nothing) -> roll
``controller_binaries`` (KRaft: the install step while each controller is down, one at a time, the active
controller last, behind the quorum gate; ZooKeeper mode: plans nothing) -> roll ``binaries`` (the brokers:
the install step while each broker is down; "running 3.6.2, target 3.7.1") -> ``approve_protocol_bump`` (a
human-in-the-loop Approve / Reject of the IBP bump, or on KRaft of the metadata.version bump, unless approved
in advance; Reject skips everything after it) -> roll ``ibp`` (ZooKeeper mode: bumped to the target; KRaft:
plans nothing) -> roll ``lmf`` (ZooKeeper mode below IBP 3.0 only, KIP-724; KRaft: plans nothing) ->
``metadata_version`` (KRaft: UpdateFeatures to the target level, KIP-584 / KIP-778, then every broker's
DescribeFeatures polled until it reports it; ZooKeeper mode: nothing) -> ``run_outcome`` (teardown: the final
health check, the lock released, the run's note).

A roll with nothing to do in this mode plans an empty list and its mapped task is *skipped*; the task after
each such roll runs with ``none_failed`` (a skip lets it through, a failure still stops it). A node that needs
nothing in a phase is left alone, with the reason in the log. Each phase's edits keep a timestamped backup of
server.properties beside it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from airflow.sdk import DAG, Param, TriggerRule
from groups.broker_roll import broker_roll
from groups.cluster_guard import cluster_guard
from groups.controller_roll import controller_roll
from kafka_ops import upgrade
from kafka_ops.roll_spec import EVERY_MODE, ClusterMode, RollSpec
from operators.metadata_version import MetadataVersionOperator
from operators.preflight import PreflightOperator
from operators.upgrade_approval import ProtocolBumpApprovalOperator
from operators.upgrade_checks import UpgradeChecksOperator
from runtime.params import FromParam
from runtime.settings_table import params
from runtime.upgrade_steps import before_start, facts

from operations.operation_dag import operation_dag
from operations.roll_params import roll_params

OPERATION = "upgrade"
UPGRADE_SETTINGS = {name: FromParam(name) for name in ("target_version", "install_command", "phases",
                                                       "revert_failed_broker")}


def phase_spec(phase: str) -> RollSpec:
    """One upgrade phase as a roll: its needs-action rule (``kafka_ops.upgrade.needs_action``: it reads the target
    and phases from the run's settings) over the facts read from each node's host, and the phase's install or
    server.properties edit while the node is down; pin / ibp / lmf exist in ZooKeeper mode only (in KRaft mode
    they plan nothing, logged)."""
    zookeeper_only = phase in upgrade.ZOOKEEPER_PHASES
    return RollSpec(phase, operation=OPERATION, needs_action=upgrade.needs_action(phase), facts=facts,
                    before_start=before_start(phase),
                    modes=frozenset({ClusterMode.ZOOKEEPER}) if zookeeper_only else EVERY_MODE,
                    skip_reason=upgrade.KRAFT_SKIP if zookeeper_only else "",
                    settings=UPGRADE_SETTINGS, tooltip=f"upgrade phase {phase}: one broker (or batch) at a time")


def phase_roll(phase: str, plan_trigger_rule: str = TriggerRule.ALL_SUCCESS):
    """One phase as a roll of brokers (see :func:`phase_spec`)."""
    return broker_roll(phase_spec(phase), plan_trigger_rule=plan_trigger_rule)


def controller_binaries_roll():
    """The KRaft controllers' binaries: every voter, one at a time, the active controller last (an empty,
    skipped roll in ZooKeeper mode)."""
    spec = replace(phase_spec("binaries"), roll_id="controller_binaries",
                   modes=frozenset({ClusterMode.KRAFT, ClusterMode.MIGRATING}),
                   settings={"roles": "all", "controllers": [], **UPGRADE_SETTINGS},
                   tooltip="upgrade phase binaries on the KRaft controllers: one at a time, the active controller last")
    return controller_roll(spec, plan_trigger_rule=TriggerRule.NONE_FAILED)


def _upgrade_params() -> dict[str, Param]:
    """The upgrade's form: ``cluster``, ``dry_run`` and ``target_version`` first (what a user decides), then the
    roll params, then the upgrade's own (fresh objects per DAG)."""
    roll = roll_params()
    head = {"cluster": roll.pop("cluster"), "dry_run": roll.pop("dry_run"), **params("target_version")}
    return {**head, **roll, **params("install_command", "revert_failed_broker", "approve_protocol_bump", "phases",
                                     "metadata_version", "release_features")}


def upgrade_dag(dag_id: str = "kafka_upgrade", *, schedule: Any = None,
                defaults: Mapping[str, Any] | None = None) -> DAG:
    """The upgrade DAG (see the module docstring); ``schedule`` / ``defaults`` as in
    ``operations.operation_dag.operation_dag`` (a maintenance-window timetable gates every node, batch and wave)."""
    with operation_dag(
        dag_id,
        description="Upgrade Kafka: roll the binaries (KRaft: controllers first), then bump the protocol "
                    "(ZooKeeper mode: IBP and LMF; KRaft: metadata.version)",
        doc_md=__doc__,
        schedule=schedule,
        defaults=defaults,
        params=_upgrade_params(),
    ) as dag:
        settings = {"cluster": FromParam("cluster"), "metadata_version": FromParam("metadata_version"),
                    "release_features": FromParam("release_features"), **UPGRADE_SETTINGS}
        step_settings = {**settings, **{n: FromParam(n) for n in ("dry_run", "healthcheck_interval_s",
                                                                  "healthcheck_timeout_s")}}
        cluster_guard(
            [UpgradeChecksOperator(task_id="check_upgrade", settings=settings),
             PreflightOperator(task_id="preflight", scope="upgrade", settings={
                 **step_settings, **{n: FromParam(n) for n in ("brokers", "pre_stop", "stop_command", "pre_start",
                                                               "start_command")}}),
             phase_roll("pin"),
             controller_binaries_roll(),
             phase_roll("binaries", TriggerRule.NONE_FAILED),
             ProtocolBumpApprovalOperator(task_id="approve_protocol_bump", trigger_rule=TriggerRule.NONE_FAILED),
             phase_roll("ibp"),
             phase_roll("lmf", TriggerRule.NONE_FAILED),
             MetadataVersionOperator(task_id="metadata_version", settings=step_settings, operation=OPERATION,
                                     trigger_rule=TriggerRule.NONE_FAILED)],
            operation=OPERATION,
        )
    return dag
