"""Rolling restart of a Kafka cluster, KRaft controllers (the active one last) then brokers, one at a time (brokers
also in batches), behind quorum, health and consumer-lag gates:
the Airflow DAG of ``operations.rolling_restart`` (its docstring describes the shape and resume)."""

from operations.rolling_restart import rolling_restart_dag

dag = rolling_restart_dag()
