"""Replica placement: move the least data that reaches balance, keeping Kafka's placement rules.

Rules kept by every plan (Kafka's; formats in docs/architecture.md, "Planner files"):

- replicas of a partition stay on distinct brokers, the replication factor is unchanged, and only
  kept brokers (all but the drained ones) hold replicas;
- rack diversity: a partition must span ``min(RF, racks among kept brokers)`` racks (the rule of
  Kafka's rack-aware assignment); a partition spanning more racks than the kept brokers have is bad
  input;
- (planner's own, for leader balance) while placing and balancing counts, a broker takes an RF-1
  partition only while it holds fewer than ``ceil(P / K)`` of them: that replica leads wherever it
  is, and reordering cannot fix it (byte balancing may break this: bytes come first);
- the caps ``max_moves`` (replica moves) and ``max_bytes`` (bytes copied) hold; draining is
  mandatory, so a decommission over the caps is bad input.

Balance is measured as a skew ``1 + max over kept brokers |load / mean - 1|`` (bytes, replica
counts, preferred leaders): an under-filled broker (a new one left at 0.8 of the mean) counts as much
as an overloaded one, which max/mean would not see.

Algorithm (all steps work on the weights ``w``: partition size in bytes, or 1 per replica when every
size is 0 or absent, i.e. replica counts are balanced instead, see ``Plan.weighting``):

0. targets (:func:`rack_targets`): every kept broker aims at the mean, unless the rack-diversity rule
   keeps a rack above or below it (uneven racks); then each rack's load is clamped to what the rule
   allows and the rest is spread evenly (``Plan.rack_bound`` reports the resulting best skew);
1. mandatory moves: replicas on drained brokers, and the extra replicas of a partition crowded into
   one rack, leave their broker (their slot is emptied);
2. shedding (one independent sub-problem per overloaded broker, :func:`select_shed`): a broker above
   its target ``T_b`` picks replicas whose weights add up to its excess ``load - T_b`` and whose count
   is close to its count excess, so that receivers get a representative mix of sizes. One replica per
   partition is shed; brokers whose picks were taken by another broker shed again (a few rounds);
3. assignment (global, sequential): emptied slots, largest first (mandatory first under caps), go to the
   allowed receiver with the most remaining deficit per missing replica, never far past its target;
   optional replicas that fit nowhere go back home (no move);
4. refinement (global, sequential): the broker furthest outside ``T_b +- tolerance / 2 x mean``,
   over- or under-filled, trades with the brokers furthest on the other side (a replica of about the
   right size, or a large one swapped for a small one); then the same for replica counts within
   ``+- 3 %`` (moving small replicas, or trading k small replicas for one replica of the same total
   weight) while bytes stay in their band; alternated until both hold;
5. undo (:func:`_undo_moves`): a moved replica whose old (kept) broker may take it back goes home when
   both brokers stay within half the byte band and the count band: no copy for a move no goal needs.

With ``drain_only`` (a decommission that moves nothing else) only step 1 (the drained brokers' slots)
and step 3 run: the moved bytes are exactly the drained ones, and the kept brokers' balance is what it
was plus what they receive.

Only brokers above their target send and only brokers below it receive, so the bytes moved stay close
to the lower bound (:func:`lower_bound_moved`: the drained replicas, the fill
``sum over kept brokers of max(0, T - load_before)`` and the copies uneven racks force).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from planner.errors import PlanInputError
from planner.snapshot import Snapshot

MODES = ("scale-out", "decommission", "rebalance")


@dataclass
class PlanOptions:
    """What to plan.

    Attributes:
        mode: ``scale-out`` (``brokers`` are the new, empty brokers), ``decommission`` (``brokers``
            are drained completely) or ``rebalance`` (every broker, ``brokers`` must be empty).
        brokers: broker ids for scale-out / decommission.
        max_moves: cap on replica moves (None: no cap).
        max_bytes: cap on bytes copied (None: no cap).
        tolerance: accepted per-broker byte imbalance ``|bytes / target - 1|`` (a fraction of the
            mean, default 0.02; the target is the mean unless uneven racks forbid it); the planner
            aims at half of it.
        drain_only: decommission only: move the drained brokers' replicas and nothing else (no
            shedding, refinement or rack-crowding fixes among the kept brokers; only the partitions that
            move may change their preferred leader). Each moved replica still goes where step 3 puts it
            (the allowed kept broker with the most room below its target per replica it lacks), so the
            plan copies exactly the drained bytes.
    """

    mode: str
    brokers: tuple = ()
    max_moves: int | None = None
    max_bytes: int | None = None
    tolerance: float = 0.02
    drain_only: bool = False


@dataclass
class Plan:
    """A planned assignment.

    Attributes:
        snapshot: the input.
        kept: bool array (B,), brokers that may hold replicas after the plan.
        drained: bool array (B,), brokers emptied by a decommission.
        replicas: int32 array (P, R) of broker indexes after the plan, padded with -1; column 0 is
            the preferred leader (after leader balancing).
        notes: human-readable remarks (caps reached, balance not reached and why).
        weighting: what was balanced: ``"bytes"``, or ``"replica-count (no partition sizes
            known)"`` when every size is 0 or absent (each replica then weighs 1).
        rack_bound: the balance uneven racks allow (see :func:`_rack_bound`), None without racks.
    """

    snapshot: Snapshot
    kept: np.ndarray
    drained: np.ndarray
    replicas: np.ndarray
    notes: list = field(default_factory=list)
    weighting: str = "bytes"
    rack_bound: dict | None = None


# A shed selector solves the per-broker sub-problems of step 2. It gets the weights, the current
# assignment and the per-broker targets {broker index: (excess weight, excess count)} and returns
# the flat slot keys (p * R + slot) to shed. The Spark driver swaps in a distributed one.
ShedSelector = Callable[[np.ndarray, np.ndarray, dict, set], np.ndarray]


def select_shed(weights: np.ndarray, keys: np.ndarray, excess: float, excess_count: float) -> np.ndarray:
    """Pick the replicas an overloaded broker gives away (one independent sub-problem).

    Args:
        weights: float array (n,), the weights of the broker's replicas (bytes, or 1 per replica).
        keys: int64 array (n,), unique keys of those replicas; ties in weight are broken by key so
            that the answer does not depend on input order.
        excess: weight to shed (load - mean), > 0.
        excess_count: replicas to shed (count - mean count), may be <= 0.

    Returns the keys of the chosen replicas: their weights add up to at most ``excess`` and as close
    to it as a few swaps get; their count is ``round(excess_count)`` when sizes allow, otherwise as
    few replicas as possible (largest first).
    """
    n = len(weights)
    if n == 0 or excess <= 0:
        return np.empty(0, dtype=np.int64)
    order = np.lexsort((keys, weights))
    s = np.asarray(weights, dtype=np.float64)[order]
    prefix = np.concatenate(([0.0], np.cumsum(s)))
    m = min(int(round(excess_count)), n) if excess_count >= 1 else 0
    if m >= 1 and prefix[m] > excess:
        m = int(np.searchsorted(prefix, excess, side="right")) - 1
    chosen = np.zeros(n, dtype=bool)
    if m <= 0:
        remaining = excess
        for i in range(n - 1, -1, -1):
            if s[i] <= remaining:
                chosen[i] = True
                remaining -= s[i]
                if remaining < s[0]:
                    break
        return np.asarray(keys)[order[chosen]]
    windows = prefix[m:] - prefix[: n - m + 1]
    i = int(np.searchsorted(windows, excess, side="right")) - 1
    i = max(i, 0)
    chosen[i : i + m] = True
    total = windows[i]
    if i == n - m and total < excess:
        for j in range(i - 1, -1, -1):
            if total + s[j] <= excess:
                chosen[j] = True
                total += s[j]
    for _ in range(64):
        gap = excess - total
        if gap <= 0:
            break
        cp = np.nonzero(chosen)[0]
        target = np.searchsorted(s, s[cp] + gap, side="right") - 1
        ok = (target > cp) & ~chosen[np.maximum(target, 0)]
        if not ok.any():
            break
        gain = np.where(ok, s[np.maximum(target, 0)] - s[cp], -1.0)
        k = int(np.argmax(gain))
        if gain[k] <= 0:
            break
        chosen[cp[k]] = False
        chosen[target[k]] = True
        total += gain[k]
    return np.asarray(keys)[order[chosen]]


def local_shed_selector(weights, replicas, targets, excluded) -> np.ndarray:
    """Run :func:`select_shed` for every broker in ``targets`` on this process (see ShedSelector)."""
    width = replicas.shape[1]
    flat = replicas.ravel()
    slot_keys = np.nonzero(flat >= 0)[0]
    if excluded:
        slot_keys = slot_keys[~np.isin(slot_keys, np.fromiter(excluded, dtype=np.int64))]
    owners = flat[slot_keys]
    order = np.argsort(owners, kind="stable")
    owners, slot_keys = owners[order], slot_keys[order]
    if not len(owners):
        return np.empty(0, dtype=np.int64)
    bounds = np.searchsorted(owners, np.arange(int(owners.max()) + 2))
    out = []
    for b, (excess, excess_count) in sorted(targets.items()):
        if b + 1 >= len(bounds):
            continue
        keys = slot_keys[bounds[b] : bounds[b + 1]]
        out.append(select_shed(weights[keys // width], keys, excess, excess_count))
    return np.concatenate(out) if out else np.empty(0, dtype=np.int64)


def resolve_request(snap: Snapshot, opts: PlanOptions) -> tuple[np.ndarray, np.ndarray]:
    """Check the request against the snapshot; return (kept, drained) bool arrays over brokers.

    Raises PlanInputError: unknown mode; ``--brokers`` missing for scale-out / decommission or given
    for rebalance; broker ids not in brokers.json; a decommission leaving fewer brokers than the
    largest replication factor (Kafka cannot place RF distinct replicas); a partition spanning more
    racks than the kept brokers have (its rack diversity could not be kept); caps below what a
    decommission must move; ``drain_only`` outside a decommission.
    """
    if opts.mode not in MODES:
        raise PlanInputError(f"unknown mode {opts.mode!r}; expected one of {', '.join(MODES)}")
    if opts.drain_only and opts.mode != "decommission":
        raise PlanInputError(f"--drain-only is for a decommission, not a {opts.mode}")
    nb = len(snap.broker_ids)
    ids = list(opts.brokers)
    if opts.mode == "rebalance" and ids:
        raise PlanInputError("rebalance uses every broker in brokers.json; do not pass --brokers")
    if opts.mode != "rebalance" and not ids:
        raise PlanInputError(f"missing broker ids: {opts.mode} needs --brokers")
    if len(set(ids)) != len(ids):
        raise PlanInputError(f"--brokers lists a broker twice: {ids}")
    unknown = [b for b in ids if b not in set(snap.broker_ids.tolist())]
    if unknown:
        raise PlanInputError(f"unknown broker ids {unknown}: not in brokers.json")
    idx = np.array([snap.broker_index(b) for b in ids], dtype=np.int64)
    drained = np.zeros(nb, dtype=bool)
    if opts.mode == "decommission":
        drained[idx] = True
    kept = ~drained
    rf = snap.rf
    max_rf = int(rf.max())
    if kept.sum() < max_rf:
        what = "decommission leaves" if opts.mode == "decommission" else "the cluster has"
        raise PlanInputError(
            f"{what} {int(kept.sum())} brokers, fewer than the largest replication factor {max_rf}"
        )
    if snap.racks and snap.racks[0] is not None:
        rack_idx = rack_indexes(snap.racks)
        kept_racks = len(set(rack_idx[kept].tolist()))
        spans = distinct_racks(snap.replicas, rack_idx)
        bad = np.nonzero(spans > kept_racks)[0]
        if len(bad):
            p = int(bad[0])
            raise PlanInputError(
                f"fewer racks than needed: {snap.topics[p]}-{int(snap.partitions[p])} "
                f"spans {int(spans[p])} racks "
                f"but the kept brokers have {kept_racks} ({len(bad)} partitions affected)"
            )
    if opts.mode == "decommission":
        on_drained = drained[np.maximum(snap.replicas, 0)] & (snap.replicas >= 0)
        must_moves = int(on_drained.sum())
        must_bytes = int((on_drained.sum(axis=1) * snap.sizes).sum())
        if opts.max_moves is not None and must_moves > opts.max_moves:
            raise PlanInputError(
                f"draining needs {must_moves} replica moves, over --max-moves {opts.max_moves}"
            )
        if opts.max_bytes is not None and must_bytes > opts.max_bytes:
            raise PlanInputError(
                f"draining needs {must_bytes} bytes moved, over --max-bytes {opts.max_bytes}"
            )
    return kept, drained


def rack_indexes(racks: list) -> np.ndarray:
    """Rack name per broker -> small int per broker (-1 for no rack)."""
    names = {r: i for i, r in enumerate(sorted({r for r in racks if r is not None}))}
    return np.array([names.get(r, -1) if r is not None else -1 for r in racks], dtype=np.int32)


def distinct_racks(replicas: np.ndarray, rack_idx: np.ndarray) -> np.ndarray:
    """Number of distinct racks each partition spans, int array (P,); replicas padded with -1."""
    valid = replicas >= 0
    rr = np.where(valid, rack_idx[np.maximum(replicas, 0)], -1).astype(np.int64)
    pad = -2 - np.arange(replicas.shape[1])
    rr = np.where(valid, rr, pad[None, :])
    rr.sort(axis=1)
    distinct = 1 + (np.diff(rr, axis=1) != 0).sum(axis=1)
    return distinct - (~valid).sum(axis=1)


def rack_targets(weights: np.ndarray, replicas: np.ndarray, kept: np.ndarray, rack_idx: np.ndarray):
    """Per-broker load targets that the rack-diversity rule allows, closest to the mean.

    Rule (Kafka's rack-aware assignment, kept by every plan): a partition with RF ``r`` spans
    ``min(r, N)`` of the ``N`` racks of the kept brokers, so a rack holds at most one replica of it
    when ``r <= N`` and at least one when ``r >= N``. Summed over partitions this bounds each rack's
    load: ``lo_R <= load_R <= hi_R`` (in units of ``weights``: bytes, or 1 per replica). With 3 racks
    and RF <= 3 these bounds describe exactly which rack loads are reachable; with more racks they are
    a relaxation (the bound below is then a lower bound on the skew).

    The rack loads closest to "every kept broker at the mean ``M``" are ``clamp(n_R * x, lo_R, hi_R)``
    with one ``x`` such that they add up to the total (water filling; ``n_R`` = kept brokers in rack
    R); each broker's target is its rack's load divided by ``n_R``. Even racks (or no racks) give
    every kept broker the mean.

    Args:
        weights: float array (P,), weight of one replica of each partition.
        replicas: int array (P, R) of broker indexes, -1 padded (only the RF per partition is used).
        kept: bool array (B,), brokers that hold replicas after the plan.
        rack_idx: int array (B,), rack per broker (-1 everywhere: no rack information).

    Returns (targets, racks): float array (B,) of targets (0 for brokers not kept) and, per rack
    index, ``(brokers, lo_R, hi_R, load_R)``; racks is empty without rack information.
    """
    rf = (replicas >= 0).sum(axis=1)
    total = float((weights * rf).sum())
    nk = int(kept.sum())
    mean = total / nk
    tgt = np.where(kept, mean, 0.0)
    if (rack_idx < 0).all():
        return tgt, {}
    names = sorted(set(rack_idx[kept].tolist()))
    n = np.array([int((kept & (rack_idx == r)).sum()) for r in names], dtype=np.float64)
    nr = len(names)
    rfs, inverse = np.unique(rf, return_inverse=True)
    wsum = np.bincount(inverse, weights=weights, minlength=len(rfs))
    lo = np.zeros(nr)
    hi = np.zeros(nr)
    for r, w in zip(rfs.tolist(), wsum.tolist(), strict=True):
        # at most one replica per rack if r <= N, else up to the rack's brokers and r - (N - 1)
        most = np.ones(nr) if r <= nr else np.minimum(n, r - nr + 1)
        least = np.maximum(1.0 if r >= nr else 0.0, r - (most.sum() - most))
        lo += w * least
        hi += w * np.maximum(most, least)
    a, b = 0.0, total
    for _ in range(200):
        x = 0.5 * (a + b)
        if np.clip(n * x, lo, hi).sum() < total:
            a = x
        else:
            b = x
    load = np.clip(n * 0.5 * (a + b), lo, hi)
    racks = {}
    for i, r in enumerate(names):
        tgt[kept & (rack_idx == r)] = load[i] / n[i]
        racks[r] = (int(n[i]), float(lo[i]), float(hi[i]), float(load[i]))
    # water filling is exact up to float rounding: spread the rounding evenly
    tgt[kept] *= total / tgt[kept].sum()
    return tgt, racks


def _min_cost_flow(n: int, arcs: list, source: int, sink: int) -> tuple[float, float]:
    """(flow, cost) of a min-cost maximum flow from ``source`` to ``sink`` (successive shortest paths).

    ``arcs``: ``(u, v, capacity, cost)`` with cost >= 0 and capacity a float (``inf`` allowed). Meant
    for the tiny rack-level networks of :func:`lower_bound_moved` (a few dozen arcs): Bellman-Ford
    on the residual graph, one augmentation per path.
    """
    head: list = [[] for _ in range(n)]
    to, cap, cost = [], [], []
    for u, v, c, w in arcs:
        for a, b, cc, ww in ((u, v, float(c), float(w)), (v, u, 0.0, -float(w))):
            head[a].append(len(to))
            to.append(b)
            cap.append(cc)
            cost.append(ww)
    flow = total = 0.0
    for _ in range(4 * len(to) + 8):
        dist = [math.inf] * n
        via = [-1] * n
        dist[source] = 0.0
        for _ in range(n):
            changed = False
            for u in range(n):
                if dist[u] == math.inf:
                    continue
                for e in head[u]:
                    if cap[e] > 1e-9 and dist[u] + cost[e] < dist[to[e]] - 1e-12:
                        dist[to[e]] = dist[u] + cost[e]
                        via[to[e]] = e
                        changed = True
            if not changed:
                break
        if dist[sink] == math.inf:
            break
        push, v = math.inf, sink
        while v != source:
            e = via[v]
            push = min(push, cap[e])
            v = to[e ^ 1]
        if push == math.inf or push <= 1e-9:
            break
        v = sink
        while v != source:
            e = via[v]
            cap[e] -= push
            cap[e ^ 1] += push
            v = to[e ^ 1]
        flow += push
        total += push * dist[sink]
    return flow, total


def lower_bound_moved(
    sizes: np.ndarray,
    replicas: np.ndarray,
    kept: np.ndarray,
    drained: np.ndarray,
    rack_idx: np.ndarray,
    targets: np.ndarray | None = None,
) -> dict:
    """Bytes any plan must copy to put every kept broker exactly on its target (a true lower bound).

    Args:
        sizes: int or float array (P,), partition size in bytes (one replica copies that much).
        replicas: int array (P, R) of broker indexes before the plan, -1 padded.
        kept: bool array (B,), brokers holding replicas after the plan.
        drained: bool array (B,), brokers emptied by the plan (decommission).
        rack_idx: int array (B,), rack per broker (:func:`rack_indexes`; -1 everywhere: no racks).
        targets: float array (B,), bytes each kept broker ends with; default :func:`rack_targets`
            (the tests pass the final loads of arbitrary plans to check the bound against them).

    Returns ``{"bytes", "drained_bytes", "fill_bytes", "rack_forced_bytes"}`` (all bytes, floats):
    the bound, the bytes on drained brokers, the fill ``sum max(0, T_b - before_b)`` and what the
    rack-diversity rule adds on top of ``max(drained, fill)``.

    Targets ``T_b`` are by default :func:`rack_targets` in bytes: the mean after the plan, unless uneven racks
    force a rack above or below it (the balance goal the planner aims at; a plan stopping within
    its tolerance of the targets may copy a little less).

    Derivation. A copy is a replica landing on a broker that did not hold the partition. Let
    ``d_b = T_b - before_b`` for kept broker b; b ends at ``before_b - sent_b + received_b = T_b``,
    so ``received_b >= max(0, d_b)``. Per rack R (kept brokers), the bytes received satisfy

    - ``received_R >= F_R = sum over b in R of max(0, d_b)`` (the per-broker fill), and
    - ``received_R >= in_R``: every byte entering R from another rack or from a drained broker
      (in R or not) lands on a broker that did not hold the partition (replicas of a partition sit
      on distinct brokers).

    Rack R's net gain is fixed, ``in_R - out_R = sum over b in R of d_b`` (``out_R``: kept replicas
    leaving R). Where a removed replica may go is limited by the rule (Kafka's rack-aware placement:
    a partition spans ``min(RF, N)`` of the N kept racks): with RF <= N a rack holding one of the
    partition's kept replicas cannot take it, so it may only enter racks without one (with RF > N any
    rack; this is all a relaxation needs). Any plan gives such flows: a partition's final racks not
    among its kept replicas' racks are each entered by a drained replica or by a kept one changing
    rack, and the plan pays one copy for each. So every plan copies at least

        ``min over rack flows of sum_R max(F_R, in_R)``

    a min-cost flow on the racks: removed replicas (grouped by the racks they may enter) and racks
    with a surplus supply bytes, racks with a deficit absorb them, a kept replica may change rack at
    will, and entering rack R is free up to ``F_R`` and costs 1 per byte beyond it. Summing
    ``in_R >= drained`` and ``F_R`` gives ``max(drained, fill)`` as a special case; without racks (or
    with one) the bound is exactly that. Rack-forced bytes appear when the removed replicas locked to
    a rack exceed what its brokers need (they must then push other replicas out), or when a rack
    that must grow (e.g. the one rack that kept all its brokers) can only be reached by few removed
    replicas: the rest of its growth is kept replicas changing rack, copied on top of the drain.
    """
    sizes = np.asarray(sizes, dtype=np.float64)
    nb = len(kept)
    rf = (replicas >= 0).sum(axis=1)
    valid = replicas >= 0
    owners = replicas[valid]
    wrep = np.broadcast_to(sizes[:, None], replicas.shape)[valid]
    before = np.bincount(owners, weights=wrep, minlength=nb)
    drained_bytes = float(before[drained & ~kept].sum())
    if before.sum() <= 0:  # no size known: nothing to bound in bytes
        return {"bytes": 0.0, "drained_bytes": 0.0, "fill_bytes": 0.0, "rack_forced_bytes": 0.0}
    tgt = rack_targets(sizes, replicas, kept, rack_idx)[0] if targets is None else targets
    d = np.where(kept, tgt - before, 0.0)
    fill = float(np.maximum(d, 0.0)[kept].sum())
    simple = max(drained_bytes, fill)
    out = {"bytes": simple, "drained_bytes": drained_bytes, "fill_bytes": fill, "rack_forced_bytes": 0.0}
    names = sorted(set(rack_idx[kept].tolist()))
    if (rack_idx[kept] < 0).any() or len(names) < 2 or drained_bytes + fill <= 0:
        return out
    nr = len(names)
    pos = {r: i for i, r in enumerate(names)}
    rk = np.array([pos.get(int(r), -1) for r in rack_idx], dtype=np.int64)
    fill_r = np.zeros(nr)
    need_r = np.zeros(nr)
    for b in np.nonzero(kept)[0].tolist():
        fill_r[rk[b]] += max(0.0, d[b])
        need_r[rk[b]] += d[b]
    # removed replicas grouped by the set of racks (bit mask) they may enter: the racks holding none
    # of the partition's kept replicas when RF <= N, any rack otherwise
    if nr > 62:  # bit masks in int64; the simple bound stays a lower bound
        return out
    every = (1 << nr) - 1
    safe = np.maximum(replicas, 0)
    on_kept = valid & kept[safe]
    gone = (valid & ~on_kept).sum(axis=1)
    rows = np.nonzero(gone)[0]
    bits = np.where(on_kept[rows], np.left_shift(1, np.maximum(rk[safe[rows]], 0)), 0).astype(np.int64)
    masks = np.where(rf[rows] <= nr, every & ~np.bitwise_or.reduce(bits, axis=1), every)
    groups, inverse = np.unique(masks, return_inverse=True)
    amounts = np.bincount(inverse, weights=sizes[rows] * gone[rows], minlength=len(groups))
    supply = dict(zip(groups.tolist(), amounts.tolist(), strict=True))
    # nodes: 0 source, 1 sink, 2 + i rack i, 2 + nr + i entry of rack i, then one per group
    src, snk = 0, 1
    arcs = []
    for i in range(nr):
        rack, entry = 2 + i, 2 + nr + i
        arcs.append((entry, rack, fill_r[i], 0.0))
        arcs.append((entry, rack, math.inf, 1.0))
        for j in range(nr):
            if j != i:
                arcs.append((rack, 2 + nr + j, math.inf, 0.0))  # a kept replica changes rack
        if need_r[i] > 0:
            arcs.append((rack, snk, need_r[i], 0.0))
        elif need_r[i] < 0:
            arcs.append((src, rack, -need_r[i], 0.0))
    for g, (mask, amount) in enumerate(sorted(supply.items())):
        node = 2 + 2 * nr + g
        arcs.append((src, node, amount, 0.0))
        for i in range(nr):
            if mask >> i & 1:
                arcs.append((node, 2 + nr + i, math.inf, 0.0))
    _, extra = _min_cost_flow(2 + 2 * nr + len(supply), arcs, src, snk)
    bound = max(simple, float(fill_r.sum()) + extra)
    out["bytes"] = bound
    out["rack_forced_bytes"] = bound - simple
    return out


class _State:
    """Mutable placement state shared by the steps (weights, loads, counts, move counters)."""

    def __init__(self, snap: Snapshot, kept: np.ndarray, opts: PlanOptions):
        self.snap = snap
        self.orig = snap.replicas
        self.new = snap.replicas.copy()
        self.width = self.new.shape[1]
        self.kept = kept
        self.sizes = snap.sizes
        total = int((snap.sizes * snap.rf).sum())
        self.count_based = total == 0
        self.weights = snap.sizes.astype(np.float64) if total > 0 else np.ones(len(snap.sizes))
        self.rack_aware = bool(snap.racks) and snap.racks[0] is not None
        self.rack_idx = rack_indexes(snap.racks) if self.rack_aware else np.full(len(kept), -1, np.int32)
        kept_racks = len(set(self.rack_idx[kept].tolist()))
        self.needed = np.minimum(snap.rf, kept_racks) if self.rack_aware else np.ones(len(snap.rf), int)
        nb = len(kept)
        valid = self.new >= 0
        owners = self.new[valid]
        wrep = np.broadcast_to(self.weights[:, None], self.new.shape)[valid]
        self.load = np.bincount(owners, weights=wrep, minlength=nb).astype(np.float64)
        self.count = np.bincount(owners, minlength=nb).astype(np.int64)
        nk = int(kept.sum())
        self.target = float(self.load.sum()) / nk
        self.count_target = float(self.count.sum()) / nk
        # per-broker targets: the mean, unless uneven racks force some racks above or below it
        self.tgt, byte_racks = rack_targets(self.weights, self.new, kept, self.rack_idx)
        self.ctgt, count_racks = rack_targets(np.ones(len(self.weights)), self.new, kept, self.rack_idx)
        self.rack_info = (byte_racks, count_racks)
        self.tolerance = opts.tolerance
        self.max_moves = opts.max_moves
        self.max_bytes = opts.max_bytes
        self.moves = 0
        self.bytes = 0
        self.lists: dict[int, tuple[list, list]] = {}
        # an RF-1 partition's only replica is its leader wherever it goes (reordering cannot help):
        # a broker holding more than ceil(P / K) of them exceeds the leader cap whatever the order
        self.solo = snap.rf == 1
        self.solo_count = np.bincount(self.new[self.solo, 0], minlength=nb).astype(np.int64)
        self.solo_cap = math.ceil(len(snap.rf) / nk)
        self.solo_rule = True  # off while balancing bytes: bytes come first (RF-1 clusters)

    # --- per-broker sorted replica lists (weights, keys), built lazily -------------------------
    def items(self, b: int) -> tuple[list, list]:
        got = self.lists.get(b)
        if got is None:
            keys = np.nonzero(self.new.ravel() == b)[0]
            w = self.weights[keys // self.width]
            order = np.lexsort((keys, w))
            got = (w[order].tolist(), keys[order].tolist())
            self.lists[b] = got
        return got

    def _list_remove(self, b: int, key: int) -> None:
        if b in self.lists:
            ws, ks = self.lists[b]
            w = float(self.weights[key // self.width])
            i = bisect.bisect_left(ws, w)
            while ks[i] != key:
                i += 1
            del ws[i], ks[i]

    def _list_add(self, b: int, key: int) -> None:
        if b in self.lists:
            ws, ks = self.lists[b]
            w = float(self.weights[key // self.width])
            i = bisect.bisect_left(ws, w)
            while i < len(ws) and ws[i] == w and ks[i] < key:
                i += 1
            ws.insert(i, w)
            ks.insert(i, key)

    # --- rules --------------------------------------------------------------------------------
    def allowed_mask(self, p: int, s: int) -> np.ndarray:
        """Brokers that may take slot s of partition p (distinct brokers, rack diversity)."""
        row = self.new[p]
        others = np.array([b for i, b in enumerate(row) if i != s and b >= 0], dtype=np.int64)
        mask = self.kept.copy()
        if len(others):
            mask[others] = False
            if self.rack_aware:
                oracks = self.rack_idx[others]
                distinct = set(oracks.tolist())
                if len(distinct) < self.needed[p]:
                    for r in distinct:
                        mask &= self.rack_idx != r
        if self.solo[p]:
            room = mask & (self.solo_count < self.solo_cap)
            if room.any():
                mask = room
        return mask

    def allowed(self, p: int, s: int, b: int) -> bool:
        if not self.kept[b]:
            return False
        row = self.new[p]
        others = [int(x) for i, x in enumerate(row) if i != s and x >= 0]
        if b in others:
            return False
        if self.solo_rule and self.solo[p] and self.solo_count[b] >= self.solo_cap and row[s] != b:
            return False
        if self.rack_aware:
            oracks = {int(self.rack_idx[x]) for x in others}
            if len(oracks) < self.needed[p] and int(self.rack_idx[b]) in oracks:
                return False
        return True

    def allowed_many(self, keys: np.ndarray, b: int) -> np.ndarray:
        """:meth:`allowed` for many slot keys (``p * R + s``) and one broker b, bool array."""
        keys = np.asarray(keys, dtype=np.int64)
        p, s = keys // self.width, keys % self.width
        rows = self.new[p].copy()
        rows[np.arange(len(keys)), s] = -1
        ok = np.full(len(keys), bool(self.kept[b])) & ~(rows == b).any(axis=1)
        if self.solo_rule and self.solo_count[b] >= self.solo_cap:
            ok &= ~self.solo[p]
        if self.rack_aware:
            same = ((rows >= 0) & (self.rack_idx[np.maximum(rows, 0)] == self.rack_idx[b])).any(axis=1)
            ok &= ~same | (distinct_racks(rows, self.rack_idx) >= self.needed[p])
        return ok

    def move_cost(self, p: int, s: int, b: int) -> tuple[int, int]:
        """(delta moves, delta bytes) of putting slot (p, s) on broker b (b = -1: empty slot)."""
        before = self.new[p, s] >= 0 and self.new[p, s] != self.orig[p, s]
        after = b >= 0 and b != self.orig[p, s]
        d = int(after) - int(before)
        return d, d * int(self.sizes[p])

    def within_caps(self, dm: int, db: int) -> bool:
        if self.max_moves is not None and self.moves + dm > self.max_moves:
            return False
        return self.max_bytes is None or self.bytes + db <= self.max_bytes

    def set_slot(self, p: int, s: int, b: int) -> None:
        """Put slot (p, s) on broker b (-1 empties it), keeping loads, lists and counters."""
        dm, db = self.move_cost(p, s, b)
        self.moves += dm
        self.bytes += db
        old = int(self.new[p, s])
        key = p * self.width + s
        w = self.weights[p]
        if old >= 0:
            self.load[old] -= w
            self.count[old] -= 1
            self.solo_count[old] -= self.solo[p]
            self._list_remove(old, key)
        self.new[p, s] = b
        if b >= 0:
            self.load[b] += w
            self.count[b] += 1
            self.solo_count[b] += self.solo[p]
            self._list_add(b, key)


def _mandatory(state: _State, drained: np.ndarray, crowded_too: bool = True) -> list:
    """Empty the slots on drained brokers and (``crowded_too``) the rack-crowded slots; return their keys."""
    new = state.new
    valid = new >= 0
    on_drained = valid & drained[np.maximum(new, 0)]
    keys = []
    for p, s in zip(*np.nonzero(on_drained), strict=True):
        state.set_slot(int(p), int(s), -1)
        keys.append(int(p) * state.width + int(s))
    if state.rack_aware and crowded_too:
        spans = distinct_racks(new, state.rack_idx)
        filled = (new >= 0).sum(axis=1)
        # a partition whose kept replicas crowd racks although it could span more
        crowded = np.nonzero(spans < np.minimum(state.needed, filled))[0]
        for p in crowded.tolist():
            seen = set()
            for s in range(state.width):
                b = int(new[p, s])
                if b < 0:
                    continue
                r = int(state.rack_idx[b])
                if r in seen:
                    state.set_slot(p, s, -1)
                    keys.append(p * state.width + s)
                seen.add(r)
    return keys


def _assign(state: _State, keys: list, mandatory: set, home: dict, notes: list) -> None:
    """Step 3: place emptied slots, largest first (mandatory ones first when caps apply)."""
    w = state.weights
    width = state.width
    tgt = state.tgt
    slack = 0.25 * state.tolerance * state.target
    # with caps, mandatory moves go first so that optional ones cannot use up the budget
    capped = state.max_moves is not None or state.max_bytes is not None
    # replicas locked to one rack (RF >= racks) go before those that may change rack, which then
    # fill whatever room the locked ones leave in each rack
    kept_racks = len(set(state.rack_idx[state.kept].tolist()))
    locked = state.needed >= kept_racks if state.rack_aware else np.zeros(len(w), dtype=bool)
    ordered = sorted(
        keys, key=lambda k: (capped and k not in mandatory, not locked[k // width], -w[k // width], k)
    )
    returned = 0
    for key in ordered:
        p, s = divmod(key, width)
        x = float(w[p])
        mask = state.allowed_mask(p, s)
        room = tgt - state.load
        need = state.ctgt - state.count
        fits = mask & (x <= room)
        if not fits.any():
            fits = mask & (room > 0) & (x <= room + slack)
        if fits.any():
            score = np.where(fits, room / np.maximum(need, 1.0), -np.inf)
            b = int(np.argmax(score))
        elif key in mandatory:
            b = int(np.argmax(np.where(mask, room, -np.inf)))
        else:
            b = -1
        if b >= 0 and key not in mandatory:
            dm, db = state.move_cost(p, s, b)
            if not state.within_caps(dm, db):
                b = -1
        if b < 0:
            b = home[key]
            returned += 1
            if not state.allowed(p, s, b):
                # another replica of the partition took the rack meanwhile: place it anyway
                b = int(np.argmax(np.where(mask, room, -np.inf)))
        state.set_slot(p, s, b)
    if returned and (state.max_moves is not None or state.max_bytes is not None):
        notes.append(f"{returned} candidate moves were not made (no room or caps reached)")


def _best_single(state: _State, h: int, lo: int, want: float, upper: float):
    """A replica on h, weight in (0, upper] and closest to want, that broker lo may take.

    A replica that already moved in (not on h before the plan) moves on at no extra cost, so its
    distance to ``want`` counts half. The 256 closest candidates are checked against the placement
    rules at once (a rack-constrained receiver may accept only a few partitions).
    """
    ws, ks = state.items(h)
    if not ws:
        return None
    n = bisect.bisect_right(ws, upper)
    first = bisect.bisect_right(ws, 0.0)
    if n <= first:
        return None
    w = np.asarray(ws[first:n])
    keys = np.asarray(ks[first:n], dtype=np.int64)
    moved_in = state.orig.ravel()[keys] != h
    score = np.abs(w - want) * np.where(moved_in, 0.5, 1.0)
    order = np.argsort(score, kind="stable")[:256]
    ok = order[state.allowed_many(keys[order], lo)]
    for i in ok[:16].tolist():
        p, s = divmod(int(keys[i]), state.width)
        if state.within_caps(*state.move_cost(p, s, lo)):
            return p, s
    return None


def _best_swap(state: _State, h: int, lo: int, want: float, upper: float):
    """A pair (replica a on h -> lo, replica b on lo -> h) with w(a) - w(b) close to want."""
    wh, kh = state.items(h)
    wl, kl = state.items(lo)
    if not wh or not wl:
        return None
    tries = 0
    for i in range(len(wh) - 1, -1, -1):
        a = wh[i]
        if a <= 0:
            break
        pa, sa = divmod(kh[i], state.width)
        if not state.allowed(pa, sa, lo):
            continue
        tries += 1
        if tries > 24:
            break
        j = bisect.bisect_left(wl, a - want)
        for jj in (j, j - 1, j + 1, j - 2, j + 2):
            if not 0 <= jj < len(wl):
                continue
            bw = wl[jj]
            if not 0 < a - bw <= upper:
                continue
            pb, sb = divmod(kl[jj], state.width)
            if pb == pa or not state.allowed(pb, sb, h):
                continue
            dm1, db1 = state.move_cost(pa, sa, lo)
            dm2, db2 = state.move_cost(pb, sb, h)
            if state.within_caps(dm1 + dm2, db1 + db2):
                return (pa, sa), (pb, sb)
    return None


def _limits(state: _State, band: float, counts: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(upper, lower) accepted load per broker: its target +- ``band`` x the mean.

    In replica counts (``counts``, or weights when no size is known) a broker holds whole replicas,
    so ``ceil(target)`` and ``floor(target)`` are always accepted (the best any plan can do).
    """
    tgt = state.ctgt if counts else state.tgt
    mean = state.count_target if counts else state.target
    hi = tgt + band * mean
    lo = tgt - band * mean
    if counts or state.count_based:
        hi = np.maximum(hi, np.ceil(tgt - 1e-9))
        lo = np.minimum(lo, np.floor(tgt + 1e-9))
    return hi, lo


