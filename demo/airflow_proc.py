"""``airflow standalone`` in the background: start it, find it again, stop it with all its children.

Standalone spawns scheduler, dag-processor, api-server and triggerer (and those spawn task and server
workers). It is started in its own session with ``KOPS_DEMO_AIRFLOW_HOME=<AIRFLOW_HOME>`` in its
environment; every descendant inherits that marker, so :func:`marked_processes` finds exactly this
Airflow's processes (and never another engineer's) by reading ``/proc/<pid>/environ``.
``$AIRFLOW_HOME/demo-standalone.json`` records the pid, port and the digest of the connections it got.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shlex
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from demo import airflow_db
from demo.errors import DemoError

MARKER_ENV = "KOPS_DEMO_AIRFLOW_HOME"
EXEC_WAIT_S = 30.0  # at most, for a started process to show its environment (see wait_marked)
RECORD_NAME = "demo-standalone.json"
#: The settings standalone was started with, as ``export`` lines for ``demo/airflow`` (the Airflow CLI against the
#: demo): without them the CLI would read and write an empty SQLite database in the home instead of the demo's
#: PostgreSQL ("Database migration required"). Readable by the owner alone (it holds the API user's password).
CLI_ENV_NAME = "demo.env"
LOG_NAME = "standalone.log"
PASSWORD_FILE = "simple_auth_manager_passwords.json.generated"
# the DAGs' service user: run notes (role "user" may edit DAG runs) and the roll-records cleanup (role "op" lists
# Variables)
API_USER = "kafka-ops"
API_CONN_ID = "kafka_ops_airflow_api"
DB_ENV = "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"


@dataclass
class AirflowSettings:
    """Where and how the demo's Airflow runs.

    :param home: AIRFLOW_HOME (created if missing).
    :param dags_folder: the repo's ``dags/``.
    :param plugins_folder: the repo's ``plugins/``.
    :param venv_bin: the venv's ``bin/`` (put first on PATH: standalone runs ``airflow`` subcommands).
    :param port: the api-server's port (UI and REST API).
    """

    home: Path
    dags_folder: Path
    plugins_folder: Path
    venv_bin: Path
    port: int = 8080

    @property
    def base_url(self) -> str:
        """The UI / API address, e.g. ``http://localhost:8080``."""
        return f"http://localhost:{self.port}"


@dataclass
class StandaloneRecord:
    """What ``demo-standalone.json`` holds about a started standalone."""

    pid: int
    port: int
    env_digest: str
    started: float  # epoch seconds


# Settings for a small, shared machine (measured at load 15-20 on 2 cores); the caller's environment overrides
# them. Task processes wait longer for a busy api-server (with the default 5 s a task failed at start while
# the api-server stalled for 79 s), and fewer of them run at once. The scheduler looks for the next task every
# 0.2 s when it found nothing to do (Airflow's default 1 s): a roll is a chain of short tasks, each waiting for the
# one before; the gap between two of them fell from 0.3-1.5 s to 0.1-0.5 s (a 3-broker roll has 12 tasks). The
# price: an idle scheduler uses 5.5 CPU seconds a minute instead of 1.6 (measured, 2 cores). Shorter did not help on
# 2 cores: at 0.05 s a 3-broker roll took 17.0 s (median of 5; 15.2-17.7) against 16.3 s (15.9-16.6) at 0.2 s,
# the machine 89-91% busy during the rolls against 66-69% (bench/side_by_side.py, 2026-11-30): the scheduler's
# extra loops took the CPU the brokers' JVMs start on.
# The dag-processor parses a DAG file again once it is older than ``min_file_process_interval`` (Airflow's default
# 30 s) or as soon as the file changed (its ``file_parsing_sort_mode`` ``modified_time``): the default re-parsed
# the eight unchanged DAG files every 30 s, each in a process of its own writing to the metadata database, and
# such a spell (9-12 s) fell in the middle of a roll every 30 s. An idle standalone used 23.9 CPU seconds in 90 s
# with it, 11.7 with 600 s; a touched DAG file was parsed again 1.0-1.5 s later with either; a roll of 3
# brokers behind it took 55.7 s (the spell stalled the api-server 3.7 s before the first broker's task could
# start) against 47.6 s. A change under plugins/ alone is seen at the next parse (up to 600 s): touch the DAG file;
# the tasks see it once the scheduler restarts (it imports the operations once for them: runtime.task_preimport).
TUNING = {
    "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "120",
    "AIRFLOW__WORKERS__EXECUTION_API_RETRIES": "10",
    "AIRFLOW__CORE__PARALLELISM": "8",
    "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": "0.2",
    "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "600",
}

