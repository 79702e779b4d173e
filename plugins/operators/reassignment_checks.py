"""Before a scale-out or a decommission touches anything: the requested brokers make sense for the
cluster (``kafka_ops.reassignment.check_scale_out`` / ``check_decommission``) and no other reassignment is
in progress (as ``kafka-reassign-partitions.sh --execute`` refuses)."""

from __future__ import annotations

from typing import Any

from airflow.sdk.exceptions import AirflowFailException
from hooks.kafka_admin import KafkaAdminHook
from kafka_ops.cluster import fenced_down
from kafka_ops.plan_files import reassignment_in_progress
from kafka_ops.reassignment import check_decommission, check_scale_out
from kafka_ops.unstarted_broker import rack_problem
from runtime.failures import RunRefused, describe
from runtime.host_files import unstarted_broker_on_host
from runtime.params import is_true
from runtime.reassignments import Reassignments

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

    :param mode: one of :data:`MODES`.
    :param settings: ``cluster``, ``brokers``, ``dry_run``, and ``start_new_brokers`` for a scale-out.
    :raises AirflowFailException: naming every refusal.
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
        if self.mode == "scale-out":
            start = is_true(self.setting("start_new_brokers"))
            voters = quorum.voter_ids if quorum is not None else ()
            refusals = check_scale_out(state, brokers, registered_ok=start, voters=voters)
            absent = [b for b in brokers if not state.has_broker(b) and b not in voters]
            if start:
                refusals += [f"broker {b} is not registered and connection {profile.cluster!r} has no "
                             f"broker_hosts entry to start it on" for b in absent if b not in profile.broker_hosts]
            if start:
                refusals += self._unstarted_files(profile, absent, state)
        else:
            refusals = check_decommission(state, brokers, quorum.voter_ids if quorum is not None else (),
                                          fenced=[b.id for b in fenced_down(registrations, state.broker_ids)])
        if ongoing:
            refusals.append("another reassignment is in progress: " + "; ".join(reassignment_in_progress(ongoing)[:10]))
        if refusals:
            raise RunRefused(f"{self.mode} of brokers {brokers} on cluster {profile.cluster!r} refused "
                                       f"(nothing was touched): " + "; ".join(refusals))
        self.log.info("%s of brokers %s on cluster %r: accepted (live brokers %s)", self.mode, brokers,
                      profile.cluster, state.broker_ids)
        return brokers

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
