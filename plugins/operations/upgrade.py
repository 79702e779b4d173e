"""Upgrade a ZooKeeper-mode Kafka cluster, one roll per phase, each stopping itself when the cluster or its
consumers get unhealthy.

Shape: ``check_params`` -> ``lock_cluster`` -> ``check_upgrade`` (every host's release and IBP / LMF read
over SSH; a malformed or older target, or brokers on more than two releases, refused) -> roll ``pin``
(``inter.broker.protocol.version`` written where absent, = the running release) -> roll ``binaries``
(the install step while each broker is down; "running 3.6.2, target 3.7.1") -> roll ``ibp`` (bumped to the
target, after ``approve_protocol_bump``: a human-in-the-loop Approve / Reject unless approved in advance) ->
roll ``lmf`` (skipped from IBP 3.0 on, KIP-724) -> ``final_health`` -> ``forget_rolls`` ->
``unlock_cluster``. A broker that needs nothing in a phase is left alone, with the reason in the log.
Each phase's edits keep a timestamped backup of server.properties beside it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.sdk import DAG, Param
from groups.broker_roll import broker_roll
from groups.cluster_guard import cluster_guard
from groups.operation_dag import operation_dag
from groups.roll_params import roll_params
from kafka_ops import upgrade
from operators.upgrade_approval import ProtocolBumpApprovalOperator
from operators.upgrade_checks import UpgradeChecksOperator
from runtime.params import FromParam
from runtime.upgrade_steps import before_start, facts

OPERATION = "upgrade"
UPGRADE_SETTINGS = {name: FromParam(name) for name in ("target_version", "install_command", "phases")}


def phase_roll(phase: str):
    """One phase as a roll: its needs-action rule reads the target and phases from the params at run time."""

    def needs(broker_id, found):
        return upgrade.needs_action(phase, found["target_version"], found["phases"])(broker_id, found)

    def phase_facts(profile, broker, settings):
        return {**facts(profile, broker, settings), "target_version": str(settings["target_version"]),
                "phases": list(settings.get("phases") or upgrade.PHASES)}

    return broker_roll(phase, settings=UPGRADE_SETTINGS, operation=OPERATION, before_start=before_start(phase),
                       needs_action=needs, facts=phase_facts,
                       tooltip=f"upgrade phase {phase}: one broker (or batch) at a time")


def upgrade_dag(dag_id: str = "kafka_upgrade", *, schedule: Any = None,
                defaults: Mapping[str, Any] | None = None) -> DAG:
    """The upgrade DAG (see the module docstring); ``schedule`` / ``defaults`` as in
    ``groups.operation_dag.operation_dag`` (a maintenance-window timetable gates every broker, batch and wave)."""
    with operation_dag(
        dag_id,
        description="Upgrade Kafka brokers: pin the protocol versions, roll the binaries, bump IBP (and LMF)",
        doc_md=__doc__,
        schedule=schedule,
        defaults=defaults,
        params={
            **roll_params(),
            "target_version": Param("3.7.1", type="string", pattern=r"^\d+\.\d+\.\d+$",
                                    description="The Kafka release to upgrade to (major.minor.patch)"),
            "install_command": Param(None, type=["null", "string"], maxLength=4096,
                                     description="Name of a profile command installing the release on a broker host "
                                     "({version} is filled in); empty = switch the kafka symlink under kafka_home "
                                     "to the unpacked kafka_*-<version> beside it"),
            "approve_protocol_bump": Param(False, type="boolean",
                                           description="Approve the IBP/LMF bump in advance; false = the run waits "
                                           "for Approve / Reject (Required Actions) before the irreversible phases"),
            "phases": Param(list(upgrade.PHASES), type="array", items={"type": "string", "enum": list(upgrade.PHASES)},
                            uniqueItems=True, description="Phases to run, in this order: pin, binaries, ibp, lmf"),
        },
    ) as dag:
        cluster_guard(
            [UpgradeChecksOperator(task_id="check_upgrade", settings={"cluster": FromParam("cluster"),
                                                                     **UPGRADE_SETTINGS}),
             phase_roll("pin"), phase_roll("binaries"),
             ProtocolBumpApprovalOperator(task_id="approve_protocol_bump"),
             phase_roll("ibp"), phase_roll("lmf")],
            operation=OPERATION,
            roll_ids=list(upgrade.PHASES),
        )
    return dag
