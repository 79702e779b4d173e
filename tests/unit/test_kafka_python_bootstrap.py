"""kafka-python clients bootstrap from the bootstrap server that answers first (``KafkaAdminHook.first_answering``)
and open their connection to it before any request: kafka-python alone picks one server at random and gives it the
whole bootstrap timeout, so a hung broker (it accepts connections and answers nothing) cost a call 30 s and "Unable
to bootstrap". Here ``_ask_at`` is faked (a hung node never answers within the time given, a stopped one refuses);
on real Kafka, with a SIGSTOPped broker listed first: tests/integration/test_airflow_components.py
(``test_a_hung_broker_is_named_while_the_metadata_still_lists_it``)."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import kafka.admin
import pytest
from hooks.kafka_admin import ONE_NODE_LOGGERS, KafkaAdminHook
from kafka.errors import KafkaConnectionError, RequestTimedOutError

SERVERS = "b0:9092,b1:9092,b2:9092"


def hook(hung=(), refused=(), slow: dict[str, float] | None = None) -> KafkaAdminHook:
    """A hook whose ``_ask_at`` answers at once, after ``slow[address]`` seconds, never (``hung``: it waits out the
    timeout it was given, as kafka-python does) or refuses (``refused``)."""
    h = KafkaAdminHook(bootstrap_servers=SERVERS)
    h.asked = []

    def ask_at(address: str, request, timeout_s=None):
        h.asked.append(address)
        if address in refused:
            raise KafkaConnectionError("111 ECONNREFUSED")
        if address in hung:
            time.sleep(timeout_s)
            raise RequestTimedOutError(f"after {timeout_s * 1000:.0f} ms")
        time.sleep((slow or {}).get(address, 0.0))
        return SimpleNamespace(error_code=0)

    h._ask_at = ask_at
    return h


def test_the_first_to_answer_wins_and_a_hung_one_costs_nothing() -> None:
    h = hook(hung={"b0:9092"}, slow={"b1:9092": 0.3})
    began = time.monotonic()
    assert h.first_answering(["b0:9092", "b1:9092", "b2:9092"], timeout_s=3.0) == "b2:9092"
    assert time.monotonic() - began < 1.0, "the hung server was waited for"
    assert sorted(h.asked) == ["b0:9092", "b1:9092", "b2:9092"], "each asked, at once"


def test_none_when_no_server_answers_in_time() -> None:
    h = hook(hung={"b0:9092"}, refused={"b1:9092", "b2:9092"})
    assert h.first_answering(["b0:9092", "b1:9092", "b2:9092"], timeout_s=0.3) is None
    with pytest.raises(ValueError, match="timeout_s must be > 0"):
        h.first_answering(["b0:9092"], timeout_s=0)


class FakeAdminClient:
    """kafka-python's ``KafkaAdminClient`` as far as ``_kafka_python_admin`` uses it: the bootstrap servers it was
    given, its metadata's brokers, and the connections opened through ``_manager.run``."""

    made: list[FakeAdminClient] = []
    api_versions: dict[int, tuple[int, int]] = {}  # what the bootstrap broker offered (ApiVersions)

    def __init__(self, **config) -> None:
        self.config = config
        self.opened: list[int] = []
        self._controller_id = None
        brokers = [SimpleNamespace(node_id=b, host=f"b{b}", port=9092) for b in (0, 1, 2)]
        client = self

        class Manager:
            cluster = SimpleNamespace(brokers=lambda: brokers)
            broker_version_data = SimpleNamespace(api_versions=FakeAdminClient.api_versions)

            async def get_connection(self, node_id):
                client.opened.append(node_id)

            def run(self, coro):  # the fake's coroutines never wait: run to the end here (no event loop needed,
                running = coro()    # as in a test process where another test left one running)
                try:
                    running.send(None)
                except StopIteration as done:
                    return done.value
                raise AssertionError("the coroutine waited")

        self._manager = Manager()
        FakeAdminClient.made.append(self)


@pytest.fixture
def clients(monkeypatch: pytest.MonkeyPatch) -> list[FakeAdminClient]:
    FakeAdminClient.made = []
    FakeAdminClient.api_versions = {3: (0, 12)}  # Metadata; no DescribeQuorum: a ZooKeeper-mode broker
    monkeypatch.setattr(kafka.admin, "KafkaAdminClient", FakeAdminClient)
    return FakeAdminClient.made


def test_the_client_bootstraps_from_the_answering_server_and_connects_to_it_first(clients) -> None:
    h = hook(hung={"b0:9092", "b2:9092"})
    h._kafka_python_admin()
    (client,) = clients
    assert client.config["bootstrap_servers"] == ["b1:9092"]
    assert client.config["request_timeout_ms"] == 30_000
    assert client.opened == [1], "requests for any node go to broker 1, the one that answered"
    assert client._controller_id is None, "ZooKeeper mode: requests for the controller go to the one named"


def test_on_kraft_requests_for_the_controller_go_to_the_answering_broker(clients) -> None:
    """A KRaft broker's Metadata names a random live broker as the controller (maybe the hung one); any broker
    forwards controller requests to the active controller (KIP-590)."""
    FakeAdminClient.api_versions = {3: (0, 12), 55: (0, 2)}  # DescribeQuorum: only KRaft brokers offer it
    hook(hung={"b0:9092", "b1:9092"})._kafka_python_admin()
    (client,) = clients
    assert client.opened == [2] and client._controller_id == 2


