"""Health rules: each with passing and failing cases, asserting the verdict and its reasons."""

import pytest
from kafka_ops.cluster import Broker, ClusterState, Partition
from kafka_ops.health import (
    ConsumerGroupStatus,
    PartitionLag,
    Verdict,
    can_restart,
    cluster_health,
    combine,
    consumer_lag,
    leader_imbalance,
    leader_imbalance_ratios,
    offline_partitions,
    restart_blockers,
    restart_gate,
    under_replicated_partitions,
)

BROKERS = (Broker(1, "h1", 9092), Broker(2, "h2", 9092), Broker(3, "h3", 9092))


def state_of(*partitions, **kwargs):
    return ClusterState(brokers=BROKERS, partitions=tuple(partitions), controller_id=1, **kwargs)


def p(topic, partition, leader, replicas, isr=None):
    return Partition(topic, partition, leader, tuple(replicas), tuple(replicas if isr is None else isr))


def healthy_state(**kwargs):
    """RF 3, one partition preferring each broker, all led by their preferred leader, all in sync."""
    return state_of(p("orders", 0, 1, [1, 2, 3]), p("orders", 1, 2, [2, 3, 1]), p("orders", 2, 3, [3, 1, 2]), **kwargs)


# -- Verdict ---------------------------------------------------------------------------------------


def test_verdict_message_and_bool():
    ok = Verdict(True, [], rule="urp")
    assert bool(ok) is True
    assert ok.message() == "urp: OK"
    bad = Verdict(False, [f"r{i}" for i in range(25)], rule="urp")
    assert bool(bad) is False
    msg = bad.message(limit=3)
    assert msg == "urp: r0; r1; r2; ... and 22 more"
    assert str(bad).endswith("... and 5 more")
    assert bad.to_dict() == {"ok": False, "rule": "urp", "reasons": [f"r{i}" for i in range(25)]}


def test_combine_prefixes_reasons_with_rule_and_requires_all():
    v = combine([Verdict(True, [], "a"), Verdict(False, ["x"], "b"), Verdict(False, ["y", "z"], "c")], "gate")
    assert not v.ok
    assert v.rule == "gate"
    assert v.reasons == ["b: x", "c: y", "c: z"]
    assert v.parts[1].rule == "b"
    assert combine([Verdict(True, [], "a")]).ok
    assert combine([]).ok
    # a failing verdict without reasons still shows up
    assert combine([Verdict(False, [], "mystery")]).reasons == ["mystery: failed"]


def test_combined_message_shows_every_failing_rule_with_counts():
    urp = Verdict(False, [f"t-{i}: under-replicated" for i in range(50)], "urp")
    minisr = Verdict(False, ["t-0: stopping broker 1 would leave isr [2] below min.insync.replicas 2"],
                     "can-restart")
    v = combine([Verdict(True, [], "offline"), urp, minisr], "gate broker 1")
    msg = v.message(limit=4)
    assert msg.startswith("gate broker 1: urp (50): t-0: under-replicated; t-1: under-replicated; ... and 48 more")
    assert msg.endswith("| can-restart (1): t-0: stopping broker 1 would leave isr [2] below min.insync.replicas 2")
    assert "offline" not in msg
    assert combine([Verdict(True, [], "a")], "gate").message() == "gate: OK"


# -- offline ---------------------------------------------------------------------------------------


def test_offline_passes_when_every_partition_has_a_leader():
    v = offline_partitions(healthy_state())
    assert v.ok and v.reasons == [] and v.rule == "offline"


def test_offline_fails_naming_partition_and_isr():
    state = state_of(p("orders", 3, -1, [1, 2], isr=[2]), p("orders", 0, 1, [1, 2]))
    v = offline_partitions(state)
    assert not v.ok
    assert v.reasons == ["orders-3: leader -1 (offline), isr [2]"]


# -- URP -------------------------------------------------------------------------------------------


def test_urp_passes_when_isr_equals_replicas():
    assert under_replicated_partitions(healthy_state()).ok


def test_urp_fails_naming_missing_replicas():
    state = state_of(p("orders", 3, 1, [1, 2, 3], isr=[1]), p("orders", 0, 1, [1, 2, 3]))
    v = under_replicated_partitions(state)
    assert not v.ok
    assert v.reasons == ["orders-3: under-replicated, isr [1] of replicas [1, 2, 3] (missing [2, 3])"]


def test_urp_counts_offline_partition_with_empty_isr():
    v = under_replicated_partitions(state_of(p("t", 0, -1, [2], isr=[])))
    assert not v.ok and "t-0" in v.reasons[0]


