"""Reassignment planner benchmark: quality against references, and a scaling curve.

    .venv/bin/python bench/planner.py                 # quality table + scaling curve (10k, 100k, 1M)
    .venv/bin/python bench/planner.py --quick         # quality table on the small clusters only
    .venv/bin/python bench/planner.py --scaling 10000,100000

Quality: generated clusters (Kafka's default layout, heavy-tailed log-normal sizes, 3 racks, RF 2-3)
are planned by

- ``ours``: the planner (in-process, local engine; same plan as under spark-submit); for a decommission
  also ``ours --drain-only`` (only the drained brokers' replicas move; the kept brokers keep their skew);
- ``kafka --generate``: Kafka's default assignor per topic over the target brokers from a random
  start (what ``kafka-reassign-partitions --generate`` proposes), reimplemented in
  ``planner.synthetic.kafka_default_assignment``;
- ``kafka-utils PCB``: Yelp kafka-utils' PartitionCountBalancer (replication groups = racks,
  ``--replication-groups --brokers --leaders``, no movement caps), run in the separate venv
  ``.venv-bench`` (``--setup-bench-venv`` creates it: ``pip install kafka-utils==4.1.0``).

Columns: moved/LB = bytes copied / lower bound (summary.json's ``lower_bound_bytes``: drained bytes,
the fill of the brokers below their rack-aware targets, and the copies uneven racks force; see
``planner.balance.lower_bound_moved``); bytes, count, leaders =
skews ``1 + max over the kept brokers |load / mean - 1|`` of bytes, replicas and preferred leaders
(summary.json's byte_skew, replica_skew, leader_skew: an under-filled broker counts as much as an
over-filled one); rack bound = the best byte skew the racks allow (summary.json's
rack_bound.byte_skew, 1.000 when racks are even); rack viol = partitions spanning fewer than
min(RF, racks) racks; time = seconds of planning.

Scaling: ``spark-submit --master local[2] spark/reassignment_plan.py`` on 200 brokers (190 + 10 new)
for each partition count: wall seconds, CPU seconds of the whole job (JVM + Python; on a shared
machine wall time depends on the others' load, CPU time much less), the 1-minute load average at
the start, and the job's own read and plan phases. Heavy: never run from the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "spark"))

from planner.balance import PlanOptions, resolve_request  # noqa: E402
from planner.output import lower_bound_bytes, per_broker, rack_violations, skew  # noqa: E402
from planner.pipeline import make_plan  # noqa: E402
from planner.snapshot import build_snapshot, parse_brokers  # noqa: E402
from planner.synthetic import generate_cluster, kafka_default_assignment, write_snapshot  # noqa: E402

BENCH_VENV = os.path.join(ROOT, ".venv-bench")
KAFKA_UTILS_VERSION = "4.1.0"

# Runs inside .venv-bench: stdin = job JSON, stdout = {"assignment": [[topic, p, replicas]], "seconds"}
KAFKA_UTILS_DRIVER = r"""
import argparse, json, logging, sys, time
from kafka_utils.kafka_cluster_manager.cluster_info.cluster_topology import ClusterTopology
from kafka_utils.kafka_cluster_manager.cluster_info.partition_count_balancer import PartitionCountBalancer
from kafka_utils.kafka_cluster_manager.cluster_info.partition_measurer import PartitionMeasurer

logging.disable(logging.CRITICAL)
job = json.load(sys.stdin)
sizes = {(t, p): s for t, p, _, s in job["partitions"]}

class SizeMeasurer(PartitionMeasurer):
    def get_weight(self, name):
        return max(1.0, float(sizes[name]))
    def get_size(self, name):
        return max(1.0, float(sizes[name]))

assignment = {(t, p): r for t, p, r, _ in job["partitions"]}
brokers = {int(b): {"host": "kafka-%s" % b, "rack": r} for b, r in job["racks"].items()}
args = argparse.Namespace(replication_groups=True, brokers=True, leaders=True, max_partition_movements=None,
                          max_leader_changes=None, max_movement_size=None)
measurer = SizeMeasurer(None, list(brokers), assignment, args)
started = time.monotonic()
ct = ClusterTopology(assignment, brokers, measurer, lambda broker: broker.metadata["rack"])
balancer = PartitionCountBalancer(ct, args)
balancer.parse_args([])
if job["decommission"]:
    balancer.decommission_brokers(job["decommission"])
