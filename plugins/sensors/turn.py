"""Strictly one broker at a time inside a mapped task group.

A rolling restart maps one task group over the brokers in restart order. Airflow runs mapped
instances in parallel and in no guaranteed order, so each instance starts with this sensor: it
passes only when the previous instance (``map_index - 1``) has finished its last task, and fails
at once when that instance failed, so a failed broker stops the roll before the next one is touched.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseSensorOperator
from airflow.sdk.exceptions import AirflowFailException

FAILED_STATES = {"failed", "upstream_failed"}


class PreviousBrokerDoneSensor(BaseSensorOperator):
    """Wait for the previous mapped instance's ``last_task_id`` to succeed (reschedule mode by default).

    :param broker: this instance's ``{"id", "position", "previous"}`` (templated / mapped); ``previous``
        names the broker before it, for the log.
    :param last_task_id: the final task of the group, e.g. ``"restart_broker.soak"``.
    """

    template_fields = ("broker",)
    ui_color = "#f3f3f3"

    def __init__(self, *, broker: dict, last_task_id: str, **kwargs: Any) -> None:
        kwargs.setdefault("mode", "reschedule")
        super().__init__(**kwargs)
        self.broker = broker
        self.last_task_id = last_task_id

    def poke(self, context: Any) -> bool:
        ti = context["ti"]
        if ti.map_index <= 0:
            return True
        group_id = self.last_task_id.rsplit(".", 1)[0]
        states = ti.get_task_states(
            dag_id=ti.dag_id, map_index=ti.map_index - 1, task_group_id=group_id, run_ids=[ti.run_id]
        ).get(ti.run_id, {})
        previous = self.broker.get("previous")
        last = states.get(f"{self.last_task_id}_{ti.map_index - 1}")
        failed = sorted(k for k, v in states.items() if v in FAILED_STATES)
        if failed:
            raise AirflowFailException(
                f"broker {previous} (previous in the restart order) did not finish: {', '.join(failed)} failed; "
                f"not touching broker {self.broker['id']}"
            )
        self.log.info("waiting for broker %s to finish (its %s: %s)", previous, self.last_task_id, last)
        return last == "success"
