"""Reads of many clusters for the page: concurrent, each with a deadline, cached a few seconds.

A page asks :meth:`FleetReader.readings` for the clusters it shows. A cluster read less than ``ttl_s`` ago comes from
the cache; the others are read in a thread pool, all at once, at most one read per cluster at a time (a page
refresh never starts a second read of a cluster whose read is still under way). The page waits for them at most
``deadline_s`` in total; a read that is not back by then keeps going in the background (its result is cached for the
next refresh) and the page shows the cluster's last reading if it is younger than ``stale_s``, else the cluster as
unreachable ("no answer within 3 s"). So a refresh costs at most ``deadline_s``, whatever the clusters do, and page
refreshes of several users within ``ttl_s`` share one read.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait

from kafka_ops.cluster_view import ClusterReading

#: Defaults: a reading is reused for ``TTL_S``; a page waits at most ``DEADLINE_S`` for fresh reads; a reading older
#: than ``STALE_S`` is not shown in place of a late one. Seconds.
TTL_S = 4.0
DEADLINE_S = 3.0
STALE_S = 30.0


class FleetReader:
    """Cached, concurrent, deadline-bound reads.

    :param read: cluster id -> its reading (``fleet_view.sources.ClusterSource.read``; must not raise, but a raise
        is shown as the cluster's error).
    :param ttl_s: / :param deadline_s: / :param stale_s: see the module docstring (seconds).
    :param workers: threads reading clusters at once.
    :param clock: seconds (``time.time``).
    """

    def __init__(self, read: Callable[[str], ClusterReading], *, ttl_s: float = TTL_S,
                 deadline_s: float = DEADLINE_S, stale_s: float = STALE_S, workers: int = 8,
                 clock: Callable[[], float] = time.time) -> None:
        self._read = read
        self.ttl_s, self.deadline_s, self.stale_s = ttl_s, deadline_s, stale_s
        self.clock = clock
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kafka-ops-fleet")
        self._lock = threading.Lock()
        self._cache: dict[str, ClusterReading] = {}
        self._inflight: dict[str, Future[ClusterReading]] = {}
        #: reads started, per cluster (what the cache saves: tests and the page's footer).
        self.reads: dict[str, int] = {}

    def _run(self, cluster: str) -> ClusterReading:
        began = self.clock()
        try:
            reading = self._read(cluster)
        except Exception as exc:  # noqa: BLE001 - a read that raises shows as the cluster's error
            reading = ClusterReading(cluster, int(began * 1000), self.clock() - began,
                                     errors={"kafka": f"{type(exc).__name__}: {exc}"[:300]})
        with self._lock:
            self._cache[cluster] = reading
            self._inflight.pop(cluster, None)
        return reading

    def _start(self, cluster: str) -> Future[ClusterReading]:
        """The read under way for ``cluster``, started now if none is (call with the lock held)."""
        future = self._inflight.get(cluster)
        if future is None:
            future = self._pool.submit(self._run, cluster)
            self._inflight[cluster] = future
            self.reads[cluster] = self.reads.get(cluster, 0) + 1
        return future

    def readings(self, clusters: Iterable[str]) -> dict[str, ClusterReading]:
        """A reading of each cluster, in the given order, within ``deadline_s`` (see the module docstring)."""
        clusters = list(dict.fromkeys(clusters))
        now = self.clock()
        waiting: dict[str, Future[ClusterReading]] = {}
        out: dict[str, ClusterReading] = {}
        with self._lock:
            for cluster in clusters:
                cached = self._cache.get(cluster)
                if cached is not None and now - cached.read_at_ms / 1000 < self.ttl_s:
                    out[cluster] = cached
                else:
                    waiting[cluster] = self._start(cluster)
        if waiting:
            wait(waiting.values(), timeout=self.deadline_s)
        for cluster, future in waiting.items():
            if future.done():
                out[cluster] = future.result()
                continue
            with self._lock:
                cached = self._cache.get(cluster)
            if cached is not None and now - cached.read_at_ms / 1000 < self.stale_s:
                out[cluster] = cached
            else:
                out[cluster] = ClusterReading(cluster, int(now * 1000), self.deadline_s,
                                              errors={"kafka": f"no answer within {self.deadline_s:g} s "
                                                               "(still reading; the next refresh shows the answer)"})
        return {c: out[c] for c in clusters}

    def reading(self, cluster: str) -> ClusterReading:
        """:meth:`readings` of one cluster."""
        return self.readings([cluster])[cluster]

    def forget(self, keep: Iterable[str]) -> None:
        """Drop cached readings of clusters not in ``keep`` (connections deleted)."""
        keep = set(keep)
        with self._lock:
            for cluster in [c for c in self._cache if c not in keep]:
                del self._cache[cluster]

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def sourced_reader(make_source: Callable[[str], object], **kwargs: object) -> FleetReader:
    """A :class:`FleetReader` whose reads go through one long-lived source per cluster (``make_source(cluster)``
    -> an object with ``read()``, e.g. ``fleet_view.sources.ClusterSource``), made on the cluster's first read."""
    sources: dict[str, object] = {}
    guard = threading.Lock()

    def read(cluster: str) -> ClusterReading:
        with guard:
            source = sources.get(cluster)
            if source is None:
                source = sources[cluster] = make_source(cluster)
        return source.read()  # type: ignore[attr-defined]

    return FleetReader(read, **kwargs)  # type: ignore[arg-type]

