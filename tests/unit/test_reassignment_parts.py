"""Pure parts of the reassignment operations' plugins (no servers): the snapshot the planner reads, the
planner's command line, the decommission's replica reordering, the roll plan's batch items, the run
directory, and the graphs the scale-out and decommission DAGs build."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from kafka_ops.cluster import Broker, ClusterState, Partition
from operators.cluster_snapshot import partition_sizes, snapshot_broker_ids, write_snapshot
from operators.leadership import drained_last
from operators.reassignment_plan import SPARK_DIR, planner_args
from operators.roll_plan import batch_items
from runtime.run_dir import data_root, run_directory

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

STATE = ClusterState(
    brokers=(Broker(1, "h1", 9092, "a"), Broker(0, "h0", 9092, "b")),
    partitions=(Partition("t", 1, 0, (0, 1), (0, 1)), Partition("t", 0, 1, (1, 0), (1, 0))),
    controller_id=0,
)


def test_partition_sizes_take_the_largest_replica_and_skip_future_and_failed_dirs() -> None:
    rows = [
        {"broker": 0, "topic": "t", "partition": 0, "size_bytes": 90, "is_future": False},
        {"broker": 1, "topic": "t", "partition": 0, "size_bytes": 100, "is_future": False},
        {"broker": 1, "topic": "t", "partition": 1, "size_bytes": 5000, "is_future": True},
        {"broker": 2, "log_dir": "/d", "error_code": 57},
    ]
    assert partition_sizes(rows) == {("t", 0): 100}


def test_write_snapshot_writes_the_planners_format(tmp_path: Path) -> None:
    counts = write_snapshot(tmp_path / "snap", STATE, {("t", 0): 100})
    assert counts == {"brokers": 2, "partitions": 2, "bytes": 100}
    brokers = json.loads((tmp_path / "snap" / "brokers.json").read_text())
    assert brokers == [{"id": 0, "rack": "b", "host": "h0", "port": 9092},
                       {"id": 1, "rack": "a", "host": "h1", "port": 9092}]
    lines = [json.loads(x) for x in (tmp_path / "snap" / "partitions.jsonl").read_text().splitlines()]
    assert lines == [{"topic": "t", "partition": 0, "replicas": [1, 0], "size_bytes": 100},
                     {"topic": "t", "partition": 1, "replicas": [0, 1], "size_bytes": 0}]


def test_a_fenced_broker_a_decommission_removes_is_listed_for_the_planner(tmp_path: Path) -> None:
    down = Broker(4, "h4", 9092, "a")
    counts = write_snapshot(tmp_path, STATE, {}, not_live=[down, STATE.brokers[0]])
    assert counts["brokers"] == 3, "a live broker given again is not listed twice"
    assert [b["id"] for b in json.loads((tmp_path / "brokers.json").read_text())] == [0, 1, 4]
    from planner.snapshot import load_snapshot

    assert list(load_snapshot(str(tmp_path)).broker_ids) == [0, 1, 4]


def test_snapshot_broker_ids_read_back_what_was_written(tmp_path: Path) -> None:
    write_snapshot(tmp_path, STATE, {}, not_live=[Broker(7, "h7", 0, "a")])
    assert snapshot_broker_ids(tmp_path) == {0, 1, 7}


def test_the_snapshot_is_what_the_planner_reads(tmp_path: Path) -> None:
    from planner.snapshot import load_snapshot

    write_snapshot(tmp_path, STATE, {("t", 0): 100, ("t", 1): 7})
    snap = load_snapshot(str(tmp_path))
    assert list(snap.broker_ids) == [0, 1] and sorted(snap.sizes.tolist()) == [7, 100]


def test_planner_args_pass_only_the_options_given(tmp_path: Path) -> None:
    args = planner_args(tmp_path, "decommission", [2, 5], {"wave_bytes": 1000, "max_bytes": None})
    assert args == ["--snapshot", str(tmp_path / "snapshot"), "--mode", "decommission", "--output-dir",
                    str(tmp_path / "plan"), "--engine", "spark", "--brokers", "2,5", "--wave-bytes", "1000"]
    assert (SPARK_DIR / "reassignment_plan.py").is_file()
    drain = planner_args(tmp_path, "decommission", [2], {"drain_only": True, "wave_bytes": None})
    assert drain[-1] == "--drain-only" and "--wave-bytes" not in drain
    assert "--drain-only" not in planner_args(tmp_path, "decommission", [2], {"drain_only": False})


def test_only_the_decommission_asks_for_drain_only() -> None:
    from operations.decommission import decommission_dag
    from operations.scale_out import scale_out_dag

    decommission = decommission_dag()
    assert decommission.params["drain_only"] is False
    assert decommission.get_task("reassign.plan").settings["drain_only"].name == "drain_only"
    scale_out = scale_out_dag()
    assert "drain_only" not in scale_out.params and "drain_only" not in scale_out.get_task("reassign.plan").settings


def test_the_planner_driver_runs_with_c1_and_serial_gc_unless_told_otherwise() -> None:
    """Both DAGs submit the planner with ``DRIVER_JAVA_OPTIONS`` as ``spark.driver.extraJavaOptions``; None leaves
    the installation's own; the planner bench measures the same options by default."""
    import importlib.util

    from operations.decommission import decommission_dag
    from operations.scale_out import scale_out_dag
    from operators.reassignment_plan import DRIVER_JAVA_OPTIONS, PlannerSubmitOperator

    assert DRIVER_JAVA_OPTIONS == "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    for dag in (decommission_dag(), scale_out_dag()):
        conf = dag.get_task("reassign.plan").conf
        assert conf["spark.driver.extraJavaOptions"] == DRIVER_JAVA_OPTIONS and conf["spark.ui.enabled"] == "false"
    own = PlannerSubmitOperator(task_id="plan", mode="scale-out", settings={}, driver_java_options=None)
    assert "spark.driver.extraJavaOptions" not in own.conf
    spec = importlib.util.spec_from_file_location("planner_bench", Path(__file__).parents[2] / "bench" / "planner.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.DRIVER_JAVA_OPTIONS == DRIVER_JAVA_OPTIONS


def test_drained_last_keeps_the_order_of_the_others() -> None:
    assert drained_last((2, 0, 1), {2}) == (0, 1, 2)
    assert drained_last((0, 1), {2}) == (0, 1)
    assert drained_last((3, 2, 1), {3, 1}) == (2, 3, 1)


def test_batch_items_group_steps_by_batch_and_label_them() -> None:
    steps = [{"id": 0, "batch": 1}, {"id": 3, "batch": 1}, {"id": 2, "batch": 2}]
    assert batch_items(steps) == [
        {"batch": 1, "batches": 2, "label": "brokers 0, 3", "grid_label": "brokers 0, 3 (1/2)",
         "brokers": [{"id": 0, "batch": 1}, {"id": 3, "batch": 1}]},
        {"batch": 2, "batches": 2, "label": "broker 2", "grid_label": "broker 2 (2/2)",
         "brokers": [{"id": 2, "batch": 2}]},
    ]
    assert [i["grid_label"] for i in batch_items(steps, dry_run=True)] == [
        "brokers 0, 3 (1/2) · dry run", "broker 2 (2/2) · dry run"]
    # steps frozen before batches existed: one broker per batch
    assert [i["label"] for i in batch_items([{"id": 2}, {"id": 0}])] == ["broker 2", "broker 0"]


def test_the_planner_does_not_plan_again_when_the_snapshot_task_kept_an_earlier_plan(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The marker the snapshot task writes when it keeps an earlier try's plan means no spark-submit; without it, the
    planner submits with the run's own arguments."""
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
    from operators.cluster_snapshot import KEPT_PLAN_FILE
    from operators.reassignment_plan import PlannerSubmitOperator

    monkeypatch.setenv("KAFKA_OPS_DATA_DIR", str(tmp_path))
    submitted = []
    monkeypatch.setattr(SparkSubmitOperator, "execute", lambda self, context: submitted.append(self.application_args))
    context = {"dag": SimpleNamespace(dag_id="kafka_scale_out"), "run_id": "manual__1", "params": {}}
    op = PlannerSubmitOperator(task_id="plan", mode="scale-out", settings={"brokers": [3]})
    (run_directory(context) / KEPT_PLAN_FILE).write_text("{}\n")
    op.execute(context)
    assert submitted == []
    (run_directory(context) / KEPT_PLAN_FILE).unlink()
    op.execute(context)
    assert len(submitted) == 1 and submitted[0][submitted[0].index("--brokers") + 1] == "3"


def test_run_directory_is_named_by_dag_and_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_OPS_DATA_DIR", str(tmp_path))
    assert data_root() == tmp_path
    context = {"dag": SimpleNamespace(dag_id="kafka_scale_out"), "run_id": "manual__2026-11-23T02:11:54+00:00"}
    path = run_directory(context)
    assert path == tmp_path / "kafka_scale_out" / "manual__2026-11-23T02_11_54+00_00" and path.is_dir()
    monkeypatch.delenv("KAFKA_OPS_DATA_DIR")
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "home"))
    assert data_root() == tmp_path / "home" / "kafka-ops-data"


