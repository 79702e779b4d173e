"""A batch stopped in two groups (ZooKeeper mode: the controller once its batch-mates are gone) starts the mates while
the controller stops (``NodeRollOperator._stop_last_starting_others``): the controller's stop and the mates' starts run
side by side, the roll's record says so before they are sent, and only the controller is started after its stop. A
mate whose start failed there is started again after the stop; a failed stop fails the batch; the pre-stop still comes
first. The hosts are fake commands that record when they ran; the metadata is a set of live brokers they change."""

from __future__ import annotations

import json
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest
from kafka_ops.roll import RollRecord
from kafka_ops.roll_spec import ClusterMode
from operators import node_roll
from operators.broker_roll import BrokerRollOperator
from runtime.broker_commands import BrokerCommandFailed
from runtime.roll_store import RollStore

BATCH = (4, 7, 1)  # 1 is the controller: it stops last
CONTROLLER = 1


class MemoryStore(RollStore):
    """The roll's record in memory (a JSON round trip, as the Variable does); every save's phases kept."""

    def __init__(self) -> None:
        self.roll_id, self.saved, self.data = "restart", [], None

    def load(self) -> RollRecord | None:
        return None if self.data is None else RollRecord.from_dict(json.loads(self.data))

    def save(self, record: RollRecord) -> None:
        self.data = json.dumps(record.to_dict())
        self.saved.append(record)


class Hosts:
    """The batch's hosts: each command records (step, broker, began, ended) and changes the live set; ``fail`` makes
    the first run of (step, broker) exit non-zero; ``side_by_side`` holds each command of those it names until all
    of them have begun (a command that would wait for another to end first never gets there); ``after`` holds a
    command until the one it names has begun."""

    def __init__(self) -> None:
        self.live = set(range(9))
        self.ran: list[tuple[str, int, float, float]] = []
        self.fail: set[tuple[str, int]] = set()
        self.side_by_side: set[tuple[str, int]] = set()
        self.after: dict[tuple[str, int], tuple[str, int]] = {}
        self.begun: set[tuple[str, int]] = set()
        self.lock = threading.Condition()

    def command(self, step: str, choice: Any, node: dict) -> Any:
        hosts, bid = self, node["id"]

        class Command:
            broker_id = bid

            def __init__(self) -> None:
                self.step = step

            def run(self, ssh_conn_id, timeout_s, log, dry_run=False, triggered_by=None, conn=None) -> int:
                began, key = time.monotonic(), (step, bid)
                with hosts.lock:
                    hosts.begun.add(key)
                    hosts.lock.notify_all()
                    if key in hosts.side_by_side:
                        assert hosts.lock.wait_for(lambda: hosts.side_by_side <= hosts.begun, timeout=5), (
                            f"{step} {bid}: ran alone, not beside {sorted(hosts.side_by_side - hosts.begun)}")
                    if key in hosts.after:
                        assert hosts.lock.wait_for(lambda: hosts.after[key] in hosts.begun, timeout=5), (
                            f"{step} {bid}: {hosts.after[key]} did not begin while it ran")
                    failing = key in hosts.fail
                    hosts.fail.discard(key)
                    if not failing and step == "stop":
                        hosts.live.discard(bid)
                    if not failing and step == "start":
                        hosts.live.add(bid)
                    hosts.ran.append((step, bid, began, time.monotonic()))
                if failing:
                    raise BrokerCommandFailed(f"{step} on broker {bid} exited 1")
                return 0

        return Command() if step in ("stop", "start") else None  # no pre-step asked for

    def steps(self) -> list[tuple[str, int]]:
        """(step, broker) in the order the commands ended."""
        return [(step, bid) for step, bid, _, _ in self.ran]

    def began(self, step: str, bid: int) -> float:
        return next(b for s, i, b, _ in self.ran if (s, i) == (step, bid))

    def ended(self, step: str, bid: int) -> float:
        return next(e for s, i, _, e in self.ran if (s, i) == (step, bid))


@pytest.fixture
def hosts() -> Hosts:
    return Hosts()


def operator(monkeypatch, hosts: Hosts, mode: ClusterMode = ClusterMode.ZOOKEEPER) -> BrokerRollOperator:
    monkeypatch.setattr(node_roll, "ensure_held", lambda *args, **kwargs: None)
    monkeypatch.setattr(node_roll, "step_connection", lambda ssh_conn_id: None)
    op = BrokerRollOperator(task_id="broker", roll_id="restart",
                            settings={"cluster": "c", "healthcheck_interval_s": 1, "soak_s": 0},
                            batch={"batch": 1, "batches": 1, "label": "brokers", "brokers": list(BATCH)})
    op.resolve({"params": {}})
    op._profile = SimpleNamespace(cluster="c", ssh_conn_id="ssh")
    op._context, op._run_mode, op.lag, op.marks = {}, mode, None, {}
    op.prober = SimpleNamespace(admin=object())
    op.ssh_timeout_s = 5
    nodes = {b: {"id": b, "host": f"h{b}"} for b in BATCH}
    op._choose = lambda store, record, position: (record, dict(nodes))
    op._left_alone = lambda store, record, nodes, cfg: record
    op._show = lambda step: None
    op._connect_ahead = lambda nodes: None
    op._gate = lambda record, position, nodes, gated, stopped: None
    op._stop_groups = lambda nodes: [[b for b in nodes if b != CONTROLLER], [CONTROLLER]]
    op._command = hosts.command
    op._alive = lambda nodes: set(hosts.live)
    op._registers_with = lambda nodes: []
    op._wait_gone = lambda nodes: None
    op._wait_back = lambda record, nodes: None
    return op


