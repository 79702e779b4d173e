"""A running sandbox as tests see it: the parsed ``env.json`` plus helpers (CLI, SSH, ZooKeeper, Burrow).

The pytest fixtures in ``tests/conftest.py`` hand out :class:`RunningSandbox` objects; this module
holds no pytest code so scripts and benchmarks can use it too. Helpers observe the sandbox from
outside through the real clients (paramiko with host key checking, kazoo, Burrow's HTTP API).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import paramiko
from kazoo.client import KazooClient

from sandbox import burrow, metadata_access, procs, state
from sandbox.layout import PROJECT_ROOT, HostDir, Workdir

T = TypeVar("T")
CLI_TIMEOUT_S = 180.0


def run_cli(
    *args: str, timeout_s: float = CLI_TIMEOUT_S, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run ``python -m sandbox ARGS`` from the project root; returns the completed process (text output).

    Raises:
        subprocess.TimeoutExpired: it ran longer than ``timeout_s`` seconds.
    """
    child_env = dict(os.environ if env is None else env)
    child_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), child_env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "sandbox", *args],
        cwd=PROJECT_ROOT,
        env=child_env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def wait_for(condition: Callable[[], T], timeout_s: float, what: str, poll_s: float = 0.2) -> T:
    """:func:`sandbox.procs.wait_for` (a truthy result before the deadline, else ``procs.Timeout``)."""
    return procs.wait_for(condition, timeout_s, what, poll_s=poll_s)


@dataclass
class RunningSandbox:
    """A sandbox started by ``python -m sandbox up``. ``env`` is its parsed ``env.json``."""

    workdir: Path
    env: dict[str, Any]
    up_seconds: float | None = None  # how long `up` took, when this object started it
    up_output: str = ""
    _ssh_clients: dict[int, paramiko.SSHClient] = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, workdir: Path, **kwargs: Any) -> RunningSandbox:
        """Read ``workdir/env.json`` (raises FileNotFoundError when the sandbox is not up)."""
        return cls(workdir=Path(workdir), env=json.loads((Path(workdir) / "env.json").read_text()), **kwargs)

    # --- addresses ----------------------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        return self.env["bootstrap_servers"]

    @property
    def zookeeper_connect(self) -> str:
        return self.env["zookeeper_connect"]

    @property
    def burrow_url(self) -> str:
        return self.env["burrow_url"]

    @property
    def broker_ids(self) -> list[int]:
        """Every broker host, spares included."""
        return [b["id"] for b in self.env["brokers"]]

    def broker(self, broker_id: int) -> dict[str, Any]:
        """The ``env.json`` entry of broker (or KRaft controller) ``broker_id`` (KeyError when unknown)."""
        for entry in [*self.env["brokers"], *self.env.get("controllers", [])]:
            if entry["id"] == broker_id:
                return entry
        raise KeyError(broker_id)

    def host_dir(self, broker_id: int) -> HostDir:
        return Workdir.at(self.workdir).host(broker_id)

    # --- CLI ----------------------------------------------------------------------------------
    def cli(self, *args: str, timeout_s: float = CLI_TIMEOUT_S) -> subprocess.CompletedProcess:
        """``python -m sandbox ARGS --workdir <this workdir>``."""
        return run_cli(*args, "--workdir", str(self.workdir), timeout_s=timeout_s)

    def status(self) -> dict[str, Any]:
        """The parsed output of ``python -m sandbox status``.

        Raises:
            AssertionError: the command failed.
        """
        result = self.cli("status")
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    @property
    def kraft(self) -> bool:
        return self.env.get("mode") == "kraft"

    @property
    def controller_ids(self) -> list[int]:
        """KRaft: the controllers' node ids (``[]`` in ZooKeeper mode)."""
        return [c["id"] for c in self.env.get("controllers", [])]

    # --- metadata (ZooKeeper, or the KRaft quorum) ---------------------------------------------------
    @contextmanager
    def zk(self, timeout_s: float = 10.0) -> Iterator[KazooClient]:
        """A started metadata client, stopped on exit: kazoo on the sandbox's ZooKeeper, or in KRaft mode
        an observer of the controller quorum with the same calls (:mod:`sandbox.metadata_access`)."""
        if self.kraft:
            with metadata_access.metadata_client(state.load(Workdir.at(self.workdir)), timeout_s) as client:
                yield client
            return
        client = KazooClient(hosts=self.zookeeper_connect, timeout=timeout_s)
        client.start(timeout=timeout_s)
        try:
            yield client
        finally:
            client.stop()
            client.close()

    def registered_brokers(self) -> list[int]:
        with self.zk() as zk:
            return sorted(int(b) for b in zk.get_children("/brokers/ids"))

    def health(self) -> Any:
        """:class:`sandbox.status.ClusterHealth` from ZooKeeper."""
        from sandbox.status import cluster_health

        with self.zk() as zk:
            return cluster_health(zk)

    def wait_healthy(self, timeout_s: float = 60.0, brokers: list[int] | None = None) -> None:
        """Wait until ``brokers`` (default: the non-spare brokers) are registered and URP = 0."""
        expected = (
            brokers if brokers is not None else [b["id"] for b in self.env["brokers"]][: self.active_count]
        )
        last: dict[str, Any] = {}

        def healthy() -> bool:
            last["h"] = self.health()
            return last["h"].healthy(expected)

        try:
            wait_for(healthy, timeout_s, "a healthy cluster", poll_s=0.3)
        except procs.Timeout as exc:
            raise procs.Timeout(f"{exc}: {last.get('h') and last['h'].problems(expected)}") from None

    @property
    def active_count(self) -> int:
        return len(self.bootstrap_servers.split(","))

    # --- Burrow -------------------------------------------------------------------------------
    def group_status(self, group: str) -> str | None:
        """Burrow's status of ``group`` (OK, WARN, ERR, NOTFOUND, ...)."""
        return burrow.group_status(self.burrow_url, group, self.env["burrow_cluster"]).get("status")

    # --- SSH ----------------------------------------------------------------------------------
    def ssh_client(self, broker_id: int, known_hosts: Path | None = None) -> paramiko.SSHClient:
        """A paramiko client connected to broker host ``broker_id`` with host key checking ON
        (RejectPolicy, the sandbox's known_hosts file unless ``known_hosts`` is given).

        Raises:
            paramiko.SSHException: host key unknown or mismatched, authentication failed.
        """
        ssh = self.env["ssh"]
        broker = self.broker(broker_id)
        client = paramiko.SSHClient()
        client.load_host_keys(str(known_hosts or ssh["known_hosts"]))
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        client.connect(
            broker["host"],
            port=broker["ssh_port"],
            username=ssh["user"],
            key_filename=ssh["key_file"],
            look_for_keys=False,
            allow_agent=False,
            timeout=10,
        )
        return client

    def ssh(self, broker_id: int, command: str, timeout_s: float = 60.0) -> tuple[int, str, str]:
        """Run ``command`` on broker host ``broker_id`` over SSH; returns (exit code, stdout, stderr)."""
        client = self._ssh_clients.get(broker_id)
        if client is None or not (client.get_transport() and client.get_transport().is_active()):
            client = self.ssh_client(broker_id)
            self._ssh_clients[broker_id] = client
        _, stdout, stderr = client.exec_command(command, timeout=timeout_s)
        out = stdout.read().decode()
        err = stderr.read().decode()
        return stdout.channel.recv_exit_status(), out, err

    def close(self) -> None:
        for client in self._ssh_clients.values():
            client.close()
        self._ssh_clients.clear()

    # --- processes ----------------------------------------------------------------------------
    def processes(self) -> dict[int, str]:
        """Every process (but this one) that references this workdir anywhere: command line, environment,
        current directory or an open file. ``{pid: how}``. Independent of the marker `down` uses."""
        return processes_referencing(Path(self.workdir).resolve())


