"""Rolling restart of a Kafka cluster, one node at a time, stopping itself when the cluster or its
consumers get unhealthy. The DAG is built by
:func:`rolling_restart_dag`; dags/kafka_rolling_restart.py builds the default one.

Shape: ``check_and_lock`` -> side by side, none of them touching a node: ``preflight`` (every
host the run touches reachable, its commands there), ``controllers.plan`` (KRaft only: the mode and the ``roles``
param decide, then the quorum's voters are validated and frozen, followers first, the quorum leader last) and
``restart.plan`` (validate against the live cluster and freeze the order, the ZooKeeper-mode controller last) ->
roll ``controllers`` (``controllers.controller``: one mapped task per controller, labelled "controller <id>
(<position>/<total>)" (" · active" for the quorum leader), strictly one after another: gate (a caught-up
majority of the voters without it) -> stop -> gone -> start -> back (a voter again, caught up) -> soak) ->
roll ``restart`` (``restart.broker``: one mapped task per broker, labelled "broker <id> (<position>/<total>)",
strictly one after another: gate -> pre-stop -> stop -> gone -> pre-start -> start -> registered -> caught up
-> preferred leaders back -> soak) -> ``run_outcome`` (teardown, also after failures: after a run that did its work
the cluster healthy and the roll records deleted; the lock released, the run's note).

``roles``: ``all`` (default; KRaft: controllers, then brokers), ``brokers``, ``controllers``. A roll with nothing
to do (the controllers on a ZooKeeper-mode cluster or with ``roles=brokers``; the brokers with
``roles=controllers``) plans an empty list and its mapped task is *skipped*: ``restart.broker`` runs with
``none_failed``, so a skipped roll does not skip what follows while a failed one still stops it. Both plans run
before any node is touched, so a broker roll that would be refused (a broker down, an unknown id) is refused before
a controller restarts.

Resume: clear the failed tasks. Each roll's record says what this run did to each node; a node it finished
is never restarted again, a node it left stopped is started, a node it did not stop but finds down stops the
roll (see plugins/kafka_ops/roll.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.sdk import DAG, TriggerRule
from groups.broker_roll import broker_roll
from groups.cluster_guard import cluster_guard, task_in
from groups.controller_roll import controller_roll
from kafka_ops.roll_spec import RollSpec
from operators.preflight import PreflightOperator
from runtime.params import FromParam

from operations.operation_dag import operation_dag
from operations.roll_params import role_params, roll_params

#: What the preflight reads: the nodes the run touches and the commands it sends them.
PREFLIGHT_SETTINGS = {name: FromParam(name) for name in (
    "cluster", "dry_run", "healthcheck_interval_s", "healthcheck_timeout_s", "brokers", "roles", "controllers",
    "pre_stop", "stop_command", "pre_start", "start_command")}


def rolling_restart_dag(dag_id: str = "kafka_rolling_restart", *, schedule: Any = None,
                        defaults: Mapping[str, Any] | None = None) -> DAG:
    """The rolling-restart DAG (see the module docstring); ``schedule`` / ``defaults`` as in
    ``operations.operation_dag.operation_dag`` (a maintenance-window timetable gates every controller and broker)."""
    with operation_dag(
        dag_id,
        description="Restart Kafka controllers and brokers one at a time behind health and consumer-lag gates",
        doc_md=__doc__,
        params={**roll_params(), **role_params()},
        schedule=schedule,
        defaults=defaults,
    ) as dag:
        preflight = PreflightOperator(task_id="preflight", scope="roll", settings=PREFLIGHT_SETTINGS)
        # a run that names nodes of one kind only restarts only those (kafka_ops.controller_roll.role_plan): each
        # roll is told what the other one's param names
        controllers = controller_roll(RollSpec("controllers", settings={"named_brokers": FromParam("brokers")}))
        # the broker task also follows the controller roll, which is empty (skipped) in ZooKeeper mode and for
        # roles=brokers: none_failed lets that skip through, a failure still stops it
        brokers = broker_roll(RollSpec("restart", settings={"roles": FromParam("roles"),
                                                            "named_controllers": FromParam("controllers")}),
                              broker_trigger_rule=TriggerRule.NONE_FAILED)
        cluster_guard(
            # the hosts are checked while both rolls plan (nothing of the three touches a node); the first node
            # is stopped once all three passed
            [[preflight, task_in(controllers, "plan"), task_in(brokers, "plan")],
             task_in(controllers, "controller"),
             task_in(brokers, "broker")],
            operation="rolling restart",
        )
    return dag
