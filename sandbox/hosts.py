"""Broker host directories: ``DIR/hosts/<id>/`` with server.properties and a fake Kafka installation.

A host is what an operator would find on a real broker machine: ``server.properties``, the installed
distribution ``kafka_2.13-<version>/`` with a ``kafka`` symlink to it (an upgrade unpacks another
version and re-points the link), ``data/`` (log.dirs) and ``logs/``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from sandbox import settings
from sandbox.broker.config import render_kraft_properties, render_server_properties
from sandbox.layout import HostDir, Workdir


@dataclass(frozen=True)
class BrokerSpec:
    """Where broker ``id`` lives: its address (``settings.BROKER_PORT``, ``settings.SSH_PORT``) and rack."""

    id: int
    host: str
    rack: str
    spare: bool


def address(broker_id: int, address_base: str) -> str:
    """Loopback address of broker ``broker_id``: ``address_base`` + id in the last octet
    (the default base 127.0.0.11 gives :func:`sandbox.settings.broker_host`).

    Raises:
        ValueError: the last octet would pass 254.
    """
    prefix, last = address_base.rsplit(".", 1)
    octet = int(last) + broker_id
    if octet > 254:
        raise ValueError(f"broker id {broker_id} does not fit after address base {address_base}")
    return f"{prefix}.{octet}"


def rack(broker_id: int, racks: int) -> str:
    """The rack of broker ``broker_id`` when the sandbox has ``racks`` racks: ``rack-(id % racks)``."""
    return f"rack-{broker_id % racks}"


def specs(brokers: int, spares: int, racks: int, address_base: str) -> list[BrokerSpec]:
    """The brokers (ids 0..brokers-1) and spare hosts (ids brokers..brokers+spares-1)."""
    return [
        BrokerSpec(id=i, host=address(i, address_base), rack=rack(i, racks), spare=i >= brokers)
        for i in range(brokers + spares)
    ]


def unpack_kafka(host: HostDir, kafka_version: str) -> Path:
    """Create the fake distribution ``kafka_2.13-<version>/`` (with bin/, libs/, config/, VERSION) beside the
    running one, as an operator's configuration management unpacks a release before an upgrade; the
    ``kafka`` symlink is left alone. Returns the directory."""
    install = host.install_dir(kafka_version)
    for sub in ("bin", "libs", "config"):
        (install / sub).mkdir(parents=True, exist_ok=True)
    (install / "VERSION").write_text(f"{kafka_version}\n")
    return install


def install_kafka(host: HostDir, kafka_version: str) -> None:
    """:func:`unpack_kafka` and point the ``kafka`` symlink at it (relative link, replacing an existing one)."""
    install = unpack_kafka(host, kafka_version)
    link = host.kafka_link
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(install.name)


def prepare(workdir: Workdir, spec: BrokerSpec, zookeeper_connect: str, kafka_version: str,
            quorum_voters: str | None = None) -> HostDir:
    """Create host ``spec.id``'s directory: server.properties, installation, data/ and logs/.
    ``quorum_voters`` set = a KRaft-mode broker (``process.roles=broker``, no ZooKeeper)."""
    host = workdir.host(spec.id)
    for path in (host.path, host.data, host.logs, host.sshd):
        path.mkdir(parents=True, exist_ok=True)
    install_kafka(host, kafka_version)
    if quorum_voters:
        text = render_kraft_properties(node_id=spec.id, role="broker", rack=spec.rack, host=spec.host,
                                       quorum_voters=quorum_voters, log_dir=host.data)
    else:
        text = render_server_properties(broker_id=spec.id, rack=spec.rack, host=spec.host,
                                        zookeeper_connect=zookeeper_connect, log_dir=host.data,
                                        kafka_version=kafka_version)
    host.server_properties.write_text(text)
    return host


def controller_specs(controllers: int, address_base: str) -> list[BrokerSpec]:
    """KRaft controllers: node ids ``settings.CONTROLLER_ID_BASE`` + 0..N-1, each on its own host address."""
    return [BrokerSpec(id=settings.CONTROLLER_ID_BASE + i, host=address(settings.CONTROLLER_ID_BASE + i, address_base),
                       rack="", spare=False) for i in range(controllers)]


def prepare_controller(workdir: Workdir, spec: BrokerSpec, kafka_version: str, quorum_voters: str,
                       metadata_version: int) -> HostDir:
    """Create a controller host: server.properties (``process.roles=controller``), installation, and the
    formatted log dir (``kafka-storage format``: ``bootstrap.json`` holds the initial metadata.version)."""
    host = workdir.host(spec.id)
    for path in (host.path, host.data, host.logs, host.sshd):
        path.mkdir(parents=True, exist_ok=True)
    install_kafka(host, kafka_version)
    host.server_properties.write_text(render_kraft_properties(
        node_id=spec.id, role="controller", rack=None, host=spec.host, quorum_voters=quorum_voters,
        log_dir=host.data))
    (host.data / "bootstrap.json").write_text(json.dumps({"metadata.version": metadata_version}) + "\n")
    return host


def default_address_base() -> str:
    return settings.BROKER_HOST_BASE
