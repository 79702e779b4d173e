"""Splitting a plan into waves executed in order (one ``kafka-reassign-partitions --execute`` each).

Each changed partition appears in exactly one wave with its final replica list, so executing the
waves in order reaches the final plan. A wave holds at most ``wave_bytes`` bytes of copying (a single
larger partition move gets a wave of its own) and involves each broker in at most
``wave_moves_per_broker`` replica moves (a move counts for the broker that gains the replica and the
one that loses it). Moves are placed largest first into the wave with the fewest bytes that still
fits (longest-processing-time first), so the largest moves spread over the waves instead of all
landing in the first one. Reorders (leader changes without data movement) go into the first wave.
"""

from __future__ import annotations

import math

import numpy as np


def partition_moves(orig_row, new_row) -> tuple[set, set]:
    """(brokers gaining a replica, brokers losing one) for one partition (broker indexes)."""
    before = {int(b) for b in orig_row if b >= 0}
    after = {int(b) for b in new_row if b >= 0}
    return after - before, before - after


def plan_waves(
    orig: np.ndarray,
    new: np.ndarray,
    sizes: np.ndarray,
    wave_bytes: int | None = None,
    wave_moves_per_broker: int | None = None,
) -> list[list[int]]:
    """Group the changed partitions into ordered waves.

    Args:
        orig, new: int arrays (P, R) of broker indexes before / after (first = preferred leader).
        sizes: int64 array (P,), partition sizes in bytes; a partition move copies size bytes per
            added replica.
        wave_bytes: max bytes copied per wave (None: no limit).
        wave_moves_per_broker: max replica moves per broker per wave (None: no limit).

    Returns a list of waves, each a list of partition indexes (sorted). Empty when nothing changes.
    """
    changed = np.nonzero((orig != new).any(axis=1))[0]
    reorders, moving = [], []
    for p in changed.tolist():
        gain, lose = partition_moves(orig[p], new[p])
        if gain:
            moving.append((int(sizes[p]) * len(gain), p, gain | lose))
        else:
            reorders.append(p)
    total = sum(m[0] for m in moving)
    per_broker: dict[int, int] = {}
    for _, _, brokers in moving:
        for b in brokers:
            per_broker[b] = per_broker.get(b, 0) + 1
    n0 = 1
    if wave_bytes:
        n0 = max(n0, math.ceil(total / wave_bytes))
    if wave_moves_per_broker and per_broker:
        n0 = max(n0, math.ceil(max(per_broker.values()) / wave_moves_per_broker))
    waves: list[list[int]] = [[] for _ in range(n0)]
    wbytes = [0] * n0
    wcount: list[dict] = [{} for _ in range(n0)]
    moving.sort(key=lambda m: (-m[0], m[1]))
    for nbytes, p, brokers in moving:
        best = None
        for i in range(len(waves)):
            if waves[i]:
                if wave_bytes and wbytes[i] + nbytes > wave_bytes:
                    continue
                if wave_moves_per_broker and any(
                    wcount[i].get(b, 0) + 1 > wave_moves_per_broker for b in brokers
                ):
                    continue
            if best is None or wbytes[i] < wbytes[best]:
                best = i
        if best is None:
            waves.append([])
            wbytes.append(0)
            wcount.append({})
            best = len(waves) - 1
        waves[best].append(p)
        wbytes[best] += nbytes
        for b in brokers:
            wcount[best][b] = wcount[best].get(b, 0) + 1
    waves = [w for w in waves if w]
    if reorders:
        if waves:
            waves[0].extend(reorders)
        else:
            waves = [reorders]
    return [sorted(w) for w in waves]
