"""What a node's ``logs/server.log`` says: its starts, shutdowns, release, IBP and why a start failed.

The log is Kafka's own output (its log4j lines, :mod:`sandbox.kafka_release`), appended by ``kafka-service
start`` after a marker line of its own per start (:func:`marker`)::

    [2026-11-25 12:46:24,101] kafka-service: start /…/hosts/0/kafka_2.13-3.6.2 (pid 4166)

so each start's lines form a :class:`Run`. Kafka's lines read here (3.x and 4.x):

- started: ``[KafkaServer id=0] started`` (ZooKeeper mode), ``[KafkaRaftServer nodeId=0] Kafka Server started``
  (KRaft, brokers and controllers: the broker is unfenced by then);
- shutdown begun: ``[KafkaServer id=0] shutting down``, ``[BrokerServer id=0] shutting down``,
  ``[ControllerServer id=100] shutting down`` (SIGTERM runs the same path: controlled shutdown first);
- shutdown done: ``[KafkaServer id=0] shut down completed`` (same three servers);
- the release: ``Kafka version: 3.6.2 (org.apache.kafka.common.utils.AppInfoParser)``, the first of the run;
- the configuration dump at start: ``inter.broker.protocol.version = 3.6-IV2``;
- a failed start: ``Exiting Kafka due to fatal exception`` / ``Fatal error during KafkaServer startup``,
  followed by the exception (its first line is the reason).

Lines about partitions, read by :func:`isr_updates_of_text` and :func:`leader_starts_of_text` (the same in 3.x
and 4.x, both modes):

- a leader's ISR change it asked for (AlterPartition, KIP-497: a follower caught up, or fell behind):
  ``[Partition orders-4 broker=2] ISR updated to 2,1,0  and version updated to 2 (kafka.cluster.Partition)``;
- the node became a partition's leader (state.change.logger):
  ``[Broker id=0] Leader orders-1 with topic id Some(…) starts at leader epoch 3 from offset …``.

A KRaft voter's Raft state, read by :func:`raft_settled_epochs` (``RaftManager``, 3.x and 4.x): the leader or a
follower of an epoch, ``Completed transition to Leader(localReplicaKey=…, epoch=2, …)`` /
``Completed transition to FollowerState(fetchTimeoutMs=2000, epoch=2, leader=101, …)``; the last such transition
before a shutdown is the voter's state when it was stopped (``Leader``, ``Follower``, ``Unattached``, ``Candidate``,
``Prospective`` (4.1+), ``Resigned``; the ``State`` suffix some releases print is dropped).

Timestamps are the local time Kafka's log pattern prints (``%d``), as epoch seconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

LOG_TIME = "%Y-%m-%d %H:%M:%S,%f"
_MARKER = re.compile(r"^\[([^\]]+)\] kafka-service: start (\S+) \(pid (\d+)\)$", re.M)
_STARTED = re.compile(r"^\[([^\]]+)\] INFO (?:\[KafkaServer id=\d+\] started|\[KafkaRaftServer nodeId=\d+\] "
                      r"Kafka Server started)", re.M)
_SHUTDOWN = re.compile(r"^\[([^\]]+)\] INFO \[(?:KafkaServer|BrokerServer|ControllerServer) id=\d+\] shutting down",
                       re.M)
_STOPPED = re.compile(r"^\[([^\]]+)\] INFO \[(?:KafkaServer|BrokerServer|ControllerServer) id=\d+\] shut down "
                      r"completed", re.M)
_ISR_UPDATED = re.compile(r"^\[([^\]]+)\] INFO \[Partition (\S+) broker=(\d+)\] ISR updated to ([\d,]*)", re.M)
_LEADER_STARTS = re.compile(r"^\[([^\]]+)\] INFO \[Broker id=(\d+)\] Leader (\S+) with topic id ", re.M)
_VERSION = re.compile(r"INFO Kafka version: (\S+) \(org\.apache\.kafka\.common\.utils\.AppInfoParser\)")
_IBP = re.compile(r"^\s+inter\.broker\.protocol\.version = (\S+)", re.M)
_FATAL = re.compile(r"^\[([^\]]+)\] (?:ERROR|FATAL) (?:Exiting Kafka due to fatal exception|Fatal error during "
                    r"\w+ startup[^\n]*)", re.M)
_EXCEPTION = re.compile(r"^((?:[a-z][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error))(?:: (.*))?$", re.M)


def parse_time(stamp: str) -> float:
    """Kafka's log timestamp (``2026-11-25 12:46:26,496``, local time) as epoch seconds."""
    return datetime.strptime(stamp, LOG_TIME).timestamp()


