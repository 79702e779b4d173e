"""A roll's step labels are sent without waiting (``runtime.grid.show_step(wait=False)``): each is one request to
Airflow's API server through the supervisor, sent about eight times a batch between its steps. The step goes on at once;
a burst sends only its newest label; ``flush_labels`` waits until the last one was sent, as a task does before it ends
(Airflow sends the task's final label with its state: a later one would replace it)."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest
from airflow.sdk.execution_time import task_runner
from runtime import grid


class SlowComms:
    def __init__(self) -> None:
        self.sent: list[str] = []
        self.release = threading.Event()

    def send(self, msg):
        self.release.wait(5)
        self.sent.append(msg.rendered_map_index)


@pytest.fixture
def comms(monkeypatch: pytest.MonkeyPatch) -> SlowComms:
    fake = SlowComms()
    monkeypatch.setattr(task_runner, "SUPERVISOR_COMMS", fake, raising=False)
    monkeypatch.setattr(grid, "_shared_safely", lambda comms: comms is fake)  # as the task process's channel
    return fake


def test_a_label_sent_without_waiting_returns_at_once_and_the_flush_waits_for_it(comms) -> None:
    ti = SimpleNamespace(map_index=0, rendered_map_index="brokers 0, 3 (1/3)")
    began = time.monotonic()
    grid.show_step({"ti": ti}, "brokers 0, 3 (1/3) · gate", wait=False)
    assert time.monotonic() - began < 0.5 and ti.rendered_map_index == "brokers 0, 3 (1/3) · gate"
    assert not grid.flush_labels(0.2), "not sent yet: the API server has not answered"
    comms.release.set()
    assert grid.flush_labels(5) and comms.sent == ["brokers 0, 3 (1/3) · gate"]


def test_a_burst_of_labels_sends_the_newest_last(comms) -> None:
    ti = SimpleNamespace(map_index=0, rendered_map_index="broker 1 (2/3)")
    for step in ("gate", "stop", "gone?", "start"):
        grid.show_step({"ti": ti}, f"broker 1 (2/3) · {step}", wait=False)
    comms.release.set()
    assert grid.flush_labels(5)
    assert comms.sent[-1] == "broker 1 (2/3) · start" and len(comms.sent) <= 2, comms.sent


def test_the_default_waits_for_the_label_to_be_sent(comms) -> None:
    comms.release.set()
    ti = SimpleNamespace(map_index=1, rendered_map_index="broker 2 (3/3)")
    grid.show_step({"ti": ti}, "broker 2 (3/3) · soak 30 s")
    assert comms.sent == ["broker 2 (3/3) · soak 30 s"]


def test_dag_tests_in_process_channel_gets_the_label_at_once(monkeypatch) -> None:
    """``dag.test``'s in-process channel removes ``task_runner.SUPERVISOR_COMMS`` while it answers and shares one
    answers queue: a second thread using it broke the task's own requests (an ImportError of SUPERVISOR_COMMS in a
    DAG test). Only the task process's channel (``CommsDecoder``, locked per request) is used from the sender."""
    from airflow.sdk.execution_time.supervisor import InProcessSupervisorComms

    assert not grid._shared_safely(InProcessSupervisorComms.__new__(InProcessSupervisorComms))
    fake = SlowComms()
    fake.release.set()
    monkeypatch.setattr(task_runner, "SUPERVISOR_COMMS", fake, raising=False)
    ti = SimpleNamespace(map_index=0, rendered_map_index="broker 0 (1/1)")
    grid.show_step({"ti": ti}, "broker 0 (1/1) · stop", wait=False)
    assert fake.sent == ["broker 0 (1/1) · stop"], "sent before show_step returned"
