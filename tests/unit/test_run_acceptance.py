"""kafka_ops.run_acceptance: a cleared scale-out or decommission tells its own work from anyone else's; the checks
take it (kafka_ops.reassignment.check_scale_out / check_decommission)."""

from __future__ import annotations

import json

import pytest
from kafka_ops.cluster import Broker, ClusterState, Partition
from kafka_ops.reassignment import check_decommission, check_scale_out
from kafka_ops.run_acceptance import OwnWork, acceptance, own_work

AT = "2026-12-06 04:30:00 UTC"


def brokers(*ids):
    return tuple(Broker(i, f"h{i}", 9092) for i in ids)


def p(topic, partition, replicas):
    return Partition(topic, partition, replicas[0], tuple(replicas), tuple(replicas))


def state(bs, *partitions):
    return ClusterState(brokers=bs, partitions=tuple(partitions), controller_id=bs[0].id)


BEFORE_SCALE_OUT = state(brokers(0, 1, 2, 3), p("t", 0, [0, 1, 2]), p("t", 1, [1, 2, 0]), p("t", 2, [2, 0, 1]))
AFTER_SCALE_OUT = state(brokers(0, 1, 2, 3), p("t", 0, [3, 1, 2]), p("t", 1, [1, 2, 0]), p("t", 2, [2, 0, 3]))
BEFORE_DECOMMISSION = state(brokers(0, 1, 2, 3), p("t", 0, [0, 1, 2]), p("t", 1, [3, 2, 0]))
AFTER_DECOMMISSION = state(brokers(0, 1, 2), p("t", 0, [0, 1, 2]), p("t", 1, [1, 2, 0]))


def test_the_record_holds_what_the_first_accepted_try_found_and_survives_json():
    record = acceptance("scale-out", [3, 4], BEFORE_SCALE_OUT, AT)
    assert record == {"version": 1, "mode": "scale-out", "brokers": [3, 4], "registered": [3],
                      "replicas": {"3": 0, "4": 0}, "at": AT}
    assert json.loads(json.dumps(record)) == record
    assert acceptance("decommission", [3], BEFORE_DECOMMISSION, AT)["replicas"] == {"3": 1}


def test_a_cleared_scale_out_counts_the_replicas_it_moved_to_its_new_broker_and_the_check_accepts_them():
    record = acceptance("scale-out", [3], BEFORE_SCALE_OUT, AT)
    own = own_work(record, "scale-out", [3], AFTER_SCALE_OUT)
    assert own == OwnWork(moved_here=(3,), lines=(
        f"broker 3 holds 2 replicas this run moved to it (it held none when the run was accepted at {AT}): "
        "resuming",))
    assert check_scale_out(AFTER_SCALE_OUT, [3], moved_here=own.moved_here) == []
    # without the record (a new run) the same cluster is refused as before
    assert own_work(None, "scale-out", [3], AFTER_SCALE_OUT) == OwnWork()
    assert check_scale_out(AFTER_SCALE_OUT, [3]) == [
        "broker 3 already holds 2 replicas: this is a rebalance, not a scale-out"]


def test_replicas_a_new_broker_held_before_the_run_are_not_the_runs():
    record = acceptance("scale-out", [3], AFTER_SCALE_OUT, AT)  # broker 3 held 2 when the run was accepted
    assert own_work(record, "scale-out", [3], AFTER_SCALE_OUT) == OwnWork()


def test_a_cleared_decommission_counts_the_brokers_it_stopped_and_is_done_when_all_are():
    record = acceptance("decommission", [3], BEFORE_DECOMMISSION, AT)
    own = own_work(record, "decommission", [3], AFTER_DECOMMISSION)
    assert own.stopped == (3,) and own.lines == (
        f"broker 3 was drained and stopped by this run (registered when the run was accepted at {AT}; now "
        "unregistered and holding no replica)",)
    assert check_decommission(AFTER_DECOMMISSION, [3], stopped_by_run=own.stopped) == []
    assert own.decommission_done([3]) and not own.decommission_done([3, 4]) and not own.decommission_done([])
    # a new run of the same brokers: unknown, as before
    assert check_decommission(AFTER_DECOMMISSION, [3]) == [
        "unknown broker ids [3]: not registered and holding no replicas (registered: [0, 1, 2])"]


def test_a_decommission_whose_stop_stopped_part_of_its_brokers_is_refused_naming_those_left():
    before = state(brokers(0, 1, 2, 3, 4), p("t", 0, [0, 1, 2]), p("t", 1, [3, 4, 0]))
    now = state(brokers(0, 1, 2, 4), p("t", 0, [0, 1, 2]), p("t", 1, [1, 2, 0]))
    own = own_work(acceptance("decommission", [3, 4], before, AT), "decommission", [3, 4], now)
    assert own.stopped == (3,) and not own.decommission_done([3, 4])
    assert check_decommission(now, [3, 4], stopped_by_run=own.stopped) == [
        "brokers [3] were drained and stopped by an earlier try of this run, brokers [4] were not: trigger a "
        "decommission of [4] (this run's plan cannot drain brokers no longer registered)"]


def test_a_kraft_broker_stopped_but_still_registered_is_left_to_the_usual_check():
    # fenced: registered but down; the run's stop step goes on to unregister it
    record = acceptance("decommission", [3], BEFORE_DECOMMISSION, AT)
    assert own_work(record, "decommission", [3], AFTER_DECOMMISSION, fenced=[3]) == OwnWork()
    assert check_decommission(AFTER_DECOMMISSION, [3], fenced=[3]) == []


def test_a_broker_gone_but_still_holding_replicas_was_not_drained_by_the_run():
    crashed = state(brokers(0, 1, 2), p("t", 0, [0, 1, 2]), p("t", 1, [3, 2, 0]))
    record = acceptance("decommission", [3], BEFORE_DECOMMISSION, AT)
    assert own_work(record, "decommission", [3], crashed) == OwnWork()


def test_a_broker_never_registered_during_the_run_was_not_stopped_by_it():
    record = acceptance("decommission", [3], AFTER_DECOMMISSION, AT)  # 3 already gone when accepted
    assert own_work(record, "decommission", [3], AFTER_DECOMMISSION) == OwnWork()


@pytest.mark.parametrize("change", [
    {"mode": "decommission"}, {"brokers": [3, 4]}, {"version": 2}, {"brokers": "3"}, {"registered": None},
    {"replicas": {"3": "many"}}, {"replicas": []}, {"brokers": [True]},
])
def test_a_record_of_another_run_or_a_broken_one_counts_nothing(change):
    record = {**acceptance("scale-out", [3], BEFORE_SCALE_OUT, AT), **change}
    assert own_work(record, "scale-out", [3], AFTER_SCALE_OUT) == OwnWork()


def test_no_record_at_all_counts_nothing():
    assert own_work(None, "decommission", [3], AFTER_DECOMMISSION) == OwnWork()
    assert own_work(["not", "a", "record"], "decommission", [3], AFTER_DECOMMISSION) == OwnWork()