@dataclass
class Run:
    """One start of the node (from a ``kafka-service`` marker to the next). Times are epoch seconds."""

    began: float
    release_dir: str
    pid: int
    started: float | None = None  # Kafka said "started" (registered / unfenced)
    shutdown: float | None = None  # Kafka began its (controlled) shutdown
    stopped: float | None = None  # Kafka's shutdown completed (the JVM exits right after)
    version: str | None = None  # "3.6.2"
    ibp: str | None = None  # inter.broker.protocol.version as Kafka parsed it ("3.6-IV2"), ZooKeeper mode
    failure: str | None = None  # the fatal exception of a failed start ("IllegalArgumentException: ...")
    raft_state_at_shutdown: str | None = None  # a KRaft voter's last Raft state before its shutdown ("Leader", ...)

    @property
    def ibp_major_minor(self) -> str | None:
        """``"3.6"`` of ``"3.6-IV2"``."""
        return self.ibp.split("-")[0] if self.ibp else None


_RAFT_STATE = re.compile(r"Completed transition to (\w+)\(")


def _parse_run(head: re.Match, body: str) -> Run:
    run = Run(began=parse_time(head.group(1)), release_dir=head.group(2), pid=int(head.group(3)))
    if m := _STARTED.search(body):
        run.started = parse_time(m.group(1))
    if m := _SHUTDOWN.search(body):
        run.shutdown = parse_time(m.group(1))
        states = _RAFT_STATE.findall(body, 0, m.start())
        run.raft_state_at_shutdown = states[-1].removesuffix("State") if states else None
    if run.shutdown is not None and (m := _STOPPED.search(body)):
        run.stopped = parse_time(m.group(1))
    if m := _VERSION.search(body):
        run.version = m.group(1)
    if m := _IBP.search(body):
        run.ibp = m.group(1)
    if m := _FATAL.search(body):
        exc = _EXCEPTION.search(body, m.end())
        if exc:
            name = exc.group(1).rsplit(".", 1)[-1]
            run.failure = f"{name}: {exc.group(2)}" if exc.group(2) else name
        else:
            run.failure = body[m.start():].splitlines()[0]
    return run


def runs_of_text(text: str) -> list[Run]:
    """Every start in a node log's ``text``, oldest first (lines before the first marker are ignored)."""
    heads = list(_MARKER.finditer(text))
    return [_parse_run(head, text[head.end(): heads[i + 1].start() if i + 1 < len(heads) else len(text)])
            for i, head in enumerate(heads)]


def runs(log: Path) -> list[Run]:
    """Every start recorded in the node log ``log`` (``[]`` when it does not exist)."""
    try:
        text = log.read_text(errors="replace")
    except FileNotFoundError:
        return []
    return runs_of_text(text)


_RAFT_SETTLED = re.compile(r"Completed transition to (?:Leader|LeaderState|FollowerState)\(.*?epoch=(\d+)")


def raft_settled_epochs(log: Path) -> set[int]:
    """The epochs in which the KRaft voter whose node log is ``log`` became the quorum leader or a follower of one
    (empty when the log does not exist or it never did)."""
    try:
        text = log.read_text(errors="replace")
    except FileNotFoundError:
        return set()
    return {int(m.group(1)) for m in _RAFT_SETTLED.finditer(text)}


_RAFT_TRANSITION = re.compile(r"Completed transition to (\w+?)(?:State)?\(.*?epoch=(\d+)")


