"""Client traffic watched through an operation: "no acknowledged message lost", and the producer errors each
restarted broker caused, with both client libraries the product uses.

:func:`watched_traffic` creates a topic of its own with real records (RF = min(3, brokers),
``min.insync.replicas`` = RF - 1, so one broker may be down without refusing ``acks=all``), runs
:class:`TimedTraffic` (the idempotent ``acks=all`` producer and the reader of :mod:`sandbox.traffic`, with
every failed delivery report time-stamped) while the body runs, and at the end stops it, deletes the topic
and fills a :class:`WatchedTraffic`: the :class:`~sandbox.traffic.TrafficResult` plus the failed
deliveries attributed to the broker whose restart they happened in, read from the brokers' own logs
(shutdown begun -> started), see :func:`errors_per_restart`. Beside it, on a second topic,
:class:`KafkaPythonTraffic` does the same with kafka-python (an idempotent ``acks=all`` producer and a
consumer-group member): both libraries produce and consume through the cluster while the operation runs.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient
from kafka.errors import KafkaError as KafkaPythonError

from sandbox import node_log
from sandbox.layout import Workdir
from sandbox.traffic import Traffic, TrafficResult, compare, ensure_topic

log = logging.getLogger(__name__)

#: A failed delivery up to this many seconds after a broker's start still counts for its restart (clients
#: refresh metadata and leadership returns after the start).
AFTER_START_S = 15.0
#: ... and up to this many seconds before its controlled shutdown was logged (the stop command's latency).
BEFORE_STOP_S = 2.0
#: Seconds the kafka-python group reader sleeps after a poll that brought no record (see its ``_consume``).
READ_IDLE_S = 0.05


class TimedTraffic(Traffic):
    """:class:`~sandbox.traffic.Traffic` that also keeps ``(epoch seconds, error name)`` of every failed
    delivery report in ``error_events``."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.error_events: list[tuple[float, str]] = []
        self._events_lock = threading.Lock()

    def _on_delivery(self, err: KafkaError | None, msg) -> None:
        if err is not None:
            with self._events_lock:
                self.error_events.append((time.time(), err.name()))
        super()._on_delivery(err, msg)


