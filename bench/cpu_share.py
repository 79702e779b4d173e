"""Where a machine's CPU went while a roll ran: every process's CPU time (user + system, seconds) sampled in the
background (``psutil``), summed by what the process is (a Kafka node's JVM, Airflow's scheduler, ...) over a window;
or, the same way, this process's threads by name (``bench/side_by_side.py``: the client traffic's threads).

On a machine of few cores the roll's time is partly the machine's: a restarted broker's JVM start is CPU-bound and
shares the cores with the running brokers, the client traffic and Airflow. The shares say which of them a faster
roll would have to take CPU from.

Each process is counted from the last sample at or before the window's start (0 for a process born later) to the
first sample at or after its end (the window widened by up to one sampling interval at each end), or to its last
sample when it ended inside the window: a short-lived process (an Airflow task) loses up to one interval of its CPU,
so the shares of such processes are lower bounds.

The benches also start a measured run only once the machine's CPU rests (:func:`machine_at_rest`, from
``/proc/stat``): a run started while the sandbox's JVMs still warm up measures them.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

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
#: Clock ticks a second, the unit of ``/proc/<pid>/task/<tid>/stat``'s CPU times.
TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def category(cmdline: str) -> str:
    """The :data:`CATEGORIES` name of a process with command line ``cmdline`` (its arguments joined by spaces), or
    :data:`OTHER`."""
    for name, pattern in CATEGORIES:
        if re.search(pattern, cmdline):
            return name
    return OTHER


#: A reading: ``{key: (label, CPU seconds so far)}``, a key naming one process or thread for its whole life (an id
#: the kernel gives again later comes with another start time).
Reading = dict[tuple[int, float], tuple[str, float]]


def snapshot() -> Reading:
    """Every process that can be read, keyed by (pid, start time): its label and CPU seconds used so far (user +
    system). The label is the command line; a kernel thread's is its name in brackets (``"[ksoftirqd/0]"``); a
    process whose command line is gone (a zombie not reaped yet) has its name in angle brackets (``"<java>"``), which
    :meth:`CpuSampler.spent` replaces with the command line an earlier sample saw."""
    out = {}
    for proc in psutil.process_iter(["cmdline", "cpu_times", "name", "ppid", "create_time"]):
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
        out[(proc.pid, info.get("create_time") or 0.0)] = (label, times.user + times.system)
    return out


def own_threads() -> Reading:
    """This process's live threads (``/proc/self/task``), keyed by (thread id, start time in clock ticks): Python
    threads labelled by their ``threading`` name, native ones by their kernel name (librdkafka's ``rdk:broker1``),
    with their CPU seconds so far."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    found = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            stat = (task / "stat").read_text()
            comm = (task / "comm").read_text().strip()
        except OSError:  # ended meanwhile
            continue
        fields = stat.rsplit(")", 1)[1].split()  # from field 3 (state) on: utime, stime, starttime = 14, 15, 22
        tid = int(task.name)
        found[(tid, float(fields[19]))] = (names.get(tid, comm), (int(fields[11]) + int(fields[12])) / TICKS_PER_S)
    return found


class CpuSampler:
    """Takes a reading (:func:`snapshot` by default, or e.g. :func:`own_threads`) when entered, every
    ``interval_s`` seconds in a daemon thread, and when left; use as a context manager. ``samples``: (epoch seconds,
    reading) in time order. A process or thread that ends between two readings keeps its last one: what it used
    after it is lost (its share is a lower bound)."""

    def __init__(self, read: Callable[[], Reading] = snapshot, interval_s: float = INTERVAL_S) -> None:
        self.read, self.interval_s = read, interval_s
        self.samples: list[tuple[float, Reading]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cpu-sampler", daemon=True)

    def _take(self) -> None:
        self.samples.append((time.time(), self.read()))

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._take()

    def __enter__(self) -> CpuSampler:
        self._take()  # before the caller's window begins
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._take()

    def spent(self, began: float | None = None, ended: float | None = None,
              group: Callable[[str], str] = category) -> dict[str, float]:
        """CPU seconds per ``group(label)`` (a :data:`CATEGORIES` name by default) between epoch seconds ``began``
        and ``ended`` (None: the first / last sample; see the module docstring), the biggest first.

        :raises ValueError: ``ended <= began``, or no sample at or before ``began`` / at or after ``ended`` (the
            sampler started too late or stopped too early).
        """
        began = self.samples[0][0] if began is None else began
        ended = self.samples[-1][0] if ended is None else ended
        if ended <= began:
            raise ValueError(f"an empty window ({began} .. {ended})")
        before = [reading for t, reading in self.samples if t <= began]
        if not before or self.samples[-1][0] < ended:
            raise ValueError("the samples do not span the window")
        start, since = before[-1], len(before) - 1
        last: Reading = {}
        for t, reading in self.samples[since:]:  # a process that ended before the window is in none of these
            for key, (label, cpu) in reading.items():
                if label.startswith("<") and key in last:  # a zombie: the command line it had
                    label = last[key][0]
                last[key] = (label, cpu)  # one that ended inside the window keeps its last reading
            if t >= ended:
                break
        totals: dict[str, float] = {}
        for key, (label, cpu) in last.items():
            used = cpu - start[key][1] if key in start else cpu  # absent at the start: born inside the window
            if used > 0:
                name = group(label)
                totals[name] = totals.get(name, 0.0) + used
        return dict(sorted(totals.items(), key=lambda kv: -kv[1]))


def describe(shares: dict[str, float], wall_s: float, cores: int | None = None) -> str:
    """One line: ``"27.9 of 32.2 CPU s (2 cores x 16.1 s, 87% busy): Kafka JVMs 17.4, ..."``."""
    cores = cores or psutil.cpu_count() or 1
    used, available = sum(shares.values()), cores * wall_s
    parts = ", ".join(f"{name} {cpu:.1f}" for name, cpu in shares.items() if cpu >= 0.05)
    busy = 100 * used / available
    return f"{used:.1f} of {available:.1f} CPU s ({cores} cores x {wall_s:.1f} s, {busy:.0f}% busy): {parts}"


#: A measured run starts once the CPU was busy at most this fraction over :data:`CPU_SPAN_S` (or after
#: :data:`CPU_REST_LIMIT_S`, the fraction printed either way): right after a sandbox of 12 brokers came up its JVMs
#: still compile and collect, and a roll started then paid for it (the first 8 of 12 broker tasks 9-19 s, the last 4
#: 4-5 s).
REST_CPU_BUSY = 0.35
CPU_SPAN_S = 3.0
CPU_REST_LIMIT_S = 60.0


def cpu_busy(span_s: float = CPU_SPAN_S) -> float:
    """The machine's CPU busy fraction (0..1, every core) over the next ``span_s`` seconds, from ``/proc/stat``
    (user + nice + system + irq + softirq + steal against the total)."""
    before = proc_stat()
    time.sleep(span_s)
    return busy_between(before, proc_stat())


def proc_stat() -> tuple[int, int]:
    """(all CPU ticks, idle + iowait ticks) since boot, every core (``/proc/stat``'s first line)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return sum(fields), fields[3] + fields[4]


def busy_between(before: tuple[int, int], after: tuple[int, int]) -> float:
    """The CPU busy fraction (0..1, every core) between two :func:`proc_stat` readings."""
    (total0, idle0), (total1, idle1) = before, after
    return 1.0 - (idle1 - idle0) / max(1, total1 - total0)


def machine_at_rest(limit_s: float = CPU_REST_LIMIT_S) -> tuple[float, float]:
    """Wait until the machine's CPU is busy at most :data:`REST_CPU_BUSY` over :data:`CPU_SPAN_S` (the sandbox, its
    workload and an idle Airflow keep it partly busy), at most ``limit_s``: (seconds waited, the last busy
    fraction). On 2 cores a run that starts while something else still works (Airflow after its start, the previous
    turn's restarted JVMs) pays for it. In ``bench/side_by_side.py`` it does not make turns alike: the first turn at a
    size was often the slowest whichever tool took it (ours 78.1 / 67.4 / 50.2 s against 34.9-38.7 s later;
    kafka_roller 30.8 s against 18.7 s), with the client traffic taking up to a core in it (``clients_cpu_s``)."""
    began = time.monotonic()
    busy = cpu_busy()
    while busy > REST_CPU_BUSY and time.monotonic() - began < limit_s:
        busy = cpu_busy()
    return time.monotonic() - began, busy
