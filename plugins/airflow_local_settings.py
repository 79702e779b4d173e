"""kafka-ops' Airflow cluster policy: Grid labels for mapped instances before they start.

Airflow imports ``airflow_local_settings`` from ``$AIRFLOW_HOME/config`` or else from the plugins folder (both
are on ``sys.path``; the config folder comes first). This one installs a single policy,
``task_instance_mutation_hook`` (``runtime.pending_labels.label_new_instance``): when the scheduler creates
a roll's mapped instances, each gets the label its plan published ("broker 3 (2/3)"), so the Grid does not
show bare map indexes until the instances run.

A deployment that has an ``airflow_local_settings.py`` of its own (in ``$AIRFLOW_HOME/config``, which wins)
calls ``label_new_instance(task_instance, dag_run)`` from its own ``task_instance_mutation_hook``.
"""

from __future__ import annotations

from typing import Any

from runtime.pending_labels import label_new_instance

__all__ = ["task_instance_mutation_hook"]


def task_instance_mutation_hook(task_instance: Any, dag_run: Any) -> None:
    """Airflow's cluster policy hook (``airflow.policies.task_instance_mutation_hook``), called by the scheduler
    for each task instance it creates or reconciles: labels a new mapped instance of a kafka-ops roll."""
    label_new_instance(task_instance, dag_run)
