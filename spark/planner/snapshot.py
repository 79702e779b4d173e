"""Snapshot directory -> columnar arrays (fixed format, see docs/architecture.md, "Planner files").

``brokers.json``: ``[{"id": 0, "rack": "rack-a" | null, "host": "...", "port": 9092}]``.
``partitions.jsonl``: one JSON object per line,
``{"topic": "t", "partition": 0, "replicas": [0, 1, 2], "size_bytes": 1234}``; ``size_bytes`` 0 or
absent means unknown (count-based). Blank lines are ignored.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import numpy as np

from planner.errors import PlanInputError

BROKERS_FILE = "brokers.json"
PARTITIONS_FILE = "partitions.jsonl"


@dataclass
class Snapshot:
    """A cluster's replica assignment, as arrays.

    Attributes:
        broker_ids: int64 array (B,), broker ids sorted ascending; "broker index" below means a
            position in this array.
        racks: list of B rack names (``None`` when the cluster has no rack information).
        topics: list of P topic names.
        partitions: int64 array (P,), partition numbers.
        sizes: int64 array (P,), partition size in bytes (0 = unknown).
        replicas: int32 array (P, R) of broker indexes, padded with -1 past each partition's
            replication factor; column 0 is the preferred leader.
    """

    broker_ids: np.ndarray
    racks: list
    topics: list
    partitions: np.ndarray
    sizes: np.ndarray
    replicas: np.ndarray

    @property
    def rf(self) -> np.ndarray:
        """Replication factor per partition, int array (P,)."""
        return (self.replicas >= 0).sum(axis=1)

    def broker_index(self, broker_id: int) -> int:
        """Index of ``broker_id`` in :attr:`broker_ids`; raises KeyError if unknown."""
        i = int(np.searchsorted(self.broker_ids, broker_id))
        if i >= len(self.broker_ids) or self.broker_ids[i] != broker_id:
            raise KeyError(broker_id)
        return i


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_brokers(doc) -> tuple[np.ndarray, list]:
    """Validate a parsed ``brokers.json`` document.

    Returns (sorted broker ids as int64 array, racks in the same order). Raises PlanInputError on a
    non-list document, a broker without an integer ``id``, duplicate ids, a non-string rack, or a
    cluster where only some brokers have a rack (Kafka's rack-aware assignment refuses that too).
    """
    if not isinstance(doc, list) or not doc:
        raise PlanInputError(f"{BROKERS_FILE}: expected a non-empty JSON list of brokers")
    seen = {}
    for i, broker in enumerate(doc):
        if not isinstance(broker, dict) or not _is_int(broker.get("id")) or broker["id"] < 0:
            raise PlanInputError(f"{BROKERS_FILE}: entry {i} needs a non-negative integer 'id': {broker!r}")
        rack = broker.get("rack")
        if rack is not None and (not isinstance(rack, str) or not rack):
            raise PlanInputError(f"{BROKERS_FILE}: broker {broker['id']}: 'rack' must be a string or null")
        if broker["id"] in seen:
            raise PlanInputError(f"{BROKERS_FILE}: duplicate broker id {broker['id']}")
        seen[broker["id"]] = rack
    with_rack = [b for b, r in seen.items() if r is not None]
    if with_rack and len(with_rack) != len(seen):
        missing = sorted(b for b, r in seen.items() if r is None)
        raise PlanInputError(
            f"{BROKERS_FILE}: brokers {missing} have no rack while others do; "
            "rack-aware placement needs a rack on every broker"
        )
    ids = np.array(sorted(seen), dtype=np.int64)
    return ids, [seen[int(b)] for b in ids]


def load_brokers(snapshot_dir: str) -> tuple[np.ndarray, list]:
    """Read and validate ``DIR/brokers.json``; see :func:`parse_brokers`."""
    path = os.path.join(snapshot_dir, BROKERS_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError as e:
        raise PlanInputError(f"{path}: not found") from e
    except json.JSONDecodeError as e:
        raise PlanInputError(f"{path}: not valid JSON: {e}") from e
    return parse_brokers(doc)


def check_partition_record(rec) -> str | None:
    """Why a parsed ``partitions.jsonl`` record is malformed, or None if it is well-formed.

    Rules: an object with a non-empty string ``topic``, an integer ``partition`` >= 0, a non-empty
    list ``replicas`` of distinct integer broker ids (Kafka never places two replicas of one partition
    on a broker), and an optional integer ``size_bytes`` >= 0.
    """
    if not isinstance(rec, dict):
        return "not a JSON object"
    if not isinstance(rec.get("topic"), str) or not rec["topic"]:
        return "'topic' must be a non-empty string"
    if not _is_int(rec.get("partition")) or rec["partition"] < 0:
        return "'partition' must be an integer >= 0"
    reps = rec.get("replicas")
    if not isinstance(reps, list) or not reps or not all(_is_int(r) for r in reps):
        return "'replicas' must be a non-empty list of integer broker ids"
    if len(set(reps)) != len(reps):
        return "'replicas' lists a broker twice"
    size = rec.get("size_bytes")
    if size is not None and (not _is_int(size) or size < 0):
        return "'size_bytes' must be an integer >= 0"
    return None


def build_snapshot(broker_ids, racks, topics, partitions, sizes, replica_lists) -> Snapshot:
    """Assemble a :class:`Snapshot` from validated columns (replica lists hold broker ids).

    Raises PlanInputError for a replica on a broker id missing from ``brokers.json`` and for a
    (topic, partition) listed twice.
    """
    broker_ids = np.asarray(broker_ids, dtype=np.int64)
    n = len(topics)
    width = max((len(r) for r in replica_lists), default=1)
    ids = np.full((n, width), -1, dtype=np.int64)
    for i, reps in enumerate(replica_lists):
        ids[i, : len(reps)] = reps
    return build_snapshot_from_matrix(broker_ids, racks, list(topics), partitions, sizes, ids)


def build_snapshot_from_matrix(broker_ids, racks, topics, partitions, sizes, id_matrix) -> Snapshot:
    """Like :func:`build_snapshot` but replicas come as an int64 (P, R) id matrix padded with -1."""
    broker_ids = np.asarray(broker_ids, dtype=np.int64)
    id_matrix = np.asarray(id_matrix, dtype=np.int64)
    valid = id_matrix >= 0
    idx = np.searchsorted(broker_ids, np.where(valid, id_matrix, broker_ids[0]))
    idx = np.minimum(idx, len(broker_ids) - 1)
    known = broker_ids[idx] == np.where(valid, id_matrix, broker_ids[0])
    bad = valid & ~known
    if bad.any():
        unknown = sorted({int(x) for x in id_matrix[bad][:1000]})
        p = int(np.nonzero(bad.any(axis=1))[0][0])
        raise PlanInputError(
            f"{PARTITIONS_FILE}: unknown broker ids {unknown[:20]} (not in {BROKERS_FILE}), "
            f"e.g. in {topics[p]}-{int(partitions[p])}"
        )
    replicas = np.where(valid, idx, -1).astype(np.int32)
    partitions = np.asarray(partitions, dtype=np.int64)
    keys = {}
    for i, key in enumerate(zip(topics, partitions.tolist(), strict=True)):
        if key in keys:
            raise PlanInputError(f"{PARTITIONS_FILE}: partition {key[0]}-{key[1]} is listed twice")
        keys[key] = i
    return Snapshot(
        broker_ids=broker_ids,
        racks=list(racks),
        topics=list(topics),
        partitions=partitions,
        sizes=np.asarray(sizes, dtype=np.int64),
        replicas=replicas,
    )


def load_snapshot(snapshot_dir: str) -> Snapshot:
    """Read and validate a snapshot directory on one process (unit tests, small clusters).

    Raises PlanInputError naming the file and line for the first malformed line, an unknown broker
    id, or a duplicate partition.
    """
    broker_ids, racks = load_brokers(snapshot_dir)
    path = os.path.join(snapshot_dir, PARTITIONS_FILE)
    topics, parts, sizes, reps = [], [], [], []
    try:
        f = open(path, encoding="utf-8")
    except FileNotFoundError as e:
        raise PlanInputError(f"{path}: not found") from e
    with f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise PlanInputError(f"{path}:{lineno}: malformed line (not JSON: {e.msg})") from e
            why = check_partition_record(rec)
            if why:
                raise PlanInputError(f"{path}:{lineno}: malformed line ({why}): {line.strip()[:200]}")
            topics.append(rec["topic"])
            parts.append(rec["partition"])
            sizes.append(rec.get("size_bytes") or 0)
            reps.append(rec["replicas"])
    if not topics:
        raise PlanInputError(f"{path}: no partitions")
    return build_snapshot(broker_ids, racks, topics, parts, sizes, reps)
