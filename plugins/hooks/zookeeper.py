"""ZooKeeper hook (kazoo) for ZooKeeper-mode Kafka clusters: the client the cluster lock uses
(``runtime.lock_holding``), and Kafka's ``/admin/reassign_partitions`` znode (present while a
ZooKeeper-driven reassignment runs; how reassignments started before Kafka 2.4). Brokers, the controller
and their registrations are read through the Kafka protocol (``hooks.kafka_admin``), not here.
"""

from __future__ import annotations

import json
from typing import Any

from kafka_ops.profile import ClusterProfile
from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from hooks.cluster_profile import ClusterProfileHook

REASSIGN_PATH = "/admin/reassign_partitions"


class ZooKeeperHook(ClusterProfileHook):
    """A kazoo client on a ZooKeeper-mode cluster's ZooKeeper, and its reassignment znode.

    Build it from exactly one of:

    :param cluster: a ``kafka`` connection whose profile sets ``zookeeper``.
    :param profile: a parsed :class:`kafka_ops.profile.ClusterProfile` with ``zookeeper`` set.
    :param hosts: a ZooKeeper connect string incl. chroot, e.g. ``"127.0.0.1:2181/kafka"``.
    :param timeout_s: session timeout and connect timeout, seconds (default 10).

    The kazoo client starts on first use (:meth:`get_conn`); :meth:`close` stops it (also as a
    context manager). Raises ``kazoo.handlers.threading.KazooTimeoutError`` when ZooKeeper cannot
    be reached within ``timeout_s`` (transient: retrying may help), ValueError when the profile has
    no ``zookeeper`` (KRaft cluster or misconfigured connection: retrying cannot help).
    """

    hook_name = "Kafka ZooKeeper (kafka-ops)"

    def __init__(
        self,
        cluster: str | None = None,
        *,
        profile: ClusterProfile | None = None,
        hosts: str | None = None,
        timeout_s: float = 10.0,
    ) -> None:
        if sum(x is not None for x in (cluster, profile, hosts)) != 1:
            raise ValueError("give exactly one of cluster, profile, hosts")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        super().__init__(cluster, profile)
        self._hosts = hosts
        self.timeout_s = timeout_s
        self._client: KazooClient | None = None

    @property
    def hosts(self) -> str:
        """The ZooKeeper connect string (with chroot)."""
        if self._hosts is None:
            self.profile.require("zookeeper")
            self._hosts = self.profile.zookeeper
        return self._hosts  # type: ignore[return-value]

    def get_conn(self) -> KazooClient:
        """A started ``KazooClient`` (connects to read-write servers only, so callers may also write,
        e.g. an operation lock znode; this hook's own methods only read)."""
        if self._client is None:
            client = KazooClient(hosts=self.hosts, timeout=self.timeout_s)
            client.start(timeout=self.timeout_s)
            self._client = client
        return self._client

    def close(self) -> None:
        """Stop and close the kazoo client, if started."""
        if self._client is not None:
            try:
                self._client.stop()
                self._client.close()
            finally:
                self._client = None

    def __enter__(self) -> ZooKeeperHook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the reassignment znode (Kafka before 2.4) -----------------------------------------------

    def start_reassignment(self, partitions: list[dict[str, Any]]) -> None:
        """Start a reassignment the way ``kafka-reassign-partitions.sh --zookeeper`` did before Kafka 2.4:
        create ``/admin/reassign_partitions`` holding ``{"version": 1, "partitions": [...]}``; the
        controller executes it and deletes the node when every partition is done.

        :raises RuntimeError: the node exists (another reassignment is in progress).
        """
        doc = {"version": 1, "partitions": [{"topic": p["topic"], "partition": int(p["partition"]),
                                             "replicas": [int(r) for r in p["replicas"]]} for p in partitions]}
        try:
            self.get_conn().create(REASSIGN_PATH, json.dumps(doc).encode("utf-8"))
        except NodeExistsError:
            raise RuntimeError(f"{REASSIGN_PATH} exists: another reassignment is in progress") from None

    def reassignment_in_progress(self) -> dict[str, Any] | None:
        """The parsed ``/admin/reassign_partitions`` document while a ZK reassignment runs, else None.

        Kafka's format: ``{"version": 1, "partitions": [{"topic", "partition", "replicas"}]}``.
        :raises ValueError: the znode holds something other than a JSON object.
        """
        try:
            data, _ = self.get_conn().get(REASSIGN_PATH)
        except NoNodeError:
            return None
        if not data:
            return {"version": 1, "partitions": []}
        try:
            doc = json.loads(data.decode("utf-8"))
        except ValueError as exc:
            raise ValueError(f"{REASSIGN_PATH}: not JSON: {exc}") from None
        if not isinstance(doc, dict):
            raise ValueError(f"{REASSIGN_PATH}: expected a JSON object")
        return doc
