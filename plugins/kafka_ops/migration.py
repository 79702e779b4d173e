"""The ZooKeeper-to-KRaft migration's rules (KIP-866; Kafka 3.9 docs, ops.html "ZooKeeper to KRaft Migration").

Every Kafka since 4.0 runs without ZooKeeper and starts only from a finished migration, which only Kafka 3.9 (the
bridge release) can run. The phases, as the docs give them:

0. a ZooKeeper-mode cluster, every broker on 3.9 with ``inter.broker.protocol.version`` 3.9 (no IBP or
   metadata.version change during the migration);
1. KRaft controllers provisioned beside it: ``process.roles=controller``, node ids that collide with no broker
   id, the cluster's id (ZooKeeper ``/cluster/id``) in their formatted storage, ``zookeeper.connect`` and
   ``zookeeper.metadata.migration.enable=true``; ready when each controller's ApiVersions says
   ``ZkMigrationReady`` and the quorum has a leader;
2. broker roll 1: each broker keeps ZooKeeper mode and gets the migration flag, the controller listener and the
   quorum's voters. When every broker runs so, the active controller copies the metadata from ZooKeeper
   ("Completed migration of metadata from ZooKeeper to KRaft"), writes ``/migration`` and holds ``/controller``;
   from then on it writes every metadata change to both (dual write);
3. broker roll 2: each broker becomes ``process.roles=broker`` with ``node.id`` = its old ``broker.id``, without
   ``zookeeper.*``, the flag and the IBP; done when no broker registers in ZooKeeper (``/brokers/ids`` empty);
4. the controllers restarted without the flag and ``zookeeper.connect``: finalized (ZkMigrationState
   POST_MIGRATION). There is no way back from here.

Before phase 4 a migration can be reverted (the docs' "Reverting to ZooKeeper mode During the Migration"): brokers
that are KRaft brokers go back to ZooKeeper mode with the flag (roll), the controllers are stopped and their
``__cluster_metadata`` removed (Strimzi's and cp-ansible's lesson: a left-over log makes a later migration start
from stale metadata), ``/controller`` and ``/migration`` deleted (a broker becomes the controller again), then the
brokers lose the flag and the controller settings (roll).

Where the cluster is comes from the cluster itself (:class:`MigrationView`): each broker's running config
(DescribeConfigs: ``process.roles``, the flag), each controller's ApiVersions (``ZkMigrationReady``; a controller
whose migration is off answers false), and ZooKeeper's ``/migration``, ``/controller`` and ``/brokers/ids``. So a run
started on a half-migrated cluster continues from there, and each roll's needs-action rule leaves a node that is
already where the phase wants it alone.

Pure: no Airflow, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from typing import Any

import javaproperties

#: The broker and controller config that turns the migration on (KIP-866).
FLAG = "zookeeper.metadata.migration.enable"
#: The controllers' listener name (Kafka's docs and examples use it; ``controller.listener.names``).
CONTROLLER_LISTENER = "CONTROLLER"
DEFAULT_CONTROLLER_PORT = 9093
#: The only release that migrates (3.9), and the IBP every broker must run during it.
BRIDGE_RELEASE = "3.9"
#: Kafka's ZooKeeper-mode ACL authorizer and its KRaft replacement (docs: "the authorizer must be switched").
ZK_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
KRAFT_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
#: Keys a ZooKeeper-mode broker has that a KRaft broker must not (the docs' phase 3 file).
ZOOKEEPER_ONLY = ("broker.id", "inter.broker.protocol.version", "log.message.format.version", FLAG)
#: What a controller keeps its metadata log under.
METADATA_LOG = "__cluster_metadata-0"


class BrokerMode(StrEnum):
    """How a broker runs now, from its running config."""

    ZOOKEEPER = "zookeeper"  # ZooKeeper mode, no migration flag
    MIGRATING = "migrating"  # ZooKeeper mode with zookeeper.metadata.migration.enable=true (phase 2)
    KRAFT = "kraft"  # process.roles=broker (phase 3 on)


class ControllerState(StrEnum):
    """A provisioned controller's state, from its ApiVersions answer."""

    ABSENT = "absent"  # does not answer (not provisioned, or stopped)
    MIGRATING = "migrating"  # answers with ZkMigrationReady: its migration flag is on
    KRAFT = "kraft"  # answers without: finalized (or never migrating)


