"""The decommission's lead_away (``operators.leadership.ElectLeadersOperator`` with ``away``): it reorders every
replica list holding a drained broker from one metadata read. A topic deleted in between is refused by Kafka
(UNKNOWN_TOPIC_OR_PARTITION); it needs no reordering, so the step goes on; any other refusal still fails it. The
cluster is faked (partitions before and after the deletion); the sandbox DAG tests run the step on real Kafka."""

from __future__ import annotations

from types import SimpleNamespace

import operators.leadership as leadership
import pytest
from airflow.sdk.exceptions import AirflowFailException
from kafka_ops.cluster import Broker, ClusterState, Partition

BROKERS = tuple(Broker(b, f"kafka-{b}", 9092) for b in (0, 1, 2))


def cluster(*partitions: Partition) -> ClusterState:
    return ClusterState(brokers=BROKERS, partitions=partitions, controller_id=0)


BEFORE = cluster(Partition("orders", 0, leader=0, replicas=(2, 0), isr=(2, 0)),
                 Partition("gone", 0, leader=1, replicas=(2, 1), isr=(2, 1)))
AFTER = cluster(Partition("orders", 0, leader=0, replicas=(0, 2), isr=(0, 2)))  # reordered; "gone" deleted


class FakeProber:
    reads: list[ClusterState] = []

    def __init__(self, profile=None):
        self.admin = SimpleNamespace(elect_preferred_leaders=lambda todo: {})

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def state(self, configs=True):
        return FakeProber.reads.pop(0) if len(FakeProber.reads) > 1 else FakeProber.reads[0]


@pytest.fixture
def lead_away(monkeypatch):
    monkeypatch.setattr(leadership, "ClusterProber", FakeProber)
    monkeypatch.setattr(leadership, "ensure_held", lambda *a: None)
    monkeypatch.setattr(leadership.ElectLeadersOperator, "profile", property(lambda self: SimpleNamespace()))
    op = leadership.ElectLeadersOperator(task_id="lead_away", operation="decommission", away=True,
                                         settings={"cluster": "c", "dry_run": False, "brokers": [2],
                                                   "healthcheck_interval_s": 0.01, "healthcheck_timeout_s": 5})
    return op


def started_with(monkeypatch, answer: dict[str, str | None]) -> list:
    sent: list = []

    def reassignments(admin, profile):
        return SimpleNamespace(start=lambda entries: sent.extend(entries) or answer)

    monkeypatch.setattr(leadership, "Reassignments", reassignments)
    return sent


def test_a_topic_deleted_meanwhile_needs_no_reordering(lead_away, monkeypatch):
    sent = started_with(monkeypatch, {"orders-0": None, "gone-0": "UNKNOWN_TOPIC_OR_PARTITION"})
    FakeProber.reads = [BEFORE, AFTER]
    assert lead_away._execute({"params": {}}) == 2
    assert sorted((e["topic"], e["replicas"]) for e in sent) == [("gone", [1, 2]), ("orders", [0, 2])]


def test_a_refusal_of_a_partition_that_still_exists_fails_the_step(lead_away, monkeypatch):
    started_with(monkeypatch, {"orders-0": "NOT_CONTROLLER", "gone-0": "UNKNOWN_TOPIC_OR_PARTITION"})
    FakeProber.reads = [BEFORE, AFTER]
    with pytest.raises(AirflowFailException, match=r"reordering replicas refused for 1 partitions: orders-0: "
                                                   r"NOT_CONTROLLER"):
        lead_away._execute({"params": {}})
