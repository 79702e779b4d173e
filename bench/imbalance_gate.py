"""Leader-imbalance gate: how long a roll's gate takes when the only thing wrong is a leader imbalance on a broker
outside the roll, beside the same gate on a healthy cluster, and the wait-only param (``fix_leader_imbalance``
false) waiting.

On one fresh sandbox (3 brokers, ZooKeeper mode; ``--mode kraft`` for KRaft), each run one ``dag.test()`` of
``kafka_rolling_restart`` on one broker (``bench/restart_overhead.py``'s runner: a child process, a warm-up dry run
before the clock), ``--repeat`` times each:

- ``healthy``: nothing wrong; the gate's time is the broker task's first mark (its start) to its stop sent;
- ``imbalance``: first ``RunningSandbox.make_leader_imbalance`` on another broker (1 and 0 in turns; it becomes
  the preferred leader of partitions another broker leads: Kafka's own rebalance would fix that after
  ``leader.imbalance.check.interval.seconds``, 300 s by default), then the same roll: the gate elects the preferred
  leaders of the partitions that need it and looks again (a run whose gate elected none measured nothing: exit 1);
- once, ``wait-only``: an imbalance, then the roll with ``fix_leader_imbalance: false`` and
  ``healthcheck_timeout_s`` ``--wait-s``: the run must fail at the gate after that long, no broker stopped.

Consumer groups are left out (``consumer_groups: null``): the lag gate is not what is measured. Prints each run's
gate seconds, the medians and the election's cost (median imbalance - median healthy); exit 1 when a run ended
otherwise than expected.

Usage: ``.venv/bin/python bench/imbalance_gate.py [--repeat 3] [--mode kraft] [--wait-s 20]``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
from restart_overhead import DagTestRunner, _sandbox, up_sandbox  # noqa: E402

from sandbox.testing import RunningSandbox  # noqa: E402

SIZE = 3
TARGET = 2  # the broker the roll restarts
IMBALANCED = (1, 0)  # the brokers given the imbalance, in turns (a round leaves the other one with partitions to take)
ELECTED = re.compile(r"leader imbalance: elected the preferred leaders of (\d+) partitions")


def gate_seconds(result: dict[str, Any]) -> float | None:
    """The roll's gate: the broker task's start (mark ``began``) to its stop sent (``stop_sent``), seconds; None
    when no stop was sent (a failed gate). ``result``: ``restart_overhead.summarize``'s."""
    marks = (result.get("brokers") or [{}])[0].get("marks") or {}
    return marks["stop_sent"] - marks["began"] if "stop_sent" in marks and "began" in marks else None


def broker_task_seconds(result: dict[str, Any]) -> float | None:
    """The broker task's duration from the run's timeline (a failed gate's whole wait), seconds."""
    return next((t["duration_s"] for t in result.get("timeline", []) if t["task"].startswith("restart.broker")), None)


