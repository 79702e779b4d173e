"""The first task of a rolling restart: validate the trigger's params against the live cluster and
resolve the restart order. It touches nothing, so bad input fails here, before any SSH.

Checks: the cluster connection exists and holds a valid profile (SSH connection named), requested
broker ids are registered and not repeated, watched consumer groups are known to Burrow. The order
puts the controller last unless ``keep_order`` (kafka_roller's rule; ``kafka_ops.restart_plan``).

The plan of a run is frozen at its first computation (an Airflow Variable named after the run), so
that clearing the plan task, or the whole run, after a failure resumes the same order over the same
brokers, including one the failure left stopped (it is not in the metadata any more, and would
otherwise silently drop out of the roll). :class:`ForgetPlanOperator` deletes it when the run succeeds.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperator, Variable
from airflow.sdk.exceptions import AirflowFailException
from hooks.burrow import BurrowHook
from hooks.cluster_profile import get_cluster_profile
from hooks.kafka_admin import KafkaAdminHook
from kafka_ops.restart_plan import plan_restart, resolve_groups


def plan_variable_key(context: Any) -> str:
    """The Variable holding a run's frozen plan: ``kafka_ops_plan__<dag_id>__<run_id>``."""
    return f"kafka_ops_plan__{context['dag'].dag_id}__{context['run_id']}"


class RollingRestartPlanOperator(BaseOperator):
    """Validate params and return the brokers in restart order, one dict each (the mapped input):
    ``{"id", "host", "rack", "position", "total", "previous"}``. Pushes XCom ``consumer_groups``
    (the resolved Burrow groups, or None).

    :param cluster: ``kafka`` connection id (templated).
    :param brokers: broker ids to restart, [] = all (templated).
    :param keep_order: keep the given order (controller not moved last) (templated).
    :param consumer_groups: see :func:`kafka_ops.restart_plan.resolve_groups` (templated).
    :raises AirflowFailException: any invalid input (not retried: waiting cannot fix it).
    """

    template_fields = ("cluster", "brokers", "keep_order", "consumer_groups")
    ui_color = "#eeeeee"

    def __init__(
        self,
        *,
        cluster: str,
        brokers: list[int] | None = None,
        keep_order: bool = False,
        consumer_groups: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.cluster = cluster
        self.brokers = brokers
        self.keep_order = keep_order
        self.consumer_groups = consumer_groups

    def execute(self, context: Any) -> list[dict]:
        frozen = Variable.get(plan_variable_key(context), default=None, deserialize_json=True)
        if frozen:
            self.log.info("resuming: this run's plan was frozen at its first computation: %s",
                          [step["id"] for step in frozen["steps"]])
            context["ti"].xcom_push(key="consumer_groups", value=frozen["consumer_groups"])
            return frozen["steps"]
        steps, groups = self.compute(context)
        Variable.set(plan_variable_key(context), {"steps": steps, "consumer_groups": groups}, serialize_json=True,
                     description="kafka-ops: frozen rolling-restart plan of one DAG run (deleted when it succeeds)")
        context["ti"].xcom_push(key="consumer_groups", value=groups)
        return steps

    def compute(self, context: Any) -> tuple[list[dict], list[str] | None]:
        """Validate against the live cluster; returns (steps, consumer groups)."""
        try:
            profile = get_cluster_profile(self.cluster)
            profile.require("ssh_conn_id")
        except Exception as exc:  # missing connection or invalid profile: say which, stop here
            raise AirflowFailException(f"cluster {self.cluster!r}: {exc}") from exc
        with KafkaAdminHook(profile=profile) as admin:
            state = admin.cluster_state()
        try:
            plan = plan_restart(state.broker_ids, state.controller_id, list(self.brokers or []),
                                keep_order=bool(self.keep_order))
        except ValueError as exc:
            raise AirflowFailException(f"cluster {self.cluster!r}: {exc}") from exc
        groups = resolve_groups(self.consumer_groups, profile.consumer_groups)
        if groups:
            try:
                burrow = BurrowHook.from_profile(profile)
                statuses = burrow.group_statuses(groups)
            except ValueError as exc:
                raise AirflowFailException(f"cluster {self.cluster!r}: lag gate needs Burrow: {exc}") from exc
            unknown = [s.group for s in statuses if s.status == "NOTFOUND"]
            if unknown:
                raise AirflowFailException(f"consumer groups unknown to Burrow ({profile.burrow_cluster}): {unknown}")
        for reason in plan.reasons:
            self.log.info("plan: %s", reason)
        self.log.info("restart order: %s; lag gate on %s", plan.order, groups or "no groups")
        steps = []
        for position, broker_id in enumerate(plan.order):
            broker = state.broker(broker_id)
            steps.append({
                "id": broker_id,
                "host": broker.host,
                "rack": broker.rack,
                "position": position + 1,
                "total": len(plan.order),
                "previous": plan.order[position - 1] if position else None,
            })
        return steps, groups


class ForgetPlanOperator(BaseOperator):
    """Delete the run's frozen plan (last step of a successful run)."""

    ui_color = "#eeeeee"

    def execute(self, context: Any) -> None:
        Variable.delete(plan_variable_key(context))
