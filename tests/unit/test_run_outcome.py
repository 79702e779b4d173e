"""The run's closing note (kafka_ops.run_outcome) and the failure each task records (runtime.failure_record)."""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import AirflowFailException
from kafka_ops.plan_files import Move, Plan, Wave
from kafka_ops.run_outcome import (
    NOTE_LIMIT,
    TaskFailure,
    advice,
    first_failure,
    headline,
    note_markdown,
    other_failures,
    outcome_of,
    plan_line,
)
from runtime.failure_record import FAILURE_KEY, failure_record, record_failure
from runtime.failures import RunRefused
from runtime.stopping import TaskStopped

BROKER_1 = TaskFailure("restart.broker", 1, "broker 1 (2/3)", "broker 1: 2 under-replicated partitions", at=20.0)
BROKER_2 = TaskFailure("restart.broker", 2, "broker 2 (3/3)", "", at=None)  # failed from outside


def test_the_outcome_follows_from_the_first_failure() -> None:
    assert outcome_of([]) == "succeeded"
    assert outcome_of([BROKER_1, BROKER_2]) == "failed"
    assert outcome_of([BROKER_2]) == "stopped", "failed from outside: no error recorded"
    told = TaskFailure("restart.broker", 0, "broker 0 (1/3)", "TaskStopped: not going on after a pause of 45.0 s: "
                       "this task was told to stop from outside", stopped=True, at=10.0)
    assert outcome_of([told, BROKER_2]) == "stopped", "it stopped at the mark's SIGTERM: the mark's doing"
    assert headline("stopped", "rolling restart", "c", first_failure([told, BROKER_2]), False).startswith(
        "**Stopped**: rolling restart on c: restart.broker was failed from outside")
    assert outcome_of([told, BROKER_1]) == "stopped" and outcome_of([BROKER_1, TaskFailure(
        "restart.broker", 0, error="TaskStopped: told to stop", stopped=True, at=25.0)]) == "failed", \
        "whichever came first"
    refused = TaskFailure("check_and_lock", error="unknown param 'brokr'; did you mean 'brokers'?", refused=True,
                          at=5.0)
    assert outcome_of([refused]) == "refused"
    later = TaskFailure("run_outcome", error="final health: offline partitions", at=30.0)
    assert first_failure([later, BROKER_2, BROKER_1]) == BROKER_1, "the earliest recorded failure"
    assert first_failure([BROKER_2, TaskFailure("a.b", 0)]).task_id == "a.b", "none recorded: by task and index"
    assert first_failure([]) is None
    assert outcome_of([], unfinished_rolls=["restart"]) == "stopped", "pending tasks skipped by a mark-failed"
    assert headline("stopped", "rolling restart", "c", None, False) == \
        "**Stopped**: rolling restart on c: a roll did not finish (its pending tasks were skipped)"


def test_the_first_line_names_the_task_and_its_reason() -> None:
    assert headline("succeeded", "rolling restart", "kafka_prod", None, False) == \
        "**Succeeded**: rolling restart on kafka_prod"
    assert headline("succeeded", "upgrade", "c", None, True) == \
        "**Succeeded**: upgrade on c (DRY RUN: nothing was touched)"
    assert headline("failed", "rolling restart", "c", BROKER_1, False) == (
        "**Failed**: rolling restart on c: restart.broker[1] (broker 1 (2/3)): broker 1: 2 under-replicated partitions")
    stopped = headline("stopped", "rolling restart", "c", BROKER_2, False)
    assert stopped.startswith("**Stopped**") and ": restart.broker was failed from outside" in stopped
    long = TaskFailure("check_and_lock", error="x" * 1000, refused=True, at=1.0)
    refused = headline("refused", "scale-out", "c", long, False)
    assert refused.startswith("**Refused**: scale-out on c: check_and_lock: xxx")
    assert len(refused) < 400 and refused.endswith("...")


def test_the_advice_fits_the_cause() -> None:
    assert advice("succeeded", "d", "r") is None
    refused = advice("refused", "d", "r")
    assert "trigger a new run" in refused and "clear the failed" not in refused
    failed = advice("failed", "kafka_rolling_restart", "manual__1", [0])
    assert "clear the failed tasks" in failed and "--run-id manual__1 --only-failed" in failed
    assert failed.endswith("brokers [0] are down")
    stopped = advice("stopped", "d", "r")
    assert "clear the whole run" in stopped and "not only failed" in stopped and "--only-failed" not in stopped


def test_other_failures_are_listed_after_the_first() -> None:
    assert other_failures([BROKER_1], BROKER_1) is None
    many = [TaskFailure("t", i) for i in range(8)]
    assert other_failures(many, many[0], limit=3) == "also failed: t[1], t[2], t[3] (+4 more)"


