"""Rolling restart of a Kafka cluster, one broker at a time, stopping itself when the cluster or its
consumers get unhealthy. Declarative composition only: the logic lives in plugins/.

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

from airflow.sdk import DAG
from groups.broker_roll import broker_roll
from groups.cluster_guard import cluster_guard
from groups.roll_params import roll_params

with DAG(
    dag_id="kafka_rolling_restart",
    description="Restart Kafka brokers one at a time behind health and consumer-lag gates",
    schedule=None,
    catchup=False,
    max_active_runs=4,  # runs on different clusters may overlap; the cluster lock serializes per cluster
    tags=["kafka", "kafka-ops"],
    doc_md=__doc__,
    params=roll_params(),
) as dag:
    cluster_guard(broker_roll("restart"), operation="rolling restart", roll_ids=["restart"])
