"""The kafka_config_change DAG's shape: its tasks in order, the roll's rule and settings, and its params' schemas
(what the trigger form accepts). Parsed from dags/, no servers."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHAIN = ["check_and_lock", "plan_config", "apply_config", "restart.plan", "restart.broker", "run_outcome"]


@pytest.fixture(scope="module")
def dag(tmp_path_factory):
    from airflow.dag_processing.dagbag import DagBag

    folder = tmp_path_factory.mktemp("dags")
    shutil.copy(REPO / "dags" / "kafka_config_change.py", folder)
    bag = DagBag(dag_folder=str(folder))
    assert not bag.import_errors, bag.import_errors
    return bag.dags["kafka_config_change"]


def test_the_config_change_plans_applies_then_rolls(dag):
    from kafka_ops.config_change import needs_restart
    from runtime.config_steps import facts

    t = dag.task_dict
    assert set(t) == set(CHAIN)
    for before, after in zip(CHAIN, CHAIN[1:], strict=False):
        assert after in t[before].downstream_task_ids, (before, after)
    roll = t["restart.broker"].partial_kwargs
    assert roll["needs_action"] is needs_restart and roll["facts"] is facts and roll["before_start"] is None
    assert t["restart.plan"].settings["brokers"] == [], "every broker planned; the rule leaves the others alone"
    assert t["run_outcome"].roll_ids == ["restart"]
    assert t["run_outcome"].reporting_task_ids == ["apply_config"], "the note says what was set and written"
    assert t["check_and_lock"].operation == "config change"


def test_the_form_asks_changes_and_scope_after_cluster_and_dry_run(dag):
    assert list(dag.params)[:4] == ["cluster", "dry_run", "changes", "scope"]
    assert "brokers" not in dag.params and "keep_order" not in dag.params, "the scope decides the brokers"
    assert dag.params["changes"] == {} and dag.params["scope"] == "cluster"


@pytest.mark.parametrize("name, value, ok", [
    ("scope", "cluster", True),
    ("scope", [1, 2], True),
    ("scope", "brokers", False),
    ("scope", [], False),
    ("scope", [1, 1], False),
    ("scope", [-1], False),
    ("changes", {"num.io.threads": 16, "auto.create.topics.enable": False, "log.dirs": "/a,/b", "gone": None}, True),
    ("changes", {"log.dirs": ["/a", "/b"]}, False),
    ("changes", "num.io.threads=16", False),
])
def test_param_schemas(dag, name, value, ok):
    from airflow.exceptions import ParamValidationError

    param = dag.params.get_param(name)
    if ok:
        assert param.resolve(value) == value
    else:
        with pytest.raises(ParamValidationError):
            param.resolve(value)
