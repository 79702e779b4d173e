"""Kafka API handlers of the sandbox broker: request entity in, response entity out.

Each handler serves every version it advertises (:func:`sandbox.broker.protocol.supported_apis`):
it passes all fields it knows to :func:`~sandbox.broker.protocol.build`, which keeps those the
version's kio class has. Requests that Kafka routes to the controller (ElectLeaders,
AlterPartitionReassignments, ListPartitionReassignments, CreateTopics, DeleteTopics) answer
NOT_CONTROLLER elsewhere, as a ZK-mode broker does, so clients re-route to the controller from Metadata.

The data path (Produce, Fetch, InitProducerId) serves topics with real record logs, those created
through CreateTopics (:mod:`sandbox.broker.records`); the workload topics keep their simulated
growth, refuse Produce (INVALID_REQUEST) and return no records to Fetch. Handlers that wait
(acks=all Produce, long-poll Fetch, CreateTopics/DeleteTopics until the metadata shows the change)
are coroutines; the server processes one request per connection at a time, as Kafka does.

The group APIs (FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
ListGroups, DescribeGroups) are served by the broker's group coordinator (:mod:`sandbox.broker.groups`),
whose handlers the broker adds to :attr:`KafkaApis.handlers`.
"""

from __future__ import annotations

import asyncio
import random
import re
import shutil
import time
import uuid
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import NoNodeError
from kio.schema.errors import ErrorCode

from sandbox.broker import features, zkpaths
from sandbox.broker.controller_node import read_features
from sandbox.broker.protocol import Request, build, response_module, supported_apis
from sandbox.broker.records import BatchError, parse_batches

if TYPE_CHECKING:
    from sandbox.broker.server import Broker

# DescribeConfigs resource types and config sources (Kafka's ConfigResource.Type / ConfigSource)
TOPIC, BROKER = 2, 4
SOURCE_TOPIC, SOURCE_DYNAMIC_BROKER, SOURCE_DYNAMIC_DEFAULT, SOURCE_STATIC, SOURCE_DEFAULT = 1, 2, 3, 4, 5

# Defaults a broker reports for keys absent from server.properties (Kafka 3.x defaults).
BROKER_DEFAULTS = {
    "min.insync.replicas": "1",
    "leader.imbalance.per.broker.percentage": "10",
    "leader.imbalance.check.interval.seconds": "300",
    "auto.leader.rebalance.enable": "true",
    "unclean.leader.election.enable": "false",
    "default.replication.factor": "1",
    "num.partitions": "1",
    "log.retention.hours": "168",
    "replica.lag.time.max.ms": "30000",
    "zookeeper.session.timeout.ms": "18000",
    "controlled.shutdown.enable": "true",
    "leader.replication.throttled.rate": "9223372036854775807",
    "follower.replication.throttled.rate": "9223372036854775807",
}
# Broker configs an operator may change at run time (Kafka's DynamicBrokerConfig / DynamicConfig.Broker):
# reported as not read-only, as Kafka does, so clients accept them in AlterConfigs.
DYNAMIC_BROKER_KEYS = {
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "min.insync.replicas",
    "unclean.leader.election.enable",
    "log.retention.hours",
}
NO_RESPONSE = object()  # a handler's answer when Kafka sends none (Produce with acks=0)
LEGAL_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")  # Kafka's Topic.validate
MAX_ADMIN_WAIT_S = 30.0  # CreateTopics / DeleteTopics wait at most this long for the metadata

TOPIC_DEFAULT_KEYS = {
    "cleanup.policy": "delete",
    "retention.ms": "604800000",
    "leader.replication.throttled.replicas": "",
    "follower.replication.throttled.replicas": "",
    "unclean.leader.election.enable": "false",
}


