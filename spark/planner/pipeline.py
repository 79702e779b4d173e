"""The planner end to end on one process: snapshot -> plan -> leaders -> waves -> summary -> files."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from planner.balance import Plan, PlanOptions, ShedSelector, plan_replicas
from planner.leaders import balance_leaders, order_replicas
from planner.output import summarize, write_outputs
from planner.snapshot import Snapshot, load_snapshot
from planner.waves import plan_waves


@dataclass
class Result:
    """A finished plan: final replicas (leader first), waves (partition indexes) and the summary."""

    snapshot: Snapshot
    plan: Plan
    replicas: np.ndarray
    waves: list
    summary: dict


def make_plan(
    snap: Snapshot,
    opts: PlanOptions,
    wave_bytes: int | None = None,
    wave_moves_per_broker: int | None = None,
    shed_selector: ShedSelector | None = None,
) -> Result:
    """Plan placement, balance preferred leaders, cut waves and summarize (nothing is written).

    Raises PlanInputError for bad requests (see :func:`planner.balance.resolve_request`).
    """
    started = time.monotonic()
    plan = plan_replicas(snap, opts, shed_selector=shed_selector)
    # a drain-only plan reorders no partition it does not move
    frozen = (plan.replicas == snap.replicas).all(axis=1) if opts.drain_only else None
    lead = balance_leaders(snap.replicas, plan.replicas, plan.kept, frozen=frozen)
    final = order_replicas(plan.replicas, lead)
    waves = plan_waves(snap.replicas, final, snap.sizes, wave_bytes, wave_moves_per_broker)
    options = {
        "max_moves": opts.max_moves,
        "max_bytes": opts.max_bytes,
        "wave_bytes": wave_bytes,
        "wave_moves_per_broker": wave_moves_per_broker,
        "balance_tolerance": opts.tolerance,
        "drain_only": opts.drain_only,
    }
    summary = summarize(
        snap,
        final,
        plan.kept,
        plan.drained,
        opts.mode,
        opts.brokers,
        waves,
        plan.notes,
        options,
        weighting=plan.weighting,
        rack_bound=plan.rack_bound,
    )
    summary["planning_seconds"] = round(time.monotonic() - started, 3)
    return Result(snapshot=snap, plan=plan, replicas=final, waves=waves, summary=summary)


def run_local(
    snapshot_dir: str,
    output_dir: str,
    opts: PlanOptions,
    wave_bytes: int | None = None,
    wave_moves_per_broker: int | None = None,
) -> dict:
    """Plan a snapshot directory on this process (no Spark) and write the plan files.

    Returns the summary. Raises PlanInputError (nothing written) on bad input.
    """
    snap = load_snapshot(snapshot_dir)
    result = make_plan(snap, opts, wave_bytes, wave_moves_per_broker)
    result.summary["engine"] = "local"
    write_outputs(output_dir, snap, result.replicas, result.waves, result.summary)
    return result.summary