# -- leader imbalance --------------------------------------------------------------------------------


def imbalanced_state(n_preferring_1, n_moved, **kwargs):
    """``n_preferring_1`` partitions prefer broker 1, the first ``n_moved`` of them are led by 2."""
    parts = [
        p("t", i, 2 if i < n_moved else 1, [1, 2, 3]) for i in range(n_preferring_1)
    ]
    return state_of(*parts, **kwargs)


def test_imbalance_ratios_per_preferred_broker():
    state = state_of(
        p("t", 0, 2, [1, 2]), p("t", 1, 1, [1, 2]), p("t", 2, -1, [2, 1], isr=[]), p("t", 3, 3, [3, 1])
    )
    # broker 1: 2 preferred, 1 led elsewhere; broker 2: 1 preferred, offline counts as elsewhere
    assert leader_imbalance_ratios(state) == {1: (1, 2), 2: (1, 1), 3: (0, 1)}


def test_imbalance_passes_at_exactly_the_threshold():
    # 1 of 10 = 10% <= 10 (Kafka triggers a rebalance only when the ratio is strictly greater)
    v = leader_imbalance(imbalanced_state(10, 1))
    assert v.ok, v.reasons


def test_imbalance_fails_above_threshold_naming_broker_and_partitions():
    v = leader_imbalance(imbalanced_state(10, 2))
    assert not v.ok
    assert v.reasons == [
        "broker 1: leader imbalance 20.0% > 10% (2 of 10 preferred partitions led elsewhere: "
        "t-0 led by 2, t-1 led by 2)"
    ]


def test_imbalance_threshold_from_state_and_override():
    state = imbalanced_state(10, 2, leader_imbalance_percentage=25)
    assert leader_imbalance(state).ok
    assert not leader_imbalance(state, max_percentage=15).ok
    assert leader_imbalance(imbalanced_state(10, 2), max_percentage=20).ok


def test_imbalance_zero_threshold_requires_every_preferred_leader():
    assert not leader_imbalance(imbalanced_state(10, 1), max_percentage=0).ok
    assert leader_imbalance(imbalanced_state(10, 0), max_percentage=0).ok


def test_imbalance_lists_at_most_five_partitions():
    v = leader_imbalance(imbalanced_state(8, 8))
    assert "100.0% > 10%" in v.reasons[0]
    assert v.reasons[0].endswith("t-4 led by 2, ... 3 more)")


def test_imbalance_ignores_brokers_that_prefer_nothing():
    # broker 3 is preferred leader of nothing and leads everything? irrelevant to its own ratio;
    # brokers 1 and 2 each have their one partition led by 3 -> 100%.
    state = state_of(p("t", 0, 3, [1, 3]), p("t", 1, 3, [2, 3]))
    v = leader_imbalance(state)
    assert [r.split(":")[0] for r in v.reasons] == ["broker 1", "broker 2"]


# -- can restart (min ISR) ---------------------------------------------------------------------------


def test_can_restart_when_isr_stays_at_or_above_min_isr():
    # RF 3, min ISR 2, full ISR: stopping any broker leaves 2 in sync
    state = healthy_state(default_min_insync=2)
    for b in (1, 2, 3):
        assert can_restart(state, b).ok


def test_blocked_when_isr_equals_min_isr_and_broker_in_isr():
    state = state_of(p("orders", 3, 1, [1, 2, 3], isr=[1, 2]), default_min_insync=2)
    v = can_restart(state, 2)
    assert not v.ok
    assert v.reasons == [
        "orders-3: stopping broker 2 would leave isr [1] below min.insync.replicas 2 "
        "(isr [1, 2], replicas [1, 2, 3])"
    ]
    assert v.rule == "can-restart"


def test_not_blocked_when_isr_equals_min_isr_but_broker_out_of_isr():
    state = state_of(p("orders", 3, 1, [1, 2, 3], isr=[1, 2]), default_min_insync=2)
    assert can_restart(state, 3).ok


def test_blocked_when_isr_already_below_min_isr_even_if_broker_out_of_isr():
    state = state_of(p("orders", 3, 1, [1, 2, 3], isr=[1]), default_min_insync=2)
    v = can_restart(state, 3)
    assert not v.ok
    assert v.reasons == ["orders-3: isr [1] already below min.insync.replicas 2 (replicas [1, 2, 3])"]


