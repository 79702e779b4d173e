"""A cluster profile: everything an operation needs to reach one Kafka cluster.

docs/architecture.md, "A cluster is an Airflow connection": each cluster is a connection of conn type
``kafka``. Its ``host`` holds the bootstrap servers (``"b1:9092,b2:9092"``; a host without a port
gets the connection's ``port``, else 9092); ``login`` / ``password``, when set, become
``sasl.username`` / ``sasl.password``; its ``extra`` JSON holds:

* librdkafka client settings, passed through as given: ``security.protocol``, ``sasl.*``, ``ssl.*``
  and any other dotted librdkafka property (``client.id``, ``socket.timeout.ms``, ...), or nested
  under ``"client": {...}``;
* the profile fields: ``ssh_conn_id``, ``zookeeper`` (ZK connect string with chroot, ZK-mode
  clusters only), ``burrow_conn_id`` + ``burrow_cluster``, ``consumer_groups`` (list),
  ``service_stop`` / ``service_start`` / ``service_status`` (shell commands; defaults
  ``sudo systemctl stop|start|is-active kafka``), ``server_properties`` (path), ``kafka_home`` (path),
  ``commands`` (``{"drain-lb": "shell command", ...}``: the commands a run may choose by name for its
  pre-stop / pre-start / stop / start steps; owned by whoever owns the connection) and
  ``allow_adhoc_commands`` (default false: a run's params may only name those commands, never carry shell
  text of their own), ``broker_hosts`` (``{"3": "kafka-3.example.com"}``: where brokers that are not
  registered yet run, for a scale-out that starts them; registered brokers are found in the metadata),
  ``reassignment_via`` (``auto``, the default: AlterPartitionReassignments when the brokers offer it (Kafka
  2.4+, KIP-455), else ZooKeeper's ``/admin/reassign_partitions``; ``admin``; ``zookeeper``),
  ``lock_store`` (where the per-cluster operation lock lives: ``auto``, the default: ZooKeeper when the
  profile has ``zookeeper``, else the cluster itself (a lock topic, ``hooks.kafka_lock``); ``zookeeper``;
  ``kafka``);
* KRaft controllers (optional; the rolling restart's controller roll, ``kafka_ops.controller_roll``):
  ``controller_hosts`` (``{"100": "ctrl-100.example.com"}``: the host of each controller, by node id; a
  voter without an entry takes the host DescribeQuorum v2 names for it (Kafka 3.8+), else the roll's plan
  fails naming it), ``controller_service_stop`` / ``controller_service_start`` / ``controller_service_status``
  (shell commands run on a controller host; each defaults to the broker's ``service_stop`` /
  ``service_start`` / ``service_status``; ``{broker_id}`` is filled with the controller's node id). The
  status command follows ``systemctl is-active``: exit 0 = running, non-zero = stopped.
  ``controller_properties`` (``{"log.dirs": "/var/lib/kafka/meta", "listeners": "CONTROLLER://{host}:9093"}``):
  what the ZooKeeper-to-KRaft migration (``kafka_ops.migration``) writes into each new controller's
  ``server.properties`` besides the keys it sets itself; ``{broker_id}`` is filled with the controller's node id,
  ``{host}`` with its host. Owned by the connection: a run cannot choose where a controller keeps its data.
  ``controller_client`` (``{"security.protocol": "SSL", "ssl.ca.location": "/etc/kafka/ca.pem"}``): the security
  settings (``security.protocol``, ``sasl.*``, ``ssl.*``) of the controllers' CONTROLLER listener, when they differ
  from the brokers' client listener (``listener.security.protocol.map``, ``sasl.mechanism.controller.protocol``):
  requests sent to a controller itself (KIP-919: DescribeQuorum during a migration, ApiVersions, its own configs)
  use them instead of the client settings' security keys; unset = the same as the brokers'.

This module takes the connection's fields as plain values (no Airflow import); the hooks fetch the
connection and call :meth:`ClusterProfile.from_connection_fields`. Validation uses jsonschema and
raises ValueError naming the connection and the bad field. Secrets never appear in ``repr``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import jsonschema

DEFAULT_SERVICE_STOP = "sudo systemctl stop kafka"
DEFAULT_SERVICE_START = "sudo systemctl start kafka"
DEFAULT_SERVICE_STATUS = "sudo systemctl is-active kafka"
DEFAULT_KAFKA_PORT = 9092

#: A librdkafka property name: lowercase dotted words (``security.protocol``, ``ssl.ca.location``).
_CLIENT_KEY = r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$"
_SCALAR = {"type": ["string", "integer", "number", "boolean"]}
_NON_EMPTY = {"type": "string", "minLength": 1}
_COMMAND = {"type": "string", "minLength": 1, "pattern": r"\S"}

PROFILE_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "kafka-ops cluster profile (connection extra)",
    "type": "object",
    "properties": {
        "ssh_conn_id": _NON_EMPTY,
        "zookeeper": _NON_EMPTY,
        "burrow_conn_id": _NON_EMPTY,
        "burrow_cluster": _NON_EMPTY,
        "consumer_groups": {"type": "array", "items": _NON_EMPTY, "uniqueItems": True},
        "service_stop": _COMMAND,
        "service_start": _COMMAND,
        "service_status": _COMMAND,
        "server_properties": _NON_EMPTY,
        "kafka_home": _NON_EMPTY,
        "commands": {
            "type": "object",
            "propertyNames": {"pattern": r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"},
            "additionalProperties": _COMMAND,
        },
        "allow_adhoc_commands": {"type": "boolean"},
        "reassignment_via": {"enum": ["auto", "admin", "zookeeper"]},
        "lock_store": {"enum": ["auto", "zookeeper", "kafka"]},
        "broker_hosts": {
            "type": "object",
            "propertyNames": {"pattern": r"^(0|[1-9][0-9]{0,9})$"},
            "additionalProperties": _NON_EMPTY,
        },
        "controller_hosts": {
            "type": "object",
            "propertyNames": {"pattern": r"^(0|[1-9][0-9]{0,9})$"},
            "additionalProperties": _NON_EMPTY,
        },
        "controller_properties": {
            "type": "object",
            "propertyNames": {"pattern": r"^[a-z][a-z0-9_.-]*$"},
            "additionalProperties": {"type": "string"},
        },
        "controller_service_stop": _COMMAND,
        "controller_service_start": _COMMAND,
        "controller_service_status": _COMMAND,
        "client": {
            "type": "object",
            "propertyNames": {"pattern": _CLIENT_KEY},
            "additionalProperties": _SCALAR,
        },
        "controller_client": {
            "type": "object",
            "propertyNames": {"pattern": r"^(security\.protocol|sasl\.[a-z0-9_.]+|ssl\.[a-z0-9_.]+)$"},
            "additionalProperties": _SCALAR,
        },
        "bootstrap.servers": _NON_EMPTY,
    },
    "patternProperties": {_CLIENT_KEY: _SCALAR},
    "additionalProperties": False,
    "dependentRequired": {"burrow_conn_id": ["burrow_cluster"], "burrow_cluster": ["burrow_conn_id"]},
}

_PROFILE_KEYS = frozenset(PROFILE_SCHEMA["properties"]) - {"client", "bootstrap.servers"}
_SECRET = re.compile(r"password|secret|\.pem$|jaas|oauthbearer\.config|token", re.IGNORECASE)
_BOOTSTRAP_ENTRY = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.\-]+)(:(\d{1,5}))?$")


def _is_security_key(name: str) -> bool:
    """True for the client settings that say how a listener authenticates and encrypts."""
    return name == "security.protocol" or name.startswith(("sasl.", "ssl."))


def is_secret_setting(name: str) -> bool:
    """True for client settings whose values must never be logged (passwords, keys, tokens)."""
    return bool(_SECRET.search(name))


def redact(settings: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``settings`` with secret values replaced by ``"***"``."""
    return {k: ("***" if is_secret_setting(k) else v) for k, v in settings.items()}