def test_the_note_is_a_markdown_list_under_airflows_limit() -> None:
    note = note_markdown("**Failed**: x", ["cluster c: brokers down [0]", "roll 'restart': done [1]\nof [1, 0]"])
    assert note == "**Failed**: x\n\n- cluster c: brokers down [0]\n- roll 'restart': done [1] of [1, 0]"
    items = [f"roll {i}: " + "y" * 150 for i in range(20)]
    cut = note_markdown("**Failed**: " + "z" * 200, items)
    assert len(cut) <= NOTE_LIMIT
    lines = cut.splitlines()
    assert lines[0].startswith("**Failed**") and lines[1] == ""
    assert all(line.startswith("- ") for line in lines[2:])
    kept = len(lines) - 3
    assert lines[-1] == f"- ({20 - kept} more lines in the log of run_outcome)"
    huge = note_markdown("h" * 5000, ["a"])
    assert len(huge) <= NOTE_LIMIT and huge.splitlines()[0].endswith("...")
    with pytest.raises(ValueError):
        note_markdown("h", ["a"], limit=20)


def test_a_failed_task_records_its_reason_and_whether_it_refused_the_run() -> None:
    assert failure_record(RunRefused("unknown broker ids [77]"), now=1.5) == {
        "error": "unknown broker ids [77]", "refused": True, "stopped": False, "at": 1.5}
    assert failure_record(TaskStopped("told to stop from outside"), now=1.7)["stopped"] is True
    assert failure_record(AirflowFailException("broker 1:\n  not   back"), now=2.0)["error"] == "broker 1: not back"
    assert failure_record(KeyError("x"), now=3.0)["error"] == "KeyError: 'x'"
    assert failure_record(None, now=4.0) == {"error": "", "refused": False, "stopped": False, "at": 4.0}

    pushed: list[tuple[str, dict]] = []

    class Ti:
        def xcom_push(self, key: str, value: dict) -> None:
            pushed.append((key, value))

    record_failure({"ti": Ti(), "exception": RunRefused("no")})
    assert pushed[0][0] == FAILURE_KEY and pushed[0][1]["refused"] is True

    class Broken:
        def xcom_push(self, key: str, value: dict) -> None:
            raise RuntimeError("execution API gone")

    record_failure({"ti": Broken(), "exception": ValueError("v")})  # never raises


def test_the_plan_line_says_what_moves_where_how_far_and_where_the_files_are() -> None:
    moves = (Move("t", 0, (3, 1), (0, 1), size_bytes=600_000_000), Move("t", 1, (2, 3), (2, 0), size_bytes=634_000_000),
             Move("t", 2, (1, 2), (2, 1)))  # a leader swap only: no broker gains or loses a replica
    plan = Plan("/data/run/plan", moves, (Wave(1, moves[:1], 600_000_000), Wave(2, moves[1:], 634_000_000)), {})
    assert plan_line(plan, 1, dry_run=False) == (
        "plan: 3 moves in 2 waves, 1.234 GB; replicas per broker: 0 -2, 3 +2; waves done 1 of 2; "
        "files in /data/run/plan")
    assert plan_line(plan, None, dry_run=False).endswith("0 -2, 3 +2; files in /data/run/plan"), "states unread"
    assert plan_line(plan, 2, dry_run=True).startswith(
        "plan (dry run: nothing moved): 3 moves in 2 waves, 1.234 GB; replicas per broker: 0 -2, 3 +2; "
        "files in"), "a dry run counts no waves"
    swap = Plan("/d", (Move("t", 0, (1, 2), (2, 3)), Move("t", 1, (2, 3), (1, 2))), (), {})
    assert plan_line(swap, None, dry_run=False) == "plan: 2 moves in 0 waves, 0.000 GB; files in /d", \
        "brokers whose count does not change are left out"
    empty = Plan("/d", moves[2:], (Wave(1, moves[2:], 0),), {})
    assert plan_line(empty, 0, dry_run=False) == "plan: 1 move in 1 wave, 0.000 GB; waves done 0 of 1; files in /d"


def test_the_plan_line_names_the_moves_the_waves_left_alone() -> None:
    """Partitions deleted or changed since the plan (``kafka_ops.plan_drift``), as the waves returned them: counted
    once each, sorted, six named."""
    moves = tuple(Move("t", i, (1, 2), (0, 2)) for i in range(9))
    plan = Plan("/d", moves, (Wave(1, moves, 0),), {})
    assert plan_line(plan, 1, dry_run=False, not_moved=["t-1", "t-0"]) == (
        "plan: 9 moves in 1 wave, 0.000 GB; replicas per broker: 0 -9, 1 +9; waves done 1 of 1; 2 moves not made "
        "(deleted or changed since the plan): t-0, t-1; files in /d")
    many = plan_line(plan, 1, dry_run=False, not_moved=[f"t-{i}" for i in range(9)] + ["t-0"])
    assert "; 9 moves not made (deleted or changed since the plan): t-0, t-1, t-2, t-3, t-4, t-5 and 3 more; " in many