def test_partitions_with_rf_not_above_min_isr_never_block():
    # RF 2 == min ISR 2: Strimzi's rule skips it (no restart could keep it writable)
    state = state_of(p("small", 0, 1, [1, 2], isr=[1]), default_min_insync=2)
    assert can_restart(state, 1).ok
    assert can_restart(state, 2).ok


def test_topic_override_of_min_isr_is_used():
    parts = (p("orders", 0, 1, [1, 2, 3], isr=[1, 2]), p("logs", 0, 1, [1, 2, 3], isr=[1, 2]))
    state = state_of(*parts, default_min_insync=1, topic_min_insync={"orders": 2})
    v = can_restart(state, 1)
    assert not v.ok
    assert len(v.reasons) == 1 and v.reasons[0].startswith("orders-0:")


def test_only_partitions_on_the_broker_are_checked():
    state = state_of(p("orders", 0, 1, [1, 2, 3], isr=[1]), p("logs", 0, 2, [2, 3, 1]), default_min_insync=2)
    # broker 2 holds both: orders-0 already below min ISR blocks it
    assert [pt.name for pt, _ in restart_blockers(state, 2)] == ["orders-0"]
    state2 = state_of(p("orders", 0, 1, [1, 2], isr=[1]), p("logs", 0, 3, [3, 1, 2]), default_min_insync=2)
    # orders-0 has RF 2 == min ISR (skipped); logs-0 is healthy
    assert can_restart(state2, 3).ok


def test_broker_without_replicas_can_restart():
    assert can_restart(healthy_state(default_min_insync=2), 9).ok


# -- cluster health (kafka_roller) -------------------------------------------------------------------


def test_cluster_health_passes_on_healthy_cluster():
    v = cluster_health(healthy_state())
    assert v.ok and v.rule == "cluster-health" and v.reasons == []


def test_cluster_health_collects_all_failures_with_rule_prefixes():
    state = state_of(p("a", 0, -1, [1, 2], isr=[]), p("b", 0, 2, [1, 2], isr=[2]))
    v = cluster_health(state)
    assert not v.ok
    assert v.reasons[0] == "offline: a-0: leader -1 (offline), isr []"
    assert v.reasons[1].startswith("urp: a-0: under-replicated")
    assert v.reasons[2].startswith("urp: b-0: under-replicated")
    assert v.reasons[3].startswith("leader-imbalance: broker 1: leader imbalance 100.0%")


# -- consumer lag (Burrow) ---------------------------------------------------------------------------


def test_consumer_lag_passes_when_all_groups_ok():
    v = consumer_lag([ConsumerGroupStatus("g1", "OK", total_lag=3), ConsumerGroupStatus("g2", "OK")])
    assert v.ok and v.rule == "consumer-lag"


def test_consumer_lag_passes_with_no_groups():
    assert consumer_lag([]).ok


@pytest.mark.parametrize("status", ["NOTFOUND", "WARN", "ERR", "STOP", "STALL", "REWIND"])
def test_consumer_lag_fails_on_any_non_ok_status(status):
    v = consumer_lag([ConsumerGroupStatus("g1", "OK"), ConsumerGroupStatus("billing", status)])
    assert not v.ok
    assert len(v.reasons) == 1
    assert v.reasons[0].startswith(f"group billing: {status}")


def test_consumer_lag_reason_names_partitions_and_lag():
    status = ConsumerGroupStatus(
        "billing", "ERR", total_lag=5400, partitions=(PartitionLag("orders", 3, "STALL", 1200),)
    )
    v = consumer_lag([status])
    assert v.reasons == ["group billing: ERR, total lag 5400 (orders-3 STALL lag 1200)"]


def test_consumer_lag_notfound_says_burrow_does_not_know_group():
    v = consumer_lag([ConsumerGroupStatus("ghost", "NOTFOUND")])
    assert v.reasons == ["group ghost: NOTFOUND (Burrow does not know this group)"]


# -- the restart gate --------------------------------------------------------------------------------


def test_gate_passes_on_healthy_cluster():
    v = restart_gate(healthy_state(default_min_insync=2), 2)
    assert v.ok
    assert v.rule == "gate broker 2"


def test_gate_reports_urp_and_min_isr_reasons_together():
    # With no URP, |isr| == |replicas| > m, so can-restart only ever fails alongside URP; the gate
    # reports both so the log says which partitions would drop below min.insync.replicas.
    state = state_of(p("orders", 0, 1, [1, 2, 3], isr=[1, 2]), topic_min_insync={"orders": 2})
    v = restart_gate(state, 2)
    assert not v.ok
    assert [r.split(":")[0] for r in v.reasons] == ["urp", "can-restart"]
    assert "stopping broker 2 would leave isr [1]" in v.reasons[1]
    # the same cluster gates broker 3 (out of the ISR) only on URP
    v3 = restart_gate(state, 3)
    assert [r.split(":")[0] for r in v3.reasons] == ["urp"]


