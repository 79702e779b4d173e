"""What the Grid view shows of a running mapped task: its label (``rendered_map_index``).

Airflow renders ``map_index_template`` when the task starts and again when it ends; in between
:func:`show_step` replaces the label with the broker's current step ("broker 3 · 2/6 · caught up?"), so
the Grid shows where a roll is without a task per step. The label goes back to the template's text when
the task ends.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

log = logging.getLogger(__name__)


class _LabelSender:
    """Sends Grid labels from a thread of its own: :func:`show_step` with ``wait=False`` returns at once and the
    thread sends the newest label (labels set meanwhile are skipped: only the last one is seen anyway). A label is
    one request from the supervisor to Airflow's API server, 0.02-0.1 s on loaded cores, sent about eight times a
    batch between a roll's steps. :meth:`flush` waits until nothing is left to send; a task must call it before it
    ends (Airflow sends the task's final label with its state, and a later label would replace it)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._pending: tuple[Any, str] | None = None
        self._busy = False
        self._thread: threading.Thread | None = None

    def put(self, comms: Any, label: str) -> None:
        with self._cond:
            self._pending = (comms, label)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="grid-label", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._pending is None:
                    self._cond.wait()
                (comms, label), self._pending, self._busy = self._pending, None, True
            try:
                comms.send(msg=_message(label))
            except Exception as exc:  # noqa: BLE001 - the label is cosmetic
                log.debug("could not update the Grid label to %r: %s", label, exc)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Wait until every label put was sent (at most ``timeout_s`` seconds); True when so."""
        with self._cond:
            return self._cond.wait_for(lambda: self._pending is None and not self._busy, timeout=timeout_s)


def _message(label: str) -> Any:
    from airflow.sdk.execution_time.comms import SetRenderedMapIndex

    return SetRenderedMapIndex(rendered_map_index=label)


_SENDER = _LabelSender()


def flush_labels(timeout_s: float = 5.0) -> bool:
    """Wait until the labels :func:`show_step` sent without waiting have reached the supervisor (at most ``timeout_s``
    seconds; True when so): called before a task ends."""
    return _SENDER.flush(timeout_s)


def _shared_safely(comms: Any) -> bool:
    """Whether ``comms`` may be used from a second thread: the task process's channel to its supervisor
    (``CommsDecoder``, which locks each request) may; ``dag.test``'s in-process one may not (it removes
    ``task_runner.SUPERVISOR_COMMS`` while it answers a request, and its answers queue is shared)."""
    from airflow.sdk.execution_time.comms import CommsDecoder

    return isinstance(comms, CommsDecoder)


def show_step(context: Any, label: str, wait: bool = True) -> None:
    """Set the running task instance's Grid label to ``label`` (at most 250 characters). Best effort: a
    runtime without the Task SDK supervisor (unit tests) just logs it. ``wait=False``: sent from a thread of its own
    (:class:`_LabelSender`), the caller goes on at once and must call :func:`flush_labels` before its task ends;
    sent at once all the same where the channel cannot be shared between threads (``dag.test``)."""
    label = label[:250]
    ti = context.get("ti")
    try:
        from airflow.sdk.execution_time import task_runner
        from airflow.sdk.execution_time.comms import SetRenderedMapIndex

        comms = getattr(task_runner, "SUPERVISOR_COMMS", None)
        if ti is None or comms is None or getattr(ti, "map_index", -1) < 0:
            return
        ti.rendered_map_index = label
        if wait or not _shared_safely(comms):
            comms.send(msg=SetRenderedMapIndex(rendered_map_index=label))
        else:
            _SENDER.put(comms, label)
    except Exception as exc:  # the label is cosmetic: never fail a step for it
        log.debug("could not update the Grid label to %r: %s", label, exc)
