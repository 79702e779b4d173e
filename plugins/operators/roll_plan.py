"""A roll's plan: validated against the live cluster under the cluster lock, frozen in the roll's record.

Checks (each failure names the bad value and touches nothing): the cluster connection holds a valid
profile with an SSH connection; requested broker ids are known, not repeated and running; no broker of
the cluster is down when every broker is to be rolled (``kafka_ops.restart_plan.down_brokers``); no partition
reassignment is in progress (``kafka_ops.restart_plan.reassignment_refusal``, seen through the admin API and, where
the profile names ZooKeeper, its ``/admin/reassign_partitions`` node); the
commands the run names exist in the profile (or ad-hoc commands are allowed); for a lag gate, Burrow knows
the cluster, watches these brokers, and knows every group. The order puts the controller last unless
``keep_order``. With ``max_parallel`` > 1 the order is cut into batches of brokers that may be down
together (``kafka_ops.batches.plan_batches``: min ISR kept, a leader candidate left, one rack per batch with
``batch_by=rack``, the controller last in the last batch, stopped once its batch-mates are gone); the broker
task is mapped over the batches.

The first computation is frozen in the roll's record (``runtime.roll_store``): clearing the plan task, or
the whole run, resumes the same brokers in the same order, including one the failure left stopped; a run that
succeeded, cleared, restarts none again.

KRaft (the run's mode, ``runtime.cluster_mode``: decided under the lock): the Metadata answer's controller id
is a broker chosen at random (the active controller is a controller process, rolled by
``groups.controller_roll``), so no broker is moved last for it. ZooKeeper mode: the controller is a broker and
goes last. With a ``roles`` setting of ``controllers`` the plan returns no batch (the run restarts controllers
only); the record is still frozen, empty.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from airflow.sdk.exceptions import AirflowFailException
from hooks.burrow import BurrowHook
from hooks.kafka_admin import KafkaAdminHook
from kafka_ops.batches import plan_batches
from kafka_ops.controller_roll import role_plan
from kafka_ops.health import burrow_watches, consumer_lag, unavoidable_outages
from kafka_ops.profile import ClusterProfile
from kafka_ops.quorum import Quorum, combined_nodes, controllers_not_brokers
from kafka_ops.restart_plan import (
    down_brokers,
    moves_controller_last,
    plan_restart,
    reassignment_refusal,
    resolve_groups,
)
from kafka_ops.roll import LagStreak, RollRecord, batch_grid_label, batch_label, clock
from kafka_ops.roll_spec import ClusterMode
from runtime.broker_commands import check_commands
from runtime.failures import RunRefused
from runtime.params import is_true
from runtime.reassignments import Reassignments
from runtime.roll_store import RollStore, now_ms
from runtime.run_note import note_lines

from operators.node_roll import RollPlanBase


def check_burrow(profile: ClusterProfile, groups: list[str], live_servers: set[str],
                 deadline: float | None = None) -> bool:
    """Burrow knows the profile's cluster, watches these brokers and knows every group; returns whether
    every group is OK right now (the first poll of the first gate's OK streak).

    :param deadline: when the caller's wait ends (``time.monotonic()``): once the hook's retries for these requests
        no longer fit before it, they are asked once each within what is left (``BurrowHook.budget_within``), so a
        Burrow that does not answer fails the wait at its timeout. None: the hook's retries.
    :raises AirflowFailException: Burrow not configured, cluster unknown or another cluster, unknown groups.
    :raises requests.RequestException: Burrow did not answer (transient: the caller's wait asks again).
    """
    def budget(requests_n: int) -> float | None:
        return None if deadline is None else burrow.budget_within(deadline - time.monotonic(), requests_n)

    try:
        with BurrowHook.from_profile(profile) as burrow:
            servers = burrow.cluster_servers(budget_s=budget(1 + len(groups)))
            statuses = burrow.group_statuses(groups, budget_s=budget(len(groups)))
    except ValueError as exc:  # profile without Burrow, or Burrow without this cluster
        raise RunRefused(f"cluster {profile.cluster!r}: lag gate needs Burrow: {exc}") from exc
    if not burrow_watches(servers, live_servers):
        raise RunRefused(
            f"Burrow cluster {profile.burrow_cluster!r} watches {sorted(servers)}, none of which is on a broker host "
            f"of cluster {profile.cluster!r} ({sorted(live_servers)}): its lag answers would be about another "
            "cluster; fix burrow_cluster / burrow_conn_id in the profile"
        )
    unknown = [s.group for s in statuses if s.status == "NOTFOUND"]
    if unknown:
        raise RunRefused(f"consumer groups unknown to Burrow ({profile.burrow_cluster}): {unknown}")
    return consumer_lag(statuses).ok


def batch_items(steps: Any, dry_run: bool = False) -> list[dict]:
    """The roll's step dicts grouped into the broker task's mapped items (see :class:`RollPlanOperator`), each
    with its Grid label (``grid_label``: "broker 3 (2/3)", "... · dry run" for a dry run)."""
    groups: dict[int, list[dict]] = {}
    for position, step in enumerate(steps):
        groups.setdefault(int(step.get("batch", position + 1)), []).append(dict(step))
    items = []
    for number, key in enumerate(sorted(groups), start=1):
        brokers = groups[key]
        item = {"batch": number, "batches": len(groups), "label": batch_label([b["id"] for b in brokers])}
        items.append({**item, "grid_label": batch_grid_label(item, dry_run), "brokers": brokers})
    return items


class RollPlanOperator(RollPlanBase):
    """Validate a roll's params and freeze its plan; returns the batches in roll order (the mapped input of
    the roll's broker task), one dict each: ``{"batch": k, "batches": n, "label": "brokers 0, 3",
    "grid_label": "brokers 0, 3 (1/2)", "brokers": [{"id", "host", "rack", "position", "total", "batch"}, ...]}``
    (``position`` / ``total`` count brokers, ``batch`` / ``batches`` count batches; a serial roll has one broker
    per batch; ``grid_label`` ends in " · dry run" in a dry run).

    :param roll_id: the roll's id (its record's key).
    :param settings: ``cluster``, ``brokers`` ([] = all), ``keep_order``, ``consumer_groups``,
        ``max_parallel`` (default 1), ``batch_by`` (``none`` | ``rack``), optional ``roles`` (``all`` |
        ``brokers`` | ``controllers``; absent = ``all``) and the command choices ``pre_stop`` / ``pre_start``
        / ``stop_command`` / ``start_command``: values or :class:`runtime.params.FromParam`.
    :param modes: the cluster modes the roll exists in (``kafka_ops.roll_spec.ClusterMode`` or their values; None
        = every mode): the upgrade's pin / ibp / lmf rolls are ZooKeeper mode's. In another mode (the run's,
        ``runtime.cluster_mode.run_mode``) the plan logs ``skip_reason`` and returns no batch (its broker task is
        then *skipped*).
    :param skip_reason: the line logged when the mode rules the roll out.
    :param labels_for: the id of the task mapped over the plan (``"restart.broker"``): the plan publishes each of
        its instances' Grid labels for the scheduler (``runtime.pending_labels``); None publishes nothing.
    :raises AirflowFailException: any invalid input (not retried: waiting cannot fix it).

    On a KRaft cluster with combined nodes (brokers that are quorum voters too, ``kafka_ops.quorum.combined_nodes``)
    those roll here, not in the controller roll: at most one voter per batch (``kafka_ops.batches.plan_batches``),
    the quorum leader last, and their steps carry ``"voter": True`` so the broker task adds the quorum check to
    its gate and waits for the node to fetch from the leader again (``operators.broker_roll``).
    """

    ui_color = "#eeeeee"

    def _no_brokers_asked(self, mode: ClusterMode) -> str | None:
        """Why the run's roles leave this roll no broker (``kafka_ops.controller_roll.role_plan``: ``roles:
        controllers``, or controllers named and no brokers), else None. The setting ``named_controllers`` is the
        rolling restart's ``controllers`` param (absent in the other DAGs, whose ``roles`` is ``all``)."""
        try:
            roles = role_plan(str(self.setting("roles")), list(self.cfg.get("named_controllers") or []),
                              mode.has_quorum, list(self.setting("brokers") or []))
        except ValueError:  # a contradiction the controller roll's plan refuses, naming it
            return "the roles asked cannot be rolled (the controller roll's plan says why)"
        return None if roles.brokers else roles.reason

    def _plan(self, context: Any, cfg: dict) -> list[dict]:
        store = RollStore(context, self.roll_id)
        frozen = store.load()
        dry_run = self.dry_run
        if frozen is not None:
            done = frozen.finished()
            self.log.info("roll %r resumes: plan frozen at %s: %s; finished: %s", self.roll_id,
                          clock(frozen.began_ms), frozen.batches, done or "none")
            if frozen.order and len(done) == len(frozen.order):
                self.log.info("roll %r: every node of it finished in this run: none is restarted again (to roll "
                              "again, trigger a new run)", self.roll_id)
            return batch_items(frozen.steps, dry_run)
        profile = self.profile
        max_parallel = int(self.setting("max_parallel"))
        batch_by = str(self.setting("batch_by"))
        with KafkaAdminHook(profile=profile) as admin:
            mode = self._mode_or_nothing(context, admin, store)
            if mode is None:
                return []
            no_brokers = self._no_brokers_asked(mode)
            if no_brokers:
                return self._nothing(store, no_brokers, f"{no_brokers}: roll {self.roll_id!r} restarts no broker")
            # the reassignments in progress asked beside the metadata (their own clients: a kafka-python admin and,
            # in ZooKeeper mode, a ZooKeeper session; 0.3 s one after the other on a loaded sandbox)
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="plan-reassignments") as pool:
                ongoing = pool.submit(self.ask, Reassignments(admin, profile).ongoing,
                                      "the partition reassignments in progress")
                # batches need ISR and min.insync.replicas (configs)
                state = self.ask(lambda: admin.cluster_state(configs=max_parallel > 1), "the cluster's metadata")
                # a KRaft cluster's voters: a broker that is one too is a combined node, rolled under the quorum check
                quorum: Quorum | None = (self.ask(admin.describe_quorum, "the metadata quorum (DescribeQuorum)")
                                         if mode is ClusterMode.KRAFT else None)
                moving = reassignment_refusal(ongoing.result())
        if moving:
            raise RunRefused(f"cluster {profile.cluster!r}: {moving}")
        kraft = mode.has_quorum
        voters = set(combined_nodes(quorum, state.broker_ids)) if quorum is not None else set()
        leader = quorum.leader_id if quorum is not None and quorum.leader_id in voters else None
        if voters:
            self.log.info("KRaft cluster with combined nodes %s (brokers that are quorum voters too, "
                          "process.roles=broker,controller; quorum leader %s): they roll with the brokers, one voter "
                          "per batch, each stopped only while a caught-up majority of the voters stays without it and "
                          "back once it fetches from the leader again; the quorum leader last", sorted(voters),
                          quorum.leader_id)
            ordering = replace(state, controller_id=-1 if leader is None else leader)
        elif kraft:
            self.log.info("KRaft cluster: the controller id of the Metadata answer (%s) is a broker chosen at random, "
                          "not the active controller: no broker is moved last for it", state.controller_id)
            ordering = replace(state, controller_id=-1)
        else:
            self.log.info("ZooKeeper mode: the controller is a broker, rolled last (broker %s)", state.controller_id)
            ordering = state
        requested = list(self.setting("brokers"))
        keep_order = is_true(self.setting("keep_order"))
        refusals = down_brokers(state.broker_ids, state.down_broker_ids, requested)
        if refusals:
            raise AirflowFailException(f"cluster {profile.cluster!r}: " + "; ".join(refusals))
        try:
            plan = plan_restart(ordering.broker_ids, leader if kraft else ordering.controller_id, requested,
                                keep_order=keep_order)
        except ValueError as exc:
            named = controllers_not_brokers(requested, quorum.voter_ids if quorum else (), state.broker_ids)
            if named and "controllers" in (context.get("params") or {}):  # the DAG has a controller roll
                roles = "" if self.setting("roles") == "all" else " and roles=controllers or all"
                named += f": controllers are rolled by the controllers param{roles}"
            raise RunRefused(f"cluster {profile.cluster!r}: {exc}" + (f"; {named}" if named else "")) from exc
        try:
            batches = plan_batches(ordering, plan.order, max_parallel, batch_by, voters=voters & set(plan.order),
                                   controller_last=moves_controller_last(requested, keep_order))
        except ValueError as exc:
            raise RunRefused(f"cluster {profile.cluster!r}: {exc}") from exc
        steps = []
        for number, batch in enumerate(batches, start=1):
            for broker_id in batch.broker_ids:
                broker = state.broker(broker_id)
                steps.append({"id": broker_id, "host": broker.host, "rack": broker.rack,
                              "position": len(steps) + 1, "total": len(plan.order), "batch": number,
                              **({"voter": True} if broker_id in voters else {})})
            for reason in batch.reasons:
                self.log.info("batch %d: %s", number, reason)
        for chosen in check_commands(profile, cfg, steps[0]) if steps else []:
            self.log.info("command %s", chosen)
        groups = resolve_groups(cfg.get("consumer_groups"), profile.consumer_groups)
        lag_ok = None
        if groups:
            live = {f"{b.host}:{b.port}" for b in state.brokers}
            deadline = time.monotonic() + self.timeout_s  # the ask's own deadline
            if self.ask(lambda: check_burrow(profile, groups, live, deadline), f"Burrow ({profile.burrow_cluster})"):
                lag_ok = LagStreak(1, now_ms())  # the first gate's streak starts here
        for reason in plan.reasons:
            if not (kraft and reason.startswith("controller unknown")):
                self.log.info("plan: %s", reason)
        outages = unavoidable_outages(state, plan.order)
        for line in outages:  # no gate can wait these out (RF 1, or RF <= min.insync.replicas): said up front
            self.log.warning("unavoidable during the roll: %s", line)
        record = RollRecord(self.roll_id, now_ms(), tuple(steps), {}, None if groups is None else tuple(groups),
                            lag_ok)
        self.log.info("roll %r: order %s; %s; lag gate on %s", self.roll_id, plan.order,
                      "one broker at a time" if max_parallel == 1 else f"batches {record.batches}",
                      groups or "no groups")
        store.save(record)
        items = batch_items(record.steps, dry_run)
        # which map index is which broker, also in the run's note (e.g. for `airflow tasks clear -m`), with what no
        # gate can avoid: one edit of the note
        noted = {f"roll {self.roll_id!r} unavoidable outages": "; ".join(outages)} if outages else {}
        noted[f"roll {self.roll_id!r}"] = "map index " + ", ".join(f"{i} = {item['label']}"
                                                                   for i, item in enumerate(items))
        note_lines(context, noted, self.log)
        return items