@pytest.mark.parametrize("dag_file, expected", [
    ("kafka_scale_out", ["validate", "preflight", "start_new_brokers", "health_gate", "reassign.snapshot",
                         "reassign.plan", "reassign.check_plan", "reassign.wave", "reassign.remove_throttles",
                         "reassign.preferred_leaders", "run_outcome"]),
    ("kafka_decommission", ["validate", "preflight", "health_gate", "lead_away", "reassign.snapshot", "reassign.plan",
                            "reassign.check_plan", "reassign.wave", "reassign.remove_throttles",
                            "reassign.preferred_leaders", "stop_brokers", "run_outcome"]),
])
def test_reassignment_dags_chain_their_steps(dag_file: str, expected: list[str]) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location(dag_file, Path(__file__).parents[2] / "dags" / f"{dag_file}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    dag = module.dag
    for before, after in zip(expected, expected[1:], strict=False):
        assert after in dag.task_dict[before].downstream_task_ids, f"{before} -> {after}"
    # a failed wave must fail what follows although remove_throttles runs whatever happened
    assert dag.task_dict["reassign.remove_throttles"].trigger_rule == "all_done"
    assert "reassign.wave" in dag.task_dict["reassign.preferred_leaders"].upstream_task_ids
    # a plan without moves maps the wave over nothing, which Airflow marks skipped: the election (and so every
    # step after the group, a decommission's stop) runs all the same; a failed or upstream-failed wave still stops it
    assert dag.task_dict["reassign.preferred_leaders"].trigger_rule == "none_failed"
    after_group = dag.task_dict["reassign.preferred_leaders"].downstream_task_ids - {"run_outcome"}
    assert all(dag.task_dict[t].trigger_rule == "all_success" for t in after_group), after_group
    assert dag.task_dict["run_outcome"].is_teardown and dag.task_dict["check_and_lock"].is_setup
    # the broker step says in the run's note what it stopped or started (kafka_ops.done_lines)
    assert dag.task_dict["run_outcome"].reporting_task_ids == [
        "start_new_brokers" if dag_file == "kafka_scale_out" else "stop_brokers"]


# --- runtime.reassignments: the admin API or ZooKeeper's /admin/reassign_partitions ----------------


class IncompatibleBrokerVersion(Exception):
    """Named like kafka-python's: the brokers lack the API."""


class FakeAdmin:
    def __init__(self, supported: bool = True) -> None:
        self.supported, self.started = supported, []

    def list_partition_reassignments(self):
        if not self.supported:
            raise IncompatibleBrokerVersion("ListPartitionReassignments")
        return [{"topic": "t", "partition": 1, "replicas": [0, 1, 2], "adding_replicas": [2],
                 "removing_replicas": [0]}]

    def alter_partition_reassignments(self, entries):
        if not self.supported:
            raise IncompatibleBrokerVersion("AlterPartitionReassignments")
        self.started.extend(entries)
        return {f"{e['topic']}-{e['partition']}": None for e in entries}


class FakeZooKeeper:
    node: dict | None = None

    def __init__(self, profile) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass

    def reassignment_in_progress(self):
        return FakeZooKeeper.node

    def start_reassignment(self, entries) -> None:
        if FakeZooKeeper.node is not None:
            raise RuntimeError("/admin/reassign_partitions exists: another reassignment is in progress")
        FakeZooKeeper.node = {"version": 1, "partitions": entries}


def _profile(**extra):
    from kafka_ops.profile import ClusterProfile

    return ClusterProfile.from_connection_fields("c", "b:9092", {"zookeeper": "zk:2181/kafka", **extra})


@pytest.fixture
def fake_zk(monkeypatch: pytest.MonkeyPatch):
    import runtime.reassignments as module

    FakeZooKeeper.node = None
    monkeypatch.setattr(module, "ZooKeeperHook", FakeZooKeeper)
    return FakeZooKeeper


def test_auto_uses_the_admin_api_and_also_lists_the_zookeeper_node(fake_zk) -> None:
    from runtime.reassignments import Reassignments

    admin = FakeAdmin()
    moves = Reassignments(admin, _profile())
    fake_zk.node = {"version": 1, "partitions": [{"topic": "u", "partition": 0, "replicas": [1, 2]}]}
    assert [(o["topic"], o["partition"]) for o in moves.ongoing()] == [("t", 1), ("u", 0)]
    assert moves.start([{"topic": "t", "partition": 0, "replicas": [2, 1]}]) == {"t-0": None}
    assert admin.started and moves.via == "auto"
    assert moves.cancel([("t", 0)]) == (["t-0"], "cancelled")


def test_auto_falls_back_to_zookeeper_before_kafka_2_4(fake_zk) -> None:
    from runtime.reassignments import Reassignments

    moves = Reassignments(FakeAdmin(supported=False), _profile())
    assert moves.ongoing() == [] and moves.via == "zookeeper"
    assert moves.start([{"topic": "t", "partition": 0, "replicas": [2, 1]}]) == {"t-0": None}
    assert fake_zk.node == {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [2, 1]}]}
    assert [o["partition"] for o in moves.ongoing()] == [0]
    with pytest.raises(RuntimeError, match="another reassignment is in progress"):
        moves.start([{"topic": "t", "partition": 1, "replicas": [0]}])
    assert moves.cancel([("t", 0)]) == ([], "not cancelled: a reassignment started through ZooKeeper runs to its end")