def test_gate_fails_on_imbalance_with_custom_threshold():
    v = restart_gate(imbalanced_state(10, 2), 3, max_imbalance_percentage=10)
    assert not v.ok and v.reasons[0].startswith("leader-imbalance: broker 1")
    assert restart_gate(imbalanced_state(10, 2), 3, max_imbalance_percentage=50).ok


# -- broker-scoped rules (the steps after a restart) ---------------------------------------------


def test_broker_caught_up_only_looks_at_that_brokers_partitions():
    from kafka_ops.cluster import Broker, ClusterState, Partition
    from kafka_ops.health import broker_caught_up

    state = ClusterState(
        brokers=(Broker(1, "h1", 9092), Broker(2, "h2", 9092)),
        partitions=(
            Partition("t", 0, leader=1, replicas=(1, 2, 3), isr=(1, 2)),  # broker 3 down: not our concern
            Partition("t", 1, leader=2, replicas=(2, 1), isr=(2,)),  # broker 1 still catching up
        ),
    )
    assert broker_caught_up(state, 2).ok
    verdict = broker_caught_up(state, 1)
    assert not verdict.ok
    assert verdict.reasons == ["t-1: broker 1 not in isr [2] (leader 2)"]


def test_broker_leadership_uses_the_imbalance_percentage():
    from kafka_ops.cluster import Broker, ClusterState, Partition
    from kafka_ops.health import broker_leadership

    parts = tuple(Partition("t", i, leader=1 if i < 9 else 2, replicas=(1, 2), isr=(1, 2)) for i in range(10))
    state = ClusterState(brokers=(Broker(1, "h", 9092), Broker(2, "h", 9092)), partitions=parts)
    assert broker_leadership(state, 1).ok, "10% imbalance is within the default 10%"
    worse = ClusterState(brokers=state.brokers, partitions=tuple(
        Partition("t", i, leader=1 if i < 8 else 2, replicas=(1, 2), isr=(1, 2)) for i in range(10)))
    verdict = broker_leadership(worse, 1)
    assert not verdict.ok and "leads 8 of its 10 preferred partitions (20% imbalance > 10%)" in verdict.reasons[0]
    assert broker_leadership(state, 2).ok, "a broker preferred for nothing has nothing to lead"


def test_broker_caught_up_names_an_offline_partition_and_the_brokers_down():
    from kafka_ops.cluster import Broker, ClusterState, Partition
    from kafka_ops.health import broker_caught_up

    state = ClusterState(
        brokers=(Broker(1, "h1", 9092),),
        partitions=(Partition("orders", 3, leader=-1, replicas=(1, 2), isr=(2,)),),
    )
    assert broker_caught_up(state, 1).reasons == ["orders-3: OFFLINE (no leader; isr [2], replicas down [2])"]


def test_imbalance_elections_name_only_what_one_election_fixes():
    from kafka_ops.health import imbalance_elections, leader_imbalance

    state = state_of(
        p("orders", 0, 2, [1, 2, 3]),  # broker 1 preferred, in the ISR, not leading: elect
        p("orders", 1, 3, [1, 3, 2], isr=[3, 2]),  # broker 1 preferred but not in the ISR: an election cannot
        p("orders", 2, 1, [1, 2, 3]),  # led by its preferred leader
        p("orders", 3, 3, [2, 3, 1]),  # broker 2 at 1 of 2 = 50%: elect
        p("orders", 4, 2, [2, 1, 3]),
        p("orders", 5, 3, [3, 1, 2]),
    )
    assert not leader_imbalance(state).ok
    assert imbalance_elections(state) == [("orders", 0), ("orders", 3)]
    assert imbalance_elections(state, max_percentage=70) == [], "nobody over the threshold: nothing to elect"
    assert imbalance_elections(healthy_state()) == []
    gone = ClusterState(brokers=BROKERS[1:], partitions=(p("orders", 0, 2, [1, 2, 3], isr=[2, 3]),))
    assert imbalance_elections(gone) == [], "a preferred leader that is not registered cannot be elected"


