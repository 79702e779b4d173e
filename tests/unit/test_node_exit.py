"""What a node roll does about a node that exited after its start (``NodeRollOperator._exited``): started again
once what it registers with answers when an outage explains the exit, else the roll stops at once (NodeExited).
The operator's commands are recorded, not run."""

from __future__ import annotations

import time

import pytest
from operators.node_roll import START_STEP, NodeExited, NodeRollOperator
from runtime.start_dependencies import Dependency
from runtime.waiting import Check


class Switch:
    def __init__(self, ok: bool) -> None:
        self.ok = ok

    def __call__(self) -> Check:
        return Check(self.ok, "ZooKeeper answers" if self.ok else "ZooKeeper zk:2181 does not answer")


def roll(zookeeper: Switch | None, started_s_ago: float = 5.0, timeout_s: float = 900.0):
    op = NodeRollOperator(task_id="broker", roll_id="restart", settings={"cluster": "c"})
    op.node, op.timeout_s, op.cfg = "broker", timeout_s, {}
    op._deps = [] if zookeeper is None else [Dependency("ZooKeeper zk:2181", "ZooKeeper", zookeeper)]
    op._first_start, op._pending_start = time.monotonic() - started_s_ago, set()
    op._context, op._who = {}, "alice"
    sent: list[tuple] = []

    class Store:
        def load(self):
            return "record"

    op._store = Store()
    op._commands = lambda context, cfg, store, record, nodes, steps, who: sent.append((list(nodes), steps, who))
    return op, sent


def test_an_exit_while_everything_answers_stops_the_roll_at_once() -> None:
    op, sent = roll(Switch(True))
    with pytest.raises(NodeExited, match=r"broker 0 exited after its start \(service status: inactive \(exit 3\)\); "
                                         r"ZooKeeper answers: it does not come back by itself"):
        op._exited(0, {"id": 0, "host": "h0"}, "inactive (exit 3)")
    assert sent == []


def test_an_exit_with_nothing_to_ask_stops_the_roll_at_once() -> None:
    op, sent = roll(None)
    with pytest.raises(NodeExited):
        op._exited(0, {"id": 0, "host": "h0"}, "inactive (exit 3)")
    assert sent == []


def test_an_exit_during_an_outage_is_started_again_once_the_service_answers() -> None:
    zookeeper = Switch(False)
    op, sent = roll(zookeeper)
    node = {"id": 0, "host": "h0"}
    first = op._exited(0, node, "inactive (exit 3)")
    assert not first.ok and "not starting it again yet: ZooKeeper zk:2181 does not answer" in first.message
    assert op._exited(0, node, "inactive (exit 3)").ok is False and sent == [], "nothing sent while it is down"
    zookeeper.ok = True
    again = op._exited(0, node, "inactive (exit 3)")
    assert not again.ok and again.message == "broker 0: started again (ZooKeeper answers)"
    assert sent == [([0], START_STEP, "alice")], "one start, through the roll's own start step (lock, record)"
    assert op._pending_start == set()


def test_an_exit_during_an_outage_after_the_steps_timeout_stops_the_roll() -> None:
    op, sent = roll(Switch(False), started_s_ago=1000.0)
    with pytest.raises(NodeExited, match="does not answer"):
        op._exited(0, {"id": 0, "host": "h0"}, "inactive (exit 3)")
    assert sent == []


def test_a_broker_s_status_is_asked_only_an_interval_after_its_back_wait_began(monkeypatch) -> None:
    """``BrokerRollOperator._wait_back``: a broker not registered yet right after a start command that waited for it
    (longer than ``healthcheck_interval_s`` since the start was sent) costs no SSH status command; one an interval
    into the wait does."""
    from kafka_ops.health import Verdict
    from operators import broker_roll
    from operators.broker_roll import BrokerRollOperator

    statuses: list[str] = []

    class Status:
        def status(self, conn_id, timeout_s):
            statuses.append(conn_id)
            return 0, "active\n"

    monkeypatch.setattr(broker_roll.BrokerCommand, "status_of", staticmethod(lambda profile, node: Status()))
    op = BrokerRollOperator(task_id="broker", roll_id="restart", settings={"cluster": "c"},
                            batch={"batch": 1, "batches": 1, "label": "broker 7", "brokers": []})
    op.interval_s, op.ssh_timeout_s, op.marks, op.lag = 5.0, 10.0, {}, None
    op._profile = type("P", (), {"ssh_conn_id": "ssh"})()
    op._first_start = time.monotonic() - 8.0  # the start was sent 8 s ago and returned just now
    op.prober = type("Prober", (), {"look": lambda self, kind, bid: Verdict(False, ["not in the metadata"], kind)})()
    looks: list[Check] = []

    def wait_each(kind, ids, check=None):
        if kind == "registered":
            looks.extend(check(b) for b in ids)
            raise StopIteration  # one look is all this test needs

    monkeypatch.setattr(op, "_wait_each", wait_each)
    monkeypatch.setattr(op, "_show", lambda label: None)
    with pytest.raises(StopIteration):
        op._wait_back(None, {7: {"id": 7, "host": "h7"}})
    assert [c.ok for c in looks] == [False] and statuses == [], "no status command at the wait's first look"
    op._looked[7] -= 5.0  # an interval into the wait
    assert not op._registered(7).ok and statuses == ["ssh"], "the status command once an interval passed"
