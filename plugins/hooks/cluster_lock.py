"""One operation per cluster at a time: a lock node in the cluster's own ZooKeeper (ZooKeeper-mode clusters;
KRaft clusters keep the lock in a topic of their own: ``hooks.kafka_lock``, same behaviour).

``/kafka-ops/operation-lock`` holds ``{"holder": "<dag_id>/<run_id>", "since_ms": ..., "operation": ...}``.
Creating it is atomic (ZooKeeper refuses a second create), so two runs of any of our DAGs on the
same cluster cannot both hold it. The node is persistent, not ephemeral: an operation spans many
task processes. The holder deletes it in its teardown task, which Airflow runs also after failures;
clearing a failed task re-runs the setup task, which takes the lock again (re-entrant for the same
run). A lock left by a run that can no longer release it (its DAG run deleted, say) is broken by
hand: ``zkCli.sh -server <zk> delete /kafka-ops/operation-lock`` (see README, "Cluster lock").
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

LOCK_PATH = "/kafka-ops/operation-lock"


@dataclass(frozen=True)
class LockHolder:
    """Who holds the cluster: ``holder`` = ``"<dag_id>/<run_id>"``, since when (ms since the epoch)."""

    holder: str
    since_ms: int
    operation: str

    def describe(self) -> str:
        age_s = max(0, int(time.time() - self.since_ms / 1000))
        return f"{self.holder} ({self.operation}, held for {age_s} s)"


def current_holder(zk: KazooClient) -> LockHolder | None:
    """The lock's holder, or None when the cluster is free."""
    try:
        data, _ = zk.get(LOCK_PATH)
    except NoNodeError:
        return None
    doc = json.loads(data.decode() or "{}")
    return LockHolder(doc.get("holder", "?"), int(doc.get("since_ms", 0)), doc.get("operation", "?"))


def try_acquire(zk: KazooClient, holder: str, operation: str, attempts: int = 5) -> LockHolder | None:
    """Take the lock for ``holder``; returns None on success (or when ``holder`` already has it),
    else the other holder.

    :param attempts: how often to try when the lock is released between our create and our read
        (each time another run may take it first).
    :raises RuntimeError: the lock changed hands ``attempts`` times in a row (heavy contention).
    """
    doc = {"holder": holder, "since_ms": int(time.time() * 1000), "operation": operation}
    for _ in range(max(1, attempts)):
        try:
            zk.create(LOCK_PATH, json.dumps(doc).encode(), makepath=True)
            return None
        except NodeExistsError:
            other = current_holder(zk)
            if other is not None:
                return None if other.holder == holder else other
    raise RuntimeError(f"{LOCK_PATH}: released and re-taken {attempts} times while trying to take it")


def release(zk: KazooClient, holder: str) -> bool:
    """Delete the lock if ``holder`` holds it; True when it was released by this call."""
    try:
        data, stat = zk.get(LOCK_PATH)
    except NoNodeError:
        return False
    if json.loads(data.decode() or "{}").get("holder") != holder:
        return False
    try:
        zk.delete(LOCK_PATH, version=stat.version)
    except NoNodeError:
        return False
    return True


class ZooKeeperLockStore:
    """The lock znode behind the same interface as ``hooks.kafka_lock.KafkaLockStore``: ``current_holder()``,
    ``try_acquire(holder, operation)``, ``release(holder)``, ``where``, ``break_hint``.

    :param zk: a started kazoo client of the cluster's ZooKeeper (chroot included).
    :param connect: the connect string, for messages.
    """

    def __init__(self, zk: KazooClient, connect: str) -> None:
        self.zk = zk
        self.connect = connect

    @property
    def where(self) -> str:
        return f"znode {LOCK_PATH} in ZooKeeper {self.connect}"

    @property
    def break_hint(self) -> str:
        return f"zkCli.sh -server '{self.connect}' delete {LOCK_PATH}"

    def current_holder(self) -> LockHolder | None:
        return current_holder(self.zk)

    def try_acquire(self, holder: str, operation: str, attempts: int = 5) -> LockHolder | None:
        return try_acquire(self.zk, holder, operation, attempts)

    def release(self, holder: str) -> bool:
        return release(self.zk, holder)

