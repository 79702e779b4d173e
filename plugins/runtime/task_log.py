"""What a task's log shows: our own lines, one plain line for a failure raised on purpose, and the libraries' lines
only when they need a person.

- **A deliberate failure is one line.** Every failure we raise on purpose is an ``AirflowFailException`` that names
  its cause (a refusal of params, a gate that timed out, a broker that did not come back). The Task SDK logs any
  failure as ``log.exception("Task failed with exception")``: a traceback through the task runner that says nothing
  the reason does not, and whose first line runs off the log view. :func:`install` adds a structlog processor that
  turns that one event into ``Task failed: <reason>`` at ERROR, without the traceback, for those exceptions only;
  any other exception (a bug) keeps its traceback.
- **Library chatter at WARNING**: kazoo (a connect and a close line per ZooKeeper session), kafka-python (its IO
  loop), paramiko ("Authentication (publickey) successful!") and librdkafka (routed to the ``librdkafka`` logger
  by ``hooks.kafka_admin``) log at INFO what every task does. Their stdlib loggers are set to WARNING unless
  Airflow's ``[logging] namespace_levels`` names them (``kazoo=INFO`` brings kazoo's lines back).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any

from airflow.sdk.exceptions import AirflowFailException, AirflowSensorTimeout

#: The event the Task SDK logs (with ``exc_info``) for every failed task (``task_runner.run``).
TASK_FAILED_EVENT = "Task failed with exception"
#: Library loggers quietened to WARNING (stdlib logger names, a prefix covers its children).
LIBRARY_LOGGERS = ("kazoo", "kafka", "paramiko", "librdkafka")
#: Deliberate failures: they name their cause, their traceback adds nothing.
DELIBERATE = (AirflowFailException, AirflowSensorTimeout)


def _exception(exc_info: Any) -> BaseException | None:
    """The exception behind a structlog ``exc_info`` value (True: the one being handled; a tuple; an instance)."""
    if exc_info is True:
        return sys.exc_info()[1]
    if isinstance(exc_info, tuple) and len(exc_info) == 3:
        return exc_info[1]
    return exc_info if isinstance(exc_info, BaseException) else None


def plain_deliberate_failure(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) \
        -> MutableMapping[str, Any]:
    """structlog processor: the Task SDK's "Task failed with exception" event for a :data:`DELIBERATE` exception
    becomes ``Task failed: <its text on one line>`` without ``exc_info`` (no traceback); every other event, and
    that event for any other exception, passes unchanged."""
    if event_dict.get("event") != TASK_FAILED_EVENT or not event_dict.get("exc_info"):
        return event_dict
    exc = _exception(event_dict["exc_info"])
    if isinstance(exc, DELIBERATE):
        event_dict.pop("exc_info")
        event_dict["event"] = f"Task failed: {' '.join(str(exc).split()) or type(exc).__name__}"
    return event_dict


def namespace_levels(value: str | None) -> dict[str, str]:
    """``[logging] namespace_levels`` (``"kazoo=INFO paramiko=DEBUG"``, pairs separated by spaces or commas) as
    ``{logger name: level name}``; malformed pairs are left out (Airflow logs them itself)."""
    pairs = (part.split("=", 1) for part in (value or "").replace(",", " ").split() if "=" in part)
    return {name.strip(): level.strip().upper() for name, level in pairs if name.strip() and level.strip()}


def quiet_libraries(asked: dict[str, str] | None = None) -> None:
    """Set each of :data:`LIBRARY_LOGGERS` to WARNING, or to the level ``asked`` (default: Airflow's
    ``[logging] namespace_levels``) names for it."""
    if asked is None:
        try:
            from airflow.sdk.configuration import conf

            asked = namespace_levels(conf.get("logging", "namespace_levels", fallback=None))
        except Exception:  # noqa: BLE001 - no Airflow config (a plain script): defaults
            asked = {}
    for name in LIBRARY_LOGGERS:
        level = logging.getLevelName(asked.get(name, "WARNING"))
        logging.getLogger(name).setLevel(level if isinstance(level, int) else logging.WARNING)


def install() -> None:
    """Quieten the libraries and put :func:`plain_deliberate_failure` first in structlog's processor chain (the
    Task SDK configures structlog before it imports the DAG; its loggers share the configured list). Idempotent;
    does nothing to the chain when structlog keeps no list (a configuration this module does not know)."""
    quiet_libraries()
    import structlog

    processors = structlog.get_config().get("processors")
    if isinstance(processors, list) and plain_deliberate_failure not in processors:
        processors.insert(0, plain_deliberate_failure)



def on_execute(_context: Any) -> None:
    """``on_execute_callback`` of every task of an operation (``operations.operation_dag``): :func:`install` in the
    task's own process, before its ``execute``."""
    install()
