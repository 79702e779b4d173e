"""``python -m demo [--down]``: sandbox + ``airflow standalone`` + one run of an operation, watched.

``--dag`` picks the operation (default ``kafka_rolling_restart``), each with the conf it needs on the sandbox
(``--conf`` adds to or overrides it):

- ``kafka_upgrade``: the target release (``target_version``, default 3.7.1) is unpacked beside the running one on
  every sandbox host first (``python -m sandbox unpack --version V``); the run waits for approval of the IBP bump in
  the UI's Required Actions unless the conf says ``"approve_protocol_bump": true``.
- ``kafka_scale_out``: needs spare broker hosts (``--spare-brokers N``); the run starts them
  (``start_new_brokers``) and moves partitions onto them (``brokers`` = the spare ids).
- ``kafka_decommission``: drains and stops the highest broker id; needs ``--brokers 4`` or more (the sandbox's
  topics have replication factor 3; fewer brokers are refused by the run's ``validate``).
- ``kafka_config_change``: ``log.cleaner.backoff.ms`` set live and ``queued.max.requests`` written to broker 0's
  server.properties (scope ``[0]``): only broker 0 restarts.

The sandbox: ``--brokers``, ``--spare-brokers`` and ``--mode`` start one (3 brokers, no spares, ZooKeeper mode by
default); without them a sandbox already running in the workdir is used as it is.

Without ``--down``: start the sandbox (unless up), start Airflow (unless this home's Airflow runs with the same
settings and port; stale ones are restarted), wait for ``/api/v2/monitor/health``, log in as ``admin`` with the
generated password, write the sandbox's connections into Airflow's metadata DB (Admin -> Connections), un-pause the
DAG, trigger it on ``{"cluster": "kafka_sandbox"}``, print per-broker progress until the run ends, then the result
and the UI login. Exit 0 only if the run succeeded with no failed task. ``--down`` stops Airflow (every process of
it) and the sandbox.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from demo import airflow_proc, progress, sandbox_env
from demo.errors import DemoError
from demo.rest import AirflowApiError, AirflowClient

REPO = Path(__file__).resolve().parent.parent
DAGS = ("kafka_rolling_restart", "kafka_upgrade", "kafka_scale_out", "kafka_decommission", "kafka_config_change",
        "kafka_zk_to_kraft", "kafka_zk_to_kraft_revert")
#: The sandbox a ZooKeeper-to-KRaft migration (or its revert) needs: the bridge release and hosts for controllers.
MIGRATION_SANDBOX = {"kafka_version": "3.9.1", "controller_hosts": 3}
#: The demo's config change: a dynamic key cluster-wide (no restart) and a read-only key on broker 0's file (broker 0
#: restarts, the others are left alone with their reason).
CONFIG_CHANGE = {"changes": {"log.cleaner.backoff.ms": 20000, "queued.max.requests": 400}, "scope": [0]}
UPGRADE_TARGET = "3.7.1"  # the kafka_upgrade DAG's default target_version
TERMINAL = {"success", "failed"}
API_OUTAGE_S = 300  # how long polls may keep failing (a loaded machine can stall the api-server)


def build_parser() -> argparse.ArgumentParser:
    """The command line (see the module docstring)."""
    p = argparse.ArgumentParser(prog="python -m demo", description=__doc__.splitlines()[0])
    p.add_argument("--down", action="store_true", help="stop the demo's Airflow and sandbox, then exit")
    p.add_argument("--workdir", type=Path, default=REPO / ".sandbox", help="sandbox workdir (default %(default)s)")
    p.add_argument("--address-base", default=None,
                   help="sandbox address of broker 0 (default: the sandbox's, 127.0.0.11 or $SANDBOX_ADDRESS_BASE)")
    p.add_argument("--airflow-home", type=Path, default=REPO / ".airflow", help="AIRFLOW_HOME (default %(default)s)")
    p.add_argument("--port", type=int, default=8080, help="Airflow UI/API port (default %(default)s)")
    p.add_argument("--brokers", type=int, default=None,
                   help="sandbox brokers (default: the running sandbox's, else 3)")
    p.add_argument("--spare-brokers", type=int, default=None,
                   help="spare broker hosts for a scale-out (default: the running sandbox's, else 0)")
    p.add_argument("--mode", choices=("zookeeper", "kraft"), default=None,
                   help="the sandbox's mode (default: the running sandbox's, else zookeeper)")
    p.add_argument("--dag", choices=DAGS, default=DAGS[0], help="the operation to run (default %(default)s)")
    p.add_argument("--cluster", default="kafka_sandbox", help="the DAG's cluster param (default %(default)s)")
    p.add_argument("--conf", type=json.loads, default={}, help='extra run conf as JSON, e.g. \'{"soak_s": 5}\'')
    p.add_argument("--start-timeout", type=float, default=600, help="seconds for Airflow to become healthy "
                   "and parse the DAG (default %(default)s)")
    p.add_argument("--run-timeout", type=float, default=3600,
                   help="seconds to watch the run before giving up (default %(default)s; the run goes on)")
    p.add_argument("--poll", type=float, default=2.0, help="seconds between progress polls (default %(default)s)")
    return p


def say(msg: str) -> None:
    """Print a demo status line (stdout, flushed)."""
    print(f"demo: {msg}", flush=True)


def clock(seconds: float) -> str:
    """``seconds`` as ``m:ss`` (or ``h:mm:ss``)."""
    m, s = divmod(int(round(seconds)), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def _wait(what: str, timeout_s: float, check, home: Path, pid: int | None, poll_s: float = 1.0) -> Any:
    """Call ``check()`` until truthy (returned); fails if standalone ``pid`` dies or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if pid is not None and pid not in airflow_proc.marked_processes(home):
            raise DemoError(f"airflow standalone exited while waiting for {what}; end of "
                            f"{home / airflow_proc.LOG_NAME}:\n{airflow_proc.log_tail(home)}")
        if time.monotonic() >= deadline:
            raise DemoError(f"timed out after {timeout_s:.0f} s waiting for {what}; end of "
                            f"{home / airflow_proc.LOG_NAME}:\n{airflow_proc.log_tail(home)}")
        time.sleep(poll_s)