def _worst_and_partners(state, values, target, hi, lo, stuck, limit=None):
    """The kept broker furthest outside [lo, hi] and the brokers on the other side of their target.

    Returns (pairs, worst): pairs of (sender, receiver) to try, the worst broker in each, or
    (None, None) when every kept broker (not stuck) is within its band.
    """
    live = state.kept & ~stuck
    over = np.where(live, values - hi, -np.inf)
    under = np.where(live, lo - values, -np.inf)
    io, iu = int(np.argmax(over)), int(np.argmax(under))
    if over[io] <= 0 and under[iu] <= 0:
        return None, None
    dev = np.where(state.kept, values - target, 0.0)
    if over[io] >= under[iu]:
        cand = np.nonzero(state.kept & (dev < 0))[0]
        cand = cand[np.argsort(dev[cand], kind="stable")][:limit]
        return [(io, int(b)) for b in cand], io
    cand = np.nonzero(state.kept & (dev > 0))[0]
    cand = cand[np.argsort(-dev[cand], kind="stable")][:limit]
    return [(int(b), iu) for b in cand], iu


def _refine_bytes(state: _State, band: float, max_steps: int) -> None:
    """Step 4a: move (or swap) replicas between brokers above and below their byte targets.

    Each step takes the broker furthest outside ``target +- band x mean`` (over- or under-filled)
    and trades with the brokers furthest on the other side. A trade always narrows the pair's gap
    (the worst deviation of the two shrinks), so the loop ends; trades keeping both brokers in their
    band are preferred. Brokers that find no trade are set aside (``stuck``).
    """
    hi, lo = _limits(state, band)
    tgt = state.tgt
    stuck = np.zeros(len(state.kept), dtype=bool)
    try:
        _refine_bytes_steps(state, hi, lo, tgt, stuck, max_steps)
    finally:
        state.solo_rule = True


