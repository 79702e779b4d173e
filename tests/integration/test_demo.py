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

import pytest

from demo import airflow_proc, cli, progress, sandbox_env
from demo.errors import DemoError


def _ti(task: str, state: str | None, index: int = -1, label: str | None = None) -> dict:
    return {"task_id": task, "map_index": index, "state": state, "rendered_map_index": label}


def test_progress_lines_per_broker_only_when_changed() -> None:
    printer = progress.ProgressPrinter()
    tis = [
        _ti("restart.plan", "success"),
        _ti("check_and_lock", "success"),
        _ti("preflight", "success"),
        _ti("restart.broker", "success", 0, "broker 1 (1/2)"),
        _ti("restart.broker", "running", 1, "broker 2 (2/2) · caught up?"),
        _ti("run_outcome", None),
    ]
    assert printer.changes(tis) == [
        "check_and_lock: done",
        "preflight: done",
        "restart.plan: done",
        "restart: broker 1 (1/2): done",
        "restart: broker 2 (2/2) · caught up?: running",
    ]
    assert printer.changes(tis) == []
    tis[4].update(state="failed", rendered_map_index="broker 2 (2/2)")
    assert printer.changes(tis) == ["restart: broker 2 (2/2): FAILED"]
    assert progress.label(tis[4]) == "restart.broker (broker 2 (2/2))"
    assert progress.label(tis[1]) == "check_and_lock"


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


def test_connections_become_rest_bodies_for_the_metadata_db() -> None:
    env = {"AIRFLOW_CONN_KAFKA_SANDBOX": '{"conn_type": "kafka", "host": "a:9092", "extra": {"ssh_conn_id": "s"}}',
           "AIRFLOW_CONN_SANDBOX_SSH": '{"conn_type": "ssh", "host": "h", "port": 2222, "login": "root"}',
           "PATH": "/bin"}
    assert sandbox_env.connection_bodies(env) == {
        "kafka_sandbox": {"connection_id": "kafka_sandbox", "conn_type": "kafka", "host": "a:9092",
                          "extra": '{"ssh_conn_id": "s"}'},
        "sandbox_ssh": {"connection_id": "sandbox_ssh", "conn_type": "ssh", "host": "h", "port": 2222,
                        "login": "root"}}
    with pytest.raises(DemoError, match="AIRFLOW_CONN_X: a JSON connection needs a conn_type"):
        sandbox_env.connection_bodies({"AIRFLOW_CONN_X": '{"host": "h"}'})
    with pytest.raises(DemoError, match="AIRFLOW_CONN_Y: not a JSON connection"):
        sandbox_env.connection_bodies({"AIRFLOW_CONN_Y": "kafka://h:9092"})


def test_each_operation_gets_the_conf_it_needs_or_a_clear_refusal() -> None:
    assert cli.operation_conf("kafka_rolling_restart", {"brokers": 3, "spare_brokers": 0}) == {}
    assert cli.operation_conf("kafka_scale_out", {"brokers": 3, "spare_brokers": 2}) == {
        "brokers": [3, 4], "start_new_brokers": True}
    with pytest.raises(DemoError, match="--spare-brokers 1"):
        cli.operation_conf("kafka_scale_out", {"brokers": 3, "spare_brokers": 0})
    assert cli.operation_conf("kafka_decommission", {"brokers": 5, "spare_brokers": 0}) == {"brokers": [4]}
    with pytest.raises(DemoError, match="--brokers 4 or more"):
        cli.operation_conf("kafka_decommission", {"brokers": 3, "spare_brokers": 1})
    assert cli.operation_conf("kafka_config_change", {"brokers": 3}) == {
        "changes": {"log.cleaner.backoff.ms": 20000, "queued.max.requests": 400}, "scope": [0]}
    migration_sandbox = {"brokers": 3, "kafka_version": "3.9.1", "controller_hosts": 3}
    assert cli.operation_conf("kafka_zk_to_kraft", migration_sandbox) == {
        "approve_kraft_brokers": True, "approve_finalize": True}
    assert cli.operation_conf("kafka_zk_to_kraft_revert", migration_sandbox) == {}
    with pytest.raises(DemoError, match="Kafka 3.9.1 with hosts for the controllers"):
        cli.operation_conf("kafka_zk_to_kraft", {"brokers": 3, "kafka_version": "3.6.2"})
    assert set(cli.DAGS) == {p.stem for p in (Path(cli.REPO) / "dags").glob("kafka_*.py")}, "every operation"


