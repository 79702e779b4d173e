"""What the KRaft DAG tests read from outside a KRaft sandbox: the controllers' ids, their shutdown order and their
Raft state when they stopped from their own logs, and the active controller from DescribeQuorum (kafka-python)."""

from __future__ import annotations

import time
from typing import Any

from kafka import KafkaAdminClient
from kafka.errors import KafkaError

CONTROLLERS = [100, 101, 102]  # `sandbox up --mode kraft --controllers 3`


def controller_shutdowns(sandbox) -> list[int]:
    """Controllers ordered by the time their last shutdown began, from their own logs."""
    return sandbox.shutdown_order(CONTROLLERS)


def raft_states_at_stops(sandbox, nodes: list[int], since: float) -> list[tuple[float, int, str | None]]:
    """``(epoch seconds, node id, Raft state)`` of each shutdown of ``nodes`` that began at or after ``since``, in
    shutdown order; the state is the node's own log's last transition before it (``node_log.Run
    .raft_state_at_shutdown``: ``Leader``, ``Follower``, ...; None when the log names none)."""
    return sorted((run.shutdown, n, run.raft_state_at_shutdown) for n in nodes for run in sandbox.node_runs(n)
                  if run.shutdown is not None and run.shutdown >= since)


def assert_quorum_leader_stopped_last(sandbox, voters_in_roll_order: list[int], since: float) -> None:
    """The roll stopped the quorum leader last: each voter (in the order the roll stopped them) stopped since
    ``since`` with a Raft state its own log names, and none but the last led the quorum when it stopped. The leader at
    each turn is what counts, not the one before the run: Kafka may move leadership itself during a roll (on a loaded
    machine a leader that misses a majority's fetches for ``controller.quorum.fetch.timeout.ms`` resigns, KIP-996's
    check-quorum), and the roll reads DescribeQuorum again at each controller's turn. The last may have stopped as a
    follower when Kafka moved leadership to a voter already restarted.

    :raises AssertionError: a voter did not stop, its log names no Raft state at its stop, or a voter other than the
        last was stopped while it led the quorum.
    """
    stops = raft_states_at_stops(sandbox, voters_in_roll_order, since)
    states = {n: state for _, n, state in stops}
    assert sorted(states) == sorted(voters_in_roll_order) and None not in states.values(), \
        f"each voter's Raft state at its stop, from its own log: {stops}"
    led = [n for _, n, state in stops if state == "Leader"]
    assert led in ([], voters_in_roll_order[-1:]), \
        f"voters stopped while leading the quorum: {led}; roll order {voters_in_roll_order}; {stops}"


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
