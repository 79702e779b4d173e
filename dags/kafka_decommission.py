"""Decommission: the Airflow DAG of ``operations.decommission`` (its docstring describes the shape)."""

from operations.decommission import decommission_dag

dag = decommission_dag()
