"""A cluster prober whose first look runs in a background thread, opened while a roll's task waits for its turn.

The look (Metadata, DescribeCluster and the DescribeConfigs a gate reads, ``ClusterProber.state(configs=True)``)
goes to brokers, and one of them may be the broker the batch before is restarting: a request to it waits up to the
prober's request timeout (15 s). In the task's own thread that wait would hold the turn; in a thread of its own it
holds nothing, and the turn takes the prober only when its look has answered, else opens a fresh one.

Only Kafka requests run in the thread: Airflow reads (XCom, connections) go through the task's channel to its
supervisor and stay in the task's thread.
"""

from __future__ import annotations

import threading
from typing import Any

from probes.cluster import ClusterProber


class WarmingProber:
    """Runs ``prober.state(configs=True)`` in a daemon thread from construction on.

    :meth:`take` hands the prober over once that look has answered; otherwise the prober is closed (by the thread,
    when its look ends late) and :meth:`take` returns None. Whoever takes it owns it (closes it).

    :param prober: a prober nobody else uses while this one holds it.
    """

    def __init__(self, prober: ClusterProber) -> None:
        self._prober = prober
        self._lock = threading.Lock()
        self._done = False
        self._abandoned = False
        self._error: Exception | None = None
        self._thread = threading.Thread(target=self._run, name="warm-up-prober", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        error: Exception | None = None
        try:
            self._prober.state(configs=True)
        except Exception as exc:  # noqa: BLE001 - reported by take(); the gate opens its own prober and meets it again
            error = exc
        with self._lock:
            self._done, self._error = True, error
            if self._abandoned or error is not None:
                self._prober.close()

    def take(self, log: Any) -> ClusterProber | None:
        """The prober, its first look answered; None (and a line in ``log``) when the look failed or has not answered
        yet (the thread then closes it when its look ends)."""
        with self._lock:
            if not self._done:
                self._abandoned = True
                log.info("the cluster look opened while waiting has not answered yet: the gate opens its own")
                return None
            if self._error is not None:
                log.info("the cluster look opened while waiting failed (%s): the gate opens its own", self._error)
                return None
            return self._prober

    def join(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` seconds for the look to end; True when it has (for tests and shutdown)."""
        self._thread.join(timeout_s)
        return not self._thread.is_alive()
