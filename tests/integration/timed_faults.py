"""Faults timed to a step of a run: :class:`FaultAfterTrigger` waits (in a thread) until a file appears, which a
run's named profile command touches right after its real action (``kafka-service stop && touch <file>``), or
until a condition holds (a reassignment is under way), then applies a fault (``sandbox freeze zookeeper``),
holds it ``hold_s`` seconds (the length of the outage the test is about, not a wait for a condition) and undoes
it (``sandbox thaw zookeeper``). :class:`ThawOnceLogged` freezes and thaws on what the run logs instead (thawed once
the gate named the frozen process)."""

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


class RunWatcher:
    """A thread that acts on what a run logs while it goes on (read off ``capfd``, and ``caplog``): subclasses
    implement :meth:`_run` (with :meth:`_await_logged`) and :meth:`_finish`, which ``__exit__`` calls once the
    thread ended or was given ``join_s`` seconds (undo what the thread left, so no fault outlives the block).
    ``output`` is what was read (``capfd.readouterr().out`` after the block gives the rest)."""

    join_s = 30.0

    def __init__(self, capfd, caplog) -> None:
        self._capfd, self._caplog = capfd, caplog
        self._seen: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def output(self) -> str:
        return "".join(self._seen)

    def _seen_now(self, text: str) -> bool:
        self._seen.append(self._capfd.readouterr().out)
        return text in self.output + self._caplog.text

    def _await_logged(self, text: str, pause_s: float = 0.2) -> bool:
        """Wait until ``text`` shows in the run's output; False when the block ended first."""
        while not self._stop.is_set():
            if self._seen_now(text):
                return True
            self._stop.wait(pause_s)
        return False

    def _run(self) -> None:
        raise NotImplementedError

    def _finish(self) -> None:
        """Called by ``__exit__`` after the thread: undo what it left."""

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(self.join_s)
        self._finish()


class ThawOnceLogged(RunWatcher):
    """A frozen process thawed (``thaw()``, once) by a thread as soon as ``text`` shows in the run's output, read off
    ``capfd`` while the run goes on, then ``settle_s`` later; or after ``timeout_s`` (seconds), or when the body ends,
    whichever comes first. ``output`` is what was read (``output(capfd, caplog)`` after the body gives the rest);
    ``thawed_at`` the epoch seconds of the thaw (None before). With ``freeze=(text, action)`` the process is frozen
    by the thread too, once that text shows (``frozen_at``; never frozen: never thawed), and ``timeout_s`` counts from
    then."""

    def __init__(self, capfd, caplog, text: str, thaw, timeout_s: float, settle_s: float = 0.0,
                 freeze: tuple[str, Callable[[], object]] | None = None) -> None:
        super().__init__(capfd, caplog)
        self._text, self._thaw = text, thaw
        self._timeout_s, self._settle_s, self._freeze = timeout_s, settle_s, freeze
        self._lock = threading.Lock()
        self.thawed_at: float | None = None
        self.frozen_at: float | None = None if freeze else time.time()

    def _run(self) -> None:
        if self._freeze is not None:
            text, freeze = self._freeze
            if not self._await_logged(text):
                return
            freeze()
            self.frozen_at = time.time()
        deadline = time.monotonic() + self._timeout_s
        while not self._stop.is_set() and time.monotonic() < deadline:
            if self._seen_now(self._text):
                self._stop.wait(self._settle_s)
                break
            self._stop.wait(0.5)
        self._thaw_once()

    def _thaw_once(self) -> None:
        with self._lock:
            if self.thawed_at is None and self.frozen_at is not None:
                self.thawed_at = time.time()
                self._thaw()

    def _finish(self) -> None:
        self._thaw_once()
