"""Commands on a broker host over SSH: the service stop / start and a run's pre-stop / pre-start steps.

What may run is owned by whoever owns the cluster connection, not by whoever triggers a run: a run's
param names a command of the profile's ``commands`` (or, for stop / start, nothing = the profile's
``service_stop`` / ``service_start``); shell text of its own runs only where the profile says
``allow_adhoc_commands: true`` (:meth:`kafka_ops.profile.ClusterProfile.command`). The command runs as
``KAFKA_BROKER_ID=<id> bash -c '<command>'``, every value quoted with ``shlex.quote``; a non-zero exit fails
the step with the command's stderr. The log says which command ran, why it was chosen, and who triggered
the run.

KRaft controller hosts run the profile's ``controller_service_*`` commands (:func:`controller_command`), the
same way; :meth:`BrokerCommand.status` runs a status command and returns its exit code instead of failing.
"""

from __future__ import annotations

import logging
import shlex
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowFailException
from hooks.broker_ssh import BrokerShell, step_connection
from kafka_ops.command_output import failure_text
from kafka_ops.profile import ClusterProfile

if TYPE_CHECKING:
    from airflow.sdk import Connection

STEPS = ("pre_stop", "stop", "pre_start", "start")


def remote_command(command: str, broker_id: int) -> str:
    """The exact text sent over SSH: ``KAFKA_BROKER_ID=<id> bash -c '<command>'`` (quoted)."""
    return f"KAFKA_BROKER_ID={shlex.quote(str(broker_id))} bash -c {shlex.quote(command)}"


class BrokerCommandFailed(Exception):
    """The command ran and exited non-zero, or could not be run (SSH refused, host key unknown)."""


@dataclass(frozen=True)
class BrokerCommand:
    """One step's command on one broker host.

    :param step: ``pre_stop``, ``stop``, ``pre_start`` or ``start`` (``status`` for :meth:`status`).
    :param broker_id: the node id (a broker's, or a KRaft controller's).
    :param text: the shell text (``{broker_id}`` already filled).
    :param origin: how it was chosen ("profile command 'drain-lb'", "service command (service_stop)").
    :param node: what runs on the host, for the log: ``"broker"`` or ``"controller"``.
    """

    step: str
    broker_id: int
    host: str
    text: str
    origin: str
    node: str = "broker"

    @classmethod
    def choose(cls, profile: ClusterProfile, step: str, choice: str | None, broker: dict) -> BrokerCommand | None:
        """The command a run's ``choice`` means for ``step`` on ``broker`` (``{"id", "host"}``); None =
        nothing to run (a pre-step not asked for).

        :raises ValueError: unknown step, or shell text the profile does not allow (named).
        """
        if step not in STEPS:
            raise ValueError(f"step must be one of {STEPS}, got {step!r}")
        chosen = profile.command(choice, step, int(broker["id"]))
        if chosen is None:
            return None
        return cls(step, int(broker["id"]), str(broker["host"]), chosen[0], chosen[1])

    @classmethod
    def status_of(cls, profile: ClusterProfile, broker: dict) -> BrokerCommand:
        """The profile's service status command on ``broker`` (``{"id", "host"}``)."""
        bid = int(broker["id"])
        return cls("status", bid, str(broker["host"]), profile.service_command("status", bid),
                   "service command (service_status)")

    def describe(self) -> str:
        return f"{self.node} {self.broker_id} ({self.host}): {self.step}: {self.origin}: {self.text}"

    def run(self, ssh_conn_id: str, timeout_s: float, log: logging.Logger, dry_run: bool = False,
            triggered_by: str | None = None, conn: Connection | None = None) -> int:
        """Run it (or, with ``dry_run``, only log it); returns the exit code (0).

        :param timeout_s: the command's time limit, seconds (a controlled shutdown of a large broker
            takes minutes).
        :param conn: the connection as the step read it once for all its hosts
            (``hooks.broker_ssh.step_connection``); None: read here.
        :raises BrokerCommandFailed: non-zero exit (with stderr), SSH failure (host named, cause given).
        """
        who = f" (run triggered by {triggered_by})" if triggered_by else ""
        if dry_run:
            log.info("DRY RUN: would run %s%s", self.describe(), who)
            return 0
        log.info("running %s%s", self.describe(), who)
        try:
            rc, out, err = BrokerShell(ssh_conn_id, self.host, conn=conn).run(remote_command(self.text, self.broker_id),
                                                                              timeout_s)
        except Exception as exc:
            raise BrokerCommandFailed(
                f"{self.step} on {self.node} {self.broker_id}: could not run it on {self.host} over SSH "
                f"connection {ssh_conn_id!r}: {type(exc).__name__}: {exc}. Check that the host is up, its sshd "
                f"answers and its host key is known; nothing ran"
            ) from exc
        for line in out.splitlines():
            log.info("stdout: %s", line)
        for line in err.splitlines():
            log.info("stderr: %s", line)
        if rc != 0:
            raise BrokerCommandFailed(f"{self.step} on {self.node} {self.broker_id} ({self.host}) exited {rc}: "
                                      f"{failure_text(err, out)}")
        return rc

    def status(self, ssh_conn_id: str, timeout_s: float) -> tuple[int, str]:
        """Run a status command (read-only) and return ``(exit code, stdout)``; a non-zero exit is an answer
        here, not a failure (``systemctl is-active`` exits 3 for a stopped unit).

        :raises Exception: SSH errors as raised (``runtime.failures`` types them: a refused connection is
            transient, a host key mismatch fatal), so a wait can poll through a host that is rebooting.
        """
        rc, out, _ = BrokerShell(ssh_conn_id, self.host).run(remote_command(self.text, self.broker_id), timeout_s)
        return rc, out


