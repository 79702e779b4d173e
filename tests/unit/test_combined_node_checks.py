"""What the broker roll adds for a KRaft combined node (a broker that is a quorum voter too; its plan step says
``"voter": True``): the quorum check in its gate (``BrokerRollOperator._quorum_gate``) and, in a batch that holds
the quorum leader, the leader's stop after its batch-mates are gone (``_stop_groups``). The cluster is a fake whose
DescribeQuorum answer the test sets; the whole roll on real Kafka in combined mode is proven by
``tests/dags/test_kraft_operations.py``."""

from __future__ import annotations

import logging
import time

import pytest
from kafka_ops.quorum import Quorum, Voter
from kafka_ops.roll import RollRecord
from kafka_ops.roll_spec import ClusterMode
from operators.broker_roll import BrokerRollOperator, LeaderMoved


class Admin:
    def __init__(self) -> None:
        self.quorum: Quorum | None = None
        self.asked = 0

    def describe_quorum(self) -> Quorum:
        self.asked += 1
        assert self.quorum is not None
        return self.quorum


def quorum(leader: int, lagging: int | None = None) -> Quorum:
    """Voters 0, 1, 2 led by ``leader``; ``lagging`` last caught up 30 s before the leader."""
    now = int(time.time() * 1000)
    return Quorum(leader, 3, 500, tuple(Voter(v, 500, now, now - 30_000 if v == lagging else now) for v in (0, 1, 2)))


def record(*batches: list[int], voters: tuple[int, ...] = (0, 1, 2)) -> RollRecord:
    """A roll record of ``batches`` (broker ids; ``voters`` are combined nodes), nothing done."""
    steps = [{"id": b, "host": f"h{b}", "batch": n, **({"voter": True} if b in voters else {})}
             for n, batch in enumerate(batches, start=1) for b in batch]
    return RollRecord("restart", 0, tuple(steps))


class Store:
    def __init__(self) -> None:
        self.saved: list[RollRecord] = []

    def save(self, record: RollRecord) -> None:
        self.saved.append(record)


@pytest.fixture
def op() -> BrokerRollOperator:
    op = BrokerRollOperator(task_id="broker", roll_id="restart", settings={"cluster": "c"},
                            batch={"batch": 1, "batches": 1, "label": "brokers", "brokers": []})
    op.resolve({"params": {}})
    op.prober = type("Prober", (), {"admin": Admin()})()
    op._context = {}
    return op


def test_the_gate_of_a_combined_node_holds_while_the_quorum_could_not_spare_it(op, capsys, caplog):
    admin = op.prober.admin
    roll = record([1], [0], voters=(0, 1))  # voter 2 is not in this roll
    assert op._quorum_gate([], roll) == [] and admin.asked == 0, "no voter in the batch: DescribeQuorum is not asked"
    admin.quorum = quorum(leader=0, lagging=2)
    [verdict] = op._quorum_gate([1], roll)
    assert not verdict.ok
    said = verdict.message()
    assert "quorum without controller 1" in said and "without it 1 of 3 voters caught up (needs 2" in said, said
    assert "lagging: 2 (last caught up 30000 ms before the leader" in said, said
    admin.quorum = quorum(leader=0)
    assert [v.ok for v in op._quorum_gate([1], roll)] == [True]
    done = roll.mark(1, "done", 1)
    with caplog.at_level(logging.INFO):
        assert [v.ok for v in op._quorum_gate([0], done)] == [True]
        assert [v.ok for v in op._quorum_gate([0], done)] == [True]
    said = capsys.readouterr().out + caplog.text
    assert said.count("broker 0 is the quorum leader: its stop moves the leadership to another voter") == 1