def test_leadership_elections_give_a_batch_back_what_it_should_lead_in_one_election():
    from kafka_ops.health import leadership_elections

    state = state_of(
        p("orders", 0, 2, [1, 2, 3]),  # broker 1 preferred, in the ISR, not leading: elect
        p("orders", 1, 2, [3, 1, 2]),  # broker 3 preferred, not leading: elect (the same batch)
        p("orders", 2, 3, [1, 3, 2], isr=[3, 2]),  # broker 1 not in the ISR yet: an election cannot
        p("orders", 3, 1, [1, 2, 3]),  # led by its preferred leader
        p("orders", 4, 3, [2, 1, 3]),  # broker 2 is not in the batch
    )
    assert leadership_elections(state, [1, 3]) == [("orders", 0), ("orders", 1)]
    assert leadership_elections(state, {1: {}}) == [("orders", 0)], "a batch's nodes mapping reads as its ids"
    assert leadership_elections(state, [2]) == [("orders", 4)]
    gone = ClusterState(brokers=BROKERS[1:], partitions=(p("orders", 0, 2, [1, 2, 3]),))
    assert leadership_elections(gone, [1]) == [], "a preferred leader that is not registered cannot be elected"


def test_unavoidable_outages_name_rf1_and_rf_at_min_isr_topics_on_the_rolled_brokers():
    from kafka_ops.health import unavoidable_outages

    parts = (
        Partition("dev", 0, 1, (1,), (1,)), Partition("dev", 1, 2, (2,), (2,)), Partition("dev", 2, 3, (3,), (3,)),
        Partition("audit", 0, 1, (1, 2), (1, 2)), Partition("audit", 1, 2, (2, 3), (2, 3)),
        Partition("orders", 0, 1, (1, 2, 3), (1, 2, 3)),
    )
    state = ClusterState(brokers=tuple(Broker(b, f"h{b}", 9092) for b in (1, 2, 3)), partitions=parts,
                         controller_id=1, default_min_insync=2)
    assert unavoidable_outages(state, [1, 2]) == [
        "topic dev: 2 partitions with one replica (on brokers [1, 2]) offline while the broker restarts",
        "topic audit: RF 2 <= min.insync.replicas 2: acks=all writes to its 2 partitions refused while a replica's "
        "broker restarts",
    ]
    assert unavoidable_outages(state, [3]) == [
        "topic dev: 1 partition with one replica (on brokers [3]) offline while the broker restarts",
        "topic audit: RF 2 <= min.insync.replicas 2: acks=all writes to its 1 partition refused while a replica's "
        "broker restarts",
    ]
    # a topic that lowers its min.insync.replicas can stay writable; a roll of none of its brokers names nothing
    relaxed = ClusterState(brokers=state.brokers, partitions=parts, controller_id=1, default_min_insync=2,
                           topic_min_insync={"audit": 1})
    assert [line.split(":")[0] for line in unavoidable_outages(relaxed, [1])] == ["topic dev"]
    assert unavoidable_outages(state, [4]) == []
    singles = tuple(Partition(f"t{i}", 0, 1, (1,), (1,)) for i in range(12))
    many = ClusterState(brokers=state.brokers, partitions=singles, controller_id=1)
    lines = unavoidable_outages(many, [1], limit=10)
    assert len(lines) == 11 and lines[-1] == "and 2 more topics"


def test_burrow_watches_the_cluster_whose_broker_hosts_it_names_whatever_the_port():
    from kafka_ops.health import burrow_watches

    names = {"kafka-1.example.com": {"10.0.0.1"}, "10.0.0.1": {"10.0.0.1"}, "kafka-9.other.com": {"10.9.0.9"}}
    def resolve(host: str) -> set[str]:
        return names.get(host, set())
    # Burrow reads the PLAINTEXT listener, the product the SASL one: the same brokers
    assert burrow_watches(["127.0.0.11:9092", "127.0.0.12:9092"], {"127.0.0.12:9094"}, resolve)
    assert burrow_watches(["KAFKA-1.example.com:9092"], {"kafka-1.example.com:9094"}, resolve), "case of a name"
    assert burrow_watches(["10.0.0.1:9092"], {"kafka-1.example.com:9094"}, resolve), "a name and its address"
    assert burrow_watches(["[::1]:9092"], {"[::1]:9094"}, lambda h: set())
    assert not burrow_watches(["kafka-9.other.com:9092"], {"kafka-1.example.com:9094"}, resolve), "another cluster"
    assert not burrow_watches(["127.0.1.11:9092"], {"127.0.0.11:9092"}, lambda h: {h}), "other hosts, same port"
    assert not burrow_watches([], {"127.0.0.11:9092"}, resolve)
