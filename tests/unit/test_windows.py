"""Maintenance windows without servers: the window arithmetic (``kafka_ops.windows``), the timetable
(``kafka_timetables.MaintenanceWindowTimetable``: next runs, catch-up, serialization through Airflow's own
encoder, parsing in a DagBag), the gate's decisions (``runtime.window_gate``) and per-cluster param
defaults (``operations.operation_dag.with_defaults``). The gate on a real roll: tests/dags/test_maintenance_window.py.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pendulum
import pytest
from kafka_ops.windows import MaintenanceWindow, WindowError, judge

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

SAT_BERLIN = MaintenanceWindow("0 2 * * 6", 4 * 3600, "Europe/Berlin")  # Saturdays 02:00-06:00 Berlin


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize("at, is_open", [
    (utc(2026, 11, 28, 0, 59, 59), False),  # 01:59:59 Berlin (UTC+1 in winter)
    (utc(2026, 11, 28, 1, 0, 0), True),  # the opening itself
    (utc(2026, 11, 28, 4, 59, 59), True),
    (utc(2026, 11, 28, 5, 0, 0), False),  # closes after exactly 4 h
    (utc(2026, 11, 27, 2, 0, 0), False),  # a Friday
    (utc(2026, 7, 4, 0, 0, 0), True),  # summer: 02:00 Berlin is 00:00 UTC
    (utc(2026, 7, 4, 3, 59, 0), True),
    (utc(2026, 7, 4, 4, 0, 0), False),
])
def test_a_window_follows_its_time_zone(at, is_open):
    assert SAT_BERLIN.is_open(at) is is_open


def test_judge_names_the_close_or_the_next_opening():
    inside = judge(SAT_BERLIN, utc(2026, 11, 28, 2, 0))
    assert inside.open and inside.closes == utc(2026, 11, 28, 5, 0)
    assert "inside the maintenance window (cron '0 2 * * 6' (Europe/Berlin), 4 h 0 min): it closes at " \
           "2026-11-28 05:00:00 UTC" == inside.message
    outside = judge(SAT_BERLIN, utc(2026, 11, 28, 5, 0))
    assert not outside.open and outside.opens == utc(2026, 12, 5, 1, 0)
    assert outside.message.endswith("the next one opens at 2026-12-05 01:00:00 UTC, in 164 h 0 min")


def test_overlapping_and_touching_windows_merge():
    hourly_2h = MaintenanceWindow("0 * * * *", 7200)
    verdict = judge(hourly_2h, utc(2026, 11, 23, 5, 30))
    assert verdict.open and verdict.closes - utc(2026, 11, 23, 5, 30) > timedelta(days=7), "always open"
    touching = MaintenanceWindow("0 */2 * * *", 7200)  # every 2 h for 2 h: one long window
    assert judge(touching, utc(2026, 11, 23, 1, 59, 59)).closes > utc(2026, 11, 24)
    short = MaintenanceWindow("*/10 * * * *", 60)
    assert judge(short, utc(2026, 11, 23, 5, 0, 30)).closes == utc(2026, 11, 23, 5, 1)
    assert judge(short, utc(2026, 11, 23, 5, 1)).opens == utc(2026, 11, 23, 5, 10)


@pytest.mark.parametrize("cron, duration, tz, message", [
    ("0 2 * *", 60, "UTC", "not a five-field cron expression"),
    ("0 0 2 * * 6", 60, "UTC", "not a five-field cron expression"),
    ("61 2 * * 6", 60, "UTC", "not a five-field cron expression"),
    ("0 2 * * 6", 0, "UTC", "must be more than 0"),
    ("0 2 * * 6", 8 * 86400, "UTC", "at most 604800 s"),
    ("0 2 * * 6", "4h", "UTC", "not a number of seconds"),
    ("0 2 * * 6", 60, "Mars/Olympus", "time zone 'Mars/Olympus': unknown"),
])
def test_malformed_windows_are_refused_with_the_field_named(cron, duration, tz, message):
    with pytest.raises(WindowError, match=message.replace("(", r"\(").replace("*", r"\*")):
        MaintenanceWindow(cron, duration, tz)


def test_a_naive_instant_is_refused():
    with pytest.raises(WindowError, match="without a time zone"):
        SAT_BERLIN.is_open(datetime(2026, 11, 28, 2, 0))


# -- the timetable ---------------------------------------------------------------------------------------


def restriction(earliest=None, catchup=False, latest=None):
    from airflow.timetables.base import TimeRestriction

    return TimeRestriction(earliest=earliest, latest=latest, catchup=catchup)


def test_timetable_runs_at_each_opening_with_the_window_as_its_data_interval():
    from kafka_timetables import MaintenanceWindowTimetable

    tt = MaintenanceWindowTimetable("0 2 * * 6", timedelta(hours=4), timezone="Europe/Berlin")
    first = tt.next_dagrun_info(last_automated_data_interval=None,
                                restriction=restriction(pendulum.datetime(2026, 1, 1), catchup=True))
    assert first.run_after == utc(2026, 1, 3, 1, 0)  # the first Saturday of 2026, 02:00 Berlin
    assert (first.data_interval.start, first.data_interval.end) == (utc(2026, 1, 3, 1), utc(2026, 1, 3, 5))
    second = tt.next_dagrun_info(last_automated_data_interval=first.data_interval,
                                 restriction=restriction(pendulum.datetime(2026, 1, 1), catchup=True))
    assert second.run_after == utc(2026, 1, 10, 1, 0)
    assert tt.next_dagrun_info(last_automated_data_interval=first.data_interval,
                               restriction=restriction(pendulum.datetime(2026, 1, 1), catchup=True,
                                                       latest=pendulum.datetime(2026, 1, 9))) is None
    assert tt.summary == "0 2 * * 6 for 4h00"
    assert "Europe/Berlin" in tt.description


def test_timetable_without_catchup_skips_closed_windows_and_keeps_an_open_one(monkeypatch):
    from kafka_timetables import MaintenanceWindowTimetable

    tt = MaintenanceWindowTimetable("0 2 * * 6", 4 * 3600, timezone="UTC")
    for now, expected in [(pendulum.datetime(2026, 11, 23, 5), utc(2026, 11, 28, 2)),  # Monday: next Saturday
                          (pendulum.datetime(2026, 11, 28, 3), utc(2026, 11, 28, 2))]:  # inside: this window
        monkeypatch.setattr(pendulum, "now", lambda tz=None, _now=now: _now)
        info = tt.next_dagrun_info(last_automated_data_interval=None,
                                   restriction=restriction(pendulum.datetime(2026, 1, 1)))
        assert info.run_after == expected, now


def test_timetable_serializes_through_airflow_and_parses_in_a_dag_file(tmp_path):
    from airflow.serialization.encoders import encode_timetable
    from kafka_timetables import MaintenanceWindowTimetable

    tt = MaintenanceWindowTimetable("30 1 * * 0", 5400, timezone="Europe/Berlin")
    encoded = encode_timetable(tt)  # raises unless the plugin registers the class
    assert encoded["__type"] == "kafka_timetables.MaintenanceWindowTimetable"
    back = MaintenanceWindowTimetable.deserialize(encoded["__var"])
    assert back.window == tt.window

    from airflow.dag_processing.dagbag import DagBag

    (tmp_path / "kafka_upgrade_prod.py").write_text(
        "# an Airflow DAG file (Airflow's safe mode parses only files naming Airflow and DAG)\n"
        "from datetime import timedelta\n"
        "from kafka_timetables import MaintenanceWindowTimetable\n"
        "from operations.upgrade import upgrade_dag\n\n"
        "dag = upgrade_dag('kafka_upgrade_prod', schedule=MaintenanceWindowTimetable('0 2 * * 6', "
        "timedelta(hours=4), timezone='Europe/Berlin'), defaults={'cluster': 'kafka_prod', "
        "'target_version': '3.7.1', 'approve_protocol_bump': True})\n")
    bag = DagBag(dag_folder=str(tmp_path))
    assert not bag.import_errors, bag.import_errors
    dag = bag.dags["kafka_upgrade_prod"]
    assert dag.timetable.window == MaintenanceWindow("0 2 * * 6", 14400, "Europe/Berlin")
    assert dag.params["cluster"] == "kafka_prod" and dag.params["approve_protocol_bump"] is True
    assert dag.params.get_param("window_policy").value == "wait"


def test_with_defaults_replaces_defaults_keeps_schema_and_refuses_unknown_names():
    from airflow.sdk import Param
    from airflow.sdk.exceptions import ParamValidationError
    from operations.operation_dag import SCHEMA_DIALECT, with_defaults

    params = {"cluster": Param("kafka_sandbox", type="string", minLength=1, description="the cluster"),
              "dry_run": Param(False, type="boolean")}
    out = with_defaults(params, {"cluster": "kafka_prod"})
    assert out["cluster"].value == "kafka_prod"
    assert out["cluster"].schema == {"$schema": SCHEMA_DIALECT, "type": "string", "minLength": 1}
    assert out["dry_run"].value is False and out["dry_run"].schema == {"$schema": SCHEMA_DIALECT, "type": "boolean"}
    with pytest.raises(ParamValidationError):  # the draft-7 schema still checks: minLength
        out["cluster"].resolve("")
    assert out["cluster"].description == "the cluster" and params["cluster"].value == "kafka_sandbox"
    with pytest.raises(ValueError, match=r"unknown params \['clustr'\]"):
        with_defaults(params, {"clustr": "kafka_prod"})


# -- the gate --------------------------------------------------------------------------------------------


class Deferred(Exception):
    pass


class FakeOperator:
    def __init__(self):
        self.log = logging.getLogger("test.window_gate")
        self.deferred = None

    def defer(self, *, trigger, method_name):
        self.deferred = (trigger, method_name)
        raise Deferred()


def context_with(window):
    return {"dag": SimpleNamespace(timetable=SimpleNamespace(window=window))}


def gate(window, at, policy="wait", dry_run=False, operator=None):
    from runtime.window_gate import window_gate

    clock = [at]
    slept = []

    def sleep(s):
        slept.append(s)
        clock[0] = clock[0] + timedelta(seconds=s)

    window_gate(operator or FakeOperator(), context_with(window), what="broker 3 (2/6)", policy=policy,
                dry_run=dry_run, label=lambda step: None, now=lambda: clock[0], sleep=sleep)
    return slept


def test_the_gate_passes_inside_the_window_and_without_one(caplog):
    from runtime.window_gate import window_gate

    assert gate(SAT_BERLIN, utc(2026, 11, 28, 2)) == []
    window_gate(FakeOperator(), {"dag": SimpleNamespace(timetable=object())}, what="x", policy="bogus",
                dry_run=False)  # no window: the policy is never consulted


def test_the_gate_fails_outside_the_window_with_policy_fail():
    from airflow.sdk.exceptions import AirflowFailException

    with pytest.raises(AirflowFailException, match=r"broker 3 \(2/6\) NOT started: outside the maintenance "
                                                   r"window .* next one opens at 2026-11-28 01:00:00 UTC"):
        gate(SAT_BERLIN, utc(2026, 11, 27, 12), policy="fail")
    with pytest.raises(AirflowFailException, match="window_policy 'later'"):
        gate(SAT_BERLIN, utc(2026, 11, 27, 12), policy="later")


def test_the_gate_defers_long_waits_until_the_opening_and_sleeps_short_ones():
    op = FakeOperator()
    with pytest.raises(Deferred):
        gate(SAT_BERLIN, utc(2026, 11, 27, 12), operator=op)
    trigger, method = op.deferred
    assert method == "execute_in_window" and trigger.moment == utc(2026, 11, 28, 1)
    slept = gate(SAT_BERLIN, utc(2026, 11, 28, 0, 59, 30))  # 30 s before the opening: no deferral
    assert len(slept) == 1 and 30 <= slept[0] < 31


def test_a_dry_run_outside_the_window_neither_waits_nor_fails(caplog):
    with caplog.at_level(logging.WARNING):
        assert gate(SAT_BERLIN, utc(2026, 11, 27, 12), policy="fail", dry_run=True) == []
    assert "DRY RUN: broker 3 (2/6) would NOT start now: outside the maintenance window" in caplog.text
