"""The trigger-form params every DAG built on ``broker_roll`` and ``cluster_guard`` shares.

Commands are *names* of the profile's ``commands`` (shell text only where the profile allows ad-hoc
commands), empty by default so the form submits with its defaults.
"""

from __future__ import annotations

from airflow.sdk import Param

COMMAND = {"type": ["null", "string"], "maxLength": 4096}


def role_params() -> dict[str, Param]:
    """The KRaft role params of a DAG whose rolls cover controllers (``groups.controller_roll``) as well as
    brokers (fresh objects per DAG): ``roles`` and ``controllers``. A DAG without them rolls brokers only."""
    return {
        "roles": Param("all", type="string", enum=["all", "brokers", "controllers"],
                       description="KRaft: all = the controllers first (one at a time, the active controller last), "
                       "then the brokers; brokers; controllers. ZooKeeper mode: all and brokers roll the brokers "
                       "(the controller is a broker, rolled last); controllers is refused"),
        "controllers": Param([], type="array", items={"type": "integer", "minimum": 0}, uniqueItems=True,
                             description="KRaft controller node ids to restart; empty = every voter of the "
                             "metadata quorum, the active controller last"),
    }


def roll_params() -> dict[str, Param]:
    """Params read by ``groups.cluster_guard`` and ``groups.broker_roll`` (fresh objects per DAG)."""
    return {
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
        "max_parallel": Param(1, type="integer", minimum=1, maximum=1000,
                              description="Brokers that may be down together (1 = one at a time). A batch "
                              "keeps every partition at min.insync.replicas and a leader candidate; the "
                              "controller always goes alone and last"),
        "batch_by": Param("none", type="string", enum=["none", "rack"],
                          description="rack = a batch holds brokers of one rack only (needs broker.rack)"),
        "window_policy": Param("wait", type="string", enum=["wait", "fail"],
                               description="Outside the DAG's maintenance window (a MaintenanceWindowTimetable "
                               "schedule) before a broker, batch or wave: wait (deferred) for the next window, or "
                               "fail; a started broker always finishes. No window = always open"),
        "dry_run": Param(False, type="boolean", description="Plan and log every step; touch nothing"),
        "lock_wait": Param("wait", type="string", enum=["wait", "fail"],
                           description="Another operation holds the cluster: wait for it, or fail at once"),
    }
