"""The facts of a run's closing report, read from Airflow and the cluster (``operators.run_outcome`` puts them
together with ``kafka_ops.run_outcome``): the task instances that failed with the reason each recorded, the
cluster as it is now, and what each roll did. Each reader is best effort: a part that cannot be read says so.
"""

from __future__ import annotations

from typing import Any

from kafka_ops.plan_files import PlanFileError, load_plan
from kafka_ops.profile import ClusterProfile
from kafka_ops.run_outcome import TaskFailure, plan_line

from runtime.failure_record import FAILURE_KEY
from runtime.pending_labels import GRID_LABELS_KEY, label_for
from runtime.run_dir import run_directory

#: Task states that count as failed (an earlier roll position in one stops the later ones).
FAILED_STATES = {"failed", "upstream_failed"}


#: States of a task instance that never ran in the run (upstream failed or skipped, or not reached yet: None).
NEVER_RAN = frozenset({None, "upstream_failed", "skipped", "removed"})


def task_states(context: Any) -> list[dict[str, Any]]:
    """The run's task instances as Airflow's execution API lists them (breadcrumbs: ``task_id``, ``map_index``,
    ``state``, ...): one call, read once by the report.

    :raises Exception: the task states cannot be read (Airflow's execution API did not answer).
    """
    ti = context["ti"]
    return list(ti.get_task_breadcrumbs(dag_id=ti.dag_id, run_id=ti.run_id))


def _state(crumbs: list[dict[str, Any]], task_id: str) -> tuple[bool, str | None]:
    """(whether ``crumbs`` list the unmapped task ``task_id``, its state: that of its latest try)."""
    states = [c.get("state") for c in crumbs if str(c["task_id"]) == task_id and int(c.get("map_index", -1)) == -1]
    return bool(states), states[0] if states else None


def ran(crumbs: list[dict[str, Any]], task_id: str) -> bool:
    """Whether the unmapped task ``task_id`` ran in the run whose :func:`task_states` are ``crumbs`` (it has a state
    other than :data:`NEVER_RAN`)."""
    listed, state = _state(crumbs, task_id)
    return listed and state not in NEVER_RAN


def succeeded(crumbs: list[dict[str, Any]], task_id: str) -> bool:
    """Whether the unmapped task ``task_id`` is in state ``success`` in the run whose :func:`task_states` are
    ``crumbs`` (its latest try: a cleared task that has not run again is not)."""
    return _state(crumbs, task_id)[1] == "success"


def failed_tasks(context: Any, crumbs: list[dict[str, Any]],
                 exclude: set[str] | frozenset[str] = frozenset()) -> list[TaskFailure]:
    """The task instances among ``crumbs`` (:func:`task_states`) in state ``failed`` (not upstream-failed: those
    only followed a failure), but ``exclude``; each with the reason it recorded (``runtime.failure_record``) and,
    for a mapped instance, its Grid label as its plan task published it."""
    ti = context["ti"]
    dag = context.get("dag")
    out = []
    for crumb in crumbs:
        task_id, map_index = str(crumb["task_id"]), int(crumb.get("map_index", -1))
        if crumb.get("state") != "failed" or task_id in exclude:
            continue
        record = _pull(ti, task_id, map_index, FAILURE_KEY)
        record = record if isinstance(record, dict) else {}
        out.append(TaskFailure(task_id=task_id, map_index=map_index, label=_label(ti, dag, task_id, map_index),
                               error=str(record.get("error") or ""), refused=bool(record.get("refused")),
                               stopped=bool(record.get("stopped")),
                               at=float(record["at"]) if isinstance(record.get("at"), (int, float)) else None))
    return out


def _pull(ti: Any, task_id: str, map_index: int, key: str) -> Any:
    try:
        return ti.xcom_pull(task_ids=task_id, key=key, map_indexes=map_index)
    except Exception:  # noqa: BLE001 - the note names the task without it
        return None


def _label(ti: Any, dag: Any, task_id: str, map_index: int) -> str | None:
    """The Grid label of a mapped instance, from the plan task upstream of it that published the labels."""
    if map_index < 0 or dag is None:
        return None
    try:
        upstream = sorted(dag.get_task(task_id).upstream_task_ids)
    except Exception:  # noqa: BLE001 - a task of another DAG version
        return None
    for plan in upstream:
        label = label_for(_pull(ti, plan, -1, GRID_LABELS_KEY), task_id, map_index)
        if label:
            return label
    return None