class KafkaPythonTraffic:
    """kafka-python's side: a ``KafkaProducer`` (``acks="all"``, idempotent) writing numbered messages at
    ``rate_per_s`` and a ``KafkaConsumer`` in consumer group ``group`` (``subscribe``, from the earliest
    offset) reading them, in two threads; :meth:`stop` returns a :class:`~sandbox.traffic.TrafficResult`
    (failed sends by exception name, time-stamped in ``error_events``). What the group member has not read
    by then is read back by a fresh consumer (:meth:`_read_back`): the verdict is whether every acknowledged
    message is readable after the operation, not how fast kafka-python's member rejoined its group."""

    def __init__(self, bootstrap_servers: str, topic: str, *, group: str, rate_per_s: float = 100.0) -> None:
        from kafka import KafkaConsumer, KafkaProducer

        self.topic = topic
        self.bootstrap_servers = bootstrap_servers
        self.rate_per_s = rate_per_s
        self.producer = KafkaProducer(bootstrap_servers=bootstrap_servers, acks="all", enable_idempotence=True,
                                      client_id="sandbox-traffic-kafka-python", request_timeout_ms=30000,
                                      delivery_timeout_ms=60000)
        self.consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap_servers, group_id=group,
                                      auto_offset_reset="earliest", enable_auto_commit=True,
                                      auto_commit_interval_ms=1000, client_id="sandbox-traffic-kafka-python")
        self.lock = threading.Lock()
        self.acked: dict[int, tuple[int, int]] = {}
        self.reads: dict[tuple[int, int], int] = {}
        self.errors: Counter[str] = Counter()
        self.error_events: list[tuple[float, str]] = []
        self.pending = 0
        self._producing = threading.Event()
        self._consuming = threading.Event()
        self._threads: list[threading.Thread] = []
        self._began = self._ended = 0.0

    def _acked(self, seq: int, metadata) -> None:
        with self.lock:
            self.acked[seq] = (metadata.partition, metadata.offset)
            self.pending -= 1

    def _failed(self, exc: BaseException) -> None:
        with self.lock:
            self.errors[type(exc).__name__] += 1
            self.error_events.append((time.time(), type(exc).__name__))
            self.pending -= 1

    def _produce(self) -> None:
        seq = 0
        while self._producing.is_set():
            due = self._began + seq / self.rate_per_s
            if due > time.monotonic():
                time.sleep(max(0.0, min(due - time.monotonic(), 0.05)))
                continue
            with self.lock:
                self.pending += 1
            try:
                future = self.producer.send(self.topic, key=str(seq).zfill(12).encode(),
                                            value=json.dumps({"seq": seq}).encode())
            except KafkaPythonError as exc:  # refused before it was queued (KafkaTimeoutError: no metadata for the
                # topic within max_block_ms)
                self._failed(exc)  # counted like a failed send; the same seq is tried again
                continue
            future.add_callback(lambda md, s=seq: self._acked(s, md))
            future.add_errback(self._failed)
            seq += 1

    def _consume(self) -> None:
        """The group member's loop: ``poll(timeout_ms=0)``, and :data:`READ_IDLE_S` of sleep after a poll that
        brought nothing. kafka-python 3.0's ``poll`` with a timeout loops inside until it expires, and it can stop
        waiting in that loop while a fetch to a broker that is going away is in flight (its fetcher's own comments
        name such a case): in some rolling-restart turns of ``bench/side_by_side.py`` this thread and the client's
        I/O thread took 30-40 CPU seconds in a turn of 26-34 s (about 2 s otherwise), taking a core from the brokers
        they watched. A poll without a wait returns at once, so the sleep here bounds what the reader can take."""
        while self._consuming.is_set():
            try:
                batches = self.consumer.poll(timeout_ms=0)
            except Exception as exc:  # a rebalance or a coordinator moving: the member carries on
                log.info("kafka-python group reader: %s", exc)
                time.sleep(READ_IDLE_S)
                continue
            if not batches:
                time.sleep(READ_IDLE_S)
            for records in batches.values():
                for r in records:
                    with self.lock:
                        self.reads[(r.partition, r.offset)] = json.loads(r.value)["seq"]

    def _read_back(self, bootstrap_servers: str, timeout_s: float) -> None:
        """After the operation: read the whole topic once more with a fresh kafka-python consumer (``assign``,
        from the earliest offset to each partition's end), the way an operator checks that every
        acknowledged message is readable; adds to ``reads``."""
        from kafka import KafkaConsumer, TopicPartition

        reader = KafkaConsumer(bootstrap_servers=bootstrap_servers, group_id=None, enable_auto_commit=False,
                               client_id="sandbox-traffic-kafka-python-check")
        try:
            parts = [TopicPartition(self.topic, p) for p in sorted(reader.partitions_for_topic(self.topic) or ())]
            reader.assign(parts)
            reader.seek_to_beginning(*parts)
            ends = reader.end_offsets(parts)
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline and any(reader.position(tp) < ends[tp] for tp in parts):
                for records in reader.poll(timeout_ms=500).values():
                    for r in records:
                        with self.lock:
                            self.reads[(r.partition, r.offset)] = json.loads(r.value)["seq"]
        finally:
            reader.close()

    def start(self) -> KafkaPythonTraffic:
        self._began = time.monotonic()
        self._producing.set()
        self._consuming.set()
        self._threads = [threading.Thread(target=self._produce, name="kp-producer", daemon=True),
                         threading.Thread(target=self._consume, name="kp-consumer", daemon=True)]
        for t in self._threads:
            t.start()
        return self

    def _caught_up(self) -> bool:
        with self.lock:
            ends: dict[int, int] = {}
            for partition, offset in self.acked.values():
                ends[partition] = max(ends.get(partition, -1), offset)
            read: dict[int, int] = {}
            for partition, offset in self.reads:
                read[partition] = max(read.get(partition, -1), offset)
        return all(read.get(p, -1) >= end for p, end in ends.items())

    def stop(self, drain_timeout_s: float = 60.0) -> TrafficResult:
        """Stop producing, flush (at most ``drain_timeout_s``), let the reader catch up, close, compare."""
        self._producing.clear()
        self._threads[0].join(timeout=10)
        self._ended = time.monotonic()
        deadline = time.monotonic() + drain_timeout_s
        try:
            self.producer.flush(timeout=drain_timeout_s)
        except Exception:  # unresolved sends are counted below
            pass
        settle = min(deadline, time.monotonic() + 10)  # the group member's own catch-up, briefly
        while not self._caught_up() and time.monotonic() < settle:
            time.sleep(0.1)
        self._consuming.clear()
        self._threads[1].join(timeout=10)
        self.consumer.close()
        self.producer.close(timeout=5)
        if not self._caught_up():
            self._read_back(self.bootstrap_servers, max(10.0, deadline - time.monotonic()))
        with self.lock:
            return compare(dict(self.acked), dict(self.reads), dict(self.errors), max(0, self.pending),
                           self._ended - self._began)


