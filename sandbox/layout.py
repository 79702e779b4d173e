"""Paths inside a sandbox work directory (the layout documented in :mod:`sandbox.settings`).

Every module that touches the work directory goes through :class:`Workdir`, so the layout lives in
one place. Paths are absolute: processes started from the sandbox (and SSH sessions on broker
hosts) must find them whatever their current directory is.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sandbox import settings

# Every process the sandbox starts carries this variable (value: the absolute workdir), so `down`
# can find leftovers by reading /proc/<pid>/environ without guessing from command lines.
WORKDIR_ENV = "SANDBOX_WORKDIR"
# Set in SSH sessions on a broker host: which host directory `kafka-service` acts on.
HOST_DIR_ENV = "KAFKA_HOST_DIR"

PACKAGE_DIR = Path(__file__).resolve().parent
PROJECT_ROOT = PACKAGE_DIR.parent
BIN_DIR = PACKAGE_DIR / "bin"  # holds `kafka-service`, put on PATH in broker-host SSH sessions


@dataclass(frozen=True)
class Workdir:
    """The work directory of one sandbox; ``root`` is made absolute by :meth:`at`."""

    root: Path

    @classmethod
    def at(cls, path: str | Path) -> Workdir:
        """The workdir at ``path`` (relative paths resolve against the current directory)."""
        return cls(Path(path).expanduser().resolve())

    # --- top level --------------------------------------------------------------------------
    @property
    def env_json(self) -> Path:
        return self.root / "env.json"

    @property
    def airflow_env(self) -> Path:
        return self.root / "airflow.env"

    @property
    def state_json(self) -> Path:
        return self.root / "sandbox.json"

    @property
    def lock_file(self) -> Path:
        return self.root / ".lock"

    # --- ZooKeeper --------------------------------------------------------------------------
    @property
    def zookeeper(self) -> Path:
        return self.root / "zookeeper"

    @property
    def zookeeper_pid(self) -> Path:
        return self.zookeeper / "zookeeper.pid"

    @property
    def zookeeper_log(self) -> Path:
        return self.zookeeper / "zookeeper.log"

    # --- Burrow -----------------------------------------------------------------------------
    @property
    def burrow(self) -> Path:
        return self.root / "burrow"

    @property
    def burrow_pid(self) -> Path:
        return self.burrow / "burrow.pid"

    @property
    def burrow_log(self) -> Path:
        return self.burrow / "burrow.log"

    # --- SSH --------------------------------------------------------------------------------
    @property
    def ssh(self) -> Path:
        return self.root / "ssh"

    @property
    def client_key(self) -> Path:
        return self.ssh / "id_ed25519"

    @property
    def host_key(self) -> Path:
        return self.ssh / "ssh_host_ed25519_key"

    @property
    def known_hosts(self) -> Path:
        return self.ssh / "known_hosts"

    @property
    def authorized_keys(self) -> Path:
        return self.ssh / "authorized_keys"

    # --- workload ---------------------------------------------------------------------------
    @property
    def workload(self) -> Path:
        return self.root / "workload"

    @property
    def workload_pid(self) -> Path:
        return self.workload / "workload.pid"

    @property
    def workload_log(self) -> Path:
        return self.workload / "workload.log"

    @property
    def workload_heartbeat(self) -> Path:
        """Holds the epoch seconds of the workload loop's latest round (written at most every second)."""
        return self.workload / "heartbeat"

    def stall_file(self, group: str) -> Path:
        """Holds the deadline (epoch seconds) until which ``group`` does not commit."""
        return self.workload / f"stall-{group}"

    # --- broker hosts -----------------------------------------------------------------------
    @property
    def hosts(self) -> Path:
        return self.root / "hosts"

    def host(self, node_id: int) -> HostDir:
        return HostDir(self.hosts / str(node_id))


@dataclass(frozen=True)
class HostDir:
    """One host directory ``DIR/hosts/<id>/`` (a broker's, or a KRaft controller's)."""

    path: Path

    @property
    def broker_id(self) -> int:
        return int(self.path.name)

    @property
    def server_properties(self) -> Path:
        return self.path / "server.properties"

    @property
    def kafka_link(self) -> Path:
        return self.path / "kafka"

    def install_dir(self, kafka_version: str) -> Path:
        return self.path / f"kafka_{settings.SCALA_VERSION}-{kafka_version}"

    @property
    def data(self) -> Path:
        return self.path / "data"

    @property
    def logs(self) -> Path:
        return self.path / "logs"

    @property
    def server_log(self) -> Path:
        return self.logs / "server.log"

    @property
    def kafka_pid(self) -> Path:
        """The running Kafka JVM's pid (written by ``kafka-service start``)."""
        return self.path / "kafka.pid"

    @property
    def sshd(self) -> Path:
        return self.path / "sshd"

    @property
    def sshd_config(self) -> Path:
        return self.sshd / "sshd_config"

    @property
    def sshd_pid(self) -> Path:
        return self.sshd / "sshd.pid"

    @property
    def sshd_log(self) -> Path:
        return self.sshd / "sshd.log"

    @property
    def home(self) -> Path:
        """The SSH user's home on this host (``HOME`` of its SSH sessions; empty: no shell startup files)."""
        return self.path / "home"
