"""A leader imbalance made on a sandbox for the DAG tests of the waits that elect it away (a roll's gate,
``run_outcome``'s final health check)."""

from __future__ import annotations

from observers import wait_for


def make_leader_imbalance(sandbox, broker: int, leave_alone: tuple[int, ...] = ()) -> list[tuple[str, int]]:
    """``sandbox.make_leader_imbalance``: ``broker`` first in the replica lists of partitions it does not lead, so
    Kafka counts a leader imbalance on it until an election (or its own rebalance after 300 s); partitions whose
    preferred leader is in ``leave_alone`` are left alone (a roll's gate judges min ISR on them too). Returns the
    partitions ``(topic, partition)`` once the product's own rule (``kafka_ops.health.leader_imbalance``) sees the
    imbalance; an AssertionError when it does not within 60 s."""
    from hooks.kafka_admin import KafkaAdminHook
    from kafka_ops import health

    chosen = sandbox.make_leader_imbalance(broker, leave_alone=leave_alone)
    with KafkaAdminHook("kafka_sandbox") as hook:
        def imbalanced():
            verdict = health.leader_imbalance(hook.cluster_state(configs=True))
            return not verdict.ok and f"broker {broker}: leader imbalance" in verdict.message()  # a Verdict is falsy

        wait_for(imbalanced, 60, what=f"a leader imbalance on broker {broker}")
    return chosen
