"""What the batched-roll DAG tests read from a run: its batches from the roll's Grid labels, and the batch's
preferred-leader elections from the roll's log (both modes)."""

from __future__ import annotations

import re
from collections.abc import Set as AbstractSet


def batches_of(labels: list[str | None]) -> list[list[int]]:
    """Broker ids per batch, in roll order, from ``restart.broker`` labels such as ``"brokers 0, 3 (1/3)"`` or
    ``"broker 2 (3/3) · ..."``. Raises AssertionError on a label of another shape."""
    batches = []
    for label in labels:
        found = re.match(r"brokers? ([\d, ]+) \(", label or "")
        assert found, f"not a batch label: {label!r}"
        batches.append([int(x) for x in found.group(1).split(", ")])
    return batches


def assert_one_election_per_batch(batches: list[list[int]], log: str,
                                  kafka_led: AbstractSet[int] = frozenset()) -> None:
    """Every batch of two or more brokers logged exactly one preferred-leader election of a positive number of
    partitions, and none of its brokers elected on its own. ``kafka_led``: brokers whose preferred leaderships
    Kafka's own controller gave back (a ZooKeeper-mode controller runs its automatic preferred election 5 s after its
    failover, so the batch that restarted the controller can find its leaderships back before the roll looks): a
    batch holding one of them may log no election of its own."""
    for batch in (b for b in batches if len(b) > 1):
        label = ", ".join(map(str, batch))
        elected = re.findall(rf"brokers {label}: elected preferred leaders of (\d+) partitions", log)
        if not elected and kafka_led & set(batch):
            continue
        assert len(elected) == 1 and int(elected[0]) > 0, f"one election for brokers {label} together: {elected}"
        alone = [b for b in batch if f"broker {b}: elected preferred leaders" in log]
        assert alone == [], f"brokers of batch {label} elected on their own: {alone}"
