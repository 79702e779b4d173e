"""``RollStore.mark_all``: a batch's brokers reach a phase in one save of the roll's record (one Airflow Variable
write, not one per broker); the store's writes are counted in a dict instead of Variables."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from kafka_ops.roll import RollRecord
from runtime.roll_store import RollStore

STEPS = tuple({"id": b, "host": f"h{b}", "rack": None, "position": i + 1, "total": 3, "batch": 1}
              for i, b in enumerate([0, 3, 6]))


class CountingStore(RollStore):
    def __init__(self) -> None:
        super().__init__({"dag": SimpleNamespace(dag_id="kafka_rolling_restart"), "run_id": "manual__1"}, "restart")
        self.saved: list[dict] = []

    def save(self, record: RollRecord) -> None:
        self.saved.append(json.loads(json.dumps(record.to_dict())))


def test_a_batch_is_marked_in_one_save():
    store, record = CountingStore(), RollRecord("restart", 1_700_000_000_000, STEPS)
    record = store.mark_all(record, [0, 3, 6], "stopping", "stop sent by alice")
    assert len(store.saved) == 1
    assert [record.phase(b) for b in (0, 3, 6)] == ["stopping"] * 3
    assert {record.progress(b).at_ms for b in (0, 3, 6)} == {record.progress(0).at_ms}, "one moment for the batch"
    assert RollRecord.from_dict(store.saved[0]) == record
    record = store.mark_all(record, (b for b in [0, 3, 6]), "done", "restarted", 12.5)
    assert len(store.saved) == 2 and record.finished() == [0, 3, 6]
    assert record.progress(3).took_s == 12.5


def test_no_brokers_no_write_and_a_refused_phase_saves_nothing():
    store, record = CountingStore(), RollRecord("restart", 1_700_000_000_000, STEPS)
    assert store.mark_all(record, [], "stopped") is record and store.saved == []
    done = record.mark(3, "done", 1_700_000_000_001)
    with pytest.raises(ValueError, match="broker 3: roll 'restart' cannot go from done back to stopping"):
        store.mark_all(done, [0, 3], "stopping")
    assert store.saved == []
