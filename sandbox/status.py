"""The sandbox's health as its observers see it: ZooKeeper (kazoo), Kafka Metadata (confluent-kafka),
Burrow (HTTP), pid files.

:func:`cluster_health` reads Kafka's ZK-mode nodes (what a real ZK-mode cluster shows:
``/brokers/ids``, ``/controller``, partition ``state`` nodes); `up` waits on it and `status` prints it
together with the processes and the consumer groups' evaluation by Burrow.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from sandbox import burrow, metadata_access, service, settings, state
from sandbox.broker import zkpaths
from sandbox.layout import Workdir
from sandbox.workload import stalled_until


@dataclass
class ClusterHealth:
    """One snapshot from ZooKeeper. Partitions are ``"topic-p"`` strings."""

    brokers: list[int]
    controller: int | None
    partitions: int = 0
    under_replicated: list[str] = field(default_factory=list)
    offline: list[str] = field(default_factory=list)
    unassigned: list[str] = field(default_factory=list)  # no state node yet (controller not done)

    def healthy(self, expected_brokers: list[int]) -> bool:
        """All ``expected_brokers`` registered, a controller, every partition led and fully in sync."""
        return (
            set(expected_brokers) <= set(self.brokers)
            and self.controller is not None
            and self.partitions > 0
            and not self.under_replicated
            and not self.offline
            and not self.unassigned
        )

    def problems(self, expected_brokers: list[int]) -> str:
        """A one-line description of what is not healthy yet (for timeout messages)."""
        missing = sorted(set(expected_brokers) - set(self.brokers))
        parts = []
        if missing:
            parts.append(f"brokers not registered: {missing}")
        if self.controller is None:
            parts.append("no controller")
        for label, items in [
            ("offline", self.offline),
            ("under-replicated", self.under_replicated),
            ("without state", self.unassigned),
        ]:
            if items:
                parts.append(f"{len(items)} {label} partitions (e.g. {', '.join(items[:3])})")
        return "; ".join(parts) or "healthy"


def cluster_health(zk: KazooClient) -> ClusterHealth:
    """Read brokers, controller and every partition's state from ZooKeeper, or (KRaft mode, ``zk`` a
    quorum client) from the metadata log; there the controller is the quorum's active controller."""
    brokers = sorted(int(b) for b in zk.get_children(zkpaths.BROKER_IDS))
    if hasattr(zk, "leader_id"):  # a RemoteQuorumClient: KRaft mode
        controller = zk.leader_id
    else:
        try:
            controller = zkpaths.loads(zk.get(zkpaths.CONTROLLER)[0])["brokerid"]
        except NoNodeError:
            controller = None
    health = ClusterHealth(brokers=brokers, controller=controller)
    for topic in zk.get_children(zkpaths.BROKER_TOPICS):
        assignment = zkpaths.loads(zk.get(zkpaths.topic_path(topic))[0])["partitions"]
        for p, replicas in assignment.items():
            health.partitions += 1
            name = f"{topic}-{p}"
            try:
                st = zkpaths.loads(zk.get(zkpaths.partition_state_path(topic, int(p)))[0])
            except NoNodeError:
                health.unassigned.append(name)
                continue
            if st.get("leader", -1) < 0:
                health.offline.append(name)
            elif len(st.get("isr", [])) < len(replicas):
                health.under_replicated.append(name)
    for items in (health.under_replicated, health.offline, health.unassigned):
        items.sort()
    return health


def metadata_view(bootstrap_servers: str, timeout_s: float = 3.0) -> dict[str, Any]:
    """What a Kafka client sees (confluent-kafka Metadata): ``{"brokers": [ids], "controller": id}``,
    or ``{"error": ...}`` when no broker answers within ``timeout_s`` seconds."""
    from confluent_kafka.admin import AdminClient

    client = AdminClient(
        {"bootstrap.servers": bootstrap_servers, "socket.timeout.ms": int(timeout_s * 1000), "log_level": 0}
    )
    try:
        md = client.list_topics(timeout=timeout_s)
    except Exception as exc:  # noqa: BLE001 - report, do not fail
        return {"error": str(exc)}
    return {"brokers": sorted(md.brokers), "controller": md.controller_id}


def report(workdir: Workdir) -> dict[str, Any]:
    """The `status` document: processes, brokers (registered/process alive), controller, URPs,
    offline partitions and Burrow's view of each consumer group (status, total lag).

    Raises:
        state.NotASandbox: no sandbox in ``workdir``.
    """
    info = state.load(workdir)
    running = state.running_processes(workdir)
    doc: dict[str, Any] = {"workdir": str(workdir.root), "processes": running}
    doc["mode"] = info.mode
    try:
        zk = metadata_access.open_client(info, timeout_s=3.0)
    except Exception as exc:  # noqa: BLE001 - report, do not fail: status is for diagnosis
        doc["zookeeper" if not info.kraft else "quorum"] = {
            "error": f"{metadata_access.store_name(info)} unreachable: {exc}"}
        health = None
    else:
        try:
            health = cluster_health(zk)
        finally:
            zk.stop()
            zk.close()
    doc["brokers"] = [
        {
            "id": spec.id,
            "host": spec.host,
            "rack": spec.rack,
            "spare": spec.spare,
            "process": f"broker-{spec.id}" in running,
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
        doc["controllers"] = [
            {"id": c["id"], "host": c["host"], "process": f"broker-{c['id']}" in running,
             **{k: v for k, v in service.quorum_status(workdir.host(c["id"])).items()
                if k in ("role", "leader", "epoch", "end_offset", "high_watermark")}}
            for c in info.controller_hosts
        ]
    doc["metadata"] = metadata_view(info.bootstrap_servers)
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
