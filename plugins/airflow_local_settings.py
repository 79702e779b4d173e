"""kafka-ops' Airflow cluster policy: Grid labels for mapped instances before they start.

Airflow imports ``airflow_local_settings`` from ``$AIRFLOW_HOME/config`` or else from the plugins folder (both
are on ``sys.path``; the config folder comes first). This one installs a single policy,
``task_instance_mutation_hook`` (``runtime.pending_labels.label_new_instance``): when the scheduler creates
a roll's mapped instances, each gets the label its plan published ("broker 3 (2/3)"), so the Grid does not
show bare map indexes until the instances run. In the scheduler it also imports what the tasks import, once, so each
task process (forked from it) starts with it (``runtime.task_preimport``).

A deployment that has an ``airflow_local_settings.py`` of its own (in ``$AIRFLOW_HOME/config``, which wins)
calls ``label_new_instance(task_instance, dag_run)`` from its own ``task_instance_mutation_hook`` (and
``runtime.task_preimport.preimport()`` in the scheduler for the quicker task starts).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from runtime.pending_labels import label_new_instance
from runtime.task_preimport import preimport, wanted

__all__ = ["task_instance_mutation_hook"]

# the scheduler imports the operations and their clients once, before it forks its LocalExecutor workers, so each
# task process starts with them (runtime.task_preimport: what it saves, and how to turn it off)
if wanted(sys.argv, os.environ):
    preimport()


def task_instance_mutation_hook(task_instance: Any, dag_run: Any) -> None:
    """Airflow's cluster policy hook (``airflow.policies.task_instance_mutation_hook``), called by the scheduler
    for each task instance it creates or reconciles: labels a new mapped instance of a kafka-ops roll."""
    label_new_instance(task_instance, dag_run)