def _field_path(error: jsonschema.ValidationError) -> str:
    path = "/".join(str(p) for p in error.absolute_path)
    return path or "extra"


def _schema_error_message(error: jsonschema.ValidationError) -> str:
    if error.validator == "additionalProperties" and error.instance is not None:
        known = set(PROFILE_SCHEMA["properties"])
        unknown = sorted(
            k for k in error.instance if k not in known and not re.match(_CLIENT_KEY, str(k))
        )
        return (
            f"unknown field(s) {unknown} in extra; profile fields are {sorted(_PROFILE_KEYS)}, "
            "client settings are dotted librdkafka properties (e.g. security.protocol)"
        )
    if error.validator == "dependentRequired":
        return f"{error.message} (burrow_conn_id and burrow_cluster go together)"
    # Never echo a value that could be a secret.
    return f"field {_field_path(error)!r}: {error.message if not _hides(error) else 'invalid value'}"


def _hides(error: jsonschema.ValidationError) -> bool:
    return any(is_secret_setting(str(p)) for p in error.absolute_path)


def normalize_bootstrap_servers(value: str, default_port: int | None = None) -> str:
    """``"b1, b2:9093"`` -> ``"b1:9092,b2:9093"``: comma-separated ``host:port``, spaces removed.

    A protocol prefix (``PLAINTEXT://``, ``SSL://``, ...) is stripped. Hosts without a port get
    ``default_port`` (else 9092).
    :raises ValueError: empty string or an entry that is not ``host[:port]`` (named).
    """
    port = DEFAULT_KAFKA_PORT if default_port is None else default_port
    entries = []
    for raw in value.split(","):
        entry = raw.strip()
        if not entry:
            continue
        entry = re.sub(r"^[A-Za-z_]+://", "", entry)
        m = _BOOTSTRAP_ENTRY.match(entry)
        if not m or (m.group(3) and not 0 < int(m.group(3)) < 65536):
            raise ValueError(f"bootstrap server {raw.strip()!r} is not host[:port]")
        entries.append(entry if m.group(3) else f"{entry}:{port}")
    if not entries:
        raise ValueError("no bootstrap servers given")
    return ",".join(entries)


