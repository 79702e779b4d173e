"""``WaveProgressTrigger``: the deferred part of a reassignment wave's verify wait, in the triggerer.

A wave that is not complete after its first minute of in-task polling (``operators.reassignment_wave``)
defers here: no worker slot is held while replicas copy for minutes or hours. The trigger polls
ListPartitionReassignments (through ``runtime.reassignments``, as the task does) every ``interval_s`` and
fires once none of the wave's partitions is still reassigning (``{"state": "done"}``), at the wave's
deadline (``{"state": "timeout", "ongoing": [[topic, partition], ...]}``), or on an error waiting cannot
fix (``{"state": "error", "message": ...}``); transient errors (a broker or the controller restarting) are
logged and polled through.

It never fires within ``first_check_after_s`` (default 30 s) of the deferral: a trigger that fires seconds
after its task deferred is the case of the Airflow 3.3 scheduler race apache/airflow#72716 (a stale
defer-exit event fails the resumed task).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

#: Seconds after the deferral before the first check (see the module docstring).
FIRST_CHECK_AFTER_S = 30.0


class WaveProgressTrigger(BaseTrigger):
    """Wait until the wave's partitions are no longer being reassigned.

    :param cluster: the cluster's connection id (the profile is read in the triggerer; no secret is
        serialized with the trigger).
    :param partitions: ``[[topic, partition], ...]`` of the wave.
    :param label: the wave's label for log lines ("wave 2/5 (1.2 GB, 14 moves)").
    :param interval_s: seconds between checks.
    :param deadline: epoch seconds at which the wave times out.
    :param first_check_after_s: seconds before the first check (default :data:`FIRST_CHECK_AFTER_S`).
    """

    def __init__(self, cluster: str, partitions: list[list[Any]], label: str, interval_s: float, deadline: float,
                 first_check_after_s: float | None = None) -> None:
        super().__init__()
        self.cluster = cluster
        self.partitions = [[str(t), int(p)] for t, p in partitions]
        self.label = label
        self.interval_s = float(interval_s)
        self.deadline = float(deadline)
        self.first_check_after_s = float(FIRST_CHECK_AFTER_S if first_check_after_s is None else first_check_after_s)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return ("triggers.wave_progress.WaveProgressTrigger", {
            "cluster": self.cluster, "partitions": self.partitions, "label": self.label,
            "interval_s": self.interval_s, "deadline": self.deadline,
            "first_check_after_s": self.first_check_after_s})

    def _ongoing(self) -> set[tuple[str, int]]:
        from hooks.cluster_profile import get_cluster_profile
        from hooks.kafka_admin import KafkaAdminHook
        from runtime.reassignments import Reassignments

        profile = get_cluster_profile(self.cluster)
        with KafkaAdminHook(profile=profile) as admin:
            return {(o["topic"], int(o["partition"])) for o in Reassignments(admin, profile).ongoing()}

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from runtime.failures import describe, is_transient

        ours = {(t, p) for t, p in self.partitions}
        await asyncio.sleep(min(self.first_check_after_s, max(0.0, self.deadline - time.time())))
        left = sorted(ours)
        while True:
            try:
                ongoing = await asyncio.to_thread(self._ongoing)
            except Exception as exc:
                if not is_transient(exc):
                    yield TriggerEvent({"state": "error", "message": describe(exc)})
                    return
                self.log.warning("%s: could not read the reassignments now (%s); polling on", self.label,
                                 describe(exc))
            else:
                left = sorted(ours & ongoing)
                self.log.info("%s: %d/%d moves done", self.label, len(ours) - len(left), len(ours))
                if not left:
                    yield TriggerEvent({"state": "done"})
                    return
            if time.time() >= self.deadline:
                yield TriggerEvent({"state": "timeout", "ongoing": [list(k) for k in left]})
                return
            await asyncio.sleep(min(self.interval_s, max(0.0, self.deadline - time.time())))
