"""The lock check before every action of a roll (``runtime.lock_holding.ensure_held``), against a fake lock store
that counts what it was asked: this run's lock is one read; a free lock is taken again; another run's stops it.
Both real stores are checked against the sandbox in ``tests/integration/test_airflow_components.py``."""

from __future__ import annotations

import logging
from contextlib import contextmanager
from types import SimpleNamespace

import pytest
from airflow.sdk.exceptions import AirflowFailException
from hooks.cluster_lock import LockHolder
from runtime import lock_holding

LOG = logging.getLogger("test_lock_check")
CONTEXT = {"dag": SimpleNamespace(dag_id="kafka_rolling_restart"), "run_id": "manual__a"}
ME = "kafka_rolling_restart/manual__a"


class FakeStore:
    def __init__(self, holder: str | None) -> None:
        self.holder = holder
        self.calls: list[str] = []

    def current_holder(self) -> LockHolder | None:
        self.calls.append("read")
        return None if self.holder is None else LockHolder(self.holder, 1, "rolling restart")

    def try_acquire(self, holder: str, operation: str) -> LockHolder | None:
        self.calls.append("take")
        if self.holder is None:
            self.holder = holder
        return None if self.holder == holder else LockHolder(self.holder, 1, "decommission")


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch):
    def use(holder: str | None) -> FakeStore:
        fake = FakeStore(holder)

        @contextmanager
        def opened(profile):
            yield fake

        monkeypatch.setattr(lock_holding, "lock_store", opened)
        return fake
    return use


PROFILE = SimpleNamespace(cluster="kafka_x")


def test_this_runs_lock_is_one_read_and_nothing_else(store) -> None:
    fake = store(ME)
    lock_holding.ensure_held(PROFILE, CONTEXT, "rolling restart", LOG, timeout_s=5)
    assert fake.calls == ["read"], "no take (a CreateTopics and a second read on a lock topic) for a lock it holds"


def test_a_free_lock_is_taken_again_and_said(store, caplog: pytest.LogCaptureFixture) -> None:
    fake = store(None)
    with caplog.at_level(logging.WARNING, logger=LOG.name):
        lock_holding.ensure_held(PROFILE, CONTEXT, "rolling restart", LOG, timeout_s=5)
    assert fake.calls == ["read", "take"] and fake.holder == ME
    assert "this run did not hold the lock (resumed without its lock task?): took it again" in caplog.text


def test_another_runs_lock_stops_the_step(store) -> None:
    fake = store("kafka_decommission/manual__b")
    with pytest.raises(AirflowFailException, match="held by .*kafka_decommission/manual__b.*not acting on it"):
        lock_holding.ensure_held(PROFILE, CONTEXT, "rolling restart", LOG, timeout_s=5)
    assert fake.calls == ["read", "take"], "asked once: another run's lock is not waited for"
