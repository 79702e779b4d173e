"""A batch task connects to its hosts ahead once (``NodeRollOperator._connect_ahead``): a task that waited for its turn
opened them while waiting; the call before its gate then reads no Airflow connection again (0.05-0.6 s between the
turn and the gate on loaded cores) and asks only for hosts not connected yet."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from operators import node_roll
from operators.broker_roll import BrokerRollOperator


def test_hosts_connected_ahead_while_waiting_are_not_asked_again_before_the_gate(monkeypatch) -> None:
    asked: list[list[str]] = []
    monkeypatch.setattr(node_roll, "connect_ahead", lambda conn_id, hosts, log: asked.append(list(hosts)))
    op = BrokerRollOperator(task_id="broker", roll_id="restart", settings={"cluster": "c"},
                            batch={"batch": 1, "batches": 1, "label": "brokers 0, 1", "brokers": [0, 1]})
    op.resolve({"params": {}})
    op._profile = SimpleNamespace(cluster="c", ssh_conn_id="ssh")
    nodes = {0: {"id": 0, "host": "h0"}, 1: {"id": 1, "host": "h1"}}
    op._connect_ahead(nodes)  # while waiting for the turn
    op._connect_ahead(nodes)  # before the gate
    op._connect_ahead({**nodes, 2: {"id": 2, "host": "h2"}})  # a node kind that chose another node
    assert asked == [["h0", "h1"], ["h2"]], asked


def test_a_dry_run_connects_nowhere(monkeypatch) -> None:
    asked: list[list[str]] = []
    monkeypatch.setattr(node_roll, "connect_ahead", lambda conn_id, hosts, log: asked.append(list(hosts)))
    op = BrokerRollOperator(task_id="broker", roll_id="restart", settings={"cluster": "c", "dry_run": True},
                            batch={"batch": 1, "batches": 1, "label": "broker 0", "brokers": [0]})
    op.resolve({"params": {}})
    op._connect_ahead({0: {"id": 0, "host": "h0"}})
    assert asked == []


def test_a_batch_task_keeps_its_clients_open_and_flushes_its_labels_whatever_it_ends_with(monkeypatch) -> None:
    """``execute`` runs the batch inside ``kept_clients.kept_open`` (its lock checks and ZooKeeper checks share one
    client each) and waits for its step labels before the task ends, also when the batch fails: Airflow sends the task's
    final label with its state, and a label sent after it would replace it."""
    from runtime import kept_clients

    flushed: list[float] = []
    monkeypatch.setattr(node_roll, "flush_labels", lambda timeout_s=5.0: flushed.append(timeout_s) or True)
    op = BrokerRollOperator(task_id="broker", roll_id="restart", settings={"cluster": "c"},
                            batch={"batch": 1, "batches": 1, "label": "broker 0", "brokers": [0]})
    keeping: list[int] = []

    def batch(context):
        keeping.append(kept_clients._KEEPING[0])
        if context.get("fail"):
            raise RuntimeError("the batch failed")
        return {"brokers": [0], "action": "restarted"}

    op._execute = batch
    assert op.execute({}) == {"brokers": [0], "action": "restarted"}
    with pytest.raises(RuntimeError, match="the batch failed"):
        op.execute({"fail": True})
    assert keeping == [1, 1] and kept_clients._KEEPING[0] == 0, "the batch ran with its clients kept, closed after"
    assert len(flushed) == 2, "the labels were flushed after the batch that succeeded and after the one that failed"
