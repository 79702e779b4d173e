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
from kafka_ops.roll_spec import ClusterMode
from operators.broker_roll import BrokerRollOperator


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
    assert op._quorum_gate([]) == [] and admin.asked == 0, "no voter in the batch: DescribeQuorum is not asked"
    admin.quorum = quorum(leader=0, lagging=2)
    [verdict] = op._quorum_gate([1])
    assert not verdict.ok
    said = verdict.message()
    assert "quorum without controller 1" in said and "without it 1 of 3 voters caught up (needs 2" in said, said
    assert "lagging: 2 (last caught up 30000 ms before the leader" in said, said
    admin.quorum = quorum(leader=0)
    assert [v.ok for v in op._quorum_gate([1])] == [True]
    with caplog.at_level(logging.INFO):
        assert [v.ok for v in op._quorum_gate([0])] == [True]
        assert [v.ok for v in op._quorum_gate([0])] == [True]
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
