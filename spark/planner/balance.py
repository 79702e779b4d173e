"""Replica placement: move the least data that reaches balance, keeping Kafka's placement rules.

Rules kept by every plan (Kafka's, see DESIGN.md and the issue):

- replicas of a partition stay on distinct brokers, the replication factor is unchanged, and only
  kept brokers (all but the drained ones) hold replicas;
- rack diversity: a partition must span ``min(RF, racks among kept brokers)`` racks (the rule of
  Kafka's rack-aware assignment); a partition spanning more racks than the kept brokers have is bad
  input;
- the caps ``max_moves`` (replica moves) and ``max_bytes`` (bytes copied) hold; draining is
  mandatory, so a decommission over the caps is bad input.

Algorithm (all steps work on the weights ``w``: partition size in bytes, or 1 per replica when no
size is known):

1. mandatory moves: replicas on drained brokers, and the extra replicas of a partition crowded into
   one rack, leave their broker (their slot is emptied);
2. shedding (one independent sub-problem per overloaded broker, :func:`select_shed`): a broker above
   the mean ``T`` picks replicas whose weights add up to its excess ``load - T`` and whose count is
   close to its count excess, so that receivers get a representative mix of sizes;
3. assignment (global, sequential): emptied slots, largest first (mandatory first under caps), go to the
   allowed receiver with the most remaining deficit per missing replica, never far past ``T``;
   optional replicas that fit nowhere go back home (no move);
4. refinement (global, sequential): the most loaded broker hands a replica of about the right size
   to an underloaded one (or swaps a large one for a small one) until the byte maximum is within
   ``tolerance / 2`` of the mean, then the same for replica counts (moving small replicas, or
   trading k small replicas for one replica of the same total weight).

Only brokers above the mean send and only brokers below it receive, so the bytes moved stay close to
the lower bound ``sum over kept brokers of max(0, T - load_before)``.
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
        tolerance: accepted per-broker byte imbalance, max/mean - 1 (default 0.02); the planner aims
            at half of it.
    """

    mode: str
    brokers: tuple = ()
    max_moves: int | None = None
    max_bytes: int | None = None
    tolerance: float = 0.02


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
    """

    snapshot: Snapshot
    kept: np.ndarray
    drained: np.ndarray
    replicas: np.ndarray
    notes: list = field(default_factory=list)


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
    decommission must move.
    """
    if opts.mode not in MODES:
        raise PlanInputError(f"unknown mode {opts.mode!r}; expected one of {', '.join(MODES)}")
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
        self.tolerance = opts.tolerance
        self.max_moves = opts.max_moves
        self.max_bytes = opts.max_bytes
        self.moves = 0
        self.bytes = 0
        self.lists: dict[int, tuple[list, list]] = {}

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
                if len(set(oracks.tolist())) < self.needed[p]:
                    mask &= ~np.isin(self.rack_idx, oracks)
        return mask

    def allowed(self, p: int, s: int, b: int) -> bool:
        if not self.kept[b]:
            return False
        row = self.new[p]
        others = [int(x) for i, x in enumerate(row) if i != s and x >= 0]
        if b in others:
            return False
        if self.rack_aware:
            oracks = {int(self.rack_idx[x]) for x in others}
            if len(oracks) < self.needed[p] and int(self.rack_idx[b]) in oracks:
                return False
        return True

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
            self._list_remove(old, key)
        self.new[p, s] = b
        if b >= 0:
            self.load[b] += w
            self.count[b] += 1
            self._list_add(b, key)


def _mandatory(state: _State, drained: np.ndarray) -> list:
    """Empty the slots on drained brokers and the rack-crowded slots; return their keys."""
    new = state.new
    valid = new >= 0
    on_drained = valid & drained[np.maximum(new, 0)]
    keys = []
    for p, s in zip(*np.nonzero(on_drained), strict=True):
        state.set_slot(int(p), int(s), -1)
        keys.append(int(p) * state.width + int(s))
    if state.rack_aware:
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
    t = state.target
    slack = 0.25 * state.tolerance * t
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
        room = t - state.load
        need = state.count_target - state.count
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
    """A replica on h, weight <= upper and closest to want, that broker lo may take."""
    ws, ks = state.items(h)
    if not ws:
        return None
    j = bisect.bisect_right(ws, want)
    cands = list(range(j - 1, max(j - 48, 0) - 1, -1))
    k = j
    while k < len(ws) and ws[k] <= upper and k < j + 16:
        cands.append(k)
        k += 1
    # a replica that already moved in (not on h before the plan) moves on at no extra cost
    orig = state.orig.ravel()
    cands.sort(key=lambda i: abs(ws[i] - want) * (0.5 if orig[ks[i]] != h else 1.0))
    for i in cands:
        if ws[i] <= 0 or ws[i] > upper:
            continue
        p, s = divmod(ks[i], state.width)
        if state.allowed(p, s, lo) and state.within_caps(*state.move_cost(p, s, lo)):
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


