"""The planner's input: a snapshot of the cluster's brokers, racks, replica assignment and partition sizes,
written into the run's directory (``runtime.run_dir``) in the planner's fixed format (``brokers.json``,
``partitions.jsonl``; docs/architecture.md, "Planner files")."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hooks.kafka_admin import KafkaAdminHook
from kafka_ops.cluster import Broker, ClusterState, fenced_down
from kafka_ops.plan_drift import keep_earlier_plan, replicas_now
from kafka_ops.plan_files import REASSIGNMENT_FILE, PlanFileError, load_plan
from runtime.host_files import unstarted_broker_on_host
from runtime.reassignments import Reassignments
from runtime.run_dir import run_directory

from operators.cluster_operator import ClusterOperator


def partition_sizes(log_dir_rows: list[dict[str, Any]]) -> dict[tuple[str, int], int]:
    """(topic, partition) -> size in bytes: the largest replica's size across brokers (DescribeLogDirs
    rows as ``KafkaAdminHook.describe_log_dirs`` returns them; future replicas and failed log dirs are
    ignored: a follower may be behind, the largest replica is what a new replica has to copy)."""
    sizes: dict[tuple[str, int], int] = {}
    for row in log_dir_rows:
        if "error_code" in row or row.get("is_future"):
            continue
        key = (row["topic"], int(row["partition"]))
        sizes[key] = max(sizes.get(key, 0), int(row.get("size_bytes") or 0))
    return sizes


def write_snapshot(directory: Path, state: ClusterState, sizes: dict[tuple[str, int], int],
                   not_live: Sequence[Broker] = ()) -> dict[str, int]:
    """Write ``brokers.json`` and ``partitions.jsonl`` into ``directory`` (created); returns counts
    ``{"brokers", "partitions", "bytes"}``. Sizes missing from ``sizes`` are written as 0 (unknown: the
    planner then balances replica counts and says so). ``not_live``: brokers the planner must know that the
    metadata leaves out, listed too: those a decommission removes that are registered but fenced (the planner
    only drains them), and a scale-out dry run's new brokers not started yet (:mod:`kafka_ops.unstarted_broker`)."""
    directory.mkdir(parents=True, exist_ok=True)
    live = {b.id for b in state.brokers}
    brokers = [{"id": b.id, "rack": b.rack, "host": b.host, "port": b.port}
               for b in sorted([*state.brokers, *(b for b in not_live if b.id not in live)], key=lambda b: b.id)]
    (directory / "brokers.json").write_text(json.dumps(brokers, indent=1))
    total = 0
    with open(directory / "partitions.jsonl", "w") as out:
        for p in sorted(state.partitions, key=lambda p: (p.topic, p.partition)):
            size = sizes.get((p.topic, p.partition), 0)
            total += size
            out.write(json.dumps({"topic": p.topic, "partition": p.partition, "replicas": list(p.replicas),
                                  "size_bytes": size}) + "\n")
    return {"brokers": len(brokers), "partitions": len(state.partitions), "bytes": total}


#: Beside the planner's two files: when the snapshot's partition sizes were read (``{"epoch_s": float}``), so that a
#: later reading of the same sizes gives each partition's write rate (``kafka_ops.throttle_headroom``).
SIZES_READ_AT = "sizes_read_at.json"


