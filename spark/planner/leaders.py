"""Preferred-leader balancing by reordering replicas.

Kafka's preferred leader is the first replica in the assignment; leader election
(``kafka-leader-election --election-type preferred`` or ``auto.leader.rebalance.enable``) moves
leadership there. Reordering a partition's replicas copies no data, so leaders are balanced after
placement purely by choosing which replica goes first:

1. keep the current preferred leader when it still holds a replica (no leadership change),
   otherwise take the broker that replaced it;
2. greedily hand leadership from brokers above ``ceil(P / K)`` to follower brokers below it, and
   pull it to brokers below ``floor(P / K)``;
3. for what greedy leaves, shift leadership along a chain (augmenting path) h -> v1 -> ... -> u
   found by breadth-first search over "leads a partition where the next broker is a follower".
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np


def initial_leaders(orig: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Leader per partition (broker index, int array (P,)): the old preferred leader if kept."""
    keeps = (new == orig[:, :1]).any(axis=1)
    return np.where(keeps, orig[:, 0], new[:, 0]).astype(np.int64)


def balance_leaders(orig: np.ndarray, new: np.ndarray, kept: np.ndarray, max_paths: int = 2000) -> np.ndarray:
    """Choose one leader per partition among its replicas so that kept brokers lead evenly.

    Args:
        orig: int array (P, R), replicas before the plan (broker indexes, -1 padded).
        new: int array (P, R), replicas after the plan.
        kept: bool array (B,), brokers that hold replicas after the plan.
        max_paths: bound on augmenting-path searches (each costs O(P * R)).

    Returns the leader per partition, int array (P,). Every broker ends at most ``ceil(P / K)``
    leaders when the replica placement allows it (K = kept brokers).
    """
    nb = len(kept)
    lead = initial_leaders(orig, new)
    counts = np.bincount(lead, minlength=nb)
    npart = len(lead)
    k = int(kept.sum())
    cap = math.ceil(npart / k)
    floor = npart // k
    valid = new >= 0

    # 2a. over-cap brokers give leadership to the least-leading follower below cap
    for h in np.nonzero(counts > cap)[0].tolist():
        for p in np.nonzero(lead == h)[0].tolist():
            if counts[h] <= cap:
                break
            row = [int(b) for b in new[p] if b >= 0 and b != h]
            if not row:
                continue
            u = min(row, key=lambda b: counts[b])
            if counts[u] < cap:
                lead[p] = u
                counts[h] -= 1
                counts[u] += 1
    # 2b. brokers below floor take leadership from followers' leaders above floor
    for u in np.nonzero(kept & (counts < floor))[0].tolist():
        rows = np.nonzero((new == u).any(axis=1) & (lead != u))[0]
        for p in rows.tolist():
            if counts[u] >= floor:
                break
            h = int(lead[p])
            if counts[h] > floor:
                lead[p] = u
                counts[h] -= 1
                counts[u] += 1
    # 3. augmenting paths for what is left above cap
    for _ in range(max_paths):
        over = np.nonzero(counts > cap)[0]
        if not len(over):
            break
        path = _find_path(lead, new, valid, counts, int(over[0]), cap, nb)
        if path is None:
            break
        for p, frm, to in path:
            lead[p] = to
            counts[frm] -= 1
            counts[to] += 1
    return lead


def _find_path(lead, new, valid, counts, start, cap, nb):
    """BFS from ``start`` to a broker under cap; returns [(partition, from, to), ...] or None."""
    pairs_from = np.repeat(lead[:, None], new.shape[1], axis=1)[valid]
    pairs_to = new[valid]
    pidx = np.repeat(np.arange(len(lead))[:, None], new.shape[1], axis=1)[valid]
    keep = pairs_from != pairs_to
    code = pairs_from[keep].astype(np.int64) * nb + pairs_to[keep]
    uniq, first = np.unique(code, return_index=True)
    via = pidx[keep][first]
    adj: dict[int, list] = {}
    for c, p in zip(uniq.tolist(), via.tolist(), strict=True):
        adj.setdefault(c // nb, []).append((c % nb, p))
    prev = {start: None}
    queue = deque([start])
    while queue:
        v = queue.popleft()
        for u, p in adj.get(v, []):
            if u in prev:
                continue
            prev[u] = (v, p)
            if counts[u] < cap:
                path = []
                node = u
                while prev[node] is not None:
                    frm, part = prev[node]
                    path.append((part, frm, node))
                    node = frm
                return path[::-1]
            queue.append(u)
    return None


def order_replicas(new: np.ndarray, lead: np.ndarray) -> np.ndarray:
    """Put each partition's leader first, keeping the other replicas in their order."""
    cols = np.arange(new.shape[1])[None, :]
    pos = np.argmax(new == lead[:, None], axis=1)
    key = np.where(cols == pos[:, None], -1, cols)
    order = np.argsort(key, axis=1, kind="stable")
    return np.take_along_axis(new, order, axis=1)