def _refine_bytes_steps(state: _State, hi, lo, tgt, stuck, max_steps: int) -> None:
    for _ in range(max_steps):
        pairs, worst = _worst_and_partners(state, state.load, tgt, hi, lo, stuck)
        if pairs is None:
            return
        done = False
        # first trades that keep both brokers in their band; then (whole replicas cannot always
        # land in a narrow band, e.g. equal sizes) any trade that narrows the pair's gap
        tiers = ((False, False), (False, True), (True, False))
        for relaxed, use_swap, solo in [(*t, True) for t in tiers] + [(*t, False) for t in tiers]:
            if not solo and not state.solo.any():
                break
            state.solo_rule = solo  # the RF-1 rule gives way last (bytes come first)
            for h, r in pairs:
                dh, dr = state.load[h] - tgt[h], state.load[r] - tgt[r]
                want = min(dh, -dr)
                upper = dh - dr - 1e-9 * state.target
                if not relaxed:
                    upper = min(upper, hi[r] - state.load[r], state.load[h] - lo[h])
                if upper <= 0:
                    continue
                if not use_swap:
                    got = _best_single(state, h, r, want, upper)
                    if got:
                        state.set_slot(got[0], got[1], r)
                        done = True
                        break
                else:
                    got = _best_swap(state, h, r, want, upper)
                    if got:
                        (pa, sa), (pb, sb) = got
                        state.set_slot(pa, sa, r)
                        state.set_slot(pb, sb, h)
                        done = True
                        break
            if done:
                break
        if not done:
            stuck[worst] = True


