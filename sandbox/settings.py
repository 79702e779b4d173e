"""Every tunable of the sandbox cluster, in one place.

The brokers and controllers are Apache Kafka itself (:mod:`sandbox.kafka_release`). What the sandbox sets
differently from Kafka's defaults, and why, is :data:`BROKER_CONFIG` / :data:`KRAFT_BROKER_CONFIG` /
:data:`CONTROLLER_CONFIG` (written into each host's ``server.properties``) and :data:`BROKER_HEAP` /
:data:`JVM_OPTS` (the JVM each node runs in); everything else is Kafka's default. Units are in the names
(``_S`` seconds, ``_MS`` milliseconds, ``_BYTES``).

Layout of a sandbox work directory (``--workdir``, default ``.sandbox``)::

    DIR/env.json                 what tests and tools read (see ``sandbox.envfile``)
    DIR/airflow.env              ``export AIRFLOW_CONN_...`` lines for this cluster
    DIR/sandbox.json             orchestration state: owner pid, ports, broker ids, cluster id
    DIR/zookeeper/               zoo.cfg, data, zookeeper.pid, zookeeper.log
    DIR/burrow/                  burrow.toml, burrow.pid, burrow.log
    DIR/ssh/                     client key, known_hosts (every host), the hosts' one shared host key
    DIR/workload/                workload.pid, workload.log, stall-<group> files
    DIR/hosts/<id>/              one host (broker N at the address base + N, KRaft controllers at + 100 + i):
        server.properties        Kafka's configuration of the node (broker.id / node.id, listeners, ...)
        kafka -> kafka_2.13-3.6.2   the installed release (an upgrade re-points the symlink)
        kafka_2.13-3.6.2/        the release: bin/ and config/ of its own, libs/ -> the assembled release's jars
        data/                    log.dirs (KRaft: formatted by kafka-storage)
        logs/server.log          the node's log (Kafka's log4j output; kafka-service appends each start)
        kafka.pid                the running JVM's pid (written by kafka-service)
        sshd/                    sshd_config, sshd.pid
"""

from __future__ import annotations

# --- addresses -------------------------------------------------------------------------------
BROKER_HOST_BASE = "127.0.0.11"  # broker id N listens on 127.0.0.(11 + N)
BROKER_PORT = 9092  # the brokers' listener (PLAINTEXT), clients and replication
CONTROLLER_PORT = 9093  # KRaft controllers' listener (CONTROLLER)
#: `up --client-sasl` / `--client-tls`: the brokers' second listener (SASL_PLAINTEXT with the PLAIN mechanism,
#: KIP-43; SSL; or both, SASL_SSL), which the sandbox's Airflow connection uses; replication, the sandbox's own
#: tools, Burrow and the tests' observers keep the PLAINTEXT one. A client that does not authenticate (or speak
#: TLS) is refused on this port.
BROKER_CLIENT_PORT = 9094
SASL_MECHANISM = "PLAIN"  # `--client-sasl`'s mechanism unless `--sasl-mechanism` names another
#: `up --sasl-mechanism`: PLAIN (KIP-43: the password in the listener's JAAS config) or SCRAM (KIP-84: salted
#: credentials Kafka keeps in its metadata, created at `up` with AlterUserScramCredentials, KIP-554)
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM_ITERATIONS = 4096  # Kafka's minimum for SCRAM-SHA-256/512 (and kafka-configs' default)
SASL_USER = "kafkaops"  # the only user the listener knows; its password is made at `up` (state.json)
SSH_PORT = 2222  # sshd of each host, on the host's address
ZOOKEEPER_PREFERRED_PORT = 2181  # used when free, else a free port (env.json tells)
BURROW_PREFERRED_PORT = 8000  # used when free, else a free port (env.json tells)
BURROW_CLUSTER = "sandbox"
DEFAULT_KAFKA_VERSION = "3.6.2"  # ZooKeeper mode
DEFAULT_KRAFT_KAFKA_VERSION = "4.0.0"  # `up --mode kraft` without --kafka-version
CONTROLLER_ID_BASE = 100  # KRaft controllers get node ids 100, 101, ... (hosts at the address base + id)
SCALA_VERSION = "2.13"


def broker_host(broker_id: int) -> str:
    """Loopback address of broker ``broker_id`` (127.0.0.11 + id); ids 0..243 fit in 127/8."""
    base = BROKER_HOST_BASE.rsplit(".", 1)
    return f"{base[0]}.{int(base[1]) + broker_id}"


# --- the nodes' JVMs --------------------------------------------------------------------------------
#: Heap per role (KAFKA_HEAP_OPTS; Kafka's scripts default to 1 GiB). A sandbox broker holds a few MiB of
#: data and serves a few hundred messages per second; 320 MiB leaves the log cleaner its buffer (below).
BROKER_HEAP = "-Xms96m -Xmx320m"
CONTROLLER_HEAP = "-Xms64m -Xmx192m"
#: KAFKA_JVM_PERFORMANCE_OPTS. Kafka's scripts use G1 with a 20 ms pause goal; on 2 shared cores the serial
#: collector (one GC thread, pauses of a few ms on these heaps) and C1 only (TieredStopAtLevel=1: no C2
#: compiler threads, a JVM up in about 2 s) leave more CPU to the other nodes, Airflow and the tests.
JVM_OPTS = ("-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true "
            "-Dsun.net.inetaddr.ttl=0")

