"""The DAG run's note as the operator's first look: what the run does ("DRY RUN" included) while it runs, and
its closing summary when it ends (failed tasks, brokers down, URP, offline partitions, each roll, the lock,
the next action). Written through Airflow's REST API (``hooks.airflow_api``) when the deployment has the
connection ``kafka_ops_airflow_api``; without it the task logs once that no note is written. Never fails a
task: a note is a convenience, the task logs carry the same lines.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from hooks.airflow_api import CONN_ID, AirflowApiHook
from kafka_ops.run_outcome import note_markdown

log = logging.getLogger(__name__)


def _items(note: str) -> list[str]:
    """The Markdown list items (``- ...``) of a note, without their marker."""
    return [line[2:] for line in note.splitlines() if line.startswith("- ")]


def _edit_note(context: Any, compose: Callable[[Callable[[], str]], str], task_log: Any, quiet: bool) -> bool:
    """Write the note ``compose(current)`` returns (``current()`` reads the run's note, "" when it has none)
    through one logged-in REST session. True when written; a missing connection is logged (at DEBUG when
    ``quiet``), any other failure logged as a warning: never raised."""
    ti = context.get("ti")
    dag_id = getattr(ti, "dag_id", None) or getattr(context.get("dag"), "dag_id", None)
    run_id = context.get("run_id") or getattr(ti, "run_id", None)
    if not dag_id or not run_id:
        return False
    try:
        hook = AirflowApiHook()
        hook.get_connection(CONN_ID)
    except Exception:  # noqa: BLE001 - AirflowNotFoundException: the deployment does not want notes
        task_log.log(logging.DEBUG if quiet else logging.INFO, "run note not written: no connection %r (an "
                     "Airflow REST API user that may edit DAG runs; see the README)", CONN_ID)
        return False
    try:
        text = compose(lambda: hook.get_dag_run_note(dag_id, run_id))
        hook.set_dag_run_note(dag_id, run_id, text)
    except Exception as exc:  # noqa: BLE001 - best effort
        task_log.warning("run note not written: %s", str(exc)[:300])
        return False
    finally:
        hook.close()
    task_log.info("run note written (%d characters)", min(len(text), 1000))
    return True


def note_run(context: Any, text: str, task_log: Any = log, line_key: str | None = None) -> bool:
    """Set the running DAG run's note to ``text`` (cut to Airflow's 1,000 characters). True when written.

    ``line_key`` (e.g. ``"roll 'restart'"``): keep the note and put ``"<line_key>: <text>"`` in it as an item of
    its Markdown list (``- ...``, after the first line and a blank line), replacing an earlier item with the same
    key (each roll adds what its map indexes mean); the missing connection is then logged at DEBUG only (the
    run's first note already said so)."""
    if line_key is None:
        return _edit_note(context, lambda _current: text, task_log, quiet=False)
    return note_lines(context, {line_key: text}, task_log)


def note_lines(context: Any, lines: dict[str, str], task_log: Any = log) -> bool:
    """Put each ``"<key>: <text>"`` of ``lines`` in the running DAG run's note as an item of its Markdown list (as
    :func:`note_run` with ``line_key``), all in one edit (a REST login, a read and a write: 0.1 s on a loaded
    sandbox), replacing earlier items with the same keys. True when written; nothing to write is no edit."""
    if not lines:
        return False

    def merged(current: Callable[[], str]) -> str:
        note = current()
        head = next((line for line in note.splitlines() if line and not line.startswith("- ")), "run")
        items = [item for item in _items(note) if not any(item.startswith(f"{key}:") for key in lines)]
        return note_markdown(head, [*items, *(f"{key}: {text}" for key, text in lines.items())])

    return _edit_note(context, merged, task_log, quiet=True)


#: What marks a roll's "map index 0 = broker 2, ..." item in a running note (``note_run``'s ``line_key`` items).
MAP_INDEX_MARK = ": map index "


def note_outcome(context: Any, first_line: str, items: list[str], task_log: Any = log,
                 keep_mark: str | None = MAP_INDEX_MARK) -> bool:
    """Rewrite the run's note as its closing report: ``first_line`` then ``items`` as a Markdown list
    (``kafka_ops.run_outcome.note_markdown``, under Airflow's limit), followed by the items of the current note
    that contain ``keep_mark`` (the rolls' "map index 0 = broker 2, ..." lines, for ``airflow tasks clear -m``;
    left out first when the note is full; None: none kept, as after a run that succeeded, which leaves nothing to
    clear). Everything else of the running note is dropped, so a resumed run's note never keeps a line of its failed
    attempt. True when written."""
    def kept(current: Callable[[], str]) -> list[str]:
        return [] if keep_mark is None else [item for item in _items(current()) if keep_mark in item]

    return _edit_note(context, lambda current: note_markdown(first_line, [*items, *kept(current)]), task_log,
                      quiet=False)
