"""A broker config change's two tasks before its roll (rules: ``kafka_ops.config_change``; host reads and edits:
``runtime.config_steps``):

- :class:`ConfigPlanOperator` (``plan_config``): reads every broker's DescribeConfigs and the in-scope brokers'
  ``server.properties``, refuses bad input before anything is touched (unknown keys with a "did you mean",
  wrong types, passwords, per-broker keys with the cluster scope, Kafka's thread-pool and ELR rules, a change that
  a setting of higher precedence would shadow on some broker (``BrokerConfigPlan.shadowed``), then Kafka's own
  verdict on the dynamic values: IncrementalAlterConfigs with ``validateOnly``), and logs the
  per-broker diff: dynamic / static / unchanged and whether the broker would restart;
- :class:`ConfigApplyOperator` (``apply_config``): sends the dynamic keys (one IncrementalAlterConfigs to the
  cluster-wide default, or one per broker), waits until every broker in scope reports them (DescribeConfigs),
  then writes the in-scope brokers' ``server.properties`` (backup beside it, read back). The roll that follows
  restarts only the brokers whose file and running config differ.
"""

from __future__ import annotations

from typing import Any

from hooks.kafka_admin import KafkaAdminHook
from hooks.kafka_lock import LOCK_TOPIC
from kafka_ops import config_change, log_dirs
from kafka_ops.config_change import CLUSTER, alter_requests, file_change_text, not_applied
from kafka_ops.done_lines import config_line
from kafka_ops.elr_min_isr import FEATURE as ELR_FEATURE
from kafka_ops.roll_spec import ClusterMode
from runtime.config_steps import read_properties_text, write_changes
from runtime.failures import RunRefused
from runtime.host_files import run_on_host, storage_format_command
from runtime.lock_holding import ensure_held
from runtime.waiting import Check

from operators.cluster_operator import ClusterOperator

OPERATION = "config change"


