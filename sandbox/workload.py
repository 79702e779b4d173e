"""The sandbox workload: its topics, the data they start with, a producer and the consumer groups.

`sandbox up` creates the topics of ``settings.WORKLOAD_TOPICS`` with Kafka's CreateTopics (Kafka places the
replicas, rack-aware) and writes ``bytes per partition`` of records into each partition (:func:`seed`), so the
reassignment planner sees partitions of different sizes. Then ``python -m sandbox.workload --workdir DIR``
runs, until SIGTERM:

- a producer (``acks=all``) writing ``settings.PRODUCE_MSGS_PER_S`` messages per second to each workload
  topic, spread over its partitions;
- one consumer per group of ``settings.WORKLOAD_GROUPS``: a member of that consumer group (``subscribe``),
  reading its topics and committing (asynchronously) the offsets it reached every
  ``settings.WORKLOAD_COMMIT_INTERVAL_S`` to the group coordinator (``__consumer_offsets``), which Burrow's
  ``kafka`` consumer module reads.

``sandbox lag GROUP --stall-seconds S`` writes ``DIR/workload/stall-<group>`` holding a deadline (epoch
seconds); until then that group's member pauses its partitions (it reads nothing) but keeps committing the
offsets it had when the stall began, like a consumer stuck in its processing whose commits continue. Burrow
sees the committed offsets stand still while the lag grows, rates the partitions STALL and the group ERR
once its window (``settings.BURROW_INTERVALS`` commits) holds no zero-lag commit. When the stall ends the
member resumes, catches up, and the group is OK again.
"""

from __future__ import annotations

import argparse
import faulthandler
import logging
import signal
import sys
import threading
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from sandbox import controller_request, procs, settings, state
from sandbox.layout import Workdir

CONSUMER_OFFSETS = "__consumer_offsets"
SEED_TIMEOUT_S = 60.0
#: Seconds the loop may go without a round before every thread's stack is written to the workload's log
#: (``faulthandler``): a hung workload stops producing and committing, which Burrow rates STOP, so its log has
#: to say where it hung.
LOOP_STALL_DUMP_S = 30.0
#: Seconds between two writes of the loop's heartbeat file (``Workdir.workload_heartbeat``).
HEARTBEAT_EVERY_S = 1.0
#: Seconds between two log lines about produce calls the client refused (each refusal is counted in ``failed``).
REFUSAL_LOG_EVERY_S = 10.0

log = logging.getLogger("sandbox.workload")


def topic_plan(brokers: int) -> dict[str, tuple[int, int, int]]:
    """``{topic: (partitions, replication factor, bytes per partition at up)}`` for a cluster of ``brokers``
    brokers: ``settings.WORKLOAD_TOPICS`` with the replication factor capped at ``brokers``."""
    return {name: (p, min(rf, brokers), size) for name, (p, rf, size) in settings.WORKLOAD_TOPICS.items()}


def create_topics(bootstrap_servers: str, brokers: int, timeout_s: float = 30.0) -> list[str]:
    """Create the workload topics that do not exist yet (CreateTopics: Kafka assigns the replicas, rack-aware);
    returns the topics that did not exist when it was called. Each try creates the topics still missing and is
    waited for ``controller_request.ATTEMPT_S`` at most; a transient error (``controller_request.is_transient``) is
    tried again until ``timeout_s``.

    Raises:
        KafkaException: a topic could not be created (other than "already exists"), or a transient error lasted
            until ``timeout_s``.
    """
    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "log_level": 0})
    plan = topic_plan(brokers)
    missing_at_first = [name for name in plan if name not in admin.list_topics(timeout=timeout_s).topics]

    def attempt(seconds: float) -> None:
        existing = admin.list_topics(timeout=seconds).topics
        new = [NewTopic(name, partitions, rf) for name, (partitions, rf, _) in plan.items() if name not in existing]
        if not new:
            return
        controller_request.settle(
            admin.create_topics(new, operation_timeout=seconds, request_timeout=seconds).values(),
            ignore={"TOPIC_ALREADY_EXISTS"})

    if missing_at_first:
        controller_request.until_done(attempt, admin, timeout_s, "creating the workload topics")
    return missing_at_first


