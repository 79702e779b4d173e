"""Kafka's ZooKeeper layout (ZK mode) as the sandbox writes and reads it, and topic creation.

Paths and JSON shapes follow Kafka's ``kafka.zk.ZkData`` (Kafka 2.x/3.x ZK mode), so kazoo code and
tools written for real clusters see the same nodes:

- ``/brokers/ids/<id>`` (ephemeral): ``{"version": 5, "host", "port", "endpoints": ["PLAINTEXT://h:p"],
  "listener_security_protocol_map", "jmx_port": -1, "rack", "timestamp": "<ms>", "features": {}}``
- ``/controller`` (ephemeral): ``{"version": 1, "brokerid": 0, "timestamp": "<ms>"}``; ``/controller_epoch``
- ``/brokers/topics/<t>``: ``{"version": 3, "partitions": {"0": [0, 1, 2]}, "adding_replicas": {},
  "removing_replicas": {}}`` and ``/brokers/topics/<t>/partitions/<p>/state``:
  ``{"version": 1, "controller_epoch", "leader", "leader_epoch", "isr": [...]}``
- ``/config/topics/<t>``, ``/config/brokers/<id>`` and ``/config/brokers/<default>``:
  ``{"version": 1, "config": {...}}``, each change announced under ``/config/changes/config_change_``
- ``/admin/reassign_partitions`` and ``/admin/preferred_replica_election``:
  ``{"version": 1, "partitions": [{"topic", "partition", "replicas"?}]}``
- ``/consumers/<group>/offsets/<topic>/<partition>``: the committed offset as a decimal string
  (old ZooKeeper-based consumers; Burrow's ``kafka_zk`` module reads it)
- ``/admin/delete_topics/<t>``: a topic marked for deletion (DeleteTopics), removed with the topic
- ``/latest_producer_id_block``: ``{"version": 1, "broker", "block_start": "<n>", "block_end": "<n>"}``,
  the last block of producer ids a broker reserved (InitProducerId, Kafka's ``ProducerIdManager``)

Sandbox-only nodes live under ``/sandbox``: ``/sandbox/topics/<t>`` holds the simulated workload of a
topic (``{"initial_bytes": N, "produce_msgs_per_s": r}``) or ``{"records": true, "initial_bytes": 0}``
for a topic with real record logs (created through CreateTopics, see :mod:`sandbox.broker.records`),
and ``/sandbox/metadata_version`` is bumped
by the controller after it changes partition state, so brokers refresh their metadata cache (the
sandbox's stand-in for the controller's UpdateMetadata requests).
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterable

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError

BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CONFIG_TOPICS = "/config/topics"
CONFIG_BROKERS = "/config/brokers"
CONFIG_CHANGES = "/config/changes"
REASSIGN = "/admin/reassign_partitions"
PREFERRED_ELECTION = "/admin/preferred_replica_election"
DELETE_TOPICS = "/admin/delete_topics"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
PRODUCER_ID_BLOCK_SIZE = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
CONSUMERS = "/consumers"
SANDBOX_TOPICS = "/sandbox/topics"
METADATA_VERSION = "/sandbox/metadata_version"
DEFAULT_BROKER_ENTITY = "<default>"

PERSISTENT_PATHS = (
    BROKER_IDS,
    BROKER_TOPICS,
    "/brokers/seqid",
    CONFIG_TOPICS,
    CONFIG_BROKERS,
    "/config/clients",
    "/config/users",
    CONFIG_CHANGES,
    "/admin/delete_topics",
    "/isr_change_notification",
    "/log_dir_event_notification",
    CONSUMERS,
    SANDBOX_TOPICS,
)


def now_ms() -> int:
    """Wall-clock time in milliseconds, as Kafka writes timestamps into ZooKeeper."""
    return int(time.time() * 1000)


def dumps(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def loads(data: bytes | None) -> object:
    return json.loads(data.decode()) if data else None


def topic_uuid(topic_id: str | None) -> uuid.UUID | None:
    """Decode Kafka's base64url topic id (22 characters, as stored in /brokers/topics/<t>)."""
    if not topic_id:
        return None
    return uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "=="))


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}/state"


def ensure_cluster_paths(zk: KazooClient) -> None:
    """Create the persistent nodes a fresh ZK-mode cluster has (idempotent), plus the cluster id.

    `sandbox up` calls this once after ZooKeeper starts and before any broker or Burrow starts
    (Burrow lists ``/consumers`` once at start and never retries).
    """
    for path in PERSISTENT_PATHS:
        zk.ensure_path(path)
    if not zk.exists("/cluster/id"):
        zk.ensure_path("/cluster")
        zk.create("/cluster/id", dumps({"version": "1", "id": uuid.uuid4().hex[:22]}))
    if not zk.exists(METADATA_VERSION):
        zk.create(METADATA_VERSION, b"0", makepath=True)
    if not zk.exists(CONTROLLER_EPOCH):
        zk.create(CONTROLLER_EPOCH, b"0")


def rack_alternated(brokers: Iterable[tuple[int, str | None]]) -> list[int]:
    """Broker ids ordered so that consecutive ids sit in different racks (Kafka's rack-aware
    assignment, ``AdminUtils.getRackAlternatedBrokerList``): rack-a0, rack-b0, rack-c0, rack-a1, ..."""
    by_rack: dict[str | None, list[int]] = {}
    for broker_id, rack in sorted(brokers):
        by_rack.setdefault(rack, []).append(broker_id)
    racks = sorted(by_rack, key=lambda r: (r is None, r or ""))
    ordered: list[int] = []
    while any(by_rack[r] for r in racks):
        for rack in racks:
            if by_rack[rack]:
                ordered.append(by_rack[rack].pop(0))
    return ordered


