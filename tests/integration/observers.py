"""Independent observers of a sandbox cluster for tests: what real clients see from outside.

confluent-kafka's AdminClient for metadata, kazoo for ZooKeeper, plus a background watcher that
polls metadata during an operation and records every snapshot (to assert, e.g., that no partition
was ever offline). Waits use deadlines, never fixed sleeps.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient

from sandbox import node_log

T = TypeVar("T")


def wait_for(condition: Callable[[], T], timeout_s: float, interval_s: float = 0.2, what: str = "condition") -> T:
    """Poll ``condition`` until it returns a truthy value (returned) or ``timeout_s`` passes.

    Raises:
        AssertionError: the deadline passed; the message names ``what`` and the last value.
    """
    deadline = time.monotonic() + timeout_s
    last: object = None
    while time.monotonic() < deadline:
        last = condition()
        if last:
            return last  # type: ignore[return-value]
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}; last value: {last!r}")


@dataclass(frozen=True)
class PartitionView:
    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True)
class ClusterView:
    """One metadata snapshot: live broker ids, controller id and every partition."""

    at: float
    brokers: frozenset[int]
    controller: int
    partitions: tuple[PartitionView, ...]
    answered_by: int = -1  # the broker whose metadata cache answered (librdkafka's orig_broker_id)
    wall: float = 0.0  # epoch seconds of the answer, to line it up with the brokers' own logs
    #: (topic, partition) the answering broker's cache showed leaderless while ZooKeeper (the ZooKeeper-mode source
    #: of leadership) already named a live leader before the answer: a stale cache, not an offline partition
    stale: frozenset[tuple[str, int]] = frozenset()

    @property
    def offline(self) -> list[PartitionView]:
        return [p for p in self.partitions if p.leader == -1 and (p.topic, p.partition) not in self.stale]

    @property
    def under_replicated(self) -> list[PartitionView]:
        return [p for p in self.partitions if len(p.isr) < len(p.replicas)]

    def led_by(self, broker: int) -> list[PartitionView]:
        return [p for p in self.partitions if p.leader == broker]

    def in_isr_of(self, broker: int) -> list[PartitionView]:
        return [p for p in self.partitions if broker in p.isr]

    def partition(self, topic: str, partition: int) -> PartitionView:
        return next(p for p in self.partitions if p.topic == topic and p.partition == partition)


def admin(bootstrap_servers: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap_servers, "log_level": 0})


def snapshot(client: AdminClient) -> ClusterView:
    """Metadata as confluent-kafka (librdkafka) reports it."""
    md = client.list_topics(timeout=10)
    partitions = tuple(
        PartitionView(t.topic, p.id, p.leader, tuple(p.replicas), tuple(p.isrs))
        for t in md.topics.values()
        for p in t.partitions.values()
    )
    return ClusterView(time.monotonic(), frozenset(md.brokers), md.controller_id, partitions,
                       answered_by=md.orig_broker_id, wall=time.time())


def zk_client(connect: str) -> KazooClient:
    zk = KazooClient(hosts=connect)
    zk.start(timeout=10)
    return zk


def registration(zk: KazooClient, broker_id: int) -> dict | None:
    """Kafka's ``/brokers/ids/<id>`` JSON, or None when the broker is not registered."""
    if not zk.exists(f"/brokers/ids/{broker_id}"):
        return None
    data, _ = zk.get(f"/brokers/ids/{broker_id}")
    return json.loads(data)


def stale_leaderless(zk: KazooClient, view: ClusterView) -> frozenset[tuple[str, int]]:
    """The partitions ``view`` shows without a leader whose ZooKeeper state (``/brokers/topics/<t>/partitions/<p>/
    state``, written by the controller before it tells any broker) named a leader live in ``view`` and was last
    written before the answer: the answering broker's metadata cache had not heard of the new leader yet (during a
    controller failover the old controller's last UpdateMetadata may never reach it). A partition whose state
    changed after the answer, or names no live leader, stays offline."""
    stale = set()
    for p in view.partitions:
        if p.leader != -1:
            continue
        try:
            data, stat = zk.get(f"/brokers/topics/{p.topic}/partitions/{p.partition}/state")
        except Exception:  # noqa: BLE001 - no state to confirm with: the partition stays offline
            continue
        leader = json.loads(data).get("leader", -1)
        if leader in view.brokers and stat.mtime / 1000 < view.wall:
            stale.add((p.topic, p.partition))
    return frozenset(stale)


