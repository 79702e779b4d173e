"""One batch of a broker roll (one broker, or brokers that may be down together) as one mapped task, on the loop
every node roll shares (``operators.node_roll``): turn -> needs action? -> gate -> pre-stop -> stop -> gone ->
before-start -> pre-start -> start -> registered -> caught up -> preferred leaders back -> soak. The brokers of a
batch go through each step together (their commands run side by side); a serial roll has one broker per batch.

What is a broker's own: alive = registered in the cluster metadata; the gate (cluster healthy and min-ISR safe
without the batch, plus the Burrow lag gate); gone = out of the metadata; back = registered, in every ISR again,
leading its preferred partitions (preferred leader election, KIP-460); the run's command choices
(``pre_stop``, ``stop_command``, ``pre_start``, ``start_command``) over the profile's commands.

A KRaft combined node (a broker that is a quorum voter too, ``process.roles=broker,controller``; its step says
``"voter": True``) also gets what a controller roll checks (``kafka_ops.quorum`` / ``kafka_ops.controller_roll``):
its gate waits until a caught-up majority of the voters stays without it, and it is back only once it fetches from
the quorum leader again and is caught up, before the ISR and leadership waits. The quorum leader's batch goes last,
decided again at each batch's turn (``kafka_ops.combined_roll``): the task takes its batch from the roll's record by
position, and a batch holding the current leader while other voters of the roll are still to go moves to the end (a
gate that sees its voter become the leader gives the turn back: :class:`LeaderMoved`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from airflow.sdk.exceptions import AirflowFailException
from hooks.burrow import BurrowHook
from kafka_ops import health
from kafka_ops.batches import stop_gate
from kafka_ops.cluster import ClusterState
from kafka_ops.combined_roll import leader_batch_last, must_go_later
from kafka_ops.controller_roll import controller_back, describe_quorum_line, service_state
from kafka_ops.profile import ClusterProfile
from kafka_ops.quorum import can_restart_controller
from kafka_ops.restart_plan import moves_controller_last, reassignment_hold
from kafka_ops.roll import RollRecord, batch_grid_label, batch_label, labelled_batch
from kafka_ops.roll_spec import ClusterMode
from probes.cluster import PROBES, ClusterProber
from runtime.broker_commands import BrokerCommand
from runtime.failures import describe
from runtime.lag_watch import LagWatch
from runtime.params import is_true
from runtime.reassignments import Reassignments
from runtime.roll_store import RollStore
from runtime.start_dependencies import Dependency, dependencies
from runtime.waiting import Check
from runtime.warming_prober import WarmingProber

from operators.node_roll import ChooseAgain, NodeRollOperator

#: Seconds a gate waiting only for the lag streak looks after the next poll is due (the watch's clock and the wait's
#: sleep are not the same clock: a look a hair early would find the poll not due and wait a whole interval more).
DUE_MARGIN_S = 0.05
#: Seconds a partition whose preferred leader this task just elected is not asked for again: the brokers' metadata
#: shows the new leader a moment after the ElectLeaders answer (KRaft brokers replay the controller's record; ZooKeeper
#: mode waits for the controller's UpdateMetadata), and a look in between would elect the same partitions again
#: (an ELECTION_NOT_NEEDED no-op, logged as a second election of the batch).
ELECTED_GRACE_S = 5.0
#: Seconds a leadership wait pauses after an election that answered without errors (its next look, instead of the
#: wait's ramp, 0.1 s at least): ElectLeaders answers once the new leaders are elected (ZooKeeper mode: once the
#: broker that handled it has them in its metadata; KRaft: once the controller committed them), so the brokers'
#: metadata shows them a few milliseconds later. Measured on 3 brokers: the leadership step (caught up ->
#: leadership) took 0.18-0.23 s with the ramp's 0.1 s pause after the election.
AFTER_ELECTION_S = 0.02


def voters_of(nodes: Mapping[int, dict]) -> list[int]:
    """The combined nodes among a batch's steps (``"voter": True``, set by ``operators.roll_plan``), in batch
    order."""
    return [bid for bid, step in nodes.items() if step.get("voter")]


class LeaderMoved(ChooseAgain):
    """While its gate waited, a combined node of the batch became the quorum leader and other voters of the roll
    remain: the task chooses its batch again (``kafka_ops.combined_roll.leader_batch_last``)."""


class BrokerRollOperator(NodeRollOperator):
    """Roll one batch of brokers (mapped over the roll's plan; see the module docstring and
    :class:`operators.node_roll.NodeRollOperator` for ``roll_id``, ``settings``, ``operation``, ``before_start``,
    ``needs_action`` and ``facts``).

    :param batch: ``{"batch", "batches", "label", "grid_label", "brokers": [{"id", "host", "rack", "position",
        "total"}]}`` (mapped from the roll's plan, ``operators.roll_plan.batch_items``).

    Settings read besides the shared ones: ``lag_ok_consecutive`` (Burrow OK polls in a row, default 3),
    ``quorum_fetch_timeout_ms`` (the cluster's ``controller.quorum.fetch.timeout.ms``, for combined nodes).

    Returns (XCom) ``{"brokers", "action", "marks"}``: ``marks`` are epoch seconds of ``began``, ``stop_sent``,
    ``gone``, ``start_sent``, ``registered``, ``caught_up``, ``leadership``, ``done`` (those reached; for a batch,
    when the last of its brokers got there), for progress reports and ``bench/restart_overhead.py``.
    """

    ui_color = "#fde8e8"
    node = "broker"
    item_field = "batch"

    def __init__(self, *, batch: dict, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.batch = batch

    # -- the node kind --------------------------------------------------------------------------------------------

    def _configure(self) -> None:
        self.batch = labelled_batch(self.batch, self.dry_run)  # a run planned by an earlier kafka-ops

    def _position(self) -> int:
        return int(self.batch["batch"]) - 1

    def _what(self) -> str:
        return f"{self.batch['label']} ({self.batch['batch']}/{self.batch['batches']})"

    @contextmanager
    def _session(self, profile: ClusterProfile, record: RollRecord) -> Iterator[None]:
        groups = record.consumer_groups
        burrow = BurrowHook.from_profile(profile) if groups and not self.dry_run else None
        self.lag = (LagWatch(burrow, groups, self.interval_s, record.lag_ok, since_ms=record.last_action_ms())
                    if burrow is not None else None)
        ahead, self._ahead = getattr(self, "_ahead", None), None
        prober = (ahead.take(self.log) if ahead is not None else None) or ClusterProber(profile)
        with prober as self.prober:
            try:
                yield
            finally:
                if burrow is not None:
                    burrow.close()

    def _warm_up(self, context: Any) -> None:
        """While waiting for its turn: the run's cluster mode read (here, in the task's thread), the admin client
        connected with the cluster's configs read (the gate's min ISR: kept for the life of the client) in a thread of
        its own (:class:`runtime.warming_prober.WarmingProber`: a request to the broker being restarted must not hold
        the turn), and SSH connections to the batch's hosts opening in the background; the batch's session then uses
        that client if its look has answered (:meth:`_session`)."""
        prober = ClusterProber(self.profile)
        try:
            self.mode(context, prober.admin)
        except BaseException:
            prober.close()
            raise
        self._ahead = WarmingProber(prober)
        self._connect_ahead({int(b["id"]): b for b in self.batch["brokers"]})

    def _choose(self, store: RollStore, record: RollRecord, position: int) -> tuple[RollRecord, dict[int, dict]]:
        """The unfinished brokers of the batch at ``position`` in the roll's record, once the current quorum leader's
        batch is behind every other batch with a voter still to go (:meth:`_leader_batch_last`); the task's label
        follows the batch it takes."""
        record = self._leader_batch_last(store, record, position)
        steps = {int(s["id"]): dict(s) for s in record.steps}
        ids = record.batches[position]
        if ids != [int(b["id"]) for b in self.batch["brokers"]]:
            self.log.info("this task rolls %s (planned: %s): the roll's order changed since its plan",
                          batch_label(ids), self.batch["label"])
            item = {**self.batch, "label": batch_label(ids), "brokers": [steps[b] for b in ids]}
            self.batch = {**item, "grid_label": batch_grid_label(item, self.dry_run)}
        return record, {b: steps[b] for b in ids if not record.is_done(b)}

    def _leader_batch_last(self, store: RollStore, record: RollRecord, position: int) -> RollRecord:
        """KRaft combined nodes: the record with the batch at ``position`` moved to the end when it holds the quorum
        leader (DescribeQuorum, read now) and other voters of the roll are still to go (saved when it moves;
        ``kafka_ops.combined_roll.leader_batch_last``). Nothing asked when the batch holds no voter, or when the
        operator's order is kept (``keep_order`` with a list of brokers)."""
        voters = record.voters  # planned on a KRaft cluster only (operators.roll_plan)
        if not voters & set(record.batches[position]) or not self._leader_goes_last():
            return record
        leader = self._ask(lambda: self.prober.admin.describe_quorum().leader_id, "the quorum leader")
        begun = {b for b in record.order if record.phase(b) not in (None, "done")}
        batches, reason = leader_batch_last(record.batches, position, leader, voters, record.finished(), begun)
        if reason is None:
            return record
        self.log.warning("%s%s", "DRY RUN: " if self.dry_run else "", reason)
        record = record.regrouped(batches)
        store.save(record)
        return record

    def _alive(self, nodes: Mapping[int, dict]) -> set[int]:
        """The brokers in the metadata; while the cluster migrates to KRaft, those of ``nodes`` whose service status
        does not say stopped (:meth:`_migrating`)."""
        if self._migrating():
            return {bid for bid, node in nodes.items() if not self._service_stopped(node).ok}
        return set(self.prober.state(configs=False).broker_ids)

    def _migrating(self) -> bool:
        """While the cluster migrates to KRaft the KRaft controller keeps a stopped broker in the metadata it sends
        the ZooKeeper-mode brokers (a fenced registration): the metadata cannot tell that a broker is down, its
        service status can."""
        return self.mode(self._context, self.prober.admin) is ClusterMode.MIGRATING

    def _service_stopped(self, node: Mapping[str, Any]) -> Check:
        """The profile's service status command on the broker's host says stopped."""
        rc, out = BrokerCommand.status_of(self.profile, node).status(self.profile.ssh_conn_id, self.ssh_timeout_s)
        state = service_state(rc, out)
        return Check(state == "stopped", f"service status: {(out.strip().splitlines() or ['?'])[0]} (exit {rc}): "
                                         f"{state}")

    def _command(self, step: str, choice: str | None, node: dict) -> BrokerCommand | None:
        return BrokerCommand.choose(self.profile, step, choice, node)

    def _stop_groups(self, nodes: Mapping[int, dict]) -> list[list[int]]:
        """ZooKeeper mode: when the batch holds the active controller (now, not as planned), its other brokers stop
        first and the controller once they are gone: their controlled shutdowns go through the controller
        (``controlled.shutdown.enable``), and the controller moves once, to a broker already rolled
        (``kafka_ops.batches.plan_batches`` puts the planned controller last in the last batch). KRaft: likewise
        when the batch holds the quorum leader (a combined node: the active controller, which the brokers' controlled
        shutdowns go through too); else, and on a migrating cluster (the quorum controllers are no brokers), one
        group."""
        ids = list(nodes)
        mode = self.mode(self._context, self.prober.admin)
        if len(ids) < 2 or mode is ClusterMode.MIGRATING:
            return [ids]
        if mode is ClusterMode.KRAFT:
            if not voters_of(nodes):
                return [ids]
            ctrl = self._ask(lambda: self.prober.admin.describe_quorum().leader_id, "the quorum leader")
        else:
            ctrl = self._ask(lambda: self.prober.state(configs=False).controller_id, "the cluster's controller")
        if ctrl not in nodes:
            return [ids]
        self.log.info("%s%s: broker %s is the " + ("quorum leader" if mode is ClusterMode.KRAFT else "controller")
                      + ": it stops once the others are gone",
                      "DRY RUN: " if self.dry_run else "", batch_label(ids), ctrl)
        return [[b for b in ids if b != ctrl], [ctrl]]

    def _start_while_last_stops(self, nodes: Mapping[int, dict]) -> bool:
        """ZooKeeper mode: yes, the batch's brokers gone already start while its controller stops (they register in
        ZooKeeper, whichever broker is the controller then tells them their partitions). KRaft (the quorum leader
        last in its batch, a combined node): no, its batch-mates are voters or fetch from the quorum whose leader
        is moving."""
        return self.mode(self._context, self.prober.admin) is ClusterMode.ZOOKEEPER

    def _wait_gone(self, nodes: Mapping[int, dict]) -> None:
        """Each broker left the cluster's metadata; while the cluster migrates, its service status says stopped."""
        if not self._migrating():
            self._wait_each("gone", list(nodes))
            return
        for bid, node in nodes.items():
            self._wait(lambda node=node: self._service_stopped(node),
                       f"broker {bid} has stopped (its service status: while migrating the metadata keeps it)")

    def _wait_back(self, record: RollRecord, nodes: Mapping[int, dict]) -> None:
        ids = list(nodes)
        # the first status look comes healthcheck_interval_s after the wait began, not after the start was sent: a
        # start command that returns once the broker runs (kafka-service, a systemd unit of Type=notify) took
        # longer than that, and an at-once look only cost an SSH command (0.8 s on KRaft 4.0) before the broker,
        # registering, showed up in the metadata
        began = time.monotonic()
        self._nodes, self._looked = dict(nodes), dict.fromkeys(nodes, began)
        self._elected: dict[tuple[str, int], float] = {}  # partition -> when this task elected its preferred leader
        for kind, label, mark, check in (("registered", "registered?", "registered", self._registered),
                                         ("caught_up", "caught up?", "caught_up", None),
                                         ("leadership", "leadership?", "leadership", self._leadership)):
            self._show(label)
            self._wait_each(kind, ids, check)
            self.marks[mark] = time.time()
            if kind == "registered":
                self._wait_voters_back(record, voters_of(nodes))

    def _wait_voters_back(self, record: RollRecord, voters: list[int]) -> None:
        """Each combined node of the batch is a caught-up voter again, fetching from the quorum leader since its start
        (``kafka_ops.controller_roll.controller_back``), before its ISR and leadership waits: the next batch's
        quorum check counts on it."""
        if not voters:
            return
        self._show("quorum?")
        fetch_timeout_ms = int(self.setting("quorum_fetch_timeout_ms"))
        for bid in voters:
            started_ms = record.progress(bid).at_ms

            def back(bid: int = bid, started_ms: int = started_ms) -> Check:
                if self.lag is not None:
                    self.lag.poll_if_due()
                quorum = self.prober.admin.describe_quorum()
                verdict = controller_back(quorum, bid, started_ms, fetch_timeout_ms)
                return Check(verdict.ok, describe_quorum_line(quorum) if verdict.ok else verdict.message())

            self._wait(back, f"broker {bid} (a quorum voter too) is back in the quorum and caught up")
        self.marks["quorum"] = time.time()

    def _dependencies(self, nodes: Mapping[int, dict]) -> list[Dependency]:
        """ZooKeeper (ZooKeeper mode), the KRaft quorum leader (KRaft), both while migrating
        (``kafka_ops.start_needs``); the ZooKeeper connect string is the profile's, else a running broker's."""
        mode = self.mode(self._context, self.prober.admin)
        return dependencies("broker", mode, self.profile, self.prober.admin,
                            lambda: [b for b in self.prober.state(configs=False).broker_ids if b not in nodes])

    def _dry_back(self, nodes: Mapping[int, dict], soak: float) -> None:
        self.log.info("DRY RUN: would wait until %s registered, back in every ISR and leading their preferred "
                      "partitions again, then soak %s s", batch_label(list(nodes)), soak)

    def _now(self, record: RollRecord, ids: list[int]) -> dict[int, str]:
        try:
            live = set(self.prober.state(configs=False).broker_ids)
        except Exception:
            return dict.fromkeys(ids, "in an unknown state (cluster unreachable)")
        return {b: "running" if b in live else "DOWN" for b in ids}

    def _disruption_begins(self, nodes: Mapping[int, dict]) -> None:
        if self.lag is not None:  # the next gate continues only what Burrow says from the stop on
            self.lag.disruption_begins()

    def _meanwhile(self) -> float | None:
        """While the batch's stop and start commands run (a controlled shutdown, a start that returns once the broker
        runs: seconds each), the lag streak is fed as in the waits, so its polls keep ``healthcheck_interval_s``
        apart from the stop on and the next gate does not wait for a poll the commands held up. A poll that failed
        is asked again an interval later."""
        lag = getattr(self, "lag", None)
        if lag is None:
            return None
        lag.poll_if_due()
        due_in = lag.due_in()
        return due_in + DUE_MARGIN_S if due_in > 0 else self.interval_s

    def _after_roll(self, store: RollStore, record: RollRecord, acted: list[int]) -> RollRecord:
        if self.lag is None:
            return record
        record = replace(record, lag_ok=self.lag.handover())  # the next batch's gate continues the streak
        if not acted:
            store.save(record)
        return record

    def _result(self, ids: list[int], action: str) -> dict:
        return {"brokers": ids, "action": action}

    # -- waits ----------------------------------------------------------------------------------------------------

    def _wait_each(self, kind: str, ids: list[int], check: Callable[[int], Check] | None = None) -> None:
        """Wait until probe ``kind`` holds for every broker of ``ids`` (one after the other: the total is the
        slowest broker's time, the others pass at their first poll); the lag watch is fed meanwhile."""
        def feeding(look: Callable[[], Check]) -> Check:
            if self.lag is not None:  # feed the lag streak the next gate continues
                self.lag.poll_if_due()
            return look()

        for bid in ids:
            look = (lambda b=bid: self._probe(kind, b)) if check is None else (lambda b=bid: check(b))
            self._wait(lambda look=look: feeding(look), PROBES[kind].describe(bid))

    def _probe(self, kind: str, broker: int | None) -> Check:
        verdict = self.prober.look(kind, broker)
        return Check(verdict.ok, verdict.message())

    def _gate(self, record: RollRecord, position: int, nodes: Mapping[int, dict], gated: list[int],
              stopped: list[int]) -> None:
        """Cluster healthy and min-ISR safe without ``gated`` now (one fresh OK; then every other broker answers a
        request sent to it, ``kafka_ops.health.brokers_answer``: a hung broker still looks in-sync, and what the batch
        registers with when started again answers, :meth:`_start_needs`: ZooKeeper or the KRaft quorum leader, whose
        outage the metadata cannot show), and, when groups
        are watched, Burrow OK ``lag_ok_consecutive`` polls in a row, polls ``healthcheck_interval_s`` apart
        (restarts cause lag spikes: kafka_roller's consumer_health retries), or one OK whose window of commits since
        the roll last touched a broker spans that time; the streak the previous batch saw while its brokers came back
        counts (``runtime.lag_watch``). ``stopped``: brokers of this batch this roll already stopped (a resumed
        batch): their URPs are expected, so only offline partitions and min ISR are judged."""
        prober, ids = self.prober, gated
        streak_needed = int(self.setting("lag_ok_consecutive"))
        groups = record.consumer_groups
        who = batch_label(ids)
        lag = self.lag
        if lag is None and groups and self.dry_run:
            lag = LagWatch(BurrowHook.from_profile(self.profile), groups, self.interval_s)
        if lag is not None and lag.streak:
            self.log.info("lag gate: %d OK polls in a row carried (the plan, the previous batch)", lag.streak)

        fix_imbalance = is_true(self.setting("fix_leader_imbalance"))
        voters = [b for b in voters_of(nodes) if b in ids and b not in stopped]  # combined nodes to stop
        would_elect: list[str] = []  # a dry run: what a real run's gate would elect first

        def answers(state: ClusterState, verdicts: list[health.Verdict]) -> list[health.Verdict]:
            # once the rest passes (one request each, not at every look): the brokers the stop relies on answer, and
            # what a stopped broker registers with
            if not all(v.ok for v in verdicts):
                return []
            # side by side: each waits on the network (on a loaded 2-core sandbox 0.2-0.5 s each, one after the other)
            others = {b.id: b.address for b in state.brokers if b.id not in ids}
            deps = self._registers_with(nodes)  # here: finding them may ask the Task SDK (the run's mode), which
            # dag.test's in-process channel cannot answer from a second thread
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="gate-registers-with") as pool:
                needs = pool.submit(self._start_needs, nodes, deps)
                answered = health.brokers_answer(prober.admin.unanswered_brokers(others))
                return [answered, needs.result()]

        def cluster_check() -> health.Verdict:
            state = prober.state(configs=True)
            missing = [b for b in ids if not state.has_broker(b)]
            if missing:
                return health.Verdict(False, [f"broker {b} is not in the metadata (down)" for b in missing], "gate")
            safety, imbalance = stop_gate(state, ids, stopped)
            safety = safety + self._quorum_gate(voters, record)
            if fix_imbalance and imbalance is not None and not imbalance.ok and all(v.ok for v in safety):
                if self.dry_run:  # the election would fix it: report it, judge the rest
                    count = len(health.imbalance_elections(state))
                    would_elect[:] = [f"a real run elects the preferred leaders of {count} partitions first "
                                      f"({imbalance.message()})"]
                    return health.combine(safety + answers(state, safety), rule=f"gate {who}")
                if self._elect_for_imbalance(who, state):
                    state = prober.state(configs=True)
                    safety, imbalance = stop_gate(state, ids, stopped)
                    safety = safety + self._quorum_gate(voters, record)
            verdicts = safety + ([imbalance] if imbalance is not None else [])
            held_on_urp[:] = [any(v.rule == "urp" and not v.ok for v in verdicts)]
            return health.combine(verdicts + answers(state, verdicts), rule=f"gate {who}")

        looks: list[bool] = []
        held_on_urp = [False]  # the last look's cluster verdicts: URPs among them

        def cluster_or_outage() -> health.Verdict:
            # the first look asks what the batch registers with before it reads the cluster, and a read that fails
            # asks it too: in ZooKeeper mode the read (the topic configs) waits on ZooKeeper, 15 s a look
            if not looks:
                looks.append(True)
                needs = self._start_needs(nodes)
                if not needs.ok:
                    return health.combine([needs], rule=f"gate {who}")
            try:
                return cluster_check()
            except ChooseAgain:
                raise
            except Exception as exc:
                needs = self._start_needs(nodes)
                if needs.ok:
                    raise
                return health.Verdict(False, [f"{needs.message()} (the cluster could not be read: {describe(exc)})"],
                                      f"gate {who}")

        def check() -> Check:
            cluster = cluster_or_outage()
            if not cluster.ok:
                if lag is not None:
                    lag.reset()
                return Check(False, cluster.message())
            if lag is None:
                return Check(True, cluster.message())
            if not lag.ask(streak_needed, time_left_s=gate_deadline - time.monotonic()):
                # the next look that can pass is the lag watch's next counted poll: look then (the cluster with it)
                return Check(False, lag.describe(streak_needed), retry_in_s=lag.due_in() + DUE_MARGIN_S)
            return Check(True, f"{cluster.message()}; {lag.describe(streak_needed)}")

        verb = "may be stopped" if len(ids) == 1 else "may be stopped together"
        if self.dry_run:
            self._dry_gate(who, verb, cluster_check, lag, streak_needed, would_elect)
            return
        # quick first polls while the cluster is not ready; once only the lag streak is short, one look when its next
        # poll is due (the lag watch keeps Burrow's counted polls interval_s apart)
        gate_deadline = time.monotonic() + self.timeout_s  # the wait's own deadline (a Burrow poll stays in it)
        try:
            self._wait(check, f"{who} {verb}", not_yet=f"{who} {verb.replace('may', 'may not')} yet")
        except AirflowFailException as exc:
            # held on URPs: a reassignment started meanwhile may be why (asked once, only then)
            why = self._reassignment_hold() if held_on_urp[0] else None
            if why is None:
                raise
            raise AirflowFailException(f"{exc}; {why}") from exc

    def _reassignment_hold(self) -> str | None:
        """Asked once when a gate gave up: a partition reassignment started during the roll, whose new replicas held
        the gate (``kafka_ops.restart_plan.reassignment_hold``); None when none is in progress or the question fails
        (logged: the gate's own reason stands)."""
        try:
            return reassignment_hold(Reassignments(self.prober.admin, self.profile).ongoing())
        except Exception as exc:  # noqa: BLE001 - an explanation only; the gate's failure is the task's reason
            self.log.info("could not list the partition reassignments in progress: %s", describe(exc))
            return None

    def _leader_goes_last(self) -> bool:
        """Whether this roll puts the quorum leader last (``kafka_ops.restart_plan.moves_controller_last``: always,
        unless ``keep_order`` keeps the operator's list of brokers as given)."""
        return moves_controller_last(list(self.setting("brokers") or []), is_true(self.setting("keep_order")))

    def _quorum_gate(self, voters: list[int], record: RollRecord) -> list[health.Verdict]:
        """For the combined nodes among the brokers to stop: one verdict each, OK when a caught-up majority of the
        voters stays without it (``kafka_ops.quorum.can_restart_controller``, Strimzi's quorum check; the plan puts
        at most one voter in a batch). [] without voters (no DescribeQuorum asked).

        :raises LeaderMoved: one of ``voters`` is the quorum leader now and other voters of the roll (``record``) are
            not done (``kafka_ops.combined_roll.must_go_later``), unless ``keep_order`` keeps the operator's order; a
            dry run logs it instead.
        """
        if not voters:
            return []
        quorum = self.prober.admin.describe_quorum()
        left = [b for b in record.order if not record.is_done(b)]
        later = must_go_later(quorum.leader_id, voters, record.voters, left) if self._leader_goes_last() else None
        if later and not self.dry_run:
            raise LeaderMoved(later)
        if later:
            self.log.warning("DRY RUN: %s (a real run chooses its batch again)", later)
        fetch_timeout_ms = int(self.setting("quorum_fetch_timeout_ms"))
        verdicts = [can_restart_controller(quorum, v, fetch_timeout_ms) for v in voters]
        if all(v.ok for v in verdicts) and quorum.leader_id in voters and not getattr(self, "_leader_said", False):
            self._leader_said = True  # once per task, not at every look of a gate that waits for the lag streak
            self.log.info("broker %s is the quorum leader: its stop moves the leadership to another voter (%s)",
                          quorum.leader_id, describe_quorum_line(quorum))
        return verdicts

    def _elect_for_imbalance(self, who: str, state: ClusterState) -> bool:
        """A gate that waits only on a leader imbalance: elect the preferred leaders of the partitions that need it
        (``probes.cluster.ClusterProber.elect_for_imbalance``) instead of waiting for Kafka's own rebalance.
        Returns True when an election ran (the gate looks again); a TimeoutError (no answer in time) is transient:
        the gate looks again."""
        elected = self.prober.elect_for_imbalance(state)
        if elected is None:
            return False
        self.log.info("gate %s: leader imbalance: %s", who, elected)
        return True

    def _dry_gate(self, who: str, verb: str, cluster_check: Callable[[], health.Verdict], lag: LagWatch | None,
                  streak_needed: int, would_elect: list[str]) -> None:
        """A dry run's gate: one look at the cluster and one Burrow poll, logged as what a real run would do now
        (stop, or wait); one OK poll counts as ready, since a real run's streak of ``streak_needed`` OK polls takes
        ``(streak_needed - 1) x healthcheck_interval_s`` on a healthy cluster anyway."""
        cluster = cluster_check()
        ready, said = cluster.ok, "; ".join([cluster.message(), *would_elect])
        if ready and lag is not None:
            try:
                verdict = lag.poll()
            except Exception as exc:  # noqa: BLE001 - a dry run reports what it could not ask
                ready, said = False, f"{said}; Burrow did not answer: {describe(exc)}"
            else:
                ready = verdict.ok
                said = (f"{said}; {verdict.message()} (a real run waits for {streak_needed} OK polls in a row, "
                        f"{self.interval_s:.0f} s apart, or one OK whose window of commits spans "
                        f"{(streak_needed - 1) * self.interval_s:.0f} s; Burrow judged {lag.window_s:.1f} s)")
        if lag is not None and lag is not self.lag:
            lag.burrow.close()
        if ready:
            self.log.info("DRY RUN: %s %s now: %s", who, verb, said)
        else:
            self.log.info("DRY RUN: %s %s yet; a real run would wait up to %.0f s: %s", who,
                          verb.replace("may", "may not"), self.timeout_s, said)

    def _registered(self, bid: int) -> Check:
        """Broker ``bid`` registered again; while it is not, its host's status command (at most once per
        ``healthcheck_interval_s``, the first one that long after the back-wait began) tells whether it still
        starts or exited (a start command that returns at once, like ``systemctl start``, says nothing about the
        broker coming up): see :meth:`~operators.node_roll.NodeRollOperator._exited`."""
        verdict = self.prober.look("registered", bid)
        if verdict.ok:
            return Check(True, verdict.message())
        now = time.monotonic()
        if now - self._looked[bid] < self.interval_s:
            return Check(False, verdict.message())
        self._looked[bid] = now
        node = self._nodes[bid]
        rc, out = BrokerCommand.status_of(self.profile, node).status(self.profile.ssh_conn_id, self.ssh_timeout_s)
        state = service_state(rc, out)
        said = f"{(out.strip().splitlines() or ['no output'])[0]} (exit {rc})"
        if state != "stopped":
            return Check(False, f"{verdict.message()} (its service is {state}: {said})")
        return self._exited(bid, node, said)

    def _leadership(self, bid: int) -> Check:
        """Leadership back: elect the preferred leader (KIP-460, ``kafka-leader-election.sh --election-type
        PREFERRED``) of the partitions this broker, and every other broker of its batch, should lead but do not
        (one election for the batch: the others pass at their first look), until within
        ``leader.imbalance.per.broker.percentage``."""
        state = self.prober.state(configs=True)
        verdict = health.broker_leadership(state, bid)
        if verdict.ok:
            return Check(True, verdict.message())
        now = time.monotonic()
        todo = [tp for tp in health.leadership_elections(state, self._nodes)
                if now - self._elected.get(tp, -ELECTED_GRACE_S) >= ELECTED_GRACE_S]
        if not todo:  # its preferred partitions wait for it in their ISRs, or the metadata for the election: look again
            return Check(False, verdict.message())
        who = batch_label(list(self._nodes))  # the batch in its order, as its Grid label
        try:
            answer = self.prober.admin.elect_preferred_leaders(todo)
        except TimeoutError as exc:  # sent: it may still take effect, the metadata will say; not asked again yet
            self._elected.update((tp, now) for tp in todo)
            self.log.info("%s: %s: looking at the metadata again", who, exc)
            return Check(False, verdict.message())
        errors = {k: v for k, v in answer.items() if v}
        self._elected.update((tp, now) for tp in todo if f"{tp[0]}-{tp[1]}" not in errors)
        if errors:
            self.log.info("%s: preferred election not possible yet for %d of %d partitions (e.g. %s)", who,
                          len(errors), len(todo), next(iter(errors.items())))
            return Check(False, verdict.message())
        self.log.info("%s: elected preferred leaders of %d partitions", who, len(todo))
        return Check(False, verdict.message(), retry_in_s=AFTER_ELECTION_S)
