"""The reassignment planner's output, read on the DAG side: load, validate, cross-check, staleness.

The planner (``spark/reassignment_plan.py``) writes into its output directory (formats in
docs/architecture.md, "Planner files", and in the JSON Schema ``spark/planner/plan_files.schema.json``
that both sides validate against):

- ``reassignment.json``: Kafka's reassignment document ``{"version": 1, "partitions": [{"topic",
  "partition", "replicas"}]}``, the target replicas of exactly the partitions whose replica list
  changes (first replica = preferred leader);
- ``rollback.json``: the current replicas of exactly those partitions, same format;
- ``waves.json``: a list of documents in that format, executed in order;
- ``summary.json``: the planner's figures (``planner.output.summarize``).

:func:`load_plan` reads them into a :class:`Plan` of :class:`Move` and :class:`Wave` objects;
:func:`check_plan_current` compares a plan with a fresh :class:`~kafka_ops.cluster.ClusterState`
before it is executed, and :func:`reassignment_in_progress` formats Kafka's ongoing reassignments
(another reassignment must not be running when a plan starts).

No Airflow imports; :func:`load_plan` reads files, everything else is pure. Sizes are in bytes.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka_ops.cluster import ClusterState

#: Environment variable overriding :data:`SCHEMA_PATH`.
SCHEMA_ENV = "KAFKA_OPS_PLAN_SCHEMA"
#: Where the schema lives next to the planner: ``<repo>/spark/planner/plan_files.schema.json`` in a
#: checkout, ``/opt/airflow/spark/planner/plan_files.schema.json`` in the docker image (plugins are
#: /opt/airflow/plugins there, spark is /opt/airflow/spark).
DEFAULT_SCHEMA_PATH = Path(__file__).resolve().parents[2] / "spark" / "planner" / "plan_files.schema.json"

REASSIGNMENT_FILE = "reassignment.json"
ROLLBACK_FILE = "rollback.json"
WAVES_FILE = "waves.json"
SUMMARY_FILE = "summary.json"
#: The snapshot's partition list (one JSON object per line), read for partition sizes.
PARTITIONS_FILE = "partitions.jsonl"

#: Plan file -> the ``$defs`` entry of the schema it must match.
FILE_DEFS = {
    REASSIGNMENT_FILE: "reassignment",
    ROLLBACK_FILE: "reassignment",
    WAVES_FILE: "waves",
    SUMMARY_FILE: "summary",
}


def resolve_schema_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$KAFKA_OPS_PLAN_SCHEMA`` when set (non-empty), else :data:`DEFAULT_SCHEMA_PATH`."""
    env = os.environ if environ is None else environ
    value = env.get(SCHEMA_ENV, "")
    return Path(value) if value else DEFAULT_SCHEMA_PATH


#: The schema file :func:`load_plan` validates against (read at import: see :func:`resolve_schema_path`).
SCHEMA_PATH = resolve_schema_path()


class PlanFileError(ValueError):
    """A plan file is missing, not JSON, does not match the schema, or contradicts another plan file.

    The message names the file and, where there is one, the JSON path of the problem, e.g.
    ``"waves.json: $[2].partitions[0].replicas: [] should be non-empty"``. Waiting does not fix it:
    the plan must be made again.

    :ivar file: the file's name (``"waves.json"``; ``"partitions.jsonl:12"`` for a snapshot line).
    :ivar json_path: JSONPath of the problem inside the file (``"$[2].partitions[0]"``), or None.
    :ivar problem: the message without file and path.
    """

    def __init__(self, file: str, problem: str, json_path: str | None = None) -> None:
        self.file = file
        self.json_path = json_path
        self.problem = problem
        super().__init__(f"{file}: {json_path}: {problem}" if json_path else f"{file}: {problem}")


# -- formatting -------------------------------------------------------------------------------------


def format_bytes(n: float) -> str:
    """``"1.2 GB"`` (GB = 1e9 bytes, one decimal) from 1 GB up, ``"350.0 MB"`` (1e6 bytes) below."""
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


def _ids(values: Iterable[int]) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


