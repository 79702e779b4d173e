"""The sandbox workload: its topics, and the consumer groups committing offsets to ZooKeeper.

Produce traffic is simulated inside the brokers (leaders append ``settings.PRODUCE_MSGS_PER_S``), so
this process only plays the consumer groups of ``settings.WORKLOAD_GROUPS``, old-style ZooKeeper
consumers: every ``settings.WORKLOAD_COMMIT_INTERVAL_S`` it reads the log end offsets with
confluent-kafka (``AdminClient.list_offsets``, one call per topic) and writes
``end offset - COMMIT_LAG_MSGS`` as a decimal string to ``/consumers/<group>/offsets/<topic>/<p>``,
which Burrow's ``kafka_zk`` module watches. The lag Burrow reports (its newer head offset minus the
commit) is then a few messages, and the lag Burrow stores with each commit is mostly zero: Burrow 1.2.1
calls a partition OK whenever any stored commit in its window had zero lag.

``sandbox lag GROUP --stall-seconds S`` writes ``DIR/workload/stall-<group>`` holding a deadline
(epoch seconds); until then that group stops making progress: like a stuck ZooKeeper consumer whose
auto-commit keeps running, it re-commits the offsets it had when the stall began. Burrow sees the lag
grow at every commit and, once its window (``settings.BURROW_INTERVALS`` commits) holds no zero-lag
commit, rates the partitions STALL and the group ERR. (A group that committed nothing at all would stay
OK in Burrow 1.2.1: its window would keep the old zero-lag commits.) When the stall ends the group
commits the end offsets again and is OK at its next commit.

KRaft mode has no ZooKeeper consumers: there each group commits its offsets to the group coordinator
(OffsetCommit as a simple consumer, ``__consumer_offsets``), which Burrow's ``kafka`` consumer module reads;
the rest is the same.

Run as ``python -m sandbox.workload --workdir DIR`` (started by ``sandbox up``; reads ``DIR/sandbox.json``).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from collections.abc import Iterable

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from sandbox import metadata_access, settings, state
from sandbox.broker import zkpaths
from sandbox.layout import Workdir

COMMIT_LAG_MSGS = 0  # a following consumer commits this many messages behind the end offset it read
LIST_OFFSETS_TIMEOUT_S = 2.0
CONSUMER_OFFSETS = "__consumer_offsets"

log = logging.getLogger("sandbox.workload")


def topic_plan(brokers: int) -> dict[str, tuple[int, int, int]]:
    """``{topic: (partitions, replication factor, initial bytes per partition)}`` for a cluster of
    ``brokers`` brokers: ``settings.WORKLOAD_TOPICS`` plus ``__consumer_offsets``, RF capped at
    ``brokers``."""
    plan = {name: (p, min(rf, brokers), size) for name, (p, rf, size) in settings.WORKLOAD_TOPICS.items()}
    plan[CONSUMER_OFFSETS] = (
        settings.CONSUMER_OFFSETS_PARTITIONS,
        min(settings.CONSUMER_OFFSETS_RF, brokers),
        0,
    )
    return plan


def create_topics(
    zk: KazooClient, brokers: Iterable[tuple[int, str | None]]
) -> dict[str, dict[int, list[int]]]:
    """Create the workload topics (skipping existing ones) on ``brokers`` (``(id, rack)`` pairs)
    through ZooKeeper; the controller then elects their leaders. Returns ``{topic: assignment}``.

    ``__consumer_offsets`` is created as a topic with real records (what the brokers' group coordinators
    create on demand at the first FindCoordinator, with the same partitions and RF), here before Burrow
    starts: Burrow 1.2.1's ``kafka`` consumer module reads its partition list once at start and exits
    when the topic is missing."""
    brokers = list(brokers)
    created = {}
    for topic, (partitions, rf, size) in topic_plan(len(brokers)).items():
        if zk.exists(zkpaths.topic_path(topic)):
            continue
        if topic == CONSUMER_OFFSETS:  # real records: the brokers' group coordinators write it
            created[topic] = zkpaths.create_topic(
                zk, topic, partitions, rf, brokers, configs={"cleanup.policy": "compact"}, records=True
            )
            continue
        created[topic] = zkpaths.create_topic(zk, topic, partitions, rf, brokers, initial_bytes=size)
    return created


def offsets_topic_led(zk: KazooClient) -> bool:
    """True once every partition of ``__consumer_offsets`` has a leader in ZooKeeper (Burrow's ``kafka``
    consumer module fails to start on a partition without one)."""
    try:
        assignment = zkpaths.loads(zk.get(zkpaths.topic_path(CONSUMER_OFFSETS))[0])["partitions"]
        for partition in assignment:
            state = zkpaths.loads(zk.get(zkpaths.partition_state_path(CONSUMER_OFFSETS, int(partition)))[0])
            if not state or int(state["leader"]) < 0:
                return False
    except NoNodeError:
        return False
    return True


def create_group_nodes(zk: KazooClient) -> None:
    """Create ``/consumers/<group>/offsets/<topic>/<p>`` (offset "0") for every workload group, before
    Burrow starts: Burrow 1.2.1 reads a new group's ``offsets`` children once, when the group appears,
    and never looks again if that node did not exist yet."""
    for group, topics in settings.WORKLOAD_GROUPS.items():
        for topic in topics:
            assignment = zkpaths.loads(zk.get(zkpaths.topic_path(topic))[0])["partitions"]
            for partition in range(len(assignment)):
                path = offsets_path(group, topic, partition)
                if not zk.exists(path):
                    zk.create(path, b"0", makepath=True)


def offsets_path(group: str, topic: str, partition: int) -> str:
    return f"{zkpaths.CONSUMERS}/{group}/offsets/{topic}/{partition}"


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
    """Make ``group`` stop committing for ``seconds``; returns the deadline (epoch seconds)."""
    workdir.workload.mkdir(parents=True, exist_ok=True)
    deadline = time.time() + seconds
    tmp = workdir.stall_file(group).with_suffix(".tmp")
    tmp.write_text(f"{deadline:.3f}\n")
    tmp.replace(workdir.stall_file(group))
    return deadline


class Workload:
    """The consumer groups' commit loop (one thread, ``run`` until ``stop``)."""

    def __init__(self, workdir: Workdir, zookeeper_connect: str, bootstrap_servers: str,
                 info: state.SandboxState | None = None) -> None:
        self.workdir = workdir
        self.info = info
        self.kraft = bool(info and info.kraft)
        self.bootstrap_servers = bootstrap_servers
        self.zk = None if self.kraft else KazooClient(hosts=zookeeper_connect, timeout=10.0)
        self.consumers: dict[str, Consumer] = {}  # KRaft: one simple consumer per group, for its commits
        self.admin = AdminClient(
            {
                "bootstrap.servers": bootstrap_servers,
                "socket.timeout.ms": 3000,
                "client.id": "sandbox-workload",
            }
        )
        self.end_offsets: dict[tuple[str, int], int] = {}
        self.frozen: dict[str, dict[tuple[str, int], int]] = {}  # stalled group -> offsets it repeats
        self.stopping = threading.Event()

    def partitions(self, topic: str) -> list[int]:
        if self.zk is None:
            return []
        try:
            return sorted(int(p) for p in self.zk.get_children(f"{zkpaths.topic_path(topic)}/partitions"))
        except NoNodeError:
            return []

    def refresh_end_offsets(self, topics: Iterable[str]) -> None:
        """Update ``end_offsets`` for every partition of ``topics`` (one ListOffsets round, at most
        ``LIST_OFFSETS_TIMEOUT_S``); partitions that fail (e.g. leader down) keep their last value."""
        request = {
            TopicPartition(topic, p): OffsetSpec.latest() for topic in topics for p in self.partitions(topic)
        }
        if not request:
            return
        try:
            futures = self.admin.list_offsets(request, request_timeout=LIST_OFFSETS_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - keep the last known offsets
            log.warning("list_offsets failed: %s", exc)
            return
        failed = []
        for tp, future in futures.items():
            try:
                self.end_offsets[(tp.topic, tp.partition)] = future.result().offset
            except Exception:  # noqa: BLE001 - e.g. partition offline
                failed.append(f"{tp.topic}-{tp.partition}")
        if failed:
            log.info("end offsets unavailable for %d partitions (e.g. %s)", len(failed), failed[:3])

    def _consumer(self, group: str) -> Consumer:
        if group not in self.consumers:
            self.consumers[group] = Consumer({"bootstrap.servers": self.bootstrap_servers, "group.id": group,
                                              "enable.auto.commit": False, "client.id": "sandbox-workload",
                                              "socket.timeout.ms": 3000, "log_level": 3})
        return self.consumers[group]

    def committed(self, group: str, topics: Iterable[str]) -> dict[tuple[str, int], int]:
        """``group``'s committed offsets for ``topics``, read from ZooKeeper (KRaft: OffsetFetch)."""
        if self.kraft:
            wanted = [TopicPartition(t, p) for t in topics for p in self.partitions(t)]
            try:
                found = self._consumer(group).committed(wanted, timeout=LIST_OFFSETS_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - the next round retries
                log.warning("OffsetFetch of %s failed: %s", group, exc)
                return {}
            return {(tp.topic, tp.partition): tp.offset for tp in found if tp.offset >= 0}
        offsets = {}
        for topic in topics:
            for partition in self.partitions(topic):
                try:
                    offsets[(topic, partition)] = int(self.zk.get(offsets_path(group, topic, partition))[0])
                except (NoNodeError, ValueError):
                    continue
        return offsets

    def commit(
        self, group: str, topics: Iterable[str], offsets: dict[tuple[str, int], int] | None = None
    ) -> int:
        """Write ``group``'s offsets for ``topics`` to ZooKeeper: ``offsets`` when given (a stalled
        group), else the end offsets minus ``COMMIT_LAG_MSGS``. Returns how many were written."""
        written = 0
        batch: list[TopicPartition] = []
        for topic in topics:
            for partition in self.partitions(topic):
                if offsets is not None:
                    value = offsets.get((topic, partition))
                else:
                    end = self.end_offsets.get((topic, partition))
                    value = None if end is None or end < 0 else max(0, end - COMMIT_LAG_MSGS)
                if value is None:
                    continue
                if self.kraft:
                    batch.append(TopicPartition(topic, partition, value))
                    continue
                path = offsets_path(group, topic, partition)
                if self.zk.exists(path):
                    self.zk.set(path, str(value).encode())
                else:
                    self.zk.create(path, str(value).encode(), makepath=True)
                written += 1
        if batch:
            try:
                self._consumer(group).commit(offsets=batch, asynchronous=False)
                written += len(batch)
            except Exception as exc:  # noqa: BLE001 - e.g. the coordinator moving during a restart
                log.info("OffsetCommit of %s failed: %s", group, exc)
        return written

    def tick(self) -> None:
        """One round: refresh end offsets, commit every group that is not stalled."""
        topics = sorted({t for ts in settings.WORKLOAD_GROUPS.values() for t in ts})
        self.refresh_end_offsets(topics)
        for group, group_topics in settings.WORKLOAD_GROUPS.items():
            deadline = stalled_until(self.workdir, group)
            if deadline is not None:
                if group not in self.frozen:
                    self.frozen[group] = self.committed(group, group_topics)
                    log.info(
                        "group %s stalls until %s", group, time.strftime("%H:%M:%S", time.localtime(deadline))
                    )
                self.commit(group, group_topics, self.frozen[group])
                continue
            if self.frozen.pop(group, None) is not None:
                log.info("group %s follows again", group)
            self.workdir.stall_file(group).unlink(missing_ok=True)
            self.commit(group, group_topics)

    def run(self) -> None:
        """Commit every ``settings.WORKLOAD_COMMIT_INTERVAL_S`` until :meth:`stop`."""
        if self.kraft:
            self.zk = metadata_access.open_client(self.info, timeout_s=10.0)
        else:
            self.zk.start(timeout=10.0)
        try:
            while not self.stopping.is_set():
                started = time.monotonic()
                try:
                    self.tick()
                except Exception:  # noqa: BLE001 - a failed round is logged; the next one retries
                    log.exception("workload round failed")
                self.stopping.wait(
                    max(0.0, settings.WORKLOAD_COMMIT_INTERVAL_S - (time.monotonic() - started))
                )
        finally:
            self.zk.stop()
            self.zk.close()
            for consumer in self.consumers.values():
                consumer.close()

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
    workload = Workload(workdir, info.zookeeper_connect, info.bootstrap_servers, info)
    signal.signal(signal.SIGTERM, workload.stop)
    signal.signal(signal.SIGINT, workload.stop)
    log.info("workload started: groups %s", ", ".join(settings.WORKLOAD_GROUPS))
    workload.run()
    log.info("workload stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
