"""Helpers for integration tests that share a sandbox within one module.

- :func:`module_sandbox`: a fresh sandbox shared by the tests of one module (``fresh_sandbox`` is
  function-scoped); each test restores health before it ends. Addresses ``127.<net>.<slot>.11``: slots
  200+ are ours, ``fresh_sandbox`` counts up from 1, the shared sandbox uses 0.
- kafka-python admin, DescribeLogDirs sizes, metadata observers with short timeouts around stops and crashes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient
from observers import ClusterView, MetadataWatcher, PartitionView

from sandbox import testing

# module sandbox slots (third octet of the broker addresses), one per test module
SLOT_KRAFT = 206


@contextmanager
def module_sandbox(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, slot: int, **options
) -> Iterator[testing.RunningSandbox]:
    """``sandbox up`` in its own workdir on ``127.<net>.<slot>.11`` (``net``: the session's claimed net, the
    ``sandbox_net`` fixture of tests/conftest.py; options as ``testing.start``); killed at exit (``down --kill``)."""
    workdir = tmp_path_factory.mktemp(f"sandbox-slot{slot}")
    net = request.getfixturevalue("sandbox_net")
    running = testing.start(workdir, address_base=f"127.{net}.{slot}.11", **options)
    print(f"\nsandbox (slot {slot}) up took {running.up_seconds:.1f} s ({workdir})")
    try:
        yield running
    finally:
        result = testing.stop(running, kill=True)  # thrown away: no controlled shutdown to wait for
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
