"""Plan files: the shared JSON Schema, load_plan's validation and cross-checks, staleness checks."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from kafka_ops import plan_files
from kafka_ops.cluster import Broker, ClusterState, Partition
from kafka_ops.plan_files import (
    DEFAULT_SCHEMA_PATH,
    SCHEMA_ENV,
    Move,
    Plan,
    PlanFileError,
    Wave,
    check_plan_current,
    format_bytes,
    load_plan,
    reassignment_in_progress,
    resolve_schema_path,
    validate_document,
)
from planner import output as planner_output
from planner.balance import PlanOptions
from planner.pipeline import make_plan
from planner.snapshot import load_snapshot
from planner.synthetic import generate_cluster, write_snapshot
from reassignment_plan import run

# -- a hand-made plan ---------------------------------------------------------------------------------
# orders-0 [1, 2, 3] -> [1, 2, 4]   (adds 4, removes 3; 2 GB)
# orders-1 [2, 3, 1] -> [4, 3, 1]   (adds 4, removes 2; 300 MB)
# payments-0 [3, 1] -> [1, 3]       (reorder only; 50 MB)
# wave 1: orders-0, payments-0; wave 2: orders-1

TARGET = [
    {"topic": "orders", "partition": 0, "replicas": [1, 2, 4]},
    {"topic": "orders", "partition": 1, "replicas": [4, 3, 1]},
    {"topic": "payments", "partition": 0, "replicas": [1, 3]},
]
CURRENT = [
    {"topic": "orders", "partition": 0, "replicas": [1, 2, 3]},
    {"topic": "orders", "partition": 1, "replicas": [2, 3, 1]},
    {"topic": "payments", "partition": 0, "replicas": [3, 1]},
]
SIZES = {("orders", 0): 2_000_000_000, ("orders", 1): 300_000_000, ("payments", 0): 50_000_000}


def doc(entries):
    return {"version": 1, "partitions": copy.deepcopy(list(entries))}


def summary(partitions_changed=3, waves=2, **extra):
    """A minimal summary.json with every key summarize() always writes."""
    skews = {"bytes": 1.0, "replicas": 1.0, "leaders": 1.0}
    out = {
        "mode": "scale-out",
        "brokers_requested": [4],
        "options": {},
        "partitions": 10,
        "replica_moves": 2,
        "partitions_changed": partitions_changed,
        "leader_changes": 2,
        "bytes_moved": 2_300_000_000,
        "lower_bound_bytes": 2_000_000_000,
        "moved_over_lower_bound": 1.15,
        "total_bytes": 9_000_000_000,
        "mean_bytes_after": 2.25e9,
        "skew_before": skews,
        "skew_after": skews,
        "byte_skew": 1.0,
        "replica_skew": 1.0,
        "leader_skew": 1.0,
        "weighting": "bytes",
        "rack_bound": None,
        "rack_violations_before": 0,
        "rack_violations_after": 0,
        "waves": waves,
        "wave_bytes": [2_000_000_000, 300_000_000],
        "notes": [],
        "brokers": {
            "1": {
                "rack": None,
                "kept": True,
                "bytes_before": 1,
                "bytes_after": 1,
                "replicas_before": 1,
                "replicas_after": 1,
                "leaders_before": 1,
                "leaders_after": 1,
            }
        },
        "engine": "local",
    }
    out.update(extra)
    return out


def write_plan(directory: Path, reassignment=None, rollback=None, waves=None, summary_doc=None, skip=()):
    """Write the four plan files (defaults: the hand-made plan); files in ``skip`` are left out."""
    directory.mkdir(parents=True, exist_ok=True)
    files = {
        "reassignment.json": doc(TARGET) if reassignment is None else reassignment,
        "rollback.json": doc(CURRENT) if rollback is None else rollback,
        "waves.json": [doc([TARGET[0], TARGET[2]]), doc([TARGET[1]])] if waves is None else waves,
        "summary.json": summary() if summary_doc is None else summary_doc,
    }
    for name, content in files.items():
        if name not in skip:
            text = content if isinstance(content, str) else json.dumps(content)
            (directory / name).write_text(text)
    return directory


def write_partitions(directory: Path, lines):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "partitions.jsonl").write_text(
        "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n"
    )
    return directory


def snapshot_lines(extra=()):
    lines = [
        {"topic": c["topic"], "partition": c["partition"], "replicas": c["replicas"], "size_bytes": SIZES[key]}
        for c in CURRENT
        for key in [(c["topic"], c["partition"])]
    ]
    return [*lines, *extra]


@pytest.fixture
def plan_dir(tmp_path):
    return write_plan(tmp_path / "out")


@pytest.fixture
def snap_dir(tmp_path):
    return write_partitions(tmp_path / "snap", snapshot_lines())


def error_of(directory, snapshot=None) -> str:
    with pytest.raises(PlanFileError) as info:
        load_plan(directory, snapshot)
    return str(info.value)


# -- formatting and the dataclasses --------------------------------------------------------------------


def test_format_bytes_uses_gb_from_1e9_and_mb_below():
    assert format_bytes(1_234_000_000) == "1.2 GB"
    assert format_bytes(1e9) == "1.0 GB"
    assert format_bytes(999_999_999) == "1000.0 MB"
    assert format_bytes(350_000_000) == "350.0 MB"
    assert format_bytes(0) == "0.0 MB"


def test_move_adding_removing_and_name_keep_order():
    m = Move("orders", 3, [5, 1, 4], [1, 2, 3])
    assert m.replicas == (5, 1, 4) and m.current == (1, 2, 3)
    assert m.adding == (5, 4)
    assert m.removing == (2, 3)
    assert m.name == "orders-3" and m.key == ("orders", 3)
    assert m.to_entry() == {"topic": "orders", "partition": 3, "replicas": [5, 1, 4]}
    reorder = Move("t", 0, (2, 1), (1, 2))
    assert reorder.adding == () and reorder.removing == ()


def test_wave_label():
    moves = tuple(Move("t", i, (1, 2), (1, 3)) for i in range(34))
    assert Wave(2, moves, 1_234_000_000).label(5) == "wave 2/5 (1.2 GB, 34 moves)"
    assert Wave(1, moves[:1], 400_000_000).label(1) == "wave 1/1 (400.0 MB, 1 move)"
    assert Wave(1, moves[:1], 0).entries() == [{"topic": "t", "partition": 0, "replicas": [1, 2]}]


# -- load_plan: the happy path -----------------------------------------------------------------------------


def test_load_plan_builds_moves_and_waves_with_sizes(plan_dir, snap_dir):
    plan = load_plan(plan_dir, snap_dir)
    assert isinstance(plan, Plan) and plan.directory == str(plan_dir)
    assert [m.name for m in plan.moves] == ["orders-0", "orders-1", "payments-0"]
    o0, o1, p0 = plan.moves
    assert (o0.replicas, o0.current, o0.adding, o0.removing) == ((1, 2, 4), (1, 2, 3), (4,), (3,))
    assert (o1.adding, o1.removing) == ((4,), (2,))
    assert (p0.adding, p0.removing) == ((), ())
    assert o0.size_bytes == 2_000_000_000 and p0.size_bytes == 50_000_000
    assert [w.index for w in plan.waves] == [1, 2]
    assert plan.waves[0].moves == (o0, p0) and plan.waves[1].moves == (o1,)
    # bytes = size x adding replicas: the reorder copies nothing
    assert [w.bytes for w in plan.waves] == [2_000_000_000, 300_000_000]
    assert plan.bytes == 2_300_000_000
    assert plan.waves[0].label(2) == "wave 1/2 (2.0 GB, 2 moves)"
    assert plan.summary["mode"] == "scale-out"
    assert plan.rollback_entries() == CURRENT


def test_load_plan_without_snapshot_has_unknown_sizes(plan_dir):
    plan = load_plan(str(plan_dir))
    assert all(m.size_bytes == 0 for m in plan.moves)
    assert [w.bytes for w in plan.waves] == [0, 0]


def test_load_plan_accepts_log_dirs_as_kafka_does(tmp_path):
    target = copy.deepcopy(TARGET)
    target[0]["log_dirs"] = ["any", "any", "/data/kafka"]
    plan = load_plan(write_plan(tmp_path / "out", reassignment=doc(target)))
    assert plan.moves[0].replicas == (1, 2, 4)


def test_load_plan_accepts_an_empty_plan(tmp_path):
    plan = load_plan(write_plan(tmp_path / "out", doc([]), doc([]), [], summary(0, 0, wave_bytes=[])))
    assert plan.moves == () and plan.waves == ()


# -- load_plan: files missing or not JSON --------------------------------------------------------------------


@pytest.mark.parametrize("name", ["reassignment.json", "rollback.json", "waves.json", "summary.json"])
def test_missing_file_is_named(tmp_path, name):
    directory = write_plan(tmp_path / "out", skip=(name,))
    msg = error_of(directory)
    assert msg.startswith(f"{name}: not found (in {directory})")


def test_malformed_json_names_file_line_and_column(tmp_path):
    directory = write_plan(tmp_path / "out", waves='[{"version": 1, "partitions": [}]')
    with pytest.raises(PlanFileError) as info:
        load_plan(directory)
    assert str(info.value).startswith("waves.json: not valid JSON: Expecting value at line 1 column 32")
    assert info.value.file == "waves.json" and info.value.json_path is None


def test_plan_file_error_is_a_value_error_with_parts():
    err = PlanFileError("waves.json", "[] should be non-empty", "$[2].partitions[0].replicas")
    assert isinstance(err, ValueError)
    assert str(err) == "waves.json: $[2].partitions[0].replicas: [] should be non-empty"
    assert (err.file, err.json_path, err.problem) == (
        "waves.json",
        "$[2].partitions[0].replicas",
        "[] should be non-empty",
    )


# -- load_plan: schema violations, with their JSON path -----------------------------------------------------


def _with(entries, index, **changes):
    out = copy.deepcopy(entries)
    for k, v in changes.items():
        if v is KeyError:
            del out[index][k]
        else:
            out[index][k] = v
    return out


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (
            {"waves": [doc([TARGET[0]]), doc([TARGET[2]]), doc([_with(TARGET, 1, replicas=[])[1]])]},
            "waves.json: $[2].partitions[0].replicas: [] should be non-empty",
        ),
        ({"waves": doc(TARGET)}, "waves.json: $: {'version': 1, "),
        ({"reassignment": {"version": 2, "partitions": TARGET}}, "reassignment.json: $.version: 1 was expected"),
        ({"reassignment": {"partitions": TARGET}}, "reassignment.json: $: 'version' is a required property"),
        (
            {"reassignment": doc(_with(TARGET, 1, foo=1))},
            "reassignment.json: $.partitions[1]: Additional properties are not allowed ('foo' was unexpected)",
        ),
        (
            {"reassignment": doc(_with(TARGET, 0, replicas=[1, 1, 4]))},
            "reassignment.json: $.partitions[0].replicas: [1, 1, 4] has non-unique elements",
        ),
        (
            {"reassignment": doc(_with(TARGET, 0, replicas=[1, -2, 4]))},
            "reassignment.json: $.partitions[0].replicas[1]: -2 is less than the minimum of 0",
        ),
        (
            {"reassignment": doc(_with(TARGET, 2, partition=-1))},
            "reassignment.json: $.partitions[2].partition: -1 is less than the minimum of 0",
        ),
        (
            {"rollback": doc(_with(CURRENT, 0, topic=""))},
            "rollback.json: $.partitions[0].topic: '' should be non-empty",
        ),
        (
            {"rollback": doc(_with(CURRENT, 1, replicas=KeyError))},
            "rollback.json: $.partitions[1]: 'replicas' is a required property",
        ),
        (
            {"rollback": doc(_with(CURRENT, 1, partition="1"))},
            "rollback.json: $.partitions[1].partition: '1' is not of type 'integer'",
        ),
        (
            {"summary_doc": {k: v for k, v in summary().items() if k != "bytes_moved"}},
            "summary.json: $: 'bytes_moved' is a required property",
        ),
        ({"summary_doc": summary(bytes_moved="2 GB")}, "summary.json: $.bytes_moved: '2 GB' is not of type 'integer'"),
        ({"summary_doc": summary(mode="shrink")}, "summary.json: $.mode: 'shrink' is not one of"),
        (
            {"summary_doc": summary(brokers={"1": {"rack": None}})},
            "summary.json: $.brokers['1']: 'kept' is a required property (6 more problems)",
        ),
    ],
)
def test_schema_violations_name_file_and_json_path(tmp_path, files, expected):
    msg = error_of(write_plan(tmp_path / "out", **files))
    assert msg.startswith(expected), msg


def test_several_problems_are_counted(tmp_path):
    bad = doc(_with(_with(TARGET, 0, partition=-1), 1, partition=-1))
    with pytest.raises(PlanFileError) as info:
        load_plan(write_plan(tmp_path / "out", reassignment=bad))
    assert info.value.json_path == "$.partitions[0].partition"
    assert str(info.value).endswith("(1 more problems)")


# -- load_plan: cross-checks ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (
            {"reassignment": doc([*TARGET, TARGET[1]]), "summary_doc": summary(4)},
            "reassignment.json: $.partitions[3]: orders-1 is listed twice",
        ),
        ({"rollback": doc(CURRENT[:2])}, "rollback.json: payments-0 of reassignment.json is missing"),
        ({"rollback": doc(CURRENT[1:2])}, "rollback.json: orders-0 (and 1 more) of reassignment.json is missing"),
        (
            {"rollback": doc([*CURRENT, {"topic": "orders", "partition": 9, "replicas": [1]}])},
            "rollback.json: $.partitions[3]: orders-9 is not in reassignment.json",
        ),
        ({"rollback": doc([*CURRENT, CURRENT[0]])}, "rollback.json: $.partitions[3]: orders-0 is listed twice"),
        (
            {"rollback": doc([CURRENT[0], TARGET[1], CURRENT[2]])},
            "reassignment.json: $.partitions[1].replicas: orders-1 keeps its replicas [4, 3, 1] (rollback.json): "
            "nothing to move",
        ),
        (
            {"waves": [doc(TARGET[:1]), doc([]), doc(TARGET[1:])], "summary_doc": summary(waves=3)},
            "waves.json: $[1].partitions: wave 2 is empty",
        ),
        (
            {"waves": [doc(TARGET), doc([{"topic": "orders", "partition": 9, "replicas": [1]}])]},
            "waves.json: $[1].partitions[0]: orders-9 is not in reassignment.json",
        ),
        (
            {"waves": [doc(TARGET[:2]), doc(TARGET[1:])]},
            "waves.json: $[1].partitions[0]: orders-1 is already in wave 1",
        ),
        (
            {"waves": [doc(TARGET[:2]), doc([_with(TARGET, 2, replicas=[3, 1])[2]])]},
            "waves.json: $[1].partitions[0].replicas: payments-0 has replicas [3, 1] but [1, 3] in reassignment.json",
        ),
        ({"waves": [doc(TARGET[:1]), doc(TARGET[2:])]}, "waves.json: orders-1 of reassignment.json is in no wave"),
        ({"summary_doc": summary(partitions_changed=5)}, "summary.json: $.partitions_changed: 5 but there are 3"),
        ({"summary_doc": summary(waves=3)}, "summary.json: $.waves: 3 but there are 2 waves in waves.json"),
    ],
)
def test_cross_checks(tmp_path, files, expected):
    msg = error_of(write_plan(tmp_path / "out", **files))
    assert msg.startswith(expected), msg


# -- load_plan: the snapshot's sizes ---------------------------------------------------------------------------


def test_snapshot_missing(plan_dir, tmp_path):
    msg = error_of(plan_dir, tmp_path / "nowhere")
    assert msg.startswith(f"partitions.jsonl: not found (in {tmp_path / 'nowhere'})")


def test_snapshot_malformed_line_names_line(plan_dir, tmp_path):
    snap = write_partitions(tmp_path / "snap", ["", *snapshot_lines(), '{"topic": "x", '])
    assert error_of(plan_dir, snap).startswith("partitions.jsonl:5: not valid JSON")


def test_snapshot_line_of_a_plan_partition_is_validated(plan_dir, tmp_path):
    lines = snapshot_lines()
    lines[1] = {**lines[1], "size_bytes": -1}
    snap = write_partitions(tmp_path / "snap", lines)
    assert error_of(plan_dir, snap) == "partitions.jsonl:2: $.size_bytes: -1 is less than the minimum of 0"


def test_snapshot_line_that_is_not_an_object_is_refused(plan_dir, tmp_path):
    snap = write_partitions(tmp_path / "snap", [*snapshot_lines(), "[1, 2]"])
    assert error_of(plan_dir, snap).startswith("partitions.jsonl:4: $: [1, 2] is not of type 'object'")


def test_snapshot_lines_outside_the_plan_are_not_validated(plan_dir, tmp_path):
    other = {"topic": "logs", "partition": 0, "replicas": [1], "size_bytes": -5}  # ignored
    snap = write_partitions(tmp_path / "snap", snapshot_lines([other]))
    plan = load_plan(plan_dir, snap)
    assert plan.bytes == 2_300_000_000
    # a line whose partition cannot even be told is refused
    snap = write_partitions(tmp_path / "snap2", snapshot_lines([{"topic": "logs", "partition": [1], "replicas": [1]}]))
    assert error_of(plan_dir, snap) == "partitions.jsonl:4: $.partition: [1] is not of type 'integer'"


def test_snapshot_from_another_assignment_is_refused(plan_dir, tmp_path):
    lines = snapshot_lines()
    lines[0] = {**lines[0], "replicas": [1, 2, 5]}
    msg = error_of(plan_dir, write_partitions(tmp_path / "snap", lines))
    assert msg == (
        "partitions.jsonl:1: $.replicas: orders-0 has replicas [1, 2, 5] in the snapshot but [1, 2, 3] in "
        "rollback.json: not the snapshot this plan was made from"
    )


def test_snapshot_missing_a_plan_partition(plan_dir, tmp_path):
    snap = write_partitions(tmp_path / "snap", snapshot_lines()[:2])
    assert error_of(plan_dir, snap).startswith("partitions.jsonl: payments-0 of reassignment.json not in the snapshot")


def test_unknown_sizes_in_snapshot_count_as_zero(plan_dir, tmp_path):
    lines = [{k: v for k, v in line.items() if k != "size_bytes"} for line in snapshot_lines()]
    lines[1]["size_bytes"] = None
    plan = load_plan(plan_dir, write_partitions(tmp_path / "snap", lines))
    assert plan.bytes == 0


# -- the schema file -------------------------------------------------------------------------------------------


def test_schema_path_default_and_env_override(tmp_path):
    assert DEFAULT_SCHEMA_PATH.is_file()
    assert DEFAULT_SCHEMA_PATH == Path(planner_output.SCHEMA_FILE).resolve()
    assert resolve_schema_path({}) == DEFAULT_SCHEMA_PATH
    assert resolve_schema_path({SCHEMA_ENV: ""}) == DEFAULT_SCHEMA_PATH
    assert resolve_schema_path({SCHEMA_ENV: str(tmp_path / "s.json")}) == tmp_path / "s.json"


def test_missing_schema_is_a_clear_error(plan_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(plan_files, "SCHEMA_PATH", tmp_path / "missing.schema.json")
    with pytest.raises(FileNotFoundError, match="missing.schema.json not found .set KAFKA_OPS_PLAN_SCHEMA"):
        load_plan(plan_dir)
    with pytest.raises(FileNotFoundError, match="elsewhere.json"):
        load_plan(plan_dir, schema_path=tmp_path / "elsewhere.json")


def test_an_overridden_schema_is_used(plan_dir, tmp_path, monkeypatch):
    schema = json.loads(DEFAULT_SCHEMA_PATH.read_text())
    schema["$defs"]["summary"]["required"].append("operator")  # a stricter site schema
    path = tmp_path / "strict.schema.json"
    path.write_text(json.dumps(schema))
    monkeypatch.setattr(plan_files, "SCHEMA_PATH", path)
    assert error_of(plan_dir) == "summary.json: $: 'operator' is a required property"


def test_schema_validates_snapshot_files_the_planner_reads(tmp_path):
    brokers, parts = generate_cluster(4, 30, racks=2, seed=1)
    validate_document("brokers.json", "brokers", brokers)
    for rec in parts:
        validate_document("partitions.jsonl", "partition_record", rec)
    validate_document("brokers.json", "brokers", [{"id": 0}, {"id": 1, "rack": None, "host": "h", "port": 9092}])
    with pytest.raises(PlanFileError, match=r"brokers.json: \$\[1\].id: -1 is less than the minimum of 0"):
        validate_document("brokers.json", "brokers", [{"id": 0}, {"id": -1}])
    with pytest.raises(PlanFileError, match=r"brokers.json: \$: \[\] should be non-empty"):
        validate_document("brokers.json", "brokers", [])
    with pytest.raises(PlanFileError, match=r"\$\[0\].rack: '' should be non-empty"):
        validate_document("brokers.json", "brokers", [{"id": 0, "rack": ""}])


# -- files written by the real planner ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "brokers", "kwargs"),
    [
        ("scale-out", (6, 7), {"n_brokers": 6, "new_brokers": 2, "racks": 3}),
        ("decommission", (5,), {"n_brokers": 6, "racks": 0}),
    ],
)
def test_planner_output_loads(tmp_path, mode, brokers, kwargs):
    cluster, parts = generate_cluster(n_partitions=150, seed=7, **kwargs)
    snap = write_snapshot(str(tmp_path / "snap"), cluster, parts)
    out = tmp_path / "out"
    summary_doc = run(snap, mode, str(out), brokers=brokers, wave_moves_per_broker=3, engine="local")

    plan = load_plan(out, snap)
    assert len(plan.moves) == summary_doc["partitions_changed"] > 0
    assert len(plan.waves) == summary_doc["waves"] > 1
    assert [w.bytes for w in plan.waves] == summary_doc["wave_bytes"]
    assert plan.bytes == summary_doc["bytes_moved"]
    assert sum(len(m.adding) for m in plan.moves) == summary_doc["replica_moves"]
    assert plan.summary == json.loads((out / "summary.json").read_text())
    by_key = {(p["topic"], p["partition"]): p for p in parts}
    for m in plan.moves:
        assert list(m.current) == by_key[m.key]["replicas"]
        assert m.size_bytes == by_key[m.key]["size_bytes"]
    if mode == "decommission":
        assert all(5 not in m.replicas for m in plan.moves)
    # without the snapshot the same plan loads with unknown sizes
    unsized = load_plan(out)
    assert [[m.name for m in w.moves] for w in unsized.waves] == [[m.name for m in w.moves] for w in plan.waves]
    assert unsized.bytes == 0


def test_planner_refuses_to_write_a_document_the_schema_rejects(tmp_path):
    cluster, parts = generate_cluster(4, 40, new_brokers=1, racks=0, seed=3)
    snap = load_snapshot(write_snapshot(str(tmp_path / "snap"), cluster, parts))
    result = make_plan(snap, PlanOptions(mode="scale-out", brokers=(4,)))
    bad = dict(result.summary)
    del bad["notes"]
    out = tmp_path / "out"
    with pytest.raises(planner_output.PlanOutputError) as info:
        planner_output.write_outputs(str(out), snap, result.replicas, result.waves, bad)
    assert str(info.value) == (
        "planner bug: summary.json does not match $defs/summary of plan_files.schema.json: "
        "$: 'notes' is a required property; nothing was written"
    )
    assert not out.exists()
    planner_output.write_outputs(str(out), snap, result.replicas, result.waves, result.summary)
    assert load_plan(out).moves


def test_planner_validate_output_names_the_json_path():
    bad = [doc(TARGET[:1]), doc([{"topic": "orders", "partition": 1, "replicas": []}])]
    with pytest.raises(planner_output.PlanOutputError, match=r"waves.json .*: \$\[1\].partitions\[0\].replicas: "):
        planner_output.validate_output("waves.json", bad)
    planner_output.validate_output("waves.json", [doc(TARGET)])


# -- check_plan_current -------------------------------------------------------------------------------------------

BROKERS = tuple(Broker(i, f"h{i}", 9092) for i in (1, 2, 3, 4))


def live(*partitions, brokers=BROKERS):
    return ClusterState(brokers=brokers, partitions=tuple(partitions), controller_id=1)


def part(topic, partition, replicas):
    return Partition(topic, partition, replicas[0], tuple(replicas), tuple(replicas))


def fresh_state(**overrides):
    current = {(c["topic"], c["partition"]): c["replicas"] for c in CURRENT}
    current.update(overrides)
    return live(*(part(t, p, r) for (t, p), r in current.items()), part("logs", 0, [1, 2]))


def test_plan_current_ok(plan_dir):
    assert check_plan_current(load_plan(plan_dir), fresh_state()) == []


def test_plan_stale_lines_name_the_partition(plan_dir):
    plan = load_plan(plan_dir)
    state = live(part("orders", 1, [2, 3, 4]), part("payments", 0, [3, 1]), brokers=BROKERS[:3])
    assert check_plan_current(plan, state) == [
        "orders-0: partition no longer exists",
        "orders-1: replicas are now [2, 3, 4], rollback.json has [2, 3, 1] (moved since the snapshot)",
        "orders-1: target brokers [4] are not registered",
    ]
    assert check_plan_current(plan, state, new_brokers=[4])[-1] == (
        "orders-1: target brokers [4] are not registered (new broker 4 not started or not registered yet)"
    )


def test_plan_unregistered_new_brokers_are_named_together():
    plan = Plan("d", (Move("t", 0, (5, 6), (1, 2)),), (), {})
    state = live(part("t", 0, [1, 2]))
    assert check_plan_current(plan, state, new_brokers=(5, 6)) == [
        "t-0: target brokers [5, 6] are not registered (new brokers [5, 6] not started or not registered yet)"
    ]


def test_plan_onto_brokers_a_dry_run_did_not_start_is_not_stale():
    plan = Plan("d", (Move("t", 0, (5, 2), (1, 2)), Move("t", 1, (6, 2), (1, 2))), (), {})
    state = live(part("t", 0, [1, 2]), part("t", 1, [1, 2]))
    assert check_plan_current(plan, state, new_brokers=(5, 6), not_started=[5]) == [
        "t-1: target brokers [6] are not registered (new broker 6 not started or not registered yet)"
    ]


def test_plan_changing_the_replication_factor_is_refused():
    plan = Plan("d", (Move("orders", 0, (1, 2), (1, 2, 3)), Move("orders", 1, (1, 2, 3), (1, 2))), (), {})
    state = live(part("orders", 0, [1, 2, 3]), part("orders", 1, [1, 2]))
    assert check_plan_current(plan, state) == [
        "orders-0: plan changes the replication factor from 3 to 2 (target [1, 2], current [1, 2, 3])",
        "orders-1: plan changes the replication factor from 2 to 3 (target [1, 2, 3], current [1, 2])",
    ]


# -- reassignment_in_progress --------------------------------------------------------------------------------------


def test_reassignment_in_progress_formats_refusals():
    ongoing = [
        {"topic": "orders", "partition": 3, "replicas": [1, 2, 4], "adding_replicas": [4], "removing_replicas": [1]},
        {"topic": "logs", "partition": 0, "replicas": [1, 2], "adding_replicas": [], "removing_replicas": []},
    ]
    assert reassignment_in_progress(ongoing) == [
        "orders-3: adding [4], removing [1]",
        "logs-0: adding [], removing []",
    ]
    assert reassignment_in_progress([]) == []
