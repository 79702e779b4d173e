"""The SSH connections a task process keeps between commands (``hooks.broker_ssh.ConnectionPool``), without sshd:
fake paramiko clients whose transports can be closed, stop answering channel opens, or age past the idle limit."""

from __future__ import annotations

import os

import paramiko
import pytest
from hooks import broker_ssh
from hooks.broker_ssh import ConnectionPool


class Transport:
    def __init__(self) -> None:
        self.active = True
        self.answers = True
        self.probes = 0

    def is_active(self) -> bool:
        return self.active

    def open_session(self, timeout: float) -> Transport:
        self.probes += 1
        if not self.answers:
            raise paramiko.SSHException("Timeout opening channel.")
        return self

    def close(self) -> None:
        pass


class Client:
    def __init__(self) -> None:
        self.transport = Transport()
        self.closed = False

    def get_transport(self) -> Transport:
        return self.transport

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [1000.0]
    monkeypatch.setattr(broker_ssh.time, "monotonic", lambda: now[0])
    return now


def test_a_client_given_back_serves_the_next_command_on_the_same_key(clock: list[float]) -> None:
    pool, client = ConnectionPool(), Client()
    assert pool.take("k") is None, "nothing kept yet: open a new one"
    pool.give_back("k", client)
    clock[0] += 5
    assert pool.take("k") is client and client.transport.probes == 1, "kept, and asked to open a channel first"
    assert pool.take("k") is None, "a taken client is not handed out twice"


def test_another_key_never_gets_a_kept_client() -> None:
    """The key hashes every connection setting (host, user, key, known host key): a changed setting opens anew."""
    pool, client = ConnectionPool(), Client()
    pool.give_back("settings-a", client)
    assert pool.take("settings-b") is None
    assert not client.closed and pool.take("settings-a") is client


@pytest.mark.parametrize("spoil, why", [
    (lambda c, clock: setattr(c.transport, "active", False), "its transport closed (sshd restarted)"),
    (lambda c, clock: setattr(c.transport, "answers", False), "it does not open a channel (sshd stopped answering)"),
    (lambda c, clock: clock.__setitem__(0, clock[0] + broker_ssh.IDLE_LIMIT_S + 1), "idle too long"),
])
def test_a_kept_client_in_doubt_is_closed_not_used(clock: list[float], spoil, why: str) -> None:
    pool, client = ConnectionPool(), Client()
    pool.give_back("k", client)
    spoil(client, clock)
    assert pool.take("k") is None, why
    assert client.closed, why


def test_giving_back_a_second_client_closes_the_first() -> None:
    pool, first, second = ConnectionPool(), Client(), Client()
    pool.give_back("k", first)
    pool.give_back("k", second)
    assert first.closed and pool.take("k") is second


def test_a_forked_child_keeps_nothing_of_its_parent() -> None:
    pool, client = ConnectionPool(), Client()
    pool.give_back("k", client)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the parent's client is not handed out, and not closed from here
        os.write(write, b"1" if pool.take("k") is None and not client.closed else b"0")
        os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(read, 1) == b"1"
    assert pool.take("k") is client, "the parent still has it"


def test_giving_back_closes_every_client_idle_too_long(clock: list[float]) -> None:
    pool, old, fresh = ConnectionPool(), Client(), Client()
    pool.give_back("old-host", old)
    clock[0] += broker_ssh.IDLE_LIMIT_S + 1
    pool.give_back("other-host", fresh)
    assert old.closed and not fresh.closed
