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

from airflow.sdk import DAG, Param
from groups.broker_roll import broker_roll
from groups.cluster_guard import cluster_guard

COMMAND = {"type": ["null", "string"], "maxLength": 4096}

with DAG(
    dag_id="kafka_rolling_restart",
    description="Restart Kafka brokers one at a time behind health and consumer-lag gates",
    schedule=None,
    catchup=False,
    max_active_runs=4,  # runs on different clusters may overlap; the cluster lock serializes per cluster
    tags=["kafka", "kafka-ops"],
    doc_md=__doc__,
    params={
        "cluster": Param("kafka_sandbox", type="string", minLength=1,
                         description="Airflow connection id (conn type kafka) of the cluster profile"),
        "brokers": Param([], type="array", items={"type": "integer", "minimum": 0}, uniqueItems=True,
                         description="Broker ids to restart; empty = all, controller last"),
        "keep_order": Param(False, type="boolean",
                            description="Keep the given broker order (do not move the controller last)"),
        "pre_stop": Param(None, **COMMAND, description="Name of a profile command to run on the broker host "
                          "before stopping (non-zero exit fails the step); empty = none"),
        "pre_start": Param(None, **COMMAND, description="Name of a profile command to run before starting"),
        "stop_command": Param(None, **COMMAND, description="Name of a profile command replacing service_stop"),
        "start_command": Param(None, **COMMAND, description="Name of a profile command replacing service_start"),
        "healthcheck_interval_s": Param(5, type="integer", minimum=1, maximum=600,
                                        description="Seconds between health checks"),
        "healthcheck_timeout_s": Param(900, type="integer", minimum=10, maximum=86400,
                                       description="A wait fails after this many seconds, naming what is unhealthy"),
        "consumer_groups": Param([], type=["array", "null"], items={"type": "string"},
                                 description="Burrow-watched groups: [] = the profile's list, null = no lag gate"),
        "lag_ok_consecutive": Param(3, type="integer", minimum=1, maximum=100,
                                    description="Burrow must say OK this many polls in a row before a stop"),
        "soak_s": Param(0, type="integer", minimum=0, maximum=86400,
                        description="Pause after each broker, seconds"),
        "dry_run": Param(False, type="boolean", description="Plan and log every step; touch nothing"),
        "lock_wait": Param("wait", type="string", enum=["wait", "fail"],
                           description="Another operation holds the cluster: wait for it, or fail at once"),
    },
) as dag:
    cluster_guard(broker_roll("restart"), operation="rolling restart", roll_ids=["restart"])