class KafkaApis:
    """Dispatches decoded requests to handlers; ``broker`` gives access to metadata, replicas, controller."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.handlers = {
            0: self.produce,
            1: self.fetch,
            2: self.list_offsets,
            3: self.metadata,
            18: self.api_versions,
            19: self.create_topics,
            20: self.delete_topics,
            22: self.init_producer_id,
            23: self.offset_for_leader_epoch,
            32: self.describe_configs,
            33: self.alter_configs,
            35: self.describe_log_dirs,
            43: self.elect_leaders,
            44: self.incremental_alter_configs,
            45: self.alter_partition_reassignments,
            46: self.list_partition_reassignments,
            55: self.describe_quorum,
            57: self.update_features,
            60: self.describe_cluster,
        }

    @property
    def cache(self):
        return self.broker.cache

    def handle(self, request: Request) -> Any:
        """The response entity for ``request``, a coroutine giving it, or :data:`NO_RESPONSE`."""
        return self.handlers[request.api_key](request)

    @property
    def broker_id(self) -> int:
        return self.broker.config.broker_id

    def min_isr(self, topic: str) -> int:
        """``min.insync.replicas`` of ``topic``: its override, else the broker's (dynamic > static)."""
        value = self.cache.topic_config(topic, "min.insync.replicas")
        return int(value) if value else int(self.broker_configs()["min.insync.replicas"][0])

    # --- ApiVersions (18) ------------------------------------------------------------------------
    def api_versions(self, request: Request) -> Any:
        m = response_module(18, request.api_version)
        config = self.broker.config
        apis = supported_apis(config.version, config.kraft)
        supported, finalized, epoch = (), (), -1
        if config.kraft and request.api_version >= 3:
            low, high = features.supported_range(config.version)
            supported = (m.SupportedFeatureKey(name=features.FEATURE, min_version=low, max_version=high),)
            levels, epoch = read_features(self.broker.zk)
            finalized = tuple(m.FinalizedFeatureKey(name=name, max_version_level=level, min_version_level=level)
                              for name, level in sorted(levels.items()))
        return build(
            m.ApiVersionsResponse,
            error_code=ErrorCode.none,
            api_keys=tuple(m.ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in apis.items()),
            supported_features=supported,
            finalized_features_epoch=epoch,
            finalized_features=finalized,
            zk_migration_ready=False,
        )

    def controller_id(self) -> int:
        """The controller id clients are told: the ``/controller`` broker in ZooKeeper mode; in KRaft mode a
        random live broker (clients cannot reach controllers; that broker forwards, KIP-590), as Kafka does."""
        if not self.broker.config.kraft:
            return self.cache.controller_id
        live = sorted(self.cache.brokers)
        return random.choice(live) if live else -1

    # --- Metadata (3) -----------------------------------------------------------------------------
    def metadata(self, request: Request) -> Any:
        m = response_module(3, request.api_version)
        cache = self.cache
        brokers = tuple(
            build(m.MetadataResponseBroker, node_id=b.id, host=b.host, port=b.port, rack=b.rack)
            for b in sorted(cache.brokers.values(), key=lambda b: b.id)
        )
        wanted = request.body.topics
        if request.api_version == 0 and wanted == ():
            wanted = None  # v0: an empty list means all topics
        if wanted is None:
            names = sorted(cache.topics)
        else:
            names = [t.name for t in wanted]
        topics = []
        for name in names:
            info = cache.topics.get(name)
            if info is None:
                topics.append(
                    build(m.MetadataResponseTopic, error_code=ErrorCode.unknown_topic_or_partition,
                          name=name, topic_id=None, partitions=())
                )
                continue
            partitions = []
            for p in sorted(info.partitions.values(), key=lambda p: p.partition):
                offline = tuple(r for r in p.replicas if r not in cache.brokers)
                error = ErrorCode.leader_not_available if p.leader == -1 else ErrorCode.none
                partitions.append(
                    build(m.MetadataResponsePartition, error_code=error, partition_index=p.partition,
                          leader_id=p.leader, leader_epoch=p.leader_epoch, replica_nodes=tuple(p.replicas),
                          isr_nodes=tuple(p.isr), offline_replicas=offline)
                )
            topics.append(
                build(m.MetadataResponseTopic, error_code=ErrorCode.none, name=name, topic_id=info.topic_id,
                      is_internal=name.startswith("__"), partitions=tuple(partitions))
            )
        return build(m.MetadataResponse, brokers=brokers, cluster_id=cache.cluster_id,
                     controller_id=self.controller_id(), topics=tuple(topics))

    # --- DescribeQuorum (55) and UpdateFeatures (57): KRaft, forwarded to the active controller ------------
    async def describe_quorum(self, request: Request) -> Any:
        """The ``__cluster_metadata`` quorum as the active controller sees it (KIP-595; v2 adds the voters'
        endpoints, KIP-853). NOT_LEADER_OR_FOLLOWER at the partition level while no controller answers."""
        m = response_module(55, request.api_version)
        answer = await self._forward("describe_quorum")

        def rows(items: list[dict]) -> tuple:
            return tuple(build(m.ReplicaState, replica_id=r["replica_id"], replica_directory_id=uuid.UUID(int=0),
                               log_end_offset=r["log_end_offset"], last_fetch_timestamp=r["last_fetch_timestamp"],
                               last_caught_up_timestamp=r["last_caught_up_timestamp"]) for r in items)

        if answer is None:
            partition = build(m.PartitionData, partition_index=0, error_code=ErrorCode.not_leader_or_follower,
                              error_message="no active controller answered", leader_id=-1, leader_epoch=-1,
                              high_watermark=-1, current_voters=(), observers=())
            nodes = ()
        else:
            partition = build(m.PartitionData, partition_index=0, error_code=ErrorCode.none, error_message=None,
                              leader_id=answer["leader_id"], leader_epoch=answer["leader_epoch"],
                              high_watermark=answer["high_watermark"], current_voters=rows(answer["voters"]),
                              observers=rows(answer["observers"]))
            nodes = tuple(build(m.Node, node_id=n["node_id"], listeners=tuple(
                build(m.Listener, name=li["name"], host=li["host"], port=li["port"]) for li in n["listeners"]))
                for n in answer.get("nodes", [])) if hasattr(m, "Node") else ()
        return build(m.DescribeQuorumResponse, error_code=ErrorCode.none, error_message=None,
                     topics=(build(m.TopicData, topic_name="__cluster_metadata", partitions=(partition,)),),
                     nodes=nodes)

    async def update_features(self, request: Request) -> Any:
        """Finalize feature levels (KIP-584; ``metadata.version``, KIP-778), decided by the active controller:
        every node must support the level, downgrades only when asked for and safe."""
        m = response_module(57, request.api_version)
        updates = []
        for u in request.body.feature_updates:
            kind = getattr(u, "upgrade_type", None)
            if kind is None:
                kind = 2 if getattr(u, "allow_downgrade", False) else 1
            updates.append({"feature": u.feature, "level": int(u.max_version_level), "upgrade_type": int(kind)})
        answer = await self._forward("update_features", updates=updates,
                                     validate_only=bool(getattr(request.body, "validate_only", False)))
        if answer is None:
            return build(m.UpdateFeaturesResponse, error_code=ErrorCode.not_controller,
                         error_message="no active controller answered", results=())
        results = tuple(build(m.UpdatableFeatureResult, feature=r["feature"], error_code=ErrorCode(r["error_code"]),
                              error_message=r["error_message"]) for r in answer["results"])
        return build(m.UpdateFeaturesResponse, error_code=ErrorCode.none, error_message=None, results=results)

    # --- DescribeCluster (60) ------------------------------------------------------------------------
    def describe_cluster(self, request: Request) -> Any:
        m = response_module(60, request.api_version)
        brokers = tuple(
            build(m.DescribeClusterBroker, broker_id=b.id, host=b.host, port=b.port, rack=b.rack)
            for b in sorted(self.cache.brokers.values(), key=lambda b: b.id)
        )
        return build(m.DescribeClusterResponse, error_code=ErrorCode.none, error_message=None,
                     endpoint_type=1, cluster_id=self.cache.cluster_id, controller_id=self.controller_id(),
                     brokers=brokers, cluster_authorized_operations=-2147483648)

    # --- ListOffsets (2) ---------------------------------------------------------------------------
    def _offset_for(self, topic: str, partition: int, timestamp: int) -> tuple[ErrorCode, int]:
        p = self.cache.partition(topic, partition)
        if p is None:
            return ErrorCode.unknown_topic_or_partition, -1
        if p.leader != self.broker.config.broker_id or p.key not in self.broker.replicas.replicas:
            return ErrorCode.not_leader_or_follower, -1
        if timestamp == -2:  # EARLIEST
            return ErrorCode.none, self.broker.replicas.replicas[p.key].log_start
        hw = self.broker.replicas.high_watermark(p)
        plog = self.broker.replicas.logs.get(p.key)
        if plog is not None and timestamp >= 0:  # by time: first batch at or after it, below the HW
            found = plog.offset_for_timestamp(timestamp)
            return ErrorCode.none, hw if found is None or found >= hw else found
        return ErrorCode.none, hw  # LATEST (and, for simulated topics, by time): the HW

    def offset_for_leader_epoch(self, request: Request) -> Any:
        """OffsetForLeaderEpoch (KIP-101, KIP-320): per partition the largest leader epoch ``<=`` the asked one
        in the leader's log and where it ends (the start of the next epoch, or the log end). Consumers use it
        to validate their position after a leader change. NOT_LEADER_OR_FOLLOWER off the leader;
        FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH when the client's current epoch is older / newer than the
        partition's. Simulated topics answer with the partition's epoch and high watermark."""
        m = response_module(23, request.api_version)
        topics = []
        for t in request.body.topics:
            parts = []
            for part in t.partitions:
                p = self.cache.partition(t.topic, part.partition)
                error, epoch, end = ErrorCode.none, -1, -1
                current = int(getattr(part, "current_leader_epoch", -1))
                if p is None:
                    error = ErrorCode.unknown_topic_or_partition
                elif p.leader != self.broker_id or p.key not in self.broker.replicas.replicas:
                    error = ErrorCode.not_leader_or_follower
                elif current >= 0 and current < p.leader_epoch:
                    error = ErrorCode.fenced_leader_epoch
                elif current > p.leader_epoch:
                    error = ErrorCode.unknown_leader_epoch
                else:
                    plog = self.broker.replicas.logs.get(p.key)
                    if plog is not None:
                        epoch, end = plog.end_for_epoch(int(part.leader_epoch))
                    else:
                        epoch, end = p.leader_epoch, self.broker.replicas.high_watermark(p)
                parts.append(build(m.EpochEndOffset, error_code=error, partition=part.partition,
                                   leader_epoch=epoch, end_offset=end))
            topics.append(build(m.OffsetForLeaderTopicResult, topic=t.topic, partitions=tuple(parts)))
        return build(m.OffsetForLeaderEpochResponse, topics=tuple(topics))

    def list_offsets(self, request: Request) -> Any:
        if request.api_version == 0:
            topics = []
            for topic in request.body["topics"]:
                parts = []
                for part in topic["partitions"]:
                    error, offset = self._offset_for(topic["name"], part["partition"], part["timestamp"])
                    parts.append({"partition": part["partition"], "error_code": error,
                                  "offsets": [offset] if error == ErrorCode.none else []})
                topics.append({"name": topic["name"], "partitions": parts})
            return topics
        m = response_module(2, request.api_version)
        topics = []
        for topic in request.body.topics:
            parts = []
            for part in topic.partitions:
                error, offset = self._offset_for(topic.name, part.partition_index, part.timestamp)
                p = self.cache.partition(topic.name, part.partition_index)
                parts.append(build(m.ListOffsetsPartitionResponse, partition_index=part.partition_index,
                                   error_code=error, timestamp=-1, offset=offset,
                                   leader_epoch=p.leader_epoch if p else -1))
            topics.append(build(m.ListOffsetsTopicResponse, name=topic.name, partitions=tuple(parts)))
        return build(m.ListOffsetsResponse, topics=tuple(topics))

    # --- DescribeConfigs (32) ----------------------------------------------------------------------
    def broker_configs(self) -> dict[str, tuple[str, int]]:
        """This broker's configs: ``{name: (value, config source)}`` (dynamic > static > default)."""
        configs = {k: (v, SOURCE_DEFAULT) for k, v in BROKER_DEFAULTS.items()}
        configs.update({k: (v, SOURCE_STATIC) for k, v in self.broker.config.properties.items()})
        default = self.cache.broker_configs.get(zkpaths.DEFAULT_BROKER_ENTITY, {})
        configs.update({k: (v, SOURCE_DYNAMIC_DEFAULT) for k, v in default.items()})
        own = self.cache.broker_configs.get(str(self.broker.config.broker_id), {})
        configs.update({k: (v, SOURCE_DYNAMIC_BROKER) for k, v in own.items()})
        return configs

    def topic_configs(self, topic: str) -> dict[str, tuple[str, int]]:
        """A topic's configs. The overrides are read from ``/config/topics/<topic>`` in ZooKeeper, not
        from the metadata cache: ZK-mode Kafka does the same (``AdminManager.describeConfigs`` fetches
        the entity config from ZooKeeper), so a DescribeConfigs right after an AlterConfigs, on any
        broker, shows the new value."""
        broker = self.broker_configs()
        configs = {k: (v, SOURCE_DEFAULT) for k, v in TOPIC_DEFAULT_KEYS.items()}
        configs["min.insync.replicas"] = (broker["min.insync.replicas"][0], broker["min.insync.replicas"][1])
        try:
            stored = zkpaths.loads(self.broker.zk.get(f"{zkpaths.CONFIG_TOPICS}/{topic}")[0])
        except NoNodeError:
            stored = None
        overrides = stored.get("config", {}) if isinstance(stored, dict) else {}
        for key, value in overrides.items():
            configs[key] = (value, SOURCE_TOPIC)
        return configs

    def describe_configs(self, request: Request) -> Any:
        m = response_module(32, request.api_version)
        results = []
        for resource in request.body.resources:
            error, message, configs = ErrorCode.none, None, {}
            if resource.resource_type == BROKER:
                if resource.resource_name not in ("", str(self.broker.config.broker_id)):
                    error, message = ErrorCode.invalid_request, (
                        f"broker {resource.resource_name} configs must be asked of that broker")
                else:
                    configs = self.broker_configs()
            elif resource.resource_type == TOPIC:
                if resource.resource_name not in self.cache.topics:
                    error, message = ErrorCode.unknown_topic_or_partition, f"unknown topic {resource.resource_name}"
                else:
                    configs = self.topic_configs(resource.resource_name)
            else:
                error, message = ErrorCode.invalid_request, f"unsupported resource type {resource.resource_type}"
            keys = resource.configuration_keys
            broker = resource.resource_type == BROKER
            entries = tuple(
                build(m.DescribeConfigsResourceResult, name=name, value=value,
                      read_only=broker and name not in DYNAMIC_BROKER_KEYS,
                      is_default=source == SOURCE_DEFAULT, config_source=source, is_sensitive=False,
                      synonyms=(), config_type=0, documentation=None)
                for name, (value, source) in sorted(configs.items())
                if keys is None or name in keys
            )
            results.append(build(m.DescribeConfigsResult, error_code=error, error_message=message,
                                 resource_type=resource.resource_type, resource_name=resource.resource_name,
                                 configs=entries))
        return build(m.DescribeConfigsResponse, results=tuple(results))

    # --- AlterConfigs (33) / IncrementalAlterConfigs (44) -------------------------------------------
    def _config_path(self, resource_type: int, name: str) -> tuple[str | None, str | None]:
        """ZooKeeper path of a config entity, or (None, error message)."""
        if resource_type == TOPIC:
            if name not in self.cache.topics:
                return None, f"unknown topic {name}"
            return f"{zkpaths.CONFIG_TOPICS}/{name}", None
        if resource_type == BROKER:
            entity = name or zkpaths.DEFAULT_BROKER_ENTITY
            if entity != zkpaths.DEFAULT_BROKER_ENTITY and not entity.isdigit():
                return None, f"invalid broker id {name!r}"
            return f"{zkpaths.CONFIG_BROKERS}/{entity}", None
        return None, f"unsupported resource type {resource_type}"

    def _write_config(self, resource_type: int, name: str, update) -> tuple[ErrorCode, str | None]:
        path, problem = self._config_path(resource_type, name)
        if path is None:
            code = ErrorCode.unknown_topic_or_partition if "topic" in problem else ErrorCode.invalid_request
            return code, problem
        zk = self.broker.zk
        current = {}
        if zk.exists(path):
            current = dict((zkpaths.loads(zk.get(path)[0]) or {}).get("config", {}))
        try:
            new = update(current)
        except ValueError as exc:
            return ErrorCode.invalid_config, str(exc)
        for key, value in new.items():
            if key.endswith(".throttled.rate") and not value.isdigit():
                return ErrorCode.invalid_config, f"{key}={value!r} is not a rate in bytes/s"
        document = zkpaths.dumps({"version": 1, "config": new})
        if zk.exists(path):
            zk.set(path, document)
        else:
            zk.create(path, document, makepath=True)
        entity = path.removeprefix("/config/")
        zk.create(f"{zkpaths.CONFIG_CHANGES}/config_change_", zkpaths.dumps({"version": 2, "entity_path": entity}),
                  sequence=True, makepath=True)
        self.broker.schedule_refresh()
        return ErrorCode.none, None

    def alter_configs(self, request: Request) -> Any:
        m = response_module(33, request.api_version)
        responses = []
        for resource in request.body.resources:
            values = {c.name: c.value for c in resource.configs if c.value is not None}
            error, message = (ErrorCode.none, None) if request.body.validate_only else self._write_config(
                resource.resource_type, resource.resource_name, lambda _current, v=values: dict(v))
            responses.append(build(m.AlterConfigsResourceResponse, error_code=error, error_message=message,
                                   resource_type=resource.resource_type, resource_name=resource.resource_name))
        return build(m.AlterConfigsResponse, responses=tuple(responses))

    def incremental_alter_configs(self, request: Request) -> Any:
        m = response_module(44, request.api_version)
        responses = []
        for resource in request.body.resources:

            def update(current: dict, ops=resource.configs) -> dict:
                new = dict(current)
                for op in ops:
                    items = [i for i in new.get(op.name, "").split(",") if i]
                    if op.config_operation == 0:  # SET
                        new[op.name] = op.value or ""
                    elif op.config_operation == 1:  # DELETE
                        new.pop(op.name, None)
                    elif op.config_operation == 2:  # APPEND
                        new[op.name] = ",".join(items + [i for i in (op.value or "").split(",") if i not in items])
                    elif op.config_operation == 3:  # SUBTRACT
                        drop = set((op.value or "").split(","))
                        new[op.name] = ",".join(i for i in items if i not in drop)
                    else:
                        raise ValueError(f"unknown config operation {op.config_operation}")
                return new

            error, message = (ErrorCode.none, None) if request.body.validate_only else self._write_config(
                resource.resource_type, resource.resource_name, update)
            responses.append(build(m.AlterConfigsResourceResponse, error_code=error, error_message=message,
                                   resource_type=resource.resource_type, resource_name=resource.resource_name))
        return build(m.IncrementalAlterConfigsResponse, responses=tuple(responses))

    # --- DescribeLogDirs (35) ------------------------------------------------------------------
    def describe_log_dirs(self, request: Request) -> Any:
        m = response_module(35, request.api_version)
        replicas = self.broker.replicas.replicas
        wanted = None
        if request.body.topics is not None:
            wanted = {(t.topic, p) for t in request.body.topics for p in t.partitions}
        by_topic: dict[str, list] = {}
        for (topic, partition), replica in sorted(replicas.items()):
            if wanted is not None and (topic, partition) not in wanted:
                continue
            p = self.cache.partition(topic, partition)
            lag = 0
            if p is not None and p.leader not in (-1, self.broker.config.broker_id):
                lag = max(int(self.broker.leader_leo_hint.get(p.key, replica.leo) - replica.leo), 0)
            by_topic.setdefault(topic, []).append(
                build(m.DescribeLogDirsPartition, partition_index=partition, partition_size=int(replica.size_bytes),
                      offset_lag=lag, is_future_key=False))
        log_dir = self.broker.config.log_dir
        usage = shutil.disk_usage(log_dir if log_dir.exists() else log_dir.parent)
        result = build(m.DescribeLogDirsResult, error_code=ErrorCode.none, log_dir=str(log_dir),
                       topics=tuple(build(m.DescribeLogDirsTopic, name=t, partitions=tuple(ps))
                                    for t, ps in by_topic.items()),
                       total_bytes=usage.total, usable_bytes=usage.free)
        return build(m.DescribeLogDirsResponse, error_code=ErrorCode.none, results=(result,))

    # --- controller-routed APIs ---------------------------------------------------------------------
    async def _forward(self, op: str, **payload: Any) -> dict | None:
        """KRaft: send a controller request to the active controller (KIP-590 forwarding); None when no
        controller answers (the caller answers NOT_CONTROLLER and the client retries)."""
        try:
            answer = await self.broker._to_controller({"op": op, **payload})
        except (OSError, TimeoutError):
            return None
        return None if answer.get("error") else answer

    async def elect_leaders(self, request: Request) -> Any:
        m = response_module(43, request.api_version)
        controller = self.broker.controller
        kraft = self.broker.config.kraft
        if not kraft and not controller.active:
            return build(m.ElectLeadersResponse, error_code=ErrorCode.not_controller, replica_election_results=())
        election_type = getattr(request.body, "election_type", 0)
        wanted = request.body.topic_partitions
        keys = None if wanted is None else [(t.topic, p) for t in wanted for p in t.partitions]
        if election_type != 0:
            results = {k: int(ErrorCode.invalid_request) for k in (keys or [])}
        elif kraft:
            wanted_keys = None if keys is None else [list(k) for k in keys]
            answer = await self._forward("elect_preferred", partitions=wanted_keys)
            if answer is None:
                return build(m.ElectLeadersResponse, error_code=ErrorCode.not_controller, replica_election_results=())
            results = {(t, p): code for t, p, code in answer["results"]}
        else:
            results = controller.elect_preferred(keys)
        by_topic: dict[str, list] = {}
        for (topic, partition), code in sorted(results.items()):
            by_topic.setdefault(topic, []).append(
                build(m.PartitionResult, partition_id=partition, error_code=ErrorCode(code),
                      error_message=None if code == 0 else ErrorCode(code).name))
        return build(m.ElectLeadersResponse, error_code=ErrorCode.none, replica_election_results=tuple(
            build(m.ReplicaElectionResult, topic=t, partition_result=tuple(ps)) for t, ps in by_topic.items()))

    async def alter_partition_reassignments(self, request: Request) -> Any:
        m = response_module(45, request.api_version)
        controller = self.broker.controller
        kraft = self.broker.config.kraft
        if not kraft and not controller.active:
            return build(m.AlterPartitionReassignmentsResponse, error_code=ErrorCode.not_controller,
                         error_message="not the controller", responses=())
        requests = {
            (t.name, p.partition_index): (None if p.replicas is None else list(p.replicas))
            for t in request.body.topics for p in t.partitions
        }
        if kraft:
            answer = await self._forward("reassign", partitions=[[t, p, r] for (t, p), r in requests.items()])
            if answer is None:
                return build(m.AlterPartitionReassignmentsResponse, error_code=ErrorCode.not_controller,
                             error_message="no active controller answered", responses=())
            results = {(t, p): (code, message) for t, p, code, message in answer["results"]}
        else:
            results = controller.reassign(requests)
        by_topic: dict[str, list] = {}
        for (topic, partition), (code, message) in results.items():
            by_topic.setdefault(topic, []).append(
                build(m.ReassignablePartitionResponse, partition_index=partition, error_code=ErrorCode(code),
                      error_message=message or None))
        return build(m.AlterPartitionReassignmentsResponse, error_code=ErrorCode.none, error_message=None,
                     responses=tuple(build(m.ReassignableTopicResponse, name=t, partitions=tuple(ps))
                                     for t, ps in by_topic.items()))

    async def list_partition_reassignments(self, request: Request) -> Any:
        m = response_module(46, request.api_version)
        controller = self.broker.controller
        kraft = self.broker.config.kraft
        if not kraft and not controller.active:
            return build(m.ListPartitionReassignmentsResponse, error_code=ErrorCode.not_controller,
                         error_message="not the controller", topics=())
        wanted = None
        if request.body.topics is not None:
            wanted = {(t.name, p) for t in request.body.topics for p in t.partition_indexes}
        if kraft:
            answer = await self._forward("ongoing_reassignments")
            if answer is None:
                return build(m.ListPartitionReassignmentsResponse, error_code=ErrorCode.not_controller,
                             error_message="no active controller answered", topics=())
            ongoing = [(o["topic"], o["partition"], o["replicas"], o["adding"], o["removing"])
                       for o in answer["partitions"]]
        else:
            ongoing = [(p.topic, p.partition, p.replicas, p.adding, p.removing)
                       for p in controller.ongoing_reassignments()]
        by_topic: dict[str, list] = {}
        for topic, partition, replicas, adding, removing in ongoing:
            if wanted is None or (topic, partition) in wanted:
                by_topic.setdefault(topic, []).append(
                    build(m.OngoingPartitionReassignment, partition_index=partition, replicas=tuple(replicas),
                          adding_replicas=tuple(adding), removing_replicas=tuple(removing)))
        return build(m.ListPartitionReassignmentsResponse, error_code=ErrorCode.none, error_message=None,
                     topics=tuple(build(m.OngoingTopicReassignment, name=t, partitions=tuple(ps))
                                  for t, ps in by_topic.items()))

    # --- Produce (0) -------------------------------------------------------------------------------
    async def produce(self, request: Request) -> Any:
        """Append one RecordBatch v2 per partition on the leader (offsets assigned here) and answer by
        ``acks``: 0 no answer, 1 after the append, -1 once the high watermark passed the batch (every
        ISR member holds it) or ``timeout`` ms passed (REQUEST_TIMED_OUT). acks=-1 with fewer ISR
        members than ``min.insync.replicas`` is refused before the append (NOT_ENOUGH_REPLICAS), and
        answered NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below it meanwhile (Kafka's
        ``Partition.appendRecordsToLeader`` / ``DelayedProduce``)."""
        m = response_module(0, request.api_version)
        body = request.body
        replicas = self.broker.replicas
        acks = int(body.acks)
        results: dict[tuple[str, int], dict] = {}
        waits = []
        for topic in body.topic_data:
            for part in topic.partition_data:
                key = (topic.name, part.index)
                result = results[key] = {"error_code": ErrorCode.none, "base_offset": -1, "error_message": None}
                p = self.cache.partition(*key)
                plog = replicas.logs.get(key)
                if p is None:
                    result["error_code"] = ErrorCode.unknown_topic_or_partition
                elif acks not in (0, 1, -1):
                    result["error_code"] = ErrorCode.invalid_required_acks
                elif p.leader != self.broker_id or key not in replicas.replicas:
                    result["error_code"] = ErrorCode.not_leader_or_follower
                    result["leader"] = p
                elif plog is None:
                    result["error_code"] = ErrorCode.invalid_request
                    result["error_message"] = (f"{topic.name} carries simulated traffic only; create a topic "
                                               "with CreateTopics for real records")
                elif body.transactional_id is not None:
                    result["error_code"] = ErrorCode.transactional_id_authorization_failed
                    result["error_message"] = "the sandbox serves no transactions"
                elif acks == -1 and len(p.isr) < self.min_isr(p.topic):
                    result["error_code"] = ErrorCode.not_enough_replicas
                    result["error_message"] = (f"the ISR {p.isr} of {p.name} is smaller than "
                                               f"min.insync.replicas={self.min_isr(p.topic)}")
                else:
                    try:
                        batches = parse_batches(part.records or b"")
                        if len(batches) != 1:
                            raise BatchError(ErrorCode.invalid_record,
                                             f"a produce request carries exactly one batch per partition, "
                                             f"not {len(batches)}")
                        stored = plog.append_as_leader(batches[0], p.leader_epoch)
                    except BatchError as exc:
                        result["error_code"], result["error_message"] = exc.code, str(exc)
                        continue
                    replicas.sync(key)
                    replicas.notify()
                    result["base_offset"] = stored.base_offset
                    result["log_start_offset"] = plog.log_start
                    if acks == -1:
                        waits.append((key, plog, plog.truncations, stored.last_offset + 1))
        if acks == 0:
            failed = any(r["error_code"] != ErrorCode.none for r in results.values())
            return None if failed else NO_RESPONSE  # Kafka closes the connection on an acks=0 error
        deadline = time.monotonic() + max(body.timeout.total_seconds(), 0.0)
        while waits:
            pending = []
            for key, plog, truncations, required in waits:
                p = self.cache.partition(*key)
                if p is None or p.leader != self.broker_id or replicas.logs.get(key) is not plog \
                        or plog.truncations != truncations:
                    results[key]["error_code"] = ErrorCode.not_leader_or_follower
                elif replicas.high_watermark(p) >= required:
                    if len(p.isr) < self.min_isr(p.topic):
                        results[key]["error_code"] = ErrorCode.not_enough_replicas_after_append
                else:
                    pending.append((key, plog, truncations, required))
            waits = pending
            remaining = deadline - time.monotonic()
            if not waits or remaining <= 0:
                break
            await replicas.wait_change(remaining)
        for key, *_ in waits:
            results[key]["error_code"] = ErrorCode.request_timed_out
        by_topic: dict[str, list] = {}
        for (topic, index), r in results.items():
            leader = r.get("leader")
            extra = {}
            if leader is not None and hasattr(m, "LeaderIdAndEpoch"):
                extra["current_leader"] = m.LeaderIdAndEpoch(leader_id=leader.leader, leader_epoch=leader.leader_epoch)
            by_topic.setdefault(topic, []).append(
                build(m.PartitionProduceResponse, index=index, error_code=r["error_code"],
                      base_offset=r["base_offset"], log_append_time=None,
                      log_start_offset=r.get("log_start_offset", -1), record_errors=(),
                      error_message=r["error_message"], **extra))
        return build(m.ProduceResponse, responses=tuple(
            build(m.TopicProduceResponse, name=t, partition_responses=tuple(ps)) for t, ps in by_topic.items()))

    # --- Fetch (1) ---------------------------------------------------------------------------------
    async def fetch(self, request: Request) -> Any:
        """Consumer fetch from the leader, up to the high watermark (the last stable offset is the high
        watermark: no transactions). Waits up to ``max_wait`` until ``min_bytes`` are there (long
        poll). No fetch sessions (KIP-227): the answer's session id is 0, so clients send full fetches;
        a request naming a session gets FETCH_SESSION_ID_NOT_FOUND. Per partition: NOT_LEADER_OR_FOLLOWER
        on a non-leader (no follower fetching, KIP-392), OFFSET_OUT_OF_RANGE outside
        ``[log start, log end]``, UNKNOWN_LEADER_EPOCH when the client knows a newer leader epoch than
        this broker. Simulated topics answer their high watermark and no records."""
        m = response_module(1, request.api_version)
        body = request.body
        if request.api_version >= 7 and body.session_id != 0:
            return build(m.FetchResponse, error_code=ErrorCode.fetch_session_id_not_found, session_id=0,
                         responses=())
        deadline = time.monotonic() + body.max_wait.total_seconds()
        while True:
            responses, total, failed = self._fetch_round(m, request)
            remaining = deadline - time.monotonic()
            if failed or total >= body.min_bytes or remaining <= 0:
                break
            await self.broker.replicas.wait_change(remaining)
        return build(m.FetchResponse, error_code=ErrorCode.none, session_id=0, responses=tuple(responses))

    def _fetch_round(self, m: Any, request: Request) -> tuple[list, int, bool]:
        body = request.body
        replicas = self.broker.replicas
        budget = int(body.max_bytes)
        total, failed = 0, False
        responses = []
        for topic in body.topics:
            topic_id = getattr(topic, "topic_id", None)
            if topic_id is not None:
                info = self.cache.topic_by_id(topic_id)
                name = info.name if info else None
            else:
                name = topic.topic
                info = self.cache.topics.get(name)
            partitions = []
            for part in topic.partitions:
                fields: dict[str, Any] = {"high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1,
                                          "records": b""}
                p = self.cache.partition(name, part.partition) if name else None
                error = ErrorCode.none
                if info is None:
                    error = ErrorCode.unknown_topic_id if topic_id is not None else ErrorCode.unknown_topic_or_partition
                elif p is None:
                    error = ErrorCode.unknown_topic_or_partition
                elif p.leader != self.broker_id or p.key not in replicas.replicas:
                    error = ErrorCode.not_leader_or_follower
                    if hasattr(m, "LeaderIdAndEpoch"):
                        fields["current_leader"] = m.LeaderIdAndEpoch(leader_id=p.leader, leader_epoch=p.leader_epoch)
                elif getattr(part, "current_leader_epoch", -1) > p.leader_epoch:
                    error = ErrorCode.unknown_leader_epoch
                else:
                    hw = replicas.high_watermark(p)
                    replica = replicas.replicas[p.key]
                    fields.update(high_watermark=hw, last_stable_offset=hw, log_start_offset=replica.log_start)
                    plog = replicas.logs.get(p.key)
                    if plog is not None:
                        if not plog.log_start <= part.fetch_offset <= plog.leo:
                            error = ErrorCode.offset_out_of_range
                        else:
                            limit = min(int(part.partition_max_bytes), max(budget, 0))
                            chunks = plog.read(part.fetch_offset, limit, hw)
                            if chunks and (budget > 0 or total == 0):
                                data = b"".join(chunks)
                                fields["records"] = data
                                total += len(data)
                                budget -= len(data)
                failed = failed or error != ErrorCode.none
                partitions.append(build(m.PartitionData, partition_index=part.partition, error_code=error,
                                        aborted_transactions=None, preferred_read_replica=-1, **fields))
            responses.append(build(m.FetchableTopicResponse, topic=name or "", topic_id=topic_id,
                                   partitions=tuple(partitions)))
        return responses, total, failed

    # --- InitProducerId (22) -----------------------------------------------------------------------
    def init_producer_id(self, request: Request) -> Any:
        """A new producer id, epoch 0, for an idempotent producer (Kafka gives a non-transactional
        producer a fresh id on every call, also when it asks to bump its epoch, KIP-360). Ids come from
        blocks reserved in ZooKeeper (``/latest_producer_id_block``). Transactional ids are refused
        (TRANSACTIONAL_ID_AUTHORIZATION_FAILED): the sandbox has no transaction coordinator."""
        m = response_module(22, request.api_version)
        if request.body.transactional_id is not None:
            return build(m.InitProducerIdResponse, error_code=ErrorCode.transactional_id_authorization_failed,
                         producer_id=-1, producer_epoch=-1)
        return build(m.InitProducerIdResponse, error_code=ErrorCode.none,
                     producer_id=self.broker.next_producer_id(), producer_epoch=0)

    # --- CreateTopics (19) / DeleteTopics (20) ----------------------------------------------------------
    def _validate_new_topic(self, topic: Any, seen: set[str]) -> tuple[ErrorCode, str | None, dict]:
        """Kafka's checks of a CreatableTopic (``ZkAdminManager.createTopics``); returns (error, message,
        plan) with plan ``{"partitions", "rf", "assignment", "configs"}``."""
        name = topic.name
        if name in seen:
            return ErrorCode.invalid_request, f"topic {name} appears twice in the request", {}
        seen.add(name)
        if not LEGAL_TOPIC_NAME.match(name) or name in (".", ".."):
            return ErrorCode.invalid_topic_exception, f"illegal topic name {name!r}", {}
        if name in self.cache.topics:
            return ErrorCode.topic_already_exists, f"Topic '{name}' already exists.", {}
        configs = {}
        for config in topic.configs:
            if config.value is None:
                return ErrorCode.invalid_request, f"null value for config {config.name}", {}
            configs[config.name] = config.value
        if "min.insync.replicas" in configs and not (configs["min.insync.replicas"].isdigit()
                                                      and int(configs["min.insync.replicas"]) >= 1):
            return ErrorCode.invalid_config, f"min.insync.replicas={configs['min.insync.replicas']!r}", {}
        live = {b.id: b.rack for b in self.cache.brokers.values()}
        broker = self.broker_configs()
        if topic.assignments:
            if topic.num_partitions != -1 or topic.replication_factor != -1:
                return ErrorCode.invalid_request, ("both partition assignment and partition count or "
                                                   "replication factor given"), {}
            assignment = {a.partition_index: list(a.broker_ids) for a in topic.assignments}
            if sorted(assignment) != list(range(len(assignment))):
                return ErrorCode.invalid_replica_assignment, "partitions must be numbered 0..n-1", {}
            sizes = {len(r) for r in assignment.values()}
            bad = sorted({b for r in assignment.values() for b in r} - set(live))
            if len(sizes) != 1 or any(len(set(r)) != len(r) for r in assignment.values()) or bad:
                why = f"unknown or offline brokers {bad}" if bad else "uneven or duplicate replicas"
                return ErrorCode.invalid_replica_assignment, why, {}
            return ErrorCode.none, None, {"partitions": len(assignment), "rf": sizes.pop(),
                                          "assignment": assignment, "configs": configs}
        partitions = topic.num_partitions if topic.num_partitions != -1 else int(broker["num.partitions"][0])
        rf = topic.replication_factor if topic.replication_factor != -1 else int(
            broker["default.replication.factor"][0])
        if partitions <= 0:
            return ErrorCode.invalid_partitions, "Number of partitions must be larger than 0.", {}
        if rf <= 0:
            return ErrorCode.invalid_replication_factor, "Replication factor must be larger than 0.", {}
        if rf > len(live):
            return ErrorCode.invalid_replication_factor, (
                f"Replication factor: {rf} larger than available brokers: {len(live)}."), {}
        assignment = zkpaths.assign_replicas(partitions, rf, live.items())
        return ErrorCode.none, None, {"partitions": partitions, "rf": rf, "assignment": assignment,
                                      "configs": configs}

    async def create_topics(self, request: Request) -> Any:
        """Create topics with real record logs (controller only): validate as Kafka does
        (INVALID_REPLICATION_FACTOR when the factor exceeds the live brokers, INVALID_PARTITIONS,
        TOPIC_ALREADY_EXISTS, INVALID_REPLICA_ASSIGNMENT, INVALID_CONFIG), place replicas rack-aware
        (``zkpaths.assign_replicas``), write the config and assignment znodes as ZK-mode Kafka does,
        then wait (at most the request's timeout) until the controller elected every leader."""
        m = response_module(19, request.api_version)
        body = request.body
        results: dict[str, dict] = {}
        created: list[str] = []
        seen: set[str] = set()
        for topic in body.topics:
            if not self.broker.config.kraft and not self.broker.controller.active:
                results[topic.name] = {"error_code": ErrorCode.not_controller, "error_message": None}
                continue
            error, message, plan = self._validate_new_topic(topic, seen)
            results[topic.name] = {"error_code": error, "error_message": message, **plan}
            if error != ErrorCode.none or body.validate_only:
                continue
            try:
                zkpaths.create_topic(self.broker.zk, topic.name, plan["partitions"], plan["rf"], (),
                                     configs=plan["configs"], records=True, assignment=plan["assignment"])
            except ValueError as exc:
                results[topic.name].update(error_code=ErrorCode.topic_already_exists, error_message=str(exc))
                continue
            created.append(topic.name)
        if created:
            self.broker.schedule_refresh()

            def ready() -> bool:
                for name in created:
                    info = self.cache.topics.get(name)
                    if info is None or any(p.leader == -1 for p in info.partitions.values()):
                        return False
                return True

            timeout = min(max(body.timeout.total_seconds(), 0.0), MAX_ADMIN_WAIT_S)
            if not await self._wait_until(ready, timeout):
                for name in created:
                    results[name].update(error_code=ErrorCode.request_timed_out,
                                         error_message="topic created; leaders not elected yet")
        answers = []
        for topic in body.topics:
            r = results[topic.name]
            ok = r["error_code"] == ErrorCode.none
            info = self.cache.topics.get(topic.name)
            configs = None
            if ok and hasattr(m, "CreatableTopicConfigs"):
                current = self.topic_configs(topic.name) if info else {}
                configs = tuple(
                    build(m.CreatableTopicConfigs, name=k, value=v, read_only=False, config_source=source,
                          is_sensitive=False)
                    for k, (v, source) in sorted(current.items()))
            answers.append(build(
                m.CreatableTopicResult, name=topic.name, topic_id=info.topic_id if ok and info else None,
                error_code=r["error_code"], error_message=r["error_message"], topic_config_error_code=0,
                num_partitions=r.get("partitions", -1) if ok else -1, replication_factor=r.get("rf", -1) if ok else -1,
                configs=configs))
        return build(m.CreateTopicsResponse, topics=tuple(answers))

    async def _wait_until(self, condition, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.05)
        return True

    async def delete_topics(self, request: Request) -> Any:
        """Delete topics (controller only) as ZK-mode Kafka does: mark ``/admin/delete_topics/<t>``, remove
        the topic's znodes, let every broker drop its replicas; answers once the metadata no longer
        shows the topic. Workload topics with simulated traffic are refused (POLICY_VIOLATION): the
        sandbox's consumer groups and Burrow rely on them."""
        m = response_module(20, request.api_version)
        body = request.body
        wanted: list[tuple[str | None, uuid.UUID | None]] = []
        if hasattr(body, "topics"):
            wanted = [(t.name, t.topic_id) for t in body.topics]
        else:
            wanted = [(name, None) for name in body.topic_names]
        results = []
        deleted = []
        for name, topic_id in wanted:
            info = self.cache.topics.get(name) if name else self.cache.topic_by_id(topic_id)
            error, message = ErrorCode.none, None
            if not self.broker.config.kraft and not self.broker.controller.active:
                error = ErrorCode.not_controller
            elif info is None:
                error = ErrorCode.unknown_topic_id if name is None else ErrorCode.unknown_topic_or_partition
            elif not info.records:
                error, message = ErrorCode.policy_violation, f"{info.name} is a sandbox workload topic"
            else:
                zk = self.broker.zk
                zk.ensure_path(zkpaths.DELETE_TOPICS)
                if not zk.exists(f"{zkpaths.DELETE_TOPICS}/{info.name}"):
                    zk.create(f"{zkpaths.DELETE_TOPICS}/{info.name}", b"")
                zkpaths.delete_topic(zk, info.name)
                deleted.append(info.name)
            results.append((info.name if info else name, info.topic_id if info else topic_id, error, message))
        if deleted:
            self.broker.controller.bump()
            self.broker.schedule_refresh()
            timeout = min(max(body.timeout.total_seconds(), 0.0), MAX_ADMIN_WAIT_S)
            if not await self._wait_until(lambda: not any(t in self.cache.topics for t in deleted), timeout):
                results = [(n, i, ErrorCode.request_timed_out if n in deleted else e, msg)
                           for n, i, e, msg in results]
        return build(m.DeleteTopicsResponse, responses=tuple(
            build(m.DeletableTopicResult, name=n, topic_id=i, error_code=e, error_message=msg)
            for n, i, e, msg in results))
