"""A test-only DAG: two rolls over the same brokers in one run (what an upgrade does with its phases)."""

from __future__ import annotations

from airflow.sdk import DAG
from groups.broker_roll import broker_roll
from groups.cluster_guard import cluster_guard
from groups.roll_params import roll_params

with DAG(dag_id="kafka_two_rolls_test", schedule=None, catchup=False, params=roll_params(),
         tags=["kafka-ops-test"]) as dag:
    cluster_guard([broker_roll("first"), broker_roll("second")], operation="two rolls (test)",
                  roll_ids=["first", "second"])
