"""The trigger-form params every DAG built on ``broker_roll`` and ``cluster_guard`` shares, from the one settings
table (``runtime.settings_table``: defaults, schemas and descriptions written once).

Commands are *names* of the profile's ``commands`` (shell text only where the profile allows ad-hoc
commands), empty by default so the form submits with its defaults.
"""

from __future__ import annotations

from airflow.sdk import Param
from runtime.settings_table import params

#: The params of a roll-based DAG, in form order (``dry_run`` second: the first choice a user makes).
ROLL_PARAMS = ("cluster", "dry_run", "brokers", "keep_order", "pre_stop", "pre_start", "stop_command", "start_command",
               "healthcheck_interval_s", "healthcheck_timeout_s", "consumer_groups", "lag_ok_consecutive",
               "fix_leader_imbalance", "soak_s", "max_parallel", "batch_by", "window_policy", "lock_wait")
#: The KRaft role params.
ROLE_PARAMS = ("roles", "controllers")


def role_params() -> dict[str, Param]:
    """The KRaft role params of a DAG whose rolls cover controllers (``groups.controller_roll``) as well as
    brokers (fresh objects per DAG): ``roles`` and ``controllers``. A DAG without them rolls brokers only."""
    return params(*ROLE_PARAMS)


def roll_params() -> dict[str, Param]:
    """Params read by ``groups.cluster_guard`` and ``groups.broker_roll`` (fresh objects per DAG)."""
    return params(*ROLL_PARAMS)