def cluster_line(profile: ClusterProfile) -> tuple[str, list[int]]:
    """``("cluster c: brokers down none; 0 under-replicated, 0 offline partitions", [])``: the cluster as it is
    now and the ids of the brokers that are down (in replica lists but not registered); a cluster that cannot
    be read says so (and no broker is named down)."""
    from probes.cluster import ClusterProber

    try:
        with ClusterProber(profile) as prober:
            state = prober.state(configs=False)
    except Exception as exc:  # noqa: BLE001 - the report must never fail on the cluster it reports on
        return f"cluster {profile.cluster}: could not be read ({type(exc).__name__}: {exc})"[:300], []
    down = list(state.down_broker_ids)
    return (f"cluster {profile.cluster}: brokers down {down or 'none'}; "
            f"{len(state.under_replicated_partitions())} under-replicated, "
            f"{len(state.offline_partitions())} offline partitions"), down


def plan_lines(context: Any, crumbs: list[dict[str, Any]] | None, dry_run: bool,
               wave_task: str = "reassign.wave") -> list[str]:
    """``[the note's line about the run's plan]`` (``kafka_ops.run_outcome.plan_line``) when the run's directory holds
    a plan (a scale-out or decommission that got as far as planning), else ``[]``.

    :param crumbs: the run's :func:`task_states` (the waves done are its ``wave_task`` instances in ``success``), or
        None when unread. A plan that cannot be read is named as such.
    """
    directory = run_directory(context, create=False) / "plan"
    if not (directory / "reassignment.json").exists():
        return []
    try:
        plan = load_plan(directory, snapshot_dir=directory.parent / "snapshot")
    except PlanFileError as exc:
        return [f"plan in {directory}: unreadable ({exc})"[:300]]
    succeeded = [] if crumbs is None else [
        int(c.get("map_index", -1)) for c in crumbs if str(c["task_id"]) == wave_task
        and int(c.get("map_index", -1)) >= 0 and c.get("state") == "success"]
    not_moved: list[str] = []
    for index in succeeded:  # each wave returns the moves it left alone (deleted or changed since the plan)
        result = _pull(context["ti"], wave_task, index, "return_value")
        if isinstance(result, dict):
            not_moved += [str(name) for name in result.get("not_moved") or ()]
    return [plan_line(plan, None if crumbs is None else len(succeeded), dry_run, not_moved)]


def done_lines(context: Any, crumbs: list[dict[str, Any]] | None, task_ids: list[str], dry_run: bool) -> list[str]:
    """The note's lines about what the run's acting steps did (``ClusterOperator.note_line``, lines from
    ``kafka_ops.done_lines``): one per task of ``task_ids`` that succeeded (its return value, as XCom), in order. A
    task that did not succeed did not finish what it does: its failure is the note's first line or among the other
    failures. Best effort: a task the run's DAG no longer has, or a value that cannot be read, gives no line.

    :param crumbs: the run's :func:`task_states`; None (unread): no lines.
    """
    if crumbs is None:
        return []
    dag = context.get("dag")
    lines = []
    for task_id in task_ids:
        if not succeeded(crumbs, task_id) or dag is None:
            continue
        try:
            line = dag.get_task(task_id).note_line(_pull(context["ti"], task_id, -1, "return_value"), dry_run)
        except Exception:  # noqa: BLE001 - a task of another DAG version: the note goes without its line
            continue
        if line:
            lines.append(line)
    return lines


def roll_lines(context: Any, roll_ids: list[str], dry_run: bool, failed: bool) -> tuple[list[str], list[str]]:
    """One line per roll: what it did (``roll 'restart': restarted [0, 2] of [0, 2, 1]; left broker 1 stopped at
    12:00:03``: :func:`kafka_ops.roll.summary`), from its record (``runtime.roll_store``); a roll without a record
    finished (its record was deleted by ``run_outcome`` once the cluster was healthy), was a dry run, or was not
    planned. Also the ids of the rolls whose record has a node not done (a run that ends so did not finish its work,
    whatever its task states say)."""
    from kafka_ops.roll import summary

    from runtime.roll_store import RollStore

    lines: list[str] = []
    unfinished: list[str] = []
    for roll_id in roll_ids:
        try:
            record = RollStore(context, roll_id).load()
        except Exception as exc:  # noqa: BLE001 - best effort
            lines.append(f"roll {roll_id!r}: record unreadable ({exc})")
            continue
        if record is None:
            lines.append(f"roll {roll_id!r}: " + ("dry run, nothing restarted (plan and steps in its tasks' logs)"
                                                  if dry_run else "not planned" if failed
                                                  else "finished (its record deleted once the cluster was healthy)"))
            continue
        lines.append(f"roll {roll_id!r}: {summary(record)}")
        if not dry_run and any(not record.is_done(b) for b in record.order):
            unfinished.append(roll_id)
    return lines, unfinished