balancer.rebalance()
out = [[t, p, r] for (t, p), r in ct.assignment.items()]
json.dump({"assignment": out, "seconds": time.monotonic() - started}, sys.stdout)
"""


def snapshot_of(brokers, parts):
    """Generated brokers/partitions (snapshot-format dicts) -> validated Snapshot."""
    ids, racks = parse_brokers(brokers)
    return build_snapshot(
        ids,
        racks,
        [p["topic"] for p in parts],
        [p["partition"] for p in parts],
        [p["size_bytes"] for p in parts],
        [p["replicas"] for p in parts],
    )


def metrics(snap, new, kept, drained) -> dict:
    """Quality of an assignment ``new`` (broker-index matrix) against the snapshot."""
    nb = len(kept)
    b1, c1, l1 = per_broker(new, snap.sizes, nb)
    moved = 0
    orig = snap.replicas
    for p in np.nonzero((orig != new).any(axis=1))[0].tolist():
        gain = {int(b) for b in new[p] if b >= 0} - {int(b) for b in orig[p] if b >= 0}
        moved += len(gain) * int(snap.sizes[p])
    lb = lower_bound_bytes(snap, kept, drained)
    on_drained = int(np.isin(new, np.nonzero(drained)[0]).sum()) if drained.any() else 0

    return {
        "moved_lb": moved / lb if lb else float("nan"),
        "bytes": skew(b1[kept]),
        "count": skew(c1[kept]),
        "leaders": skew(l1[kept]),
        "rack_viol": rack_violations(snap, new, kept),
        "left_on_drained": on_drained,
    }


def run_ours(snap, opts, summary_out: dict | None = None):
    """Our planner in-process: (final replicas matrix, planning seconds); summary into summary_out."""
    started = time.monotonic()
    result = make_plan(snap, opts)
    if summary_out is not None:
        summary_out.update(result.summary)
    return result.replicas, time.monotonic() - started


def run_generate(snap, kept, seed=0):
    """Kafka's --generate: every topic re-laid by the default assignor over the kept brokers."""
    rng = np.random.default_rng(seed)
    started = time.monotonic()
    kept_ids = [int(snap.broker_ids[i]) for i in np.nonzero(kept)[0]]
    racks = None
    if snap.racks and snap.racks[0] is not None:
        racks = {int(snap.broker_ids[i]): snap.racks[i] for i in range(len(kept))}
    new = snap.replicas.copy()
    topics = {}
    for i, t in enumerate(snap.topics):
        topics.setdefault(t, []).append(i)
    rf = snap.rf
    for rows in topics.values():
        rows.sort(key=lambda i: int(snap.partitions[i]))
        lay = kafka_default_assignment(kept_ids, racks, len(rows), int(rf[rows[0]]), rng)
        for i, reps in zip(rows, lay, strict=True):
            new[i, : len(reps)] = [snap.broker_index(b) for b in reps]
    return new, time.monotonic() - started


def bench_venv_python() -> tuple[str | None, str]:
    """(.venv-bench python or None, status line): kafka-utils is there and imports, or why not."""
    py = os.path.join(BENCH_VENV, "bin", "python")
    if not os.path.exists(py):
        return None, f"{BENCH_VENV} missing (run with --setup-bench-venv)"
    check = subprocess.run(
        [py, "-c", "import kafka_utils, sys; print(sys.version.split()[0])"], capture_output=True, text=True
    )
    if check.returncode != 0:
        return None, "kafka-utils does not import: " + check.stderr.strip().splitlines()[-1]
    return py, f"kafka-utils {KAFKA_UTILS_VERSION} on Python {check.stdout.strip()}"


def run_kafka_utils(py, snap, kept, drained, timeout):
    """kafka-utils PartitionCountBalancer in .venv-bench: (final replicas matrix, its own seconds).

    Raises subprocess.TimeoutExpired after ``timeout`` seconds, RuntimeError if it fails.
    """
    job = {
        "racks": {int(b): snap.racks[i] or "default" for i, b in enumerate(snap.broker_ids.tolist())},
        "partitions": [
            [
                snap.topics[p],
                int(snap.partitions[p]),
                [int(snap.broker_ids[b]) for b in snap.replicas[p] if b >= 0],
                int(snap.sizes[p]),
            ]
            for p in range(len(snap.topics))
        ],
        "decommission": [int(snap.broker_ids[i]) for i in np.nonzero(drained)[0]],
    }
    proc = subprocess.run(
        [py, "-c", KAFKA_UTILS_DRIVER], input=json.dumps(job), capture_output=True, text=True, timeout=timeout
    )
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed")
    out = json.loads(proc.stdout)
    index = {(snap.topics[p], int(snap.partitions[p])): p for p in range(len(snap.topics))}
    new = snap.replicas.copy()
    for t, part, reps in out["assignment"]:
        p = index[(t, part)]
        new[p, : len(reps)] = [snap.broker_index(b) for b in reps]
    return new, out["seconds"]