def test_sandbox_options_default_without_a_running_sandbox(tmp_path: Path) -> None:
    assert sandbox_env.sandbox_options(tmp_path, {"brokers": None, "spare_brokers": 1, "mode": None}) == {
        "brokers": 3, "spare_brokers": 1, "mode": "zookeeper"}
    assert sandbox_env.sandbox_options(tmp_path, {"brokers": 4, "spare_brokers": None, "mode": "kraft"}) == {
        "brokers": 4, "spare_brokers": 0, "mode": "kraft"}
    assert sandbox_env.sandbox_options(tmp_path, {"brokers": None, "spare_brokers": None, "mode": None,
                                                  "kafka_version": "3.9.1", "controller_hosts": 3}) == {
        "brokers": 3, "spare_brokers": 0, "mode": "zookeeper", "kafka_version": "3.9.1", "controller_hosts": 3}


@pytest.mark.parametrize("running", [
    {"brokers": 5, "spare_brokers": 0, "racks": 2, "kafka_version": "4.0.0", "address_base": "127.0.0.11",
     "mode": "kraft", "controllers": 0, "observer_controllers": 0, "combined": 3, "quorum": "static",
     "broker_config": {}, "client_sasl": False, "sasl_mechanism": "", "client_tls": False, "client_auth": False},
    {"brokers": 3, "spare_brokers": 1, "racks": 3, "kafka_version": "4.1.0", "address_base": "127.0.0.11",
     "mode": "kraft", "controllers": 3, "observer_controllers": 1, "combined": 0, "quorum": "dynamic",
     "broker_config": {"leader.imbalance.check.interval.seconds": "5"}, "client_sasl": True,
     "sasl_mechanism": "SCRAM-SHA-256", "client_tls": True, "client_auth": True},
])
def test_up_asks_a_running_sandbox_for_every_option_it_was_started_with(running, monkeypatch) -> None:
    """``sandbox up`` reuses a running sandbox only when every option matches (``SandboxState.options``): the demo on
    a combined-mode sandbox passed ``--controllers 0`` without ``--combined`` and ``up`` refused ("--controllers must
    be at least 1"); SASL / TLS listeners and a dynamic quorum went unnamed the same way."""
    from sandbox.cli import build_parser

    sent: list[list[str]] = []
    monkeypatch.setattr(sandbox_env, "_run_sandbox", lambda repo, args, timeout_s: sent.append(args))
    sandbox_env.up(Path("."), Path("wd"), None, dict(running))
    args = vars(build_parser().parse_args(sent[0]))
    asked = {k: args[k] for k in running if k not in ("broker_config", "controllers", "sasl_mechanism")}
    assert asked == {k: v for k, v in running.items() if k in asked}, sent[0]
    assert dict(args["broker_config"]) == running["broker_config"]
    if running["client_sasl"]:
        assert args["sasl_mechanism"] == running["sasl_mechanism"]
    if not running["combined"]:
        assert args["controllers"] == running["controllers"]


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


