"""A roll of KRaft controllers as tasks: :class:`ControllerPlanOperator` (under the cluster lock: the mode, the
roles, the quorum, the order, the hosts; frozen in the roll's record) and :class:`ControllerRollOperator`
(mapped over the plan, one controller per task, strictly one after another).

Each controller task: turn -> the active controller still last? (DescribeQuorum read again: the quorum leader
may have moved since the plan; ``kafka_ops.controller_roll.leader_last``) -> needs action? -> gate (a
caught-up majority of the voters without it, ``kafka_ops.quorum.can_restart_controller``) -> stop -> gone
(the service status command says stopped) -> before-start -> start -> back (a voter again, fetching since its
start, caught up, a leader elected) -> soak. Waits poll in the task's own process, like the broker roll's
(``operators.broker_roll``; same reasons); every step that can skip asks :func:`kafka_ops.roll.decide` with
``alive`` = the service status command says it runs, and the roll's record (``runtime.roll_store``) is written
before and after each action, so a cleared task resumes where this roll left the controller and acts only on
what this roll did. Every step that touches the cluster checks this run holds the cluster lock
(``runtime.lock_holding.ensure_held``). The logic is in ``kafka_ops.controller_roll``; this is the glue.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowRescheduleException
from hooks.kafka_admin import KafkaAdminHook
from kafka_ops import controller_roll as rules
from kafka_ops.quorum import DEFAULT_FETCH_TIMEOUT_MS, Quorum, can_restart_controller
from kafka_ops.roll import NeedsAction, RollRecord, clock, decide, eta_s, requested, turn
from runtime.broker_commands import BrokerCommandFailed, controller_command
from runtime.failures import describe
from runtime.grid import show_step
from runtime.lock_holding import ensure_held, release_held
from runtime.params import is_true, resolve_settings
from runtime.pending_labels import publish
from runtime.profiles import profile_or_fail
from runtime.roll_hooks import FAILED_STATES, RAMP_FROM_S, BeforeStart, Facts
from runtime.roll_store import RollStore, now_ms
from runtime.run_note import note_run
from runtime.waiting import Check, WaitAborted, WaitTimeout, call_until_answered, wait_until
from runtime.window_gate import window_gate

NODE = "controller"


def _waits(cfg: dict, log: Any) -> dict:
    return {"interval_s": float(cfg.get("healthcheck_interval_s", 5)),
            "timeout_s": float(cfg.get("healthcheck_timeout_s", 900)), "log": log}


class ControllerPlanOperator(BaseOperator):
    """Decide the run's path and freeze the controller roll's plan; returns the mapped items of the controller
    task (``kafka_ops.controller_roll.controller_items``: ``{"position", "total", "id", "host", "label",
    "active", "grid_label"}``), in roll order, or ``[]`` when the run restarts no controller (ZooKeeper mode, or
    ``roles=brokers``).

    Checks, each failure naming the bad value with nothing touched: a valid profile with an SSH connection;
    the mode (``KafkaAdminHook.is_kraft``: DescribeQuorum answered = KRaft) against ``roles`` and
    ``controllers`` (``kafka_ops.controller_roll.role_plan``); a quorum leader (waited for up to
    ``healthcheck_timeout_s`` during an election); requested ids are voters, not repeated; every controller has
    a host (the profile's ``controller_hosts``, else DescribeQuorum v2's endpoints). The order: followers by id,
    the quorum leader last. The first computation is frozen in the roll's record: clearing the plan task, or the
    whole run, resumes the same controllers in the same order.

    :param roll_id: the roll's id (its record's key), e.g. ``"controllers"``.
    :param settings: ``cluster``, ``roles`` (``all`` | ``brokers`` | ``controllers``; default ``all``),
        ``controllers`` (node ids, [] = every voter), ``healthcheck_interval_s``, ``healthcheck_timeout_s``:
        values or :class:`runtime.params.FromParam`.
    :param labels_for: the id of the task mapped over the plan (``"controllers.controller"``): the plan publishes
        each of its instances' Grid labels for the scheduler (``runtime.pending_labels``); None publishes nothing.
    :raises AirflowFailException: any invalid input (not retried: waiting cannot fix it).
    """

    ui_color = "#eeeeee"

    def __init__(self, *, roll_id: str, settings: dict, labels_for: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.roll_id = roll_id
        self.settings = settings
        self.labels_for = labels_for

    def execute(self, context: Any) -> list[dict]:
        cfg = resolve_settings(self.settings, context["params"])
        return publish(context, self.labels_for, self._plan(context, cfg))

    def _plan(self, context: Any, cfg: dict) -> list[dict]:
        store = RollStore(context, self.roll_id)
        frozen = store.load()
        dry_run = is_true(cfg.get("dry_run", False))
        if frozen is not None:
            self.log.info("roll %r resumes: plan frozen at %s: %s; finished: %s", self.roll_id,
                          clock(frozen.began_ms), frozen.order or "no controller", frozen.finished() or "none")
            return rules.controller_items(frozen.steps, dry_run)
        profile = profile_or_fail(cfg["cluster"])
        waits = _waits(cfg, self.log)
        requested_ids = list(cfg.get("controllers") or [])
        with KafkaAdminHook(profile=profile) as admin:
            kraft = _ask(admin.is_kraft, "DescribeQuorum (a KRaft cluster?)", waits)
            try:
                roles = rules.role_plan(str(cfg.get("roles") or "all"), requested_ids, kraft)
            except ValueError as exc:
                raise AirflowFailException(f"cluster {profile.conn_id!r}: {exc}") from exc
            self.log.info("%s", roles.reason)
            if not roles.controllers:
                store.save(RollRecord(self.roll_id, now_ms()))
                self.log.info("roll %r: no controller to restart", self.roll_id)
                return []
            quorum = self._quorum_with_leader(admin, waits)
        self.log.info("%s", rules.describe_quorum_line(quorum))
        try:
            plan = rules.plan_controllers(quorum, requested_ids, profile.controller_hosts, profile.conn_id)
        except ValueError as exc:
            raise AirflowFailException(f"cluster {profile.conn_id!r}: {exc}") from exc
        for reason in plan.reasons:
            self.log.info("plan: %s", reason)
        for action in ("stop", "start", "status"):
            command = controller_command(profile, action, plan.steps[0])
            self.log.info("command %s: %s: %s", action, command.origin, command.text)
        record = RollRecord(self.roll_id, now_ms(), tuple(plan.steps))
        self.log.info("roll %r: order %s, one controller at a time, the quorum leader last", self.roll_id,
                      plan.order)
        store.save(record)
        items = rules.controller_items(record.steps, dry_run)
        note_run(context, "map index " + ", ".join(f"{i} = {item['label']}" + (" (active)" if item["active"] else "")
                                                   for i, item in enumerate(items)),
                 self.log, line_key=f"roll {self.roll_id!r}")
        return items

    def _quorum_with_leader(self, admin: KafkaAdminHook, waits: dict) -> Quorum:
        """DescribeQuorum until it names a leader (an election takes a few seconds)."""
        seen: list[Quorum] = []

        def check() -> Check:
            seen.append(admin.describe_quorum())
            return Check(seen[-1].has_leader, rules.describe_quorum_line(seen[-1]))

        try:
            wait_until(check, what="the metadata quorum has a leader", **waits)
        except (WaitAborted, WaitTimeout) as exc:
            raise AirflowFailException(str(exc)) from exc
        return seen[-1]


def _ask(call: Callable[[], Any], what: str, waits: dict) -> Any:
    """``call()``, waiting out transient errors up to the health-check timeout; AirflowFailException for a
    fatal error or the deadline."""
    try:
        return call_until_answered(call, what=what, **waits)
    except (WaitAborted, WaitTimeout) as exc:
        raise AirflowFailException(str(exc)) from exc


class LeaderMoved(Exception):
    """While its gate waited, the controller whose turn it is became the quorum leader and other controllers
    of the roll remain: the task chooses again (``kafka_ops.controller_roll.leader_last``)."""


class ControllerRollOperator(BaseOperator):
    """Restart one KRaft controller of a roll (mapped over the roll's plan; see the module docstring).

    :param roll_id: the roll this controller belongs to (its record's key).
    :param item: ``{"position", "total", "id", "host", "label", "active", "grid_label"}`` (mapped from the plan
        task). The controller actually restarted is the one at ``position`` in the roll's record, which differs
        from ``id`` when the quorum leader moved since the plan (the leader goes last); the task's Grid label
        follows the record.
    :param settings: ``cluster``, ``dry_run``, ``healthcheck_interval_s``, ``healthcheck_timeout_s``,
        ``soak_s``, ``window_policy``, optional ``command_timeout_s`` (SSH commands, default 300 s) and
        ``quorum_fetch_timeout_ms`` (the cluster's ``controller.quorum.fetch.timeout.ms``, default 2,000 ms):
        values or :class:`runtime.params.FromParam`.
    :param operation: the lock's operation label ("rolling restart").
    :param before_start: ``runtime.roll_hooks.BeforeStart``, called with the controller's step dict
        (``{"id", "host", "role": "controller", ...}``) between gone and start; None = nothing.
    :param needs_action: / :param facts: as for the broker roll; default: every planned controller.

    Returns (XCom) ``{"controller", "action", "marks"}``: ``marks`` are epoch seconds of ``began``,
    ``stop_sent``, ``gone``, ``start_sent``, ``back``, ``done`` (those reached).
    """

    ui_color = "#fdf0e0"

    def __init__(
        self,
        *,
        roll_id: str,
        item: dict,
        settings: dict,
        operation: str = "rolling restart",
        before_start: BeforeStart | None = None,
        needs_action: NeedsAction = requested,
        facts: Facts | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.roll_id = roll_id
        self.item = item
        self.settings = settings
        self.operation = operation
        self.before_start = before_start
        self.needs_action = needs_action
        self.facts = facts

    # -- helpers ----------------------------------------------------------------------------------------

    def _sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def _previous_failed(self, context: Any, position: int) -> bool:
        ti = context["ti"]
        states = ti.get_task_states(dag_id=ti.dag_id, task_ids=[ti.task_id], run_ids=[ti.run_id])
        return states.get(ti.run_id, {}).get(f"{ti.task_id}_{position - 1}") in FAILED_STATES

    def _wait(self, check: Callable[[], Check], what: str, not_yet: str | None = None,
              ramp: bool = True) -> Check:
        """Wait for ``check`` (quick first polls with ``ramp``); a :class:`LeaderMoved` raised by it comes
        through as itself."""
        try:
            return wait_until(check, what=what, interval_s=self.interval_s, timeout_s=self.timeout_s, log=self.log,
                              not_yet=not_yet, ramp_from_s=RAMP_FROM_S if ramp else None, sleep=self._sleep)
        except WaitAborted as exc:
            if isinstance(exc.__cause__, LeaderMoved):
                raise exc.__cause__ from None
            raise AirflowFailException(str(exc)) from exc
        except WaitTimeout as exc:
            raise AirflowFailException(str(exc)) from exc

    def _ask(self, call: Callable[[], Any], what: str) -> Any:
        try:
            return call_until_answered(call, what=what, interval_s=self.interval_s, timeout_s=self.timeout_s,
                                       log=self.log, sleep=self._sleep)
        except (WaitAborted, WaitTimeout) as exc:
            raise AirflowFailException(str(exc)) from exc

    def _quorum(self) -> Quorum:
        return self._ask(self.admin.describe_quorum, "DescribeQuorum")

    def _status(self, step: dict) -> tuple[str, str]:
        """(``running`` | ``transition`` | ``stopped``, what the status command printed); SSH errors raised."""
        rc, out = controller_command(self.profile, "status", step).status(self.profile.ssh_conn_id,
                                                                          self.ssh_timeout_s)
        first = (out.strip().splitlines() or [""])[0]
        return rules.service_state(rc, out), f"{first or 'no output'} (exit {rc})"

    def _alive(self, step: dict) -> bool:
        """Whether the controller's process runs (or is between states), per the host's status command. A dry
        run sends no command and takes it as running."""
        if self.dry_run:
            return True
        seen: list[str] = []

        def look() -> Check:
            state, said = self._status(step)
            seen.append(state)
            return Check(True, f"{said}: {state}")

        self._wait(look, f"controller {step['id']} ({step['host']}) service status")
        return seen[-1] != "stopped"

    def _show(self, context: Any, step: str) -> None:
        show_step(context, f"{self.item['grid_label']} · {step}")

    def _follow(self, step: dict, quorum: Quorum) -> None:
        """Point the task's label (the map index template renders ``task.item`` again when the task ends) at
        the controller this task restarts, marked active when it is (or was, at this turn) the quorum leader:
        once restarted it is a follower, but the Grid should still say the active controller went here."""
        cid = int(step["id"])
        was_active = int(self.item.get("id", -1)) == cid and bool(self.item.get("active"))
        item = {**self.item, "id": cid, "host": step["host"], "label": f"controller {cid}",
                "active": was_active or quorum.leader_id == cid}
        self.item = {**item, "grid_label": rules.controller_grid_label(item, self.dry_run)}

    # -- the controller ---------------------------------------------------------------------------------

    def execute(self, context: Any) -> dict:
        cfg = resolve_settings(self.settings, context["params"])
        self.dry_run = is_true(cfg.get("dry_run", False))
        if "grid_label" not in self.item:  # planned by an earlier kafka-ops (a run resumed after an upgrade)
            self.item = {**self.item, "grid_label": rules.controller_grid_label(self.item, self.dry_run)}
        self.interval_s = float(cfg.get("healthcheck_interval_s", 5))
        self.timeout_s = float(cfg.get("healthcheck_timeout_s", 900))
        self.ssh_timeout_s = float(cfg.get("command_timeout_s", 300))
        self.fetch_timeout_ms = int(cfg.get("quorum_fetch_timeout_ms") or DEFAULT_FETCH_TIMEOUT_MS)
        position = int(self.item["position"]) - 1
        store = RollStore(context, self.roll_id)
        record = store.load()
        if record is None:
            raise AirflowFailException(f"roll {self.roll_id!r} has no frozen plan: its plan task has not run")
        if not 0 <= position < len(record.order):
            raise AirflowFailException(f"roll {self.roll_id!r} has {len(record.order)} controllers; this task is "
                                       f"position {position + 1}: its plan changed, clear the plan task")
        decision = turn(position, record, position > 0 and self._previous_failed(context, position), node=NODE)
        if decision.action == "fail":
            raise AirflowFailException(decision.reason)
        if decision.action == "skip":  # only outside the scheduler's map-index order (e.g. dag.test)
            self.log.info("%s", decision.reason)
            raise AirflowRescheduleException(datetime.now(UTC) + timedelta(seconds=2))
        cid = record.order[position]
        if record.is_done(cid):
            p = record.progress(cid)
            self.log.info("controller %s: skip: finished in roll %r at %s (%s)", cid, self.roll_id, clock(p.at_ms),
                          p.reason)
            self._follow(record.steps[position], Quorum(-1, -1, -1, ()))
            return {"controller": cid, "action": "skip"}
        self.log.info("%s", decision.reason)
        if record.phase(cid) is None:  # a controller that began finishes, window or not
            window_gate(self, context, what=f"{self.item['label']} ({self.item['position']}/{self.item['total']})",
                        policy=str(cfg.get("window_policy") or "wait"), dry_run=self.dry_run,
                        label=lambda step: self._show(context, step))
        self.marks: dict[str, float] = {"began": time.time()}
        self.profile = profile_or_fail(cfg["cluster"])
        who = getattr(context.get("dag_run"), "triggering_user_name", None)
        begun = time.monotonic()
        with KafkaAdminHook(profile=self.profile) as admin:
            self.admin = admin
            try:
                record, cid, acted = self._roll(context, cfg, store, record, position, who)
            except (AirflowFailException, BrokerCommandFailed) as exc:
                left = self._left_state(store.load() or record, position)
                if not self.dry_run:
                    release_held(self.profile, context, self.log, "the roll stops at this controller")
                raise AirflowFailException(f"{exc}{left}") from exc
        if acted:
            record = store.mark(record, cid, "done", "dry run" if self.dry_run else "restarted",
                                time.monotonic() - begun)
        self._report(record, cid)
        self.marks["done"] = time.time()
        action = "dry run" if self.dry_run else "restarted" if acted else "left alone"
        return {"controller": cid, "action": action, "marks": self.marks}

    def execute_in_window(self, context: Any, event: Any = None) -> dict:
        """Resumed by the window gate's trigger when the next maintenance window opens: the controller from its
        start (turn, gate, ...), the window checked again."""
        return self.execute(context)

    def _leader_last(self, store: RollStore, record: RollRecord, position: int, quorum: Quorum) -> RollRecord:
        """The record with the current quorum leader behind every other controller still to go (saved when
        that changes the order)."""
        begun = {c for c in record.order if record.phase(c) not in (None, "done")}
        order, reason = rules.leader_last(record.order, position, quorum.leader_id, begun)
        if reason is None:
            return record
        self.log.warning("%s", reason)
        steps = tuple({**s, "leader": int(s["id"]) == quorum.leader_id}
                      for s in rules.reorder_steps(record.steps, order))
        record = replace(record, steps=steps)
        store.save(record)
        return record

    def _roll(self, context: Any, cfg: dict, store: RollStore, record: RollRecord, position: int,
              who: str | None) -> tuple[RollRecord, int, bool]:
        """Every step for the controller at ``position``; returns the record, the controller and whether this
        task acted on it (False: left alone by the needs-action rule)."""
        profile = self.profile
        for _ in range(len(record.order) + 1):
            quorum = self._quorum()
            self.log.info("%s", rules.describe_quorum_line(quorum))
            record = self._leader_last(store, record, position, quorum)
            cid = record.order[position]
            step = dict(record.steps[position])
            self._follow(step, quorum)
            if step.get("leader") and quorum.leader_id != cid:
                self.log.info("controller %s was the quorum leader when planned; the leader is now %s: it is "
                              "restarted as a follower", cid, quorum.leader_id)
            if record.phase(cid) is None:
                facts = self.facts(profile, step, cfg) if self.facts else {}
                act, why = self.needs_action(cid, facts)
                if not act:
                    self.log.info("controller %s: left alone: %s", cid, why)
                    return store.mark(record, cid, "done", f"left alone: {why}"), cid, False
                self.log.warning("controller %s: rolling it due to: %s", cid, why)
            if not self.dry_run:
                ensure_held(profile, context, self.operation, self.log)
            d = decide("gate", cid, record, self._alive(step), node=NODE)
            if d.action == "fail":
                raise AirflowFailException(d.reason)
            if d.action == "skip":
                self.log.info("%s", d.reason)
                break
            try:
                self._show(context, "gate")
                self._gate(record, position, step)
                break
            except LeaderMoved as moved:
                self.log.warning("%s: choosing again", moved)
        else:
            raise AirflowFailException(f"roll {self.roll_id!r}: the quorum leader kept moving onto the controller "
                                       f"whose turn it was ({len(record.order) + 1} times): not stopping any")
        # stop
        stop = controller_command(profile, "stop", step)
        d = decide("stop", cid, record, self._alive(step), node=NODE)
        if d.action == "fail":
            raise AirflowFailException(d.reason)
        if d.action == "skip":
            self.log.info("%s", d.reason)
        else:
            self._show(context, "stop")
            if not self.dry_run:
                ensure_held(profile, context, self.operation, self.log)
                record = store.mark(record, cid, "stopping", f"stop sent by {who or 'this run'}")
                self.marks["stop_sent"] = time.time()
            stop.run(profile.ssh_conn_id, self.ssh_timeout_s, self.log, self.dry_run, who)
        # gone
        fetched_before = None
        status = controller_command(profile, "status", step)
        if self.dry_run:
            self.log.info("DRY RUN: would wait until controller %s's service status says it stopped (%s: %s)", cid,
                          status.origin, status.text)
        elif decide("wait_gone", cid, record, False, node=NODE).act:
            self._show(context, "gone?")

            def gone() -> Check:
                state, said = self._status(step)
                return Check(state == "stopped", f"service status: {said}: {state}")

            self._wait(gone, f"controller {cid} has stopped (its service status)")
            self.marks["gone"] = time.time()
            record = store.mark(record, cid, "stopped")
            fetched_before = self._last_fetch(cid)
        # before start
        if self.before_start is not None and self.dry_run:
            self.log.info("DRY RUN: would run the roll's before-start step on controller %s", cid)
        elif self.before_start is not None:
            d = decide("before_start", cid, record, self._alive(step), node=NODE)
            if d.action == "fail":
                raise AirflowFailException(d.reason)
            if d.act:
                self._show(context, "before start")
                self.before_start(profile, step, cfg, self.log, False)
                record = store.mark(record, cid, "prepared")
            else:
                self.log.info("%s", d.reason)
        # start
        start = controller_command(profile, "start", step)
        d = decide("start", cid, record, self._alive(step), node=NODE) if not self.dry_run else None
        if d is not None and d.action == "fail":
            raise AirflowFailException(d.reason)
        if d is not None and not d.act:
            self.log.info("%s", d.reason)
        else:
            self._show(context, "start")
            if not self.dry_run:
                ensure_held(profile, context, self.operation, self.log)
                record = store.mark(record, cid, "starting", f"start sent by {who or 'this run'}")
                self.marks["start_sent"] = time.time()
            start.run(profile.ssh_conn_id, self.ssh_timeout_s, self.log, self.dry_run, who)
        soak = float(cfg.get("soak_s", 0) or 0)
        if self.dry_run:
            self.log.info("DRY RUN: would wait until controller %s is a voter again, fetching since its start and "
                          "caught up (controller.quorum.fetch.timeout.ms %d), with a quorum leader, then soak %.0f s",
                          cid, self.fetch_timeout_ms, soak)
            return record, cid, True
        # back
        started_ms = record.progress(cid).at_ms  # the start sent (or, if someone else started it, seen gone)
        self._show(context, "back?")

        def back() -> Check:
            quorum = self.admin.describe_quorum()
            verdict = rules.controller_back(quorum, cid, started_ms, self.fetch_timeout_ms, fetched_before)
            if verdict.ok:
                self._follow(step, quorum)
                return Check(True, rules.describe_quorum_line(quorum))
            return Check(False, verdict.message())

        self._wait(back, f"controller {cid} is back in the quorum and caught up")
        self.marks["back"] = time.time()
        if soak > 0:
            self._show(context, f"soak {soak:.0f} s")
            self.log.info("controller %s: soaking %.0f s", cid, soak)
            self._sleep(soak)
        return record, cid, True

    def _gate(self, record: RollRecord, position: int, step: dict) -> None:
        """Wait until the quorum can do without the controller (a caught-up majority of the voters stays,
        Strimzi's rule) and it is not the quorum leader while other controllers of the roll remain (then
        :class:`LeaderMoved`). A dry run looks once and logs the verdict."""
        cid = int(step["id"])
        others = [c for c in record.order[position + 1:] if not record.is_done(c)]

        def check() -> Check:
            quorum = self.admin.describe_quorum()
            later = rules.must_go_later(quorum, cid, others)
            if later:
                raise LeaderMoved(later)
            verdict = can_restart_controller(quorum, cid, self.fetch_timeout_ms)
            if not verdict.ok:
                return Check(False, verdict.message())
            leader = "; it is the quorum leader, the last of the roll: its stop moves leadership to another voter" \
                if quorum.leader_id == cid else ""
            return Check(True, f"a caught-up majority of the voters stays without it{leader} "
                               f"({rules.describe_quorum_line(quorum)})")

        if self.dry_run:
            try:
                result = check()
                self.log.info("DRY RUN: controller %s may%s be stopped now: %s", cid, "" if result.ok else " NOT",
                              result.message)
            except LeaderMoved as moved:
                self.log.warning("DRY RUN: %s", moved)
            except Exception as exc:  # a dry run reports, it does not wait
                self.log.warning("DRY RUN: controller %s's gate could not be checked: %s", cid, describe(exc))
            return
        self._wait(check, f"controller {cid} may be stopped", not_yet=f"controller {cid} may NOT be stopped yet")

    def _last_fetch(self, cid: int) -> int | None:
        """The leader's last fetch time of ``cid`` (ms, leader's clock), read once it is gone; None if unknown."""
        try:
            voter = self.admin.describe_quorum().voter(cid)
        except Exception as exc:  # only a guard against clock skew: the start-time check still applies
            self.log.info("controller %s: last fetch before the stop not read (%s)", cid, describe(exc))
            return None
        return None if voter is None else voter.last_fetch_ms

    def _left_state(self, record: RollRecord, position: int) -> str:
        """What the failure leaves behind, for the task's last error line."""
        cid = record.order[position] if 0 <= position < len(record.order) else int(self.item["id"])
        phase = record.phase(cid)
        if phase in (None, "done"):
            return f" (controller {cid} not stopped by this roll)"
        step = next((dict(s) for s in record.steps if int(s["id"]) == cid), {"id": cid, "host": self.item["host"]})
        try:
            state, said = self._status(step)
            now = f"{'DOWN' if state == 'stopped' else state} (service status: {said})"
        except Exception as exc:
            now = f"in an unknown state (service status not readable: {describe(exc)})"
        return (f" (controller {cid} is {now}; this roll's record: {phase} at {clock(record.progress(cid).at_ms)}; "
                "clearing this task resumes it from there)")

    def _report(self, record: RollRecord, cid: int) -> None:
        done, total = len(record.finished()), len(record.order)
        left = eta_s(record)
        finish = "" if left is None or done == total else (
            f"; about {left / 60:.1f} min left, done near {clock(int((time.time() + left) * 1000))}")
        self.log.info("roll %r: controller %s done; %d/%d controllers done%s", self.roll_id, cid, done, total, finish)

