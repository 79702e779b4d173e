"""ZooKeeper-to-KRaft migration: the Airflow DAG of ``operations.zk_to_kraft`` (its docstring describes the shape)."""

from operations.zk_to_kraft import zk_to_kraft_dag

dag = zk_to_kraft_dag()
