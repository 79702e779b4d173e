"""``operation_dag(...)``: the DAG object every kafka-ops operation is built in (manual or scheduled
runs, no catch-up, up to 4 runs at once: runs on different clusters may overlap, the cluster lock
serializes them per cluster)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.sdk import DAG, Param


def with_defaults(params: Mapping[str, Param], defaults: Mapping[str, Any] | None) -> dict[str, Param]:
    """``params`` with the trigger-form defaults in ``defaults`` replaced (schema and description kept).

    :raises ValueError: a name that is not one of ``params`` (a typo would otherwise be ignored).
    """
    out = dict(params)
    unknown = sorted(set(defaults or {}) - set(out))
    if unknown:
        raise ValueError(f"defaults for unknown params {unknown}; known: {sorted(out)}")
    for name, value in (defaults or {}).items():
        old = out[name]
        out[name] = Param(value, description=old.description, **old.schema)
    return out


def operation_dag(dag_id: str, *, description: str, doc_md: str | None, params: dict[str, Any],
                  schedule: Any = None, defaults: Mapping[str, Any] | None = None) -> DAG:
    """A DAG with the operations' shared settings; use as ``with operation_dag(...) as dag:``.

    :param schedule: None (manual runs only) or a timetable, e.g.
        ``kafka_timetables.MaintenanceWindowTimetable("0 2 * * 6", timedelta(hours=4))``, whose window also
        gates every broker, batch and wave of the run (``runtime.window_gate``).
    :param defaults: trigger-form defaults replacing the operation's own (a per-cluster DAG sets
        ``{"cluster": "kafka_prod"}``); scheduled runs run with them.
    """
    return DAG(dag_id=dag_id, description=description, schedule=schedule, catchup=False, max_active_runs=4,
               tags=["kafka", "kafka-ops"], doc_md=doc_md, params=with_defaults(params, defaults))
