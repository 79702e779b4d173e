"""``DIR/sandbox.json``: what `up` decided (options, ports, broker hosts), read by every other command.

It is written as soon as the ports are chosen, before anything starts, so `down` can clean up
after a failed `up`. Its presence alone does not mean the sandbox runs: see :func:`running_processes`.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from sandbox import kafka_config, procs, settings
from sandbox import tls as tls_mod
from sandbox.hosts import BrokerSpec
from sandbox.layout import Workdir


class NotASandbox(RuntimeError):
    """The workdir holds no sandbox (no ``sandbox.json``)."""


@dataclass
class SandboxState:
    """The sandbox of one workdir. Ports are TCP ports on 127.0.0.1; ``brokers`` includes spares."""

    workdir: str
    brokers: int
    spare_brokers: int
    racks: int
    kafka_version: str
    address_base: str
    zookeeper_port: int
    burrow_port: int
    owner_pid: int = field(default_factory=os.getpid)
    hosts: list[dict] = field(default_factory=list)
    mode: str = "zookeeper"  # "zookeeper" (Kafka's ZooKeeper mode) or "kraft"
    controller_hosts: list[dict] = field(default_factory=list)  # KRaft: {"id", "host"} per controller
    cluster_id: str = ""  # KRaft: the id the storage was formatted with; ZooKeeper mode: `up --cluster-id`'s, or ""
    broker_config: dict[str, str] = field(default_factory=dict)  # `up --broker-config`: every broker's file
    combined: int = 0  # KRaft: the first N brokers are controllers too (process.roles=broker,controller)
    quorum: str = "static"  # KRaft: "static" (controller.quorum.voters) or "dynamic" (KIP-853, bootstrap servers)
    directory_ids: dict[str, str] = field(default_factory=dict)  # dynamic quorum: voter id -> its directory id
    observer_controllers: int = 0  # dynamic quorum: the last N controllers are not voters (KIP-853 observers)
    sasl_password: str = ""  # `up --client-sasl`: settings.SASL_USER's password on the client listener ("" = none)
    tls_password: str = ""  # `up --client-tls`: the client listener's keystore password (`tls_dir`; "" = no TLS)
    sasl_mechanism: str = settings.SASL_MECHANISM  # `up --sasl-mechanism`: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
    client_auth: bool = False  # `up --client-auth`: the TLS client listener requires a client certificate

    @property
    def kraft(self) -> bool:
        return self.mode == "kraft"

    @property
    def controllers(self) -> dict[int, str]:
        """KRaft: every controller's node id -> host: the dedicated controllers (voters and
        :attr:`observer_controllers`), or with :attr:`combined` the first brokers; in ZooKeeper mode the hosts a
        migration provisions."""
        if self.combined:
            return {s.id: s.host for s in self.active_specs[:self.combined]}
        return {int(c["id"]): c["host"] for c in self.controller_hosts}

    @property
    def voters(self) -> dict[int, str]:
        """KRaft: the quorum's voters, node id -> host (``controller.quorum.voters``, or a dynamic quorum's initial
        controllers): :attr:`controllers` but the last :attr:`observer_controllers`; empty in ZooKeeper mode."""
        ids = sorted(self.controllers)
        kept = ids[:len(ids) - self.observer_controllers] if self.observer_controllers else ids
        return {i: self.controllers[i] for i in kept}

    @property
    def quorum_config(self) -> dict[str, str]:
        """The quorum keys of every KRaft node's ``server.properties`` (``kafka_config.static_quorum`` or
        ``dynamic_quorum`` of :attr:`voters`, by :attr:`quorum`)."""
        if self.quorum == "dynamic":
            return kafka_config.dynamic_quorum(self.voters)
        return kafka_config.static_quorum(self.voters)

    @property
    def initial_controllers(self) -> str | None:
        """A dynamic quorum's ``kafka-storage format --initial-controllers`` text (:attr:`directory_ids` by voter);
        None for a static quorum."""
        if self.quorum != "dynamic":
            return None
        return kafka_config.initial_controllers(self.voters, {int(k): v for k, v in self.directory_ids.items()})

    @property
    def zookeeper_connect(self) -> str:
        return f"127.0.0.1:{self.zookeeper_port}"

    @property
    def burrow_url(self) -> str:
        return f"http://127.0.0.1:{self.burrow_port}"

    @property
    def broker_specs(self) -> list[BrokerSpec]:
        return [BrokerSpec(**h) for h in self.hosts]

    @property
    def active_specs(self) -> list[BrokerSpec]:
        """The brokers started by `up` (not the spares)."""
        return [s for s in self.broker_specs if not s.spare]

    @property
    def bootstrap_servers(self) -> str:
        """The brokers' PLAINTEXT listener (the sandbox's own tools, Burrow, the tests' observers)."""
        return ",".join(f"{s.host}:{settings.BROKER_PORT}" for s in self.active_specs)

    @property
    def client_listener(self) -> kafka_config.ClientListener:
        """The brokers' second listener for clients (``--client-sasl`` / ``--client-tls``; its protocol "" = none)."""
        tls = self.tls_password != ""
        return kafka_config.ClientListener(
            sasl_password=self.sasl_password, sasl_mechanism=self.sasl_mechanism,
            keystore=str(self.tls_dir / tls_mod.KEYSTORE_FILE) if tls else "", keystore_password=self.tls_password,
            truststore=str(self.tls_dir / tls_mod.CA_FILE) if tls and self.client_auth else "")

    @property
    def tls_dir(self) -> Path:
        """Where ``--client-tls`` keeps the CA certificate and the brokers' keystore (``sandbox.tls``)."""
        return Path(self.workdir) / "tls"

    @property
    def client_ssl_config(self) -> dict[str, str]:
        """librdkafka's TLS settings for the client listener: the sandbox's CA (``ssl.ca.location``) and, with
        ``--client-auth``, the client key pair (``ssl.certificate.location``, ``ssl.key.location``); {} without
        ``--client-tls``."""
        if not self.tls_password:
            return {}
        conf = {"ssl.ca.location": str(self.tls_dir / tls_mod.CA_FILE)}
        if self.client_auth:
            conf["ssl.certificate.location"] = str(self.tls_dir / tls_mod.CLIENT_CERT_FILE)
            conf["ssl.key.location"] = str(self.tls_dir / tls_mod.CLIENT_KEY_FILE)
        return conf

    @property
    def client_bootstrap_servers(self) -> str:
        """What the Airflow connection names: the client listener with ``--client-sasl`` / ``--client-tls``, else
        the PLAINTEXT one."""
        port = settings.BROKER_CLIENT_PORT if self.client_listener.protocol else settings.BROKER_PORT
        return ",".join(f"{s.host}:{port}" for s in self.active_specs)

    def options(self) -> dict[str, object]:
        """The `up` options this sandbox was started with (compared by an `up` on a running workdir)."""
        return {
            "brokers": self.brokers,
            "spare_brokers": self.spare_brokers,
            "racks": self.racks,
            "kafka_version": self.kafka_version,
            "address_base": self.address_base,
            "mode": self.mode,
            "controllers": len(self.controller_hosts) - self.observer_controllers,
            "observer_controllers": self.observer_controllers,
            "combined": self.combined,
            "quorum": self.quorum,
            "broker_config": dict(self.broker_config),
            "client_sasl": bool(self.sasl_password),
            "sasl_mechanism": self.sasl_mechanism if self.sasl_password else "",
            "client_tls": bool(self.tls_password),
            "client_auth": self.client_auth,
        }


