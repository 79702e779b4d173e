"""The sandbox's health as a Kafka client sees it: Kafka's Metadata (confluent-kafka), the KRaft quorum
(DescribeQuorum through kafka-python), Burrow (HTTP), pid files.

:func:`cluster_health` is what `up` waits on and `status` prints: the live brokers (registered in ZooKeeper
mode, unfenced in KRaft mode), the controller and every partition's leader / ISR, in either mode.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka.admin import AdminClient

from sandbox import burrow, service, settings, state
from sandbox.layout import Workdir
from sandbox.workload import stalled_until


@dataclass
class ClusterHealth:
    """One Metadata snapshot. Partitions are ``"topic-p"`` strings."""

    brokers: list[int]
    controller: int | None
    partitions: int = 0
    under_replicated: list[str] = field(default_factory=list)
    offline: list[str] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)

    def healthy(self, expected_brokers: list[int]) -> bool:
        """All ``expected_brokers`` live, a controller, every partition led and fully in sync."""
        return (
            set(expected_brokers) <= set(self.brokers)
            and self.controller is not None
            and self.partitions > 0
            and not self.under_replicated
            and not self.offline
        )

    def problems(self, expected_brokers: list[int]) -> str:
        """A one-line description of what is not healthy yet (for timeout messages)."""
        missing = sorted(set(expected_brokers) - set(self.brokers))
        parts = []
        if missing:
            parts.append(f"brokers not live: {missing}")
        if self.controller is None:
            parts.append("no controller")
        if not self.partitions:
            parts.append("no partitions")
        for label, items in [("offline", self.offline), ("under-replicated", self.under_replicated)]:
            if items:
                parts.append(f"{len(items)} {label} partitions (e.g. {', '.join(items[:3])})")
        return "; ".join(parts) or "healthy"


def admin_client(bootstrap_servers: str, timeout_s: float = 5.0, config: dict[str, Any] | None = None
                 ) -> AdminClient:
    """A quiet confluent-kafka AdminClient (librdkafka's connection warnings off); ``config``: librdkafka settings
    over these (a listener's security settings, callbacks)."""
    return AdminClient({"bootstrap.servers": bootstrap_servers, "socket.timeout.ms": int(timeout_s * 1000),
                        "log_level": 0, "client.id": "sandbox-status", **(config or {})})


def cluster_health(bootstrap_servers: str, timeout_s: float = 5.0, client: AdminClient | None = None) -> ClusterHealth:
    """Brokers, controller and every partition (internal topics included) from Kafka's Metadata.

    Raises:
        confluent_kafka.KafkaException: no broker answered within ``timeout_s`` seconds.
    """
    md = (client or admin_client(bootstrap_servers, timeout_s)).list_topics(timeout=timeout_s)
    controller = md.controller_id if md.controller_id is not None and md.controller_id >= 0 else None
    health = ClusterHealth(brokers=sorted(md.brokers), controller=controller, topics=sorted(md.topics))
    for name, topic in md.topics.items():
        if topic.error is not None:
            continue
        for p, meta in topic.partitions.items():
            health.partitions += 1
            label = f"{name}-{p}"
            if meta.leader < 0:
                health.offline.append(label)
            elif len(meta.isrs) < len(meta.replicas):
                health.under_replicated.append(label)
    health.under_replicated.sort()
    health.offline.sort()
    return health


def quorum(bootstrap_servers: str, timeout_s: float = 5.0) -> dict[str, Any]:
    """The KRaft quorum as DescribeQuorum reports it (any broker forwards it to the active controller):
    ``{"leader": id, "epoch": n, "high_watermark": offset, "voters": [{"id", "end_offset", "lag"}],
    "observers": [...]}``.

    Raises:
        Exception: kafka-python's errors when no broker answers (the caller reports them).
    """
    from kafka.admin import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=bootstrap_servers, request_timeout_ms=int(timeout_s * 1000),
                              client_id="sandbox-status")
    try:
        described = client.describe_metadata_quorum()
    finally:
        client.close()
    return _quorum_doc(described["topics"][0]["partitions"][0])


def _quorum_doc(part: dict[str, Any]) -> dict[str, Any]:
    """:func:`quorum`'s shape from DescribeQuorum's ``__cluster_metadata`` partition entry (kafka-python's dict)."""
    hw = part["high_watermark"]

    def replicas(key: str) -> list[dict[str, Any]]:
        return [{"id": r["replica_id"], "end_offset": r["log_end_offset"],
                 "lag": max(0, hw - r["log_end_offset"])} for r in part.get(key) or []]

    return {"leader": part["leader_id"], "epoch": part["leader_epoch"], "high_watermark": hw,
            "voters": replicas("current_voters"), "observers": replicas("observers")}


def controller_quorum(address: str, timeout_s: float = 3.0) -> dict[str, Any] | None:
    """DescribeQuorum asked of the KRaft controller at ``address`` (``host:port`` of its CONTROLLER listener;
    KIP-919: controllers answer it, as ``kafka-metadata-quorum --bootstrap-controller`` asks) in the shape of
    :func:`quorum`; None when that controller is not the quorum leader (NOT_LEADER_OR_FOLLOWER) or no leader is
    elected yet. A voter's ``end_offset`` is -1 while it has not fetched from the leader in the leader's epoch.

    Raises:
        Exception: kafka-python's errors when the controller does not answer.
    """
    from kafka.net.compat import KafkaNetClient
    from kafka.protocol.admin import DescribeQuorumRequest

    timeout_ms = int(timeout_s * 1000)
    client = KafkaNetClient(bootstrap_servers=address, request_timeout_ms=timeout_ms, client_id="sandbox-status",
                            socket_connection_setup_timeout_ms=timeout_ms)
    manager = client._manager
    node = manager.cluster.bootstrap_brokers()[0]
    topic = DescribeQuorumRequest.TopicData
    request = DescribeQuorumRequest(topics=[
        topic(topic_name="__cluster_metadata", partitions=[topic.PartitionData(partition_index=0)])])

    async def ask() -> Any:
        return await manager.get_connection(node.node_id).send_request(request)

    try:
        answer = client._net.run(ask).to_dict()
    finally:
        manager.close()
        client._net.close() if hasattr(client._net, "close") else None
    partitions = [p for t in answer.get("topics") or [] for p in t.get("partitions") or []]
    if answer.get("error_code") or not partitions or partitions[0].get("error_code") or partitions[0]["leader_id"] < 0:
        return None
    return _quorum_doc(partitions[0])


def report(workdir: Workdir) -> dict[str, Any]:
    """The `status` document: processes, brokers (live / process), controller, URPs, offline partitions, the
    KRaft quorum and Burrow's view of each consumer group (status, total lag).

    Raises:
        state.NotASandbox: no sandbox in ``workdir``.
    """
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    info = state.load(workdir)
    running = state.running_processes(workdir)
    doc: dict[str, Any] = {"workdir": str(workdir.root), "mode": info.mode, "kafka_version": info.kafka_version,
                           "processes": running}
    try:
        health: ClusterHealth | None = cluster_health(info.bootstrap_servers, timeout_s=3.0)
    except Exception as exc:  # noqa: BLE001 - report, do not fail: status is for diagnosis
        doc["metadata"] = {"error": f"no broker of {info.bootstrap_servers} answered: {exc}"}
        health = None
    doc["brokers"] = [
        {
            "id": spec.id,
            "host": spec.host,
            "rack": spec.rack,
            "spare": spec.spare,
            "process": f"kafka-{spec.id}" in running,
            "service": service.status(workdir.host(spec.id))[0] if workdir.host(spec.id).path.exists() else None,
            "registered": bool(health and spec.id in health.brokers),
        }
        for spec in info.broker_specs
    ]
    if health is not None:
        doc["alive_brokers"] = health.brokers
        doc["controller"] = health.controller
        doc["partitions"] = health.partitions
        doc["under_replicated_partitions"] = health.under_replicated
        doc["urp_count"] = len(health.under_replicated)
        doc["offline_partitions"] = health.offline
        doc["healthy"] = health.healthy([s.id for s in info.active_specs])
    if info.kraft:
        try:
            described = quorum(info.bootstrap_servers, timeout_s=3.0)
        except Exception as exc:  # noqa: BLE001
            described = {"error": str(exc)}
        doc["quorum"] = described
        lag = {v["id"]: v["lag"] for v in described.get("voters", [])}
        doc["controllers"] = [
            {"id": c["id"], "host": c["host"], "process": f"kafka-{c['id']}" in running,
             "role": ("leader" if described.get("leader") == c["id"] else "follower") if c["id"] in lag else None,
             "lag": lag.get(c["id"])}
            for c in info.controller_hosts
        ]
    groups: dict[str, Any] = {}
    for group in settings.WORKLOAD_GROUPS:
        try:
            st = burrow.group_status(info.burrow_url, group)
            groups[group] = {"status": st.get("status"), "total_lag": st.get("totallag")}
        except Exception as exc:  # noqa: BLE001
            groups[group] = {"status": None, "error": str(exc)}
        stalled = stalled_until(workdir, group)
        if stalled:
            groups[group]["stalled_until"] = stalled
    doc["consumer_groups"] = groups
    return doc


def dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, sort_keys=False)