def _bytes_ok(state: _State, b: int, delta: float, hi: np.ndarray, lo: np.ndarray) -> bool:
    """Whether broker b may gain ``delta`` weight: it stays in its byte band or gets closer to it."""
    new = state.load[b] + delta
    if lo[b] <= new <= hi[b]:
        return True
    return abs(new - state.tgt[b]) <= abs(state.load[b] - state.tgt[b])


def _exchange(state: _State, h: int, lo: int, k: int, bhi: np.ndarray, blo: np.ndarray) -> bool:
    """Give k small replicas of h to lo and take back one replica of about their total weight.

    Moves k - 1 replicas' worth of count from h to lo while bytes barely change (for brokers whose
    bytes are balanced but whose counts are not: lo holds large partitions, h many small ones).
    """
    ws, ks = state.items(h)
    if not ks:
        return False
    ok = np.nonzero(state.allowed_many(np.array(ks, dtype=np.int64), lo))[0]
    picks, parts, total = [], set(), 0.0
    for i in ok.tolist():
        p, s = divmod(ks[i], state.width)
        if p not in parts:
            picks.append((p, s))
            parts.add(p)
            total += ws[i]
            if len(picks) == k:
                break
    if len(picks) < 2:
        return False
    wl, kl = state.items(lo)
    j = bisect.bisect_left(wl, total)
    for jj in [*range(j, min(j + 40, len(wl))), *range(j - 1, max(j - 10, 0) - 1, -1)]:
        y = wl[jj]
        pb, sb = divmod(kl[jj], state.width)
        if pb in parts or not state.allowed(pb, sb, h):
            continue
        if not (_bytes_ok(state, lo, total - y, bhi, blo) and _bytes_ok(state, h, y - total, bhi, blo)):
            continue
        dm, db = state.move_cost(pb, sb, h)
        for p, s in picks:
            m1, b1 = state.move_cost(p, s, lo)
            dm, db = dm + m1, db + b1
        if not state.within_caps(dm, db):
            return False
        state.set_slot(pb, sb, h)
        for p, s in picks:
            state.set_slot(p, s, lo)
        return True
    return False


