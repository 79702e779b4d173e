"""One operation per cluster at a time, without ZooKeeper: a lock topic in the cluster itself.

For KRaft clusters (no ZooKeeper) and wherever the profile says ``"lock_store": "kafka"``. The atomic
step is Kafka's own: CreateTopics of ``kafka-ops.operation-lock`` succeeds for exactly one caller (the
controller refuses every later create with TOPIC_ALREADY_EXISTS until the topic is deleted). The winner
then writes its holder record (``{"holder", "since_ms", "operation"}``, JSON) as the topic's first record
with an idempotent ``acks=all`` producer; anyone reads the holder from that first record. Releasing deletes
the topic and waits until the deletion is complete (ZooKeeper-mode Kafka deletes asynchronously and refuses to
create a topic "marked for deletion" meanwhile). The topic keeps its record for as long as the
lock is held (``retention.ms=-1``) and has RF min(3, brokers), ``min.insync.replicas`` = RF - 1, its replicas on
live brokers that answer, picked across racks (:func:`rack_spread`; never a fenced one, which a KRaft controller's
own placement may pick, nor one that crashed a moment ago and is still in the Metadata).

A lock topic created by anyone else has no topic configs of its own: a client's Metadata request that names the
topic while it does not exist makes a broker with ``auto.create.topics.enable=true`` (Kafka's default) create it,
as Burrow does while it still lists a lock topic just released. Such a stray is deleted by whoever reads it
(``KafkaLockStore._remove_stray``) and the cluster reads as free.

A lock topic whose holder record never arrived (its creator died between the two steps) reads as held by
``"unknown"``: break it by hand after checking no run works on the cluster:
``kafka-topics.sh --bootstrap-server <b> --delete --topic kafka-ops.operation-lock`` (README, "The cluster
lock"). Same behaviour as the ZooKeeper lock (``hooks.cluster_lock``): holder named, re-entrant for the same
run, wait or fail, released by the teardown.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic
from kafka_ops.profile import ClusterProfile

from hooks.cluster_lock import LockHolder
from hooks.kafka_admin import KafkaAdminHook, LibrdkafkaLog

LOCK_TOPIC = "kafka-ops.operation-lock"
#: How long a reader waits for the holder record of a lock topic that exists (the creator writes it right
#: after creating the topic), seconds.
HOLDER_RECORD_WAIT_S = 10.0
REQUEST_TIMEOUT_S = 15.0
#: How long a release waits for ZooKeeper-mode Kafka to finish deleting the lock topic, and a taker for a lock
#: topic still being deleted, seconds.
DELETION_WAIT_S = 60.0
RETRY_PAUSE_S = 0.2  # between two tries of try_acquire that found the lock topic existing and free
UNKNOWN = "unknown (the lock topic has no holder record: its creator died while taking it)"
#: What :meth:`KafkaLockStore._read_holder` returns for a stray lock topic it deleted (see ``_remove_stray``).
STRAY = object()

log = logging.getLogger(__name__)


def rack_spread(racks: Mapping[int, str | None], count: int, rng: random.Random | None = None) -> list[int]:
    """``count`` broker ids from ``racks`` (broker id -> ``broker.rack``, None when unset), one rack after another
    as Kafka's rack-aware placement does (racks in random order, a random broker of each, then a second round):
    two replicas share a rack only when there are fewer racks than ``count``. Brokers without a rack form one
    group. A lock topic with two replicas in one rack would make a rack-batched roll split that rack (two of three
    in-sync replicas stopped at once would go below ``min.insync.replicas``).

    :raises ValueError: ``count`` greater than the number of brokers.
    """
    if count > len(racks):
        raise ValueError(f"{count} replicas need {count} brokers, {len(racks)} given")
    rng = rng or random.Random()
    groups: dict[str | None, list[int]] = {}
    for broker, rack in sorted(racks.items()):
        groups.setdefault(rack, []).append(broker)
    order = [sorted(ids) for ids in groups.values()]
    for ids in order:
        rng.shuffle(ids)
    rng.shuffle(order)
    chosen: list[int] = []
    while len(chosen) < count:
        for ids in order:
            if ids and len(chosen) < count:
                chosen.append(ids.pop())
    return chosen


class KafkaLockStore:
    """The lock topic of one cluster (see the module docstring). Methods raise ``KafkaException`` on
    transient client errors (the callers' waits retry them)."""

    def __init__(self, profile: ClusterProfile) -> None:
        self.profile = profile
        # the admin hook's client: its cluster_state bounds the wait for a controller that does not answer
        self.hook = KafkaAdminHook(profile=profile, request_timeout_s=REQUEST_TIMEOUT_S)
        self.admin = self.hook.get_conn()

    @property
    def where(self) -> str:
        return f"topic {LOCK_TOPIC} of cluster {self.profile.cluster or self.profile.bootstrap_servers}"

    @property
    def break_hint(self) -> str:
        secured = str(self.profile.client_config.get("security.protocol", "PLAINTEXT")).upper() != "PLAINTEXT"
        return (f"kafka-topics.sh --bootstrap-server {self.profile.bootstrap_servers.split(',')[0]} "
                + ("--command-config <a client.properties with the connection's security settings> "
                   if secured else "") + f"--delete --topic {LOCK_TOPIC}")

    def close(self) -> None:
        self.hook.close()
        self.admin = None

    def __enter__(self) -> KafkaLockStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading -----------------------------------------------------------------------------------------

    def _exists(self) -> bool:
        # Metadata for all topics, never for the lock topic by name: librdkafka's admin client asks as a producer,
        # which lets a broker with auto.create.topics.enable=true (Kafka's default) create the topic it was asked
        # about, so a released lock would come straight back
        meta = self.admin.list_topics(timeout=REQUEST_TIMEOUT_S).topics.get(LOCK_TOPIC)
        if meta is None or meta.error is not None and meta.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return False
        return True

    def current_holder(self, wait_s: float = HOLDER_RECORD_WAIT_S) -> LockHolder | None:
        """The holder, or None when the cluster is free. A lock topic without its holder record after
        ``wait_s`` seconds reads as held by :data:`UNKNOWN` (since when it was found). A lock topic that was not
        created by a taker (:meth:`_remove_stray`) is deleted and reads as free."""
        found = self._read_holder(wait_s)
        return None if found is STRAY else found

    def _read_holder(self, wait_s: float) -> LockHolder | None | object:
        """:meth:`current_holder`, or :data:`STRAY` when it found and deleted a stray lock topic."""
        if not self._exists():
            return None
        checked_stray = False
        # from offset 0, not OFFSET_BEGINNING: a logical offset makes librdkafka query it first, and that query
        # waited 500 ms on every read (the lock is checked before each stop and start: 3 s of a KRaft broker's
        # roll); a log that no longer starts at 0 is read from its start (auto.offset.reset=earliest)
        consumer = Consumer(self.profile.confluent_config(**{
            "group.id": "kafka-ops-lock-reader", "enable.auto.commit": False, "enable.partition.eof": True,
            "auto.offset.reset": "earliest", "socket.timeout.ms": 10000}), logger=LibrdkafkaLog())
        try:
            consumer.assign([TopicPartition(LOCK_TOPIC, 0, 0)])
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                if msg.error():
                    if msg.error().code() == KafkaError._PARTITION_EOF and not checked_stray:
                        checked_stray = True  # an empty log: being taken right now, or a stray nobody will write to
                        if self._remove_stray():
                            return STRAY
                        continue
                    if msg.error().code() in (KafkaError._PARTITION_EOF, KafkaError.UNKNOWN_TOPIC_OR_PART,
                                              KafkaError.NOT_LEADER_FOR_PARTITION,
                                              KafkaError.LEADER_NOT_AVAILABLE):
                        if msg.error().code() == KafkaError.UNKNOWN_TOPIC_OR_PART and not self._exists():
                            return None  # released meanwhile
                        continue
                    raise KafkaException(msg.error())
                doc = json.loads(msg.value() or b"{}")
                return LockHolder(str(doc.get("holder", "?")), int(doc.get("since_ms", 0)),
                                  str(doc.get("operation", "?")))
        finally:
            consumer.close()
        if not self._exists():
            return None
        return LockHolder(UNKNOWN, int(time.time() * 1000), "?")

    def _remove_stray(self) -> bool:
        """Delete the lock topic when no taker created it, and say so. A taker's CreateTopics sets the lock's own
        topic configs (``retention.ms=-1``) with the topic, atomically (one KRaft record batch; in ZooKeeper mode the
        config znode is written before the topic's); a topic without them was created by a Metadata request that
        named it while it did not exist, on a broker with ``auto.create.topics.enable=true`` (Kafka's default): e.g.
        Burrow (sarama asks with AllowAutoTopicCreation) refreshing the offsets of a lock topic just released. Nobody
        writes a holder record to it; left alone it would read as held by :data:`UNKNOWN` until broken by hand."""
        overrides = self.hook.topic_overrides(LOCK_TOPIC)
        if overrides is None or overrides.get("retention.ms") == "-1":
            return False
        log.warning("%s exists without the lock's configs (%s) and without a holder record: created by a client's "
                    "Metadata request (auto.create.topics.enable=true), not by a taker; deleting it",
                    self.where, overrides or "no topic configs")
        self._delete()
        return True

    # -- taking and releasing ----------------------------------------------------------------------------

    def _create(self, validate_only: bool = False) -> bool | None:
        """CreateTopics of the lock topic: True when this call created it (``validate_only``: could create it),
        False when it exists, None while a deleted lock topic is still being deleted (ZooKeeper-mode Kafka
        deletes a topic asynchronously, after it left the metadata, and refuses to create it meanwhile:
        TOPIC_ALREADY_EXISTS "marked for deletion")."""
        if validate_only:  # whether the name can be created now (a deletion still under way): no placement needed
            topic = NewTopic(LOCK_TOPIC, num_partitions=1, replication_factor=1)
        else:
            replicas = self.placement()
            rf = len(replicas)
            topic = NewTopic(LOCK_TOPIC, num_partitions=1, replica_assignment=[replicas],
                             config={"min.insync.replicas": str(max(1, rf - 1)), "retention.ms": "-1"})
        future = self.admin.create_topics([topic], request_timeout=REQUEST_TIMEOUT_S,
                                          validate_only=validate_only)[LOCK_TOPIC]
        try:
            future.result(timeout=REQUEST_TIMEOUT_S + 5)
            return True
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return None if "marked for deletion" in exc.args[0].str() else False
            raise

    def placement(self) -> list[int]:
        """The lock topic's replicas: RF min(3, live brokers), one rack after another (:func:`rack_spread`), each a
        live broker (in the Metadata: never a fenced one, which a KRaft controller's own placement may pick) that
        answers a request sent to it (ApiVersions, KIP-35, ``KafkaAdminHook.unanswered_brokers``). A broker that
        crashed a moment ago stays in the Metadata until it is fenced or its ZooKeeper session expires: a lock
        replica on it left the holder record's ``acks=all`` write waiting until then (6 s on the sandbox) and the
        lock topic under-replicated until that broker came back. A chosen broker that does not answer is left out
        and the pick made again. Brokers and racks from ``KafkaAdminHook.cluster_state(configs=False)``, which
        bounds the wait for a controller that does not answer (racks unknown then)."""
        state = self.hook.cluster_state(configs=False)
        racks = {b.id: b.rack for b in state.brokers}
        addresses = {b.id: b.address for b in state.brokers}
        silent: set[int] = set()
        while True:
            pool = {b: rack for b, rack in racks.items() if b not in silent}
            replicas = rack_spread(pool, max(1, min(3, len(pool)))) if pool else rack_spread(racks, 1)
            unanswered = set(self.hook.unanswered_brokers({b: addresses[b] for b in replicas if b not in silent}))
            if not unanswered or not pool:
                return replicas
            silent |= unanswered

    def _write_holder(self, doc: dict[str, Any]) -> None:
        producer = Producer(self.profile.confluent_config(**{
            "enable.idempotence": True, "acks": "all", "message.timeout.ms": int(REQUEST_TIMEOUT_S * 2000)}),
            logger=LibrdkafkaLog())  # its lines ("Coordinator load in progress: retrying") at their own level
        failures: list[Any] = []
        producer.produce(LOCK_TOPIC, key=b"holder", value=json.dumps(doc).encode(), partition=0,
                         on_delivery=lambda err, _msg: failures.append(err) if err is not None else None)
        left = producer.flush(REQUEST_TIMEOUT_S * 2)
        if left or failures:
            raise KafkaException(failures[0] if failures else KafkaError(KafkaError._MSG_TIMED_OUT))

    def try_acquire(self, holder: str, operation: str, attempts: int = 5,
                    deletion_wait_s: float = DELETION_WAIT_S) -> LockHolder | None:
        """Take the lock for ``holder``; None on success (or when ``holder`` already has it), else the other
        holder. A created topic whose holder record cannot be written is deleted again (and the error raised).
        A lock topic still being deleted (just released) is waited for, up to ``deletion_wait_s`` seconds; a stray
        one (auto-created, see ``_remove_stray``) is deleted, for as long.

        :raises RuntimeError: released and re-taken by others ``attempts`` times in a row, or still being
            deleted after ``deletion_wait_s``.
        """
        doc = {"holder": holder, "since_ms": int(time.time() * 1000), "operation": operation}
        deadline = time.monotonic() + deletion_wait_s
        tries = 0
        while tries < max(1, attempts):
            created = self._create()
            if created is None:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.where}: still being deleted after {deletion_wait_s:.0f} s")
                time.sleep(0.5)
                continue
            tries += 1
            if created:
                try:
                    self._write_holder(doc)
                except Exception:
                    self._delete()
                    raise
                return None
            other = self._read_holder(HOLDER_RECORD_WAIT_S)
            if other is STRAY:  # deleted: not another taker's doing, so not counted as a try
                tries -= 1
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.where}: auto-created again after each deletion for "
                                       f"{deletion_wait_s:.0f} s (a client keeps asking for it by name)")
                continue
            if other is not None:
                return None if other.holder == holder else other
            # it exists (CreateTopics said so) yet reads as free: released meanwhile, or the answering broker's
            # metadata does not list it yet (ZooKeeper mode propagates a new topic to the brokers after
            # CreateTopics returned): a moment before asking again
            time.sleep(RETRY_PAUSE_S)
        raise RuntimeError(f"{self.where}: released and re-taken {attempts} times while trying to take it")

    def _delete(self, timeout_s: float = DELETION_WAIT_S) -> None:
        """Delete the lock topic and wait until the deletion is complete: the metadata no longer lists it and
        the controller would create it again (a validate-only CreateTopics)."""
        future = self.admin.delete_topics([LOCK_TOPIC], request_timeout=REQUEST_TIMEOUT_S)[LOCK_TOPIC]
        try:
            future.result(timeout=REQUEST_TIMEOUT_S + 5)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise
        deadline = time.monotonic() + timeout_s
        while self._exists() or self._create(validate_only=True) is None:  # deletion completes asynchronously
            if time.monotonic() > deadline:
                raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"{LOCK_TOPIC} still being deleted "
                                                                     f"{timeout_s:.0f} s after its deletion"))
            time.sleep(0.2)

    def release(self, holder: str) -> bool:
        """Delete the lock topic if ``holder`` holds it; True when released by this call."""
        current = self.current_holder()
        if current is None or current.holder != holder:
            return False
        self._delete()
        return True
