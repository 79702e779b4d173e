"""Real traffic through the sandbox: an idempotent ``acks=all`` producer and a consumer that checks it.

:class:`Traffic` runs, in two threads, a confluent-kafka producer (``enable.idempotence=true``,
``acks=all``) writing numbered messages (key and value carry the sequence number) to a topic with
real records, and a confluent-kafka consumer reading every partition of it from the beginning: with
``assign()`` by default, or as a member of consumer group ``group`` (``subscribe()``, offsets
auto-committed every ``GROUP_COMMIT_INTERVAL_MS`` to the group coordinator, so Burrow's ``kafka``
module rates the group). :meth:`Traffic.stop_reading` makes that member stop reading while it keeps
committing the offsets it reached (a stuck consumer: Burrow sees its lag grow), :meth:`Traffic.resume_reading`
ends that. :meth:`Traffic.stop` stops the
producer, waits for its outstanding delivery reports, lets the consumer catch up with every
acknowledged offset, and returns a :class:`TrafficResult`: acknowledged and read counts, the
acknowledged messages never read (lost), messages read twice at different offsets (duplicates),
per-partition order violations, and delivery errors by Kafka error name.

``python -m sandbox traffic --workdir DIR --seconds N [--group G]`` runs it against a running sandbox
(creating the topic with RF 3 and ``min.insync.replicas=2`` first when it is missing) and prints the figures.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from sandbox import controller_request, procs

log = logging.getLogger(__name__)

DEFAULT_TOPIC = "traffic"
GROUP_COMMIT_INTERVAL_MS = 1000  # auto.commit.interval.ms of a group member (librdkafka: 5000)
KEY_WIDTH = 12  # keys are the sequence number, zero-padded


#: Seconds ``Traffic.stop`` waits for its consumer to close (leave the group): librdkafka's ``Consumer.close`` has no
#: timeout and once held a test's stop 16 minutes after a reassignment with a broker killed (the session's hang
#: guard ended it); the reads are counted already, so a close that hangs is left to a daemon thread.
CLOSE_TIMEOUT_S = 30.0


@dataclass
class TrafficResult:
    """What a traffic run saw. Counts are messages; ``seconds`` is the producing time.

    - ``acknowledged``: messages whose delivery report had no error (offsets known).
    - ``read``: distinct (partition, offset) pairs the consumer read.
    - ``lost``: sequence numbers acknowledged but never read (must be empty).
    - ``duplicates``: sequence numbers read at more than one offset (idempotence must prevent them).
    - ``misplaced``: sequence numbers read at another partition/offset than acknowledged.
    - ``out_of_order``: ``[partition, offset, seq, previous seq]`` where a partition's sequence numbers
      went down (the producer writes them increasing; Kafka keeps per-partition order). Only each message's
      first copy counts: a duplicate's later copy is reported in ``duplicates``.
    - ``errors``: failed delivery reports, and produce calls the client refused before queueing, by Kafka
      error name (e.g. ``NOT_ENOUGH_REPLICAS``, ``_UNKNOWN_TOPIC``).
    - ``unresolved``: messages without any delivery report when the run ended.
    """

    acknowledged: int = 0
    read: int = 0
    lost: list[int] = field(default_factory=list)
    duplicates: list[int] = field(default_factory=list)
    misplaced: list[int] = field(default_factory=list)
    out_of_order: list[list[int]] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    unresolved: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """Nothing acknowledged was lost, duplicated, misplaced or reordered."""
        return not (self.lost or self.duplicates or self.misplaced or self.out_of_order)

    @property
    def throughput(self) -> float:
        """Acknowledged messages per second of producing."""
        return self.acknowledged / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict:
        """JSON-ready figures (lists cut to their first 20 entries, with their full counts)."""
        data = asdict(self)
        for name in ("lost", "duplicates", "misplaced", "out_of_order"):
            data[f"{name}_count"] = len(data[name])
            data[name] = data[name][:20]
        data["ok"] = self.ok
        data["throughput_msgs_per_s"] = round(self.throughput, 1)
        data["seconds"] = round(self.seconds, 2)
        return data


def ensure_topic(bootstrap_servers: str, topic: str, partitions: int = 3, replication_factor: int = 3,
                 min_insync_replicas: int = 2, timeout_s: float = 30.0) -> bool:
    """Create ``topic`` (CreateTopics) unless it exists; returns True when it did not exist. Each try is waited for
    ``controller_request.ATTEMPT_S`` at most and tried again on a transient error until ``timeout_s``.

    Raises:
        KafkaException: the creation failed for another reason than TOPIC_ALREADY_EXISTS, or a transient error
            lasted until ``timeout_s``.
    """
    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "log_level": 0})
    if topic in admin.list_topics(timeout=timeout_s).topics:
        return False
    new = NewTopic(topic, partitions, replication_factor, config={"min.insync.replicas": str(min_insync_replicas)})

    def attempt(seconds: float) -> None:
        controller_request.settle(admin.create_topics([new], operation_timeout=seconds, request_timeout=seconds)
                                  .values(), ignore={"TOPIC_ALREADY_EXISTS"})

    controller_request.until_done(attempt, admin, timeout_s, f"creating {topic}")
    return True


class Traffic:
    """Producer and consumer threads on ``topic`` (which must exist and hold real records).

    ``rate_per_s`` caps the produce rate (messages/s; None: as fast as librdkafka accepts them);
    ``group`` makes the consumer a member of that consumer group (``subscribe()`` and auto-commit)
    instead of assigning itself every partition; ``producer_config`` / ``consumer_config`` add or
    override librdkafka settings. Use :meth:`start`, then :meth:`stop` (or as a context manager,
    whose exit stops it).
    """

    def __init__(self, bootstrap_servers: str, topic: str = DEFAULT_TOPIC, *, rate_per_s: float | None = 2000.0,
                 group: str | None = None, producer_config: dict | None = None,
                 consumer_config: dict | None = None) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.rate_per_s = rate_per_s
        self.group = group
        group_config = {
            "group.id": group,
            "enable.auto.commit": True,
            "auto.commit.interval.ms": GROUP_COMMIT_INTERVAL_MS,
            "auto.offset.reset": "earliest",
        } if group else {
            "group.id": "sandbox-traffic",  # required by librdkafka; partitions are assigned, not joined
            "enable.auto.commit": False,
        }
        self.producer = Producer({
            "bootstrap.servers": bootstrap_servers,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 60000,
            "client.id": "sandbox-traffic-producer",
            **(producer_config or {}),
        })
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap_servers,
            **group_config,
            "enable.partition.eof": False,
            "client.id": "sandbox-traffic-consumer",
            **(consumer_config or {}),
        })
        self.lock = threading.Lock()
        self.sent = 0
        self.acked: dict[int, tuple[int, int]] = {}  # seq -> (partition, offset)
        self.errors: Counter[str] = Counter()
        self.reads: dict[tuple[int, int], int] = {}  # (partition, offset) -> seq
        self._producing = threading.Event()
        self._consuming = threading.Event()
        self._reading = threading.Event()
        self._reading.set()
        self._threads: list[threading.Thread] = []
        self._started_at = 0.0
        self._stopped_at = 0.0

    # --- producer -----------------------------------------------------------------------------
    def _on_delivery(self, err: KafkaError | None, msg) -> None:
        seq = int(msg.key())
        with self.lock:
            if err is not None:
                self.errors[err.name()] += 1
            else:
                self.acked[seq] = (msg.partition(), msg.offset())

    def _produce(self) -> None:
        seq = 0
        began = time.monotonic()
        while self._producing.is_set():
            if self.rate_per_s is not None:
                due = began + seq / self.rate_per_s
                wait = due - time.monotonic()
                if wait > 0:  # never a negative timeout: librdkafka would wait for the next event forever
                    self.producer.poll(min(wait, 0.05))
                    continue
            key = str(seq).zfill(KEY_WIDTH).encode()
            try:
                self.producer.produce(self.topic, key=key, value=json.dumps({"seq": seq}).encode(),
                                      on_delivery=self._on_delivery)
            except BufferError:
                self.producer.poll(0.05)
                continue
            except KafkaException as exc:
                # Refused before it was queued (e.g. _UNKNOWN_TOPIC while a just-restarted broker's metadata
                # lacks the topic): counted like a failed delivery, and the same seq is tried again.
                with self.lock:
                    self.errors[error_name(exc)] += 1
                self.producer.poll(0.05)
                continue
            seq += 1
            self.sent = seq
            self.producer.poll(0)

    # --- consumer -----------------------------------------------------------------------------
    def _consume(self) -> None:
        paused: list[TopicPartition] = []
        last_commit = 0.0
        while self._consuming.is_set():
            if not self._reading.is_set():
                # stuck: read nothing, keep committing the positions reached (auto-commit skips unchanged ones)
                if not paused:
                    paused = self.consumer.assignment()
                    self.consumer.pause(paused)
                self.consumer.poll(0.2)
                if self.group and time.monotonic() - last_commit >= GROUP_COMMIT_INTERVAL_MS / 1000:
                    last_commit = time.monotonic()
                    positions = [tp for tp in self.consumer.position(self.consumer.assignment()) if tp.offset >= 0]
                    if positions:
                        try:  # asynchronous: a synchronous commit could hang on a moving coordinator
                            self.consumer.commit(offsets=positions, asynchronous=True)
                        except KafkaException as exc:
                            log.info("consumer: commit failed: %s", exc)
                continue
            if paused:
                self.consumer.resume(paused)
                paused = []
            msg = self.consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                log.info("consumer: %s", msg.error())
                continue
            seq = json.loads(msg.value())["seq"]
            with self.lock:
                self.reads[(msg.partition(), msg.offset())] = seq

    # --- control --------------------------------------------------------------------------------
    def start(self, timeout_s: float = 30.0) -> Traffic:
        """Assign every partition of the topic to the consumer (from the beginning), or subscribe to the
        topic in ``group``, and start both threads.

        The consumer's own Metadata must list the topic first. Brokers learn a new topic from the controller
        one by one (UpdateMetadata; in a ZooKeeper-to-KRaft migration from the KRaft controller), so the broker
        this client asks may answer ``UNKNOWN_TOPIC_OR_PART`` or ``LEADER_NOT_AVAILABLE`` for a moment after
        another broker listed it: those are asked again every 0.2 s for up to ``timeout_s`` seconds.

        Raises:
            procs.Abort: the topic's metadata has another error (waiting cannot help).
            procs.Timeout: still one of those two after ``timeout_s``.
        """
        topic = self._topic_metadata(timeout_s)
        if self.group:
            self.consumer.subscribe([self.topic])
        else:
            self.consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in topic.partitions])
        self._producing.set()
        self._consuming.set()
        self._started_at = time.monotonic()
        self._threads = [threading.Thread(target=self._produce, name="traffic-producer", daemon=True),
                         threading.Thread(target=self._consume, name="traffic-consumer", daemon=True)]
        for thread in self._threads:
            thread.start()
        return self

    _PASSING_TOPIC_ERRORS = (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.LEADER_NOT_AVAILABLE)

    def _topic_metadata(self, timeout_s: float):
        """The topic's metadata from the consumer's client once it lists the topic (see :meth:`start`)."""
        def listed():
            topic = self.consumer.list_topics(self.topic, timeout=10).topics[self.topic]
            if topic.error is not None and topic.error.code() not in self._PASSING_TOPIC_ERRORS:
                raise procs.Abort(f"topic {self.topic}: {topic.error.str()}")
            return topic if topic.error is None else None

        return procs.wait_for(listed, timeout_s, f"topic {self.topic} in the consumer's metadata", poll_s=0.2)

    def stop_reading(self) -> None:
        """The consumer stops reading (its partitions paused) but stays in its group and, every
        ``GROUP_COMMIT_INTERVAL_MS``, commits the positions it reached: its lag grows at every commit."""
        self._reading.clear()

    def resume_reading(self) -> None:
        """Undo :meth:`stop_reading`."""
        self._reading.set()

    def counts(self) -> tuple[int, int, int]:
        """``(sent, acknowledged, read)`` so far."""
        with self.lock:
            return self.sent, len(self.acked), len(self.reads)

    def _caught_up(self) -> bool:
        with self.lock:
            ends: dict[int, int] = {}
            for partition, offset in self.acked.values():
                if offset is not None:  # see compare(): an acknowledgement may come without its offset
                    ends[partition] = max(ends.get(partition, -1), offset)
            read = {}
            for partition, offset in self.reads:
                read[partition] = max(read.get(partition, -1), offset)
        return all(read.get(p, -1) >= end for p, end in ends.items())

    def stop(self, drain_timeout_s: float = 60.0) -> TrafficResult:
        """Stop producing, wait (at most ``drain_timeout_s``) for outstanding delivery reports and for the
        consumer to read up to every acknowledged offset, close both clients, and compare."""
        self._producing.clear()
        self._threads[0].join()
        self._stopped_at = time.monotonic()
        self._reading.set()
        deadline = time.monotonic() + drain_timeout_s
        try:
            unresolved = self.producer.flush(max(deadline - time.monotonic(), 0.0))
            while not self._caught_up() and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:  # the reader never outlives the run, whatever happened
            self._consuming.clear()
            self._threads[1].join()
            closer = threading.Thread(target=self.consumer.close, name="traffic-consumer-close", daemon=True)
            closer.start()
            closer.join(CLOSE_TIMEOUT_S)
            if closer.is_alive():
                log.warning("the traffic's consumer did not close within %.0f s; left to close on its own",
                            CLOSE_TIMEOUT_S)
        return self._result(unresolved)

    def __enter__(self) -> Traffic:
        return self.start()

    def __exit__(self, *_exc) -> None:
        if self._producing.is_set():
            self.stop()

    def _result(self, unresolved: int) -> TrafficResult:
        with self.lock:
            acked = dict(self.acked)
            reads = dict(self.reads)
            errors = dict(self.errors)
        return compare(acked, reads, errors, unresolved, self._stopped_at - self._started_at)


def error_name(exc: KafkaException) -> str:
    """The Kafka error name a confluent-kafka exception carries (``_UNKNOWN_TOPIC``), else its text."""
    error = exc.args[0] if exc.args else None
    return error.name() if isinstance(error, KafkaError) else str(error)


def compare(acked: dict[int, tuple[int, int]], reads: dict[tuple[int, int], int], errors: dict[str, int],
            unresolved: int, seconds: float) -> TrafficResult:
    """What a producer had acknowledged (sequence number -> (partition, offset)) against what a reader read
    ((partition, offset) -> sequence number): the :class:`TrafficResult` (any client library's traffic).

    An acknowledgement's offset may be None: an idempotent producer whose retry of a batch the leader had
    already written (a broker restarted between write and answer) gets DUPLICATE_SEQUENCE_NUMBER, which
    librdkafka reports as delivered without an offset. Such a message must still be read (once), in its
    partition."""
    where: dict[int, list[tuple[int, int]]] = {}
    for (partition, offset), seq in reads.items():
        where.setdefault(seq, []).append((partition, offset))
    out_of_order = []
    last: dict[int, tuple[int, int]] = {}
    seen: set[int] = set()
    for (partition, offset), seq in sorted(reads.items()):
        if seq in seen:  # a second copy: a duplicate (below), not an order violation among the messages
            continue
        seen.add(seq)
        previous = last.get(partition)
        if previous is not None and seq <= previous[1]:
            out_of_order.append([partition, offset, seq, previous[1]])
        last[partition] = (offset, seq)
    return TrafficResult(
        acknowledged=len(acked),
        read=len(reads),
        lost=sorted(seq for seq in acked if seq not in where),
        duplicates=sorted(seq for seq, places in where.items() if len(places) > 1),
        misplaced=sorted(seq for seq, spot in acked.items() if seq in where and not _read_at(spot, where[seq])),
        out_of_order=out_of_order,
        errors=errors,
        unresolved=unresolved,
        seconds=seconds,
    )


def _read_at(spot: tuple[int, int | None], places: list[tuple[int, int]]) -> bool:
    """Whether an acknowledged ``(partition, offset)`` (offset None: unknown) is among the places it was read."""
    partition, offset = spot
    return any(p == partition and (offset is None or o == offset) for p, o in places)


def run(bootstrap_servers: str, seconds: float, topic: str = DEFAULT_TOPIC, *, partitions: int = 3,
        rate_per_s: float | None = 2000.0, group: str | None = None, progress=None) -> TrafficResult:
    """Create ``topic`` if needed, run :class:`Traffic` for ``seconds`` (its consumer in consumer group
    ``group`` when given) and return its result; ``progress(sent, acknowledged, read)`` is called every
    second when given."""
    ensure_topic(bootstrap_servers, topic, partitions=partitions)
    traffic = Traffic(bootstrap_servers, topic, rate_per_s=rate_per_s, group=group).start()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(min(1.0, max(deadline - time.monotonic(), 0.0)))
        if progress is not None:
            progress(*traffic.counts())
    return traffic.stop()
