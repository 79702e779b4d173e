"""Trigger-form params of the reassignment operations (scale-out, decommission)."""

from __future__ import annotations

from airflow.sdk import Param
from runtime.params import FromParam
from runtime.settings_table import param, params

#: cluster_guard's command settings: the reassignment DAGs run no roll commands.
NO_COMMANDS = {"pre_stop": None, "pre_start": None, "stop_command": None, "start_command": None}
#: What the steps around the waves (validate, start / stop brokers, gates) read from the params.
STEP_SETTINGS = {name: FromParam(name) for name in ("cluster", "brokers", "dry_run", "healthcheck_interval_s",
                                                    "healthcheck_timeout_s", "fix_leader_imbalance")}


def reassignment_params(brokers_description: str) -> dict[str, Param]:
    """Params read by ``groups.reassignment_waves`` and ``groups.cluster_guard`` (fresh objects per DAG), from the
    one settings table (``runtime.settings_table``).

    :param brokers_description: what ``brokers`` means in this operation (new brokers / brokers to drain).
    """
    return {
        "cluster": param("cluster"),
        "dry_run": param("dry_run", "Snapshot and plan (files and chart written), then only log what would be done"),
        "brokers": param("brokers", brokers_description, minItems=1),
        **params("throttle_bytes_per_s", "wave_bytes", "wave_moves_per_broker", "max_bytes", "verify_interval_s",
                 "verify_timeout_s", "cancel_on_timeout", "healthcheck_interval_s"),
        "healthcheck_timeout_s": param("healthcheck_timeout_s", "A health wait fails after this many seconds"),
        "fix_leader_imbalance": param("fix_leader_imbalance"),
        "window_policy": param("window_policy"),
        "lock_wait": param("lock_wait"),
    }
