"""Failures typed by what should happen next (Strimzi's KafkaRoller does the same):

- *transient*: a dependency could not be asked right now (a broker or the controller restarting,
  ZooKeeper paused, Burrow restarting, an SSH connection refused): keep polling until the step's
  deadline, logging the cause;
- *fatal* (:class:`Misconfiguration` and anything not known to be transient): waiting cannot fix it
  (unknown connection, invalid profile, Burrow does not know the cluster, a host key mismatch): fail the
  task at once with the cause.
"""

from __future__ import annotations

import socket

from airflow.sdk.exceptions import AirflowFailException


class Misconfiguration(Exception):
    """The profile, a connection or a dependency's setup is wrong; waiting cannot fix it."""


def _transient_types() -> tuple[type[BaseException], ...]:
    import paramiko
    import requests
    from confluent_kafka import KafkaException
    from hooks.burrow import BurrowError
    from kafka.errors import KafkaError as KafkaPythonError
    from kazoo.exceptions import KazooException
    from kazoo.handlers.threading import KazooTimeoutError

    return (KafkaException, KafkaPythonError, requests.RequestException, BurrowError, KazooException,
            KazooTimeoutError, paramiko.SSHException, paramiko.ssh_exception.NoValidConnectionsError,
            ConnectionError, socket.timeout, TimeoutError, EOFError)


def _fatal_types() -> tuple[type[BaseException], ...]:
    import paramiko

    # subclasses of SSHException that no retry fixes
    return (Misconfiguration, paramiko.BadHostKeyException, paramiko.AuthenticationException)


def is_transient(exc: BaseException) -> bool:
    """True when waiting may fix ``exc`` (see the module docstring)."""
    if isinstance(exc, _fatal_types()):
        return False
    return isinstance(exc, _transient_types())


def describe(exc: BaseException) -> str:
    """``"KafkaException: ..."``: the type and the text, on one line, at most 500 characters."""
    text = " ".join(str(exc).split()) or repr(exc)
    return f"{type(exc).__name__}: {text}"[:500]


class RunRefused(AirflowFailException):
    """The run is refused before anything was touched: params that cannot work (an unknown conf key, a number
    out of range, an unknown broker id, a malformed version), or a cluster or host that is not ready for the
    operation. An ``AirflowFailException`` (no retry); the run's note advises a new run with fixed input
    (``kafka_ops.run_outcome``), since clearing would run the same params again."""


def reason(exc: BaseException) -> str:
    """The one-line reason a failed task gives: the text of a failure we raised on purpose (an
    ``AirflowFailException``: it names its cause), else :func:`describe` (type and text); at most 500
    characters."""
    if isinstance(exc, AirflowFailException):
        return (" ".join(str(exc).split()) or type(exc).__name__)[:500]
    return describe(exc)
