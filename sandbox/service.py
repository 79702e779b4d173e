"""``kafka-service start|stop|restart|status``: the sandbox's stand-in for ``systemctl ... kafka``.

Run on a broker host (an SSH session there has ``KAFKA_HOST_DIR`` set by that host's sshd), or with
``--host-dir``. Semantics follow systemd:

- ``start``: launch ``python -m sandbox.broker HOST_DIR`` detached (own session, output appended to
  ``logs/server.log``), then wait up to ``START_WAIT_S`` for it to register in ZooKeeper; a broker that
  exits meanwhile (e.g. IBP newer than the installed version) is reported with the reason from
  ``broker.failed`` and exit 1. Starting an active broker is a no-op (exit 0).
- ``stop``: SIGTERM (= controlled shutdown), wait for the exit up to ``STOP_TIMEOUT_S``, then SIGKILL.
  Stopping an inactive broker is a no-op (exit 0).
- ``restart``: stop, then start.
- ``status``: like ``systemctl is-active``: prints ``active``, ``inactive`` or ``failed: <reason>``;
  exit 0 only when active (3 otherwise, as systemctl does).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

from sandbox import procs, settings
from sandbox.layout import HOST_DIR_ENV, PROJECT_ROOT, WORKDIR_ENV, HostDir

START_WAIT_S = 8.0  # how long `start` waits for the broker to register (or fail) before returning
STOP_TIMEOUT_S = settings.CONTROLLED_SHUTDOWN_TIMEOUT_S + 5.0  # then SIGKILL (systemd's TimeoutStopSec)
EXIT_INACTIVE = 3


class ServiceError(RuntimeError):
    """The service command failed; the message is what `kafka-service` prints."""


def broker_pid(host: HostDir) -> int | None:
    """The pid of this host's running broker, or None (pid file missing, stale or reused)."""
    return procs.alive_from_pid_file(host.broker_pid, must_contain=str(host.path))


def status(host: HostDir) -> tuple[str, str | None]:
    """``("active", None)``, ``("inactive", None)`` or ``("failed", reason)``."""
    if broker_pid(host):
        return "active", None
    if host.broker_failed.exists():
        reason = host.broker_failed.read_text().strip() or "broker exited at startup"
        return "failed", reason
    return "inactive", None


def quorum_status(host: HostDir, fresh_s: float = 2.0) -> dict:
    """A KRaft controller's own view (``quorum-status.json``: role, leader, active, epoch, offsets), ``{}``
    when missing or older than ``fresh_s`` seconds (the controller is not running)."""
    try:
        status = json.loads(host.quorum_status.read_text())
    except (OSError, ValueError):
        return {}
    return status if time.time() - float(status.get("ts", 0)) <= fresh_s else {}


def _registered(host: HostDir) -> bool:
    """Whether the node is up: a broker's ``/brokers/ids/<id>`` exists (ZooKeeper, or the KRaft metadata
    log read through the quorum); a KRaft controller knows the quorum leader and has registered."""
    from kazoo.client import KazooClient  # imported here: `status` and `stop` need no ZooKeeper

    from sandbox.broker.config import BrokerConfig

    config = BrokerConfig.load(host.path)
    if config.is_controller:
        status = quorum_status(host)
        return bool(status.get("leader") is not None and status.get("registered"))
    if config.kraft:
        from sandbox.broker.quorum_client import RemoteQuorumClient

        client = RemoteQuorumClient(config.quorum_voters or {}, settings.REPLICATION_PORT, -1, "kafka-service", None)
        client.start(timeout=5.0)
        try:
            return client.exists(f"/brokers/ids/{config.broker_id}") is not None
        finally:
            client.stop()
    zk = KazooClient(hosts=config.zookeeper_connect, timeout=5.0)
    zk.start(timeout=5.0)
    try:
        return zk.exists(f"/brokers/ids/{config.broker_id}") is not None
    finally:
        zk.stop()
        zk.close()


def start(host: HostDir, wait_s: float = START_WAIT_S, python: str | None = None) -> str:
    """Start the broker of ``host`` and return a one-line report.

    Waits up to ``wait_s`` seconds for the broker to register (``wait_s=0``: return at once).

    Raises:
        ServiceError: the broker exited during startup (message: the reason from broker.failed).
    """
    pid = broker_pid(host)
    if pid:
        return f"broker {host.broker_id} already active (pid {pid})"
    python = python or os.environ.get("SANDBOX_PYTHON") or sys.executable
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), env.get("PYTHONPATH")]))
    workdir = Path(env.get(WORKDIR_ENV) or host.path.parent.parent)
    host.logs.mkdir(parents=True, exist_ok=True)
    started_at = time.time()
    pid = procs.spawn(
        [python, "-m", "sandbox.broker", str(host.path)],
        log_file=host.server_log,
        pid_file=None,  # the broker writes broker.pid itself
        workdir=workdir,
        env=env,
        cwd=host.path,
    )
    if wait_s <= 0:
        return f"broker {host.broker_id} starting (pid {pid})"
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if not procs.is_alive(pid):
            reason = "exited during startup"
            if host.broker_failed.exists() and host.broker_failed.stat().st_mtime >= started_at - 1:
                reason = host.broker_failed.read_text().strip() or reason
            raise ServiceError(f"broker {host.broker_id} failed: {reason} (see {host.server_log})")
        try:
            if _registered(host):
                return f"broker {host.broker_id} active (pid {pid})"
        except Exception:  # noqa: BLE001 - ZooKeeper briefly unreachable: keep waiting
            pass
        time.sleep(0.1)
    return f"broker {host.broker_id} started (pid {pid}), not registered yet after {wait_s:.0f} s"


def stop(host: HostDir, timeout_s: float = STOP_TIMEOUT_S) -> str:
    """Stop the broker of ``host`` (SIGTERM = controlled shutdown; SIGKILL after ``timeout_s``)."""
    pid = broker_pid(host)
    if not pid:
        return f"broker {host.broker_id} already inactive"
    killed = procs.stop_pids([pid], timeout_s, signal.SIGTERM)
    if killed:
        return f"broker {host.broker_id} stopped (pid {pid}; SIGKILL after {timeout_s:.0f} s without exit)"
    return f"broker {host.broker_id} stopped (pid {pid})"


def resolve_host(host_dir: str | None) -> HostDir:
    """The host directory from ``--host-dir`` or ``$KAFKA_HOST_DIR``.

    Raises:
        ServiceError: neither given, or not a broker host directory.
    """
    value = host_dir or os.environ.get(HOST_DIR_ENV)
    if not value:
        raise ServiceError(f"not on a broker host: set {HOST_DIR_ENV} or pass --host-dir")
    host = HostDir(Path(value).resolve())
    if not host.server_properties.exists():
        raise ServiceError(f"{host.path} is not a broker host directory (no server.properties)")
    return host


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``kafka-service``; returns the exit code."""
    parser = argparse.ArgumentParser(prog="kafka-service", description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["start", "stop", "restart", "status"])
    parser.add_argument("--host-dir", help=f"broker host directory (default: ${HOST_DIR_ENV})")
    args = parser.parse_args(argv)
    try:
        host = resolve_host(args.host_dir)
        if args.action == "status":
            state, reason = status(host)
            print(f"{state}: {reason}" if reason else state)
            return 0 if state == "active" else EXIT_INACTIVE
        if args.action in ("stop", "restart"):
            print(stop(host))
        if args.action in ("start", "restart"):
            print(start(host))
        return 0
    except ServiceError as exc:
        print(f"kafka-service: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
