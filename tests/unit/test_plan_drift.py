"""``kafka_ops.plan_drift``: where each planned move stands against the live cluster (done, running, to do,
deleted, changed by someone else), and the lines a wave logs about the moves it leaves alone."""

from __future__ import annotations

from kafka_ops.plan_drift import SHOWN, MoveStanding, dropped_lines, keep_earlier_plan, move_standing
from kafka_ops.plan_files import Move

DONE = Move("orders", 0, replicas=(1, 2, 4), current=(1, 2, 3))
RUNNING = Move("orders", 1, replicas=(2, 4, 1), current=(2, 3, 1))
TODO = Move("orders", 2, replicas=(4, 1, 2), current=(3, 1, 2))
DELETED = Move("gone", 0, replicas=(4, 1), current=(3, 1))
CHANGED = Move("payments", 0, replicas=(1, 4), current=(1, 3))


def test_each_move_is_put_where_the_cluster_is() -> None:
    current = {("orders", 0): (1, 2, 4), ("orders", 1): (2, 3, 1, 4), ("orders", 2): (3, 1, 2), ("payments", 0): (1, 5)}
    standing = move_standing([DONE, RUNNING, TODO, DELETED, CHANGED], current, running=[("orders", 1)])
    assert standing == MoveStanding(done=(DONE,), running=(RUNNING,), todo=(TODO,), deleted=(DELETED,),
                                    changed=(CHANGED,))
    assert standing.kept == (DONE, RUNNING, TODO) and standing.dropped == (DELETED, CHANGED)


def test_a_running_partition_is_not_changed_and_a_deleted_one_is_not_running() -> None:
    """A running partition's metadata shows the union of old and new replicas: running, not changed by someone; a
    reassignment of a deleted partition still listed a moment (its topic on its way out) counts as deleted."""
    current = {("orders", 1): (2, 3, 1, 4)}
    standing = move_standing([RUNNING, DELETED], current, running=[("orders", 1), ("gone", 0)])
    assert standing.running == (RUNNING,) and standing.deleted == (DELETED,) and standing.changed == ()


def test_the_replica_order_counts_as_the_plan_wrote_it() -> None:
    """Kafka's replica order is the preferred leader order: the same brokers in another order are not the plan's
    start: someone reordered them (a leader move by hand), and the plan would undo it."""
    current = {("payments", 0): (3, 1)}
    assert move_standing([CHANGED], current).changed == (CHANGED,)


def test_the_lines_name_what_is_left_alone_and_why() -> None:
    current = {("payments", 0): (1, 5)}
    lines = dropped_lines(MoveStanding(deleted=(DELETED,), changed=(CHANGED,)), current)
    assert lines == [
        "1 move not made: gone-0: the partition was deleted since the plan (topic deleted or re-created): nothing to "
        "move",
        "1 move not made: payments-0 (replicas now [1, 5], the plan moves [1, 3] -> [1, 4]): changed by someone else "
        "since the plan (a reassignment by hand, or the topic re-created); moving it would undo that: plan it again "
        "with a new run"]
    assert dropped_lines(MoveStanding(done=(DONE,), todo=(TODO,)), current) == []


def test_many_deleted_partitions_are_counted_past_the_shown_ones() -> None:
    many = tuple(Move("gone", i, replicas=(4,), current=(3,)) for i in range(SHOWN + 3))
    (line,) = dropped_lines(MoveStanding(deleted=many), {})
    assert line.startswith(f"{SHOWN + 3} moves not made: gone-0, gone-1, ") and " and 3 more: the partitions were " \
        "deleted" in line


def test_a_cleared_run_keeps_its_finished_plan() -> None:
    current = {DONE.key: DONE.replicas, TODO.key: TODO.replicas}
    keep, line = keep_earlier_plan([DONE, TODO, DELETED], current)
    assert keep
    assert line == ("an earlier try of this run planned 3 moves (2 at their target, 1 of deleted partitions): all "
                    "made; this try keeps that plan and its snapshot: nothing is moved again")


def test_a_cleared_run_goes_on_with_the_moves_its_plan_has_left() -> None:
    current = {DONE.key: DONE.replicas, RUNNING.key: (2, 3, 1, 4), TODO.key: TODO.current}
    keep, line = keep_earlier_plan([DONE, RUNNING, TODO], current, running=[RUNNING.key])
    assert keep
    assert line == ("an earlier try of this run planned 3 moves (1 at their target, 1 running, 1 to do): this try "
                    "goes on with that plan and its snapshot instead of planning again")


def test_a_plan_someone_else_moved_under_is_made_again() -> None:
    current = {DONE.key: DONE.replicas, CHANGED.key: (1, 5)}
    keep, line = keep_earlier_plan([DONE, CHANGED], current)
    assert not keep
    assert line == ("an earlier try of this run planned 2 moves (1 at their target), but 1 changed by someone else "
                    "since (payments-0): planning again from the cluster as it is")
