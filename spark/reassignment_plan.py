"""Kafka partition reassignment planner (spark-submit entry point).

    spark-submit spark/reassignment_plan.py --snapshot DIR --mode {scale-out,decommission,rebalance}
        [--brokers 3,4] --output-dir OUT [--max-moves N] [--max-bytes B] [--wave-bytes B]
        [--wave-moves-per-broker N] [--balance-tolerance 0.02] [--drain-only] [--engine spark|local]

Reads ``DIR/brokers.json`` and ``DIR/partitions.jsonl`` and writes ``reassignment.json``,
``rollback.json``, ``waves.json``, ``summary.json`` and ``balance.png`` into OUT (formats in
docs/architecture.md, "Planner files"). Bad input (malformed lines, unknown or missing broker ids, a
decommission leaving fewer brokers than the largest replication factor, fewer racks than a
partition spans, caps below what draining needs, ``--drain-only`` outside a decommission) prints
``reassignment_plan: error: ...`` on stderr and exits 2 without writing anything.

What runs where, and why
------------------------
Spark (executors, in parallel over the input):

- reading and validating ``partitions.jsonl`` (``mapInArrow`` with the same per-line rules as the
  local reader), and the per-broker "before" aggregates (bytes, replicas, preferred leaders; a
  replica on a broker id missing from brokers.json shows up there), cross-checked against the
  driver's arrays;
- the shedding sub-problems: each overloaded broker chooses the replicas it gives away from its own
  replicas only (``groupBy(broker).applyInArrow`` running :func:`planner.balance.select_shed`);
  this is the part whose input is every replica of the cluster.

Driver (one process, numpy):

- the snapshot is collected once as compact columns (``toArrow``): about 20 bytes per partition
  plus the topic names, i.e. ~40 MB for a million partitions, far below driver memory;
- the coupled steps: assigning shed replicas to receivers, refinement, leader balancing and waves.
  Every decision there changes broker loads that the next decision reads (a replica placed on broker
  7 makes broker 7 a worse choice for the next one), so they are sequential by nature; splitting them
  by topic would balance each topic separately and move far more data (what ``--generate`` does).
  Their work is proportional to the replicas that move plus a few vectorised passes over the arrays;
- writing the plan files (small JSON documents, only changed partitions) and the chart.

``--engine local`` (or calling :func:`run` with ``engine="local"``) runs the same algorithm without
Spark, for unit tests and small clusters; both engines produce the same plan for the same input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from planner.balance import MODES, PlanOptions  # noqa: E402
from planner.errors import PlanInputError  # noqa: E402

PROG = "reassignment_plan"


def _broker_list(text: str) -> tuple:
    try:
        ids = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"expected comma-separated broker ids, got {text!r}") from e
    if any(b < 0 for b in ids):
        raise argparse.ArgumentTypeError(f"broker ids must be >= 0, got {text!r}")
    return ids


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from e
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"expected a fraction such as 0.02, got {text!r}") from e
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a fraction in (0, 1), got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The CLI (argparse exits 2 on bad arguments, like the planner's own input errors)."""
    ap = argparse.ArgumentParser(prog=PROG, description="Plan a Kafka partition reassignment.")
    ap.add_argument("--snapshot", required=True, help="directory with brokers.json and partitions.jsonl")
    ap.add_argument("--mode", required=True, choices=MODES)
    ap.add_argument(
        "--brokers",
        type=_broker_list,
        default=(),
        help="comma-separated ids: new brokers (scale-out) or brokers to drain (decommission)",
    )
    ap.add_argument("--output-dir", required=True, help="where the plan files are written")
    ap.add_argument("--max-moves", type=_positive_int, help="cap on replica moves")
    ap.add_argument("--max-bytes", type=_positive_int, help="cap on bytes copied")
    ap.add_argument("--wave-bytes", type=_positive_int, help="max bytes copied per wave")
    ap.add_argument(
        "--wave-moves-per-broker", type=_positive_int, help="max replica moves per broker per wave"
    )
    ap.add_argument(
        "--balance-tolerance",
        type=_tolerance,
        default=0.02,
        help="accepted per-broker byte imbalance |bytes / mean - 1| (default 0.02)",
    )
    ap.add_argument(
        "--drain-only",
        action="store_true",
        help="decommission: move only the drained brokers' replicas (no balancing among the kept brokers)",
    )
    ap.add_argument(
        "--engine",
        choices=("spark", "local"),
        default="spark",
        help="spark (default under spark-submit) or local (no Spark)",
    )
    return ap