# -- the plan ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Move:
    """One partition of a plan: its replicas before and after.

    :param topic: topic name.
    :param partition: partition index.
    :param replicas: target replicas (reassignment.json), first = preferred leader.
    :param current: replicas when the plan was made (rollback.json).
    :param size_bytes: the partition's size from the snapshot, bytes; 0 = unknown.

    Lists are stored as tuples.
    """

    topic: str
    partition: int
    replicas: tuple[int, ...]
    current: tuple[int, ...]
    size_bytes: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "replicas", tuple(self.replicas))
        object.__setattr__(self, "current", tuple(self.current))

    @property
    def name(self) -> str:
        """``"<topic>-<partition>"``, the way Kafka's tools name a partition."""
        return f"{self.topic}-{self.partition}"

    @property
    def key(self) -> tuple[str, int]:
        """``(topic, partition)``."""
        return (self.topic, self.partition)

    @property
    def adding(self) -> tuple[int, ...]:
        """Target replicas not in the current ones (brokers that copy the partition), target order."""
        return tuple(b for b in self.replicas if b not in self.current)

    @property
    def removing(self) -> tuple[int, ...]:
        """Current replicas not in the target (brokers whose replica is deleted), current order."""
        return tuple(b for b in self.current if b not in self.replicas)

    def to_entry(self) -> dict[str, Any]:
        """The move as an entry of Kafka's reassignment format ``{"topic", "partition", "replicas"}``."""
        return {"topic": self.topic, "partition": self.partition, "replicas": list(self.replicas)}


@dataclass(frozen=True)
class Wave:
    """One document of waves.json: moves submitted together, the next wave after this one finished.

    :param index: 1-based position in waves.json.
    :param moves: the wave's moves, in waves.json order.
    :param bytes: bytes the wave copies: sum over its moves of partition size x number of adding
        replicas (0 when sizes are unknown).
    """

    index: int
    moves: tuple[Move, ...]
    bytes: int

    def label(self, total: int) -> str:
        """``"wave 2/5 (1.2 GB, 34 moves)"``; ``total`` = number of waves in the plan."""
        return f"wave {self.index}/{total} ({format_bytes(self.bytes)}, {_plural(len(self.moves), 'move')})"

    def entries(self) -> list[dict[str, Any]]:
        """The wave's partitions in Kafka's reassignment format (what AlterPartitionReassignments takes)."""
        return [m.to_entry() for m in self.moves]


@dataclass(frozen=True)
class Plan:
    """A validated plan directory.

    :param directory: the planner's output directory.
    :param moves: every partition of reassignment.json, in its order.
    :param waves: the waves of waves.json, in order; together they hold each move exactly once.
    :param summary: summary.json as parsed (see ``planner.output.summarize``).
    """

    directory: str
    moves: tuple[Move, ...]
    waves: tuple[Wave, ...]
    summary: Mapping[str, Any]

    @property
    def bytes(self) -> int:
        """Bytes the whole plan copies (sum of the waves' bytes; 0 when sizes are unknown)."""
        return sum(w.bytes for w in self.waves)

    def rollback_entries(self) -> list[dict[str, Any]]:
        """rollback.json's partitions (every move back to its current replicas), Kafka's format."""
        return [{"topic": m.topic, "partition": m.partition, "replicas": list(m.current)} for m in self.moves]


# -- schema -----------------------------------------------------------------------------------------


