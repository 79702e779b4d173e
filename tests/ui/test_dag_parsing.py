"""The demo's Airflow parses unchanged DAG files only every ``min_file_process_interval`` (600 s,
``demo.airflow_proc.TUNING``; Airflow's default 30 s re-parsed the eight files in the middle of every roll), and a
changed DAG file at once: what an operator editing a DAG relies on (Airflow's ``file_parsing_sort_mode``
``modified_time``)."""

from __future__ import annotations

import os
import time
from datetime import datetime
from pathlib import Path

from ui_standalone import RunningAirflow, wait_until

DAGS = Path(__file__).resolve().parents[2] / "dags"
TOUCHED = "kafka_scale_out"


def _parsed_at(airflow_ui: RunningAirflow, dag_id: str) -> datetime:
    dag = airflow_ui.client.get_dag(dag_id)
    assert dag and dag.get("last_parsed_time"), f"{dag_id}: not parsed yet ({dag})"
    return datetime.fromisoformat(dag["last_parsed_time"].replace("Z", "+00:00"))


def test_a_changed_dag_file_is_parsed_again_within_seconds(airflow_ui: RunningAirflow) -> None:
    wait_until(f"the DAG {TOUCHED} to be parsed", 120, lambda: airflow_ui.client.get_dag(TOUCHED), poll_s=2.0)
    before = _parsed_at(airflow_ui, TOUCHED)
    path = DAGS / f"{TOUCHED}.py"
    now = time.time()
    os.utime(path, (now, now))  # its content is unchanged: only the modification time moves
    touched = time.monotonic()
    wait_until(f"{path.name} to be parsed again after it changed", 60,
               lambda: _parsed_at(airflow_ui, TOUCHED) > before, poll_s=0.5)
    print(f"{path.name} parsed again {time.monotonic() - touched:.1f} s after it changed")


def test_the_demo_airflow_processes_cache_compiled_modules(airflow_ui: RunningAirflow) -> None:
    """No process of the demo's Airflow runs with PYTHONDONTWRITEBYTECODE (``demo.airflow_proc.NOT_INHERITED``):
    each task process would compile the plugins again while parsing its DAG file."""
    from demo import airflow_proc

    pids = airflow_proc.marked_processes(airflow_ui.home)
    assert pids, "no process of the demo's Airflow found"
    environs = {}
    for pid in pids:
        try:
            environs[pid] = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue  # ended meanwhile
    assert environs
    carrying = [pid for pid, env in environs.items() if any(v.startswith(b"PYTHONDONTWRITEBYTECODE=") for v in env)]
    assert not carrying, f"processes of the demo's Airflow with PYTHONDONTWRITEBYTECODE: {carrying}"


def test_demo_airflow_is_the_cli_of_the_demos_airflow(airflow_ui: RunningAirflow, sandbox) -> None:
    """``demo/airflow`` (the CLI the demo prints) reads the running Airflow's metadata database (PostgreSQL, from the
    settings the demo wrote beside its home: ``demo.env``), not an empty SQLite file in the home ("Database migration
    required")."""
    import json
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(AIRFLOW_HOME=str(airflow_ui.home), SANDBOX_WORKDIR=str(sandbox.workdir))
    done = subprocess.run([str(DAGS.parent / "demo" / "airflow"), "dags", "list", "-o", "json"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    [table] = [line for line in done.stdout.splitlines() if line.startswith("[{")]  # log lines come before it
    listed = json.loads(table)
    assert "kafka_rolling_restart" in {d["dag_id"] for d in listed}, done.stdout[-2000:]
    assert "migration required" not in done.stdout + done.stderr
