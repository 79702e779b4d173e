"""The lag gate's Burrow watch: OK streaks, and Burrow's own window of commits standing for the streak
(``runtime.lag_watch``, ``kafka_ops.health.judged_window_s``)."""

from __future__ import annotations

import pytest
from hooks.burrow import parse_status_response
from kafka_ops.health import ConsumerGroupStatus, judged_window_s
from runtime.lag_watch import LagWatch

NOW_MS = 1_700_000_000_000


def lag_answer(group: str, status: str = "OK", windows=((0, 40_000),), complete: float = 1.0) -> dict:
    """A Burrow /lag body: one partition per (start, end) window, ms before NOW_MS."""
    parts = [{"topic": "orders", "partition": i, "status": "OK", "current_lag": 0,
              "start": {"offset": 10, "timestamp": NOW_MS - start, "lag": 0},
              "end": {"offset": 90, "timestamp": NOW_MS - end, "lag": 0}, "complete": 1.0}
             for i, (start, end) in enumerate(windows)]
    return {"error": False, "message": "consumer status returned",
            "status": {"cluster": "sandbox", "group": group, "status": status, "complete": complete,
                       "partitions": parts, "partition_count": len(parts), "maxlag": None, "totallag": 0}}


def window(start_ago_s: float, end_ago_s: float) -> tuple[int, int]:
    return int(start_ago_s * 1000), int(end_ago_s * 1000)


class FakeBurrow:
    """Answers each poll with the next scripted list of statuses (the last repeats)."""

    def __init__(self, *answers: list[ConsumerGroupStatus]) -> None:
        self.answers = list(answers)
        self.polls = 0

    def group_statuses(self, groups, budget_s=None):
        self.polls += 1
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


class Clock:
    def __init__(self) -> None:
        self.now = NOW_MS / 1000

    def __call__(self) -> float:
        return self.now


def status(body: dict) -> ConsumerGroupStatus:
    return parse_status_response(body["status"]["group"], 200, body)


def test_the_common_window_is_the_latest_start_to_the_earliest_end_of_every_partition() -> None:
    parsed = status(lag_answer("billing", windows=[window(50, 2), window(30, 5)]))
    assert parsed.window == (NOW_MS - 30_000, NOW_MS - 5_000) and parsed.complete == 1.0
    assert parsed.window_s() == 25.0
    assert parsed.window_s(since_ms=NOW_MS - 10_000) == 5.0, "only the commits after a disruption count"
    assert parsed.window_s(since_ms=NOW_MS) == 0.0


def test_a_status_answer_listing_only_troubled_partitions_has_no_window() -> None:
    body = lag_answer("billing", windows=[window(50, 2), window(30, 5)])
    body["status"]["partitions"] = body["status"]["partitions"][:1]  # /status: fewer than partition_count
    assert status(body).window is None and status(body).window_s() == 0.0


def test_an_incomplete_window_is_not_judged() -> None:
    """Burrow rates a partition with fewer than ``storage.intervals`` commits OK without judging it."""
    parsed = status(lag_answer("billing", windows=[window(60, 0)], complete=0.5))
    assert parsed.window_s() == 0.0


def test_the_judged_window_of_several_groups_is_the_shortest_and_nothing_unless_all_are_ok() -> None:
    long_ok = status(lag_answer("a", windows=[window(60, 0)]))
    short_ok = status(lag_answer("b", windows=[window(12, 1)]))
    warn = status(lag_answer("c", status="WARN", windows=[window(60, 0)]))
    assert judged_window_s([long_ok, short_ok]) == 11.0
    assert judged_window_s([long_ok, warn]) == 0.0
    assert judged_window_s([]) == 0.0


def test_a_first_ok_whose_window_spans_the_streak_satisfies_the_gate_at_once() -> None:
    burrow = FakeBurrow([status(lag_answer("billing", windows=[window(40, 1)]))])
    watch = LagWatch(burrow, ["billing"], interval_s=5, clock=Clock())
    watch.poll()
    assert watch.streak == 1 and watch.window_s == 39.0
    assert watch.satisfied(3), "39 s of commits judged OK cover 3 polls 5 s apart (10 s)"
    assert watch.satisfied(8) and not watch.satisfied(9), "8 polls 5 s apart take 35 s, 9 take 40 s"
    assert "1/9 OK polls in a row; Burrow judged 39.0 s of commits OK" in watch.describe(9)


