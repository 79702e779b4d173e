"""The closing note's line per roll (``runtime.run_report.roll_lines``): read from each roll's record, what it
restarted, what it left alone and why, why an empty plan is empty; a roll without a record is told by how the run
ended. Fake record store: no Airflow."""

from __future__ import annotations

import pytest
from kafka_ops.roll import RollRecord
from runtime import roll_store, run_report

T0 = 1_700_000_000_000  # 22:13:20 UTC
STEPS = tuple({"id": b, "host": f"h{b}", "rack": None, "position": i + 1, "total": 2} for i, b in enumerate([1, 0]))


@pytest.fixture
def records(monkeypatch: pytest.MonkeyPatch) -> dict[str, RollRecord | None]:
    held: dict[str, RollRecord | None] = {}

    class Store:
        def __init__(self, context: object, roll_id: str) -> None:
            self.roll_id = roll_id

        def load(self) -> RollRecord | None:
            return held.get(self.roll_id)

    monkeypatch.setattr(roll_store, "RollStore", Store)
    return held


def test_each_roll_says_what_it_did_and_an_unfinished_one_is_named(records) -> None:
    records["pin"] = RollRecord("pin", T0, empty_because="KRaft: metadata.version replaces "
                                                           "inter.broker.protocol.version")
    records["binaries"] = (RollRecord("binaries", T0, STEPS).mark(1, "done", T0, "left alone: running 4.1.0 already")
                           .mark(0, "done", T0, "restarted", 3.0))
    records["restart"] = RollRecord("restart", T0, STEPS).mark(1, "done", T0, "restarted").mark(0, "stopped", T0)
    records["old"] = RollRecord("old", T0)
    lines, unfinished = run_report.roll_lines({}, ["pin", "binaries", "restart", "old", "gone"], False, False)
    assert lines == [
        "roll 'pin': nothing to roll (KRaft: metadata.version replaces inter.broker.protocol.version)",
        "roll 'binaries': restarted [0] of [1, 0]; left alone [1]: running 4.1.0 already",
        "roll 'restart': restarted [1] of [1, 0]; left broker 0 stopped at 22:13:20 UTC",
        "roll 'old': nothing to roll (its plan holds no node)",
        "roll 'gone': finished (its record deleted once the cluster was healthy)",
    ]
    assert unfinished == ["restart"]
    lines, _ = run_report.roll_lines({}, ["gone"], False, True)
    assert lines == ["roll 'gone': not planned"]
    lines, _ = run_report.roll_lines({}, ["gone"], True, False)
    assert lines == ["roll 'gone': dry run, nothing restarted (plan and steps in its tasks' logs)"]
