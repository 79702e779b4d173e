"""The ``server.properties`` `sandbox up` writes on each host: Kafka's own configuration keys and values.

Three kinds of node (Kafka's docs, "Broker Configs" and "KRaft"):

- a ZooKeeper-mode broker (Kafka 3.x): ``broker.id``, ``zookeeper.connect``, and the
  ``inter.broker.protocol.version`` / ``log.message.format.version`` pinned to the installed major.minor, as
  an operator pins them before an upgrade;
- a KRaft broker (``process.roles=broker``) and a KRaft controller (``process.roles=controller``):
  ``node.id``, the ``CONTROLLER`` listener name and the quorum: a static voter set ``controller.quorum.voters``
  (KIP-595), or a dynamic quorum's ``controller.quorum.bootstrap.servers`` (KIP-853, Kafka 3.9+: the voter set
  lives in the metadata log, written when the controllers' storage is formatted with ``--initial-controllers``);
  ``metadata.version`` replaces the IBP and lives in the metadata log (set when the storage is formatted).

Sandbox-only values come from :mod:`sandbox.settings`. The files are written with ``javaproperties`` (the
format Kafka's ``Utils.loadProps`` reads).
"""

from __future__ import annotations

import base64
import os
import re
from dataclasses import dataclass
from pathlib import Path

import javaproperties

from sandbox import settings

#: The static voter set's key (KIP-595).
VOTERS_KEY = "controller.quorum.voters"
#: A dynamic quorum's key (KIP-853): where a node first finds the quorum.
BOOTSTRAP_KEY = "controller.quorum.bootstrap.servers"
#: The brokers' key that a controller's file carries too (ELR copies it to the cluster level, KIP-966).
MIN_INSYNC = "min.insync.replicas"


def _dumps(props: dict[str, str]) -> str:
    return javaproperties.dumps(props, timestamp=False, sort_keys=False)


@dataclass(frozen=True)
class ClientListener:
    """The brokers' second listener for clients (``up --client-sasl`` / ``--client-tls``): SASL with one user,
    ``settings.SASL_USER`` with ``sasl_password``, by ``sasl_mechanism`` (PLAIN, KIP-43; SCRAM-SHA-256/512,
    KIP-84), and/or TLS with the PKCS12 ``keystore`` (its password ``keystore_password``; ``sandbox.tls``) and, with a
    ``truststore`` (a PEM file of the CA), a client certificate required (mutual TLS). Empty fields: that part is
    off."""

    sasl_password: str = ""
    sasl_mechanism: str = settings.SASL_MECHANISM
    keystore: str = ""
    keystore_password: str = ""
    truststore: str = ""  # `up --client-auth`: the CA (PEM) the listener checks client certificates against

    @property
    def protocol(self) -> str:
        """Kafka's security protocol (and the listener's name): ``SASL_SSL``, ``SSL``, ``SASL_PLAINTEXT``, or ""."""
        if self.keystore:
            return "SASL_SSL" if self.sasl_password else "SSL"
        return "SASL_PLAINTEXT" if self.sasl_password else ""


