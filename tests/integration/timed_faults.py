"""Faults timed to a step of a run: :class:`FaultAfterTrigger` waits (in a thread) until a file appears, which a
run's named profile command touches right after its real action (``kafka-service stop && touch <file>``), or
until a condition holds (a reassignment is under way), then applies a fault (``sandbox freeze zookeeper``),
holds it ``hold_s`` seconds (the length of the outage the test is about, not a wait for a condition) and undoes
it (``sandbox thaw zookeeper``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path


class FaultAfterTrigger:
    """``with FaultAfterTrigger(trigger, apply, undo, hold_s) as fault: <run>``: once ``trigger`` exists (a
    path) or returns true (a callable, asked every 0.5 s), ``apply()``, hold ``hold_s`` s, ``undo()`` (also when
    the run ends first: the fault never outlives the block). ``began`` / ``ended`` are the monotonic times of
    apply / undo (None if it never happened); an error of ``apply`` or ``undo`` is raised when the block ends."""

    def __init__(self, trigger: Path | Callable[[], bool], apply: Callable[[], None], undo: Callable[[], None],
                 hold_s: float, deadline_s: float = 600.0) -> None:
        self.trigger, self.apply, self.undo, self.hold_s, self.deadline_s = trigger, apply, undo, hold_s, deadline_s
        self.began: float | None = None
        self.ended: float | None = None
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        deadline = time.monotonic() + self.deadline_s
        ready, pause = ((self.trigger.exists, 0.05) if isinstance(self.trigger, Path) else (self.trigger, 0.5))
        while not ready():
            if self._stop.wait(pause) or time.monotonic() > deadline:
                return
        try:
            self.apply()
        except BaseException as exc:  # noqa: BLE001 - raised in the test's thread by __exit__
            self.error = exc
            return
        self.began = time.monotonic()
        try:
            self._stop.wait(self.hold_s)
        finally:
            try:
                self.undo()
            except BaseException as exc:  # noqa: BLE001 - raised in the test's thread by __exit__
                self.error = exc
            self.ended = time.monotonic()

    def __enter__(self) -> FaultAfterTrigger:
        self._thread.start()
        return self

    def __exit__(self, exc_type: object, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(60)
        if self.error is not None and exc_type is None:
            raise AssertionError(f"the fault could not be applied or undone: {self.error!r}") from self.error

    @property
    def held_s(self) -> float | None:
        """How long the fault was applied (s), None if it never was."""
        return None if self.began is None or self.ended is None else self.ended - self.began
