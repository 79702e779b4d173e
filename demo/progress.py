"""Per-broker progress lines from a run's task instances (REST API dicts), printed when they change.

A broker's line lists its ``restart_broker.<step>`` task instances in DAG order, e.g.
``broker 1 [1/3]: turn ok, gate ok, stop ok, gone waiting``; the label is the mapped instances'
``rendered_map_index`` ("broker <id>"), the position is the map index (the plan's order). The other
tasks (plan, lock, final health, unlock) get one line each.
"""

from __future__ import annotations

from typing import Any

GROUP = "restart_broker."
STEPS = [
    ("wait_turn", "turn"),
    ("gate", "gate"),
    ("pre_stop", "pre-stop"),
    ("stop", "stop"),
    ("wait_gone", "gone"),
    ("pre_start", "pre-start"),
    ("start", "start"),
    ("wait_registered", "registered"),
    ("wait_caught_up", "caught up"),
    ("elect_preferred", "election"),
    ("wait_leadership", "leadership"),
    ("soak", "soak"),
]
STATE_WORDS = {
    "success": "ok",
    "skipped": "skipped",
    "running": "...",
    "queued": "...",
    "deferred": "waiting",
    "up_for_reschedule": "waiting",
    "up_for_retry": "retrying",
    "restarting": "restarting",
    "failed": "FAILED",
    "upstream_failed": "upstream failed",
    "awaiting_input": "awaiting input",
}
DONE = {"success", "skipped"}


def _word(state: str | None) -> str | None:
    return STATE_WORDS.get(state or "", None)


def broker_lines(tis: list[dict[str, Any]]) -> dict[str, str]:
    """``{key: line}`` for the run's current state: one line per broker (key ``map:<index>``) and one per
    unmapped task (key = task id); tasks not started yet (no state, scheduled) are left out."""
    lines: dict[str, str] = {}
    mapped: dict[int, dict[str, dict[str, Any]]] = {}
    for ti in tis:
        if ti["task_id"].startswith(GROUP) and ti["map_index"] >= 0:
            mapped.setdefault(ti["map_index"], {})[ti["task_id"].removeprefix(GROUP)] = ti
        elif ti["map_index"] < 0 and (word := _word(ti.get("state"))):
            lines[ti["task_id"]] = f"{ti['task_id']}: {word}"
    total = len(mapped)
    for index, steps in sorted(mapped.items()):
        name = next((_broker(t.get("rendered_map_index"), index) for t in steps.values()
                     if not _broker(t.get("rendered_map_index"), index).startswith("map index")), None)
        states = [(name, steps.get(step, {}).get("state")) for step, name in STEPS]
        parts = [f"{name} {_word(state)}" for name, state in states if _word(state) and state != "upstream_failed"]
        not_run = sum(state == "upstream_failed" for _, state in states)
        if not_run:
            parts.append(f"{not_run} steps not run (upstream failed)")
        if not parts:
            continue
        soak = steps.get("soak", {}).get("state")
        done = " -> done" if soak == "success" else ""
        lines[f"map:{index}"] = f"{name or f'map index {index}'} [{index + 1}/{total}]: {', '.join(parts)}{done}"
    return lines


class ProgressPrinter:
    """Remembers the lines already shown; :meth:`changes` returns only new or changed ones."""

    def __init__(self) -> None:
        self._shown: dict[str, str] = {}

    def changes(self, tis: list[dict[str, Any]]) -> list[str]:
        """Lines (in task order: plan, lock, brokers by position, final health, unlock) that differ from
        what was shown last, and remember them."""
        current = broker_lines(tis)
        order = ["plan", "lock_cluster"] + sorted(
            (k for k in current if k.startswith("map:")), key=lambda k: int(k[4:])
        ) + ["final_health", "unlock_cluster"]
        order += sorted(set(current) - set(order))
        out = []
        for key in order:
            if key in current and self._shown.get(key) != current[key]:
                self._shown[key] = current[key]
                out.append(current[key])
        return out


def label(ti: dict[str, Any]) -> str:
    """``"task_id (broker 1)"`` for a mapped task instance, the task id for the others."""
    if ti["map_index"] < 0:
        return ti["task_id"]
    return f"{ti['task_id']} ({_broker(ti.get('rendered_map_index'), ti['map_index'])})"


def _broker(rendered: str | None, index: int) -> str:
    """The rendered "broker <id>" label; before rendering the API shows the bare index: say so."""
    return rendered if rendered and not rendered.isdigit() else f"map index {index}"