class Phase(IntEnum):
    """The phase a cluster has completed (the docs' numbering)."""

    ZOOKEEPER = 0
    CONTROLLERS = 1
    MIGRATED = 2
    KRAFT_BROKERS = 3
    FINALIZED = 4

    @property
    def describe(self) -> str:
        return {0: "ZooKeeper mode, no KRaft controller running",
                1: "KRaft controllers run in migration mode; the brokers are not all migrating yet",
                2: "metadata migrated: every broker in ZooKeeper mode with the migration flag, the KRaft controller "
                   "writes ZooKeeper too (dual write)",
                3: "every broker a KRaft broker; the controllers still write ZooKeeper (migration not finalized)",
                4: "finalized: KRaft mode, ZooKeeper no longer used"}[int(self)]


def config_value(entry: Any) -> str:
    """A DescribeConfigs entry's value (a ``DescribedConfig`` or a plain string)."""
    value = getattr(entry, "value", entry)
    return "" if value is None else str(value)


def broker_mode(described: Mapping[str, Any]) -> BrokerMode:
    """A broker's mode from its own DescribeConfigs (name -> entry with ``.value``, or name -> value):
    ``process.roles`` naming ``broker`` = a KRaft broker; the migration flag ``true`` = migrating."""
    roles = {r.strip() for r in config_value(described.get("process.roles", "")).split(",") if r.strip()}
    if "broker" in roles:
        return BrokerMode.KRAFT
    if config_value(described.get(FLAG, "false")).strip().lower() == "true":
        return BrokerMode.MIGRATING
    return BrokerMode.ZOOKEEPER


def controller_state(answer: Mapping[str, Any] | None) -> ControllerState:
    """A controller's state from its ApiVersions answer (``{"zk_migration_ready": bool}``), None = no answer."""
    if answer is None:
        return ControllerState.ABSENT
    return ControllerState.MIGRATING if answer.get("zk_migration_ready") else ControllerState.KRAFT


