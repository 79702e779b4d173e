"""The planner tests' oracle: a plan read back from its files and a checker of every plan rule.

The checker reads the written files (not the planner's internals) and recomputes everything from the
snapshot: what an operator running ``kafka-reassign-partitions --execute`` would get.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter


class Checked:
    """A plan read back from its files, with the before/after state per broker."""

    def __init__(self, snapshot_dir: str, out_dir: str):
        with open(os.path.join(snapshot_dir, "brokers.json")) as f:
            self.brokers = {b["id"]: b.get("rack") for b in json.load(f)}
        self.before = {}
        self.sizes = {}
        with open(os.path.join(snapshot_dir, "partitions.jsonl")) as f:
            for line in f:
                if line.strip():
                    rec = json.loads(line)
                    key = (rec["topic"], rec["partition"])
                    self.before[key] = list(rec["replicas"])
                    self.sizes[key] = rec.get("size_bytes") or 0
        self.docs = {}
        for name in ("reassignment.json", "rollback.json", "waves.json", "summary.json"):
            with open(os.path.join(out_dir, name)) as f:
                self.docs[name] = json.load(f)
        self.plan = {
            (p["topic"], p["partition"]): p["replicas"] for p in self.docs["reassignment.json"]["partitions"]
        }
        self.after = dict(self.before)
        self.after.update(self.plan)
        self.summary = self.docs["summary.json"]

    def load(self, assignment, kind):
        out = Counter({b: 0 for b in self.brokers})
        for key, reps in assignment.items():
            for i, b in enumerate(reps):
                if kind == "bytes":
                    out[b] += self.sizes[key]
                elif kind == "replicas":
                    out[b] += 1
                elif i == 0:
                    out[b] += 1
        return out

    def skew(self, kind, brokers, assignment=None):
        """``1 + max over brokers |load / mean - 1|``: sees under-filled brokers as well as full ones."""
        values = [self.load(self.after if assignment is None else assignment, kind)[b] for b in brokers]
        mean = sum(values) / len(values)
        return 1 + max(abs(v / mean - 1) for v in values) if mean else 1.0

    def moved(self):
        moves = nbytes = 0
        for key, reps in self.plan.items():
            gain = set(reps) - set(self.before[key])
            moves += len(gain)
            nbytes += len(gain) * self.sizes[key]
        return moves, nbytes


def check_rules(c: Checked, kept: set, leaders_balanced: bool = True) -> None:
    """Assert every rule a plan keeps (see the issue): the tests' common oracle.

    ``leaders_balanced=False`` skips the preferred-leader cap, for plans whose replica placement is
    limited by caps (a broker can only lead partitions it holds).
    """
    racks_kept = {c.brokers[b] for b in kept}
    rack_aware = None not in racks_kept
    for key, reps in c.after.items():
        before = c.before[key]
        assert len(reps) == len(before), f"{key}: replication factor changed"
        assert len(set(reps)) == len(reps), f"{key}: two replicas on one broker"
        assert set(reps) <= kept, f"{key}: replica outside the kept brokers {reps}"
        if rack_aware:
            spans_before = len({c.brokers[b] for b in before})
            spans_after = len({c.brokers[b] for b in reps})
            assert spans_after >= min(len(reps), len(racks_kept)), f"{key}: racks crowded {reps}"
            assert spans_after >= spans_before, f"{key}: rack diversity lost"
    # only changed partitions are listed; rollback holds exactly their current replicas
    for key, reps in c.plan.items():
        assert reps != c.before[key], f"{key} listed but unchanged"
    rollback = {(p["topic"], p["partition"]): p["replicas"] for p in c.docs["rollback.json"]["partitions"]}
    assert rollback.keys() == c.plan.keys()
    for key, reps in rollback.items():
        assert reps == c.before[key]
    # waves, applied in order, reach the plan; each partition in exactly one wave
    state = dict(c.before)
    seen = set()
    for wave in c.docs["waves.json"]:
        assert wave["version"] == 1
        for p in wave["partitions"]:
            key = (p["topic"], p["partition"])
            assert key not in seen
            seen.add(key)
            state[key] = p["replicas"]
    assert state == c.after
    # preferred leaders balanced: no kept broker leads more than ceil(P / K)
    leaders = c.load(c.after, "leaders")
    cap = math.ceil(len(c.after) / len(kept))
    if leaders_balanced:
        assert max(leaders[b] for b in kept) <= cap
    # the summary tells the truth
    moves, nbytes = c.moved()
    s = c.summary
    assert s["replica_moves"] == moves
    assert s["bytes_moved"] == nbytes
    assert s["partitions_changed"] == len(c.plan)
    loads = {
        (when, kind): c.load(assignment, kind)
        for when, assignment in (("before", c.before), ("after", c.after))
        for kind in ("bytes", "replicas", "leaders")
    }
    for b in c.brokers:
        per = s["brokers"][str(b)]
        for (when, kind), load in loads.items():
            assert per[f"{kind}_{when}"] == load[b], (b, kind, when)
    # skews as the issue defines them: 1 + max |load / mean - 1| over the kept brokers
    for field, kind in (("byte_skew", "bytes"), ("replica_skew", "replicas"), ("leader_skew", "leaders")):
        assert abs(s[field] - c.skew(kind, kept)) <= 1e-9, field
        assert s["skew_after"][{"byte_skew": "bytes", "replica_skew": "replicas"}.get(field, "leaders")] == s[field]
    sized = any(c.sizes.values())
    assert s["weighting"] == ("bytes" if sized else "replica-count (no partition sizes known)")
    # the lower bound: every drained byte, the fill of the brokers below their targets (the mean, or
    # the rack bound's targets when racks are uneven) and the copies the racks force on top
    bb = c.load(c.before, "bytes")
    drained = set(c.brokers) - kept
    drained_bytes = sum(bb[b] for b in drained)
    bound, parts = s["rack_bound"], s["lower_bound_parts"]
    if bound is not None and sized:
        target = {b: bound["racks"][c.brokers[b]]["target_bytes_per_broker"] for b in kept}
        assert abs(bound["lower_bound_bytes"] - s["lower_bound_bytes"]) <= 1
    else:
        target = dict.fromkeys(kept, sum(bb.values()) / len(kept))
    fill = sum(max(0.0, target[b] - bb[b]) for b in kept)
    assert abs(parts["drained_bytes"] - drained_bytes) <= 1
    assert abs(parts["fill_bytes"] - fill) <= len(kept)  # targets in the rack bound are rounded
    lb = max(parts["drained_bytes"], parts["fill_bytes"]) + parts["rack_forced_bytes"]
    assert abs(s["lower_bound_bytes"] - lb) <= 2
    assert parts["rack_forced_bytes"] >= 0
    if not rack_aware:
        assert parts["rack_forced_bytes"] == 0
