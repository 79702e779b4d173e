"""A test-only DAG: two rolls over the same brokers in one run (what an upgrade does with its phases). The
second roll has a needs-action rule (broker 0 needs nothing) and a before-start step (it records the broker
in the file named by $KAFKA_OPS_TEST_BEFORE_START), the hooks the upgrade will use."""

from __future__ import annotations

import os

from airflow.sdk import DAG
from groups.broker_roll import broker_roll
from groups.cluster_guard import cluster_guard
from kafka_ops.roll_spec import RollSpec
from operations.roll_params import roll_params


def all_but_broker_0(broker_id, facts, settings):
    return (broker_id != 0, "requested" if broker_id != 0 else "broker 0 is already where the test wants it")


def record_before_start(profile, broker, settings, log, dry_run):
    with open(os.environ["KAFKA_OPS_TEST_BEFORE_START"], "a") as marks:
        marks.write(f"{broker['id']}\n")


with DAG(dag_id="kafka_two_rolls_test", schedule=None, catchup=False, params=roll_params(),
         tags=["kafka-ops-test"]) as dag:
    cluster_guard([broker_roll("first"),
                   broker_roll(RollSpec("second", needs_action=all_but_broker_0, before_start=record_before_start))],
                  operation="two rolls (test)")
