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
from runtime import kept_clients, lock_holding

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


class _Opened:
    """Patches ``_opened_store``: counts the stores opened and closed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.opened: list[FakeStore] = []
        self.closed = 0

        @contextmanager
        def opened(profile):
            store = FakeStore(ME)
            self.opened.append(store)
            try:
                yield store
            finally:
                self.closed += 1

        monkeypatch.setattr(lock_holding, "_opened_store", opened)


KEYED = SimpleNamespace(cluster="kafka_x", lock_in="zookeeper", zookeeper="zk:2181")


def test_a_task_keeps_one_lock_store_open_for_its_checks_and_closes_it_at_its_end(monkeypatch) -> None:
    """A node roll checks the lock before each action (four to five times a batch): within ``kept_open`` the store is
    opened once, every check reads the holder again, and the store is closed when the block ends."""
    opened = _Opened(monkeypatch)
    with kept_clients.kept_open():
        for _ in range(4):
            lock_holding.ensure_held(KEYED, CONTEXT, "rolling restart", LOG, timeout_s=5)
        assert len(opened.opened) == 1 and opened.closed == 0
        assert opened.opened[0].calls == ["read"] * 4, "each check reads the holder again"
    assert opened.closed == 1
    lock_holding.ensure_held(KEYED, CONTEXT, "rolling restart", LOG, timeout_s=5)
    assert len(opened.opened) == 2 and opened.closed == 2, "outside the block a check opens and closes its own"


def test_a_kept_store_that_failed_is_closed_and_the_next_check_opens_a_fresh_one(monkeypatch) -> None:
    opened = _Opened(monkeypatch)
    with kept_clients.kept_open():
        with pytest.raises(ConnectionError):
            with lock_holding.lock_store(KEYED):
                raise ConnectionError("session lost")
        assert opened.closed == 1
        lock_holding.ensure_held(KEYED, CONTEXT, "rolling restart", LOG, timeout_s=5)
        lock_holding.ensure_held(KEYED, CONTEXT, "rolling restart", LOG, timeout_s=5)
        assert len(opened.opened) == 2 and opened.opened[1].calls == ["read", "read"]
        with kept_clients.kept_open():  # nested: keeps until the outermost block ends
            lock_holding.ensure_held(KEYED, CONTEXT, "rolling restart", LOG, timeout_s=5)
        assert opened.closed == 1 and len(opened.opened) == 2
    assert opened.closed == 2
