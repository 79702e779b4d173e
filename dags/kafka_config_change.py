"""Config change: the Airflow DAG of ``operations.config_change`` (its docstring describes the shape)."""

from operations.config_change import config_change_dag

dag = config_change_dag()