def assign_replicas(
    partitions: int, replication_factor: int, brokers: Iterable[tuple[int, str | None]]
) -> dict[int, list[int]]:
    """Rack-aware replica assignment: partition p gets ``rf`` consecutive brokers of the
    rack-alternated list starting at p, so replicas land in distinct racks while racks >= rf and
    preferred leaders (first replicas) spread evenly.

    Raises:
        ValueError: replication factor larger than the number of brokers (Kafka's
            InvalidReplicationFactorException).
    """
    ordered = rack_alternated(brokers)
    if replication_factor > len(ordered):
        raise ValueError(
            f"replication factor {replication_factor} is larger than the {len(ordered)} available brokers"
        )
    return {p: [ordered[(p + j) % len(ordered)] for j in range(replication_factor)] for p in range(partitions)}


def create_topic(
    zk: KazooClient,
    topic: str,
    partitions: int,
    replication_factor: int,
    brokers: Iterable[tuple[int, str | None]],
    *,
    configs: dict[str, str] | None = None,
    initial_bytes: int = 0,
    produce_msgs_per_s: float | None = None,
    records: bool = False,
    assignment: dict[int, list[int]] | None = None,
) -> dict[int, list[int]]:
    """Create a topic the way ``kafka-topics.sh --zookeeper`` did: write its config and replica
    assignment; the controller notices the new ``/brokers/topics`` child and elects leaders.

    ``brokers`` are ``(id, rack)`` pairs to place replicas on; ``initial_bytes`` is the simulated
    size of every replica at creation (bytes); ``produce_msgs_per_s`` overrides
    ``settings.PRODUCE_MSGS_PER_S`` for this topic. ``records=True`` makes a topic with real record logs
    and no simulated growth; ``assignment`` (``{partition: replicas}``) replaces the rack-aware one.
    Returns the assignment ``{partition: replicas}``.

    Raises:
        ValueError: the topic exists, or the replication factor exceeds the broker count.
    """
    if zk.exists(topic_path(topic)):
        raise ValueError(f"topic {topic} already exists")
    if assignment is None:
        assignment = assign_replicas(partitions, replication_factor, brokers)
    zk.ensure_path(CONFIG_TOPICS)
    config_path = f"{CONFIG_TOPICS}/{topic}"
    config = dumps({"version": 1, "config": dict(configs or {})})
    if zk.exists(config_path):  # left by a deletion that did not finish
        zk.set(config_path, config)
    else:
        zk.create(config_path, config)
    workload: dict[str, object] = {"initial_bytes": 0 if records else initial_bytes}
    if produce_msgs_per_s is not None:
        workload["produce_msgs_per_s"] = produce_msgs_per_s
    if records:
        workload["records"] = True
    if zk.exists(f"{SANDBOX_TOPICS}/{topic}"):
        zk.set(f"{SANDBOX_TOPICS}/{topic}", dumps(workload))
    else:
        zk.create(f"{SANDBOX_TOPICS}/{topic}", dumps(workload), makepath=True)
    zk.create(
        topic_path(topic),
        dumps(
            {
                "version": 3,
                "topic_id": base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode(),
                "partitions": {str(p): r for p, r in assignment.items()},
                "adding_replicas": {},
                "removing_replicas": {},
            }
        ),
        makepath=True,
    )
    return assignment


def delete_topic(zk: KazooClient, topic: str) -> None:
    """Remove a topic's nodes as Kafka's controller does once the deletion completed: the assignment
    with its partition states, the config, the sandbox node and the ``/admin/delete_topics`` mark
    (missing nodes are skipped). Brokers drop their replicas (and record logs) at the next refresh."""
    for path in (topic_path(topic), f"{CONFIG_TOPICS}/{topic}", f"{SANDBOX_TOPICS}/{topic}",
                 f"{DELETE_TOPICS}/{topic}"):
        if zk.exists(path):
            zk.delete(path, recursive=True)


def allocate_producer_ids(zk: KazooClient, broker_id: int) -> tuple[int, int]:
    """Reserve the next block of ``PRODUCER_ID_BLOCK_SIZE`` producer ids in ``/latest_producer_id_block``
    (a conditional set on the node's version, retried on conflicts, as Kafka's ZK-mode
    ``ProducerIdManager`` does). Returns ``(first, last)`` (inclusive)."""
    while True:
        if not zk.exists(PRODUCER_ID_BLOCK):
            try:
                zk.create(PRODUCER_ID_BLOCK, b"")
            except NodeExistsError:
                pass
        data, stat = zk.get(PRODUCER_ID_BLOCK)
        current = loads(data) if data else None
        start = int(current["block_end"]) + 1 if isinstance(current, dict) else 0
        end = start + PRODUCER_ID_BLOCK_SIZE - 1
        block = {"version": 1, "broker": broker_id, "block_start": str(start), "block_end": str(end)}
        try:
            zk.set(PRODUCER_ID_BLOCK, dumps(block), version=stat.version)
            return start, end
        except BadVersionError:
            continue
