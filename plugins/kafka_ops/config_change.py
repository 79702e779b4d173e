"""The rules of a broker config change: which keys Kafka changes dynamically and at which level, which need
``server.properties`` and a restart, what Kafka would refuse, and per broker what is left to do.

A change is ``{key: new value}`` (``None`` deletes the key) with a scope: ``"cluster"`` (the cluster-wide
default, Kafka's ``--entity-default``, ConfigResource BROKER ``""``) or a list of broker ids (per broker,
``--entity-name <id>``). Per key, from what DescribeConfigs says of a broker (:class:`DescribedConfig`):

* dynamic (``read_only`` False): IncrementalAlterConfigs at the scope's level, no restart; the operator first
  sends it with ``validateOnly`` so Kafka checks the values' types and ranges itself;
* static (``read_only`` True): ``server.properties`` edited, then a restart;
* unknown: refused with a "did you mean" (Kafka accepts unknown broker config names,
  ``DynamicConfig.Broker.validate(..., customPropsAllowed = true)``, so a typo would be stored silently).

Sources (the apache/kafka tree read: commit 1eb7644 of 2024-10-25, the 4.0 development line; in 4.x these
sets live on in ``DynamicBrokerConfig`` and the classes it names, some constants moved to Java ``*Configs``
classes under ``server/``):

* ``core/src/main/scala/kafka/server/DynamicBrokerConfig.scala``: ``DynamicBrokerConfig.PerBrokerConfigs``,
  ``ClusterLevelListenerConfigs``, ``ListenerConfigRegex``, ``ListenerMechanismConfigs``, ``validateConfigs``,
  ``DynamicThreadPool``, ``DynamicListenerConfig``;
* ``clients/src/main/java/org/apache/kafka/common/config/SslConfigs.java``: ``RECONFIGURABLE_CONFIGS``;
* ``core/src/main/scala/kafka/network/SocketServer.scala`` (``DataPlaneAcceptor.validateReconfiguration``) and
  ``core/src/main/scala/kafka/log/LogCleaner.scala`` (``LogCleaner.validateReconfiguration``);
* ``metadata/src/main/java/org/apache/kafka/controller/ConfigurationControlManager.java`` (Kafka 4.1, KIP-966
  ELR; its messages as in ``ConfigurationControlManagerTest.testRejectMinIsrChangeWhenElrEnabled``) and the ops
  docs' "Eligible Leader Replicas" section;
* Kafka's ops docs, "3.1.1 Updating Broker Configs" (``docs/configuration.html``): update modes and precedence.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from kafka_ops import properties_file

#: The scope of a change: the cluster-wide default, or these broker ids.
Scope = Literal["cluster"] | Sequence[int]
CLUSTER: Literal["cluster"] = "cluster"

#: ConfigEntry sources (DescribeConfigs ``ConfigSource``) this module tells apart.
DYNAMIC_BROKER_CONFIG = "DYNAMIC_BROKER_CONFIG"
DYNAMIC_DEFAULT_BROKER_CONFIG = "DYNAMIC_DEFAULT_BROKER_CONFIG"
STATIC_BROKER_CONFIG = "STATIC_BROKER_CONFIG"
DEFAULT_CONFIG = "DEFAULT_CONFIG"

MIN_INSYNC_REPLICAS = "min.insync.replicas"

#: ``SslConfigs.RECONFIGURABLE_CONFIGS`` = Kafka's ``DynamicBrokerConfig.DynamicSecurityConfigs``: per broker,
#: and dynamically only with a listener prefix (``validateConfigs``: "These security configs can be dynamically
#: updated only per-listener using the listener prefix").
DYNAMIC_SECURITY_CONFIGS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates",
})

#: ``DynamicListenerConfig.ReconfigurableConfigs``.
DYNAMIC_LISTENER_CONFIGS = frozenset({
    "advertised.listeners", "listeners", "listener.security.protocol.map",
    "principal.builder.class", "ssl.protocol", "ssl.provider", "ssl.cipher.suites", "ssl.enabled.protocols",
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password", "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm", "ssl.endpoint.identification.algorithm", "ssl.secure.random.implementation",
    "ssl.client.auth", "ssl.engine.factory.class",
    "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config", "sasl.enabled.mechanisms",
    "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd", "sasl.kerberos.ticket.renew.window.factor",
    "sasl.kerberos.ticket.renew.jitter", "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.principal.to.local.rules", "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter", "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.buffer.seconds",
    "max.connections", "max.connection.creation.rate",
    "num.network.threads",
})

#: ``DynamicBrokerConfig.ClusterLevelListenerConfigs``: listener configs that stay settable cluster-wide.
CLUSTER_LEVEL_LISTENER_CONFIGS = frozenset({"max.connections", "max.connection.creation.rate",
                                            "num.network.threads"})

#: ``DynamicBrokerConfig.PerBrokerConfigs`` = (DynamicSecurityConfigs ++ DynamicListenerConfig
#: .ReconfigurableConfigs) -- ClusterLevelListenerConfigs. Listener-prefixed keys are per broker too unless their
#: base name is cluster-level (:func:`is_per_broker_only`).
PER_BROKER_ONLY = frozenset((DYNAMIC_SECURITY_CONFIGS | DYNAMIC_LISTENER_CONFIGS) - CLUSTER_LEVEL_LISTENER_CONFIGS)

#: Keys that are not a node's configuration but its identity or its place in the cluster: a config change (an edited
#: ``server.properties`` and a restart) must not touch them. Key -> why, and what to run instead.
NODE_IDENTITY_CONFIGS: dict[str, str] = {
    "broker.id": "a broker's id is its identity, stored in every log directory's meta.properties: a broker started "
                 "with another id refuses to start (\"Configured broker.id ... doesn't match stored broker.id ... in "
                 "meta.properties\"), and one value for the whole cluster gives every broker the same id; replace "
                 "a broker with kafka_scale_out and kafka_decommission",
    "node.id": "a KRaft node's id is its identity, stored in every log directory's meta.properties: a node started "
               "with another id refuses to start, and one value for the whole cluster gives every node the same id; "
               "replace a broker with kafka_scale_out and kafka_decommission",
    "process.roles": "a node's roles are fixed when its storage is formatted and by its place in the quorum "
                     "(KIP-500, KIP-853): a ZooKeeper-mode broker moves to KRaft with kafka_zk_to_kraft, a KRaft "
                     "node does not change roles by an edit and a restart",
    "controller.quorum.voters": "the static voter set of the KRaft quorum (KIP-595) must be the same on every node, "
                                "controllers included; a config change edits the brokers' files alone, one broker "
                                "at a time. A static quorum's voters do not change by a roll; a dynamic quorum's "
                                "change with kafka-metadata-quorum add-controller / remove-controller (KIP-853)",
    "zookeeper.metadata.migration.enable": "the ZooKeeper-to-KRaft migration's switch (KIP-866): kafka_zk_to_kraft "
                                           "sets it once the KRaft controllers run, with the settings it needs "
                                           "beside it, and reverts it",
}

#: ``DynamicBrokerConfig.ListenerMechanismConfigs``: under a listener prefix they take a SASL mechanism prefix too
#: (``listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config``).
LISTENER_MECHANISM_CONFIGS = frozenset({"sasl.jaas.config", "sasl.login.callback.handler.class", "sasl.login.class",
                                        "sasl.server.callback.handler.class", "connections.max.reauth.ms"})

#: The listener-prefixed keys an existing listener may change dynamically: ``DynamicListenerConfig
#: .validateReconfiguration`` skips DynamicSecurityConfigs, ``SocketServer.ListenerReconfigurableConfigs``
#: (max.connections, max.connection.creation.rate) and ``DataPlaneAcceptor.ListenerReconfigurableConfigs``
#: (num.network.threads); any other ``listener.name.<l>.*`` change is refused ("Configs cannot be updated
#: dynamically for existing listener ..., restart broker or create a new listener for update").
LISTENER_DYNAMIC_BASES = DYNAMIC_SECURITY_CONFIGS | CLUSTER_LEVEL_LISTENER_CONFIGS

#: Thread pools Kafka resizes dynamically only within [current / 2, current * 2] (integer division) and >= 1:
#: ``DynamicThreadPool.ReconfigurableConfigs`` (num.io.threads, num.replica.fetchers,
#: num.recovery.threads.per.data.dir, background.threads; ``DynamicThreadPool.validateReconfiguration``),
#: num.network.threads (``DataPlaneAcceptor.validateReconfiguration``, against the listener's processor count) and
#: log.cleaner.threads (``LogCleaner.validateReconfiguration``). The same six as the ops docs' "Updating Thread
#: Configs".
THREAD_POOL_CONFIGS = frozenset({"num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
                                 "background.threads", "num.network.threads", "log.cleaner.threads"})

#: Synonym groups, highest precedence first (``DynamicBrokerConfig.brokerConfigSynonyms``; KafkaConfig's docs:
#: "If not set, the value in log.retention.minutes is used" ...).
SYNONYMS = (
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
)

_LISTENER_KEY = re.compile(r"listener\.name\.[^.]*\.(.*)", re.DOTALL)


@dataclass(frozen=True)
class DescribedConfig:
    """One broker config as DescribeConfigs (BROKER resource ``<id>``) returns it.

    :param name: the config name, e.g. ``"log.retention.hours"``.
    :param value: its effective value as a string; None when unset or ``sensitive`` (Kafka hides passwords).
    :param read_only: True = changes only through ``server.properties`` and a restart (Kafka's update mode
        ``read-only``); False = dynamic (``per-broker`` or ``cluster-wide``).
    :param source: where the value comes from (``ConfigSource``): ``"DYNAMIC_BROKER_CONFIG"`` (per-broker
        dynamic), ``"DYNAMIC_DEFAULT_BROKER_CONFIG"`` (cluster-wide dynamic), ``"STATIC_BROKER_CONFIG"``
        (``server.properties`` as read at start-up), ``"DEFAULT_CONFIG"``.
    :param sensitive: a password-type config.
    :param type: Kafka's config type (DescribeConfigs v3+, KIP-569): ``"BOOLEAN"``, ``"STRING"``, ``"INT"``,
        ``"SHORT"``, ``"LONG"``, ``"DOUBLE"``, ``"LIST"``, ``"CLASS"``, ``"PASSWORD"``; None = not reported.
    """

    name: str
    value: str | None
    read_only: bool
    source: str = DEFAULT_CONFIG
    sensitive: bool = False
    type: str | None = None


@dataclass(frozen=True)
class Classification:
    """The keys of a change sorted by how they change (:func:`classify`), each tuple in the change's order.

    :param dynamic: keys Kafka changes at run time (IncrementalAlterConfigs).
    :param static: keys that change through ``server.properties`` and a restart.
    :param unknown: keys the broker does not describe -> up to 3 close known names (may be empty).
    """

    dynamic: tuple[str, ...] = ()
    static: tuple[str, ...] = ()
    unknown: dict[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class BrokerConfigPlan:
    """What one broker needs for a change (:func:`broker_plan`).

    :param broker_id: the broker.
    :param alter: dynamic keys to send with IncrementalAlterConfigs at the scope's level -> new value (SET) or
        None (DELETE); empty when the broker already has them. For the cluster scope the caller sends the union
        of the brokers' ``alter`` once, to the cluster-wide resource (BROKER ``""``).
    :param static: read-only keys whose ``server.properties`` value changes -> (file value before or None,
        after or None).
    :param file_text: the new ``server.properties`` text (:func:`kafka_ops.properties_file.edit`): static and
        dynamic keys both; equal to the old text when nothing changes in the file.
    :param file_changes: every key whose file value changes -> (before or None, after or None).
    :param needs_restart: the broker must restart for the change to take effect.
    :param reasons: one sentence per key (and warnings), e.g.
        ``"log.retention.hours 168 -> 72 in server.properties, read-only: restart"``.
    :param unchanged: keys with nothing to do on this broker.
    :param pending: read-only keys whose file already has the new value while the broker still reports its
        start-up value: it has not restarted since the file changed. Informational: they do not set
        ``needs_restart`` (that follows the file only, so no restart loop: strimzi#7391).
    :param shadowed: one sentence per change that would not take effect on this broker, because a setting of higher
        precedence that the change leaves in place wins over it (Kafka's ops docs, "Updating Broker Configs"): a
        value set for this broker alone under a cluster-wide change, a synonym set in ``server.properties`` or
        dynamically (:data:`SYNONYMS`). The caller refuses the change: it would report success and change nothing
        on this broker.
    """

    broker_id: int
    alter: dict[str, str | None]
    static: dict[str, tuple[str | None, str | None]]
    file_text: str
    file_changes: dict[str, tuple[str | None, str | None]]
    needs_restart: bool
    reasons: list[str]
    unchanged: tuple[str, ...]
    pending: tuple[str, ...] = ()
    shadowed: tuple[str, ...] = ()

    @property
    def nothing_to_do(self) -> bool:
        """True when the broker needs no alter, no file change and no restart."""
        return not self.alter and not self.file_changes and not self.needs_restart

    def summary(self) -> str:
        """The dry run's diff line: ``"broker 1: dynamic log.cleaner.backoff.ms -> 20000; server.properties
        queued.max.requests unset -> 400; unchanged none; restart: yes"``."""
        dynamic = ", ".join(f"{k} -> {'deleted' if v is None else v}" for k, v in self.alter.items()) or "none"
        restart = "yes" if self.needs_restart else ("at its next restart (pending)" if self.pending else "no")
        return (f"broker {self.broker_id}: dynamic {dynamic}; server.properties {file_change_text(self.static)}; "
                f"unchanged {', '.join(self.unchanged) or 'none'}; restart: {restart}")


def file_change_text(changes: Mapping[str, Sequence[str | None]]) -> str:
    """``{key: (before, after)}`` (None = absent) as ``"queued.max.requests unset -> 400, x 1 -> removed"``;
    ``"none"`` when empty."""
    return ", ".join(f"{k} {_show(before)} -> {'removed' if after is None else after}"
                     for k, (before, after) in changes.items()) or "none"


def alter_requests(scope: Scope, alters: Mapping[int, Mapping[str, str | None]]
                   ) -> list[tuple[int | None, dict[str, str | None]]]:
    """The IncrementalAlterConfigs requests of a change, from each in-scope broker's ``alter``
    (:attr:`BrokerConfigPlan.alter`): ``[(None, the union)]`` to the cluster-wide default for the cluster scope,
    else ``[(broker id, its alter)]`` for each broker that needs one; empty when nothing is to be sent."""
    if scope == CLUSTER:
        union: dict[str, str | None] = {}
        for alter in alters.values():
            union.update(alter)
        return [(None, union)] if union else []
    return [(b, dict(alter)) for b, alter in alters.items() if alter]


def not_applied(scope: Scope, alters: Mapping[int, Mapping[str, str | None]],
                described_by_broker: Mapping[int, Mapping[str, DescribedConfig]]) -> list[str]:
    """What the brokers do not report yet of the dynamic change they were sent (each broker applies it from
    ZooKeeper or its copy of the metadata log a moment later); empty = applied everywhere.

    A SET counts when the broker reports the value from the scope's dynamic level (DYNAMIC_DEFAULT_BROKER_CONFIG for
    the cluster scope, DYNAMIC_BROKER_CONFIG for broker ids), or, for the cluster scope, when its own per-broker
    value shadows the default (:func:`broker_plan` warned); a DELETE when the value no longer comes from that level.
    A key the broker does not describe (listener-prefixed) counts: Kafka accepted it.

    :return: e.g. ``["broker 2 reports num.io.threads=2 (STATIC_BROKER_CONFIG)"]``.
    """
    level = DYNAMIC_DEFAULT_BROKER_CONFIG if scope == CLUSTER else DYNAMIC_BROKER_CONFIG
    behind = []
    for broker, alter in alters.items():
        for key, new in alter.items():
            entry = described_by_broker[broker].get(key)
            if entry is None:
                continue
            if new is None:
                ok = entry.source != level
            else:
                ok = (entry.source == level and entry.value == new) or (
                    scope == CLUSTER and entry.source == DYNAMIC_BROKER_CONFIG)
            if not ok:
                behind.append(f"broker {broker} reports {key}={entry.value} ({entry.source})")
    return behind


# -- per-key rules ------------------------------------------------------------------------------------------


def listener_base(key: str) -> str | None:
    """``"listener.name.<l>.<base>"`` -> ``<base>`` (Kafka's ``ListenerConfigRegex``, ``[^.]*`` for the listener);
    None for a key without the prefix."""
    m = _LISTENER_KEY.fullmatch(key)
    return m[1] if m else None


def _base_synonym(base: str) -> str:
    """A listener key's base -> the config it overrides (``brokerConfigSynonyms`` with ``matchListenerOverride``:
    ``scram-sha-256.sasl.jaas.config`` -> ``sasl.jaas.config``)."""
    return next((m for m in sorted(LISTENER_MECHANISM_CONFIGS) if base.endswith(m)), base)


def is_store_location(key: str) -> bool:
    """``listener.name.<l>.ssl.keystore.location`` / ``...ssl.truststore.location``: Kafka reloads the store when
    the key is set again, even to the same path, if the file changed (KIP-226; ``SslFactory.reconfigure``
    compares the file's modification time and content): how certificates are rotated without a restart. Such a
    key is always sent, never "already set"."""
    base = listener_base(key)
    return base in ("ssl.keystore.location", "ssl.truststore.location")


def is_per_broker_only(key: str) -> bool:
    """True when Kafka lets ``key`` be set dynamically only per broker, never as the cluster-wide default.

    Rule (``DynamicBrokerConfig.perBrokerConfigs``, one place here): ``key`` is in :data:`PER_BROKER_ONLY`, or it
    is ``listener.name.<l>.<base>`` with ``<base>`` not in :data:`CLUSTER_LEVEL_LISTENER_CONFIGS`. Kafka refuses
    the others at the cluster level with "Cannot update these configs at default cluster level, broker id must
    be specified".
    """
    base = listener_base(key)
    if base is not None:
        return base not in CLUSTER_LEVEL_LISTENER_CONFIGS
    return key in PER_BROKER_ONLY


def update_mode(key: str, read_only: bool) -> Literal["read-only", "per-broker", "cluster-wide"]:
    """Kafka's "Dynamic Update Mode" of a broker config (``DynamicBrokerConfig.dynamicConfigUpdateModes``; ops
    docs "Updating Broker Configs"): ``"read-only"`` (restart), ``"per-broker"`` (:func:`is_per_broker_only`) or
    ``"cluster-wide"`` (also settable per broker, "for testing")."""
    if read_only:
        return "read-only"
    return "per-broker" if is_per_broker_only(key) else "cluster-wide"


def _parse_int(value: object) -> int | None:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def thread_pool_refusal(key: str, new_value: str | int | None, current: str | int | None) -> str | None:
    """Kafka's refusal of a thread-pool resize, or None when it would accept it (or the rule does not apply).

    Rule (``DynamicThreadPool.validateReconfiguration``, ``DataPlaneAcceptor.validateReconfiguration``,
    ``LogCleaner.validateReconfiguration``; keys :data:`THREAD_POOL_CONFIGS`, also under a listener prefix for
    num.network.threads): a new value different from the current one must be >= 1, >= current / 2 (Scala
    ``Int`` division: current 5 allows 2) and <= current * 2. Units: threads.

    :param key: the config name.
    :param new_value: the new thread count; None (a delete), or a value that is not an integer, returns None:
        Kafka itself refuses ill-typed values (``validateOnly``).
    :param current: the broker's current effective value (DescribeConfigs); None = unknown, returns None.
    :return: e.g. ``"num.io.threads 8 -> 20: Kafka resizes a thread pool to at most double the current value
        (8 * 2 = 16) at a time; change it in steps (16, then 20)"``.
    """
    base = listener_base(key) or key
    if base not in THREAD_POOL_CONFIGS or new_value is None or current is None:
        return None
    new, cur = _parse_int(new_value), _parse_int(current)
    if new is None or cur is None or new == cur:
        return None
    if new <= 0:
        return f"{key} {cur} -> {new}: a thread count must be at least 1"
    if new < cur // 2:
        return (f"{key} {cur} -> {new}: Kafka resizes a thread pool to at least half the current value "
                f"({cur} // 2 = {cur // 2}) at a time; change it in steps ({_steps(cur, new)})")
    if new > cur * 2:
        return (f"{key} {cur} -> {new}: Kafka resizes a thread pool to at most double the current value "
                f"({cur} * 2 = {cur * 2}) at a time; change it in steps ({_steps(cur, new)})")
    return None


def _steps(current: int, target: int) -> str:
    steps, value = [], current
    while value != target and len(steps) < 10:
        value = min(target, value * 2) if target > value else max(target, value // 2, 1)
        steps.append(value)
    return ", then ".join(str(s) for s in steps)


def elr_refusals(changes: Mapping[str, str | None], scope: Scope, elr_enabled: bool) -> list[str]:
    """Refusals of ``min.insync.replicas`` changes while Eligible Leader Replicas are on (KIP-966; the
    controller's rule in Kafka 4.1 ``ConfigurationControlManager``; ops docs "Eligible Leader Replicas"):

    * per broker (``scope`` = broker ids), set or delete: "Broker-level min.insync.replicas cannot be altered
      while ELR is enabled.";
    * cluster-wide delete: "Cluster-level min.insync.replicas cannot be removed while ELR is enabled." (a
      cluster-wide SET is allowed; Kafka then clears every partition's ELR, as the docs say).

    Strimzi met both (strimzi-kafka-operator#11685: endless rolls when the broker-level change is retried;
    #11854: the cluster-level delete).

    :param elr_enabled: the finalized feature ``eligible.leader.replicas.version`` is >= 1 (default on new
        4.1 clusters; opt-in on 4.0).
    :return: one message per refused change; empty when none.
    """
    if not elr_enabled or MIN_INSYNC_REPLICAS not in changes:
        return []
    if scope != CLUSTER:
        return [f"{MIN_INSYNC_REPLICAS}: Broker-level min.insync.replicas cannot be altered while ELR is enabled "
                "(KIP-966): change it cluster-wide (scope \"cluster\")"]
    if changes[MIN_INSYNC_REPLICAS] is None:
        return [f"{MIN_INSYNC_REPLICAS}: Cluster-level min.insync.replicas cannot be removed while ELR is enabled "
                "(KIP-966): set the value you want instead"]
    return []


# -- the param -----------------------------------------------------------------------------------------------

_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._\-]*")


def parse_changes(raw: object) -> dict[str, str | None]:
    """The ``changes`` param -> ``{key: value string or None}``, in the order given.

    Values reach Kafka as typed: a JSON string as it is; an integer as its digits (``400`` -> ``"400"``); a
    boolean as Kafka writes one (``true`` -> ``"true"``); a JSON number with a fraction as Python prints it
    (``0.5`` -> ``"0.5"``); ``null`` deletes the key.

    :raises ValueError: not an object; a key that is not a config name (letters, digits, ``.``, ``_``, ``-``:
        what Kafka's broker configs and their listener prefixes use); a value that is a list or an object
        (Kafka's LIST configs are comma-separated strings: ``"a,b"``).
    """
    if not isinstance(raw, Mapping):
        raise ValueError(f"changes must be an object {{\"config.name\": \"value\" or null}}, got {raw!r}")
    out: dict[str, str | None] = {}
    problems = []
    for key, value in raw.items():
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            problems.append(f"{key!r} is not a config name")
            continue
        if value is None or isinstance(value, str):
            out[key] = value
        elif isinstance(value, bool):
            out[key] = "true" if value else "false"
        elif isinstance(value, int | float):
            out[key] = str(value)
        else:
            problems.append(f"{key}: {value!r} is neither a string, a number, a boolean nor null (a list config "
                            "is one comma-separated string)")
    if problems:
        raise ValueError("changes: " + "; ".join(problems))
    return out


_INTEGER_TYPES = frozenset({"INT", "SHORT", "LONG"})


def type_refusal(key: str, value: str | None, entry: DescribedConfig | None) -> str | None:
    """Kafka's refusal of ``value`` for a config of ``entry.type``, or None when the type accepts it (or is not
    reported, or the value is a delete). Kafka's parsing (``ConfigDef.parseType``): BOOLEAN ``true`` / ``false``
    (any case, trimmed), INT / SHORT / LONG an integer in the type's range, DOUBLE a number; other types take
    any string. Ranges and validators beyond the type are Kafka's to judge (``validateOnly`` for dynamic keys,
    start-up for static ones).
    """
    if entry is None or value is None or entry.type is None:
        return None
    kind, text = entry.type.upper(), value.strip()
    if kind == "BOOLEAN" and text.lower() not in ("true", "false"):
        return f"{key}: {value!r} is not a BOOLEAN (true or false)"
    if kind in _INTEGER_TYPES:
        bits = {"SHORT": 16, "INT": 32, "LONG": 64}[kind]
        number = _parse_int(text)
        if number is None or not -(2 ** (bits - 1)) <= number < 2 ** (bits - 1):
            article = "an" if kind == "INT" else "a"
            return f"{key}: {value!r} is not {article} {kind} (a whole number of {bits} bits)"
    if kind == "DOUBLE":
        try:
            float(text)
        except ValueError:
            return f"{key}: {value!r} is not a DOUBLE (a number)"
    return None


# -- classification -----------------------------------------------------------------------------------------


def _known(key: str, described: Mapping[str, DescribedConfig]) -> bool:
    if key in described:
        return True
    base = listener_base(key)
    return base is not None and bool(base) and (_base_synonym(base) in described or base in described)


def _is_dynamic(key: str, described: Mapping[str, DescribedConfig]) -> bool:
    """A known key: dynamic? Listener-prefixed keys follow Kafka's listener rule (:data:`LISTENER_DYNAMIC_BASES`),
    the others DescribeConfigs' ``read_only``."""
    base = listener_base(key)
    if base is not None:
        return base in LISTENER_DYNAMIC_BASES
    return not described[key].read_only


def classify(changes: Mapping[str, str | None], described: Mapping[str, DescribedConfig]) -> Classification:
    """Sort the keys of ``changes`` by how they change on a broker described by ``described`` (name ->
    :class:`DescribedConfig`, DescribeConfigs of one broker).

    * unknown: neither described nor ``listener.name.<l>.<a described config>`` (with a SASL mechanism prefix
      for :data:`LISTENER_MECHANISM_CONFIGS`); "did you mean" = ``difflib.get_close_matches`` (up to 3, cutoff
      0.6) among the described names;
    * dynamic: ``read_only`` False; for listener-prefixed keys: the base is in :data:`LISTENER_DYNAMIC_BASES`
      (what Kafka lets an existing listener change; DescribeConfigs does not describe such keys' mode);
    * static: the rest of the known keys.

    Raises nothing; ``changes`` values are not looked at.
    """
    dynamic: list[str] = []
    static: list[str] = []
    unknown: dict[str, tuple[str, ...]] = {}
    names = sorted(described)
    for key in changes:
        if not _known(key, described):
            unknown[key] = tuple(difflib.get_close_matches(key, names, n=3, cutoff=0.6))
        elif _is_dynamic(key, described):
            dynamic.append(key)
        else:
            static.append(key)
    return Classification(dynamic=tuple(dynamic), static=tuple(static), unknown=unknown)


def _unknown_text(key: str, matches: Sequence[str]) -> str:
    hint = f": did you mean {' or '.join(matches)}?" if matches else ""
    return f"{key}: not a broker config this cluster knows{hint}"


def check_scope(scope: object, brokers: Sequence[int], down: Sequence[int] = ()) -> list[str]:
    """Refusals of a malformed scope, or of one that reaches a broker that is down: not ``"cluster"`` nor a non-empty
    list of distinct broker ids among ``brokers`` (the described, live brokers).

    :param down: brokers the cluster knows that are not registered (``ClusterState.down_broker_ids``: in a replica
        list, stopped or crashed). A change whose scope holds one is refused, naming it: its ``server.properties``
        cannot be read or edited through the cluster, nor its running config compared, so the run would end with
        that broker unchanged while saying the cluster was changed. ``"cluster"`` holds every broker.
    """
    stopped = sorted(set(down))
    remedy = ("start it (them) and trigger again, or name the live brokers as the scope (their dynamic keys are "
              "then set per broker)")
    if scope == CLUSTER:
        return [f"brokers {stopped} are down (in replica lists, not registered): a cluster-wide change would leave "
                f"their server.properties unchanged; {remedy}"] if stopped else []
    if isinstance(scope, str | bytes) or not isinstance(scope, Sequence) or not scope:
        return [f"scope {scope!r}: \"cluster\" or a non-empty list of broker ids"]
    if not all(isinstance(b, int) and not isinstance(b, bool) for b in scope):
        return [f"scope {list(scope)!r}: broker ids are integers"]
    reasons = []
    if len(set(scope)) != len(scope):
        reasons.append(f"scope {list(scope)}: a broker is named twice")
    if dead := sorted(set(scope) & set(stopped)):
        reasons.append(f"scope: brokers {dead} are down (in replica lists, not registered): their configs cannot be "
                       f"read or changed; start them and trigger again, or leave them out of the scope")
    missing = sorted(set(scope) - set(brokers) - set(stopped))
    if missing:
        reasons.append(f"scope: brokers {missing} are not among the described brokers {sorted(brokers)}")
    return reasons


def refusals(changes: Mapping[str, str | None], scope: Scope,
             described_by_broker: Mapping[int, Mapping[str, DescribedConfig]], elr_enabled: bool) -> list[str]:
    """Everything wrong with a change before anything is touched; empty = it may go ahead.

    :param changes: ``{key: new value}``, None = delete.
    :param scope: ``"cluster"`` or the broker ids to change (:func:`check_scope`).
    :param described_by_broker: broker id -> its DescribeConfigs (name -> :class:`DescribedConfig`); every
        broker of the cluster for a cluster-wide change, at least the scope's brokers otherwise.
    :param elr_enabled: ``eligible.leader.replicas.version`` >= 1 (:func:`elr_refusals`).
    :return: one message per problem, e.g. ``"log.retension.hours: not a broker config this cluster knows: did
        you mean log.retention.hours?"``.

    Refused: no changes; a bad scope; unknown keys (on any broker in scope); a node's identity
    (:data:`NODE_IDENTITY_CONFIGS`: ``broker.id``, ``node.id``, ``process.roles``, the voters, the migration switch); a
    per-broker-only dynamic key (:func:`is_per_broker_only`) with the cluster scope; an SSL store key without a
    listener prefix changed dynamically (``DynamicBrokerConfig.validateConfigs``); the ELR rules
    (:func:`elr_refusals`); a thread-pool resize beyond Kafka's 2x rule against each broker's current value
    (:func:`thread_pool_refusal`; Kafka checks only the broker that takes the request, so another broker with a
    different current value would fail to apply a cluster-wide value); a password config (:func:`_looks_secret` or
    described ``sensitive``: secrets never go in params); a value of the wrong type (:func:`type_refusal`, the type
    DescribeConfigs reports).
    Ranges and validators are Kafka's: the operator sends dynamic keys with ``validateOnly`` first; static values
    Kafka checks at start-up.
    """
    if not changes:
        return ["no config changes given"]
    reasons = check_scope(scope, list(described_by_broker))
    if reasons:
        return reasons
    brokers = sorted(described_by_broker) if scope == CLUSTER else list(scope)
    if not brokers:
        return ["no brokers described"]
    unknown: dict[str, tuple[str, ...]] = {}
    dynamic: dict[str, None] = {}
    for broker in brokers:
        sorted_keys = classify(changes, described_by_broker[broker])
        for key, matches in sorted_keys.unknown.items():
            unknown.setdefault(key, matches)
        dynamic.update(dict.fromkeys(sorted_keys.dynamic))
    reasons += [_unknown_text(key, matches) for key, matches in unknown.items()]
    reasons += [f"{key}: not changed by a config change: {NODE_IDENTITY_CONFIGS[key]}"
                for key in changes if key in NODE_IDENTITY_CONFIGS and key not in unknown]
    for key in changes:
        if key in unknown or key not in dynamic:
            continue
        if scope == CLUSTER and is_per_broker_only(key):
            reasons.append(f"{key}: Kafka sets it per broker only (DynamicBrokerConfig.PerBrokerConfigs), not as "
                           "the cluster-wide default: give the broker ids as the scope")
        if key in DYNAMIC_SECURITY_CONFIGS:
            reasons.append(f"{key}: Kafka updates it dynamically only per listener: use "
                           f"listener.name.<listener>.{key} (DynamicBrokerConfig.validateConfigs)")
    for key, value in changes.items():
        if key in unknown:
            continue
        entries = [_entry(key, described_by_broker[b]) for b in brokers]
        if any(e is not None and e.sensitive for e in entries) or _looks_secret(key):
            reasons.append(f"{key}: a password config: secrets never go in a run's params (they are kept in its "
                           "record and logs); set it on the hosts or through the connection's owner")
            continue
        refusal = next((r for e in entries if (r := type_refusal(key, value, e))), None)
        if refusal:
            reasons.append(refusal)
    reasons += elr_refusals(changes, scope, elr_enabled)
    for key, value in changes.items():
        if key not in dynamic:
            continue
        for broker in brokers:
            current = _current(key, described_by_broker[broker])
            refusal = thread_pool_refusal(key, value, current)
            if refusal:
                reasons.append(f"broker {broker}: {refusal}")
    return reasons


def _entry(key: str, described: Mapping[str, DescribedConfig]) -> DescribedConfig | None:
    """The described config ``key`` is, or (a listener-prefixed key) overrides."""
    entry = described.get(key)
    if entry is None and listener_base(key) is not None:
        entry = described.get(_base_synonym(listener_base(key) or ""))
    return entry


def _current(key: str, described: Mapping[str, DescribedConfig]) -> str | None:
    entry = _entry(key, described)
    return entry.value if entry is not None else None


def _looks_secret(key: str) -> bool:
    """A password-type name Kafka would hide (``*.password``, ``sasl.jaas.config``): refused even when the
    broker does not describe it (a listener-prefixed key not set yet)."""
    base = listener_base(key) or key
    return base.endswith(".password") or base.endswith("sasl.jaas.config") or base == "ssl.keystore.key"


# -- per-broker plan ----------------------------------------------------------------------------------------


def _show(value: str | None) -> str:
    return "unset" if value is None else (value if value != "" else '""')


def broker_plan(broker_id: int, changes: Mapping[str, str | None], file_text: str,
                described: Mapping[str, DescribedConfig], *, scope: Scope = CLUSTER) -> BrokerConfigPlan:
    """What broker ``broker_id`` needs for ``changes`` (call :func:`refusals` first).

    :param broker_id: the broker.
    :param changes: ``{key: new value}``, None = delete.
    :param file_text: the broker's ``server.properties`` as it is now.
    :param described: the broker's DescribeConfigs (name -> :class:`DescribedConfig`).
    :param scope: the change's scope; only tells which dynamic level a key must already be set at to count as
        done (``DYNAMIC_DEFAULT_BROKER_CONFIG`` for ``"cluster"``, ``DYNAMIC_BROKER_CONFIG`` for broker ids).
    :raises ValueError: keys the broker does not know (:func:`classify`); a malformed ``\\uXXXX`` escape in
        ``file_text``.

    Static (read-only) keys: decided by the FILE value, not the effective one, so that a re-run after success
    has nothing to do and a value Kafka reports differently (a synonym, a normalised list) cannot cause a restart
    loop (strimzi#7391). A differing file value -> the file is edited and ``needs_restart``; the same file value
    -> "nothing to do" (listed in ``pending`` when the broker still reports another static start-up value).

    Dynamic keys: altered unless the broker already reports the new value from the scope's dynamic level (a
    sensitive value is hidden, so always altered); the file gets the value too, so that the file says what the
    broker runs. Kafka's ops docs ("Updating Broker Configs") give the precedence: dynamic per-broker, then
    dynamic cluster-wide (stored in ZooKeeper / the KRaft metadata log), then ``server.properties``, then the
    default; so the dynamic value keeps winning and the file only matters if it is deleted. Deleting a dynamic
    key that the file also sets removes it from the file and needs a restart: after the DELETE the broker falls
    back to the file value it read at start-up, not to Kafka's default.
    """
    classes = classify(changes, described)
    if classes.unknown:
        raise ValueError(f"unknown broker configs {sorted(classes.unknown)}: call refusals() first")
    old_file = properties_file.parse(file_text)
    file_edits: dict[str, str | None] = {}
    alter: dict[str, str | None] = {}
    static: dict[str, tuple[str | None, str | None]] = {}
    reasons: list[str] = []
    unchanged: list[str] = []
    pending: list[str] = []
    shadowed: list[str] = []
    needs_restart = False
    level = DYNAMIC_DEFAULT_BROKER_CONFIG if scope == CLUSTER else DYNAMIC_BROKER_CONFIG
    level_text = "the cluster-wide default" if scope == CLUSTER else f"broker {broker_id}"
    for key, new in changes.items():
        in_file = old_file.get(key)
        entry = described.get(key)
        if key in classes.static:
            if in_file == new:
                unchanged.append(key)
                note = ""
                if entry is not None and not entry.sensitive and not same_value(new, entry):
                    pending.append(key)
                    note = (f" (the broker still runs {_show(entry.value)} from start-up: it takes effect at its "
                            "next restart)")
                if new is None:
                    reasons.append(f"{key} not in server.properties: nothing to do{note}")
                else:
                    reasons.append(f"{key} already {_show(new)} in server.properties: nothing to do{note}")
                continue
            static[key] = (in_file, new)
            file_edits[key] = new
            needs_restart = True
            target = f"{_show(new)} in server.properties" if new is not None else "removed from server.properties"
            reasons.append(f"{key} {_show(in_file)} -> {target}, read-only: restart")
            continue
        # dynamic
        current = entry.value if entry is not None else None
        source = entry.source if entry is not None else None
        sensitive = entry is not None and entry.sensitive
        shown = "(hidden)" if sensitive else _show(current)
        if new is None:
            set_at_level = source == DYNAMIC_BROKER_CONFIG or (scope == CLUSTER and source == level)
            if set_at_level:
                alter[key] = None
            if in_file is not None:
                file_edits[key] = None
                needs_restart = True
            if not set_at_level and in_file is None:
                unchanged.append(key)
                if source == STATIC_BROKER_CONFIG:
                    pending.append(key)
                kept = ""
                if scope != CLUSTER and source == DYNAMIC_DEFAULT_BROKER_CONFIG:
                    kept = (f" (broker {broker_id} keeps the cluster-wide default {shown}, set for every broker: "
                            'delete it with scope "cluster" to change that)')
                reasons.append(f"{key} not set dynamically at {level_text} nor in server.properties: nothing "
                               f"to do{kept}")
                continue
            parts = []
            if set_at_level:
                parts.append(f"{key} {shown} ({source}) -> deleted dynamically at {level_text}")
            if in_file is not None:
                parts.append(f"server.properties {_show(in_file)} -> removed: the broker falls back to the value it "
                             "read at start-up until it restarts: restart")
            else:
                parts.append("no restart")
            if scope == CLUSTER and source == DYNAMIC_BROKER_CONFIG:
                parts.append(f"warning: broker {broker_id} has its own dynamic value {shown}, which the cluster-wide "
                             "delete leaves in place: delete it there too")
            reasons.append("; ".join(parts))
            continue
        done = not sensitive and source == level and current == new and not is_store_location(key)
        if not done:
            alter[key] = new
        if in_file != new:
            file_edits[key] = new
        if done and in_file == new:
            unchanged.append(key)
            reasons.append(f"{key} already {_show(new)} ({source}) and in server.properties: nothing to do")
            continue
        if done:
            parts = [f"{key} already {_show(new)} ({source})"]
        else:
            parts = [f"{key} {shown} -> {_show(new)} dynamically at {level_text}, no restart"]
        if in_file != new:
            parts.append(f"server.properties {_show(in_file)} -> {_show(new)} to match")
        if scope == CLUSTER and source == DYNAMIC_BROKER_CONFIG and (sensitive or current != new):
            shadowed.append(f"broker {broker_id}: {key}: its own dynamic value {shown} (set for broker {broker_id} "
                            f"alone) takes precedence over the cluster-wide default {_show(new)}, so the change "
                            f"would not reach it: change it there (scope [{broker_id}]) or delete it there first "
                            f"({{\"{key}\": null}} with scope [{broker_id}])")
        reasons.append("; ".join(parts))
    warnings, shadows = _synonym_shadows(changes, old_file, described)
    reasons += warnings
    shadowed += [f"broker {broker_id}: {text}" for text in shadows]
    new_text = properties_file.edit(file_text, file_edits) if file_edits else file_text
    return BrokerConfigPlan(broker_id=broker_id, alter=alter, static=static, file_text=new_text,
                            file_changes=properties_file.diff(file_text, new_text), needs_restart=needs_restart,
                            reasons=reasons, unchanged=tuple(unchanged), pending=tuple(pending),
                            shadowed=tuple(shadowed))


def _synonym_shadows(changes: Mapping[str, str | None], file_values: Mapping[str, str],
                     described: Mapping[str, DescribedConfig]) -> tuple[list[str], list[str]]:
    """A changed key shadowed by a higher-precedence synonym (:data:`SYNONYMS`: ``log.retention.ms`` wins over
    ``log.retention.hours``) that stays set: (warnings: the synonym is set by the same change, which the caller
    chose; shadows: the synonym is set in ``server.properties`` or dynamically and the change leaves it, so the
    change has no effect). DescribeConfigs reports a synonym's source as that of the whole group, so only a
    dynamic source of the synonym itself counts."""
    warnings, shadows = [], []
    for group in SYNONYMS:
        for rank, key in enumerate(group):
            if key not in changes or changes[key] is None:
                continue
            for higher in group[:rank]:
                if higher in changes and changes[higher] is None:
                    continue
                entry = described.get(higher)
                dynamic = entry is not None and entry.source in (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG)
                if higher in changes:
                    warnings.append(f"warning: {key} has no effect while {higher} is set (it takes precedence, "
                                    f"Kafka's broker config synonyms): this change sets both")
                    break
                if higher in file_values or dynamic:
                    where = "in server.properties" if higher in file_values else f"dynamically ({entry.source})"
                    shadows.append(f"{key}: no effect while {higher} is set {where} (it takes precedence, Kafka's "
                                   f"broker config synonyms): change {higher} instead, or delete it in the same "
                                   f"change ({{\"{higher}\": null}})")
                    break
    return warnings, shadows


# -- the roll's needs-action rule -----------------------------------------------------------------------------


def same_value(file_value: str | None, entry: DescribedConfig) -> bool:
    """Whether a broker runs ``file_value`` (a ``server.properties`` value; None = the key is absent) for the
    read-only config ``entry`` describes (DescribeConfigs of the running broker).

    Absent from the file: the broker runs Kafka's default (``source`` DEFAULT_CONFIG) -> same; a value it read
    at start-up (STATIC_BROKER_CONFIG) -> differs (the key was removed since). Present: compared as Kafka parses
    the type (:data:`DescribedConfig.type`): BOOLEAN case-insensitively, INT / SHORT / LONG / DOUBLE as numbers,
    LIST item by item with the spaces around commas dropped (``ConfigDef.convertToString`` joins with ``,``),
    other types as trimmed text. A sensitive entry (value hidden) counts as the same: nothing to compare, and
    :func:`refusals` keeps passwords out of changes.
    """
    if entry.sensitive:
        return True
    if file_value is None:
        return entry.source not in (STATIC_BROKER_CONFIG,)
    if entry.value is None:
        return file_value.strip() == ""
    kind = (entry.type or "").upper()
    a, b = file_value.strip(), entry.value.strip()
    if kind == "BOOLEAN":
        return a.lower() == b.lower()
    if kind in _INTEGER_TYPES:
        return _parse_int(a) is not None and _parse_int(a) == _parse_int(b)
    if kind == "DOUBLE":
        try:
            return float(a) == float(b)
        except ValueError:
            return a == b
    if kind == "LIST":
        return [x.strip() for x in a.split(",") if x.strip()] == [x.strip() for x in b.split(",") if x.strip()]
    return a == b


def restart_reasons(changes: Mapping[str, str | None], file_text: str,
                    described: Mapping[str, DescribedConfig]) -> list[str]:
    """Why a broker must restart for ``changes``: one sentence per key whose ``server.properties`` value the
    running broker (``described``, DescribeConfigs) does not run, e.g. ``"queued.max.requests 400 in
    server.properties, the broker runs 500 (DEFAULT_CONFIG, read-only): restart"``; empty = nothing to restart for.

    Compared: read-only keys; and dynamic keys the change deletes while no dynamic value is in force any more
    (the broker then runs what it read from the file at start-up). Not compared: dynamic keys the change sets
    (the dynamic value wins over the file), keys the broker does not describe (listener-prefixed ones: dynamic).
    The rule compares the FILE with the running config, never the effective value with the wanted one, so a
    broker restarted on the edited file has nothing left to do and no value Kafka reports differently can loop
    (strimzi#7391).

    :raises ValueError: a malformed ``\\uXXXX`` escape in ``file_text``.
    """
    values = properties_file.parse(file_text)
    reasons = []
    for key, new in changes.items():
        entry = described.get(key)
        if entry is None:
            continue
        if not entry.read_only and (new is not None or entry.source in (DYNAMIC_BROKER_CONFIG,
                                                                         DYNAMIC_DEFAULT_BROKER_CONFIG)):
            continue
        if same_value(values.get(key), entry):
            continue
        in_file = f"{_show(values.get(key))} in server.properties" if key in values else "not in server.properties"
        mode = "read-only" if entry.read_only else "its dynamic value deleted"
        reasons.append(f"{key} {in_file}, the broker runs {_show(entry.value)} ({entry.source}, {mode}): restart")
    return reasons


def in_scope(broker_id: int, scope: Scope) -> bool:
    """Whether broker ``broker_id`` is in ``scope`` (every broker for ``"cluster"``)."""
    return scope == CLUSTER or broker_id in list(scope)


def needs_restart(broker_id: int, facts: Mapping[str, object], settings: Mapping[str, object]) -> tuple[bool, str]:
    """The config change's needs-action rule (``kafka_ops.roll_spec.NeedsAction``): restart the broker when
    :func:`restart_reasons` names a key, else leave it alone with the reason.

    :param facts: ``{"file_text": the broker's server.properties, "described": name -> DescribedConfig}`` (read
        at the broker's turn); in a dry run the file is the one the change would write (nothing was written).
    :param settings: ``changes`` (the param, :func:`parse_changes`), ``scope``.
    """
    if not in_scope(broker_id, settings.get("scope") or CLUSTER):  # type: ignore[arg-type]
        return False, f"not in the change's scope {settings.get('scope')}"
    changes = parse_changes(settings.get("changes") or {})
    reasons = restart_reasons(changes, str(facts["file_text"]), facts["described"])  # type: ignore[arg-type]
    if reasons:
        return True, "; ".join(reasons)
    return False, "server.properties and the running config agree on " + ", ".join(changes)
