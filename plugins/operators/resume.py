"""Resume safety: has this broker already been restarted in this DAG run?

A run's anchor is its ``run_after`` (when it was triggered), which stays put when tasks are
cleared; a broker whose ZooKeeper registration (``/brokers/ids/<id>`` ``timestamp``) is at or after
the anchor was restarted by this run, so clearing a failed task never stops it a second time
(rule in ``kafka_ops.restart_plan.already_restarted``). KRaft clusters have no such registration
node: without ``zookeeper`` in the profile nothing counts as restarted (documented in the README).
"""

from __future__ import annotations

from typing import Any

from hooks.zookeeper import ZooKeeperHook
from kafka_ops.profile import ClusterProfile
from kafka_ops.restart_plan import already_restarted, to_epoch_ms


def run_anchor_ms(context: Any) -> int:
    """The DAG run's anchor in ms since the epoch: ``run_after`` (falls back to the start date)."""
    dag_run = context["dag_run"]
    moment = getattr(dag_run, "run_after", None) or dag_run.start_date
    return to_epoch_ms(moment)


def registration_ms(profile: ClusterProfile, broker_id: int) -> int | None:
    """The broker's registration timestamp (ms) from ZooKeeper; None when not registered or no ZooKeeper."""
    if not profile.zookeeper:
        return None
    with ZooKeeperHook(profile=profile) as zk:
        registration = zk.broker_registration(broker_id)
    return registration.timestamp_ms if registration else None


def restarted_in_run(profile: ClusterProfile, broker_id: int, context: Any) -> int | None:
    """The registration timestamp (ms) when ``broker_id`` was (re)started during this run, else None."""
    registered = registration_ms(profile, broker_id)
    return registered if already_restarted(registered, run_anchor_ms(context)) else None