@dataclass
class MetadataWatcher:
    """Polls metadata in a background thread every ``interval_s`` and keeps every snapshot. With ``zookeeper`` (a
    ZooKeeper-mode cluster's connect string), a snapshot showing leaderless partitions is checked at once against
    ZooKeeper's partition states (:func:`stale_leaderless`)."""

    bootstrap_servers: str
    interval_s: float = 0.25
    take: Callable[[AdminClient], ClusterView] = snapshot  # how one poll reads the metadata
    views: list[ClusterView] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    zookeeper: str | None = None

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        client = admin(self.bootstrap_servers)
        zk = zk_client(self.zookeeper) if self.zookeeper else None
        try:
            while not self._stop.is_set():
                try:
                    view = self.take(client)
                    if zk is not None and view.offline:
                        view = replace(view, stale=stale_leaderless(zk, view))
                    self.views.append(view)
                except Exception as exc:  # a broker may be down: note it and keep polling
                    self.errors.append(str(exc))
                self._stop.wait(self.interval_s)
        finally:
            if zk is not None:
                zk.stop()
                zk.close()

    def __enter__(self) -> MetadataWatcher:
        self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._stop.set()
        self._thread.join(timeout=15)

    def ever_offline(self) -> list[tuple[float, list[PartitionView]]]:
        return [(v.at, v.offline) for v in self.views if v.offline]

    def explain_offline(self, sandbox=None, limit: int = 3, before_s: float = 3.0, after_s: float = 1.0) -> str:
        """The first ``limit`` snapshots with an offline partition, readable: when (local time), which broker
        answered, which partitions (replicas, ISR); with a ``sandbox``, the own log lines about shutdowns, elections
        and metadata of each of its brokers and KRaft controllers (a migration's controller hosts included) from
        ``before_s`` before to ``after_s`` after each snapshot (what a failed assertion needs to tell Kafka's
        transient from the operation's fault)."""
        nodes = sandbox.broker_ids + sandbox.controller_ids if sandbox is not None else []
        out = []
        for v in [v for v in self.views if v.offline][:limit]:
            stamp = time.strftime("%H:%M:%S", time.localtime(v.wall)) + f".{int(v.wall % 1 * 1000):03d}"
            parts = "; ".join(f"{p.topic}-{p.partition} replicas {list(p.replicas)} isr {list(p.isr)}"
                              for p in v.offline[:8])
            out.append(f"{stamp}: broker {v.answered_by} answered, live brokers {sorted(v.brokers)}, controller "
                       f"{v.controller}, {len(v.offline)} offline: {parts}")
            for node in nodes:
                near = _notable_lines(sandbox.host_dir(node).server_log, v.wall - before_s, v.wall + after_s)
                if near:
                    out.append(f"  node {node}:")
                    out.extend("    " + line[:220] for line in near[-12:])
        return "\n".join(out)

    def ever_under_min_isr(self, min_isr: int) -> list[tuple[float, list[PartitionView]]]:
        """Snapshots with a partition whose ISR fell below ``min_isr`` although its replication factor is
        above it (acks=all producers would get NotEnoughReplicas); RF <= min ISR partitions are excepted."""
        found = []
        for v in self.views:
            under = [p for p in v.partitions if len(p.replicas) > min_isr and len(p.isr) < min_isr]
            if under:
                found.append((v.at, under))
        return found


def _notable_lines(log: Path, since: float, until: float) -> list[str]:
    """The lines of a node's log (``[time] LEVEL ...``, :mod:`sandbox.node_log`) between ``since`` and ``until``
    (epoch seconds) that :data:`_NOTABLE` matches; ``[]`` for a log that does not exist."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return []
    found = []
    for line in lines:
        if line.startswith("[") and "]" in line and _NOTABLE.search(line):
            try:
                at = node_log.parse_time(line[1:line.index("]")])
            except ValueError:
                continue
            if since <= at <= until:
                found.append(line)
    return found


_NOTABLE = re.compile(  # a node's log lines worth showing beside an offline snapshot
    r"\[(?:KafkaServer|BrokerServer|ControllerServer) id=\d+\] shutting down|[Cc]ontrolled shutdown|unclean|"
    r"[Ss]tarted \(kafka|Shutting down broker|[Bb]roker failure|[Nn]ewly added brokers|elect|"
    r"[Cc]ontroller.*(?:resign|failover|moved)|UpdateMetadata|session expired|Expiring session")


def assert_no_acknowledged_message_lost(traffic) -> None:
    """The clients' view of an operation (a ``sandbox.traffic_watch.WatchedTraffic``), for confluent-kafka and
    kafka-python each: messages were acknowledged, every acknowledged one was read back where it was
    acknowledged, in order, by a consumer-group member, and no send was left unresolved.

    Duplicates: kafka-python's idempotent producer must write none. librdkafka's (confluent-kafka) may write
    a batch twice when a partition's leader moves while the batch is in flight (its epoch bump re-sends it:
    confluentinc/librdkafka#4953, open), a client fault no broker operation can prevent: such copies are
    printed, and only the order of each message's first copy is judged."""
    for r in (traffic.result, traffic.kafka_python):
        assert r is not None and r.acknowledged > 0, traffic.summary()
        assert r.lost == [] and r.misplaced == [] and r.out_of_order == [], traffic.summary()
        assert r.unresolved == 0, traffic.summary()
    assert traffic.kafka_python.duplicates == [], traffic.summary()
    if traffic.result.duplicates:
        print(f"librdkafka wrote {len(traffic.result.duplicates)} message(s) twice: {traffic.result.duplicates[:20]}")
