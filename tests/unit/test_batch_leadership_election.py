"""The leadership step after a batch is back (``BrokerRollOperator._leadership``): one preferred-leader election for
the batch's partitions, not asked again while the brokers' metadata still shows the old leaders (a look right after
the ElectLeaders answer), asked again if they are still not led by their preferred replica after the grace
(``ELECTED_GRACE_S``). The cluster is a fake prober whose metadata lags the election; the election on real Kafka is
proven by the batched-roll DAG tests."""

from __future__ import annotations

import logging

import pytest
from kafka_ops.cluster import Broker, ClusterState, Partition
from operators import broker_roll
from operators.broker_roll import BrokerRollOperator


class Admin:
    def __init__(self) -> None:
        self.elections: list[list[tuple[str, int]]] = []

    def elect_preferred_leaders(self, partitions):
        self.elections.append(list(partitions))
        return {f"{t}-{p}": None for t, p in partitions}


class LaggingProber:
    """Metadata in which brokers 1 and 4 (just back, in every ISR) lead none of their preferred partitions."""

    def __init__(self) -> None:
        self.admin = Admin()

    def state(self, configs: bool = False) -> ClusterState:
        brokers = tuple(Broker(b, f"h{b}", 9092, None) for b in range(6))
        partitions = tuple(Partition("t", i, leader=2, replicas=(pref, 2, 3), isr=(pref, 2, 3))
                           for i, pref in enumerate((1, 4, 1, 4)))
        return ClusterState(brokers=brokers, partitions=partitions, controller_id=2)


@pytest.fixture
def op() -> BrokerRollOperator:
    op = BrokerRollOperator(task_id="broker", roll_id="restart", settings={"cluster": "c"},
                            batch={"batch": 1, "batches": 1, "label": "brokers", "brokers": []})
    op.prober = LaggingProber()
    op._nodes = {1: {"id": 1}, 4: {"id": 4}}
    op._elected = {}
    return op


def test_one_election_for_the_batch_while_the_metadata_lags(op, monkeypatch, capsys, caplog):
    clock = [100.0]
    monkeypatch.setattr(broker_roll.time, "monotonic", lambda: clock[0])
    with caplog.at_level(logging.INFO):
        first = op._leadership(1)  # elects the batch's 4 partitions
        assert not first.ok
        # the election answered: the next look comes at once, not after the wait's ramp
        assert first.retry_in_s == broker_roll.AFTER_ELECTION_S < 0.1
        clock[0] += 0.2
        again = op._leadership(1)  # the metadata still shows the old leaders: no second election
        assert not again.ok and again.retry_in_s is None  # nothing elected: the wait's own pause
        assert not op._leadership(4).ok
        assert op.prober.admin.elections == [[("t", 0), ("t", 1), ("t", 2), ("t", 3)]]
        said = capsys.readouterr().out + caplog.text
        assert said.count("brokers 1, 4: elected preferred leaders of 4 partitions") == 1, said
        clock[0] += broker_roll.ELECTED_GRACE_S  # still not led by them after the grace: elected again
        assert not op._leadership(1).ok
    assert len(op.prober.admin.elections) == 2


def test_a_partition_whose_election_failed_is_asked_again_at_the_next_look(op, monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(broker_roll.time, "monotonic", lambda: clock[0])
    admin = op.prober.admin
    admin.elect_preferred_leaders = lambda partitions: (admin.elections.append(list(partitions)) or {
        f"{t}-{p}": ("PREFERRED_LEADER_NOT_AVAILABLE" if p == 3 else None) for t, p in partitions})
    failed = op._leadership(1)
    assert failed.retry_in_s is None  # an election that failed somewhere: the wait's own pause before asking again
    clock[0] += 0.2
    op._leadership(1)
    assert admin.elections == [[("t", 0), ("t", 1), ("t", 2), ("t", 3)], [("t", 3)]]


def test_an_election_without_an_answer_is_not_waited_out_and_not_asked_again_within_the_grace(op, monkeypatch, capsys,
                                                                                             caplog):
    """ElectLeaders answered nothing in time (the hook's ``ELECTION_ANSWER_S``; seen once: none for 15 s, while the
    leaders were back in the metadata 4 s later): the wait looks at the metadata again instead of stalling, and does
    not send the same election again before the grace is over (the first may still take effect)."""
    clock = [100.0]
    monkeypatch.setattr(broker_roll.time, "monotonic", lambda: clock[0])
    admin = op.prober.admin

    def no_answer(partitions):
        admin.elections.append(list(partitions))
        raise TimeoutError("no ElectLeaders answer within 3 s for 4 partitions (the election may still take effect)")

    admin.elect_preferred_leaders = no_answer
    with caplog.at_level(logging.INFO):
        look = op._leadership(1)
    assert not look.ok and look.retry_in_s is None  # the wait's own pause, not the quick look after an answer
    said = capsys.readouterr().out + caplog.text
    assert ("brokers 1, 4: no ElectLeaders answer within 3 s for 4 partitions (the election may still take effect): "
            "looking at the metadata again") in said, said
    clock[0] += 1.0
    assert not op._leadership(1).ok
    assert len(admin.elections) == 1  # within the grace: not asked again
    clock[0] += broker_roll.ELECTED_GRACE_S
    op._leadership(1)
    assert len(admin.elections) == 2
