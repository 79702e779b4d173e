"""``kafka_ops.throttle_headroom``: a moved partition's write rate from two size readings, and the brokers a
replication throttle is too low for (their new replicas could never catch up with the writes)."""

from __future__ import annotations

import pytest
from kafka_ops.plan_files import Move, Wave
from kafka_ops.throttle_headroom import Shortfall, format_rate, throttle_shortfalls, write_rates

A = Move("orders", 0, replicas=(1, 2, 4), current=(1, 2, 3), size_bytes=1_000_000)  # adds broker 4
B = Move("orders", 1, replicas=(2, 4, 1), current=(2, 3, 1), size_bytes=2_000_000)  # adds broker 4
C = Move("clicks", 0, replicas=(5, 1), current=(3, 1), size_bytes=500)  # adds broker 5
REORDER = Move("audit", 0, replicas=(2, 1), current=(1, 2), size_bytes=9_000)  # copies nothing
UNKNOWN = Move("audit", 1, replicas=(4, 1), current=(3, 1), size_bytes=0)  # the snapshot had no size


def test_write_rates_are_the_growth_over_the_seconds_between_readings() -> None:
    now = {A.key: 1_100_000, B.key: 1_900_000, C.key: 500, REORDER.key: 10_000, UNKNOWN.key: 7_000}
    assert write_rates([A, B, C, REORDER, UNKNOWN], now, 10.0) == {
        A.key: 10_000.0, B.key: 0.0, C.key: 0.0, REORDER.key: 100.0}, "a shrunk size is 0, an unknown one not judged"
    assert write_rates([A], {}, 10.0) == {}, "a partition gone is not judged"
    with pytest.raises(ValueError):
        write_rates([A], {A.key: 1}, 0)


def test_a_receiving_broker_needs_the_sum_of_its_new_replicas_write_rates() -> None:
    wave = Wave(1, (A, B, C, REORDER), 0)
    rates = {A.key: 30_000.0, B.key: 25_000.0, C.key: 1_000.0, REORDER.key: 1e9}
    leaders = {A.key: 1, B.key: 2, C.key: 3, REORDER.key: 1}
    assert throttle_shortfalls([wave], rates, leaders, 50_000) == [
        Shortfall(1, 4, "follower", 55_000.0, ("orders-0", "orders-1"))], "the order-only move is not throttled"
    assert throttle_shortfalls([wave], rates, leaders, 55_000) == [], "equal is enough: the need is not above it"
    assert throttle_shortfalls([wave], rates, leaders, 60_000) == []


def test_a_leader_feeding_several_new_replicas_counts_each() -> None:
    two = Move("orders", 2, replicas=(1, 4, 5), current=(1, 2, 3), size_bytes=1)  # leader 1 feeds brokers 4 and 5
    short = throttle_shortfalls([Wave(2, (two,), 0)], {two.key: 30_000.0}, {two.key: 1}, 50_000)
    assert short == [Shortfall(2, 1, "leader", 60_000.0, ("orders-2",))]
    assert short[0].describe(50_000) == ("wave 2: broker 1 leads, for the replicas it feeds, partitions written at "
                                         "60.0 kB/s in all (orders-2), above the throttle of 50.0 kB/s")


def test_waves_are_judged_apart_and_named_fastest_first() -> None:
    waves = [Wave(1, (A,), 0), Wave(2, (B,), 0)]
    rates = {A.key: 40_000.0, B.key: 40_000.0}
    assert [s.wave for s in throttle_shortfalls(waves, rates, {}, 50_000)] == []
    both = Wave(1, (A, B), 0)
    (short,) = throttle_shortfalls([both], {A.key: 10_000.0, B.key: 45_000.0}, {}, 50_000)
    assert short.partitions == ("orders-1", "orders-0") and short.describe(50_000).startswith(
        "wave 1: broker 4 receives partitions written at 55.0 kB/s in all (orders-1, orders-0), above the throttle")


def test_rates_read_the_way_kafka_tools_count() -> None:
    assert [format_rate(r) for r in (1, 312.4, 40_000, 1_234_567)] == ["1 bytes/s", "312 bytes/s", "40.0 kB/s",
                                                                      "1.2 MB/s"]
