"""One batch of a roll (one broker, or brokers that may be down together), every step in one task: turn ->
needs action? -> gate -> pre-stop -> stop -> gone -> before-start -> pre-start -> start -> registered ->
caught up -> preferred leaders back -> soak. The brokers of a batch go through each step together (their
commands run side by side); a serial roll has one broker per batch.

Why one task per batch: strictly one broker at a time comes from ``max_active_tis_per_dagrun=1`` on the
mapped task (a running or deferred instance blocks the next; the scheduler starts them in map-index
order), not from a sensor that polls the previous broker's state (reschedule sensors hit
apache/airflow#71172). Waits poll in the task's own process (``runtime.waiting``), so no deferral race
(apache/airflow#72716) can fail a step either; the Grid label shows the current step
(``runtime.grid.show_step``). Every step that can skip asks :func:`kafka_ops.roll.decide` and logs its
reason verbatim; the roll's record (``runtime.roll_store``) is written before and after each action, so a
cleared task resumes exactly where this roll left the broker and acts only on what this roll did.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowRescheduleException
from hooks.burrow import BurrowHook
from kafka_ops import health
from kafka_ops.batches import can_stop_together
from kafka_ops.profile import ClusterProfile
from kafka_ops.roll import NeedsAction, RollRecord, batch_label, clock, decide, eta_s, labelled_batch, requested, turn
from probes.cluster import PROBES, ClusterProber
from runtime.broker_commands import BrokerCommand, BrokerCommandFailed
from runtime.grid import show_step
from runtime.lag_watch import LagWatch
from runtime.lock_holding import ensure_held, release_held
from runtime.params import is_true, resolve_settings
from runtime.profiles import profile_or_fail
from runtime.roll_hooks import FAILED_STATES, RAMP_FROM_S, BeforeStart, Facts
from runtime.roll_store import RollStore
from runtime.waiting import Check, WaitAborted, WaitTimeout, wait_until
from runtime.window_gate import window_gate

#: The roll phase written just before a step's command is sent (so a resume knows it may have happened).
SENT = {"stop": "stopping", "start": "starting"}



class BrokerRollOperator(BaseOperator):
    """Roll one batch of brokers (mapped over the roll's plan; see the module docstring).

    :param roll_id: the roll this batch belongs to (its record's key).
    :param batch: ``{"batch", "batches", "label", "grid_label", "brokers": [{"id", "host", "rack", "position",
        "total"}]}`` (mapped from the roll's plan task, ``operators.roll_plan.batch_items``).
    :param settings: ``cluster``, ``dry_run``, ``healthcheck_interval_s``, ``healthcheck_timeout_s``,
        ``lag_ok_consecutive``, ``soak_s``, ``pre_stop``, ``pre_start``, ``stop_command``, ``start_command``,
        ``command_timeout_s``, ``window_policy``: values or :class:`runtime.params.FromParam`.
    :param operation: the lock's operation label ("rolling restart").
    :param before_start: see :data:`BeforeStart`; None = nothing between gone and start.
    :param needs_action: ``kafka_ops.roll.NeedsAction``; default: every planned broker (``requested``).
    :param facts: see :data:`Facts`; handed to ``needs_action``; default none.

    Returns (XCom) ``{"brokers", "action", "marks"}``: ``marks`` are epoch seconds of ``began``,
    ``stop_sent``, ``gone``, ``start_sent``, ``registered``, ``caught_up``, ``leadership``, ``done`` (those
    reached; for a batch, when the last of its brokers got there), for progress reports and
    ``bench/restart_overhead.py``.
    """

    ui_color = "#fde8e8"

    def __init__(
        self,
        *,
        roll_id: str,
        batch: dict,
        settings: dict,
        operation: str = "rolling restart",
        before_start: BeforeStart | None = None,
        needs_action: NeedsAction = requested,
        facts: Facts | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("max_active_tis_per_dagrun", 1)  # set these in .partial() too when mapping:
        kwargs.setdefault("retries", 0)  # an up_for_retry instance would let the next batch start
        super().__init__(**kwargs)
        self.roll_id = roll_id
        self.batch = batch
        self.settings = settings
        self.operation = operation
        self.before_start = before_start
        self.needs_action = needs_action
        self.facts = facts

    # -- helpers ----------------------------------------------------------------------------------------

    def _previous_failed(self, context: Any, position: int) -> bool:
        ti = context["ti"]
        states = ti.get_task_states(dag_id=ti.dag_id, task_ids=[ti.task_id], run_ids=[ti.run_id])
        return states.get(ti.run_id, {}).get(f"{ti.task_id}_{position - 1}") in FAILED_STATES

    def _wait(self, check: Callable[[], Check], what: str, not_yet: str | None = None,
              ramp: bool = True) -> Check:
        """Wait for ``check``; ``ramp`` polls quickly first (0.5, 1, 2 s ... up to the interval): a broker is
        usually gone, registered, caught up and leading again within seconds of the action."""
        try:
            return wait_until(check, what=what, interval_s=self.interval_s, timeout_s=self.timeout_s,
                              log=self.log, not_yet=not_yet, ramp_from_s=RAMP_FROM_S if ramp else None)
        except (WaitTimeout, WaitAborted) as exc:
            raise AirflowFailException(str(exc)) from exc

    def _wait_each(self, kind: str, prober: ClusterProber, ids: list[int],
                   check: Callable[[int], Check] | None = None) -> None:
        """Wait until probe ``kind`` holds for every broker of ``ids`` (one after the other: the total is
        the slowest broker's time, the others pass at their first poll)."""
        def feeding(look: Callable[[], Check]) -> Check:
            if self.lag is not None:  # feed the lag streak the next gate continues
                self.lag.poll_if_due()
            return look()

        for bid in ids:
            if check is None:
                self._wait(lambda b=bid: feeding(lambda: self._probe(prober, kind, b)), PROBES[kind].describe(bid))
            else:
                self._wait(lambda b=bid: feeding(lambda: check(b)), PROBES[kind].describe(bid))

    def _probe(self, prober: ClusterProber, kind: str, broker: int | None) -> Check:
        verdict = prober.look(kind, broker)
        return Check(verdict.ok, verdict.message())

    def _label(self, context: Any, step: str) -> None:
        show_step(context, f"{self.batch['grid_label']} · {step}")

    # -- the batch --------------------------------------------------------------------------------------

    def execute(self, context: Any) -> dict:
        cfg = resolve_settings(self.settings, context["params"])
        self.dry_run = is_true(cfg.get("dry_run", False))
        self.batch = labelled_batch(self.batch, self.dry_run)  # a run planned by an earlier kafka-ops
        self.interval_s = float(cfg.get("healthcheck_interval_s", 5))
        self.timeout_s = float(cfg.get("healthcheck_timeout_s", 900))
        position = int(self.batch["batch"]) - 1
        ids = [int(b["id"]) for b in self.batch["brokers"]]
        store = RollStore(context, self.roll_id)
        record = store.load()
        if record is None:
            raise AirflowFailException(f"roll {self.roll_id!r} has no frozen plan: its plan task has not run")
        decision = turn(position, record, position > 0 and self._previous_failed(context, position))
        if decision.action == "fail":
            raise AirflowFailException(decision.reason)
        if decision.action == "skip":  # only outside the scheduler's map-index order (e.g. dag.test)
            self.log.info("%s", decision.reason)
            raise AirflowRescheduleException(datetime.now(UTC) + timedelta(seconds=2))
        finished = [b for b in ids if record.is_done(b)]
        for bid in finished:
            p = record.progress(bid)
            self.log.info("broker %s: skip: finished in roll %r at %s (%s)", bid, self.roll_id, clock(p.at_ms),
                          p.reason)
        if len(finished) == len(ids):
            return {"brokers": ids, "action": "skip"}
        self.log.info("%s", decision.reason)
        if all(record.phase(b) in (None, "done") for b in ids):  # a batch that began finishes, window or not
            window_gate(self, context, what=f"{self.batch['label']} ({self.batch['batch']}/{self.batch['batches']})",
                        policy=str(cfg.get("window_policy") or "wait"), dry_run=self.dry_run,
                        label=lambda step: self._label(context, step))
        self.marks: dict[str, float] = {"began": time.time()}
        profile = profile_or_fail(cfg["cluster"])
        who = getattr(context.get("dag_run"), "triggering_user_name", None)
        begun = time.monotonic()
        groups = record.consumer_groups
        burrow = BurrowHook.from_profile(profile) if groups and not self.dry_run else None
        self.lag = LagWatch(burrow, groups, self.interval_s, record.lag_ok) if burrow is not None else None
        with ClusterProber(profile) as prober:
            try:
                record, acted = self._roll(context, cfg, profile, prober, store, record, who)
            except (AirflowFailException, BrokerCommandFailed) as exc:
                left = self._left_state(store.load() or record, prober)
                if not self.dry_run:
                    release_held(profile, context, self.log, "the roll stops at this batch")
                raise AirflowFailException(f"{exc}{left}") from exc
            finally:
                if burrow is not None:
                    burrow.close()
            took = time.monotonic() - begun
            if self.lag is not None:
                record = replace(record, lag_ok=self.lag.handover())
                if not acted:
                    store.save(record)
            for bid in acted:
                record = store.mark(record, bid, "done", "dry run" if self.dry_run else "restarted", took)
        self._report(context, record, ids)
        self.marks["done"] = time.time()
        return {"brokers": ids, "action": "dry run" if self.dry_run else "restarted", "marks": self.marks}

    def execute_in_window(self, context: Any, event: Any = None) -> dict:
        """Resumed by the window gate's trigger when the next maintenance window opens: the batch from its
        start (turn, gate, ...), the window checked again."""
        return self.execute(context)

    def _left_state(self, record: RollRecord, prober: ClusterProber) -> str:
        """What the failure leaves behind, for the task's last error line."""
        touched = [b for b in (int(x["id"]) for x in self.batch["brokers"]) if record.phase(b) not in (None, "done")]
        if not touched:
            return f" ({batch_label([int(x['id']) for x in self.batch['brokers']])} not stopped by this roll)"
        try:
            live = set(prober.state(configs=False).broker_ids)
        except Exception:
            live = None
        parts = []
        for bid in touched:
            now = "in an unknown state (cluster unreachable)" if live is None else (
                "running" if bid in live else "DOWN")
            parts.append(f"broker {bid} is {now}; this roll's record: {record.phase(bid)} at "
                         f"{clock(record.progress(bid).at_ms)}")
        return f" ({'; '.join(parts)}; clearing this task resumes it from there)"

    def _roll(self, context: Any, cfg: dict, profile: ClusterProfile, prober: ClusterProber, store: RollStore,
              record: RollRecord, who: str | None) -> tuple[RollRecord, list[int]]:
        """Every step for the batch's unfinished brokers; returns the record and the brokers acted on."""
        ssh_timeout = float(cfg.get("command_timeout_s", 300))
        brokers = {int(b["id"]): b for b in self.batch["brokers"] if not record.is_done(int(b["id"]))}
        live = set(prober.state(configs=False).broker_ids)
        for bid in list(brokers):
            if record.phase(bid) is None and bid in live:
                facts = self.facts(profile, brokers[bid], cfg) if self.facts else {}
                act, why = self.needs_action(bid, facts)
                if not act:
                    self.log.info("broker %s: left alone: %s", bid, why)
                    record = store.mark(record, bid, "done", f"left alone: {why}")
                    del brokers[bid]
                    continue
                self.log.warning("broker %s: rolling it due to: %s", bid, why)
        acted = list(brokers)
        if not brokers:
            return record, acted
        if not self.dry_run:
            ensure_held(profile, context, self.operation, self.log)

        def acting(step: str) -> list[int]:
            """The brokers ``step`` acts on now (each decision logged; a refusal fails the batch)."""
            alive = set(prober.state(configs=False).broker_ids)
            chosen = []
            for bid in brokers:
                d = decide(step, bid, record, bid in alive)
                if d.action == "fail":
                    raise AirflowFailException(d.reason)
                if d.action == "skip":
                    self.log.info("%s", d.reason)
                else:
                    chosen.append(bid)
            return chosen

        def commands(*steps: tuple[str, str]) -> None:
            """Run the steps' commands on the batch's brokers side by side; before the main one (stop /
            start) check the lock and record it."""
            nonlocal record
            for step, setting in steps:
                targets = list(brokers) if self.dry_run else acting(step)
                chosen = [c for c in (BrokerCommand.choose(profile, step, cfg.get(setting), brokers[b])
                                      for b in targets) if c is not None]
                if not chosen:
                    continue
                self._label(context, step.replace("_", "-"))
                if step in SENT and not self.dry_run:
                    ensure_held(profile, context, self.operation, self.log)
                    for c in chosen:
                        record = store.mark(record, c.broker_id, SENT[step], f"{step} sent by {who or 'this run'}")
                    self.marks[f"{step}_sent"] = time.time()
                self._run_all(chosen, profile.ssh_conn_id, ssh_timeout, who)

        # gate
        gated = list(brokers) if self.dry_run else acting("gate")
        if gated:
            self._label(context, "gate")
            self._gate(profile, prober, gated, [b for b in brokers if b not in gated], record.consumer_groups,
                       int(cfg.get("lag_ok_consecutive", 3)))
        # pre-stop, stop
        commands(("pre_stop", "pre_stop"), ("stop", "stop_command"))
        # gone
        if not self.dry_run:
            going = acting("wait_gone")
            if going:
                self._label(context, "gone?")
                self._wait_each("gone", prober, going)
                self.marks["gone"] = time.time()
                for bid in going:
                    record = store.mark(record, bid, "stopped")
        # before start
        if self.before_start is not None and not self.dry_run:
            preparing = acting("before_start")
            if preparing:
                self._label(context, "before start")
            for bid in preparing:
                self.before_start(profile, brokers[bid], cfg, self.log, self.dry_run)
                record = store.mark(record, bid, "prepared")
        # pre-start, start
        commands(("pre_start", "pre_start"), ("start", "start_command"))
        ids = list(brokers)
        if self.dry_run:
            self.log.info("DRY RUN: would wait until %s registered, back in every ISR and leading their "
                          "preferred partitions again, then soak %s s", batch_label(ids), cfg.get("soak_s", 0))
            return record, acted
        # back: registered, caught up, leadership
        self._label(context, "registered?")
        self._wait_each("registered", prober, ids)
        self.marks["registered"] = time.time()
        self._label(context, "caught up?")
        self._wait_each("caught_up", prober, ids)
        self.marks["caught_up"] = time.time()
        self._label(context, "leadership?")
        self._wait_each("leadership", prober, ids, check=lambda bid: self._leadership(prober, bid))
        self.marks["leadership"] = time.time()
        soak = float(cfg.get("soak_s", 0) or 0)
        if soak > 0:
            self._label(context, f"soak {soak:.0f} s")
            self.log.info("%s: soaking %.0f s", batch_label(ids), soak)
            time.sleep(soak)
        return record, acted

    def _run_all(self, chosen: list[BrokerCommand], ssh_conn_id: str, timeout_s: float, who: str | None) -> None:
        """Run one step's commands, side by side when there are several; the first failure is raised after
        every command has ended (a half-sent batch stop must not leave commands running unobserved)."""
        if len(chosen) == 1:
            chosen[0].run(ssh_conn_id, timeout_s, self.log, self.dry_run, who)
            return
        with ThreadPoolExecutor(max_workers=min(len(chosen), 16)) as pool:
            futures = [pool.submit(c.run, ssh_conn_id, timeout_s, self.log, self.dry_run, who) for c in chosen]
        errors = [f.exception() for f in futures if f.exception() is not None]
        if errors:
            raise errors[0]

    def _gate(self, profile: ClusterProfile, prober: ClusterProber, ids: list[int], stopped: list[int],
              groups: Any, streak_needed: int) -> None:
        """Cluster healthy and min-ISR safe without ``ids`` now (one fresh OK), and, when groups are watched,
        Burrow OK ``streak_needed`` polls in a row, polls ``healthcheck_interval_s`` apart (restarts cause lag
        spikes: kafka_roller's consumer_health retries); the streak the previous batch saw while its brokers
        came back counts (``runtime.lag_watch``). ``stopped``: brokers of this batch this roll already stopped
        (a resumed batch): their URPs are expected, so only offline partitions and min ISR are judged."""
        who = batch_label(ids)
        lag = self.lag
        if lag is None and groups and self.dry_run:
            lag = LagWatch(BurrowHook.from_profile(profile), groups, self.interval_s)
        if lag is not None and lag.streak:
            self.log.info("lag gate: %d OK polls in a row carried (the plan, the previous batch)", lag.streak)

        def cluster_check() -> health.Verdict:
            if len(ids) == 1 and not stopped:
                return prober.look("gate", ids[0])
            state = prober.state(configs=True)
            missing = [b for b in ids if not state.has_broker(b)]
            if missing:
                return health.Verdict(False, [f"broker {b} is not in the metadata (down)" for b in missing], "gate")
            blockers = can_stop_together(state, ids)
            verdicts = [health.offline_partitions(state), health.Verdict(not blockers, blockers, "can-stop-together")]
            if not stopped:
                verdicts += [health.under_replicated_partitions(state), health.leader_imbalance(state)]
            return health.combine(verdicts, rule=f"gate {who}")

        def check() -> Check:
            cluster = cluster_check()
            if not cluster.ok:
                if lag is not None:
                    lag.reset()
                return Check(False, cluster.message())
            if lag is None:
                return Check(True, cluster.message())
            if lag.due():
                lag.poll()
            verdict = lag.last.message() if lag.last is not None else "consumer-lag: OK (carried)"
            if lag.streak < streak_needed:
                return Check(False, f"{verdict} ({lag.streak}/{streak_needed} OK polls in a row)")
            return Check(True, f"{cluster.message()}; {verdict} ({lag.streak} polls in a row)")

        verb = "may be stopped" if len(ids) == 1 else "may be stopped together"
        if self.dry_run:
            result = check()
            self.log.info("DRY RUN: %s %s now: %s", who, verb if result.ok else verb.replace("may", "may NOT"),
                          result.message)
            if lag is not None and lag is not self.lag:
                lag.burrow.close()
            return
        # quick first polls: the lag watch itself keeps Burrow's polls interval_s apart
        self._wait(check, f"{who} {verb}", not_yet=f"{who} {verb.replace('may', 'may NOT')} yet")

    def _leadership(self, prober: ClusterProber, bid: int) -> Check:
        """Leadership back: elect the preferred leader (KIP-460, ``kafka-leader-election.sh --election-type
        PREFERRED``) of this broker's partitions it does not lead, until within
        ``leader.imbalance.per.broker.percentage``."""
        state = prober.state(configs=True)
        verdict = health.broker_leadership(state, bid)
        if verdict.ok:
            return Check(True, verdict.message())
        todo = [(p.topic, p.partition) for p in state.partitions_preferring(bid) if not p.is_led_by_preferred]
        errors = {k: v for k, v in prober.admin.elect_preferred_leaders(todo).items() if v}
        if errors:
            self.log.info("broker %s: preferred election not possible yet for %d partitions (e.g. %s)", bid,
                          len(errors), next(iter(errors.items())))
        else:
            self.log.info("broker %s: elected preferred leaders of %d partitions", bid, len(todo))
        return Check(False, verdict.message())

    def _report(self, context: Any, record: RollRecord, ids: list[int]) -> None:
        done, total = len(record.finished()), len(record.order)
        left = eta_s(record)
        finish = "" if left is None or done == total else (
            f"; about {left / 60:.1f} min left, done near {clock(int((time.time() + left) * 1000))}")
        self.log.info("roll %r: %s done; %d/%d brokers done%s", self.roll_id, batch_label(ids), done, total, finish)
