"""Kafka admin hook: cluster metadata, configs and preferred leader election over confluent-kafka.

librdkafka's ``AdminClient`` does the main work (Metadata, DescribeCluster, DescribeConfigs,
ElectLeaders). kafka-python's ``KafkaAdminClient`` is used only for what librdkafka lacks
(List/AlterPartitionReassignments, DescribeLogDirs), each in its own small method with its own
short-lived client. Client settings (SSL/SASL) come from the cluster profile, see
``kafka_ops.profile``.

Cost of :meth:`KafkaAdminHook.cluster_state` per call (``hook.requests`` counts the admin calls):
``configs=False``: Metadata + DescribeCluster (Metadata alone with ``describe_cluster=False``); ``configs=True``
without a config cache: also one
DescribeConfigs for the broker defaults and one per 200 topics; with ``cache_configs=True``: the
DescribeConfigs only on the first call, and afterwards one per 200 topics that are new since the last
call (none while the topic set is unchanged).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from confluent_kafka import ElectionType, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)
from kafka_ops.cluster import (
    DEFAULT_LEADER_IMBALANCE_PERCENTAGE,
    DEFAULT_MIN_INSYNC_REPLICAS,
    Broker,
    ClusterState,
    Partition,
    Registration,
)
from kafka_ops.config_change import DEFAULT_CONFIG, DescribedConfig
from kafka_ops.metadata_version import FEATURE as METADATA_VERSION
from kafka_ops.profile import ClusterProfile, normalize_bootstrap_servers
from kafka_ops.quorum import Quorum

from hooks.cluster_profile import ClusterProfileHook

MIN_INSYNC = "min.insync.replicas"
LEADER_IMBALANCE = "leader.imbalance.per.broker.percentage"
_TOPIC_CONFIG_BATCH = 200
#: Seconds :meth:`KafkaAdminHook.elect_preferred_leaders` waits for an ElectLeaders answer by default. Every caller
#: polls the metadata around it (the roll's gate and leadership step, the reassignment's leadership step), so an
#: answer that does not come is not waited out: the caller looks at the metadata, which shows an election that took
#: effect anyway. The answer normally comes within 0.1 s; once in about 45 broker restarts on 2 cores (Kafka 3.6,
#: ZooKeeper mode) none came until librdkafka gave up after 15 s (``socket.timeout.ms``), while the metadata showed
#: the leaders back 4 s later, and the roll stood still that long.
#:
#: The elections go through a client of their own whose ``socket.timeout.ms`` is this wait (librdkafka's default
#: admin ``request_timeout``, so its own timeout, and the request's TimeoutMs as far as librdkafka fills it from that
#: option: not checked on the wire): a ZooKeeper-mode broker holds an ElectLeaders
#: answer until its own metadata shows the new leaders (``DelayedElectLeader``, at most TimeoutMs), and Kafka reads
#: nothing more from a connection while one of its requests is in progress. On the looks' client that held its
#: DescribeCluster (sent to the controller) and, mostly, its Metadata too: librdkafka sends Metadata to the broker
#: it sent to last (``rd_kafka_broker_weight_usable``: the least idle), the controller the election went to. That
#: fits the leadership waits of 15 s after an unanswered election (2 of 22 serial 12-broker runs on 2026-12-06, each
#: at the ZooKeeper-mode controller's turn; their logs were not kept): the look waited out the held election.
ELECTION_ANSWER_S = 3.0
#: Seconds every broker has to answer :meth:`KafkaAdminHook.unanswered_brokers` (a gate's "every broker answers").
#: A healthy broker answers ApiVersions in milliseconds; one that takes this long is hung or starved.
ANSWER_TIMEOUT_S = 5.0
#: Seconds a request librdkafka sends to "the controller" (DescribeCluster) is waited for in
#: :meth:`KafkaAdminHook.cluster_state` before the Metadata is asked again: the broker it names may have crashed a
#: moment ago (see ``KafkaAdminHook._describe_cluster``); also what the first broker asked for topic configs gets.
#: A healthy broker answers in milliseconds.
CONTROLLER_ANSWER_S = 5.0
#: Brokers asked at most at once for the broker defaults (``KafkaAdminHook._broker_defaults_of``): a crashed
#: broker still in the Metadata costs a second while another answers; the rest are asked one by one only if none of
#: these does.
DEFAULTS_ASKED_AT_ONCE = 3
#: Metadata reads at most, after DescribeCluster went unanswered, until one names a broker other
#: than the one it was sent to (a KRaft broker names a random broker it believes alive, KIP-590): with 3
#: brokers listed and one crashed, 3 reads all naming it happen 1 time in 27; then the look fails at once
#: (transient) instead of waiting out the request timeout for that broker again.
METADATA_PICKS = 3
#: Seconds the controller (the first candidate) has to describe its configs alone (its config is preferred) before
#: the next brokers are asked too. A healthy broker answers in milliseconds.
DEFAULTS_PREFERENCE_S = 1.0


def _kafka_error(exc: BaseException) -> KafkaError | None:
    error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    return error if isinstance(error, KafkaError) else None


def _timed_out(exc: BaseException) -> bool:
    """A librdkafka request that got no answer in time (``_TIMED_OUT``), e.g. while it waited for the broker it goes
    to; other errors (authorization, unknown topic) are answers."""
    error = _kafka_error(exc)
    return error is not None and error.code() == KafkaError._TIMED_OUT


#: Besides :func:`_timed_out`: librdkafka's and Kafka's errors for a broker that cannot serve a request right now
#: (down, restarting, no controller yet).
_UNANSWERED_CODES = frozenset({
    KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError.REQUEST_TIMED_OUT, KafkaError.NOT_CONTROLLER,
    KafkaError.BROKER_NOT_AVAILABLE, KafkaError._WAIT_COORD,
})


def _unanswered(exc: BaseException) -> bool:
    """True when ``exc`` says the request was not answered (or not yet servable), not that Kafka refused it: an
    IncrementalAlterConfigs refused only so may succeed later."""
    error = _kafka_error(exc)
    return _timed_out(exc) or error is not None and (error.code() in _UNANSWERED_CODES or error.retriable())


def _int_config(value: str | None, default: int, name: str) -> int:
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"config {name} has a non-numeric value {value!r}") from None


class LibrdkafkaLog:
    """The ``logger`` of a confluent-kafka client (``AdminClient(conf, logger=LibrdkafkaLog())``): librdkafka's lines
    on the stdlib ``librdkafka`` logger (WARNING by default: ``runtime.task_log.quiet_libraries``), a connection failure
    (facility ``FAIL``: a broker restarting, as it does in every roll) at INFO: the request that needed that broker
    fails or is retried by the caller, which says so itself.

    confluent-kafka calls ``log(level, "%s [%s] %s", facility, client name, message)``.
    """

    def __init__(self, name: str = "librdkafka") -> None:
        self._logger = logging.getLogger(name)

    def log(self, level: int, msg: str, *args: Any) -> None:
        if args and args[0] == "FAIL":
            level = min(level, logging.INFO)
        self._logger.log(level, msg, *args)


class OneNodeFailuresAtInfo(logging.Filter):
    """kafka-python's own lines (``kafka.net.*``, WARNING and up) while this thread asks one node on a connection of
    its own (:meth:`KafkaAdminHook._ask_at`, under :func:`asking_one_node`) are logged at INFO, as
    :class:`LibrdkafkaLog` logs a connection failure: the caller handles that node not answering (another bootstrap
    server answers first, or it names the node), so "Connection failed: ... ECONNREFUSED" and "Bootstrap failed" about
    a broker that is down would only be red lines in a task that went on fine. A logger left at WARNING
    (``runtime.task_log.quiet_libraries``) then drops them. Lines of other threads and clients are untouched."""

    asking = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(self.asking, "depth", 0) or record.levelno <= logging.INFO:
            return True
        record.levelno, record.levelname = logging.INFO, logging.getLevelName(logging.INFO)
        return logging.getLogger(record.name).isEnabledFor(logging.INFO)


#: kafka-python's loggers that report a connection's failures (kafka.net.manager: "Connection failed", "Bootstrap
#: failed"; kafka.net.connection: "Connection lost").
ONE_NODE_LOGGERS = ("kafka.net.manager", "kafka.net.connection")
_ONE_NODE_FILTER = OneNodeFailuresAtInfo()
for _name in ONE_NODE_LOGGERS:
    logging.getLogger(_name).addFilter(_ONE_NODE_FILTER)


@contextmanager
def asking_one_node() -> Iterator[None]:
    """While inside, kafka-python's failure lines of this thread are logged at INFO (:class:`OneNodeFailuresAtInfo`)."""
    asking = OneNodeFailuresAtInfo.asking
    asking.depth = getattr(asking, "depth", 0) + 1
    try:
        yield
    finally:
        asking.depth -= 1


