"""How sandbox tools read and change the cluster metadata, in either mode.

ZooKeeper mode: a kazoo client on the sandbox's ZooKeeper. KRaft mode: a
:class:`~sandbox.broker.quorum_client.RemoteQuorumClient` observing the controller quorum (no session, not
listed as an observer). Both offer the same kazoo-style calls, so ``cluster_health``, the workload and the
tests' helpers work on both.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sandbox import settings, zookeeper
from sandbox.state import SandboxState


def open_client(info: SandboxState, timeout_s: float = 10.0) -> Any:
    """A started metadata client for ``info``'s cluster; the caller stops and closes it.

    Raises:
        kazoo.exceptions.ConnectionLoss / kazoo's timeout: the metadata store did not answer in ``timeout_s``.
    """
    if info.kraft:
        from sandbox.broker.quorum_client import RemoteQuorumClient

        client = RemoteQuorumClient(info.voters, settings.REPLICATION_PORT, -1, "sandbox tool", None)
        client.start(timeout=timeout_s)
        return client
    return zookeeper.client(info.zookeeper_port, timeout_s=timeout_s)


@contextmanager
def metadata_client(info: SandboxState, timeout_s: float = 10.0) -> Iterator[Any]:
    """:func:`open_client` as a context manager (stopped and closed on exit)."""
    client = open_client(info, timeout_s)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def store_name(info: SandboxState) -> str:
    """Where the metadata lives, for messages: ``ZooKeeper 127.0.0.1:2181`` or ``the controller quorum ...``."""
    if info.kraft:
        return f"the controller quorum {info.quorum_voters}"
    return f"ZooKeeper {info.zookeeper_connect}"
