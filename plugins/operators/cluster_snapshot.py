"""The planner's input: a snapshot of the cluster's brokers, racks, replica assignment and partition sizes,
written into the run's directory (``runtime.run_dir``) in the planner's fixed format (``brokers.json``,
``partitions.jsonl``; docs/architecture.md, "Planner files")."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hooks.kafka_admin import KafkaAdminHook
from kafka_ops.cluster import Broker, ClusterState, fenced_down
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
                   drained_down: Sequence[Broker] = ()) -> dict[str, int]:
    """Write ``brokers.json`` and ``partitions.jsonl`` into ``directory`` (created); returns counts
    ``{"brokers", "partitions", "bytes"}``. Sizes missing from ``sizes`` are written as 0 (unknown: the
    planner then balances replica counts and says so). ``drained_down``: brokers a decommission removes that are
    not live (registered but fenced), listed too so that the planner knows them; never a target, since the
    planner only drains them."""
    directory.mkdir(parents=True, exist_ok=True)
    live = {b.id for b in state.brokers}
    brokers = [{"id": b.id, "rack": b.rack, "host": b.host, "port": b.port}
               for b in sorted([*state.brokers, *(b for b in drained_down if b.id not in live)], key=lambda b: b.id)]
    (directory / "brokers.json").write_text(json.dumps(brokers, indent=1))
    total = 0
    with open(directory / "partitions.jsonl", "w") as out:
        for p in sorted(state.partitions, key=lambda p: (p.topic, p.partition)):
            size = sizes.get((p.topic, p.partition), 0)
            total += size
            out.write(json.dumps({"topic": p.topic, "partition": p.partition, "replicas": list(p.replicas),
                                  "size_bytes": size}) + "\n")
    return {"brokers": len(brokers), "partitions": len(state.partitions), "bytes": total}


class SnapshotOperator(ClusterOperator):
    """Snapshot the cluster into ``<run directory>/snapshot`` (Metadata, DescribeCluster for racks,
    DescribeLogDirs for sizes); returns the run directory's path (str).

    :param mode: the planner's mode; for ``decommission`` the brokers of setting ``brokers`` that a KRaft
        cluster has registered but fenced (stopped without being unregistered) are listed too (DescribeCluster
        v2, Kafka 4.0+), so that the planner knows them.
    :param settings: ``cluster``, and ``brokers`` for a decommission (values or ``FromParam``).
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
        with KafkaAdminHook(profile=profile) as admin:
            state = admin.cluster_state(configs=False)
            sizes = partition_sizes(admin.describe_log_dirs(state.broker_ids))
            if self.planner_mode == "decommission":
                named = {int(b) for b in self.setting("brokers")}
                missing = named - set(state.broker_ids)
                if missing:
                    drained_down = [b for b in fenced_down(admin.broker_registrations() or [], state.broker_ids)
                                    if b.id in missing]
        if drained_down:
            self.log.info("brokers %s are registered but fenced (down): listed for the planner, which drains them",
                          [b.id for b in drained_down])
        counts = write_snapshot(run_dir / "snapshot", state, sizes, drained_down)
        self.log.info("snapshot of cluster %r: %d brokers (racks %s), %d partitions, %.3f GB in %s",
                      profile.cluster, counts["brokers"], sorted({str(b.rack) for b in state.brokers}),
                      counts["partitions"], counts["bytes"] / 1e9, run_dir / "snapshot")
        return str(run_dir)