SCENARIOS = [
    # name, generate_cluster kwargs, mode, brokers
    (
        "scale-out 24+3, 7k",
        dict(n_brokers=24, new_brokers=3, n_partitions=7000, seed=1),
        "scale-out",
        (24, 25, 26),
    ),
    ("decommission 27-3, 7k", dict(n_brokers=27, n_partitions=7000, seed=2), "decommission", (0, 13, 26)),
    ("rebalance skewed 24, 7k", dict(n_brokers=24, n_partitions=7000, skew=0.5, seed=3), "rebalance", ()),
    # the kept brokers out of balance before: the full plan evens them out, --drain-only does not
    ("decommission skewed 24-2", dict(n_brokers=24, n_partitions=7000, skew=0.5, seed=3), "decommission", (0, 12)),
    # racks left uneven (8, 8, 9 brokers): balance still reachable with RF 2-3, bounded with RF 3 only
    ("decommission 27-2, 7k", dict(n_brokers=27, n_partitions=7000, seed=2), "decommission", (0, 13)),
    (
        "decommission 27-2, 7k RF3",
        dict(n_brokers=27, n_partitions=7000, rf_choices=(3,), seed=6),
        "decommission",
        (0, 13),
    ),
    (
        "scale-out 60+6, 20k RF3",
        dict(n_brokers=60, new_brokers=6, n_partitions=20000, rf_choices=(3,), seed=4),
        "scale-out",
        tuple(range(60, 66)),
    ),
    (
        "scale-out 190+10, 100k",
        dict(n_brokers=190, new_brokers=10, n_partitions=100000, seed=5),
        "scale-out",
        tuple(range(190, 200)),
    ),
]


def quality(quick: bool, ku_timeout: float) -> None:
    """Print the quality table (one block per scenario: before, ours, --generate, kafka-utils)."""
    py, ku_status = bench_venv_python()
    print(f"# reference: {ku_status}")
    header = (
        f"{'scenario':26} {'method':18} {'moved/LB':>8} {'bytes':>6} {'count':>6} {'leaders':>7} "
        f"{'rack bound':>10} {'rack viol':>9} {'time s':>7}"
    )
    print(header)
    print("-" * len(header))
    for name, kwargs, mode, brokers in SCENARIOS:
        if quick and kwargs["n_partitions"] > 20000:
            continue
        b, parts = generate_cluster(racks=3, **kwargs)
        snap = snapshot_of(b, parts)
        opts = PlanOptions(mode=mode, brokers=brokers)
        kept, drained = resolve_request(snap, opts)
        before = metrics(snap, snap.replicas, np.ones(len(kept), bool), np.zeros(len(kept), bool))
        print(
            f"{name:26} {'(before)':18} {'':>8} {before['bytes']:6.3f} {before['count']:6.3f} "
            f"{before['leaders']:7.3f} {'':>10} {before['rack_viol']:9d} {'':>7}"
        )
        ours: dict = {}
        rows = [
            ("ours", lambda snap=snap, opts=opts, ours=ours: run_ours(snap, opts, ours)),
            ("kafka --generate", lambda snap=snap, kept=kept: run_generate(snap, kept)),
        ]
        if mode == "decommission":
            drain = PlanOptions(mode=mode, brokers=brokers, drain_only=True)
            rows.insert(1, ("ours --drain-only", lambda snap=snap, drain=drain: run_ours(snap, drain)))
        if py:
            rows.append(
                (
                    "kafka-utils PCB",
                    lambda snap=snap, kept=kept, drained=drained: run_kafka_utils(
                        py, snap, kept, drained, ku_timeout
                    ),
                )
            )
        for method, fn in rows:
            try:
                new, seconds = fn()
            except subprocess.TimeoutExpired:
                print(f"{'':26} {method:18} timed out after {ku_timeout:.0f} s")
                continue
            except Exception as e:  # noqa: BLE001 - report a reference failure, keep benchmarking
                print(f"{'':26} {method:18} failed: {e}")
                continue
            m = metrics(snap, new, kept, drained)
            extra = (
                f"  ({m['left_on_drained']} replicas left on drained brokers)" if m["left_on_drained"] else ""
            )
            bound = (ours.get("rack_bound") or {}).get("byte_skew") if method == "ours" else None
            shown = f"{bound:10.3f}" if bound is not None else f"{'':>10}"
            print(
                f"{'':26} {method:18} {m['moved_lb']:8.3f} {m['bytes']:6.3f} {m['count']:6.3f} "
                f"{m['leaders']:7.3f} {shown} {m['rack_viol']:9d} {seconds:7.2f}{extra}"
            )
        sys.stdout.flush()


