"""A test-only Airflow DAG: the rolling restart scheduled in a maintenance window, the way a per-cluster
DAG file of an operator would build it. The window comes from $KAFKA_OPS_TEST_WINDOW_CRON and
$KAFKA_OPS_TEST_WINDOW_S (default: Sundays 03:00 UTC for an hour), so each test picks one relative to now."""

from __future__ import annotations

import os

from kafka_timetables import MaintenanceWindowTimetable
from operations.rolling_restart import rolling_restart_dag

dag = rolling_restart_dag(
    "kafka_windowed_restart_test",
    schedule=MaintenanceWindowTimetable(os.environ.get("KAFKA_OPS_TEST_WINDOW_CRON", "0 3 * * 0"),
                                        float(os.environ.get("KAFKA_OPS_TEST_WINDOW_S", "3600"))),
    defaults={"cluster": "kafka_sandbox"},
)