def last_raft_transition(log: Path) -> tuple[str, int] | None:
    """The KRaft voter's last Raft transition its node log ``log`` names: (``Leader``, ``Follower``, ``Unattached``,
    ``Prospective``, ``Candidate``, ``Resigned``; the ``State`` suffix dropped), epoch); None when the log does not
    exist or names none. Its current state while it runs, also when DescribeQuorum cannot be asked (a broker
    forwards it to the active controller it knows, which may be the one frozen)."""
    try:
        text = log.read_text(errors="replace")
    except FileNotFoundError:
        return None
    found = _RAFT_TRANSITION.findall(text)
    return (found[-1][0], int(found[-1][1])) if found else None


_MARKER_TEXT = b"] kafka-service: start "


def last_run(log: Path) -> Run | None:
    """The latest start recorded in ``log``, or None. Parses only the text from the last marker on (``runs`` parses
    every start: 57 ms of CPU for a 2.4 MB log of a session's shared sandbox, where ``kafka-service start`` looks
    every 0.1 s while its JVM starts)."""
    try:
        data = log.read_bytes()
    except FileNotFoundError:
        return None
    end = len(data)
    while (hit := data.rfind(_MARKER_TEXT, 0, end)) >= 0:
        line = data.rfind(b"\n", 0, hit) + 1
        found = runs_of_text(data[line:].decode(errors="replace"))
        if found:  # else the text was inside some other line: look further back
            return found[-1]
        end = hit
    return None


_AUTO_ELECTION = re.compile(r"^\[([^\]]+)\] INFO \[Controller id=\d+\] Starting replica leader election \(PREFERRED\) "
                            r"for partitions (\S+) triggered by AutoTriggered", re.M)


def automatic_elections(text: str, since: float) -> list[tuple[float, list[str]]]:
    """The ZooKeeper-mode controller's own preferred-leader elections (``auto.leader.rebalance.enable``: every
    ``leader.imbalance.check.interval.seconds``, and 5 s after a controller's failover) in a node log's ``text`` at or
    after ``since`` (epoch seconds) that elected at least one partition: ``[(time, ["topic-partition", ...])]``."""
    found = []
    for m in _AUTO_ELECTION.finditer(text):
        at = parse_time(m.group(1))  # an election of no partitions ("for partitions  triggered") does not match
        if at >= since:
            found.append((at, m.group(2).split(",")))
    return found


def restart_windows(log: Path, since: float) -> list[tuple[float, float]]:
    """``(shutdown begun, started again)`` epoch seconds of each restart whose shutdown began after ``since``;
    a node not started again yet ends its window at +inf."""
    windows: list[tuple[float, float]] = []
    history = runs(log)
    for i, run in enumerate(history):
        if run.shutdown is None or run.shutdown < since:
            continue
        following = history[i + 1] if i + 1 < len(history) else None
        windows.append((run.shutdown, following.started if following and following.started else float("inf")))
    return windows


@dataclass(frozen=True)
class IsrUpdate:
    """A leader's ISR change (``[Partition P broker=L] ISR updated to …``): epoch seconds, ``topic-partition``,
    the leader's id, the new ISR (broker ids, in Kafka's order)."""

    at: float
    partition: str
    leader: int
    isr: tuple[int, ...]


def isr_updates_of_text(text: str) -> list[IsrUpdate]:
    """Every ISR change a node's log ``text`` records as the partition's leader, in log order."""
    return [IsrUpdate(parse_time(m.group(1)), m.group(2), int(m.group(3)),
                      tuple(int(b) for b in m.group(4).split(",") if b))
            for m in _ISR_UPDATED.finditer(text)]


def leader_starts_of_text(text: str) -> list[tuple[float, int, str]]:
    """``(epoch seconds, node id, topic-partition)`` each time the node of log ``text`` became a partition's leader,
    in log order."""
    return [(parse_time(m.group(1)), int(m.group(2)), m.group(3)) for m in _LEADER_STARTS.finditer(text)]
