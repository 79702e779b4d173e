"""How long Burrow takes to answer while a roll runs: each watched group's status asked in the background the way the
roll's lag watch asks it (``hooks.burrow.BurrowHook.group_status`` with a budget: one attempt, no retries).

A roll's lag watch polls Burrow on the side while a broker comes back, each poll with a 3 s budget
(``runtime.lag_watch.SIDE_POLL_BUDGET_S``): a poll not answered in that time ends the lag streak, so the next gate
polls again. These samples say how often Burrow's answer takes longer on the machine the roll loads.

Each round asks every group once, one request after the other; rounds start ``interval_s`` apart. A request that
fails or takes longer than ``timeout_s`` counts as a failure (its time is not a latency).
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "plugins"))  # the Burrow hook the roll uses
from hooks.burrow import BurrowError, BurrowHook  # noqa: E402
from requests import RequestException  # noqa: E402
from runtime.lag_watch import SIDE_POLL_BUDGET_S  # noqa: E402


class BurrowLatency:
    """Samples Burrow's answer time in a daemon thread while inside ``with``.

    :param base_url: Burrow's HTTP endpoint (``http://127.0.0.1:8000``).
    :param cluster: Burrow's name of the Kafka cluster.
    :param groups: consumer groups to ask about.
    :param interval_s: seconds between the starts of two rounds.
    :param timeout_s: a request's budget (connect and read), seconds.
    """

    def __init__(self, base_url: str, cluster: str, groups: list[str], interval_s: float = 1.0,
                 timeout_s: float = 10.0) -> None:
        self.hook = BurrowHook(base_url=base_url, cluster=cluster)
        self.groups = list(groups)
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.samples: list[tuple[float, float]] = []  # (epoch seconds asked, seconds to the answer)
        self.failures: list[tuple[float, str]] = []  # (epoch seconds asked, why)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="burrow-latency", daemon=True)

    def __enter__(self) -> BurrowLatency:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(self.timeout_s + 1)
        self.hook.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            for group in self.groups:
                asked, clock = time.time(), time.monotonic()
                try:
                    self.hook.group_status(group, budget_s=self.timeout_s)
                except (RequestException, BurrowError) as exc:
                    self.failures.append((asked, type(exc).__name__))
                else:
                    self.samples.append((asked, time.monotonic() - clock))
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - began)))

    def describe(self, began: float, ended: float) -> str:
        """One line on the requests asked between epoch seconds ``began`` and ``ended``: count, median, 95th
        percentile and maximum answer time (seconds), how many took longer than :data:`SIDE_POLL_BUDGET_S`, and
        the failures."""
        times = sorted(s for t, s in self.samples if began <= t <= ended)
        failed = [why for t, why in self.failures if began <= t <= ended]
        if not times:
            return f"no answer sampled ({len(failed)} failed)"
        p95 = times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))]
        over = sum(1 for s in times if s > SIDE_POLL_BUDGET_S)
        return (f"{len(times)} answers: median {statistics.median(times) * 1000:.0f} ms, 95th percentile "
                f"{p95 * 1000:.0f} ms, max {times[-1] * 1000:.0f} ms; {over} over the side poll's "
                f"{SIDE_POLL_BUDGET_S:g} s; {len(failed)} failed" + (f" ({', '.join(sorted(set(failed)))})"
                                                                   if failed else ""))
