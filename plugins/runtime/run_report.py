"""The run's closing report (the lock task's teardown writes it into the run note): what failed, the
cluster as it is now, what each roll did, the lock, and the next action.
"""

from __future__ import annotations

from typing import Any

from kafka_ops.profile import ClusterProfile

#: Task states that count as failed (an earlier roll position in one stops the later ones; the report names them).
FAILED_STATES = {"failed", "upstream_failed"}


def run_summary(context: Any, profile: ClusterProfile, roll_ids: list[str], lock: str) -> list[str]:
    """The run's closing lines: ``FAILED ...`` naming the failed tasks (or "run succeeded"), the cluster as
    it is now (brokers down = in replica lists but not registered, URP, offline partitions), what each roll
    did, the lock, and the next action. Best effort: a part that cannot be read says so."""
    from kafka_ops.roll import clock
    from probes.cluster import ClusterProber

    from runtime.roll_store import RollStore

    ti = context["ti"]
    lines = []
    try:
        states = ti.get_task_states(dag_id=ti.dag_id, run_ids=[ti.run_id]).get(ti.run_id, {})
        failed = sorted(k for k, v in states.items() if v in FAILED_STATES and not
                        k.startswith(ti.task_id))
    except Exception as exc:  # the summary must never fail the teardown
        failed, lines = [], [f"task states unreadable: {exc}"]
    dry = " (DRY RUN: nothing was touched)" if str(context["params"].get("dry_run")).lower() == "true" else ""
    lines.insert(0, (f"FAILED: {', '.join(failed)}" if failed else "run succeeded") + dry)
    try:
        with ClusterProber(profile) as prober:
            state = prober.state(configs=False)
        down = state.down_broker_ids
        lines.append(f"cluster {profile.cluster}: brokers down {down or 'none'}; "
                     f"{len(state.under_replicated_partitions())} under-replicated, "
                     f"{len(state.offline_partitions())} offline partitions")
    except Exception as exc:
        down = []
        lines.append(f"cluster {profile.cluster}: could not be read ({type(exc).__name__}: {exc})"[:300])
    for roll_id in roll_ids:
        try:
            record = RollStore(context, roll_id).load()
        except Exception as exc:
            lines.append(f"roll {roll_id!r}: record unreadable ({exc})")
            continue
        if record is None:
            lines.append(f"roll {roll_id!r}: " + ("dry run, nothing restarted (plan and steps in its tasks' logs)"
                                                  if dry else "finished (forget_rolls deleted its record)"
                                                  if not failed else "not planned"))
            continue
        if not record.order:
            lines.append(f"roll {roll_id!r}: nothing to roll (ZooKeeper mode or the run's roles)")
            continue
        done = record.finished()
        noun = {int(s["id"]): s.get("role", "broker") for s in record.steps}
        other = [f"{noun[b]} {b} {record.phase(b)} at {clock(record.progress(b).at_ms)}" for b in record.order
                 if record.phase(b) not in (None, "done")]
        lines.append(f"roll {roll_id!r}: done {done or 'none'} of {record.order}"
                     + (f"; left {'; '.join(other)}" if other else ""))
    lines.append(lock)
    if failed:
        run = context["run_id"]
        lines.append(f"next: fix the cause named at the end of the failed task's log, then clear the failed tasks "
                     f"(UI: the run -> Clear Run -> Only failed; CLI: airflow dags clear {ti.dag_id} --run-id "
                     f"{run} --only-failed --yes)" + (f"; brokers {down} are down" if down else ""))
    return lines
