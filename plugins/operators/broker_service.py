"""Stop, start and pre-/post-step commands on a broker host over SSH.

Commands: ``stop`` / ``start`` default to the cluster profile's ``service_stop`` / ``service_start``
(``sudo systemctl stop|start kafka``); ``pre_stop`` / ``pre_start`` are the operator's own shell
commands (kafka_roller's ``--pre-stop`` / ``--pre-start``), run with ``bash -c`` and the broker id in
``$KAFKA_BROKER_ID``. Every value that reaches the remote shell is quoted with ``shlex.quote``.
A non-zero exit fails the step with the command's stderr.

Resume safety: ``pre_stop`` and ``stop`` skip a broker already restarted in this run, ``pre_start``
and ``start`` skip a broker that is already running again, so clearing any of them is harmless.
"""

from __future__ import annotations

import shlex
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowSkipException
from hooks.broker_ssh import BrokerShell
from hooks.cluster_profile import get_cluster_profile

from operators.params import is_true
from operators.resume import restarted_in_run

ACTIONS = ("pre_stop", "stop", "pre_start", "start")


def remote_command(command: str, broker_id: int) -> str:
    """The exact text sent over SSH: ``KAFKA_BROKER_ID=<id> bash -c '<command>'`` (quoted)."""
    return f"KAFKA_BROKER_ID={shlex.quote(str(broker_id))} bash -c {shlex.quote(command)}"


class BrokerServiceOperator(BaseOperator):
    """Run one service step on ``broker``'s host.

    :param cluster: ``kafka`` connection id of the cluster profile (templated).
    :param broker: ``{"id": int, "host": str}`` (templated / mapped).
    :param action: ``pre_stop``, ``stop``, ``pre_start`` or ``start``.
    :param command: override of the profile's command (stop/start) or the pre-step command; empty =
        profile default for stop/start, nothing to do for pre-steps (templated).
    :param dry_run: log the command instead of running it (templated).
    :param command_timeout_s: the command's time limit, seconds (default 300: a controlled shutdown of a
        large broker takes minutes).
    """

    template_fields = ("cluster", "broker", "command", "dry_run")
    ui_color = "#fde8e8"

    def __init__(
        self,
        *,
        cluster: str,
        broker: dict,
        action: str,
        command: str | None = None,
        dry_run: bool | str = False,
        command_timeout_s: float = 300.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if action not in ACTIONS:
            raise ValueError(f"action must be one of {ACTIONS}, got {action!r}")
        self.cluster = cluster
        self.broker = broker
        self.action = action
        self.command = command
        self.dry_run = dry_run
        self.command_timeout_s = command_timeout_s

    def execute(self, context: Any) -> dict:
        profile = get_cluster_profile(self.cluster)
        broker_id, host = int(self.broker["id"]), self.broker["host"]
        command = (self.command or "").strip()
        if not command and self.action == "stop":
            command = profile.service_stop
        if not command and self.action == "start":
            command = profile.service_start
        if not command:
            raise AirflowSkipException(f"no {self.action.replace('_', '-')} command given")
        restarted = restarted_in_run(profile, broker_id, context)
        if restarted is not None:
            raise AirflowSkipException(
                f"broker {broker_id} already restarted in this run (registered at {restarted} ms): "
                f"skipping {self.action}"
            )
        text = remote_command(command, broker_id)
        if is_true(self.dry_run):
            self.log.info("DRY RUN: would run on broker %s (%s): %s", broker_id, host, text)
            return {"broker": broker_id, "action": self.action, "dry_run": True}
        profile.require("ssh_conn_id")
        self.log.info("broker %s (%s): %s: %s", broker_id, host, self.action, text)
        rc, out, err = BrokerShell(profile.ssh_conn_id, host).run(text, self.command_timeout_s)
        for line in out.splitlines():
            self.log.info("stdout: %s", line)
        for line in err.splitlines():
            self.log.info("stderr: %s", line)
        if rc != 0:
            raise AirflowException(
                f"{self.action} on broker {broker_id} ({host}) exited {rc}: {err.strip()[-500:] or out.strip()[-500:]}"
            )
        return {"broker": broker_id, "action": self.action, "exit_code": rc}
