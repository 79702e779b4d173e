"""What a Kafka node needs answering before it can be started: the service it registers with, by node kind and
cluster mode. A node started while that service does not answer does not come up; a roll must not start one then,
and a start that failed during such an outage is worth sending again once it answers.

The rules, from Kafka itself:

- A ZooKeeper-mode broker registers its ephemeral ``/brokers/ids/<id>`` znode at startup and exits when it cannot
  connect within ``zookeeper.connection.timeout.ms`` (``ZooKeeperClientTimeoutException``; default: the session
  timeout, 18 s).
- A KRaft broker registers with the active controller (BrokerRegistration, KIP-631) and exits when that has not
  happened within ``initial.broker.registration.timeout.ms`` (default 60 s): it needs a quorum leader.
- During the ZooKeeper-to-KRaft migration (KIP-866) a broker still in ZooKeeper mode registers in ZooKeeper and,
  with ``zookeeper.metadata.migration.enable``, with the KRaft controller too: both.
- A KRaft controller needs nothing the run must wait for: it takes part in the quorum's election itself. A
  migrating controller (``zookeeper.metadata.migration.enable``) also connects to ZooKeeper.

Pure: no Airflow, no I/O.
"""

from __future__ import annotations

from kafka_ops.roll_spec import ClusterMode

ZOOKEEPER = "zookeeper"
QUORUM_LEADER = "quorum leader"


def registers_with(node: str, mode: ClusterMode) -> tuple[str, ...]:
    """What ``node`` (``"broker"`` or ``"controller"``) must reach to come up in a cluster in ``mode``:
    :data:`ZOOKEEPER` and/or :data:`QUORUM_LEADER`, in the order to check them.

    :raises ValueError: an unknown node kind.
    """
    if node == "broker":
        return {ClusterMode.ZOOKEEPER: (ZOOKEEPER,), ClusterMode.MIGRATING: (ZOOKEEPER, QUORUM_LEADER),
                ClusterMode.KRAFT: (QUORUM_LEADER,)}[ClusterMode(mode)]
    if node == "controller":
        return (ZOOKEEPER,) if ClusterMode(mode) is ClusterMode.MIGRATING else ()
    raise ValueError(f"unknown node kind {node!r}: 'broker' or 'controller'")


def start_again(answers_now: bool, elapsed_s: float, timeout_s: float) -> bool:
    """After a failed start: send it again (once what the node registers with answers) when that service does
    not answer now, so the outage explains the failure, and the step's time (``elapsed_s`` since the first start,
    seconds) is within ``timeout_s``. A start that failed while everything answered is the node's own failure:
    the roll stops there."""
    return not answers_now and elapsed_s < timeout_s