def restart_windows(workdir: Path, brokers: list[int], since: float) -> dict[int, list[tuple[float, float]]]:
    """Broker id -> ``(shutdown begun, next start)`` epoch seconds of each restart after ``since``, from the
    broker's own ``logs/server.log`` (:func:`sandbox.node_log.restart_windows`; +inf while not started again)."""
    wd = Workdir.at(workdir)
    return {b: node_log.restart_windows(wd.host(b).server_log, since) for b in brokers}


def errors_per_restart(events: list[tuple[float, str]], windows: dict[int, list[tuple[float, float]]],
                       ) -> dict[str, dict[str, int]]:
    """Failed deliveries by error name, per restart: ``{"broker 2": {"NOT_LEADER_OR_FOLLOWER": 3}, ...}``; an
    error within [shutdown - BEFORE_STOP_S, start + AFTER_START_S] of a restart counts for that broker (the
    nearest shutdown when windows overlap), the others under ``"no restart"``. Every restarted broker is
    listed, with ``{}`` when its restart caused no error."""
    out: dict[str, Counter] = {f"broker {b}": Counter() for b, ws in windows.items() if ws}
    for t, name in events:
        best = None
        for b, ws in windows.items():
            for down, up in ws:
                if down - BEFORE_STOP_S <= t <= up + AFTER_START_S:
                    distance = abs(t - down)
                    if best is None or distance < best[0]:
                        best = (distance, b)
        key = f"broker {best[1]}" if best else "no restart"
        out.setdefault(key, Counter())[name] += 1
    return {k: dict(v) for k, v in out.items()}


@dataclass
class WatchedTraffic:
    """Filled when :func:`watched_traffic` ends: ``result`` (lost, duplicates, order, errors),
    ``per_restart`` (see :func:`errors_per_restart`), the ``topic`` used."""

    topic: str
    result: TrafficResult | None = None
    per_restart: dict[str, dict[str, int]] = field(default_factory=dict)
    kafka_python: TrafficResult | None = None
    kafka_python_per_restart: dict[str, dict[str, int]] = field(default_factory=dict)

    def summary(self) -> str:
        """One line for test output and benchmarks."""
        r = self.result
        if r is None:
            return f"traffic on {self.topic}: not finished"
        line = (f"traffic on {self.topic} (confluent-kafka): {r.acknowledged} acknowledged, {r.read} read, "
                f"{len(r.lost)} lost, {len(r.duplicates)} duplicated, {len(r.out_of_order)} out of order; producer "
                f"errors by restart: {self.per_restart or 'none'}")
        k = self.kafka_python
        if k is not None:
            line += (f" | kafka-python: {k.acknowledged} acknowledged, {k.read} read, {len(k.lost)} lost, "
                     f"{len(k.duplicates)} duplicated, {len(k.out_of_order)} out of order; producer errors by "
                     f"restart: {self.kafka_python_per_restart or 'none'}")
        return line


