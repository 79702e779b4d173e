"""Where a roll's record lives: one Airflow Variable per (DAG, run, roll).

Key ``kafka_ops_roll__<dag_id>__<run_id>__<roll_id>``, value :meth:`kafka_ops.roll.RollRecord.to_dict`.
A Variable, not an XCom: clearing a task deletes its XComs, and the record must survive exactly that
(it is what a resumed run reads). Only one task of a roll writes at a time (the brokers go one after the
other), so a plain read-modify-write is enough. A run's records outlive it, succeeded or failed: a clear of a run
that succeeded finds every node done and restarts none again; ``kafka_ops_roll_records_cleanup`` deletes them
``keep_days`` after the run ended (``kafka_ops.stale_rolls``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow.sdk import Variable
from kafka_ops.roll import RollRecord

PREFIX = "kafka_ops_roll"


SEPARATOR = "__"


def key(dag_id: str, run_id: str, roll_id: str) -> str:
    """The Variable key of one roll's record."""
    return SEPARATOR.join((PREFIX, dag_id, run_id, roll_id))


@dataclass(frozen=True)
class RecordKey:
    """A record's Variable key taken apart (:func:`parse_key`)."""

    key: str
    dag_id: str
    run_id: str
    roll_id: str


def parse_key(record_key: str, dag_ids: Iterable[str]) -> RecordKey | None:
    """The inverse of :func:`key` for a record of one of ``dag_ids`` (the longest that fits: DAG ids and run ids
    may themselves hold ``__``, as ``manual__2026-...`` does; roll ids never do); None when ``record_key`` is no
    roll record of any of these DAGs."""
    head = PREFIX + SEPARATOR
    if not record_key.startswith(head):
        return None
    rest = record_key[len(head):]
    for dag_id in sorted(dag_ids, key=len, reverse=True):
        if rest.startswith(dag_id + SEPARATOR):
            run_id, sep, roll_id = rest[len(dag_id) + len(SEPARATOR):].rpartition(SEPARATOR)
            if sep and run_id and roll_id:
                return RecordKey(record_key, dag_id, run_id, roll_id)
    return None


def now_ms() -> int:
    return int(time.time() * 1000)


class RollStore:
    """Load and save one roll's record for the running task (``context``) and ``roll_id``."""

    def __init__(self, context: Any, roll_id: str) -> None:
        self.roll_id = roll_id
        self.key = key(context["dag"].dag_id, context["run_id"], roll_id)

    def load(self) -> RollRecord | None:
        """The record, or None before the roll's plan was frozen.

        :raises ValueError: the Variable holds something else (named).
        """
        data = Variable.get(self.key, default=None, deserialize_json=True)
        if data is None:
            return None
        if not isinstance(data, dict):
            raise ValueError(f"Variable {self.key} does not hold a roll record: {data!r}"[:300])
        return RollRecord.from_dict(data)

    def save(self, record: RollRecord) -> None:
        Variable.set(self.key, record.to_dict(), serialize_json=True,
                     description="kafka-ops: one roll's frozen plan and what it did to each broker (read when "
                                 "the run's tasks are cleared; deleted keep_days after the run ends)")

    def mark(self, record: RollRecord, broker_id: int, phase: str, reason: str = "", took_s: float = 0.0,
             way_back: Mapping[str, str] | None = None) -> RollRecord:
        """Record ``broker_id`` at ``phase`` now (with its way back, if given), save, and return the new record."""
        updated = record.mark(broker_id, phase, now_ms(), reason, took_s, way_back)
        self.save(updated)
        return updated

    def mark_all(self, record: RollRecord, broker_ids: Iterable[int], phase: str, reason: str = "",
                 took_s: float = 0.0, soak_s: float | None = None) -> RollRecord:
        """Record every broker of ``broker_ids`` at ``phase`` now in one save (a batch's brokers reach a phase
        together: one Variable write, not one per broker), and return the new record; no ids, no write.
        ``soak_s``: they soak that many seconds from now (:attr:`kafka_ops.roll.BrokerProgress.soak_until_ms`).

        :raises ValueError: as :meth:`RollRecord.mark` (the record is not saved then)."""
        at, updated = now_ms(), record
        until = None if soak_s is None else at + int(soak_s * 1000)
        for broker_id in broker_ids:
            updated = updated.mark(broker_id, phase, at, reason, took_s, soak_until_ms=until)
        if updated is not record:
            self.save(updated)
        return updated

