"""Start brokers a scale-out adds, stop brokers a decommission drained: the roll's service step (the
profile's ``service_start`` / ``service_stop`` over SSH) followed by the wait a roll does after it
(registered again / gone from the metadata). Never stops a broker that still holds or leads a replica."""

from __future__ import annotations

from typing import Any

from airflow.sdk.exceptions import AirflowFailException
from kafka_ops.reassignment import leaders_on, partitions_on
from probes.cluster import PROBES, ClusterProber
from runtime.broker_commands import BrokerCommand, BrokerCommandFailed
from runtime.lock_holding import ensure_held
from runtime.params import is_true
from runtime.waiting import Check

from operators.cluster_operator import ClusterOperator


class BrokerServiceOperator(ClusterOperator):
    """``action="start"``: start the brokers in setting ``brokers`` that are not registered (hosts from the
    profile's ``broker_hosts``) and wait until each is registered. ``action="stop"``: stop each broker in
    ``brokers`` that is still registered, after checking it holds and leads nothing, and wait until it is
    gone. Nothing at all unless setting ``enabled`` is true (default true).

    :param settings: ``cluster``, ``brokers``, ``enabled``, ``dry_run``,
        ``healthcheck_interval_s``, ``healthcheck_timeout_s``, ``command_timeout_s`` (values or ``FromParam``).
    :param operation: the lock's operation label.
    :raises AirflowFailException: a host unknown to the profile, a command that failed, a broker that
        still holds replicas (stop), a wait past its deadline.
    """

    ui_color = "#fde8e8"

    def __init__(self, *, action: str, settings: dict, operation: str, **kwargs: Any) -> None:
        if action not in ("start", "stop"):
            raise ValueError(f"action must be 'start' or 'stop', got {action!r}")
        super().__init__(settings=settings, **kwargs)
        self.action = action
        self.operation = operation

    def execute(self, context: Any) -> list[int]:
        with self.releasing_lock_on_failure(context, f"the {self.action} of brokers failed"):
            return self._execute(context)

    def _execute(self, context: Any) -> list[int]:
        self.resolve(context)
        if not is_true(self.setting("enabled")):
            self.log.info("not asked to %s brokers%s", self.action,
                          ": the new brokers must already be registered" if self.action == "start" else "")
            return []
        dry_run = self.dry_run
        profile = self.profile
        wanted = [int(b) for b in self.setting("brokers")]
        acted = []
        with ClusterProber(profile) as prober:
            state = prober.state(configs=False)
            for bid in wanted:
                registered = state.has_broker(bid)
                if self.action == "start" and registered:
                    self.log.info("broker %s is registered already: not started", bid)
                    continue
                if self.action == "stop" and not registered:
                    self.log.info("broker %s is not registered (stopped already): nothing to stop", bid)
                    continue
                if self.action == "stop":
                    held, led = partitions_on(state, [bid]), leaders_on(state, [bid])
                    if (held or led) and dry_run:  # the dry run's waves moved nothing
                        self.log.info("DRY RUN: broker %s holds %d replicas now; after the waves it would be "
                                      "checked to hold nothing, then stopped", bid, len(held))
                    elif held or led:
                        raise AirflowFailException(
                            f"broker {bid} still holds {len(held)} replicas and leads {len(led)} partitions "
                            f"(e.g. {(held or led)[:5]}): not stopped")
                    host = state.broker(bid).host
                else:
                    host = profile.broker_hosts.get(bid)
                    if host is None:
                        raise AirflowFailException(
                            f"broker {bid} is not registered and connection {profile.cluster!r} has no "
                            f"broker_hosts entry for it: cannot start it (known: {dict(profile.broker_hosts)})")
                command = BrokerCommand.choose(profile, self.action, None, {"id": bid, "host": host})
                if not dry_run:
                    ensure_held(profile, context, self.operation, self.log)
                try:
                    command.run(profile.ssh_conn_id, float(self.setting("command_timeout_s")), self.log, dry_run)
                except BrokerCommandFailed as exc:
                    raise AirflowFailException(str(exc)) from exc
                acted.append(bid)
                if dry_run:
                    continue
                kind = "registered" if self.action == "start" else "gone"
                self.wait(lambda b=bid, k=kind: _check(prober, k, b), PROBES[kind].describe(bid), ramp_from_s=0.5)
        self.log.info("%s brokers %s%s", "started" if self.action == "start" else "stopped", acted,
                      " (DRY RUN: nothing ran)" if dry_run else "")
        return acted


def _check(prober: ClusterProber, kind: str, broker: int) -> Check:
    verdict = prober.look(kind, broker)
    return Check(verdict.ok, verdict.message())
