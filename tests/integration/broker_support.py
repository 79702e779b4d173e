"""Helpers for the broker behaviour tests (tests/integration/test_broker_*.py).

- :func:`module_sandbox`: a fresh sandbox shared by the tests of one module (``fresh_sandbox`` is
  function-scoped); each test restores health before it ends. Addresses ``127.<net>.<slot>.11``: slots
  200+ are ours, ``fresh_sandbox`` counts up from 1, the shared sandbox uses 0.
- kafka-python admin, DescribeLogDirs sizes, broker stop/start over SSH (``kafka-service``), a raw
  Kafka request over a socket (for the old versions clients no longer send).
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient
from kio.serial.writers import write_int16, write_int32, write_nullable_legacy_string
from observers import ClusterView, MetadataWatcher, PartitionView

from sandbox import testing

# module sandbox slots (third octet of the broker addresses), one per test module
SLOT_LIFECYCLE = 201
SLOT_REASSIGNMENT = 202
SLOT_VERSIONS = 203
SLOT_DATA_PATH = 204
SLOT_GROUPS = 205
SLOT_KRAFT = 206


@contextmanager
def module_sandbox(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, slot: int, **options
) -> Iterator[testing.RunningSandbox]:
    """``sandbox up`` in its own workdir on ``127.<net>.<slot>.11`` (``net``: the session's claimed net, the
    ``sandbox_net`` fixture of tests/conftest.py; options as ``testing.start``); down at exit."""
    workdir = tmp_path_factory.mktemp(f"sandbox-slot{slot}")
    net = request.getfixturevalue("sandbox_net")
    running = testing.start(workdir, address_base=f"127.{net}.{slot}.11", **options)
    print(f"\nsandbox (slot {slot}) up took {running.up_seconds:.1f} s ({workdir})")
    try:
        yield running
    finally:
        result = testing.stop(running)
        assert result.returncode == 0, f"sandbox down failed: {result.stderr}"


def kadmin(sandbox: testing.RunningSandbox) -> KafkaAdminClient:
    """A kafka-python admin client on the sandbox (caller closes it)."""
    return KafkaAdminClient(bootstrap_servers=sandbox.bootstrap_servers, request_timeout_ms=10000)


def log_dir_sizes(client: KafkaAdminClient, broker: int, topics: dict[str, list[int]] | None = None
                  ) -> dict[tuple[str, int], dict]:
    """DescribeLogDirs of one broker (kafka-python): ``{(topic, partition): {"partition_size", "offset_lag"}}``."""
    answer = client.describe_log_dirs(topic_partitions=topics, brokers=[broker])
    found: dict[tuple[str, int], dict] = {}
    for entry in answer:
        assert entry["broker"] == broker, answer
        for log_dir in entry["log_dirs"]:
            assert log_dir["error_code"] == 0, log_dir
            for topic in log_dir["topics"]:
                for part in topic["partitions"]:
                    found[(topic["name"], part["partition_index"])] = part
    return found


def quick_snapshot(client: AdminClient, timeout_s: float = 1.0) -> ClusterView:
    """:func:`observers.snapshot` with a short timeout. librdkafka does not retry a Metadata request that
    was in flight to a broker that dies (killed or stopping): it waits out the request's timeout, so
    observers around a stop or crash give up early and ask again.

    Raises:
        confluent_kafka.KafkaException: no answer within ``timeout_s``.
    """
    md = client.list_topics(timeout=timeout_s)
    partitions = tuple(
        PartitionView(t.topic, p.id, p.leader, tuple(p.replicas), tuple(p.isrs))
        for t in md.topics.values()
        for p in t.partitions.values()
    )
    return ClusterView(time.monotonic(), frozenset(md.brokers), md.controller_id, partitions)


def observe(client: AdminClient, timeout_s: float = 15.0) -> ClusterView:
    """A metadata snapshot, asking again every second until one arrives (see :func:`quick_snapshot`).

    Raises:
        AssertionError: none within ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return quick_snapshot(client)
        except Exception as exc:
            if time.monotonic() > deadline:
                raise AssertionError(f"no metadata within {timeout_s} s: {exc}") from exc


def QuickWatcher(bootstrap_servers: str, interval_s: float = 0.25) -> MetadataWatcher:  # noqa: N802
    """A :class:`observers.MetadataWatcher` whose polls use :func:`quick_snapshot` (see there why)."""
    return MetadataWatcher(bootstrap_servers, interval_s=interval_s, take=quick_snapshot)


def service(sandbox: testing.RunningSandbox, broker: int, action: str) -> tuple[int, str, str]:
    """``kafka-service ACTION`` on broker host ``broker`` over SSH: (exit code, stdout, stderr)."""
    return sandbox.ssh(broker, f"kafka-service {action}", timeout_s=60)


def stop_broker(sandbox: testing.RunningSandbox, broker: int) -> None:
    """``kafka-service stop`` over SSH (SIGTERM = controlled shutdown, waits for the exit)."""
    code, out, err = service(sandbox, broker, "stop")
    assert code == 0, (out, err)
    assert "stopped" in out, out


def start_broker(sandbox: testing.RunningSandbox, broker: int) -> None:
    """``kafka-service start`` over SSH (returns once the broker registered in ZooKeeper)."""
    code, out, err = service(sandbox, broker, "start")
    assert code == 0, (out, err)
    assert "active" in out, out


def restore(sandbox: testing.RunningSandbox, timeout_s: float = 60.0) -> None:
    """Start every non-spare broker that is not running and wait for a healthy cluster (URP = 0)."""
    registered = set(sandbox.registered_brokers())
    for broker in sandbox.broker_ids[: sandbox.active_count]:
        if broker not in registered:
            service(sandbox, broker, "start")
    sandbox.wait_healthy(timeout_s=timeout_s)


# --- raw Kafka requests -------------------------------------------------------------------------


def raw_request(host: str, port: int, api_key: int, api_version: int, body: bytes, correlation_id: int = 7,
                client_id: str = "broker-tests", timeout_s: float = 10.0) -> bytes:
    """Send one request with a v1 request header (api key, version, correlation id, client id) and
    return the response after its size prefix, checking and stripping the v0 response header."""
    import io

    buffer = io.BytesIO()
    write_int16(buffer, api_key)
    write_int16(buffer, api_version)
    write_int32(buffer, correlation_id)
    write_nullable_legacy_string(buffer, client_id)
    frame = buffer.getvalue() + body
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", _read_exactly(sock, 4))[0]
        payload = _read_exactly(sock, size)
    (answered_id,) = struct.unpack_from(">i", payload, 0)
    assert answered_id == correlation_id, f"correlation id {answered_id} != {correlation_id}"
    return payload[4:]


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    chunks, got = [], 0
    deadline = time.monotonic() + 10
    while got < size:
        chunk = sock.recv(size - got)
        if not chunk:
            raise ConnectionError(f"connection closed after {got} of {size} bytes")
        chunks.append(chunk)
        got += len(chunk)
        if time.monotonic() > deadline:
            raise TimeoutError("slow response")
    return b"".join(chunks)
