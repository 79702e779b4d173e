"""The kafka-python group reader of ``sandbox.traffic_watch``: it never waits inside the client's ``poll`` and sleeps
after an empty one, so a client whose poll returns at once (kafka-python 3.0's timed poll spun that way during
rolling restarts) cannot make the reader take a core from the brokers it watches."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from sandbox import traffic_watch


class InstantConsumer:
    """A client whose ``poll`` returns at once: empty, or the records it was given once."""

    def __init__(self, records: list[SimpleNamespace]) -> None:
        self.calls: list[int] = []
        self.records = records

    def poll(self, timeout_ms: int) -> dict:
        self.calls.append(timeout_ms)
        batch, self.records = self.records, []
        return {"tp": batch} if batch else {}


def _reader(consumer: InstantConsumer) -> traffic_watch.KafkaPythonTraffic:
    reader = object.__new__(traffic_watch.KafkaPythonTraffic)  # no Kafka: only the read loop is under test
    reader.consumer, reader.lock, reader.reads = consumer, threading.Lock(), {}
    reader._consuming = threading.Event()
    reader._consuming.set()
    return reader


def test_the_reader_sleeps_after_an_empty_poll_and_keeps_what_it_read() -> None:
    records = [SimpleNamespace(partition=0, offset=n, value=f'{{"seq": {n}}}'.encode()) for n in range(3)]
    consumer = InstantConsumer(records)
    reader = _reader(consumer)
    loop = threading.Thread(target=reader._consume)
    began = time.monotonic()
    loop.start()
    time.sleep(0.5)
    reader._consuming.clear()
    loop.join(timeout=5)
    spent = time.monotonic() - began
    assert not loop.is_alive()
    assert set(consumer.calls) == {0}, "the client's poll never waits (nor spins) inside"
    assert len(consumer.calls) <= spent / traffic_watch.READ_IDLE_S + 3, len(consumer.calls)
    assert reader.reads == {(0, 0): 0, (0, 1): 1, (0, 2): 2}
