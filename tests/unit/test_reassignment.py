"""Reassignment execution rules: throttles, progress, stuck waves, decommission and scale-out checks."""

from __future__ import annotations

import pytest
from hooks.kafka_admin import normalize_log_dirs
from kafka_ops.cluster import Broker, ClusterState, Partition
from kafka_ops.plan_files import Move, Wave
from kafka_ops.reassignment import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    MAX_RACK_REASONS,
    THROTTLE_BROKER_KEYS,
    THROTTLE_TOPIC_KEYS,
    Throttles,
    WaveProgress,
    check_decommission,
    check_scale_out,
    format_duration,
    leaders_on,
    ongoing_partitions,
    partitions_on,
    replica_sizes,
    stuck_partitions,
    throttle_configs,
    wave_progress,
    wave_throttles,
)


def wave_of(*moves, index=1):
    return Wave(index, tuple(moves), sum(m.size_bytes * len(m.adding) for m in moves))


# -- throttles ----------------------------------------------------------------------------------------------


def test_throttles_for_a_move_adding_one_replica_and_removing_one():
    t = wave_throttles(wave_of(Move("orders", 3, (1, 2, 4), (1, 2, 3))))
    assert t == Throttles(
        leader_replicas={"orders": ["3:1", "3:2", "3:3"]},  # every current replica may lead
        follower_replicas={"orders": ["3:4"]},  # the adding replica fetches
        brokers=(1, 2, 3, 4),
    )


def test_throttles_are_sorted_and_skip_reorders():
    t = wave_throttles(
        wave_of(
            Move("payments", 10, (7, 2), (2, 3)),
            Move("orders", 10, (5, 1), (1, 2)),
            Move("orders", 2, (1, 6), (1, 3)),
            Move("logs", 0, (9, 8), (8, 9)),  # reorder only: copies nothing
        )
    )
    assert list(t.leader_replicas) == ["orders", "payments"]
    assert t.leader_replicas["orders"] == ["2:1", "2:3", "10:1", "10:2"]
    assert t.follower_replicas == {"orders": ["2:6", "10:5"], "payments": ["10:7"]}
    assert t.brokers == (1, 2, 3, 5, 6, 7)
    assert wave_throttles(wave_of(Move("logs", 0, (9, 8), (8, 9)))) == Throttles({}, {}, ())


def test_throttle_configs():
    t = wave_throttles(wave_of(Move("orders", 3, (1, 2, 4), (1, 2, 3)), Move("orders", 0, (4, 2), (1, 2))))
    brokers, topics = throttle_configs(t, 50_000_000)
    assert brokers == {b: {LEADER_RATE: "50000000", FOLLOWER_RATE: "50000000"} for b in (1, 2, 3, 4)}
    assert topics == {"orders": {LEADER_REPLICAS: "0:1,0:2,3:1,3:2,3:3", FOLLOWER_REPLICAS: "0:4,3:4"}}
    assert THROTTLE_BROKER_KEYS == ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
    assert THROTTLE_TOPIC_KEYS == ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
    # a topic with entries on one side only gets that key only
    _, only_leader = throttle_configs(Throttles({"t": ["0:1"]}, {}, (1,)), 1)
    assert only_leader == {"t": {LEADER_REPLICAS: "0:1"}}


@pytest.mark.parametrize("rate", [0, -5, 1.5, True, "100"])
def test_throttle_rate_must_be_a_positive_integer(rate):
    with pytest.raises(ValueError, match="throttle rate must be a positive integer"):
        throttle_configs(Throttles({}, {}, ()), rate)


# -- replica sizes and ongoing reassignments -----------------------------------------------------------------


def test_replica_sizes_from_describe_log_dirs():
    raw = [
        {
            "broker": 4,
            "log_dirs": [
                {
                    "log_dir": "/data/a",
                    "error_code": 0,
                    "topics": [
                        {
                            "name": "orders",
                            "partitions": [
                                {"partition_index": 3, "partition_size": 700, "offset_lag": 0, "is_future_key": False},
                                {"partition_index": 0, "partition_size": 50, "offset_lag": 0, "is_future_key": True},
                            ],
                        }
                    ],
                },
                {"log_dir": "/data/b", "error_code": 57},
            ],
        },
        {
            "broker": 1,
            "log_dirs": [
                {
                    "log_dir": "/data/a",
                    "topics": [{"name": "orders", "partitions": [{"partition_index": 3, "partition_size": 1000}]}],
                }
            ],
        },
    ]
    assert replica_sizes(normalize_log_dirs(raw)) == {("orders", 3, 1): 1000, ("orders", 3, 4): 700}
    # the same replica in two log dirs: the larger size counts
    rows = [
        {"broker": 1, "log_dir": "/a", "topic": "t", "partition": 0, "size_bytes": 5, "is_future": False},
        {"broker": 1, "log_dir": "/b", "topic": "t", "partition": 0, "size_bytes": 9, "is_future": False},
    ]
    assert replica_sizes(rows) == {("t", 0, 1): 9}


