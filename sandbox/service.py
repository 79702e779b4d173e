"""``kafka-service start|stop|restart|status``: the sandbox's ``systemctl ... kafka`` for a host's Kafka node.

Run on a host (an SSH session there has ``KAFKA_HOST_DIR`` set by that host's sshd), or with ``--host-dir``.
The node is whatever the host's ``server.properties`` says (a ZooKeeper-mode broker, a KRaft broker or a
KRaft controller); the release is the one the host's ``kafka`` symlink points at. Semantics follow a
systemd unit running ``kafka/bin/kafka-server-start.sh server.properties``:

- ``start``: launch that JVM detached (own session, output appended to ``logs/server.log`` after a marker
  line, :mod:`sandbox.node_log`), pid in ``kafka.pid``; wait up to ``settings.START_WAIT_S`` until Kafka
  logs that it started (registered in ZooKeeper, or unfenced by the KRaft controller) and return 0. A
  JVM that exits meanwhile is reported with Kafka's own reason (the fatal exception it logged) and exit 1.
  Starting an active node is a no-op (exit 0).
- ``stop``: SIGTERM, which runs Kafka's shutdown hook: a broker's controlled shutdown (leadership moved
  away first), then exit; SIGKILL after ``settings.STOP_TIMEOUT_S``. Stopping an inactive node is a no-op.
- ``restart``: stop, then start.
- ``status``: like ``systemctl is-active``: prints ``active``, ``inactive`` or ``failed: <reason>`` (the last
  start ended with a fatal exception); exit 0 only when active (3 otherwise, as systemctl does).
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
import time
from pathlib import Path

import javaproperties

from sandbox import node_log, procs, settings
from sandbox.layout import HOST_DIR_ENV, WORKDIR_ENV, HostDir

EXIT_INACTIVE = 3
#: Seconds between ``start``'s looks for Kafka's "started" line (what a systemd unit of Type=notify reports at once);
#: each look parses only this start's lines (``node_log.last_run``).
START_POLL_S = 0.1
LAUNCHER = "bin/kafka-server-start.sh"


class ServiceError(RuntimeError):
    """The service command failed; the message is what `kafka-service` prints."""


def properties(host: HostDir) -> dict[str, str]:
    """The host's ``server.properties`` as a dict.

    Raises:
        ServiceError: missing or unreadable.
    """
    try:
        with open(host.server_properties, encoding="utf-8") as handle:
            return javaproperties.load(handle)
    except OSError as exc:
        raise ServiceError(f"cannot read {host.server_properties}: {exc}") from None


def role(host: HostDir) -> str:
    """``"controller"`` (``process.roles=controller``) or ``"broker"`` (KRaft broker or ZooKeeper mode)."""
    roles = {r.strip() for r in properties(host).get("process.roles", "broker").split(",")}
    return "controller" if roles == {"controller"} else "broker"


def node_id(host: HostDir) -> int:
    """``node.id`` or ``broker.id`` of the host's node (the directory name when neither is set)."""
    props = properties(host)
    return int(props.get("node.id") or props.get("broker.id") or host.path.name)


def kafka_pid(host: HostDir) -> int | None:
    """The pid of this host's running Kafka JVM, or None (pid file missing, stale or reused)."""
    return procs.alive_from_pid_file(host.kafka_pid, must_contain=str(host.path))


def status(host: HostDir) -> tuple[str, str | None]:
    """``("active", None)``, ``("inactive", None)`` or ``("failed", reason)`` (the last start's fatal exception)."""
    if kafka_pid(host):
        return "active", None
    run = node_log.last_run(host.server_log)
    if run is not None and run.failure:
        return "failed", run.failure
    return "inactive", None


def _who(host: HostDir) -> str:
    try:
        return f"{role(host)} {node_id(host)}"
    except (ServiceError, ValueError):
        return f"node {host.path.name}"


def _release(host: HostDir) -> Path:
    """The release the ``kafka`` symlink points at, with its launcher.

    Raises:
        ServiceError: no symlink, or it points at no release with ``bin/kafka-server-start.sh``.
    """
    link = host.kafka_link
    if not link.is_symlink() and not link.is_dir():
        raise ServiceError(f"no Kafka installed: {link} does not exist")
    release = link.resolve()
    if not (release / LAUNCHER).is_file():
        raise ServiceError(f"{link} -> {release}: not a Kafka release ({LAUNCHER} missing)")
    return release


