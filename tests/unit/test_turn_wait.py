"""A roll's next instance, started beside the acting one, waits in its task for its turn
(``operators.node_roll.NodeRollOperator._await_turn``): it acts only once the roll's record says every node before
it is done, fails at once when the previous instance failed, and reschedules when the previous one has not started
(``dag.test``). Fakes for the record store, the task states and the clock: no servers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowFailException, AirflowRescheduleException
from kafka_ops.roll import RollRecord
from operators import node_roll
from operators.broker_roll import BrokerRollOperator
from operators.node_roll import PAUSED_RETRY_S, TURN_FAST_FOR_S, TURN_POLL_S, TURN_POLL_STARTING_S

STEPS = tuple({"id": b, "host": f"h{b}", "rack": None, "position": i + 1, "total": 3}
              for i, b in enumerate([2, 0, 1]))


def record(t0_ms: int, **phases: str) -> RollRecord:
    """A roll over brokers [2, 0, 1] (one a batch) with ``b<id>=<phase>``, each phase reached at ``t0_ms``."""
    rec = RollRecord("restart", t0_ms, STEPS)
    for name, phase in phases.items():
        rec = rec.mark(int(name.removeprefix("b")), phase, t0_ms, "restarted" if phase == "done" else "")
    return rec


class Store:
    """Hands out the scripted records one load at a time (the last one again once they run out)."""

    def __init__(self, *records: RollRecord | None) -> None:
        self.records = list(records)
        self.loads = 0

    def load(self) -> RollRecord | None:
        self.loads += 1
        return self.records.pop(0) if len(self.records) > 1 else self.records[0]


class Waiter:
    """A broker task at ``position`` whose clock moves only when it sleeps, and whose previous instance's state
    comes from ``states`` (one per read; the last one again once they run out)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, states: list[str | None], paused: bool = False) -> None:
        self.op = BrokerRollOperator(task_id="broker", roll_id="restart", settings={},
                                     batch={"batch": 2, "batches": 3, "label": "broker 0",
                                            "grid_label": "broker 0 (2/3)", "brokers": [{"id": 0}]})
        self.now = 1000.0
        self.sleeps: list[float] = []
        self.shown: list[str] = []
        self.states = list(states)
        self.state_reads: list[float] = []
        self.windows: list[str] = []
        self.paused = paused
        self.pause_reads = 0
        monkeypatch.setattr(self.op, "_sleep", self.sleep)
        monkeypatch.setattr(self.op, "_dag_paused", self.dag_paused)
        monkeypatch.setattr(self.op, "_monotonic", lambda: self.now)
        monkeypatch.setattr(self.op, "_show", self.shown.append)
        monkeypatch.setattr(self.op, "_previous_state", self.previous_state)
        monkeypatch.setattr(node_roll, "window_gate", lambda op, context, **kw: self.windows.append(kw["what"]))
        monkeypatch.setattr(self.op, "setting", lambda name: "wait")

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def dag_paused(self, context: Any) -> bool:
        self.pause_reads += 1
        return self.paused

    def previous_state(self, context: Any, position: int) -> str | None:
        self.state_reads.append(self.now)
        return self.states.pop(0) if len(self.states) > 1 else self.states[0]

    def await_turn(self, store: Store, position: int = 1) -> tuple[RollRecord, Any]:
        return self.op._await_turn({}, store, store.load(), position)


def now_ms() -> int:
    return node_roll.now_ms()


def test_the_next_broker_goes_on_as_soon_as_the_previous_one_is_done_in_the_record(monkeypatch) -> None:
    t = now_ms()
    waiter = Waiter(monkeypatch, ["running"])
    store = Store(record(t, b2="stopping"), record(t, b2="stopped"), record(t, b2="starting"),
                  record(t, b2="starting"), record(t, b2="starting"), record(t, b2="done"))
    rec, decision = waiter.await_turn(store)
    assert decision.action == "act" and decision.reason == "broker 0: its turn (2/3)"
    assert rec.is_done(2) and store.loads == 6
    # slow reads while broker 2 stops, quick ones once its start was sent (the wait's last stretch)
    assert waiter.sleeps == [TURN_POLL_S, TURN_POLL_S, TURN_POLL_STARTING_S, TURN_POLL_STARTING_S,
                             TURN_POLL_STARTING_S]
    assert waiter.shown == ["waiting for broker 2 to finish"]
    # the previous instance's state is read once a TURN_POLL_S, not at every read of the record
    assert len(waiter.state_reads) < store.loads