def test_ongoing_partitions():
    listed = [{"topic": "orders", "partition": 3, "replicas": [1, 4], "adding_replicas": [4], "removing_replicas": []}]
    assert ongoing_partitions(listed) == {("orders", 3)}
    assert ongoing_partitions([]) == set()


# -- progress ----------------------------------------------------------------------------------------------------

GB = 1_000_000_000


def progress_wave():
    """orders-0 adds 4 (1 GB), orders-1 adds 4 and 5 (2 x 0.5 GB), orders-2 adds 6 (0.2 GB): 2.2 GB."""
    return wave_of(
        Move("orders", 0, (1, 2, 4), (1, 2, 3), GB),
        Move("orders", 1, (4, 5, 1), (1, 2, 3), GB // 2),
        Move("orders", 2, (6, 2), (1, 2), GB // 5),
        index=2,
    )


def test_progress_with_partial_copies_and_a_finished_partition():
    sizes = {
        ("orders", 0, 4): 300_000_000,  # partial
        ("orders", 1, 4): 600_000_000,  # grew past the snapshot size: capped at 0.5 GB
        ("orders", 1, 5): 100_000_000,
        ("orders", 2, 6): 1234,  # done: counted in full whatever DescribeLogDirs says
        ("orders", 0, 1): GB,  # an existing replica: not counted
    }
    ongoing = {("orders", 0), ("orders", 1), ("other", 7)}
    p = wave_progress(progress_wave(), sizes, ongoing, elapsed_s=100.0, waves_total=5)
    assert p.bytes_total == 2_200_000_000
    assert p.bytes_copied == 300_000_000 + 500_000_000 + 100_000_000 + 200_000_000
    assert (p.moves_done, p.moves_total, p.done) == (1, 3, False)
    assert p.rate_bytes_per_s == pytest.approx(11_000_000)
    assert p.eta_s == pytest.approx(1_100_000_000 / 11_000_000)
    assert p.describe() == (
        "wave 2/5: 1.1 of 2.2 GB copied (50 %), 1 of 3 moves done, 11.0 MB/s, about 1 min 40 s left"
    )


def test_progress_describe_matches_the_documented_example():
    p = WaveProgress(2, 5, 1_200_000_000, 400_000_000, 12, 34, 49.4, 8_100_000.0, 100.0)
    assert p.describe() == "wave 2/5: 0.4 of 1.2 GB copied (33 %), 12 of 34 moves done, 8.1 MB/s, about 1 min 40 s left"


def test_progress_without_elapsed_time_or_copies_has_no_rate_or_eta():
    wave = progress_wave()
    everything = {m.key for m in wave.moves}
    p = wave_progress(wave, {}, everything, elapsed_s=0)
    assert (p.bytes_copied, p.rate_bytes_per_s, p.eta_s) == (0, None, None)
    assert p.describe() == "wave 2: 0.0 of 2.2 GB copied (0 %), 0 of 3 moves done, time left unknown"
    p = wave_progress(wave, {}, everything, elapsed_s=30)
    assert (p.rate_bytes_per_s, p.eta_s) == (0.0, None)
    assert p.describe().endswith("0 of 3 moves done, 0.0 MB/s, time left unknown")


def test_progress_of_a_finished_wave():
    p = wave_progress(progress_wave(), {}, set(), elapsed_s=220, waves_total=5)
    assert p.done and p.bytes_copied == p.bytes_total and p.eta_s == 0
    assert p.describe() == "wave 2/5: 2.2 of 2.2 GB copied (100 %), 3 of 3 moves done, 10.0 MB/s, done"


def test_progress_in_mb_and_without_sizes():
    small = wave_of(Move("t", 0, (2,), (1,), 800_000_000))
    p = wave_progress(small, {("t", 0, 2): 350_000_000}, {("t", 0)}, elapsed_s=10, waves_total=1)
    assert p.describe() == "wave 1/1: 350.0 of 800.0 MB copied (43 %), 0 of 1 moves done, 35.0 MB/s, about 13 s left"
    unsized = wave_of(Move("t", 0, (2,), (1,)), Move("t", 1, (2,), (1,)))
    p = wave_progress(unsized, {("t", 0, 2): 10}, {("t", 0)}, elapsed_s=10, waves_total=3)
    assert (p.bytes_total, p.bytes_copied, p.eta_s) == (0, 0, None)
    assert p.describe() == "wave 1/3: sizes unknown, 1 of 2 moves done"


def test_progress_rejects_negative_elapsed():
    with pytest.raises(ValueError, match="elapsed_s must be >= 0"):
        wave_progress(progress_wave(), {}, set(), elapsed_s=-1)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0 s"), (40.4, "40 s"), (59.6, "1 min"), (100, "1 min 40 s"), (3600, "1 h"), (7500, "2 h 5 min")],
)
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text


def test_stuck_partitions_in_wave_order():
    wave = progress_wave()
    assert stuck_partitions(wave, {("orders", 2), ("orders", 0), ("other", 1)}) == ["orders-0", "orders-2"]
    assert stuck_partitions(wave, set()) == []


# -- decommission -----------------------------------------------------------------------------------------------


def brokers(*ids, racks=None):
    return tuple(Broker(i, f"h{i}", 9092, rack=(racks[i] if racks else None)) for i in ids)


def p(topic, partition, replicas, leader=None):
    return Partition(topic, partition, replicas[0] if leader is None else leader, tuple(replicas), tuple(replicas))


def state(bs, *partitions, controller_id=1):
    return ClusterState(brokers=bs, partitions=tuple(partitions), controller_id=controller_id)


FOUR = brokers(1, 2, 3, 4)
RF3 = (p("orders", 0, [1, 2, 3]), p("orders", 1, [2, 3, 4]), p("logs", 0, [4, 1]))


def test_decommission_ok_including_the_controller():
    assert check_decommission(state(FOUR, *RF3, controller_id=4), [4]) == []


def test_decommission_refuses_a_broker_that_is_a_kraft_voter_too():
    assert check_decommission(state(FOUR, *RF3), [4], voters=[100, 101, 102]) == [], "dedicated controllers"
    assert check_decommission(state(FOUR, *RF3), [4, 2], voters=[1, 2, 3]) == [
        "brokers [2] are voters of the KRaft metadata quorum [1, 2, 3] too (combined mode, "
        "process.roles=broker,controller): decommissioning them would stop quorum members for good while the quorum "
        "still counts them; remove them from the quorum first (KIP-853: kafka-metadata-quorum remove-controller) or "
        "decommission other brokers",
        "after removing [2, 4] only 2 brokers remain ([1, 3]), fewer than the replication factor 3 of topic orders",
    ]


def test_decommission_refuses_empty_and_duplicate_lists():
    assert check_decommission(state(FOUR, *RF3), []) == ["no brokers given to decommission"]
    assert check_decommission(state(FOUR, *RF3), [4, 3, 4]) == ["broker ids listed twice: [4]"]


def test_decommission_refuses_unknown_ids_naming_the_registered_ones():
    assert check_decommission(state(FOUR, *RF3), [9, 4, 7]) == [
        "unknown broker ids [9, 7]: not registered and holding no replicas (registered: [1, 2, 3, 4])"
    ]


def test_decommission_of_a_down_broker_holding_replicas_is_allowed():
    down = state(brokers(1, 2, 3), p("orders", 0, [1, 2, 5]), p("orders", 1, [5, 3, 1]))
    assert check_decommission(down, [5]) == []


def test_decommission_of_a_kraft_broker_stopped_without_being_unregistered_is_allowed():
    # broker 5 holds nothing and Metadata leaves it out, but the controller has it registered (fenced)
    assert check_decommission(state(FOUR, *RF3), [5], fenced=[5]) == []
    assert check_decommission(state(FOUR, *RF3), [5, 9], fenced=[5]) == [
        "unknown broker ids [9]: not registered and holding no replicas (registered: [1, 2, 3, 4]; registered but "
        "fenced: [5])"
    ]


def test_decommission_refuses_leaving_fewer_brokers_than_the_largest_rf():
    assert check_decommission(state(FOUR, *RF3), [4, 2]) == [
        "after removing [2, 4] only 2 brokers remain ([1, 3]), fewer than the replication factor 3 of topic orders"
    ]


RACKS = {1: "rack-a", 2: "rack-b", 3: "rack-c", 4: "rack-c", 5: "rack-a", 6: "rack-b", 7: "rack-a"}


def test_decommission_refuses_losing_rack_diversity():
    bs = brokers(1, 2, 3, 4, 5, 6, 7, racks=RACKS)
    st = state(
        bs,
        p("orders", 0, [1, 2, 3]),  # 3 racks
        p("orders", 1, [5, 6, 4]),  # 3 racks
        p("logs", 0, [1, 5, 2]),  # 2 racks: fine with 2 left
        p("audit", 0, [2, 4]),  # 2 racks
    )
    assert check_decommission(st, [3, 4]) == [
        "rack diversity: after removing [3, 4] only racks [rack-a, rack-b] remain, fewer than this topic spans: "
        "orders (RF 3 over 3 racks)"
    ]
    assert check_decommission(st, [3]) == []  # rack-c keeps broker 4
    assert check_decommission(st, [2, 6, 3, 4]) == [
        "rack diversity: after removing [2, 3, 4, 6] only racks [rack-a] remain, fewer than these topics span: "
        "audit (RF 2 over 2 racks), logs (RF 3 over 2 racks), orders (RF 3 over 3 racks)",
    ]


def test_decommission_rack_reasons_are_capped():
    bs = brokers(1, 2, 3, 4, 5, 6, racks=RACKS)
    parts = [p(f"t{i:02d}", 0, [1, 2, 3]) for i in range(MAX_RACK_REASONS + 3)]
    reasons = check_decommission(state(bs, *parts), [3, 4])
    assert len(reasons) == 1
    assert reasons[0].startswith("rack diversity: after removing [3, 4] only racks [rack-a, rack-b] remain, fewer "
                                 "than these topics span: t00 (RF 3 over 3 racks), t01 (RF 3 over 3 racks),")
    assert f"t{MAX_RACK_REASONS - 1:02d} (RF 3 over 3 racks) and 3 more topics" in reasons[0]
    assert f"t{MAX_RACK_REASONS:02d}" not in reasons[0]


def test_decommission_without_racks_has_no_rack_rule():
    assert check_decommission(state(brokers(1, 2, 3, 4, 5), p("t", 0, [1, 2, 3])), [3, 4]) == []


# -- scale-out --------------------------------------------------------------------------------------------------


def test_scale_out_ok():
    st = state(brokers(1, 2, 3, 4), *RF3[:1])
    assert check_scale_out(st, [4]) == []  # registered, empty
    assert check_scale_out(st, [5, 6]) == []  # not started yet
    assert check_scale_out(st, [4], registered_ok=False) == []


def test_scale_out_refusals():
    st = state(FOUR, *RF3)
    assert check_scale_out(st, []) == ["no new brokers given"]
    assert check_scale_out(st, [5, -1]) == ["broker ids must be >= 0, got [-1]"]
    assert check_scale_out(st, [5, 6, 5]) == ["broker ids listed twice: [5]"]
    assert check_scale_out(st, [4, 5]) == ["broker 4 already holds 2 replicas: this is a rebalance, not a scale-out"]


def test_scale_out_refuses_a_down_broker():
    st = state(brokers(1, 2), p("t", 0, [1, 2, 3]))
    assert check_scale_out(st, [3]) == [
        "broker 3 is not registered but still holds 1 replicas: a down broker, not a new one"
    ]


def test_scale_out_requires_registration_when_asked():
    st = state(FOUR, *RF3)
    assert check_scale_out(st, [5, 6], registered_ok=False) == [
        "new brokers [5, 6] are not registered (registered: [1, 2, 3, 4]): start them first, or set "
        "start_new_brokers to have the run start them (hosts from the connection's broker_hosts)"
    ]


def test_a_kraft_controller_id_is_named_as_one_by_a_scale_out_and_a_decommission():
    """A dedicated controller's id (a voter, no broker) given as a broker: said what it is, not "start it first"
    or "unknown"; a combined node (a voter that is a broker too) keeps the broker rules."""
    st = state(FOUR, *RF3)
    assert check_scale_out(st, [5, 100], registered_ok=False, voters=[100, 101, 102]) == [
        "[100] is a KRaft controller (a voter of the metadata quorum), not a broker: a controller holds no "
        "partitions; give the ids of new brokers",
        "new brokers [5] are not registered (registered: [1, 2, 3, 4]): start them first, or set "
        "start_new_brokers to have the run start them (hosts from the connection's broker_hosts)"]
    assert check_decommission(st, [100, 101], voters=[100, 101, 102]) == [
        "[100, 101] are KRaft controllers (voters of the metadata quorum), not brokers: a decommission drains and "
        "stops brokers; a controller leaves the quorum with kafka-metadata-quorum remove-controller (KIP-853)"]
    empty_4 = state(brokers(1, 2, 3, 4), *RF3[:1])
    assert check_scale_out(empty_4, [4], voters=[4]) == [], "a combined node: a registered broker"


# -- holds and leads nothing -------------------------------------------------------------------------------------


def test_partitions_and_leaders_on():
    st = state(FOUR, p("orders", 0, [1, 2, 3], leader=2), p("orders", 1, [2, 3, 4]), p("logs", 0, [4, 1]))
    assert partitions_on(st, [4]) == ["logs-0", "orders-1"]
    assert partitions_on(st, {3, 4}) == ["logs-0", "orders-0", "orders-1"]
    assert leaders_on(st, [2]) == ["orders-0", "orders-1"]
    assert leaders_on(st, [3]) == []
    assert partitions_on(st, []) == [] and leaders_on(st, ()) == []
