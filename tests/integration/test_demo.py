"""The demo's parts that need no Airflow server: progress lines, airflow.env parsing, and stopping a
marked process tree (children that ignore SIGINT/SIGTERM included) without touching other processes.

The end-to-end `python -m demo` (standalone Airflow on port 8080) is run by hand, not in CI.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from demo import airflow_proc, progress, sandbox_env


def _ti(task: str, state: str | None, index: int = -1, label: str | None = None) -> dict:
    return {"task_id": task, "map_index": index, "state": state, "rendered_map_index": label}


def test_progress_lines_per_broker_only_when_changed() -> None:
    printer = progress.ProgressPrinter()
    tis = [
        _ti("restart.plan", "success"),
        _ti("lock_cluster", "success"),
        _ti("check_params", "success"),
        _ti("restart.broker", "success", 0, "broker 1 (1/2)"),
        _ti("restart.broker", "running", 1, "broker 2 (2/2) · caught up?"),
        _ti("final_health", None),
    ]
    assert printer.changes(tis) == [
        "check_params: done",
        "lock_cluster: done",
        "restart.plan: done",
        "restart: broker 1 (1/2): done",
        "restart: broker 2 (2/2) · caught up?: running",
    ]
    assert printer.changes(tis) == []
    tis[4].update(state="failed", rendered_map_index="broker 2 (2/2)")
    assert printer.changes(tis) == ["restart: broker 2 (2/2): FAILED"]
    assert progress.label(tis[4]) == "restart.broker (broker 2 (2/2))"
    assert progress.label(tis[1]) == "lock_cluster"


def test_progress_before_rendering_and_after_a_failure() -> None:
    printer = progress.ProgressPrinter()
    # before a mapped task renders its label, the API shows the bare map index as rendered_map_index
    tis = [_ti("restart.broker", "queued", 0, "0")]
    assert printer.changes(tis) == ["restart: broker #1 (not started): queued"]
    tis = [_ti("restart.broker", "failed", 0, "broker 3 (1/2)"), _ti("restart.broker", "failed", 1, "1")]
    assert printer.changes(tis) == ["restart: broker 3 (1/2): FAILED", "restart: broker #2 (not started): FAILED"]


def test_connection_env_parses_airflow_env(tmp_path: Path) -> None:
    (tmp_path / "airflow.env").write_text(
        "# sandbox connections\nexport AIRFLOW_CONN_KAFKA_SANDBOX='{\"conn_type\": \"kafka\", \"host\": \"a:9092\"}'\n"
    )
    assert sandbox_env.connection_env(tmp_path) == {
        "AIRFLOW_CONN_KAFKA_SANDBOX": '{"conn_type": "kafka", "host": "a:9092"}'
    }


def test_stop_ends_the_whole_marked_tree_and_nothing_else(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    # a parent like standalone (exits on SIGINT) with a child that ignores SIGINT and SIGTERM
    script = (
        "import signal, subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import signal, time; "
        "signal.signal(signal.SIGINT, signal.SIG_IGN); signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "time.sleep(600)'])\n"
        "time.sleep(600)\n"
    )
    env = {**os.environ, airflow_proc.MARKER_ENV: str(home)}
    parent = subprocess.Popen([sys.executable, "-c", script], env=env, start_new_session=True)
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                                 env={**os.environ, airflow_proc.MARKER_ENV: str(tmp_path / "other")})
    try:
        deadline = time.monotonic() + 30
        while len(airflow_proc.marked_processes(home)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(airflow_proc.marked_processes(home)) == 2
        (home / airflow_proc.RECORD_NAME).write_text(
            f'{{"pid": {parent.pid}, "port": 8080, "env_digest": "x", "started": 0}}'
        )
        assert airflow_proc.read_record(home).pid == parent.pid
        assert airflow_proc.stop(home, graceful_s=3, term_s=2) == 2
        parent.wait(timeout=10)
        assert airflow_proc.marked_processes(home) == []
        assert not (home / airflow_proc.RECORD_NAME).exists()
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()
        if parent.poll() is None:
            parent.kill()


def test_a_started_process_is_waited_for_until_it_carries_the_marker(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {**os.environ, airflow_proc.MARKER_ENV: str(home)}
    for _ in range(20):  # the window between Popen's return and the new environment is short when idle
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=env)
        try:
            assert airflow_proc.wait_marked(child, home)
            assert child.pid in airflow_proc.marked_processes(home)
        finally:
            child.kill()
            child.wait()
    gone = subprocess.Popen([sys.executable, "-c", "pass"], env={**os.environ})  # exits; never marked
    began = time.monotonic()
    assert not airflow_proc.wait_marked(gone, home, timeout_s=20)
    assert time.monotonic() - began < 15, "an exited process is not waited for until the deadline"


def test_port_in_use_is_named(tmp_path: Path) -> None:
    import socket

    import pytest

    from demo.errors import DemoError

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        settings = airflow_proc.AirflowSettings(home=tmp_path, dags_folder=tmp_path, plugins_folder=tmp_path,
                                                venv_bin=Path(sys.prefix) / "bin", port=port)
        with pytest.raises(DemoError, match=f"port {port} is already in use"):
            airflow_proc.start(settings, {})


def test_demo_airflow_settings_keep_clear_of_another_airflow(tmp_path: Path) -> None:
    """The log servers' ports follow the UI port (Airflow's fixed 8793/8794 collide with another Airflow)."""
    settings = airflow_proc.AirflowSettings(home=tmp_path, dags_folder=tmp_path, plugins_folder=tmp_path,
                                            venv_bin=Path(sys.prefix) / "bin", port=8282)
    env = airflow_proc.demo_env(settings, {"AIRFLOW_CONN_X": "{}"})
    assert env["AIRFLOW__API__PORT"] == "8282" and env["AIRFLOW__API__BASE_URL"] == "http://localhost:8282"
    assert {env["AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT"], env["AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT"]} == {
        "8995", "8996"}
    assert env["AIRFLOW_CONN_X"] == "{}"


def test_demo_airflow_wrapper_runs_the_cli_against_the_demo_home(tmp_path: Path) -> None:
    wrapper = Path(__file__).resolve().parents[2] / "demo" / "airflow"
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "home"), "SANDBOX_WORKDIR": str(tmp_path)}
    (tmp_path / "airflow.env").write_text("export AIRFLOW_CONN_KAFKA_SANDBOX='{\"conn_type\": \"kafka\"}'\n")
    done = subprocess.run([str(wrapper), "config", "get-value", "core", "dags_folder"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("/dags")
