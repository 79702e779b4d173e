"""A task told to stop from outside stops acting at once.

When a task instance, or its run, is marked success or failed (the UI, the REST API), or the task is cleared while it
runs, Airflow 3's Task SDK supervisor learns it at its next heartbeat ("Server indicated the task shouldn't be
running anymore. Terminating process") and sends the task process SIGTERM, then SIGKILL 5 s later. On SIGTERM the
task runner only calls the operator's ``on_kill()``: no exception reaches the task's code, which would otherwise go
on for those 5 s. Seen on the sandbox before this module: a broker task whose run was marked success passed its gate
after the SIGTERM, took the cluster lock again (released a moment before by the run's teardown), stopped and started
its broker, and was killed holding the lock: no later run could take it.

So ``ClusterOperator.on_kill`` calls :func:`request_stop`; every wait (``runtime.waiting.wait_until``, a roll's
turn and soak) sleeps through :func:`pause`, which wakes at once, and every action's lock check
(``runtime.lock_holding.ensure_held``) calls :func:`check` first: the task raises :class:`TaskStopped` (an
``AirflowTaskTerminated``, a ``BaseException``: no ``except Exception`` of a step takes it for a failure to retry or
report) instead of acting. A command already running on a host finishes (it is not cut in half); the roll's record
says where the node was left, and a resume goes on from there.

One exception: a batch this task has stopped is started again first (:func:`in_flight`, from its stop command until
its start command was sent): a click in the UI must not leave a broker down. Inside it :func:`check` does not raise,
the lock check lets the start through without taking the lock again (the run has ended), and waits poll every
:data:`IN_FLIGHT_POLL_S`; the stop takes effect as the block ends. Best effort within Airflow's 5 s from SIGTERM to
SIGKILL: a task killed before its start command leaves the broker stopped, its record says so, and clearing the run
starts it.

The flag is the task process's own (each task runs in its own process); :func:`reset` clears it (tests).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from airflow.sdk.exceptions import AirflowTaskTerminated

_STOP = threading.Event()
_why: list[str] = []
_in_flight: list[str] = []
#: How often a wait inside :func:`in_flight` looks again once a stop was requested, seconds.
IN_FLIGHT_POLL_S = 0.2


class TaskStopped(AirflowTaskTerminated):
    """The task was told to stop from outside (see the module docstring); the message names what it did not do."""


def request_stop(why: str) -> None:
    """Flag this task process as told to stop (``on_kill``); ``why`` is kept for :class:`TaskStopped`'s message."""
    if not _STOP.is_set():
        _why.append(why)
    _STOP.set()


def requested() -> bool:
    """Whether :func:`request_stop` was called in this process."""
    return _STOP.is_set()


def check(before: str) -> None:
    """Raise :class:`TaskStopped` when a stop was requested.

    :param before: what the task was about to do ("stopping broker 3"), for the message.
    :raises TaskStopped: a stop was requested.
    """
    if _STOP.is_set() and not _in_flight:
        reason = _why[0] if _why else "told to stop"
        raise TaskStopped(f"not {before}: this task was told to stop from outside ({reason})")


def finishing() -> str | None:
    """What an :func:`in_flight` block is bringing back when a stop was requested meanwhile, else None."""
    return _in_flight[-1] if _STOP.is_set() and _in_flight else None


@contextmanager
def in_flight(what: str) -> Iterator[None]:
    """A stop request does not interrupt the block (``what``: "broker 3 stopped by this task"); it takes effect as
    the block ends (:class:`TaskStopped`)."""
    _in_flight.append(what)
    try:
        yield
    finally:
        _in_flight.pop()
    check(f"going on after {what}")


def pause(seconds: float) -> None:
    """Sleep ``seconds``, waking at once when a stop is requested (the caller checks next); inside
    :func:`in_flight` after a stop request, at most :data:`IN_FLIGHT_POLL_S`."""
    if _in_flight and _STOP.is_set():
        time.sleep(min(max(0.0, seconds), IN_FLIGHT_POLL_S))
        return
    _STOP.wait(max(0.0, seconds))


def reset() -> None:
    """Clear the flag (tests; a task process never needs it)."""
    _STOP.clear()
    _why.clear()
    _in_flight.clear()
