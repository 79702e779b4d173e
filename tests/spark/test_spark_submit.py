"""The real ``spark-submit spark/reassignment_plan.py`` on a tiny snapshot (local[2]).

One run only (a Spark job costs ~15 s of JVM and Python-worker start-up on 2 cores): it must exit 0,
write the plan files, and produce exactly the plan the local engine produces for the same input.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from planner.synthetic import generate_cluster, write_snapshot
from reassignment_plan import run

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_spark_submit_plans_like_the_local_engine(tmp_path):
    brokers, parts = generate_cluster(6, 240, new_brokers=2, racks=3, seed=21)
    snap = write_snapshot(str(tmp_path / "snap"), brokers, parts)
    out = tmp_path / "out"
    bindir = os.path.dirname(sys.executable)
    env = dict(
        os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""), PYSPARK_PYTHON=sys.executable
    )
    proc = subprocess.run(
        [
            os.path.join(bindir, "spark-submit"),
            "--master",
            "local[2]",
            "--conf",
            "spark.ui.showConsoleProgress=false",
            os.path.join(ROOT, "spark", "reassignment_plan.py"),
            "--snapshot",
            snap,
            "--mode",
            "scale-out",
            "--brokers",
            "6,7",
            "--output-dir",
            str(out),
            "--wave-moves-per-broker",
            "4",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    brief = json.loads(proc.stdout.strip().splitlines()[-1])
    assert brief["mode"] == "scale-out" and brief["partitions"] == 240
    for name in ("reassignment.json", "rollback.json", "waves.json", "summary.json", "balance.png"):
        assert (out / name).stat().st_size > 0, name
    summary = json.loads((out / "summary.json").read_text())
    assert summary["engine"] == "spark"
    assert summary["rack_violations_after"] == 0
    assert summary["brokers"]["6"]["replicas_after"] > 0 and summary["brokers"]["7"]["replicas_after"] > 0

    local = tmp_path / "local"
    run(snap, "scale-out", str(local), brokers=(6, 7), wave_moves_per_broker=4, engine="local")
    for name in ("reassignment.json", "rollback.json", "waves.json"):
        assert json.loads((out / name).read_text()) == json.loads((local / name).read_text()), name
