"""Deferrable waiting on a cluster probe: the triggerer polls, no worker slot is held.

The trigger keeps the count of consecutive passing polls, which a sensor in reschedule mode
cannot (Airflow clears a task's XComs at every reschedule): the rolling-restart gate wants Burrow to
say OK ``ok_streak`` polls in a row, because restarts cause lag spikes (kafka_roller's
``consumer_health`` retries for the same reason).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent
from asgiref.sync import sync_to_async


class ClusterProbeTrigger(BaseTrigger):
    """Poll :func:`sensors.probes.run_probe` until it passes ``ok_streak`` times in a row, or time out.

    :param probe: a :class:`sensors.probes.ProbeSpec` as a dict.
    :param poll_interval_s: seconds between polls.
    :param timeout_s: give up after this many seconds since the trigger started.
    :param ok_streak: consecutive passing polls required (>= 1).

    Events: ``{"status": "ok", "message": ...}`` or ``{"status": "timeout", "message": <last verdict>}``.
    Errors talking to the cluster count as failing polls (their text becomes the message).
    """

    def __init__(self, probe: dict[str, Any], poll_interval_s: float, timeout_s: float, ok_streak: int = 1) -> None:
        super().__init__()
        self.probe = probe
        self.poll_interval_s = poll_interval_s
        self.timeout_s = timeout_s
        self.ok_streak = max(1, ok_streak)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "triggers.cluster_probe.ClusterProbeTrigger",
            {
                "probe": self.probe,
                "poll_interval_s": self.poll_interval_s,
                "timeout_s": self.timeout_s,
                "ok_streak": self.ok_streak,
            },
        )

    async def run(self):
        from sensors.probes import ProbeSpec, run_probe

        spec = ProbeSpec(**self.probe)
        deadline = time.monotonic() + self.timeout_s
        streak, message = 0, "no poll yet"
        while True:
            try:
                result = await sync_to_async(run_probe)(spec)
                ok, message = result.ok, result.message
            except Exception as exc:  # the cluster may be mid-restart: keep polling until the deadline
                ok, message = False, f"probe failed: {exc}"
            streak = streak + 1 if ok else 0
            self.log.info("%s: %s (%d/%d OK in a row)", spec.describe(), message, streak, self.ok_streak)
            if streak >= self.ok_streak:
                yield TriggerEvent({"status": "ok", "message": message})
                return
            if time.monotonic() >= deadline:
                yield TriggerEvent({"status": "timeout", "message": message})
                return
            await asyncio.sleep(self.poll_interval_s)
