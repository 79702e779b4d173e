"""Preferred leader election for one broker's partitions (what ``kafka-leader-election.sh
--election-type PREFERRED`` does, KIP-460), after the broker rejoined its ISRs."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException
from hooks.kafka_admin import KafkaAdminHook

from operators.params import is_true


class PreferredLeaderElectionOperator(BaseOperator):
    """Elect preferred leaders for the partitions whose preferred leader (first replica) is ``broker``.

    :param cluster: ``kafka`` connection id (templated).
    :param broker: ``{"id": int, ...}`` (templated / mapped); None = every partition of the cluster.
    :param dry_run: log what would be elected (templated).

    Returns the number of partitions elected. Fails when an election reports an error other than
    "not needed" (e.g. PREFERRED_LEADER_NOT_AVAILABLE: the broker is not in the ISR yet); task
    retries then help.
    """

    template_fields = ("cluster", "broker", "dry_run")
    ui_color = "#e8fde8"

    def __init__(self, *, cluster: str, broker: dict | None = None, dry_run: bool | str = False, **kwargs: Any):
        super().__init__(**kwargs)
        self.cluster = cluster
        self.broker = broker
        self.dry_run = dry_run

    def execute(self, context: Any) -> int:
        with KafkaAdminHook(self.cluster) as admin:
            state = admin.cluster_state()
            if self.broker is None:
                partitions = [(p.topic, p.partition) for p in state.partitions if not p.is_led_by_preferred]
            else:
                broker_id = int(self.broker["id"])
                partitions = [
                    (p.topic, p.partition) for p in state.partitions_preferring(broker_id) if not p.is_led_by_preferred
                ]
            if not partitions:
                self.log.info("every partition is led by its preferred leader: nothing to elect")
                return 0
            names = ", ".join(f"{t}-{p}" for t, p in partitions[:20])
            if is_true(self.dry_run):
                self.log.info("DRY RUN: would elect preferred leaders of %d partitions: %s", len(partitions), names)
                return 0
            results = admin.elect_preferred_leaders(partitions)
        failed = {name: error for name, error in results.items() if error}
        if failed:
            raise AirflowException(f"preferred leader election failed for {len(failed)} partitions: {failed}")
        self.log.info("elected preferred leaders of %d partitions: %s", len(partitions), names)
        return len(partitions)
