"""The broker roll's lag streak across a batch's stop (``BrokerRollOperator._roll``): the next batch's gate continues
only what Burrow said from the stop on (``runtime.lag_watch.LagWatch.disruption_begins``), handed over through the
roll's record. The operator's cluster steps are recorded, not run; Burrow is a fake that always says OK."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from kafka_ops.health import ConsumerGroupStatus
from kafka_ops.roll import RollRecord
from operators import node_roll
from operators.broker_roll import BrokerRollOperator
from runtime.lag_watch import LagWatch


class Burrow:
    def __init__(self) -> None:
        self.polls = 0

    def group_statuses(self, groups, budget_s=None):
        self.polls += 1
        return [ConsumerGroupStatus(g, "OK") for g in groups]


class Store:
    def mark_all(self, record, ids, phase, reason="", **kwargs):
        return record

    def save(self, record):
        self.saved = record


@pytest.fixture
def op(monkeypatch) -> BrokerRollOperator:
    monkeypatch.setattr(node_roll, "ensure_held", lambda *args, **kwargs: None)
    op = BrokerRollOperator(task_id="broker", roll_id="restart",
                            settings={"cluster": "c", "healthcheck_interval_s": 1, "soak_s": 0},
                            batch={"batch": 1, "batches": 2, "label": "broker 0", "brokers": [0]})
    op.resolve({"params": {}})
    op._profile = SimpleNamespace(cluster="c")
    clock = [1_700_000_000.0]
    op.lag = LagWatch(Burrow(), ["billing"], interval_s=1, clock=lambda: clock[0])
    op.steps = []
    op.marks = {}

    def gate(record, position, nodes, gated, stopped):
        for _ in range(16):  # a long streak at the gate
            op.lag.poll()
            clock[0] += 1
        op.steps.append("gate")

    def commands(context, cfg, store, record, nodes, steps, who):
        op.steps.append("stop" if steps == node_roll.STOP_STEPS else "commands")
        return record

    def back(record, nodes):  # two OK polls while the broker comes back
        for _ in range(2):
            clock[0] += 1
            op.lag.poll()
        op.steps.append("back")

    op._choose = lambda store, record, position: (record, {0: {"id": 0, "host": "h0"}})
    op._left_alone = lambda store, record, nodes, cfg: record
    op._acting = lambda step, record, nodes: list(nodes)
    op._show = lambda step: None
    op._connect_ahead = lambda nodes: None
    op._stop_groups = lambda nodes: [list(nodes)]
    op._gate = gate
    op._commands = commands
    op._wait_gone = lambda nodes: op.steps.append("gone")
    op._start = lambda context, cfg, store, record, nodes, who: (op.steps.append("start"), record)[1]
    op._wait_back = back
    return op


def test_the_next_gate_continues_only_the_polls_after_the_stop(op) -> None:
    record = RollRecord("restart", 0, ({"id": 0, "host": "h0"}, {"id": 1, "host": "h1"}), consumer_groups=("billing",))
    record, acted = op._roll({}, {}, Store(), record, 0, None)
    assert acted == [0] and op.steps == ["gate", "stop", "gone", "start", "back"]
    handed = op._after_roll(Store(), record, acted).lag_ok
    assert handed is not None and handed.polls == 2, "the gate's 16 OK polls before the stop are not carried"


class BlockingCommand:
    """A stop command that runs until Burrow was polled ``polls`` times (the task's thread polls meanwhile)."""

    def __init__(self, burrow: Burrow, polls: int, fails: bool = False) -> None:
        self.burrow, self.polls, self.fails, self.ran = burrow, polls, fails, 0

    def run(self, ssh_conn_id, timeout_s, log, dry_run=False, triggered_by=None, conn=None):
        deadline = time.monotonic() + 10
        while self.burrow.polls < self.polls:
            assert time.monotonic() < deadline, f"only {self.burrow.polls} polls while the command ran"
            time.sleep(0.01)
        self.ran += 1
        if self.fails:
            raise node_roll.BrokerCommandFailed("stop on broker 0 exited 1")
        return 0


@pytest.mark.parametrize("hosts", [1, 2], ids=["one broker (a serial roll)", "a batch of two"])
def test_the_lag_streak_is_fed_while_the_stop_and_start_commands_run(op, hosts: int) -> None:
    burrow = Burrow()
    op.lag = LagWatch(burrow, ["billing"], interval_s=0.05)  # the real clock: polls 0.05 s apart
    op.lag.disruption_begins()
    op._profile = SimpleNamespace(cluster="c", ssh_conn_id="ssh")
    op.ssh_timeout_s = 5
    commands = [BlockingCommand(burrow, 3) for _ in range(hosts)]
    op._run_all(commands, None)
    assert [c.ran for c in commands] == [1] * hosts
    assert op.lag.streak >= 3, "the polls made while the commands ran count in the streak the next gate continues"
    handed = op.lag.handover()
    assert handed is not None and handed.polls == op.lag.streak


def test_a_poll_that_failed_while_the_commands_run_is_asked_again_an_interval_later(op) -> None:
    class Silent(Burrow):
        def group_statuses(self, groups, budget_s=None):
            self.polls += 1
            raise TimeoutError("Burrow did not answer")

    op.lag = LagWatch(Silent(), ["billing"], interval_s=5)
    op.lag.disruption_begins()
    assert op._meanwhile() == op.interval_s, "not at once again (no busy loop on a silent Burrow)"
    assert op.lag.streak == 0 and op.lag.burrow.polls == 1


def test_a_failed_command_fails_the_step_after_every_command_ended(op) -> None:
    burrow = Burrow()
    op.lag = None  # no lag gate: nothing to do meanwhile, the commands still run side by side
    assert op._meanwhile() is None
    op._profile = SimpleNamespace(cluster="c", ssh_conn_id="ssh")
    op.ssh_timeout_s = 5
    ok, failing = BlockingCommand(burrow, 0), BlockingCommand(burrow, 0, fails=True)
    with pytest.raises(node_roll.BrokerCommandFailed, match="exited 1"):
        op._run_all([failing, ok], None)
    assert ok.ran == 1 and failing.ran == 1