def _move_small(state: _State, h: int, r: int, bhi: np.ndarray, blo: np.ndarray) -> bool:
    """Move one of the smallest replicas of h to r within both byte bands (free moves first)."""
    ws, ks = state.items(h)
    if not ks:
        return False
    w = np.array(ws)
    # weights both brokers accept (sorted ascending): r stays in or nears its band, and so does h
    room_r = max(bhi[r] - state.load[r], 2 * (state.tgt[r] - state.load[r]))
    room_h = max(state.load[h] - blo[h], 2 * (state.load[h] - state.tgt[h]))
    n = int(np.searchsorted(w, min(room_r, room_h), side="right"))
    for lo_i, hi_i in ((0, min(n, 128)), (min(n, 128), n)):
        if lo_i >= hi_i:
            continue
        keys = np.array(ks[lo_i:hi_i], dtype=np.int64)
        ok = state.allowed_many(keys, r)
        if not ok.any():
            continue
        # a replica that moved in already moves on (or home) at no extra cost: those first
        home = state.orig.ravel()[keys]
        free = ok & ((home != h) | (home == r))
        for cand in (np.nonzero(free)[0], np.nonzero(ok & ~free)[0]):
            for i in cand[:16].tolist():
                p, s = divmod(int(keys[i]), state.width)
                if state.within_caps(*state.move_cost(p, s, r)):
                    state.set_slot(p, s, r)
                    return True
    return False