def test_a_batch_holding_the_quorum_leader_stops_it_once_its_batch_mates_are_gone(op, monkeypatch):
    monkeypatch.setattr(op, "mode", lambda context, admin: ClusterMode.KRAFT)
    op.prober.admin.quorum = quorum(leader=1)
    with_leader = {3: {"id": 3}, 1: {"id": 1, "voter": True}}
    assert op._stop_groups(with_leader) == [[3], [1]]
    op.prober.admin.quorum = quorum(leader=0)
    assert op._stop_groups(with_leader) == [[3, 1]], "the leader is elsewhere: one group"
    asked = op.prober.admin.asked
    assert op._stop_groups({3: {"id": 3}, 4: {"id": 4}}) == [[3, 4]]
    assert op.prober.admin.asked == asked, "no voter in the batch: DescribeQuorum is not asked"


def test_a_gate_whose_voter_became_the_quorum_leader_gives_the_turn_back_while_other_voters_remain(op):
    roll = record([0, 3], [1, 4], [2, 5])
    op.prober.admin.quorum = quorum(leader=1)
    assert [v.ok for v in op._quorum_gate([0], roll)] == [True], "a follower's batch goes on"
    op.prober.admin.quorum = quorum(leader=0)
    with pytest.raises(LeaderMoved, match=r"broker 0 became the quorum leader .* voters \[1, 2\] of this roll remain"):
        op._quorum_gate([0], roll)
    last = roll.mark(1, "done", 1).mark(2, "done", 1)
    assert [v.ok for v in op._quorum_gate([0], last)] == [True], "the last voter of the roll may stop as the leader"


def test_the_batch_holding_the_quorum_leader_at_its_turn_goes_last_and_the_task_takes_the_next(op):
    op.batch = {"batch": 1, "batches": 3, "label": "brokers 0, 3", "grid_label": "brokers 0, 3 (1/3)",
                "brokers": [{"id": 0, "host": "h0", "batch": 1, "voter": True}, {"id": 3, "host": "h3", "batch": 1}]}
    store, roll = Store(), record([0, 3], [1, 4], [2, 5])
    op.prober.admin.quorum = quorum(leader=2)  # as planned: the leader's batch is last
    same, nodes = op._choose(store, roll, 0)
    assert same is roll and list(nodes) == [0, 3] and store.saved == []
    op.prober.admin.quorum = quorum(leader=0)  # Kafka moved the leadership onto this turn's voter
    moved, nodes = op._choose(store, roll, 0)
    assert moved.batches == [[1, 4], [2, 5], [0, 3]] and store.saved == [moved]
    assert list(nodes) == [1, 4] and nodes[1]["voter"] and nodes[1]["batch"] == 1
    assert op.batch["label"] == "brokers 1, 4" and op.batch["grid_label"] == "brokers 1, 4 (1/3)"
    assert [s["position"] for s in moved.steps] == [1, 2, 3, 4, 5, 6]
    begun = roll.mark(0, "stopping", 1)
    kept, nodes = op._choose(store, begun, 0)
    assert kept is begun and list(nodes) == [0, 3], "a batch the roll began keeps its place"


def test_a_batch_without_a_voter_does_not_ask_the_quorum(op):
    op.batch = {"batch": 1, "batches": 2, "label": "broker 3", "brokers": [{"id": 3, "host": "h3", "batch": 1}]}
    roll = record([3], [0])
    _, nodes = op._choose(Store(), roll, 0)
    assert list(nodes) == [3] and op.prober.admin.asked == 0


def test_keep_order_keeps_the_operators_order_when_the_leader_moves():
    op = BrokerRollOperator(task_id="broker", roll_id="restart",
                            settings={"cluster": "c", "brokers": [0, 1, 2], "keep_order": True},
                            batch={"batch": 1, "batches": 3, "label": "broker 0",
                                   "brokers": [{"id": 0, "host": "h0", "batch": 1, "voter": True}]})
    op.resolve({"params": {}})
    op.prober = type("Prober", (), {"admin": Admin()})()
    op._context = {}
    op.prober.admin.quorum = quorum(leader=0)
    roll, store = record([0], [1], [2]), Store()
    kept, nodes = op._choose(store, roll, 0)
    assert kept is roll and list(nodes) == [0] and store.saved == [] and op.prober.admin.asked == 0
    assert [v.ok for v in op._quorum_gate([0], roll)] == [True], "the operator's order: the leader goes first"
