"""What a node needs answering before it starts (``kafka_ops.start_needs``) and how the run looks at it
(``runtime.start_dependencies``), with fakes for the cluster and a ZooKeeper address nothing listens on."""

from __future__ import annotations

import socket
import time
from types import SimpleNamespace

import pytest
from kafka_ops.profile import ClusterProfile
from kafka_ops.roll_spec import ClusterMode
from kafka_ops.start_needs import QUORUM_LEADER, ZOOKEEPER, registers_with, start_again
from runtime.start_dependencies import (
    Dependency,
    all_answer,
    dependencies,
    quorum_leader_answers,
    zookeeper_answers,
    zookeeper_connect,
)
from runtime.waiting import Check


@pytest.mark.parametrize(("node", "mode", "needs"), [
    ("broker", ClusterMode.ZOOKEEPER, (ZOOKEEPER,)),
    ("broker", ClusterMode.MIGRATING, (ZOOKEEPER, QUORUM_LEADER)),
    ("broker", ClusterMode.KRAFT, (QUORUM_LEADER,)),
    ("controller", ClusterMode.KRAFT, ()),
    ("controller", ClusterMode.MIGRATING, (ZOOKEEPER,)),
    ("broker", "kraft", (QUORUM_LEADER,)),
])
def test_what_a_node_registers_with_follows_its_kind_and_the_mode(node, mode, needs) -> None:
    assert registers_with(node, mode) == needs


def test_an_unknown_node_kind_or_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown node kind 'zookeeper'"):
        registers_with("zookeeper", ClusterMode.KRAFT)
    with pytest.raises(ValueError):
        registers_with("broker", "zk")


@pytest.mark.parametrize(("answers", "elapsed", "again"), [
    (False, 10.0, True),     # an outage explains the failed start: send it again once it answers
    (True, 10.0, False),     # everything answered: the node's own failure
    (False, 900.0, False),   # the step's time is up
])
def test_a_failed_start_is_sent_again_only_during_an_outage_within_the_timeout(answers, elapsed, again) -> None:
    assert start_again(answers, elapsed, timeout_s=900.0) is again


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_zookeeper_nobody_listens_on_does_not_answer_within_the_timeout() -> None:
    began = time.monotonic()
    check = zookeeper_answers(f"127.0.0.1:{_closed_port()}", timeout_s=1.0)
    assert not check.ok and "does not answer" in check.message
    assert time.monotonic() - began < 10


class FakeAdmin:
    def __init__(self, leader: int | None = 101, fail: Exception | None = None, zk: str | None = None) -> None:
        self.leader, self.fail, self.zk = leader, fail, zk
        self.config_reads: list[int] = []

    def describe_quorum(self):
        if self.fail:
            raise self.fail
        return SimpleNamespace(has_leader=self.leader is not None, leader_id=self.leader if self.leader else -1,
                               leader_epoch=7)

    def describe_broker_configs(self, broker_id: int, names):
        self.config_reads.append(broker_id)
        if broker_id == 1:
            raise TimeoutError("broker 1 does not answer")
        return {"zookeeper.connect": self.zk}


def test_the_quorum_leader_answers_only_when_one_is_named() -> None:
    assert quorum_leader_answers(FakeAdmin(leader=101)) == Check(True, "KRaft quorum leader 101 answers (epoch 7)")
    assert not quorum_leader_answers(FakeAdmin(leader=None)).ok
    timed_out = quorum_leader_answers(FakeAdmin(fail=TimeoutError("request timed out")))
    assert not timed_out.ok and "TimeoutError: request timed out" in timed_out.message


def _profile(**extra) -> ClusterProfile:
    return ClusterProfile.from_connection_fields("c", "127.0.0.1:9092", {"ssh_conn_id": "ssh", **extra})


def test_the_zookeeper_connect_string_is_the_profiles_else_a_running_brokers() -> None:
    admin = FakeAdmin(zk="zk1:2181/kafka")
    def never() -> list[int]:
        raise AssertionError("the brokers are not asked when the profile names ZooKeeper")

    assert zookeeper_connect(_profile(zookeeper="zk0:2181"), admin, never) == "zk0:2181"
    assert admin.config_reads == []
    assert zookeeper_connect(_profile(), admin, lambda: [1, 2]) == "zk1:2181/kafka"
    assert admin.config_reads == [1, 2], "a broker that does not answer is skipped"
    assert zookeeper_connect(_profile(), FakeAdmin(zk=None), lambda: [2]) is None


def test_dependencies_per_mode_and_the_first_that_does_not_answer_is_named() -> None:
    admin = FakeAdmin(leader=None, zk="zk1:2181")
    deps = dependencies("broker", ClusterMode.MIGRATING, _profile(zookeeper="zk0:2181"), admin, list)
    assert [(d.name, d.short) for d in deps] == [("ZooKeeper zk0:2181", "ZooKeeper"),
                                                 ("the KRaft quorum leader", "quorum leader")]
    assert dependencies("controller", ClusterMode.KRAFT, _profile(), admin, list) == []
    assert dependencies("broker", ClusterMode.ZOOKEEPER, _profile(), FakeAdmin(zk=None), lambda: [2]) == []
    ok = Dependency("a", "a", lambda: Check(True, "a answers"))
    down = Dependency("b", "b", lambda: Check(False, "b does not answer"))
    assert all_answer([ok, down]) == Check(False, "b does not answer")
    assert all_answer([ok, ok]) == Check(True, "a answers; a answers")
    assert all_answer([]).ok


class _Session:
    """A fake kazoo client: ``answers`` says what each read gives (a list of broker ids, or an exception)."""

    def __init__(self, answers: list) -> None:
        self.answers, self.reads = answers, 0

    def get_children_async(self, path: str):
        assert path == "/brokers/ids"
        self.reads += 1
        answer = self.answers.pop(0)
        return SimpleNamespace(get=lambda timeout: _raise(answer) if isinstance(answer, Exception) else answer)


def _raise(exc: Exception):
    raise exc


def test_within_a_task_zookeeper_is_asked_again_on_one_kept_session_and_a_failed_one_is_replaced(monkeypatch) -> None:
    """A node roll asks ZooKeeper before each stop and start: within ``kept_open`` the session is opened once and each
    check reads again on it; a read that fails says "does not answer" and closes the session, so the next check
    asks for a new one."""
    from contextlib import contextmanager

    from runtime import kept_clients, start_dependencies

    sessions: list[_Session] = []
    closed: list[_Session] = []
    script = [[["0", "1"], ["0", "1", "2"], TimeoutError("no answer")], [["0", "1", "2"]]]

    @contextmanager
    def session(connect, timeout_s):
        s = _Session(script.pop(0))
        sessions.append(s)
        try:
            yield s
        finally:
            closed.append(s)

    monkeypatch.setattr(start_dependencies, "_kazoo_session", session)
    with kept_clients.kept_open():
        checks = [zookeeper_answers("zk:2181/kafka", timeout_s=1.0) for _ in range(4)]
        assert len(sessions) == 2 and closed == [sessions[0]], "one session until a read failed, then a new one"
    assert [c.ok for c in checks] == [True, True, False, True]
    assert checks[1].message == "ZooKeeper answers (3 brokers registered)"
    assert checks[2].message == "ZooKeeper zk:2181/kafka does not answer: TimeoutError: no answer"
    assert closed == sessions, "the kept session is closed when the task's block ends"
