"""Whether a replication throttle leaves room for the moved partitions' own writes.

A replica being added to a partition is throttled until it joins the ISR (KIP-73; Kafka only throttles replicas
out of the ISR). Its broker fetches all its throttled replicas together at most ``follower.replication.throttled.rate``
bytes/s, and each leader sends to throttled followers at most ``leader.replication.throttled.rate`` bytes/s in
all. While the partitions keep being written, a new replica only catches up if the throttle is above the rate
they are written at: otherwise its lag never shrinks, the reassignment never completes, and the wave waits for
its ``verify_timeout_s`` (6 hours by default). Kafka's operations guide ("Limiting Bandwidth Usage during Data
Migration") says the same: the throttle must be set high enough for the replicas to keep up with the writes.

The write rate of a partition comes from two readings of its size (DescribeLogDirs, the largest replica): the
snapshot the plan was made from and a fresh one, over the seconds between. A size that shrank (retention deleted
a segment, compaction) counts as 0: the rule can miss a partition written faster than it looks, never blame a
throttle for writes that did not happen.

Pure: no Airflow, no I/O. Sizes are bytes, rates bytes per second, times seconds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kafka_ops.plan_files import Move, Wave

#: Readings closer than this (seconds) are too short to tell a write rate from a burst: not judged.
MIN_WINDOW_S = 5.0


def write_rates(moves: Iterable[Move], sizes_now: Mapping[tuple[str, int], int], elapsed_s: float
                ) -> dict[tuple[str, int], float]:
    """``(topic, partition) -> bytes/s`` written to each moved partition since the plan's snapshot.

    :param moves: the plan's moves (``size_bytes`` = the snapshot's size; 0 = unknown, not judged).
    :param sizes_now: the same partitions' sizes now (largest replica); a partition missing is not judged.
    :param elapsed_s: seconds since the snapshot's sizes were read.
    :raises ValueError: ``elapsed_s`` not positive.
    """
    if elapsed_s <= 0:
        raise ValueError(f"elapsed_s must be > 0, got {elapsed_s}")
    return {m.key: max(0, sizes_now[m.key] - m.size_bytes) / elapsed_s
            for m in moves if m.size_bytes > 0 and m.key in sizes_now}


def format_rate(bytes_per_s: float) -> str:
    """``"312 bytes/s"``, ``"40.0 kB/s"``, ``"1.2 MB/s"`` (kB = 1e3 bytes, MB = 1e6, as Kafka's tools count)."""
    if bytes_per_s >= 1e6:
        return f"{bytes_per_s / 1e6:.1f} MB/s"
    if bytes_per_s >= 1e3:
        return f"{bytes_per_s / 1e3:.1f} kB/s"
    return f"{bytes_per_s:.0f} bytes/s"


@dataclass(frozen=True)
class Shortfall:
    """One broker whose throttled traffic in one wave needs more than the throttle.

    :param wave: the wave's index. :param broker: the broker id. :param side: ``"follower"`` (it receives
        replicas) or ``"leader"`` (it leads partitions being copied). :param need: bytes/s its throttled
        replicas are written at in all (a leader's counted once per replica it feeds). :param partitions: those
        partitions, fastest first.
    """

    wave: int
    broker: int
    side: str
    need: float
    partitions: tuple[str, ...]

    def describe(self, throttle: int) -> str:
        """``"wave 1: broker 3 receives partitions written at 1.2 MB/s in all (orders-0, orders-3, ...), above the
        throttle of 400.0 kB/s"``; ``throttle`` in bytes/s."""
        verb = "receives" if self.side == "follower" else "leads, for the replicas it feeds,"
        shown = ", ".join(self.partitions[:5]) + (f" and {len(self.partitions) - 5} more"
                                                  if len(self.partitions) > 5 else "")
        return (f"wave {self.wave}: broker {self.broker} {verb} partitions written at {format_rate(self.need)} in "
                f"all ({shown}), above the throttle of {format_rate(throttle)}")


def throttle_shortfalls(waves: Iterable[Wave], rates: Mapping[tuple[str, int], float],
                        leaders: Mapping[tuple[str, int], int], throttle: int) -> list[Shortfall]:
    """Every broker and wave where the throttle is below the writes its throttled replicas must keep up with.

    A wave's moves run together (its throttles are set for all of them). Follower side: a broker receiving new
    replicas fetches them all under one ``follower.replication.throttled.rate``; it needs the sum of their write
    rates. Leader side: a partition's leader sends to each of its new replicas under one
    ``leader.replication.throttled.rate``; it needs, over the partitions it leads, write rate x new replicas.
    Moves that copy nothing (only the order changes) are not throttled and not counted.

    :param rates: :func:`write_rates`; a partition without a rate is not counted.
    :param leaders: ``(topic, partition) -> its leader now`` (a partition without one is not counted leader side).
    :param throttle: ``throttle_bytes_per_s``.
    :returns: the shortfalls, by wave, then broker, followers first; [] = the throttle leaves room.
    """
    out: list[Shortfall] = []
    for wave in waves:
        need: dict[tuple[str, int], float] = {}
        parts: dict[tuple[str, int], list[tuple[float, str]]] = {}
        for m in wave.moves:
            rate = rates.get(m.key)
            if not m.adding or rate is None or rate <= 0:
                continue
            sides = [("follower", b, rate) for b in m.adding]
            if m.key in leaders:
                sides.append(("leader", leaders[m.key], rate * len(m.adding)))
            for side, broker, bytes_per_s in sides:
                need[(side, broker)] = need.get((side, broker), 0.0) + bytes_per_s
                parts.setdefault((side, broker), []).append((rate, m.name))
        for (side, broker), total in sorted(need.items(), key=lambda kv: (kv[0][0] != "follower", kv[0][1])):
            if total > throttle:
                names = tuple(name for _, name in sorted(parts[(side, broker)], key=lambda p: (-p[0], p[1])))
                out.append(Shortfall(wave.index, broker, side, total, names))
    return out