def _refine_counts(state: _State, band: float, byte_band: float, max_steps: int) -> None:
    """Step 4b: even out replica counts (both sides of the target) keeping bytes in their band.

    The broker furthest outside ``count target +- band x mean count`` trades with the brokers on
    the other side: one small replica moves, or k small replicas go one way and one replica of the
    same total weight the other way (:func:`_exchange`).
    """
    if state.count_based:
        return
    chi, clo = _limits(state, band, counts=True)
    bhi, blo = _limits(state, byte_band)
    ctgt = state.ctgt
    stuck = np.zeros(len(state.kept), dtype=bool)
    for _ in range(max_steps):
        pairs, worst = _worst_and_partners(state, state.count.astype(np.float64), ctgt, chi, clo, stuck)
        if pairs is None:
            return
        done = False
        for h, r in pairs:
            dh, dr = state.count[h] - ctgt[h], state.count[r] - ctgt[r]
            if dh - dr > 1 + 1e-9 and state.count[r] + 1 <= chi[r] and state.count[h] - 1 >= clo[h]:
                if _move_small(state, h, r, bhi, blo):
                    done = True
                    break
        if not done:
            for h, r in pairs:
                dh, dr = state.count[h] - ctgt[h], state.count[r] - ctgt[r]
                k = int(min(16, max(2, min(dh, -dr) + 1)))
                if dh - dr > k - 1 and _exchange(state, h, r, k, bhi, blo):
                    done = True
                    break
        if not done:
            stuck[worst] = True