@dataclass(frozen=True)
class MigrationView:
    """What the cluster shows about the migration.

    :param brokers: broker id -> :class:`BrokerMode` (every broker in the metadata).
    :param controllers: controller node id -> :class:`ControllerState` (every controller of the profile).
    :param migration_znode: ``/migration``'s JSON (``kraft_controller_id``, ``kraft_metadata_offset``, ...) or None.
    :param controller_znode: ``/controller``'s JSON (``brokerid``, ``kraftControllerEpoch``) or None.
    :param zk_registered: broker ids under ``/brokers/ids`` (ZooKeeper-mode registrations).
    """

    brokers: Mapping[int, BrokerMode]
    controllers: Mapping[int, ControllerState]
    migration_znode: Mapping[str, Any] | None = None
    controller_znode: Mapping[str, Any] | None = None
    zk_registered: tuple[int, ...] = field(default_factory=tuple)

    def with_mode(self, mode: BrokerMode) -> list[int]:
        return sorted(b for b, m in self.brokers.items() if m is mode)

    def in_state(self, state: ControllerState) -> list[int]:
        return sorted(c for c, s in self.controllers.items() if s is state)

    def metadata_migrated(self) -> bool:
        """The KRaft controller copied ZooKeeper's metadata and holds ``/controller`` (``/migration`` names a
        metadata offset, ``/controller`` a controller id)."""
        m, c = self.migration_znode or {}, self.controller_znode or {}
        return (int(m.get("kraft_metadata_offset", -1)) >= 0 and int(m.get("kraft_controller_id", -1)) >= 0
                and int(c.get("brokerid", -1)) in self.controllers)

    def phase(self) -> Phase:
        """The last phase the cluster completed (a roll under way counts as the phase before it)."""
        brokers = set(self.brokers.values())
        if self.controllers and self.in_state(ControllerState.KRAFT) == sorted(self.controllers) \
                and brokers <= {BrokerMode.KRAFT}:
            return Phase.FINALIZED
        if brokers and brokers <= {BrokerMode.KRAFT}:
            return Phase.KRAFT_BROKERS
        if BrokerMode.KRAFT in brokers or (brokers <= {BrokerMode.MIGRATING} and self.metadata_migrated()):
            return Phase.MIGRATED
        if self.in_state(ControllerState.MIGRATING):
            return Phase.CONTROLLERS
        return Phase.ZOOKEEPER

    def shows(self, until: str) -> bool:
        """Whether the cluster shows the end of a step: ``migrated`` (every broker flagged, the metadata copied),
        ``kraft_brokers`` (every broker a KRaft broker, none registered in ZooKeeper), ``finalized`` (phase 4 done;
        the caller also asks the brokers for DescribeQuorum and metadata.version), ``zookeeper`` (a revert's end: no
        controller answers, every broker in plain ZooKeeper mode, ``/migration`` gone, a broker holds
        ``/controller``).

        :raises ValueError: another ``until``.
        """
        brokers = set(self.brokers.values())
        if until == "migrated":
            return brokers <= {BrokerMode.MIGRATING, BrokerMode.KRAFT} and self.metadata_migrated()
        if until == "kraft_brokers":
            return brokers <= {BrokerMode.KRAFT} and not self.zk_registered
        if until == "finalized":
            return self.phase() is Phase.FINALIZED
        if until == "zookeeper":
            holder = int((self.controller_znode or {}).get("brokerid", -1))
            silent = self.in_state(ControllerState.ABSENT) == sorted(self.controllers)
            return (brokers <= {BrokerMode.ZOOKEEPER} and silent and self.migration_znode is None
                    and holder in self.brokers)
        raise ValueError(f"unknown step end {until!r}")

    def describe(self) -> str:
        """One line: the phase and who is where."""
        parts = [f"phase {int(self.phase())} done ({self.phase().describe})"]
        for mode in BrokerMode:
            ids = self.with_mode(mode)
            if ids:
                parts.append(f"brokers {ids} {mode.value}")
        for state in ControllerState:
            ids = self.in_state(state)
            if ids:
                parts.append(f"controllers {ids} {state.value}")
        if self.migration_znode is not None:
            parts.append(f"/migration offset {self.migration_znode.get('kraft_metadata_offset')}")
        if self.controller_znode is not None:
            parts.append(f"/controller held by {self.controller_znode.get('brokerid')}")
        return "; ".join(parts)


# --- what the migration may start from -------------------------------------------------------------------------

@dataclass(frozen=True)
class BrokerFacts:
    """One broker as the migration's check reads it: its release (major.minor from ApiVersions), its running
    config's IBP and whether ``broker.id`` was set in its file (``STATIC_BROKER_CONFIG``), its mode."""

    broker_id: int
    release: str | None
    ibp: str
    broker_id_static: bool
    mode: BrokerMode

    @classmethod
    def read(cls, broker_id: int, described: Mapping[str, Any], release: str | None) -> BrokerFacts:
        """From the broker's DescribeConfigs (name -> entry with ``.value`` / ``.source``) and its release."""
        source = getattr(described.get("broker.id"), "source", "")
        return cls(broker_id, release, config_value(described.get("inter.broker.protocol.version", "")),
                   source == "STATIC_BROKER_CONFIG", broker_mode(described))


