"""SSH to one broker host through the SSH provider's ``SSHHook``, host key checking always on.

One Airflow SSH connection serves every broker of a cluster: its login, key and options apply,
and the remote host is set per broker. The broker host's key must be known: from a ``known_hosts``
extra naming a known_hosts file (one entry per broker host, as a fleet has; the SSH provider
itself only knows a single ``host_key`` extra), else the connection's ``host_key`` extra; paramiko
also consults the system ``~/.ssh/known_hosts`` first, so an entry there for a broker host must
agree. An unknown or mismatched key refuses the connection (the provider retries the connect a
few times first, ~8 s). ``no_host_key_check`` is refused: an ops tool that restarts brokers must
not be pointed at an impostor host.

One SSH connection per host is kept open in the process and reused by the next command (:class:`ConnectionPool`):
a roll sends a broker host several commands within seconds (status, stop, status, start), and each new connection
costs a key exchange and a login (0.3-1 s on an idle machine, 2-3 s on a loaded one). A kept connection is used
only while it is younger than :data:`IDLE_LIMIT_S` since its last command, its transport is active and it opens a
channel within :data:`PROBE_TIMEOUT_S` (a connection sshd stopped answering is closed, never sent a command), and
only for the same connection settings (a changed key, user or known host key opens a new one, checked as the first
time).
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: a task that runs no SSH command does not pay for paramiko (0.1-0.2 s)
    import paramiko
    from airflow.sdk import Connection

#: Seconds since its last command after which a kept connection is closed instead of reused.
IDLE_LIMIT_S = 60.0
#: Seconds a kept connection has to open a channel before its next command (else it is closed, a new one opened).
PROBE_TIMEOUT_S = 5.0


class ConnectionPool:
    """Open SSH clients of this process, at most one idle per (settings, host) key: a command takes one (or opens a
    new one), gives it back when it ended well; a client that failed is closed. Thread-safe; emptied in a forked
    child (an inherited client belongs to the parent)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: dict[str, tuple[paramiko.SSHClient, float]] = {}
        os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        self._lock = threading.Lock()
        self._idle = {}  # the parent's clients: never closed from here (their transports are the parent's)

    def take(self, key: str) -> paramiko.SSHClient | None:
        """A kept client for ``key`` that still answers (None: open a new one)."""
        with self._lock:
            kept = self._idle.pop(key, None)
        if kept is None:
            return None
        import paramiko

        client, used = kept
        transport = client.get_transport()
        try:
            if time.monotonic() - used > IDLE_LIMIT_S or transport is None or not transport.is_active():
                raise paramiko.SSHException("idle too long or closed")
            transport.open_session(timeout=PROBE_TIMEOUT_S).close()
        except Exception:  # noqa: BLE001 - any doubt: a new connection
            client.close()
            return None
        return client

    def give_back(self, key: str, client: paramiko.SSHClient) -> None:
        """Keep ``client`` for the next command on ``key``, closing the one kept before, if any, and every kept client
        idle longer than :data:`IDLE_LIMIT_S` (a long process, like a test session, keeps no stale ones)."""
        now = time.monotonic()
        with self._lock:
            stale = [k for k, (_, used) in self._idle.items() if k == key or now - used > IDLE_LIMIT_S]
            closing = [self._idle.pop(k)[0] for k in stale]
            self._idle[key] = (client, now)
        for old in closing:
            old.close()


#: This process's kept SSH connections.
POOL = ConnectionPool()


class BrokerHostKeyError(RuntimeError):
    """No trusted host key for the broker host, or host key checking was disabled (not retryable)."""


class IncompleteOutput(RuntimeError):
    """A read-only command's output came back without its end mark on every attempt (:meth:`BrokerShell.read`)."""