def _schema_inlined(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` with each ``{"$ref": "#/$defs/x"}`` replaced by a copy of ``$defs/x`` (``jsonref``; same meaning:
    jsonschema validates about 2.5 times faster without resolving references, and reassignment documents list tens of
    thousands of partitions). Only references inside the file are followed.

    Raises:
        jsonref.JsonRefError: a reference to another document, or to nothing.
    """
    import jsonref

    def local_only(uri: str) -> Any:
        raise ValueError(f"plan file schema: a $ref to another document ({uri}): only #/$defs/... is supported")

    return jsonref.replace_refs(schema, proxies=False, lazy_load=False, loader=local_only)


@functools.lru_cache(maxsize=8)
def _validators(schema_path: str) -> dict[str, Any]:
    """``$defs`` name -> compiled Draft 2020-12 validator, read once per schema file.

    Raises FileNotFoundError naming the path and :data:`SCHEMA_ENV` when the schema is missing.
    """
    from jsonschema import Draft202012Validator

    try:
        with open(schema_path, encoding="utf-8") as f:
            schema = json.load(f)
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"plan file schema {schema_path} not found (set {SCHEMA_ENV} to its path)") from exc
    Draft202012Validator.check_schema(schema)
    defs = _schema_inlined(schema)["$defs"]
    return {name: Draft202012Validator(defs[name]) for name in defs}


def _path_key(error) -> tuple:
    """Sort key of a jsonschema error by where it is: list indexes numerically, keys by name."""
    return tuple((0, x, "") if isinstance(x, int) else (1, 0, str(x)) for x in error.absolute_path)


def validate_document(file: str, definition: str, doc: Any, schema_path: Path | str | None = None) -> None:
    """Check ``doc`` against ``$defs/<definition>`` of the schema; PlanFileError on the first problem.

    The error names ``file`` and the JSON path of the first problem in document order (jsonschema's
    best match at that place); the count of further problems is appended. ``schema_path`` None =
    :data:`SCHEMA_PATH`.
    """
    from jsonschema.exceptions import best_match

    validator = _validators(str(schema_path or SCHEMA_PATH))[definition]
    errors = list(validator.iter_errors(doc))
    if not errors:
        return
    errors.sort(key=_path_key)  # the first problem in document order (list positions numerically)
    err = best_match(e for e in errors if e.absolute_path == errors[0].absolute_path)
    more = f" ({len(errors) - 1} more problems)" if len(errors) > 1 else ""
    raise PlanFileError(file, f"{err.message[:300]}{more}", err.json_path)


# -- load_plan --------------------------------------------------------------------------------------


def _read_json(directory: Path, name: str) -> Any:
    path = directory / name
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PlanFileError(name, f"not found (in {directory})") from None
    except OSError as exc:
        raise PlanFileError(name, f"cannot be read: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlanFileError(name, f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None


def _index_partitions(name: str, doc: Mapping[str, Any]) -> dict[tuple[str, int], tuple[int, ...]]:
    """(topic, partition) -> replicas of a schema-valid reassignment document; PlanFileError on a
    partition listed twice (kafka-reassign-partitions.sh refuses that too)."""
    out: dict[tuple[str, int], tuple[int, ...]] = {}
    for i, entry in enumerate(doc["partitions"]):
        key = (entry["topic"], entry["partition"])
        if key in out:
            raise PlanFileError(name, f"{key[0]}-{key[1]} is listed twice", f"$.partitions[{i}]")
        out[key] = tuple(entry["replicas"])
    return out


def _first_missing(keys: Iterable[tuple[str, int]]) -> str:
    missing = sorted(keys)
    more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
    return f"{missing[0][0]}-{missing[0][1]}{more}"


def _read_sizes(
    snapshot_dir: Path, current: Mapping[tuple[str, int], tuple[int, ...]], schema_path: Path | str | None
) -> dict[tuple[str, int], int]:
    """Sizes (bytes) of the plan's partitions from ``snapshot_dir/partitions.jsonl``.

    Lines of partitions in the plan are validated (``$defs/partition_record``) and their replicas
    must equal rollback.json's (else the snapshot is not the one the plan was made from); other
    lines are only parsed (the planner validated them). Every plan partition must be in the file.
    """
    path = snapshot_dir / PARTITIONS_FILE
    sizes: dict[tuple[str, int], int] = {}
    try:
        f = path.open(encoding="utf-8")
    except FileNotFoundError:
        raise PlanFileError(PARTITIONS_FILE, f"not found (in {snapshot_dir})") from None
    with f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{PARTITIONS_FILE}:{lineno}"
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise PlanFileError(where, f"not valid JSON: {exc.msg}") from None
            if isinstance(rec, dict):
                key = (rec.get("topic"), rec.get("partition"))
                try:
                    wanted = key in current
                except TypeError:  # unhashable values: malformed, let the schema say how
                    wanted = True
                if not wanted:
                    continue
            validate_document(where, "partition_record", rec, schema_path)
            key = (rec["topic"], rec["partition"])
            if tuple(rec["replicas"]) != current[key]:
                raise PlanFileError(
                    where,
                    f"{key[0]}-{key[1]} has replicas {_ids(rec['replicas'])} in the snapshot but "
                    f"{_ids(current[key])} in {ROLLBACK_FILE}: not the snapshot this plan was made from",
                    "$.replicas",
                )
            sizes[key] = rec.get("size_bytes") or 0
    missing = set(current) - set(sizes)
    if missing:
        raise PlanFileError(
            PARTITIONS_FILE, f"{_first_missing(missing)} of {REASSIGNMENT_FILE} not in the snapshot {snapshot_dir}"
        )
    return sizes


def load_plan(
    directory: str | os.PathLike[str],
    snapshot_dir: str | os.PathLike[str] | None = None,
    *,
    schema_path: str | os.PathLike[str] | None = None,
) -> Plan:
    """Read and check a planner output directory.

    Reads reassignment.json, rollback.json, waves.json and summary.json, validates each against its
    ``$defs`` entry of the schema (``schema_path``, default :data:`SCHEMA_PATH`), then cross-checks:

    - reassignment.json and rollback.json list no partition twice;
    - rollback.json covers exactly the partitions of reassignment.json, and each with replicas
      different from the target (the planner lists only partitions whose replica list changes);
    - waves.json: no wave empty; together the waves contain exactly reassignment.json's partitions,
      each once, with the same replicas;
    - summary.json agrees on the counts (``partitions_changed``, ``waves``).

    :param snapshot_dir: the snapshot the plan was made from; its ``partitions.jsonl`` gives the
        partition sizes (``size_bytes``) behind :attr:`Move.size_bytes` and :attr:`Wave.bytes`.
        None = sizes unknown (0).
    :raises PlanFileError: naming the file and the JSON path of the first problem (a missing file
        too). FileNotFoundError when the schema itself is missing.
    """
    root = Path(directory)
    schema = Path(schema_path) if schema_path is not None else None
    docs = {}
    for name, definition in FILE_DEFS.items():
        docs[name] = _read_json(root, name)
        validate_document(name, definition, docs[name], schema)

    target = _index_partitions(REASSIGNMENT_FILE, docs[REASSIGNMENT_FILE])
    current = _index_partitions(ROLLBACK_FILE, docs[ROLLBACK_FILE])
    for i, entry in enumerate(docs[ROLLBACK_FILE]["partitions"]):
        key = (entry["topic"], entry["partition"])
        if key not in target:
            raise PlanFileError(ROLLBACK_FILE, f"{key[0]}-{key[1]} is not in {REASSIGNMENT_FILE}", f"$.partitions[{i}]")
    if set(target) - set(current):
        raise PlanFileError(
            ROLLBACK_FILE, f"{_first_missing(set(target) - set(current))} of {REASSIGNMENT_FILE} is missing"
        )
    for i, entry in enumerate(docs[REASSIGNMENT_FILE]["partitions"]):
        key = (entry["topic"], entry["partition"])
        if target[key] == current[key]:
            raise PlanFileError(
                REASSIGNMENT_FILE,
                f"{key[0]}-{key[1]} keeps its replicas {_ids(current[key])} ({ROLLBACK_FILE}): nothing to move",
                f"$.partitions[{i}].replicas",
            )

    wave_of: dict[tuple[str, int], int] = {}
    wave_keys: list[list[tuple[str, int]]] = []
    for w, wave_doc in enumerate(docs[WAVES_FILE]):
        if not wave_doc["partitions"]:
            raise PlanFileError(WAVES_FILE, f"wave {w + 1} is empty", f"$[{w}].partitions")
        keys = []
        for i, entry in enumerate(wave_doc["partitions"]):
            key = (entry["topic"], entry["partition"])
            where = f"$[{w}].partitions[{i}]"
            if key not in target:
                raise PlanFileError(WAVES_FILE, f"{key[0]}-{key[1]} is not in {REASSIGNMENT_FILE}", where)
            if key in wave_of:
                raise PlanFileError(WAVES_FILE, f"{key[0]}-{key[1]} is already in wave {wave_of[key]}", where)
            if tuple(entry["replicas"]) != target[key]:
                raise PlanFileError(
                    WAVES_FILE,
                    f"{key[0]}-{key[1]} has replicas {_ids(entry['replicas'])} but {_ids(target[key])} in "
                    f"{REASSIGNMENT_FILE}",
                    f"{where}.replicas",
                )
            wave_of[key] = w + 1
            keys.append(key)
        wave_keys.append(keys)
    if set(target) - set(wave_of):
        raise PlanFileError(
            WAVES_FILE, f"{_first_missing(set(target) - set(wave_of))} of {REASSIGNMENT_FILE} is in no wave"
        )

    summary = docs[SUMMARY_FILE]
    for field, actual, what in (
        ("partitions_changed", len(target), f"partitions in {REASSIGNMENT_FILE}"),
        ("waves", len(wave_keys), f"waves in {WAVES_FILE}"),
    ):
        if summary[field] != actual:
            raise PlanFileError(SUMMARY_FILE, f"{summary[field]} but there are {actual} {what}", f"$.{field}")

    sizes = _read_sizes(Path(snapshot_dir), current, schema) if snapshot_dir is not None else {}
    moves = {
        key: Move(key[0], key[1], target[key], current[key], sizes.get(key, 0))
        for key in target  # reassignment.json's order
    }
    waves = []
    for w, keys in enumerate(wave_keys):
        wave_moves = tuple(moves[k] for k in keys)
        waves.append(Wave(w + 1, wave_moves, sum(m.size_bytes * len(m.adding) for m in wave_moves)))
    return Plan(directory=str(root), moves=tuple(moves.values()), waves=tuple(waves), summary=summary)


# -- before executing -------------------------------------------------------------------------------


def check_plan_current(plan: Plan, state: ClusterState, new_brokers: Iterable[int] = (),
                       not_started: Iterable[int] = ()) -> list[str]:
    """Problems that make ``plan`` stale or unsafe against a fresh snapshot ``state``; [] = OK.

    One line per problem, naming the partition:

    - ``"orders-3: partition no longer exists"`` (topic deleted since the snapshot);
    - ``"orders-3: replicas are now [1, 2, 4], rollback.json has [1, 2, 3] (moved since the
      snapshot)"``: executing would undo someone else's change, and rollback.json would be wrong;
    - ``"orders-3: target brokers [7] are not registered"``: AlterPartitionReassignments refuses
      targets that are not live brokers (Kafka's InvalidReplicaAssignmentException). Brokers in
      ``new_brokers`` (a scale-out's) are named as such: ``"... (new broker 7 not started or not
      registered yet)"``; brokers in ``not_started`` (those a scale-out dry run planned onto without starting them,
      from their server.properties) are not a problem: the dry run moves nothing;
    - ``"orders-3: plan changes the replication factor from 3 to 2 (target [1, 2], current
      [1, 2, 3])"``: a reassignment plan must keep each partition's replica count.
    """
    new = set(new_brokers)
    registered = set(state.broker_ids) | set(not_started)
    live = {(p.topic, p.partition): p for p in state.partitions}
    problems = []
    for m in plan.moves:
        p = live.get(m.key)
        if p is None:
            problems.append(f"{m.name}: partition no longer exists")
            continue
        if p.replicas != m.current:
            problems.append(
                f"{m.name}: replicas are now {_ids(p.replicas)}, {ROLLBACK_FILE} has {_ids(m.current)} "
                "(moved since the snapshot)"
            )
        if len(m.replicas) != len(m.current):
            problems.append(
                f"{m.name}: plan changes the replication factor from {len(m.current)} to {len(m.replicas)} "
                f"(target {_ids(m.replicas)}, current {_ids(m.current)})"
            )
        missing = [b for b in m.replicas if b not in registered]
        if missing:
            text = f"{m.name}: target brokers {_ids(missing)} are not registered"
            fresh = [b for b in missing if b in new]
            if fresh:
                which = f"broker {fresh[0]}" if len(fresh) == 1 else f"brokers {_ids(fresh)}"
                text += f" (new {which} not started or not registered yet)"
            problems.append(text)
    return problems


def reassignment_in_progress(ongoing: Sequence[Mapping[str, Any]]) -> list[str]:
    """Kafka's ongoing reassignments as refusal reasons; [] = none in progress.

    :param ongoing: ``KafkaAdminHook.list_partition_reassignments()`` output (ListPartitionReassignments,
        KIP-455): ``[{"topic", "partition", "replicas", "adding_replicas", "removing_replicas"}]``.
    :returns: ``["orders-3: adding [4], removing [1]", ...]`` in the given order.
    """
    return [
        f"{r['topic']}-{r['partition']}: adding {_ids(r.get('adding_replicas') or [])}, "
        f"removing {_ids(r.get('removing_replicas') or [])}"
        for r in ongoing
    ]