def test_zookeeper_path_needs_a_zookeeper_and_admin_path_never_falls_back(fake_zk) -> None:
    from kafka_ops.profile import ClusterProfile
    from runtime.reassignments import Reassignments

    with pytest.raises(ValueError, match="needs 'zookeeper'"):
        no_zk = ClusterProfile.from_connection_fields("c", "b:9092", {"reassignment_via": "zookeeper"})
        Reassignments(FakeAdmin(), no_zk)
    with pytest.raises(IncompatibleBrokerVersion):
        Reassignments(FakeAdmin(supported=False), _profile(reassignment_via="admin")).start(
            [{"topic": "t", "partition": 0, "replicas": [1]}])
    with pytest.raises(ValueError, match="reassignment_via"):
        _profile(reassignment_via="magic")


def test_the_snapshot_says_when_its_sizes_were_read(tmp_path) -> None:
    from operators.cluster_snapshot import SIZES_READ_AT, sizes_read_at

    assert sizes_read_at(tmp_path) is None, "an older snapshot without the file: not judged"
    (tmp_path / SIZES_READ_AT).write_text('{"epoch_s": 1796468722.5}')
    assert sizes_read_at(tmp_path) == 1796468722.5
    (tmp_path / SIZES_READ_AT).write_text("{")
    assert sizes_read_at(tmp_path) is None


