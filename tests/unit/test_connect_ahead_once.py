"""A batch task connects to its hosts ahead once (``NodeRollOperator._connect_ahead``): a task that waited for its turn
opened them while waiting; the call before its gate then reads no Airflow connection again (0.05-0.6 s between the
turn and the gate on loaded cores) and asks only for hosts not connected yet."""

from __future__ import annotations

from types import SimpleNamespace

from operators import node_roll
from operators.broker_roll import BrokerRollOperator


def test_hosts_connected_ahead_while_waiting_are_not_asked_again_before_the_gate(monkeypatch) -> None:
    asked: list[list[str]] = []
    monkeypatch.setattr(node_roll, "connect_ahead", lambda conn_id, hosts, log: asked.append(list(hosts)))
    op = BrokerRollOperator(task_id="broker", roll_id="restart", settings={"cluster": "c"},
                            batch={"batch": 1, "batches": 1, "label": "brokers 0, 1", "brokers": [0, 1]})
    op.resolve({"params": {}})
    op._profile = SimpleNamespace(cluster="c", ssh_conn_id="ssh")
    op._hosts_ahead = set()
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
    op._hosts_ahead = set()
    op._connect_ahead({0: {"id": 0, "host": "h0"}})
    assert asked == []
