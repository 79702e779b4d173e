"""States of this run's task instances, read through the Task SDK (``RuntimeTaskInstance.get_task_states``).

The Task SDK answers ``{run_id: {key: state}}`` where ``key`` is the task id of an unmapped instance and
``"<task_id>_<map_index>"`` of a mapped one, and ``state`` a ``TaskInstanceState`` or None (not set). Both the
broker roll (the previous instance of its mapped task) and the lock check before each action (this instance and the
run's teardown) read states this way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def instance_key(task_id: str, map_index: int | None = -1) -> str:
    """The Task SDK's key of an instance: ``"restart.broker_1"`` for map index 1, ``"run_outcome"`` unmapped."""
    return task_id if map_index is None or map_index < 0 else f"{task_id}_{map_index}"


def in_this_run(ti: Any, task_ids: Sequence[str]) -> dict[str, str | None]:
    """The states of every instance of ``task_ids`` in ``ti``'s run, by :func:`instance_key`: the state's value
    (``"running"``, ``"failed"``...) or None where none is set. One request to the API server.

    :param ti: the running task instance (``context["ti"]``).
    :raises Exception: whatever the Task SDK's request raises (the caller's step fails like any other).
    """
    states = ti.get_task_states(dag_id=ti.dag_id, task_ids=list(task_ids), run_ids=[ti.run_id])
    return {k: None if v is None else str(getattr(v, "value", v)) for k, v in states.get(ti.run_id, {}).items()}