def read_connection(ssh_conn_id: str) -> Connection:
    """The Airflow connection ``ssh_conn_id``, read now (in a task: one request to Airflow's API server, 0.05-0.6 s
    on loaded cores). A step that runs commands on several hosts reads it once and hands it to each
    :class:`BrokerShell`; every step reads it again, so a changed connection (a rotated key, a known_hosts file)
    serves the next step.

    :raises airflow.sdk.exceptions.AirflowNotFoundException: no such connection.
    """
    from airflow.providers.ssh.hooks.ssh import SSHHook

    return SSHHook.get_connection(ssh_conn_id)


def step_connection(ssh_conn_id: str) -> Connection | None:
    """:func:`read_connection` for a step's shells on several hosts, or None when it cannot be read now: each
    :class:`BrokerShell` then reads it itself and the failure is reported as that host's, as before the read was
    shared."""
    try:
        return read_connection(ssh_conn_id)
    except Exception:  # noqa: BLE001 - reported by each shell's own read
        return None


_HOOK_CLASS: type | None = None


def _hook_class() -> type:
    """The provider's ``SSHHook``, built from a connection already read (``connection=``) instead of reading it again
    (it reads its connection in its constructor). Made on first use: a task that runs no SSH command does not
    import the provider."""
    global _HOOK_CLASS
    if _HOOK_CLASS is None:
        from airflow.providers.ssh.hooks.ssh import SSHHook

        class ReadSSHHook(SSHHook):
            def __init__(self, *args: object, connection: Connection, **kwargs: object) -> None:
                self._connection = connection
                super().__init__(*args, **kwargs)

            def get_connection(self, conn_id: str) -> Connection:  # type: ignore[override]
                if conn_id == self._connection.conn_id:
                    return self._connection
                return SSHHook.get_connection(conn_id)

        _HOOK_CLASS = ReadSSHHook
    return _HOOK_CLASS


#: The line :meth:`BrokerShell.read` appends to a command's output, with the command's exit code.
END_MARK = "--kafka-ops-end-of-output--"