@pytest.mark.parametrize("dry_run, where, ongoing, kept", [
    (False, "target", [], True),  # a finished plan: kept, nothing planned or moved again
    (False, "current", [("orders", 1)], True),  # moves left and one running: the run goes on with its plan
    (False, "elsewhere", [], False),  # someone moved orders-1 under the plan: planned again
    (True, "current", [], False),  # a dry run always plans afresh
])
def test_a_later_try_keeps_the_earlier_plan_while_it_fits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          dry_run, where, ongoing, kept) -> None:
    import operators.cluster_snapshot as module
    from test_plan_files import CURRENT, TARGET, snapshot_lines, write_partitions, write_plan

    run_dir = tmp_path / "run"
    write_plan(run_dir / "plan")
    write_partitions(run_dir / "snapshot", snapshot_lines())
    (run_dir / module.KEPT_PLAN_FILE).write_text("{}\n")  # a stale marker of an earlier try: never trusted
    replicas = {"target": TARGET, "current": CURRENT,
                "elsewhere": [*TARGET[:1], {**TARGET[1], "replicas": [5, 3, 1]}, *TARGET[2:]]}[where]
    state = SimpleNamespace(partitions=[SimpleNamespace(topic=p["topic"], partition=p["partition"],
                                                        replicas=list(p["replicas"])) for p in replicas])
    asked = []

    class FakeReassignments:
        def __init__(self, admin, profile):
            asked.append(admin)

        def ongoing(self):
            return [{"topic": t, "partition": p} for t, p in ongoing]

    monkeypatch.setattr(module, "Reassignments", FakeReassignments)
    op = module.SnapshotOperator(task_id="snapshot", settings={})
    op.cfg, op.dry_run, op.interval_s, op.timeout_s, op._profile = {}, dry_run, 0.01, 1.0, object()
    assert op._keeps_earlier_plan("admin", run_dir, state) is kept
    assert (run_dir / module.KEPT_PLAN_FILE).is_file() is kept
    assert asked == ([] if dry_run else ["admin"])
    if kept:
        assert json.loads((run_dir / module.KEPT_PLAN_FILE).read_text())["moves"] == 3


def test_a_later_try_plans_again_when_the_earlier_plan_cannot_be_read(tmp_path: Path) -> None:
    import operators.cluster_snapshot as module
    from test_plan_files import write_plan

    run_dir = tmp_path / "run"
    write_plan(run_dir / "plan", skip=("waves.json",))
    op = module.SnapshotOperator(task_id="snapshot", settings={})
    op.cfg, op.dry_run, op._profile = {}, False, object()
    assert op._keeps_earlier_plan("admin", run_dir, SimpleNamespace(partitions=[])) is False
    assert not (run_dir / module.KEPT_PLAN_FILE).exists()