# --- what the sandbox's server.properties set differently from Kafka's defaults ------------------------
ZK_SESSION_TIMEOUT_MS = 6000  # Kafka 18000: a crashed ZooKeeper-mode broker loses leadership after 6 s
#: Kafka 9000: a KRaft broker silent this long is fenced. The active controller enforces it (a controller setting);
#: the brokers read it too (their heartbeat's request timeout and registration retries are half of it). The
#: controller also refuses a restarted broker's new registration (DUPLICATE_BROKER_REGISTRATION) until the session
#: of the incarnation that shut down has run out: a KRaft broker's restart takes at least this long after its stop.
BROKER_SESSION_TIMEOUT_MS = 6000
MIN_INSYNC_REPLICAS = 2  # Kafka 1; what production clusters with RF 3 use, and what the roll's gates guard

#: Settings of every broker, both modes. Small thread pools and partition counts for 2 cores; short
#: timeouts where a test would otherwise wait out Kafka's production values.
BROKER_CONFIG: dict[str, str] = {
    "num.network.threads": "2",  # Kafka 3
    "num.io.threads": "2",  # Kafka 8
    "background.threads": "2",  # Kafka 10
    "num.replica.fetchers": "1",
    "num.recovery.threads.per.data.dir": "1",
    "log.cleaner.threads": "1",
    "log.cleaner.dedupe.buffer.size": str(8 * 1024 * 1024),  # Kafka 128 MiB: half the broker heap
    "offsets.topic.num.partitions": "10",  # Kafka 50
    "transaction.state.log.num.partitions": "10",  # Kafka 50
    "group.initial.rebalance.delay.ms": "0",  # Kafka 3000: a new group's first rebalance waits no longer
    "min.insync.replicas": str(MIN_INSYNC_REPLICAS),
    "replica.lag.time.max.ms": "10000",  # Kafka 30000: a stalled follower leaves the ISR after 10 s
}
#: ZooKeeper-mode brokers (Kafka 3.x) only.
ZK_BROKER_CONFIG: dict[str, str] = {
    "zookeeper.session.timeout.ms": str(ZK_SESSION_TIMEOUT_MS),
    # Kafka 5000: a controlled shutdown the controller cannot complete (partitions with no other live replica,
    # as when `sandbox down` stops every broker) is retried 3 times after this; 15 s of waiting become 3 s
    "controlled.shutdown.retry.backoff.ms": "1000",
}
#: KRaft brokers only.
KRAFT_BROKER_CONFIG: dict[str, str] = {
    "broker.session.timeout.ms": str(BROKER_SESSION_TIMEOUT_MS),
    "broker.heartbeat.interval.ms": "1000",  # Kafka 2000; must stay well below the session timeout
}
#: KRaft controllers.
CONTROLLER_CONFIG: dict[str, str] = {
    "broker.session.timeout.ms": str(BROKER_SESSION_TIMEOUT_MS),  # where it takes effect (see above)
    # the brokers' value: turning ELR on (KIP-966; on by default in new 4.1 clusters) makes the active controller
    # write its own static min.insync.replicas as the cluster-level one, which outranks the brokers' files
    "min.insync.replicas": str(MIN_INSYNC_REPLICAS),
    "num.network.threads": "1",
    "num.io.threads": "2",
    "background.threads": "2",
}

# --- the nodes' service (kafka-service, the sandbox's systemd unit) -------------------------------------
START_WAIT_S = 45.0  # `kafka-service start` waits this long for "started" (or an exit) before returning
STOP_TIMEOUT_S = 60.0  # `kafka-service stop`: SIGTERM (controlled shutdown), then SIGKILL (systemd's TimeoutStopSec)

# --- workload (topics and consumer groups created by `sandbox up`) ---------------------------
#: name -> (partitions, replication factor, bytes written per partition at `up`): the sizes give the
#: reassignment planner partitions of different weights (clicks the heaviest, audit the lightest).
WORKLOAD_TOPICS: dict[str, tuple[int, int, int]] = {
    "orders": (12, 3, 256 * 1024),
    "payments": (6, 3, 64 * 1024),
    "clicks": (12, 2, 768 * 1024),
    "audit": (3, 2, 8 * 1024),
}
MESSAGE_BYTES = 512  # bytes per workload message
PRODUCE_MSGS_PER_S = 20.0  # the workload producer's rate per topic while the sandbox runs
CONSUMER_OFFSETS_PARTITIONS = 10  # offsets.topic.num.partitions above
CONSUMER_OFFSETS_RF = 3  # offsets.topic.replication.factor (capped at the broker count)
# group -> topics it consumes (a consumer-group member reading them, committing to __consumer_offsets)
WORKLOAD_GROUPS: dict[str, list[str]] = {
    "orders-service": ["orders", "payments"],
    "analytics": ["clicks"],
    "auditor": ["audit"],
}
WORKLOAD_COMMIT_INTERVAL_S = 1.0  # each group commits the offsets it reached this often

# --- Burrow (its config keys in comments) ---------------------------------------------------------
BURROW_OFFSET_REFRESH_S = 1  # cluster.<name>.offset-refresh (Burrow default 10)
BURROW_TOPIC_REFRESH_S = 5  # cluster.<name>.topic-refresh
# storage.default.intervals: commits kept per partition = Burrow's evaluation window. 12 commits 1 s apart span 11 s,
# so the lag gate's default hysteresis (lag_ok_consecutive 3, healthcheck_interval_s 5: 10 s) fits in one OK, as it
# does in production (Burrow's default 10 commits of consumers committing every 5 s span 45 s)
BURROW_INTERVALS = 12

# --- startup ---------------------------------------------------------------------------------
UP_TIMEOUT_S = 120.0  # `sandbox up` gives up when the cluster is not healthy after this