def refusals(brokers: Iterable[BrokerFacts], controller_hosts: Mapping[int, str],
             controller_properties: Mapping[str, str], *, zookeeper: str | None, cluster_id: str | None,
             reassigning: int, offline: int, urp: int) -> list[str]:
    """Why the migration must not start (or continue) now, as sentences; empty = it may.

    The rules (Kafka 3.9 docs, "ZooKeeper to KRaft Migration", "Preparing for migration" and "Limitations"): every
    ZooKeeper-mode broker on 3.9 with IBP 3.9; ``broker.id`` set explicitly (generated ids cannot be a KRaft
    ``node.id``); controllers listed in the profile with node ids that collide with no broker id; where they keep
    their metadata (``log.dirs`` or ``metadata.log.dir`` in ``controller_properties``); ZooKeeper reachable with
    the cluster's id; no reassignment running; nothing offline or under-replicated.
    """
    out: list[str] = []
    brokers = list(brokers)
    zk_brokers = [b for b in brokers if b.mode is not BrokerMode.KRAFT]
    wrong_release = [f"{b.broker_id} ({b.release or 'unknown'})" for b in zk_brokers
                     if b.release != BRIDGE_RELEASE]
    if wrong_release:
        out.append(f"brokers must run Kafka {BRIDGE_RELEASE}.x to migrate (the bridge release): brokers "
                   f"{', '.join(wrong_release)}; upgrade first (kafka_upgrade)")
    wrong_ibp = [f"{b.broker_id} ({b.ibp or 'unset'})" for b in zk_brokers
                 if b.ibp.split("-")[0] != BRIDGE_RELEASE]
    if wrong_ibp:
        out.append(f"inter.broker.protocol.version must be {BRIDGE_RELEASE} on every broker before the migration "
                   f"(it cannot change during it): brokers {', '.join(wrong_ibp)}; finish the upgrade's ibp phase")
    generated = [b.broker_id for b in zk_brokers if not b.broker_id_static]
    if generated:
        out.append(f"brokers {generated} have no broker.id in server.properties (a generated id cannot become a "
                   "KRaft node.id): set it explicitly first")
    ids = {b.broker_id for b in brokers}
    if not controller_hosts:
        out.append("the connection lists no controller_hosts: name the hosts of the KRaft controllers "
                   "(node id -> host), 3 (or 5) of them")
    clash = sorted(ids & set(controller_hosts))
    if clash:
        out.append(f"controller node ids {clash} are broker ids too: a controller's node.id must differ from every "
                   "broker id (choose others in controller_hosts)")
    if not (controller_properties.get("log.dirs") or controller_properties.get("metadata.log.dir")):
        out.append("the connection's controller_properties name no log.dirs (or metadata.log.dir): where the "
                   "controllers keep the metadata log")
    if not zookeeper:
        out.append("the connection names no zookeeper: the migration reads and the controllers write it")
    elif not cluster_id:
        out.append("ZooKeeper holds no /cluster/id: is this the cluster's ZooKeeper (and chroot)?")
    if reassigning:
        out.append(f"{reassigning} partition reassignments are running: let them finish first")
    if offline:
        out.append(f"{offline} partitions are offline")
    if urp:
        out.append(f"{urp} partitions are under-replicated: wait until every replica is in sync")
    return out


# --- the files ------------------------------------------------------------------------------------------------

def controller_port(controller_properties: Mapping[str, str]) -> int:
    """The controllers' port: from ``listeners`` in the profile's ``controller_properties`` (the CONTROLLER
    listener's port), else 9093."""
    for listener in str(controller_properties.get("listeners") or "").split(","):
        name, _, rest = listener.strip().partition("://")
        if name == CONTROLLER_LISTENER and rest.rpartition(":")[2].isdigit():
            return int(rest.rpartition(":")[2])
    return DEFAULT_CONTROLLER_PORT


def voters(controller_hosts: Mapping[int, str], port: int) -> str:
    """``controller.quorum.voters``: ``100@host:9093,...`` by node id (a static quorum: Kafka 3.9's migration
    does not support a dynamic one, KIP-853)."""
    return ",".join(f"{i}@{h}:{port}" for i, h in sorted(controller_hosts.items()))


def _with_controller_protocol(protocol_map: str) -> str:
    """``listener.security.protocol.map`` with ``CONTROLLER:PLAINTEXT`` added when it names no CONTROLLER."""
    entries = [e.strip() for e in protocol_map.split(",") if e.strip()]
    if not any(e.split(":")[0] == CONTROLLER_LISTENER for e in entries):
        entries.append(f"{CONTROLLER_LISTENER}:PLAINTEXT")
    return ",".join(entries)


