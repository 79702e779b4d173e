"""runtime.warming_prober: the first cluster look of a waiting roll task runs in its own thread; the turn takes the
prober only once that look answered (a fake prober; and a real one whose broker accepts connections and answers
nothing)."""

from __future__ import annotations

import socket
import threading
import time

from kafka_ops.profile import ClusterProfile
from probes.cluster import ClusterProber
from runtime.warming_prober import WarmingProber


class FakeProber:
    def __init__(self, fails: bool = False) -> None:
        self.release = threading.Event()
        self.fails = fails
        self.looks: list[bool] = []
        self.closed = 0

    def state(self, configs: bool = True):
        self.release.wait(10)
        self.looks.append(configs)
        if self.fails:
            raise RuntimeError("broker 2 did not answer DescribeConfigs")
        return "state"

    def close(self) -> None:
        self.closed += 1


class Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, msg: str, *args: object) -> None:
        self.lines.append(msg % args)


def test_an_answered_look_hands_the_prober_over_open():
    prober, log = FakeProber(), Log()
    prober.release.set()
    warming = WarmingProber(prober)
    assert warming.join(5)
    assert warming.take(log) is prober and prober.looks == [True] and prober.closed == 0 and log.lines == []


def test_a_look_still_waiting_at_the_turn_is_left_to_its_thread_which_closes_the_prober():
    prober, log = FakeProber(), Log()
    warming = WarmingProber(prober)
    assert warming.take(log) is None, "the turn never waits for the look"
    assert log.lines == ["the cluster look opened while waiting has not answered yet: the gate opens its own"]
    assert prober.closed == 0
    prober.release.set()
    assert warming.join(5)
    assert prober.closed == 1, "the thread closed the prober nobody took"


def test_a_failed_look_is_closed_and_named():
    prober, log = FakeProber(fails=True), Log()
    prober.release.set()
    warming = WarmingProber(prober)
    assert warming.join(5)
    assert warming.take(log) is None and prober.closed == 1
    assert log.lines == ["the cluster look opened while waiting failed (broker 2 did not answer DescribeConfigs): "
                         "the gate opens its own"]


class SilentBroker:
    """A TCP listener on 127.0.0.1 that accepts connections and never answers (a broker stalled mid-restart, as a
    client sees it): a real client's request to it waits for its request timeout."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.server.getsockname()[1]}"
        self.accepted: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def close(self) -> None:
        self.server.close()
        for conn in self.accepted:
            conn.close()


def test_a_real_prober_whose_broker_does_not_answer_is_abandoned_at_the_turn_and_closed_by_its_thread():
    """The path the fake cannot prove: a real ClusterProber (confluent-kafka) whose look goes to a broker that
    accepts the connection and answers nothing. The turn does not wait for it; the thread ends once the client
    gives up (its request timeout) and closes the prober it was left with."""
    silent = SilentBroker()
    prober = ClusterProber(ClusterProfile(cluster="c", bootstrap_servers=silent.address), request_timeout_s=2)
    closes: list[int] = []
    close = prober.close
    prober.close = lambda: (closes.append(1), close())[-1]
    log = Log()
    try:
        warming = WarmingProber(prober)
        deadline = time.monotonic() + 10
        while not silent.accepted and time.monotonic() < deadline:  # the look has reached the broker
            time.sleep(0.05)
        assert silent.accepted, "the look connected to the broker"
        began = time.monotonic()
        assert warming.take(log) is None
        assert time.monotonic() - began < 0.5, "the turn did not wait for the look"
        assert log.lines == ["the cluster look opened while waiting has not answered yet: the gate opens its own"]
        assert warming.join(30), "the look ended (the client's request timeout)"
        assert closes == [1], "the thread closed the abandoned prober"
    finally:
        silent.close()
