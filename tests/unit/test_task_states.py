"""The Task SDK's task states of this run, keyed by instance (runtime.task_states)."""

from __future__ import annotations

from types import SimpleNamespace

from airflow.sdk.api.datamodels._generated import TaskInstanceState
from runtime.task_states import in_this_run, instance_key


def test_instance_keys_follow_the_task_sdk() -> None:
    assert instance_key("restart.broker", 1) == "restart.broker_1"
    assert instance_key("restart.broker", 0) == "restart.broker_0"
    assert instance_key("run_outcome") == "run_outcome"
    assert instance_key("run_outcome", None) == "run_outcome"


def test_states_of_this_run_only_as_plain_values() -> None:
    asked = []

    def get_task_states(dag_id: str, task_ids: list[str], run_ids: list[str]) -> dict:
        asked.append((dag_id, task_ids, run_ids))
        return {"r1": {"restart.broker_0": TaskInstanceState.SUCCESS, "restart.broker_1": "running",
                       "run_outcome": None},
                "r0": {"restart.broker_0": TaskInstanceState.FAILED}}

    ti = SimpleNamespace(dag_id="d", run_id="r1", get_task_states=get_task_states)
    assert in_this_run(ti, ("restart.broker", "run_outcome")) == {
        "restart.broker_0": "success", "restart.broker_1": "running", "run_outcome": None}
    assert asked == [("d", ["restart.broker", "run_outcome"], ["r1"])]
    ti_elsewhere = SimpleNamespace(dag_id="d", run_id="r9", get_task_states=get_task_states)
    assert in_this_run(ti_elsewhere, ["restart.broker"]) == {}
