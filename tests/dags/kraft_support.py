"""What the KRaft DAG tests read from outside a KRaft sandbox: the controllers' ids, their shutdown order and their
Raft state when they stopped from their own logs, and the active controller from DescribeQuorum (kafka-python)."""

from __future__ import annotations

import time
from typing import Any

from kafka import KafkaAdminClient
from kafka.errors import KafkaError
from timed_faults import RunWatcher

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


class LeadershipMover(RunWatcher):
    """Moves the quorum leadership of a sandbox whose brokers are voters too (combined mode) onto voter ``onto``,
    from a thread, once ``when`` shows in the run's output (read off ``capfd`` / ``caplog`` as the run goes on): while
    another voter leads, that leader is frozen (SIGSTOP) until the others elect a new one, then thawed and waited for
    until it fetches from the new leader again, and so on until ``onto`` leads or ``timeout_s`` (seconds) ran out.
    Kafka has no request that moves the quorum's leadership; each election here is Kafka's own among the two voters
    left (about one in two goes to ``onto``); then it waits until every broker is in the metadata again (a frozen one
    may have been fenced). The run must leave it the time: the roll's next turn must not come while a node is frozen
    (a broker down that the roll did not stop fails the roll). ``moves`` lists each leader seen in turn; ``done`` says
    whether ``onto`` led at the end; ``output`` is the run's output read meanwhile. Nothing stays frozen after
    ``__exit__``."""

    join_s = 60.0

    def __init__(self, sandbox, onto: int, capfd, caplog, when: str, timeout_s: float = 90.0) -> None:
        super().__init__(capfd, caplog)
        self.sandbox, self.onto, self._when, self._timeout_s = sandbox, onto, when, timeout_s
        self._frozen: set[int] = set()
        self.moves: list[int] = []
        self.done = False
        self.began_at: float | None = None

    def _raft_state(self, node: int) -> tuple[str, int]:
        """The voter's last Raft transition in its own log (``sandbox.node_log.last_raft_transition``: DescribeQuorum
        cannot say it here, a broker forwards it to the active controller it knows, the frozen one, and waits for its
        timeout); ("", -1) before any."""
        from sandbox.node_log import last_raft_transition

        return last_raft_transition(self.sandbox.host_dir(node).server_log) or ("", -1)

    def _signal(self, verb: str, node: int) -> None:
        done = self.sandbox.cli(verb, str(node))
        assert done.returncode == 0, done.stderr
        (self._frozen.add if verb == "freeze" else self._frozen.discard)(node)

    def _wait(self, what, deadline: float) -> Any:
        while not self._stop.is_set() and time.monotonic() < deadline:
            found = what()
            if found is not None:
                return found
            self._stop.wait(0.1)
        return None

    def _follows(self, node: int, epoch: int) -> bool | None:
        """True once the voter's log says it follows in ``epoch`` or later; None before (what ``_wait`` waits on)."""
        state, at = self._raft_state(node)
        return True if state == "Follower" and at >= epoch else None

    def _new_leader(self, after_epoch: int) -> tuple[int, int] | None:
        """(node, epoch) of a voter not frozen whose log says it leads an epoch later than ``after_epoch``."""
        for node in self.sandbox.broker_ids:
            state, epoch = self._raft_state(node)
            if node not in self._frozen and state == "Leader" and epoch > after_epoch:
                return node, epoch
        return None

    def _run(self) -> None:
        if not self._await_logged(self._when):
            return
        self.began_at = time.time()
        deadline = time.monotonic() + self._timeout_s
        epoch = -1
        while not self._stop.is_set() and time.monotonic() < deadline:
            found = self._wait(lambda after=epoch: self._new_leader(after), deadline)
            if found is None:
                break
            leader, epoch = found
            self.moves.append(leader)
            for node in list(self._frozen):  # the voter frozen before: thawed, back as a follower of the new leader
                self._signal("thaw", node)
                self._wait(lambda node=node, now=epoch: self._follows(node, now), deadline)
            if leader == self.onto:
                self.done = True
                break
            self._signal("freeze", leader)
        for node in list(self._frozen):
            self._signal("thaw", node)
        self._registered(time.monotonic() + 15)

    def _registered(self, deadline: float) -> None:
        """Wait (until ``deadline``, monotonic) until every broker is in the metadata again: a node frozen longer than
        ``broker.session.timeout.ms`` was fenced, and a roll's turn that came meanwhile would find it down."""
        from observers import admin

        wanted = set(self.sandbox.broker_ids)
        while not self._stop.is_set() and time.monotonic() < deadline:
            try:
                if wanted <= set(admin(self.sandbox.bootstrap_servers).list_topics(timeout=5).brokers):
                    return
            except Exception:  # noqa: BLE001 - a broker between states
                pass
            self._stop.wait(0.2)

    def _finish(self) -> None:
        for node in list(self._frozen):
            self._signal("thaw", node)
