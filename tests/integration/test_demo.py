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
        _ti("plan", "success"),
        _ti("lock_cluster", "success"),
        _ti("restart_broker.wait_turn", "success", 0, "broker 1"),
        _ti("restart_broker.gate", "success", 0, "broker 1"),
        _ti("restart_broker.stop", "running", 0, "broker 1"),
        _ti("restart_broker.wait_turn", "up_for_reschedule", 1, "broker 2"),
        _ti("restart_broker.gate", None, 1),
        _ti("final_health", None),
    ]
    assert printer.changes(tis) == [
        "plan: ok",
        "lock_cluster: ok",
        "broker 1 [1/2]: turn ok, gate ok, stop ...",
        "broker 2 [2/2]: turn waiting",
    ]
    assert printer.changes(tis) == []
    tis[4]["state"] = "success"
    assert printer.changes(tis) == ["broker 1 [1/2]: turn ok, gate ok, stop ok"]
    tis[6]["state"] = "failed"
    assert progress.label(tis[6]) == "restart_broker.gate (map index 1)"
    assert progress.label(tis[3]) == "restart_broker.gate (broker 1)"


def test_progress_before_rendering_and_after_a_failure() -> None:
    printer = progress.ProgressPrinter()
    # before a mapped task renders its label, the API shows the bare map index as rendered_map_index
    tis = [_ti("restart_broker.wait_turn", "running", 0, "0")]
    assert printer.changes(tis) == ["map index 0 [1/1]: turn ..."]
    tis = [_ti("restart_broker.wait_turn", "failed", 0, "broker 3")] + [
        _ti(f"restart_broker.{step}", "upstream_failed", 0, "broker 3") for step in ("gate", "stop", "soak")
    ]
    assert printer.changes(tis) == ["broker 3 [1/1]: turn FAILED, 3 steps not run (upstream failed)"]


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


def test_local_settings_policy_gives_sensors_retries() -> None:
    from airflow.providers.standard.operators.empty import EmptyOperator
    from airflow.sdk import BaseSensorOperator

    class Waits(BaseSensorOperator):
        def poke(self, context):  # pragma: no cover - never run
            return True

    namespace: dict = {}
    exec(airflow_proc.LOCAL_SETTINGS, namespace)
    sensor, own, op = Waits(task_id="w", mode="reschedule"), Waits(task_id="o", retries=3), EmptyOperator(task_id="e")
    for task in (sensor, own, op):
        namespace["task_policy"](task)
    assert (sensor.retries, sensor.retry_delay.total_seconds()) == (50, 5)
    assert own.retries == 50
    assert op.retries == 0
