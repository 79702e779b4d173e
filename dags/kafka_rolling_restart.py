"""Rolling restart of a Kafka cluster, one broker at a time, stopping itself when the cluster or its
consumers get unhealthy. Declarative composition only: the logic lives in plugins/.

Shape: plan (validate params, resolve the order, controller last; frozen for the run) -> lock the
cluster (setup) ->
one task group per broker, mapped over the plan and labelled "broker <id>" in the Grid view:
wait_turn -> gate -> pre_stop -> stop -> wait_gone -> pre_start -> start -> wait_registered ->
wait_caught_up -> elect_preferred -> wait_leadership -> soak -> final health check -> forget the
frozen plan -> unlock (teardown, also after failures).

Strictly one broker at a time: mapped instances would run in parallel, so each instance's
``wait_turn`` passes only after the previous broker's ``soak`` succeeded, and fails at once if the
previous broker failed. Resume: steps up to ``wait_gone`` skip a broker already restarted in this run
(registration time after the run was triggered), so clearing a failed task continues at the failed
broker and never restarts a finished one twice.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import DAG, Param, TriggerRule, task_group
from operators.broker_service import BrokerServiceOperator
from operators.leader_election import PreferredLeaderElectionOperator
from operators.restart_planning import ForgetPlanOperator, RollingRestartPlanOperator
from operators.soak import SoakOperator
from sensors.cluster import (
    BrokerGoneSensor,
    BrokerRegisteredSensor,
    ClusterHealthySensor,
    ISRCaughtUpSensor,
    LeadershipBalancedSensor,
    RestartGateSensor,
)
from sensors.lock import ClusterLockSensor, ReleaseClusterLockOperator
from sensors.turn import PreviousBrokerDoneSensor

CLUSTER = "{{ params.cluster }}"
# Reschedule-mode sensors are idempotent; Airflow 3.3's scheduler can fail one in a race
# ("finished with state success, but the task instance's state attribute is queued",
# apache/airflow#71172, seen several times per run under load), so they retry rather than stop the roll;
# their real failures (the previous broker failed, lock_wait=fail) raise AirflowFailException: no retry.
RESCHEDULE_RETRIES = {"retries": 50, "retry_delay": timedelta(seconds=5)}
DRY_RUN = "{{ params.dry_run }}"
INTERVAL = "{{ params.healthcheck_interval_s }}"
BROKER_LABEL = "broker {{ task.broker['id'] }}"

with DAG(
    dag_id="kafka_rolling_restart",
    description="Restart Kafka brokers one at a time behind health and consumer-lag gates",
    schedule=None,
    catchup=False,
    max_active_runs=4,  # runs on different clusters may overlap; the cluster lock serializes per cluster
    render_template_as_native_obj=True,
    tags=["kafka", "kafka-ops"],
    doc_md=__doc__,
    params={
        "cluster": Param("kafka_sandbox", type="string", minLength=1,
                         description="Airflow connection id (conn type kafka) of the cluster profile"),
        "brokers": Param([], type="array", items={"type": "integer", "minimum": 0}, uniqueItems=True,
                         description="Broker ids to restart; empty = all, controller last"),
        "keep_order": Param(False, type="boolean",
                            description="Keep the given broker order (do not move the controller last)"),
        "pre_stop": Param("", type="string", description="Shell command on the broker host before stopping "
                          "(non-zero exit fails the step); $KAFKA_BROKER_ID is set"),
        "pre_start": Param("", type="string", description="Shell command on the broker host before starting"),
        "stop_command": Param("", type="string", description="Override of the profile's service_stop"),
        "start_command": Param("", type="string", description="Override of the profile's service_start"),
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
    plan = RollingRestartPlanOperator(
        task_id="plan",
        cluster=CLUSTER,
        brokers="{{ params.brokers }}",
        keep_order="{{ params.keep_order }}",
        consumer_groups="{{ params.consumer_groups }}",
    )
    lock = ClusterLockSensor(
        task_id="lock_cluster", cluster=CLUSTER, operation="rolling restart", wait="{{ params.lock_wait }}",
        poke_interval=10, timeout=6 * 3600, **RESCHEDULE_RETRIES,
    )
    unlock = ReleaseClusterLockOperator(task_id="unlock_cluster", cluster=CLUSTER)

    @task_group(group_id="restart_broker", tooltip="one broker: gate, stop, start, catch up, leadership back")
    def restart_broker(broker):
        waits = {"interval_s": INTERVAL, "timeout_s": "{{ params.healthcheck_timeout_s }}",
                 "cluster": CLUSTER, "broker": broker, "dry_run": DRY_RUN, "map_index_template": BROKER_LABEL}
        after_skips = {"trigger_rule": TriggerRule.NONE_FAILED}
        service = {"cluster": CLUSTER, "broker": broker, "dry_run": DRY_RUN, "map_index_template": BROKER_LABEL,
                   **after_skips}
        turn = PreviousBrokerDoneSensor(
            task_id="wait_turn", broker=broker, last_task_id="restart_broker.soak", poke_interval=5,
            timeout=7 * 24 * 3600, map_index_template=BROKER_LABEL, **RESCHEDULE_RETRIES,
        )
        gate = RestartGateSensor(
            task_id="gate", consumer_groups="{{ ti.xcom_pull(task_ids='plan', key='consumer_groups') }}",
            ok_streak="{{ params.lag_ok_consecutive }}", **waits,
        )
        pre_stop = BrokerServiceOperator(task_id="pre_stop", action="pre_stop", command="{{ params.pre_stop }}",
                                         **service)
        stop = BrokerServiceOperator(task_id="stop", action="stop", command="{{ params.stop_command }}", **service)
        gone = BrokerGoneSensor(task_id="wait_gone", **waits, **after_skips)
        pre_start = BrokerServiceOperator(task_id="pre_start", action="pre_start", command="{{ params.pre_start }}",
                                          **service)
        start = BrokerServiceOperator(task_id="start", action="start", command="{{ params.start_command }}",
                                      **service)
        registered = BrokerRegisteredSensor(task_id="wait_registered", **waits, **after_skips)
        caught_up = ISRCaughtUpSensor(task_id="wait_caught_up", **waits)
        elect = PreferredLeaderElectionOperator(
            task_id="elect_preferred", cluster=CLUSTER, broker=broker, dry_run=DRY_RUN,
            map_index_template=BROKER_LABEL, retries=3, retry_delay=5,
        )
        leadership = LeadershipBalancedSensor(task_id="wait_leadership", **waits)
        soak = SoakOperator(task_id="soak", broker=broker, soak_s="{{ params.soak_s }}", dry_run=DRY_RUN,
                            map_index_template=BROKER_LABEL)
        turn >> gate >> pre_stop >> stop >> gone >> pre_start >> start >> registered
        registered >> caught_up >> elect >> leadership >> soak

    final = ClusterHealthySensor(
        task_id="final_health", cluster=CLUSTER, dry_run=DRY_RUN, interval_s=INTERVAL,
        timeout_s="{{ params.healthcheck_timeout_s }}",
    )
    forget = ForgetPlanOperator(task_id="forget_plan")
    plan >> lock >> restart_broker.expand(broker=plan.output) >> final >> forget >> unlock.as_teardown(setups=lock)
