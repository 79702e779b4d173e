"""Batched rolling restarts: how many batches each batching rule needs, and a modelled roll time.

    .venv/bin/python bench/batch_sizes.py                    # per-batch time 60 s, max_parallel 30
    .venv/bin/python bench/batch_sizes.py --per-batch-s 240 --max-parallel 10

Synthetic clusters (brokers ``0..n-1`` on racks ``r<id % 3>``, RF 3, every partition in sync and led by
its first replica, controller = broker 7, restart order = ``restart_order``: by id, controller last):

- ``rack-aware``: each partition's 3 replicas on the 3 racks, one broker per rack picked at random
  (what Kafka's rack-aware assignment guarantees); 30 brokers / 10,000 partitions and 60 brokers /
  20,000 partitions, ``min.insync.replicas`` 2;
- for contrast, the 30-broker cluster with ``min.insync.replicas`` 1 (Kafka's default) and with
  rack-unaware placement (3 random brokers per partition).

Methods: ``serial`` = ``plan_batches(max_parallel=1)`` (today's roll, one broker per batch);
``disjoint`` = ``disjoint_batches`` (brokers sharing no partition, pinterest/orion and Strimzi's
proposal); ``ours rack`` / ``ours none`` = ``plan_batches`` with ``batch_by="rack"`` / ``"none"``
(the joint min-ISR + leader-candidate rule). All but serial with ``--max-parallel`` (default 30).

Columns: batches; sizes (run-length: ``1x30`` = thirty batches of one broker; in ``disjoint`` the last ``1``
is the controller, alone and last as Strimzi and orion roll it; ``ours`` puts it last in the last batch it
fits, stopped after its batch-mates); roll = batches x ``--per-batch-s``, a model, not a measurement (it
assumes a batch of 10 brokers takes as long as a batch of one: stop, start and catch-up run in parallel; in
practice catch-up grows with the replicas the batch must re-sync); speedup = serial roll / this roll; plan s = planning
seconds (the cluster's construction excluded).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "plugins"))

from kafka_ops.batches import Batch, can_stop_together, disjoint_batches, plan_batches  # noqa: E402
from kafka_ops.cluster import Broker, ClusterState, Partition  # noqa: E402
from kafka_ops.restart_plan import restart_order  # noqa: E402

RACKS = 3
RF = 3
CONTROLLER = 7

SCENARIOS = [
    # name, brokers, partitions, min.insync.replicas, rack-aware placement
    ("30 brokers, 10k, min ISR 2", 30, 10_000, 2, True),
    ("60 brokers, 20k, min ISR 2", 60, 20_000, 2, True),
    ("30 brokers, 10k, min ISR 1", 30, 10_000, 1, True),
    ("30 brokers, 10k, min ISR 2, rack-unaware", 30, 10_000, 2, False),
    ("30 brokers, 10k, min ISR 1, rack-unaware", 30, 10_000, 1, False),
]


def synthetic_cluster(n_brokers: int, n_partitions: int, min_isr: int, rack_aware: bool, seed: int) -> ClusterState:
    """RF 3 over ``n_brokers`` brokers on 3 racks, all in sync; see the module docstring."""
    rng = random.Random(seed)
    by_rack = [[b for b in range(n_brokers) if b % RACKS == r] for r in range(RACKS)]
    parts = []
    for i in range(n_partitions):
        if rack_aware:
            replicas = [rng.choice(by_rack[r]) for r in rng.sample(range(RACKS), RF)]
        else:
            replicas = rng.sample(range(n_brokers), RF)
        parts.append(Partition(f"topic{i % 20}", i // 20, replicas[0], tuple(replicas), tuple(replicas)))
    brokers = tuple(Broker(b, f"kafka-{b}", 9092, f"r{b % RACKS}") for b in range(n_brokers))
    return ClusterState(brokers, tuple(parts), controller_id=CONTROLLER, default_min_insync=min_isr)


def run_length(sizes: list[int]) -> str:
    """``[1, 1, 1]`` -> ``"1x3"``, ``[10, 9, 10, 1]`` -> ``"10,9,10,1"``."""
    out: list[str] = []
    k = 0
    while k < len(sizes):
        j = k
        while j < len(sizes) and sizes[j] == sizes[k]:
            j += 1
        out.append(f"{sizes[k]}x{j - k}" if j - k > 1 else str(sizes[k]))
        k = j
    return ",".join(out)


def main(argv=None) -> int:
    """CLI; see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-batch-s", type=float, default=60.0, help="modelled seconds per batch (default 60)")
    ap.add_argument("--max-parallel", type=int, default=30, help="max brokers per batch (default 30)")
    ap.add_argument("--seed", type=int, default=1, help="placement seed (default 1)")
    ap.add_argument("--verify", action="store_true", help="check every batch with can_stop_together (slow)")
    args = ap.parse_args(argv)
    if args.per_batch_s <= 0 or args.max_parallel < 1:
        ap.error("--per-batch-s must be > 0 and --max-parallel >= 1")

    print(
        f"# per batch {args.per_batch_s:g} s, max_parallel {args.max_parallel}, RF {RF}, {RACKS} racks, "
        f"controller {CONTROLLER}, seed {args.seed}"
    )
    header = (
        f"{'cluster':42} {'method':11} {'batches':>7} {'sizes':28} {'roll s':>8} {'roll min':>8} "
        f"{'speedup':>7} {'plan s':>6}"
    )
    print(header)
    print("-" * len(header))
    for name, n_brokers, n_partitions, min_isr, rack_aware in SCENARIOS:
        state = synthetic_cluster(n_brokers, n_partitions, min_isr, rack_aware, args.seed)
        order = restart_order(state.broker_ids, state.controller_id)
        methods = [
            ("serial", lambda s=state, o=order: plan_batches(s, o, 1)),
            ("disjoint", lambda s=state, o=order: disjoint_batches(s, o, args.max_parallel)),
            ("ours rack", lambda s=state, o=order: plan_batches(s, o, args.max_parallel, "rack")),
            ("ours none", lambda s=state, o=order: plan_batches(s, o, args.max_parallel, "none")),
        ]
        serial_s = None
        label = name
        for method, plan in methods:
            started = time.monotonic()
            batches: list[Batch] = plan()
            seconds = time.monotonic() - started
            roll = len(batches) * args.per_batch_s
            serial_s = roll if serial_s is None else serial_s
            sizes = run_length([len(b.broker_ids) for b in batches])
            unsafe = ""
            if args.verify:
                bad = sum(1 for b in batches if can_stop_together(state, b.broker_ids))
                unsafe = f"  ({bad} batches fail can_stop_together)" if bad else "  (all pass can_stop_together)"
            print(
                f"{label:42} {method:11} {len(batches):7d} {sizes:28} {roll:8.0f} {roll / 60:8.1f} "
                f"{serial_s / roll:6.2f}x {seconds:6.2f}{unsafe}"
            )
            label = ""
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