class ConfigPlanOperator(ClusterOperator):
    """Refuse a bad change before anything is touched, and log what it does to each broker.

    :param settings: ``cluster``, ``changes`` (``{key: value or None}``, the param as typed), ``scope``
        (``"cluster"`` or broker ids), ``dry_run``, ``healthcheck_interval_s``, ``healthcheck_timeout_s``.

    Returns (XCom, read by ``apply_config``)::

        {"scope": "cluster" | [ids], "changes": {key: str | None},
         "cluster_id": str | None,   # set when a log directory is to be formatted
         "brokers": {"<id>": {"host": str, "alter": {key: str | None},   # the dynamic keys it needs
                              "file_changes": {key: [before, after]}, "needs_restart": bool,
                              "reasons": [str], "format_log_dirs": [dir]}}}   # KRaft: new log dirs

    :raises runtime.failures.RunRefused: naming every refusal ("nothing was touched").
    """

    ui_color = "#eeeeee"

    def execute(self, context: Any) -> dict[str, Any]:
        cfg = self.resolve(context)
        try:
            changes = config_change.parse_changes(cfg.get("changes"))
        except ValueError as exc:
            raise RunRefused(f"{exc} (nothing was touched)") from exc
        scope = cfg.get("scope")
        scope = CLUSTER if scope in (None, "", CLUSTER) else scope
        profile = self.profile
        with KafkaAdminHook(profile=profile) as admin:
            state = self.ask(lambda: admin.cluster_state(configs=False), "the cluster's brokers (Metadata)")
            reasons = config_change.check_scope(scope, state.broker_ids, state.down_broker_ids)
            if reasons:
                raise RunRefused("config change refused (nothing was touched): " + "; ".join(reasons))
            targets = list(state.broker_ids) if scope == CLUSTER else [int(b) for b in scope]
            described = self.ask(lambda: admin.describe_broker_config_entries(state.broker_ids),
                                 "every broker's configs (DescribeConfigs)")
            mode = self.mode(context, admin)
            kraft = mode.has_quorum
            elr = kraft and (self.ask(lambda: admin.finalized_feature(ELR_FEATURE), "the ELR feature level") or 0) >= 1
            self.log.info("%s cluster, brokers %s; ELR (KIP-966) %s; scope %s", "KRaft" if kraft else "ZooKeeper-mode",
                          state.broker_ids, "on" if elr else "off",
                          "the cluster-wide default (every broker)" if scope == CLUSTER else f"brokers {targets}")
            reasons = config_change.refusals(changes, scope, described, elr)
            if reasons:
                raise RunRefused("config change refused (nothing was touched): " + "; ".join(reasons))
            formats = self._log_dir_moves(admin, changes, targets, described, mode)
            cluster_id = self.ask(admin.cluster_id, "the cluster's id") if formats else None
            hosts = {b.id: b.host for b in state.brokers}
            texts = {b: read_properties_text(profile, {"id": b, "host": hosts[b]}) for b in targets}
            plans = {b: config_change.broker_plan(b, changes, texts[b], described[b], scope=scope) for b in targets}
            shadowed = [text for p in plans.values() for text in p.shadowed]
            if shadowed:  # it would report success and change nothing there
                raise RunRefused("config change refused (nothing was touched): " + "; ".join(shadowed))
            requests = alter_requests(scope, {b: p.alter for b, p in plans.items()})
            refused = []
            for broker, alter in requests:  # Kafka's own check of types, ranges and its dynamic-update rules
                try:
                    admin.alter_broker_configs(alter, broker, validate_only=True)
                except RuntimeError as exc:
                    refused.append(str(exc))
            if refused:
                raise RunRefused("config change refused (nothing was touched): " + "; ".join(refused))
        for plan in plans.values():
            self.log.info("%s", plan.summary())
            for reason in plan.reasons:
                self.log.info("broker %s: %s", plan.broker_id, reason)
        restart = [b for b, p in plans.items() if p.needs_restart]
        self.log.info("%s: dynamic keys %s, then server.properties on brokers %s, then a roll of brokers %s",
                      "DRY RUN: a real run would send" if self.dry_run else "this run sends",
                      {"the cluster-wide default" if b is None else f"broker {b}": sorted(a) for b, a in requests},
                      sorted(b for b, p in plans.items() if p.file_changes), restart or "none")
        return {"scope": scope, "changes": changes, "cluster_id": cluster_id,
                "brokers": {str(b): {"host": hosts[b], "alter": p.alter,
                                     "file_changes": {k: list(v) for k, v in p.file_changes.items()},
                                     "needs_restart": p.needs_restart, "reasons": p.reasons,
                                     "format_log_dirs": formats.get(b, [])}
                            for b, p in plans.items()}}

    def _log_dir_moves(self, admin: KafkaAdminHook, changes: dict[str, Any], targets: list[int],
                       described: dict[int, Any], mode: ClusterMode) -> dict[int, list[str]]:
        """A change of the brokers' log directories (``kafka_ops.log_dirs``): refused when it drops a directory
        that holds replicas (DescribeLogDirs) or, on KRaft, moves the metadata log, and in the middle of the
        ZooKeeper-to-KRaft migration (brokers of either kind, their storage being moved); on KRaft the new
        directories are formatted before the restart (returned: broker -> its new directories), which needs the
        profile's ``kafka_home`` and ``server_properties``.

        :raises runtime.failures.RunRefused: naming every refusal ("nothing was touched").
        """
        kraft = mode is ClusterMode.KRAFT
        moves = {}
        for b in targets:
            current = {k: (e.value if (e := described[b].get(k)) is not None else None) for k in log_dirs.KEYS}
            moved = log_dirs.change(b, current, changes)
            if moved is not None and moved.moves_data(kraft):
                moves[b] = moved
        if not moves:
            return {}
        if mode is ClusterMode.MIGRATING:
            raise RunRefused("config change refused (nothing was touched): the log directories of brokers "
                             f"{sorted(moves)} change while the cluster migrates from ZooKeeper to KRaft: finish "
                             "kafka_zk_to_kraft (or revert it) first")
        dropping = [b for b, m in moves.items() if m.dropped]
        rows = self.ask(lambda: admin.describe_log_dirs(dropping), "the replicas in each log directory "
                        "(DescribeLogDirs)") if dropping else []
        reasons = [r for b, m in moves.items()
                   for r in log_dirs.refusals(m, kraft, log_dirs.replicas_by_dir(rows, b, exclude_topics={LOCK_TOPIC}))]
        formats = {b: m.added for b, m in moves.items() if kraft and m.added}
        profile = self.profile
        reasons += [f"broker {b}: its new log directories {added} must be formatted for the cluster before its "
                    "restart (KRaft), which the run does with kafka-storage.sh: the connection's profile needs "
                    "kafka_home and server_properties" for b, added in formats.items()
                    if not profile.kafka_home_for(b) or not profile.server_properties_for(b)]
        if reasons:
            raise RunRefused("config change refused (nothing was touched): " + "; ".join(reasons))
        for b, m in moves.items():
            self.log.info("broker %s: log directories %s -> %s%s", b, list(m.before), list(m.after),
                          f"; the new ones {m.added} formatted for the cluster before its restart (KRaft)"
                          if b in formats else "")
        return formats


