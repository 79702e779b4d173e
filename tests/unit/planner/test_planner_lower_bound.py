"""The lower bound on bytes copied (summary.json ``lower_bound_bytes``) and plans that stay close to it.

The bound (``planner.balance.lower_bound_moved``) must be a true lower bound: no plan reaching the
targets copies less. With uneven racks it includes the copies the rack-diversity rule forces on top of
the drained replicas and the fill of the brokers below their targets.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from planner.balance import lower_bound_moved, rack_targets
from planner.snapshot import build_snapshot
from planner.synthetic import kafka_default_assignment
from planner_checks import check_rules

RACKED = {"racks": 3, "rf_choices": (2, 3)}


def _matrix(rows):
    width = max(len(r) for r in rows)
    return np.array([list(r) + [-1] * (width - len(r)) for r in rows], dtype=np.int32)


def _layouts(brokers, rack, rf):
    """Every replica set of size rf on ``brokers`` that keeps rack diversity (min(rf, racks) racks)."""
    nracks = len({int(rack[b]) for b in brokers})
    return [c for c in itertools.combinations(brokers, rf) if len({int(rack[b]) for b in c}) >= min(rf, nracks)]


def test_lower_bound_without_racks_is_drained_bytes_or_fill():
    # brokers 0-3, no racks; drain 3 (6 bytes); mean after 20 / 3: broker 0 (10) is above it
    replicas = _matrix([[0, 3], [1, 2], [0, 3], [0, 1]])
    sizes = np.array([2, 4, 4, 4])
    kept = np.array([True, True, True, False])
    got = lower_bound_moved(sizes, replicas, kept, ~kept, np.full(4, -1, dtype=np.int32))
    mean = 28 / 3
    fill = (mean - 8) + (mean - 4)  # brokers 1 and 2
    assert got["drained_bytes"] == 6
    assert got["fill_bytes"] == pytest.approx(fill)
    assert got["bytes"] == pytest.approx(max(6, fill))
    assert got["rack_forced_bytes"] == 0


def test_lower_bound_counts_the_copies_uneven_racks_force():
    # racks: a = {0, 1}, b = {2}, c = {3, 4}; drain broker 0. Partitions (replicas, size):
    # P [0, 3] 4, Q [1, 2] 3, R [1, 4] 1. Mean after 16 / 4 = 4; before: 1: 4, 2: 3, 3: 4, 4: 1.
    # Drained bytes = fill = 4, but P (partner in rack c) cannot enter rack c, where broker 4 needs
    # 3: P goes to rack a or b, which then push 3 bytes into rack c. Best plan: P -> 2, Q's replica
    # 2 -> 4 (7 bytes); P -> 1 would need Q and R to leave broker 1 (8 bytes).
    rack = np.array([0, 0, 1, 2, 2], dtype=np.int32)
    kept = np.array([False, True, True, True, True])
    replicas = _matrix([[0, 3], [1, 2], [1, 4]])
    sizes = np.array([4, 3, 1])
    got = lower_bound_moved(sizes, replicas, kept, ~kept, rack)
    assert got["drained_bytes"] == 4 and got["fill_bytes"] == pytest.approx(4)
    assert got["rack_forced_bytes"] == pytest.approx(3)
    assert got["bytes"] == pytest.approx(7)
    # the same by brute force: the cheapest plan that puts every kept broker at 4
    before = [[0, 3], [1, 2], [1, 4]]
    costs = []
    for choice in itertools.product(*[_layouts([1, 2, 3, 4], rack, 2)] * 3):
        load = np.zeros(5)
        for p, c in enumerate(choice):
            load[list(c)] += sizes[p]
        if load[1:].tolist() == [4, 4, 4, 4]:
            costs.append(sum(int(sizes[p]) * len(set(c) - set(before[p])) for p, c in enumerate(choice)))
    assert min(costs) == 7


@pytest.mark.parametrize("seed", range(4))
def test_lower_bound_is_below_every_plan_and_exact_for_a_pure_drain(seed):
    # small random clusters (2-3 racks, RF 1-3, some brokers drained): every rule-keeping final
    # assignment copies at least the bound computed for its own final loads as targets
    rng = np.random.default_rng(seed)
    checked = 0
    while checked < 6:
        nb = int(rng.integers(4, 7))
        rack = rng.integers(0, 3, size=nb).astype(np.int32)
        kept = np.ones(nb, dtype=bool)
        kept[rng.choice(nb, int(rng.integers(0, 3)), replace=False)] = False
        kb = np.nonzero(kept)[0].tolist()
        if len(set(rack.tolist())) < 2 or len(kb) < 3:
            continue
        rows, sizes, finals = [], [], []
        for _ in range(int(rng.integers(2, 5))):
            rf = int(rng.integers(1, 4))
            start = _layouts(list(range(nb)), rack, rf)
            rows.append(start[int(rng.integers(len(start)))])
            sizes.append(int(rng.integers(1, 6)))
            finals.append(_layouts(kb, rack, rf))
        if not all(finals):
            continue
        replicas, sizes = _matrix(rows), np.array(sizes)
        best: dict = {}
        for choice in itertools.product(*finals):
            load = np.zeros(nb)
            moved = 0
            for p, c in enumerate(choice):
                load[list(c)] += sizes[p]
                moved += int(sizes[p]) * len(set(c) - set(rows[p]))
            key = tuple(load.tolist())
            best[key] = min(best.get(key, moved), moved)
        for load, moved in best.items():
            got = lower_bound_moved(sizes, replicas, kept, ~kept, rack, np.array(load))
            assert got["bytes"] <= moved + 1e-9, (rows, sizes.tolist(), rack.tolist(), kept.tolist(), load)
        # a plan moving only the drained replicas (partners stay) meets the bound exactly
        pure = []
        for p, row in enumerate(rows):
            stay = [b for b in row if kept[b]]
            fits = [c for c in finals[p] if set(stay) <= set(c)]
            if not fits:
                break
            pure.append(fits[0])
        else:
            load = np.zeros(nb)
            for p, c in enumerate(pure):
                load[list(c)] += sizes[p]
            got = lower_bound_moved(sizes, replicas, kept, ~kept, rack, load)
            drained = sum(int(sizes[p]) * sum(not kept[b] for b in row) for p, row in enumerate(rows))
            assert got["bytes"] == pytest.approx(drained)
        checked += 1


def test_lower_bound_uses_the_rack_targets_when_racks_pin_the_bytes():
    # RF 3 in 3 racks: each rack holds one replica of everything; rack a keeps 1 of its 2 brokers,
    # so broker 1 must end with the whole rack's share (its target), not with the mean
    rack = np.array([0, 0, 1, 2], dtype=np.int32)
    kept = np.array([False, True, True, True])
    replicas = _matrix([[0, 2, 3], [1, 2, 3], [0, 2, 3]])
    sizes = np.array([5, 3, 2])
    tgt, _ = rack_targets(sizes.astype(float), replicas, kept, rack)
    assert tgt.tolist() == pytest.approx([0, 10, 10, 10])
    got = lower_bound_moved(sizes, replicas, kept, ~kept, rack)
    assert got["bytes"] == pytest.approx(7)  # the two drained replicas, both into broker 1
    assert got["fill_bytes"] == pytest.approx(7) and got["rack_forced_bytes"] == 0


def test_decommission_of_an_otherwise_balanced_cluster_moves_only_the_drained_replicas(write, plan):
    # topics of 6 equal partitions on 6 brokers (Kafka's layout): every broker holds the same bytes,
    # replicas and leaders. Then a fifth of the replicas were put on brokers 0-2 (same rack as where
    # they were): draining 0-2 needs exactly those replicas moved, nothing else
    rng = np.random.default_rng(11)
    racks = {b: "abc"[b % 3] for b in range(9)}
    rows, recs = [], []
    for t in range(60):
        lay = kafka_default_assignment([3, 4, 5, 6, 7, 8], racks, 6, int(rng.choice((2, 3))), rng)
        size = int(1e8 * rng.lognormal(0, 1))
        for p, reps in enumerate(lay):
            rows.append((f"t{t:03d}", p, list(reps), size))
    for i in rng.permutation(len(rows))[: len(rows) // 5].tolist():
        reps = rows[i][2]
        s = int(rng.integers(len(reps)))
        reps[s] = reps[s] % 3
    recs = [{"topic": t, "partition": p, "replicas": r, "size_bytes": z} for t, p, r, z in rows]
    brokers = [{"id": b, "rack": racks[b]} for b in range(9)]
    code, c, err = plan(write(brokers, recs), "--mode", "decommission", "--brokers", "0,1,2")
    assert code == 0, err
    kept = set(range(3, 9))
    check_rules(c, kept)
    for key, reps in c.plan.items():
        before = c.before[key]
        assert set(before) - set(reps) <= {0, 1, 2}, (key, before, reps)  # only drained replicas left
    s = c.summary
    assert s["bytes_moved"] == s["lower_bound_bytes"] == s["lower_bound_parts"]["drained_bytes"]
    assert c.skew("bytes", kept) <= 1.03
    assert c.skew("replicas", kept) <= 1.05
    assert c.skew("leaders", kept) <= 1.05


def test_decommission_leaving_uneven_racks_moves_close_to_the_rack_aware_bound(cluster, plan):
    # the benchmark's "decommission 27-2": racks of 8, 8 and 9 brokers, RF 2-3. Rack c must grow by
    # two brokers' share but only RF-2 replicas whose partner is not in c may enter it from the
    # drained brokers: the rest of its growth is copied on top of the drain (rack_forced_bytes)
    snap = cluster(n_brokers=27, n_partitions=7000, seed=2, **RACKED)
    code, c, err = plan(snap, "--mode", "decommission", "--brokers", "0,13")
    assert code == 0, err
    kept = set(range(27)) - {0, 13}
    check_rules(c, kept)
    s = c.summary
    parts = s["lower_bound_parts"]
    assert parts["rack_forced_bytes"] > 0.05 * parts["drained_bytes"]
    assert s["bytes_moved"] <= 1.10 * s["lower_bound_bytes"]
    assert c.skew("bytes", kept) <= 1.03
    assert c.skew("replicas", kept) <= 1.05
    assert c.skew("leaders", kept) <= 1.05


def test_undo_pass_sends_a_move_no_goal_needs_back_home():
    # 3 brokers, no racks, 60 equal partitions RF 2 (balanced): a small replica moved from broker 0
    # to broker 1 keeps both within their bands, so the undo pass returns it (nothing copied)
    from planner.balance import PlanOptions, _State, _undo_moves

    rows = [[p % 3, (p + 1) % 3] for p in range(60)]
    snap = build_snapshot(
        np.arange(3), [None] * 3, ["t"] * 60, list(range(60)), [1000] * 59 + [10], rows
    )
    state = _State(snap, np.ones(3, dtype=bool), PlanOptions(mode="rebalance"))
    p = 59  # replicas [2, 0]: move the one on broker 0 to broker 1
    state.set_slot(p, 1, 1)
    assert state.bytes == 10
    assert _undo_moves(state, 0.005, 0.03) == 1
    assert state.bytes == 0 and state.moves == 0
    assert (state.new == snap.replicas).all()
