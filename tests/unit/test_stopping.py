"""A task told to stop from outside (``runtime.stopping``): Airflow 3's SIGTERM only calls ``on_kill``, so the waits
wake and raise, and no action (nor a lock re-take) follows."""

from __future__ import annotations

import logging
import threading
import time
from types import SimpleNamespace

import pytest
from runtime import stopping
from runtime.waiting import Check, wait_until

LOG = logging.getLogger("test")


@pytest.fixture(autouse=True)
def clean_flag():
    stopping.reset()
    yield
    stopping.reset()


def test_a_wait_wakes_at_once_and_raises_when_told_to_stop():
    looks: list[float] = []
    threading.Timer(0.3, stopping.request_stop, args=("marked failed",)).start()
    began = time.monotonic()
    with pytest.raises(stopping.TaskStopped, match=r"not waiting until broker 3 is back in every ISR: this task was "
                                                   r"told to stop from outside \(marked failed\)"):
        wait_until(lambda: looks.append(time.monotonic()) or Check(False, "not yet"),
                   what="broker 3 is back in every ISR", interval_s=30, timeout_s=120, log=LOG)
    assert time.monotonic() - began < 5, "the 30 s pause woke at the stop"
    assert len(looks) == 1
    assert isinstance(stopping.TaskStopped("x"), BaseException) and not isinstance(stopping.TaskStopped("x"),
                                                                                   Exception), \
        "no step's `except Exception` takes it for a failure"


def test_no_lock_is_taken_again_once_told_to_stop(monkeypatch):
    from runtime import lock_holding

    asked: list[str] = []
    monkeypatch.setattr(lock_holding, "lock_store", lambda profile: asked.append("store") or None)
    monkeypatch.setattr(lock_holding, "holder_of", lambda context: "kafka_rolling_restart/manual__1")
    stopping.request_stop("run marked success")
    profile = SimpleNamespace(cluster="kafka_prod")
    with pytest.raises(stopping.TaskStopped, match=r"not acting on cluster kafka_prod \(rolling restart\)"):
        lock_holding.ensure_held(profile, {}, "rolling restart", LOG)
    assert asked == [], "the lock store was not even asked"


def test_on_kill_flags_the_process():
    from operators.cluster_operator import ClusterOperator

    op = ClusterOperator(task_id="restart", settings={"cluster": "kafka_prod"})
    assert not stopping.requested()
    op.on_kill()
    assert stopping.requested()
    with pytest.raises(stopping.TaskStopped, match="Airflow sent SIGTERM"):
        stopping.check("stopping broker 3")


def test_no_action_once_the_task_is_marked_or_the_runs_teardown_is_scheduled(monkeypatch):
    """The window before Airflow's SIGTERM arrives (its next heartbeat, seconds): the task instance was marked, or the
    run's teardown is scheduled (it is released the lock or is about to): a task still running neither acts nor
    takes the lock again. A run resumed by a clear has its teardown cleared: it takes the lock again."""
    from contextlib import contextmanager

    from runtime import lock_holding

    acquired: list[str] = []

    class Store:
        def current_holder(self):
            return None

        def try_acquire(self, holder, operation):
            acquired.append(holder)
            return None

    @contextmanager
    def store(profile):
        yield Store()

    states: dict = {"restart.broker_1": "running"}
    asked: list = []
    ti = SimpleNamespace(dag_id="kafka_rolling_restart", run_id="manual__1", task_id="restart.broker", map_index=1,
                         get_task_states=lambda dag_id, task_ids, run_ids: asked.append(task_ids) or {
                             "manual__1": dict(states)})
    context = {"ti": ti, "dag": SimpleNamespace(dag_id="kafka_rolling_restart"), "run_id": "manual__1"}
    monkeypatch.setattr(lock_holding, "lock_store", store)
    profile = SimpleNamespace(cluster="kafka_prod")
    for teardown in ("running", "scheduled", "failed"):
        stopping.reset()
        states["run_outcome"] = teardown
        with pytest.raises(stopping.TaskStopped, match=rf"the run is ending: its run_outcome is {teardown}"):
            lock_holding.ensure_held(profile, context, "rolling restart", LOG)
    assert acquired == [] and asked[-1] == ["restart.broker", "run_outcome"], "one request for both states"
    stopping.reset()
    states.pop("run_outcome")
    states["restart.broker_1"] = "success"
    with pytest.raises(stopping.TaskStopped, match=r"this task instance is success \(marked or cleared from outside"):
        lock_holding.ensure_held(profile, context, "rolling restart", LOG)
    stopping.reset()
    states["restart.broker_1"] = "running"  # a resumed run: its teardown cleared, no state
    lock_holding.ensure_held(profile, context, "rolling restart", LOG)
    assert acquired == ["kafka_rolling_restart/manual__1"]
    # a batch in flight when the task is found marked: its start goes through, without the lock
    stopping.reset()
    states["restart.broker_1"] = "failed"
    with pytest.raises(stopping.TaskStopped, match="not going on after broker 1"):
        with stopping.in_flight("broker 1 (stopped by this task)"):
            lock_holding.ensure_held(profile, context, "rolling restart", LOG)
    assert acquired == ["kafka_rolling_restart/manual__1"], "no take for the start of a batch in flight"


def test_inside_in_flight_a_stop_waits_until_the_block_ends_and_the_lock_check_lets_the_start_through(monkeypatch):
    """A batch stopped by the task is started again first: inside ``in_flight`` a stop request neither raises nor
    wakes waits into a spin (they poll every IN_FLIGHT_POLL_S), the lock check returns without asking the store;
    the stop takes effect as the block ends."""
    from runtime import lock_holding

    monkeypatch.setattr(lock_holding, "lock_store", lambda profile: pytest.fail("the store was asked"))
    with pytest.raises(stopping.TaskStopped, match=r"not going on after broker 3 \(stopped by this task\)"):
        with stopping.in_flight("broker 3 (stopped by this task)"):
            stopping.request_stop("run marked failed")
            stopping.check("waiting until broker 3 is gone")  # no raise
            assert stopping.finishing() == "broker 3 (stopped by this task)"
            began = time.monotonic()
            stopping.pause(5)
            assert time.monotonic() - began < 1, "a short poll, not the whole pause"
            lock_holding.ensure_held(SimpleNamespace(cluster="kafka_prod"), {}, "rolling restart", LOG)
    assert stopping.finishing() is None
