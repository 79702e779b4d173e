"""Every tunable of the sandbox cluster, in one place, with time scaled down for tests.

Real Kafka waits tens of seconds (zookeeper.session.timeout.ms=18000, replica.lag.time.max.ms=30000);
the sandbox shrinks those so that a broker stopped and restarted is back in every ISR within about 10 s.
Leader rebalancing keeps Kafka's defaults (on, every 300 s). Values are plain module constants so that
the orchestration (``sandbox.cli``), the broker processes (``sandbox.broker``) and the workload
read the same numbers. Units are in the names (``_S`` seconds, ``_MS`` milliseconds, ``_BYTES``).

Layout of a sandbox work directory (``--workdir``, default ``.sandbox``)::

    DIR/env.json                 what tests and tools read (see ``sandbox.envfile``)
    DIR/airflow.env              ``export AIRFLOW_CONN_...`` lines for this cluster
    DIR/sandbox.json             orchestration state: owner pid, ports, broker ids
    DIR/zookeeper/               zoo.cfg, data, zookeeper.pid, zookeeper.log
    DIR/burrow/                  burrow.toml, burrow.pid, burrow.log
    DIR/ssh/                     client key, known_hosts (every host), the hosts' one shared host key
    DIR/workload/                workload.pid, workload.log, stall-<group> files
    DIR/hosts/<id>/              one "broker host" (127.0.0.11 + id):
        server.properties        read by the broker at start (broker.id, broker.rack, listeners, ...)
        kafka -> kafka_2.13-3.6.2   the "installed" Kafka version (a symlink to a directory
                                 whose name carries the version; an upgrade re-points it)
        kafka_2.13-3.6.2/        the fake installation directory (holds a VERSION file)
        data/                    log.dirs: the broker's persisted replica state
        logs/server.log          the broker's log (startup failures are written here)
        broker.pid               written by the broker process, removed at clean exit
        sshd/                    sshd_config, sshd.pid
"""

from __future__ import annotations

# --- addresses -------------------------------------------------------------------------------
BROKER_HOST_BASE = "127.0.0.11"  # broker id N listens on 127.0.0.(11 + N)
BROKER_PORT = 9092  # Kafka listener (PLAINTEXT)
REPLICATION_PORT = 9093  # inter-broker sideband (replica fetch, controller RPC); not Kafka protocol
SSH_PORT = 2222  # sshd of each broker host, on the broker's address
ZOOKEEPER_PREFERRED_PORT = 2181  # used when free, else a free port (env.json tells)
BURROW_PREFERRED_PORT = 8000  # used when free, else a free port (env.json tells)
BURROW_CLUSTER = "sandbox"
DEFAULT_KAFKA_VERSION = "3.6.2"
DEFAULT_KRAFT_KAFKA_VERSION = "4.0.0"  # `up --mode kraft` without --kafka-version
CONTROLLER_ID_BASE = 100  # KRaft controllers get node ids 100, 101, ... (hosts at the address base + id)
SCALA_VERSION = "2.13"


def broker_host(broker_id: int) -> str:
    """Loopback address of broker ``broker_id`` (127.0.0.11 + id); ids 0..243 fit in 127/8."""
    base = BROKER_HOST_BASE.rsplit(".", 1)
    return f"{base[0]}.{int(base[1]) + broker_id}"


# --- broker timings (Kafka config names in comments) ---------------------------------------------
ZK_SESSION_TIMEOUT_S = 6.0  # zookeeper.session.timeout.ms (Kafka: 18000); crash -> leaders move after this
BROKER_SESSION_TIMEOUT_S = 6.0  # broker.session.timeout.ms (Kafka: 9000): a KRaft broker silent this long is fenced
REPLICA_LAG_TIME_MAX_S = 5.0  # replica.lag.time.max.ms (Kafka: 30000): follower out of ISR after this
REPLICA_FETCH_INTERVAL_S = 0.2  # how often a follower fetches from its leader
CONTROLLED_SHUTDOWN_TIMEOUT_S = 10.0  # controlled.shutdown.* : give up and exit after this
LEADER_IMBALANCE_CHECK_INTERVAL_S = 300  # leader.imbalance.check.interval.seconds (Kafka's default: a roll
#                                         that leaves leadership to the brokers waits as long as on a real cluster)
LEADER_IMBALANCE_PER_BROKER_PERCENTAGE = 10  # leader.imbalance.per.broker.percentage (Kafka default 10)
AUTO_LEADER_REBALANCE_ENABLE = True  # auto.leader.rebalance.enable (Kafka's default)
MIN_INSYNC_REPLICAS = 2  # min.insync.replicas broker default written to server.properties
STATE_PERSIST_INTERVAL_S = 1.0  # how often a broker writes its replica offsets/sizes to log.dirs

# --- simulated data rates -------------------------------------------------------------------
PRODUCE_MSGS_PER_S = 20.0  # per partition, appended by the leader while the partition is online
MESSAGE_BYTES = 512  # bytes per message (so log size grows MESSAGE_BYTES * rate per second)
REPLICATION_BYTES_PER_S = 8 * 1024 * 1024  # per follower broker, unthrottled copy rate
#   A broker down for 5 s is behind 100 messages (~50 KiB) per partition: it catches up in well
#   under a second per partition, so it is back in every ISR a few seconds after it starts.

# --- workload (topics and consumer groups created by `sandbox up`) ---------------------------
# name -> (partitions, replication factor, initial bytes per partition)
WORKLOAD_TOPICS: dict[str, tuple[int, int, int]] = {
    "orders": (12, 3, 8 * 1024 * 1024),
    "payments": (6, 3, 2 * 1024 * 1024),
    "clicks": (12, 2, 24 * 1024 * 1024),
    "audit": (3, 2, 256 * 1024),
}
CONSUMER_OFFSETS_PARTITIONS = 10  # __consumer_offsets (offsets.topic.num.partitions; Kafka: 50)
CONSUMER_OFFSETS_RF = 3  # offsets.topic.replication.factor (capped at the broker count)
GROUP_INITIAL_REBALANCE_DELAY_S = 0.5  # group.initial.rebalance.delay.ms (Kafka: 3000): a new group's
#                                        first rebalance waits this long for more members
# group -> topics it consumes (offsets committed to ZooKeeper /consumers/<group>/offsets/<topic>/<p>)
WORKLOAD_GROUPS: dict[str, list[str]] = {
    "orders-service": ["orders", "payments"],
    "analytics": ["clicks"],
    "auditor": ["audit"],
}
WORKLOAD_COMMIT_INTERVAL_S = 1.0  # each group commits (log end offset - small lag) this often

# --- Burrow (its config keys in comments) ---------------------------------------------------------
BURROW_OFFSET_REFRESH_S = 1  # cluster.<name>.offset-refresh (Burrow default 10)
BURROW_TOPIC_REFRESH_S = 5  # cluster.<name>.topic-refresh
BURROW_INTERVALS = 5  # storage.default.intervals: offsets kept per partition = evaluation window
BURROW_ZK_REFRESH_S = 1  # consumer.<name>.group-refresh for the kafka_zk module

# --- startup ---------------------------------------------------------------------------------
UP_TIMEOUT_S = 60.0  # `sandbox up` gives up when the cluster is not healthy after this