def save(workdir: Workdir, info: SandboxState) -> None:
    workdir.root.mkdir(parents=True, exist_ok=True)
    tmp = workdir.state_json.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(info), indent=2) + "\n")
    tmp.replace(workdir.state_json)


def load(workdir: Workdir) -> SandboxState:
    """Read ``DIR/sandbox.json``.

    Raises:
        NotASandbox: the file is missing or unreadable.
    """
    try:
        data = json.loads(workdir.state_json.read_text())
    except FileNotFoundError:
        raise NotASandbox(
            f"no sandbox in {workdir.root} (no sandbox.json): run `python -m sandbox up`"
        ) from None
    except ValueError as exc:
        raise NotASandbox(f"{workdir.state_json} is not valid JSON: {exc}") from None
    return SandboxState(**data)


def running_processes(workdir: Workdir) -> dict[str, int]:
    """``{name: pid}`` of the sandbox's processes that run now, from their pid files
    (``zookeeper``, ``burrow``, ``workload``, ``sshd-<id>``, ``kafka-<id>``: a broker's or a KRaft controller's
    JVM)."""
    found: dict[str, int] = {}
    for name, pid_file, marker in [
        ("zookeeper", workdir.zookeeper_pid, str(workdir.zookeeper)),
        ("burrow", workdir.burrow_pid, str(workdir.burrow)),
        ("workload", workdir.workload_pid, "sandbox.workload"),
    ]:
        pid = procs.alive_from_pid_file(pid_file, must_contain=marker)
        if pid:
            found[name] = pid
    if workdir.hosts.is_dir():
        for host_path in sorted(workdir.hosts.iterdir()):
            if not host_path.name.isdigit():
                continue
            host = workdir.host(int(host_path.name))
            pid = procs.alive_from_pid_file(host.sshd_pid, must_contain=str(host.sshd_config))
            if pid:
                found[f"sshd-{host.broker_id}"] = pid
            pid = procs.alive_from_pid_file(host.kafka_pid, must_contain=str(host.path))
            if pid:
                found[f"kafka-{host.broker_id}"] = pid
    return found
