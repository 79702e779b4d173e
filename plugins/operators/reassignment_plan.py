"""A reassignment's plan: ``spark/reassignment_plan.py`` run by ``SparkSubmitOperator`` on the run's
snapshot, then checked against the live cluster before any wave runs.

The plan files land in ``<run directory>/plan`` (``reassignment.json``, ``rollback.json``, ``waves.json``,
``summary.json``, ``balance.png``); their paths are logged, and ``rollback.json`` works with
``kafka-reassign-partitions.sh --execute``.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.exceptions import AirflowFailException
from hooks.kafka_admin import KafkaAdminHook
from kafka_ops.plan_drift import dropped_lines, move_standing, replicas_now
from kafka_ops.plan_files import PlanFileError, check_plan_current, load_plan, reassignment_in_progress
from kafka_ops.preflight import bytes_to_receive, disk_problems
from kafka_ops.throttle_headroom import MIN_WINDOW_S, format_rate, throttle_shortfalls, write_rates
from runtime.failures import RunRefused
from runtime.host_files import unstarted_broker_space
from runtime.params import resolve_settings
from runtime.pending_labels import publish
from runtime.reassignments import Reassignments
from runtime.run_dir import run_directory

from operators.cluster_operator import ClusterOperator
from operators.cluster_snapshot import KEPT_PLAN_FILE, partition_sizes, sizes_read_at, snapshot_broker_ids

#: ``spark/`` beside ``plugins/`` (the repository, and /opt/airflow in the docker image);
#: ``KAFKA_OPS_SPARK_DIR`` overrides it.
SPARK_DIR = Path(os.environ.get("KAFKA_OPS_SPARK_DIR") or Path(__file__).resolve().parents[2] / "spark")

#: the planner's driver JVM (``spark.driver.extraJavaOptions``): the C1 compiler only and the serial collector. The
#: driver lives seconds and its JVM mostly starts up and coordinates (the planning is numpy in the Python driver,
#: the Spark jobs read and aggregate the snapshot): on a 52-partition snapshot, 2 cores, the job took 11.2 CPU s and
#: 11.3 s against 18.7 CPU s and 13.0 s with the JVM's defaults (C2's compiler threads and G1's workers); ``bench/
#: planner.py --scaling`` compares the two at 10k and 100k partitions. In ``local[*]`` mode the executors run in the
#: driver JVM and get the same options; on a Spark cluster the executors keep theirs.
DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

#: planner option -> the setting (param) that gives it; None values are left out.
PLANNER_OPTIONS = {"--max-bytes": "max_bytes", "--wave-bytes": "wave_bytes",
                   "--wave-moves-per-broker": "wave_moves_per_broker"}


def planner_args(run_dir: Path, mode: str, brokers: list[int], cfg: dict[str, Any]) -> list[str]:
    """The planner's command line for this run (``spark/reassignment_plan.py --help``): ``cfg`` gives the caps
    (:data:`PLANNER_OPTIONS`) and ``drain_only`` (a decommission's ``--drain-only``)."""
    args = ["--snapshot", str(run_dir / "snapshot"), "--mode", mode, "--output-dir", str(run_dir / "plan"),
            "--engine", "spark"]
    if brokers:
        args += ["--brokers", ",".join(str(int(b)) for b in brokers)]
    for option, setting in PLANNER_OPTIONS.items():
        if cfg.get(setting) is not None:
            args += [option, str(int(cfg[setting]))]
    if cfg.get("drain_only"):
        args.append("--drain-only")
    return args


class PlannerSubmitOperator(SparkSubmitOperator):
    """``spark-submit spark/reassignment_plan.py`` on this run's snapshot (connection ``spark_conn_id``:
    ``local[*]`` in the sandbox, the Spark master in docker-compose).

    A run whose snapshot task kept an earlier try's plan (``operators.cluster_snapshot.KEPT_PLAN_FILE`` in the run's
    directory) is not planned again: no spark-submit.

    :param mode: ``scale-out`` or ``decommission``.
    :param settings: ``brokers`` (new or drained ids), ``max_bytes``, ``wave_bytes``, ``wave_moves_per_broker``,
        and for a decommission ``drain_only`` (values or ``FromParam``).
    :param driver_java_options: ``spark.driver.extraJavaOptions`` of the job (default :data:`DRIVER_JAVA_OPTIONS`);
        None leaves it to the Spark installation (e.g. its ``spark-defaults.conf``, which this setting overrides).
    """

    def __init__(self, *, mode: str, settings: dict, spark_conn_id: str = "spark_default",
                 driver_java_options: str | None = DRIVER_JAVA_OPTIONS, **kwargs: Any) -> None:
        conf = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"}
        if driver_java_options:
            conf["spark.driver.extraJavaOptions"] = driver_java_options
        super().__init__(application=str(SPARK_DIR / "reassignment_plan.py"), conn_id=spark_conn_id,
                         name="kafka-reassignment-plan", env_vars={"PYSPARK_PYTHON": sys.executable},
                         conf=conf, **kwargs)
        self.mode = mode
        self.settings = settings

    def execute(self, context: Any) -> None:
        cfg = resolve_settings(self.settings, context["params"])
        run_dir = run_directory(context)
        if (run_dir / KEPT_PLAN_FILE).is_file():
            self.log.info("not planning: the snapshot task kept the plan of an earlier try of this run (%s); its "
                          "files in %s", KEPT_PLAN_FILE, run_dir / "plan")
            return
        self.application_args = planner_args(run_dir, self.mode, list(cfg.get("brokers") or []), cfg)
        self.log.info("planner: %s %s", self.application, " ".join(self.application_args))
        super().execute(context)
        self.log.info("plan files in %s: reassignment.json, rollback.json (for kafka-reassign-partitions.sh "
                      "--execute), waves.json, summary.json, balance.png", run_dir / "plan")


class CheckPlanOperator(ClusterOperator):
    """Load the plan (schema-checked), check it against the live cluster (nothing moved since the
    snapshot, every target broker registered, no other reassignment in progress) and return the waves as
    the mapped input of the wave task: ``[{"wave": i, "waves": n, "label": "wave 1/3 (1.2 GB, 34 moves)",
    "grid_label": "wave 1/3 (1.2 GB, 34 moves) · dry run"}]`` (the Grid label: "· dry run" only in a dry run).

    :param settings: ``cluster``, ``dry_run`` (values or ``FromParam``).
    :param labels_for: the id of the task mapped over the waves (``"reassign.wave"``): each wave instance's Grid
        label is published for the scheduler (``runtime.pending_labels``); None publishes nothing.
    :raises AirflowFailException: a malformed or stale plan, or another reassignment in progress.
    """

    ui_color = "#eeeeee"

    def __init__(self, *, settings: dict, labels_for: str | None = None, **kwargs: Any) -> None:
        super().__init__(settings=settings, **kwargs)
        self.labels_for = labels_for

    def execute(self, context: Any) -> list[dict]:
        self.resolve(context)
        profile = self.profile
        run_dir = run_directory(context)
        try:
            plan = load_plan(run_dir / "plan", snapshot_dir=run_dir / "snapshot")
        except PlanFileError as exc:
            raise AirflowFailException(f"plan in {run_dir / 'plan'}: {exc}") from exc
        summary = plan.summary
        self.log.info("plan: %d moves in %d waves, %.3f GB to copy (lower bound %.3f GB); skew bytes %s, "
                      "replicas %s, leaders %s; files in %s", len(plan.moves), len(plan.waves),
                      summary.get("bytes_moved", 0) / 1e9, summary.get("lower_bound_bytes", 0) / 1e9,
                      summary.get("byte_skew"), summary.get("replica_skew"),
                      summary.get("leader_skew"), run_dir / "plan")
        for note in summary.get("notes", []):
            self.log.info("planner note: %s", note)
        with KafkaAdminHook(profile=profile) as admin:
            state = admin.cluster_state(configs=False)
            ongoing = Reassignments(admin, profile).ongoing()
        # moves already at their target were made by this run's waves before a resume: not stale; a partition
        # deleted since the snapshot needs no move (kafka_ops.plan_drift): its wave leaves it alone
        current = replicas_now(state)
        standing = move_standing(plan.moves, current)
        for line in dropped_lines(replace(standing, changed=()), current):
            self.log.warning("%s", line)
        pending = tuple(m for m in plan.moves if m not in standing.done and m not in standing.deleted)
        # a scale-out dry run plans onto new brokers it does not start (listed in the snapshot from their files)
        unstarted = sorted(snapshot_broker_ids(run_dir / "snapshot") - set(state.broker_ids)) if self.dry_run else []
        problems = check_plan_current(replace(plan, moves=pending), state, not_started=unstarted)
        if standing.done:
            self.log.info("%d of %d moves are at their target already (a resumed run)", len(standing.done),
                          len(plan.moves))
        if problems:
            raise AirflowFailException(f"the plan no longer fits the cluster ({len(problems)} problems; make a "
                                       f"new run): " + "; ".join(problems[:20]))
        self._check_disk(profile, pending, unstarted)
        self._check_throttle(profile, plan, pending, state, run_dir / "snapshot")
        ours = {(m.topic, m.partition) for m in plan.moves}
        others = [o for o in ongoing if (o["topic"], o["partition"]) not in ours]
        if others:
            raise AirflowFailException("another reassignment is in progress (as kafka-reassign-partitions.sh "
                                       "--execute refuses): " + "; ".join(reassignment_in_progress(others)[:20]))
        dry_run = self.dry_run
        if dry_run:
            self.log.info("DRY RUN: the waves will only log what they would do; rollback file %s",
                          run_dir / "plan" / "rollback.json")
        total = len(plan.waves)
        items = [{"wave": w.index, "waves": total, "label": w.label(total),
                  "grid_label": w.label(total) + (" · dry run" if dry_run else "")} for w in plan.waves]
        for item in items:
            self.log.info("%s", item["label"])
        return publish(context, self.labels_for, items)


    def _check_throttle(self, profile: Any, plan: Any, pending: tuple[Any, ...], state: Any, snapshot: Path) -> None:
        """The preflight of the throttle (``kafka_ops.throttle_headroom``): the moved partitions' write rates, from
        their sizes in the snapshot and now (DescribeLogDirs), against ``throttle_bytes_per_s`` per broker and wave;
        a throttle below what a broker's new replicas are written at would never let them catch up. A dry run
        logs the verdict and goes on; readings less than ``MIN_WINDOW_S`` apart, or without the snapshot's time,
        are not judged (logged).

        :raises runtime.failures.RunRefused: naming every broker and wave the throttle is too low for (nothing was
            moved; the run's note advises a new run with a higher throttle).
        """
        throttle = int(self.setting("throttle_bytes_per_s"))
        read_at = sizes_read_at(snapshot)
        moving = [m for m in pending if m.adding]
        if not moving:
            return
        if read_at is None:
            self.log.info("throttle preflight: the snapshot does not say when its sizes were read: not judged")
            return
        with KafkaAdminHook(profile=profile) as admin:
            now_sizes = partition_sizes(self.ask(lambda: admin.describe_log_dirs(state.broker_ids),
                                                 "the partitions' sizes (DescribeLogDirs)"))
        elapsed = time.time() - read_at
        if elapsed < MIN_WINDOW_S:
            self.log.info("throttle preflight: sizes read %.1f s apart (< %.0f s): write rates not judged", elapsed,
                          MIN_WINDOW_S)
            return
        rates = write_rates(moving, now_sizes, elapsed)
        keep = {m.key for m in pending}
        waves = [replace(w, moves=tuple(m for m in w.moves if m.key in keep)) for w in plan.waves]
        leaders = {(p.topic, p.partition): p.leader for p in state.partitions if p.leader >= 0}
        short = throttle_shortfalls(waves, rates, leaders, throttle)
        fastest = sorted(rates.items(), key=lambda kv: -kv[1])[:3]
        self.log.info("throttle preflight: %d moved partitions written at %s in all over the last %.0f s (fastest: "
                      "%s); throttle %s per broker", len(rates), format_rate(sum(rates.values())), elapsed,
                      ", ".join(f"{t}-{p} {format_rate(r)}" for (t, p), r in fastest) or "none",
                      format_rate(throttle))
        if not short:
            return
        text = "; ".join(s.describe(throttle) for s in short[:10]) + (f"; and {len(short) - 10} more"
                                                                       if len(short) > 10 else "")
        advice = (": their new replicas could never catch up (a throttled replica must fetch faster than its "
                  "partition is written, Kafka's operations guide), so the wave would wait for its verify_timeout_s; "
                  "raise throttle_bytes_per_s above the rate named, or plan smaller waves (wave_bytes, "
                  "wave_moves_per_broker)")
        if self.dry_run:
            self.log.warning("DRY RUN: throttle preflight: a real run would stop here, nothing moved: %s%s", text,
                             advice)
            return
        # a param the cluster cannot honour: clearing would run the same throttle again, a new run is the way on
        raise RunRefused(f"throttle preflight: throttle_bytes_per_s {throttle} is too low (nothing was moved): "
                         f"{text}{advice}")

    def _check_disk(self, profile: Any, pending: tuple[Any, ...], unstarted: list[int]) -> None:
        """The preflight of the data the plan copies: every receiving broker's log dirs have the usable bytes for
        it, with a margin (``kafka_ops.preflight.disk_problems``); a dry run logs the verdict and goes on.
        ``unstarted``: brokers a dry run planned onto without starting them: a stopped broker answers no
        DescribeLogDirs, so their log dirs are measured on their hosts with ``df``
        (``runtime.host_files.unstarted_broker_space``); a host that cannot be measured is logged, not judged.

        :raises AirflowFailException: naming every broker short of space (nothing was moved).
        """
        receive = bytes_to_receive(pending)
        usable: dict[int, dict[str, int]] = {}
        for bid in unstarted:
            if bid not in receive:
                continue
            try:
                usable[bid] = unstarted_broker_space(profile, bid)
            except AirflowFailException as exc:
                self.log.warning("disk preflight: broker %d is not started and its log dirs could not be measured "
                                 "(%s): it would receive %d bytes; a real run asks its log dirs once it has started "
                                 "it", bid, exc, receive.pop(bid))
            else:
                self.log.info("disk preflight: broker %d is not started: its log dirs measured on its host (df): %s",
                              bid, ", ".join(f"{d} {n} bytes usable" for d, n in usable[bid].items()))
        if not receive:
            return
        asked = sorted(set(receive) - set(usable))
        if asked:
            with KafkaAdminHook(profile=profile) as admin:
                usable.update(self.ask(lambda: admin.log_dir_space(asked), "the receiving brokers' log dirs"))
        problems, notes = disk_problems(receive, usable)
        for note in notes:
            self.log.warning("disk preflight: %s", note)
        if not problems:
            self.log.info("disk preflight: every receiving broker has room (%s)", ", ".join(
                f"broker {b}: {n} bytes to receive, {sum(v for v in usable.get(b, {}).values() if v >= 0)} usable"
                for b, n in sorted(receive.items())))
            return
        text = "; ".join(problems)
        if self.dry_run:
            self.log.warning("DRY RUN: disk preflight: a real run would stop here, nothing moved: %s", text)
            return
        raise AirflowFailException(f"disk preflight: {len(problems)} receiving brokers lack space for the plan "
                                   f"(nothing was moved): {text}")
