"""SSH to one broker host through the SSH provider's ``SSHHook``, host key checking always on.

One Airflow SSH connection serves every broker of a cluster: its login, key and options apply,
and the remote host is set per broker. The broker host's key must be known: from a ``known_hosts``
extra naming a known_hosts file (one entry per broker host, as a fleet has; the SSH provider
itself only knows a single ``host_key`` extra), else the connection's ``host_key`` extra; paramiko
also consults the system ``~/.ssh/known_hosts`` first, so an entry there for a broker host must
agree. An unknown or mismatched key refuses the connection (the provider retries the connect a
few times first, ~8 s). ``no_host_key_check`` is refused: an ops tool that restarts brokers must
not be pointed at an impostor host.
"""

from __future__ import annotations

import os

import paramiko
from airflow.providers.ssh.hooks.ssh import SSHHook


class BrokerHostKeyError(RuntimeError):
    """No trusted host key for the broker host, or host key checking was disabled (not retryable)."""


class IncompleteOutput(RuntimeError):
    """A read-only command's output came back without its end mark on every attempt (:meth:`BrokerShell.read`)."""


#: The line :meth:`BrokerShell.read` appends to a command's output, with the command's exit code.
END_MARK = "--kafka-ops-end-of-output--"


class BrokerShell:
    """Runs commands on broker host ``host`` over the SSH connection ``ssh_conn_id``.

    :param ssh_conn_id: Airflow SSH connection (login, key_file, port, host key extras).
    :param host: the broker's host name or address (overrides the connection's host).
    :param conn_timeout_s: TCP/SSH connect timeout, seconds (default 10).
    """

    def __init__(self, ssh_conn_id: str, host: str, conn_timeout_s: float = 10.0) -> None:
        self.ssh_conn_id = ssh_conn_id
        self.host = host
        self.hook = SSHHook(ssh_conn_id=ssh_conn_id, remote_host=host, conn_timeout=int(conn_timeout_s))
        if self.hook.no_host_key_check or self.hook.allow_host_key_change:
            raise BrokerHostKeyError(
                f"SSH connection {ssh_conn_id!r} disables host key checking; kafka-ops refuses to use it"
            )
        known_hosts = (self.hook.get_connection(ssh_conn_id).extra_dejson or {}).get("known_hosts")
        if known_hosts:
            self.hook.host_key = self._known_host_key(os.path.expanduser(known_hosts))

    def _known_host_key(self, path: str) -> paramiko.PKey:
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
        with self.hook.get_conn() as client:
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
        with self.hook.get_conn() as client:
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