def run_one(runner: DagTestRunner, kind: str, conf: dict[str, Any]) -> dict[str, Any]:
    """One measured run; ``{"kind", "state", "gate_s", "task_s", "elected"}``: ``elected``, the partitions the gate
    elected preferred leaders for (from the run's log: 0 when it elected none)."""
    seen = runner.log_path.stat().st_size if runner.log_path.exists() else 0
    result = runner.run(conf)
    with open(runner.log_path, "rb") as log:
        log.seek(seen)
        elected = sum(int(n) for n in ELECTED.findall(log.read().decode(errors="replace")))
    row = {"kind": kind, "state": result["state"], "gate_s": gate_seconds(result),
           "task_s": broker_task_seconds(result), "elected": elected}
    print(f"  {kind}: {row['state']}, gate {_fmt(row['gate_s'])} s, broker task {_fmt(row['task_s'])} s, "
          f"preferred leaders elected by the gate: {elected}", flush=True)
    return row


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the exit code (1 when a run ended otherwise than expected)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=3, help="runs of each kind (default %(default)s)")
    p.add_argument("--mode", choices=("zookeeper", "kraft"), default="zookeeper", help="sandbox mode")
    p.add_argument("--wait-s", type=float, default=20.0,
                   help="healthcheck_timeout_s of the wait-only run (default %(default)s)")
    p.add_argument("--keep", action="store_true", help="keep the sandbox's workdir (logs)")
    args = p.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="kops-imbalance-"))
    workdir = base / "sandbox"
    print(f"imbalance gate: {SIZE} brokers ({args.mode}), roll broker {TARGET}, imbalance on brokers {IMBALANCED} "
          "in turns, "
          f"logs in {base}", flush=True)
    conf = {"cluster": "kafka_sandbox", "brokers": [TARGET], "consumer_groups": None}
    rows: list[dict[str, Any]] = []
    ok = False
    try:
        up_sandbox(workdir, SIZE, args.mode)
        sandbox = RunningSandbox.load(workdir)
        runner = DagTestRunner(base, workdir, "kafka_rolling_restart", base / "run.log")
        for i in range(args.repeat):
            print(f"round {i + 1}/{args.repeat}", flush=True)
            sandbox.wait_healthy(120)
            rows.append(run_one(runner, "healthy", conf))
            t0, imbalanced = time.monotonic(), IMBALANCED[i % 2]
            moved = sandbox.make_leader_imbalance(imbalanced, leave_alone=(TARGET,))
            print(f"  imbalance on broker {imbalanced}: {len(moved)} partitions reordered in "
                  f"{time.monotonic() - t0:.1f} s", flush=True)
            rows.append(run_one(runner, "imbalance", conf))
        sandbox.wait_healthy(120)
        sandbox.make_leader_imbalance(IMBALANCED[args.repeat % 2], leave_alone=(TARGET,))
        starts = sandbox.starts()
        waited = run_one(runner, "wait-only", {**conf, "fix_leader_imbalance": False,
                                               "healthcheck_timeout_s": args.wait_s})
        rows.append(waited)
        restarted = {b: n - starts[b] for b, n in sandbox.starts().items() if n != starts[b]}
        print(f"  wait-only: brokers restarted during it: {restarted or 'none'}", flush=True)
        sandbox.close()
        ok = True
    finally:
        try:
            _sandbox(["down", "--workdir", str(workdir)], timeout_s=300)
        finally:
            if ok and not args.keep:
                shutil.rmtree(base, ignore_errors=True)
    good = True
    print(f"\n{'kind':<10} {'runs':>4} {'gate_s median':>14} {'gate_s max':>11}")
    medians = {}
    for kind in ("healthy", "imbalance"):
        gates = [r["gate_s"] for r in rows if r["kind"] == kind]
        if any(g is None for g in gates) or any(r["state"] != "success" for r in rows if r["kind"] == kind):
            good = False
        if kind == "imbalance" and not all(r["elected"] for r in rows if r["kind"] == kind):
            good = False  # the gate did not elect: the imbalance was gone before it looked, nothing was measured
        found = [g for g in gates if g is not None]
        medians[kind] = statistics.median(found) if found else None
        print(f"{kind:<10} {len(gates):>4} {_fmt(medians[kind]):>14} {_fmt(max(found) if found else None):>11}")
    if medians["healthy"] is not None and medians["imbalance"] is not None:
        cost = medians["imbalance"] - medians["healthy"]
        print(f"the election's cost (median imbalance - median healthy): {cost:.1f} s")
    print(f"wait-only: {waited['state']} after {_fmt(waited['task_s'])} s in the broker task "
          f"(healthcheck_timeout_s {args.wait_s:.0f}), no stop sent: {waited['gate_s'] is None}, "
          f"elected: {waited['elected']}")
    good = good and waited["state"] == "failed" and waited["gate_s"] is None and not restarted and not waited["elected"]
    return 0 if good else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (RuntimeError, subprocess.SubprocessError) as exc:
        print(f"imbalance gate: {exc}", file=sys.stderr)
        sys.exit(1)
