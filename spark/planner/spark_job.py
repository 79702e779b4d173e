"""The Spark side of the planner: distributed reading, validation, aggregation and shedding.

Only imported when running under Spark (``spark-submit spark/reassignment_plan.py``); the unit tests
use :func:`planner.pipeline.run_local` instead. See ``spark/reassignment_plan.py`` for what runs where
and why.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import numpy as np
import pyarrow as pa

from planner.balance import select_shed
from planner.errors import PlanInputError
from planner.snapshot import (
    PARTITIONS_FILE,
    Snapshot,
    build_snapshot_from_matrix,
    check_partition_record,
    load_brokers,
)

PARSED_SCHEMA = (
    "topic string, partition long, replicas array<long>, size_bytes long, error string, line string"
)


def ship_planner(spark) -> None:
    """Make the ``planner`` package importable on the executors' Python workers (addPyFile)."""
    here = os.path.dirname(os.path.abspath(__file__))
    tmp = tempfile.mkdtemp(prefix="planner-zip-")
    archive = shutil.make_archive(os.path.join(tmp, "planner"), "zip", os.path.dirname(here), "planner")
    spark.sparkContext.addPyFile(archive)


def _parse_batches(batches):
    """mapInArrow body: JSON lines -> typed columns plus an error column (same rules as local)."""
    import json

    for batch in batches:
        lines = batch.column(0).to_pylist()
        cols = {"topic": [], "partition": [], "replicas": [], "size_bytes": [], "error": [], "line": []}
        for line in lines:
            if line is None or not line.strip():
                continue
            try:
                rec = json.loads(line)
                why = check_partition_record(rec)
            except json.JSONDecodeError as e:
                rec, why = None, f"not JSON: {e.msg}"
            ok = why is None
            cols["topic"].append(rec["topic"] if ok else None)
            cols["partition"].append(rec["partition"] if ok else None)
            cols["replicas"].append(rec["replicas"] if ok else None)
            cols["size_bytes"].append((rec.get("size_bytes") or 0) if ok else None)
            cols["error"].append(why)
            cols["line"].append(None if ok else line[:200])
        yield pa.RecordBatch.from_pydict(
            cols,
            schema=pa.schema(
                [
                    ("topic", pa.string()),
                    ("partition", pa.int64()),
                    ("replicas", pa.list_(pa.int64())),
                    ("size_bytes", pa.int64()),
                    ("error", pa.string()),
                    ("line", pa.string()),
                ]
            ),
        )


class SparkSnapshot:
    """A snapshot read by Spark: the cached DataFrame plus its collected columnar copy.

    Attributes:
        df: cached DataFrame (pid, topic, partition, replicas, size_bytes); pid is a unique id.
        pids: int64 array (P,), pid of each row of ``snapshot`` (ascending).
        snapshot: the :class:`planner.snapshot.Snapshot` on the driver.
        before: per broker id, (bytes, replicas, preferred leaders) aggregated by Spark.
    """

    def __init__(self, df, pids, snapshot, before):
        self.df = df
        self.pids = pids
        self.snapshot = snapshot
        self.before = before


