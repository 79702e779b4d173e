"""Client traffic watched through an operation: "no acknowledged message lost", and the producer errors each
restarted broker caused.

:func:`watched_traffic` creates a topic of its own with real records (RF = min(3, brokers),
``min.insync.replicas`` = RF - 1, so one broker may be down without refusing ``acks=all``), runs
:class:`TimedTraffic` (the idempotent ``acks=all`` producer and the reader of :mod:`sandbox.traffic`, with
every failed delivery report time-stamped) while the body runs, and at the end stops it, deletes the topic
and fills a :class:`WatchedTraffic`: the :class:`~sandbox.traffic.TrafficResult` plus the failed
deliveries attributed to the broker whose restart they happened in, read from the brokers' own logs
(controlled shutdown -> started), see :func:`errors_per_restart`.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient

from sandbox.layout import Workdir
from sandbox.traffic import Traffic, TrafficResult, ensure_topic

#: A failed delivery up to this many seconds after a broker's start still counts for its restart (clients
#: refresh metadata and leadership returns after the start).
AFTER_START_S = 15.0
#: ... and up to this many seconds before its controlled shutdown was logged (the stop command's latency).
BEFORE_STOP_S = 2.0
LOG_TIME = "%Y-%m-%d %H:%M:%S,%f"


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


def restart_windows(workdir: Path, brokers: list[int], since: float) -> dict[int, list[tuple[float, float]]]:
    """Broker id -> ``(controlled shutdown, next start)`` epoch seconds of each restart after ``since``, from
    the broker's ``logs/server.log`` (a shutdown without a start yet ends at +inf)."""
    out: dict[int, list[tuple[float, float]]] = {}
    wd = Workdir.at(workdir)
    for b in brokers:
        log = wd.host(b).logs / "server.log"
        text = log.read_text() if log.exists() else ""
        events = []
        for stamp, what in re.findall(rf"^\[([^\]]+)\] INFO [\w.]+: broker {b}(: controlled shutdown| started )",
                                      text, re.M):
            t = datetime.strptime(stamp, LOG_TIME).timestamp()
            if t >= since:
                events.append((t, "stop" if "shutdown" in what else "start"))
        windows, down = [], None
        for t, kind in events:
            if kind == "stop":
                down = t
            elif down is not None:
                windows.append((down, t))
                down = None
        if down is not None:
            windows.append((down, float("inf")))
        out[b] = windows
    return out


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

    def summary(self) -> str:
        """One line for test output and benchmarks."""
        r = self.result
        if r is None:
            return f"traffic on {self.topic}: not finished"
        return (f"traffic on {self.topic}: {r.acknowledged} acknowledged, {r.read} read, {len(r.lost)} lost, "
                f"{len(r.duplicates)} duplicated, {len(r.out_of_order)} out of order; producer errors by restart: "
                f"{self.per_restart or 'none'}")


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
def watched_traffic(workdir: Path, bootstrap_servers: str, brokers: list[int], *, rate_per_s: float = 500.0,
                    partitions: int = 6, replication_factor: int | None = None) -> Iterator[WatchedTraffic]:
    """Traffic on a new topic while the body runs (see the module docstring); the topic is deleted after.

    :param brokers: the brokers whose restarts errors are attributed to (every broker of the cluster).
    :param replication_factor: default min(3, number of brokers).
    :raises confluent_kafka.KafkaException: the topic cannot be created.
    """
    rf = replication_factor or min(3, len(brokers))
    topic = f"traffic-{uuid.uuid4().hex[:8]}"
    ensure_topic(bootstrap_servers, topic, partitions=partitions, replication_factor=rf,
                 min_insync_replicas=max(1, rf - 1))
    _wait_led(bootstrap_servers, topic, partitions)
    watched = WatchedTraffic(topic)
    since = time.time()
    traffic = TimedTraffic(bootstrap_servers, topic, rate_per_s=rate_per_s).start()
    try:
        yield watched
    finally:
        watched.result = traffic.stop()
        watched.per_restart = errors_per_restart(traffic.error_events, restart_windows(workdir, brokers, since))
        _delete(bootstrap_servers, topic)


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
