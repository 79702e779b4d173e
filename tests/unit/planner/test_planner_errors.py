"""Bad input: a clear message on stderr, exit status 2, and nothing written."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest
from planner.spark_job import _parse_batches
from reassignment_plan import main

RACKED = [{"id": i, "rack": f"rack-{'abc'[i % 3]}", "host": f"h{i}", "port": 9092} for i in range(6)]
GOOD = [
    {"topic": "t", "partition": p, "replicas": [p % 6, (p + 1) % 6, (p + 2) % 6], "size_bytes": 100}
    for p in range(12)
]


def run_bad(tmp_path, capsys, write, brokers, partitions, *args):
    snap = write(brokers, partitions)
    out = tmp_path / "out"
    code = main(["--snapshot", snap, "--output-dir", str(out), "--engine", "local", *args])
    err = capsys.readouterr().err
    assert code == 2
    assert not out.exists(), "nothing may be written on bad input"
    assert err.startswith("reassignment_plan: error: ")
    return err


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("{not json", "not JSON"),
        ('{"topic": "t", "partition": "3", "replicas": [0, 1]}', "'partition' must be an integer"),
        ('{"topic": "t", "partition": -1, "replicas": [0, 1]}', "'partition' must be an integer"),
        ('{"topic": "", "partition": 3, "replicas": [0, 1]}', "'topic' must be a non-empty string"),
        ('{"topic": "t", "partition": 3}', "'replicas' must be a non-empty list"),
        ('{"topic": "t", "partition": 3, "replicas": []}', "'replicas' must be a non-empty list"),
        ('{"topic": "t", "partition": 3, "replicas": [0, "1"]}', "'replicas' must be a non-empty list"),
        ('{"topic": "t", "partition": 3, "replicas": [0, true]}', "'replicas' must be a non-empty list"),
        ('{"topic": "t", "partition": 3, "replicas": [1, 1]}', "lists a broker twice"),
        ('{"topic": "t", "partition": 3, "replicas": [0, 1], "size_bytes": -5}', "'size_bytes' must be"),
        ('{"topic": "t", "partition": 3, "replicas": [0, 1], "size_bytes": 1.5}', "'size_bytes' must be"),
        ("[1, 2]", "not a JSON object"),
    ],
)
def test_malformed_line(tmp_path, capsys, write, line, why):
    parts = [json.dumps(GOOD[0]), json.dumps(GOOD[1]), line]
    err = run_bad(tmp_path, capsys, write, RACKED, parts, "--mode", "rebalance")
    assert "partitions.jsonl:3: malformed line" in err
    assert why in err


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("{not json", "not JSON"),
        ('{"topic": "t", "partition": 3, "replicas": [1, 1]}', "lists a broker twice"),
        ('{"topic": 7, "partition": 3, "replicas": [1]}', "'topic' must be"),
    ],
)
def test_spark_line_parser_flags_the_same_lines(line, why):
    """The Spark reader's per-batch parser (mapInArrow body) applies the local reader's rules."""
    batch = pa.RecordBatch.from_pydict({"value": [json.dumps(GOOD[0]), "", line]})
    out = pa.Table.from_batches(list(_parse_batches([batch]))).to_pylist()
    assert len(out) == 2  # the blank line is skipped
    assert (
        out[0]["error"] is None and out[0]["replicas"] == GOOD[0]["replicas"] and out[0]["size_bytes"] == 100
    )
    assert why in out[1]["error"] and out[1]["line"] == line and out[1]["topic"] is None


def test_unknown_broker_in_partitions(tmp_path, capsys, write):
    parts = [*GOOD, {"topic": "u", "partition": 0, "replicas": [0, 9]}]
    err = run_bad(tmp_path, capsys, write, RACKED, parts, "--mode", "rebalance")
    assert "unknown broker ids [9]" in err and "u-0" in err


def test_unknown_broker_requested(tmp_path, capsys, write):
    err = run_bad(tmp_path, capsys, write, RACKED, GOOD, "--mode", "scale-out", "--brokers", "5,42")
    assert "unknown broker ids [42]" in err


@pytest.mark.parametrize("mode", ["scale-out", "rebalance"])
def test_drain_only_outside_a_decommission(tmp_path, capsys, write, mode):
    brokers = ["--brokers", "5"] if mode == "scale-out" else []
    err = run_bad(tmp_path, capsys, write, RACKED, GOOD, "--mode", mode, *brokers, "--drain-only")
    assert f"--drain-only is for a decommission, not a {mode}" in err


@pytest.mark.parametrize("mode", ["scale-out", "decommission"])
def test_missing_broker_ids(tmp_path, capsys, write, mode):
    err = run_bad(tmp_path, capsys, write, RACKED, GOOD, "--mode", mode)
    assert f"missing broker ids: {mode} needs --brokers" in err


def test_rebalance_takes_no_broker_list(tmp_path, capsys, write):
    err = run_bad(tmp_path, capsys, write, RACKED, GOOD, "--mode", "rebalance", "--brokers", "1")
    assert "rebalance uses every broker" in err


def test_decommission_below_largest_rf(tmp_path, capsys, write):
    err = run_bad(tmp_path, capsys, write, RACKED, GOOD, "--mode", "decommission", "--brokers", "0,1,2,3")
    assert "leaves 2 brokers, fewer than the largest replication factor 3" in err


def test_fewer_racks_than_needed(tmp_path, capsys, write):
    # draining rack-a (brokers 0 and 3) leaves 2 racks, but RF-3 partitions span 3
    err = run_bad(tmp_path, capsys, write, RACKED, GOOD, "--mode", "decommission", "--brokers", "0,3")
    assert "fewer racks than needed" in err and "spans 3 racks but the kept brokers have 2" in err


def test_some_brokers_without_rack(tmp_path, capsys, write):
    brokers = [dict(b) for b in RACKED]
    brokers[2]["rack"] = None
    err = run_bad(tmp_path, capsys, write, brokers, GOOD, "--mode", "rebalance")
    assert "brokers [2] have no rack while others do" in err


def test_duplicate_partition(tmp_path, capsys, write):
    err = run_bad(tmp_path, capsys, write, RACKED, [*GOOD, GOOD[3]], "--mode", "rebalance")
    assert "partition t-3 is listed twice" in err


def test_bad_brokers_json(tmp_path, capsys, write):
    err = run_bad(tmp_path, capsys, write, '[{"id": "zero"}]', GOOD, "--mode", "rebalance")
    assert "brokers.json: entry 0 needs a non-negative integer 'id'" in err


def test_missing_snapshot_files(tmp_path, capsys):
    out = tmp_path / "out"
    code = main(
        [
            "--snapshot",
            str(tmp_path / "nope"),
            "--output-dir",
            str(out),
            "--mode",
            "rebalance",
            "--engine",
            "local",
        ]
    )
    assert code == 2 and "brokers.json: not found" in capsys.readouterr().err
    assert not out.exists()


def test_drain_over_the_caps(tmp_path, capsys, write):
    # broker 0 holds 6 replicas of 100 bytes: draining it needs 6 moves and 600 bytes
    err = run_bad(
        tmp_path,
        capsys,
        write,
        RACKED,
        GOOD,
        "--mode",
        "decommission",
        "--brokers",
        "0",
        "--max-bytes",
        "500",
    )
    assert "draining needs 600 bytes moved, over --max-bytes 500" in err
    err = run_bad(
        tmp_path, capsys, write, RACKED, GOOD, "--mode", "decommission", "--brokers", "0", "--max-moves", "5"
    )
    assert "draining needs 6 replica moves, over --max-moves 5" in err


@pytest.mark.parametrize(
    "args",
    [
        ["--brokers", "a,b"],
        ["--balance-tolerance", "2"],
        ["--wave-bytes", "0"],
        ["--mode", "shrink"],
    ],
)
def test_bad_arguments_exit_2(tmp_path, capsys, write, args):
    snap = write(RACKED, GOOD)
    argv = ["--snapshot", snap, "--output-dir", str(tmp_path / "out"), "--engine", "local"]
    if "--mode" not in args:
        argv += ["--mode", "scale-out"]
    with pytest.raises(SystemExit) as exc:
        main(argv + args)
    assert exc.value.code == 2
    assert "error:" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "out")
