"""Waiting for a condition inside a task: check at once, then every ``interval_s`` until ``timeout_s``.

One loop for every wait of an operation (gate, broker gone, registered, caught up, leadership, final
health, the lock). It runs in the task's own process: no deferral and no reschedule, so the scheduler
races of Airflow 3.3 around deferred and rescheduled tasks (apache/airflow#71172, #72716) cannot fail a
step, at the cost of a worker slot held while the operation runs (as kafka_roller holds one process; a roll holds
two: the acting batch's task and the next one, waiting for its turn).
Transient errors (:mod:`runtime.failures`) are logged and polled through up to the deadline; fatal ones
fail at once. A wait logs at INFO (what it waits for and what is still wrong): waiting is the normal course of an
operation; a person is needed only when the deadline passes, and then the task fails with the reason.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from runtime import stopping
from runtime.failures import describe, is_transient

T = TypeVar("T")


@dataclass(frozen=True)
class Check:
    """One look: ``ok`` and the verdict text (names partitions, brokers, groups).

    ``retry_in_s``: for a failing look that knows when its answer can change next (a lag gate's next counted
    Burrow poll, ``runtime.lag_watch.LagWatch.due_in``), the seconds until then: the wait sleeps that long
    (at most its ``interval_s``) instead of its own pause. None: the wait's own pause."""

    ok: bool
    message: str
    retry_in_s: float | None = None


class WaitTimeout(Exception):
    """The condition was not reached by the deadline; the message names what was still wrong."""


#: A ramping wait (``wait_until``'s ``ramp_from_s``) sleeps at most this fraction of the time it has waited so far
#: (at least ``ramp_from_s``, at most the interval): each look is a cheap read (a Metadata request), and a broker's
#: return is seen at most this fraction late.
RAMP_LATE_FRACTION = 0.25


#: A wait whose checks ran this many seconds or more past its timeout says how long it took in all: one check can
#: outlast the timeout (a service that does not answer is retried by its client, e.g. Burrow's HTTP retries).
OVERRUN_NAMED_S = 1.0


class WaitAborted(Exception):
    """A fatal error while checking (see :mod:`runtime.failures`); the message names the cause."""


def wait_until(
    check: Callable[[], Check],
    *,
    what: str,
    interval_s: float,
    timeout_s: float,
    log: logging.Logger,
    not_yet: str | None = None,
    ramp_from_s: float | None = None,
    ok_line: str = "%s: yes (%s)",
    sleep: Callable[[float], None] = stopping.pause,
    clock: Callable[[], float] = time.monotonic,
) -> Check:
    """Poll ``check`` until it passes; return the passing :class:`Check`.

    :param what: the condition in words, for the log and errors ("broker 3 is back in every ISR").
    :param interval_s: seconds between checks (the first check is immediate).
    :param timeout_s: the absolute deadline, seconds from the call.
    :param not_yet: the sentence for a failing check, logged at INFO before its verdict ("broker 2 may not be
        stopped yet"); None logs "<what>: not yet: <verdict>".
    :param ramp_from_s: for a condition that usually holds within seconds (a broker back after its start),
        sleep this long after a failing check, or :data:`RAMP_LATE_FRACTION` of the time waited so far when that is
        longer, up to ``interval_s``: a condition that comes true while the wait ramps is seen at most a quarter of
        the time waited later (doubling pauses saw it up to as late again: a broker back in its ISRs 1.6 s after
        its start was seen after 3.1 s); None = ``interval_s`` from the start (a condition whose checks must be
        spaced, such as consecutive Burrow polls).
    :param ok_line: the INFO line for the passing check, %-style with ``what`` and the verdict.
    :raises WaitTimeout: not reached by the deadline; names ``what``, the timeout and the last verdict
        (or the last transient error), and the time the wait took when its last check ran
        :data:`OVERRUN_NAMED_S` or more past the timeout.
    :raises WaitAborted: ``check`` raised a fatal error.
    :raises runtime.stopping.TaskStopped: the task was told to stop from outside (checked before every look; the
        default ``sleep`` wakes at once then).
    """
    began = clock()
    deadline = began + timeout_s
    last = "no check yet"
    polls = 0
    while True:
        stopping.check(f"waiting until {what}")
        polls += 1
        pause_hint: float | None = None
        try:
            result = check()
        except Exception as exc:  # typed below: transient -> keep polling, else stop at once
            if not is_transient(exc):
                raise WaitAborted(f"{what}: cannot check: {describe(exc)} (waiting cannot fix this)") from exc
            last = f"could not check: {describe(exc)}"
            log.info("%s: %s; trying again", what, last)
        else:
            if result.ok:
                log.info(ok_line, what, result.message)
                return result
            last = result.message
            if not_yet:
                log.info("%s: %s", not_yet, last)
            else:
                log.info("%s: not yet: %s", what, last)
            pause_hint = result.retry_in_s
        if pause_hint is not None:  # the check knows when its answer can change: no look before, none later
            pause = min(interval_s, max(0.0, pause_hint))
        else:
            pause = interval_s if ramp_from_s is None else min(
                interval_s, max(ramp_from_s, (clock() - began) * RAMP_LATE_FRACTION))
        if clock() + pause > deadline:
            took = clock() - began
            past = (f" [the wait took {took:.0f} s: its last check ran past the timeout]"
                    if took - timeout_s >= OVERRUN_NAMED_S else "")
            raise WaitTimeout(f"gave up after {timeout_s:.0f} s ({polls} checks) waiting until {what}: {last}{past}")
        sleep(pause)


def call_until_answered(
    call: Callable[[], T],
    *,
    what: str,
    interval_s: float,
    timeout_s: float,
    log: logging.Logger,
    sleep: Callable[[float], None] = stopping.pause,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """``call()``'s result, calling again while it raises a transient error (a dependency restarting), up to
    ``timeout_s`` seconds; a fatal error or the deadline raises as in :func:`wait_until`.

    :param what: what is being asked, for the log ("the cluster's metadata").
    :raises WaitTimeout: / :raises WaitAborted: see :func:`wait_until`.
    """
    answer: list[T] = []

    def check() -> Check:
        answer.append(call())
        return Check(True, "")

    wait_until(check, what=what, interval_s=interval_s, timeout_s=timeout_s, log=log, ok_line="%s: answered%s",
               sleep=sleep, clock=clock)
    return answer[-1]