def sizes_read_at(directory: Path) -> float | None:
    """When the snapshot in ``directory`` read its partition sizes (epoch seconds), None when it does not say (a
    snapshot written before this file existed, or unreadable)."""
    try:
        return float(json.loads((Path(directory) / SIZES_READ_AT).read_text())["epoch_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def snapshot_broker_ids(directory: Path) -> set[int]:
    """The broker ids of ``directory/brokers.json`` as :func:`write_snapshot` wrote it.

    :raises OSError: no such file. :raises ValueError: not the JSON list written there.
    """
    return {int(b["id"]) for b in json.loads((directory / "brokers.json").read_text())}


#: In the run's directory while its snapshot and plan are an earlier try's, kept by a later try's snapshot task
#: (:meth:`SnapshotOperator._keeps_earlier_plan`): the plan task then does not plan again.
KEPT_PLAN_FILE = "plan_kept.json"


class SnapshotOperator(ClusterOperator):
    """Snapshot the cluster into ``<run directory>/snapshot`` (Metadata, DescribeCluster for racks,
    DescribeLogDirs for sizes); returns the run directory's path (str).

    :param mode: the planner's mode; for ``decommission`` the brokers of setting ``brokers`` that a KRaft
        cluster has registered but fenced (stopped without being unregistered) are listed too (DescribeCluster
        v2, Kafka 4.0+), so that the planner knows them; for a ``scale-out`` dry run, the brokers of ``brokers``
        not registered yet are listed as their hosts' ``server.properties`` describe them (the profile's
        ``broker_hosts`` and ``server_properties``, read over SSH: ``kafka_ops.unstarted_broker``), so that the dry
        run plans onto them without starting them.

    A run cleared whole keeps the snapshot and plan of an earlier try while that plan fits the cluster (every move of
    it done, running, to do, or of a deleted partition): it goes on with its own plan instead of moving what a new
    plan would (:meth:`_keeps_earlier_plan`).

    :param settings: ``cluster``, ``dry_run``, and ``brokers`` for a decommission or scale-out (values or
        ``FromParam``).
    :raises AirflowFailException: a scale-out dry run's new broker has no host or file to read, its file
        cannot be read, or it describes another broker or a controller.
    """

    ui_color = "#eeeeee"

    def __init__(self, *, mode: str = "scale-out", settings: dict, **kwargs: Any) -> None:
        super().__init__(settings=settings, **kwargs)
        self.planner_mode = mode

    def execute(self, context: Any) -> str:
        self.resolve(context)
        profile = self.profile
        run_dir = run_directory(context)
        drained_down: list[Broker] = []
        unstarted: list[Broker] = []
        with KafkaAdminHook(profile=profile) as admin:
            state = admin.cluster_state(configs=False)
            if self._keeps_earlier_plan(admin, run_dir, state):
                return str(run_dir)
            sizes = partition_sizes(admin.describe_log_dirs(state.broker_ids))
            read_at = time.time()
            if self.planner_mode == "decommission":
                named = {int(b) for b in self.setting("brokers")}
                missing = named - set(state.broker_ids)
                if missing:
                    drained_down = [b for b in fenced_down(admin.broker_registrations() or [], state.broker_ids)
                                    if b.id in missing]
        if self.planner_mode == "scale-out" and self.dry_run:
            named = [int(b) for b in self.setting("brokers")]
            unstarted = [unstarted_broker_on_host(profile, b) for b in named if not state.has_broker(b)]
        if unstarted:
            self.log.info("DRY RUN: brokers %s are not started: planned onto as their server.properties describe "
                          "them (%s); a real run starts them first and plans onto them as registered",
                          [b.id for b in unstarted],
                          ", ".join(f"broker {b.id} on {b.host}, rack {b.rack}" for b in unstarted))
        if drained_down:
            self.log.info("brokers %s are registered but fenced (down): listed for the planner, which drains them",
                          [b.id for b in drained_down])
        counts = write_snapshot(run_dir / "snapshot", state, sizes, [*drained_down, *unstarted])
        (run_dir / "snapshot" / SIZES_READ_AT).write_text(json.dumps({"epoch_s": read_at}))
        self.log.info("snapshot of cluster %r: %d brokers (racks %s), %d partitions, %.3f GB in %s",
                      profile.cluster, counts["brokers"], sorted({str(b.rack) for b in state.brokers}),
                      counts["partitions"], counts["bytes"] / 1e9, run_dir / "snapshot")
        return str(run_dir)

    def _keeps_earlier_plan(self, admin: KafkaAdminHook, run_dir: Path, state: ClusterState) -> bool:
        """A run cleared whole after an earlier try planned: keep that try's snapshot and plan while the plan fits
        the cluster (``kafka_ops.plan_drift.keep_earlier_plan``; logged), and write :data:`KEPT_PLAN_FILE` so that
        the plan task does not plan again; else remove that file and snapshot afresh. A dry run always snapshots
        afresh (it moved nothing: its plan shows what a run would do now); a plan that cannot be read is planned
        again (logged)."""
        kept = run_dir / KEPT_PLAN_FILE
        plan_dir = run_dir / "plan"
        if self.dry_run or not (plan_dir / REASSIGNMENT_FILE).is_file():
            kept.unlink(missing_ok=True)
            return False
        try:
            plan = load_plan(plan_dir, snapshot_dir=run_dir / "snapshot")
        except PlanFileError as exc:
            self.log.warning("an earlier try of this run left a plan that cannot be read (%s): planning again", exc)
            kept.unlink(missing_ok=True)
            return False
        running = [(o["topic"], o["partition"]) for o in
                   self.ask(lambda: Reassignments(admin, self.profile).ongoing(), "the reassignments in progress")]
        keep, line = keep_earlier_plan(plan.moves, replicas_now(state), running)
        self.log.warning("%s", line)
        if keep:
            kept.write_text(json.dumps({"moves": len(plan.moves), "kept_at": time.time(), "why": line}) + "\n")
        else:
            kept.unlink(missing_ok=True)
        return keep
