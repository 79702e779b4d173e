"""The SCRAM user of ``up --client-sasl --sasl-mechanism SCRAM-SHA-256|512`` (KIP-84): unlike PLAIN, whose password
sits in the listener's JAAS config, a SCRAM listener checks a salted credential Kafka keeps in its own metadata
(ZooKeeper's ``/config/users`` in ZooKeeper mode, the metadata log in KRaft mode). The sandbox creates it once the
brokers are up, through the PLAINTEXT listener, with AlterUserScramCredentials (KIP-554, Kafka 2.7+; on KRaft
metadata.version 3.5-IV2+) as an operator does with ``kafka-configs --alter --add-config SCRAM-SHA-512=[...]``, and
waits until every broker accepts the login on its client listener: each learns of the credential on its own
(a ZooKeeper change notification, or the metadata log).
"""

from __future__ import annotations

import secrets
import time

from confluent_kafka import KafkaException
from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

from sandbox import controller_request, procs, settings, status
from sandbox.state import SandboxState

_MECHANISMS = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256, "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}


def is_scram(mechanism: str) -> bool:
    """Whether ``mechanism`` (a SASL mechanism name) is one of SCRAM's."""
    return mechanism in _MECHANISMS


def create_user(info: SandboxState, timeout_s: float) -> None:
    """Create ``settings.SASL_USER`` with the sandbox's SASL password for ``info.sasl_mechanism`` (a SCRAM one;
    ``settings.SCRAM_ITERATIONS`` iterations, a random salt) and wait until every active broker accepts that login
    on its client listener.

    Raises:
        ValueError: ``info.sasl_mechanism`` is not a SCRAM mechanism.
        confluent_kafka.KafkaException: Kafka refused the credential (e.g. a KRaft metadata.version before 3.5-IV2),
            or the request still failed transiently after ``timeout_s`` (each try: ``controller_request.ATTEMPT_S``).
        procs.Timeout: a broker still refuses the login after ``timeout_s`` seconds (the last error named).
    """
    if not is_scram(info.sasl_mechanism):
        raise ValueError(f"{info.sasl_mechanism!r} is not a SCRAM mechanism ({sorted(_MECHANISMS)})")
    admin = status.admin_client(info.bootstrap_servers, timeout_s=min(timeout_s, 10.0))
    upsert = UserScramCredentialUpsertion(
        settings.SASL_USER, ScramCredentialInfo(_MECHANISMS[info.sasl_mechanism], settings.SCRAM_ITERATIONS),
        info.sasl_password.encode(), secrets.token_bytes(16))

    def attempt(seconds: float) -> None:
        controller_request.settle(admin.alter_user_scram_credentials([upsert], request_timeout=seconds).values())

    deadline = time.monotonic() + timeout_s
    controller_request.until_done(attempt, admin, timeout_s, f"creating {settings.SASL_USER}'s credential")
    last: dict[int, str] = {}
    waiting = {s.id: s.host for s in info.active_specs}

    def every_broker_accepts() -> bool:
        for broker, host in list(waiting.items()):
            error = login_error(info, f"{host}:{settings.BROKER_CLIENT_PORT}")
            if error is None:
                del waiting[broker]
            else:
                last[broker] = error
        return not waiting

    try:
        procs.wait_for(every_broker_accepts, max(0.0, deadline - time.monotonic()),
                       f"every broker to accept {settings.SASL_USER}'s {info.sasl_mechanism} login", poll_s=0.3)
    except procs.Timeout as exc:
        raise procs.Timeout(f"{exc}: {', '.join(f'broker {b}: {last.get(b)}' for b in sorted(waiting))}") from None


def login_error(info: SandboxState, address: str, password: str | None = None) -> str | None:
    """None when the broker at ``address`` (its client listener) answers a Metadata request after the sandbox
    user's SASL login (``password``: the sandbox's by default), else librdkafka's error. Only that broker is asked
    (no other broker's connection counts); librdkafka retries the login for the call's 3 s."""
    errors: list[str] = []
    conf = {"security.protocol": info.client_listener.protocol, "sasl.mechanism": info.sasl_mechanism,
            "sasl.username": settings.SASL_USER, "sasl.password": info.sasl_password if password is None else password,
            "error_cb": lambda err: errors.append(err.str())}
    conf.update(info.client_ssl_config)
    client = status.admin_client(address, timeout_s=3.0, config=conf)
    try:
        client.list_topics(timeout=3)
    except KafkaException as exc:
        client.poll(0)  # serves error_cb: the authentication error behind the transport failure
        return errors[-1] if errors else str(exc)
    return None
