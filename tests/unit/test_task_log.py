"""What a task's log shows (runtime.task_log, hooks.kafka_admin.LibrdkafkaLog): a deliberate failure as one plain
ERROR line through a real structlog chain, a bug with its traceback, library loggers at WARNING unless asked."""

from __future__ import annotations

import io
import json
import logging

import pytest
import structlog
from airflow.sdk.exceptions import AirflowFailException
from hooks.kafka_admin import LibrdkafkaLog
from runtime import task_log
from runtime.failures import RunRefused


@pytest.fixture
def json_log():
    """structlog configured as the Task SDK does it for a task (a list of processors, a JSON line per event, the
    traceback as a structured ``exception``), restored afterwards; yields (logger, the lines written)."""
    saved = structlog.get_config()
    out = io.StringIO()
    structlog.configure(processors=[structlog.processors.add_log_level, structlog.processors.dict_tracebacks,
                                    structlog.processors.JSONRenderer()],
                        logger_factory=structlog.PrintLoggerFactory(out), cache_logger_on_first_use=False)
    try:
        yield structlog.get_logger("task"), lambda: [json.loads(line) for line in out.getvalue().splitlines()]
    finally:
        structlog.configure(**saved)


def fail_with(log, exc: BaseException) -> None:
    try:
        raise exc
    except BaseException:
        log.exception(task_log.TASK_FAILED_EVENT)  # as airflow.sdk.execution_time.task_runner.run does


def test_a_refusal_is_one_plain_error_line(json_log):
    log, lines = json_log
    task_log.install()
    task_log.install()  # idempotent
    fail_with(log, RunRefused("unknown conf keys ['brokerz']\n (did you mean 'brokers'?)"))
    assert lines() == [{"event": "Task failed: unknown conf keys ['brokerz'] (did you mean 'brokers'?)",
                        "level": "error"}]
    assert structlog.get_config()["processors"].count(task_log.plain_deliberate_failure) == 1


def test_a_gate_timeout_is_one_line_and_a_bug_keeps_its_traceback(json_log):
    log, lines = json_log
    task_log.install()
    fail_with(log, AirflowFailException("gave up after 300 s (31 checks) waiting until broker 1 may be stopped"))
    fail_with(log, KeyError("partitions"))
    log.exception("some other event", exc_info=AirflowFailException("kept"))
    timeout, bug, other = lines()
    assert timeout == {"event": "Task failed: gave up after 300 s (31 checks) waiting until broker 1 may be stopped",
                       "level": "error"}
    assert bug["event"] == task_log.TASK_FAILED_EVENT and bug["exception"][0]["exc_type"] == "KeyError"
    assert bug["exception"][0]["frames"], "a bug's traceback stays"
    assert other["event"] == "some other event" and "exception" in other, "only the Task SDK's failure event"


def test_the_processor_leaves_other_events_alone():
    event = {"event": "broker 1 may be stopped: yes (gate: OK)"}
    assert task_log.plain_deliberate_failure(None, "info", dict(event)) == event
    assert task_log.plain_deliberate_failure(None, "error", {"event": task_log.TASK_FAILED_EVENT}) == {
        "event": task_log.TASK_FAILED_EVENT}


def test_namespace_levels_are_parsed_as_airflow_writes_them():
    assert task_log.namespace_levels("kazoo=INFO, paramiko=debug  sqlalchemy=WARN junk =x") == {
        "kazoo": "INFO", "paramiko": "DEBUG", "sqlalchemy": "WARN"}
    assert task_log.namespace_levels(None) == {}


@pytest.fixture
def library_levels():
    saved = {name: logging.getLogger(name).level for name in task_log.LIBRARY_LOGGERS}
    yield
    for name, level in saved.items():
        logging.getLogger(name).setLevel(level)


def test_libraries_are_quiet_unless_asked(library_levels):
    task_log.quiet_libraries({"kazoo": "INFO", "kafka": "NOISY"})
    assert logging.getLogger("kazoo.client").getEffectiveLevel() == logging.INFO, "asked for"
    assert logging.getLogger("kafka.conn").getEffectiveLevel() == logging.WARNING, "an unknown level: the default"
    assert logging.getLogger("paramiko.transport").getEffectiveLevel() == logging.WARNING
    assert logging.getLogger("librdkafka").getEffectiveLevel() == logging.WARNING


def test_librdkafka_connection_failures_are_info_and_other_lines_keep_their_level(library_levels, caplog):
    task_log.quiet_libraries({})
    caplog.set_level(logging.DEBUG)
    logging.getLogger("librdkafka").setLevel(logging.DEBUG)
    rd = LibrdkafkaLog()
    # what confluent-kafka passes (checked against a client connecting to a closed port)
    rd.log(logging.ERROR, "%s [%s] %s", "FAIL", "rdkafka#producer-1", "127.0.0.1:1/bootstrap: Connect failed")
    rd.log(logging.ERROR, "%s [%s] %s", "SSL", "rdkafka#producer-1", "handshake failed")
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records] == [
        ("librdkafka", logging.INFO, "FAIL [rdkafka#producer-1] 127.0.0.1:1/bootstrap: Connect failed"),
        ("librdkafka", logging.ERROR, "SSL [rdkafka#producer-1] handshake failed")]


def test_the_lock_topics_producer_and_reader_log_through_librdkafka_log(monkeypatch):
    """The lock's holder write (an idempotent producer) and its reader (a consumer) hand librdkafka's lines to
    LibrdkafkaLog like the admin client: without it, a line such as "Failed to acquire idempotence PID ...
    Coordinator load in progress: retrying" (librdkafka level 4, a warning) went to stderr and showed in the task
    log at ERROR in a run that succeeded."""
    from hooks import kafka_lock
    from kafka_ops.profile import ClusterProfile

    given: list[tuple[str, object]] = []

    class Stop(Exception):
        pass

    def recording(kind: str):
        def build(conf, **kwargs):
            given.append((kind, kwargs.get("logger")))
            raise Stop
        return build

    monkeypatch.setattr(kafka_lock, "Producer", recording("producer"))
    monkeypatch.setattr(kafka_lock, "Consumer", recording("consumer"))
    store = kafka_lock.KafkaLockStore(ClusterProfile(cluster="c", bootstrap_servers="127.0.0.1:1"))
    monkeypatch.setattr(store, "_exists", lambda: True)
    with pytest.raises(Stop):
        store._write_holder({"holder": "run"})
    with pytest.raises(Stop):
        store._read_holder(0.1)
    assert [kind for kind, _ in given] == ["producer", "consumer"]
    assert all(isinstance(logger, LibrdkafkaLog) for _, logger in given), given
