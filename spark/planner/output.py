"""Plan files (docs/architecture.md, "Planner files"), the summary and the chart."""

from __future__ import annotations

import functools
import json
import os

import numpy as np

from planner.balance import distinct_racks, lower_bound_moved, rack_indexes
from planner.snapshot import Snapshot

#: JSON Schema (draft 2020-12) of every plan file, shared with the DAGs (``kafka_ops.plan_files``).
SCHEMA_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plan_files.schema.json")
#: Output file -> the ``$defs`` entry of :data:`SCHEMA_FILE` it must match.
OUTPUT_DEFS = {
    "reassignment.json": "reassignment",
    "rollback.json": "reassignment",
    "waves.json": "waves",
    "summary.json": "summary",
}


class PlanOutputError(RuntimeError):
    """A document the planner was about to write does not match :data:`SCHEMA_FILE`.

    A planner bug, not bad input (the CLI does not turn it into exit status 2): nothing is written.
    """


def _schema_inlined(schema: dict) -> dict:
    """``schema`` with each ``{"$ref": "#/$defs/x"}`` replaced by a copy of ``$defs/x`` (``jsonref``; same meaning,
    but jsonschema then validates about 2.5 times faster: resolving a $ref costs more than checking the keywords
    behind it, and reassignment documents list tens of thousands of partitions). Only references inside the file are
    followed.

    Raises:
        jsonref.JsonRefError: a reference to another document, or to nothing.
    """
    import jsonref

    def local_only(uri: str):
        raise ValueError(f"{SCHEMA_FILE}: a $ref to another document ({uri}): only #/$defs/... is supported")

    return jsonref.replace_refs(schema, proxies=False, lazy_load=False, loader=local_only)


@functools.cache
def _validator(definition: str):
    """The compiled validator of ``$defs/<definition>`` (schema read and checked once per process)."""
    from jsonschema import Draft202012Validator

    with open(SCHEMA_FILE, encoding="utf-8") as f:
        schema = json.load(f)
    Draft202012Validator.check_schema(schema)
    if definition not in schema["$defs"]:
        raise KeyError(f"{SCHEMA_FILE}: no $defs/{definition}")
    return Draft202012Validator(_schema_inlined(schema)["$defs"][definition])


def _path_key(error) -> tuple:
    """Sort key of a jsonschema error by where it is: list indexes numerically, keys by name."""
    return tuple((0, x, "") if isinstance(x, int) else (1, 0, str(x)) for x in error.absolute_path)


def validate_output(name: str, doc) -> None:
    """Check one output document (``name`` a key of :data:`OUTPUT_DEFS`) against the schema.

    Raises PlanOutputError naming the file, the JSON path of the first problem and the number of
    problems found.
    """
    from jsonschema.exceptions import best_match

    definition = OUTPUT_DEFS[name]
    errors = list(_validator(definition).iter_errors(doc))
    if not errors:
        return
    errors.sort(key=_path_key)  # the first problem in document order (list positions numerically)
    err = best_match(e for e in errors if e.absolute_path == errors[0].absolute_path)
    more = f" ({len(errors) - 1} more problems)" if len(errors) > 1 else ""
    raise PlanOutputError(
        f"planner bug: {name} does not match $defs/{definition} of {os.path.basename(SCHEMA_FILE)}: "
        f"{err.json_path}: {err.message[:300]}{more}; nothing was written"
    )


def reassignment_doc(snap: Snapshot, replicas: np.ndarray, parts) -> dict:
    """Kafka's reassignment JSON for the partitions ``parts`` (indexes), replicas as broker ids."""
    items = []
    for p in sorted(parts, key=lambda i: (snap.topics[i], int(snap.partitions[i]))):
        row = [int(snap.broker_ids[b]) for b in replicas[p] if b >= 0]
        items.append({"topic": snap.topics[p], "partition": int(snap.partitions[p]), "replicas": row})
    return {"version": 1, "partitions": items}


