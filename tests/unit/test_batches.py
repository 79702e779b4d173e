"""Batched rolling restarts: the joint rule (can_stop_together), the greedy planner, the disjoint reference.

Clusters are built the way tests/unit/test_health.py builds them (Broker / Partition / ClusterState), plus
a synthetic generator for rack-aware (one replica per rack) and rack-unaware (random) placements.
"""

import random

import pytest
from kafka_ops.batches import BATCH_BY, Batch, can_stop_together, disjoint_batches, plan_batches
from kafka_ops.cluster import Broker, ClusterState, Partition
from kafka_ops.health import restart_blockers
from kafka_ops.restart_plan import restart_order


def p(topic, partition, replicas, isr=None, leader=None):
    isr = replicas if isr is None else isr
    lead = leader if leader is not None else (isr[0] if isr else -1)
    return Partition(topic, partition, lead, tuple(replicas), tuple(isr))


def state_of(n_brokers, *partitions, controller=-1, racks=None, **kwargs):
    brokers = tuple(Broker(b, f"h{b}", 9092, None if racks is None else racks[b]) for b in range(n_brokers))
    return ClusterState(brokers=brokers, partitions=tuple(partitions), controller_id=controller, **kwargs)


def synthetic(n_brokers, n_racks, n_partitions, rf, min_isr, controller, seed, rack_aware=True):
    """Brokers 0..n-1 on racks ``r<b % n_racks>``; RF ``rf``, all in sync, led by the first replica.

    Rack-aware: each partition's replicas on ``rf`` different racks (rf <= n_racks), one broker per rack
    picked at random; else ``rf`` random brokers.
    """
    rng = random.Random(seed)
    by_rack = [[b for b in range(n_brokers) if b % n_racks == r] for r in range(n_racks)]
    parts = []
    for i in range(n_partitions):
        if rack_aware:
            replicas = [rng.choice(by_rack[r]) for r in rng.sample(range(n_racks), rf)]
        else:
            replicas = rng.sample(range(n_brokers), rf)
        parts.append(p(f"t{i % 10}", i // 10, replicas))
    racks = {b: f"r{b % n_racks}" for b in range(n_brokers)}
    return state_of(n_brokers, *parts, controller=controller, racks=racks, default_min_insync=min_isr)


def ids(batches):
    return [b.broker_ids for b in batches]


# -- Batch -------------------------------------------------------------------------------------------


def test_batch_label_and_tuples():
    assert Batch((2,)).label == "broker 2"
    assert Batch((0, 3, 6)).label == "brokers 0, 3, 6"
    b = Batch([1, 2], ["x"])
    assert b.broker_ids == (1, 2) and b.reasons == ("x",)
    assert BATCH_BY == ("none", "rack")


# -- serial ------------------------------------------------------------------------------------------


def test_max_parallel_1_is_the_serial_roll():
    state = synthetic(9, 3, 300, 3, 1, controller=4, seed=3)
    order = restart_order(state.broker_ids, 4)
    batches = plan_batches(state, order)
    assert ids(batches) == [(b,) for b in order]
    assert [b.reasons for b in batches[:-1]] == [()] * 8
    assert batches[-1].reasons == ("broker 4 alone: it is the controller",)
    # a subset in the caller's order, unknown controller: untouched
    assert ids(plan_batches(synthetic(6, 3, 60, 3, 2, -1, seed=1), [5, 0, 3], max_parallel=1)) == [(5,), (0,), (3,)]


# -- the rack-aware cluster of the brief -------------------------------------------------------------


@pytest.fixture(scope="module")
def rack_cluster():
    """30 brokers, 3 racks (r0, r1, r2 = broker id % 3), RF 3 one replica per rack, min ISR 2, 3,000
    partitions all in sync, controller 7 (rack r1)."""
    return synthetic(30, 3, 3000, 3, 2, controller=7, seed=42)


def test_rack_batches_on_a_rack_aware_cluster(rack_cluster):
    order = restart_order(rack_cluster.broker_ids, 7)
    batches = plan_batches(rack_cluster, order, max_parallel=30, batch_by="rack")
    # three batches, one per rack: the controller's rack goes last, the controller last in it
    assert ids(batches) == [
        tuple(range(0, 30, 3)),
        tuple(range(2, 30, 3)),
        (*(b for b in range(1, 30, 3) if b != 7), 7),
    ]
    assert batches[0].reasons == ("brokers of rack r0 only (batch_by=rack)",)
    assert batches[-1].reasons == (
        "brokers of rack r1 only (batch_by=rack)",
        "broker 7 last, with [1, 4, 10, 13, 16, 19, 22, 25, 28]: it is the controller; it stops once they are gone "
        "(one controller move, at the end)",
    )
    assert batches[0].label == "brokers 0, 3, 6, 9, 12, 15, 18, 21, 24, 27"
    for batch in batches:
        assert can_stop_together(rack_cluster, batch.broker_ids) == []
    # without rack batching the joint rule finds the same batches: two brokers of different racks share
    # a partition (RF 3 in sync, min ISR 2: stopping two of its replicas leaves one in sync)
    unbatched = plan_batches(rack_cluster, order, max_parallel=30)
    assert ids(unbatched) == ids(batches)
    assert any("would keep isr [" in r and "below min.insync.replicas 2" in r for r in unbatched[1].reasons)
    # the controller tried the later batches first: rack r2's refused it on the joint rule, rack r1's took it
    assert any(r.startswith("broker 7 not with [2, 5, ") for r in unbatched[-1].reasons)



def test_at_most_one_kraft_voter_a_batch_and_the_quorum_leader_last(rack_cluster):
    """Combined nodes 0, 3 (rack r0) and 7 (r1, the quorum leader, passed as the state's controller): rack r0 splits
    so 0 and 3 go in different batches; every other broker keeps its rack batch; the leader goes last."""
    order = restart_order(rack_cluster.broker_ids, 7)
    batches = plan_batches(rack_cluster, order, max_parallel=30, batch_by="rack", voters=[0, 3, 7])
    for batch in batches:
        assert len({0, 3, 7} & set(batch.broker_ids)) <= 1, batch
        assert len({b % 3 for b in batch.broker_ids}) == 1, "one rack a batch"
        assert can_stop_together(rack_cluster, batch.broker_ids) == []
    assert sorted(b for batch in batches for b in batch.broker_ids) == list(range(30))
    assert batches[-1].broker_ids[-1] == 7
    assert ids(batches)[0] == (0, *range(6, 30, 3)) and ids(batches)[2] == (3,), "r0 splits; r2 in between"
    assert "broker 3 not with [0]: both are KRaft voters (one quorum member down at a time)" in batches[2].reasons
    assert len(batches) == 4


def test_disjoint_batches_on_the_rack_aware_cluster(rack_cluster):
    """RF = number of racks and one replica per rack: brokers of one rack share no partition, brokers of
    two racks share some, so partition-disjoint batching also finds the rack batches (computed, not
    assumed: the count is whatever disjoint_batches gives, and must not beat ours)."""
    order = restart_order(rack_cluster.broker_ids, 7)
    ours = plan_batches(rack_cluster, order, max_parallel=30, batch_by="rack")
    disjoint = disjoint_batches(rack_cluster, order, max_parallel=30)
    assert len(disjoint) == len(ours) + 1  # the reference keeps the controller alone and last
    assert sorted(ids(disjoint)[:3]) == sorted([*ids(ours)[:2], ids(ours)[2][:-1]])
    for batch in disjoint:
        for part in rack_cluster.partitions:
            assert len(set(part.replicas) & set(batch.broker_ids)) <= 1
    assert disjoint[-1].broker_ids == (7,)
    assert any(r.startswith("broker 1 not with [0]: shares ") for r in disjoint[1].reasons)


def test_ours_beats_disjoint_where_two_replicas_may_go():
    """min.insync.replicas 1 (Kafka's default), RF 3, rack-unaware placement: every two brokers share a
    partition, so disjoint batching is serial; the joint rule only forbids taking all 3 replicas."""
    state = synthetic(30, 3, 3000, 3, 1, controller=7, seed=5, rack_aware=False)
    order = restart_order(state.broker_ids, 7)
    disjoint = disjoint_batches(state, order, max_parallel=30)
    ours = plan_batches(state, order, max_parallel=30)
    assert len(disjoint) == 30
    assert len(ours) * 2 < len(disjoint)
    for batch in ours:
        assert can_stop_together(state, batch.broker_ids) == []
    assert any("would keep no in-sync replica" in r for b in ours for r in b.reasons)


# -- the joint rule ----------------------------------------------------------------------------------


def test_partition_already_under_min_isr_keeps_its_brokers_alone():
    state = state_of(
        6,
        p("orders", 0, [1, 2, 3], isr=[1]),  # under min ISR 2
        p("orders", 1, [4, 5, 0]),
        default_min_insync=2,
    )
    assert can_stop_together(state, [1, 4]) == [
        "orders-0: isr [1] already below min.insync.replicas 2 (replicas [1, 2, 3])"
    ]
    # broker 2 is not in the ISR, but holds a replica of the under-min partition: blocks as in restart_blockers
    assert can_stop_together(state, [2, 4]) == [
        "orders-0: isr [1] already below min.insync.replicas 2 (replicas [1, 2, 3])"
    ]
    batches = plan_batches(state, [1, 2, 4, 3, 0], max_parallel=5)
    assert ids(batches) == [(1,), (2,), (4,), (3,), (0,)]
    assert batches[0].reasons == ("broker 1 alone: orders-0 isr [1] already below min.insync.replicas 2",)
    assert batches[1].reasons == ("broker 2 alone: orders-0 isr [1] already below min.insync.replicas 2",)
    assert batches[2].reasons == ()  # batches that take no partner are not tried (their reason says why)
    # 0 and 4 share orders-1 (in sync, RF 3): stopping both leaves isr [5] < 2
    assert batches[4].reasons[-1] == "broker 0 not with [4]: orders-1 would keep isr [5] below min.insync.replicas 2"
    # without the under-min partition, 1 and 4 may go together
    healthy = state_of(6, p("orders", 0, [1, 2, 3]), p("orders", 1, [4, 5, 0]), default_min_insync=2)
    assert ids(plan_batches(healthy, [1, 2, 4, 3, 0], max_parallel=5)) == [(1, 4), (2, 0), (3,)]


def test_last_remaining_in_sync_replica_in_the_batch_splits_it():
    # min ISR 1, RF 3, isr [1, 2]: 1 and 2 together would leave no in-sync replica
    state = state_of(4, p("orders", 3, [1, 2, 3], isr=[1, 2]), default_min_insync=1)
    assert can_stop_together(state, [1, 3]) == []
    assert can_stop_together(state, [1, 2]) == [
        "orders-3: stopping brokers [1, 2] would leave no in-sync replica (isr [1, 2], replicas [1, 2, 3])"
    ]
    batches = plan_batches(state, [1, 2, 3, 0], max_parallel=4)
    assert ids(batches) == [(1, 3, 0), (2,)]
    assert batches[1].reasons == ("broker 2 not with [1]: orders-3 would keep no in-sync replica (isr [1, 2])",)
    # min ISR 2, all in sync: two of three replicas together leave one
    state = state_of(4, p("orders", 3, [1, 2, 3]), default_min_insync=2)
    assert can_stop_together(state, [3, 1]) == [
        "orders-3: stopping brokers [1, 3] would leave isr [2] below min.insync.replicas 2 "
        "(isr [1, 2, 3], replicas [1, 2, 3])"
    ]
    assert ids(plan_batches(state, [1, 2, 3, 0], max_parallel=4)) == [(1, 0), (2,), (3,)]


def test_rf_at_or_below_min_isr_does_not_block_but_keeps_a_leader_candidate():
    # RF 2 = min ISR 2: excepted from the min-ISR rule (restart_blockers lets each broker go) ...
    state = state_of(4, p("pay", 0, [1, 2]), p("single", 0, [3]), topic_min_insync={"pay": 2})
    assert restart_blockers(state, 1) == []
    assert can_stop_together(state, [1]) == []
    assert can_stop_together(state, [1, 0]) == []
    # ... but not both replicas at once (rule b)
    assert can_stop_together(state, [1, 2]) == [
        "pay-0: stopping brokers [1, 2] would leave no in-sync replica (isr [1, 2], replicas [1, 2])"
    ]
    # RF 1: the only replica restarts alone (as today), never with another broker
    assert can_stop_together(state, [3]) == []
    assert can_stop_together(state, [3, 0]) == [
        "single-0: stopping brokers [3] would leave no in-sync replica (isr [3], replicas [3])"
    ]
    batches = plan_batches(state, [1, 3, 2, 0], max_parallel=4)
    assert ids(batches) == [(1, 0), (3,), (2,)]
    assert batches[1].reasons == ("broker 3 alone: single-0 would keep no in-sync replica (isr [3])",)
    assert batches[2].reasons == ("broker 2 not with [1]: pay-0 would keep no in-sync replica (isr [1, 2])",)


def test_single_broker_follows_restart_blockers_exactly():
    state = state_of(4, p("orders", 3, [1, 2, 3], isr=[1, 2]), default_min_insync=2)
    assert can_stop_together(state, [2]) == [r for _, r in restart_blockers(state, 2)]
    assert can_stop_together(state, [2]) != []
    assert can_stop_together(state, [0]) == []
    assert can_stop_together(state, []) == []
    # a blocked broker still gets its batch (the gate holds it), alone
    assert ids(plan_batches(state, [2, 0, 3], max_parallel=3)) == [(2,), (0, 3)]


def test_topic_override_of_min_isr_is_used():
    state = state_of(4, p("strict", 0, [1, 2, 3]), p("loose", 0, [1, 2, 3]), topic_min_insync={"strict": 2})
    assert can_stop_together(state, [1, 2]) == [
        "strict-0: stopping brokers [1, 2] would leave isr [3] below min.insync.replicas 2 "
        "(isr [1, 2, 3], replicas [1, 2, 3])"
    ]
    loose_only = state_of(4, p("loose", 0, [1, 2, 3]), topic_min_insync={"strict": 2})
    assert can_stop_together(loose_only, [1, 2]) == []


# -- controller, rack, size --------------------------------------------------------------------------


def test_controller_last_of_the_last_batch_even_when_the_order_has_it_elsewhere():
    state = synthetic(6, 3, 60, 3, 1, controller=0, seed=2)
    batches = plan_batches(state, [0, 3, 1, 4], max_parallel=4, batch_by="rack")
    assert ids(batches) == [(1, 4), (3, 0)]
    assert batches[-1].reasons == (
        "brokers of rack r0 only (batch_by=rack)",
        "broker 0 last, with [3]: it is the controller; it stops once they are gone (one controller move, at the end)",
        "broker 0 goes last: it is the controller (it was at position 1 of 4 in the order)",
    )
    # its rack's batch is full: alone and last, as in a serial roll
    batches = plan_batches(state, [3, 1, 4, 0], max_parallel=1)
    assert ids(batches) == [(3,), (1,), (4,), (0,)]
    assert batches[-1].reasons == ("broker 0 alone: it is the controller",)
    full = plan_batches(state, [3, 1, 4, 0], max_parallel=2, batch_by="rack")
    assert ids(full)[-1] == (3, 0)
    # controller not restarted: no controller reason
    assert not any("controller" in r for b in plan_batches(state, [3, 1], 2) for r in b.reasons)


def test_keep_order_leaves_the_controller_where_the_order_has_it():
    """The roll's ``keep_order`` on a list of brokers (``controller_last=False``): serial, the order as given;
    batched, the controller placed like any broker, no controller reason."""
    state = synthetic(6, 3, 60, 3, 1, controller=0, seed=2)
    assert ids(plan_batches(state, [0, 3, 1, 4], max_parallel=1, controller_last=False)) == [(0,), (3,), (1,), (4,)]
    batches = plan_batches(state, [0, 3, 1, 4], max_parallel=4, batch_by="rack", controller_last=False)
    assert ids(batches) == [(0, 3), (1, 4)]
    assert not any("controller" in r for b in batches for r in b.reasons)


def test_controller_alone_when_the_joint_rule_refuses_every_batch():
    """RF 2, min ISR 1, every partition on the controller and one other broker: stopping both takes it offline."""
    state = state_of(3, p("t", 0, [2, 0]), p("t", 1, [2, 1]), controller=2, default_min_insync=1)
    batches = plan_batches(state, [0, 1, 2], max_parallel=3)
    assert ids(batches) == [(0, 1), (2,)]
    assert batches[-1].reasons == (
        "broker 2 alone: it is the controller",
        "broker 2 not with [0, 1]: t-0 would keep no in-sync replica (isr [2, 0])",
    )


def test_controller_joins_the_latest_batch_that_fits_and_that_batch_goes_last():
    """Rack r0's brokers 0, 3 open the first batch, rack r1's 1, 4 the second; the controller 6 (rack r0) joins
    the first (the only one of its rack), which then goes last."""
    state = synthetic(7, 3, 70, 3, 2, controller=6, seed=4)
    batches = plan_batches(state, [0, 1, 3, 4, 6], max_parallel=3, batch_by="rack")
    assert ids(batches) == [(1, 4), (0, 3, 6)]


def test_rack_batches_never_mix_racks_and_respect_max_parallel(rack_cluster):
    order = restart_order(rack_cluster.broker_ids, 7)
    batches = plan_batches(rack_cluster, order, max_parallel=4, batch_by="rack")
    assert max(len(b.broker_ids) for b in batches) == 4
    for b in batches:
        assert len({rack_cluster.broker(i).rack for i in b.broker_ids}) == 1
    assert ids(batches)[:4] == [(0, 3, 6, 9), (1, 4, 10, 13), (2, 5, 8, 11), (12, 15, 18, 21)]


# -- property check against a naive reference --------------------------------------------------------


def reference_plan(state, order, max_parallel, batch_by, rule, controller_joins=True):
    """The greedy walk spelled out with a from-scratch check per candidate (slow, obviously right); the controller
    joins the latest batch that fits, moved last (``controller_joins``), else goes alone and last."""
    ctrl = state.controller_id
    walk = [b for b in order if b != ctrl]
    batches = []

    def fits(batch, b):
        if len(batch) >= max_parallel:
            return False
        if batch_by == "rack" and state.broker(batch[0]).rack != state.broker(b).rack:
            return False
        return rule(state, batch + [b])

    for b in walk:
        for batch in batches:
            if fits(batch, b):
                batch.append(b)
                break
        else:
            batches.append([b])
    if ctrl in order:
        host = next((batch for batch in reversed(batches) if fits(batch, ctrl)), None) if controller_joins else None
        if host is None:
            batches.append([ctrl])
        else:
            batches.remove(host)
            batches.append(host + [ctrl])
    return [tuple(b) for b in batches]


def joint_ok(state, brokers):
    return can_stop_together(state, brokers) == []


def disjoint_ok(state, brokers):
    return all(len(set(part.replicas) & set(brokers)) <= 1 for part in state.partitions)


def random_state(rng):
    n = rng.randint(2, 12)
    n_racks = rng.randint(1, 3)
    racks = {b: f"r{b % n_racks}" for b in range(n)}
    parts = []
    for t in range(rng.randint(1, 4)):
        for i in range(rng.randint(1, 8)):
            rf = rng.randint(1, min(4, n))
            replicas = rng.sample(range(n), rf)
            roll = rng.random()
            if roll < 0.6:
                isr = replicas
            else:  # out of sync replicas, sometimes none in sync
                isr = [r for r in replicas if rng.random() < 0.5]
            parts.append(p(f"topic{t}", i, replicas, isr))
    overrides = {f"topic{t}": rng.randint(1, 3) for t in range(4) if rng.random() < 0.4}
    controller = rng.choice([-1, *range(n)])
    return state_of(
        n,
        *parts,
        controller=controller,
        racks=racks,
        topic_min_insync=overrides,
        default_min_insync=rng.randint(1, 2),
    )


@pytest.mark.parametrize("seed", range(300))
def test_property_random_clusters(seed):
    rng = random.Random(seed)
    state = random_state(rng)
    chosen = rng.sample(state.broker_ids, rng.randint(1, len(state.broker_ids)))
    order = restart_order(state.broker_ids, state.controller_id, chosen)
    max_parallel = rng.randint(1, 6)
    batch_by = rng.choice(BATCH_BY)
    batches = plan_batches(state, order, max_parallel, batch_by)

    flat = [b for batch in batches for b in batch.broker_ids]
    assert sorted(flat) == sorted(order)  # every broker exactly once
    position = {b: k for k, b in enumerate(order)}
    for batch in batches:
        assert 1 <= len(batch.broker_ids) <= max_parallel
        assert [position[b] for b in batch.broker_ids] == sorted(position[b] for b in batch.broker_ids)
        if batch_by == "rack":
            assert len({state.broker(b).rack for b in batch.broker_ids}) == 1
        if len(batch.broker_ids) > 1:
            assert can_stop_together(state, batch.broker_ids) == []
    ctrl = state.controller_id
    if ctrl in order:
        assert batches[-1].broker_ids[-1] == ctrl, "the controller stops last"
        assert all(ctrl not in b.broker_ids for b in batches[:-1])
    opened = batches[:-1] if ctrl in order else batches  # the controller's batch is moved last
    firsts = [position[b.broker_ids[0]] for b in opened]
    assert firsts == sorted(firsts)  # batches in the order they were opened (the controller's moved last)
    if max_parallel == 1:
        assert flat == order

    assert ids(batches) == reference_plan(state, order, max_parallel, batch_by, joint_ok)
    disjoint = disjoint_batches(state, order, max_parallel)
    assert ids(disjoint) == reference_plan(state, order, max_parallel, "none", disjoint_ok, controller_joins=False)


# -- errors ------------------------------------------------------------------------------------------


@pytest.fixture()
def small():
    return state_of(3, p("t", 0, [0, 1, 2]), controller=2, racks={0: "a", 1: None, 2: "b"})


def test_unknown_ids_are_all_named(small):
    msg = r"unknown broker ids \[7, 9\]; registered brokers are \[0, 1, 2\]"
    with pytest.raises(ValueError, match=msg):
        plan_batches(small, [7, 0, 9])
    with pytest.raises(ValueError, match=msg):
        disjoint_batches(small, [7, 0, 9], 2)
    with pytest.raises(ValueError, match=msg):
        can_stop_together(small, {7, 9})


def test_duplicates_rejected(small):
    with pytest.raises(ValueError, match=r"duplicate broker ids in the restart order: \[0\]"):
        plan_batches(small, [0, 1, 0])
    with pytest.raises(ValueError, match=r"duplicate broker ids in the brokers to stop: \[1\]"):
        can_stop_together(small, [1, 1])


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2", None])
def test_max_parallel_must_be_a_positive_int(small, bad):
    with pytest.raises(ValueError, match="max_parallel must be an integer >= 1"):
        plan_batches(small, [0], max_parallel=bad)
    with pytest.raises(ValueError, match="max_parallel must be an integer >= 1"):
        disjoint_batches(small, [0], bad)


@pytest.mark.parametrize("bad", ["zone", "", "RACK", None])
def test_bad_batch_by_names_the_allowed_values(small, bad):
    with pytest.raises(ValueError, match=r"batch_by must be one of \('none', 'rack'\)"):
        plan_batches(small, [0], batch_by=bad)


def test_missing_rack_with_rack_batching_names_the_broker(small):
    with pytest.raises(ValueError, match=r"brokers without a rack: \[1\]"):
        plan_batches(small, [0, 1, 2], max_parallel=2, batch_by="rack")
    # brokers not restarted need no rack; batch_by=none needs none at all
    assert ids(plan_batches(small, [0, 2], max_parallel=2, batch_by="rack")) == [(0,), (2,)]
    assert ids(plan_batches(small, [0, 1, 2], max_parallel=2)) == [(0, 1), (2,)]


def test_non_integer_ids_rejected(small):
    with pytest.raises(ValueError, match="must be integer broker ids"):
        plan_batches(small, ["0"])


# -- performance smoke -------------------------------------------------------------------------------


def test_performance_smoke_100_brokers_100k_partitions():
    """Runs, no timing assert (planning takes well under a second; building the state most of the test)."""
    state = synthetic(100, 3, 100_000, 3, 2, controller=7, seed=11)
    order = restart_order(state.broker_ids, 7)
    rack = plan_batches(state, order, max_parallel=100, batch_by="rack")
    assert [len(b.broker_ids) for b in rack] == [34, 33, 33] and rack[-1].broker_ids[-1] == 7
    anyone = plan_batches(state, order, max_parallel=10)
    assert sum(len(b.broker_ids) for b in anyone) == 100
    assert len(plan_batches(state, order, max_parallel=1)) == 100
