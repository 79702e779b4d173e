"""Per-broker progress lines from a run's task instances (REST API dicts), printed when they change.

A roll's broker task (``<roll>.broker``, mapped) labels itself in the Grid with its broker, position and
current step while it runs ("broker 1 (1/3) · caught up?"); a broker's line is that label and the task's
state, e.g. ``restart: broker 1 (1/3) · caught up?: running``. The other tasks (check_and_lock, preflight,
the roll's plan, run_outcome) get one line each.
"""

from __future__ import annotations

from typing import Any

STATE_WORDS = {
    "success": "done",
    "skipped": "skipped",
    "running": "running",
    "queued": "queued",
    "deferred": "waiting",
    "up_for_reschedule": "waiting for its turn",
    "up_for_retry": "retrying",
    "restarting": "restarting",
    "failed": "FAILED",
    "upstream_failed": "not run (upstream failed)",
    "awaiting_input": "awaiting input",
}
UNMAPPED_ORDER = ["check_and_lock", "check_upgrade", "preflight"]
TAIL_ORDER = ["run_outcome"]


def _word(state: str | None) -> str | None:
    return STATE_WORDS.get(state or "", None)


def broker_lines(tis: list[dict[str, Any]]) -> dict[str, str]:
    """``{key: line}`` for the run's current state: one line per mapped instance (key
    ``<task_id>:<index>``) and one per unmapped task (key = task id); tasks not started yet are left out."""
    lines: dict[str, str] = {}
    for ti in tis:
        word = _word(ti.get("state"))
        if not word:
            continue
        if ti["map_index"] < 0:
            lines[ti["task_id"]] = f"{ti['task_id']}: {word}"
        else:
            roll = ti["task_id"].rsplit(".", 1)[0]
            broker = _broker(ti.get("rendered_map_index"), ti["map_index"])
            lines[f"{ti['task_id']}:{ti['map_index']}"] = f"{roll}: {broker}: {word}"
    return lines


def _sort_key(key: str) -> tuple[int, str, int]:
    if key in UNMAPPED_ORDER:
        return (0, "", UNMAPPED_ORDER.index(key))
    if key in TAIL_ORDER:
        return (2, "", TAIL_ORDER.index(key))
    task, _, index = key.partition(":")  # a roll's plan (unmapped, index -1) before its brokers
    return (1, task.rsplit(".", 1)[0], int(index or -1))


class ProgressPrinter:
    """Remembers the lines already shown; :meth:`changes` returns only new or changed ones."""

    def __init__(self) -> None:
        self._shown: dict[str, str] = {}

    def changes(self, tis: list[dict[str, Any]]) -> list[str]:
        """Lines (check and lock, then each roll's plan and brokers by position, then the final tasks) that
        differ from what was shown last, and remember them."""
        current = broker_lines(tis)
        out = []
        for key in sorted(current, key=_sort_key):
            if self._shown.get(key) != current[key]:
                self._shown[key] = current[key]
                out.append(current[key])
        return out


def label(ti: dict[str, Any]) -> str:
    """``"task_id (broker 1 (1/3))"`` for a mapped task instance, the task id for the others."""
    if ti["map_index"] < 0:
        return ti["task_id"]
    return f"{ti['task_id']} ({_broker(ti.get('rendered_map_index'), ti['map_index'])})"


def _broker(rendered: str | None, index: int) -> str:
    """The rendered label; before rendering the API shows the bare index: say which position it is."""
    return rendered if rendered and not rendered.isdigit() else f"broker #{index + 1} (not started)"
