"""Start brokers a scale-out adds, stop brokers a decommission drained: the roll's service step (the
profile's ``service_start`` / ``service_stop`` over SSH) followed by the wait a roll does after it
(registered again / gone from the metadata); on a KRaft cluster a stopped broker is then unregistered
(``kafka_ops.broker_removal``). Never stops or unregisters a broker that still holds or leads a replica."""

from __future__ import annotations

from typing import Any

from airflow.sdk.exceptions import AirflowFailException
from kafka_ops.broker_removal import STOP, UNREGISTER, NotDrained, removal_steps
from kafka_ops.done_lines import service_line
from kafka_ops.reassignment import leaders_on, partitions_on
from probes.cluster import PROBES, ClusterProber
from runtime.broker_commands import BrokerCommand, BrokerCommandFailed
from runtime.failures import describe
from runtime.host_files import run_on_host, storage_format_command
from runtime.lock_holding import ensure_held
from runtime.params import is_true
from runtime.waiting import Check

from operators.cluster_operator import ClusterOperator


class BrokerServiceOperator(ClusterOperator):
    """``action="start"``: start the brokers in setting ``brokers`` that are not registered (hosts from the
    profile's ``broker_hosts``; on a KRaft cluster their storage formatted for the cluster first, a formatted one
    left as it is) and wait until each is registered. ``action="stop"``: stop each broker in
    ``brokers`` that is still registered, after checking it holds and leads nothing, and wait until it is
    gone; on a KRaft cluster then unregister it (also one found stopped already, e.g. on a resume). Nothing at all
    unless setting ``enabled`` is true (default true). Returns (XCom) what it did itself: ``{"action": "start" |
    "stop", "brokers": [ids asked], "acted": [ids started / stopped], "unregistered": [ids], "formatted": [ids whose
    storage it formatted], "asked": bool}`` (a dry run: what it would do), the run's note line
    (``kafka_ops.done_lines.service_line``).

    :param settings: ``cluster``, ``brokers``, ``enabled``, ``dry_run``,
        ``healthcheck_interval_s``, ``healthcheck_timeout_s``, ``command_timeout_s`` (values or ``FromParam``).
    :param operation: the lock's operation label.
    :raises AirflowFailException: a host unknown to the profile, a command that failed, a broker that
        still holds replicas (stop), a wait past its deadline, an UnregisterBroker the cluster refuses.
    """

    ui_color = "#fde8e8"

    def __init__(self, *, action: str, settings: dict, operation: str, **kwargs: Any) -> None:
        if action not in ("start", "stop"):
            raise ValueError(f"action must be 'start' or 'stop', got {action!r}")
        super().__init__(settings=settings, **kwargs)
        self.action = action
        self.operation = operation

    def note_line(self, result: Any, dry_run: bool) -> str | None:
        return service_line(result, dry_run)

    def execute(self, context: Any) -> dict[str, Any]:
        with self.releasing_lock_on_failure(context, f"the {self.action} of brokers failed"):
            return self._execute(context)

    def _execute(self, context: Any) -> dict[str, Any]:
        self.resolve(context)
        wanted = [int(b) for b in self.setting("brokers")]
        done: dict[str, Any] = {"action": self.action, "brokers": wanted, "acted": [], "unregistered": [],
                                "formatted": [], "asked": is_true(self.setting("enabled"))}
        if not done["asked"]:
            self.log.info("not asked to %s brokers%s", self.action,
                          ": the new brokers must already be registered" if self.action == "start" else "")
            return done
        dry_run = self.dry_run
        profile = self.profile
        with ClusterProber(profile) as prober:
            try:
                self._act(context, prober, wanted, done, dry_run)
            except AirflowFailException as exc:  # the note's first line: what this run did before what failed
                if done["acted"] and not dry_run:
                    raise AirflowFailException(f"this run {'started' if self.action == 'start' else 'stopped'} "
                                               f"brokers {done['acted']}, then: {exc}") from exc
                raise
        self.log.info("%s brokers %s%s", "started" if self.action == "start" else "stopped", done["acted"],
                      " (DRY RUN: nothing ran)" if dry_run else "")
        return done

    def _act(self, context: Any, prober: ClusterProber, wanted: list[int], done: dict[str, Any],
             dry_run: bool) -> None:
        """Start or stop each broker of ``wanted`` that needs it, recording in ``done`` (the step's return value)
        what it did as it goes, so that a failure half-way can say it."""
        profile = self.profile
        state = prober.state(configs=False)
        kraft = self.mode(context, prober.admin).has_quorum
        cluster_id: str | None = None
        for bid in wanted:
            registered = state.has_broker(bid)
            if self.action == "start" and registered:
                self.log.info("broker %s is registered already: not started", bid)
                continue
            if self.action == "stop":
                steps = self._removal_steps(bid, state, registered, kraft, dry_run)
                if STOP not in steps:
                    self.log.info("broker %s is not in the metadata (stopped already): nothing to stop", bid)
                else:
                    self._run_command(context, prober, bid, state.broker(bid).host, dry_run)
                    done["acted"].append(bid)
                if UNREGISTER in steps and self._unregister(context, prober, bid, dry_run):
                    done["unregistered"].append(bid)
                continue
            host = profile.broker_hosts.get(bid)
            if host is None:
                raise AirflowFailException(
                    f"broker {bid} is not registered and connection {profile.cluster!r} has no "
                    f"broker_hosts entry for it: cannot start it (known: {dict(profile.broker_hosts)})")
            if kraft:
                cluster_id = cluster_id or self.ask(prober.admin.cluster_id, "the cluster's id")
                if self._format_storage(context, bid, host, cluster_id, dry_run):
                    done["formatted"].append(bid)
            self._run_command(context, prober, bid, host, dry_run)
            done["acted"].append(bid)

    def _format_storage(self, context: Any, bid: int, host: str, cluster_id: str, dry_run: bool) -> bool:
        """A new KRaft broker's log dirs formatted for the cluster before its first start (Kafka refuses to start on
        a log dir without ``meta.properties``: "No readable meta.properties files found"), as Kafka's operations
        guide adds a broker: ``kafka-storage format --cluster-id=<id> -c server.properties``, ``--ignore-formatted``
        (``runtime.host_files.storage_format_command``). Without ``kafka_home`` and ``server_properties`` in the
        profile the run cannot: it says so and starts the broker as it is (formatted by whoever prepared the host).

        Returns whether it formatted (or, in a dry run, would format) the storage.

        :raises AirflowFailException: the format failed (its output in the message).
        """
        profile = self.profile
        if not profile.kafka_home_for(bid) or not profile.server_properties_for(bid):
            self.log.warning("broker %s: connection %r names no kafka_home and server_properties, so its storage is "
                             "not formatted by the run: a KRaft broker starts only on log dirs formatted for the "
                             "cluster (kafka-storage.sh format --cluster-id=%s -c <server.properties>)", bid,
                             profile.cluster, cluster_id)
            return False
        node = {"id": bid, "host": host}
        command = storage_format_command(profile, bid, cluster_id)
        if dry_run:
            self.log.info("DRY RUN: broker %s (%s): would format its storage for cluster %s (a formatted log dir is "
                          "left as it is): %s", bid, host, cluster_id, command)
            return True
        ensure_held(profile, context, self.operation, self.log)
        out = run_on_host(profile, node, command, "formatting its storage", timeout_s=float(
            self.setting("command_timeout_s")))
        self.log.info("broker %s (%s): storage for cluster %s: %s", bid, host, cluster_id,
                      out.strip().splitlines()[-1] if out.strip() else "formatted")
        return True

    def _removal_steps(self, bid: int, state: Any, live: bool, kraft: bool, dry_run: bool) -> list[str]:
        """``kafka_ops.broker_removal.removal_steps`` for ``bid``; a dry run's waves moved nothing, so there a broker
        that holds replicas gets the steps it would get once drained (logged)."""
        held, led = partitions_on(state, [bid]), leaders_on(state, [bid])
        if (held or led) and dry_run:
            self.log.info("DRY RUN: broker %s holds %d replicas now; after the waves it would be checked to hold "
                          "nothing, then stopped%s", bid, len(held), " and unregistered" if kraft else "")
            held, led = [], []
        try:
            return removal_steps(bid, live=live, held=held, led=led, kraft=kraft)
        except NotDrained as exc:
            raise AirflowFailException(str(exc)) from exc

    def _run_command(self, context: Any, prober: ClusterProber, bid: int, host: str, dry_run: bool) -> None:
        """The profile's service command for this action on ``host`` over SSH, then (not in a dry run) the wait
        until ``bid`` is registered (start) or gone from the metadata (stop)."""
        profile = self.profile
        command = BrokerCommand.choose(profile, self.action, None, {"id": bid, "host": host})
        if not dry_run:
            ensure_held(profile, context, self.operation, self.log)
        try:
            command.run(profile.ssh_conn_id, float(self.setting("command_timeout_s")), self.log, dry_run)
        except BrokerCommandFailed as exc:
            raise AirflowFailException(str(exc)) from exc
        if dry_run:
            return
        kind = "registered" if self.action == "start" else "gone"
        self.wait(lambda: _check(prober, kind, bid), PROBES[kind].describe(bid), ramp_from_s=0.5)

    def _unregister(self, context: Any, prober: ClusterProber, bid: int, dry_run: bool) -> bool:
        """Remove the stopped KRaft broker ``bid``'s registration (``KafkaAdminHook.unregister_broker``; why:
        ``kafka_ops.broker_removal``). Called only once it is gone from the metadata and holds nothing. Returns
        whether this call removed (in a dry run: would remove) a registration; False: it had none."""
        if dry_run:
            self.log.info("DRY RUN: would unregister broker %s (UnregisterBroker, KIP-631) once it is stopped: a "
                          "stopped KRaft broker stays registered and holds back later metadata.version upgrades", bid)
            return True
        ensure_held(self.profile, context, self.operation, self.log)

        def unregister() -> bool:
            from kafka.errors import KafkaError as KafkaPythonError

            try:
                return prober.admin.unregister_broker(bid)
            except KafkaPythonError as exc:
                if getattr(exc, "retriable", False):
                    raise  # waited out by ask()
                raise AirflowFailException(
                    f"UnregisterBroker {bid} refused: {describe(exc)}. Broker {bid} is stopped and holds nothing; "
                    f"fix the cause (e.g. ALTER on the cluster for this connection's principal) and clear this "
                    f"task, or remove it by hand: kafka-cluster.sh unregister --id {bid}") from exc

        removed = self.ask(unregister, f"UnregisterBroker {bid}")
        self.log.info("broker %s %s", bid, "unregistered (UnregisterBroker, KIP-631): the controller no longer counts "
                      "it" if removed else "has no registration (unregistered already)")
        return bool(removed)


def _check(prober: ClusterProber, kind: str, broker: int) -> Check:
    verdict = prober.look(kind, broker)
    return Check(verdict.ok, verdict.message())