@dataclass(frozen=True, repr=False)
class ClusterProfile:
    """One cluster's profile, read from a ``kafka`` connection.

    :param cluster: the connection id it came from ("" when built from plain values): what every DAG's
        ``cluster`` param names.
    :param bootstrap_servers: ``"host:port,host:port"``.
    :param client_config: librdkafka settings (security.protocol, sasl.*, ssl.*, ...), without
        ``bootstrap.servers``; may hold secrets - never log it (``repr`` redacts it).
    :param ssh_conn_id: Airflow SSH connection id used for the broker hosts (operators set the remote
        host per broker), or None.
    :param zookeeper: ZooKeeper connect string incl. chroot (``"zk1:2181,zk2:2181/kafka"``), or None
        for KRaft clusters.
    :param burrow_conn_id: Airflow HTTP connection of the Burrow server, or None.
    :param burrow_cluster: the cluster's name in Burrow's config, or None.
    :param consumer_groups: consumer groups to watch in Burrow.
    :param service_stop: / :param service_start: / :param service_status: shell commands run on the
        broker host (defaults ``sudo systemctl stop|start|is-active kafka``).
    :param server_properties: path of server.properties on the broker host, or None; may hold a
        ``{broker_id}`` placeholder (see :meth:`server_properties_for`).
    :param kafka_home: Kafka's install directory on the broker host, or None; may hold
        ``{broker_id}`` (see :meth:`kafka_home_for`).
    :param commands: named shell commands a run may choose (``{"drain-lb": "..."}``), each may hold
        ``{broker_id}``; see :meth:`command`.
    :param allow_adhoc_commands: True lets a run's params carry shell text that is not a named command.
    :param broker_hosts: broker id -> host of brokers that may not be registered yet (a scale-out's new
        brokers); owned by the connection, so a run cannot point SSH at a host of its own choosing.
    :param reassignment_via: how reassignments are started: ``auto`` (AlterPartitionReassignments, KIP-455,
        Kafka 2.4+; ZooKeeper's ``/admin/reassign_partitions`` when the brokers lack it), ``admin``, or
        ``zookeeper`` (ZooKeeper-mode clusters before 2.4; needs ``zookeeper``).
    :param lock_store: where the operation lock lives: ``auto`` (ZooKeeper when ``zookeeper`` is set, else a
        lock topic in the cluster), ``zookeeper`` (needs ``zookeeper``), ``kafka``; see :attr:`lock_in`.
    :param controller_hosts: KRaft controller node id -> host (owned by the connection, as ``broker_hosts``);
        a voter missing here takes the host DescribeQuorum v2 names (``kafka_ops.controller_roll.resolve_hosts``).
    :param controller_properties: Kafka config key -> value (``{broker_id}`` / ``{host}`` placeholders) of the
        controllers a ZooKeeper-to-KRaft migration provisions (``listeners``, ``log.dirs``, ...).
    :param controller_service_stop: / :param controller_service_start: / :param controller_service_status:
        shell commands run on a controller host, or None = the broker's ``service_*`` command (see
        :meth:`controller_service_command`).
    :param controller_client: librdkafka security settings of the controllers' CONTROLLER listener, or None = the
        client listener's (see :meth:`kafka_python_config`); may hold secrets (``repr`` redacts it).
    :raises ValueError: ``lock_store="zookeeper"`` without ``zookeeper``.
    """

    cluster: str
    bootstrap_servers: str
    client_config: Mapping[str, str | int | float | bool] = field(default_factory=dict)
    ssh_conn_id: str | None = None
    zookeeper: str | None = None
    burrow_conn_id: str | None = None
    burrow_cluster: str | None = None
    consumer_groups: tuple[str, ...] = ()
    service_stop: str = DEFAULT_SERVICE_STOP
    service_start: str = DEFAULT_SERVICE_START
    service_status: str = DEFAULT_SERVICE_STATUS
    server_properties: str | None = None
    kafka_home: str | None = None
    commands: Mapping[str, str] = field(default_factory=dict)
    allow_adhoc_commands: bool = False
    broker_hosts: Mapping[int, str] = field(default_factory=dict)
    reassignment_via: str = "auto"
    lock_store: str = "auto"
    controller_hosts: Mapping[int, str] = field(default_factory=dict)
    controller_properties: Mapping[str, str] = field(default_factory=dict)
    controller_service_stop: str | None = None
    controller_service_start: str | None = None
    controller_service_status: str | None = None
    controller_client: Mapping[str, str | int | float | bool] | None = None

    def __post_init__(self) -> None:
        where = f"connection {self.cluster!r}" if self.cluster else "cluster profile"
        for field_name in ("lock_store", "reassignment_via"):
            if getattr(self, field_name) == "zookeeper" and not self.zookeeper:
                raise ValueError(f"{where}: {field_name} 'zookeeper' needs 'zookeeper' (the connect string)")
        object.__setattr__(self, "broker_hosts", MappingProxyType({int(k): v for k, v in self.broker_hosts.items()}))
        object.__setattr__(self, "controller_hosts",
                           MappingProxyType({int(k): v for k, v in self.controller_hosts.items()}))
        object.__setattr__(self, "client_config", MappingProxyType(dict(self.client_config)))
        object.__setattr__(self, "commands", MappingProxyType(dict(self.commands)))
        object.__setattr__(self, "controller_properties", MappingProxyType(dict(self.controller_properties)))
        object.__setattr__(self, "consumer_groups", tuple(self.consumer_groups))
        if self.controller_client is not None:
            object.__setattr__(self, "controller_client", MappingProxyType(dict(self.controller_client)))

    @classmethod
    def from_connection_fields(
        cls,
        cluster: str,
        host: str | None,
        extra: Mapping[str, Any] | None = None,
        *,
        port: int | None = None,
        login: str | None = None,
        password: str | None = None,
    ) -> ClusterProfile:
        """Build and validate a profile from a connection's fields (see the module docstring).

        :param cluster: the connection id, used in error messages.
        :param host: bootstrap servers; may be empty when ``extra`` holds ``bootstrap.servers``.
        :param extra: the connection's extra as a dict (``Connection.extra_dejson``).
        :param port: default port for bootstrap hosts given without one.
        :param login: / :param password: SASL username / password (override nothing set in extra).
        :raises ValueError: naming the connection and the bad field: no bootstrap servers, both
            ``host`` and ``extra["bootstrap.servers"]`` set and different, unknown fields, wrong
            types, ``burrow_conn_id`` without ``burrow_cluster`` (or the reverse).
        """
        extra = dict(extra or {})
        where = f"connection {cluster!r}" if cluster else "cluster profile"
        validator = jsonschema.Draft202012Validator(PROFILE_SCHEMA)
        errors = sorted(validator.iter_errors(extra), key=lambda e: list(e.absolute_path))
        if errors:
            raise ValueError(f"{where}: {_schema_error_message(errors[0])}")

        nested = dict(extra.pop("client", {}) or {})
        extra_bootstrap = extra.pop("bootstrap.servers", None) or nested.pop("bootstrap.servers", None)
        client = {k: v for k, v in extra.items() if k not in _PROFILE_KEYS}
        overlap = sorted(set(client) & set(nested))
        if overlap:
            raise ValueError(f"{where}: client setting(s) {overlap} given both at top level and in 'client'")
        client.update(nested)
        if login and "sasl.username" not in client:
            client["sasl.username"] = login
        if password and "sasl.password" not in client:
            client["sasl.password"] = password

        host = (host or "").strip()
        try:
            if host:
                servers = normalize_bootstrap_servers(host, port)
                if extra_bootstrap and normalize_bootstrap_servers(extra_bootstrap, port) != servers:
                    raise ValueError(
                        "field 'host' and extra 'bootstrap.servers' disagree; set only the host"
                    )
            elif extra_bootstrap:
                servers = normalize_bootstrap_servers(extra_bootstrap, port)
            else:
                raise ValueError("field 'host' must hold the bootstrap servers (host:port,host:port)")
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None

        fields = {k: extra[k] for k in _PROFILE_KEYS if k in extra}
        if "consumer_groups" in fields:
            fields["consumer_groups"] = tuple(fields["consumer_groups"])
        return cls(cluster=cluster or "", bootstrap_servers=servers, client_config=client, **fields)

    # -- derived views -----------------------------------------------------------------------------

    @property
    def lock_in(self) -> str:
        """Where this cluster's operation lock lives: ``"zookeeper"`` or ``"kafka"`` (``lock_store`` resolved)."""
        if self.lock_store == "auto":
            return "zookeeper" if self.zookeeper else "kafka"
        return self.lock_store

    def confluent_config(self, **overrides: Any) -> dict[str, Any]:
        """librdkafka config for confluent-kafka clients: ``bootstrap.servers`` + client settings.

        :param overrides: extra librdkafka settings applied last, e.g.
            ``**{"socket.timeout.ms": 5000}``. Contains secrets: do not log the result.
        """
        conf: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers}
        conf.update(self.client_config)
        conf.update(overrides)
        return conf

    def kafka_python_config(self, controller: bool = False) -> dict[str, Any]:
        """Keyword arguments for kafka-python clients, translated from the librdkafka settings.

        :param controller: for a connection to a KRaft controller's CONTROLLER listener: with ``controller_client``
            set, its security settings replace the client settings' ``security.protocol`` / ``sasl.*`` / ``ssl.*``
            (the others, e.g. ``client.id``, are kept); unset, the client settings apply as they are.
        See :func:`to_kafka_python_config`. Contains secrets: do not log the result.
        """
        settings: Mapping[str, Any] = self.client_config
        if controller and self.controller_client is not None:
            settings = {**{k: v for k, v in self.client_config.items() if not _is_security_key(k)},
                        **self.controller_client}
        return to_kafka_python_config(self.bootstrap_servers, settings)

    def for_broker(self, value: str, broker_id: int) -> str:
        """``value`` with every ``{broker_id}`` placeholder replaced by ``broker_id``.

        Paths and commands that differ per broker host (the sandbox's ``server_properties`` /
        ``kafka_home`` are ``.../hosts/{broker_id}/...``) carry this placeholder; values without it
        (a real fleet's fixed paths) come back unchanged. Plain replacement, not ``str.format``, so
        shell braces such as ``${HOME}`` stay intact.
        """
        return value.replace("{broker_id}", str(int(broker_id)))

    def controller_addresses(self) -> list[str]:
        """``host:port`` of each controller in ``controller_hosts`` (by node id), the port of the CONTROLLER listener
        in ``controller_properties`` (default 9093: ``kafka_ops.migration.controller_port``)."""
        from kafka_ops.migration import controller_port

        port = controller_port(self.controller_properties)
        return [f"{host}:{port}" for _, host in sorted(self.controller_hosts.items())]

    def server_properties_for(self, broker_id: int) -> str | None:
        """``server_properties`` for this broker (placeholder filled), or None when unset."""
        return None if self.server_properties is None else self.for_broker(self.server_properties, broker_id)

    def kafka_home_for(self, broker_id: int) -> str | None:
        """``kafka_home`` for this broker (placeholder filled), or None when unset."""
        return None if self.kafka_home is None else self.for_broker(self.kafka_home, broker_id)

    def service_command(self, action: str, broker_id: int) -> str:
        """The shell command for ``action`` (``"stop"``, ``"start"`` or ``"status"``) on this broker.

        :raises ValueError: unknown action.
        """
        commands = {"stop": self.service_stop, "start": self.service_start, "status": self.service_status}
        if action not in commands:
            raise ValueError(f"unknown service action {action!r}; expected one of {sorted(commands)}")
        return self.for_broker(commands[action], broker_id)

    def controller_service_command(self, action: str, controller_id: int) -> tuple[str, str]:
        """The shell command for ``action`` (``"stop"``, ``"start"`` or ``"status"``) on a KRaft controller's
        host, and how it was chosen: the profile's ``controller_service_<action>``, else the broker's
        ``service_<action>`` (``"service command (service_stop; no controller_service_stop)"``).
        ``{broker_id}`` is filled with the controller's node id.

        :raises ValueError: unknown action.
        """
        own = {"stop": self.controller_service_stop, "start": self.controller_service_start,
               "status": self.controller_service_status}
        if action not in own:
            raise ValueError(f"unknown service action {action!r}; expected one of {sorted(own)}")
        if own[action] is not None:
            return (self.for_broker(own[action], controller_id),
                    f"controller service command (controller_service_{action})")
        return (self.service_command(action, controller_id),
                f"service command (service_{action}; no controller_service_{action})")

    def command(self, choice: str | None, step: str, broker_id: int) -> tuple[str, str] | None:
        """The shell text a run's ``choice`` for ``step`` means on this broker, and how it was chosen.

        - None or blank: for ``stop`` / ``start`` the profile's ``service_stop`` / ``service_start``
          (``"service command"``); for other steps None (nothing to run);
        - a name in ``commands``: that command (``"profile command 'drain-lb'"``);
        - other text: itself, only when ``allow_adhoc_commands`` (``"ad-hoc command"``).

        ``{broker_id}`` is filled in every case (:meth:`for_broker`).

        :raises ValueError: other text while ad-hoc commands are not allowed (names the named commands).
        """
        if choice is None or not str(choice).strip():
            if step in ("stop", "start"):
                return self.service_command(step, broker_id), f"service command (service_{step})"
            return None
        if choice in self.commands:
            return self.for_broker(self.commands[choice], broker_id), f"profile command {choice!r}"
        if self.allow_adhoc_commands:
            return self.for_broker(choice, broker_id), "ad-hoc command (allow_adhoc_commands)"
        where = f"connection {self.cluster!r}" if self.cluster else "the cluster profile"
        raise ValueError(
            f"{step} {choice!r} is not a command named in {where} (named commands: {sorted(self.commands)}); "
            "shell text of a run's own needs allow_adhoc_commands: true in the profile"
        )

    def require(self, *names: str) -> None:
        """Raise ValueError naming the connection and every field in ``names`` that is unset."""
        missing = [n for n in names if not getattr(self, n)]
        if missing:
            raise ValueError(f"connection {self.cluster!r}: profile field(s) {missing} must be set in extra")

    def redacted(self) -> dict[str, Any]:
        """The profile as a dict with secret client settings masked, safe to log."""
        return {
            "cluster": self.cluster,
            "bootstrap_servers": self.bootstrap_servers,
            "client_config": redact(self.client_config),
            "ssh_conn_id": self.ssh_conn_id,
            "zookeeper": self.zookeeper,
            "burrow_conn_id": self.burrow_conn_id,
            "burrow_cluster": self.burrow_cluster,
            "consumer_groups": list(self.consumer_groups),
            "service_stop": self.service_stop,
            "service_start": self.service_start,
            "service_status": self.service_status,
            "server_properties": self.server_properties,
            "kafka_home": self.kafka_home,
            "commands": dict(self.commands),
            "allow_adhoc_commands": self.allow_adhoc_commands,
            "reassignment_via": self.reassignment_via,
            "lock_store": self.lock_store,
            "broker_hosts": {str(k): v for k, v in self.broker_hosts.items()},
            "controller_hosts": {str(k): v for k, v in self.controller_hosts.items()},
            "controller_properties": dict(self.controller_properties),
            "controller_service_stop": self.controller_service_stop,
            "controller_service_start": self.controller_service_start,
            "controller_service_status": self.controller_service_status,
            "controller_client": None if self.controller_client is None else redact(self.controller_client),
        }

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.redacted().items())
        return f"ClusterProfile({fields})"

    __str__ = __repr__


