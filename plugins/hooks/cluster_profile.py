"""Read a :class:`kafka_ops.profile.ClusterProfile` from an Airflow ``kafka`` connection, and the base of
the hooks that reach a cluster through one (Kafka admin, ZooKeeper)."""

from __future__ import annotations

import json

from airflow.sdk import BaseHook
from kafka_ops.profile import ClusterProfile


def get_cluster_profile(cluster: str) -> ClusterProfile:
    """Fetch connection ``cluster`` (a connection id) and parse its host / port / login / password / extra.

    :raises ValueError: extra is not a JSON object, or the profile is invalid (field named).
    :raises airflow.sdk.exceptions.AirflowRuntimeError: (or the SDK's not-found error) when the
        connection does not exist.
    """
    conn = BaseHook.get_connection(cluster)
    if conn.extra:
        try:
            parsed = json.loads(conn.extra)
        except ValueError as exc:
            raise ValueError(f"connection {cluster!r}: extra is not valid JSON: {exc}") from None
        if not isinstance(parsed, dict):
            raise ValueError(f"connection {cluster!r}: extra must be a JSON object")
        extra = conn.extra_dejson  # same content; also registers secret values for log masking
    else:
        extra = {}
    return ClusterProfile.from_connection_fields(
        cluster,
        conn.host,
        extra,
        port=conn.port,
        login=conn.login,
        password=conn.password,
    )


class ClusterProfileHook(BaseHook):
    """Base of the hooks built from a ``kafka`` connection id or an already parsed profile.

    :param cluster: the connection id (read on first use of :attr:`profile`).
    :param profile: an already parsed profile (tests, scripts, or a caller that has one).
    """

    conn_name_attr = "cluster"
    default_conn_name = "kafka_default"
    conn_type = "kafka"

    def __init__(self, cluster: str | None = None, profile: ClusterProfile | None = None) -> None:
        super().__init__()
        self.cluster = cluster
        self._profile = profile

    @property
    def profile(self) -> ClusterProfile:
        """The cluster profile (read from the connection on first use).

        :raises ValueError: invalid profile. Connection lookups raise the SDK's not-found error.
        """
        if self._profile is None:
            self._profile = get_cluster_profile(self.cluster or self.default_conn_name)
        return self._profile
