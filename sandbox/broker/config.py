"""A sandbox broker's configuration: its host directory and the ``server.properties`` in it.

The broker reads the same keys as Kafka's ``server.properties`` (names are Kafka's config names)
plus the installed software version, which is the name of the directory the ``kafka`` symlink in
the host directory points to (``kafka -> kafka_2.13-3.6.2``), as on a real host where an upgrade
unpacks a new distribution and re-points the symlink.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import javaproperties

from sandbox import settings

VERSION_DIR_RE = re.compile(r"^kafka_(?P<scala>\d+\.\d+)-(?P<version>\d+\.\d+\.\d+)$")


class BrokerConfigError(ValueError):
    """The host directory or server.properties cannot run a broker (the message says why)."""


def parse_version(text: str) -> tuple[int, ...]:
    """Parse a Kafka version or IBP string ("3.6", "3.6.2", "3.6-IV2") into a comparable tuple.

    Raises:
        BrokerConfigError: when the text is not a version.
    """
    match = re.match(r"^(\d+)\.(\d+)(?:\.(\d+))?(?:-IV\d+)?$", text.strip())
    if not match:
        raise BrokerConfigError(f"not a Kafka version: {text!r}")
    return tuple(int(part) for part in match.groups() if part is not None)


def installed_version(host_dir: Path) -> str:
    """The Kafka version installed in ``host_dir``: read from the ``kafka`` symlink's target name.

    Raises:
        BrokerConfigError: when the symlink is missing or does not name ``kafka_<scala>-<x.y.z>``.
    """
    link = host_dir / "kafka"
    if not link.exists():
        raise BrokerConfigError(f"{link} is missing: no Kafka installation on this host")
    match = VERSION_DIR_RE.match(link.resolve().name)
    if not match:
        raise BrokerConfigError(f"{link} -> {link.resolve().name}: not a kafka_<scala>-<version> directory")
    return match.group("version")


@dataclass(frozen=True)
class BrokerConfig:
    """What a sandbox broker process needs to run; built by :meth:`load`.

    Times are in seconds (converted from Kafka's ``*.ms`` keys), sizes in bytes.
    """

    host_dir: Path
    broker_id: int
    rack: str | None
    host: str
    port: int
    zookeeper_connect: str
    log_dir: Path
    version: str
    inter_broker_protocol_version: str
    log_message_format_version: str
    properties: dict[str, str]
    process_roles: tuple[str, ...] = ()  # KRaft: ("broker",) or ("controller",); () in ZooKeeper mode
    quorum_voters: dict[int, str] | None = None  # KRaft: controller.quorum.voters as node id -> host

    @property
    def kraft(self) -> bool:
        """True for a KRaft-mode node (``process.roles`` set), False for a ZooKeeper-mode broker."""
        return bool(self.process_roles)

    @property
    def is_controller(self) -> bool:
        return "controller" in self.process_roles

    @property
    def broker_session_timeout_s(self) -> float:
        """``broker.session.timeout.ms`` (Kafka default 9000): a KRaft broker not heard from this long is fenced."""
        return int(self.properties.get("broker.session.timeout.ms", "9000")) / 1000.0

    @property
    def zk_session_timeout_s(self) -> float:
        return int(self.properties.get("zookeeper.session.timeout.ms", "18000")) / 1000.0

    @property
    def replica_lag_time_max_s(self) -> float:
        return int(self.properties.get("replica.lag.time.max.ms", "30000")) / 1000.0

    @property
    def auto_leader_rebalance(self) -> bool:
        return self.properties.get("auto.leader.rebalance.enable", "true").lower() == "true"

    @property
    def leader_imbalance_check_interval_s(self) -> float:
        return float(self.properties.get("leader.imbalance.check.interval.seconds", "300"))

    @property
    def leader_imbalance_per_broker_percentage(self) -> int:
        return int(self.properties.get("leader.imbalance.per.broker.percentage", "10"))

    @classmethod
    def load(cls, host_dir: Path) -> BrokerConfig:
        """Read ``host_dir/server.properties`` and the installed version.

        Raises:
            BrokerConfigError: missing file or key, a malformed listener or version, or an
                ``inter.broker.protocol.version`` newer than the installed software (Kafka refuses
                to start then: "inter.broker.protocol.version ... must be <= the current version").
        """
        path = host_dir / "server.properties"
        if not path.exists():
            raise BrokerConfigError(f"{path} is missing")
        with path.open(encoding="utf-8") as handle:
            props = dict(javaproperties.load(handle))
        roles = tuple(r.strip() for r in props.get("process.roles", "").split(",") if r.strip())
        if roles and (len(roles) != 1 or roles[0] not in ("broker", "controller")):
            raise BrokerConfigError(f"{path}: process.roles={props['process.roles']!r}: the sandbox runs dedicated "
                                    "brokers or controllers (broker | controller), not combined nodes")
        required = ("node.id", "listeners", "controller.quorum.voters", "log.dirs") if roles else (
            "broker.id", "listeners", "zookeeper.connect", "log.dirs")
        for key in required:
            if key not in props:
                raise BrokerConfigError(f"{path}: required key {key} is missing")
        listener = re.match(r"^(?:PLAINTEXT|CONTROLLER)://([^:]+):(\d+)$", props["listeners"].split(",")[0].strip())
        if not listener:
            raise BrokerConfigError(f"{path}: listeners={props['listeners']!r} is not PLAINTEXT://host:port")
        version = installed_version(host_dir)
        voters = parse_quorum_voters(props["controller.quorum.voters"], path) if roles else None
        if roles and parse_version(version)[:2] < (3, 3):
            raise BrokerConfigError(f"Kafka {version} has no production KRaft mode (3.3 is the first)")
        ibp = props.get("inter.broker.protocol.version", version)
        lmf = props.get("log.message.format.version", ibp)
        if parse_version(ibp)[:2] > parse_version(version)[:2]:
            raise BrokerConfigError(
                f"inter.broker.protocol.version {ibp} is newer than the installed Kafka {version}: "
                "a broker cannot speak a protocol version its software does not know"
            )
        if parse_version(lmf)[:2] > parse_version(ibp)[:2]:
            raise BrokerConfigError(
                f"log.message.format.version {lmf} cannot be newer than inter.broker.protocol.version {ibp}"
            )
        return cls(
            host_dir=host_dir,
            broker_id=int(props["node.id"] if roles else props["broker.id"]),
            rack=props.get("broker.rack") or None,
            host=listener.group(1),
            port=int(listener.group(2)),
            zookeeper_connect=props.get("zookeeper.connect", ""),
            log_dir=Path(props["log.dirs"].split(",")[0]),
            version=version,
            inter_broker_protocol_version=ibp,
            log_message_format_version=lmf,
            properties=props,
            process_roles=roles,
            quorum_voters=voters,
        )


def parse_quorum_voters(text: str, path: Path | str = "server.properties") -> dict[int, str]:
    """``controller.quorum.voters`` (``"100@host:9093,101@host:9093"``) as ``{node id: host}``.

    Raises:
        BrokerConfigError: an entry that is not ``id@host:port``.
    """
    voters: dict[int, str] = {}
    for entry in filter(None, (e.strip() for e in text.split(","))):
        match = re.match(r"^(\d+)@([^:]+):(\d+)$", entry)
        if not match:
            raise BrokerConfigError(f"{path}: controller.quorum.voters entry {entry!r} is not id@host:port")
        voters[int(match.group(1))] = match.group(2)
    if not voters:
        raise BrokerConfigError(f"{path}: controller.quorum.voters is empty")
    return voters


def _broker_settings() -> dict[str, str]:
    """The broker settings both modes share (Kafka key names; timings from :mod:`sandbox.settings`)."""
    return {
        "min.insync.replicas": str(settings.MIN_INSYNC_REPLICAS),
        "default.replication.factor": "3",
        "num.partitions": "3",
        "offsets.topic.replication.factor": str(settings.CONSUMER_OFFSETS_RF),
        "offsets.topic.num.partitions": str(settings.CONSUMER_OFFSETS_PARTITIONS),
        "group.initial.rebalance.delay.ms": str(int(settings.GROUP_INITIAL_REBALANCE_DELAY_S * 1000)),
        "replica.lag.time.max.ms": str(int(settings.REPLICA_LAG_TIME_MAX_S * 1000)),
        "auto.leader.rebalance.enable": str(settings.AUTO_LEADER_REBALANCE_ENABLE).lower(),
        "leader.imbalance.per.broker.percentage": str(settings.LEADER_IMBALANCE_PER_BROKER_PERCENTAGE),
        "leader.imbalance.check.interval.seconds": str(settings.LEADER_IMBALANCE_CHECK_INTERVAL_S),
        "controlled.shutdown.enable": "true",
        "unclean.leader.election.enable": "false",
    }


def render_server_properties(
    *,
    broker_id: int,
    rack: str | None,
    host: str,
    zookeeper_connect: str,
    log_dir: Path,
    kafka_version: str,
) -> str:
    """The ``server.properties`` text `sandbox up` writes for a broker host (Kafka key names).

    IBP and log.message.format.version are pinned to the installed major.minor, as an operator
    does before an upgrade; all timings come from :mod:`sandbox.settings`.
    """
    major_minor = ".".join(kafka_version.split(".")[:2])
    props = {
        "broker.id": str(broker_id),
        "listeners": f"PLAINTEXT://{host}:{settings.BROKER_PORT}",
        "advertised.listeners": f"PLAINTEXT://{host}:{settings.BROKER_PORT}",
        "zookeeper.connect": zookeeper_connect,
        "zookeeper.session.timeout.ms": str(int(settings.ZK_SESSION_TIMEOUT_S * 1000)),
        "log.dirs": str(log_dir),
        "inter.broker.protocol.version": major_minor,
        "log.message.format.version": major_minor,
        **_broker_settings(),
    }
    if rack:
        props["broker.rack"] = rack
    return javaproperties.dumps(props, timestamp=False, sort_keys=False)


def render_kraft_properties(
    *,
    node_id: int,
    role: str,
    rack: str | None,
    host: str,
    quorum_voters: str,
    log_dir: Path,
) -> str:
    """The ``server.properties`` of a KRaft-mode node (``role`` ``broker`` or ``controller``): Kafka's key
    names, no ZooKeeper, no IBP (``metadata.version`` replaces it), timings from :mod:`sandbox.settings`."""
    props = {
        "process.roles": role,
        "node.id": str(node_id),
        "controller.quorum.voters": quorum_voters,
        "controller.listener.names": "CONTROLLER",
        "log.dirs": str(log_dir),
    }
    if role == "controller":
        props["listeners"] = f"CONTROLLER://{host}:{settings.REPLICATION_PORT}"
    else:
        props.update({
            "listeners": f"PLAINTEXT://{host}:{settings.BROKER_PORT}",
            "advertised.listeners": f"PLAINTEXT://{host}:{settings.BROKER_PORT}",
            "broker.session.timeout.ms": str(int(settings.BROKER_SESSION_TIMEOUT_S * 1000)),
            **_broker_settings(),
        })
        if rack:
            props["broker.rack"] = rack
    return javaproperties.dumps(props, timestamp=False, sort_keys=False)
