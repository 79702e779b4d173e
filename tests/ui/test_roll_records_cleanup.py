"""The roll-records cleanup DAG on a real Airflow (standalone, its REST API and Task SDK workers): keep_days 0 is
refused in one plain log line (that failed run then stands for a failed run that may still be resumed); records of
a run that no longer exists and of a DAG that is gone are deleted, the failed run's record and a Variable that is
no record are kept; a dry run deletes nothing."""

from __future__ import annotations

import json
from typing import Any

from test_airflow_ui import assert_one_plain_failure_line, states, unsuccessful, wait_for_run
from ui_standalone import RunningAirflow, wait_until

from demo.rest import AirflowApiError, AirflowClient

CLEANUP = "kafka_ops_roll_records_cleanup"
OTHER = "kafka_decommission"  # a DAG Airflow knows, for a record whose run does not exist


def variable_keys(client: AirflowClient) -> set[str]:
    """Every Variable key starting with ``kafka_ops_``, all pages (the session's runs keep their roll records)."""
    keys: set[str] = set()
    while True:
        page = client.request("GET", "/variables", params={"limit": 100, "offset": len(keys),
                                                           "variable_key_prefix_pattern": "kafka_ops_"})
        keys |= {r["key"] for r in page["variables"]}
        if not page["variables"] or len(keys) >= page["total_entries"]:
            return keys


def run_cleanup(client: AirflowClient, conf: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    run_id = client.trigger(CLEANUP, conf)["dag_run_id"]
    run = wait_for_run(client, run_id, CLEANUP)
    return run, states(client, run_id, CLEANUP)[("forget_stale_rolls", -1)] | {"run_id": run_id}


def test_the_cleanup_deletes_what_nothing_can_resume_and_keeps_a_failed_runs_record(airflow_ui: RunningAirflow):
    client = airflow_ui.client
    for dag_id in (CLEANUP, OTHER):
        wait_until(f"the DAG {dag_id} to be parsed", 120, lambda d=dag_id: client.get_dag(d), poll_s=2.0)
    # "@daily" is a cron trigger in Airflow 3 (no data interval): un-pausing runs nothing before the next midnight
    client.set_paused(CLEANUP, False)

    refused, ti = run_cleanup(client, {"keep_days": 0})
    assert refused["state"] == "failed" and ti["state"] == "failed"
    assert_one_plain_failure_line(client.task_log(CLEANUP, ti["run_id"], "forget_stale_rolls", ti["try_number"], -1),
                                  "param keep_days: 0 is less than the minimum of 1")

    keep = {f"kafka_ops_roll__{CLEANUP}__{refused['dag_run_id']}__restart", "kafka_ops_rollout_notes"}
    gone = {f"kafka_ops_roll__{OTHER}__manual__2020-01-01T00:00:00+00:00__reassign",
            "kafka_ops_roll__kafka_dag_deleted_long_ago__manual__2020-01-01T00:00:00+00:00__restart"}
    for k in keep | gone:
        client.request("POST", "/variables", json={"key": k, "value": json.dumps({"roll_id": "x"})})

    run, ti = run_cleanup(client, {"dry_run": True, "keep_days": 1})
    assert run["state"] == "success", unsuccessful(client, run["dag_run_id"], CLEANUP)
    assert (keep | gone) <= variable_keys(client), "a dry run deletes nothing"
    log = json.dumps(client.task_log(CLEANUP, ti["run_id"], "forget_stale_rolls", ti["try_number"], -1))
    assert "DRY RUN: would delete" in log and "its run no longer exists" in log

    run, ti = run_cleanup(client, {"keep_days": 1})
    assert run["state"] == "success", unsuccessful(client, run["dag_run_id"], CLEANUP)
    left = variable_keys(client)
    assert keep <= left and not gone & left, sorted(left)
    log = json.dumps(client.task_log(CLEANUP, ti["run_id"], "forget_stale_rolls", ti["try_number"], -1))
    assert "while clearing its failed tasks can resume it" in log, "the failed run's record is kept, and why"
    assert all(f"deleted {k}: its run no longer exists" in log for k in gone), "a key naming no known DAG has no run"

    for k in keep:
        try:
            client.request("DELETE", f"/variables/{k}")
        except AirflowApiError:
            pass
