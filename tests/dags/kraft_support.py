"""What the KRaft DAG tests read from outside a KRaft sandbox: the controllers' ids, their shutdown order from
their own logs, and the active controller from DescribeQuorum (kafka-python)."""

from __future__ import annotations

import time
from typing import Any

from kafka import KafkaAdminClient
from kafka.errors import KafkaError

CONTROLLERS = [100, 101, 102]  # `sandbox up --mode kraft --controllers 3`


def controller_shutdowns(sandbox) -> list[int]:
    """Controllers ordered by the time their last shutdown began, from their own logs."""
    return sandbox.shutdown_order(CONTROLLERS)


def describe_quorum(sandbox, deadline_s: float = 30.0) -> dict[str, Any]:
    """DescribeQuorum (kafka-python) through the first broker of the sandbox that answers, each asked alone in turn
    until ``deadline_s``: a client of all of them may send it to a broker a roll just stopped (its metadata still
    names it), which refuses the connection.

    :raises KafkaError: no broker answered within ``deadline_s`` (the last error).
    """
    deadline = time.monotonic() + deadline_s
    while True:
        for address in sandbox.bootstrap_servers.split(","):
            client = None
            try:
                # a broker that is down refuses at once, but kafka-python keeps retrying it until its bootstrap
                # timeout (30 s by default), which spent the whole deadline on the one stopped broker
                client = KafkaAdminClient(bootstrap_servers=address, request_timeout_ms=5000,
                                          bootstrap_timeout_ms=3000)
                return client.describe_metadata_quorum()
            except KafkaError:
                if time.monotonic() >= deadline:
                    raise
            finally:
                if client is not None:
                    client.close()
        time.sleep(0.2)


def leader_of(sandbox) -> int:
    """The quorum leader (the active controller) DescribeQuorum names now (:func:`describe_quorum`)."""
    return describe_quorum(sandbox)["topics"][0]["partitions"][0]["leader_id"]


def quorum_of(sandbox):
    """DescribeQuorum through kafka-python, as :class:`kafka_ops.quorum.Quorum` (voters and observers, with their
    directory ids on a dynamic quorum)."""
    from kafka_ops.quorum import Quorum

    return Quorum.from_describe(describe_quorum(sandbox))