def roll(op: BrokerRollOperator) -> tuple[RollRecord, MemoryStore]:
    store = MemoryStore()
    record = RollRecord("restart", 0, tuple({"id": b, "host": f"h{b}", "batch": 1} for b in BATCH))
    record, acted = op._roll({}, {}, store, record, 0, None)
    assert acted == list(BATCH)
    return record, store


def phases(store: MemoryStore) -> list[dict[int, str]]:
    """Each save's phases of the batch's brokers that changed since the save before."""
    out, before = [], {}
    for record in store.saved:
        now = {b: record.progress(b).phase for b in BATCH if record.progress(b) is not None}
        out.append({b: p for b, p in now.items() if before.get(b) != p})
        before = now
    return out


def test_the_mates_start_beside_the_controllers_stop_and_only_the_controller_starts_after_it(monkeypatch,
                                                                                               hosts) -> None:
    hosts.side_by_side = {("stop", CONTROLLER), ("start", 4), ("start", 7)}
    op = operator(monkeypatch, hosts)
    record, store = roll(op)
    assert hosts.steps()[:2] in ([("stop", 4), ("stop", 7)], [("stop", 7), ("stop", 4)])
    assert sorted(hosts.steps()[2:]) == [("start", 1), ("start", 4), ("start", 7), ("stop", CONTROLLER)], \
        "each started once"
    assert hosts.began("start", CONTROLLER) >= hosts.ended("stop", CONTROLLER)
    assert all(hosts.began("start", b) >= hosts.ended("stop", b) for b in (4, 7))
    assert phases(store) == [{4: "stopping", 7: "stopping"}, {4: "stopped", 7: "stopped"},
                             {CONTROLLER: "stopping"}, {4: "starting", 7: "starting"},
                             {CONTROLLER: "stopped"}, {CONTROLLER: "starting"}]
    assert hosts.live >= set(BATCH)


def test_the_controller_starts_once_gone_while_its_mates_start_commands_still_run(monkeypatch, hosts) -> None:
    """A start command may return only once its broker runs (seconds, longer with several JVMs starting at once):
    the controller's start does not wait for its mates' start commands to return."""
    hosts.after = {("start", 4): ("start", CONTROLLER), ("start", 7): ("start", CONTROLLER)}
    op = operator(monkeypatch, hosts)
    roll(op)
    assert hosts.steps()[2:4] == [("stop", CONTROLLER), ("start", CONTROLLER)]
    assert sorted(hosts.steps()[4:]) == [("start", 4), ("start", 7)], "their commands were collected, once each"


def test_a_mate_whose_start_failed_beside_the_stop_is_started_again_after_it(monkeypatch, hosts, caplog) -> None:
    hosts.fail = {("start", 7)}
    op = operator(monkeypatch, hosts)
    roll(op)
    assert hosts.steps()[-1] == ("start", 7), "started again once the commands sent beside the stop were collected"
    assert [hosts.steps().count(("start", b)) for b in (4, 7, CONTROLLER)] == [1, 2, 1]
    assert hosts.began("start", CONTROLLER) >= hosts.ended("stop", CONTROLLER)
    assert hosts.live >= set(BATCH)


def test_a_failed_controller_stop_fails_the_batch(monkeypatch, hosts) -> None:
    hosts.fail = {("stop", CONTROLLER)}
    op = operator(monkeypatch, hosts)
    with pytest.raises(BrokerCommandFailed, match=f"stop on broker {CONTROLLER} exited 1"):
        roll(op)
    assert ("start", CONTROLLER) not in hosts.steps()


def test_a_failed_pre_stop_leaves_the_controller_untouched_and_starts_nothing(monkeypatch, hosts) -> None:
    op = operator(monkeypatch, hosts)
    command = hosts.command

    def with_pre_stop(step, choice, node):
        if step == "pre_stop" and node["id"] == CONTROLLER:
            return SimpleNamespace(step=step, broker_id=CONTROLLER, run=lambda *a, **k: (_ for _ in ()).throw(
                BrokerCommandFailed("pre_stop on broker 1 exited 1")))
        return command(step, choice, node)

    op._command = with_pre_stop
    with pytest.raises(BrokerCommandFailed, match="pre_stop on broker 1"):
        roll(op)
    assert sorted(hosts.steps()) == [("stop", 4), ("stop", 7)], "the mates stay down, nothing started"


def test_kraft_stops_and_starts_one_after_the_other(monkeypatch, hosts) -> None:
    """KRaft (the quorum leader last in its batch): no overlap, the batch starts once the last group is gone."""
    op = operator(monkeypatch, hosts, ClusterMode.KRAFT)
    roll(op)
    assert hosts.steps()[2] == ("stop", CONTROLLER)
    assert sorted(hosts.steps()[3:]) == [("start", 1), ("start", 4), ("start", 7)]
