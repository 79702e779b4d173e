"""What the Grid view shows of a running mapped task: its label (``rendered_map_index``).

Airflow renders ``map_index_template`` when the task starts and again when it ends; in between
:func:`show_step` replaces the label with the broker's current step ("broker 3 · 2/6 · caught up?"), so
the Grid shows where a roll is without a task per step. The label goes back to the template's text when
the task ends.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)


def show_step(context: Any, label: str) -> None:
    """Set the running task instance's Grid label to ``label`` (at most 250 characters). Best effort: a
    runtime without the Task SDK supervisor (unit tests) just logs it."""
    label = label[:250]
    ti = context.get("ti")
    try:
        from airflow.sdk.execution_time import task_runner
        from airflow.sdk.execution_time.comms import SetRenderedMapIndex

        comms = getattr(task_runner, "SUPERVISOR_COMMS", None)
        if ti is None or comms is None or getattr(ti, "map_index", -1) < 0:
            return
        ti.rendered_map_index = label
        comms.send(msg=SetRenderedMapIndex(rendered_map_index=label))
    except Exception as exc:  # the label is cosmetic: never fail a step for it
        log.debug("could not update the Grid label to %r: %s", label, exc)