def _healthy(client: AirflowClient) -> bool:
    health = client.health()
    if not health:
        return False
    parts = ("metadatabase", "scheduler", "triggerer", "dag_processor")
    return all((health.get(p) or {}).get("status") == "healthy" for p in parts)


def ensure_airflow(args: argparse.Namespace) -> airflow_proc.AirflowSettings:
    """Reuse or (re)start this home's ``airflow standalone``; returns its settings once it is healthy.

    Raises:
        DemoError: the port is taken, Airflow died or did not get healthy within ``--start-timeout``.
    """
    home = args.airflow_home.resolve()
    settings = airflow_proc.AirflowSettings(
        home=home, dags_folder=REPO / "dags", plugins_folder=REPO / "plugins",
        venv_bin=Path(sys.prefix) / "bin", port=args.port,
    )
    extra_env = airflow_proc.demo_env(settings)
    digest = airflow_proc.env_digest(extra_env)
    record = airflow_proc.read_record(home)
    if record and (record.env_digest != digest or record.port != args.port):
        say(f"Airflow (pid {record.pid}) runs with other settings: restarting it")
        airflow_proc.stop(home)
        record = None
    elif record is None and airflow_proc.marked_processes(home):
        say(f"stopping leftover Airflow processes of {home}")
        airflow_proc.stop(home)
    if record:
        say(f"Airflow already running (pid {record.pid}) at {settings.base_url}")
    else:
        record = airflow_proc.start(settings, extra_env)
        say(f"started airflow standalone (pid {record.pid}; AIRFLOW_HOME={home}; "
            f"log {home / airflow_proc.LOG_NAME}); waiting for {settings.base_url}/api/v2/monitor/health")
    client = AirflowClient(settings.base_url)
    _wait("Airflow to report healthy", args.start_timeout, lambda: _healthy(client), home, record.pid)
    return settings


def login(settings: airflow_proc.AirflowSettings, timeout_s: float) -> tuple[AirflowClient, str]:
    """A logged-in client and the admin password (read from the generated password file).

    Raises:
        DemoError: no password file within ``timeout_s`` seconds, or the login is refused.
    """
    password = _wait("the generated admin password", timeout_s,
                     lambda: airflow_proc.admin_password(settings.home), settings.home, None)
    client = AirflowClient(settings.base_url)
    client.login("admin", password)
    return client, password


def wait_for_dag(client: AirflowClient, home: Path, timeout_s: float, dag_id: str) -> None:
    """Wait until the dag-processor has parsed the DAG.

    Raises:
        DemoError: the DAG file has an import error (its trace is in the message), or timeout.
    """
    def parsed() -> bool:
        if client.get_dag(dag_id):
            return True
        for err in client.import_errors():
            if err.get("filename", "").endswith(f"{dag_id}.py"):
                raise DemoError(f"{dag_id}.py does not import:\n{err.get('stack_trace')}")
        return False

    _wait(f"the DAG {dag_id} to be parsed", timeout_s, parsed, home, None, poll_s=2.0)


