"""The DAG run's note as the operator's first look: what the run does ("DRY RUN" included) while it runs, and
its closing summary when it ends (failed tasks, brokers down, URP, offline partitions, each roll, the lock,
the next action). Written through Airflow's REST API (``hooks.airflow_api``) when the deployment has the
connection ``kafka_ops_airflow_api``; without it the task logs once that no note is written. Never fails a
task: a note is a convenience, the task logs carry the same lines.
"""

from __future__ import annotations

import logging
from typing import Any

from hooks.airflow_api import CONN_ID, AirflowApiHook

log = logging.getLogger(__name__)


MAP_INDEX_MARK = ": map index "  # the rolls' lines saying which map index is which broker / controller


def note_run(context: Any, text: str, task_log: Any = log, line_key: str | None = None,
             keep_map_indexes: bool = False) -> bool:
    """Set the running DAG run's note to ``text`` (cut to Airflow's 1,000 characters). True when written.

    ``line_key`` (e.g. ``"roll 'restart'"``): keep the note and put ``"<line_key>: <text>"`` on a line of its own
    instead, replacing an earlier line with the same key (each roll adds what its map indexes mean); the
    missing connection is then logged at DEBUG only (the run's first note already said so).
    ``keep_map_indexes``: keep the rolls' "map index" lines of the current note after ``text`` (the closing
    summary: which map index is which broker, for `airflow tasks clear -m` and marking an instance failed)."""
    ti = context.get("ti")
    dag_id = getattr(ti, "dag_id", None) or getattr(context.get("dag"), "dag_id", None)
    run_id = context.get("run_id") or getattr(ti, "run_id", None)
    if not dag_id or not run_id:
        return False
    try:
        hook = AirflowApiHook()
        hook.get_connection(CONN_ID)
    except Exception:  # noqa: BLE001 - AirflowNotFoundException: the deployment does not want notes
        task_log.log(logging.DEBUG if line_key else logging.INFO, "run note not written: no connection %r (an "
                     "Airflow REST API user that may edit DAG runs; see the README)", CONN_ID)
        return False
    try:
        if line_key is not None:
            kept = [line for line in hook.get_dag_run_note(dag_id, run_id).splitlines()
                    if line and not line.startswith(f"{line_key}:")]
            text = "\n".join([*kept, f"{line_key}: {text}"])
        elif keep_map_indexes:
            kept = [line for line in hook.get_dag_run_note(dag_id, run_id).splitlines() if MAP_INDEX_MARK in line]
            text = "\n".join([text, *kept])
        hook.set_dag_run_note(dag_id, run_id, text)
    except Exception as exc:  # noqa: BLE001 - best effort
        task_log.warning("run note not written: %s", str(exc)[:300])
        return False
    finally:
        hook.close()
    task_log.info("run note written (%d characters)", min(len(text), 1000))
    return True
