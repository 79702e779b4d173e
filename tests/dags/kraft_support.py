"""What the KRaft DAG tests read from outside a KRaft sandbox: the controllers' ids, their shutdown order from
their own logs, and the active controller from DescribeQuorum (kafka-python)."""

from __future__ import annotations

import re

from kafka import KafkaAdminClient

CONTROLLERS = [100, 101, 102]  # `sandbox up --mode kraft --controllers 3`


def controller_shutdowns(sandbox) -> list[int]:
    """Controllers ordered by the time of their last shutdown, from their own logs."""
    last = {}
    for node in CONTROLLERS:
        log = sandbox.host_dir(node).path / "logs" / "server.log"
        found = re.findall(rf"^\[([^\]]+)\] INFO [\w.]+: controller {node}: shutting down",
                           log.read_text() if log.exists() else "", re.M)
        if found:
            last[node] = found[-1]
    return sorted(last, key=last.get)


def leader_of(sandbox) -> int:
    """The quorum leader (the active controller) DescribeQuorum names now."""
    client = KafkaAdminClient(bootstrap_servers=sandbox.bootstrap_servers)
    try:
        return client.describe_metadata_quorum()["topics"][0]["partitions"][0]["leader_id"]
    finally:
        client.close()