def test_the_first_broker_and_a_broker_whose_turn_it_is_do_not_wait(monkeypatch) -> None:
    t = now_ms()
    waiter = Waiter(monkeypatch, ["success"])
    _, decision = waiter.await_turn(Store(record(t, b2="done")))
    assert decision.action == "act" and waiter.sleeps == [] and waiter.shown == []
    _, first = waiter.await_turn(Store(record(t)), position=0)
    assert first.action == "act" and waiter.sleeps == []


def test_a_previous_instance_that_fails_while_the_next_one_waits_fails_it_untouched(monkeypatch) -> None:
    t = now_ms()
    waiter = Waiter(monkeypatch, ["running", "running", "failed"])
    _, decision = waiter.await_turn(Store(record(t, b2="stopping")))
    assert decision.action == "fail"
    assert decision.reason == ("broker 0 NOT touched: broker 2 (before it in roll 'restart') did not finish; resume "
                               "by clearing the failed tasks")
    assert waiter.sleeps == [TURN_POLL_S, TURN_POLL_S]


def test_a_previous_instance_not_started_reschedules_the_next_one(monkeypatch) -> None:
    """``dag.test`` runs the instances in no fixed order: the next one is tried again later, as before."""
    t = now_ms()
    for state in ("scheduled", None, "up_for_reschedule"):
        waiter = Waiter(monkeypatch, [state])
        with pytest.raises(AirflowRescheduleException):
            waiter.await_turn(Store(record(t)))
        assert waiter.sleeps == []


def test_a_previous_instance_deferred_for_the_window_sends_the_next_one_through_the_window_gate(monkeypatch) -> None:
    t = now_ms()
    waiter = Waiter(monkeypatch, ["deferred", "running"])
    _, decision = waiter.await_turn(Store(record(t), record(t, b2="stopping"), record(t, b2="done")))
    assert decision.action == "act" and waiter.windows == ["broker 0 (2/3)"]


def test_a_record_that_no_longer_plans_the_position_fails_the_wait(monkeypatch) -> None:
    t = now_ms()
    waiter = Waiter(monkeypatch, ["running"])
    with pytest.raises(AirflowFailException, match="its record changed while this task waited"):
        waiter.await_turn(Store(record(t, b2="stopping"), None))


def test_quick_reads_last_only_while_the_nodes_before_are_starting_and_not_for_a_long_soak() -> None:
    t = now_ms()
    poll = BrokerRollOperator._turn_poll_s
    assert poll(record(t, b2="starting"), 1) == TURN_POLL_STARTING_S
    assert poll(record(t - int(TURN_FAST_FOR_S * 1000) - 1000, b2="starting"), 1) == TURN_POLL_S
    assert poll(record(t, b2="stopped"), 1) == TURN_POLL_S
    # two brokers before position 2: broker 0 not begun yet keeps the reads slow
    assert poll(record(t, b2="starting"), 2) == TURN_POLL_S


def soaking(t_ms: int, until_ms: int) -> RollRecord:
    """Broker 2 back in every ISR and soaking until ``until_ms``."""
    return record(t_ms).mark(2, "done", t_ms, "restarted, back in every ISR; soaking", soak_until_ms=until_ms)


def test_the_next_broker_waits_out_the_soak_of_the_one_before_even_when_its_task_was_stopped(monkeypatch) -> None:
    """``soak_s``: the soaking broker is recorded done (a run stopped then must not restart it), yet the next one
    waits for the soak's end; the soak's task failed (marked failed during the soak) does not cut it short."""
    t = now_ms()
    waiter = Waiter(monkeypatch, ["running", "failed"])
    ends = t + 2_500
    clock_ms = [t]
    monkeypatch.setattr(node_roll, "now_ms", lambda: clock_ms[0])
    monkeypatch.setattr("kafka_ops.roll.time.time", lambda: clock_ms[0] / 1000)

    def sleep(seconds: float) -> None:
        waiter.sleeps.append(seconds)
        waiter.now += seconds
        clock_ms[0] += int(seconds * 1000)

    monkeypatch.setattr(waiter.op, "_sleep", sleep)
    rec, decision = waiter.await_turn(Store(soaking(t, ends)))
    assert decision.action == "act", decision
    assert clock_ms[0] >= ends and sum(waiter.sleeps) <= 2.5 + TURN_POLL_STARTING_S, waiter.sleeps
    assert waiter.shown and waiter.shown[0].startswith("waiting for broker 2 to end the soak (until "), waiter.shown
    # the state "failed" was read during the soak (the second read) and did not fail the waiting broker
    assert len(waiter.state_reads) >= 2 and waiter.states == ["failed"], waiter.state_reads


