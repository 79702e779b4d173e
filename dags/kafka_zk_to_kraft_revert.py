"""Revert of a ZooKeeper-to-KRaft migration that is not finalized: the Airflow DAG of ``operations.zk_to_kraft``."""

from operations.zk_to_kraft import zk_to_kraft_revert_dag

dag = zk_to_kraft_revert_dag()
