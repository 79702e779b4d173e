"""The one loop every roll of Kafka nodes runs, whatever the nodes are (brokers, KRaft controllers): one mapped
task per batch of nodes, every step in that task:

turn -> finished? -> window -> choose (which nodes, in which order) -> needs action? -> lock -> gate -> pre-stop
-> stop -> gone -> before-start -> pre-start -> start -> back -> soak -> report.

Why one task per batch: strictly one batch at a time comes from the roll's record, which every instance asks before
it acts (:func:`kafka_ops.roll.turn`: every node of the batches before it done), with at most
:data:`ACTIVE_PER_ROLL` instances at once (``max_active_tis_per_dagrun``; the scheduler starts them in map-index
order): the one acting, and the next one started ahead, which waits *in its own process* for its turn
(:meth:`NodeRollOperator._await_turn`) and goes on the moment the batch before it is done, without the scheduler's
hop and its own task start in between. Not a sensor that polls the previous batch's state (reschedule sensors hit
apache/airflow#71172). Waits poll in the task's own
process (``runtime.waiting``), so no deferral race (apache/airflow#72716) can fail a step either; the Grid label
shows the current step (``runtime.grid.show_step``). Every step that can skip asks :func:`kafka_ops.roll.decide`
and logs its reason verbatim; the roll's record (``runtime.roll_store``) is written before and after each action,
so a cleared task resumes exactly where this roll left the node and acts only on what this roll did. Every step
that touches the cluster first checks that this run holds the cluster lock (``runtime.lock_holding``).

A node kind (``operators.broker_roll``, ``operators.controller_roll``) supplies only what differs, Strimzi's
roles as data: which nodes a task covers (:meth:`NodeRollOperator._choose`), how to see a node alive
(:meth:`~NodeRollOperator._alive`), its gate, its service commands, how to see it gone and back, and the
task's Grid label. What a roll *does* to a node beyond a restart (an upgrade's install step, the needs-action
rule and its facts) comes from the roll's ``kafka_ops.roll_spec.RollSpec``, passed in by the group factories.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk.exceptions import AirflowFailException, AirflowRescheduleException, DownstreamTasksSkipped
from hooks.broker_ssh import step_connection
from kafka_ops.health import Verdict, start_needs_answer
from kafka_ops.profile import ClusterProfile
from kafka_ops.roll import (
    LEFT_ALONE,
    Decision,
    RollRecord,
    clock,
    decide,
    eta_s,
    left_alone_mark,
    names,
    soak_left_ms,
    turn,
    unfinished_before,
)
from kafka_ops.roll_spec import (
    BeforeStart,
    ClusterMode,
    Facts,
    NeedsAction,
    WayBack,
    parse_modes,
    requested,
    ruled_out,
)
from kafka_ops.start_needs import start_again
from runtime import stopping, task_states
from runtime.broker_commands import BrokerCommand, BrokerCommandFailed, connect_ahead
from runtime.grid import flush_labels, show_step
from runtime.host_files import run_on_host
from runtime.kept_clients import kept_open
from runtime.lock_holding import ensure_held, lock_store, release_held
from runtime.params import is_true
from runtime.pending_labels import publish
from runtime.roll_store import RollStore, now_ms
from runtime.run_report import FAILED_STATES
from runtime.start_dependencies import Dependency, all_answer
from runtime.waiting import Check, WaitAborted, WaitTimeout, wait_until
from runtime.window_gate import window_gate

from operators.cluster_operator import ClusterOperator

#: The roll phase written just before a step's command is sent (so a resume knows it may have happened).
SENT = {"stop": "stopping", "start": "starting"}
#: The run's command settings of the steps that run a command, in roll order: (step, setting).
STOP_STEPS = (("pre_stop", "pre_stop"), ("stop", "stop_command"))
PRE_START_STEP = (("pre_start", "pre_start"),)
START_STEP = (("start", "start_command"),)
#: Shortest pause of the waits after an action, seconds (then a quarter of the time waited, up to
#: healthcheck_interval_s: ``runtime.waiting.RAMP_LATE_FRACTION``): 0.1 s four times, then 0.125, 0.16, 0.2 s ...
#: A started broker is usually back in every ISR and leading its preferred partitions again within a few hundred
#: milliseconds (one metadata read each look); with 0.5 s first, each of those two waits took 0.5 s on real Kafka
#: 3.6 / 4.0 (both checked "not yet" once, then passed at the next look).
RAMP_FROM_S = 0.1
#: Instances of a roll's mapped task that may run at once (``max_active_tis_per_dagrun``): the one acting on its
#: nodes, and the next one, started ahead and waiting in its own process until the roll's record says every node
#: before it is done (:meth:`NodeRollOperator._await_turn`). Started only after the previous batch was done, the
#: next one paid the scheduler's hop and its own task start (0.35-0.45 s a batch on the demo's Airflow, measured
#: 2026-11-30) between the previous batch's end and its gate. Acting stays one batch at a time: only the record
#: decides, and ``retries=0`` (an instance waiting to retry would count as not running).
ACTIVE_PER_ROLL = 2
#: The previous instance's states in which the next one waits for its turn in its own process: under the scheduler
#: the two start together or the next one starts while the previous one runs. Any other state of an unfinished
#: previous batch (not started: ``dag.test`` runs instances in no fixed order) reschedules the waiting one; a
#: deferred one (waiting for the maintenance window) sends the waiting one through the window gate itself.
PREVIOUS_UNDER_WAY = frozenset({"running", "queued", "restarting"})
#: How often a waiting instance reads the roll's record while the nodes before it are starting (their last phase
#: before done: registered, caught up, preferred leaders back, soak), seconds: the delay between the previous batch
#: done and this one's gate is half of it on average. One Variable read each (a few ms of the api-server's CPU).
TURN_POLL_STARTING_S = 0.2
#: ... for at most this long after their start was sent, then every :data:`TURN_POLL_S` (a long soak is not read five
#: times a second), seconds.
TURN_FAST_FOR_S = 60.0
#: How often a waiting instance reads the record otherwise, and the previous instance's state (a failed one fails
#: the waiting one at once, nothing of its batch touched), seconds.
TURN_POLL_S = 1.0
#: When an instance that waited for its turn in its task finds the DAG paused at its turn, it reschedules itself this
#: many seconds on (``up_for_reschedule``, its worker slot given back); a paused DAG's scheduler queues no task
#: (``SchedulerJobRunner._executable_task_instances_to_queued``), so it runs again once the DAG is unpaused, seconds.
PAUSED_RETRY_S = 2.0


class NodeExited(Exception):
    """Raised by a node kind's back-wait when a node it started exited again while everything it registers with
    answered: the node's own failure (a bad release, a bad config), which waiting cannot fix; the message says
    so."""


class ChooseAgain(Exception):
    """Raised by a node kind's gate when the task must choose its nodes again (the KRaft quorum leader moved
    onto the controller whose turn it is); the message says why."""


class NodeRollOperator(ClusterOperator):
    """Roll one batch of nodes (mapped over the roll's plan; see the module docstring). Subclasses set
    :attr:`node` and :attr:`item_field` and implement the node-kind hooks below.

    :param roll_id: the roll this batch belongs to (its record's key).
    :param settings: the roll's settings (values or :class:`runtime.params.FromParam`): ``cluster``, ``dry_run``,
        ``healthcheck_interval_s`` (s, default 5), ``healthcheck_timeout_s`` (s, default 900), ``soak_s`` (s),
        ``window_policy``, ``command_timeout_s`` (SSH commands, s, default 300), the command choices
        ``pre_stop``, ``stop_command``, ``pre_start``, ``start_command`` (brokers), and what the node kind reads.
    :param operation: the lock's operation label ("rolling restart").
    :param before_start: / :param needs_action: / :param facts: the roll's hooks, from its
        :class:`kafka_ops.roll_spec.RollSpec` (``needs_action`` is asked once per node the roll has not touched,
        with ``facts(profile, node, settings)`` and the resolved settings; default: every planned node).

    Returns (XCom) what :meth:`_result` makes of the nodes and the action (``"restarted"``, ``"dry run"``, ``"left
    alone"`` or ``"skip"``), with ``marks``: epoch seconds of ``began``, ``stop_sent``, ``gone``, ``start_sent``,
    the node kind's "back" marks and ``done`` (those reached; for a batch, when the last of its nodes got there).
    """

    #: What the nodes are called in every log line and decision ("broker", "controller").
    node = "node"
    #: The constructor argument holding the mapped item (``"batch"``, ``"item"``).
    item_field = "item"
    #: What the task's nodes register with (:meth:`_registers_with`), found once: the gate asks it before a stop,
    #: the start waits for it.
    _found_deps: list[Dependency] | None = None
    #: The hosts this task opened SSH connections to ahead (:meth:`_connect_ahead`).
    _hosts_ahead: frozenset[str] = frozenset()
    #: Start commands sent while the batch's last group stopped, still running (:meth:`_stop_last_starting_others`):
    #: (command, its future), collected by :meth:`_finish_early_starts`.
    _early_starts: tuple[tuple[BrokerCommand, Future], ...] = ()

    def __init__(
        self,
        *,
        roll_id: str,
        settings: dict,
        operation: str = "rolling restart",
        before_start: BeforeStart | None = None,
        needs_action: NeedsAction = requested,
        facts: Facts | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("max_active_tis_per_dagrun", ACTIVE_PER_ROLL)  # set these in .partial() too when mapping:
        kwargs.setdefault("retries", 0)  # an up_for_retry instance would let the next batch start
        super().__init__(settings=settings, **kwargs)
        self.roll_id = roll_id
        self.operation = operation
        self.before_start = before_start
        self.needs_action = needs_action
        self.facts = facts

    # -- the node kind's hooks ----------------------------------------------------------------------------------

    def _configure(self) -> None:
        """Read the node kind's own settings (``self.cfg``) and give the mapped item its Grid label if it has none
        (an item planned by an earlier kafka-ops)."""

    def _position(self) -> int:
        """The task's 0-based position in the roll's batches."""
        raise NotImplementedError

    @property
    def _label_text(self) -> str:
        """The task's Grid label (the item's ``grid_label``)."""
        return str(getattr(self, self.item_field)["grid_label"])

    def _what(self) -> str:
        """What the window gate names: ``"broker 3 (2/3)"``."""
        raise NotImplementedError

    def _planned(self, record: RollRecord, position: int) -> list[int]:
        """The node ids the roll's record plans at ``position``."""
        return record.batches[position]

    def _on_finished(self, record: RollRecord, position: int) -> None:
        """Called when every node of the task is done already (the task skips)."""

    @contextmanager
    def _session(self, profile: ClusterProfile, record: RollRecord) -> Iterator[None]:
        """The cluster clients the batch uses (opened once, closed after the batch, also on failure)."""
        yield

    def _choose(self, store: RollStore, record: RollRecord, position: int) -> tuple[RollRecord, dict[int, dict]]:
        """The nodes this task rolls now: ``{id: node dict ({"id", "host", ...})}`` in roll order, the record
        (a node kind may reorder the roll, saving it)."""
        raise NotImplementedError

    def _alive(self, nodes: Mapping[int, dict]) -> set[int]:
        """The ids of ``nodes`` that are alive now (a dry run may take every node as alive)."""
        raise NotImplementedError

    def _gate(self, record: RollRecord, position: int, nodes: Mapping[int, dict], gated: list[int],
              stopped: list[int]) -> None:
        """Wait until ``gated`` may be stopped (``stopped``: nodes of this batch the roll already stopped); a dry
        run looks once and logs the verdict. May raise :class:`ChooseAgain`."""
        raise NotImplementedError

    def _command(self, step: str, choice: str | None, node: dict) -> BrokerCommand | None:
        """The command of ``step`` on ``node`` for the run's ``choice`` (None: nothing to run)."""
        raise NotImplementedError

    def _stop_groups(self, nodes: Mapping[int, dict]) -> list[list[int]]:
        """The batch's nodes in the groups they stop in, one group after the other (each group's stop sent side by
        side, then waited gone): by default one group, the whole batch."""
        return [list(nodes)]

    def _start_while_last_stops(self, nodes: Mapping[int, dict]) -> bool:
        """Whether a batch stopped in several groups (:meth:`_stop_groups`) starts its earlier groups, gone already,
        while its last group stops (:meth:`NodeRollOperator._stop_last_starting_others`); by default no."""
        return False

    def _disruption_begins(self, nodes: Mapping[int, dict]) -> None:
        """Called once the gate passed (or was passed before a resume), right before the batch's first stop
        command: what was judged healthy before it says nothing about what the stop causes (the broker roll's lag
        streak starts again)."""

    def _wait_gone(self, nodes: Mapping[int, dict]) -> None:
        """Wait until every node of ``nodes`` has stopped."""
        raise NotImplementedError

    def _dry_gone(self, nodes: Mapping[int, dict]) -> None:
        """Log what a real run would wait for to see the nodes gone."""

    def _wait_back(self, record: RollRecord, nodes: Mapping[int, dict]) -> None:
        """Wait until every node of ``nodes`` is back (setting its marks)."""
        raise NotImplementedError

    def _dry_back(self, nodes: Mapping[int, dict], soak: float) -> None:
        """Log what a real run would wait for to see the nodes back."""
        raise NotImplementedError

    def _dependencies(self, nodes: Mapping[int, dict]) -> list[Dependency]:
        """What ``nodes`` register with when they start (``runtime.start_dependencies``: ZooKeeper, the KRaft
        quorum leader), for the run's cluster mode; [] = nothing to wait for."""
        return []

    def _start_needs(self, nodes: Mapping[int, dict], deps: list[Dependency] | None = None) -> Verdict:
        """For a gate: what ``nodes`` register with when started again (:meth:`_dependencies`, found once per task)
        answers now, each asked once (``kafka_ops.health.start_needs_answer``). While it does not, the metadata still
        calls the cluster healthy, but a node stopped then stays down (and its leaders with it) as long as the outage
        lasts; the start would wait for it (:meth:`_start`), the stop must not happen. Raises what finding them raises
        (the cluster mode's read). ``deps``: what they register with, found already (None: found here)."""
        deps = self._registers_with(nodes) if deps is None else deps
        return start_needs_answer([c.message for c in (d.answers() for d in deps) if not c.ok])

    def _registers_with(self, nodes: Mapping[int, dict]) -> list[Dependency]:
        """:meth:`_dependencies`, found once per task (the gate and the start ask the same); none found (no running
        broker named ZooKeeper's address) is found again at the next call."""
        if not self._found_deps:
            self._found_deps = self._dependencies(nodes)
        return self._found_deps

    def _now(self, record: RollRecord, ids: list[int]) -> dict[int, str]:
        """How each node of ``ids`` is now, for a failure's last words ("DOWN", "running")."""
        raise NotImplementedError

    def _after_roll(self, store: RollStore, record: RollRecord, acted: list[int]) -> RollRecord:
        """The record after the batch's steps, before its nodes are marked done."""
        return record

    def _result(self, ids: list[int], action: str) -> dict:
        """The task's XCom for ``ids`` and ``action`` (``marks`` added for a batch that ran)."""
        return {"nodes": ids, "action": action}

    # -- shared helpers -------------------------------------------------------------------------------------------

    def _sleep(self, seconds: float) -> None:
        """Sleep, waking at once when the task is told to stop (``runtime.stopping``), then raising there."""
        stopping.pause(seconds)
        stopping.check(f"going on after a pause of {seconds:.1f} s")

    def _monotonic(self) -> float:
        return time.monotonic()

    def _previous_state(self, context: Any, position: int) -> str | None:
        """The state of this task's instance at ``position - 1`` in this run (None: not set, or position 0)."""
        if position <= 0:
            return None
        ti = context["ti"]
        return task_states.in_this_run(ti, [ti.task_id]).get(task_states.instance_key(ti.task_id, position - 1))

    def _await_turn(self, context: Any, store: RollStore, record: RollRecord,
                    position: int) -> tuple[RollRecord, Decision]:
        """Wait in this process until the batch at ``position`` may begin (:func:`kafka_ops.roll.turn`: every node of
        the batches before it done in the roll's record, and their soak over) and return (the record read then,
        ``turn``'s decision: ``act``, or ``fail`` when the previous instance failed or was marked failed first with a
        node unfinished). A soak alone is waited out here whatever the state of its task (read again right after
        its end).

        While the previous instance is under way (:data:`PREVIOUS_UNDER_WAY`; :data:`ACTIVE_PER_ROLL` lets the
        scheduler start this one beside it) the record is read every :data:`TURN_POLL_STARTING_S` while the nodes
        before it are starting (then every :data:`TURN_POLL_S`), the previous state every :data:`TURN_POLL_S`. A
        deferred previous instance waits for the maintenance window: this one goes through the window gate too
        (deferred as well while the window is closed). An unfinished previous batch whose instance is in no such state
        (not started: ``dag.test``) reschedules this task in 2 s, as before. A turn that came after waiting finds the
        DAG paused: the task reschedules itself, its nodes untouched (:meth:`_give_back_while_paused`).

        :raises AirflowFailException: the record went missing or no longer has this position (its plan changed).
        :raises AirflowRescheduleException: the previous batch is unfinished and its instance not under way, or the
            DAG is paused when the turn comes.
        """
        state = self._previous_state(context, position)
        state_read = self._monotonic()
        waited: float | None = None
        said = ""
        while True:
            decision = turn(position, record, state in FAILED_STATES, node=self.node)
            if decision.action != "skip":
                if waited is not None:
                    self.log.info("%s: waited %.1f s for its turn", names(self._planned(record, position), self.node),
                                  self._monotonic() - waited)
                    if decision.action == "act" and self._dag_paused(context):
                        self._give_back_while_paused(record, position)
                return record, decision
            if unfinished_before(position, record):
                # the nodes before it are the previous instance's to finish (a soak alone is waited out here,
                # whatever its task's state)
                if state == "deferred":
                    window_gate(self, context, what=self._what(), policy=str(self.setting("window_policy")),
                                dry_run=self.dry_run, label=self._show)
                elif state not in PREVIOUS_UNDER_WAY:
                    self.log.info("%s", decision.reason)
                    raise AirflowRescheduleException(datetime.now(UTC) + timedelta(seconds=2))
            if waited is None:
                waited = self._monotonic()
                self.log.info("%s (started ahead of its turn: it waits in its task)", decision.reason)
                self._warm_up_quietly(context)
            if decision.reason != said:
                said = decision.reason
                self._show(said.split(": ", 1)[-1])
            self._sleep(self._turn_poll_s(record, position))
            record = store.load()
            if record is None or not 0 <= position < len(record.batches):
                raise AirflowFailException(f"roll {self.roll_id!r}: its record changed while this task waited for its "
                                           "turn (no longer planning this position): clear the plan task")
            if self._monotonic() - state_read >= TURN_POLL_S:
                state, state_read = self._previous_state(context, position), self._monotonic()

    def _dag_paused(self, context: Any) -> bool:
        """Whether this task's DAG is paused now (the task SDK's ``get_dag``: the execution API's view of the DAG).
        Unknown (the call failed) counts as not paused, logged: the scheduler started this task unpaused."""
        try:
            ti = context["ti"]
            return bool(ti.get_dag(ti.dag_id).is_paused)
        except Exception as exc:  # noqa: BLE001 - a pause it cannot see is Airflow's own behaviour, said in the log
            self.log.warning("could not read whether the DAG is paused (%s): going on", exc)
            return False

    def _give_back_while_paused(self, record: RollRecord, position: int) -> None:
        """The turn came while the DAG is paused: touch nothing, free the worker slot and come back once it is
        unpaused. Airflow's pause only holds tasks not started yet, and this one started ahead of its turn to wait
        in its process (:data:`ACTIVE_PER_ROLL`); without this the next batch of a paused roll would still be
        restarted.

        :raises AirflowRescheduleException: always (``up_for_reschedule`` in :data:`PAUSED_RETRY_S`).
        """
        who = names(self._planned(record, position), self.node)
        self.log.info("%s: its turn, but the DAG is paused: nothing touched; this task gives its worker slot back "
                      "and goes on once the DAG is unpaused", who)
        self._show("paused: goes on once the DAG is unpaused")
        raise AirflowRescheduleException(datetime.now(UTC) + timedelta(seconds=PAUSED_RETRY_S))

    def _warm_up(self, context: Any) -> None:
        """Called once when this task begins to wait for its turn (:meth:`_await_turn`): open what the batch will
        use first (the node kind's clients, the cluster's mode, the configs its gate reads, the SSH connections to its
        hosts), so that its gate comes right after its turn instead of after those connections. Nothing here may
        act on the cluster or write the roll's record. Default: nothing."""

    def _warm_up_quietly(self, context: Any) -> None:
        """:meth:`_warm_up`, then the cluster's lock store opened (kept for the lock checks after the turn); best
        effort: a failure is logged and left to the batch's own steps, which open the same things again and report it
        where it matters."""
        try:
            self._warm_up(context)
            if not self.dry_run:
                with lock_store(self.profile):  # kept open for the lock checks after the turn (kept_open)
                    pass
        except Exception as exc:  # noqa: BLE001 - the steps after the turn meet the same error and say so
            self.log.info("while waiting for its turn, could not open the batch's clients ahead: %s", exc)

    @staticmethod
    def _turn_poll_s(record: RollRecord, position: int) -> float:
        """The pause before the next read of the record while waiting for the turn at ``position``, seconds."""
        soak_ms = soak_left_ms(position, record, now_ms())
        if soak_ms:  # the next read right after the soak's end (its task marks the nodes done again by then)
            return min(TURN_POLL_S, max(TURN_POLL_STARTING_S / 4, soak_ms / 1000))
        pending = [record.progress(n) for n in unfinished_before(position, record)]
        starting = [p for p in pending if p is not None and p.phase == "starting"]
        if starting and len(starting) == len(pending) and \
                now_ms() - min(p.at_ms for p in starting) <= TURN_FAST_FOR_S * 1000:
            return TURN_POLL_STARTING_S
        return TURN_POLL_S

    def _wait(self, check: Callable[[], Check], what: str, not_yet: str | None = None, ramp: bool = True) -> Check:
        """Wait for ``check``; ``ramp`` polls quickly first (every 0.1 s, then a quarter of the time waited, up to the
        interval: :data:`RAMP_FROM_S`): a node is usually gone, back and caught up within seconds of the action. A
        timeout or a fatal error fails the task with the reason; a :class:`ChooseAgain` raised by ``check`` comes
        through as itself."""
        try:
            return wait_until(check, what=what, interval_s=self.interval_s, timeout_s=self.timeout_s, log=self.log,
                              not_yet=not_yet, ramp_from_s=RAMP_FROM_S if ramp else None, sleep=self._sleep)
        except WaitAborted as exc:
            if isinstance(exc.__cause__, ChooseAgain):
                raise exc.__cause__ from None
            if isinstance(exc.__cause__, NodeExited):
                raise AirflowFailException(str(exc.__cause__)) from exc
            raise AirflowFailException(str(exc)) from exc
        except WaitTimeout as exc:
            raise AirflowFailException(str(exc)) from exc

    def _ask(self, call: Callable[[], Any], what: str) -> Any:
        """``call()``, waiting out transient errors up to the health-check timeout (fails the task after it)."""
        return self.ask(call, what, sleep=self._sleep)

    def _show(self, step: str) -> None:
        """The step in the task's Grid label, sent without waiting (flushed before the task ends: :meth:`execute`)."""
        show_step(self._context, f"{self._label_text} · {step}", wait=False)

    def _acting(self, step: str, record: RollRecord, nodes: Mapping[int, dict]) -> list[int]:
        """The nodes ``step`` acts on now (each decision logged; a refusal fails the batch)."""
        alive = set() if step == "wait_gone" else self._alive(nodes)  # that rule reads only the record
        chosen = []
        for nid in nodes:
            d = decide(step, nid, record, nid in alive, node=self.node)
            if d.action == "fail":
                raise AirflowFailException(d.reason)
            if d.action == "skip":
                self.log.info("%s", d.reason)
            else:
                chosen.append(nid)
        return chosen

    def _meanwhile(self) -> float | None:
        """Side work done while a step's commands run on the hosts (a stop's controlled shutdown, a start that returns
        once the node runs: seconds each); returns the seconds until it wants to be called again, None for never
        (the default: nothing to do)."""
        return None

    def _connect_ahead(self, nodes: Mapping[int, dict]) -> None:
        """Open the SSH connections to ``nodes``' hosts in the background while the gate waits (kept for the stop:
        ``hooks.broker_ssh.ConnectionPool``), so the stop does not wait for a key exchange. A failure here is only
        logged: the stop's own command reports it. Hosts this task already connected to ahead (while it waited for its
        turn) are not asked again: that would read the Airflow connection once more (0.05-0.6 s on loaded cores)
        between the turn and the gate, for connections the pool keeps already; the stop's own step reads it anew."""
        if self.dry_run:
            return
        hosts = [h for h in (str(n["host"]) for n in nodes.values()) if h not in self._hosts_ahead]
        if hosts:
            connect_ahead(self.profile.ssh_conn_id, hosts, self.log)
            self._hosts_ahead = self._hosts_ahead | set(hosts)

    def _run_all(self, chosen: list[BrokerCommand], who: str | None) -> None:
        """Run one step's commands, side by side when there are several, each in a thread of its own while the task's
        thread does :meth:`_meanwhile`; the first failure is raised after every command has ended (a half-sent batch
        stop must not leave commands running unobserved)."""
        failed = self._run_each(chosen, who)
        if failed:
            raise failed[0][1]

    def _run_each(self, chosen: list[BrokerCommand], who: str | None) -> list[tuple[BrokerCommand, BaseException]]:
        """:meth:`_run_all`'s commands, side by side; returns each failed command with its error, in ``chosen``'s
        order, once every command has ended."""
        futures = self._send(chosen, who)
        self._await_commands(futures)
        return [(c, f.exception()) for c, f in zip(chosen, futures, strict=True) if f.exception() is not None]

    def _send(self, chosen: list[BrokerCommand], who: str | None) -> list[Future]:
        """Start ``chosen`` side by side, each in a thread of its own (the step's SSH connection settings read once);
        returns their futures (each ``run``'s exit code or error)."""
        ssh_conn_id = self.profile.ssh_conn_id
        conn = None if self.dry_run else step_connection(ssh_conn_id)  # read once for the step's hosts
        pool = ThreadPoolExecutor(max_workers=min(len(chosen), 16))
        try:
            return [pool.submit(c.run, ssh_conn_id, self.ssh_timeout_s, self.log, self.dry_run, who, conn)
                    for c in chosen]
        finally:
            pool.shutdown(wait=False)  # its threads end with their commands

    def _await_commands(self, futures: list[Future]) -> None:
        """Until every command of ``futures`` has ended; the task's thread does the roll's side work meanwhile
        (:meth:`_meanwhile`)."""
        pending = set(futures)
        while pending:
            _, pending = wait(pending, timeout=None if self.dry_run else self._meanwhile())

    # -- the batch ------------------------------------------------------------------------------------------------

    def execute(self, context: Any) -> dict:
        try:
            with kept_open():  # its lock checks share one lock store, its ZooKeeper checks one session (kept_clients)
                return self._execute(context)
        finally:  # the step labels sent without waiting reach Airflow before the task's own last label
            flush_labels(2.0)

    def _execute(self, context: Any) -> dict:
        cfg = self.resolve(context)
        self._context = context
        self._configure()
        self.ssh_timeout_s = float(self.setting("command_timeout_s"))
        position = self._position()
        store = RollStore(context, self.roll_id)
        self._store = store
        record = store.load()
        self._deps, self._first_start, self._pending_start = [], time.monotonic(), set()
        self._found_deps = None
        self._hosts_ahead = frozenset()
        self._early_starts = ()
        self._batch_nodes: dict[int, dict] = {}
        if record is None:
            raise AirflowFailException(f"roll {self.roll_id!r} has no frozen plan: its plan task has not run in this "
                                       "run, or kafka_ops_roll_records_cleanup deleted the run's records (keep_days "
                                       "after it ended): clear the plan task too, or trigger a new run")
        if not 0 <= position < len(record.batches):
            raise AirflowFailException(f"roll {self.roll_id!r} has {len(record.batches)} {self.node} batches; this "
                                       f"task is position {position + 1}: its plan changed, clear the plan task")
        record, decision = self._await_turn(context, store, record, position)
        if decision.action == "fail":
            raise AirflowFailException(decision.reason)
        planned = self._planned(record, position)
        finished = [n for n in planned if record.is_done(n)]
        for nid in finished:
            p = record.progress(nid)
            self.log.info("%s %s: skip: finished in roll %r at %s (%s)", self.node, nid, self.roll_id, clock(p.at_ms),
                          p.reason)
        if len(finished) == len(planned):
            self._on_finished(record, position)
            return self._result(planned, "skip")
        self.log.info("%s", decision.reason)
        if all(record.phase(n) in (None, "done") for n in planned):  # a batch that began finishes, window or not
            window_gate(self, context, what=self._what(), policy=str(self.setting("window_policy")),
                        dry_run=self.dry_run, label=self._show)
        self.marks: dict[str, float] = {"began": time.time()}
        profile = self.profile  # fails the task on a bad connection before anything is touched
        who = getattr(context.get("dag_run"), "triggering_user_name", None)
        self._who = who
        begun = time.monotonic()
        with self._session(profile, record):
            try:
                record, acted = self._roll(context, cfg, store, record, position, who)
            except (AirflowFailException, BrokerCommandFailed) as exc:
                # start commands sent while the last group stopped end before the state is told (or a node reverted)
                self._await_commands([f for _, f in self._early_starts])
                reverted = "" if self.dry_run else self._revert_if_asked(store, store.load() or record, position)
                left = self._left_state(store.load() or record, position, bool(reverted))
                if not self.dry_run:
                    release_held(self.profile, context, self.log, f"the roll stops at this {self.node}")
                raise AirflowFailException(f"{exc}{reverted}{left}") from exc
            record = self._after_roll(store, record, acted)
        took = time.monotonic() - begun
        record = store.mark_all(record, acted, "done", "dry run" if self.dry_run else "restarted", took)
        ids = self._planned(record, position)  # a controller roll may have put another node at this position
        self._report(record, ids)
        self.marks["done"] = time.time()
        mark = left_alone_mark(record, ids, self.node)
        if mark:  # the label the task ends with (map_index_template): a green task is a restart only where it was
            item = getattr(self, self.item_field)
            setattr(self, self.item_field, {**item, "grid_label": f"{item['grid_label']} · {mark}"[:250]})
        action = "dry run" if self.dry_run else "left alone" if mark == LEFT_ALONE else "restarted"
        return {**self._result(ids, action), "marks": self.marks}

    def execute_in_window(self, context: Any, event: Any = None) -> dict:
        """Resumed by the window gate's trigger when the next maintenance window opens: the batch from its start
        (turn, gate, ...), the window checked again."""
        return self.execute(context)

    def _left_alone(self, store: RollStore, record: RollRecord, nodes: dict[int, dict],
                    cfg: Mapping[str, Any]) -> RollRecord:
        """Ask the needs-action rule about every untouched, alive node of ``nodes``; the nodes it leaves alone are
        marked done (with its reason) and dropped from ``nodes``."""
        alive = self._alive(nodes)
        for nid in list(nodes):
            if record.phase(nid) is None and nid in alive:
                facts = self.facts(self.profile, nodes[nid], cfg) if self.facts else {}
                act, why = self.needs_action(nid, facts, cfg)
                if not act:
                    self.log.info("%s %s: left alone: %s", self.node, nid, why)
                    record = store.mark(record, nid, "done", f"{LEFT_ALONE}: {why}")
                    del nodes[nid]
                    continue
                self.log.warning("%s %s: rolling it due to: %s", self.node, nid, why)
        return record

    def _roll(self, context: Any, cfg: Mapping[str, Any], store: RollStore, record: RollRecord, position: int,
              who: str | None) -> tuple[RollRecord, list[int]]:
        """Every step for the batch's unfinished nodes; returns the record and the nodes acted on."""
        for _ in range(len(record.order) + 1):
            record, nodes = self._choose(store, record, position)
            self._batch_nodes = dict(nodes)
            record = self._left_alone(store, record, nodes, cfg)
            if not nodes:
                return record, []
            if not self.dry_run:
                ensure_held(self.profile, context, self.operation, self.log)
            gated = list(nodes) if self.dry_run else self._acting("gate", record, nodes)
            if not gated:
                break
            try:
                self._show("gate")
                self._connect_ahead({n: nodes[n] for n in gated})
                self._gate(record, position, nodes, gated, [n for n in nodes if n not in gated])
                break
            except ChooseAgain as again:
                self.log.warning("%s: choosing again", again)
        else:
            raise AirflowFailException(f"roll {self.roll_id!r}: the {self.node} whose turn it was had to go later "
                                       f"{len(record.order) + 1} times in a row: not stopping any")
        stopping.check(f"stopping {names(list(nodes), self.node)}")
        self._disruption_begins(nodes)
        # from the stop on, a stop request from outside waits until the batch's start was sent (runtime.stopping):
        # a click in the UI must not leave a node down
        with stopping.in_flight(f"{names(list(nodes), self.node)} (stopped by this task)"):
            groups = self._stop_groups(nodes)
            overlap = (len(groups) > 1 and not self.dry_run and self.before_start is None
                       and self._start_while_last_stops(nodes))
            started_early: list[int] = []
            for i, group in enumerate(groups):
                going_down = {n: nodes[n] for n in group}
                if overlap and i == len(groups) - 1:
                    others = {n: nodes[n] for n in nodes if n not in going_down}
                    record, started_early = self._stop_last_starting_others(context, cfg, store, record, going_down,
                                                                            others, who)
                else:
                    record = self._commands(context, cfg, store, record, going_down, STOP_STEPS, who)
                # gone
                if self.dry_run:
                    self._dry_gone(going_down)
                    continue
                going = self._acting("wait_gone", record, going_down)
                if going:
                    self._show("gone?")
                    self._wait_gone({n: nodes[n] for n in going})
                    self.marks["gone"] = time.time()
                    record = store.mark_all(record, going, "stopped")
            # before start
            if self.before_start is not None and self.dry_run:
                self.log.info("DRY RUN: would run the roll's before-start step on %s", names(list(nodes), self.node))
            elif self.before_start is not None:
                preparing = self._acting("before_start", record, nodes)
                if preparing:
                    self._show("before start")
                for nid in preparing:
                    way_back = self.before_start(self.profile, nodes[nid], cfg, self.log, False)
                    record = store.mark(record, nid, "prepared",
                                        way_back=None if way_back is None else way_back.to_dict())
            record = self._start(context, cfg, store, record,
                                 {n: node for n, node in nodes.items() if n not in started_early}, who)
            record = self._finish_early_starts(context, cfg, store, record, nodes, who)
        soak = float(self.setting("soak_s"))
        if self.dry_run:
            self._dry_back(nodes, soak)
            return record, list(nodes)
        self._wait_back(record, nodes)
        if soak > 0:
            # back in every ISR: a run stopped during the soak must not leave the node recorded as starting
            # the next batch waits for the soak's end (kafka_ops.roll.turn), also if this task is stopped meanwhile
            record = store.mark_all(record, nodes, "done", "restarted, back in every ISR; soaking", soak_s=soak)
            self._show(f"soak {soak:.0f} s")
            self.log.info("%s: soaking %.0f s", names(list(nodes), self.node), soak)
            self._sleep(soak)
        return record, list(nodes)

    def _start(self, context: Any, cfg: Mapping[str, Any], store: RollStore, record: RollRecord,
               nodes: Mapping[int, dict], who: str | None) -> RollRecord:
        """Pre-start, then start; before the start, wait until what the nodes register with answers (a node started
        while ZooKeeper or the quorum leader does not answer exits: ``kafka_ops.start_needs``). A start that fails
        while that service does not answer is sent again once it answers, within ``healthcheck_timeout_s`` of the
        first start (``kafka_ops.start_needs.start_again``); one that fails while it answers stops the roll."""
        record = self._commands(context, cfg, store, record, nodes, PRE_START_STEP, who)
        deps = [] if self.dry_run or not self._to_start(record, nodes) else self._registers_with(nodes)
        if deps and stopping.finishing() is None:  # told to stop: the start goes at once, no wait before it
            self._await_dependencies(deps, nodes, "before starting")
        began = time.monotonic()
        self._deps, self._first_start, self._pending_start = deps, began, set()
        while True:
            try:
                return self._commands(context, cfg, store, record, nodes, START_STEP, who)
            except BrokerCommandFailed as exc:
                record = store.load() or record
                now = all_answer(deps) if deps else None
                if now is None or not start_again(now.ok, time.monotonic() - began, self.timeout_s):
                    raise
                self.log.warning("%s: the start failed while %s (%s); starting again once it answers",
                                 names(list(nodes), self.node), now.message, exc)
                self._await_dependencies(deps, nodes, "before starting again")

    def _stop_last_starting_others(self, context: Any, cfg: Mapping[str, Any], store: RollStore, record: RollRecord,
                                   last: Mapping[int, dict], others: Mapping[int, dict],
                                   who: str | None) -> tuple[RollRecord, list[int]]:
        """The last stop group's stop (``last``: the ZooKeeper-mode controller, once its batch-mates are gone) with the
        start of the batch's other nodes, gone already, sent at the same time: the controller's controlled shutdown
        and its mates' JVM starts overlap instead of following each other. First the last group's pre-stop (a failure
        leaves it untouched, as without the overlap), the others' pre-start and what they register with
        (``_registers_with``: ZooKeeper answers). The others' start commands run on in the background (a start command
        may return only once its node runs: seconds on a loaded host) while this returns as soon as the stop commands
        did, so the last group is waited gone and started without waiting for them; :meth:`_finish_early_starts`
        collects them before the batch's back-waits. Returns the record and the nodes whose start was sent. A failed
        stop is raised once the starts ended too. Told to stop from outside (``runtime.stopping``): no overlap, the
        stop step says why it sends nothing."""
        if stopping.finishing() is not None:
            return self._commands(context, cfg, store, record, last, STOP_STEPS, who), []
        record = self._commands(context, cfg, store, record, last, STOP_STEPS[:1], who)
        record = self._commands(context, cfg, store, record, others, PRE_START_STEP, who)
        deps = self._registers_with(others) if self._to_start(record, others) else []
        if deps:
            self._await_dependencies(deps, others, "before starting")
        stops = self._chosen("stop", "stop_command", cfg, record, last)
        starts = self._chosen("start", "start_command", cfg, record, others)
        if not stops or not starts:  # nothing to overlap (a resumed batch): one step after the other
            record = self._commands(context, cfg, store, record, last, STOP_STEPS[1:], who)
            return record, []
        ensure_held(self.profile, context, self.operation, self.log)
        stopped, started = [c.broker_id for c in stops], [c.broker_id for c in starts]
        by = who or "this run"
        record = store.mark_all(record, stopped, SENT["stop"], f"stop sent by {by}")
        record = store.mark_all(record, started, SENT["start"],
                                f"start sent by {by} while {names(stopped, self.node)} stopped")
        self.marks["stop_sent"] = self.marks["start_sent"] = time.time()
        self.log.info("stopping %s while starting %s (gone already)", names(stopped, self.node),
                      names(started, self.node))
        self._show("stop + start")
        self._early_starts = tuple(zip(starts, self._send(starts, who), strict=True))
        failed = self._run_each(stops, who)
        if failed:
            self._await_commands([f for _, f in self._early_starts])  # none left running unobserved
            raise failed[0][1]
        return record, started

    def _finish_early_starts(self, context: Any, cfg: Mapping[str, Any], store: RollStore, record: RollRecord,
                             nodes: Mapping[int, dict], who: str | None) -> RollRecord:
        """Wait for the start commands :meth:`_stop_last_starting_others` left running; a node whose start failed
        there is started again now (:meth:`_start`: with its retry while what it registers with does not answer)."""
        early, self._early_starts = self._early_starts, ()
        if not early:
            return record
        self._await_commands([f for _, f in early])
        failed = {c.broker_id: f.exception() for c, f in early if f.exception() is not None}
        for nid, exc in failed.items():
            self.log.warning("%s %s: its start sent while the last group stopped failed (%s): starting it again",
                             self.node, nid, exc)
        if not failed:
            return record
        return self._start(context, cfg, store, store.load() or record, {n: nodes[n] for n in failed}, who)

    def _chosen(self, step: str, setting: str, cfg: Mapping[str, Any], record: RollRecord,
                nodes: Mapping[int, dict]) -> list[BrokerCommand]:
        """``step``'s commands (the run's ``setting``) for the nodes it acts on now (``_acting``: each decision
        logged; a dry run: every node); a pre-step not asked for: none, no decision, no status read."""
        commands = {n: self._command(step, cfg.get(setting), nodes[n]) for n in nodes}
        if not any(commands.values()):
            return []
        targets = list(nodes) if self.dry_run else self._acting(step, record, nodes)
        return [commands[n] for n in targets if commands[n] is not None]

    def _exited(self, nid: int, node: dict, said: str) -> Check:
        """What a back-wait does about node ``nid`` whose service stopped after this roll started it (``said``: what
        its status command printed): when what it registers with does not answer (an outage explains the exit),
        the node is started again once it answers (a later call sends the start); otherwise :class:`NodeExited`.
        Returns the wait's verdict for now."""
        who = f"{self.node} {nid}"
        answer = all_answer(self._deps) if self._deps else None
        if nid not in self._pending_start:
            if answer is None or not start_again(answer.ok, time.monotonic() - self._first_start, self.timeout_s):
                why = "" if answer is None else f"; {answer.message}"
                raise NodeExited(f"{who} exited after its start (service status: {said}){why}: it does not come "
                                 "back by itself")
            self._pending_start.add(nid)
            self.log.warning("%s exited after its start while %s: starting it again once it answers", who,
                             answer.message)
        if answer is not None and not answer.ok:
            return Check(False, f"{who} is down: not starting it again yet: {answer.message}")
        self._commands(self._context, self.cfg, self._store, self._store.load(), {nid: node}, START_STEP, self._who)
        self._pending_start.discard(nid)
        return Check(False, f"{who}: started again ({answer.message if answer else 'nothing to wait for'})")

    def _to_start(self, record: RollRecord, nodes: Mapping[int, dict]) -> list[int]:
        """The nodes the start step would act on now (nothing logged: the start step logs its own decisions)."""
        alive = self._alive(nodes)
        return [n for n in nodes if decide("start", n, record, n in alive, node=self.node).action == "act"]

    def _await_dependencies(self, deps: list[Dependency], nodes: Mapping[int, dict], when: str) -> None:
        what = " and ".join(d.name for d in deps)
        self._show(" + ".join(d.short for d in deps) + "?")
        self._wait(lambda: all_answer(deps), f"{what} answers {when} {names(list(nodes), self.node)}",
                   not_yet=f"not starting {names(list(nodes), self.node)} yet")

    def _commands(self, context: Any, cfg: Mapping[str, Any], store: RollStore, record: RollRecord,
                  nodes: Mapping[int, dict], steps: tuple[tuple[str, str], ...], who: str | None) -> RollRecord:
        """Run the steps' commands on the batch's nodes side by side; before the main one (stop / start) check the
        lock and record it."""
        for step, setting in steps:
            if step in ("pre_stop", "stop") and (back := stopping.finishing()) is not None:
                self.log.warning("told to stop from outside: %s not stopped (bringing back %s first)",
                                 names(list(nodes), self.node), back)
                continue
            chosen = self._chosen(step, setting, cfg, record, nodes)
            if not chosen:
                continue
            if step in SENT and not self.dry_run:
                ensure_held(self.profile, context, self.operation, self.log)
                record = store.mark_all(record, [c.broker_id for c in chosen], SENT[step],
                                        f"{step} sent by {who or 'this run'}")
                self.marks[f"{step}_sent"] = time.time()
            # after the lock check and the record's write: the label (sent without waiting) shares their channel to
            # the api-server, so it goes out while the commands run instead of ahead of those two requests
            self._show(step.replace("_", "-"))
            self._run_all(chosen, who)
        return record

    def _left_state(self, record: RollRecord, position: int, reverted: bool = False) -> str:
        """What the failure leaves behind, for the task's last error line: each node the roll left unfinished, how
        it is now, its record, and the way back from what the roll changed on it."""
        planned = self._planned(record, position)
        touched = [n for n in planned if record.phase(n) not in (None, "done")]
        if not touched:
            return " (clearing this task rolls it again)" if reverted else \
                f" ({names(planned, self.node)} not stopped by this roll)"
        now = self._now(record, touched)
        parts = []
        for nid in touched:
            progress = record.progress(nid)
            part = f"{self.node} {nid} is {now[nid]}; this roll's record: {progress.phase} at {clock(progress.at_ms)}"
            way_back = WayBack.from_dict(progress.way_back)
            if way_back is not None:
                host = next((s.get("host") for s in record.steps if int(s["id"]) == nid), "its host")
                part += (f"; the way back: {way_back.what}: run `{way_back.command}` on {host}, then start it"
                         + (" and elect its preferred leaders (kafka-leader-election.sh --election-type PREFERRED)"
                            if self.node == "broker" else "")
                         + " (or trigger with revert_failed_broker to have the run do it)")
            parts.append(part)
        untouched = [n for n in planned if record.phase(n) is None]
        if untouched:  # a batch stopped in groups (the controller last): what it did not reach
            parts.append(f"{names(untouched, self.node)} not stopped by this roll")
        return f" ({'; '.join(parts)}; clearing this task resumes it from there)"

    def _revert_if_asked(self, store: RollStore, record: RollRecord, position: int) -> str:
        """With ``revert_failed_broker``: put every node of the batch that the roll changed and could not bring
        back (prepared or starting, with a way back) as it was: stop it, run its way back, start it, wait until
        it is back; its record is then cleared (a resumed roll judges it afresh). Returns the sentence for the
        failure ("" when nothing was reverted or it was not asked for)."""
        if not is_true(self.setting("revert_failed_broker")):
            return ""
        nodes = self._batch_nodes
        failed = {n: WayBack.from_dict(record.progress(n).way_back) for n in self._planned(record, position)
                  if n in nodes and record.phase(n) in ("prepared", "starting") and record.progress(n).way_back}
        said = []
        for nid, way_back in failed.items():
            who = f"{self.node} {nid}"
            self.log.warning("%s: revert_failed_broker: %s", who, way_back.what)
            try:
                self._show("revert")
                ensure_held(self.profile, self._context, self.operation, self.log)
                self._run_all([self._command("stop", self.cfg.get("stop_command"), nodes[nid])], None)
                run_on_host(self.profile, nodes[nid], way_back.command, "the way back")
                self._run_all([self._command("start", self.cfg.get("start_command"), nodes[nid])], None)
                self._first_start, self._pending_start = time.monotonic(), set()
                self._wait_back(record, {nid: nodes[nid]})
            except Exception as exc:  # noqa: BLE001 - the failure says the revert failed, and how
                said.append(f"{who}: the revert failed: {exc}")
                continue
            record = record.reverted(nid)
            store.save(record)
            said.append(f"{who} reverted ({way_back.what}) and back in the cluster")
        return f"; revert_failed_broker: {'; '.join(said)}" if said else ""

    def _report(self, record: RollRecord, ids: list[int]) -> None:
        done, total = len(record.finished()), len(record.order)
        left = eta_s(record)
        finish = "" if left is None or done == total else (
            f"; about {left / 60:.1f} min left, done near {clock(int((time.time() + left) * 1000))}")
        self.log.info("roll %r: %s done; %d/%d %ss done%s", self.roll_id, names(ids, self.node), done, total,
                      self.node, finish)


class RollPlanBase(ClusterOperator):
    """What the plan task of every node roll shares (``operators.roll_plan.RollPlanOperator`` for brokers,
    ``operators.controller_roll.ControllerPlanOperator`` for KRaft controllers): the roll it plans, the cluster modes
    it exists in, the Grid labels it publishes for the mapped task, and an empty plan frozen when there is nothing to
    roll (a resumed run then plans nothing again).

    :param roll_id: the roll's id (its record's key).
    :param modes: the cluster modes the roll exists in (``kafka_ops.roll_spec.ClusterMode`` or their values; None =
        every mode); in another mode (the run's) the plan logs ``skip_reason`` and returns no item (the mapped task
        is then *skipped*).
    :param skip_reason: the line logged when the mode rules the roll out.
    :param labels_for: the id of the task mapped over the plan: the plan publishes each of its instances' Grid
        labels for the scheduler (``runtime.pending_labels``); None publishes nothing. An empty plan skips that task
        itself as it ends (Airflow's ``DownstreamTasksSkipped``; the plan task succeeds): left to the scheduler, a
        mapped task over an empty list is skipped one scheduler loop later (0.2-0.5 s on the demo's Airflow) and
        what follows waits one loop more (a ZooKeeper-mode rolling restart's empty controller roll, the upgrade's
        phases that plan nothing). What follows the mapped task may then start before the plan's side-by-side
        siblings end: it must wait for them itself (``groups.cluster_guard`` wires that: the rolling restart's broker
        task waits for the preflight).
    """

    ui_color = "#eeeeee"

    def __init__(self, *, roll_id: str, settings: dict, modes: Any = None, skip_reason: str = "",
                 labels_for: str | None = None, **kwargs: Any) -> None:
        super().__init__(settings=settings, **kwargs)
        self.roll_id = roll_id
        self.modes = parse_modes(modes)
        self.skip_reason = skip_reason
        self.labels_for = labels_for

    def execute(self, context: Any) -> list[dict]:
        items = publish(context, self.labels_for, self._plan(context, self.resolve(context)))
        if not items and self.labels_for:
            self.log.info("roll %r has nothing to do: %s is skipped now", self.roll_id, self.labels_for)
            raise DownstreamTasksSkipped(tasks=[self.labels_for])
        return items

    def _plan(self, context: Any, cfg: dict) -> list[dict]:
        raise NotImplementedError

    def _nothing(self, store: RollStore, why: str, logged: str | None = None) -> list[dict]:
        """Log ``logged`` (default ``why``), freeze an empty plan that keeps ``why`` (the closing note says it),
        return no item."""
        self.log.info("%s", logged or why)
        store.save(RollRecord(self.roll_id, now_ms(), empty_because=why))
        return []

    def _mode_or_nothing(self, context: Any, admin: Any, store: RollStore) -> ClusterMode | None:
        """The run's cluster mode, or None after freezing an empty plan when that mode rules the roll out."""
        mode = self.mode(context, admin)
        out = ruled_out(self.modes, self.skip_reason, mode)
        if out is not None:
            self._nothing(store, out, f"{out}: roll {self.roll_id!r} plans nothing")
            return None
        return mode
