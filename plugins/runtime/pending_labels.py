"""Grid labels for mapped instances that have not started ("broker 3 (2/3)" instead of a bare "1").

Airflow renders a mapped task's ``map_index_template`` only when an instance starts (apache/airflow#57208).
Until then the Grid's list of a roll's instances shows bare map indexes (``0``, ``1``, ...), which read like
broker ids. Two halves close that gap:

- the plan task that produces the mapped items publishes each instance's label (:func:`publish`): an XCom under
  :data:`GRID_LABELS_KEY`, ``{"<mapped task id>": ["<label of map index 0>", ...]}``, from the items'
  ``grid_label``;
- the scheduler, when it creates the mapped instances, copies each one's label into its ``rendered_map_index``
  (:func:`label_new_instance`). This is installed as Airflow's ``task_instance_mutation_hook`` cluster
  policy by ``plugins/airflow_local_settings.py`` (Airflow imports that module from the plugins folder).

The label published must be the text the instance's ``map_index_template`` renders when it starts (each roll's
items carry it as ``grid_label``), so the Grid's text does not change at the start. A label that is already
set (a running task's live step, the text rendered when it ended, a cleared instance) is never overwritten.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

#: The XCom key under which a plan task publishes the labels of the instances it maps.
GRID_LABELS_KEY = "kafka_ops_grid_labels"

#: Airflow's limit of ``rendered_map_index`` (``String(250)``), in characters.
MAX_LABEL = 250


def publish(context: Any, mapped_task_id: str | None, items: list[dict]) -> list[dict]:
    """Publish the Grid labels of ``mapped_task_id``'s instances from the running plan task, and return
    ``items`` (its mapped output, one dict per map index in order, each with its label as ``grid_label``).

    The labels go into an XCom of the plan task under :data:`GRID_LABELS_KEY`, cut to 250 characters.
    Nothing is published for ``mapped_task_id`` None, no items, or a runtime without a task instance in
    ``context`` (unit tests).
    """
    ti = context.get("ti")
    if ti is not None and mapped_task_id and items:
        labels = [str(item["grid_label"])[:MAX_LABEL] for item in items]
        ti.xcom_push(key=GRID_LABELS_KEY, value={mapped_task_id: labels})
    return items


def label_for(published: Any, task_id: str, map_index: int) -> str | None:
    """The label published for ``task_id``'s instance ``map_index`` in one XCom value of :func:`publish`, or
    None (another task's labels, an index beyond the list, or a value of another shape)."""
    if not isinstance(published, dict):
        return None
    labels = published.get(task_id)
    if not isinstance(labels, list) or not 0 <= map_index < len(labels):
        return None
    label = labels[map_index]
    return label[:MAX_LABEL] if isinstance(label, str) and label else None


def label_new_instance(task_instance: Any, dag_run: Any) -> None:
    """Airflow's ``task_instance_mutation_hook``: give a mapped instance that has no label yet the label its plan
    task published for it in this DAG run.

    Runs in the scheduler (and wherever Airflow creates or clears task instances), inside the caller's
    transaction: it reads the run's XComs through the session ``dag_run`` belongs to, without autoflush, and
    never commits. Cheap for everything else: unmapped instances, instances with a label and calls without a
    run return before any query. Never raises (a label is cosmetic; the scheduler must not fail for it).
    """
    try:
        if dag_run is None or getattr(task_instance, "map_index", -1) < 0:
            return
        if getattr(task_instance, "_rendered_map_index", None) is not None:
            return
        from sqlalchemy import select
        from sqlalchemy.orm import object_session

        session = object_session(dag_run)
        if session is None or getattr(dag_run, "id", None) is None:
            return
        from airflow.models.xcom import XComModel

        with session.no_autoflush:
            rows = session.scalars(select(XComModel).where(XComModel.dag_run_id == dag_run.id,
                                                           XComModel.key == GRID_LABELS_KEY)).all()
        for row in rows:
            label = label_for(XComModel.deserialize_value(row), task_instance.task_id, task_instance.map_index)
            if label is not None:
                task_instance._rendered_map_index = label
                return
    except Exception as exc:  # noqa: BLE001 - never break the scheduler for a label
        log.debug("no pending Grid label for %s: %s", task_instance, exc)
