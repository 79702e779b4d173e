"""A broker's view of the cluster, read from ZooKeeper: live brokers, controller, topics with
their partition state (leader, leader epoch, ISR, replicas, reassignment in progress), configs.

Kafka brokers learn this from the controller's UpdateMetadata requests; sandbox brokers re-read
ZooKeeper whenever the controller bumps ``/sandbox/metadata_version`` or a watched node changes,
which gives the same picture a few milliseconds later.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from sandbox.broker import zkpaths


@dataclass(frozen=True)
class BrokerInfo:
    """A registered (live) broker, from ``/brokers/ids/<id>``; ``timestamp_ms`` is its registration time."""

    id: int
    host: str
    port: int
    rack: str | None
    timestamp_ms: int


@dataclass
class PartitionState:
    """One partition: assignment from ``/brokers/topics/<t>``, leadership from ``.../state``.

    ``replicas`` is the full replica set (during a reassignment: target + replicas being removed),
    ``adding`` / ``removing`` the reassignment's sets (Kafka 2.4+, KIP-455). ``leader`` is -1 when
    the partition is offline.
    """

    topic: str
    partition: int
    replicas: list[int]
    leader: int = -1
    leader_epoch: int = 0
    isr: list[int] = field(default_factory=list)
    adding: list[int] = field(default_factory=list)
    removing: list[int] = field(default_factory=list)
    initialized: bool = False

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    @property
    def target_replicas(self) -> list[int]:
        """The replicas the partition ends with: ``replicas`` minus those being removed."""
        return [r for r in self.replicas if r not in self.removing]

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass
class TopicInfo:
    """A topic: id, partitions, config overrides, and its sandbox node: the simulated workload
    (``initial_bytes`` per replica, ``produce_msgs_per_s``) or ``records`` (True: real record logs, a
    topic created through CreateTopics; see :mod:`sandbox.broker.records`)."""

    name: str
    topic_id: uuid.UUID | None
    partitions: dict[int, PartitionState]
    configs: dict[str, str]
    initial_bytes: int = 0
    produce_msgs_per_s: float | None = None
    records: bool = False
    topic_id_text: str | None = None  # the id as stored in ZooKeeper (base64url, 22 characters)


class MetadataCache:
    """The cluster as ZooKeeper describes it; :meth:`refresh` re-reads everything (tens of nodes)."""

    def __init__(self, zk: KazooClient) -> None:
        self.zk = zk
        self.brokers: dict[int, BrokerInfo] = {}
        self.controller_id: int = -1
        self.topics: dict[str, TopicInfo] = {}
        self.broker_configs: dict[str, dict[str, str]] = {}
        self.cluster_id: str = ""

    # --- reading -------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Re-read brokers, controller, topics, partition states and dynamic configs."""
        zk = self.zk
        brokers: dict[int, BrokerInfo] = {}
        for child in zk.get_children(zkpaths.BROKER_IDS):
            data = self._get_json(f"{zkpaths.BROKER_IDS}/{child}")
            if data:
                brokers[int(child)] = BrokerInfo(
                    id=int(child),
                    host=data["host"],
                    port=int(data["port"]),
                    rack=data.get("rack"),
                    timestamp_ms=int(data.get("timestamp", 0)),
                )
        controller = self._get_json(zkpaths.CONTROLLER)
        cluster = self._get_json("/cluster/id")
        topics: dict[str, TopicInfo] = {}
        for name in zk.get_children(zkpaths.BROKER_TOPICS):
            topic = self.read_topic(name)
            if topic is not None:
                topics[name] = topic
        broker_configs: dict[str, dict[str, str]] = {}
        try:
            for entity in zk.get_children(zkpaths.CONFIG_BROKERS):
                data = self._get_json(f"{zkpaths.CONFIG_BROKERS}/{entity}")
                broker_configs[entity] = dict((data or {}).get("config", {}))
        except NoNodeError:
            pass
        self.brokers = brokers
        self.controller_id = int(controller["brokerid"]) if controller else -1
        self.topics = topics
        self.broker_configs = broker_configs
        self.cluster_id = cluster["id"] if cluster else ""

    def read_topic(self, name: str) -> TopicInfo | None:
        """Read one topic's assignment, partition states, config and sandbox workload node."""
        assignment = self._get_json(zkpaths.topic_path(name))
        if not assignment:
            return None
        adding = assignment.get("adding_replicas") or {}
        removing = assignment.get("removing_replicas") or {}
        partitions: dict[int, PartitionState] = {}
        for key, replicas in assignment.get("partitions", {}).items():
            p = int(key)
            state = PartitionState(
                topic=name,
                partition=p,
                replicas=list(replicas),
                adding=list(adding.get(key, [])),
                removing=list(removing.get(key, [])),
            )
            data = self._get_json(zkpaths.partition_state_path(name, p))
            if data:
                state.leader = int(data["leader"])
                state.leader_epoch = int(data["leader_epoch"])
                state.isr = list(data["isr"])
                state.initialized = True
            partitions[p] = state
        config = self._get_json(f"{zkpaths.CONFIG_TOPICS}/{name}") or {}
        workload = self._get_json(f"{zkpaths.SANDBOX_TOPICS}/{name}") or {}
        return TopicInfo(
            name=name,
            topic_id=zkpaths.topic_uuid(assignment.get("topic_id")),
            partitions=partitions,
            configs=dict(config.get("config", {})),
            initial_bytes=int(workload.get("initial_bytes", 0)),
            produce_msgs_per_s=workload.get("produce_msgs_per_s"),
            records=bool(workload.get("records", False)),
            topic_id_text=assignment.get("topic_id"),
        )

    def _get_json(self, path: str) -> dict | None:
        try:
            data, _ = self.zk.get(path)
        except NoNodeError:
            return None
        value = zkpaths.loads(data)
        return value if isinstance(value, dict) else None

    # --- queries ----------------------------------------------------------------------------
    def partitions(self) -> list[PartitionState]:
        return [p for t in self.topics.values() for p in t.partitions.values()]

    def partition(self, topic: str, partition: int) -> PartitionState | None:
        info = self.topics.get(topic)
        return info.partitions.get(partition) if info else None

    def broker_config(self, broker_id: int, key: str) -> str | None:
        """A dynamic broker config: the per-broker value, else the cluster default (``<default>``)."""
        value = self.broker_configs.get(str(broker_id), {}).get(key)
        if value is None:
            value = self.broker_configs.get(zkpaths.DEFAULT_BROKER_ENTITY, {}).get(key)
        return value

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        """The topic with id ``topic_id`` (Fetch v13+, DeleteTopics v6), or None."""
        for info in self.topics.values():
            if info.topic_id == topic_id:
                return info
        return None

    def topic_config(self, topic: str, key: str) -> str | None:
        info = self.topics.get(topic)
        return info.configs.get(key) if info else None
