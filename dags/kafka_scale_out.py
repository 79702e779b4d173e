"""Scale-out: the Airflow DAG of ``operations.scale_out`` (its docstring describes the shape)."""

from operations.scale_out import scale_out_dag

dag = scale_out_dag()