class BrokerShell:
    """Runs commands on broker host ``host`` over the SSH connection ``ssh_conn_id``.

    :param ssh_conn_id: Airflow SSH connection (login, key_file, port, host key extras).
    :param host: the broker's host name or address (overrides the connection's host).
    :param conn_timeout_s: TCP/SSH connect timeout, seconds (default 10).
    :param pool: where the connection is kept between commands (None: a new connection per command, closed after).
    :param conn: the Airflow connection ``ssh_conn_id`` as :func:`read_connection` read it for this command's step
        (the commands of one step on several hosts share one read); None: read it now.
    """

    def __init__(self, ssh_conn_id: str, host: str, conn_timeout_s: float = 10.0,
                 pool: ConnectionPool | None = POOL, conn: Connection | None = None) -> None:
        self.ssh_conn_id = ssh_conn_id
        self.host = host
        self.pool = pool
        conn = conn if conn is not None else read_connection(ssh_conn_id)
        self.hook = _hook_class()(ssh_conn_id=ssh_conn_id, remote_host=host, conn_timeout=int(conn_timeout_s),
                                  connection=conn)
        if self.hook.no_host_key_check or self.hook.allow_host_key_change:
            raise BrokerHostKeyError(
                f"SSH connection {ssh_conn_id!r} disables host key checking; kafka-ops refuses to use it"
            )
        known_hosts = (conn.extra_dejson or {}).get("known_hosts")
        if known_hosts:
            self.hook.host_key = self._known_host_key(os.path.expanduser(known_hosts))
        host_key = self.hook.host_key.get_base64() if self.hook.host_key is not None else ""
        # every setting a connection was opened with: a kept one serves only the same (a hash: no secret kept)
        self._key = hashlib.sha256("\0".join([ssh_conn_id, host, str(self.hook.port), conn.get_uri(),
                                               host_key]).encode()).hexdigest()

    @contextmanager
    def _client(self) -> Iterator[paramiko.SSHClient]:
        """An SSH client to the host for one command: kept from an earlier command (:class:`ConnectionPool`) or
        new; given back after the command, closed when the command raised."""
        if self.pool is None:
            with self.hook.get_conn() as client:
                yield client
            return
        client = self.pool.take(self._key)
        if client is None:
            client = self.hook.get_conn()
            self.hook.client = None  # the pool owns it now
        try:
            yield client
        except BaseException:
            client.close()
            raise
        self.pool.give_back(self._key, client)

    def connect(self) -> None:
        """Open the connection now (host key checked) and keep it for the next command: a roll calls this while its
        gate waits, so the stop does not wait for a key exchange. Raises as :meth:`run` does."""
        with self._client():
            pass

    def _known_host_key(self, path: str) -> paramiko.PKey:
        import paramiko

        keys = paramiko.HostKeys()
        try:
            keys.load(path)
        except OSError as exc:
            raise BrokerHostKeyError(f"cannot read known_hosts file {path}: {exc}") from exc
        port = self.hook.port
        name = self.host if port == 22 else f"[{self.host}]:{port}"
        entry = keys.lookup(name)
        if not entry:
            raise BrokerHostKeyError(f"{path} has no host key for {name}: refusing to connect")
        return next(iter(entry.values()))

    def run(self, command: str, timeout_s: float) -> tuple[int, str, str]:
        """Run ``command`` (already quoted by the caller) and return (exit code, stdout, stderr).

        :param timeout_s: the command's time limit, seconds.
        :raises paramiko.SSHException / OSError: connection, authentication or host key failures.
        :raises airflow.sdk.exceptions.AirflowException: the command timed out.
        """
        with self._client() as client:
            rc, out, err = self.hook.exec_ssh_client_command(
                client, command, get_pty=False, environment=None, timeout=int(timeout_s)
            )
        return rc, out.decode(errors="replace"), err.decode(errors="replace")

    def collect(self, command: str, timeout_s: float) -> tuple[int, str, str]:
        """Run ``command`` and return (exit code, stdout, stderr), reading both streams to their end of file.

        Unlike the provider's ``exec_ssh_client_command`` (used by :meth:`run`), which stops reading once the
        exit status has arrived and nothing is buffered, this waits for the server's EOF on the channel, which
        OpenSSH sends after the last byte of output. For read-only commands with small output (files,
        listings): stdout is read before stderr, so a stderr larger than the channel window (2 MiB) would stall.

        :param timeout_s: the limit for each read from the channel, seconds.
        :raises socket.timeout: no data within ``timeout_s``.
        :raises paramiko.SSHException / OSError: connection, authentication or host key failures.
        """
        with self._client() as client:
            stdin, stdout, stderr = client.exec_command(command, timeout=timeout_s)
            stdin.close()
            stdout.channel.shutdown_write()
            out, err = stdout.read(), stderr.read()
            rc = stdout.channel.recv_exit_status()
        return rc, out.decode(errors="replace"), err.decode(errors="replace")

    def read(self, command: str, timeout_s: float, attempts: int = 3) -> tuple[int, str, str]:
        """Run a read-only ``command`` and return (exit code, its complete stdout, stderr).

        The provider's reader (:meth:`run`) can return a truncated stdout (seen: a ``cat server.properties``
        that came back empty: it stops at the exit status, which OpenSSH may send before the last output), so
        this reads to end of file (:meth:`collect`) and checks it: the command is followed by a line with
        :data:`END_MARK` and its exit code; a reply without that line is read again (the command must be safe
        to repeat), up to ``attempts`` times.

        :param timeout_s: each attempt's time limit for each read, seconds.
        :raises IncompleteOutput: no attempt came back whole.
        :raises socket.timeout / paramiko.SSHException / OSError: as :meth:`collect`.
        """
        wrapped = f"( {command}\n); printf '\\n%s %d\\n' {END_MARK} $?"  # a subshell: ``exit`` ends only it
        for _ in range(attempts):
            _, out, err = self.collect(wrapped, timeout_s)
            body, mark, tail = out.rpartition(f"\n{END_MARK} ")
            if mark and tail.strip().isdigit():
                return int(tail.strip()), body, err
        raise IncompleteOutput(f"{self.host}: the output of a read-only command came back incomplete "
                               f"{attempts} times over SSH")