def connect_ahead(ssh_conn_id: str, hosts: Iterable[str], log: logging.Logger) -> list[threading.Thread]:
    """Open an SSH connection to each of ``hosts`` in the background (host keys checked), kept for the commands that
    follow (``hooks.broker_ssh.ConnectionPool``): a roll calls this before its gate, so the stop does not wait for a
    key exchange. The connection settings are read here, in the caller's thread (a task's requests to Airflow
    stay in one thread); only the network part runs in the background. A failure is only logged at DEBUG: the
    command that needs the host reports it. Returns the started threads (daemons)."""
    def connect(shell: BrokerShell) -> None:
        try:
            shell.connect()
        except Exception as exc:  # noqa: BLE001 - the command that needs it says what went wrong
            log.debug("SSH to %s not opened ahead: %s", shell.host, exc)

    shells = []
    conn = step_connection(ssh_conn_id)
    for host in sorted(set(hosts)):
        try:
            shells.append(BrokerShell(ssh_conn_id, host, conn=conn))
        except Exception as exc:  # noqa: BLE001 - as above
            log.debug("SSH to %s not opened ahead: %s", host, exc)
    threads = [threading.Thread(target=connect, args=(shell,), name=f"ssh-ahead-{shell.host}", daemon=True)
               for shell in shells]
    for thread in threads:
        thread.start()
    return threads


def controller_command(profile: ClusterProfile, action: str, controller: dict) -> BrokerCommand:
    """The profile's service command for ``action`` (``stop``, ``start``, ``status``) on a KRaft controller
    (``{"id", "host"}``): ``controller_service_<action>``, else the broker's ``service_<action>``
    (:meth:`kafka_ops.profile.ClusterProfile.controller_service_command`).

    :raises ValueError: unknown action.
    """
    text, origin = profile.controller_service_command(action, int(controller["id"]))
    return BrokerCommand(action, int(controller["id"]), str(controller["host"]), text, origin, node="controller")


#: The run's command settings and the profile step each chooses.
COMMAND_SETTINGS = {"pre_stop": "pre_stop", "stop_command": "stop", "pre_start": "pre_start", "start_command": "start"}


def check_commands(profile: ClusterProfile, cfg: dict[str, Any], broker: dict) -> list[str]:
    """The run's command choices (``pre_stop``, ``stop_command``, ...) as the profile resolves them for
    ``broker``; raises AirflowFailException naming a choice the profile does not allow."""
    chosen = []
    for setting, step in COMMAND_SETTINGS.items():
        if setting not in cfg:
            continue
        try:
            command = BrokerCommand.choose(profile, step, cfg[setting], broker)
        except ValueError as exc:
            raise AirflowFailException(f"param {setting}: {exc}") from exc
        if command is not None:
            chosen.append(f"{step}: {command.origin}")
    return chosen
