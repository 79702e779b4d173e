"""A roll of KRaft controllers as tasks: :class:`ControllerPlanOperator` (under the cluster lock: the mode, the
roles, the quorum, the order, the hosts; frozen in the roll's record) and :class:`ControllerRollOperator`
(mapped over the plan, one controller per task, strictly one after another).

Each controller task: turn -> the active controller still last? (DescribeQuorum read again: the quorum leader
may have moved since the plan; ``kafka_ops.controller_roll.leader_last``) -> needs action? -> gate (a
caught-up majority of the voters without it, ``kafka_ops.quorum.can_restart_controller``; no partition offline or
under-replicated, ``kafka_ops.controller_roll.partitions_gate``; every broker answers,
``kafka_ops.health.brokers_answer``) -> stop -> gone
(the service status command says stopped) -> before-start -> start -> back (a voter again, fetching since its
start, caught up, a leader elected) -> soak. The loop (turn, record, resume, lock, decisions, report) is the one
every node roll runs (``operators.node_roll``), with ``alive`` = the service status command says it runs; the
quorum rules are in ``kafka_ops.controller_roll`` and ``kafka_ops.quorum``; this is the glue.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from hooks.kafka_admin import KafkaAdminHook
from kafka_ops import controller_roll as rules
from kafka_ops.health import brokers_answer
from kafka_ops.profile import ClusterProfile
from kafka_ops.quorum import (
    Quorum,
    can_restart_controller,
    combined_in_controller_roll,
    combined_nodes,
    observer_controllers,
)
from kafka_ops.roll import RollRecord, clock
from runtime.broker_commands import BrokerCommand, controller_command
from runtime.failures import RunRefused, describe
from runtime.roll_store import RollStore, now_ms
from runtime.run_note import note_run
from runtime.start_dependencies import Dependency, dependencies
from runtime.waiting import Check

from operators.node_roll import ChooseAgain, NodeRollOperator, RollPlanBase

NODE = "controller"


class ControllerPlanOperator(RollPlanBase):
    """Decide the run's path and freeze the controller roll's plan; returns the mapped items of the controller
    task (``kafka_ops.controller_roll.controller_items``: ``{"position", "total", "id", "host", "label",
    "active", "grid_label"}``), in roll order, or ``[]`` when the run restarts no controller (ZooKeeper mode, or
    ``roles=brokers``).

    Checks, each failure naming the bad value with nothing touched: a valid profile with an SSH connection;
    the run's mode (``runtime.cluster_mode.run_mode``: decided under the lock) against ``roles`` and
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
    :param modes: / :param skip_reason: the cluster modes the roll exists in and the line logged in another (as for
        ``operators.roll_plan.RollPlanOperator``); ZooKeeper mode has no controller to roll in any case.
    :raises AirflowFailException: any invalid input (not retried: waiting cannot fix it); combined nodes (voters
        that are registered brokers too, ``kafka_ops.quorum.combined_nodes``) named in ``controllers`` or asked
        for by ``roles=controllers``: they roll with the brokers (``operators.roll_plan``), under the quorum check.
        With ``roles=all`` this roll restarts only the dedicated controllers.
    """

    ui_color = "#eeeeee"

    def _plan(self, context: Any, cfg: dict) -> list[dict]:
        store = RollStore(context, self.roll_id)
        frozen = store.load()
        dry_run = self.dry_run
        if frozen is not None:
            self.log.info("roll %r resumes: plan frozen at %s: %s; finished: %s", self.roll_id,
                          clock(frozen.began_ms), frozen.order or "no controller", frozen.finished() or "none")
            return rules.controller_items(frozen.steps, dry_run)
        profile = self.profile
        requested_ids = list(self.setting("controllers"))
        with KafkaAdminHook(profile=profile) as admin:
            mode = self._mode_or_nothing(context, admin, store)
            if mode is None:
                return []
            try:
                roles = rules.role_plan(str(self.setting("roles")), requested_ids, mode.has_quorum,
                                        list(self.cfg.get("named_brokers") or []))
            except ValueError as exc:
                raise RunRefused(f"cluster {profile.cluster!r}: {exc}") from exc
            self.log.info("%s", roles.reason)
            if not roles.controllers:
                return self._nothing(store, roles.reason, f"roll {self.roll_id!r}: no controller to restart")
            quorum = self._quorum_with_leader(admin)
            # the registered brokers: a voter that is one too is a combined node, which the broker roll restarts
            brokers = self.ask(lambda: admin.cluster_state(configs=False, describe_cluster=False).broker_ids,
                               "the cluster's brokers (Metadata)")
        self.log.info("%s", rules.describe_quorum_line(quorum))
        combined = combined_nodes(quorum, brokers)
        observers = observer_controllers(quorum, profile.controller_hosts)
        strangers = sorted(o.replica_id for o in quorum.observers
                           if o.replica_id not in brokers and o.replica_id not in profile.controller_hosts)
        if strangers:
            self.log.info("observers of the quorum %s are neither registered brokers nor in the connection's "
                          "controller_hosts: a controller that is not a voter (KIP-853) is restarted only when "
                          "controller_hosts names it (a broker that is down shows here too)", strangers)
        wanted = requested_ids or (quorum.voter_ids if not roles.brokers else [])  # roles=controllers: every voter
        asked = sorted(set(wanted) & set(combined))
        if asked:
            raise RunRefused(f"cluster {profile.cluster!r}: {combined_in_controller_roll(asked, quorum)}")
        if combined:
            dedicated = [c for c in quorum.voter_ids if c not in combined]
            self.log.info("combined nodes %s (quorum voters that are brokers too) roll with the brokers, under the "
                          "quorum check; this roll restarts the dedicated controllers %s", combined,
                          dedicated or "none")
            if not dedicated:
                return self._nothing(store, "every voter is a combined node: no dedicated controller to restart",
                                     f"roll {self.roll_id!r}: every voter is a combined node: no dedicated "
                                     "controller to restart")
            requested_ids = list(requested_ids) or observers + dedicated
        try:
            plan = rules.plan_controllers(quorum, requested_ids, profile.controller_hosts, profile.cluster,
                                          observers=observers)
        except ValueError as exc:
            raise RunRefused(f"cluster {profile.cluster!r}: {exc}") from exc
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

    def _quorum_with_leader(self, admin: KafkaAdminHook) -> Quorum:
        """DescribeQuorum until it names a leader (an election takes a few seconds)."""
        seen: list[Quorum] = []

        def check() -> Check:
            seen.append(admin.describe_quorum())
            return Check(seen[-1].has_leader, rules.describe_quorum_line(seen[-1]))

        self.wait(check, "the metadata quorum has a leader")
        return seen[-1]


class LeaderMoved(ChooseAgain):
    """While its gate waited, the controller whose turn it is became the quorum leader and other controllers
    of the roll remain: the task chooses again (``kafka_ops.controller_roll.leader_last``)."""


class ControllerRollOperator(NodeRollOperator):
    """Restart one KRaft controller of a roll (mapped over the roll's plan; see the module docstring and
    :class:`operators.node_roll.NodeRollOperator` for ``roll_id``, ``settings``, ``operation``, ``before_start``,
    ``needs_action`` and ``facts``; ``before_start`` and ``facts`` get the controller's step dict
    ``{"id", "host", "role": "controller", ...}``).

    :param item: ``{"position", "total", "id", "host", "label", "active", "grid_label"}`` (mapped from the plan
        task). The controller actually restarted is the one at ``position`` in the roll's record, which differs
        from ``id`` when the quorum leader moved since the plan (the leader goes last); the task's Grid label
        follows the record.

    Settings read besides the shared ones: ``quorum_fetch_timeout_ms`` (the cluster's
    ``controller.quorum.fetch.timeout.ms``, default 2,000 ms). The commands are the profile's controller service
    commands (``runtime.broker_commands.controller_command``); alive = its service status says it runs.

    Returns (XCom) ``{"controller", "action", "marks"}``: ``marks`` are epoch seconds of ``began``,
    ``stop_sent``, ``gone``, ``start_sent``, ``back``, ``done`` (those reached).
    """

    ui_color = "#fdf0e0"
    node = NODE
    item_field = "item"

    def __init__(self, *, item: dict, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.item = item

    # -- the node kind --------------------------------------------------------------------------------------------

    def _configure(self) -> None:
        if "grid_label" not in self.item:  # planned by an earlier kafka-ops (a run resumed after an upgrade)
            self.item = {**self.item, "grid_label": rules.controller_grid_label(self.item, self.dry_run)}
        self.fetch_timeout_ms = int(self.setting("quorum_fetch_timeout_ms"))

    def _position(self) -> int:
        return int(self.item["position"]) - 1

    def _what(self) -> str:
        return f"{self.item['label']} ({self.item['position']}/{self.item['total']})"

    def _on_finished(self, record: RollRecord, position: int) -> None:
        self._follow(record.steps[position], Quorum(-1, -1, -1, ()))

    @contextmanager
    def _session(self, profile: ClusterProfile, record: RollRecord) -> Iterator[None]:
        with KafkaAdminHook(profile=profile) as self.admin:
            yield

    def _choose(self, store: RollStore, record: RollRecord, position: int) -> tuple[RollRecord, dict[int, dict]]:
        """The controller at ``position`` once the current quorum leader is behind every other controller still to
        go (DescribeQuorum read again: the leader may have moved since the plan)."""
        quorum = self._quorum()
        self.log.info("%s", rules.describe_quorum_line(quorum))
        record = self._leader_last(store, record, position, quorum)
        cid = record.order[position]
        step = dict(record.steps[position])
        self._follow(step, quorum)
        if step.get("leader") and quorum.leader_id != cid:
            self.log.info("controller %s was the quorum leader when planned; the leader is now %s: it is "
                          "restarted as a follower", cid, quorum.leader_id)
        return record, {cid: step}

    def _dependencies(self, nodes: Mapping[int, dict]) -> list[Dependency]:
        """ZooKeeper while the cluster migrates to KRaft; nothing in KRaft mode (``kafka_ops.start_needs``)."""
        mode = self.mode(self._context, self.admin)
        return dependencies("controller", mode, self.profile, self.admin,
                            lambda: list(self.admin.cluster_state(configs=False).broker_ids))

    def _alive(self, nodes: Mapping[int, dict]) -> set[int]:
        """The controllers whose process runs (or is between states), per the host's status command. A dry run
        sends no command and takes them as running."""
        if self.dry_run:
            return set(nodes)
        alive = set()
        for cid, step in nodes.items():
            seen: list[str] = []

            def look(step: dict = step, seen: list[str] = seen) -> Check:
                state, said = self._status(step)
                seen.append(state)
                return Check(True, f"{said}: {state}")

            self._wait(look, f"controller {cid} ({step['host']}) service status")
            if seen[-1] != "stopped":
                alive.add(cid)
        return alive

    def _gate(self, record: RollRecord, position: int, nodes: Mapping[int, dict], gated: list[int],
              stopped: list[int]) -> None:
        """Wait until the quorum can do without the controller (a caught-up majority of the voters stays,
        Strimzi's rule) and it is not the quorum leader while other controllers of the roll remain (then
        :class:`LeaderMoved`); a controller that is an observer (its step's ``"observer"``) only needs a quorum
        leader (``kafka_ops.controller_roll.observer_gate``). Either way, no partition may be offline or
        under-replicated (``kafka_ops.controller_roll.partitions_gate``: one Metadata request), every broker answers
        (``kafka_ops.health.brokers_answer``: a hung broker still looks in-sync) and, while the cluster migrates,
        ZooKeeper answers (:meth:`_start_needs`). A dry run looks once
        and logs the verdict."""
        cid = gated[0]
        others = [c for c in record.order[position + 1:] if not record.is_done(c)]
        observer = bool(nodes[cid].get("observer"))

        def check() -> Check:
            quorum = self.admin.describe_quorum()
            if observer:
                verdict = rules.observer_gate(quorum, cid)
                if not verdict.ok:
                    return Check(False, verdict.message())
                said = (f"controller {cid} is an observer, not a voter: its stop leaves the quorum's majority as it "
                        f"is ({rules.describe_quorum_line(quorum)})")
            else:
                later = rules.must_go_later(quorum, cid, others)
                if later:
                    raise LeaderMoved(later)
                verdict = can_restart_controller(quorum, cid, self.fetch_timeout_ms)
                if not verdict.ok:
                    return Check(False, verdict.message())
                leader = "; it is the quorum leader, the last of the roll: its stop moves leadership to another " \
                    "voter" if quorum.leader_id == cid else ""
                said = (f"a caught-up majority of the voters stays without it{leader} "
                        f"({rules.describe_quorum_line(quorum)})")
            state = self.admin.cluster_state(configs=False, describe_cluster=False)  # Metadata: partitions, brokers
            partitions = rules.partitions_gate(state, cid)
            if not partitions.ok:
                return Check(False, partitions.message())
            answers = brokers_answer(self.admin.unanswered_brokers({b.id: b.address for b in state.brokers}))
            if not answers.ok:
                return Check(False, answers.message())
            needs = self._start_needs(nodes)  # migrating: ZooKeeper
            if not needs.ok:
                return Check(False, needs.message())
            return Check(True, f"{said}; no partition offline or under-replicated; every broker answers"
                               + "".join(f"; {d.short} answers" for d in self._registers_with(nodes)))

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
        self._wait(check, f"controller {cid} may be stopped", not_yet=f"controller {cid} may not be stopped yet")

    def _command(self, step: str, choice: str | None, node: dict) -> BrokerCommand | None:
        """The profile's controller service command for ``stop`` / ``start``; no pre-steps for controllers."""
        return controller_command(self.profile, step, node) if step in ("stop", "start") else None

    def _wait_gone(self, nodes: Mapping[int, dict]) -> None:
        self.fetched_before: dict[int, int | None] = {}
        for cid, step in nodes.items():

            def gone(step: dict = step) -> Check:
                state, said = self._status(step)
                return Check(state == "stopped", f"service status: {said}: {state}")

            self._wait(gone, f"controller {cid} has stopped (its service status)")
            self.fetched_before[cid] = self._last_fetch(cid)

    def _dry_gone(self, nodes: Mapping[int, dict]) -> None:
        for cid, step in nodes.items():
            status = controller_command(self.profile, "status", step)
            self.log.info("DRY RUN: would wait until controller %s's service status says it stopped (%s: %s)", cid,
                          status.origin, status.text)

    def _wait_back(self, record: RollRecord, nodes: Mapping[int, dict]) -> None:
        """A voter again (an observer again for a controller planned as one), fetching since its
        start (the start sent, or, if someone else started it, seen gone), caught up, with a quorum leader."""
        for cid, step in nodes.items():
            started_ms = record.progress(cid).at_ms
            fetched_before = getattr(self, "fetched_before", {}).get(cid)
            self._show("back?")

            def back(cid: int = cid, step: dict = step, started_ms: int = started_ms,
                     fetched_before: int | None = fetched_before) -> Check:
                quorum = self.admin.describe_quorum()
                verdict = rules.controller_back(quorum, cid, started_ms, self.fetch_timeout_ms, fetched_before,
                                                observer=bool(step.get("observer")))
                if verdict.ok:
                    self._follow(step, quorum)
                    return Check(True, rules.describe_quorum_line(quorum))
                return Check(False, verdict.message())

            self._wait(back, f"controller {cid} is back in the quorum and caught up")
        self.marks["back"] = time.time()

    def _dry_back(self, nodes: Mapping[int, dict], soak: float) -> None:
        for cid, step in nodes.items():
            self.log.info("DRY RUN: would wait until controller %s is %s again, fetching since its start and "
                          "caught up (controller.quorum.fetch.timeout.ms %d), with a quorum leader, then soak %.0f s",
                          cid, "an observer" if step.get("observer") else "a voter", self.fetch_timeout_ms, soak)

    def _now(self, record: RollRecord, ids: list[int]) -> dict[int, str]:
        now = {}
        for cid in ids:
            step = next((dict(s) for s in record.steps if int(s["id"]) == cid),
                        {"id": cid, "host": self.item["host"]})
            try:
                state, said = self._status(step)
                now[cid] = f"{'DOWN' if state == 'stopped' else state} (service status: {said})"
            except Exception as exc:
                now[cid] = f"in an unknown state (service status not readable: {describe(exc)})"
        return now

    def _result(self, ids: list[int], action: str) -> dict:
        return {"controller": ids[0], "action": action}

    # -- helpers --------------------------------------------------------------------------------------------------

    def _quorum(self) -> Quorum:
        return self._ask(self.admin.describe_quorum, "DescribeQuorum")

    def _status(self, step: dict) -> tuple[str, str]:
        """(``running`` | ``transition`` | ``stopped``, what the status command printed); SSH errors raised."""
        rc, out = controller_command(self.profile, "status", step).status(self.profile.ssh_conn_id,
                                                                          self.ssh_timeout_s)
        first = (out.strip().splitlines() or [""])[0]
        return rules.service_state(rc, out), f"{first or 'no output'} (exit {rc})"

    def _follow(self, step: dict, quorum: Quorum) -> None:
        """Point the task's label (the map index template renders ``task.item`` again when the task ends) at
        the controller this task restarts, marked active when it is (or was, at this turn) the quorum leader:
        once restarted it is a follower, but the Grid should still say the active controller went here."""
        cid = int(step["id"])
        was_active = int(self.item.get("id", -1)) == cid and bool(self.item.get("active"))
        item = {**self.item, "id": cid, "host": step["host"], "label": f"controller {cid}",
                "active": was_active or quorum.leader_id == cid}
        self.item = {**item, "grid_label": rules.controller_grid_label(item, self.dry_run)}

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

    def _last_fetch(self, cid: int) -> int | None:
        """The leader's last fetch time of ``cid`` (ms, leader's clock), read once it is gone; None if unknown."""
        try:
            quorum = self.admin.describe_quorum()
            voter = quorum.voter(cid) or quorum.observer(cid)  # a controller that is an observer: its entry
        except Exception as exc:  # only a guard against clock skew: the start-time check still applies
            self.log.info("controller %s: last fetch before the stop not read (%s)", cid, describe(exc))
            return None
        return None if voter is None else voter.last_fetch_ms