def _wait_led(bootstrap_servers: str, topic: str, partitions: int, timeout_s: float = 30.0) -> None:
    """Wait until every partition of ``topic`` has a leader in the metadata (a new topic's partitions are
    leaderless until the controller's election reaches every broker).

    :raises TimeoutError: not within ``timeout_s``.
    """
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    deadline = time.monotonic() + timeout_s
    while True:
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
        if meta is not None and meta.error is None and len(meta.partitions) == partitions and all(
                p.leader >= 0 and p.isrs for p in meta.partitions.values()):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {topic}: not every partition has a leader after {timeout_s:.0f} s")
        time.sleep(0.2)


@contextmanager
def watched_traffic(workdir: Path, bootstrap_servers: str, brokers: list[int], *, rate_per_s: float = 100.0,
                    partitions: int = 6, replication_factor: int | None = None) -> Iterator[WatchedTraffic]:
    """Traffic on a new topic while the body runs (see the module docstring); the topic is deleted after.

    :param brokers: the brokers whose restarts errors are attributed to (every broker of the cluster).
    :param rate_per_s: the confluent-kafka producer's messages per second (the kafka-python one sends a fifth).
        The default, 100, keeps a few hundred messages in flight around each restart.
    :param replication_factor: default min(3, number of brokers).
    :raises confluent_kafka.KafkaException: the topic cannot be created.
    """
    rf = replication_factor or min(3, len(brokers))
    topic = f"traffic-{uuid.uuid4().hex[:8]}"
    ensure_topic(bootstrap_servers, topic, partitions=partitions, replication_factor=rf,
                 min_insync_replicas=max(1, rf - 1))
    kp_topic = f"{topic}-kp"
    ensure_topic(bootstrap_servers, kp_topic, partitions=max(1, partitions // 2), replication_factor=rf,
                 min_insync_replicas=max(1, rf - 1))
    _wait_led(bootstrap_servers, topic, partitions)
    _wait_led(bootstrap_servers, kp_topic, max(1, partitions // 2))
    watched = WatchedTraffic(topic)
    since = time.time()
    traffic = TimedTraffic(bootstrap_servers, topic, rate_per_s=rate_per_s, group=f"{topic}-readers").start()
    other = KafkaPythonTraffic(bootstrap_servers, kp_topic, group=f"{kp_topic}-readers",
                               rate_per_s=max(1.0, rate_per_s / 5)).start()
    try:
        yield watched
    finally:
        watched.result = traffic.stop()
        watched.kafka_python = other.stop()
        windows = restart_windows(workdir, brokers, since)
        watched.per_restart = errors_per_restart(traffic.error_events, windows)
        watched.kafka_python_per_restart = errors_per_restart(other.error_events, windows)
        _delete(bootstrap_servers, topic)
        _delete(bootstrap_servers, kp_topic)


def _delete(bootstrap_servers: str, topic: str, timeout_s: float = 60.0) -> None:
    """Delete ``topic`` and wait until the metadata no longer lists it (ZooKeeper-mode deletion is
    asynchronous: the controller removes the partitions after the request returned).

    :raises TimeoutError: still listed after ``timeout_s``.
    """
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    admin.delete_topics([topic])[topic].result(timeout=30)
    deadline = time.monotonic() + timeout_s
    while topic in admin.list_topics(timeout=10).topics:
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {topic} still listed {timeout_s:.0f} s after its deletion")
        time.sleep(0.2)