def per_broker(replicas: np.ndarray, sizes: np.ndarray, nb: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bytes, replica count, preferred-leader count) per broker index for an assignment."""
    valid = replicas >= 0
    owners = replicas[valid]
    size_rep = np.broadcast_to(sizes[:, None], replicas.shape)[valid]
    nbytes = np.bincount(owners, weights=size_rep.astype(np.float64), minlength=nb)
    count = np.bincount(owners, minlength=nb)
    leaders = np.bincount(replicas[:, 0], minlength=nb)
    return nbytes.round().astype(np.int64), count, leaders


def lower_bound_parts(snap: Snapshot, kept: np.ndarray, drained: np.ndarray) -> dict:
    """The lower bound on bytes copied and its parts (bytes, floats); see :func:`lower_bound_bytes`.

    ``{"bytes", "drained_bytes", "fill_bytes", "rack_forced_bytes"}`` from
    :func:`planner.balance.lower_bound_moved` with the planner's per-broker targets.
    """
    rack_aware = bool(snap.racks) and snap.racks[0] is not None
    rack_idx = rack_indexes(snap.racks) if rack_aware else np.full(len(kept), -1, dtype=np.int32)
    return lower_bound_moved(snap.sizes, snap.replicas, kept, drained, rack_idx)


def lower_bound_bytes(snap: Snapshot, kept: np.ndarray, drained: np.ndarray) -> int:
    """Bytes any plan must copy to reach the byte targets (int; summary.json ``lower_bound_bytes``).

    Without racks, or with racks that stay even, this is ``max(bytes on drained brokers, sum over
    kept brokers of max(0, mean_after - bytes_before))``: every replica off a drained broker is
    copied, and every kept broker is filled up to the mean. With racks the targets are the rack-aware
    ones (:func:`planner.balance.rack_targets`: the mean unless uneven racks force a rack above or
    below it), and the rack-diversity rule adds the copies it forces: removed replicas that may only
    enter some racks (RF 3 in 3 racks: their own), while another rack must grow (see
    :func:`planner.balance.lower_bound_moved` for the derivation; ``rack_forced_bytes`` in
    :func:`lower_bound_parts`). Plans stopping within the balance tolerance may copy slightly less.
    """
    return int(round(lower_bound_parts(snap, kept, drained)["bytes"]))


def rack_violations(snap: Snapshot, replicas: np.ndarray, brokers_mask: np.ndarray) -> int:
    """Partitions spanning fewer than min(RF, racks among ``brokers_mask``) racks (0 without racks)."""
    if not snap.racks or snap.racks[0] is None:
        return 0
    rack_idx = rack_indexes(snap.racks)
    nracks = len(set(rack_idx[brokers_mask].tolist()))
    needed = np.minimum((replicas >= 0).sum(axis=1), nracks)
    return int((distinct_racks(replicas, rack_idx) < needed).sum())


def skew(values: np.ndarray) -> float:
    """``1 + max over brokers |load / mean - 1|`` (1.0 = perfectly even; 0 mean counts as even).

    Unlike max/mean this also sees an under-filled broker (a new broker left at 0.8 of the mean gives
    1.2). Used for bytes, replica counts and preferred-leader counts alike.
    """
    values = np.asarray(values, dtype=np.float64)
    mean = values.mean() if len(values) else 0.0
    return float(1.0 + np.abs(values / mean - 1.0).max()) if mean > 0 else 1.0


def summarize(
    snap: Snapshot,
    new: np.ndarray,
    kept: np.ndarray,
    drained: np.ndarray,
    mode: str,
    brokers,
    waves: list,
    notes: list,
    options: dict | None = None,
    weighting: str = "bytes",
    rack_bound: dict | None = None,
) -> dict:
    """The ``summary.json`` document.

    Holds ``replica_moves`` (replicas placed on a broker that did not hold one of the partition),
    ``partitions_changed`` (listed in reassignment.json, reorders included), ``leader_changes``,
    ``bytes_moved`` (bytes copied), ``lower_bound_bytes`` (see :func:`lower_bound_bytes`) and
    ``lower_bound_parts`` (its ``drained_bytes``, ``fill_bytes``, ``rack_forced_bytes``),
    ``moved_over_lower_bound``; skews (see :func:`skew`: ``1 + max |load / mean - 1|``) of bytes,
    replicas and preferred leaders over the brokers before (all, ``skew_before``) and after (kept,
    ``skew_after`` and the same three as ``byte_skew``, ``replica_skew``, ``leader_skew``);
    ``weighting`` (``"bytes"``, or ``"replica-count (no partition sizes known)"`` when every size is
    0 or absent); ``rack_bound`` (the balance uneven racks allow, see
    :func:`planner.balance._rack_bound`; None without racks); rack violations before/after, the waves'
    sizes, notes, and ``brokers``: per broker id ``bytes_before/after``, ``replicas_before/after``,
    ``leaders_before/after`` (bytes in bytes).
    """
    orig = snap.replicas
    nb = len(kept)
    b0, c0, l0 = per_broker(orig, snap.sizes, nb)
    b1, c1, l1 = per_broker(new, snap.sizes, nb)
    changed = np.nonzero((orig != new).any(axis=1))[0]
    moves = 0
    moved_bytes = 0
    for p in changed.tolist():
        gain = len({int(b) for b in new[p] if b >= 0} - {int(b) for b in orig[p] if b >= 0})
        moves += gain
        moved_bytes += gain * int(snap.sizes[p])
    parts = lower_bound_parts(snap, kept, drained)
    lb = int(round(parts["bytes"]))
    everyone = np.ones(nb, dtype=bool)
    wave_bytes = []
    for w in waves:
        wb = 0
        for p in w:
            gain = {int(b) for b in new[p] if b >= 0} - {int(b) for b in orig[p] if b >= 0}
            wb += len(gain) * int(snap.sizes[p])
        wave_bytes.append(wb)
    return {
        "mode": mode,
        "brokers_requested": [int(b) for b in brokers],
        "options": options or {},
        "partitions": int(len(orig)),
        "replica_moves": moves,
        "partitions_changed": int(len(changed)),
        "leader_changes": int((orig[:, 0] != new[:, 0]).sum()),
        "bytes_moved": moved_bytes,
        "lower_bound_bytes": lb,
        "lower_bound_parts": {k: int(round(v)) for k, v in parts.items() if k != "bytes"},
        "moved_over_lower_bound": (moved_bytes / lb) if lb else None,
        "total_bytes": int(b0.sum()),
        "mean_bytes_after": float(b1[kept].mean()),
        "skew_before": {"bytes": skew(b0), "replicas": skew(c0), "leaders": skew(l0)},
        "skew_after": {"bytes": skew(b1[kept]), "replicas": skew(c1[kept]), "leaders": skew(l1[kept])},
        "byte_skew": skew(b1[kept]),
        "replica_skew": skew(c1[kept]),
        "leader_skew": skew(l1[kept]),
        "weighting": weighting,
        "rack_bound": rack_bound,
        "rack_violations_before": rack_violations(snap, orig, everyone),
        "rack_violations_after": rack_violations(snap, new, kept),
        "waves": len(waves),
        "wave_bytes": wave_bytes,
        "notes": list(notes),
        "brokers": {
            str(int(snap.broker_ids[i])): {
                "rack": snap.racks[i],
                "kept": bool(kept[i]),
                "bytes_before": int(b0[i]),
                "bytes_after": int(b1[i]),
                "replicas_before": int(c0[i]),
                "replicas_after": int(c1[i]),
                "leaders_before": int(l0[i]),
                "leaders_after": int(l1[i]),
            }
            for i in range(nb)
        },
    }


def write_chart(path: str, summary: dict) -> None:
    """PNG bar chart of GiB per broker before and after, with the mean after as a dashed line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gib = float(1 << 30)
    ids = list(summary["brokers"])
    before = [summary["brokers"][i]["bytes_before"] / gib for i in ids]
    after = [summary["brokers"][i]["bytes_after"] / gib for i in ids]
    x = np.arange(len(ids))
    fig, ax = plt.subplots(figsize=(max(8.0, min(40.0, 0.25 * len(ids))), 4.5))
    ax.bar(x - 0.2, before, width=0.4, label="before")
    ax.bar(x + 0.2, after, width=0.4, label="after")
    ax.axhline(summary["mean_bytes_after"] / gib, color="black", linewidth=0.8, linestyle="--", label="mean after")
    if len(ids) <= 60:
        ax.set_xticks(x, ids, rotation=90, fontsize=7)
    ax.set_xlabel("broker id")
    ax.set_ylabel("GiB")
    lb = summary["lower_bound_bytes"]
    ratio = f", {summary['bytes_moved'] / lb:.3f} x lower bound" if lb else ""
    ax.set_title(
        f"{summary['mode']}: {summary['bytes_moved'] / gib:,.1f} GiB moved{ratio}\n"
        f"{summary['replica_moves']} replica moves, byte skew {summary['skew_after']['bytes']:.3f}",
        fontsize=10,
    )
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=3, fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_outputs(out_dir: str, snap: Snapshot, new: np.ndarray, waves: list, summary: dict) -> dict:
    """Write reassignment.json, rollback.json, waves.json, summary.json and balance.png into out_dir.

    Returns {name: path}. reassignment.json lists exactly the changed partitions with their new
    replicas (first = preferred leader); rollback.json lists the same partitions with their current
    replicas, so ``--execute`` on it undoes the plan.

    Every JSON document is first checked against plan_files.schema.json (:func:`validate_output`);
    a mismatch raises PlanOutputError before any file is written.
    """
    changed = np.nonzero((snap.replicas != new).any(axis=1))[0].tolist()
    docs = {
        "reassignment.json": reassignment_doc(snap, new, changed),
        "rollback.json": reassignment_doc(snap, snap.replicas, changed),
        "waves.json": [reassignment_doc(snap, new, w) for w in waves],
        "summary.json": summary,
    }
    for name, doc in docs.items():
        validate_output(name, doc)
    os.makedirs(out_dir, exist_ok=True)
    paths = {}
    for name, doc in docs.items():
        path = os.path.join(out_dir, name)
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1 if name == "summary.json" else None)
            f.write("\n")
        os.replace(tmp, path)
        paths[name] = path
    chart = os.path.join(out_dir, "balance.png")
    write_chart(chart, summary)
    paths["balance.png"] = chart
    return paths