def seed(bootstrap_servers: str, brokers: int, timeout_s: float = SEED_TIMEOUT_S) -> int:
    """Write each workload partition's starting bytes (``settings.WORKLOAD_TOPICS``) as records of
    ``settings.MESSAGE_BYTES``; returns the records written.

    Raises:
        RuntimeError: not every record was acknowledged within ``timeout_s`` seconds.
    """
    producer = Producer({"bootstrap.servers": bootstrap_servers, "acks": "all", "linger.ms": 20,
                         "compression.type": "none", "log_level": 3, "client.id": "sandbox-seed"})
    value = b"s" * settings.MESSAGE_BYTES
    failed: list[str] = []
    sent = 0

    def delivered(err, _msg) -> None:
        if err is not None:
            failed.append(str(err))

    for topic, (partitions, _rf, size) in topic_plan(brokers).items():
        for partition in range(partitions):
            for _ in range(max(1, size // settings.MESSAGE_BYTES)):
                while True:
                    try:
                        producer.produce(topic, value, partition=partition, on_delivery=delivered)
                        break
                    except BufferError:
                        producer.poll(0.1)
                sent += 1
    left = producer.flush(timeout_s)
    if left or failed:
        raise RuntimeError(f"seeding the workload topics: {left} records unacknowledged after {timeout_s:.0f} s, "
                           f"{len(failed)} failed (e.g. {failed[:1]})")
    return sent


#: Seconds without a heartbeat after which a running workload counts as hung (its loop never blocks that long).
STALE_AFTER_S = 30.0


def problem(workdir: Workdir, now: float | None = None, stale_after_s: float = STALE_AFTER_S) -> str | None:
    """Why the workload of ``workdir`` does not serve its consumer groups, or None when it does (or when it wrote no
    heartbeat yet, e.g. a sandbox from before the heartbeat). A dead or hung workload stops producing and committing
    together: Burrow then rates every group STOP/ERR for good, and every lag gate waits until its timeout. The text
    ends with the log's last lines (a hung loop's stacks are there after ``LOOP_STALL_DUMP_S``)."""
    if procs.alive_from_pid_file(workdir.workload_pid, must_contain="sandbox.workload") is None:
        found = f"the workload of {workdir.root} is not running"
    else:
        try:
            beat = float(workdir.workload_heartbeat.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        age = (now or time.time()) - beat
        if age <= stale_after_s:
            return None
        found = f"the workload of {workdir.root} runs but its loop has not gone round for {age:.0f} s (hung)"
    try:
        tail = workdir.workload_log.read_text(errors="replace").splitlines()[-40:]
    except FileNotFoundError:
        tail = []
    return found + "; its log ends:\n" + "\n".join(tail)


def stalled_until(workdir: Workdir, group: str, now: float | None = None) -> float | None:
    """The deadline (epoch seconds) of ``group``'s stall, or None when it is not stalled."""
    path = workdir.stall_file(group)
    try:
        deadline = float(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    if (now or time.time()) >= deadline:
        return None
    return deadline


def stall(workdir: Workdir, group: str, seconds: float) -> float:
    """Make ``group`` stop progressing for ``seconds``; returns the deadline (epoch seconds)."""
    workdir.workload.mkdir(parents=True, exist_ok=True)
    deadline = time.time() + seconds
    tmp = workdir.stall_file(group).with_suffix(".tmp")
    tmp.write_text(f"{deadline:.3f}\n")
    tmp.replace(workdir.stall_file(group))
    return deadline


class GroupMember:
    """One consumer group's member: reads its topics, commits the offsets it reached, pauses when stalled."""

    def __init__(self, group: str, topics: list[str], bootstrap_servers: str) -> None:
        self.group = group
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap_servers, "group.id": group, "client.id": f"sandbox-{group}",
            "enable.auto.commit": False, "auto.offset.reset": "earliest", "log_level": 2,
            "session.timeout.ms": 20000, "heartbeat.interval.ms": 2000,
            "on_commit": self._committed,
        })
        self.consumer.subscribe(topics)
        self.frozen: dict[tuple[str, int], int] | None = None  # the offsets a stalled member re-commits
        self.last_commit = 0.0
        self.commit_failures = 0

    def _committed(self, err, _partitions) -> None:
        """librdkafka's commit result (served by ``consume``): a failure is logged, the next round commits
        again (e.g. the coordinator moving during a restart)."""
        if err is not None:
            self.commit_failures += 1
            log.info("group %s: commit failed: %s", self.group, err)

    def _positions(self) -> list[TopicPartition]:
        assignment = self.consumer.assignment()
        if not assignment:
            return []
        return [tp for tp in self.consumer.position(assignment) if tp.offset >= 0]

    def tick(self, stalled: bool, now: float) -> None:
        """Read what is there (unless stalled) and commit every ``WORKLOAD_COMMIT_INTERVAL_S``."""
        if stalled and self.frozen is None:
            self.frozen = {(tp.topic, tp.partition): tp.offset for tp in self._positions()}
            log.info("group %s stalls: it keeps committing %d offsets and reads nothing", self.group, len(self.frozen))
        elif not stalled and self.frozen is not None:
            self.frozen = None
            if self.consumer.assignment():
                self.consumer.resume(self.consumer.assignment())
            log.info("group %s follows again", self.group)
        if self.frozen is not None and self.consumer.assignment():
            self.consumer.pause(self.consumer.assignment())
        for message in self.consumer.consume(num_messages=1000, timeout=0.05):
            if message.error() is not None:
                log.debug("group %s: %s", self.group, message.error())
        if now - self.last_commit < settings.WORKLOAD_COMMIT_INTERVAL_S:
            return
        self.last_commit = now
        if self.frozen is not None:
            offsets = [TopicPartition(t, p, o) for (t, p), o in self.frozen.items()]
        else:
            offsets = self._positions()
        if not offsets:
            return
        # Asynchronous: a synchronous commit waits for the group coordinator without serving the group's
        # rebalance, and a broker restart that moves the coordinator could hang the whole workload there.
        try:
            self.consumer.commit(offsets=offsets, asynchronous=True)
        except KafkaException as exc:  # refused before it was sent; the next round commits again
            log.info("group %s: commit failed: %s", self.group, exc.args[0])

    def close(self) -> None:
        self.consumer.close()


class Workload:
    """The producer and the groups' members, in one loop (``run`` until ``stop``)."""

    def __init__(self, workdir: Workdir, bootstrap_servers: str, brokers: int) -> None:
        self.workdir = workdir
        self.bootstrap_servers = bootstrap_servers
        self.plan = topic_plan(brokers)
        self.producer = Producer({"bootstrap.servers": bootstrap_servers, "acks": "all", "linger.ms": 50,
                                  "client.id": "sandbox-workload", "log_level": 2,
                                  "message.timeout.ms": 60000})
        self.members = {group: GroupMember(group, topics, bootstrap_servers)
                        for group, topics in settings.WORKLOAD_GROUPS.items()}
        self.stopping = threading.Event()
        self.sent = 0
        self.failed = 0
        self.last_refusal_log = float("-inf")

    def _delivered(self, err, _msg) -> None:
        if err is not None:
            self.failed += 1

    def _refused(self, topic: str, exc: KafkaException) -> None:
        now = time.monotonic()
        if now - self.last_refusal_log >= REFUSAL_LOG_EVERY_S:
            self.last_refusal_log = now
            log.info("produce to %s refused (%d so far), retried next round: %s", topic, self.failed, exc.args[0])

    def produce_due(self, elapsed_s: float) -> None:
        """Produce what the rate owes after ``elapsed_s`` seconds of running (every topic, partitions in turn)."""
        due = int(elapsed_s * settings.PRODUCE_MSGS_PER_S)
        value = b"w" * settings.MESSAGE_BYTES
        while self.sent < due:
            for topic, (partitions, _rf, _size) in self.plan.items():
                try:
                    self.producer.produce(topic, value, partition=self.sent % partitions, on_delivery=self._delivered)
                except BufferError:  # brokers unreachable for a while: drop this round, the rate catches up
                    break
                except KafkaException as exc:
                    # Refused before it was queued, e.g. _UNKNOWN_TOPIC: a just-restarted broker answered metadata
                    # before its cache held the topic (seen during a ZooKeeper-to-KRaft migration). A refusal is
                    # the topic's: the round's other topics go on, this one is tried again next round (as a real
                    # application would retry) instead of the workload dying.
                    self.failed += 1
                    self._refused(topic, exc)
            self.sent += 1
        self.producer.poll(0)

    def beat(self) -> None:
        """Write the loop's heartbeat (epoch seconds) for whoever checks that the workload still runs."""
        tmp = self.workdir.workload_heartbeat.with_suffix(".tmp")
        tmp.write_text(f"{time.time():.3f}\n")
        tmp.replace(self.workdir.workload_heartbeat)

    def run(self) -> None:
        began = time.monotonic()
        last_report = began
        last_beat = began - HEARTBEAT_EVERY_S
        try:
            while not self.stopping.is_set():
                faulthandler.dump_traceback_later(LOOP_STALL_DUMP_S, exit=False)
                now = time.monotonic()
                if now - last_beat >= HEARTBEAT_EVERY_S:
                    last_beat = now
                    self.beat()
                self.produce_due(now - began)
                for group, member in self.members.items():
                    member.tick(stalled_until(self.workdir, group) is not None, now)
                if now - last_report >= 60:
                    last_report = now
                    log.info("produced %d rounds; %d delivery failures; commit failures %s", self.sent,
                             self.failed, {g: m.commit_failures for g, m in self.members.items()})
        finally:
            faulthandler.cancel_dump_traceback_later()
            self.producer.flush(5)
            for member in self.members.values():
                member.close()

    def stop(self, *_: object) -> None:
        self.stopping.set()


def main(argv: list[str] | None = None) -> int:
    """Entry point of the workload process (``python -m sandbox.workload --workdir DIR``)."""
    parser = argparse.ArgumentParser(prog="python -m sandbox.workload", description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    workdir = Workdir.at(args.workdir)
    info = state.load(workdir)
    workload = Workload(workdir, info.bootstrap_servers, len(info.active_specs))
    signal.signal(signal.SIGTERM, workload.stop)
    signal.signal(signal.SIGINT, workload.stop)
    log.info("workload started: groups %s", ", ".join(settings.WORKLOAD_GROUPS))
    workload.run()
    log.info("workload stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
