"""The planner's building blocks: shedding sub-problem, leader balancing, waves, Kafka's assignor."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from planner.balance import select_shed
from planner.leaders import balance_leaders, order_replicas
from planner.synthetic import kafka_default_assignment
from planner.waves import plan_waves


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_select_shed_hits_the_excess_with_the_requested_count(seed):
    rng = np.random.default_rng(seed)
    w = rng.lognormal(0, 1.5, size=400)
    keys = rng.permutation(10_000)[:400].astype(np.int64)
    excess = 0.2 * w.sum()
    got = select_shed(w, keys, excess, excess_count=80)
    chosen = np.isin(keys, got)
    assert len(set(got.tolist())) == len(got)
    assert w[chosen].sum() <= excess + 1e-9
    assert w[chosen].sum() >= 0.99 * excess
    assert abs(len(got) - 80) <= 1


def test_select_shed_without_count_takes_few_large_replicas():
    w = np.array([1.0, 2.0, 3.0, 50.0, 60.0])
    keys = np.arange(5, dtype=np.int64)
    got = sorted(select_shed(w, keys, excess=62.5, excess_count=-3).tolist())
    assert got == [1, 4]  # 60 + 2 = 62 <= 62.5
    assert select_shed(w, keys, excess=0.0, excess_count=5).size == 0


def test_select_shed_is_independent_of_input_order():
    rng = np.random.default_rng(5)
    w = np.round(rng.lognormal(0, 1, size=200), 1)  # many ties
    keys = np.arange(200, dtype=np.int64)
    perm = rng.permutation(200)
    a = sorted(select_shed(w, keys, 40.0, 20).tolist())
    b = sorted(select_shed(w[perm], keys[perm], 40.0, 20).tolist())
    assert a == b


def led_by_zero(share: float, nb: int = 7, npart: int = 200) -> np.ndarray:
    """Replicas (npart, 3) over ``nb`` brokers where broker 0 leads about ``share`` of the partitions it holds."""
    rng = np.random.default_rng(3)
    rows = []
    for _ in range(npart):
        reps = [int(b) for b in rng.choice(nb, size=3, replace=False)]
        if 0 in reps and rng.random() < share:
            reps.remove(0)
            reps.insert(0, 0)
        rows.append(reps)
    return np.array(rows, dtype=np.int32)


def test_balance_leaders_reaches_the_cap_and_keeps_replica_sets():
    nb, npart = 7, 200
    orig = led_by_zero(0.9)  # broker 0 leads nearly every partition it holds
    kept = np.ones(nb, dtype=bool)
    assert Counter(orig[:, 0].tolist())[0] > math.ceil(npart / nb)
    lead = balance_leaders(orig, orig, kept)
    assert all(lead[p] in orig[p] for p in range(npart))
    assert max(Counter(lead.tolist()).values()) <= math.ceil(npart / nb)
    final = order_replicas(orig, lead)
    assert (final[:, 0] == lead).all()
    assert all(sorted(final[p]) == sorted(orig[p]) for p in range(npart))
    # followers keep their relative order
    p = int(np.nonzero(final[:, 0] != orig[:, 0])[0][0])
    assert [b for b in final[p] if b != lead[p]] == [b for b in orig[p] if b != lead[p]]


def test_balance_leaders_shifts_along_a_chain():
    # broker 0 leads 3 partitions shared only with broker 1, which is at the cap already; broker 2
    # leads 1 and shares partitions only with broker 1: the fix is 0 -> 1 -> 2
    orig = np.array([[0, 1], [0, 1], [0, 1], [1, 2], [1, 2], [2, 1]], dtype=np.int32)
    lead = balance_leaders(orig, orig, np.ones(3, dtype=bool))
    assert sorted(Counter(lead.tolist()).values()) == [2, 2, 2]


def test_balance_leaders_leaves_frozen_partitions_led_as_they_are():
    # broker 0 leads every partition it holds; only the partitions with an odd index may change leader
    nb, npart = 7, 200
    orig = led_by_zero(1.0)
    frozen = np.arange(npart) % 2 == 0
    lead = balance_leaders(orig, orig, np.ones(nb, dtype=bool), frozen=frozen)
    assert (lead[frozen] == orig[frozen, 0]).all()
    changed = np.nonzero(lead != orig[:, 0])[0]
    assert len(changed) > 0 and not frozen[changed].any()
    # broker 0 gave up leadership where it could: fewer than before, none of it on frozen partitions
    assert Counter(lead.tolist())[0] < Counter(orig[:, 0].tolist())[0]


def test_waves_limits_and_order():
    orig = np.array([[0, 1], [1, 2], [2, 0], [0, 1], [1, 2]], dtype=np.int32)
    new = np.array([[3, 1], [1, 3], [2, 3], [1, 0], [3, 2]], dtype=np.int32)
    sizes = np.array([50, 40, 30, 999, 20], dtype=np.int64)  # partition 3 is a pure reorder
    waves = plan_waves(orig, new, sizes, wave_bytes=60)
    assert sorted(p for w in waves for p in w) == [0, 1, 2, 3, 4]
    assert 3 in waves[0]
    for w in waves:
        moved = [p for p in w if p != 3]
        assert len(moved) == 1 or sum(int(sizes[p]) for p in moved) <= 60
    assert len({i for i, w in enumerate(waves) for p in w if p in (0, 1)}) == 2  # two largest apart
    per_broker = plan_waves(orig, new, sizes, wave_moves_per_broker=2)
    for w in per_broker:
        touches = Counter()
        for p in w:
            touches.update(set(new[p]) ^ set(orig[p]))
        assert max(touches.values(), default=0) <= 2 or len(w) == 1


def test_kafka_default_assignment_is_rack_aware_and_round_robin():
    rng = np.random.default_rng(0)
    racks = {b: "abc"[b % 3] for b in range(9)}
    lay = kafka_default_assignment(list(range(9)), racks, 90, 3, rng)
    assert all(len({racks[b] for b in reps}) == 3 for reps in lay)
    leaders = Counter(reps[0] for reps in lay)
    assert set(leaders.values()) == {10}
    plain = kafka_default_assignment(list(range(5)), None, 10, 2, rng, start=0, shift=0)
    assert plain[:5] == [[0, 1], [1, 2], [2, 3], [3, 4], [4, 0]]
    assert plain[5] == [0, 2]  # after a full round the follower shift grows by one
