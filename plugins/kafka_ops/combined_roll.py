"""Rolling KRaft combined nodes with the brokers: the quorum leader's batch goes last, decided again at each turn.

A combined node (``process.roles=broker,controller``) is a broker and a voter of the ``__cluster_metadata`` quorum;
the broker roll restarts it (``operators.broker_roll``), at most one voter per batch
(``kafka_ops.batches.plan_batches``). Stopping the quorum leader (the active controller) costs an election of the
whole quorum and every broker's metadata follows the new leader, so, like Strimzi's KafkaRoller and the
controller roll (``kafka_ops.controller_roll.leader_last``), the roll stops the leader only when no other voter
of the roll is left to restart: otherwise the leadership may move onto a voter still to go, which is then
stopped as the leader too.

The plan puts the leader's batch last, but Kafka may move the leadership by itself during the roll (a leader
that misses its followers' fetches for ``controller.quorum.fetch.timeout.ms`` resigns, KIP-996's check-quorum).
So at each batch's turn the roll reads DescribeQuorum again: when the batch whose turn it is holds the current
leader and another batch still to go holds a voter, that batch moves to the end of the roll
(:func:`leader_batch_last`), and a gate that sees its voter become the leader while it waits gives the turn back
(:func:`must_go_later`). A batch the roll already began keeps its place (a resumed task finishes what it began).

Pure: no Airflow, no I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from kafka_ops.roll import batch_label


def leader_batch_last(batches: Sequence[Sequence[int]], position: int, leader_id: int, voters: Collection[int],
                      done: Collection[int] = (), begun: Collection[int] = ()) -> tuple[list[list[int]], str | None]:
    """The roll's batches with the batch at ``position`` moved to the end when it holds the current quorum leader
    and a later batch holds a voter not ``done``; and the reason to log (None when nothing moves).

    :param batches: broker ids in the batches that go down together, in roll order (``RollRecord.batches``).
    :param position: the 0-based batch whose turn it is (the batches before it are done: the roll's turn rule).
    :param leader_id: the quorum leader's node id (DescribeQuorum; -1 = no leader).
    :param voters: the brokers of the roll that are quorum voters too (combined nodes).
    :param done: brokers this roll finished; ``begun``: brokers this roll began but did not finish (stop sent,
        stopped, starting). A begun batch keeps its place, the leader or not.
    :raises ValueError: ``position`` outside the batches.
    """
    groups = [[int(b) for b in batch] for batch in batches]
    if not 0 <= position < len(groups):
        raise ValueError(f"position {position} outside the roll's {len(groups)} batches")
    here = groups[position]
    if leader_id not in here or any(b in begun for b in here):
        return groups, None
    later = sorted(v for batch in groups[position + 1:] for v in batch if v in voters and v not in done)
    if not later:
        return groups, None
    moved = groups[:position] + groups[position + 1:] + [here]
    return moved, (f"broker {leader_id} is the quorum leader now and voters {later} of this roll are still to go: "
                   f"its batch ({batch_label(here)}) goes last, {batch_label(moved[position])} takes position "
                   f"{position + 1}/{len(groups)}; the active controller is never stopped while other voters of the "
                   f"roll remain")


def must_go_later(leader_id: int, stopping: Collection[int], voters: Collection[int],
                  left: Collection[int]) -> str | None:
    """Why a batch must not stop now although its gate could pass: one of the brokers it is about to stop
    (``stopping``) is the quorum leader and voters of the roll are left outside the batch (``left``: brokers of the
    roll not done yet). None when it may go.

    :param leader_id: the quorum leader's node id (DescribeQuorum; -1 = no leader).
    :param voters: the brokers of the roll that are quorum voters too.
    """
    if leader_id not in stopping:
        return None
    others = sorted(v for v in left if v in voters and v not in stopping)
    if not others:
        return None
    return (f"broker {leader_id} became the quorum leader (the active controller) and voters {others} of this roll "
            "remain: its batch goes last")
