"""An ``airflow standalone`` for the UI tests: started on a free port with its own AIRFLOW_HOME and a sandbox's
connections (through ``demo.airflow_proc``), waited for with deadlines, stopped with every process it spawned.

Imported by ``tests/ui/conftest.py``; by hand (to look at the UI), with the repo and tests/ui on sys.path:
``start_airflow(Path("/tmp/ui-home"), Path("<sandbox workdir>"))``, later ``stop_airflow(Path("/tmp/ui-home"))``.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from demo import airflow_db, airflow_proc, sandbox_env
from demo.rest import AirflowApiError, AirflowClient

REPO = Path(__file__).resolve().parents[2]
DAG_ID = "kafka_rolling_restart"
START_TIMEOUT_S = 420  # healthy + DAG parsed; 40-120 s on a loaded 2-core machine
HEALTH_PARTS = ("metadatabase", "scheduler", "triggerer", "dag_processor")
# Variables of the pytest process that must not reach the standalone: the test session's own Airflow home
# (tests/dags/airflow_env.py) and any Airflow setting or connection it exported.
_LEAKY_PREFIXES = ("AIRFLOW__", "AIRFLOW_CONN_", "AIRFLOW_VAR_", "KAFKA_OPS_TEST_AIRFLOW_HOME")
_LEAKY_NAMES = ("AIRFLOW_HOME", "AIRFLOW_CONFIG")


class UiTestError(AssertionError):
    """Airflow did not come up, or a wait ran past its deadline."""


@dataclass
class RunningAirflow:
    """A started standalone: where it is and how to log in."""

    home: Path
    port: int
    pid: int
    password: str
    client: AirflowClient  # logged in as admin

    @property
    def base_url(self) -> str:
        return f"http://localhost:{self.port}"

    def log_tail(self, lines: int = 30) -> str:
        return airflow_proc.log_tail(self.home, lines)


def free_port() -> int:
    """A TCP port nothing listens on now (the kernel's pick, never 8080)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("0.0.0.0", 0))
            port = sock.getsockname()[1]
        if port != 8080 and airflow_proc.port_free(port):
            return port


#: When the running test's pytest-timeout strikes (``time.monotonic()``), set by the UI tests' autouse fixture;
#: None outside pytest or without a timeout.
TEST_ENDS_AT: float | None = None


def time_left_s(margin_s: float = 60.0) -> float:
    """Seconds the running test has before its pytest-timeout, less ``margin_s`` (room to report and clean up);
    ``inf`` when unknown. A wait bounded by it fails with its own message instead of pytest-timeout's stack dump."""
    return float("inf") if TEST_ENDS_AT is None else TEST_ENDS_AT - margin_s - time.monotonic()


def wait_until(what: str, timeout_s: float, check: Callable[[], Any], poll_s: float = 1.0,
               alive: Callable[[], str | None] | None = None) -> Any:
    """Call ``check()`` until it returns something truthy (returned). ``alive()`` returns a reason to give up
    early (e.g. Airflow died). Raises :class:`UiTestError` after ``timeout_s`` seconds, with the last value."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while True:
        last = check()
        if last:
            return last
        reason = alive() if alive else None
        if reason:
            raise UiTestError(f"gave up waiting for {what}: {reason}")
        if time.monotonic() >= deadline:
            raise UiTestError(f"timed out after {timeout_s:.0f} s waiting for {what} (last: {last!r})")
        time.sleep(poll_s)


@contextmanager
def _clean_environ() -> Iterator[None]:
    """Hide the pytest process's Airflow settings from a child started inside the block."""
    saved = {k: v for k, v in os.environ.items() if k.startswith(_LEAKY_PREFIXES) or k in _LEAKY_NAMES}
    for key in saved:
        del os.environ[key]
    try:
        yield
    finally:
        os.environ.update(saved)


def _healthy(client: AirflowClient) -> bool:
    health = client.health() or {}
    return all((health.get(p) or {}).get("status") == "healthy" for p in HEALTH_PARTS)


def start_airflow(home: Path, sandbox_workdir: Path, timeout_s: float = START_TIMEOUT_S) -> RunningAirflow:
    """Start standalone in ``home`` against the sandbox of ``sandbox_workdir``; return once it is healthy, the
    admin can log in, the sandbox's connections are in the metadata DB (as the demo writes them: REST, listed under
    Admin -> Connections), the DAG is parsed and un-paused. Stops it again if any of that fails."""
    port = free_port()
    settings = airflow_proc.AirflowSettings(
        home=home, dags_folder=REPO / "dags", plugins_folder=REPO / "plugins",
        venv_bin=Path(sys.prefix) / "bin", port=port,
    )
    extra_env = airflow_proc.demo_env(settings)
    with _clean_environ():
        record = airflow_proc.start(settings, extra_env)
    t0 = time.monotonic()
    try:
        def died() -> str | None:
            if record.pid in airflow_proc.marked_processes(home):
                return None
            return f"airflow standalone exited; end of {home / airflow_proc.LOG_NAME}:\n{airflow_proc.log_tail(home)}"

        client = AirflowClient(settings.base_url)
        left = lambda: max(1.0, timeout_s - (time.monotonic() - t0))  # noqa: E731 - one shared deadline
        wait_until("/api/v2/monitor/health to report every component healthy", left(), lambda: _healthy(client),
                   alive=died)
        password = wait_until("the generated admin password", left(), lambda: airflow_proc.admin_password(home),
                              alive=died)
        client.login("admin", password)
        bodies = sandbox_env.connection_bodies(sandbox_env.connection_env(sandbox_workdir))
        written = client.put_connections(list(bodies.values()))
        if sorted(written) != sorted(bodies):
            raise UiTestError(f"connections written {written}, not {sorted(bodies)}")

        def parsed() -> bool:
            try:
                if client.get_dag(DAG_ID):
                    return True
                errors = [e for e in client.import_errors() if e.get("filename", "").endswith(f"{DAG_ID}.py")]
            except AirflowApiError:  # a stalled api-server: keep polling until the deadline
                return False
            if errors:
                raise UiTestError(f"{DAG_ID}.py does not import:\n{errors[0].get('stack_trace')}")
            return False

        wait_until(f"the DAG {DAG_ID} to be parsed", left(), parsed, poll_s=2.0, alive=died)
        client.set_paused(DAG_ID, False)
    except BaseException:
        stop_airflow(home)
        raise
    print(f"\nairflow standalone ready in {time.monotonic() - t0:.0f} s at {settings.base_url} "
          f"(AIRFLOW_HOME={home}, pid {record.pid})")
    return RunningAirflow(home=home, port=port, pid=record.pid, password=password, client=client)


def stop_airflow(home: Path) -> None:
    """Stop every process of this home's standalone and delete its database; fail if one is left."""
    airflow_proc.stop(home)
    airflow_db.remove(home)
    left = airflow_proc.marked_processes(home)
    if left:
        raise UiTestError(f"Airflow processes of {home} still alive after stop: {left}")
