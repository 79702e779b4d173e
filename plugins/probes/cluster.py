"""Cluster probes: one look at the cluster (Metadata, and configs where the rule needs them) judged by a
rule of ``kafka_ops.health``. A registry ``{kind: Probe}``; :class:`ClusterProber` keeps one admin client
for a whole wait (a new client per poll costs a connection and a bootstrap round trip each time).

Kinds (``broker`` = the broker the step is about):
- ``gone``: the broker is no longer in the metadata (its controlled shutdown finished);
- ``registered``: the broker is in the metadata again;
- ``caught_up``: the broker is back in the ISR of every partition it hosts (without a broker: URP = 0);
- ``leadership``: the broker leads its preferred partitions within ``leader.imbalance.per.broker.percentage``
  (without a broker: every broker does);
- ``healthy``: no offline partition, no URP, leaders balanced (an operation's final check);
- ``gate``: the cluster may lose the broker now: healthy, and stopping it drops no partition below
  ``min.insync.replicas`` (``kafka_ops.health.restart_gate``; the Burrow part is
  separate because only it needs several OK polls in a row).
Cost per poll: ``gone``, ``registered`` and ``caught_up`` send one Metadata request, the others also one
DescribeCluster (the controller, whose broker defaults count; librdkafka waits for a controller to send it to,
which right after the controller stopped took 15 s while Metadata answered at once). Only ``gate``,
``leadership`` and ``healthy`` read configs (DescribeConfigs), and a prober reads them once: its hook
caches them (``KafkaAdminHook(cache_configs=True)``), so the first config-reading poll of a prober also
sends one DescribeConfigs for the broker defaults and one per 200 topics, later polls only one per 200
topics that appeared since (none while the topic set is unchanged). A prober lives for one task (one
broker of a roll, or one batch of brokers), so a ``min.insync.replicas`` change made during the task is
seen by the next task; a new topic is seen at once. ``prober.admin.requests`` counts what was sent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hooks.kafka_admin import KafkaAdminHook
from kafka_ops import health
from kafka_ops.cluster import ClusterState
from kafka_ops.health import Verdict
from kafka_ops.profile import ClusterProfile


def _present(state: ClusterState, broker: int | None) -> Verdict:
    ok = state.has_broker(broker)
    return Verdict(ok, [] if ok else [f"broker {broker} not in the metadata yet"], "registered")


def _gone(state: ClusterState, broker: int | None) -> Verdict:
    present = state.has_broker(broker)
    return Verdict(not present, [f"broker {broker} still in the metadata"] if present else [], "gone")


def _caught_up(state: ClusterState, broker: int | None) -> Verdict:
    if broker is None:
        return health.under_replicated_partitions(state)
    return health.broker_caught_up(state, broker)


def _leadership(state: ClusterState, broker: int | None) -> Verdict:
    if broker is None:
        return health.leader_imbalance(state)
    return health.broker_leadership(state, broker)


def _gate(state: ClusterState, broker: int | None) -> Verdict:
    if not state.has_broker(broker):
        return Verdict(False, [f"broker {broker} is not in the metadata (down)"], "gate")
    return health.restart_gate(state, broker)


@dataclass(frozen=True)
class Probe:
    """A probe kind: its rule, whether it needs configs, whether it is about one broker, and the
    condition in words (``{broker}`` filled in)."""

    rule: Callable[[ClusterState, int | None], Verdict]
    configs: bool
    needs_broker: bool
    what: str
    what_cluster: str = ""

    def describe(self, broker: int | None) -> str:
        if broker is None and self.what_cluster:
            return self.what_cluster
        return self.what.format(broker=broker)


PROBES: dict[str, Probe] = {
    "gone": Probe(_gone, False, True, "broker {broker} has left the cluster metadata"),
    "registered": Probe(_present, False, True, "broker {broker} is registered again"),
    "caught_up": Probe(
        _caught_up, False, False, "broker {broker} is back in every ISR", "every replica is back in its ISR (URP = 0)"
    ),
    "leadership": Probe(
        _leadership,
        True,
        False,
        "broker {broker} leads its preferred partitions again",
        "preferred leaders lead again everywhere",
    ),
    "healthy": Probe(
        lambda state, _: health.cluster_health(state),
        True,
        False,
        "the cluster is healthy (no offline partitions, no URP, leaders balanced)",
    ),
    "gate": Probe(_gate, True, True, "broker {broker} may be stopped (cluster healthy, min ISR kept)"),
}


class ClusterProber:
    """Looks at one cluster with one admin client (close it, or use as a context manager).

    Topic and broker configs are read once per prober and then cached (new topics are read on the poll
    that first sees them; see the module docstring and ``KafkaAdminHook.cluster_state``).

    :param profile: the cluster's profile.
    :param request_timeout_s: timeout of each admin request, seconds.
    """

    def __init__(self, profile: ClusterProfile, request_timeout_s: float = 15.0) -> None:
        self.profile = profile
        self.admin = KafkaAdminHook(profile=profile, request_timeout_s=request_timeout_s, cache_configs=True)

    def state(self, configs: bool = True) -> ClusterState:
        """A fresh snapshot of brokers and partitions, configs from the prober's cache (see
        ``KafkaAdminHook.cluster_state``). ``configs=False``: the Metadata alone (brokers, leaders, ISRs; no
        racks, Metadata's controller id): no DescribeCluster, which waits for a controller while the controller
        moves (``describe_cluster=False``), so the waits after a stop (gone, registered, caught up) do not stall
        when the broker stopped was the controller."""
        return self.admin.cluster_state(configs=configs, describe_cluster=configs)

    def look(self, kind: str, broker: int | None = None) -> Verdict:
        """Judge the cluster by probe ``kind``.

        :raises KeyError: unknown kind. :raises ValueError: ``broker`` missing where the kind needs one.
        :raises confluent_kafka.KafkaException: the cluster could not be asked (transient).
        """
        probe = PROBES[kind]
        if probe.needs_broker and broker is None:
            raise ValueError(f"probe {kind!r} needs a broker")
        return probe.rule(self.state(configs=probe.configs), broker)

    def elect_for_imbalance(self, state: ClusterState) -> str | None:
        """Elect the preferred leaders of the partitions a leader imbalance needs (``health.imbalance_elections``:
        those of brokers over ``leader.imbalance.per.broker.percentage`` whose preferred leader is registered and
        in the ISR), as Kafka's own rebalance would after ``leader.imbalance.check.interval.seconds`` (300 s by
        default; never with ``auto.leader.rebalance.enable=false``). A leader imbalance is no safety problem; one
        election (ElectLeaders, KIP-460) fixes it.

        :returns: None when no partition needs it (nothing sent); else a line for the log: "elected the preferred
            leaders of N partitions (orders-1, ...)", with the partitions the controller did not elect and why.
        :raises TimeoutError: no answer in time (``hooks.kafka_admin.ELECTION_ANSWER_S``; transient: look again).
        :raises confluent_kafka.KafkaException: the request as a whole failed.
        """
        partitions = health.imbalance_elections(state)
        if not partitions:
            return None
        names = [f"{t}-{p}" for t, p in partitions]
        errors = {n: e for n, e in self.admin.elect_preferred_leaders(partitions).items() if e}
        return (f"elected the preferred leaders of {len(names)} partitions ({', '.join(names[:10])}"
                f"{f', ... {len(names) - 10} more' if len(names) > 10 else ''})"
                f"{f'; not elected: {dict(list(errors.items())[:5])}' if errors else ''}")

    def close(self) -> None:
        self.admin.close()

    def __enter__(self) -> ClusterProber:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
