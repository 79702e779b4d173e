"""``operation_dag(...)``: the DAG object every kafka-ops operation is built in (manual or scheduled
runs, no catch-up, up to 4 runs at once: runs on different clusters may overlap, the cluster lock
serializes them per cluster)."""

from __future__ import annotations

from typing import Any

from airflow.sdk import DAG


def operation_dag(dag_id: str, *, description: str, doc_md: str | None, params: dict[str, Any],
                  schedule: Any = None) -> DAG:
    """A DAG with the operations' shared settings; use as ``with operation_dag(...) as dag:``."""
    return DAG(dag_id=dag_id, description=description, schedule=schedule, catchup=False, max_active_runs=4,
               tags=["kafka", "kafka-ops"], doc_md=doc_md, params=params)
