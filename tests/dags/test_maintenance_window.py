"""Maintenance windows on the sandbox: a rolling restart scheduled with ``MaintenanceWindowTimetable``
(tests/dags/dag_files/kafka_windowed_restart_test.py) starts each broker only inside a window, lets a broker
that started finish after its window closed, and waits (deferred) for the next window before the next
broker; ``window_policy=fail`` fails before anything is touched.

Outcomes are read back from the brokers' own logs (when each was shut down and started) and the task
instances' times, not from the DAG's own report.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from airflow_env import run_dag
from observers import MetadataWatcher, admin, snapshot
from test_kafka_rolling_restart import FAST, controller, lock_holder, output, registrations, starts

DAG_ID = "kafka_windowed_restart_test"


def shutdown_times(sandbox, broker: int) -> list[datetime]:
    """UTC times at which the broker's shutdowns began, from its own log."""
    return [datetime.fromtimestamp(t, UTC) for t in sandbox.shutdown_times(broker)]


@pytest.fixture
def shared(sandbox, use_sandbox):
    use_sandbox(sandbox.workdir)
    sandbox.wait_healthy(timeout_s=120)
    return sandbox


@pytest.mark.extended
def test_a_window_closing_mid_run_waits_before_the_next_broker_not_mid_broker(shared, monkeypatch, capfd, caplog):
    """Windows open every minute for 3 s: broker A starts in one window and finishes after it closed; broker
    B waits, deferred, for the next window and starts in it."""
    import runtime.window_gate as gate

    window_s = 3
    monkeypatch.setenv("KAFKA_OPS_TEST_WINDOW_CRON", "* * * * *")
    monkeypatch.setenv("KAFKA_OPS_TEST_WINDOW_S", str(window_s))
    monkeypatch.setattr(gate, "DEFER_OVER_S", 5.0)  # dag.test runs tasks in-process: waits > 5 s defer
    first, second = [b for b in shared.broker_ids if b != controller(shared)][:2]
    before, started_before = registrations(shared), starts(shared)
    shut_before = {b: len(shutdown_times(shared, b)) for b in (first, second)}
    with MetadataWatcher(shared.bootstrap_servers, interval_s=0.25, zookeeper=shared.zookeeper_connect) as watcher:
        result = run_dag(DAG_ID, {"cluster": "kafka_sandbox", "brokers": [first, second], "keep_order": True,
                                  **FAST})
    text = output(capfd, caplog)
    assert result.state == "success", result.states
    now = starts(shared)
    assert {b: now[b] - started_before[b] for b in before} == {
        b: 1 if b in (first, second) else 0 for b in before}, "each chosen broker started exactly once"
    stop_a = shutdown_times(shared, first)[shut_before[first]:]
    stop_b = shutdown_times(shared, second)[shut_before[second]:]
    assert len(stop_a) == 1 and len(stop_b) == 1, (stop_a, stop_b)
    opening_a = stop_a[0].replace(second=0, microsecond=0)
    opening_b = stop_b[0].replace(second=0, microsecond=0)
    # each stop was sent inside a window (the gate passed < 3 s after the opening; the SSH stop takes < 3 s)
    assert stop_a[0] - opening_a < timedelta(seconds=window_s + 3), stop_a
    assert stop_b[0] - opening_b < timedelta(seconds=window_s + 3), stop_b
    tis = {ti.map_index: ti for ti in result.task_instances if ti.task_id == "restart.broker"}
    end_a = tis[0].end_date.astimezone(UTC)
    assert end_a > opening_a + timedelta(seconds=window_s), "broker A finished after its window closed"
    assert opening_b > opening_a and opening_b >= end_a - timedelta(seconds=1), \
        "broker B waited for a later window than broker A's"
    assert "waits: outside the maintenance window" in text
    assert watcher.ever_offline() == [], watcher.explain_offline(shared)
    end = snapshot(admin(shared.bootstrap_servers))
    assert end.under_replicated == [] and end.offline == []
    assert lock_holder(shared) is None


def test_window_policy_fail_outside_the_window_touches_nothing(shared, monkeypatch, capfd, caplog):
    """A window that is closed now (it opens once a year, on 1 January) with ``window_policy=fail``: the first
    broker's task fails naming the window and the next opening; no broker restarted; lock released."""
    monkeypatch.setenv("KAFKA_OPS_TEST_WINDOW_CRON", "0 0 1 1 *")
    monkeypatch.setenv("KAFKA_OPS_TEST_WINDOW_S", "60")
    if datetime.now(UTC).strftime("%m-%d %H:%M") == "01-01 00:00":
        pytest.skip("the once-a-year window is open right now")
    before, started_before = registrations(shared), starts(shared)
    result = run_dag(DAG_ID, {"cluster": "kafka_sandbox", "window_policy": "fail", **FAST})
    text = output(capfd, caplog)
    assert result.state == "failed"
    assert result.mapped_states()[0] == "failed"
    assert re.search(r"broker \d+ \(1/\d\) NOT started: outside the maintenance window \(cron '0 0 1 1 \*' "
                     r"\(UTC\), 1 min\): the next one opens at \d{4}-01-01 00:00:00 UTC", text), text[-3000:]
    assert registrations(shared) == before and starts(shared) == started_before, "no broker was touched"
    assert lock_holder(shared) is None


def test_a_dry_run_outside_the_window_says_so_and_does_not_wait(shared, monkeypatch, capfd, caplog):
    monkeypatch.setenv("KAFKA_OPS_TEST_WINDOW_CRON", "0 0 1 1 *")
    monkeypatch.setenv("KAFKA_OPS_TEST_WINDOW_S", "60")
    if datetime.now(UTC).strftime("%m-%d %H:%M") == "01-01 00:00":
        pytest.skip("the once-a-year window is open right now")
    before = registrations(shared)
    result = run_dag(DAG_ID, {"cluster": "kafka_sandbox", "dry_run": True, **FAST})
    text = output(capfd, caplog)
    assert result.state == "success", result.states
    assert "would NOT start now: outside the maintenance window" in text
    assert registrations(shared) == before
