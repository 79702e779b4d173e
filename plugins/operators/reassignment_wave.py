"""One wave of a planned reassignment, and the teardown that removes every throttle the waves set.

A wave: check the lock -> refuse another reassignment in progress -> throttle only the brokers and replicas
involved (``leader/follower.replication.throttled.rate`` on the brokers, ``leader/follower.replication.
throttled.replicas`` on the topics; KIP-73, what ``kafka-reassign-partitions.sh --execute --throttle`` sets)
-> AlterPartitionReassignments (KIP-455) for the moves not done yet -> wait until none of the wave's
partitions is still reassigning, logging bytes copied of the wave's bytes and an ETA from the observed rate
(in the task for its first minute, then deferred to the triggerer: ``triggers.wave_progress``) -> remove the
wave's throttles. A wave not done within ``verify_timeout_s`` is cancelled (with
``cancel_on_timeout``) and the task fails naming the stuck partitions.

Resume: a cleared wave skips the moves already at their target and waits for the ones still reassigning;
it never starts a move twice.

Drift: a partition deleted since the plan (before the wave or while it copies) and one moved by someone else are left
alone, logged and returned as ``not_moved`` (``kafka_ops.plan_drift``); a deleted topic has no throttle to set or
remove.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from airflow.sdk.exceptions import AirflowFailException
from hooks.kafka_admin import KafkaAdminHook
from kafka_ops.plan_drift import MoveStanding, dropped_lines, move_standing, replicas_now
from kafka_ops.plan_files import Plan, PlanFileError, load_plan, reassignment_in_progress
from kafka_ops.reassignment import (
    THROTTLE_BROKER_KEYS,
    THROTTLE_TOPIC_KEYS,
    ongoing_partitions,
    replica_sizes,
    stuck_partitions,
    throttle_configs,
    wave_progress,
    wave_throttles,
)
from runtime.grid import show_step
from runtime.lock_holding import ensure_held, release_held
from runtime.params import is_true
from runtime.reassignments import Reassignments
from runtime.run_dir import run_directory
from runtime.waiting import Check, WaitAborted, WaitTimeout, wait_until
from runtime.window_gate import window_gate
from triggers.wave_progress import WaveProgressTrigger

from operators.cluster_operator import ClusterOperator

#: Seconds a wave is polled in its own task before the wait is deferred to the triggerer
#: (``triggers.wave_progress``): short waves finish in the task, long ones hold no worker slot.
VERIFY_INLINE_S = 60.0
#: Seconds a finished wave's partitions may take to show their target replicas in the brokers' metadata.
TARGETS_SETTLE_S = 30.0
#: Seconds a finished wave waits for a broker that does not answer (crashed or restarting) to remove its throttle
#: configs (``leader/follower.replication.throttled.rate`` are that broker's own dynamic configs).
THROTTLE_REMOVAL_WAIT_S = 180.0


def _load(context: Any) -> Plan:
    run_dir = run_directory(context)
    try:
        return load_plan(run_dir / "plan", snapshot_dir=run_dir / "snapshot")
    except PlanFileError as exc:
        raise AirflowFailException(f"plan in {run_dir / 'plan'}: {exc}") from exc


class ReassignmentWaveOperator(ClusterOperator):
    """Execute wave ``wave["wave"]`` of the run's plan (mapped over ``CheckPlanOperator``'s output; one
    wave at a time through ``max_active_tis_per_dagrun=1``).

    :param wave: ``{"wave": i, "waves": n, "label": ...}``.
    :param settings: ``cluster``, ``dry_run``, ``throttle_bytes_per_s``, ``verify_interval_s``,
        ``verify_timeout_s``, ``cancel_on_timeout``, ``window_policy`` (values or ``FromParam``); a wave starts
        only inside the DAG's maintenance window (``runtime.window_gate``).
    :param operation: the lock's operation label.
    :raises AirflowFailException: another reassignment in progress, a rejected move, a timeout (stuck
        partitions named; cancelled with ``cancel_on_timeout``), or a partition not at its target after.
    """

    ui_color = "#fdf3e8"

    def __init__(self, *, wave: dict, settings: dict, operation: str, **kwargs: Any) -> None:
        kwargs.setdefault("max_active_tis_per_dagrun", 1)
        kwargs.setdefault("retries", 0)
        super().__init__(settings=settings, **kwargs)
        self.wave = wave
        self.operation = operation

    def execute(self, context: Any) -> dict:
        cfg = self.resolve(context)
        dry_run = self.dry_run
        profile = self.profile
        plan = _load(context)
        index = int(self.wave["wave"])
        planned = plan.waves[index - 1]
        label = planned.label(len(plan.waves))
        rate = int(self.setting("throttle_bytes_per_s"))
        ours = {(m.topic, m.partition) for m in planned.moves}
        with KafkaAdminHook(profile=profile) as admin:
            moves = Reassignments(admin, profile)
            state = admin.cluster_state(configs=False)
            ongoing = moves.ongoing()
            others = [o for o in ongoing if (o["topic"], o["partition"]) not in ours]
            if others:
                raise AirflowFailException("another reassignment is in progress: "
                                           + "; ".join(reassignment_in_progress(others)[:20]))
            current = replicas_now(state)
            standing = move_standing(planned.moves, current, ongoing_partitions(ongoing) & ours)
            dropped = dropped_lines(standing, current)
            for line in dropped:
                self.log.warning("%s: %s", label, line)
            wave = replace(planned, moves=standing.kept)  # what this wave still owns: throttled, moved, checked
            todo = list(standing.todo)
            throttles = wave_throttles(wave)
            broker_cfgs, topic_cfgs = throttle_configs(throttles, rate)
            result = {"wave": index, "moves": len(todo), "not_moved": [m.name for m in standing.dropped]}
            if dry_run:
                window_gate(self, context, what=label, policy=str(self.setting("window_policy")), dry_run=True)
                self.log.info("DRY RUN: %s: would throttle brokers %s at %d bytes/s and %d topics, then move: %s",
                              label, list(throttles.brokers), rate, len(topic_cfgs),
                              "; ".join(f"{m.name}: {list(m.current)} -> {list(m.replicas)}" for m in todo[:50]))
                return {**result, "dry_run": True}
            if not todo and not standing.running:
                self.log.info("%s: %s", label, "every move is already at its target (a resumed run)" if standing.done
                              and not standing.dropped else f"nothing left to move ({len(standing.done)} at their "
                              f"target, {len(standing.dropped)} not made)")
                return {**result, "moves": 0}
            if not standing.done and not standing.running:  # a wave that began finishes, window or not
                window_gate(self, context, what=label, policy=str(self.setting("window_policy")), dry_run=dry_run,
                            label=lambda step: show_step(context, f"{label} · {step}"))
            ensure_held(profile, context, self.operation, self.log)
            show_step(context, f"{label} · throttle")
            gone = admin.alter_throttle_configs(broker_cfgs, topic_cfgs)
            self.log.info("%s: throttled brokers %s at %d bytes/s; replicas on %d topics%s", label,
                          list(throttles.brokers), rate, len(topic_cfgs) - len(gone),
                          f" ({gone} deleted meanwhile)" if gone else "")
            if todo:
                show_step(context, f"{label} · execute")
                refused = {k: v for k, v in moves.start(
                    [{"topic": m.topic, "partition": m.partition, "replicas": list(m.replicas)} for m in todo]
                ).items() if v}
                if refused:  # a partition deleted since the metadata above was read: nothing to move
                    current = replicas_now(admin.cluster_state(configs=False))
                    deleted = [m for m in todo if m.name in refused and m.key not in current]
                    for line in dropped_lines(MoveStanding(deleted=tuple(deleted)), current):
                        self.log.warning("%s: %s", label, line)
                    errors = {k: v for k, v in refused.items() if k not in {m.name for m in deleted}}
                    if errors:
                        raise AirflowFailException(f"{label}: the controller refused {len(errors)} moves: "
                                                   + "; ".join(f"{k}: {v}" for k, v in list(errors.items())[:20]))
                    result["not_moved"] += [m.name for m in deleted]
                    result["moves"] -= len(deleted)
                    wave = replace(wave, moves=tuple(m for m in wave.moves if m not in deleted))
                self.log.info("%s: started %d moves through %s (%d already done, %d already running)", label,
                              result["moves"], "ZooKeeper" if moves.via == "zookeeper" else "the admin API",
                              len(standing.done), len(standing.running))
            show_step(context, f"{label} · copying")
            deadline = time.time() + float(self.setting("verify_timeout_s"))
            if not self._verify(context, admin, moves, wave, label, cfg, profile, inline_s=VERIFY_INLINE_S):
                self.log.info("%s: still copying after %.0f s; waiting deferred (no worker slot held) until it "
                              "completes or its timeout at %s", label, VERIFY_INLINE_S,
                              time.strftime("%H:%M:%S UTC", time.gmtime(deadline)))
                show_step(context, f"{label} · copying (deferred)")
                self.defer(trigger=WaveProgressTrigger(
                    cfg["cluster"], [[m.topic, m.partition] for m in wave.moves], label,
                    float(self.setting("verify_interval_s")), deadline), method_name="execute_after_copy",
                    kwargs={"not_moved": result["not_moved"]})
            return self._finish(admin, wave, label, broker_cfgs, topic_cfgs, result)

    def execute_after_copy(self, context: Any, event: dict[str, Any] | None = None,
                           not_moved: list[str] | None = None) -> dict:
        """Resumed by :class:`triggers.wave_progress.WaveProgressTrigger`: the wave completed (throttles
        removed, targets checked), timed out (stuck moves cancelled with ``cancel_on_timeout``; fails naming
        them) or met an error waiting cannot fix (fails naming it). ``not_moved``: the names of the moves
        ``execute`` left alone (deleted or changed since the plan, ``kafka_ops.plan_drift``)."""
        cfg = self.resolve(context)
        profile = self.profile
        plan = _load(context)
        index = int(self.wave["wave"])
        planned = plan.waves[index - 1]
        label = planned.label(len(plan.waves))
        skipped = set(not_moved or ())
        wave = replace(planned, moves=tuple(m for m in planned.moves if m.name not in skipped))
        broker_cfgs, topic_cfgs = throttle_configs(wave_throttles(wave), int(self.setting("throttle_bytes_per_s")))
        state = (event or {}).get("state")
        with KafkaAdminHook(profile=profile) as admin:
            if state == "timeout":
                self._timed_out(context, Reassignments(admin, profile), wave, cfg, profile,
                                {(t, int(p)) for t, p in event.get("ongoing", [])},
                                f"gave up waiting until {label} complete: its verify_timeout_s "
                                f"({float(self.setting('verify_timeout_s')):.0f} s) passed", True)
            if state != "done":
                release_held(profile, context, self.log, "the wave failed")
                raise AirflowFailException(f"{label}: waiting for it failed: {(event or {}).get('message', event)}; "
                                           "the throttles are removed by remove_throttles")
            self.log.info("%s: every move completed (seen by the triggerer)", label)
            return self._finish(admin, wave, label, broker_cfgs, topic_cfgs,
                                {"wave": index, "deferred": True, "not_moved": sorted(skipped)})

    def _finish(self, admin: KafkaAdminHook, wave: Any, label: str, broker_cfgs: Any, topic_cfgs: Any,
                result: dict) -> dict:
        """Remove the wave's throttles and check every move is at its target (a partition deleted while it moved
        needs nothing more: named and added to ``result["not_moved"]``). A broker that does not answer (down
        or restarting: a broker config goes to that broker itself) is waited for up to
        :data:`THROTTLE_REMOVAL_WAIT_S`: the wave's data is copied, only its throttles wait."""

        def removed() -> Check:
            gone = admin.delete_throttle_configs(list(broker_cfgs), list(topic_cfgs))
            return Check(True, f"brokers {sorted(broker_cfgs)}, {len(topic_cfgs) - len(gone)} topics"
                         + (f" ({gone} deleted meanwhile)" if gone else ""))

        try:
            wait_until(removed, what=f"{label}: its throttles removed", interval_s=2.0,
                       timeout_s=THROTTLE_REMOVAL_WAIT_S, log=self.log, ramp_from_s=0.5)
        except (WaitTimeout, WaitAborted) as exc:
            raise AirflowFailException(f"{label}: copied, but its throttles were not removed: {exc}; "
                                       "remove_throttles tries again") from exc
        self.log.info("%s: done; its throttles removed", label)
        deleted: list[Any] = []

        def at_targets() -> Check:
            current = replicas_now(admin.cluster_state(configs=False))
            deleted[:] = [m for m in wave.moves if m.key not in current]
            wrong = [f"{m.name}: {list(current[m.key])} instead of {list(m.replicas)}"
                     for m in wave.moves if m.key in current and current[m.key] != tuple(m.replicas)]
            return Check(not wrong, "; ".join(wrong[:20]) or "every partition at its target")

        # the controller ends a reassignment before every broker's metadata shows its final replicas (it sends
        # UpdateMetadata after; seconds more when it is busy, e.g. right after a broker came back)
        try:
            wait_until(at_targets, what=f"{label}: every partition at its target in the metadata",
                       interval_s=1.0, timeout_s=TARGETS_SETTLE_S, log=self.log, ramp_from_s=0.25)
        except (WaitTimeout, WaitAborted) as exc:
            raise AirflowFailException(f"{label}: finished but not at its targets: {exc}") from exc
        if deleted:
            for line in dropped_lines(MoveStanding(deleted=tuple(deleted)), {}):
                self.log.warning("%s: %s", label, line)
            result = {**result, "not_moved": sorted({*result.get("not_moved", ()), *(m.name for m in deleted)})}
        return result

    def execute_in_window(self, context: Any, event: Any = None) -> dict:
        """Resumed by the window gate's trigger when the next maintenance window opens: the wave from its
        start, the window checked again."""
        return self.execute(context)

    def _verify(self, context: Any, admin: KafkaAdminHook, moves: Reassignments, wave: Any, label: str, cfg: dict,
                profile: Any, inline_s: float | None = None) -> bool:
        """Poll the wave in this task: True when complete; False when still copying after ``inline_s``
        seconds, or at once when ``inline_s`` is 0 (the caller defers; the trigger polls); at
        ``verify_timeout_s`` (when shorter) the wave is timed out."""
        ours = {(m.topic, m.partition) for m in wave.moves}
        brokers = sorted({b for m in wave.moves for b in m.adding})
        began = time.monotonic()
        last: dict[str, Any] = {"ongoing": ours}
        timeout_s = float(self.setting("verify_timeout_s"))
        inline = inline_s is not None and inline_s < timeout_s
        if inline and inline_s <= 0:
            return False  # no polling in the task at all: the trigger makes every check

        def check() -> Check:
            ongoing = ongoing_partitions(moves.ongoing()) & ours
            sizes = replica_sizes(admin.describe_log_dirs(brokers)) if ongoing and brokers else {}
            progress = wave_progress(wave, sizes, ongoing, time.monotonic() - began)
            last["ongoing"] = ongoing
            show_step(context, f"{label} · {progress.moves_done}/{progress.moves_total} moves")
            return Check(not ongoing, progress.describe())

        try:
            wait_until(check, what=f"{label} complete", interval_s=float(self.setting("verify_interval_s")),
                       timeout_s=inline_s if inline else timeout_s, log=self.log)
        except WaitTimeout as exc:
            if inline:
                return False
            self._timed_out(context, moves, wave, cfg, profile, last["ongoing"], str(exc), True)
        except WaitAborted as exc:
            self._timed_out(context, moves, wave, cfg, profile, last["ongoing"], str(exc), False)
        return True

    def _timed_out(self, context: Any, moves: Reassignments, wave: Any, cfg: dict, profile: Any,
                   ongoing: set[tuple[str, int]], why: str, timed_out: bool) -> None:
        """Fail the wave naming its stuck partitions; at a timeout, cancel them with ``cancel_on_timeout``."""
        stuck = stuck_partitions(wave, ongoing)
        cancelled = ""
        if is_true(self.setting("cancel_on_timeout")) and stuck and timed_out:
            names, note = moves.cancel(sorted(ongoing))
            cancelled = f"; {note}: {names}" if names else f"; {note}"
        release_held(profile, context, self.log, "the wave failed")
        raise AirflowFailException(f"{why}; stuck partitions: {stuck}{cancelled}; the throttles are removed by "
                                   "remove_throttles")


