"""Partition reassignments on either of Kafka's two paths, chosen by the profile's ``reassignment_via``:

- ``admin``: AlterPartitionReassignments / ListPartitionReassignments (KIP-455, Kafka 2.4+; cancellable);
- ``zookeeper``: the ``/admin/reassign_partitions`` node (what ``kafka-reassign-partitions.sh --zookeeper``
  wrote before 2.4; the controller deletes it when every partition is done; not cancellable);
- ``auto`` (default): the admin API, and ZooKeeper when the brokers do not offer it.

In progress = the admin API's listing (where the brokers offer it) plus the partitions of the ZooKeeper
node (where the profile names ZooKeeper), so a reassignment started by hand either way is seen.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from hooks.kafka_admin import KafkaAdminHook
from hooks.zookeeper import ZooKeeperHook
from kafka_ops.profile import ClusterProfile

log = logging.getLogger(__name__)


def _unsupported(exc: BaseException) -> bool:
    """The brokers do not offer the API (kafka-python's IncompatibleBrokerVersion / UnsupportedVersion)."""
    return type(exc).__name__ in ("IncompatibleBrokerVersion", "UnsupportedVersionError")


class Reassignments:
    """Start, list and cancel reassignments of one cluster.

    :param admin: the cluster's admin hook. :param profile: its profile (``reassignment_via``, ``zookeeper``).
    :raises ValueError: ``reassignment_via: zookeeper`` without a ``zookeeper`` connect string.
    """

    def __init__(self, admin: KafkaAdminHook, profile: ClusterProfile) -> None:
        self.admin = admin
        self.profile = profile
        self.via = profile.reassignment_via
        if self.via == "zookeeper" and not profile.zookeeper:
            raise ValueError(f"connection {profile.cluster!r}: reassignment_via zookeeper needs 'zookeeper'")

    def ongoing(self) -> list[dict[str, Any]]:
        """``[{"topic", "partition", "replicas", "adding_replicas", "removing_replicas"}]`` in progress
        (adding/removing empty for a ZooKeeper-only entry), sorted."""
        found: dict[tuple[str, int], dict[str, Any]] = {}
        if self.via != "zookeeper":
            try:
                for entry in self.admin.list_partition_reassignments():
                    found[(entry["topic"], entry["partition"])] = entry
            except Exception as exc:
                if not (_unsupported(exc) and self.via == "auto" and self.profile.zookeeper):
                    raise
                self.via = "zookeeper"
                log.info("the brokers offer no ListPartitionReassignments (Kafka < 2.4): using ZooKeeper")
        if self.profile.zookeeper:
            with ZooKeeperHook(profile=self.profile) as zk:
                doc = zk.reassignment_in_progress() or {"partitions": []}
            for p in doc.get("partitions", []):
                key = (p["topic"], int(p["partition"]))
                found.setdefault(key, {"topic": key[0], "partition": key[1], "replicas": list(p.get("replicas", [])),
                                       "adding_replicas": [], "removing_replicas": []})
        return [found[k] for k in sorted(found)]

    def start(self, partitions: Iterable[Mapping[str, Any]]) -> dict[str, str | None]:
        """Start moving each ``{"topic", "partition", "replicas"}``; ``"topic-partition"`` -> None when
        accepted, else the error's name.

        :raises RuntimeError: the ZooKeeper node exists (another reassignment is in progress).
        """
        entries = [dict(p) for p in partitions]
        if self.via != "zookeeper":
            try:
                return self.admin.alter_partition_reassignments(entries)
            except Exception as exc:
                if not (_unsupported(exc) and self.via == "auto" and self.profile.zookeeper):
                    raise
                self.via = "zookeeper"
                log.info("the brokers offer no AlterPartitionReassignments (Kafka < 2.4): using ZooKeeper")
        with ZooKeeperHook(profile=self.profile) as zk:
            zk.start_reassignment(entries)
        return {f"{p['topic']}-{p['partition']}": None for p in entries}

    def cancel(self, keys: Iterable[tuple[str, int]]) -> tuple[list[str], str]:
        """Cancel the moves of ``keys`` still running; returns (cancelled partition names, a note). A
        reassignment started through ZooKeeper cannot be cancelled (Kafka before 2.4 has no way to)."""
        keys = list(keys)
        if self.via == "zookeeper":
            return [], "not cancelled: a reassignment started through ZooKeeper runs to its end"
        result = self.admin.alter_partition_reassignments(
            [{"topic": t, "partition": p, "replicas": None} for t, p in keys])
        return sorted(k for k, v in result.items() if v is None), "cancelled"
