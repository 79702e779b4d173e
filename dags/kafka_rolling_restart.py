"""Rolling restart of a Kafka cluster, one broker (or batch) at a time, behind health and consumer-lag gates:
the Airflow DAG of ``operations.rolling_restart`` (its docstring describes the shape and resume)."""

from operations.rolling_restart import rolling_restart_dag

dag = rolling_restart_dag()