def test_a_window_from_before_the_rolls_last_action_counts_only_from_it() -> None:
    burrow = FakeBurrow([status(lag_answer("billing", windows=[window(40, 1)]))],
                        [status(lag_answer("billing", windows=[window(40, -4)]))])  # 5 s later: a newer commit
    clock = Clock()
    watch = LagWatch(burrow, ["billing"], interval_s=5, clock=clock, since_ms=NOW_MS - 6_000)
    watch.poll()
    assert watch.window_s == 5.0 and not watch.satisfied(3), "5 s since the last stop do not cover 10 s"
    clock.now += 5
    watch.poll()
    assert watch.window_s == 10.0 and watch.streak == 2 and watch.satisfied(3), "10 s since the stop: enough"


def test_a_not_ok_answer_ends_the_streak_and_the_window() -> None:
    ok = status(lag_answer("billing", windows=[window(40, 1)]))
    bad = status(lag_answer("billing", status="WARN", windows=[window(40, 1)]))
    clock = Clock()
    watch = LagWatch(FakeBurrow([ok], [bad]), ["billing"], interval_s=5, clock=clock)
    watch.poll()
    clock.now += 5
    watch.poll()
    assert watch.streak == 0 and watch.window_s == 0.0 and not watch.satisfied(1)


def test_without_window_information_the_streak_alone_decides() -> None:
    plain = ConsumerGroupStatus("billing", "OK")  # e.g. an answer without start/end timestamps
    clock = Clock()
    watch = LagWatch(FakeBurrow([plain]), ["billing"], interval_s=5, clock=clock)
    for polls in range(1, 4):
        watch.poll()
        assert watch.satisfied(3) == (polls == 3)
        clock.now += 5


def test_a_burrow_error_ends_streak_and_window() -> None:
    class Down:
        def group_statuses(self, groups, budget_s=None):
            raise OSError("connection refused")

    watch = LagWatch(Down(), ["billing"], interval_s=5, clock=Clock())
    with pytest.raises(OSError):
        watch.poll()
    assert watch.streak == 0 and watch.window_s == 0.0 and not watch.satisfied(1)


def test_an_early_look_counts_burrows_window_but_not_as_a_poll_of_the_streak() -> None:
    """A gate that starts with a streak carried from the plan a moment ago looks at Burrow at once: the look's
    window can meet the gate, but the look is too close to the carried poll to extend the streak."""
    from kafka_ops.roll import LagStreak

    clock = Clock()
    long_window = status(lag_answer("billing", windows=[window(13, 0)]))
    watch = LagWatch(FakeBurrow([long_window]), ["billing"], interval_s=5, clock=clock,
                     carried=LagStreak(1, NOW_MS - 300))
    assert watch.streak == 1 and not watch.due() and not watch.satisfied(3)
    assert watch.ask(3) and watch.streak == 1, "the early look: 13 s judged OK cover 3 polls 5 s apart"
    assert watch.burrow.polls == 1

    short_window = status(lag_answer("billing", windows=[window(4, 0)]))
    early = LagWatch(FakeBurrow([short_window]), ["billing"], interval_s=5, clock=clock,
                     carried=LagStreak(2, NOW_MS - 300))
    early.poll(count=False)
    assert early.streak == 2 and not early.satisfied(3), "4 s of window and 2 spaced polls: not yet"

    warn = status(lag_answer("billing", status="WARN", windows=[window(13, 0)]))
    bad = LagWatch(FakeBurrow([warn]), ["billing"], interval_s=5, clock=clock, carried=LagStreak(2, NOW_MS - 300))
    bad.poll(count=False)
    assert bad.streak == 0 and not bad.satisfied(1), "a not-OK early look ends the streak"


