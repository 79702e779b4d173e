"""The quorum leader's batch last in a broker roll of KRaft combined nodes, decided at each turn
(``kafka_ops.combined_roll``), and the roll record regrouped in the new order (``RollRecord.regrouped``)."""

from __future__ import annotations

import pytest
from kafka_ops.combined_roll import leader_batch_last, must_go_later
from kafka_ops.roll import RollRecord

BATCHES = [[0, 3], [1, 4], [2, 5]]
VOTERS = {0, 1, 2}


def test_the_batch_holding_the_leader_at_its_turn_moves_to_the_end():
    moved, why = leader_batch_last(BATCHES, 0, 0, VOTERS)
    assert moved == [[1, 4], [2, 5], [0, 3]]
    assert "broker 0 is the quorum leader now and voters [1, 2] of this roll are still to go" in why
    assert "its batch (brokers 0, 3) goes last, brokers 1, 4 takes position 1/3" in why
    moved, _ = leader_batch_last(BATCHES, 1, 1, VOTERS, done=[0, 3])
    assert moved == [[0, 3], [2, 5], [1, 4]]


@pytest.mark.parametrize(("position", "leader", "done", "begun", "why"), [
    (0, 2, (), (), "the leader's batch is later: its own turn decides"),
    (0, 7, (), (), "the leader is no broker of the roll (a dedicated controller)"),
    (0, -1, (), (), "no leader"),
    (2, 2, (0, 1, 3, 4), (), "the last batch"),
    (0, 0, (1, 2), (), "every other voter is done"),
    (0, 0, (), (3,), "a batch the roll began keeps its place"),
])
def test_nothing_moves(position, leader, done, begun, why):
    assert leader_batch_last(BATCHES, position, leader, VOTERS, done, begun) == (BATCHES, None), why


def test_later_batches_without_voters_do_not_move_the_leader():
    batches = [[0, 3], [4], [5]]
    assert leader_batch_last(batches, 0, 0, {0}) == (batches, None)


def test_a_position_outside_the_roll_is_refused():
    with pytest.raises(ValueError, match="position 3 outside the roll's 3 batches"):
        leader_batch_last(BATCHES, 3, 0, VOTERS)


def test_must_go_later_names_the_voters_left():
    assert must_go_later(0, [0], VOTERS, [0, 1, 2, 3]) == (
        "broker 0 became the quorum leader (the active controller) and voters [1, 2] of this roll remain: its batch "
        "goes last")
    assert must_go_later(1, [0], VOTERS, [0, 1, 2]) is None, "the leader is not in the batch"
    assert must_go_later(0, [0], VOTERS, [0, 3]) is None, "no other voter left"


def test_a_record_regrouped_keeps_its_progress_and_renumbers_its_steps():
    steps = tuple({"id": b, "host": f"h{b}", "position": i + 1, "total": 4, "batch": i // 2 + 1}
                  for i, b in enumerate([0, 3, 1, 4]))
    record = RollRecord("restart", 5, steps).mark(3, "done", 9)
    regrouped = record.regrouped([[1, 4], [0, 3]])
    assert regrouped.batches == [[1, 4], [0, 3]] and regrouped.is_done(3) and regrouped.began_ms == 5
    assert [(s["id"], s["position"], s["batch"], s["host"], s["total"]) for s in regrouped.steps] == [
        (1, 1, 1, "h1", 4), (4, 2, 1, "h4", 4), (0, 3, 2, "h0", 4), (3, 4, 2, "h3", 4)]
    assert RollRecord.from_dict(regrouped.to_dict()) == regrouped
    for bad in ([[1, 4], [0]], [[1, 4], [0, 3, 3]], [[1, 4, 0, 3], []], [[1, 4], [0, 9]]):
        with pytest.raises(ValueError, match="do not hold the roll's brokers"):
            record.regrouped(bad)
