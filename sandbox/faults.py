"""Faults injected into a running sandbox, as real signals on real processes: ``crash_broker`` (SIGKILL of a
broker's or controller's JVM: no controlled shutdown), ``freeze`` / ``thaw`` (SIGSTOP / SIGCONT of a node,
ZooKeeper, Burrow or the workload: a process that keeps its sockets and sessions but answers nothing) and
``stall_group`` (a consumer group of the workload stops progressing, for Burrow to rate) and
``replace_metadata_dir`` (a KRaft voter's disk replaced: its log dir formatted again, a new directory id).

Errors a user can fix raise :class:`sandbox.cluster.SandboxError` (the CLI exits 1).
"""

from __future__ import annotations

import shutil
import signal
import time

from sandbox import kraft_storage, procs, service, settings, state, workload
from sandbox.cluster import SandboxError, Say, say_to_stderr
from sandbox.layout import Workdir


def _load_running(workdir: Workdir) -> state.SandboxState:
    try:
        info = state.load(workdir)
    except state.NotASandbox as exc:
        raise SandboxError(str(exc)) from None
    if not state.running_processes(workdir):
        raise SandboxError(
            f"the sandbox in {workdir.root} is not running: start it with `python -m sandbox up`"
        )
    return info


def _node_ids(info: state.SandboxState) -> str:
    spares = [s.id for s in info.broker_specs if s.spare]
    return (f"brokers {[s.id for s in info.active_specs]}" + (f", spare hosts {spares}" if spares else "")
            + (f", controllers {sorted(info.controllers)}" if info.kraft else ""))


def _running_node(workdir: Workdir, info: state.SandboxState, node_id: int) -> int:
    """The pid of node ``node_id``'s running JVM.

    Raises:
        SandboxError: unknown node id, or the node is not running.
    """
    if node_id not in [s.id for s in info.broker_specs] + list(info.controllers):
        raise SandboxError(f"unknown node id {node_id}: this sandbox has {_node_ids(info)}")
    host = workdir.host(node_id)
    pid = service.kafka_pid(host)
    if not pid:
        raise SandboxError(f"node {node_id} is not running (kafka-service status: {service.status(host)[0]})")
    return pid


def crash_broker(workdir: Workdir, broker_id: int, say: Say = say_to_stderr) -> int:
    """SIGKILL the JVM of broker (or KRaft controller) ``broker_id``: no controlled shutdown; returns its pid.

    Raises:
        SandboxError: no running sandbox, unknown node id, or the node is not running.
    """
    info = _load_running(workdir)
    pid = _running_node(workdir, info, broker_id)
    procs.signal_pid(pid, signal.SIGKILL)
    procs.wait_for(lambda: not procs.is_alive(pid), 5.0, f"node {broker_id} (pid {pid}) to die")
    if broker_id in info.controllers:
        say(f"controller {broker_id} (pid {pid}) killed with SIGKILL; the other voters elect a leader without it "
            "if it led the quorum")
    elif info.kraft:
        say(f"broker {broker_id} (pid {pid}) killed with SIGKILL; the active controller fences it after "
            f"{settings.BROKER_SESSION_TIMEOUT_MS / 1000:.0f} s without heartbeats (broker.session.timeout.ms)")
    else:
        say(f"broker {broker_id} (pid {pid}) killed with SIGKILL; its ZooKeeper session expires after "
            f"{settings.ZK_SESSION_TIMEOUT_MS / 1000:.0f} s (zookeeper.session.timeout.ms)")
    return pid