#: the driver JVM options kafka_scale_out / kafka_decommission submit the planner with
#: (``operators.reassignment_plan.DRIVER_JAVA_OPTIONS``; a unit test keeps the two equal)
DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def scaling(sizes: list, workdir: str, java_options: list[str]) -> None:
    """Print spark-submit wall seconds per partition count (200 brokers, scale-out by 10), once per driver JVM
    option string in ``java_options`` ("" = the JVM's defaults)."""
    print("\n# scaling: spark-submit --master local[2], 200 brokers (190 + 10 new), scale-out")
    header = (
        f"{'partitions':>10} {'replicas':>9} {'wall s':>7} {'cpu s':>7} {'load':>6} "
        f"{'read s':>7} {'plan s':>7} {'moved/LB':>8} {'bytes':>6} {'count':>6} {'leaders':>7}"
    )
    print(header)
    print("-" * len(header))
    bindir = os.path.dirname(sys.executable)
    env = dict(
        os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""), PYSPARK_PYTHON=sys.executable
    )
    for n, options in ((n, o) for n in sizes for o in java_options):
        snapdir = os.path.join(workdir, f"snap-{n}")
        if not os.path.exists(os.path.join(snapdir, "brokers.json")):
            b, parts = generate_cluster(190, n, new_brokers=10, racks=3, seed=7)
            write_snapshot(snapdir, b, parts)
            del parts
        with open(os.path.join(snapdir, "partitions.jsonl")) as f:
            nrep = sum(len(json.loads(line)["replicas"]) for line in f if line.strip())
        print(f"# driver JVM options: {options or '(the JVM defaults)'}")
        out = os.path.join(workdir, f"out-{n}")
        cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        load = os.getloadavg()[0]
        started = time.monotonic()
        proc = subprocess.run(
            [
                os.path.join(bindir, "spark-submit"),
                "--master",
                "local[2]",
                "--driver-memory",
                "4g",
                "--conf",
                "spark.ui.showConsoleProgress=false",
                *(["--conf", f"spark.driver.extraJavaOptions={options}"] if options else []),
                os.path.join(ROOT, "spark", "reassignment_plan.py"),
                "--snapshot",
                snapdir,
                "--mode",
                "scale-out",
                "--brokers",
                ",".join(str(i) for i in range(190, 200)),
                "--output-dir",
                out,
            ],
            capture_output=True,
            text=True,
            env=env,
        )
        wall = time.monotonic() - started
        cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
        if proc.returncode != 0:
            print(f"{n:>10} failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else '?'}")
            continue
        with open(os.path.join(out, "summary.json")) as f:
            s = json.load(f)
        t = s.get("spark_timings", {})
        print(
            f"{n:>10} {nrep:>9} {wall:7.1f} {cpu:7.1f} {load:6.1f} "
            f"{t.get('read_validate_aggregate_s', 0):7.1f} {t.get('plan_s', 0):7.1f} "
            f"{s['moved_over_lower_bound']:8.3f} {s['byte_skew']:6.3f} {s['replica_skew']:6.3f} "
            f"{s['leader_skew']:7.3f}"
        )
        sys.stdout.flush()


def setup_bench_venv() -> None:
    """Create .venv-bench with kafka-utils (its pins may clash with the project's venv)."""
    subprocess.run([sys.executable, "-m", "venv", BENCH_VENV], check=True)
    subprocess.run(
        [os.path.join(BENCH_VENV, "bin", "pip"), "install", "-q", f"kafka-utils=={KAFKA_UTILS_VERSION}"],
        check=True,
    )


def main(argv=None) -> int:
    """CLI; see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small clusters only, no scaling curve")
    ap.add_argument("--scaling", default="10000,100000,1000000", help="partition counts ('' to skip)")
    ap.add_argument("--no-quality", action="store_true", help="skip the quality table")
    ap.add_argument("--kafka-utils-timeout", type=float, default=600.0, help="seconds per kafka-utils run")
    ap.add_argument(
        "--setup-bench-venv", action="store_true", help="create .venv-bench with kafka-utils first"
    )
    ap.add_argument("--workdir", help="where scaling snapshots go (default: a temp dir)")
    ap.add_argument("--driver-java-options", action="append", default=None,
                    help="the planner's driver JVM options for the scaling runs; repeat to compare, '' for the "
                    f"JVM's defaults (default: what the DAGs submit, {DRIVER_JAVA_OPTIONS!r})")
    args = ap.parse_args(argv)
    if args.setup_bench_venv:
        setup_bench_venv()
    if not args.no_quality:
        quality(args.quick, args.kafka_utils_timeout)
    sizes = [int(x) for x in args.scaling.split(",") if x.strip()] if not args.quick else []
    if sizes:
        with tempfile.TemporaryDirectory(prefix="planner-bench-") as tmp:
            scaling(sizes, args.workdir or tmp, args.driver_java_options or [DRIVER_JAVA_OPTIONS])
    return 0


if __name__ == "__main__":
    sys.exit(main())
