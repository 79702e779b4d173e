"""Upgrade: the Airflow DAG of ``operations.upgrade`` (its docstring describes the shape)."""

from operations.upgrade import upgrade_dag

dag = upgrade_dag()
