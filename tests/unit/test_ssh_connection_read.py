"""A step's SSH commands on several hosts read the Airflow connection once (``hooks.broker_ssh.step_connection``):
each read is a request to Airflow's API server in a task; before, every ``BrokerShell`` read it twice (the provider's
``SSHHook`` once, the known_hosts lookup once). Without Airflow: the provider's read is counted."""

from __future__ import annotations

import json

import paramiko
import pytest
from airflow.providers.ssh.hooks.ssh import SSHHook
from airflow.sdk import Connection
from hooks import broker_ssh
from hooks.broker_ssh import BrokerHostKeyError, BrokerShell, step_connection


@pytest.fixture
def reads(monkeypatch, tmp_path) -> list[str]:
    """The connection ``ssh`` (a key file, a known_hosts file listing h1 and h2), its reads counted."""
    key = paramiko.RSAKey.generate(1024)
    key_file = tmp_path / "id_rsa"
    key.write_private_key_file(str(key_file))
    host_key = paramiko.RSAKey.generate(1024)
    known = tmp_path / "known_hosts"
    known.write_text("".join(f"[{h}]:2222 ssh-rsa {host_key.get_base64()}\n" for h in ("h1", "h2")))
    extra = {"key_file": str(key_file), "known_hosts": str(known)}
    conn = Connection(conn_id="ssh", conn_type="ssh", host="h0", login="kafka", port=2222, extra=json.dumps(extra))
    counted: list[str] = []

    def read(cls, conn_id: str) -> Connection:
        counted.append(conn_id)
        if conn_id != "ssh":
            raise LookupError(f"no connection {conn_id}")
        return conn

    monkeypatch.setattr(SSHHook, "get_connection", classmethod(read))
    return counted


def test_shells_given_the_steps_connection_do_not_read_it_again(reads) -> None:
    conn = step_connection("ssh")
    assert reads == ["ssh"]
    shells = [BrokerShell("ssh", host, conn=conn, pool=None) for host in ("h1", "h2")]
    assert reads == ["ssh"], "one read served both hosts' shells"
    assert [s.hook.remote_host for s in shells] == ["h1", "h2"]
    assert all(s.hook.username == "kafka" and s.hook.port == 2222 for s in shells)
    assert shells[0].hook.host_key.get_base64() == shells[1].hook.host_key.get_base64(), "known_hosts read per host"
    assert shells[0]._key != shells[1]._key, "each host keeps a connection of its own"


def test_a_shell_without_a_shared_read_reads_the_connection_once(reads) -> None:
    BrokerShell("ssh", "h1", pool=None)
    assert reads == ["ssh"], "the provider's hook and the known_hosts lookup share the read"


def test_a_host_missing_from_known_hosts_is_refused_with_a_shared_read_too(reads) -> None:
    with pytest.raises(BrokerHostKeyError, match=r"no host key for \[h3\]:2222"):
        BrokerShell("ssh", "h3", conn=step_connection("ssh"), pool=None)


def test_a_connection_that_cannot_be_read_leaves_each_shell_to_read_and_report_it(reads) -> None:
    assert step_connection("missing") is None
    with pytest.raises(LookupError, match="no connection missing"):
        BrokerShell("missing", "h1", pool=None)
    assert reads == ["missing", "missing"]


def test_the_hook_reads_another_connection_id_itself(reads) -> None:
    hook = broker_ssh._hook_class()
    conn = step_connection("ssh")
    with pytest.raises(LookupError):
        hook(ssh_conn_id="missing", remote_host="h1", connection=conn)