def _without_controller_protocol(protocol_map: str) -> str | None:
    entries = [e.strip() for e in protocol_map.split(",") if e.strip() and e.split(":")[0] != CONTROLLER_LISTENER]
    return ",".join(entries) or None


#: Kafka's default listener.security.protocol.map (KafkaConfig), used when a file sets none.
DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"


def controller_file(node_id: int, host: str, controller_hosts: Mapping[int, str],
                    controller_properties: Mapping[str, str], *, zookeeper: str, inter_broker_listener: str,
                    protocol_map: str) -> str:
    """A migrating controller's ``server.properties`` (phase 1; the docs' controller example): the profile's
    ``controller_properties`` (``{broker_id}`` / ``{host}`` filled), then the keys the migration owns:
    ``process.roles=controller``, ``node.id``, the voters, the CONTROLLER listener (``listeners`` defaults to
    ``CONTROLLER://<host>:9093``), the brokers' protocol map plus CONTROLLER, ``inter.broker.listener.name`` (the
    controller sends the ZooKeeper-mode brokers their metadata over it), ``zookeeper.connect`` and the flag.
    """
    own = {k: v.replace("{broker_id}", str(node_id)).replace("{host}", host)
           for k, v in controller_properties.items()}
    props = {"process.roles": "controller", "node.id": str(node_id),
             "controller.quorum.voters": voters(controller_hosts, controller_port(controller_properties)),
             "controller.listener.names": CONTROLLER_LISTENER,
             "listeners": own.pop("listeners", f"{CONTROLLER_LISTENER}://{host}:{DEFAULT_CONTROLLER_PORT}"),
             "listener.security.protocol.map": _with_controller_protocol(own.pop("listener.security.protocol.map",
                                                                                protocol_map)),
             "inter.broker.listener.name": inter_broker_listener,
             **own,
             "zookeeper.connect": zookeeper,
             FLAG: "true"}
    return javaproperties.dumps(props, timestamp=False, sort_keys=False)


def broker_migrating_edits(props: Mapping[str, str], controller_hosts: Mapping[int, str], port: int
                           ) -> dict[str, str | None]:
    """Phase 2's edit of a ZooKeeper-mode broker's file (``props`` parsed): the flag, the voters, the controller
    listener name and its protocol."""
    return {FLAG: "true", "controller.quorum.voters": voters(controller_hosts, port),
            "controller.listener.names": CONTROLLER_LISTENER,
            "listener.security.protocol.map": _with_controller_protocol(
                props.get("listener.security.protocol.map") or DEFAULT_PROTOCOL_MAP)}


def broker_kraft_edits(props: Mapping[str, str]) -> dict[str, str | None]:
    """Phase 3's edit of a migrating broker's file: ``process.roles=broker``, ``node.id`` = its ``broker.id``,
    every ``zookeeper.*`` key, the flag, IBP and LMF removed (KRaft uses metadata.version), the ACL authorizer
    switched to KRaft's.

    :raises ValueError: the file has neither ``broker.id`` nor ``node.id``.
    """
    node_id = props.get("node.id") or props.get("broker.id")
    if not node_id:
        raise ValueError("server.properties has no broker.id: the KRaft node.id must be the old broker.id")
    edits: dict[str, str | None] = {"process.roles": "broker", "node.id": str(node_id)}
    edits.update({k: None for k in props if k.startswith("zookeeper.") or k in ZOOKEEPER_ONLY})
    if props.get("authorizer.class.name") == ZK_AUTHORIZER:
        edits["authorizer.class.name"] = KRAFT_AUTHORIZER
    return edits


def controller_finalized_edits(props: Mapping[str, str]) -> dict[str, str | None]:
    """Phase 4's edit of a controller's file: the flag and every ``zookeeper.*`` key removed."""
    return {k: None for k in props if k.startswith("zookeeper.") or k == FLAG}


