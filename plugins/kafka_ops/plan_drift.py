"""Where each move of a reassignment plan stands against the live cluster, hours after the plan was made.

A plan (``kafka_ops.plan_files``) names each partition's replicas when it was made (``current``, rollback.json) and
its target (``replicas``). A wave that starts later finds each of its partitions in one of five places:

- **done**: at its target already (this run moved it before a resume);
- **running**: a reassignment of it is in progress (this run started it before a resume);
- **to do**: still at the plan's start: the wave moves it;
- **deleted**: the partition no longer exists (its topic deleted, or re-created with fewer partitions, since the
  plan): there is nothing to move and nothing to throttle. Kafka deletes a topic's configs with it, the throttled
  replicas lists included, and removes a reassignment of a deleted partition itself (the KRaft controller drops it
  with the topic; a ZooKeeper-mode controller skips a partition that does not exist). Cruise Control's executor
  skips them the same way;
- **changed**: its replicas are neither the plan's start nor its target: someone else moved it (a reassignment by
  hand) or re-created its topic (perhaps with another replication factor) since the plan. Moving it to the plan's
  target would undo their change, and might change the replication factor: it is not moved, and named (a new run
  plans it from where it is).

Pure: no Airflow, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kafka_ops.cluster import ClusterState
from kafka_ops.plan_files import Move

#: Partitions named per group in a log line; the rest are counted.
SHOWN = 12


@dataclass(frozen=True)
class MoveStanding:
    """A wave's moves split by where the cluster is (see the module docstring); each keeps the plan's order.

    :param done: at their target. :param running: a reassignment of them in progress.
    :param todo: at the plan's start: to be moved. :param deleted: partitions that no longer exist.
    :param changed: replicas neither the plan's start nor its target (moved or re-created by someone else).
    """

    done: tuple[Move, ...] = ()
    running: tuple[Move, ...] = ()
    todo: tuple[Move, ...] = ()
    deleted: tuple[Move, ...] = ()
    changed: tuple[Move, ...] = ()

    @property
    def kept(self) -> tuple[Move, ...]:
        """The moves the wave still owns (done, running or to do), in the plan's order of each group."""
        return self.done + self.running + self.todo

    @property
    def dropped(self) -> tuple[Move, ...]:
        """The moves the wave leaves alone: deleted or changed since the plan."""
        return self.deleted + self.changed


def replicas_now(state: ClusterState) -> dict[tuple[str, int], tuple[int, ...]]:
    """``(topic, partition) -> replicas`` of every partition of ``state`` (the ``current`` of :func:`move_standing`)."""
    return {(p.topic, p.partition): tuple(p.replicas) for p in state.partitions}


def move_standing(moves: Iterable[Move], current: Mapping[tuple[str, int], Sequence[int]],
                  running: Iterable[tuple[str, int]] = ()) -> MoveStanding:
    """Split ``moves`` by the live cluster.

    :param moves: a wave's (or a whole plan's) moves.
    :param current: ``(topic, partition) -> replicas`` now (the live metadata; a partition absent = deleted).
    :param running: ``(topic, partition)`` of the reassignments in progress (ListPartitionReassignments). A running
        partition shows the union of its old and new replicas in the metadata, so it is judged running, not
        changed. A running move of a partition that no longer exists counts as deleted.
    :returns: a :class:`MoveStanding`.
    """
    busy = set(running)
    groups: dict[str, list[Move]] = {"done": [], "running": [], "todo": [], "deleted": [], "changed": []}
    for move in moves:
        now = current.get(move.key)
        if now is None:
            groups["deleted"].append(move)
        elif move.key in busy:
            groups["running"].append(move)
        elif tuple(now) == move.replicas:
            groups["done"].append(move)
        elif tuple(now) == move.current:
            groups["todo"].append(move)
        else:
            groups["changed"].append(move)
    return MoveStanding(**{k: tuple(v) for k, v in groups.items()})


