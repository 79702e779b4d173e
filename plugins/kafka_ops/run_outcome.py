"""What a run's closing note says: its outcome on the first line, then a Markdown list, under Airflow's limit.

A run ends in one of four ways, and the note's advice follows from which:

- *succeeded* (dry runs included): nothing to do;
- *refused*: a task refused the run before anything was touched (bad params, an unknown broker id, a host that
  is not ready): the same params fail the same way, so the advice is to fix what the reason names and trigger a
  new run (clearing would run the same params again);
- *failed*: a task failed while the operation worked on the cluster: fix the cause, then clear the failed tasks
  (the roll's record makes the resume skip what is done);
- *stopped*: a task was failed from outside (Airflow's "Mark ... as failed", a killed worker) and recorded no
  error of its own, or recorded only that it was told to stop (``runtime.stopping.TaskStopped``): resume by clearing
  the failed tasks when the cluster is ready.

Pure: the operator ``operators.run_outcome`` gathers the facts (task states, the failures the tasks recorded,
the cluster as it is now, the rolls' records, the lock) and writes the note through Airflow's REST API.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kafka_ops.plan_files import Plan

#: Airflow's limit on a DAG run's note, characters (``DAGRunPatchBody.note``).
NOTE_LIMIT = 1000
#: Longest error text quoted on the note's first line, characters.
HEADLINE_ERROR_CHARS = 300


@dataclass(frozen=True)
class TaskFailure:
    """A task instance of the run that ended failed.

    :param task_id: e.g. ``"restart.broker"``.
    :param map_index: -1 for an unmapped task.
    :param label: the Grid's label of a mapped instance (``"broker 1 (2/3)"``), or None.
    :param error: the one-line reason the task recorded when it failed ("" when it recorded none: failed from
        outside, or killed).
    :param refused: the task refused the run before touching anything (``runtime.failures.RunRefused``).
    :param stopped: the task stopped because it was told to from outside (Airflow's SIGTERM when its run was
        marked or cleared: ``runtime.stopping.TaskStopped``): its error is the mark's doing, not the cluster's.
    :param at: when it failed, seconds since the epoch (None when it recorded nothing).
    """

    task_id: str
    map_index: int = -1
    label: str | None = None
    error: str = ""
    refused: bool = False
    stopped: bool = False
    at: float | None = None

    @property
    def name(self) -> str:
        """``restart.broker[1] (broker 1 (2/3))`` / ``check_and_lock``: how the note names the instance."""
        where = f"{self.task_id}[{self.map_index}]" if self.map_index >= 0 else self.task_id
        return f"{where} ({self.label})" if self.label else where


def first_failure(failures: Iterable[TaskFailure]) -> TaskFailure | None:
    """The failure that stopped the run: the earliest one that recorded its error (by ``at``), else the first
    by task id and map index (failed from outside; none recorded a time). None for no failure."""
    failures = list(failures)
    recorded = sorted((f for f in failures if f.at is not None), key=lambda f: f.at)
    if recorded:
        return recorded[0]
    return min(failures, key=lambda f: (f.task_id, f.map_index), default=None)


def outcome_of(failures: Sequence[TaskFailure], unfinished_rolls: Sequence[str] = ()) -> str:
    """``"succeeded"``, ``"refused"``, ``"failed"`` or ``"stopped"`` (see the module docstring) for the run whose
    failed task instances are ``failures`` (upstream-failed ones are not failures of their own) and whose rolls
    ``unfinished_rolls`` have a node not done: a run without a failed task whose roll did not finish was stopped
    (Airflow skipped its pending tasks when it was marked failed, and a later "only failed" clear left them
    skipped)."""
    first = first_failure(failures)
    if first is None:
        return "stopped" if unfinished_rolls else "succeeded"
    if first.refused:
        return "refused"
    return "failed" if first.error and not first.stopped else "stopped"


def headline(outcome: str, operation: str, cluster: str, first: TaskFailure | None, dry_run: bool) -> str:
    """The note's first line (what the run's header shows): the outcome in bold, the operation and cluster, and
    for a run that did not succeed the task that stopped it with its reason (cut to
    :data:`HEADLINE_ERROR_CHARS`)."""
    dry = " (DRY RUN: nothing was touched)" if dry_run else ""
    if outcome == "succeeded":
        return f"**Succeeded**: {operation} on {cluster}{dry}"
    if first is None:
        return f"**Stopped**: {operation} on {cluster}{dry}: a roll did not finish (its pending tasks were skipped)"
    error = first.error if len(first.error) <= HEADLINE_ERROR_CHARS else \
        first.error[:HEADLINE_ERROR_CHARS - 3] + "..."
    if outcome == "refused":
        return f"**Refused**: {operation} on {cluster}{dry}: {first.name}: {error}"
    if outcome == "stopped":
        # Airflow's "Mark Dag Run as failed" fails every instance of a running mapped task, finished ones too:
        # the task is named, not one of its instances (the rolls' lines say which nodes are done)
        return (f"**Stopped**: {operation} on {cluster}{dry}: {first.task_id} was failed from outside (marked "
                "failed, or its worker was killed)")
    return f"**Failed**: {operation} on {cluster}{dry}: {first.name}: {error}"


def advice(outcome: str, dag_id: str, run_id: str, down_broker_ids: Sequence[int] = ()) -> str | None:
    """What to do next, by outcome (None for a run that succeeded); names the brokers that are down."""
    down = f"; brokers {list(down_broker_ids)} are down" if down_broker_ids else ""
    clear = (f"clear the failed tasks (UI: the run -> Clear Run -> Only failed; CLI: airflow dags clear {dag_id} "
             f"--run-id {run_id} --only-failed --yes): the resume skips what is done")
    if outcome == "refused":
        return "next: fix what the reason names (the params, or the cluster or host it names) and trigger a new run" \
            " (clearing would run the same params again)" + down
    if outcome == "failed":
        return f"next: fix the cause named at the end of the failed task's log, then {clear}{down}"
    if outcome == "stopped":
        return (f"next: to go on, clear the whole run (UI: the run -> Clear Run, not only failed: the tasks Airflow "
                f"skipped when the run was stopped must run too; CLI: airflow dags clear {dag_id} --run-id {run_id} "
                f"--yes): the rolls' records skip what is done{down}")
    return None


def other_failures(failures: Sequence[TaskFailure], first: TaskFailure | None, limit: int = 5) -> str | None:
    """``"also failed: a, b (+3 more)"`` for the failed instances other than ``first``, or None."""
    others = [f.name for f in sorted(failures, key=lambda f: (f.task_id, f.map_index)) if f != first]
    if not others:
        return None
    more = f" (+{len(others) - limit} more)" if len(others) > limit else ""
    return "also failed: " + ", ".join(others[:limit]) + more


def plan_line(plan: Plan, waves_done: int | None, dry_run: bool, not_moved: Sequence[str] = ()) -> str:
    """The note's line about a reassignment run's plan (scale-out, decommission): what it moves, the net change of
    replicas per broker (brokers whose count does not change left out), how far the run got, and where its files are
    (``rollback.json`` among them).

    ``"plan: 34 moves in 3 waves, 1.234 GB; replicas per broker: 0 -12, 1 -10, 2 -8, 3 +30; waves done 2 of 3;
    files in /data/kafka_scale_out/manual__.../plan"``; a dry run's begins ``"plan (dry run: nothing moved)"`` and
    counts no waves.

    :param plan: the run's plan (``kafka_ops.plan_files.load_plan``).
    :param waves_done: wave task instances that succeeded, or None when the run's task states are unknown.
    :param not_moved: partitions the waves left alone (deleted or changed since the plan, ``kafka_ops.plan_drift``):
        ``"; 6 moves not made (deleted or changed since the plan): doomed-0, ..."`` after the waves done. The
        replicas per broker are the plan's.
    """
    net: dict[int, int] = {}
    for m in plan.moves:
        for b in set(m.replicas) - set(m.current):
            net[b] = net.get(b, 0) + 1
        for b in set(m.current) - set(m.replicas):
            net[b] = net.get(b, 0) - 1
    waves = len(plan.waves)
    text = (f"{'plan (dry run: nothing moved)' if dry_run else 'plan'}: {len(plan.moves)} "
            f"move{'' if len(plan.moves) == 1 else 's'} in {waves} wave{'' if waves == 1 else 's'}, "
            f"{plan.bytes / 1e9:.3f} GB")
    if any(net.values()):
        text += "; replicas per broker: " + ", ".join(f"{b} {n:+d}" for b, n in sorted(net.items()) if n)
    if not dry_run and waves_done is not None:
        text += f"; waves done {waves_done} of {waves}"
    if not_moved:
        names = sorted(set(not_moved))
        text += (f"; {len(names)} move{'' if len(names) == 1 else 's'} not made (deleted or changed since the plan): "
                 + ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else ""))
    return f"{text}; files in {plan.directory}"


def note_markdown(first_line: str, items: Sequence[str], limit: int = NOTE_LIMIT) -> str:
    """``first_line``, a blank line, then ``items`` as a Markdown list (``- item``), at most ``limit``
    characters: items that do not fit are left out, and a last item says how many (the full text is in the
    task's log). Newlines inside an item become spaces (one list item each).

    :raises ValueError: ``limit`` too small for the first line and the "left out" item.
    """
    tail = "- ({n} more lines in the log of run_outcome)"
    if len(first_line) + len(tail) + 8 > limit:
        first_line = first_line[:max(0, limit - len(tail) - 11)] + "..."
        if len(first_line) < 4:
            raise ValueError(f"a note of {limit} characters cannot hold its first line")
    lines = [f"- {' '.join(item.split())}" for item in items]
    text = first_line
    for index, line in enumerate(lines):
        candidate = text + ("\n\n" if index == 0 else "\n") + line
        rest = len(lines) - index - 1
        room = limit - (len(tail.format(n=rest)) + 1 if rest else 0)
        if len(candidate) > room:
            left = len(lines) - index
            return text + ("\n\n" if index == 0 else "\n") + tail.format(n=left)
        text = candidate
    return text