def _refine_bytes(state: _State, band: float, max_steps: int) -> None:
    """Step 4a: move (or swap) replicas from the most to the least loaded brokers."""
    t = state.target
    limit = t * (1 + band)
    if state.count_based:  # whole replicas: the best reachable maximum is ceil(mean)
        limit = max(limit, math.ceil(t))
    stuck = np.zeros(len(state.kept), dtype=bool)
    for _ in range(max_steps):
        load = np.where(state.kept & ~stuck, state.load, -np.inf)
        h = int(np.argmax(load))
        if load[h] <= limit:
            return
        receivers = np.nonzero(state.kept & (state.load < t))[0]
        receivers = receivers[np.argsort(state.load[receivers], kind="stable")][:12]
        done = False
        for lo in receivers.tolist():
            want = min(state.load[h] - t, t - state.load[lo])
            upper = min(state.load[h] - state.load[lo], limit - state.load[lo])
            if upper <= 0:
                continue
            got = _best_single(state, h, lo, want, upper)
            if got:
                state.set_slot(got[0], got[1], lo)
                done = True
                break
        if not done:
            for lo in receivers.tolist():
                want = min(state.load[h] - t, t - state.load[lo])
                upper = min(state.load[h] - state.load[lo], limit - state.load[lo])
                got = _best_swap(state, h, lo, want, upper) if upper > 0 else None
                if got:
                    (pa, sa), (pb, sb) = got
                    state.set_slot(pa, sa, lo)
                    state.set_slot(pb, sb, h)
                    done = True
                    break
        if not done:
            stuck[h] = True


def _exchange(state: _State, h: int, lo: int, k: int, byte_limit: float) -> bool:
    """Give k small replicas of h to lo and take back one replica of about their total weight.

    Moves k - 1 replicas' worth of count from h to lo while bytes barely change (for brokers whose
    bytes are balanced but whose counts are not: lo holds large partitions, h many small ones).
    """
    ws, ks = state.items(h)
    picks, parts, total = [], set(), 0.0
    for i in range(min(len(ws), 4 * k + 16)):
        p, s = divmod(ks[i], state.width)
        if p not in parts and state.allowed(p, s, lo):
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
        if state.load[lo] + total - y > byte_limit or state.load[h] - total + y > max(
            byte_limit, state.load[h]
        ):
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


def _refine_counts(state: _State, band: float, byte_band: float, max_steps: int) -> None:
    """Step 4b: move the smallest replicas from the fullest to the emptiest brokers (by count)."""
    c = state.count_target
    limit = max(c * (1 + band), math.ceil(c))
    byte_limit = state.target * (1 + byte_band)
    if state.count_based:
        return
    stuck = np.zeros(len(state.kept), dtype=bool)
    for _ in range(max_steps):
        cnt = np.where(state.kept & ~stuck, state.count, -1)
        h = int(np.argmax(cnt))
        if cnt[h] <= limit:
            return
        receivers = np.nonzero(state.kept & (state.count < math.floor(c)))[0]
        receivers = receivers[np.argsort(state.count[receivers], kind="stable")][:12]
        ws, ks = state.items(h)
        done = False
        for lo in receivers.tolist():
            room = byte_limit - state.load[lo]
            for i in range(min(len(ws), 64)):
                if ws[i] > room:
                    break
                p, s = divmod(ks[i], state.width)
                if state.allowed(p, s, lo) and state.within_caps(*state.move_cost(p, s, lo)):
                    state.set_slot(p, s, lo)
                    done = True
                    break
            if done:
                break
        if not done:
            for lo in receivers.tolist():
                k = int(min(16, max(2, min(state.count[h] - c, c - state.count[lo]) + 1)))
                if _exchange(state, h, lo, k, byte_limit):
                    done = True
                    break
        if not done:
            stuck[h] = True


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
    mandatory = _mandatory(state, drained)
    home = {k: -1 for k in mandatory}
    t, c = state.target, state.count_target
    senders = np.nonzero(kept & (state.load > t * (1 + state.tolerance / 4)))[0]
    targets = {int(b): (float(state.load[b] - t), float(state.count[b] - c)) for b in senders}
    selector = shed_selector or local_shed_selector
    shed = selector(state.weights, state.new, targets, set(mandatory)) if targets else []
    optional = []
    shed_parts: set = set()
    for key in sorted(int(k) for k in shed):
        p, s = divmod(key, state.width)
        b = int(state.new[p, s])
        if b < 0 or not kept[b] or p in shed_parts:
            continue
        shed_parts.add(p)
        home[key] = b
        state.set_slot(p, s, -1)
        optional.append(key)
    _assign(state, mandatory + optional, set(mandatory), home, notes)
    steps = 4 * len(snap.rf) + 1000
    band = state.tolerance / 2
    _refine_bytes(state, band, steps)
    _refine_counts(state, 0.03, band, steps)
    _refine_bytes(state, band, steps)
    reachable = t * (1 + state.tolerance)
    if state.count_based:
        reachable = max(reachable, math.ceil(t))
    if state.load[kept].max() > reachable:
        what = "replica-count balance (sizes unknown)" if state.count_based else "byte balance"
        why = [f"largest partition {state.weights.max() / t:.3f} of the mean broker load"]
        if state.rack_aware:
            per_rack = {}
            for b in np.nonzero(kept)[0].tolist():
                name = snap.racks[b]
                per_rack[name] = per_rack.get(name, 0) + 1
            if len(set(per_rack.values())) > 1:
                why.append(f"kept brokers per rack {dict(sorted(per_rack.items()))} are uneven")
        notes.append(f"{what} not reached: max/mean {state.load[kept].max() / t:.3f} ({'; '.join(why)})")
    return Plan(snapshot=snap, kept=kept, drained=drained, replicas=state.new, notes=notes)
