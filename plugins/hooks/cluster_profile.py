"""Read a :class:`kafka_ops.profile.ClusterProfile` from an Airflow ``kafka`` connection."""

from __future__ import annotations

import json

from airflow.sdk import BaseHook
from kafka_ops.profile import ClusterProfile


def get_cluster_profile(conn_id: str) -> ClusterProfile:
    """Fetch connection ``conn_id`` and parse its host / port / login / password / extra.

    :raises ValueError: extra is not a JSON object, or the profile is invalid (field named).
    :raises airflow.sdk.exceptions.AirflowRuntimeError: (or the SDK's not-found error) when the
        connection does not exist.
    """
    conn = BaseHook.get_connection(conn_id)
    if conn.extra:
        try:
            parsed = json.loads(conn.extra)
        except ValueError as exc:
            raise ValueError(f"connection {conn_id!r}: extra is not valid JSON: {exc}") from None
        if not isinstance(parsed, dict):
            raise ValueError(f"connection {conn_id!r}: extra must be a JSON object")
        extra = conn.extra_dejson  # same content; also registers secret values for log masking
    else:
        extra = {}
    return ClusterProfile.from_connection_fields(
        conn_id,
        conn.host,
        extra,
        port=conn.port,
        login=conn.login,
        password=conn.password,
    )
