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


class RefusingSender:
    """A kafka-python producer whose first ``send`` raises as it does without metadata within ``max_block_ms``;
    the second stops the loop under test."""

    def __init__(self, reader: traffic_watch.KafkaPythonTraffic) -> None:
        self.reader = reader
        self.keys: list[bytes] = []

    def send(self, _topic: str, key: bytes, value: bytes):
        from kafka.errors import KafkaTimeoutError

        self.keys.append(key)
        if len(self.keys) == 1:
            raise KafkaTimeoutError("Failed to update metadata after 60.0 secs.")
        self.reader._producing.clear()
        return SimpleNamespace(add_callback=lambda *_: None, add_errback=lambda *_: None)


def test_a_send_refused_before_it_was_queued_is_counted_and_the_same_seq_sent_again() -> None:
    from collections import Counter

    reader = object.__new__(traffic_watch.KafkaPythonTraffic)  # no Kafka: only the send loop is under test
    reader.lock, reader.errors, reader.error_events, reader.pending = threading.Lock(), Counter(), [], 0
    reader.topic, reader.rate_per_s, reader._began = "t", 1000.0, time.monotonic() - 1
    reader._producing = threading.Event()
    reader._producing.set()
    reader.producer = RefusingSender(reader)
    reader._produce()  # returns: the second send clears _producing
    assert reader.errors == {"KafkaTimeoutError": 1} and reader.pending == 1, "the refusal counted, one in flight"
    assert reader.producer.keys == [b"000000000000", b"000000000000"], "seq 0 tried again"
