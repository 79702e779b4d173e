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
   found by breadth-first search over "leads a partition where the next broker is a follower";
4. the same backwards for brokers left below ``floor(P / K)``: u takes leadership from v1, v1 from
   v2, ... until a broker above the floor gives one up.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np


def initial_leaders(orig: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Leader per partition (broker index, int array (P,)): the old preferred leader if kept."""
    keeps = (new == orig[:, :1]).any(axis=1)
    return np.where(keeps, orig[:, 0], new[:, 0]).astype(np.int64)


def balance_leaders(orig: np.ndarray, new: np.ndarray, kept: np.ndarray, max_paths: int = 2000,
                    frozen: np.ndarray | None = None) -> np.ndarray:
    """Choose one leader per partition among its replicas so that kept brokers lead evenly.

    Args:
        orig: int array (P, R), replicas before the plan (broker indexes, -1 padded).
        new: int array (P, R), replicas after the plan.
        kept: bool array (B,), brokers that hold replicas after the plan.
        max_paths: bound on rounds of augmenting-path searches (each round rebuilds the leader ->
            follower adjacency, O(P * R log(P * R))).
        frozen: bool array (P,) or None: partitions whose preferred leader stays the current one
            (a drain-only decommission freezes every partition it does not move: a new replica
            order alone would be a reassignment of its own).

    Returns the leader per partition, int array (P,). Every kept broker ends with at most
    ``ceil(P / K)`` and at least ``floor(P / K)`` leaders when the replica placement allows it
    (K = kept brokers), i.e. a leader skew ``1 + max |leaders / (P / K) - 1|`` as low as integers allow;
    with ``frozen`` partitions only the others change leader, so the skew may stay higher.
    """
    nb = len(kept)
    lead = initial_leaders(orig, new)
    counts = np.bincount(lead, minlength=nb)
    npart = len(lead)
    k = int(kept.sum())
    cap = math.ceil(npart / k)
    floor = npart // k
    movable = np.ones(npart, dtype=bool) if frozen is None else ~np.asarray(frozen, dtype=bool)
    valid = (new >= 0) & movable[:, None]

    # 2a. over-cap brokers give leadership to the least-leading follower below cap
    for h in np.nonzero(counts > cap)[0].tolist():
        for p in np.nonzero((lead == h) & movable)[0].tolist():
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
        rows = np.nonzero((new == u).any(axis=1) & (lead != u) & movable)[0]
        for p in rows.tolist():
            if counts[u] >= floor:
                break
            h = int(lead[p])
            if counts[h] > floor:
                lead[p] = u
                counts[h] -= 1
                counts[u] += 1
    # 3. augmenting paths for what is left above cap; one adjacency build serves many searches
    for _ in range(max_paths):
        over = np.nonzero(counts > cap)[0]
        if not len(over):
            break
        adj = _adjacency(lead, new, valid, nb)
        progress = False
        for h in over.tolist():
            while counts[h] > cap:
                path = _find_path(adj, lead, counts, h, cap)
                if path is None:
                    break
                _hand_over(path, lead, counts)
                progress = True
        if not progress:
            break
    # 4. the same for what is left below floor: u takes leadership from v1, v1 from v2, ... until a
    #    broker above floor gives one up (a new broker holding only followers gets its share)
    for _ in range(max_paths):
        under = np.nonzero(kept & (counts < floor))[0]
        if not len(under):
            break
        radj = _adjacency(lead, new, valid, nb, by_follower=True)
        progress = False
        for u in under.tolist():
            while counts[u] < floor:
                path = _find_path(radj, lead, counts, u, floor, pull=True)
                if path is None:
                    break
                _hand_over(path, lead, counts)
                progress = True
        if not progress:
            break
    return lead


class _Edges:
    """Partitions led by v with u as a follower, consumed lazily (leaders change as paths apply)."""

    __slots__ = ("parts", "pos")

    def __init__(self, parts):
        self.parts = parts
        self.pos = 0

    def next_valid(self, lead, v):
        while self.pos < len(self.parts):
            p = self.parts[self.pos]
            if lead[p] == v:
                return p
            self.pos += 1
        return None


def _adjacency(lead, new, valid, nb, by_follower=False):
    """{leader v: [(follower u, _Edges), ...]} over all partitions (O(P * R log) numpy).

    ``by_follower``: {follower u: [(leader v, _Edges), ...]} instead (the edges still hold the
    partitions led by v with u as a follower).
    """
    width = new.shape[1]
    frm = np.repeat(lead[:, None], width, axis=1)[valid]
    to = new[valid].astype(np.int64)
    pidx = np.repeat(np.arange(len(lead))[:, None], width, axis=1)[valid]
    keep = frm != to
    if by_follower:
        frm, to = to, frm
    code = frm[keep].astype(np.int64) * nb + to[keep]
    pidx = pidx[keep]
    if not len(code):
        return {}
    order = np.argsort(code, kind="stable")
    code, pidx = code[order], pidx[order]
    starts = np.concatenate(([0], np.nonzero(np.diff(code))[0] + 1))
    ends = np.concatenate((starts[1:], [len(code)]))
    adj: dict[int, list] = {}
    for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
        c = int(code[a])
        adj.setdefault(c // nb, []).append((c % nb, _Edges(pidx[a:b].tolist())))
    return adj


def _hand_over(path, lead, counts) -> None:
    """Apply a chain of leadership hand-offs: each ``(partition, from, to)`` moves the lead and the counts."""
    for p, frm, to in path:
        lead[p] = to
        counts[frm] -= 1
        counts[to] += 1


def _find_path(adj, lead, counts, start, cap, pull=False):
    """BFS from ``start`` to a broker under ``cap``; returns [(partition, from, to), ...] or None.

    ``pull`` (with a ``by_follower`` adjacency): BFS from a broker below ``cap`` (the floor) to one
    above it; each step hands leadership of a partition from its leader to the follower before it.
    """
    prev = {start: None}
    queue = deque([start])
    while queue:
        v = queue.popleft()
        for u, edges in adj.get(v, []):
            if u in prev:
                continue
            p = edges.next_valid(lead, u if pull else v)
            if p is None:
                continue
            prev[u] = (v, p)
            if (counts[u] > cap) if pull else (counts[u] < cap):
                path = []
                node = u
                while prev[node] is not None:
                    frm, part = prev[node]
                    path.append((part, node, frm) if pull else (part, frm, node))
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
