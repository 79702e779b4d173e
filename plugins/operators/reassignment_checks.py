"""Before a scale-out or a decommission touches anything: the requested brokers make sense for the
cluster (``kafka_ops.reassignment.check_scale_out`` / ``check_decommission``) and no other reassignment is
in progress (as ``kafka-reassign-partitions.sh --execute`` refuses). A run cleared after it moved partitions or
stopped brokers tells its own work from anyone else's by the record its first accepted try left in the run's
directory (``kafka_ops.run_acceptance``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException
from hooks.kafka_admin import KafkaAdminHook
from kafka_ops.cluster import fenced_down
from kafka_ops.plan_files import reassignment_in_progress
from kafka_ops.reassignment import check_decommission, check_scale_out
from kafka_ops.run_acceptance import RECORD_FILE, acceptance, own_work
from kafka_ops.unstarted_broker import rack_problem
from runtime.failures import RunRefused, describe
from runtime.host_files import unstarted_broker_on_host
from runtime.params import is_true
from runtime.reassignments import Reassignments
from runtime.run_dir import run_directory

from operators.cluster_operator import ClusterOperator

MODES = ("scale-out", "decommission")


class ReassignmentChecksOperator(ClusterOperator):
    """Refuse bad input before anything is touched.

    ``scale-out``: the new broker ids are not repeated and hold no replicas yet; without
    ``start_new_brokers`` they must be registered, with it each unregistered one needs a host in the
    profile's ``broker_hosts`` (and, for a dry run, which plans onto it without starting it, the profile's
    ``server_properties``, read by the snapshot); a new broker's file, when the profile names one, must start that
    broker (its ``node.id`` / ``broker.id``: ``kafka_ops.unstarted_broker``).

    ``decommission``: the ids are registered brokers (on KRaft also fenced ones: a broker stopped without being
    unregistered, whose registration the run then removes) and the rest can hold every partition (at least the
    largest replication factor, enough racks for rack diversity), and on a KRaft cluster none of them is a voter of
    the metadata quorum too (a combined node, DescribeQuorum).

    A later try of a run (cleared whole after it moved partitions or stopped brokers) counts what the run did
    itself (``kafka_ops.run_acceptance.own_work``, from the record the first accepted try wrote to the run's
    directory, ``accepted.json``): a scale-out's new brokers holding the replicas it moved there are accepted and
    the run goes on (its plan and waves compare every move with the cluster); a decommission whose brokers it
    drained and stopped already skips the rest of the run (nothing left to do: AirflowSkipException).

    :param mode: one of :data:`MODES`.
    :param settings: ``cluster``, ``brokers``, ``dry_run``, and ``start_new_brokers`` for a scale-out.
    :raises AirflowFailException: naming every refusal.
    :raises AirflowSkipException: a decommission done by an earlier try of the run.
    """

    ui_color = "#eeeeee"

    def __init__(self, *, mode: str, settings: dict, **kwargs: Any) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        super().__init__(settings=settings, **kwargs)
        self.mode = mode

    def execute(self, context: Any) -> list[int]:
        self.resolve(context)
        profile = self.profile
        brokers = [int(b) for b in self.setting("brokers")]
        with KafkaAdminHook(profile=profile) as admin:
            state = admin.cluster_state(configs=False)
            ongoing = Reassignments(admin, profile).ongoing()
            quorum = admin.quorum_if_kraft()
            # a KRaft broker stopped without being unregistered is known (fenced), though Metadata leaves it out
            registrations = (admin.broker_registrations() or []) if quorum is not None else []
        fenced = [b.id for b in fenced_down(registrations, state.broker_ids)]
        record_path = run_directory(context) / RECORD_FILE
        record = self._read_record(record_path)
        own = own_work(record, self.mode, brokers, state, fenced=fenced)
        for line in own.lines:
            self.log.info("%s", line)
        if self.mode == "scale-out":
            start = is_true(self.setting("start_new_brokers"))
            voters = quorum.voter_ids if quorum is not None else ()
            refusals = check_scale_out(state, brokers, registered_ok=start, voters=voters, moved_here=own.moved_here)
            absent = [b for b in brokers if not state.has_broker(b) and b not in voters]
            if start:
                refusals += [f"broker {b} is not registered and connection {profile.cluster!r} has no "
                             f"broker_hosts entry to start it on" for b in absent if b not in profile.broker_hosts]
            if start:
                refusals += self._unstarted_files(profile, absent, state)
        else:
            refusals = check_decommission(state, brokers, quorum.voter_ids if quorum is not None else (),
                                          fenced=fenced, stopped_by_run=own.stopped)
        if ongoing:
            refusals.append("another reassignment is in progress: " + "; ".join(reassignment_in_progress(ongoing)[:10]))
        if refusals:
            raise RunRefused(f"{self.mode} of brokers {brokers} on cluster {profile.cluster!r} refused "
                                       f"(nothing was touched): " + "; ".join(refusals))
        if record is None:
            self._write_record(record_path, acceptance(self.mode, brokers, state,
                                                       datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")))
        if self.mode == "decommission" and own.decommission_done(brokers):
            raise AirflowSkipException(f"decommission of brokers {brokers} on cluster {profile.cluster!r}: done by an "
                                       f"earlier try of this run (drained and stopped): nothing left to do")
        self.log.info("%s of brokers %s on cluster %r: accepted (live brokers %s)", self.mode, brokers,
                      profile.cluster, state.broker_ids)
        return brokers

    def _read_record(self, path: Path) -> dict[str, Any] | None:
        """The run's acceptance record (``kafka_ops.run_acceptance.acceptance``), None when there is none or it
        cannot be read (logged: the run is then checked as a new one)."""
        if not path.exists():
            return None
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            self.log.warning("%s cannot be read (%s): the run is checked as a new one", path, exc)
            return None

    def _write_record(self, path: Path, record: dict[str, Any]) -> None:
        """Write the acceptance record, whole or not at all (a temporary file renamed over it)."""
        partial = path.with_name(path.name + ".partial")
        partial.write_text(json.dumps(record, indent=1) + "\n")
        partial.replace(path)
        self.log.info("acceptance recorded in %s: %s", path, record)

    def _unstarted_files(self, profile: Any, absent: list[int], state: Any) -> list[str]:
        """Refusals for new brokers to be started whose host's server.properties does not start them: another id (a
        ``broker_hosts`` entry pointing at another broker's host), no id (a generated one), a controller; a rack the
        plan cannot use (``kafka_ops.unstarted_broker.rack_problem``); a file that cannot be read. A real run reads
        it when the profile names it; a dry run, which starts nothing and plans onto the broker as that file
        describes it (the snapshot reads it again), refuses a profile without ``server_properties``. A broker
        without a ``broker_hosts`` entry is refused by the caller."""
        refusals = []
        for bid in absent:
            if bid not in profile.broker_hosts or not (profile.server_properties_for(bid) or self.dry_run):
                continue
            try:
                broker = unstarted_broker_on_host(profile, bid)
            except AirflowFailException as exc:
                refusals.append(str(exc))
            except Exception as exc:  # noqa: BLE001 - SSH refused, host key unknown: a refusal naming it
                refusals.append(f"broker {bid} ({profile.broker_hosts[bid]}): reading server.properties: "
                                f"{describe(exc)}")
            else:
                if problem := rack_problem(broker, state.brokers):
                    refusals.append(problem)
                    continue
                self.log.info("new broker %d: %s's server.properties starts it in rack %s", bid, broker.host,
                              broker.rack)
        return refusals