def _names(moves: Sequence[Move], limit: int = SHOWN) -> str:
    shown = ", ".join(m.name for m in moves[:limit])
    return shown + (f" and {len(moves) - limit} more" if len(moves) > limit else "")


def dropped_lines(standing: MoveStanding, current: Mapping[tuple[str, int], Sequence[int]]) -> list[str]:
    """What a wave leaves alone and why, one line per group (none when it leaves nothing):

    ``"6 moves not made: doomed-0, doomed-1, ...: the partitions were deleted since the plan (their topic deleted
    or re-created): nothing to move"``; ``"1 move not made: orders-3 (replicas now [1, 2, 4], the plan moves
    [1, 2, 3] -> [1, 2, 5]): changed by someone else since the plan (a reassignment by hand, or the topic
    re-created); moving it would undo that: plan it again with a new run"``.
    """
    lines = []
    if standing.deleted:
        n = len(standing.deleted)
        lines.append(f"{n} move{'' if n == 1 else 's'} not made: {_names(standing.deleted)}: the partition"
                     f"{'' if n == 1 else 's'} {'was' if n == 1 else 'were'} deleted since the plan (topic deleted or "
                     "re-created): nothing to move")
    if standing.changed:
        n = len(standing.changed)
        shown = "; ".join(f"{m.name} (replicas now {list(current.get(m.key, ()))}, the plan moves {list(m.current)} "
                          f"-> {list(m.replicas)})" for m in standing.changed[:SHOWN])
        more = f" and {n - SHOWN} more" if n > SHOWN else ""
        lines.append(f"{n} move{'' if n == 1 else 's'} not made: {shown}{more}: changed by someone else since the "
                     "plan (a reassignment by hand, or the topic re-created); moving it would undo that: plan it "
                     "again with a new run")
    return lines


def keep_earlier_plan(moves: Sequence[Move], current: Mapping[tuple[str, int], Sequence[int]],
                      running: Iterable[tuple[str, int]] = ()) -> tuple[bool, str]:
    """Whether a run cleared whole (the UI's "Clear Run", after a failure or on a run that succeeded) goes on with the
    plan an earlier try of it made, instead of snapshotting and planning again.

    An earlier try's plan is this run's own work: its moves at their target were made by the run, its running
    reassignments were started by it. Planning again from the cluster as that try left it would move partitions the
    run never meant to move (a finished scale-out's plan evens out the bytes written since, a few moves each time
    it is cleared), and a reassignment the earlier try left running could be refused as "another reassignment in
    progress" by a new plan that does not list its partition. So the plan is kept while it fits: every move done,
    running, to do, or of a partition deleted since (the waves leave those alone). One move changed by someone else
    since the plan (its replicas neither the plan's start nor its target) means the cluster moved under the run: it
    plans again from the cluster as it is.

    :param moves: the earlier try's plan (``kafka_ops.plan_files.load_plan(...).moves``).
    :param current: ``(topic, partition) -> replicas`` now (:func:`replicas_now`).
    :param running: ``(topic, partition)`` of the reassignments in progress (ListPartitionReassignments).
    :returns: ``(keep, line)``: the line says what the plan holds and what this try does, for the task's log.
    """
    standing = move_standing(moves, current, running)
    counts = ", ".join(f"{len(group)} {name}" for name, group in
                       (("at their target", standing.done), ("running", standing.running),
                        ("to do", standing.todo), ("of deleted partitions", standing.deleted)) if group)
    told = f"an earlier try of this run planned {len(moves)} moves" + (f" ({counts})" if counts else "")
    if standing.changed:
        return False, (f"{told}, but {len(standing.changed)} changed by someone else since ({_names(standing.changed)})"
                       ": planning again from the cluster as it is")
    if not standing.todo and not standing.running:
        return True, f"{told}: all made; this try keeps that plan and its snapshot: nothing is moved again"
    return True, f"{told}: this try goes on with that plan and its snapshot instead of planning again"
