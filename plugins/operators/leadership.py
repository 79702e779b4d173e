"""Leadership steps of the reassignment operations: preferred leaders back after the waves (KIP-460's
``kafka-leader-election.sh --election-type PREFERRED``), and, before a decommission, leadership moved off
the brokers to be drained: their replicas are put last in each replica list (a reassignment that copies
nothing: the replica set is unchanged) and the new preferred leaders elected."""

from __future__ import annotations

from typing import Any

from airflow.sdk.exceptions import AirflowFailException
from kafka_ops import health
from kafka_ops.reassignment import leaders_on
from probes.cluster import ClusterProber
from runtime.lock_holding import ensure_held
from runtime.reassignments import Reassignments
from runtime.waiting import Check

from operators.cluster_operator import ClusterOperator


def drained_last(replicas: tuple[int, ...], drained: set[int]) -> tuple[int, ...]:
    """``replicas`` with the ``drained`` brokers moved to the end, order otherwise kept
    (``(2, 0, 1)``, drained {2} -> ``(0, 1, 2)``)."""
    return tuple(r for r in replicas if r not in drained) + tuple(r for r in replicas if r in drained)


class ElectLeadersOperator(ClusterOperator):
    """Elect preferred leaders where another replica leads, until every broker is within
    ``leader.imbalance.per.broker.percentage``; with ``away_from`` (setting ``brokers``), first reorder
    the replicas of every partition those brokers lead or prefer so they come last, and wait until they
    lead nothing.

    :param away: True = the decommission's "lead away" step (reads setting ``brokers``).
    :param settings: ``cluster``, ``dry_run``, ``healthcheck_interval_s``, ``healthcheck_timeout_s``, and
        ``brokers`` with ``away`` (values or ``FromParam``).
    :param operation: the lock's operation label.
    """

    ui_color = "#e8f4fd"

    def __init__(self, *, settings: dict, operation: str, away: bool = False, **kwargs: Any) -> None:
        super().__init__(settings=settings, **kwargs)
        self.operation = operation
        self.away = away

    def execute(self, context: Any) -> int:
        with self.releasing_lock_on_failure(context, "the leader election failed"):
            return self._execute(context)

    def _execute(self, context: Any) -> int:
        self.resolve(context)
        dry_run = self.dry_run
        profile = self.profile
        drained = {int(b) for b in self.setting("brokers")} if self.away else set()
        with ClusterProber(profile) as prober:
            state = prober.state(configs=True)
            reorder = [{"topic": p.topic, "partition": p.partition, "replicas": list(drained_last(p.replicas, drained))}
                       for p in state.partitions if drained and drained_last(p.replicas, drained) != p.replicas]
            if dry_run:
                self.log.info("DRY RUN: would reorder %d replica lists (brokers %s last) and elect preferred leaders",
                              len(reorder), sorted(drained))
                return 0
            ensure_held(profile, context, self.operation, self.log)
            if reorder:
                errors = {k: v for k, v in Reassignments(prober.admin, profile).start(reorder).items() if v}
                if errors:  # a partition deleted since the read above needs no reordering (kafka_ops.plan_drift)
                    live = {f"{p.topic}-{p.partition}" for p in prober.state(configs=False).partitions}
                    if gone := sorted(k for k in errors if k not in live):
                        self.log.info("partitions %s were deleted meanwhile: nothing to reorder", gone)
                    errors = {k: v for k, v in errors.items() if k in live}
                if errors:
                    raise AirflowFailException(f"reordering replicas refused for {len(errors)} partitions: "
                                               + "; ".join(f"{k}: {v}" for k, v in list(errors.items())[:20]))
                self.log.info("reordered %d replica lists: brokers %s last", len(reorder), sorted(drained))

            def check() -> Check:
                state = prober.state(configs=True)
                if drained:
                    led = leaders_on(state, sorted(drained))
                    verdict = health.Verdict(not led, [f"{name} still led by a drained broker" for name in led],
                                             "lead-away")
                else:
                    verdict = health.leader_imbalance(state)
                if verdict.ok:
                    return Check(True, verdict.message())
                todo = [(p.topic, p.partition) for p in state.partitions
                        if not p.is_led_by_preferred and p.preferred_leader in set(state.broker_ids)]
                if todo:
                    prober.admin.elect_preferred_leaders(todo)
                return Check(False, verdict.message())

            what = (f"brokers {sorted(drained)} lead nothing" if drained
                    else "preferred leaders lead again everywhere")
            self.wait(check, what, ramp_from_s=0.5)
        return len(reorder)
