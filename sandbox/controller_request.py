"""Admin requests librdkafka sends to "the controller", tried in bounded attempts.

librdkafka sends CreateTopics and AlterUserScramCredentials (among others) to the broker its last Metadata named the
controller, and waits for one to be named when none is. Right after a ZooKeeper-mode sandbox's brokers registered, a
Metadata may come from a broker that has not yet heard from the controller (no controller named), and a KRaft broker
names a random live broker (KIP-590). Given the whole timeout, one try can spend it all "waiting for controller"
(`sandbox up` of 4 ZooKeeper-mode brokers failed so twice, once on CreateTopics, once on the SCRAM user). So each try
is waited for :data:`ATTEMPT_S` at most and, on a transient error, tried again after a fresh Metadata. A controller
answers in milliseconds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterable
from concurrent.futures import Future

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

#: Seconds one try is waited for at most.
ATTEMPT_S = 10.0
#: Seconds between a transient failure and the next try.
RETRY_S = 1.0
#: Errors tried again besides those librdkafka marks retriable: the request timed out (Kafka's REQUEST_TIMED_OUT: a
#: KRaft broker forwards to the active controller, which on a loaded machine may answer after the broker gave up;
#: librdkafka's own _TIMED_OUT, "Failed while waiting for controller" included) or went to a controller that no
#: longer is one; or librdkafka dropped the connection it was sent on (_DESTROY_BROKER, "Broker handle destroyed
#: without termination": the bootstrap address's handle, given up once the metadata names the brokers).
TRANSIENT = frozenset({KafkaError.REQUEST_TIMED_OUT, KafkaError._TIMED_OUT, KafkaError.NOT_CONTROLLER,
                       KafkaError._TRANSPORT, KafkaError._DESTROY_BROKER})

log = logging.getLogger("sandbox.controller_request")


def is_transient(error: KafkaError) -> bool:
    """Whether a request that failed with ``error`` is worth another try (:data:`TRANSIENT`, or librdkafka says so)."""
    return error.retriable() or error.code() in TRANSIENT


def settle(futures: Iterable[Future], ignore: Collection[str] = ()) -> None:
    """Wait for every future of one admin request; when some failed (other than with an error named in ``ignore``,
    e.g. ``TOPIC_ALREADY_EXISTS``), raise a refusal before a transient error.

    Raises:
        KafkaException: the first refusal, else the first transient error.
    """
    errors: list[KafkaException] = []
    for future in futures:
        try:
            future.result()
        except KafkaException as exc:
            if exc.args[0].name() not in ignore:
                errors.append(exc)
    if errors:
        raise next((e for e in errors if not is_transient(e.args[0])), errors[0])


def until_done(attempt: Callable[[float], None], admin: AdminClient, timeout_s: float, what: str) -> None:
    """Call ``attempt(seconds)`` (it sends one request, waits for it ``seconds`` at most, and raises
    ``KafkaException`` when it failed) until it returns; after a transient failure (:func:`is_transient`), wait
    :data:`RETRY_S`, read a fresh Metadata through ``admin`` (it names the controller) and try again, until
    ``timeout_s`` seconds have passed. ``what`` names the request in the log.

    Raises:
        KafkaException: a refusal (not transient), or the last transient failure once ``timeout_s`` passed.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            attempt(max(1.0, min(ATTEMPT_S, deadline - time.monotonic())))
            return
        except KafkaException as exc:
            if not is_transient(exc.args[0]) or time.monotonic() >= deadline:
                raise
            log.info("%s: %s; trying again", what, exc)
        time.sleep(RETRY_S)
        try:
            admin.list_topics(timeout=max(1.0, min(ATTEMPT_S, deadline - time.monotonic())))
        except KafkaException as exc:  # no broker answered that one: the next try says what it finds
            log.info("%s: no fresh Metadata (%s)", what, exc)
