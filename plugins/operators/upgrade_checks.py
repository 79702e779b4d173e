"""Before an upgrade touches anything: decide the path (KRaft or ZooKeeper mode), read every node's release
over SSH, refuse bad input, and log what each phase will do to each node.

- ZooKeeper mode (the cluster does not answer DescribeQuorum): every broker host's release and IBP / LMF;
  refused: a target that is malformed, older than a broker's release, brokers on more than the upgrade's two
  releases (``kafka_ops.upgrade.check_target``), a phase list that skips a needed step
  (``kafka_ops.upgrade.check_phases``), a ``metadata_version`` param (KRaft only).
- KRaft (the run's mode, ``runtime.cluster_mode``): every broker host's and every controller host's release (the
  controllers are the quorum's voters and the controllers of ``controller_hosts`` that are observers,
  ``kafka_ops.quorum.observer_controllers``; their hosts the profile's ``controller_hosts`` or DescribeQuorum v2's
  endpoints); the cluster's finalized ``metadata.version`` and other features, and each broker's supported
  range (ApiVersions);
  refused besides the above over brokers and controllers: a malformed ``metadata_version``, a level above
  what the target release supports, a level below the cluster's finalized one
  (``kafka_ops.upgrade.check_metadata_version``), ``metadata_version`` without ``binaries`` while a node's
  release does not support the level; a raise of ``eligible.leader.replicas.version`` to 1 that would change the
  brokers' ``min.insync.replicas`` (Kafka copies the active controller's static value to the cluster level:
  ``kafka_ops.elr_min_isr``); with phase ``metadata_version``, brokers registered but fenced (stopped, or
  decommissioned without UnregisterBroker: the controller would refuse the level for them,
  ``kafka_ops.upgrade.fenced_registrations``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hooks.kafka_admin import KafkaAdminHook
from kafka_ops import controller_roll as controller_rules
from kafka_ops import elr_min_isr, release_features, upgrade
from kafka_ops.cluster import Broker, fenced_down
from kafka_ops.done_lines import upgrade_start_line
from kafka_ops.metadata_version import MetadataVersion, change_line, label
from kafka_ops.profile import ClusterProfile
from kafka_ops.quorum import Quorum, observer_controllers
from runtime.elr_layers import elr_check
from runtime.failures import RunRefused
from runtime.params import is_true
from runtime.upgrade_steps import host_state

from operators.cluster_operator import ClusterOperator

KRAFT = "kraft"
ZOOKEEPER = "zookeeper"


class UpgradeChecksOperator(ClusterOperator):
    """Refuse bad upgrade input before any action; returns (XCom, read by the approval task)::

        {"mode": "kraft" | "zookeeper", "target": "3.7.1",
         "nodes": {"<node id>": {"installed", "ibp", "lmf", "role": "broker" | "controller"}},
         "metadata_version": {"current": 25, "target": 27,             # levels; None in ZooKeeper mode
                              "features": {"eligible.leader.replicas.version": [0, 1]}} | None}

    ``features``: the release's other features the metadata_version step will raise, [from, to] (empty with
    ``release_features`` false); ``elr_min_insync`` (only when ``eligible.leader.replicas.version`` goes from 0 to 1):
    what turning ELR on leaves of the brokers' ``min.insync.replicas``, a line the approval quotes.

    :param settings: ``cluster``, ``target_version``, ``phases``, ``install_command``, ``metadata_version``,
        ``release_features`` (values or ``FromParam``).
    The run's note opens its details with where the upgrade began (``kafka_ops.done_lines.upgrade_start_line``).

    :raises AirflowFailException: naming every refusal ("nothing was touched").
    """

    ui_color = "#eeeeee"

    def note_line(self, result: Any, dry_run: bool) -> str | None:
        return upgrade_start_line(result, dry_run)

    def execute(self, context: Any) -> dict[str, Any]:
        cfg = self.resolve(context)
        profile = self.profile
        target = str(cfg["target_version"])
        phases = list(cfg.get("phases") or upgrade.PHASES)
        requested_mv = cfg.get("metadata_version")
        requested_mv = None if requested_mv is None or not str(requested_mv).strip() else str(requested_mv).strip()
        refusals: list[str] = []
        controllers: list[dict[str, Any]] = []
        with KafkaAdminHook(profile=profile) as admin:
            state = admin.cluster_state(configs=False)
            kraft = self.mode(context, admin).has_quorum
            if kraft:
                quorum = admin.describe_quorum()
                # the voters, and the controllers that are observers (the controller roll upgrades them too)
                ids = [*observer_controllers(quorum, profile.controller_hosts), *quorum.voter_ids]
                try:
                    hosts = controller_rules.resolve_hosts(ids, profile.controller_hosts, quorum, profile.cluster)
                    controllers = [{"id": cid, "host": hosts[cid][0], "role": "controller"} for cid in ids]
                except ValueError as exc:
                    refusals.append(str(exc))
                features = admin.broker_features(state.broker_ids)
                registrations = admin.broker_registrations()
        if kraft:
            self.log.info("KRaft cluster (it answers DescribeQuorum): the controllers %s roll their binaries first "
                          "(one at a time, the active controller last), then the brokers %s; then metadata.version "
                          "is finalized with UpdateFeatures (KIP-584, KIP-778) after the approval; the pin / ibp / "
                          "lmf phases do nothing (%s)", [c["id"] for c in controllers], state.broker_ids,
                          upgrade.KRAFT_SKIP)
        else:
            self.log.info("ZooKeeper mode (the cluster does not answer DescribeQuorum): the brokers %s roll pin, "
                          "binaries, then ibp and lmf after the approval; no KRaft controllers, no metadata.version",
                          state.broker_ids)
        found = {b.id: {**host_state(profile, {"id": b.id, "host": b.host})[0], "role": "broker"}
                 for b in state.brokers}
        for c in controllers:
            found[c["id"]] = {**host_state(profile, c)[0], "role": "controller"}
        nodes = "nodes" if kraft else "brokers"
        refusals += upgrade.check_target(target, {n: f["installed"] for n, f in found.items()}, nodes)
        mv_info = None
        try:
            upgrade.parse_version(target)
        except ValueError:  # check_target named it; no release to judge a metadata.version against
            kraft_checks = False
        else:
            kraft_checks = kraft
        if kraft_checks:
            finalized = [f["finalized"] for f in features.values() if f["finalized"] is not None]
            current = MetadataVersion(max(finalized)) if finalized else None
            for b, f in sorted(features.items()):
                span = "-".join(map(str, f["supported"])) if f["supported"] else "nothing (no answer)"
                self.log.info("broker %s: metadata.version finalized %s, its binaries support %s", b,
                              f["finalized"], span)
            if current is None:
                refusals.append("no broker reports a finalized metadata.version (ApiVersions v3+): is this a KRaft "
                                "cluster on Kafka 3.3 or newer?")
            goal, reasons = upgrade.check_metadata_version(target, requested_mv, current)
            refusals += reasons
            if goal is not None and current is not None:
                mv_info = {"current": current.level, "target": goal.level, "features": {}}
                if is_true(cfg.get("release_features", True)):
                    mv_info["features"] = release_features.plan(
                        goal, release_features.cluster_levels(features), {}).changes()
                if "metadata_version" in phases and elr_min_isr.enables_elr(mv_info["features"]):
                    mv_info["elr_min_insync"], reason = self._elr_check(profile, state.brokers, quorum)
                    refusals += [reason] if reason else []
            down = None if registrations is None else [b.id for b in fenced_down(registrations, state.broker_ids)]
            fenced, notes = upgrade.fenced_registrations(down, phases)
            refusals += fenced
            for note in notes:
                self.log.warning("%s", note)
            if not refusals:
                refusals += upgrade.check_phases(target, phases, found, kraft=True, metadata_version=goal)
        elif not kraft:
            refusals += upgrade.check_zookeeper_target(target)
            if requested_mv is not None:
                refusals.append(f"param metadata_version {requested_mv!r} applies to KRaft clusters only; cluster "
                                f"{profile.cluster!r} runs in ZooKeeper mode (its protocol is bumped by the ibp and "
                                "lmf phases): leave metadata_version empty")
            if not refusals:
                refusals += upgrade.check_phases(target, phases, found)
        if cfg.get("install_command"):
            try:
                profile.command(cfg["install_command"], "install", 0)
            except ValueError as exc:
                refusals.append(f"param install_command: {exc}")
        if refusals:
            raise RunRefused(f"upgrade to {target!r} refused (nothing was touched): " + "; ".join(refusals))
        self._log_phases(target, phases, found, kraft, mv_info)
        return {"mode": KRAFT if kraft else ZOOKEEPER, "target": target,
                "nodes": {str(n): f for n, f in sorted(found.items())},
                "metadata_version": mv_info}

    def _elr_check(self, profile: ClusterProfile, brokers: Sequence[Broker], quorum: Quorum) -> tuple[str, str | None]:
        """What turning ELR on leaves of the brokers' ``min.insync.replicas`` (logged, and for the approval) and the
        refusal when it would change one (``runtime.elr_layers.elr_check``)."""
        with KafkaAdminHook(profile=profile) as admin:
            line, reason = elr_check(admin, profile, brokers, quorum)
        self.log.info("%s", line)
        return line, reason

    def _log_phases(self, target: str, phases: list[str], found: dict[int, dict], kraft: bool,
                    mv_info: dict | None) -> None:
        """One line per phase: what it does to each node (or why it does nothing in this mode)."""
        for phase in upgrade.PHASES:
            if phase == "metadata_version":
                if not kraft:
                    self.log.info("phase metadata_version: nothing (%s)", upgrade.ZOOKEEPER_SKIP)
                elif phase not in phases:
                    self.log.info("phase metadata_version: not requested")
                else:
                    current, goal = MetadataVersion(mv_info["current"]), MetadataVersion(mv_info["target"])
                    raises = release_features.change_lines(mv_info["features"])
                    self.log.info("phase metadata_version: %s%s", change_line(current, goal) if goal != current else
                                  f"metadata.version is {label(goal)} already",
                                  "; " + "; ".join(raises) if raises else
                                  "" if goal != current else ": nothing to send")
                continue
            if kraft and phase in upgrade.ZOOKEEPER_PHASES:
                self.log.info("phase %s: nothing (%s)", phase, upgrade.KRAFT_SKIP)
                continue
            rule = upgrade.needs_action(phase)
            goal = {"target_version": target, "phases": phases}
            in_order = sorted(found.items(), key=lambda i: (i[1]["role"] != "controller", i[0]))
            decisions = {n: rule(n, f, goal) for n, f in in_order}
            self.log.info("phase %s: %s", phase, "; ".join(
                f"{found[n]['role']} {n}: {'roll' if act else 'skip'}: {why}" for n, (act, why) in decisions.items()))
