"""The KRaft upgrade's last step: finalize ``metadata.version`` at the target level and the release's other
features at their defaults for it, then verify them.

``metadata.version`` is a cluster-wide feature level (KIP-584; KIP-778 for its upgrades and downgrades) that the
active controller finalizes when asked with UpdateFeatures, and only when every registered broker and
controller supports the level (their binaries' ApiVersions SupportedFeatures range). Kafka's upgrade notes finish
with ``kafka-features.sh upgrade --release-version``, which also raises the other features (``group.version``,
``transaction.version``, ``eligible.leader.replicas.version``) to their defaults for that level; the step does the
same (param ``release_features``, on by default; ``kraft.version`` is never changed:
:mod:`kafka_ops.release_features`). The step:

1. reads every broker's own ApiVersions (``KafkaAdminHook.broker_features``): the finalized levels and the
   ranges its running binaries support;
2. refuses, sending nothing, a level a broker's binaries do not support (all short brokers named:
   ``kafka_ops.metadata_version.check_bump``, ``kafka_ops.release_features.plan``) or below the finalized one,
   and a raise of ``eligible.leader.replicas.version`` to 1 that would change the brokers' ``min.insync.replicas``
   (Kafka then copies the active controller's static value to the cluster level: ``kafka_ops.elr_min_isr``);
3. sends one UpdateFeatures (UPGRADE) with ``metadata.version`` and the features below their defaults to the
   active controller (through a broker), which applies all or none, and whose own check covers the controllers
   (a refusal such as ``Controller 100 only supports versions 7-25`` fails the task with the node named:
   nothing was changed);
4. polls every broker until each reports the new finalized levels (each applies them from its own copy of the
   metadata log a moment later), up to ``healthcheck_timeout_s``.

A dry run logs what it would send and the controller's verdict on it (UpdateFeatures ``validate_only``, v1+),
sends nothing that changes the cluster. On a ZooKeeper-mode cluster, or without the ``metadata_version``
phase, the step logs why and does nothing. Levels already finalized are verified, not sent again (a resumed
run passes through); features are only raised, never lowered.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk.exceptions import AirflowFailException
from hooks.kafka_admin import KafkaAdminHook
from kafka_ops import elr_min_isr, release_features, upgrade
from kafka_ops.cluster import Broker
from kafka_ops.done_lines import metadata_version_line
from kafka_ops.metadata_version import (
    FEATURE,
    MetadataVersion,
    MetadataVersionError,
    change_line,
    check_bump,
    finalized_everywhere,
    label,
    short_nodes_in,
)
from kafka_ops.release_features import change_lines
from runtime.elr_layers import elr_check
from runtime.lock_holding import ensure_held
from runtime.params import is_true
from runtime.waiting import Check

from operators.cluster_operator import ClusterOperator


class MetadataVersionOperator(ClusterOperator):
    """Finalize and verify ``metadata.version`` on a KRaft cluster (see the module docstring).

    :param settings: ``cluster``, ``target_version`` (the release whose latest level is the default),
        ``metadata_version`` (None / "" = that default; ``"4.1-IV1"``, ``"4.1"`` or ``"27"``),
        ``release_features`` (default true: the other features to their defaults too), ``phases``,
        ``dry_run``, ``healthcheck_interval_s``, ``healthcheck_timeout_s`` (the verification's poll interval
        and deadline, seconds): values or ``FromParam``.
    :param operation: the lock's operation label.

    Returns (XCom) ``{"action": "bumped" | "already" | "dry run" | "skipped", "from": level, "to": level,
    "features": {feature: [from, to]}}`` (metadata.version levels; ``features``: the other features raised, or to
    raise; all absent when skipped).

    :raises AirflowFailException: a level (of metadata.version or a feature) the brokers' binaries do not
        support (named, with what each supports; nothing sent), one the controller refuses (its answer and the
        nodes it names), a malformed level, or the verification's deadline (the brokers still behind named).
    """

    ui_color = "#fde8e8"

    def __init__(self, *, settings: dict, operation: str = "upgrade", **kwargs: Any) -> None:
        super().__init__(settings=settings, **kwargs)
        self.operation = operation

    def note_line(self, result: Any, dry_run: bool) -> str | None:
        return metadata_version_line(result, dry_run)

    def execute(self, context: Any) -> dict[str, Any]:
        with self.releasing_lock_on_failure(context, "the metadata.version step failed"):
            return self._execute(context)

    def _execute(self, context: Any) -> dict[str, Any]:
        cfg = self.resolve(context)
        phases = list(cfg.get("phases") or upgrade.PHASES)
        if "metadata_version" not in phases:
            self.log.info("phase metadata_version not requested: nothing to do")
            return {"action": "skipped"}
        dry_run = self.dry_run
        profile = self.profile
        target = str(cfg["target_version"])
        with_features = is_true(cfg.get("release_features", True))
        with KafkaAdminHook(profile=profile) as admin:
            self.admin = admin
            if not self.mode(context, admin).has_quorum:
                self.log.info("%s: nothing to do", upgrade.ZOOKEEPER_SKIP)
                return {"action": "skipped"}
            try:
                goal = upgrade.metadata_target(target, cfg.get("metadata_version"))
            except MetadataVersionError as exc:
                raise AirflowFailException(f"param metadata_version: {exc} (nothing was touched)") from exc
            state = self.ask(lambda: admin.cluster_state(configs=False), "the cluster's brokers")
            brokers = state.broker_ids
            features = self.ask(lambda: admin.broker_features(brokers), "each broker's ApiVersions (features)")
            for b, f in sorted(features.items()):
                span = "-".join(map(str, f["supported"])) if f["supported"] else "nothing"
                self.log.info("broker %s: metadata.version finalized %s, its running binaries support %s; other "
                              "features finalized: %s", b, f["finalized"], span,
                              _levels_text({k: v for k, v in (f.get("features") or {}).items() if k != FEATURE}))
            levels = [f["finalized"] for f in features.values() if f["finalized"] is not None]
            if not levels:
                raise AirflowFailException("no broker reports a finalized metadata.version (ApiVersions v3+): "
                                           "nothing was sent")
            current = MetadataVersion(max(levels))
            finalized = release_features.cluster_levels(features)
            fplan = self._feature_plan(goal, finalized, features) if with_features else None
            updates = {FEATURE: goal.level} if current != goal else {}
            updates.update(fplan.raise_to if fplan else {})
            changes = fplan.changes() if fplan else {}
            result = {"from": current.level, "to": goal.level, "features": changes}
            if not updates:
                self.log.info("KRaft cluster: metadata.version is %s already%s: nothing to send", label(goal),
                              " and the other features at their defaults for it" if fplan else "")
                self._verify(brokers, goal, fplan, dry_run)
                return {"action": "already", **result}
            line = "; ".join(([change_line(current, goal)] if current != goal else []) +
                             change_lines(changes))
            self.log.info("KRaft cluster: %s (UpdateFeatures, KIP-584 / KIP-778)", line)
            supported = {b: (f["supported"][1] if f["supported"] else 0) for b, f in features.items()}
            reasons = (check_bump(current, goal, supported) if current != goal else []) + (
                fplan.refusals if fplan else [])
            elr_refusal = self._elr_refusal(admin, state.brokers) if elr_min_isr.enables_elr(changes) else None
            if dry_run:
                verdict = admin.update_features(updates, validate_only=True)
                self.log.info("DRY RUN: would send UpdateFeatures %s (UPGRADE); the brokers' binaries now: %s; the "
                              "controller's check (validate_only) answers: %s%s", _levels_text(updates),
                              "; ".join(reasons) or "every broker supports it", verdict,
                              f"; but it would be refused: {elr_refusal}" if elr_refusal else "")
                return {"action": "dry run", **result}
            if reasons:
                raise AirflowFailException(
                    f"{line} not sent (nothing was touched): " + "; ".join(reasons) + f" (each broker's running "
                    f"binaries, from its ApiVersions): roll the binaries of Kafka {target} first (phase binaries) "
                    "so that every broker and controller runs them")
            if elr_refusal:
                raise AirflowFailException(f"{line} not sent (nothing was touched): {elr_refusal}")
            ensure_held(profile, context, self.operation, self.log)
            self.log.info("sending UpdateFeatures %s (UPGRADE) to the active controller", _levels_text(updates))
            answer = admin.update_features(updates)
            if answer != "OK":
                raise AirflowFailException(self._refused(line, answer, target, brokers))
            self.log.info("the controller accepted %s", line)
            self._verify(brokers, goal, fplan, dry_run=False)
        return {"action": "bumped", **result}

    def _feature_plan(self, goal: MetadataVersion, finalized: dict[str, int],
                      features: dict[int, dict[str, Any]]) -> release_features.FeaturePlan:
        """The release's other features (:mod:`kafka_ops.release_features`), with a log line for each left as it
        is."""
        fplan = release_features.plan(goal, finalized,
                                      {b: f.get("feature_support") or {} for b, f in features.items()})
        for feature, why in release_features.LEFT_ALONE.items():
            self.log.info("%s stays at %s: %s", feature, finalized.get(feature, 0), why)
        for feature, level in sorted(fplan.unchanged.items()):
            self.log.info("%s %s: at or above its default for %s already", feature, level, goal.name)
        if fplan.unknown:
            self.log.warning("%s", fplan.unknown)
        return fplan

    def _elr_refusal(self, admin: KafkaAdminHook, brokers: Sequence[Broker]) -> str | None:
        """Why raising ``eligible.leader.replicas.version`` to 1 must not be sent (it would change the brokers'
        ``min.insync.replicas``: :mod:`kafka_ops.elr_min_isr`), None when it may; logs what ELR leaves. Read again
        here, not taken from the preflight: the cluster may have changed during the rolls."""
        quorum = self.ask(admin.describe_quorum, "the metadata quorum")
        line, reason = self.ask(lambda: elr_check(admin, self.profile, brokers, quorum),
                                "each broker's min.insync.replicas and the active controller's")
        self.log.info("%s", line)
        return reason

    def _refused(self, line: str, answer: str, target: str, live: Sequence[int]) -> str:
        """The failure text for the controller's refusal ``answer``, with what to do for each node it names: roll
        the target's binaries on it, or, for a broker not among the ``live`` ones (a fenced registration: stopped,
        or decommissioned without UnregisterBroker), start it or unregister it."""
        named = short_nodes_in(answer)
        advice = []
        for node, (role, top) in sorted(named.items()):
            what = f"{role} {node} supports only up to {MetadataVersion(top)}"
            if role == "broker" and node not in live:
                advice.append(f"{what} and is not running (a fenced registration): start it so that a roll "
                              f"upgrades it, or, if it is gone for good, unregister it (kafka-cluster.sh unregister "
                              f"--id {node})")
            else:
                advice.append(f"{what}: roll the binaries of Kafka {target} on it first (phase binaries)")
        return (f"{line} refused by the controller (nothing was changed): {answer}; "
                + ("; ".join(advice) or "see the controller's answer"))

    def _verify(self, brokers: list[int], goal: MetadataVersion, fplan: release_features.FeaturePlan | None,
                dry_run: bool) -> None:
        """Poll every broker's ApiVersions until each finalizes ``goal`` and the features ``fplan`` raised (or
        found at their defaults); a dry run looks once."""
        wanted = {**(fplan.raise_to if fplan else {}), **(fplan.unchanged if fplan else {})}

        def check() -> Check:
            found = self.admin.broker_features(brokers)
            ok, message = finalized_everywhere(goal, {b: f["finalized"] for b, f in found.items()})
            if wanted:
                ok_f, line = release_features.finalized_everywhere(
                    wanted, {b: f.get("features") or {} for b, f in found.items()})
                ok, message = ok and ok_f, f"{message}; {line}"
            return Check(ok, message)

        if dry_run:
            self.log.info("DRY RUN: %s", check().message)
            return
        result = self.wait(check, f"every broker reports metadata.version {label(goal)} finalized"
                                  + (" and the release's other features" if wanted else ""), ramp_from_s=0.5)
        self.log.info("verified: %s", result.message)


def _levels_text(levels: dict[str, int]) -> str:
    """``"eligible.leader.replicas.version=1, metadata.version=27"`` (``"none"`` when empty)."""
    return ", ".join(f"{f}={lv}" for f, lv in sorted(levels.items())) or "none"
