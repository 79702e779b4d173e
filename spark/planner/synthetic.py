"""Generated clusters for tests and benchmarks, and Kafka's default assignor as a reference.

:func:`kafka_default_assignment` reimplements Kafka's ``AdminUtils.assignReplicasToBrokers``
(rack-unaware and rack-aware variants): what topic creation and
``kafka-reassign-partitions --generate`` use to lay out a topic from a random start.
"""

from __future__ import annotations

import json
import os

import numpy as np


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def rack_alternated(brokers: list, racks: dict) -> list:
    """Kafka's getRackAlternatedBrokerList: one broker per rack in turn (racks and brokers sorted)."""
    by_rack: dict = {}
    for b in sorted(brokers):
        by_rack.setdefault(racks[b], []).append(b)
    names = sorted(by_rack)
    out, i = [], 0
    while len(out) < len(brokers):
        for r in names:
            if i < len(by_rack[r]):
                out.append(by_rack[r][i])
        i += 1
    return out


def kafka_default_assignment(
    brokers: list,
    racks: dict | None,
    n_partitions: int,
    rf: int,
    rng: np.random.Generator,
    start: int | None = None,
    shift: int | None = None,
) -> list:
    """Replica lists for one topic as Kafka assigns them (``AdminUtils.assignReplicasToBrokers``).

    Args:
        brokers: broker ids to use.
        racks: broker id -> rack, or None for the rack-unaware variant.
        n_partitions, rf: the topic's partition count and replication factor (rf <= len(brokers)).
        rng: random source for the start index and replica shift (Kafka picks them at random).

    Returns a list of replica lists (broker ids, first = preferred leader).
    """
    n = len(brokers)
    start = int(rng.integers(n)) if start is None else start
    shift = int(rng.integers(n)) if shift is None else shift
    out = []
    if not racks:
        order = list(brokers)
        for p in range(n_partitions):
            if p > 0 and p % n == 0:
                shift += 1
            first = (p + start) % n
            reps = [order[first]] + [order[_replica_index(first, shift, j, n)] for j in range(rf - 1)]
            out.append(reps)
        return out
    arranged = rack_alternated(brokers, racks)
    nracks = len(set(racks[b] for b in brokers))
    for p in range(n_partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        leader = arranged[first]
        reps = [leader]
        with_rack = {racks[leader]}
        k = 0
        for _ in range(rf - 1):
            while True:
                b = arranged[_replica_index(first, shift * nracks, k, n)]
                k += 1
                if (racks[b] not in with_rack or len(with_rack) == nracks) and (
                    b not in reps or len(reps) == n
                ):
                    reps.append(b)
                    with_rack.add(racks[b])
                    break
        out.append(reps)
    return out


def generate_cluster(
    n_brokers: int,
    n_partitions: int,
    new_brokers: int = 0,
    racks: int = 3,
    rf_choices=(2, 3),
    skew: float = 0.0,
    size_sigma: float = 0.8,
    topic_sigma: float = 1.2,
    mean_size: float = 1e8,
    seed: int = 0,
):
    """A cluster laid out by Kafka's default assignor, with heavy-tailed partition sizes.

    Args:
        n_brokers: brokers holding data; ``new_brokers`` more are added empty (ids after them).
        n_partitions: total partitions (topics of 1 to 64 partitions).
        racks: number of racks (brokers spread round-robin; 0 = no rack information).
        rf_choices: replication factors drawn per topic.
        skew: fraction of topics created while only the first two thirds of the brokers existed,
            which leaves those brokers heavier (0 = none).
        size_sigma: log-normal sigma of partition sizes within a topic (key skew).
        topic_sigma: log-normal sigma of per-topic size scale (throughput differs a lot by topic);
            sizes are log-normal with sigma ``hypot(size_sigma, topic_sigma)`` overall, a heavy tail.
        mean_size: scale of sizes in bytes.

    Returns (brokers, partitions) in the snapshot formats (list of dicts each).
    """
    rng = np.random.default_rng(seed)
    total = n_brokers + new_brokers
    rack_names = [f"rack-{chr(97 + i)}" for i in range(racks)] if racks else []
    brokers = [
        {
            "id": i,
            "rack": rack_names[i % racks] if racks else None,
            "host": f"kafka-{i}.example",
            "port": 9092,
        }
        for i in range(total)
    ]
    old = list(range(n_brokers))
    rack_of = {b["id"]: b["rack"] for b in brokers} if racks else None
    parts = []
    t = 0
    sizes_choices = np.array([1, 3, 6, 8, 12, 16, 24, 32, 48, 64])
    while len(parts) < n_partitions:
        count = int(min(rng.choice(sizes_choices), n_partitions - len(parts)))
        rf = int(rng.choice(rf_choices))
        use = old[: max(rf, (2 * n_brokers) // 3)] if rng.random() < skew else old
        scale = mean_size * rng.lognormal(0.0, topic_sigma)
        lay = kafka_default_assignment(use, rack_of, count, rf, rng)
        sizes = scale * rng.lognormal(0.0, size_sigma, size=count)
        for p in range(count):
            parts.append(
                {"topic": f"topic-{t:05d}", "partition": p, "replicas": lay[p], "size_bytes": int(sizes[p])}
            )
        t += 1
    return brokers, parts


def write_snapshot(directory: str, brokers: list, partitions: list) -> str:
    """Write brokers.json and partitions.jsonl into ``directory``; returns it."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "brokers.json"), "w", encoding="utf-8") as f:
        json.dump(brokers, f)
    with open(os.path.join(directory, "partitions.jsonl"), "w", encoding="utf-8") as f:
        for rec in partitions:
            f.write(json.dumps(rec, separators=(",", ":")) + "\n")
    return directory
