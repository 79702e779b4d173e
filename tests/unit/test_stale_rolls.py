"""Which roll records the cleanup deletes (kafka_ops.stale_rolls), the record keys taken apart
(runtime.roll_store.parse_key) and its keep_days param (operators.roll_cleanup.keep_days_of); no servers."""

from __future__ import annotations

import re

import pytest
from kafka_ops.stale_rolls import Verdict, verdict
from operators.roll_cleanup import keep_days_of
from runtime.failures import RunRefused
from runtime.roll_store import RecordKey, key, parse_key
from runtime.settings_table import param

DAGS = ["kafka_rolling_restart", "kafka_upgrade", "kafka_upgrade__eu"]
NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z
DAY = 86400.0


def iso(at_s: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(at_s, UTC).isoformat().replace("+00:00", "Z")


@pytest.mark.parametrize(("dag_id", "run_id", "roll_id"), [
    ("kafka_rolling_restart", "manual__2026-11-26T10:00:00.123456+00:00", "restart"),
    ("kafka_upgrade", "scheduled__2026-11-21T02:00:00+00:00", "controller_binaries"),
    ("kafka_upgrade__eu", "manual__2026-11-26T10:00:00+00:00", "ibp"),  # a DAG id holding "__": the longest fits
    ("kafka_upgrade", "my run", "pin"),
])
def test_a_key_written_by_the_roll_store_is_taken_apart(dag_id, run_id, roll_id):
    k = key(dag_id, run_id, roll_id)
    assert parse_key(k, DAGS) == RecordKey(k, dag_id, run_id, roll_id)


@pytest.mark.parametrize("k", [
    "kafka_ops_roll__kafka_gone_dag__manual__2026__restart",  # no DAG of this Airflow
    "kafka_ops_rollout__kafka_upgrade__manual__x__pin",  # another prefix
    "kafka_ops_roll__kafka_upgrade__pin",  # no run id
    "something_else",
])
def test_other_keys_are_no_record_of_a_known_dag(k):
    assert parse_key(k, DAGS) is None


def test_records_of_runs_that_are_gone_go_those_of_succeeded_runs_stay_keep_days():
    assert verdict(None, NOW, 14) == Verdict(True, "its run no longer exists")
    recent = verdict({"state": "success", "end_date": iso(NOW - 2 * DAY)}, NOW, 14)
    assert recent == Verdict(False, "its run succeeded 2.0 days ago: kept 12.0 more days, while clearing it restarts "
                                    "no broker again")
    assert verdict({"state": "success", "end_date": iso(NOW - 15 * DAY)}, NOW, 14) == Verdict(
        True, "its run succeeded 15.0 days ago (kept 14 days)")
    assert verdict({"state": "success", "end_date": None}, NOW, 1) == Verdict(
        False, "its run succeeded; its end is not known, so it is kept")


@pytest.mark.parametrize("state", ["queued", "running"])
def test_records_of_live_runs_stay(state):
    said = verdict({"state": state, "end_date": None}, NOW, 1)
    assert not said.delete and said.why == f"its run is {state}"


def test_a_failed_runs_records_stay_while_it_may_be_resumed_then_go():
    recent = verdict({"state": "failed", "end_date": iso(NOW - 3 * DAY)}, NOW, 14)
    assert not recent.delete
    assert recent.why == ("its run failed 3.0 days ago: kept 11.0 more days, while clearing its failed tasks can "
                          "resume it")
    old = verdict({"state": "failed", "end_date": iso(NOW - 15 * DAY)}, NOW, 14)
    assert old.delete and old.why == "its run failed 15.0 days ago (kept 14 days)"
    assert not verdict({"state": "failed", "end_date": iso(NOW - 13.9 * DAY)}, NOW, 14).delete
    assert not verdict({"state": "failed", "end_date": None}, NOW, 1).delete, "no end known: kept"
    assert not verdict({"state": "failed", "end_date": "yesterday"}, NOW, 1).delete


@pytest.mark.parametrize(("value", "said"), [
    (0, "param keep_days: 0 is less than the minimum of 1"),
    (0.5, "param keep_days: 0.5 is less than the minimum of 1"),
    (-3, "param keep_days: -3 is less than the minimum of 1"), (None, "param keep_days: None is not a number"),
    ("14", "param keep_days: '14' is not a number"), (True, "param keep_days: True is not a number")])
def test_keep_days_below_one_or_not_a_number_is_refused(value, said):
    """Through the form schema's bounds, as check_and_lock refuses the operations' numbers."""
    with pytest.raises(RunRefused, match=re.escape(said + " (nothing was deleted)")):
        keep_days_of(value, param("keep_days").schema)


def test_keep_days_as_typed():
    schema = param("keep_days").schema
    assert keep_days_of(1, schema) == 1.0 and keep_days_of(2.5, schema) == 2.5


def test_the_cleanup_dag_is_daily_one_task_and_its_form_does_not_clamp(tmp_path):
    import shutil
    from pathlib import Path

    from airflow.dag_processing.dagbag import DagBag

    shutil.copy(Path(__file__).parents[2] / "dags" / "roll_records_cleanup.py", tmp_path)
    bag = DagBag(dag_folder=str(tmp_path))
    assert not bag.import_errors, bag.import_errors
    dag = bag.dags["kafka_ops_roll_records_cleanup"]
    assert list(dag.task_dict) == ["forget_stale_rolls"] and not dag.catchup
    assert list(dag.params) == ["dry_run", "keep_days"] and dag.params["keep_days"] == 14
    assert "minimum" not in dag.params.get_param("keep_days").schema, "a form clamps to bounds: refused in the task"
    assert dag.default_args["on_failure_callback"] and dag.default_args["on_execute_callback"]
