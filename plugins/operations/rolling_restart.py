"""Rolling restart of a Kafka cluster, one broker at a time, stopping itself when the cluster or its
consumers get unhealthy. The DAG is built by
:func:`rolling_restart_dag`; dags/kafka_rolling_restart.py builds the default one.

Shape: ``check_params`` -> ``lock_cluster`` -> roll ``restart`` (``restart.plan``: validate against the
live cluster and freeze the order, controller last; ``restart.broker``: one mapped task per broker,
labelled "broker <id> (<position>/<total>)", strictly one after another: gate -> pre-stop -> stop ->
gone -> pre-start -> start -> registered -> caught up -> preferred leaders back -> soak) ->
``final_health`` -> ``forget_rolls`` -> ``unlock_cluster`` (teardown, also after failures).

Resume: clear the failed tasks. The roll's record says what this run did to each broker; a broker it
finished is never restarted again, a broker it left stopped is started, a broker it did not stop but
finds down stops the roll (see plugins/kafka_ops/roll.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.sdk import DAG
from groups.broker_roll import broker_roll
from groups.cluster_guard import cluster_guard
from groups.operation_dag import operation_dag
from groups.roll_params import roll_params


def rolling_restart_dag(dag_id: str = "kafka_rolling_restart", *, schedule: Any = None,
                        defaults: Mapping[str, Any] | None = None) -> DAG:
    """The rolling-restart DAG (see the module docstring); ``schedule`` / ``defaults`` as in
    ``groups.operation_dag.operation_dag`` (a maintenance-window timetable gates every broker)."""
    with operation_dag(
        dag_id,
        description="Restart Kafka brokers one at a time behind health and consumer-lag gates",
        doc_md=__doc__,
        params=roll_params(),
        schedule=schedule,
        defaults=defaults,
    ) as dag:
        cluster_guard(broker_roll("restart"), operation="rolling restart", roll_ids=["restart"])
    return dag
