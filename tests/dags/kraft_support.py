"""What the KRaft DAG tests read from outside a KRaft sandbox: the controllers' ids, their shutdown order from
their own logs, and the active controller from DescribeQuorum (kafka-python)."""

from __future__ import annotations

from kafka import KafkaAdminClient

CONTROLLERS = [100, 101, 102]  # `sandbox up --mode kraft --controllers 3`


def controller_shutdowns(sandbox) -> list[int]:
    """Controllers ordered by the time their last shutdown began, from their own logs."""
    return sandbox.shutdown_order(CONTROLLERS)


def leader_of(sandbox) -> int:
    """The quorum leader (the active controller) DescribeQuorum names now."""
    client = KafkaAdminClient(bootstrap_servers=sandbox.bootstrap_servers)
    try:
        return client.describe_metadata_quorum()["topics"][0]["partitions"][0]["leader_id"]
    finally:
        client.close()


def quorum_of(sandbox):
    """DescribeQuorum through kafka-python, as :class:`kafka_ops.quorum.Quorum` (voters and observers, with their
    directory ids on a dynamic quorum)."""
    from kafka_ops.quorum import Quorum

    client = KafkaAdminClient(bootstrap_servers=sandbox.bootstrap_servers)
    try:
        return Quorum.from_describe(client.describe_metadata_quorum())
    finally:
        client.close()