def test_without_an_answer_the_client_bootstraps_from_every_server(clients, monkeypatch) -> None:
    h = hook()
    monkeypatch.setattr(h, "first_answering", lambda servers: None)
    h._kafka_python_admin()
    (client,) = clients
    assert client.config["bootstrap_servers"] == ["b0:9092", "b1:9092", "b2:9092"]
    assert client.opened == [], "no connection chosen for it"


def test_one_server_is_not_asked_first_and_an_alias_opens_no_connection(clients) -> None:
    h = KafkaAdminHook(bootstrap_servers="kafka.example:9092")
    h._ask_at = lambda *a, **k: pytest.fail("one bootstrap server: nothing to choose")
    h._kafka_python_admin()
    (client,) = clients
    assert client.config["bootstrap_servers"] == ["kafka.example:9092"]
    assert client.opened == [], "no broker is advertised at the alias"


def test_the_thread_asking_a_hung_server_ends_with_its_timeout() -> None:
    h = hook(hung={"b0:9092"})
    before = threading.active_count()
    assert h.first_answering(["b0:9092", "b1:9092"], timeout_s=0.5) == "b1:9092"
    # the hung server's thread ends with its own timeout, after the answer was given
    deadline = time.monotonic() + 5
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= before


def test_a_broker_whose_request_times_out_with_the_wait_is_named_as_not_answering() -> None:
    """``unanswered_brokers``: the request's timeout equals the wait's, so the hung broker's request may end with
    RequestTimedOutError just before the wait does (seen on real Kafka in CI); either way it did not answer, and
    it is named alike. A refused connection keeps its own reason."""
    h = hook(refused={"b2:9092"})
    answer = h._ask_at

    def ask_at(address: str, request, timeout_s=None):
        if address == "b0:9092":  # its own timeout ended first
            raise RequestTimedOutError(f"after {timeout_s * 1000 - 1:.0f} ms")
        return answer(address, request, timeout_s)

    h._ask_at = ask_at
    missing = h.unanswered_brokers({0: "b0:9092", 1: "b1:9092", 2: "b2:9092"}, timeout_s=2.0)
    assert missing == {0: "no answer within 2.0 s", 2: "KafkaConnectionError: 111 ECONNREFUSED"}, missing


def refused_address() -> str:
    """``127.0.0.1:<port>`` where nothing listens (a port bound, then let go): a connection there is refused."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def test_a_node_that_refuses_is_reported_by_the_caller_not_by_red_kafka_python_lines(caplog) -> None:
    """A broker that is down (a restart, a decommissioned broker still in the connection's bootstrap list) refuses
    the one-node connection ``_ask_at`` opens: the caller handles it (``first_answering`` takes another server). Its
    "Connection failed" / "Connection lost" / "Bootstrap failed" lines were logged at ERROR by kafka-python, three
    red lines in a task that went on fine, at every look; now at INFO. Lines outside such a call keep their level."""
    import logging

    from kafka.protocol.metadata import ApiVersionsRequest

    address = refused_address()
    h = KafkaAdminHook(bootstrap_servers=address)
    with caplog.at_level(logging.INFO, logger="kafka"):
        with pytest.raises(KafkaConnectionError):
            h._ask_at(address, ApiVersionsRequest(min_version=0, max_version=0), 2.0)
        failures = [r for r in caplog.records if r.name.startswith("kafka.net")]
        assert any("ECONNREFUSED" in r.getMessage() for r in failures), [r.getMessage() for r in caplog.records]
        assert all(r.levelno == logging.INFO for r in failures), [(r.levelname, r.getMessage()) for r in failures]
        caplog.clear()
        logging.getLogger("kafka.net.manager").error("Connection failed: elsewhere")
    assert [r.levelname for r in caplog.records] == ["ERROR"], "a line outside the one-node call keeps its level"


def test_a_logger_left_at_warning_drops_those_lines(caplog) -> None:
    """Airflow's tasks keep kafka-python at WARNING (``runtime.task_log.quiet_libraries``): the lines logged at INFO
    are then dropped, as librdkafka's connection failures are (``LibrdkafkaLog``)."""
    import logging

    from kafka.protocol.metadata import ApiVersionsRequest

    address = refused_address()
    manager, connection = logging.getLogger("kafka.net.manager"), logging.getLogger("kafka.net.connection")
    levels = manager.level, connection.level
    manager.setLevel(logging.WARNING)
    connection.setLevel(logging.WARNING)
    try:
        with caplog.at_level(logging.DEBUG):  # the root's level: these two keep WARNING
            with pytest.raises(KafkaConnectionError):
                KafkaAdminHook(bootstrap_servers=address)._ask_at(address, ApiVersionsRequest(min_version=0,
                                                                                                max_version=0), 2.0)
        assert [r.getMessage() for r in caplog.records if r.name in ONE_NODE_LOGGERS] == []
    finally:
        manager.setLevel(levels[0])
        connection.setLevel(levels[1])
