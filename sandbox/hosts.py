"""Host directories: ``DIR/hosts/<id>/`` with server.properties and a real Kafka release.

A host is what an operator finds on a broker (or KRaft controller) machine: ``server.properties``, the
unpacked release ``kafka_2.13-<version>/`` with a ``kafka`` symlink to it (an upgrade unpacks another release
beside it and re-points the link), ``data/`` (log.dirs) and ``logs/``. A release on a host has its own
``bin/`` and ``config/`` (copied from the assembled release, :mod:`sandbox.kafka_release`) and its ``libs/``
is a symlink to the assembled release's jars (about 55 MB each, shared by every host).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from sandbox import kafka_config, kafka_release, settings
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
    """Unpack Kafka ``kafka_version`` as ``kafka_2.13-<version>/`` beside the running one (``bin/``, ``config/``,
    ``libs/``), as an operator's configuration management unpacks a release before an upgrade; the ``kafka``
    symlink is left alone. Returns the directory.

    Raises:
        kafka_release.ReleaseError: the release is not pinned or not assembled.
    """
    source = kafka_release.release_dir(kafka_version)
    install = host.install_dir(kafka_version)
    install.mkdir(parents=True, exist_ok=True)
    for sub in ("bin", "config"):
        shutil.rmtree(install / sub, ignore_errors=True)
        shutil.copytree(source / sub, install / sub, symlinks=True)
    libs = install / "libs"
    if libs.is_symlink() or libs.exists():
        libs.unlink() if libs.is_symlink() else shutil.rmtree(libs)
    libs.symlink_to(source / "libs")
    return install


def unpack_everywhere(workdir: Workdir, kafka_version: str) -> list[Path]:
    """:func:`unpack_kafka` on every host of the sandbox in ``workdir`` (brokers, spare hosts, KRaft
    controllers), as configuration management stages a release before an upgrade (``python -m sandbox unpack``).
    Returns the directories, by node id.

    Raises:
        kafka_release.ReleaseError: the release is not pinned or not assembled (``make install``).
        FileNotFoundError: the workdir has no hosts (no sandbox was started there).
    """
    kafka_release.release_dir(kafka_version)  # a wrong version is named before the hosts are looked at
    ids = sorted(int(h.name) for h in workdir.hosts.glob("*") if h.name.isdigit()) if workdir.hosts.is_dir() else []
    if not ids:
        raise FileNotFoundError(f"no hosts under {workdir.hosts}: start the sandbox first (python -m sandbox up)")
    return [unpack_kafka(workdir.host(node_id), kafka_version) for node_id in ids]


def install_kafka(host: HostDir, kafka_version: str) -> None:
    """:func:`unpack_kafka` and point the ``kafka`` symlink at it (relative link, replacing an existing one)."""
    install = unpack_kafka(host, kafka_version)
    link = host.kafka_link
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(install.name)


def _make_dirs(host: HostDir) -> None:
    for path in (host.path, host.data, host.logs, host.sshd):
        path.mkdir(parents=True, exist_ok=True)


def prepare(workdir: Workdir, spec: BrokerSpec, zookeeper_connect: str, kafka_version: str, *, brokers: int,
            quorum: dict[str, str] | None = None, extra: dict[str, str] | None = None,
            combined: bool = False, client: kafka_config.ClientListener | None = None) -> HostDir:
    """Create broker host ``spec.id``'s directory: server.properties, the release, data/ and logs/.
    ``quorum`` set (the quorum keys, ``SandboxState.quorum_config``) = a KRaft broker (``process.roles=broker``, no
    ZooKeeper; ``combined``: a controller
    too, ``process.roles=broker,controller``); ``brokers`` = the cluster's size (caps the internal topics'
    replication factors); ``extra``: settings added last; ``client``: a second listener for clients
    (``kafka_config.client_listener``)."""
    host = workdir.host(spec.id)
    _make_dirs(host)
    install_kafka(host, kafka_version)
    if quorum:
        text = kafka_config.kraft_node(node_id=spec.id, role="broker,controller" if combined else "broker",
                                       rack=spec.rack, host=spec.host,
                                       quorum=quorum, log_dir=host.data, brokers=brokers, extra=extra,
                                       client=client)
    else:
        text = kafka_config.zookeeper_broker(broker_id=spec.id, rack=spec.rack, host=spec.host,
                                             zookeeper_connect=zookeeper_connect, log_dir=host.data,
                                             kafka_version=kafka_version, brokers=brokers, extra=extra,
                                             client=client)
    host.server_properties.write_text(text)
    return host


def controller_specs(controllers: int, address_base: str) -> list[BrokerSpec]:
    """KRaft controllers: node ids ``settings.CONTROLLER_ID_BASE`` + 0..N-1, each on its own host address."""
    return [BrokerSpec(id=settings.CONTROLLER_ID_BASE + i, host=address(settings.CONTROLLER_ID_BASE + i, address_base),
                       rack="", spare=False) for i in range(controllers)]


def prepare_controller(workdir: Workdir, spec: BrokerSpec, kafka_version: str, quorum: dict[str, str],
                       brokers: int, extra: dict[str, str] | None = None) -> HostDir:
    """Create a KRaft controller host: server.properties (``process.roles=controller``; ``quorum``: the quorum keys,
    ``SandboxState.quorum_config``; ``extra``: the brokers' ``up --broker-config``, of which a controller takes
    ``min.insync.replicas``), the release, data/
    and logs/ (its storage is formatted by ``kafka-storage format`` before the first start)."""
    host = workdir.host(spec.id)
    _make_dirs(host)
    install_kafka(host, kafka_version)
    host.server_properties.write_text(kafka_config.kraft_node(
        node_id=spec.id, role="controller", rack=None, host=spec.host, quorum=quorum,
        log_dir=host.data, brokers=brokers, extra=extra))
    return host


def prepare_bare(workdir: Workdir, spec: BrokerSpec, kafka_version: str) -> HostDir:
    """Create a host for a KRaft controller that a ZooKeeper-to-KRaft migration provisions: the release,
    empty data/ and logs/, no ``server.properties`` (the migration writes it and formats the storage)."""
    host = workdir.host(spec.id)
    _make_dirs(host)
    install_kafka(host, kafka_version)
    return host


def default_address_base() -> str:
    return settings.BROKER_HOST_BASE
