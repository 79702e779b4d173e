"""Burrow's verdict on a roll's watched consumer groups, with the OK streak the gate needs.

Restarts cause lag spikes, so a broker may be stopped only after Burrow said OK for every group
``lag_ok_consecutive`` polls in a row, the polls at least ``interval_s`` apart (kafka_roller's
consumer_health retries). The streak is also fed while the previous batch waits for its brokers to come
back (registered, caught up, leadership), and carried to the next gate through the roll's record
(``kafka_ops.roll.LagStreak``): those polls are after the disruption began, so they are evidence too, and
the gate does not pay the streak's spacing again. The polls before a batch's stop are not: the streak starts
again when the batch is stopped (:meth:`LagWatch.disruption_begins`).

Burrow's own window counts too: an OK whose window of commits (every partition's last ``storage.intervals``
commits, judged by Burrow's evaluator) spans the streak's time, ``(lag_ok_consecutive - 1) x interval_s``,
since the roll last touched a broker, says what that many OK polls would say (``health.judged_window_s``).
So a first gate on a healthy cluster passes at its first poll instead of waiting out the streak.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from kafka_ops import health
from kafka_ops.health import Verdict
from kafka_ops.roll import LagStreak

log = logging.getLogger(__name__)

#: Seconds a poll made inside another wait (a broker coming back) may take, in one attempt: its OK only adds evidence
#: to a streak, and a Burrow that accepts connections but does not answer must not hold that wait for the hook's
#: retries (``BurrowHook.worst_case_s``: up to 55 s with its defaults, 43 s against one that accepts and is silent).
SIDE_POLL_BUDGET_S = 3.0


class LagWatch:
    """Polls Burrow for ``groups`` at most once per ``interval_s``; keeps the OK streak.

    :param burrow: a ``hooks.burrow.BurrowHook`` (``group_statuses(groups)``).
    :param groups: the watched consumer groups.
    :param interval_s: least seconds between two polls that both count in a streak.
    :param carried: a streak handed over by the previous batch (counted only while fresh).
    :param since_ms: when the roll last stopped, started or judged a broker back (epoch ms), None before its first
        stop: Burrow's window counts only from then (commits before a disruption say nothing about it).
    """

    def __init__(self, burrow: Any, groups: Sequence[str], interval_s: float, carried: LagStreak | None = None,
                 clock: Callable[[], float] = time.time, since_ms: int | None = None) -> None:
        self.burrow = burrow
        self.groups = list(groups)
        self.interval_s = interval_s
        self.clock = clock
        self.since_ms = since_ms
        self.window_s = 0.0  # the last answer's judged window (s), see health.judged_window_s
        now = clock()
        self.streak = carried.carried(int(now * 1000), interval_s) if carried else 0
        self.last_at = carried.at_ms / 1000 if self.streak else None
        self.last: Verdict | None = None

    def due(self) -> bool:
        """True when a poll now would be ``interval_s`` after the last one (or there was none)."""
        return self.last_at is None or self.clock() - self.last_at >= self.interval_s

    def due_in(self) -> float:
        """Seconds until a poll would be :meth:`due` (0.0 when it is now); before then :meth:`ask` asks Burrow
        nothing, so its answer cannot change."""
        if self.last_at is None:
            return 0.0
        return max(0.0, self.interval_s - (self.clock() - self.last_at))

    def poll(self, count: bool = True, budget_s: float | None = None) -> Verdict:
        """Ask Burrow now; OK extends the streak, anything else ends it. ``count=False``: an early look (less than
        ``interval_s`` after the last counted poll) whose OK does not extend the streak but whose judged window
        counts (:meth:`satisfied`); a not-OK answer still ends the streak. ``budget_s``: seconds the asking may take
        in all (``BurrowHook.group_statuses``), None = the hook's timeouts and retries.

        :raises requests.RequestException / ValueError: Burrow could not answer (the streak ends).
        """
        try:
            statuses = self.burrow.group_statuses(self.groups, budget_s=budget_s)
            verdict = health.consumer_lag(statuses)
        except Exception:
            self.streak, self.last_at, self.window_s = 0, None, 0.0
            raise
        self.window_s = health.judged_window_s(statuses, self.since_ms)
        self.last = verdict
        if not verdict.ok:
            self.streak, self.last_at = 0, self.clock()
        elif count:
            self.streak, self.last_at = self.streak + 1, self.clock()
        return verdict

    def poll_if_due(self) -> None:
        """Poll when due, within :data:`SIDE_POLL_BUDGET_S`; a Burrow error or silence only ends the streak (used
        inside other waits, which it must neither fail nor hold)."""
        if self.due():
            try:
                self.poll(budget_s=SIDE_POLL_BUDGET_S)
            except Exception as exc:
                log.info("Burrow did not answer (%s); the lag streak starts again", exc)

    def satisfied(self, needed: int) -> bool:
        """True when the last answer was OK and either ``needed`` OK polls came in a row or Burrow's judged window
        (since ``since_ms``) spans the time they would take, ``(needed - 1) x interval_s``."""
        if self.streak >= needed:  # any answer but OK ends the streak
            return True
        return self.last is not None and self.last.ok and self.window_s >= (needed - 1) * self.interval_s

    def ask(self, needed: int, time_left_s: float | None = None) -> bool:
        """The gate's look: a spaced poll when one is due; else, with only a carried streak short of ``needed``, an
        early look whose judged window may cover the rest (:meth:`poll` ``count=False``). Returns
        :meth:`satisfied`. ``time_left_s``: what is left of the gate's time; once that is less than the hook's
        worst case for the groups (``BurrowHook.worst_case_s`` each: every retry timing out), the poll gets that much
        in one attempt per group (``BurrowHook.budget_within``: at least 1 s in all), so a Burrow that does not answer
        fails the gate at its timeout, not a retry cycle later.

        :raises requests.RequestException / ValueError: Burrow could not answer (the streak ends).
        """
        budget_s = None if time_left_s is None else self.burrow.budget_within(time_left_s, len(self.groups))
        if self.due():
            self.poll(budget_s=budget_s)
        elif self.last is None and not self.satisfied(needed):
            self.poll(count=False, budget_s=budget_s)
        return self.satisfied(needed)

    def describe(self, needed: int) -> str:
        """The gate's line, e.g. ``"consumer-lag: OK (1/3 OK polls in a row; Burrow judged 42.0 s of commits
        OK)"``."""
        verdict = self.last.message() if self.last is not None else "consumer-lag: OK (carried)"
        window = (f"; Burrow judged {self.window_s:.1f} s of commits OK" if self.window_s else "")
        return f"{verdict} ({self.streak}/{needed} OK polls in a row{window})"

    def reset(self) -> None:
        """End the streak (a not-OK cluster look): the next poll starts a new one."""
        self.streak, self.last_at, self.window_s = 0, None, 0.0

    def disruption_begins(self) -> None:
        """The roll is about to stop brokers: the OK polls so far (the gate's, a carried streak) say nothing about
        the lag the stop causes, so the streak starts again and Burrow's window counts only from now. The polls made
        from here on, while the batch comes back, are what the next gate continues (:meth:`handover`)."""
        self.reset()
        self.since_ms = int(self.clock() * 1000)

    def handover(self) -> LagStreak | None:
        """The streak for the next gate, or None when there is none."""
        if not self.streak or self.last_at is None:
            return None
        return LagStreak(self.streak, int(self.last_at * 1000))