def start(host: HostDir, wait_s: float = settings.START_WAIT_S) -> str:
    """Start the node of ``host`` and return a one-line report.

    Waits up to ``wait_s`` seconds for Kafka's "started" line (``wait_s=0``: return once the JVM runs).

    Raises:
        ServiceError: no release installed, or the JVM exited during startup (message: Kafka's reason).
    """
    who = _who(host)
    pid = kafka_pid(host)
    if pid:
        return f"{who} already active (pid {pid})"
    release = _release(host)
    heap = settings.CONTROLLER_HEAP if role(host) == "controller" else settings.BROKER_HEAP
    env = dict(os.environ)
    env.setdefault("KAFKA_HEAP_OPTS", heap)
    env.setdefault("KAFKA_JVM_PERFORMANCE_OPTS", settings.JVM_OPTS)
    workdir = Path(env.get(WORKDIR_ENV) or host.path.parent.parent)
    host.logs.mkdir(parents=True, exist_ok=True)
    launcher = host.kafka_link / LAUNCHER
    # the shell writes the marker with its own pid, then becomes the JVM (exec): one pid, marker first
    script = ('printf "[%s] kafka-service: start %s (pid %s)\\n" "$(date "+%Y-%m-%d %H:%M:%S,%3N")" '
              f'{shlex.quote(str(release))} "$$"; exec "$0" "$@"')
    pid = procs.spawn(["/bin/sh", "-c", script, str(launcher), str(host.server_properties)],
                      log_file=host.server_log, pid_file=host.kafka_pid, workdir=workdir, env=env, cwd=host.path)
    if wait_s <= 0:
        return f"{who} starting (pid {pid}, Kafka {release.name})"
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        run = _this_run(host, pid)
        if not procs.is_alive(pid):
            reason = (run.failure if run else None) or "the JVM exited during startup"
            raise ServiceError(f"{who} failed: {reason} (see {host.server_log})")
        if run is not None and run.started:
            return f"{who} active (pid {pid}, Kafka {release.name}, started in {run.started - run.began:.1f} s)"
        time.sleep(START_POLL_S)
    return f"{who} started (pid {pid}), not registered yet after {wait_s:.0f} s (see {host.server_log})"


def _this_run(host: HostDir, pid: int) -> node_log.Run | None:
    run = node_log.last_run(host.server_log)
    return run if run is not None and run.pid == pid else None


def stop(host: HostDir, timeout_s: float = settings.STOP_TIMEOUT_S) -> str:
    """Stop the node of ``host``: SIGTERM (Kafka's controlled shutdown), SIGKILL after ``timeout_s``."""
    who = _who(host)
    pid = kafka_pid(host)
    if not pid:
        return f"{who} already inactive"
    began = time.monotonic()
    killed = procs.stop_pids([pid], timeout_s, signal.SIGTERM)
    if killed:
        return f"{who} stopped (pid {pid}; SIGKILL after {timeout_s:.0f} s without exit)"
    return f"{who} stopped (pid {pid}, {time.monotonic() - began:.1f} s)"


def resolve_host(host_dir: str | None) -> HostDir:
    """The host directory from ``--host-dir`` or ``$KAFKA_HOST_DIR``.

    Raises:
        ServiceError: neither given, or not a host directory.
    """
    value = host_dir or os.environ.get(HOST_DIR_ENV)
    if not value:
        raise ServiceError(f"not on a Kafka host: set {HOST_DIR_ENV} or pass --host-dir")
    host = HostDir(Path(value).resolve())
    if not host.server_properties.exists():
        raise ServiceError(f"{host.path} is not a Kafka host directory (no server.properties)")
    return host


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``kafka-service``; returns the exit code."""
    parser = argparse.ArgumentParser(prog="kafka-service", description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["start", "stop", "restart", "status"])
    parser.add_argument("--host-dir", help=f"host directory (default: ${HOST_DIR_ENV})")
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
