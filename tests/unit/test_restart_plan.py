"""Restart order (controller last, subsets, validation), its reasons, and who is down.

(``resolve_groups`` is tested in tests/unit/test_components_pure.py; resume is the roll's own record now:
tests/unit/test_roll.py.)
"""

import pytest
from kafka_ops.restart_plan import down_brokers, plan_restart, reassignment_hold, reassignment_refusal, restart_order


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


def test_plan_restart_reasons_name_the_controller():
    plan = plan_restart([1, 2, 3], controller_id=1)
    assert plan.order == [2, 3, 1]
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


def test_plan_restart_reasons_for_a_subset_and_an_untouched_order():
    plan = plan_restart([1, 2, 3], controller_id=2, requested=[2, 3])
    assert plan.order == [3, 2]
    assert plan.reasons == ["requested brokers: [2, 3]", "broker 2 goes last: it is the controller"]
    plan = plan_restart([1, 2, 3], controller_id=2)
    assert plan.reasons == ["all registered brokers, by id: [1, 2, 3]", "broker 2 goes last: it is the controller"]
    assert plan_restart([1, 2], None).controller_id == -1


# -- who is down -------------------------------------------------------------------------------------


def test_nobody_down_means_no_refusal():
    assert down_brokers([0, 1, 2], [0, 1, 2], None) == []
    assert down_brokers([0, 1, 2], [0, 1, 2], [1]) == []
    # a live broker without replicas (a spare) is not down either
    assert down_brokers([0, 1, 2, 3], [0, 1, 2], []) == []


@pytest.mark.parametrize("requested", [None, []])
def test_all_brokers_refused_while_any_is_down(requested):
    refusals = down_brokers([0, 2], [0, 1, 2, 4], requested)
    assert refusals == ["brokers [1, 4] are down (they hold replicas but are not registered): a roll of every "
                        "broker would leave them out; start them first, or name the brokers to restart"]


def test_naming_a_down_broker_is_refused_for_each_one_named():
    assert down_brokers([0, 2], [0, 1, 2, 4], [4, 0, 1]) == [
        "broker 1 is down (it holds replicas but is not registered): start it first",
        "broker 4 is down (it holds replicas but is not registered): start it first",
    ]


def test_naming_only_live_brokers_while_another_is_down_is_left_to_the_gate():
    assert down_brokers([0, 2], [0, 1, 2], [2, 0]) == []


def test_down_brokers_takes_any_iterables():
    live = (b for b in [0, 1])
    replicas = {0, 1, 2}
    assert down_brokers(live, replicas, None)[0].startswith("brokers [2] are down")


def test_a_reassignment_in_progress_refuses_the_roll_naming_its_partitions():
    assert reassignment_refusal([]) is None
    one = [{"topic": "orders", "partition": 3, "replicas": [1, 2, 3, 4], "adding_replicas": [4],
            "removing_replicas": [3]}]
    assert reassignment_refusal(one) == (
        "a partition reassignment is in progress (1 partition: orders-3: adding [4], removing [3]): its new "
        "replicas stay out of sync until it ends, so every gate would wait on them; let it finish "
        "(kafka-reassign-partitions.sh --verify) or cancel it (--cancel), then trigger the roll again")
    many = [{"topic": "t", "partition": p, "adding_replicas": [5], "removing_replicas": []} for p in range(7)]
    refusal = reassignment_refusal(many, limit=2)
    assert refusal.startswith("a partition reassignment is in progress (7 partitions: t-0: adding [5], removing []; "
                              "t-1: adding [5], removing []; 5 more): ")


def test_a_reassignment_seen_when_a_gate_gives_up_is_named_as_started_during_the_roll():
    assert reassignment_hold([]) is None
    many = [{"topic": "t", "partition": p, "adding_replicas": [5], "removing_replicas": [1]} for p in range(3)]
    assert reassignment_hold(many, limit=1) == (
        "a partition reassignment started during the roll is in progress (3 partitions: t-0: adding [5], removing [1]; "
        "2 more): its new replicas stay out of sync until it ends; let it finish or cancel it "
        "(kafka-reassign-partitions.sh --cancel), then clear this task")
