"""CheckPlanOperator against a cluster that changed since the snapshot (``kafka_ops.plan_drift``): a partition deleted
since then needs no move and is named, not refused; a partition moved by someone else still refuses the plan, nothing
moved. The cluster and the plan are faked; the sandbox DAG test deletes and moves real topics."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import operators.reassignment_plan as reassignment_plan
import pytest
from airflow.sdk.exceptions import AirflowFailException
from kafka_ops.cluster import Broker, ClusterState, Partition
from kafka_ops.plan_files import Move, Plan, Wave

MOVES = (Move("orders", 0, (1, 2), (0, 1)), Move("gone", 0, (1, 2), (0, 1)), Move("payments", 0, (2, 1), (0, 2)))
PLAN = Plan("/run/plan", MOVES, (Wave(1, MOVES, 0),), {})


def cluster(replicas: dict[tuple[str, int], tuple[int, ...]]) -> ClusterState:
    return ClusterState(brokers=tuple(Broker(b, f"kafka-{b}", 9092) for b in (0, 1, 2)), controller_id=0,
                        partitions=tuple(Partition(t, p, leader=r[0], replicas=r, isr=r)
                                         for (t, p), r in replicas.items()))


class FakeAdmin:
    state: ClusterState

    def __init__(self, profile=None):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def cluster_state(self, configs=True):
        return FakeAdmin.state


@pytest.fixture
def check_plan(monkeypatch, tmp_path):
    monkeypatch.setattr(reassignment_plan, "KafkaAdminHook", FakeAdmin)
    monkeypatch.setattr(reassignment_plan, "Reassignments", lambda admin, profile: SimpleNamespace(ongoing=lambda: []))
    monkeypatch.setattr(reassignment_plan, "load_plan", lambda *a, **k: PLAN)
    monkeypatch.setattr(reassignment_plan, "run_directory", lambda context: tmp_path)
    monkeypatch.setattr(reassignment_plan, "publish", lambda context, task, items: items)
    monkeypatch.setattr(reassignment_plan.CheckPlanOperator, "profile", property(lambda self: SimpleNamespace()))
    monkeypatch.setattr(reassignment_plan.CheckPlanOperator, "_check_disk", lambda self, *a: None)
    return reassignment_plan.CheckPlanOperator(task_id="check_plan", settings={"cluster": "c", "dry_run": False})


def test_a_partition_deleted_since_the_snapshot_is_named_and_the_waves_go_on(check_plan, caplog, capsys):
    FakeAdmin.state = cluster({("orders", 0): (0, 1), ("payments", 0): (0, 2)})
    with caplog.at_level(logging.WARNING):
        waves = check_plan.execute({"params": {}})
    assert [w["wave"] for w in waves] == [1]
    said = capsys.readouterr().out + caplog.text
    assert "1 move not made: gone-0: the partition was deleted since the plan" in said


def test_a_partition_moved_by_someone_else_still_refuses_the_plan(check_plan):
    FakeAdmin.state = cluster({("orders", 0): (0, 1), ("payments", 0): (2, 0)})
    with pytest.raises(AirflowFailException, match=r"the plan no longer fits the cluster \(1 problems; make a new "
                                                   r"run\): payments-0: replicas are now \[2, 0\], rollback.json has "
                                                   r"\[0, 2\] \(moved since the snapshot\)"):
        check_plan.execute({"params": {}})