def replace_metadata_dir(workdir: Workdir, node_id: int, say: Say = say_to_stderr) -> str:
    """A voter's disk replaced, in a dynamic quorum (KIP-853): stop KRaft voter ``node_id`` (controlled shutdown),
    empty its log dir, format it again as Kafka's operations guide formats a node that joins an existing cluster
    (``kafka-storage format --no-initial-controllers``: a new directory id), and start it. It comes back fetching
    as an *observer* under its new directory id; the voter with the old one stays in the voter set, silent, until
    ``kafka-metadata-quorum remove-controller`` / ``add-controller``. Returns the new directory id (Kafka's form).

    Raises:
        SandboxError: no running sandbox, not a voter of a dynamic quorum, or the node is not running.
    """
    info = _load_running(workdir)
    if info.quorum != "dynamic" or node_id not in info.voters:
        raise SandboxError(f"node {node_id} is not a voter of a dynamic quorum (this sandbox: {info.quorum} quorum, "
                           f"{_node_ids(info)})")
    _running_node(workdir, info, node_id)
    host = workdir.host(node_id)
    service.stop(host)
    for path in host.data.iterdir():
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
    try:
        new_id = kraft_storage.format_node(host, info.cluster_id, ["--no-initial-controllers"])
    except kraft_storage.StorageError as exc:
        raise SandboxError(f"controller {node_id} is stopped with an empty log dir: {exc}") from None
    service.start(host, wait_s=0)
    say(f"controller {node_id}: log dir {host.data} formatted again (directory id {new_id}, was "
        f"{info.directory_ids.get(str(node_id))}) and started: it fetches as an observer, voter {node_id} stays "
        "silent until kafka-metadata-quorum remove-controller / add-controller")
    return new_id


FREEZABLE = ("zookeeper", "burrow", "workload")


def _freeze_target(workdir: Workdir, target: str) -> tuple[str, int]:
    """``(label, pid)`` of ``target``: a node id, or one of :data:`FREEZABLE`.

    Raises:
        SandboxError: unknown target or not running.
    """
    info = _load_running(workdir)
    if target.isdigit():
        node_id = int(target)
        return f"node {node_id}", _running_node(workdir, info, node_id)
    if target not in FREEZABLE:
        raise SandboxError(f"unknown target {target!r}: a node id ({_node_ids(info)}) or one of {', '.join(FREEZABLE)}")
    pid = state.running_processes(workdir).get(target)
    if not pid:
        raise SandboxError(f"{target} is not running in {workdir.root}")
    return target, pid


def freeze(workdir: Workdir, target: str, say: Say = say_to_stderr) -> int:
    """SIGSTOP ``target`` (a node id, ``zookeeper``, ``burrow`` or ``workload``): it keeps its sockets and
    sessions but answers nothing, like a host stuck in a long GC pause or swapping; returns its pid.

    Raises:
        SandboxError: see :func:`_freeze_target`.
    """
    label, pid = _freeze_target(workdir, target)
    procs.signal_pid(pid, signal.SIGSTOP)
    say(f"{label} (pid {pid}) frozen with SIGSTOP; `sandbox thaw {target}` resumes it")
    return pid


def thaw(workdir: Workdir, target: str, say: Say = say_to_stderr) -> int:
    """SIGCONT what :func:`freeze` stopped; returns its pid.

    Raises:
        SandboxError: see :func:`_freeze_target`.
    """
    label, pid = _freeze_target(workdir, target)
    procs.signal_pid(pid, signal.SIGCONT)
    say(f"{label} (pid {pid}) resumed with SIGCONT")
    return pid


def stall_group(workdir: Workdir, group: str, seconds: float, say: Say = say_to_stderr) -> float:
    """Make consumer group ``group`` stop progressing for ``seconds`` (it re-commits the offsets it had,
    see :mod:`sandbox.workload`); returns the deadline (epoch s).

    Raises:
        SandboxError: no running sandbox, unknown group, or ``seconds`` <= 0.
    """
    _load_running(workdir)
    if group not in settings.WORKLOAD_GROUPS:
        raise SandboxError(
            f"unknown consumer group {group!r}: the workload runs {', '.join(settings.WORKLOAD_GROUPS)}"
        )
    if seconds <= 0:
        raise SandboxError(f"--stall-seconds must be positive (got {seconds})")
    broken = workload.problem(workdir)
    if broken:  # dead or hung: it would never read the stall file
        raise SandboxError(broken)
    deadline = workload.stall(workdir, group, seconds)
    until = time.strftime("%H:%M:%S", time.localtime(deadline))
    say(f"group {group} stops committing for {seconds:g} s (until {until})")
    return deadline
