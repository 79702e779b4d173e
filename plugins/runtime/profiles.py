"""A cluster's profile as an operator needs it: resolved from its Airflow connection, with an SSH connection
named, or a task failure naming what is wrong (waiting cannot fix a bad connection).
"""

from __future__ import annotations

from airflow.sdk.exceptions import AirflowFailException
from hooks.cluster_profile import get_cluster_profile
from kafka_ops.profile import ClusterProfile


def profile_or_fail(cluster: str) -> ClusterProfile:
    """The cluster profile, with an SSH connection named.

    :raises AirflowFailException: unknown connection or invalid profile (named; waiting cannot fix it).
    """
    try:
        profile = get_cluster_profile(cluster)
        profile.require("ssh_conn_id")
    except Exception as exc:
        raise AirflowFailException(f"cluster {cluster!r}: {exc}") from exc
    return profile
