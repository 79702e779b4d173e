"""Trigger-form params of the reassignment operations (scale-out, decommission)."""

from __future__ import annotations

from airflow.sdk import Param
from runtime.params import FromParam

#: cluster_guard's command settings: the reassignment DAGs run no roll commands.
NO_COMMANDS = {"pre_stop": None, "pre_start": None, "stop_command": None, "start_command": None}
#: What the steps around the waves (validate, start / stop brokers, gates) read from the params.
STEP_SETTINGS = {name: FromParam(name) for name in ("cluster", "brokers", "dry_run", "healthcheck_interval_s",
                                                    "healthcheck_timeout_s")}


def reassignment_params(brokers_description: str) -> dict[str, Param]:
    """Params read by ``groups.reassignment_waves`` and ``groups.cluster_guard`` (fresh objects per DAG).

    :param brokers_description: what ``brokers`` means in this operation (new brokers / brokers to drain).
    """
    return {
        "cluster": Param("kafka_sandbox", type="string", minLength=1,
                         description="Airflow connection id (conn type kafka) of the cluster profile"),
        "brokers": Param([], type="array", items={"type": "integer", "minimum": 0}, minItems=1, uniqueItems=True,
                         description=brokers_description),
        "throttle_bytes_per_s": Param(50_000_000, type="integer", minimum=1,
                                      description="Replication throttle while a wave copies, bytes/s per broker "
                                      "(leader/follower.replication.throttled.rate)"),
        "wave_bytes": Param(None, type=["null", "integer"], minimum=1,
                            description="Most bytes a wave copies; empty = the planner's default"),
        "wave_moves_per_broker": Param(None, type=["null", "integer"], minimum=1,
                                       description="Most replica moves per broker in a wave; empty = no cap"),
        "max_bytes": Param(None, type=["null", "integer"], minimum=1,
                           description="Most bytes the whole plan may copy; empty = no cap"),
        "verify_interval_s": Param(10, type="integer", minimum=1, maximum=600,
                                   description="Seconds between progress checks of a wave"),
        "verify_timeout_s": Param(21600, type="integer", minimum=10, maximum=7 * 86400,
                                  description="A wave not complete after this many seconds fails"),
        "cancel_on_timeout": Param(True, type="boolean",
                                   description="Cancel a wave's moves that are still running at its timeout"),
        "healthcheck_interval_s": Param(5, type="integer", minimum=1, maximum=600,
                                        description="Seconds between health checks"),
        "healthcheck_timeout_s": Param(900, type="integer", minimum=10, maximum=86400,
                                       description="A health wait fails after this many seconds"),
        "window_policy": Param("wait", type="string", enum=["wait", "fail"],
                               description="Outside the DAG's maintenance window (a MaintenanceWindowTimetable "
                               "schedule) before a broker, batch or wave: wait (deferred) for the next window, or "
                               "fail; a started broker always finishes. No window = always open"),
        "dry_run": Param(False, type="boolean",
                         description="Snapshot and plan (files and chart written), then only log what would be done"),
        "lock_wait": Param("wait", type="string", enum=["wait", "fail"],
                           description="Another operation holds the cluster: wait for it, or fail at once"),
    }