class KafkaAdminHook(ClusterProfileHook):
    """Admin access to one Kafka cluster.

    Build it from exactly one of:

    :param cluster: an Airflow connection of conn type ``kafka`` (a cluster profile).
    :param profile: an already parsed :class:`kafka_ops.profile.ClusterProfile`.
    :param bootstrap_servers: ``"host:port,host:port"`` plus ``client_config`` (librdkafka settings,
        e.g. ``{"security.protocol": "SASL_SSL", ...}``): for tests and scripts without Airflow
        connections.
    :param request_timeout_s: timeout of each admin request, seconds (default 30).
    :param cache_configs: keep the configs :meth:`cluster_state` reads for the life of this hook (see
        there): the broker defaults ``min.insync.replicas`` and ``leader.imbalance.per.broker.percentage``
        are read once, a topic's ``min.insync.replicas`` once per topic (on the first call that sees
        the topic). Default False: every call reads every config again.

    ``requests`` (a ``collections.Counter``) counts the admin calls this hook sent, by Kafka API name
    (``"Metadata"``, ``"DescribeCluster"``, ``"DescribeConfigs"``, ``"ElectLeaders"``); a
    DescribeConfigs call for many resources counts once. librdkafka's own background requests
    (bootstrap, metadata refreshes) are not counted.

    The librdkafka client is created lazily by :meth:`get_conn` and reused; call :meth:`close`
    (or use the hook as a context manager) to drop it. Errors from the cluster surface as
    ``confluent_kafka.KafkaException`` (usually transient: a wait retries it) or, for kafka-python
    calls, ``kafka.errors.KafkaError`` subclasses.
    """

    hook_name = "Kafka cluster (kafka-ops)"

    def __init__(
        self,
        cluster: str | None = None,
        *,
        profile: ClusterProfile | None = None,
        bootstrap_servers: str | None = None,
        client_config: Mapping[str, Any] | None = None,
        request_timeout_s: float = 30.0,
        cache_configs: bool = False,
    ) -> None:
        given = [x is not None for x in (cluster, profile, bootstrap_servers)]
        if sum(given) != 1:
            raise ValueError("give exactly one of cluster, profile, bootstrap_servers")
        if request_timeout_s <= 0:
            raise ValueError(f"request_timeout_s must be > 0, got {request_timeout_s}")
        if bootstrap_servers is not None:
            profile = ClusterProfile(
                cluster="",
                bootstrap_servers=normalize_bootstrap_servers(bootstrap_servers),
                client_config=dict(client_config or {}),
            )
        super().__init__(cluster, profile)
        self.request_timeout_s = request_timeout_s
        self._admin: AdminClient | None = None
        self._electors: dict[int, AdminClient] = {}  # socket.timeout.ms -> the client ElectLeaders go through
        self.cache_configs = cache_configs
        self.requests: Counter[str] = Counter()
        # The config cache (cache_configs=True): (default min.insync.replicas, leader imbalance %) of
        # the brokers, and topic -> its min.insync.replicas override (None: none) for every topic read.
        self._broker_defaults: tuple[int, int] | None = None
        self._topic_min_insync: dict[str, int | None] = {}
        # broker id -> rack from the last DescribeCluster answered (kept while the controller does not answer)
        self._racks: dict[int, str | None] = {}
        # the broker ids of the last Metadata this hook read, the broker whose DescribeConfigs answered last and the
        # one that left the last DescribeCluster unanswered: where topic DescribeConfigs go (_topic_config_readers)
        self._listed: tuple[int, ...] = ()
        self._config_via: int | None = None
        self._unanswered: int | None = None

    # -- lifecycle ---------------------------------------------------------------------------------

    def get_conn(self) -> AdminClient:
        """The confluent-kafka ``AdminClient`` (created on first call)."""
        if self._admin is None:
            self._admin = self._new_client(int(self.request_timeout_s * 1000), keep_profiles=True)
        return self._admin

    def _new_client(self, socket_timeout_ms: int, keep_profiles: bool) -> AdminClient:
        """An AdminClient on the profile's settings with ``socket.timeout.ms`` (``keep_profiles``: unless the
        profile sets it). librdkafka's own log lines (e.g. "Connect ... failed" while a broker is down) go to the
        "librdkafka" logger instead of stderr (LibrdkafkaLog); they are queued until poll() (see _client)."""
        conf = self.profile.confluent_config()
        if keep_profiles:
            conf.setdefault("socket.timeout.ms", socket_timeout_ms)
        else:
            conf["socket.timeout.ms"] = socket_timeout_ms
        return AdminClient(conf, logger=LibrdkafkaLog())

    def _elector(self, timeout_s: float) -> AdminClient:
        """The AdminClient ElectLeaders go through: its own connections, its ``socket.timeout.ms`` ``timeout_s``
        (librdkafka's range: 10 ms at least), so a broker holds such a request at most that long and never holds
        the looks' requests behind it (:data:`ELECTION_ANSWER_S`)."""
        timeout_ms = max(10, int(timeout_s * 1000))
        if timeout_ms not in self._electors:
            self._electors[timeout_ms] = self._new_client(timeout_ms, keep_profiles=False)
        return self._electors[timeout_ms]

    @contextmanager
    def _client(self, admin: AdminClient | None = None) -> Iterator[AdminClient]:
        """The AdminClient (``admin``, else :meth:`get_conn`'s); afterwards ``poll(0)`` forwards queued librdkafka
        log lines."""
        admin = self.get_conn() if admin is None else admin
        try:
            yield admin
        finally:
            admin.poll(0)

    def close(self) -> None:
        """Drop the client (librdkafka closes its connections when it is garbage collected).

        The config cache stays (it belongs to the hook, not to the client).
        """
        self._admin = None
        self._electors.clear()

    def __enter__(self) -> KafkaAdminHook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- metadata ------------------------------------------------------------------------------

    def cluster_state(self, topics: Iterable[str] | None = None, *, configs: bool = True,
                      describe_cluster: bool = True) -> ClusterState:
        """Snapshot the cluster: brokers (with racks), partitions, controller, min-ISR settings.

        Sources: Metadata (list_topics) for brokers and partitions; DescribeCluster for the
        controller id and racks (falls back to Metadata's controller id); DescribeConfigs on the
        controller for the broker defaults ``min.insync.replicas`` and
        ``leader.imbalance.per.broker.percentage``; DescribeConfigs on the topics for per-topic
        ``min.insync.replicas`` overrides.

        :param topics: limit partitions to these topics; None = all topics (internal ones included).
        :param configs: False = Metadata and DescribeCluster only (two requests): the min-ISR and
            leader-imbalance settings keep Kafka's defaults. For waits that need only brokers, leaders
            and ISRs (gone, registered, caught up), which then cost no DescribeConfigs per poll.
        :param describe_cluster: False = no DescribeCluster (``configs`` must be False): the brokers' racks are
            unknown (None) and the controller id is Metadata's. librdkafka sends DescribeCluster to the
            controller and waits for one while none is known: right after the controller stopped (a ZooKeeper-mode
            controller's turn in a roll) a look took 15 s (``request_timeout_s``), where Metadata answers at once.
            For looks that need only brokers, leaders and ISRs.
        :raises ValueError: ``describe_cluster=False`` with ``configs=True`` (the broker defaults are read from
            the controller DescribeCluster names).
        :raises confluent_kafka.KafkaException: metadata or config requests failed / timed out.

        With ``cache_configs`` (see the class), ``configs=True`` reads the broker defaults on the first
        call only, and topic configs only for topics this hook has not read yet: a topic that appears
        later is read by the first call that sees it in the Metadata, a topic gone from the Metadata
        leaves the cache. The cache lives as long as the hook (a prober's: one task). Trade-off: a
        ``min.insync.replicas`` (or leader-imbalance) change made while the hook lives is seen only by the
        next hook (the next task), and so is a topic deleted and created again under the same name; a new
        topic is seen at once. Metadata and DescribeCluster (unless ``describe_cluster=False``) are
        asked on every call, cached or not.
        """
        if configs and not describe_cluster:
            raise ValueError("configs=True needs DescribeCluster (the broker defaults are the controller's)")
        with self._client() as admin:
            self.requests["Metadata"] += 1
            md = admin.list_topics(timeout=self.request_timeout_s)
            controller_id = md.controller_id if md.controller_id is not None else -1
            racks: dict[int, str | None] = {}
            silent_controller: int | None = None
            if describe_cluster:
                md, controller_id, racks, silent_controller = self._describe_cluster(admin, md)
                self._unanswered = silent_controller
            self._listed = tuple(md.brokers)

        brokers = tuple(
            Broker(id=b.id, host=b.host, port=b.port, rack=racks.get(b.id) or None) for b in md.brokers.values()
        )
        wanted = None if topics is None else set(topics)
        partitions = []
        for name, tmd in md.topics.items():
            if wanted is not None and name not in wanted:
                continue
            for pmd in tmd.partitions.values():
                partitions.append(
                    Partition(
                        topic=name,
                        partition=pmd.id,
                        leader=pmd.leader if pmd.leader is not None else -1,
                        replicas=tuple(pmd.replicas),
                        isr=tuple(pmd.isrs),
                    )
                )

        if not configs:
            return ClusterState(brokers=brokers, partitions=tuple(partitions), controller_id=controller_id)
        topic_names = sorted({p.topic for p in partitions})
        if self.cache_configs:
            if self._broker_defaults is None:
                self._broker_defaults = self._broker_defaults_of(controller_id, brokers, silent_controller)
            default_min_isr, imbalance_pct = self._broker_defaults
            overrides = self._cached_topic_min_insync(topic_names, set(md.topics), default_min_isr)
        else:
            default_min_isr, imbalance_pct = self._broker_defaults_of(controller_id, brokers, silent_controller)
            overrides = self._topic_min_insync_overrides(topic_names, default_min_isr)
        return ClusterState(
            brokers=brokers,
            partitions=tuple(partitions),
            controller_id=controller_id,
            topic_min_insync=overrides,
            default_min_insync=default_min_isr,
            leader_imbalance_percentage=imbalance_pct,
        )

    def _describe_cluster(self, admin: AdminClient, md: Any) -> tuple[Any, int, dict[int, str | None], int | None]:
        """DescribeCluster after the Metadata ``md``: ``(metadata, controller id, racks, silent controller)``.

        librdkafka sends DescribeCluster (and DescribeConfigs of topics) to the broker the last Metadata named as
        the controller, and waits for it. A KRaft broker names a random broker it believes alive (KIP-590): one
        that crashed a moment ago stays named until the active controller fences it
        (``broker.session.timeout.ms``, 9 s by default), and a ZooKeeper-mode controller that crashed stays named
        until another is elected (``zookeeper.session.timeout.ms``). Each request to it waited out the request
        timeout: a gate's first look after a crash took 45 s and then failed. So the answer is waited for
        :data:`CONTROLLER_ANSWER_S` at most; on a timeout the Metadata is read again and, when it names another
        broker (KRaft picks again), DescribeCluster is sent once more. When that fails too: the Metadata's
        controller id, the racks this hook last read (none read: None), and the silent broker's id (the caller
        asks it for configs last). Other errors (e.g. authorization) keep the Metadata's controller id and no
        racks, as before.
        """
        named = md.controller_id if md.controller_id is not None else -1
        wait_s = min(self.request_timeout_s, CONTROLLER_ANSWER_S)
        asked_again = False
        while True:
            try:
                self.requests["DescribeCluster"] += 1
                desc = admin.describe_cluster(request_timeout=wait_s).result(timeout=wait_s + 1)
            except KafkaException as exc:
                if not _timed_out(exc):
                    self.log.warning("describe_cluster failed (%s); using Metadata's controller id", exc)
                    return md, named, {}, None
                if not asked_again:
                    asked_again = True
                    md, another = self._metadata_naming_another(admin, named)
                    if another:
                        self.log.info("broker %s, named the controller by the Metadata, did not answer "
                                      "DescribeCluster within %.0f s; the Metadata now names broker %s", named,
                                      wait_s, md.controller_id)
                        named = md.controller_id
                        continue
                self.log.warning("broker %s, named the controller by the Metadata, did not answer DescribeCluster "
                                 "within %.0f s (down, or not fenced yet); racks as last read", named, wait_s)
                return md, named, {b: r for b, r in self._racks.items() if b in md.brokers}, named
            if desc.controller is not None:
                named = desc.controller.id
            racks = {n.id: n.rack for n in desc.nodes or []}
            self._racks.update(racks)
            return md, named, racks, None

    def _broker_defaults_of(self, controller_id: int, brokers: tuple[Broker, ...],
                            silent: int | None = None) -> tuple[int, int]:
        """(``min.insync.replicas``, ``leader.imbalance.per.broker.percentage``) of the controller; of another
        broker when it does not answer (``controller_id`` -1: none known; ``silent``: a broker that did not answer
        DescribeCluster, asked last).

        DescribeConfigs of a broker goes to that broker. A broker that crashed a moment ago is still in the
        Metadata and may be the one named the controller (a KRaft broker names a random one, KIP-590): asked alone,
        it made the look wait out the request timeout (15 s). So the first candidate has
        :data:`DEFAULTS_PREFERENCE_S` to answer alone; then the next :data:`DEFAULTS_ASKED_AT_ONCE` - 1 are asked
        too and the first answer counts; the rest one by one only when none of those answered.

        :raises confluent_kafka.KafkaException: no broker answered (the last error).
        """
        # The controller runs the leader-imbalance check, so its config counts; any live broker
        # will do if the controller cannot answer (it may be moving right now).
        ids = [b.id for b in brokers]
        first = [controller_id] if controller_id >= 0 and controller_id != silent else []
        candidates = first + [b for b in ids if b not in (controller_id, silent)] + [b for b in ids if b == silent]
        names = {MIN_INSYNC, LEADER_IMBALANCE}
        at_once, rest = candidates[:DEFAULTS_ASKED_AT_ONCE], candidates[DEFAULTS_ASKED_AT_ONCE:]
        cfg: dict[str, str | None] | None = None
        last: BaseException | None = None
        if at_once:
            with self._client() as admin:
                def ask(broker_id: int) -> Any:
                    resource = ConfigResource(ResourceType.BROKER, str(broker_id))
                    self.requests["DescribeConfigs"] += 1
                    return admin.describe_configs([resource], request_timeout=self.request_timeout_s)[resource]

                asked = {ask(at_once[0]): at_once[0]}
                cfg, last = self._first_answer(asked, DEFAULTS_PREFERENCE_S)
                if cfg is None and len(at_once) > 1:
                    self.log.info("broker %s did not describe its configs within %.0f s: asking %s too",
                                  at_once[0], DEFAULTS_PREFERENCE_S, at_once[1:])
                    asked.update({ask(b): b for b in at_once[1:]})
                    cfg, seen = self._first_answer(asked, self.request_timeout_s + 5)
                    last = seen or last
        for broker_id in rest if cfg is None else []:
            try:
                cfg = self.describe_broker_configs(broker_id, names)
                break
            except KafkaException as exc:
                last = exc
                self.log.warning("broker %s did not describe its configs (%s)", broker_id, exc)
        if cfg is None and candidates:
            raise last if isinstance(last, KafkaException) else KafkaException(
                KafkaError(KafkaError._TIMED_OUT, f"none of brokers {candidates} described its configs in time"))
        cfg = cfg or {}
        default_min_isr = _int_config(cfg.get(MIN_INSYNC), DEFAULT_MIN_INSYNC_REPLICAS, MIN_INSYNC)
        imbalance_pct = _int_config(cfg.get(LEADER_IMBALANCE), DEFAULT_LEADER_IMBALANCE_PERCENTAGE, LEADER_IMBALANCE)
        return default_min_isr, imbalance_pct

    def _first_answer(self, asked: Mapping[Any, int], within_s: float
                      ) -> tuple[dict[str, str | None] | None, BaseException | None]:
        """The broker defaults from the first of ``asked`` (DescribeConfigs futures -> broker id) to answer within
        ``within_s`` seconds, and the last error it saw (each failure logged once: futures that failed before are
        not looked at again); ``(None, error or None)`` when none answered in time."""
        from concurrent.futures import FIRST_COMPLETED, wait

        pending = {f for f in asked if not (f.done() and f.exception() is not None)}  # a failure is seen once
        deadline = time.monotonic() + within_s
        last: BaseException | None = None
        while pending and (left := deadline - time.monotonic()) > 0:
            done, pending = wait(pending, timeout=left, return_when=FIRST_COMPLETED)
            for future in done:
                if future.exception() is None:
                    self._config_via = asked[future]
                    return {n: e.value for n, e in future.result().items() if n in (MIN_INSYNC, LEADER_IMBALANCE)}, last
                last = future.exception()
                self.log.warning("broker %s did not describe its configs (%s)", asked[future], last)
        return None, last

    def _cached_topic_min_insync(self, topics: list[str], present: set[str], default: int) -> dict[str, int]:
        """The overrides of ``topics`` from the cache, after reading the topics it lacks and dropping
        the cached topics no longer ``present`` in the Metadata."""
        cache = self._topic_min_insync
        for gone in [t for t in cache if t not in present]:
            del cache[gone]
        new = [t for t in topics if t not in cache]
        for i in range(0, len(new), _TOPIC_CONFIG_BATCH):  # batch by batch: a failed poll keeps what it read
            cache.update(self._topic_min_insync_read(new[i : i + _TOPIC_CONFIG_BATCH], default))
        if new:
            self.log.debug("configs of %d new topic(s) read, %d cached", len(new), len(cache))
        return {t: v for t in topics if (v := cache.get(t)) is not None}

    # -- configs ---------------------------------------------------------------------------------

    def describe_broker_configs(self, broker_id: int, names: Iterable[str] | None = None) -> dict[str, str | None]:
        """A broker's effective configs (DescribeConfigs, BROKER resource): name -> value string.

        :param names: only these names; None = all. Sensitive values come back as None.
        :raises confluent_kafka.KafkaException: request failed (e.g. unknown broker id).
        """
        resource = ConfigResource(ResourceType.BROKER, str(broker_id))
        with self._client() as admin:
            self.requests["DescribeConfigs"] += 1
            futures = admin.describe_configs([resource], request_timeout=self.request_timeout_s)
            entries = futures[resource].result(timeout=self.request_timeout_s + 5)
        self._config_via = broker_id
        wanted = None if names is None else set(names)
        return {n: e.value for n, e in entries.items() if wanted is None or n in wanted}

    def describe_broker_config_entries(self, broker_ids: Iterable[int]) -> dict[int, dict[str, DescribedConfig]]:
        """Every config of each broker, as DescribeConfigs (BROKER resource ``<id>``, sent to that broker) reports
        it: broker id -> name -> :class:`kafka_ops.config_change.DescribedConfig` (value, ``read_only``, source,
        sensitive, and the type Kafka reports from DescribeConfigs v3 on, KIP-569). kafka-python, because
        confluent-kafka's ConfigEntry carries no type.

        :raises kafka.errors.KafkaError: a broker not in the metadata or not answering.
        """
        return {b: {name: DescribedConfig(name=name, value=e.get("value"), read_only=bool(e.get("read_only")),
                                          source=str(e.get("config_source") or DEFAULT_CONFIG),
                                          sensitive=bool(e.get("is_sensitive")), type=e.get("config_type"))
                    for name, e in entries.items()}
                for b, entries in self._describe_brokers(broker_ids).items()}

    def _describe_brokers(self, broker_ids: Iterable[int], name: str | None = None,
                          synonyms: bool = False) -> dict[int, dict[str, dict[str, Any]]]:
        """DescribeConfigs of each broker's BROKER resource, sent to that broker (kafka-python): broker id -> config
        name -> kafka-python's entry (``value``, ``read_only``, ``config_source``, ``synonyms`` with ``synonyms``);
        every config, or ``name`` only.

        :raises kafka.errors.KafkaError: a broker not in the metadata or not answering.
        :raises RuntimeError: a broker's answer without any config (or without ``name``).
        """
        from kafka.admin import ConfigResource as KpResource
        from kafka.admin import ConfigResourceType

        ids = [int(b) for b in broker_ids]
        client = self._kafka_python_admin()
        try:
            self.requests["DescribeConfigs"] += len(ids)
            found = client.describe_configs(
                [KpResource(ConfigResourceType.BROKER, str(b), None if name is None else [name]) for b in ids],
                include_synonyms=synonyms, config_filter="all")
        finally:
            client.close()
        by_broker = found.get("broker", {})
        missing = [b for b in ids if not by_broker.get(str(b)) or (name is not None and name not in by_broker[str(b)])]
        if missing:
            raise RuntimeError(f"DescribeConfigs returned {'no ' + name if name else 'nothing'} for brokers {missing}")
        return {b: by_broker[str(b)] for b in ids}

    def broker_config_layers(self, name: str, broker_ids: Iterable[int]) -> dict[int, dict[str, str | None]]:
        """Each broker's value of the broker config ``name`` and the layers it comes from, as the broker itself
        answers DescribeConfigs v1+ with synonyms (KIP-226): broker id -> ``{"value": effective, "<source>":
        value, ...}`` with the sources that hold it, highest precedence first (``DYNAMIC_BROKER_CONFIG``,
        ``DYNAMIC_DEFAULT_BROKER_CONFIG``, ``STATIC_BROKER_CONFIG``, ``DEFAULT_CONFIG``).

        :raises kafka.errors.KafkaError: a broker not in the metadata or not answering.
        :raises RuntimeError: a broker's answer without ``name``.
        """
        return {b: _layers(entries[name]) for b, entries in self._describe_brokers(broker_ids, name, True).items()}

    def controller_config_layers(self, address: str, node_id: int, name: str,
                                 broker_listener: bool = False) -> dict[str, str | None]:
        """A KRaft controller's value of ``name`` and its layers (as :meth:`broker_config_layers`), asked of the
        controller at ``address`` (``host:port`` of its CONTROLLER listener, or with ``broker_listener`` a
        combined node's broker listener) itself: DescribeConfigs of BROKER resource ``node_id``, which controllers
        answer for their own configs (KIP-919, Kafka 3.7+).

        :raises kafka.errors.KafkaError: not reachable, no answer, or an error code in the answer.
        """
        from kafka.admin import ConfigSourceType
        from kafka.errors import for_code
        from kafka.protocol.admin import DescribeConfigsRequest

        response = self._ask_at(address, DescribeConfigsRequest(
            resources=[(ResourceType.BROKER.value, str(int(node_id)), [name])], include_synonyms=True,
            min_version=1), controller=not broker_listener)
        result = response.to_dict()["results"][0]
        error = for_code(result["error_code"])
        if error.errno != 0:
            raise error(f"DescribeConfigs of controller {node_id} at {address}: {result.get('error_message')}")
        entry = next((c for c in result["configs"] if c["name"] == name), None)
        if entry is None:
            raise for_code(-1)(f"controller {node_id} at {address} returned no {name}")
        return _layers({"value": entry["value"], "synonyms": [
            {"value": s["value"], "source": ConfigSourceType(s["source"]).name} for s in entry["synonyms"]]})

    def alter_broker_configs(self, changes: Mapping[str, str | None], broker_id: int | None, *,
                             validate_only: bool = False) -> None:
        """IncrementalAlterConfigs of dynamic broker configs (KIP-339: only these keys change): ``{key: value}``
        SET, ``{key: None}`` DELETE, at the cluster-wide default (``broker_id`` None: BROKER resource ``""``,
        Kafka's ``--entity-default``, sent to any broker) or for one broker (sent to that broker, as Kafka's
        ``kafka-configs.sh`` does). ``validate_only``: Kafka checks the change (types, ranges, its dynamic-update
        rules) and changes nothing.

        kafka-python's request and response classes, sent through its connection manager: its ``alter_configs``
        and librdkafka both refuse the default resource's empty name.

        :raises RuntimeError: Kafka refused it, with Kafka's message (e.g. ``Invalid value abc for configuration
            num.io.threads: Not a number of type INT``).
        """
        from kafka.admin import AlterConfigOp, ConfigResourceType
        from kafka.admin import ConfigResource as KpResource

        configs = {k: (AlterConfigOp.SET, v) if v is not None else (AlterConfigOp.DELETE, None)
                   for k, v in changes.items()}
        if not configs:
            return
        name = "" if broker_id is None else str(int(broker_id))
        client = self._kafka_python_admin()
        try:
            request = client._alter_configs_request([KpResource(ConfigResourceType.BROKER, name, configs)],
                                                    validate_only=validate_only, incremental=True)
            manager = client._manager

            async def send() -> Any:
                return await manager.send(request, **({} if broker_id is None else {"node_id": int(broker_id)}))

            self.requests["IncrementalAlterConfigs"] += 1
            response = manager.run(send)
        finally:
            client.close()
        where = "the cluster-wide default" if broker_id is None else f"broker {broker_id}"
        for result in response.responses:
            if result.error_code != 0:
                raise RuntimeError(f"Kafka refused the config change at {where}: "
                                   f"{result.error_message or result.error_code}")

    def finalized_feature(self, name: str) -> int | None:
        """The cluster's finalized level of feature ``name`` (ApiVersions v3+ FinalizedFeatures, KIP-584), e.g.
        ``eligible.leader.replicas.version`` (KIP-966); None when not finalized or the cluster predates features."""
        client = self._kafka_python_admin()
        try:
            features = client.describe_features(send_request_to_controller=False)
        finally:
            client.close()
        finalized = features.get(name, {}).get("finalized")
        return int(finalized[1]) if finalized else None

    def topic_overrides(self, topic: str) -> dict[str, str | None] | None:
        """The topic's own configs (``DYNAMIC_TOPIC_CONFIG``: set at CreateTopics or by kafka-configs.sh), name ->
        value; ``{}`` for a topic with none (e.g. auto-created by a client's Metadata request); None when the topic
        does not exist (DescribeConfigs).

        :raises KafkaException: the cluster did not answer (transient).
        """
        entries = self._topic_config_entries([topic], skip_unknown=True).get(topic)
        if entries is None:
            return None
        dynamic = ConfigSource.DYNAMIC_TOPIC_CONFIG
        return {name: e.value for name, e in entries.items() if e.source in (dynamic, dynamic.value)}

    def _topic_config_entries(self, topics: Iterable[str], skip_unknown: bool = False) -> dict[str, dict[str, Any]]:
        """topic -> {name -> ConfigEntry}; with ``skip_unknown``, topics deleted meanwhile are left out.

        Each batch goes to the first broker of :meth:`_topic_config_readers` and is waited for
        :data:`CONTROLLER_ANSWER_S` at most (a healthy broker answers in milliseconds; that one may have crashed a
        moment ago and still be in the Metadata), then asked once of the next broker, which gets the full request
        timeout (it may be slow rather than down).

        :raises KafkaException: no answer from either (transient), or an error the cluster answered.
        """
        names = list(topics)
        out: dict[str, dict[str, Any]] = {}
        if not names:
            return out
        readers = self._topic_config_readers()
        for i in range(0, len(names), _TOPIC_CONFIG_BATCH):
            resources = [ConfigResource(ResourceType.TOPIC, t) for t in names[i : i + _TOPIC_CONFIG_BATCH]]
            first_wait_s = min(self.request_timeout_s, CONTROLLER_ANSWER_S)
            try:
                out.update(self._topic_configs_of(resources, skip_unknown, first_wait_s, readers[0]))
            except KafkaException as exc:
                if not _timed_out(exc) or len(readers) < 2:
                    raise
                self.log.info("broker %s did not describe topic configs within %.0f s (%s); asking broker %s",
                              readers[0], first_wait_s, exc, readers[1])
                readers = readers[1:] + readers[:1]  # the silent one last, for the next batches too
                out.update(self._topic_configs_of(resources, skip_unknown, self.request_timeout_s, readers[0]))
        return out

    def _topic_config_readers(self) -> list[int]:
        """The brokers topic DescribeConfigs go to, in order: the one whose DescribeConfigs answered last, the
        other brokers of the last Metadata (read now when this hook has read none; a Metadata answer lists at least
        the broker that sent it), the one that left the last DescribeCluster unanswered last.

        Any broker answers topic DescribeConfigs (Kafka's Java AdminClient sends them to its least loaded node).
        librdkafka sends them to the broker its last Metadata named the controller, and waits for it: a KRaft
        broker names a random broker it believes alive (KIP-590), one that crashed a moment ago included until the
        active controller fences it (``broker.session.timeout.ms``), and librdkafka's own Metadata refreshes may
        name it again right after a read that named another: on the sandbox a look waited 5 s, then the 15 s
        request timeout, then failed. A request that holds one BROKER resource goes to that broker instead, topic
        resources included (librdkafka's DescribeConfigs): :meth:`_topic_configs_of` adds it.
        """
        if not self._listed:
            with self._client() as admin:
                self.requests["Metadata"] += 1
                self._listed = tuple(admin.list_topics(timeout=self.request_timeout_s).brokers)
        via, silent = self._config_via, self._unanswered
        first = [via] if via in self._listed and via != silent else []
        rest = sorted(b for b in self._listed if b not in (via, silent))
        return first + rest + ([silent] if silent in self._listed else [])

    def _metadata_naming_another(self, admin: AdminClient, silent: int) -> tuple[Any, bool]:
        """Read the Metadata until it names a controller other than ``silent`` (a broker that just left a request
        librdkafka sent to "the controller" unanswered; a KRaft broker names a random broker it believes alive,
        KIP-590), :data:`METADATA_PICKS` reads at most: ``(the last Metadata read, it names another)``."""
        for _ in range(METADATA_PICKS):
            self.requests["Metadata"] += 1
            md = admin.list_topics(timeout=self.request_timeout_s)
            self._listed = tuple(md.brokers)
            if md.controller_id is not None and md.controller_id != silent:
                return md, True
        return md, False

    def _topic_configs_of(self, resources: list[ConfigResource], skip_unknown: bool,
                          timeout_s: float, via: int) -> dict[str, dict[str, Any]]:
        """One DescribeConfigs of topic ``resources`` sent to broker ``via`` (with that broker's BROKER resource,
        whose answer is dropped: see :meth:`_topic_config_readers`), its answer waited for ``timeout_s`` seconds."""
        out: dict[str, dict[str, Any]] = {}
        with self._client() as admin:
            self.requests["DescribeConfigs"] += 1
            futures = admin.describe_configs(resources + [ConfigResource(ResourceType.BROKER, str(via))],
                                             request_timeout=timeout_s)
            for res in resources:
                try:
                    out[res.name] = futures[res].result(timeout=timeout_s + 5)
                except KafkaException as exc:
                    err = exc.args[0] if exc.args else None
                    if skip_unknown and isinstance(err, KafkaError) and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                        self.log.info("topic %s vanished while reading its configs; skipped", res.name)
                        continue
                    raise
        self._config_via = via
        return out

    def _topic_min_insync_overrides(self, topics: list[str], default: int) -> dict[str, int]:
        """Topics whose ``min.insync.replicas`` is a topic override or differs from ``default``."""
        return {t: v for t, v in self._topic_min_insync_read(topics, default).items() if v is not None}

    def _topic_min_insync_read(self, topics: list[str], default: int) -> dict[str, int | None]:
        """topic -> its ``min.insync.replicas`` when a topic override or different from ``default``,
        else None, for every topic of ``topics`` that still exists (DescribeConfigs)."""
        out: dict[str, int | None] = {}
        for topic, entries in self._topic_config_entries(topics, skip_unknown=True).items():
            out[topic] = None
            entry = entries.get(MIN_INSYNC)
            if entry is None or entry.value is None:
                continue
            value = _int_config(entry.value, default, f"{topic} {MIN_INSYNC}")
            dynamic = ConfigSource.DYNAMIC_TOPIC_CONFIG
            topic_override = entry.source in (dynamic, dynamic.value)
            if topic_override or value != default:
                out[topic] = value
        return out

    # -- leadership ----------------------------------------------------------------------------

    def elect_preferred_leaders(
        self, partitions: Iterable[tuple[str, int]] | None = None, timeout_s: float = ELECTION_ANSWER_S
    ) -> dict[str, str | None]:
        """Run a preferred leader election (ElectLeaders, KIP-460; what
        ``kafka-leader-election.sh --election-type PREFERRED`` does).

        :param partitions: (topic, partition) pairs; None = every partition in the cluster.
        :param timeout_s: how long to wait for the answer, seconds (:data:`ELECTION_ANSWER_S`): also the request's
            own timeout, on a client of its own (:meth:`_elector`); the election may still take effect after.
        :returns: ``"topic-partition"`` -> None when elected or already led by the preferred leader
            (ELECTION_NOT_NEEDED), else the error text (e.g. PREFERRED_LEADER_NOT_AVAILABLE while the
            preferred replica is not in the ISR yet: waiting may fix it).
        :raises confluent_kafka.KafkaException: the request as a whole failed.
        :raises TimeoutError: no answer within ``timeout_s`` (librdkafka's timeout or ours).
        """
        tps = None if partitions is None else [TopicPartition(t, p) for t, p in partitions]
        if tps == []:
            return {}
        # confluent-kafka 2.16.1's elect_leaders rejects request_timeout / operation_timeout
        # ("SystemError: more argument specifiers than keyword list entries"); the request then
        # uses socket.timeout.ms, so the elections have a client of their own with timeout_s as that
        with self._client(self._elector(timeout_s)) as admin:
            self.requests["ElectLeaders"] += 1
            try:
                result = admin.elect_leaders(ElectionType.PREFERRED, tps).result(timeout=timeout_s)
            except (TimeoutError, KafkaException) as exc:
                if isinstance(exc, KafkaException) and not _timed_out(exc):
                    raise
                which = "every partition" if tps is None else f"{len(tps)} partitions"
                raise TimeoutError(f"no ElectLeaders answer within {timeout_s:g} s for {which} (the election may "
                                   "still take effect)") from None
        out: dict[str, str | None] = {}
        for tp, err in result.items():
            name = f"{tp.topic}-{tp.partition}"
            if err is None:
                out[name] = None
                continue
            kerr = err.args[0] if isinstance(err, KafkaException) and err.args else err
            code = kerr.code() if isinstance(kerr, KafkaError) else None
            out[name] = None if code == KafkaError.ELECTION_NOT_NEEDED else str(kerr)
        return dict(sorted(out.items()))

    # -- kafka-python: what librdkafka lacks -----------------------------------------------------

    def _kafka_python_admin(self) -> Any:
        """A kafka-python ``KafkaAdminClient`` that neither bootstraps through nor sends to a hung broker.

        kafka-python bootstraps from one bootstrap server picked at random and gives that connection the whole
        bootstrap timeout; afterwards a request for "any node" goes to a random broker of the metadata. A hung broker
        (SIGSTOPped, a long GC pause: it accepts connections but answers nothing) therefore cost a call 30 s and
        "Unable to bootstrap" when picked for the bootstrap, and 10 s (the connection setup timeout) and
        RequestTimedOutError when picked for a request (kafka-python 3.0, shown on Kafka 3.6 with one of three
        brokers frozen). So: the bootstrap servers are asked at once which answers first (:meth:`first_answering`),
        the client bootstraps from that one alone, and a connection to it is opened before any request, so requests
        for any node go there (kafka-python prefers a connected node without requests in flight), and on a KRaft
        cluster those for the controller too (:meth:`_connect_first`). Requests for a given node (the ZooKeeper-mode
        controller, one broker's configs) still go to that node. When none answers within
        ``ANSWER_TIMEOUT_S`` (a slow cluster), the client bootstraps as kafka-python does from all of them.
        """
        from kafka.admin import KafkaAdminClient

        config = self.profile.kafka_python_config()
        servers = list(config["bootstrap_servers"])
        first = servers[0] if len(servers) == 1 else self.first_answering(servers)
        if first is not None:
            config["bootstrap_servers"] = [first]
        client = KafkaAdminClient(**config, request_timeout_ms=int(self.request_timeout_s * 1000))
        if first is not None:
            self._connect_first(client, first)
        return client

    def _connect_first(self, client: Any, address: str) -> None:
        """Open ``client``'s connection to the broker advertised at ``address`` (the bootstrap server that
        answered), so kafka-python sends requests for any node there. On a KRaft cluster (the broker offers
        DescribeQuorum, as only KRaft brokers do) requests for "the controller" go there too: a KRaft broker's
        Metadata names a random live broker as the controller, which may be the hung one, and every broker forwards
        such requests to the active controller (KIP-590). In ZooKeeper mode they still go to the controller named.
        Best effort: a bootstrap address that is not an advertised listener (an alias, a load balancer) matches no
        broker and nothing is opened."""
        from kafka.protocol.admin import DescribeQuorumRequest

        manager = client._manager
        node = next((b.node_id for b in manager.cluster.brokers()
                     if Broker(b.node_id, b.host, b.port).address.lower() == address.lower()), None)
        if node is None:
            self.log.debug("bootstrap server %s is no broker's advertised address: no connection opened first", address)
            return

        async def connect() -> None:
            await manager.get_connection(node)

        try:
            manager.run(connect)
        except Exception as exc:  # noqa: BLE001 - only a preference; the request picks a node itself
            self.log.debug("no connection to broker %s (%s) opened first: %s", node, address, exc)
            return
        offered = getattr(manager.broker_version_data, "api_versions", None) or {}
        if DescribeQuorumRequest.API_KEY in offered:
            client._controller_id = node

    def first_answering(self, addresses: Iterable[str], timeout_s: float = ANSWER_TIMEOUT_S) -> str | None:
        """The first of ``addresses`` (``host:port``) to answer an ApiVersions request (KIP-35) sent to each on a
        connection of its own, all at once; None when none answers within ``timeout_s`` seconds. A hung node
        costs nothing while another answers.

        :raises ValueError: ``timeout_s`` <= 0.
        """
        from concurrent.futures import FIRST_COMPLETED, wait

        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        addresses = list(addresses)
        pool, futures = self._ask_each(addresses, timeout_s)
        sent = dict(zip(futures, addresses, strict=True))
        try:
            pending, deadline = set(sent), time.monotonic() + timeout_s
            while pending and (left := deadline - time.monotonic()) > 0:
                done, pending = wait(pending, timeout=left, return_when=FIRST_COMPLETED)
                answered = [sent[f] for f in done if f.exception() is None]
                if answered:
                    return answered[0]
            return None
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def _ask_each(self, addresses: list[str], timeout_s: float) -> tuple[Any, list[Any]]:
        """Send ApiVersions (v0: every broker serves it) to each address on a connection of its own, in threads.
        Returns ``(pool, futures)``, a future per address in their order; the caller shuts the pool down without
        waiting for it (a hung node's thread ends with ``timeout_s``)."""
        from concurrent.futures import ThreadPoolExecutor

        from kafka.protocol.metadata import ApiVersionsRequest

        pool = ThreadPoolExecutor(max_workers=max(1, min(len(addresses), 16)), thread_name_prefix="node-answer")
        return pool, [pool.submit(self._ask_at, a, ApiVersionsRequest(min_version=0, max_version=0), timeout_s)
                      for a in addresses]

    def list_partition_reassignments(self) -> list[dict[str, Any]]:
        """Ongoing partition reassignments (ListPartitionReassignments, KIP-455; kafka-python).

        :returns: ``[{"topic", "partition", "replicas", "adding_replicas", "removing_replicas"}]``
            sorted by topic and partition; empty when none is in progress.
        """
        client = self._kafka_python_admin()
        try:
            raw = client.list_partition_reassignments()
        finally:
            client.close()
        out = []
        for tp, info in raw.items():
            out.append(
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "replicas": list(info.get("replicas", [])),
                    "adding_replicas": list(info.get("adding_replicas", [])),
                    "removing_replicas": list(info.get("removing_replicas", [])),
                }
            )
        return sorted(out, key=lambda d: (d["topic"], d["partition"]))

    def alter_partition_reassignments(self, partitions: Iterable[Mapping[str, Any]]) -> dict[str, str | None]:
        """Start (or cancel) reassignments (AlterPartitionReassignments, KIP-455; kafka-python).

        :param partitions: entries of Kafka's reassignment format ``{"topic", "partition",
            "replicas"}``; ``"replicas": None`` cancels that partition's pending reassignment.
        :returns: ``"topic-partition"`` -> None when accepted, else the error class name.
        """
        from kafka import TopicPartition as KpTopicPartition

        request = {
            KpTopicPartition(p["topic"], int(p["partition"])): (
                None if p.get("replicas") is None else [int(r) for r in p["replicas"]]
            )
            for p in partitions
        }
        if not request:
            return {}
        client = self._kafka_python_admin()
        try:
            raw = client.alter_partition_reassignments(request, timeout_ms=int(self.request_timeout_s * 1000))
        finally:
            client.close()
        out = {}
        for tp, err in raw.items():
            out[f"{tp.topic}-{tp.partition}"] = None if err is None else getattr(err, "__name__", str(err))
        return dict(sorted(out.items()))

    # -- KRaft: the metadata quorum and metadata.version (kafka-python) ---------------------------

    def describe_quorum(self) -> Quorum:
        """The ``__cluster_metadata`` quorum (DescribeQuorum, KIP-595; brokers forward it to the active
        controller): leader, epoch, voters with their log end offsets and caught-up times.

        :raises kafka.errors.KafkaError: e.g. UnsupportedVersionError on a ZooKeeper-mode cluster.
        """
        client = self._kafka_python_admin()
        try:
            return Quorum.from_describe(client.describe_metadata_quorum())
        finally:
            client.close()

    def _ask_at(self, address: str, request: Any, timeout_s: float | None = None, controller: bool = False) -> Any:
        """Send ``request`` (a kafka-python request object) to the node at ``address`` (``host:port``) itself and
        return the response. For a KRaft controller (its CONTROLLER listener): controllers serve no Metadata, so
        kafka-python's clients cannot bootstrap from them; the request goes over the connection to the bootstrap
        address itself (what Kafka's ``--bootstrap-controller`` tools do, KIP-919). For a broker: the answer is that
        broker's own, not whichever broker a client picks. With the profile's client security settings, or for a
        controller's CONTROLLER listener (``controller``) its ``controller_client`` ones when set.
        ``timeout_s``: this request's timeout (default the hook's ``request_timeout_s``).

        :raises kafka.errors.KafkaError: not reachable or no answer within the request timeout.
        """
        from kafka.net.compat import KafkaNetClient

        timeout_ms = int((timeout_s or self.request_timeout_s) * 1000)
        # a node that accepts the connection but never answers (hung) holds it until the setup timeout (kafka-python:
        # 10 s): no longer than the request may take
        config = {**self.profile.kafka_python_config(controller=controller), "bootstrap_servers": address,
                  "request_timeout_ms": timeout_ms, "socket_connection_setup_timeout_ms": min(timeout_ms, 10_000)}
        with asking_one_node():
            client = KafkaNetClient(**config)
            manager = client._manager
            node = manager.cluster.bootstrap_brokers()[0]

            async def ask() -> Any:
                return await manager.get_connection(node.node_id).send_request(request)

            try:
                return client._net.run(ask)
            finally:
                manager.close()
                client._net.close() if hasattr(client._net, "close") else None

    def controller_named_by(self, address: str) -> int:
        """The controller id that the broker at ``address`` (``host:port``) names in its own Metadata answer (v1+),
        ``-1`` when it names none. In ZooKeeper mode that is the controller whose UpdateMetadata the broker last
        applied: the one its controlled shutdown (``controlled.shutdown.enable``) asks. After ``/controller`` moved,
        a broker that still names the old one would send its ControlledShutdown there, and after
        ``controlled.shutdown.max.retries`` failures it stops uncleanly (Kafka's ``KafkaServer.controlledShutdown``).

        :raises kafka.errors.KafkaError: not reachable or no answer within the request timeout.
        """
        from kafka.protocol.metadata import MetadataRequest

        response = self._ask_at(address, MetadataRequest(topics=[], allow_auto_topic_creation=False))
        controller = getattr(response, "controller_id", None)
        return -1 if controller is None else int(controller)

    def controller_api_versions(self, address: str) -> dict[str, Any]:
        """A KRaft controller's ApiVersions (v3+, sent to ``address``): ``{"zk_migration_ready": bool (KIP-866:
        true while its ``zookeeper.metadata.migration.enable`` is on and it can migrate), "metadata_version":
        finalized level or None}``.

        :raises kafka.errors.KafkaError: not reachable, or an error code in the answer.
        """
        from kafka.errors import for_code
        from kafka.protocol.metadata import ApiVersionsRequest

        response = self._ask_at(address, ApiVersionsRequest(client_software_name="kafka-ops",
                                                            client_software_version="1", min_version=3),
                                controller=True)
        error = for_code(response.error_code)
        if error.errno != 0:
            raise error(f"ApiVersions of controller {address} failed")
        finalized = next((f.max_version_level for f in response.finalized_features or []
                          if f.name == METADATA_VERSION), None)
        return {"zk_migration_ready": bool(getattr(response, "zk_migration_ready", False)),
                "metadata_version": None if finalized is None else int(finalized)}

    def controller_quorum(self, addresses: Iterable[str]) -> Quorum:
        """DescribeQuorum sent to the KRaft controllers at ``addresses`` (``host:port``; KIP-919: controllers answer
        it, but only the quorum leader: the others say NOT_LEADER_OR_FOLLOWER), for a cluster whose brokers cannot
        forward it yet (ZooKeeper-mode brokers during the migration). Asks each until the leader answers.

        :raises kafka.errors.KafkaError: no controller answered as the leader (the last error).
        """
        from kafka.errors import KafkaError, for_code
        from kafka.protocol.admin import DescribeQuorumRequest

        topic = DescribeQuorumRequest.TopicData
        last: Exception = KafkaError("no controller address given")
        for address in addresses:
            try:
                response = self._ask_at(address, DescribeQuorumRequest(topics=[
                    topic(topic_name="__cluster_metadata", partitions=[topic.PartitionData(partition_index=0)])]),
                    controller=True)
            except KafkaError as exc:
                last = exc
                continue
            answer = response.to_dict()
            codes = [response.error_code] + [p.get("error_code", 0) for t in answer.get("topics") or []
                                             for p in t.get("partitions") or []]
            error = next((for_code(c) for c in codes if c), None)
            if error is None:
                return Quorum.from_describe(answer)
            last = error(f"DescribeQuorum of controller {address}")
        raise last

    def is_kraft(self) -> bool:
        """True when the cluster answers DescribeQuorum (a KRaft cluster), False when its brokers do not offer
        it (ZooKeeper mode). Other errors are raised."""
        return self.quorum_if_kraft() is not None

    def cluster_id(self) -> str:
        """The cluster's id as the brokers report it (Metadata v2+, KIP-78): what ``kafka-storage format
        --cluster-id`` writes into a KRaft node's ``meta.properties``, and what a broker checks its log dirs against
        at start.

        :raises confluent_kafka.KafkaException: no broker answered. :raises ValueError: the brokers report none.
        """
        with self._client() as admin:
            md = admin.list_topics(timeout=self.request_timeout_s)
        if not md.cluster_id:
            raise ValueError("the brokers report no cluster id (Metadata v2+, Kafka 0.10.1+)")
        return str(md.cluster_id)

    def quorum_if_kraft(self) -> Quorum | None:
        """The metadata quorum (:meth:`describe_quorum`) of a KRaft cluster, None when the brokers do not offer
        DescribeQuorum (ZooKeeper mode). Other errors are raised."""
        from kafka.errors import IncompatibleBrokerVersion, UnsupportedVersionError

        try:
            return self.describe_quorum()
        except (UnsupportedVersionError, IncompatibleBrokerVersion):
            return None

    def _send_to_any(self, request: Any) -> Any:
        """Send ``request`` (a kafka-python request object) to any broker through a short-lived client of
        :meth:`_kafka_python_admin` (a broker that answers); returns the response (its error code unchecked).

        :raises kafka.errors.KafkaError: no broker answers, or none offers the request's version.
        """
        client = self._kafka_python_admin()
        manager = client._manager

        async def ask() -> Any:
            return await manager.send(request)

        try:
            return manager.run(ask)
        finally:
            client.close()

    def broker_registrations(self) -> list[Registration] | None:
        """Every broker the KRaft cluster has registered, fenced ones too, by id (DescribeCluster v2
        ``IncludeFencedBrokers``, KIP-1073, Kafka 4.0+; answered by one broker from its copy of the metadata, which
        may trail the active controller by a moment). A fenced broker is down (stopped, crashed) or not caught up;
        Metadata and DescribeCluster v0-1 leave it out, yet the active controller still counts its registration:
        a feature upgrade (``metadata.version``) is refused while a registered broker's binaries do not support
        the level (Kafka's ``FeatureControlManager`` checks every registration), and new replicas may be placed on
        it (``StripedReplicaPlacer`` uses a rack's fenced brokers once its unfenced ones are taken).

        :returns: the registrations sorted by id; None when the brokers do not offer DescribeCluster v2 (Kafka
            before 4.0, or ZooKeeper mode), where fenced registrations cannot be listed.
        :raises kafka.errors.KafkaError: no broker answers, or the answer is an error.
        """
        from kafka.errors import IncompatibleBrokerVersion, UnsupportedVersionError, for_code
        from kafka.protocol.admin import DescribeClusterRequest

        try:
            response = self._send_to_any(DescribeClusterRequest(
                include_cluster_authorized_operations=False, include_fenced_brokers=True, endpoint_type=1,
                min_version=2))
        except (IncompatibleBrokerVersion, UnsupportedVersionError):
            return None
        error = for_code(response.error_code)
        if error.errno:
            raise error(f"DescribeCluster failed: {response.error_message}")
        return sorted((Registration(Broker(int(b.broker_id), b.host, int(b.port), b.rack or None), bool(b.is_fenced))
                       for b in response.brokers), key=lambda r: r.broker.id)

    def unregister_broker(self, broker_id: int) -> bool:
        """Remove broker ``broker_id``'s registration from a KRaft cluster (UnregisterBroker, KIP-631; what
        ``kafka-cluster.sh unregister --id N`` sends; brokers forward it to the active controller). Send it only
        for a broker that is stopped and holds no replica: the controller does not check (a running broker loses
        its registration and its place in every ISR). A broker started again registers anew.

        :returns: True when the registration was removed, False when the id had none (``BROKER_ID_NOT_REGISTERED``:
            unregistered before, or never a member).
        :raises kafka.errors.KafkaError: any other error (``ClusterAuthorizationFailedError`` without ALTER on
            the cluster; ``UnsupportedVersionError`` / ``IncompatibleBrokerVersion`` on a ZooKeeper-mode cluster).
        """
        from kafka.errors import BrokerIdNotRegisteredError, for_code

        from hooks.kafka_messages import UnregisterBrokerRequest

        response = self._send_to_any(UnregisterBrokerRequest(broker_id=int(broker_id)))
        error = for_code(response.error_code)
        if error is BrokerIdNotRegisteredError:
            return False
        if error.errno:
            raise error(f"UnregisterBroker {broker_id} failed: {response.error_message or error.description}")
        return True

    def metadata_version(self) -> tuple[int | None, int]:
        """``(finalized metadata.version level or None, the highest level the answering node supports)``
        (ApiVersions v3+ FinalizedFeatures / SupportedFeatures, KIP-584)."""
        client = self._kafka_python_admin()
        try:
            features = client.describe_features(send_request_to_controller=False)
        finally:
            client.close()
        mv = features.get(METADATA_VERSION, {})
        finalized = mv.get("finalized")
        supported = mv.get("supported") or (0, 0)
        return (int(finalized[1]) if finalized else None), int(supported[1])

    def update_features(self, levels: Mapping[str, int], *, validate_only: bool = False) -> str:
        """Finalize features at the given levels in one UpdateFeatures request (KIP-584, routed to the active
        controller, which applies all of them or none: ``FeatureControlManager`` checks each, its dependencies
        against the others of the request, then writes them atomically): ``{"metadata.version": 27,
        "eligible.leader.replicas.version": 1}``. Upgrades only (UPGRADE); ``validate_only`` (v1+) asks the
        controller to judge the request without applying it.

        :returns: ``"OK"`` or the controller's error text, ``"feature: error"`` joined by ``"; "`` (e.g. a level
            above what a node supports: Kafka's ``InvalidUpdateVersion ... Broker 0 only supports versions 7-25``),
            also when the answer comes as a top-level error (UpdateFeatures v2+, which kafka-python raises).
        """
        from kafka.errors import KafkaError as KafkaPythonError

        client = self._kafka_python_admin()
        try:
            result = client.update_features({f: ("UPGRADE", int(lv)) for f, lv in levels.items()},
                                            validate_only=validate_only, timeout_ms=int(self.request_timeout_s * 1000))
        except KafkaPythonError as exc:
            if getattr(exc, "retriable", False):
                raise
            return f"{type(exc).__name__}: {exc}"
        finally:
            client.close()
        errors = [f"{f}: {answer}" for f, answer in sorted(result.items()) if str(answer) != "OK"]
        return "; ".join(errors) or "OK"

    def broker_features(self, broker_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
        """``metadata.version`` and the other features as each broker itself reports them: broker id ->
        ``{"finalized": level or None, "supported": (min, max) or None, "release": "3.6" or None, "features":
        {feature: finalized level}, "feature_support": {feature: (min, max)}}`` (ApiVersions v3+ FinalizedFeatures /
        SupportedFeatures, KIP-584; ``release``: the Kafka major.minor its API ranges match, kafka-python's
        ``infer_broker_version_from_api_versions``, since Kafka's protocol does not name its release; ApiVersions v3
        is Kafka 2.4+, ZooKeeper mode too),
        asked of every broker: each answers from its own binaries and its own copy of the metadata log).

        kafka-python's ``describe_features`` asks whichever broker its connection manager picks, so this sends
        the same ApiVersions request to each node id through the client's connection manager (kafka-python
        3.0's ``_manager.send(request, node_id=...)``, the call ``describe_features`` itself makes).

        :raises kafka.errors.KafkaError: a broker not in the metadata (``UnknownBrokerIdError``) or not
            answering.
        """
        from kafka.errors import for_code
        from kafka.protocol.broker_version_data import infer_broker_version_from_api_versions
        from kafka.protocol.metadata import ApiVersionsRequest

        client = self._kafka_python_admin()
        manager = client._manager

        async def ask(node_id: int) -> dict[str, Any]:
            request = ApiVersionsRequest(client_software_name=manager.config["client_software_name"],
                                         client_software_version=manager.config["client_software_version"],
                                         min_version=3)
            response = await manager.send(request, node_id=node_id)
            error = for_code(response.error_code)
            if error.errno != 0:
                raise error(f"ApiVersions of broker {node_id} failed")
            support = {f.name: (int(f.min_version), int(f.max_version)) for f in response.supported_features or []}
            levels = {f.name: int(f.max_version_level) for f in response.finalized_features or []}
            supported = support.get(METADATA_VERSION)
            finalized = levels.get(METADATA_VERSION)
            keys = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys or []}
            release = infer_broker_version_from_api_versions(keys)
            return {"finalized": finalized, "supported": supported,
                    "release": None if release is None else ".".join(map(str, release)),
                    "features": levels, "feature_support": support}

        try:
            return {int(b): manager.run(ask, int(b)) for b in broker_ids}
        finally:
            client.close()

    def unanswered_brokers(self, brokers: Mapping[int, str], timeout_s: float = ANSWER_TIMEOUT_S) -> dict[int, str]:
        """The brokers that do not answer: ``brokers`` maps broker id -> its advertised ``host:port`` (as Metadata
        lists it); each is sent an ApiVersions request on a connection of its own (no bootstrap through other
        brokers, which could be the hung one), all at once, and must answer within ``timeout_s`` seconds. Returns
        broker id -> why (``"no answer within 5.0 s"``, or the connection's error); ``{}`` = every one answered.

        Why ask: a hung broker (a long GC pause, a stalled disk, a frozen VM) stays registered and in every ISR until
        its session expires (``zookeeper.session.timeout.ms``, 18 s by default; KRaft ``broker.session.timeout.ms``,
        9 s) or its partitions' leaders drop it from the ISR (``replica.lag.time.max.ms``, 30 s): for that long the
        metadata calls the cluster healthy, yet the leaders a stop moves may land on it. ApiVersions is the cheapest
        request every broker serves (KIP-35). With the profile's client security settings.

        :raises ValueError: ``timeout_s`` <= 0.
        """
        from concurrent.futures import wait

        from kafka.errors import KafkaTimeoutError, RequestTimedOutError

        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        if not brokers:
            return {}
        pool, futures = self._ask_each(list(brokers.values()), timeout_s)
        try:
            sent = {future: int(b) for future, b in zip(futures, brokers, strict=True)}
            done, _ = wait(sent, timeout=timeout_s)
            missing: dict[int, str] = {}
            for future, b in sent.items():
                # the request's own timeout is the same as the wait's: whichever ends first, the broker did not answer
                if future not in done or isinstance(future.exception(), (RequestTimedOutError, KafkaTimeoutError)):
                    missing[b] = f"no answer within {timeout_s:.1f} s"
                elif (exc := future.exception()) is not None:
                    text = str(exc)  # kafka-python's errors name their class already
                    missing[b] = text if text.startswith(type(exc).__name__) else f"{type(exc).__name__}: {text}"
            return dict(sorted(missing.items()))
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def describe_log_dirs(self, brokers: Iterable[int] | None = None) -> list[dict[str, Any]]:
        """Replica sizes per broker and log dir (DescribeLogDirs, KIP-113; kafka-python).

        :param brokers: broker ids to ask; None = all brokers.
        :returns: one row per replica: ``{"broker", "log_dir", "topic", "partition", "size_bytes",
            "offset_lag", "is_future"}`` (size in bytes, lag in offsets), sorted; log dirs
            reporting an error give one row ``{"broker", "log_dir", "error_code"}`` instead.
        """
        return normalize_log_dirs(self._describe_log_dirs(brokers))

    def log_dir_space(self, brokers: Iterable[int] | None = None) -> dict[int, dict[str, int]]:
        """Usable bytes of each broker's log dirs (DescribeLogDirs v4+, KIP-827, Kafka 3.3+; kafka-python).

        :param brokers: broker ids to ask; None = all brokers.
        :returns: ``{broker: {log_dir: usable_bytes}}``; ``-1`` where the broker does not report it (an older Kafka);
            a log dir reporting an error is left out.
        """
        return log_dir_usable_bytes(self._describe_log_dirs(brokers))

    def _describe_log_dirs(self, brokers: Iterable[int] | None) -> list[dict[str, Any]]:
        """kafka-python's raw DescribeLogDirs answer (``[{"broker", "log_dirs": [...]}]``) for ``brokers``."""
        client = self._kafka_python_admin()
        try:
            return client.describe_log_dirs(brokers=None if brokers is None else list(brokers))
        finally:
            client.close()

    # -- throttles (dynamic configs) ---------------------------------------------------------------

    def alter_throttle_configs(
        self, broker_configs: Mapping[int, Mapping[str, str]], topic_configs: Mapping[str, Mapping[str, str]]
    ) -> list[str]:
        """Set dynamic broker and topic configs with IncrementalAlterConfigs (KIP-339: only these keys
        change, every other dynamic config stays), e.g. the replication throttles of a wave (KIP-73).

        :param broker_configs: broker id -> {name: value}. :param topic_configs: topic -> {name: value}.
        :returns: the topics of ``topic_configs`` that no longer exist (deleted since they were read: Kafka answers
            UNKNOWN_TOPIC_OR_PARTITION; nothing of theirs to throttle), sorted; the rest were set.
        :raises RuntimeError: naming every resource the cluster refused.
        :raises KafkaException: (transient) only unanswered requests, e.g. a broker down (see ``_alter_incremental``).
        """
        resources = [
            _incremental(ResourceType.BROKER, str(b), cfg, AlterConfigOpType.SET)
            for b, cfg in broker_configs.items()
            if cfg
        ]
        resources += [
            _incremental(ResourceType.TOPIC, t, cfg, AlterConfigOpType.SET) for t, cfg in topic_configs.items() if cfg
        ]
        return self._alter_incremental(resources, gone_ok=True)

    def delete_throttle_configs(self, brokers: Iterable[int], topics: Iterable[str]) -> list[str]:
        """Delete the replication throttle configs (``leader/follower.replication.throttled.rate`` on the
        brokers, ``leader/follower.replication.throttled.replicas`` on the topics): they fall back to their
        defaults (no throttle). Deleting a config that is not set is not an error, nor is a topic that no longer
        exists (Kafka deletes a topic's configs with it).

        :returns: the topics that no longer exist, sorted.
        :raises RuntimeError: naming every resource the cluster refused.
        :raises KafkaException: (transient) only unanswered requests, e.g. a broker down (see ``_alter_incremental``).
        """
        from kafka_ops.reassignment import THROTTLE_BROKER_KEYS, THROTTLE_TOPIC_KEYS

        resources = [
            _incremental(ResourceType.BROKER, str(b), dict.fromkeys(THROTTLE_BROKER_KEYS, ""), AlterConfigOpType.DELETE)
            for b in brokers
        ]
        resources += [
            _incremental(ResourceType.TOPIC, t, dict.fromkeys(THROTTLE_TOPIC_KEYS, ""), AlterConfigOpType.DELETE)
            for t in topics
        ]
        return self._alter_incremental(resources, gone_ok=True)

    def _alter_incremental(self, resources: list[ConfigResource], gone_ok: bool = False) -> list[str]:
        """IncrementalAlterConfigs: one call per broker resource (librdkafka sends BROKER resources to that
        broker, one per request), topic resources together in batches.

        :param gone_ok: a topic resource Kafka answers UNKNOWN_TOPIC_OR_PARTITION for (deleted) is not an error:
            returned instead, sorted (otherwise always ``[]``).

        :raises KafkaException: (``_TIMED_OUT``, transient) every refused resource was refused for want of an answer
            (its broker down or restarting, a request timeout): the same call may succeed later.
        :raises RuntimeError: Kafka refused a resource (an invalid config, no authorization), naming every one.
        """
        brokers = [r for r in resources if r.restype == ResourceType.BROKER]
        topics = [r for r in resources if r.restype != ResourceType.BROKER]
        calls = [[r] for r in brokers] + [
            topics[i : i + _TOPIC_CONFIG_BATCH] for i in range(0, len(topics), _TOPIC_CONFIG_BATCH)
        ]
        errors: dict[str, KafkaException] = {}
        gone: list[str] = []
        with self._client() as admin:
            for call in calls:
                self.requests["IncrementalAlterConfigs"] += 1
                futures = admin.incremental_alter_configs(call, request_timeout=self.request_timeout_s)
                for res, fut in futures.items():
                    try:
                        fut.result(timeout=self.request_timeout_s + 5)
                    except KafkaException as exc:
                        if gone_ok and res.restype == ResourceType.TOPIC and _unknown_topic(exc):
                            gone.append(res.name)
                            continue
                        errors[f"{res.restype.name.lower()} {res.name}"] = exc
        if errors:
            text = (f"IncrementalAlterConfigs refused for {len(errors)} resources: "
                    + "; ".join(f"{k}: {v}" for k, v in sorted(errors.items())[:20]))
            if all(_unanswered(exc) for exc in errors.values()):  # a broker down or restarting: waiting may fix it
                raise KafkaException(KafkaError(KafkaError._TIMED_OUT, text))
            raise RuntimeError(text)
        return sorted(gone)


