"""Restart order (controller last, subsets, validation), batches, and the resume rule."""

from datetime import UTC, datetime, timedelta, timezone

import pytest
from kafka_ops.restart_plan import (
    already_restarted,
    batches,
    pending_brokers,
    plan_restart,
    restart_order,
    to_epoch_ms,
)


def test_all_brokers_sorted_with_controller_last():
    assert restart_order([3, 1, 2], controller_id=2) == [1, 3, 2]
    assert restart_order([3, 1, 2], controller_id=3, requested=[]) == [1, 2, 3]


def test_all_brokers_unknown_controller_keeps_id_order():
    assert restart_order([2, 1, 3], controller_id=None) == [1, 2, 3]
    assert restart_order([2, 1, 3], controller_id=-1) == [1, 2, 3]


def test_keep_order_does_not_apply_to_a_full_restart():
    assert restart_order([1, 2, 3], controller_id=1, keep_order=True) == [2, 3, 1]


def test_subset_keeps_given_order_but_moves_controller_last():
    assert restart_order([1, 2, 3, 4], controller_id=3, requested=[3, 4, 1]) == [4, 1, 3]
    assert restart_order([1, 2, 3, 4], controller_id=2, requested=[4, 1]) == [4, 1]


def test_subset_with_keep_order_is_untouched():
    assert restart_order([1, 2, 3], controller_id=3, requested=[3, 1], keep_order=True) == [3, 1]


def test_unknown_ids_are_all_named():
    with pytest.raises(ValueError, match=r"unknown broker ids \[7, 9\]; registered brokers are \[1, 2, 3\]"):
        restart_order([1, 2, 3], controller_id=1, requested=[7, 1, 9])


def test_duplicates_rejected():
    with pytest.raises(ValueError, match=r"duplicate broker ids in the restart list: \[2\]"):
        restart_order([1, 2, 3], controller_id=1, requested=[2, 3, 2])


@pytest.mark.parametrize("bad", [["1"], [1.0], [True]])
def test_non_integer_ids_rejected(bad):
    with pytest.raises(ValueError, match="must be integer broker ids"):
        restart_order([1, 2], controller_id=1, requested=bad)


def test_batches_of_one_and_more():
    assert batches([4, 1, 3]) == [[4], [1], [3]]
    assert batches([1, 2, 3], 2) == [[1, 2], [3]]
    assert batches([]) == []
    with pytest.raises(ValueError, match="batch size must be >= 1"):
        batches([1], 0)


def test_plan_restart_reasons_name_the_controller():
    plan = plan_restart([1, 2, 3], controller_id=1)
    assert plan.order == [2, 3, 1]
    assert plan.batches == [[2], [3], [1]]
    assert plan.controller_id == 1
    assert "broker 1 goes last: it is the controller" in plan.reasons


def test_plan_restart_keep_order_and_absent_controller():
    plan = plan_restart([1, 2, 3], controller_id=1, requested=[1, 2], keep_order=True)
    assert plan.order == [1, 2]
    assert any("keep_order keeps it at position 1" in r for r in plan.reasons)
    plan = plan_restart([1, 2, 3], controller_id=3, requested=[2, 1])
    assert plan.order == [2, 1]
    assert "controller 3 is not restarted" in plan.reasons
    assert "controller unknown: no reordering" in plan_restart([1], None).reasons


def test_plan_restart_propagates_validation_errors():
    with pytest.raises(ValueError, match="unknown broker ids"):
        plan_restart([1], 1, requested=[5])


# -- resume ----------------------------------------------------------------------------------------


def test_to_epoch_ms():
    assert to_epoch_ms(datetime(1970, 1, 1, 0, 0, 1, 500000, tzinfo=UTC)) == 1500
    assert to_epoch_ms(datetime(1970, 1, 1, 1, 0, 0, tzinfo=timezone(timedelta(hours=1)))) == 0
    with pytest.raises(ValueError, match="timezone-aware"):
        to_epoch_ms(datetime(2026, 1, 1))


def test_already_restarted_rule():
    start = 1_000_000
    assert already_restarted(start, start)  # registered exactly at the run start: counts
    assert already_restarted(start + 1, start)
    assert not already_restarted(start - 1, start)
    assert not already_restarted(None, start)  # not registered = down, not restarted yet


def test_pending_brokers_skips_restarted_ones_and_keeps_order():
    start = 5000
    ts = {1: 6000, 2: 4000, 3: None}
    assert pending_brokers([2, 3, 1, 4], ts, start) == [2, 3, 4]
    assert pending_brokers([1], {1: 5000}, start) == []
