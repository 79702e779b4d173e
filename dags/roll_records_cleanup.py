"""Daily maintenance: delete the roll records (Airflow Variables ``kafka_ops_roll__...``) of runs that no longer
exist, succeeded, or failed more than ``keep_days`` ago: the Airflow DAG of ``operations.roll_records_cleanup``."""

from operations.roll_records_cleanup import roll_records_cleanup_dag

dag = roll_records_cleanup_dag()
