"""runtime.warming_prober: the first cluster look of a waiting roll task runs in its own thread; the turn takes the
prober only once that look answered (a fake prober; no Kafka)."""

from __future__ import annotations

import threading

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