def broker_back_to_zookeeper_edits(props: Mapping[str, str], before: Mapping[str, str] | None, *,
                                   zookeeper: str) -> dict[str, str | None]:
    """A revert's first roll (after phase 3): a KRaft broker's file back to ZooKeeper mode with the flag.
    ``before`` is the file the broker had in ZooKeeper mode (the newest backup without ``process.roles``): its
    ``zookeeper.*`` keys, IBP and LMF come back; without it ``zookeeper.connect`` is the profile's and the IBP
    the bridge release's.

    :raises ValueError: the file has no ``node.id``.
    """
    node_id = props.get("node.id") or props.get("broker.id")
    if not node_id:
        raise ValueError("server.properties has no node.id")
    edits: dict[str, str | None] = {"process.roles": None, "node.id": None, "broker.id": str(node_id)}
    old = dict(before or {})
    kept = {k: v for k, v in old.items()
            if k.startswith("zookeeper.") or k in ("inter.broker.protocol.version", "log.message.format.version")}
    kept.setdefault("zookeeper.connect", zookeeper)
    kept.setdefault("inter.broker.protocol.version", BRIDGE_RELEASE)
    edits.update(kept)
    edits[FLAG] = "true"
    if props.get("authorizer.class.name") == KRAFT_AUTHORIZER:
        edits["authorizer.class.name"] = ZK_AUTHORIZER
    return edits


def broker_flag_removed_edits(props: Mapping[str, str]) -> dict[str, str | None]:
    """A revert's last roll: the flag, the voters, the controller listener name and its protocol removed."""
    edits: dict[str, str | None] = {FLAG: None, "controller.quorum.voters": None,
                                    "controller.quorum.bootstrap.servers": None, "controller.listener.names": None}
    if "listener.security.protocol.map" in props:
        edits["listener.security.protocol.map"] = _without_controller_protocol(props["listener.security.protocol.map"])
    return edits


def is_zookeeper_file(props: Mapping[str, str]) -> bool:
    """A ZooKeeper-mode broker's file: ``zookeeper.connect`` set, no ``process.roles``."""
    return bool(props.get("zookeeper.connect")) and not props.get("process.roles")


# --- the rolls' needs-action rules (kafka_ops.roll_spec.NeedsAction) -------------------------------------------

def needs_flag(node_id: int, facts: Mapping[str, Any], settings: Mapping[str, Any]) -> tuple[bool, str]:
    """Roll ``migrate_brokers`` (phase 2): restart a broker that runs ZooKeeper mode without the flag."""
    mode = BrokerMode(facts["mode"])
    if mode is BrokerMode.ZOOKEEPER:
        return True, f"runs ZooKeeper mode without {FLAG}: restart with the flag and the controller quorum"
    return False, f"runs {mode.value} already ({FLAG} on)" if mode is BrokerMode.MIGRATING else \
        "a KRaft broker already"


def needs_kraft(node_id: int, facts: Mapping[str, Any], settings: Mapping[str, Any]) -> tuple[bool, str]:
    """Roll ``kraft_brokers`` (phase 3): restart a broker that still runs ZooKeeper mode, as a KRaft broker."""
    mode = BrokerMode(facts["mode"])
    if mode is BrokerMode.KRAFT:
        return False, "a KRaft broker already (process.roles=broker)"
    if mode is BrokerMode.ZOOKEEPER:
        return False, f"runs ZooKeeper mode without {FLAG}: phase 2 is not done for it; refusing to skip it"
    return True, f"runs ZooKeeper mode with {FLAG}: restart as process.roles=broker, node.id {node_id}"


def needs_finalize(node_id: int, facts: Mapping[str, Any], settings: Mapping[str, Any]) -> tuple[bool, str]:
    """Roll ``finalize`` (phase 4): restart a controller that still runs with the flag (ZkMigrationReady)."""
    if facts.get("migration_ready"):
        return True, f"runs with {FLAG} (ApiVersions: ZkMigrationReady): restart without it and zookeeper.connect"
    return False, "runs without the migration flag already (finalized)"


