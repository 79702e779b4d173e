"""In which groups a batch of brokers stops (``BrokerRollOperator._stop_groups``): in ZooKeeper mode the broker that
is the controller now stops once the rest of its batch is gone; otherwise the batch stops as one group. The
cluster is a fake prober; the real stop order is proven on Kafka by the batched-roll DAG test."""

from __future__ import annotations

import logging

import pytest
from kafka_ops.cluster import Broker, ClusterState
from kafka_ops.roll_spec import ClusterMode
from operators.broker_roll import BrokerRollOperator


class Prober:
    def __init__(self, controller: int) -> None:
        self.admin = object()
        self.controller = controller
        self.asked = 0

    def state(self, configs: bool = False) -> ClusterState:
        self.asked += 1
        brokers = tuple(Broker(b, f"h{b}", 9092, None) for b in range(6))
        return ClusterState(brokers=brokers, partitions=(), controller_id=self.controller)


def operator(mode: ClusterMode, controller: int, dry_run: bool = False) -> BrokerRollOperator:
    op = BrokerRollOperator(task_id="broker", roll_id="restart", settings={"cluster": "c"},
                            batch={"batch": 1, "batches": 1, "label": "brokers", "brokers": []})
    op.prober, op._context, op._run_mode = Prober(controller), {}, mode
    op._dry = dry_run
    op.interval_s, op.timeout_s = 1.0, 5.0
    return op


def nodes(*ids: int) -> dict[int, dict]:
    return {b: {"id": b, "host": f"h{b}"} for b in ids}


@pytest.fixture(autouse=True)
def _dry_run(monkeypatch):
    monkeypatch.setattr(BrokerRollOperator, "dry_run", property(lambda self: self._dry))


def test_zookeeper_mode_the_controller_stops_after_its_batch_mates(capsys, caplog):
    op = operator(ClusterMode.ZOOKEEPER, controller=1)
    with caplog.at_level(logging.INFO):
        assert op._stop_groups(nodes(4, 1, 7)) == [[4, 7], [1]]
    said = capsys.readouterr().out + caplog.text  # the task logger writes through structlog (stdout) or logging
    assert "brokers 4, 1, 7: broker 1 is the controller: it stops once the others are gone" in said


def test_a_dry_run_says_the_same_order(capsys, caplog):
    op = operator(ClusterMode.ZOOKEEPER, controller=7, dry_run=True)
    with caplog.at_level(logging.INFO):
        assert op._stop_groups(nodes(1, 7)) == [[1], [7]]
    said = capsys.readouterr().out + caplog.text
    assert "DRY RUN: brokers 1, 7: broker 7 is the controller: it stops once the others are gone" in said


def test_one_group_when_the_controller_is_elsewhere_or_the_batch_is_one_broker():
    op = operator(ClusterMode.ZOOKEEPER, controller=2)
    assert op._stop_groups(nodes(1, 4)) == [[1, 4]]
    single = operator(ClusterMode.ZOOKEEPER, controller=2)
    assert single._stop_groups(nodes(2)) == [[2]]
    assert single.prober.asked == 0, "a batch of one broker asks nothing"


@pytest.mark.parametrize("mode", [ClusterMode.KRAFT, ClusterMode.MIGRATING])
def test_kraft_and_migrating_clusters_stop_the_batch_together(mode):
    """The Metadata answer's controller id in KRaft is a broker chosen at random, not a controller."""
    op = operator(mode, controller=1)
    assert op._stop_groups(nodes(1, 4)) == [[1, 4]]
    assert op.prober.asked == 0