# librdkafka property -> kafka-python keyword.
_KAFKA_PYTHON_MAP = {
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "sasl.kerberos.service.name": "sasl_kerberos_service_name",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "ssl.crl.location": "ssl_crlfile",
    "client.id": "client_id",
}


def to_kafka_python_config(bootstrap_servers: str, client_config: Mapping[str, Any]) -> dict[str, Any]:
    """Translate librdkafka client settings into kafka-python keyword arguments.

    Maps security.protocol, sasl.mechanism(s), sasl.username/password (PLAIN and SCRAM),
    sasl.kerberos.service.name, ssl.ca/certificate/key/crl.location, ssl.key.password, client.id;
    ``ssl.endpoint.identification.algorithm=none`` -> ``ssl_check_hostname=False``. Other non-security
    settings (timeouts, debug, ...) are dropped: kafka-python is only used for the few admin calls
    librdkafka lacks.

    :raises ValueError: a ``sasl.*`` / ``ssl.*`` setting kafka-python cannot honour (named), because
        silently dropping a security setting would connect differently than the main client.
    """
    conf: dict[str, Any] = {"bootstrap_servers": bootstrap_servers.split(",")}
    unsupported = []
    for key, value in client_config.items():
        if key in _KAFKA_PYTHON_MAP:
            target = _KAFKA_PYTHON_MAP[key]
            conf[target] = str(value).upper() if target in ("security_protocol", "sasl_mechanism") else value
        elif key == "ssl.endpoint.identification.algorithm":
            conf["ssl_check_hostname"] = str(value).lower() != "none"
        elif key.startswith(("sasl.", "ssl.")):
            unsupported.append(key)
    if unsupported:
        raise ValueError(f"client setting(s) {sorted(unsupported)} have no kafka-python equivalent")
    return conf