def needs_zookeeper(node_id: int, facts: Mapping[str, Any], settings: Mapping[str, Any]) -> tuple[bool, str]:
    """A revert's roll ``zookeeper_brokers``: restart a KRaft broker as a ZooKeeper-mode broker with the flag."""
    if BrokerMode(facts["mode"]) is BrokerMode.KRAFT:
        return True, "a KRaft broker: restart in ZooKeeper mode with the migration flag (its old broker.id)"
    return False, f"runs ZooKeeper mode already ({BrokerMode(facts['mode']).value})"


def needs_flag_removed(node_id: int, facts: Mapping[str, Any], settings: Mapping[str, Any]) -> tuple[bool, str]:
    """A revert's roll ``drop_flag``: restart a broker that runs with the flag, without it."""
    mode = BrokerMode(facts["mode"])
    if mode is BrokerMode.MIGRATING:
        return True, f"runs with {FLAG}: restart without it and the controller quorum settings"
    if mode is BrokerMode.KRAFT:
        return False, "a KRaft broker: the revert's first roll did not bring it back; refusing to skip it"
    return False, "runs plain ZooKeeper mode already"


def revert_refusal(view: MigrationView) -> str | None:
    """None when the cluster can go back to ZooKeeper mode, else why not: a finalized controller (phase 4 began)."""
    finalized = view.in_state(ControllerState.KRAFT)
    if finalized:
        return (f"controllers {finalized} run without the migration flag: the migration was finalized (phase 4), "
                "there is no way back to ZooKeeper mode")
    return None


def controller_epoch_floor(zk_epoch: int, controller_znode: Mapping[str, Any] | None) -> int | None:
    """The value to write into ``/controller_epoch`` before a revert deletes ``/controller``, or None when it may stay.

    During the migration the KRaft controller writes every partition's state znode
    (``/brokers/topics/<t>/partitions/<p>/state``) with its own KRaft epoch as the ``controller_epoch``
    (``ZkTopicMigrationClient``), and ``/controller`` names that epoch (``kraftControllerEpoch``). After the revert a
    broker becomes the ZooKeeper-mode controller with ``/controller_epoch`` + 1, and that controller aborts every
    leader election of a partition whose state names a newer epoch ("Aborted leader election ... already written by
    another controller", ``PartitionStateMachine``): a controlled shutdown then moves no leadership and ends unclean,
    its partitions offline (KAFKA-20488). Raising ``/controller_epoch`` to the KRaft epoch first makes the new
    controller's epoch newer than every state the KRaft controller wrote (epochs only have to grow).

    :param zk_epoch: ``/controller_epoch``'s value (an integer).
    :param controller_znode: ``/controller``'s JSON, or None.
    :returns: the KRaft epoch when it is above ``zk_epoch``, else None (no ``kraftControllerEpoch``: None).
    """
    kraft_epoch = int((controller_znode or {}).get("kraftControllerEpoch", -1))
    return kraft_epoch if kraft_epoch > zk_epoch else None


def broker_controller_settled(holder: int, named: Mapping[int, int | None]) -> tuple[bool, str]:
    """Whether a ZooKeeper-mode controller that just took ``/controller`` (broker ``holder``) is known to every
    broker: ``named`` maps each live broker id to the controller id its own Metadata answer names (None: it did not
    answer). A revert deletes ``/controller``; the broker that takes it then sends every broker UpdateMetadata, and
    until a broker applied it, its controlled shutdown goes to the stopped KRaft controller it still names and, after
    ``controlled.shutdown.max.retries`` failures, it stops uncleanly (Kafka's ``KafkaServer.controlledShutdown``):
    its partitions go offline until the controller sees it gone. So the next roll's first stop waits for this.

    Returns (settled, what was seen).
    """
    if holder < 0:
        return False, "no broker holds /controller yet"
    silent = sorted(b for b, c in named.items() if c is None)
    behind = {b: c for b, c in sorted(named.items()) if c is not None and c != holder}
    if not silent and not behind:
        return True, f"/controller held by broker {holder}, and every broker names it ({len(named)} brokers)"
    parts = [f"broker {b} names controller {c}" for b, c in behind.items()]
    parts += [f"broker {b} did not answer Metadata" for b in silent]
    return False, f"/controller held by broker {holder}; " + "; ".join(parts)
