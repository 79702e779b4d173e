"""A real roll under Airflow's own scheduler (``airflow standalone`` of the UI tests), not ``dag.test()``:
``dag.test()`` runs ready tasks one by one in no fixed order and ignores ``max_active_tis_per_dagrun``, so
only a scheduler shows that the broker tasks go strictly one after another, in the plan's order, without a
single retry (the earlier sensor-based sequencing needed dozens against apache/airflow#71172)."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from ui_standalone import DAG_ID, RunningAirflow, wait_until

pytestmark = [pytest.mark.ui, pytest.mark.sandbox]


def _registrations(sandbox) -> dict[int, int]:
    with sandbox.zk() as zk:
        return {int(b): int(json.loads(zk.get(f"/brokers/ids/{b}")[0])["timestamp"])
                for b in zk.get_children("/brokers/ids")}


def _at(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def test_scheduler_rolls_brokers_one_at_a_time_without_retries(airflow_ui: RunningAirflow, sandbox) -> None:
    sandbox.wait_healthy(timeout_s=120)
    before = _registrations(sandbox)
    client = airflow_ui.client
    run_id = client.trigger(DAG_ID, {"cluster": "kafka_sandbox", "healthcheck_interval_s": 2,
                                     "lag_ok_consecutive": 2})["dag_run_id"]
    run = wait_until(f"run {run_id} to end", 900,
                     lambda: (r := client.get_run(DAG_ID, run_id))["state"] in ("success", "failed") and r,
                     poll_s=3.0)
    tis = client.task_instances(DAG_ID, run_id)
    assert run["state"] == "success", [(t["task_id"], t["map_index"], t["state"]) for t in tis]
    # a skipped instance never ran (try 0: the empty controllers roll of a ZooKeeper-mode cluster)
    assert {t["task_id"]: t["try_number"] for t in tis if t["try_number"] != 1 and t["state"] != "skipped"} == {}, \
        "no task was retried"
    brokers = sorted((t for t in tis if t["task_id"] == "restart.broker"), key=lambda t: t["map_index"])
    assert len(brokers) == len(before)
    for previous, current in zip(brokers, brokers[1:], strict=False):
        assert _at(current["start_date"]) >= _at(previous["end_date"]), (
            f"{current['rendered_map_index']} started before {previous['rendered_map_index']} ended")
    after = _registrations(sandbox)
    assert all(after[b] > before[b] for b in before), "every broker was restarted"
    order = [int(t["rendered_map_index"].split()[1]) for t in brokers]
    assert sorted(order) == sorted(before)
    sandbox.wait_healthy(timeout_s=120)
