"""The kafka_upgrade DAG's shape (one DAG for both modes): its tasks in order, the trigger rules that let a roll
with nothing to do in this mode (skipped) through, and its params. Parsed from dags/, no servers."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

CHAIN = ["check_and_lock", "check_upgrade", "preflight", "pin.plan", "pin.broker",
         "controller_binaries.plan", "controller_binaries.controller", "binaries.plan", "binaries.broker",
         "approve_protocol_bump", "ibp.plan", "ibp.broker", "lmf.plan", "lmf.broker", "metadata_version", "run_outcome"]


def test_the_upgrade_dag_runs_both_paths_in_one_chain(tmp_path):
    from airflow.dag_processing.dagbag import DagBag

    shutil.copy(REPO / "dags" / "kafka_upgrade.py", tmp_path)
    bag = DagBag(dag_folder=str(tmp_path))
    assert not bag.import_errors, bag.import_errors
    dag = bag.dags["kafka_upgrade"]
    t = dag.task_dict
    assert set(t) == set(CHAIN)
    for before, after in zip(CHAIN, CHAIN[1:], strict=False):
        assert after in t[before].downstream_task_ids, (before, after)
    rules = {task_id: str(getattr(task.trigger_rule, "value", task.trigger_rule)) for task_id, task in t.items()}
    after_a_maybe_empty_roll = {"controller_binaries.plan", "binaries.plan", "approve_protocol_bump", "lmf.plan",
                                "metadata_version"}
    assert {k for k, v in rules.items() if v == "none_failed"} == after_a_maybe_empty_roll, rules
    assert rules["run_outcome"] == "all_done" and t["run_outcome"].is_teardown
    assert t["approve_protocol_bump"].ignore_downstream_trigger_rules, "Reject skips every task after it"
    assert t["pin.plan"].modes == {"zookeeper"} and t["ibp.plan"].modes == {"zookeeper"}
    assert t["lmf.plan"].modes == {"zookeeper"} and t["binaries.plan"].modes == {"zookeeper", "migrating", "kraft"}
    assert t["controller_binaries.plan"].modes == {"migrating", "kraft"}
    assert t["pin.plan"].skip_reason == "KRaft: metadata.version replaces inter.broker.protocol.version"
    assert t["controller_binaries.plan"].settings["roles"] == "all"
    assert t["controller_binaries.plan"].settings["controllers"] == []
    ctrl = t["controller_binaries.controller"]
    assert ctrl.partial_kwargs["max_active_tis_per_dagrun"] == 2 and ctrl.partial_kwargs["before_start"] is not None
    assert t["run_outcome"].roll_ids == ["pin", "controller_binaries", "binaries", "ibp", "lmf"]
    assert t["run_outcome"].reporting_task_ids == ["check_upgrade", "metadata_version"]
    assert dag.params["phases"] == ["pin", "binaries", "ibp", "lmf", "metadata_version"]
    assert dag.params.get_param("phases").schema["items"]["enum"][-1] == "metadata_version"
    from airflow.sdk.definitions.param import ParamValidationError

    with pytest.raises(ParamValidationError, match="should be non-empty"):
        dag.params.get_param("phases").resolve([])  # no phase to run is a mistake, not "every phase"
    assert dag.params["metadata_version"] is None
    assert dag.params["release_features"] is True
    assert t["metadata_version"].settings["release_features"].name == "release_features", "the param, as typed"
    assert t["check_upgrade"].settings["release_features"].name == "release_features"
    assert "roles" not in dag.params, "the upgrade always rolls every node"


def test_every_form_asks_cluster_and_dry_run_first(tmp_path):
    """The trigger form lists params in dict order: the choice between a dry run and a real one comes second,
    right after the cluster, in every operation (the upgrade's target release third)."""
    from airflow.dag_processing.dagbag import DagBag

    for dag_file in (REPO / "dags").glob("kafka_*.py"):
        shutil.copy(dag_file, tmp_path)
    bag = DagBag(dag_folder=str(tmp_path))
    assert not bag.import_errors, bag.import_errors
    assert set(bag.dags) >= {"kafka_rolling_restart", "kafka_scale_out", "kafka_decommission", "kafka_upgrade"}
    for dag_id, dag in bag.dags.items():
        assert list(dag.params)[:2] == ["cluster", "dry_run"], (dag_id, list(dag.params))
    assert list(bag.dags["kafka_upgrade"].params)[2] == "target_version"
    assert "lock_wait" in bag.dags["kafka_upgrade"].params and "metadata_version" in bag.dags["kafka_upgrade"].params