class ConfigApplyOperator(ClusterOperator):
    """Send the plan's dynamic keys, verify them on every broker in scope, then write the in-scope brokers'
    ``server.properties`` (see the module docstring). A dry run logs what it would do and touches nothing. A
    resumed run sends again what is already set (IncrementalAlterConfigs is idempotent) and writes no file that
    already holds every value.

    :param settings: ``cluster``, ``dry_run``, ``healthcheck_interval_s`` / ``healthcheck_timeout_s`` (the
        verification's poll interval and deadline, seconds).
    :param plan_task_id: the task whose XCom is the plan (:class:`ConfigPlanOperator`).
    Returns (XCom) ``{"changes": {key: value or None}, "altered": {"cluster" | "<id>": [keys]}, "files": {"<id>":
    backup path}, "formatted": [ids]}`` (a dry run: ``"would_alter"`` / ``"would_write"`` / ``"would_format"`` (ids)
    beside empty ones), the run's note line (``kafka_ops.done_lines.config_line``). ``formatted``: the KRaft brokers
    whose new log directories it formatted after writing their file (``kafka-storage format --ignore-formatted``:
    the formatted ones left as they are, so a resumed run formats nothing twice).
    :raises AirflowFailException: Kafka refused the change, a broker did not report it within
        ``healthcheck_timeout_s`` (named, with what it reports), or a file write failed.
    """

    def __init__(self, *, plan_task_id: str = "plan_config", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.plan_task_id = plan_task_id

    def note_line(self, result: Any, dry_run: bool) -> str | None:
        return config_line(result, dry_run)

    def execute(self, context: Any) -> dict[str, Any]:
        self.resolve(context)
        plan = context["ti"].xcom_pull(task_ids=self.plan_task_id)
        scope = plan["scope"]
        brokers = {int(b): p for b, p in plan["brokers"].items()}
        alters = {b: p["alter"] for b, p in brokers.items()}
        requests = alter_requests(scope, alters)
        files = {b: p["file_changes"] for b, p in brokers.items() if p["file_changes"]}
        verb = "DRY RUN: would send" if self.dry_run else "sending"
        for broker, alter in requests:
            self.log.info("%s IncrementalAlterConfigs to %s: %s", verb,
                          "the cluster-wide default" if broker is None else f"broker {broker}", alter)
        formats = {b: p.get("format_log_dirs") or [] for b, p in brokers.items() if p.get("format_log_dirs")}
        if self.dry_run:
            for b, changes in files.items():
                self.log.info("DRY RUN: would write broker %s's server.properties: %s", b, file_change_text(changes))
            for b, added in formats.items():
                self.log.info("DRY RUN: would format broker %s's new log directories %s for cluster %s: %s", b, added,
                              plan.get("cluster_id"), storage_format_command(self.profile, b, plan["cluster_id"]))
            return {"changes": plan["changes"], "altered": {}, "files": {},
                    "would_alter": _altered(requests), "would_write": sorted(files), "would_format": sorted(formats)}
        profile = self.profile
        with self.releasing_lock_on_failure(context, "the config change failed"):
            ensure_held(profile, context, OPERATION, self.log)
            if requests:
                with KafkaAdminHook(profile=profile) as admin:
                    for broker, alter in requests:
                        self.ask(lambda b=broker, a=alter: admin.alter_broker_configs(a, b), "IncrementalAlterConfigs")
                    self.wait(lambda: self._applied(admin, scope, alters),
                              "every broker in scope reports the dynamic change (DescribeConfigs)", ramp_from_s=0.2)
            backups: dict[str, str] = {}
            for b, changes in files.items():
                done, backup = write_changes(profile, {"id": b, "host": brokers[b]["host"]}, changes)
                if backup is None:
                    self.log.info("broker %s: server.properties holds every value already: not written", b)
                    continue
                backups[str(b)] = backup
                self.log.info("broker %s: server.properties written (%s); the previous file is kept as %s", b,
                              file_change_text(done), backup)
            for b, added in formats.items():  # after the file: kafka-storage reads the new log.dirs from it
                command = storage_format_command(profile, b, plan["cluster_id"])
                out = run_on_host(profile, {"id": b, "host": brokers[b]["host"]}, command,
                                  f"formatting its new log directories {added}",
                                  timeout_s=float(self.setting("command_timeout_s")))
                self.log.info("broker %s: new log directories %s formatted for cluster %s: %s", b, added,
                              plan["cluster_id"], out.strip().splitlines()[-1] if out.strip() else "done")
        return {"changes": plan["changes"], "altered": _altered(requests), "files": backups,
                "formatted": sorted(formats)}

    @staticmethod
    def _applied(admin: KafkaAdminHook, scope: Any, alters: dict[int, dict[str, Any]]) -> Check:
        """One look at every broker in scope (``kafka_ops.config_change.not_applied``)."""
        behind = not_applied(scope, alters, admin.describe_broker_config_entries(list(alters)))
        return Check(not behind, "; ".join(behind) or "every broker in scope reports the change")


def _altered(requests: list[tuple[int | None, dict[str, Any]]]) -> dict[str, list[str]]:
    """``{"cluster" | "<id>": [keys]}``: the IncrementalAlterConfigs requests by target, as the XCom holds them."""
    return {"cluster" if b is None else str(b): sorted(a) for b, a in requests}
