"""Before an upgrade touches anything: read every broker host's release and IBP / LMF, refuse a target
that is malformed, older than a broker's release, or brokers on more than the upgrade's two releases
(``kafka_ops.upgrade.check_target``), and log what each phase will do to each broker."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException
from hooks.kafka_admin import KafkaAdminHook
from kafka_ops import upgrade
from runtime.params import resolve_settings
from runtime.upgrade_steps import host_state

from operators.roll_plan import profile_or_fail


class UpgradeChecksOperator(BaseOperator):
    """Refuse bad upgrade input before any action; returns ``{broker id: facts}``.

    :param settings: ``cluster``, ``target_version``, ``phases``, ``install_command`` (values or ``FromParam``).
    :raises AirflowFailException: naming every refusal.
    """

    ui_color = "#eeeeee"

    def __init__(self, *, settings: dict, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.settings = settings

    def execute(self, context: Any) -> dict[str, dict]:
        cfg = resolve_settings(self.settings, context["params"])
        profile = profile_or_fail(cfg["cluster"])
        target = str(cfg["target_version"])
        phases = list(cfg.get("phases") or upgrade.PHASES)
        with KafkaAdminHook(profile=profile) as admin:
            state = admin.cluster_state(configs=False)
        found = {b.id: host_state(profile, {"id": b.id, "host": b.host})[0] for b in state.brokers}
        refusals = upgrade.check_target(target, {b: f["installed"] for b, f in found.items()})
        if not refusals:
            refusals += upgrade.check_phases(target, phases, found)
        if cfg.get("install_command"):
            try:
                profile.command(cfg["install_command"], "install", 0)
            except ValueError as exc:
                refusals.append(f"param install_command: {exc}")
        if refusals:
            raise AirflowFailException(f"upgrade to {target!r} refused (nothing was touched): " + "; ".join(refusals))
        for phase in upgrade.PHASES:
            rule = upgrade.needs_action(phase, target, phases)
            decisions = {b: rule(b, f) for b, f in sorted(found.items())}
            self.log.info("phase %s: %s", phase, "; ".join(f"broker {b}: {'roll' if act else 'skip'}: {why}"
                                                           for b, (act, why) in decisions.items()))
        return {str(b): f for b, f in found.items()}
