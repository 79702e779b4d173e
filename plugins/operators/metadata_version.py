"""The KRaft upgrade's last step: finalize ``metadata.version`` at the target level, then verify it.

``metadata.version`` is a cluster-wide feature level (KIP-584; KIP-778 for its upgrades and downgrades) that the
active controller finalizes when asked with UpdateFeatures, and only when every registered broker and
controller supports the level (their binaries' ApiVersions SupportedFeatures range). The step:

1. reads every broker's own ApiVersions (``KafkaAdminHook.broker_features``): its finalized level and the
   range its running binaries support;
2. refuses, sending nothing, a level a broker's binaries do not support (all short brokers named:
   ``kafka_ops.metadata_version.check_bump``) or below the finalized one;
3. sends UpdateFeatures ``metadata.version=<level>`` (UPGRADE) to the active controller (through a broker),
   whose own check covers the controllers (a refusal such as ``Controller 100 only supports versions 7-25``
   fails the task with the node named: nothing was changed);
4. polls every broker until each reports the new finalized level (each applies it from its own copy of the
   metadata log a moment later), up to ``healthcheck_timeout_s``.

A dry run logs what it would send and the controller's verdict on it (UpdateFeatures ``validate_only``, v1+),
sends nothing that changes the cluster. On a ZooKeeper-mode cluster, or without the ``metadata_version``
phase, the step logs why and does nothing. A level already finalized is verified, not sent again (a resumed
run passes through).
"""

from __future__ import annotations

from typing import Any

from airflow.sdk.exceptions import AirflowFailException
from hooks.kafka_admin import KafkaAdminHook
from kafka_ops import upgrade
from kafka_ops.metadata_version import (
    MetadataVersion,
    MetadataVersionError,
    change_line,
    check_bump,
    finalized_everywhere,
    label,
    short_nodes_in,
)
from runtime.lock_holding import ensure_held
from runtime.waiting import Check

from operators.cluster_operator import ClusterOperator


class MetadataVersionOperator(ClusterOperator):
    """Finalize and verify ``metadata.version`` on a KRaft cluster (see the module docstring).

    :param settings: ``cluster``, ``target_version`` (the release whose latest level is the default),
        ``metadata_version`` (None / "" = that default; ``"4.1-IV1"``, ``"4.1"`` or ``"27"``), ``phases``,
        ``dry_run``, ``healthcheck_interval_s``, ``healthcheck_timeout_s`` (the verification's poll interval
        and deadline, seconds): values or ``FromParam``.
    :param operation: the lock's operation label.

    Returns (XCom) ``{"action": "bumped" | "already" | "dry run" | "skipped", "from": level, "to": level}``
    (levels absent when skipped).

    :raises AirflowFailException: a level the brokers' binaries do not support (named, with what each
        supports; nothing sent), one the controller refuses (its answer and the nodes it names), a malformed
        level, or the verification's deadline (the brokers still behind named).
    """

    ui_color = "#fde8e8"

    def __init__(self, *, settings: dict, operation: str = "upgrade", **kwargs: Any) -> None:
        super().__init__(settings=settings, **kwargs)
        self.operation = operation

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
        with KafkaAdminHook(profile=profile) as admin:
            self.admin = admin
            if not self.mode(context, admin).has_quorum:
                self.log.info("%s: nothing to do", upgrade.ZOOKEEPER_SKIP)
                return {"action": "skipped"}
            try:
                goal = upgrade.metadata_target(target, cfg.get("metadata_version"))
            except MetadataVersionError as exc:
                raise AirflowFailException(f"param metadata_version: {exc} (nothing was touched)") from exc
            brokers = self.ask(lambda: admin.cluster_state(configs=False).broker_ids, "the cluster's brokers")
            features = self.ask(lambda: admin.broker_features(brokers), "each broker's ApiVersions (features)")
            for b, f in sorted(features.items()):
                span = "-".join(map(str, f["supported"])) if f["supported"] else "nothing"
                self.log.info("broker %s: metadata.version finalized %s, its running binaries support %s", b,
                              f["finalized"], span)
            levels = [f["finalized"] for f in features.values() if f["finalized"] is not None]
            if not levels:
                raise AirflowFailException("no broker reports a finalized metadata.version (ApiVersions v3+): "
                                           "nothing was sent")
            current = MetadataVersion(max(levels))
            if current == goal:
                self.log.info("KRaft cluster: metadata.version is %s already: nothing to send", label(goal))
                self._verify(brokers, goal, dry_run)
                return {"action": "already", "from": current.level, "to": goal.level}
            line = change_line(current, goal)
            self.log.info("KRaft cluster: %s (UpdateFeatures, KIP-584 / KIP-778)", line)
            supported = {b: (f["supported"][1] if f["supported"] else 0) for b, f in features.items()}
            reasons = check_bump(current, goal, supported)
            if dry_run:
                verdict = admin.update_metadata_version(goal.level, validate_only=True)
                self.log.info("DRY RUN: would send UpdateFeatures metadata.version=%s (UPGRADE); the brokers' "
                              "binaries now: %s; the controller's check (validate_only) answers: %s", goal.level,
                              "; ".join(reasons) or "every broker supports it", verdict)
                return {"action": "dry run", "from": current.level, "to": goal.level}
            if reasons:
                raise AirflowFailException(
                    f"{line} not sent (nothing was touched): " + "; ".join(reasons) + f" (each broker's running "
                    f"binaries, from its ApiVersions): roll the binaries of Kafka {target} first (phase binaries) "
                    "so that every broker and controller runs them")
            ensure_held(profile, context, self.operation, self.log)
            self.log.info("sending UpdateFeatures metadata.version=%s (UPGRADE) to the active controller", goal.level)
            answer = admin.update_metadata_version(goal.level)
            if answer != "OK":
                raise AirflowFailException(self._refused(line, answer, target))
            self.log.info("the controller accepted %s", line)
            self._verify(brokers, goal, dry_run=False)
        return {"action": "bumped", "from": current.level, "to": goal.level}

    def _refused(self, line: str, answer: str, target: str) -> str:
        named = short_nodes_in(answer)
        nodes = "; ".join(f"{role} {node} supports only up to {MetadataVersion(top)}"
                          for node, (role, top) in sorted(named.items()))
        advice = (f"{nodes}: roll the binaries of Kafka {target} on it first (phase binaries)" if named else
                  "see the controller's answer")
        return f"{line} refused by the controller (nothing was changed): {answer}; {advice}"

    def _verify(self, brokers: list[int], goal: MetadataVersion, dry_run: bool) -> None:
        """Poll every broker's ApiVersions until each finalizes ``goal`` (a dry run looks once)."""

        def check() -> Check:
            found = self.admin.broker_features(brokers)
            ok, message = finalized_everywhere(goal, {b: f["finalized"] for b, f in found.items()})
            return Check(ok, message)

        if dry_run:
            self.log.info("DRY RUN: %s", check().message)
            return
        result = self.wait(check, f"every broker reports metadata.version {label(goal)} finalized", ramp_from_s=0.5)
        self.log.info("verified: %s", result.message)