def api_user_password(home: Path) -> str:
    """The password of :data:`API_USER`: made once per Airflow home and written into SimpleAuthManager's password
    file before Airflow starts (it keeps passwords it finds and generates the others, e.g. ``admin``'s)."""
    home.mkdir(parents=True, exist_ok=True)
    path = home / PASSWORD_FILE
    try:
        passwords = json.loads(path.read_text())
    except (OSError, ValueError):
        passwords = {}
    if API_USER not in passwords:
        passwords[API_USER] = secrets.token_urlsafe(18)
        path.write_text(json.dumps(passwords) + "\n")
        path.chmod(0o600)
    return passwords[API_USER]


def demo_env(settings: AirflowSettings) -> dict[str, str]:
    """The variables the demo sets for ``airflow standalone``: the Airflow settings (home, folders, no examples,
    port and base URL, :data:`TUNING`, the metadata database on PostgreSQL: :mod:`demo.airflow_db`), PATH and the
    process marker; users ``admin`` and :data:`API_USER` with the
    connection ``kafka_ops_airflow_api`` the DAGs write their run notes through (Airflow's own plumbing; the
    sandbox's connections go into the metadata DB, where the UI lists them)."""
    env = {k: v for k, v in TUNING.items() if k not in os.environ}
    api_conn = {"conn_type": "http", "host": "127.0.0.1", "port": settings.port, "schema": "http",
                "login": API_USER, "password": api_user_password(settings.home)}
    env[f"AIRFLOW_CONN_{API_CONN_ID.upper()}"] = json.dumps(api_conn)
    env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"] = f"admin:admin,{API_USER}:op"
    env.update(
        {
            "AIRFLOW_HOME": str(settings.home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(settings.dags_folder),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(settings.plugins_folder),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__API__PORT": str(settings.port),
            # the log servers' fixed defaults (8793, 8794) collide with any other Airflow on the machine:
            # derive them from the API port (8080 -> Airflow's own defaults)
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(settings.port + 713),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(settings.port + 714),
            "AIRFLOW__API__BASE_URL": settings.base_url,
            DB_ENV: airflow_db.url(settings.home),
            "PATH": f"{settings.venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
            MARKER_ENV: str(settings.home),
        }
    )
    return env


def env_digest(env: dict[str, str]) -> str:
    """A short digest of :func:`demo_env` (tells whether a running Airflow got other settings or connections)."""
    text = "\n".join(f"{k}={v}" for k, v in sorted(env.items()) if k != "PATH")
    return hashlib.sha256(text.encode()).hexdigest()[:16]


#: Variables of the caller's environment that standalone does not inherit. ``PYTHONDONTWRITEBYTECODE`` (set
#: machine-wide on some hosts and in many container images) keeps Python from caching compiled modules, so every
#: task process compiled the plugins again while parsing its DAG file: on 2 cores the parse took 0.21 s idle and
#: 0.37-0.87 s in a roll with it, 0.10 s and 0.18-0.46 s without (a 3-broker roll starts 12 task processes). The
#: compiled files go where Python puts them (``__pycache__`` beside each module, git-ignored); a plugins folder
#: the Airflow user cannot write to is simply compiled each time, as before.
NOT_INHERITED = ("PYTHONDONTWRITEBYTECODE",)


def write_cli_env(home: Path, extra: dict[str, str]) -> Path:
    """Write ``home/demo.env`` (:data:`CLI_ENV_NAME`): one ``export NAME='value'`` line (shell-quoted) per variable
    of ``extra`` (:func:`demo_env`) but PATH and the process marker, mode 0600. Returns its path."""
    path = home / CLI_ENV_NAME
    lines = [f"export {k}={shlex.quote(v)}" for k, v in sorted(extra.items()) if k not in ("PATH", MARKER_ENV)]
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text("# written by the demo when it started Airflow; read by demo/airflow\n" + "\n".join(lines) + "\n")
    return path


def standalone_env(extra: dict[str, str]) -> dict[str, str]:
    """The environment of ``airflow standalone``: ours minus inherited ``AIRFLOW_CONN_*`` and
    :data:`NOT_INHERITED`, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_CONN_") and k not in NOT_INHERITED}
    env.update(extra)
    return env


def _environ(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:  # gone, or a kernel thread / another user's process
        return b""


def _marked(pid: int, home: Path) -> bool:
    needle = f"{MARKER_ENV}={home}\0".encode()
    env = _environ(pid)
    return env.startswith(needle) or b"\0" + needle in env


def _session(pid: int) -> int | None:
    """The session id of ``pid`` (``/proc/<pid>/stat``), or None when it is gone."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[3])
    except (OSError, IndexError, ValueError):
        return None


def _airflow_cmdline(pid: int) -> bool:
    try:
        return b"airflow" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def marked_processes(home: Path) -> list[int]:
    """Pids of live processes of this Airflow home: those carrying its marker (standalone and its descendants), and
    the Airflow processes of standalone's session (it is started as a session leader). The session catches what
    the marker cannot: the api-server rewrites its process title over its environment (setproctitle), so its
    ``/proc/<pid>/environ`` no longer shows the marker, and once standalone is gone it is no longer a descendant."""
    me = os.getpid()
    leader = _recorded_pid(home)
    pids = [int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit() and int(e.name) != me]
    return sorted(pid for pid in pids if _marked(pid, home) or (
        leader is not None and _session(pid) == leader and _airflow_cmdline(pid)))


def _recorded_pid(home: Path) -> int | None:
    """The pid in this home's standalone record, alive or not (its session outlives it), or None."""
    try:
        return int(json.loads((home / RECORD_NAME).read_text())["pid"])
    except (OSError, ValueError, TypeError, KeyError):
        return None


def wait_marked(proc: subprocess.Popen, home: Path, timeout_s: float = EXEC_WAIT_S) -> bool:
    """Wait until the started process shows this home's marker in ``/proc/<pid>/environ``; False if it exited
    first or ``timeout_s`` (seconds) passed. ``Popen`` returns once the exec has begun (its close-on-exec pipe
    closes); a UI-test start once found the new standalone unmarked right after that (the likely reason: the
    new program's environment not set up yet), took it for gone and stopped nothing."""
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None:
        if _marked(proc.pid, home):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return False


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def _alive(pids: list[int]) -> list[int]:
    return [p for p in pids if Path(f"/proc/{p}").exists() and not _is_zombie(p)]


def read_record(home: Path) -> StandaloneRecord | None:
    """The record of the standalone started for ``home`` if it still runs (pid alive and marked), else None."""
    try:
        record = StandaloneRecord(**json.loads((home / RECORD_NAME).read_text()))
    except (OSError, ValueError, TypeError):
        return None
    return record if record.pid in _alive(marked_processes(home)) else None


def port_free(port: int) -> bool:
    """True when nothing listens on TCP ``port`` (a bind to 0.0.0.0 succeeds)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def start(settings: AirflowSettings, extra_env: dict[str, str]) -> StandaloneRecord:
    """Start ``airflow standalone`` detached (own session), output to ``$AIRFLOW_HOME/standalone.log``.

    When ``extra_env`` names this home's PostgreSQL database (:func:`demo_env` does), its server is started first
    (created on the first start; :func:`demo.airflow_db.start`). Returns at once; wait for the health endpoint
    before using the API.

    Raises:
        DemoError: the port is taken, ``airflow`` is not in the venv, or the database server did not start.
    """
    if not port_free(settings.port):
        raise DemoError(
            f"port {settings.port} is already in use by another program, so Airflow's UI cannot start there: "
            f"stop that program or pass --port N (e.g. --port {settings.port + 1})"
        )
    airflow = settings.venv_bin / "airflow"
    if not airflow.exists():
        raise DemoError(f"{airflow} is missing: run `make install` first")
    settings.home.mkdir(parents=True, exist_ok=True)
    if extra_env.get(DB_ENV) == airflow_db.url(settings.home):
        airflow_db.start(settings.home)
    stale_policy = settings.home / "config" / "airflow_local_settings.py"  # written by earlier demos
    if stale_policy.exists():
        stale_policy.unlink()
    write_cli_env(settings.home, extra_env)
    log = open(settings.home / LOG_NAME, "ab")  # noqa: SIM115 - handed to the child
    try:
        proc = subprocess.Popen(
            [str(airflow), "standalone"],
            env=standalone_env(extra_env),
            cwd=settings.home,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    finally:
        log.close()
    wait_marked(proc, settings.home)  # found by marked_processes from now on (or exited: the callers see it)
    record = StandaloneRecord(pid=proc.pid, port=settings.port, env_digest=env_digest(extra_env), started=time.time())
    (settings.home / RECORD_NAME).write_text(json.dumps(asdict(record)) + "\n")
    return record


def _signal_all(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _wait_gone(home: Path, timeout_s: float) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while True:
        left = _alive(marked_processes(home))
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.5)


def stop(home: Path, graceful_s: float = 40, term_s: float = 15) -> int:
    """Stop this home's Airflow: SIGINT to standalone (it stops its components), then SIGTERM and
    finally SIGKILL to every marked process still alive after ``graceful_s`` / ``term_s`` seconds; then its
    database server (its data stays for the next start; :func:`demo.airflow_db.remove` deletes it).

    Returns the number of Airflow processes found at the start (0: nothing was running).

    Raises:
        DemoError: processes survived SIGKILL (their pids are named), or the database server did not stop.
    """
    found = _stop_processes(home, graceful_s, term_s)
    airflow_db.stop(home)
    return found


def _stop_processes(home: Path, graceful_s: float, term_s: float) -> int:
    found = _alive(marked_processes(home))
    if not found:
        (home / RECORD_NAME).unlink(missing_ok=True)
        return 0
    record = read_record(home)
    if record is not None:
        _signal_all([record.pid], signal.SIGINT)
    else:  # no record: stop the components directly
        _signal_all(found, signal.SIGTERM)
    left = _wait_gone(home, graceful_s)
    if left:
        _signal_all(left, signal.SIGTERM)
        left = _wait_gone(home, term_s)
    if left:
        _signal_all(left, signal.SIGKILL)
        left = _wait_gone(home, 10)
    if left:
        raise DemoError(f"Airflow processes survived SIGKILL: {left}")
    (home / RECORD_NAME).unlink(missing_ok=True)
    return len(found)


def admin_password(home: Path) -> str | None:
    """The generated password of user ``admin`` (SimpleAuthManager's file), or None while not written yet."""
    try:
        return json.loads((home / PASSWORD_FILE).read_text()).get("admin")
    except (OSError, ValueError):
        return None


def log_tail(home: Path, lines: int = 15) -> str:
    """The last ``lines`` lines of ``standalone.log`` (for error messages)."""
    try:
        return "\n".join((home / LOG_NAME).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no standalone.log)"