def read_snapshot(spark, snapshot_dir: str, timings: dict | None = None) -> SparkSnapshot:
    """Read, validate and aggregate a snapshot with Spark, then collect it to the driver as arrays.

    Validation (PlanInputError, nothing written): malformed lines (first three quoted), replicas on
    broker ids missing from brokers.json, a (topic, partition) listed twice, an empty file.
    ``timings`` (if given) receives the seconds of each phase.
    """
    import time

    timings = {} if timings is None else timings
    mark = time.monotonic()

    def lap(name):
        nonlocal mark
        now = time.monotonic()
        timings[name] = round(now - mark, 3)
        mark = now

    from pyspark.sql import functions as F

    broker_ids, racks = load_brokers(snapshot_dir)
    path = os.path.join(snapshot_dir, PARTITIONS_FILE)
    if not os.path.exists(path):
        raise PlanInputError(f"{path}: not found")
    slices = max(1, spark.sparkContext.defaultParallelism)
    split = max(1 << 20, os.path.getsize(path) // slices + 1)
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(split))
    lines = spark.read.text(path)
    parsed = lines.mapInArrow(_parse_batches, PARSED_SCHEMA)
    parsed = parsed.withColumn("pid", F.monotonically_increasing_id()).cache()
    # job 1 (also materialises the cache): malformed lines
    errors = parsed.agg(
        F.count_if(F.col("error").isNotNull()).alias("n"),
        F.slice(
            F.collect_list(F.when(F.col("error").isNotNull(), F.concat_ws(") ", "error", "line"))), 1, 3
        ).alias("examples"),
    ).collect()[0]
    if errors["n"]:
        shown = "; ".join(f"({e}" for e in errors["examples"])
        raise PlanInputError(f"{path}: {errors['n']} malformed line(s): {shown}")
    lap("parse_validate_s")
    df = parsed.drop("error", "line")
    # job 2: per-broker aggregates; a broker id missing from brokers.json shows up as its own group
    exploded = df.select("size_bytes", F.posexplode("replicas").alias("pos", "broker"))
    agg = exploded.groupBy("broker").agg(
        F.sum("size_bytes").alias("bytes"),
        F.count("*").alias("replicas"),
        F.sum(F.when(F.col("pos") == 0, 1).otherwise(0)).alias("leaders"),
    )
    before = {
        int(r["broker"]): (int(r["bytes"]), int(r["replicas"]), int(r["leaders"])) for r in agg.collect()
    }
    unknown = sorted(set(before) - set(broker_ids.tolist()))
    if unknown:
        raise PlanInputError(f"{PARTITIONS_FILE}: unknown broker ids {unknown[:20]} (not in brokers.json)")
    # job 3: the columnar copy for the driver (duplicates are checked there, in one dict pass)
    lap("aggregate_s")
    table = df.toArrow()
    table = table.take(pa.array(np.argsort(table.column("pid").to_numpy(), kind="stable")))
    lap("collect_s")
    if table.num_rows == 0:
        raise PlanInputError(f"{path}: no partitions")
    pids = table.column("pid").to_numpy()
    reps = table.column("replicas").combine_chunks()
    offsets = reps.offsets.to_numpy()
    values = reps.values.to_numpy()
    lengths = np.diff(offsets)
    width = int(lengths.max())
    matrix = np.full((len(lengths), width), -1, dtype=np.int64)
    rows = np.repeat(np.arange(len(lengths)), lengths)
    cols = np.arange(len(values)) - np.repeat(offsets[:-1], lengths)
    matrix[rows, cols] = values
    snap = build_snapshot_from_matrix(
        broker_ids,
        racks,
        table.column("topic").to_pylist(),
        table.column("partition").to_numpy(),
        table.column("size_bytes").to_numpy(),
        matrix,
    )
    lap("build_arrays_s")
    return SparkSnapshot(df, pids, snap, before)


def check_aggregates(ss: SparkSnapshot) -> None:
    """Cross-check Spark's per-broker aggregates against the driver's arrays (a bug if they differ)."""
    from planner.output import per_broker

    snap: Snapshot = ss.snapshot
    nbytes, count, leaders = per_broker(snap.replicas, snap.sizes, len(snap.broker_ids))
    for i, b in enumerate(snap.broker_ids.tolist()):
        got = ss.before.get(b, (0, 0, 0))
        if got != (int(nbytes[i]), int(count[i]), int(leaders[i])):
            raise RuntimeError(
                f"broker {b}: Spark aggregates {got} != driver {nbytes[i], count[i], leaders[i]}"
            )


def spark_shed_selector(spark, ss: SparkSnapshot):
    """A ShedSelector running one :func:`planner.balance.select_shed` per sender broker in Spark.

    The selection for a broker depends only on its own replicas and its targets, so brokers are
    independent groups (``groupBy(broker).applyInArrow``). Keys inside Spark are ``pid * R + pos``,
    ordered like the driver's ``p * R + pos``, so the answer equals the local selector's.
    """
    from pyspark.sql import functions as F

    snap = ss.snapshot
    width = snap.replicas.shape[1]
    pids = ss.pids

    def selector(weights, replicas, targets, excluded):
        count_based = int(snap.sizes.sum()) == 0
        by_id = {int(snap.broker_ids[b]): t for b, t in targets.items()}
        excl = {int(pids[k // width]) * width + k % width for k in excluded}
        tb = spark.sparkContext.broadcast((by_id, excl, width, count_based))

        def solve(table):
            import pyarrow as pa_

            by_id_, excl_, width_, count_based_ = tb.value
            broker = int(table.column("broker")[0].as_py())
            keys = table.column("pid").to_numpy() * width_ + table.column("pos").to_numpy()
            if count_based_:
                w = np.ones(len(keys))
            else:
                w = table.column("size_bytes").to_numpy().astype(np.float64)
            if excl_:
                keep = ~np.isin(keys, np.fromiter(excl_, dtype=np.int64))
                keys, w = keys[keep], w[keep]
            excess, excess_count = by_id_[broker]
            return pa_.table({"key": pa_.array(select_shed(w, keys, excess, excess_count), pa_.int64())})

        rows = (
            ss.df.select("pid", "size_bytes", F.posexplode("replicas").alias("pos", "broker"))
            .filter(F.col("broker").isin(list(by_id)))
            .groupBy("broker")
            .applyInArrow(solve, "key long")
            .toArrow()
        )
        keys = rows.column("key").to_numpy()
        p = np.searchsorted(pids, keys // width)
        return p * width + keys % width

    return selector