def test_stop_also_ends_an_airflow_process_of_standalones_session_that_lost_its_marker(tmp_path: Path) -> None:
    """The api-server rewrites its process title over its environment (setproctitle): its marker is gone from
    /proc/<pid>/environ, and it outlives standalone. It is still in standalone's session: stopped with it. A
    process of that session whose command line is no Airflow's is left alone."""
    home = tmp_path / "home"
    home.mkdir()
    script = (
        "import os, subprocess, sys, time\n"
        f"clean = {{k: v for k, v in os.environ.items() if k != {airflow_proc.MARKER_ENV!r}}}\n"
        "subprocess.Popen(['bash', '-c', 'exec -a airflow-api-server sleep 600'], env=clean)\n"
        "subprocess.Popen(['bash', '-c', 'exec -a some-other-tool sleep 600'], env=clean)\n"
        "time.sleep(600)\n"
    )
    env = {**os.environ, airflow_proc.MARKER_ENV: str(home)}
    leader = subprocess.Popen([sys.executable, "-c", script], env=env, start_new_session=True)
    try:
        (home / airflow_proc.RECORD_NAME).write_text(
            f'{{"pid": {leader.pid}, "port": 8080, "env_digest": "x", "started": 0}}')
        deadline = time.monotonic() + 30
        while len(airflow_proc.marked_processes(home)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        found = airflow_proc.marked_processes(home)
        assert len(found) == 2 and leader.pid in found, found
        unmarked = next(pid for pid in found if pid != leader.pid)
        assert b"airflow-api-server" in Path(f"/proc/{unmarked}/cmdline").read_bytes()
        assert airflow_proc.stop(home, graceful_s=3, term_s=2) == 2
        leader.wait(timeout=10)
        assert not Path(f"/proc/{unmarked}").exists() or "Z" in Path(f"/proc/{unmarked}/stat").read_text().split()[2]
    finally:
        if leader.poll() is None:
            leader.kill()
        subprocess.run(["pkill", "-f", "some-other-tool"], check=False)


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
    env = airflow_proc.demo_env(settings)
    assert env["AIRFLOW__API__PORT"] == "8282" and env["AIRFLOW__API__BASE_URL"] == "http://localhost:8282"
    assert {env["AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT"], env["AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT"]} == {
        "8995", "8996"}
    assert not [k for k in env if k.startswith("AIRFLOW_CONN_") and k != "AIRFLOW_CONN_KAFKA_OPS_AIRFLOW_API"], \
        "the sandbox's connections go into the metadata DB, where the UI lists them"


def test_demo_airflow_keeps_python_s_bytecode_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine-wide PYTHONDONTWRITEBYTECODE does not reach standalone: its task processes would compile the
    plugins again for every task (the DAG file's parse took twice as long); inherited connections do not either."""
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setenv("AIRFLOW_CONN_SOMETHING", "{}")
    monkeypatch.setenv("KOPS_TEST_KEPT", "yes")
    env = airflow_proc.standalone_env({"AIRFLOW_HOME": "/tmp/h"})
    assert "PYTHONDONTWRITEBYTECODE" not in env and "AIRFLOW_CONN_SOMETHING" not in env
    assert env["KOPS_TEST_KEPT"] == "yes" and env["AIRFLOW_HOME"] == "/tmp/h"


def test_demo_airflow_wrapper_runs_the_cli_with_the_demos_settings(tmp_path: Path) -> None:
    """``demo/airflow`` runs the CLI with what the demo started standalone with (``demo.env``, written by
    ``airflow_proc.start``): the metadata database on PostgreSQL, not an empty SQLite file in the home; without
    that file it refuses and writes nothing."""
    from demo import airflow_db

    repo = Path(__file__).resolve().parents[2]
    wrapper = repo / "demo" / "airflow"
    home = tmp_path / "home"
    env = {**os.environ, "AIRFLOW_HOME": str(home), "SANDBOX_WORKDIR": str(tmp_path)}
    home.mkdir()
    done = subprocess.run([str(wrapper), "dags", "list"], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 1
    assert f"no {home}/demo.env: the demo has not started Airflow in this home" in done.stderr
    assert not list(home.iterdir()), "nothing written in the home"

    settings = airflow_proc.AirflowSettings(home=home, dags_folder=repo / "dags", plugins_folder=repo / "plugins",
                                            venv_bin=Path(sys.prefix) / "bin")
    written = airflow_proc.write_cli_env(home, airflow_proc.demo_env(settings))
    assert written.stat().st_mode & 0o077 == 0, "demo.env holds the API user's password: the owner's alone"
    (tmp_path / "airflow.env").write_text("export AIRFLOW_CONN_KAFKA_SANDBOX='{\"conn_type\": \"kafka\"}'\n")
    asked = {("core", "dags_folder"): str(repo / "dags"), ("database", "sql_alchemy_conn"): airflow_db.url(home)}
    for (section, key), expected in asked.items():
        done = subprocess.run([str(wrapper), "config", "get-value", section, key], env=env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.strip().splitlines()[-1] == expected