def run(
    snapshot: str,
    mode: str,
    output_dir: str,
    brokers=(),
    max_moves=None,
    max_bytes=None,
    wave_bytes=None,
    wave_moves_per_broker=None,
    balance_tolerance=0.02,
    drain_only: bool = False,
    engine: str = "local",
    spark=None,
) -> dict:
    """Plan and write the files; return the summary dict.

    ``engine="local"`` needs no Spark; ``engine="spark"`` uses ``spark`` or gets/creates a session.
    Raises PlanInputError on bad input, before anything is written.
    """
    opts = PlanOptions(
        mode=mode,
        brokers=tuple(brokers),
        max_moves=max_moves,
        max_bytes=max_bytes,
        tolerance=balance_tolerance,
        drain_only=drain_only,
    )
    if engine == "local":
        from planner.pipeline import run_local

        return run_local(snapshot, output_dir, opts, wave_bytes, wave_moves_per_broker)
    return _run_spark(snapshot, output_dir, opts, wave_bytes, wave_moves_per_broker, spark)


def _run_spark(snapshot, output_dir, opts, wave_bytes, wave_moves_per_broker, spark=None) -> dict:
    from planner.output import write_outputs
    from planner.pipeline import make_plan
    from planner.spark_job import check_aggregates, read_snapshot, ship_planner, spark_shed_selector
    from pyspark.sql import SparkSession

    own = spark is None
    if own:
        spark = (
            SparkSession.builder.appName("kafka-reassignment-plan")
            .config("spark.sql.shuffle.partitions", "8")
            .config("spark.sql.adaptive.enabled", "true")
            .config("spark.ui.enabled", "false")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("WARN")
    try:
        ship_planner(spark)
        timings = {}
        t0 = time.monotonic()
        ss = read_snapshot(spark, snapshot, timings)
        check_aggregates(ss)
        timings["read_validate_aggregate_s"] = round(time.monotonic() - t0, 3)
        t1 = time.monotonic()
        result = make_plan(
            ss.snapshot, opts, wave_bytes, wave_moves_per_broker, shed_selector=spark_shed_selector(spark, ss)
        )
        timings["plan_s"] = round(time.monotonic() - t1, 3)
        result.summary["engine"] = "spark"
        result.summary["spark_timings"] = timings
        write_outputs(output_dir, ss.snapshot, result.replicas, result.waves, result.summary)
        return result.summary
    finally:
        if own:
            spark.stop()


def main(argv=None) -> int:
    """CLI entry: 0 on success, 2 on bad input (message on stderr, nothing written)."""
    args = build_parser().parse_args(argv)
    started = time.monotonic()
    try:
        summary = run(
            args.snapshot,
            args.mode,
            args.output_dir,
            brokers=args.brokers,
            max_moves=args.max_moves,
            max_bytes=args.max_bytes,
            wave_bytes=args.wave_bytes,
            wave_moves_per_broker=args.wave_moves_per_broker,
            balance_tolerance=args.balance_tolerance,
            drain_only=args.drain_only,
            engine=args.engine,
        )
    except PlanInputError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    brief = {
        k: summary[k]
        for k in (
            "mode",
            "partitions",
            "replica_moves",
            "partitions_changed",
            "bytes_moved",
            "lower_bound_bytes",
            "moved_over_lower_bound",
            "skew_after",
            "byte_skew",
            "replica_skew",
            "leader_skew",
            "weighting",
            "waves",
            "notes",
        )
    }
    brief["wall_seconds"] = round(time.monotonic() - started, 2)
    print(json.dumps(brief))
    return 0


if __name__ == "__main__":
    sys.exit(main())
