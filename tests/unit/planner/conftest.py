"""Fixtures for the planner tests: snapshots on disk and a CLI runner (local engine)."""

from __future__ import annotations

import json

import pytest
from planner.synthetic import generate_cluster, write_snapshot
from planner_checks import Checked
from reassignment_plan import main


@pytest.fixture
def cluster(tmp_path):
    """Factory: write a generated cluster snapshot; returns its directory."""

    def make(name="snap", **kwargs):
        brokers, parts = generate_cluster(**kwargs)
        return write_snapshot(str(tmp_path / name), brokers, parts)

    return make


@pytest.fixture
def write(tmp_path):
    """Factory: write a hand-made snapshot (brokers list, partitions list or raw lines)."""

    def make(brokers, partitions, name="snap"):
        d = tmp_path / name
        d.mkdir(exist_ok=True)
        (d / "brokers.json").write_text(json.dumps(brokers) if not isinstance(brokers, str) else brokers)
        lines = [p if isinstance(p, str) else json.dumps(p) for p in partitions]
        (d / "partitions.jsonl").write_text("\n".join(lines) + "\n")
        return str(d)

    return make


@pytest.fixture
def plan(tmp_path, capsys):
    """Run the CLI (local engine); returns (exit code, Checked or None, stderr)."""

    def run(snapshot_dir, *args, out="out"):
        out_dir = str(tmp_path / out)
        code = main(["--snapshot", snapshot_dir, "--output-dir", out_dir, "--engine", "local", *args])
        err = capsys.readouterr().err
        checked = Checked(snapshot_dir, out_dir) if code == 0 else None
        return code, checked, err

    return run
