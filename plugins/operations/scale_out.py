"""Scale-out of a Kafka cluster: new brokers receive their share of partitions through throttled waves,
the whole operation stopping itself when the cluster gets unhealthy.

Shape: ``check_and_lock`` -> ``validate`` (new ids sane, none holds data, no other
reassignment) -> ``start_new_brokers`` (with ``start_new_brokers``: the profile's service_start on each
unregistered new broker's host from ``broker_hosts``, then wait until registered) -> ``health_gate`` ->
``reassign`` (``snapshot`` -> ``plan``: spark-submit ``spark/reassignment_plan.py --mode scale-out`` ->
``check_plan`` -> ``wave`` per wave, "wave i/n (x GB, y moves)", throttled, verified -> ``remove_throttles``
-> ``preferred_leaders``) -> ``run_outcome`` (teardown: the final health check after a run that did its work, the
lock released, the run's note).

Dry run: snapshot and plan (files, chart and rollback file written, paths in the log), then every step
only logs what it would do. Resume: clear the failed task; a wave never starts a move twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.sdk import DAG
from groups.cluster_guard import cluster_guard
from groups.reassignment_waves import reassignment_waves
from operators.broker_service import BrokerServiceOperator
from operators.cluster_checks import WaitForClusterOperator
from operators.preflight import PreflightOperator
from operators.reassignment_checks import ReassignmentChecksOperator
from runtime.params import FromParam
from runtime.settings_table import param

from operations.operation_dag import operation_dag
from operations.reassignment_params import NO_COMMANDS, STEP_SETTINGS, reassignment_params

OPERATION = "scale-out"


def scale_out_dag(dag_id: str = "kafka_scale_out", *, schedule: Any = None,
                  defaults: Mapping[str, Any] | None = None) -> DAG:
    """The scale-out DAG (see the module docstring); ``schedule`` / ``defaults`` as in
    ``operations.operation_dag.operation_dag`` (a maintenance-window timetable gates every broker, batch and wave)."""
    with operation_dag(
        dag_id,
        description="Add brokers to a Kafka cluster and move their share of partitions to them, throttled, in waves",
        doc_md=__doc__,
        schedule=schedule,
        defaults=defaults,
        params={
            **reassignment_params("Ids of the new brokers"),
            "start_new_brokers": param("start_new_brokers"),
        },
    ) as dag:
        cluster_guard(
            [
                ReassignmentChecksOperator(task_id="validate", mode="scale-out",
                                           settings={**STEP_SETTINGS,
                                                     "start_new_brokers": FromParam("start_new_brokers")}),
                PreflightOperator(task_id="preflight", scope="scale-out",
                                  settings={**STEP_SETTINGS, "enabled": FromParam("start_new_brokers")}),
                BrokerServiceOperator(task_id="start_new_brokers", action="start", operation=OPERATION,
                                      settings={**STEP_SETTINGS, "enabled": FromParam("start_new_brokers")}),
                WaitForClusterOperator(task_id="health_gate", kind="healthy", settings=STEP_SETTINGS),
                reassignment_waves("scale-out", operation=OPERATION),
            ],
            operation=OPERATION,
            settings=NO_COMMANDS,
        )
    return dag
