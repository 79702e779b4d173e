"""One broker of a roll, every step in one task: turn -> needs action? -> gate -> pre-stop -> stop ->
gone -> before-start -> pre-start -> start -> registered -> caught up -> preferred leaders back -> soak.

Why one task per broker: strictly one broker at a time comes from ``max_active_tis_per_dagrun=1`` on the
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
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowRescheduleException
from hooks.burrow import BurrowHook
from kafka_ops import health
from kafka_ops.profile import ClusterProfile
from kafka_ops.roll import NeedsAction, RollRecord, clock, decide, eta_s, requested, turn
from probes.cluster import PROBES, ClusterProber
from runtime.broker_commands import BrokerCommand, BrokerCommandFailed
from runtime.grid import show_step
from runtime.params import is_true, resolve_settings
from runtime.roll_store import RollStore
from runtime.waiting import Check, WaitAborted, WaitTimeout, wait_until

from operators.cluster_lock import ensure_held, release_held
from operators.roll_plan import profile_or_fail

FAILED_STATES = {"failed", "upstream_failed"}
#: First pause of the waits after an action, seconds (doubling up to healthcheck_interval_s).
RAMP_FROM_S = 0.5
#: The roll phase written just before a step's command is sent (so a resume knows it may have happened).
SENT = {"stop": "stopping", "start": "starting"}

#: A roll's optional step between "gone" and "start" (an upgrade switches binaries or edits
#: server.properties there): ``before_start(profile, broker, log, dry_run)``; raise to fail the broker.
BeforeStart = Callable[[ClusterProfile, Mapping[str, Any], Any, bool], None]


class BrokerRollOperator(BaseOperator):
    """Roll one broker (mapped over the roll's plan; see the module docstring).

    :param roll_id: the roll this broker belongs to (its record's key).
    :param broker: ``{"id", "host", "rack", "position", "total"}`` (mapped from the roll's plan task).
    :param settings: ``cluster``, ``dry_run``, ``healthcheck_interval_s``, ``healthcheck_timeout_s``,
        ``lag_ok_consecutive``, ``soak_s``, ``pre_stop``, ``pre_start``, ``stop_command``, ``start_command``,
        ``command_timeout_s``: values or :class:`runtime.params.FromParam`.
    :param operation: the lock's operation label ("rolling restart").
    :param before_start: see :data:`BeforeStart`; None = nothing between gone and start.
    :param needs_action: ``kafka_ops.roll.NeedsAction``; default: every planned broker (``requested``).
    :param facts: ``facts(profile, broker) -> dict`` handed to ``needs_action``; default none.

    Returns (XCom) ``{"broker", "action", "marks"}``: ``marks`` are epoch seconds of ``began``,
    ``stop_sent``, ``gone``, ``start_sent``, ``registered``, ``caught_up``, ``leadership``, ``done`` (those
    reached), for progress reports and ``bench/restart_overhead.py``.
    """

    ui_color = "#fde8e8"

    def __init__(
        self,
        *,
        roll_id: str,
        broker: dict,
        settings: dict,
        operation: str = "rolling restart",
        before_start: BeforeStart | None = None,
        needs_action: NeedsAction = requested,
        facts: Callable[[ClusterProfile, Mapping[str, Any]], Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("max_active_tis_per_dagrun", 1)  # set these in .partial() too when mapping:
        kwargs.setdefault("retries", 0)  # an up_for_retry instance would let the next broker start
        super().__init__(**kwargs)
        self.roll_id = roll_id
        self.broker = broker
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

    def _probe(self, prober: ClusterProber, kind: str, broker: int | None) -> Check:
        verdict = prober.look(kind, broker)
        return Check(verdict.ok, verdict.message())

    def _label(self, context: Any, step: str) -> None:
        b = self.broker
        dry = " · dry run" if self.dry_run else ""
        show_step(context, f"broker {b['id']} ({b['position']}/{b['total']}){dry} · {step}")

    # -- the broker -------------------------------------------------------------------------------------

    def execute(self, context: Any) -> dict:
        cfg = resolve_settings(self.settings, context["params"])
        self.dry_run = is_true(cfg.get("dry_run", False))
        self.interval_s = float(cfg.get("healthcheck_interval_s", 5))
        self.timeout_s = float(cfg.get("healthcheck_timeout_s", 900))
        bid, position = int(self.broker["id"]), int(self.broker["position"]) - 1
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
        if record.is_done(bid):
            p = record.progress(bid)
            self.log.info("broker %s: skip: finished in roll %r at %s (%s)", bid, self.roll_id, clock(p.at_ms),
                          p.reason)
            return {"broker": bid, "action": "skip"}
        self.log.info("%s", decision.reason)
        self.marks: dict[str, float] = {"began": time.time()}
        profile = profile_or_fail(cfg["cluster"])
        who = getattr(context.get("dag_run"), "triggering_user_name", None)
        begun = time.monotonic()
        with ClusterProber(profile) as prober:
            try:
                record = self._roll(context, cfg, profile, prober, store, record, who)
            except (AirflowFailException, BrokerCommandFailed) as exc:
                left = self._left_state(store.load() or record, prober)
                if not self.dry_run:
                    release_held(profile, context, self.log, "the roll stops at this broker")
                raise AirflowFailException(f"{exc}{left}") from exc
            if not record.is_done(bid):
                took = time.monotonic() - begun
                record = store.mark(record, bid, "done", "dry run" if self.dry_run else "restarted", took)
        self._report(context, record, bid)
        self.marks["done"] = time.time()
        return {"broker": bid, "action": "dry run" if self.dry_run else "restarted", "marks": self.marks}

    def _left_state(self, record: RollRecord, prober: ClusterProber) -> str:
        """What the failure leaves behind, for the task's last error line."""
        bid = int(self.broker["id"])
        phase = record.phase(bid)
        if phase in (None, "done"):
            return f" (broker {bid} was not stopped by this roll)"
        try:
            alive = prober.state(configs=False).has_broker(bid)
        except Exception:
            alive = None
        now = {True: "running", False: "DOWN", None: "in an unknown state (cluster unreachable)"}[alive]
        return (f" (broker {bid} is {now}; this roll's record: {phase} at {clock(record.progress(bid).at_ms)}; "
                f"clearing this task resumes it from there)")

    def _roll(self, context: Any, cfg: dict, profile: ClusterProfile, prober: ClusterProber, store: RollStore,
              record: RollRecord, who: str | None) -> RollRecord:
        bid = int(self.broker["id"])
        ssh_timeout = float(cfg.get("command_timeout_s", 300))
        alive = prober.state(configs=False).has_broker(bid)
        if record.phase(bid) is None and alive:
            facts = self.facts(profile, self.broker) if self.facts else {}
            act, why = self.needs_action(bid, facts)
            if not act:
                self.log.info("broker %s: left alone: %s", bid, why)
                return store.mark(record, bid, "done", f"left alone: {why}")
            self.log.warning("broker %s: rolling it due to: %s", bid, why)
        if not self.dry_run:
            ensure_held(profile, context, self.operation, self.log)

        def step_decision(step: str) -> bool:
            d = decide(step, bid, record, prober.state(configs=False).has_broker(bid))
            if d.action == "fail":
                raise AirflowFailException(d.reason)
            if d.action == "skip":
                self.log.info("%s", d.reason)
            return d.act

        def commands(*steps: tuple[str, str]) -> None:
            """Run the steps' commands; before the main one (stop / start) check the lock and record it."""
            nonlocal record
            for step, setting in steps:
                if not self.dry_run and not step_decision(step):
                    continue
                command = BrokerCommand.choose(profile, step, cfg.get(setting), self.broker)
                if command is None:
                    continue
                self._label(context, step.replace("_", "-"))
                if step in SENT and not self.dry_run:
                    ensure_held(profile, context, self.operation, self.log)
                    record = store.mark(record, bid, SENT[step], f"{step} sent by {who or 'this run'}")
                    self.marks[f"{step}_sent"] = time.time()
                command.run(profile.ssh_conn_id, ssh_timeout, self.log, self.dry_run, who)

        # gate
        if step_decision("gate"):
            self._label(context, "gate")
            self._gate(profile, prober, bid, record.consumer_groups, int(cfg.get("lag_ok_consecutive", 3)))
        # pre-stop, stop
        commands(("pre_stop", "pre_stop"), ("stop", "stop_command"))
        # gone
        if not self.dry_run and step_decision("wait_gone"):
            self._label(context, "gone?")
            self._wait(lambda: self._probe(prober, "gone", bid), PROBES["gone"].describe(bid))
            self.marks["gone"] = time.time()
            record = store.mark(record, bid, "stopped")
        # before start
        if self.before_start is not None and not self.dry_run and step_decision("before_start"):
            self._label(context, "before start")
            self.before_start(profile, self.broker, self.log, self.dry_run)
            record = store.mark(record, bid, "prepared")
        # pre-start, start
        commands(("pre_start", "pre_start"), ("start", "start_command"))
        if self.dry_run:
            self.log.info("DRY RUN: would wait until broker %s is registered, back in every ISR and leads its "
                          "preferred partitions again, then soak %s s", bid, cfg.get("soak_s", 0))
            return record
        # back: registered, caught up, leadership
        self._label(context, "registered?")
        self._wait(lambda: self._probe(prober, "registered", bid), PROBES["registered"].describe(bid))
        self.marks["registered"] = time.time()
        self._label(context, "caught up?")
        self._wait(lambda: self._probe(prober, "caught_up", bid), PROBES["caught_up"].describe(bid))
        self.marks["caught_up"] = time.time()
        self._label(context, "leadership?")
        self._wait(lambda: self._leadership(prober, bid), PROBES["leadership"].describe(bid))
        self.marks["leadership"] = time.time()
        soak = float(cfg.get("soak_s", 0) or 0)
        if soak > 0:
            self._label(context, f"soak {soak:.0f} s")
            self.log.info("broker %s: soaking %.0f s", bid, soak)
            time.sleep(soak)
        return record

    def _gate(self, profile: ClusterProfile, prober: ClusterProber, bid: int, groups: Any, streak_needed: int) -> None:
        """Cluster healthy and min-ISR safe now (one fresh OK), and, when groups are watched, Burrow OK
        ``streak_needed`` polls in a row (restarts cause lag spikes: kafka_roller's consumer_health retries)."""
        streak = 0
        burrow = BurrowHook.from_profile(profile) if groups else None

        def check() -> Check:
            nonlocal streak
            cluster = prober.look("gate", bid)
            if not cluster.ok:
                streak = 0
                return Check(False, cluster.message())
            if burrow is None:
                return Check(True, cluster.message())
            lag = health.consumer_lag(burrow.group_statuses(list(groups)))
            streak = streak + 1 if lag.ok else 0
            if streak < streak_needed:
                return Check(False, f"{lag.message()} ({streak}/{streak_needed} OK polls in a row)")
            return Check(True, f"{cluster.message()}; {lag.message()} ({streak} polls in a row)")

        try:
            if self.dry_run:
                result = check()
                self.log.info("DRY RUN: broker %s %s now: %s", bid,
                              "may be stopped" if result.ok else "may NOT be stopped", result.message)
                return
            # Burrow's OK streak needs polls spaced by the interval: no quick first polls at the gate
            self._wait(check, f"broker {bid} may be stopped", not_yet=f"broker {bid} may NOT be stopped yet",
                       ramp=False)
        finally:
            if burrow is not None:
                burrow.close()

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

    def _report(self, context: Any, record: RollRecord, bid: int) -> None:
        done, total = len(record.finished()), len(record.order)
        left = eta_s(record)
        finish = "" if left is None or done == total else (
            f"; about {left / 60:.1f} min left, done near {clock(int((time.time() + left) * 1000))}")
        self.log.info("roll %r: broker %s done; %d/%d brokers done%s", self.roll_id, bid, done, total, finish)