def client_listener(props: dict[str, str], host: str, client: ClientListener | None) -> dict[str, str]:
    """``props`` (a broker's) with a second listener for clients on ``settings.BROKER_CLIENT_PORT``, named after its
    protocol: SASL with one mechanism, PLAIN with one user (Kafka's ``PlainLoginModule``, the password in the
    listener's own ``sasl.jaas.config``) or SCRAM (``ScramLoginModule``: the listener knows no password, Kafka
    checks the salted credential kept in its metadata, which ``sandbox.scram`` creates), TLS with the keystore;
    each setting under KIP-103's ``listener.name.<listener>.`` prefix, so replication stays on the PLAINTEXT
    listener. ``client`` None or empty: ``props`` unchanged.

    Raises:
        ValueError: a mechanism other than ``settings.SASL_MECHANISMS``; a truststore without a keystore (client
            certificates need TLS).
    """
    name = client.protocol if client else ""
    if client and client.truststore and not client.keystore:
        raise ValueError("a client certificate (truststore) needs the TLS listener (keystore)")
    if not name:
        return props
    listener = f"{name}://{host}:{settings.BROKER_CLIENT_PORT}"
    prefix = f"listener.name.{name.lower()}."
    out = dict(props)
    out["listeners"] = f"{props['listeners']},{listener}"
    out["advertised.listeners"] = f"{props['advertised.listeners']},{listener}"
    if "listener.security.protocol.map" in props:  # KRaft: set explicitly (ZooKeeper mode: Kafka's default has it)
        out["listener.security.protocol.map"] = f"{props['listener.security.protocol.map']},{name}:{name}"
    if client.sasl_password:
        mechanism = client.sasl_mechanism
        if mechanism not in settings.SASL_MECHANISMS:
            raise ValueError(f"SASL mechanism {mechanism!r}: must be one of {list(settings.SASL_MECHANISMS)}")
        out[prefix + "sasl.enabled.mechanisms"] = mechanism
        if mechanism == "PLAIN":
            out[prefix + "plain.sasl.jaas.config"] = (
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'user_{settings.SASL_USER}="{client.sasl_password}";')
        else:
            out[prefix + f"{mechanism.lower()}.sasl.jaas.config"] = (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;")
    if client.keystore:
        out.update({prefix + "ssl.keystore.type": "PKCS12", prefix + "ssl.keystore.location": client.keystore,
                    prefix + "ssl.keystore.password": client.keystore_password,
                    prefix + "ssl.key.password": client.keystore_password})
        if client.truststore:  # mutual TLS: ssl.client.auth, the CA as a PEM truststore (KIP-651, Kafka 2.7)
            out.update({prefix + "ssl.client.auth": "required", prefix + "ssl.truststore.type": "PEM",
                        prefix + "ssl.truststore.location": client.truststore})
    return out


def _capped(brokers: int) -> dict[str, str]:
    """Replication factors of Kafka's internal topics, capped at the cluster size (a 1-broker sandbox works)."""
    rf = min(settings.CONSUMER_OFFSETS_RF, brokers)
    return {
        "offsets.topic.replication.factor": str(rf),
        "transaction.state.log.replication.factor": str(rf),
        "transaction.state.log.min.isr": str(min(2, rf)),
        "min.insync.replicas": str(min(settings.MIN_INSYNC_REPLICAS, max(1, brokers))),
    }


def zookeeper_broker(*, broker_id: int, rack: str | None, host: str, zookeeper_connect: str, log_dir: Path,
                     kafka_version: str, brokers: int, extra: dict[str, str] | None = None,
                     client: ClientListener | None = None) -> str:
    """A ZooKeeper-mode broker's ``server.properties``; ``brokers`` = the cluster's size (caps internal RFs);
    ``extra``: settings of the caller's (``up --broker-config``), last: they win; ``client``: a second listener
    for clients (:func:`client_listener`)."""
    major_minor = ".".join(kafka_version.split(".")[:2])
    props = {
        "broker.id": str(broker_id),
        "listeners": f"PLAINTEXT://{host}:{settings.BROKER_PORT}",
        "advertised.listeners": f"PLAINTEXT://{host}:{settings.BROKER_PORT}",
        "zookeeper.connect": zookeeper_connect,
        "log.dirs": str(log_dir),
        "inter.broker.protocol.version": major_minor,
        "log.message.format.version": major_minor,
        **settings.BROKER_CONFIG,
        **settings.ZK_BROKER_CONFIG,
        **_capped(brokers),
    }
    if rack:
        props["broker.rack"] = rack
    return _dumps({**client_listener(props, host, client), **(extra or {})})


def kraft_node(*, node_id: int, role: str, rack: str | None, host: str, quorum: dict[str, str], log_dir: Path,
               brokers: int, extra: dict[str, str] | None = None, client: ClientListener | None = None) -> str:
    """A KRaft node's ``server.properties``: ``role`` ``"broker"``, ``"controller"`` or ``"broker,controller"`` (a
    combined node: both listeners, a broker's settings); ``quorum`` is how the node finds the quorum: one of
    :func:`static_quorum` / :func:`dynamic_quorum`; ``extra``: a broker's settings of the caller's
    (``up --broker-config``), last: they win (a controller gets only their ``min.insync.replicas``: turning ELR on
    copies the active controller's value to the cluster level, see :data:`settings.CONTROLLER_CONFIG`);
    ``client``: a broker's second listener for clients (:func:`client_listener`; a controller's listener stays
    PLAINTEXT).

    Raises:
        ValueError: another role, or ``quorum`` not exactly one of the two quorum keys.
    """
    if role not in ("broker", "controller", "broker,controller"):
        raise ValueError(f"role must be broker, controller or broker,controller (got {role!r})")
    if len(quorum) != 1 or not set(quorum) <= {VOTERS_KEY, BOOTSTRAP_KEY}:
        raise ValueError(f"quorum must set one of {VOTERS_KEY}, {BOOTSTRAP_KEY} (got {sorted(quorum)})")
    props = {
        "process.roles": role,
        "node.id": str(node_id),
        **quorum,
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(log_dir),
    }
    if role == "controller":
        props["listeners"] = f"CONTROLLER://{host}:{settings.CONTROLLER_PORT}"
        props.update(settings.CONTROLLER_CONFIG)
        if MIN_INSYNC in (extra or {}):  # the brokers' min.insync.replicas: ELR copies the controller's (settings)
            props[MIN_INSYNC] = extra[MIN_INSYNC]
    else:
        props.update({
            "listeners": f"PLAINTEXT://{host}:{settings.BROKER_PORT}" + (
                f",CONTROLLER://{host}:{settings.CONTROLLER_PORT}" if role != "broker" else ""),
            "advertised.listeners": f"PLAINTEXT://{host}:{settings.BROKER_PORT}",
            "inter.broker.listener.name": "PLAINTEXT",
            **settings.BROKER_CONFIG,
            **settings.KRAFT_BROKER_CONFIG,
            **_capped(brokers),
        })
        if rack:
            props["broker.rack"] = rack
        props = client_listener(props, host, client)
        props.update(extra or {})
    return _dumps(props)


def quorum_voters(voters: dict[int, str]) -> str:
    """``controller.quorum.voters`` for ``{node id: host}``: ``100@127.0.0.111:9093,...`` (ids ascending)."""
    return ",".join(f"{i}@{h}:{settings.CONTROLLER_PORT}" for i, h in sorted(voters.items()))


def static_quorum(voters: dict[int, str]) -> dict[str, str]:
    """A static quorum (KIP-595) of ``{node id: host}``: ``{"controller.quorum.voters": "100@127.0.0.111:9093,..."}``;
    every node's file names the voters, and changing them means editing every file."""
    return {VOTERS_KEY: quorum_voters(voters)}


def dynamic_quorum(voters: dict[int, str]) -> dict[str, str]:
    """A dynamic quorum (KIP-853, Kafka 3.9+) first formed by ``{node id: host}``:
    ``{"controller.quorum.bootstrap.servers": "127.0.0.111:9093,..."}`` (hosts by node id). The voters themselves
    are in the metadata log (``kafka-storage format --initial-controllers``, :func:`initial_controllers`) and change
    with ``kafka-metadata-quorum add-controller`` / ``remove-controller``."""
    return {BOOTSTRAP_KEY: ",".join(f"{h}:{settings.CONTROLLER_PORT}" for _, h in sorted(voters.items()))}


def initial_controllers(voters: dict[int, str], directory_ids: dict[int, str]) -> str:
    """``kafka-storage format --initial-controllers`` for a dynamic quorum: ``100@127.0.0.111:9093:<directory id>,...``
    (ids ascending); each voter's metadata log directory is formatted with its ``directory_ids`` entry (a base64
    Kafka UUID, :func:`new_directory_id`), which identifies the voter beside its node id (KIP-853).

    Raises:
        KeyError: a voter without a directory id.
    """
    return ",".join(f"{i}@{h}:{settings.CONTROLLER_PORT}:{directory_ids[i]}" for i, h in sorted(voters.items()))


def new_directory_id() -> str:
    """A new directory id as Kafka's ``Uuid.randomUuid()`` makes one: 16 random bytes in URL-safe base64 without
    padding (22 characters), never the reserved zero and one UUIDs and never starting with ``-`` (Kafka's rule, so
    that a command line never reads it as an option)."""
    while True:
        raw = os.urandom(16)
        text = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        if not text.startswith("-") and int.from_bytes(raw, "big") > 1:
            return text


def check_cluster_id(text: str) -> None:
    """Check that ``text`` is a Kafka cluster id: a UUID in URL-safe base64 without padding (22 characters of
    ``A-Za-z0-9_-``, what Kafka's ``Uuid.fromString`` decodes to 16 bytes), which may start with ``-`` (ZooKeeper-mode
    ids do, once in 64).

    Raises:
        ValueError: anything else.
    """
    if not re.fullmatch(r"[A-Za-z0-9_-]{22}", text):
        raise ValueError(f"cluster id {text!r} is not a Kafka cluster id (22 characters of URL-safe base64, a UUID)")