def _unknown_topic(exc: KafkaException) -> bool:
    """Kafka answered UNKNOWN_TOPIC_OR_PARTITION: the topic does not exist (deleted)."""
    error = exc.args[0] if exc.args else None
    return isinstance(error, KafkaError) and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def _layers(entry: Mapping[str, Any]) -> dict[str, str | None]:
    """``{"value": effective, "<source>": value, ...}`` from one DescribeConfigs entry with synonyms (kafka-python's
    shape: ``{"value", "synonyms": [{"value", "source": "STATIC_BROKER_CONFIG"}, ...]}``); the first synonym of a
    source wins (Kafka lists them highest precedence first)."""
    out: dict[str, str | None] = {"value": entry.get("value")}
    for synonym in entry.get("synonyms") or []:
        out.setdefault(str(synonym["source"]), synonym.get("value"))
    return out


def _incremental(kind: ResourceType, name: str, configs: Mapping[str, str], op: AlterConfigOpType) -> ConfigResource:
    """A ConfigResource carrying one incremental operation per config."""
    return ConfigResource(
        kind, name, incremental_configs=[ConfigEntry(k, v, incremental_operation=op) for k, v in configs.items()]
    )


def normalize_log_dirs(raw: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Flatten kafka-python's ``describe_log_dirs`` result (see KafkaAdminHook.describe_log_dirs).

    kafka-python 3.x returns ``[{"broker": id, "log_dirs": [result.to_dict(), ...]}]`` with
    schema field names (``log_dir``, ``topics[].name``, ``partitions[].partition_index``,
    ``partition_size``, ``offset_lag``, ``is_future_key``, ``error_code``).
    """
    rows: list[dict[str, Any]] = []
    for entry in raw:
        broker = entry["broker"]
        for result in entry.get("log_dirs", []):
            log_dir = result.get("log_dir")
            error_code = result.get("error_code", 0)
            if error_code:
                rows.append({"broker": broker, "log_dir": log_dir, "error_code": error_code})
                continue
            for topic in result.get("topics", []):
                for p in topic.get("partitions", []):
                    rows.append(
                        {
                            "broker": broker,
                            "log_dir": log_dir,
                            "topic": topic.get("name"),
                            "partition": p.get("partition_index"),
                            "size_bytes": p.get("partition_size", 0),
                            "offset_lag": p.get("offset_lag", 0),
                            "is_future": bool(p.get("is_future_key", False)),
                        }
                    )

    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        return (r["broker"], r.get("log_dir") or "", r.get("topic") or "", r.get("partition") or 0)

    return sorted(rows, key=key)


def log_dir_usable_bytes(raw: Iterable[Mapping[str, Any]]) -> dict[int, dict[str, int]]:
    """``{broker: {log_dir: usable_bytes}}`` from kafka-python's ``describe_log_dirs`` result (schema field
    ``usable_bytes``, -1 when the response version has none); log dirs with an error left out."""
    out: dict[int, dict[str, int]] = {}
    for entry in raw:
        dirs = out.setdefault(int(entry["broker"]), {})
        for result in entry.get("log_dirs", []):
            if not result.get("error_code", 0):
                dirs[str(result.get("log_dir"))] = int(result.get("usable_bytes", -1))
    return out
