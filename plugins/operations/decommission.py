"""Decommission Kafka brokers: move leadership off them, drain their replicas in throttled waves, check
they hold and lead nothing, then stop them. Stops itself when the cluster gets unhealthy. Declarative
composition only.

Shape: ``check_and_lock`` -> ``validate`` (ids registered; the remaining brokers can
hold every partition: at least the largest replication factor, enough racks) -> ``health_gate`` ->
``lead_away`` (their replicas put last, preferred leaders elected) -> ``reassign`` (``snapshot`` ->
``plan``: spark-submit ``--mode decommission``, with ``drain_only`` also ``--drain-only`` -> ``check_plan`` ->
``wave`` per wave -> ``remove_throttles`` -> ``preferred_leaders``) -> ``stop_brokers`` (with ``stop_brokers``:
only brokers that hold and lead nothing) -> ``run_outcome`` (teardown: the final health check after a run that
did its work, the lock released, the run's note).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.sdk import DAG
from groups.cluster_guard import cluster_guard
from groups.reassignment_waves import reassignment_waves
from operators.broker_service import BrokerServiceOperator
from operators.cluster_checks import WaitForClusterOperator
from operators.leadership import ElectLeadersOperator
from operators.preflight import PreflightOperator
from operators.reassignment_checks import ReassignmentChecksOperator
from runtime.params import FromParam
from runtime.settings_table import param

from operations.operation_dag import operation_dag
from operations.reassignment_params import NO_COMMANDS, STEP_SETTINGS, reassignment_params

OPERATION = "decommission"


def decommission_dag(dag_id: str = "kafka_decommission", *, schedule: Any = None,
                     defaults: Mapping[str, Any] | None = None) -> DAG:
    """The decommission DAG (see the module docstring); ``schedule`` / ``defaults`` as in
    ``operations.operation_dag.operation_dag`` (a maintenance-window timetable gates every broker, batch and wave)."""
    with operation_dag(
        dag_id,
        description="Drain Kafka brokers of every replica in throttled waves, then stop them",
        doc_md=__doc__,
        schedule=schedule,
        defaults=defaults,
        params={
            **reassignment_params("Ids of the brokers to drain and remove"),
            "drain_only": param("drain_only"),
            "stop_brokers": param("stop_brokers"),
        },
    ) as dag:
        cluster_guard(
            [
                ReassignmentChecksOperator(task_id="validate", mode="decommission", settings=STEP_SETTINGS),
                PreflightOperator(task_id="preflight", scope="decommission",
                                  settings={**STEP_SETTINGS, "enabled": FromParam("stop_brokers")}),
                WaitForClusterOperator(task_id="health_gate", kind="healthy", settings=STEP_SETTINGS),
                ElectLeadersOperator(task_id="lead_away", away=True, operation=OPERATION, settings=STEP_SETTINGS),
                reassignment_waves("decommission", operation=OPERATION,
                                   settings={"drain_only": FromParam("drain_only")}),
                BrokerServiceOperator(task_id="stop_brokers", action="stop", operation=OPERATION,
                                      settings={**STEP_SETTINGS, "enabled": FromParam("stop_brokers")}),
            ],
            operation=OPERATION,
            settings=NO_COMMANDS,
        )
    return dag