def watch(client: AirflowClient, dag_id: str, run_id: str, timeout_s: float, poll_s: float,
          base_url: str = "") -> tuple[dict, list[dict]]:
    """Print progress lines as the run's task instances change; return the ended run and its tasks.

    Raises:
        DemoError: the run did not end within ``timeout_s`` seconds, or the API kept failing for
            :data:`API_OUTAGE_S` seconds.
    """
    printer = progress.ProgressPrinter()
    asked: set[str] = set()
    t0 = time.monotonic()
    failing_since: float | None = None
    while True:
        try:
            run = client.get_run(dag_id, run_id)
            tis = client.task_instances(dag_id, run_id)
            failing_since = None
        except AirflowApiError as exc:
            failing_since = failing_since or time.monotonic()
            if time.monotonic() - failing_since > API_OUTAGE_S:
                raise
            say(f"API poll failed ({exc}); retrying")
            time.sleep(poll_s)
            continue
        for line in printer.changes(tis):
            print(f"  [{clock(time.monotonic() - t0)}] {line}", flush=True)
        for ti in tis:
            if ti.get("state") == "awaiting_input" and ti["task_id"] not in asked:
                asked.add(ti["task_id"])
                say(f"{ti['task_id']} waits for you: approve or reject it in the UI under Required Actions "
                    f"({base_url}/required_actions)")
        if run["state"] in TERMINAL:
            return run, tis
        if time.monotonic() - t0 > timeout_s:
            raise DemoError(f"run {run_id} still {run['state']} after {timeout_s:.0f} s (it goes on in Airflow)")
        time.sleep(poll_s)


def last_error(client: AirflowClient, dag_id: str, run_id: str, ti: dict[str, Any]) -> str:
    """The last error-level line of a failed task's log (or a pointer to the UI when there is none)."""
    try:
        log = client.task_log(dag_id, run_id, ti["task_id"], ti.get("try_number") or 1, ti["map_index"])
    except AirflowApiError as exc:
        return f"(log not readable: {exc})"
    errors = [str(e.get("event")) for e in log if str(e.get("level", "")).lower() in ("error", "critical")]
    return errors[-1][:500] if errors else "no error in its log (killed by Airflow? see the scheduler's log)"


def operation_conf(dag_id: str, sandbox: dict[str, Any]) -> dict[str, Any]:
    """The conf ``dag_id`` needs on a sandbox with ``sandbox`` options (``brokers``, ``spare_brokers``), before
    the user's ``--conf``.

    Raises:
        DemoError: the sandbox cannot host the operation (a scale-out without spare hosts, a decommission of one of
            three brokers), with the option that fixes it.
    """
    brokers, spares = int(sandbox["brokers"]), int(sandbox.get("spare_brokers") or 0)
    if dag_id == "kafka_scale_out":
        if spares < 1:
            raise DemoError("kafka_scale_out needs spare broker hosts to move partitions onto: add --spare-brokers 1 "
                            "(a sandbox already running without spares is stopped with `make down` first)")
        return {"brokers": list(range(brokers, brokers + spares)), "start_new_brokers": True}
    if dag_id == "kafka_decommission":
        if brokers < 4:
            raise DemoError(f"kafka_decommission needs --brokers 4 or more: the sandbox's topics have replication "
                            f"factor 3, so draining one of {brokers} brokers is refused")
        return {"brokers": [brokers - 1]}
    if dag_id == "kafka_config_change":
        return json.loads(json.dumps(CONFIG_CHANGE))
    if dag_id in ("kafka_zk_to_kraft", "kafka_zk_to_kraft_revert"):
        if sandbox.get("kafka_version") != MIGRATION_SANDBOX["kafka_version"] or not sandbox.get("controller_hosts"):
            raise DemoError(f"{dag_id} needs a ZooKeeper-mode sandbox on Kafka 3.9.1 with hosts for the controllers "
                            "(the demo starts one for it; a sandbox already running otherwise is stopped with "
                            "`make down` first)")
        # the demo approves both phases in advance (in the UI: Required Actions, Approve)
        return {"approve_kraft_brokers": True, "approve_finalize": True} if dag_id == "kafka_zk_to_kraft" else {}
    return {}


