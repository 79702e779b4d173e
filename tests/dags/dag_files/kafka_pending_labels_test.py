"""A test-only DAG: a plan task publishes the Grid labels of the instances it maps
(``runtime.pending_labels.publish``) and two tasks are mapped over its output: ``labelled``, whose labels were
published, and ``unlabelled``, whose were not."""

from __future__ import annotations

from airflow.sdk import DAG, task
from runtime.pending_labels import publish

BROKERS = [5, 3, 9]


@task(task_id="plan")
def plan(**context):
    items = [{"id": b, "grid_label": f"broker {b} ({i + 1}/{len(BROKERS)})"} for i, b in enumerate(BROKERS)]
    return publish(context, "labelled", items)


@task(task_id="labelled")
def labelled(item):
    return item["id"]


@task(task_id="unlabelled")
def unlabelled(item):
    return item["id"]


with DAG(dag_id="kafka_pending_labels_test", schedule=None, catchup=False, tags=["kafka-ops-test"]) as dag:
    items = plan()
    labelled.expand(item=items)
    unlabelled.expand(item=items)
