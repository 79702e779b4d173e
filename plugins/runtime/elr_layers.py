"""Read where a KRaft cluster's ``min.insync.replicas`` comes from, for :mod:`kafka_ops.elr_min_isr` (what turning
ELR on would change): each broker's value and layers (DescribeConfigs with synonyms, sent to each broker) and the
active controller's static value (DescribeConfigs sent to that controller itself, KIP-919)."""

from __future__ import annotations

from collections.abc import Sequence

from hooks.kafka_admin import KafkaAdminHook
from kafka_ops import controller_roll as controller_rules
from kafka_ops.cluster import Broker
from kafka_ops.elr_min_isr import CONFIG, MinIsrLayers, refusal, summary
from kafka_ops.migration import controller_port
from kafka_ops.profile import ClusterProfile
from kafka_ops.quorum import Quorum


def controller_address(node_id: int, brokers: Sequence[Broker], quorum: Quorum, profile: ClusterProfile) -> str:
    """``host:port`` where node ``node_id`` answers for its own configs: a combined node's broker listener (it is in
    the brokers' metadata), else its CONTROLLER listener: the host of the profile's ``controller_hosts`` (else
    DescribeQuorum v2's endpoint), the port DescribeQuorum v2 names for that node (Kafka's own, 3.8+), else the
    port of the profile's ``controller_properties``, else 9093.

    :raises ValueError: no host known for the controller (the profile field to set named).
    """
    combined = next((b for b in brokers if b.id == node_id), None)
    if combined is not None:
        return combined.address
    host, _ = controller_rules.resolve_hosts([node_id], profile.controller_hosts, quorum, profile.cluster)[node_id]
    named = [e.port for e in quorum.endpoints if e.node_id == node_id and e.port > 0]
    return f"{host}:{named[0] if named else controller_port(profile.controller_properties)}"


def read_min_isr_layers(admin: KafkaAdminHook, profile: ClusterProfile, brokers: Sequence[Broker],
                        quorum: Quorum) -> MinIsrLayers:
    """Each broker's ``min.insync.replicas`` now, the cluster-level value (None when unset) and the active
    controller's static one (None with the reason when it cannot be read: no leader, no host known, no answer).

    :raises kafka.errors.KafkaError: a broker not answering DescribeConfigs.
    :raises RuntimeError: a broker's answer without ``min.insync.replicas``.
    """
    answers = admin.broker_config_layers(CONFIG, [b.id for b in brokers])
    leader = quorum.leader_id
    try:
        if leader < 0:
            raise ValueError("the quorum has no leader")
        found = admin.controller_config_layers(controller_address(leader, brokers, quorum, profile), leader, CONFIG,
                                               broker_listener=any(b.id == leader for b in brokers))
    except Exception as exc:  # noqa: BLE001 - any failure leaves the outcome unknown, which the rule refuses
        return MinIsrLayers.from_answers(answers, leader, None, f"{type(exc).__name__}: {exc}")
    return MinIsrLayers.from_answers(answers, leader, found)


def elr_check(admin: KafkaAdminHook, profile: ClusterProfile, brokers: Sequence[Broker],
              quorum: Quorum) -> tuple[str, str | None]:
    """What turning ELR on leaves of the brokers' ``min.insync.replicas`` (a log line:
    :func:`kafka_ops.elr_min_isr.summary`) and why it must not be sent (:func:`kafka_ops.elr_min_isr.refusal`, None
    when it may). Raises as :func:`read_min_isr_layers`."""
    layers = read_min_isr_layers(admin, profile, brokers, quorum)
    return summary(layers), refusal(layers)
