"""The maintenance DAG that deletes roll records nothing can resume any more (``operators.roll_cleanup``; the rules:
``kafka_ops.stale_rolls``). Daily, and by hand from its trigger form (``keep_days``, ``dry_run``)."""

from __future__ import annotations

from airflow.sdk import DAG
from operators.roll_cleanup import ForgetStaleRollsOperator
from runtime.settings_table import param

from operations.operation_dag import TASK_CALLBACKS

DAG_ID = "kafka_ops_roll_records_cleanup"


def roll_records_cleanup_dag(dag_id: str = DAG_ID, schedule: str | None = "@daily") -> DAG:
    """One task, ``forget_stale_rolls``; its params from the one settings table (``keep_days``' bound is refused by
    the task, never clamped by the form: ``runtime.params.out_of_range``)."""
    with DAG(dag_id=dag_id, schedule=schedule, catchup=False, max_active_runs=1, tags=["kafka", "kafka-ops"],
             description="Delete kafka-ops roll records of runs that are gone, succeeded, or failed too long ago",
             doc_md=__doc__,
             params={"dry_run": param("dry_run", "Only log what would be deleted"), "keep_days": param("keep_days")},
             default_args=dict(TASK_CALLBACKS)) as dag:
        ForgetStaleRollsOperator(task_id="forget_stale_rolls")
    return dag
