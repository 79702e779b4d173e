"""The kafka_zk_to_kraft and kafka_zk_to_kraft_revert DAGs' shapes: their tasks in order, each roll's rule, facts
and edit, the approvals and the params. Parsed from dags/, no servers."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MIGRATE = ["check_and_lock", "check_migration", "provision_controllers", "migrate_brokers.plan",
           "migrate_brokers.broker", "wait_migrated", "approve_kraft_brokers", "kraft_brokers.plan",
           "kraft_brokers.broker", "wait_kraft_brokers", "approve_finalize", "finalize.plan", "finalize.controller",
           "wait_finalized", "run_outcome"]
REVERT = ["check_and_lock", "check_migration", "zookeeper_brokers.plan", "zookeeper_brokers.broker",
          "deprovision_controllers", "drop_flag.plan", "drop_flag.broker", "wait_zookeeper", "run_outcome"]


@pytest.fixture(scope="module")
def dags(tmp_path_factory):
    from airflow.dag_processing.dagbag import DagBag

    folder = tmp_path_factory.mktemp("dags")
    for name in ("kafka_zk_to_kraft.py", "kafka_zk_to_kraft_revert.py"):
        shutil.copy(REPO / "dags" / name, folder)
    bag = DagBag(dag_folder=str(folder))
    assert not bag.import_errors, bag.import_errors
    return bag.dags


@pytest.mark.parametrize(("dag_id", "chain"), [("kafka_zk_to_kraft", MIGRATE), ("kafka_zk_to_kraft_revert", REVERT)])
def test_tasks_run_in_the_phases_order(dags, dag_id, chain):
    t = dags[dag_id].task_dict
    assert set(t) == set(chain)
    for before, after in zip(chain, chain[1:], strict=False):
        assert after in t[before].downstream_task_ids, (dag_id, before, after)


def test_each_roll_has_its_rule_facts_and_edit(dags):
    from kafka_ops import migration
    from runtime import migration_steps

    t = dags["kafka_zk_to_kraft"].task_dict
    expected = {"migrate_brokers.broker": migration.needs_flag, "kraft_brokers.broker": migration.needs_kraft,
                "finalize.controller": migration.needs_finalize}
    for task_id, rule in expected.items():
        roll = t[task_id].partial_kwargs
        assert roll["needs_action"] is rule
        assert roll["before_start"] is not None
    assert t["migrate_brokers.broker"].partial_kwargs["facts"] is migration_steps.broker_facts
    assert t["finalize.controller"].partial_kwargs["facts"] is migration_steps.controller_facts
    assert t["migrate_brokers.plan"].settings["brokers"] == [], "every broker planned; the rule decides"
    assert t["run_outcome"].roll_ids == ["migrate_brokers", "kraft_brokers", "finalize"]
    assert t["run_outcome"].reporting_task_ids == ["provision_controllers"], "the note names the controllers started"
    r = dags["kafka_zk_to_kraft_revert"].task_dict
    assert r["run_outcome"].reporting_task_ids == ["deprovision_controllers"]
    assert r["zookeeper_brokers.broker"].partial_kwargs["needs_action"] is migration.needs_zookeeper
    assert r["drop_flag.broker"].partial_kwargs["needs_action"] is migration.needs_flag_removed
    assert r["check_migration"].direction == "revert"


def test_the_point_of_no_return_is_approved_and_says_so(dags):
    t = dags["kafka_zk_to_kraft"].task_dict
    assert t["approve_finalize"].approves == "finalize"
    assert "POINT OF NO RETURN" in t["approve_finalize"].body
    assert t["approve_kraft_brokers"].approves == "kraft_brokers"


def test_params_approve_in_advance_and_have_no_broker_list(dags):
    p = dags["kafka_zk_to_kraft"].params
    assert p["approve_finalize"] is False and p["approve_kraft_brokers"] is False
    assert "brokers" not in p and "keep_order" not in p and p["dry_run"] is False
    assert "approve_finalize" not in dags["kafka_zk_to_kraft_revert"].params


def test_a_cluster_without_zookeeper_is_told_it_has_nothing_to_migrate():
    """A connection without ``zookeeper`` (a KRaft cluster's) fails the migration's first read of ZooKeeper with
    what it means, before any client is opened."""
    from kafka_ops.profile import ClusterProfile
    from runtime.migration_steps import znodes

    with pytest.raises(ValueError, match=r"connection 'c' names no ZooKeeper .*a KRaft cluster \(no ZooKeeper\) "
                                         r"has nothing to migrate"):
        znodes(ClusterProfile(cluster="c", bootstrap_servers="127.0.0.1:1"))