def _shed(state: _State, kept: np.ndarray, mandatory: list, home: dict, selector, rounds: int = 3) -> list:
    """Step 2 in rounds: senders pick replicas to give away; empty their slots; return the keys.

    One replica per partition is shed (the others stay as anchors). Replicas of one partition have
    the same weight on every broker, so senders picking similar sizes often pick the same partition;
    the duplicates are dropped and their brokers' remaining excess is shed in the next round, with
    every slot of an already emptied partition excluded.
    """
    width = state.width
    tol = state.tolerance
    optional: list = []
    taken = {k // width for k in mandatory}
    for _ in range(rounds):
        senders = np.nonzero(kept & (state.load > state.tgt + 0.25 * tol * state.target))[0]
        targets = {
            int(b): (float(state.load[b] - state.tgt[b]), float(state.count[b] - state.ctgt[b])) for b in senders
        }
        if not targets:
            break
        excluded = {p * width + s for p in taken for s in range(width)}
        shed = selector(state.weights, state.new, targets, excluded)
        added = 0
        for key in sorted(int(k) for k in shed):
            p, s = divmod(key, width)
            b = int(state.new[p, s])
            if b < 0 or not kept[b] or p in taken:
                continue
            taken.add(p)
            home[key] = b
            state.set_slot(p, s, -1)
            optional.append(key)
            added += 1
        if not added:
            break
    return optional


def _undo_moves(state: _State, byte_band: float, count_band: float) -> int:
    """Step 5: send moved replicas back home when no balance goal needs the move; return how many.

    A replica that left a kept broker ``o`` for ``h`` returns to ``o`` (no copy at all) when the rules
    allow it and both brokers stay within ``target +- byte_band x mean`` in bytes and
    ``count target +- count_band x mean count`` in replicas (or get closer to them). Largest first:
    each undo saves the partition's size in bytes.
    """
    new, orig = state.new, state.orig
    changed = np.nonzero((new != orig) & (orig >= 0) & (new >= 0))
    cand = []
    for p, s in zip(*changed, strict=True):
        p, s = int(p), int(s)
        o = int(orig[p, s])
        if not state.kept[o] or o in new[p] or int(new[p, s]) in orig[p]:
            continue
        cand.append((-float(state.weights[p]), p, s))
    cand.sort()
    bhi, blo = _limits(state, byte_band)
    chi, clo = _limits(state, count_band, counts=True)
    undone = 0
    for negw, p, s in cand:
        w = -negw
        o, h = int(orig[p, s]), int(new[p, s])
        if o in new[p] or not state.allowed(p, s, o):
            continue
        if not (_bytes_ok(state, o, w, bhi, blo) and _bytes_ok(state, h, -w, bhi, blo)):
            continue
        if not state.count_based:
            if state.count[o] + 1 > chi[o] + 1e-9 and state.count[o] + 1 > state.ctgt[o]:
                continue
            if state.count[h] - 1 < clo[h] - 1e-9 and state.count[h] - 1 < state.ctgt[h]:
                continue
        state.set_slot(p, s, o)
        undone += 1
    return undone


def _rack_bound(state: _State, snap: Snapshot) -> dict | None:
    """The balance uneven racks allow (summary.json ``rack_bound``), None without rack information.

    Per rack (see :func:`rack_targets`): kept brokers, the least and most bytes and replicas the
    rack-diversity rule lets it hold, and the per-broker targets the planner aims at; plus the best
    byte and replica-count skews (``1 + max |target / mean - 1|``) those bounds allow. ``binding`` is
    true when some rack cannot reach the mean. ``lower_bound_bytes``: the bytes any plan reaching these
    targets copies (:func:`lower_bound_moved`: drained replicas, the fill of the brokers below their
    targets and the copies the racks force), the same figure as summary.json's ``lower_bound_bytes``.
    Byte fields are None when no size is known.
    """
    byte_racks, count_racks = state.rack_info
    if not byte_racks:
        return None
    names = sorted({r for r in snap.racks if r is not None})
    racks = {}
    for r, (n, lo, hi, load) in byte_racks.items():
        _, clo, chi, cload = count_racks[r]
        racks[names[r]] = {
            "brokers": n,
            "min_bytes": None if state.count_based else int(round(lo)),
            "max_bytes": None if state.count_based else int(round(hi)),
            "target_bytes_per_broker": None if state.count_based else int(round(load / n)),
            "min_replicas": int(round(clo)),
            "max_replicas": int(round(chi)),
            "target_replicas_per_broker": round(float(cload / n), 3),
        }
    kept = state.kept
    bound = 0.0
    if not state.count_based:  # drained = not kept (resolve_request)
        bound = lower_bound_moved(state.sizes, state.orig, kept, ~kept, state.rack_idx, state.tgt)["bytes"]
    byte_skew = 1.0 + float(np.abs(state.tgt[kept] / state.target - 1).max())
    count_skew = 1.0 + float(np.abs(state.ctgt[kept] / state.count_target - 1).max())
    return {
        "racks": racks,
        "byte_skew": None if state.count_based else round(byte_skew, 6),
        "replica_skew": round(count_skew, 6),
        "binding": bool(max(byte_skew, count_skew) > 1 + 1e-6),
        "lower_bound_bytes": None if state.count_based else int(round(bound)),
    }


def plan_replicas(snap: Snapshot, opts: PlanOptions, shed_selector: ShedSelector | None = None) -> Plan:
    """Plan the replica placement (steps 1-4 above); leaders are balanced by :mod:`planner.leaders`.

    Args:
        snap: the validated snapshot.
        opts: mode, brokers, caps, tolerance.
        shed_selector: solver for the per-broker shedding sub-problems; default
            :func:`local_shed_selector` (the Spark driver passes a distributed one).

    Returns a :class:`Plan` whose replica columns keep their positions (a moved replica takes the
    slot of the one it replaces). Raises PlanInputError as :func:`resolve_request` does.
    """
    kept, drained = resolve_request(snap, opts)
    state = _State(snap, kept, opts)
    notes: list = []
    if opts.mode == "scale-out":
        busy = [
            int(snap.broker_ids[snap.broker_index(b)])
            for b in opts.brokers
            if state.load[snap.broker_index(b)] > 0.5 * state.target
        ]
        if busy:
            notes.append(f"scale-out brokers {busy} already hold more than half the mean load")
    if state.count_based:
        notes.append("no partition sizes known: balancing replica counts (and leaders) instead of bytes")
    mandatory = _mandatory(state, drained, crowded_too=not opts.drain_only)
    home = {k: -1 for k in mandatory}
    band = state.tolerance / 2
    if opts.drain_only:
        _assign(state, mandatory, set(mandatory), home, notes)
        notes.append(f"drain only: {len(mandatory)} replicas leave the drained brokers; the kept brokers "
                     "exchange nothing")
    else:
        optional = _shed(state, kept, mandatory, home, shed_selector or local_shed_selector)
        _assign(state, mandatory + optional, set(mandatory), home, notes)
        steps = 4 * len(snap.rf) + 1000
        _refine_bytes(state, band, steps)
        for _ in range(2):
            _refine_counts(state, 0.03, band, steps)
            _refine_bytes(state, band, steps)
        _undo_moves(state, band / 2, 0.03)
    rack_bound = _rack_bound(state, snap)
    t = state.target
    skew = 1.0 + float(np.abs(state.load[kept] / t - 1).max())
    best = 1.0 + float(np.abs(state.tgt[kept] / t - 1).max())
    # reached: every kept broker within its target +- tolerance x mean (whole replicas: ceil/floor)
    hi, lo = _limits(state, state.tolerance)
    if ((state.load > hi + 1e-9) | (state.load < lo - 1e-9))[kept].any():
        what = "replica-count balance (sizes unknown)" if state.count_based else "byte balance"
        why = [f"largest partition {state.weights.max() / t:.3f} of the mean broker load"]
        if rack_bound and rack_bound["binding"]:
            why.append(f"uneven racks allow at best {best:.3f}")
        if opts.max_moves is not None or opts.max_bytes is not None:
            why.append("caps on moves or bytes")
        if opts.drain_only:
            why.append("drain only: the kept brokers keep their replicas")
        notes.append(f"{what} not reached: skew {skew:.3f} ({'; '.join(why)})")
    return Plan(
        snapshot=snap,
        kept=kept,
        drained=drained,
        replicas=state.new,
        notes=notes,
        weighting="replica-count (no partition sizes known)" if state.count_based else "bytes",
        rack_bound=rack_bound,
    )