def test_a_soak_is_kept_in_the_record_until_the_next_mark() -> None:
    t = now_ms()
    rec = soaking(t, t + 5_000)
    back = RollRecord.from_dict(rec.to_dict())
    assert back.progress(2).soak_until_ms == t + 5_000 and back.soak_left_ms(2, t + 1_000) == 4_000
    assert back.soak_left_ms(2, t + 6_000) == 0
    after = back.mark(2, "done", t + 5_000, "restarted", 9.0)
    assert after.progress(2).soak_until_ms is None and "soak_until_ms" not in after.to_dict()["brokers"]["2"]


def test_a_turn_that_comes_while_the_dag_is_paused_reschedules_the_waiting_task_untouched(monkeypatch) -> None:
    """Airflow's pause holds only tasks not started yet: the next broker's task, started ahead of its turn, gives its
    worker slot back at its turn instead of restarting its broker, and runs again once the DAG is unpaused."""
    t = now_ms()
    waiter = Waiter(monkeypatch, ["running"], paused=True)
    before = datetime.now(UTC)
    with pytest.raises(AirflowRescheduleException) as raised:
        waiter.await_turn(Store(record(t, b2="starting"), record(t, b2="done")))
    assert waiter.pause_reads == 1
    assert before + timedelta(seconds=PAUSED_RETRY_S) <= raised.value.reschedule_date <= \
        datetime.now(UTC) + timedelta(seconds=PAUSED_RETRY_S)
    assert waiter.shown[-1] == "paused: goes on once the DAG is unpaused"


def test_an_unpaused_dag_lets_the_waiting_task_act_and_a_task_started_on_its_turn_does_not_ask(monkeypatch) -> None:
    """The scheduler queues no task of a paused DAG, so a task that did not wait was started unpaused."""
    t = now_ms()
    waiter = Waiter(monkeypatch, ["running"])
    _, decision = waiter.await_turn(Store(record(t, b2="starting"), record(t, b2="done")))
    assert decision.action == "act" and waiter.pause_reads == 1
    on_turn = Waiter(monkeypatch, ["success"], paused=True)
    _, decision = on_turn.await_turn(Store(record(t, b2="done")))
    assert decision.action == "act" and on_turn.pause_reads == 0


def test_a_waiting_task_whose_previous_one_failed_fails_even_while_the_dag_is_paused(monkeypatch) -> None:
    t = now_ms()
    waiter = Waiter(monkeypatch, ["running", "failed"], paused=True)
    _, decision = waiter.await_turn(Store(record(t, b2="stopping")))
    assert decision.action == "fail" and waiter.pause_reads == 0


class _Ti:
    dag_id = "kafka_rolling_restart"

    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def get_dag(self, dag_id: str) -> Any:
        if isinstance(self.answer, Exception):
            raise self.answer
        return SimpleNamespace(dag_id=dag_id, is_paused=self.answer)


def test_the_pause_is_read_from_the_execution_api_and_an_unreadable_one_counts_as_not_paused(capsys) -> None:
    op = BrokerRollOperator(task_id="broker", roll_id="restart", settings={},
                            batch={"batch": 1, "batches": 1, "label": "broker 0", "grid_label": "broker 0 (1/1)",
                                   "brokers": [{"id": 0}]})
    assert op._dag_paused({"ti": _Ti(True)}) is True
    assert op._dag_paused({"ti": _Ti(False)}) is False
    assert op._dag_paused({"ti": _Ti(ConnectionError("execution API down"))}) is False
    said = capsys.readouterr()
    assert "could not read whether the DAG is paused (execution API down): going on" in said.out + said.err