def up(args: argparse.Namespace) -> int:
    """The demo: sandbox, Airflow, trigger, watch, report. Returns the exit code (0 = run succeeded)."""
    t0 = time.monotonic()
    workdir = args.workdir.resolve()
    dag_id = args.dag
    asked = {"brokers": args.brokers, "spare_brokers": args.spare_brokers, "mode": args.mode}
    if dag_id in ("kafka_zk_to_kraft", "kafka_zk_to_kraft_revert"):
        asked.update(MIGRATION_SANDBOX)
    options = sandbox_env.sandbox_options(workdir, asked)
    conf = {"cluster": args.cluster, **operation_conf(dag_id, options), **args.conf}
    say(f"sandbox in {workdir}: {options['brokers']} brokers, {options['spare_brokers']} spare hosts, "
        f"{options['mode']} mode")
    sandbox_env.up(REPO, workdir, args.address_base, options)
    if dag_id == "kafka_upgrade":
        target = str(conf.get("target_version", UPGRADE_TARGET))
        sandbox_env.unpack_release(REPO, workdir, target)
        say(f"unpacked Kafka {target} beside the running release on every host above (python -m sandbox unpack "
            f"--version {target}; the upgrade's binaries phase switches the kafka symlink)")
    settings = ensure_airflow(args)
    client, password = login(settings, args.start_timeout)
    written = client.put_connections(list(sandbox_env.connection_bodies(sandbox_env.connection_env(workdir))
                                          .values()))
    say(f"connections {', '.join(written)} written to Airflow's metadata DB (Admin -> Connections)")
    say(f"UI: {settings.base_url}  login: admin / {password} (from {settings.home / airflow_proc.PASSWORD_FILE}); "
        "the Airflow CLI against this demo: demo/airflow ... (e.g. demo/airflow dags list-runs kafka_rolling_restart)")
    wait_for_dag(client, settings.home, args.start_timeout, dag_id)
    client.set_paused(dag_id, False)
    run = client.trigger(dag_id, conf)
    run_id = run["dag_run_id"]
    ready_s = time.monotonic() - t0
    say(f"Airflow ready after {clock(ready_s)}; triggered {dag_id} run {run_id} with conf {json.dumps(conf)}")
    say(f"watch the cluster while it runs: {settings.base_url}/plugin/kafka-clusters (\"Kafka clusters\" in the UI's "
        f"navigation bar), or the run's \"Cluster\" tab: {settings.base_url}/dags/{dag_id}/runs/{run_id}"
        "/plugin/kafka-cluster-of-run")
    t_run = time.monotonic()
    run, tis = watch(client, dag_id, run_id, args.run_timeout, args.poll, settings.base_url)
    run_s = time.monotonic() - t_run
    failed = [ti for ti in tis if ti.get("state") == "failed"]
    ok = run["state"] == "success" and not failed
    say(f"run {run_id} ended: {run['state'].upper()} in {clock(run_s)} "
        f"(demo total {clock(time.monotonic() - t0)}, Airflow ready after {clock(ready_s)})")
    for ti in failed:
        say(f"FAILED {progress.label(ti)}: {last_error(client, dag_id, run_id, ti)}")
    say(f"UI: {settings.base_url}/dags/{dag_id}/runs/{run_id}  login: admin / {password} "
        f"(from {settings.home / airflow_proc.PASSWORD_FILE})")
    say("Airflow and the sandbox keep running; stop both with `make down` (python -m demo --down)")
    return 0 if ok else 1


def down(args: argparse.Namespace) -> int:
    """Stop this home's Airflow (all its processes) and the sandbox. Returns 0, or 1 if any process is left."""
    home = args.airflow_home.resolve()
    n = airflow_proc.stop(home)
    say(f"Airflow of {home}: {f'stopped ({n} processes)' if n else 'not running'}")
    sandbox_env.down(REPO, args.workdir.resolve())
    left = airflow_proc.marked_processes(home)
    if left:
        say(f"processes still running: {left}")
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the demo (or ``--down``); returns the exit code (1 with ``demo: error: ...`` on a known problem)."""
    args = build_parser().parse_args(argv)
    try:
        return down(args) if args.down else up(args)
    except DemoError as exc:
        print(f"demo: error: {exc}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        print("demo: interrupted (Airflow, the sandbox and a triggered run keep going; `make down` stops them)",
              file=sys.stderr)
        return 130
