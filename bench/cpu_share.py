"""Where a machine's CPU went while a roll ran: every process's CPU time (user + system, seconds) sampled in the
background (``psutil``), summed by what the process is (a Kafka node's JVM, Airflow's scheduler, ...) over a window.

On a machine of few cores the roll's time is partly the machine's: a restarted broker's JVM start is CPU-bound and
shares the cores with the running brokers, the client traffic and Airflow. The shares say which of them a faster
roll would have to take CPU from.

Each process is counted from the last sample at or before the window's start (0 for a process born later) to the
first sample at or after its end (the window widened by up to one sampling interval at each end), or to its last
sample when it ended inside the window: a short-lived process (an Airflow task) loses up to one interval of its CPU,
so the shares of such processes are lower bounds.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field

import psutil

#: What a process is, by its command line: the first pattern that matches names it (order matters: PostgreSQL's
#: backends name their user, ``airflow``, in their command line).
CATEGORIES: tuple[tuple[str, str], ...] = (
    ("kernel threads", r"^\["),  # network (ksoftirqd), disk (kworker), the VM's memory monitor (kdamond)
    ("PostgreSQL", r"^postgres"),
    ("Kafka JVMs", r"kafka\.Kafka\b"),
    ("ZooKeeper", r"org\.apache\.zookeeper\.server"),
    ("Burrow", r"burrow"),
    ("sshd", r"sshd"),
    ("Airflow scheduler", r"airflow scheduler"),
    ("Airflow api-server", r"airflow api[-_]server"),
    ("Airflow dag-processor", r"airflow dag[-_]processor"),
    ("Airflow triggerer", r"airflow triggerer"),
    ("Airflow tasks and workers", r"airflow (worker|task|supervisor)|airflow standalone|serve-logs"),
    ("Python (the bench and its clients, the sandbox's service commands)", r"python"),
)
OTHER = "other"
#: The pid of Linux's kernel thread daemon, the parent of every kernel thread.
KTHREADD_PID = 2
#: Seconds between two samples.
INTERVAL_S = 0.5


def category(cmdline: str) -> str:
    """The :data:`CATEGORIES` name of a process with command line ``cmdline`` (its arguments joined by spaces), or
    :data:`OTHER`."""
    for name, pattern in CATEGORIES:
        if re.search(pattern, cmdline):
            return name
    return OTHER


def snapshot() -> dict[int, tuple[str, float]]:
    """pid -> (label, CPU seconds used so far, user + system) of every process that can be read. The label is the
    command line; a kernel thread's is its name in brackets (``"[ksoftirqd/0]"``); a process whose command line is
    gone (a zombie not reaped yet) has its name in angle brackets (``"<java>"``), which :meth:`CpuSampler.shares`
    replaces with the command line an earlier sample saw."""
    out = {}
    for proc in psutil.process_iter(["cmdline", "cpu_times", "name", "ppid"]):
        info = proc.info
        times, cmdline = info.get("cpu_times"), info.get("cmdline")
        if times is None:
            continue
        if cmdline:
            label = " ".join(cmdline)
        elif proc.pid == KTHREADD_PID or info.get("ppid") == KTHREADD_PID:
            label = f"[{info.get('name') or '?'}]"
        else:
            label = f"<{info.get('name') or '?'}>"
        out[proc.pid] = (label, times.user + times.system)
    return out


@dataclass
class CpuSampler:
    """Samples :func:`snapshot` every :data:`INTERVAL_S` seconds in a daemon thread while started; use as a context
    manager. ``samples``: (epoch seconds, snapshot) in time order."""

    interval_s: float = INTERVAL_S
    samples: list[tuple[float, dict[int, tuple[str, float]]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cpu-sampler", daemon=True)

    def _loop(self) -> None:
        while True:
            self.samples.append((time.time(), snapshot()))
            if self._stop.wait(self.interval_s):
                self.samples.append((time.time(), snapshot()))
                return

    def __enter__(self) -> CpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def shares(self, began: float, ended: float) -> dict[str, float]:
        """CPU seconds per category between epoch seconds ``began`` and ``ended`` (see the module docstring), the
        biggest first.

        :raises ValueError: ``ended <= began``, or no sample at or before ``began`` / at or after ``ended`` (the
            sampler started too late or stopped too early).
        """
        if ended <= began:
            raise ValueError(f"an empty window ({began} .. {ended})")
        before = [snap for t, snap in self.samples if t <= began]
        if not before or self.samples[-1][0] < ended:
            raise ValueError("the samples do not span the window")
        start = before[-1]
        last: dict[int, tuple[str, float]] = {}
        for t, snap in self.samples:
            for pid, (label, cpu) in snap.items():
                if label.startswith("<") and pid in last:  # a zombie: the command line it had
                    label = last[pid][0]
                last[pid] = (label, cpu)  # a process that ended inside the window keeps its last sample
            if t >= ended:
                break
        totals: dict[str, float] = {}
        for pid, (cmdline, cpu) in last.items():
            used = cpu - start[pid][1] if pid in start else cpu  # absent at the start: born inside the window
            if used > 0:
                name = category(cmdline)
                totals[name] = totals.get(name, 0.0) + used
        return dict(sorted(totals.items(), key=lambda kv: -kv[1]))


def describe(shares: dict[str, float], wall_s: float, cores: int | None = None) -> str:
    """One line: ``"27.9 of 32.2 CPU s (2 cores x 16.1 s, 87% busy): Kafka JVMs 17.4, ..."``."""
    cores = cores or psutil.cpu_count() or 1
    used, available = sum(shares.values()), cores * wall_s
    parts = ", ".join(f"{name} {cpu:.1f}" for name, cpu in shares.items() if cpu >= 0.05)
    busy = 100 * used / available
    return f"{used:.1f} of {available:.1f} CPU s ({cores} cores x {wall_s:.1f} s, {busy:.0f}% busy): {parts}"