def test_due_in_says_when_the_next_counted_poll_comes_and_nothing_is_asked_before() -> None:
    """A gate short of its streak looks again when :meth:`LagWatch.due_in` says (``runtime.waiting.Check.retry_in_s``):
    until then ``ask`` asks Burrow nothing, so its answer cannot change; a carried streak counts from its last poll."""
    from kafka_ops.roll import LagStreak

    plain = ConsumerGroupStatus("billing", "OK")
    clock = Clock()
    burrow = FakeBurrow([plain])
    carried = LagStreak(2, int(clock.now * 1000) - 1_500)
    watch = LagWatch(burrow, ["billing"], interval_s=5, clock=clock, carried=carried)
    assert watch.streak == 2 and watch.due_in() == pytest.approx(3.5)
    assert not watch.ask(3) and burrow.polls == 1, "one early look (its window could cover the rest): it does not"
    assert watch.due_in() == pytest.approx(3.5), "an early look does not count: still from the carried poll"
    clock.now += 2
    assert not watch.ask(3) and burrow.polls == 1, "not due: Burrow is not asked again"
    clock.now += 1.5
    assert watch.due_in() == 0.0 and watch.ask(3) and burrow.polls == 2
    assert watch.due_in() == pytest.approx(5.0), "the next counted poll is a whole interval after this one"
    assert LagWatch(burrow, ["billing"], interval_s=5, clock=clock).due_in() == 0.0, "no poll yet: due now"


def test_the_gate_polls_within_its_time_left_and_side_polls_within_their_budget() -> None:
    from hooks.burrow import LAST_TRY_MIN_S, BurrowHook
    from runtime import lag_watch

    class Slow(BurrowHook):
        """The real hook's budget rule (its default timeouts and retries: 55.2 s a request at worst); the answers
        faked."""

        budgets: list = []

        def group_statuses(self, groups, budget_s=None):
            Slow.budgets.append(budget_s)
            return [status(lag_answer("billing"))]

    clock = Clock()
    hook = Slow(base_url="http://burrow:8000", cluster="sandbox")
    assert hook.worst_case_s == pytest.approx(4 * (3.05 + 10) + 0.5 * 2 + 0.5 * 4)
    watch = LagWatch(hook, ["billing"], interval_s=5, clock=clock)
    watch.ask(3, time_left_s=600)  # far from the deadline: the hook's own retries
    clock.now += 5
    watch.ask(3, time_left_s=12.5)  # nearer than a retry cycle: one attempt, what is left
    clock.now += 5
    watch.ask(3, time_left_s=0.2)  # at the deadline: one short last try
    clock.now += 5
    watch.poll_if_due()  # inside another wait: never longer than the side budget
    assert Slow.budgets == [None, 12.5, LAST_TRY_MIN_S, lag_watch.SIDE_POLL_BUDGET_S]
    # three groups: three retry cycles must fit in what is left
    Slow.budgets.clear()
    watch = LagWatch(hook, ["billing", "audit", "search"], interval_s=5, clock=clock)
    watch.ask(3, time_left_s=100)
    assert Slow.budgets == [100]


def test_the_streak_starts_again_at_a_stop_and_only_the_polls_after_it_are_handed_over() -> None:
    """The gate's own OK polls before a batch's stop say nothing about the lag the stop causes: once the batch is
    stopped (``disruption_begins``) the streak starts again and Burrow's window counts from then; the next gate
    continues only the polls made while the batch came back. (Before: the gate's streak ran on through the stop,
    so the next broker's gate passed at its first look however many OK polls were asked for.)"""
    ok = status(lag_answer("billing", windows=[window(40, 1)]))
    clock = Clock()
    watch = LagWatch(FakeBurrow([ok]), ["billing"], interval_s=5, clock=clock)
    for _ in range(4):
        watch.poll()
        clock.now += 5
    assert watch.streak == 4 and watch.handover().polls == 4
    watch.disruption_begins()
    assert watch.streak == 0 and watch.handover() is None and watch.due(), "the first poll after the stop is due"
    assert watch.since_ms == int(clock.now * 1000)
    clock.now += 3
    watch.poll()
    assert watch.streak == 1 and watch.window_s == 0.0, "commits from before the stop do not count"
    assert not watch.satisfied(3)
    streak = watch.handover()
    assert streak.polls == 1 and streak.at_ms == int(clock.now * 1000)
