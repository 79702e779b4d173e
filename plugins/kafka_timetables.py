"""``MaintenanceWindowTimetable``: runs scheduled at the opening of maintenance windows given as cron +
duration ("Sat 02:00 Europe/Berlin, 4 h"), for any kafka-ops operation DAG.

A run is created when a window opens (``run_after`` = the opening); its data interval is the window itself
(``[opening, opening + duration]``), so the Grid and the run's details show the window it belongs to. The
operation's window gate (``runtime.window_gate``) reads the same window from the DAG's timetable: before
each broker, batch or wave it goes on only while a window is open, and otherwise waits for the next one
(deferred) or fails, per the ``window_policy`` param. Manual runs of a windowed DAG are gated the same way.

Airflow has no cron + duration timetable (``CronTriggerTimetable``'s ``interval`` reaches back from the
fire time), hence this one. It lives at the top level of plugins/ and is registered by the plugin below:
Airflow deserializes a custom timetable only through a registered plugin.
"""

from __future__ import annotations

import datetime
from typing import Any

import pendulum
from airflow.plugins_manager import AirflowPlugin
from airflow.timetables.base import DagRunInfo, DataInterval, TimeRestriction
from airflow.timetables.trigger import CronTriggerTimetable
from kafka_ops.windows import MaintenanceWindow


class MaintenanceWindowTimetable(CronTriggerTimetable):
    """Runs at every opening of ``cron`` (read in ``timezone``), each run's data interval the window.

    :param cron: five-field cron expression of the openings ("0 2 * * 6": Saturdays 02:00).
    :param duration: how long a window stays open: a ``timedelta`` or seconds (at most one week).
    :param timezone: IANA time zone the cron expression is read in (default UTC).
    :raises kafka_ops.windows.WindowError: a malformed cron, duration or time zone (at DAG parse time).
    """

    def __init__(self, cron: str, duration: datetime.timedelta | float, *, timezone: str = "UTC") -> None:
        seconds = duration.total_seconds() if isinstance(duration, datetime.timedelta) else float(duration)
        self.window = MaintenanceWindow(cron, seconds, str(timezone))
        super().__init__(cron, timezone=str(timezone))
        self.description = f"maintenance window {self.window.describe()}"

    @property
    def summary(self) -> str:
        minutes = round(self.window.duration_s / 60)
        return f"{self.window.cron} for {minutes // 60}h{minutes % 60:02d}" if minutes >= 60 else \
            f"{self.window.cron} for {minutes} min"

    def serialize(self) -> dict[str, Any]:
        return {"cron": self.window.cron, "duration_s": self.window.duration_s, "timezone": self.window.timezone}

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> MaintenanceWindowTimetable:
        return cls(data["cron"], float(data["duration_s"]), timezone=data.get("timezone", "UTC"))

    def infer_manual_data_interval(self, *, run_after: Any) -> DataInterval:
        """A manual run's interval is the instant it was triggered; its window gate finds the window."""
        return DataInterval(run_after, run_after)

    def next_dagrun_info(self, *, last_automated_data_interval: DataInterval | None,
                         restriction: TimeRestriction) -> DagRunInfo | None:
        """The next opening after the last scheduled run's (or from the DAG's start), its window the data
        interval. Without catch-up, windows that already closed are skipped: the window open now, else the
        next one."""
        w = self.window
        if last_automated_data_interval is not None:
            opening = w.opening_after(last_automated_data_interval.start)
        elif restriction.earliest is not None:
            opening = w.opening_after(restriction.earliest - datetime.timedelta(microseconds=1))
        else:
            opening = w.opening_after(pendulum.now("UTC"))
        if not restriction.catchup:
            now = pendulum.now("UTC")
            current = w.window_at(now)
            opening = max(opening, w.opening_before(now) if current is not None else w.opening_after(now))
        if restriction.latest is not None and opening > restriction.latest:
            return None
        start = pendulum.instance(opening)
        return DagRunInfo(run_after=start, data_interval=DataInterval(start, start + w.duration))


class KafkaOpsTimetablesPlugin(AirflowPlugin):
    """Registers :class:`MaintenanceWindowTimetable` so schedulers and API servers can deserialize it."""

    name = "kafka_ops_timetables"
    timetables = [MaintenanceWindowTimetable]