class RemoveThrottlesOperator(ClusterOperator):
    """Remove every throttle the plan's waves may have set: ``leader/follower.replication.throttled.rate``
    on the brokers and ``leader/follower.replication.throttled.replicas`` on the topics of the plan's moves.
    Runs after the waves whatever their outcome (``trigger_rule="all_done"``); a run without a plan (it
    failed before planning, or a dry run) has nothing to remove.

    :param settings: ``cluster``, ``dry_run`` (values or ``FromParam``).
    """

    ui_color = "#eeeeee"

    def __init__(self, *, settings: dict, **kwargs: Any) -> None:
        kwargs.setdefault("trigger_rule", "all_done")
        super().__init__(settings=settings, **kwargs)

    def execute(self, context: Any) -> dict:
        self.resolve(context)
        profile = self.profile
        try:
            plan = load_plan(run_directory(context) / "plan", snapshot_dir=run_directory(context) / "snapshot")
        except PlanFileError as exc:
            self.log.info("no usable plan (%s): no throttle was set by this run", exc)
            return {"brokers": [], "topics": []}
        brokers = sorted({b for m in plan.moves for b in (*m.current, *m.replicas)})
        topics = sorted({m.topic for m in plan.moves})
        if self.dry_run:
            self.log.info("DRY RUN: no throttle was set; would remove %s from brokers %s and %s from %d topics",
                          THROTTLE_BROKER_KEYS, brokers, THROTTLE_TOPIC_KEYS, len(topics))
            return {"brokers": [], "topics": []}
        with KafkaAdminHook(profile=profile) as admin:
            live = set(admin.cluster_state(configs=False).broker_ids)
            reached = [b for b in brokers if b in live]
            gone = admin.delete_throttle_configs(reached, topics)
        self.log.info("removed throttles from brokers %s and %d topics%s", reached, len(topics) - len(gone),
                      f" (topics {gone} deleted since the plan: their configs went with them)" if gone else "")
        if down := [b for b in brokers if b not in live]:
            # a broker's throttle rate is its own dynamic config, set through that broker: kept while it is down
            self.log.warning("brokers %s are not in the metadata (down): their throttle rates %s may stay set; once "
                             "they are back, remove them with kafka-configs.sh --entity-type brokers --entity-name "
                             "<id> --alter --delete-config %s", down, THROTTLE_BROKER_KEYS,
                             ",".join(THROTTLE_BROKER_KEYS))
        return {"brokers": reached, "topics": [t for t in topics if t not in gone], "topics_deleted": gone,
                "brokers_down": down}