def processes_referencing(path: Path) -> dict[int, str]:
    """``{pid: how}`` for every process other than this one whose command line or environment mentions
    ``path``, or whose current directory or an open file descriptor lies under it."""
    root = str(path)
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        pid = int(entry.name)
        try:
            if root in (entry / "cmdline").read_bytes().decode(errors="replace"):
                found[pid] = "cmdline"
            elif root in (entry / "environ").read_bytes().decode(errors="replace"):
                found[pid] = "environ"
            elif (os.readlink(entry / "cwd") + "/").startswith(root + "/"):
                found[pid] = "cwd"
            else:
                for fd in (entry / "fd").iterdir():
                    target = os.readlink(fd)
                    if target == root or target.startswith(root + "/"):
                        found[pid] = f"open file {target}"
                        break
        except OSError:  # gone meanwhile, or a kernel thread
            continue
    return found


def start(
    workdir: Path,
    *,
    brokers: int = 3,
    spare_brokers: int = 0,
    racks: int = 3,
    kafka_version: str | None = None,
    address_base: str | None = None,
    timeout_s: float = CLI_TIMEOUT_S,
    mode: str = "zookeeper",
    controllers: int = 3,
) -> RunningSandbox:
    """``python -m sandbox up`` in ``workdir``; returns the running sandbox (``up_seconds`` measured).

    Raises:
        RuntimeError: `up` failed (its stderr is in the message).
    """
    args = [
        "up",
        "--workdir",
        str(workdir),
        "--brokers",
        str(brokers),
        "--spare-brokers",
        str(spare_brokers),
        "--racks",
        str(racks),
    ]
    if kafka_version:
        args += ["--kafka-version", kafka_version]
    if address_base:
        args += ["--address-base", address_base]
    if mode != "zookeeper":
        args += ["--mode", mode, "--controllers", str(controllers)]
    began = time.monotonic()
    result = run_cli(*args, timeout_s=timeout_s)
    elapsed = time.monotonic() - began
    if result.returncode != 0:
        raise RuntimeError(f"sandbox up failed (exit {result.returncode}):\n{result.stderr}")
    return RunningSandbox.load(workdir, up_seconds=elapsed, up_output=result.stderr)


def stop(sandbox: RunningSandbox) -> subprocess.CompletedProcess:
    """``python -m sandbox down`` for ``sandbox`` (closes its SSH clients first)."""
    sandbox.close()
    return run_cli("down", "--workdir", str(sandbox.workdir))
