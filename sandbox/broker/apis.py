"""Kafka API handlers of the sandbox broker: request entity in, response entity out.

Each handler serves every version it advertises (:func:`sandbox.broker.protocol.supported_apis`):
it passes all fields it knows to :func:`~sandbox.broker.protocol.build`, which keeps those the
version's kio class has. Requests that Kafka routes to the controller (ElectLeaders,
AlterPartitionReassignments, ListPartitionReassignments) answer NOT_CONTROLLER elsewhere, as a ZK-mode
broker does, so clients re-route to the controller from Metadata.
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import NoNodeError
from kio.schema.errors import ErrorCode

from sandbox.broker import zkpaths
from sandbox.broker.protocol import Request, build, response_module, supported_apis

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
            2: self.list_offsets,
            3: self.metadata,
            18: self.api_versions,
            32: self.describe_configs,
            33: self.alter_configs,
            35: self.describe_log_dirs,
            43: self.elect_leaders,
            44: self.incremental_alter_configs,
            45: self.alter_partition_reassignments,
            46: self.list_partition_reassignments,
            60: self.describe_cluster,
        }

    @property
    def cache(self):
        return self.broker.cache

    def handle(self, request: Request) -> Any:
        return self.handlers[request.api_key](request)

    # --- ApiVersions (18) ------------------------------------------------------------------------
    def api_versions(self, request: Request) -> Any:
        m = response_module(18, request.api_version)
        apis = supported_apis(self.broker.config.version)
        return build(
            m.ApiVersionsResponse,
            error_code=ErrorCode.none,
            api_keys=tuple(m.ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in apis.items()),
            supported_features=(),
            finalized_features_epoch=-1,
            finalized_features=(),
            zk_migration_ready=False,
        )

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
                     controller_id=cache.controller_id, topics=tuple(topics))

    # --- DescribeCluster (60) ------------------------------------------------------------------------
    def describe_cluster(self, request: Request) -> Any:
        m = response_module(60, request.api_version)
        brokers = tuple(
            build(m.DescribeClusterBroker, broker_id=b.id, host=b.host, port=b.port, rack=b.rack)
            for b in sorted(self.cache.brokers.values(), key=lambda b: b.id)
        )
        return build(m.DescribeClusterResponse, error_code=ErrorCode.none, error_message=None,
                     endpoint_type=1, cluster_id=self.cache.cluster_id, controller_id=self.cache.controller_id,
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
        return ErrorCode.none, self.broker.replicas.high_watermark(p)  # LATEST / by time: the HW

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
    def elect_leaders(self, request: Request) -> Any:
        m = response_module(43, request.api_version)
        controller = self.broker.controller
        if not controller.active:
            return build(m.ElectLeadersResponse, error_code=ErrorCode.not_controller, replica_election_results=())
        election_type = getattr(request.body, "election_type", 0)
        wanted = request.body.topic_partitions
        keys = None if wanted is None else [(t.topic, p) for t in wanted for p in t.partitions]
        if election_type != 0:
            results = {k: int(ErrorCode.invalid_request) for k in (keys or [])}
        else:
            results = controller.elect_preferred(keys)
        by_topic: dict[str, list] = {}
        for (topic, partition), code in sorted(results.items()):
            by_topic.setdefault(topic, []).append(
                build(m.PartitionResult, partition_id=partition, error_code=ErrorCode(code),
                      error_message=None if code == 0 else ErrorCode(code).name))
        return build(m.ElectLeadersResponse, error_code=ErrorCode.none, replica_election_results=tuple(
            build(m.ReplicaElectionResult, topic=t, partition_result=tuple(ps)) for t, ps in by_topic.items()))

    def alter_partition_reassignments(self, request: Request) -> Any:
        m = response_module(45, request.api_version)
        controller = self.broker.controller
        if not controller.active:
            return build(m.AlterPartitionReassignmentsResponse, error_code=ErrorCode.not_controller,
                         error_message="not the controller", responses=())
        requests = {
            (t.name, p.partition_index): (None if p.replicas is None else list(p.replicas))
            for t in request.body.topics for p in t.partitions
        }
        results = controller.reassign(requests)
        by_topic: dict[str, list] = {}
        for (topic, partition), (code, message) in results.items():
            by_topic.setdefault(topic, []).append(
                build(m.ReassignablePartitionResponse, partition_index=partition, error_code=ErrorCode(code),
                      error_message=message or None))
        return build(m.AlterPartitionReassignmentsResponse, error_code=ErrorCode.none, error_message=None,
                     responses=tuple(build(m.ReassignableTopicResponse, name=t, partitions=tuple(ps))
                                     for t, ps in by_topic.items()))

    def list_partition_reassignments(self, request: Request) -> Any:
        m = response_module(46, request.api_version)
        controller = self.broker.controller
        if not controller.active:
            return build(m.ListPartitionReassignmentsResponse, error_code=ErrorCode.not_controller,
                         error_message="not the controller", topics=())
        wanted = None
        if request.body.topics is not None:
            wanted = {(t.name, p) for t in request.body.topics for p in t.partition_indexes}
        by_topic: dict[str, list] = {}
        for p in controller.ongoing_reassignments():
            if wanted is None or p.key in wanted:
                by_topic.setdefault(p.topic, []).append(
                    build(m.OngoingPartitionReassignment, partition_index=p.partition, replicas=tuple(p.replicas),
                          adding_replicas=tuple(p.adding), removing_replicas=tuple(p.removing)))
        return build(m.ListPartitionReassignmentsResponse, error_code=ErrorCode.none, error_message=None,
                     topics=tuple(build(m.OngoingTopicReassignment, name=t, partitions=tuple(ps))
                                  for t, ps in by_topic.items()))
