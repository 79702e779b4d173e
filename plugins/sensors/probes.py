"""Cluster probes: one look at a real cluster (hooks) judged by the pure rules of ``kafka_ops.health``.

Sensors call :func:`run_probe` when they poke; the deferrable path runs the same function from
:class:`triggers.cluster_probe.ClusterProbeTrigger`. A probe is described by a JSON-able
:class:`ProbeSpec` so a trigger can carry it; connections are resolved where the probe runs.

Kinds:
- ``gate``: the rolling-restart gate for ``broker_id`` (``kafka_ops.health.restart_gate``: no
  offline partitions, no URP, leader imbalance within ``leader.imbalance.per.broker.percentage``,
  min-ISR safety, and every watched Burrow group OK). A broker that is already down passes: there is
  nothing left to protect and the next step brings it back.
- ``gone``: ``broker_id`` is no longer in the cluster metadata (stopped).
- ``registered``: ``broker_id`` is back in the metadata (and, with ZooKeeper, registered).
- ``caught_up``: ``broker_id`` is back in the ISR of every partition it hosts (without a broker: no
  under-replicated partition left in the cluster).
- ``leadership``: ``broker_id`` leads its preferred partitions again within
  ``leader.imbalance.per.broker.percentage`` (without a broker: every broker does).
- ``healthy``: offline + URP + leader imbalance (the final check of an operation).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from hooks.burrow import BurrowHook
from hooks.kafka_admin import KafkaAdminHook
from kafka_ops import health
from kafka_ops.health import Verdict

KINDS = ("gate", "gone", "registered", "caught_up", "leadership", "healthy")


@dataclass(frozen=True)
class ProbeSpec:
    """What to probe. ``consumer_groups`` None = no lag check; ``conn_id`` names the cluster profile."""

    kind: str
    conn_id: str
    broker_id: int | None = None
    consumer_groups: list[str] | None = None
    request_timeout_s: float = 15.0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown probe kind {self.kind!r}; expected one of {KINDS}")
        if self.kind in ("gate", "gone", "registered") and self.broker_id is None:
            raise ValueError(f"probe {self.kind!r} needs a broker_id")

    def to_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        what = {
            "gate": f"broker {self.broker_id} may be restarted",
            "gone": f"broker {self.broker_id} has left the cluster",
            "registered": f"broker {self.broker_id} is registered again",
            "caught_up": (f"broker {self.broker_id} is back in every ISR" if self.broker_id is not None
                          else "every replica is back in its ISR (URP = 0)"),
            "leadership": (f"broker {self.broker_id} leads its preferred partitions again"
                           if self.broker_id is not None else "preferred leaders lead again everywhere"),
            "healthy": "the cluster is healthy (no offline partitions, no URP, leaders balanced)",
        }
        return what[self.kind]


@dataclass(frozen=True)
class ProbeResult:
    """A probe's outcome: ``ok`` and the verdict text to log (names partitions, brokers, groups)."""

    ok: bool
    message: str
    details: dict = field(default_factory=dict)


def run_probe(spec: ProbeSpec) -> ProbeResult:
    """Look at the cluster once and judge it.

    :raises confluent_kafka.KafkaException, requests.RequestException: the cluster or Burrow could not
        be asked (transient: the caller polls again).
    :raises ValueError: the cluster profile lacks what the probe needs (e.g. Burrow for lag).
    """
    admin = KafkaAdminHook(spec.conn_id, request_timeout_s=spec.request_timeout_s)
    try:
        state = admin.cluster_state()
    finally:
        admin.close()
    broker = spec.broker_id
    if spec.kind == "gone":
        present = state.has_broker(broker)
        return ProbeResult(not present, f"broker {broker} {'still in' if present else 'gone from'} the metadata")
    if spec.kind == "registered":
        present = state.has_broker(broker)
        return ProbeResult(present, f"broker {broker} {'registered' if present else 'not registered yet'}")
    if spec.kind == "caught_up":
        if broker is None:
            return _result(health.under_replicated_partitions(state))
        return _result(health.broker_caught_up(state, broker))
    if spec.kind == "leadership":
        if broker is None:
            return _result(health.leader_imbalance(state))
        return _result(health.broker_leadership(state, broker))
    if spec.kind == "healthy":
        return _result(health.cluster_health(state))
    # gate
    if not state.has_broker(broker):
        return ProbeResult(True, f"broker {broker} is already down: nothing to protect, proceeding to start it")
    lag = None
    if spec.consumer_groups:
        burrow = BurrowHook.from_profile(admin.profile)
        try:
            lag = burrow.group_statuses(spec.consumer_groups)
        finally:
            burrow.close()
    return _result(health.restart_gate(state, broker, lag=lag))


def _result(verdict: Verdict) -> ProbeResult:
    return ProbeResult(verdict.ok, verdict.message())
