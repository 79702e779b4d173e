"""The replicated state of a KRaft-mode sandbox: a tree of nodes, changed only by log records.

In KRaft mode the sandbox keeps the cluster's metadata in the controller quorum's log
(``__cluster_metadata``, KIP-500/KIP-595) instead of ZooKeeper. Real Kafka writes typed records
(TopicRecord, PartitionRecord, BrokerRegistrationRecord, FeatureLevelRecord, ...); the sandbox's records
change a tree with the same paths and JSON documents as its ZooKeeper mode (:mod:`sandbox.broker.zkpaths`),
so the partition controller, metadata cache and API handlers serve both modes unchanged. This is internal
to the sandbox: clients only see the Kafka protocol.

Records (JSON objects, applied in log order by every replica, deterministically):

- ``{"op": "create", "path", "data" (base64), "makepath", "sequence", "session"}``: ``session`` set =
  an ephemeral node owned by that session (a broker registration), removed when the session closes;
- ``{"op": "set", "path", "data", "version"}`` and ``{"op": "delete", "path", "version", "recursive"}``
  (``version`` -1 = any, else it must match, as ZooKeeper's conditional writes);
- ``{"op": "session_open", "owner", "timeout_ms"}`` (the new session's id is the record's offset) and
  ``{"op": "session_close", "session", "reason"}``: a broker's heartbeat session (KRaft's broker
  registration and ``broker.session.timeout.ms``; a broker whose session closes is fenced);
- ``{"op": "leader_change", "epoch", "leader"}``: written by each new quorum leader (Kafka's
  LeaderChangeMessage control record), no change to the tree.

Every record carries ``ts`` (the leader's clock, epoch ms) for the nodes' ctime/mtime.
"""

from __future__ import annotations

import base64
import threading
from dataclasses import dataclass, field
from typing import Any

#: Errors a record can end in (ZooKeeper's names; the client raises kazoo's exception of the same name).
NODE_EXISTS = "NodeExistsError"
NO_NODE = "NoNodeError"
BAD_VERSION = "BadVersionError"
NOT_EMPTY = "NotEmptyError"
SESSION_EXPIRED = "SessionExpiredError"
BAD_ARGUMENTS = "BadArgumentsError"


@dataclass
class Stat:
    """The part of kazoo's ``ZnodeStat`` the sandbox reads: ``version`` (data changes), ``cversion``
    (child changes), ``ephemeralOwner`` (session id or 0), ctime/mtime (epoch ms), children, data length."""

    version: int
    cversion: int
    ephemeralOwner: int  # noqa: N815 - kazoo's name
    ctime: int
    mtime: int
    numChildren: int  # noqa: N815 - kazoo's name
    dataLength: int  # noqa: N815 - kazoo's name

    @property
    def last_modified(self) -> float:
        return self.mtime / 1000.0


@dataclass
class Node:
    data: bytes = b""
    version: int = 0
    cversion: int = 0
    session: int = 0
    ctime: int = 0
    mtime: int = 0
    children: set[str] = field(default_factory=set)

    def stat(self) -> Stat:
        return Stat(self.version, self.cversion, self.session, self.ctime, self.mtime, len(self.children),
                    len(self.data))


def encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def decode(text: str | None) -> bytes:
    return base64.b64decode(text) if text else b""


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


def _check_path(path: Any) -> str | None:
    if not isinstance(path, str) or not path.startswith("/") or (path != "/" and path.endswith("/")) or "//" in path:
        return f"bad path {path!r}"
    return None


class MetadataTree:
    """The tree every replica of the metadata log builds by :meth:`apply`-ing committed records in order.

    Thread-safe: readers (API handlers, the partition controller) and the applying thread share it
    through one lock. ``applied`` is the offset of the next record to apply (= records applied so far).
    """

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {"/": Node()}
        self.sessions: dict[int, dict[str, Any]] = {}  # id -> {"owner", "timeout_ms"}
        self.applied = 0
        self.leader_epoch = 0
        self.lock = threading.RLock()

    # --- reading --------------------------------------------------------------------------------
    def get(self, path: str) -> tuple[bytes, Stat] | None:
        with self.lock:
            node = self.nodes.get(path)
            return None if node is None else (node.data, node.stat())

    def children(self, path: str) -> list[str] | None:
        with self.lock:
            node = self.nodes.get(path)
            return None if node is None else sorted(node.children)

    def snapshot_of(self, path: str) -> tuple[int, int] | None:
        """``(version, cversion)`` of ``path`` or None: what watches compare before and after a batch."""
        with self.lock:
            node = self.nodes.get(path)
            return None if node is None else (node.version, node.cversion)

    # --- applying -------------------------------------------------------------------------------
    def apply(self, record: dict[str, Any]) -> dict[str, Any]:
        """Apply the record at offset :attr:`applied`; returns ``{"ok": value}`` or ``{"error": name,
        "message": text}`` (a failed record changes nothing, on every replica alike)."""
        with self.lock:
            offset = self.applied
            self.applied += 1
            try:
                return {"ok": self._apply(offset, record)}
            except _Failed as failed:
                return {"error": failed.name, "message": failed.message}

    def _apply(self, offset: int, record: dict[str, Any]) -> Any:
        op = record.get("op")
        ts = int(record.get("ts", 0))
        if op == "leader_change":
            self.leader_epoch = int(record["epoch"])
            return None
        if op == "session_open":
            self.sessions[offset] = {"owner": record.get("owner", ""),
                                     "timeout_ms": int(record.get("timeout_ms", 9000))}
            return offset
        if op == "session_close":
            session = int(record["session"])
            if self.sessions.pop(session, None) is None:
                raise _Failed(SESSION_EXPIRED, f"session {session} is not open")
            for path in sorted((p for p, n in self.nodes.items() if n.session == session), key=len, reverse=True):
                self._remove(path, recursive=True)
            return None
        path = record.get("path")
        problem = _check_path(path)
        if problem:
            raise _Failed(BAD_ARGUMENTS, problem)
        if op == "create":
            return self._create(path, decode(record.get("data")), ts, bool(record.get("makepath")),
                                bool(record.get("sequence")), int(record.get("session") or 0))
        if op == "ensure":
            if path not in self.nodes:
                self._create(path, b"", ts, True, False, 0)
            return path
        node = self.nodes.get(path)
        if node is None:
            raise _Failed(NO_NODE, path)
        version = int(record.get("version", -1))
        if version != -1 and version != node.version:
            raise _Failed(BAD_VERSION, f"{path}: version {node.version}, expected {version}")
        if op == "set":
            node.data = decode(record.get("data"))
            node.version += 1
            node.mtime = ts
            return node.stat().version
        if op == "delete":
            if path == "/":
                raise _Failed(BAD_ARGUMENTS, "cannot delete /")
            if node.children and not record.get("recursive"):
                raise _Failed(NOT_EMPTY, path)
            self._remove(path, recursive=True)
            return None
        raise _Failed(BAD_ARGUMENTS, f"unknown op {op!r}")

    def _create(self, path: str, data: bytes, ts: int, makepath: bool, sequence: bool, session: int) -> str:
        if session and session not in self.sessions:
            raise _Failed(SESSION_EXPIRED, f"session {session} is not open")
        parent = _parent(path)
        if parent not in self.nodes:
            if not makepath:
                raise _Failed(NO_NODE, parent)
            self._create(parent, b"", ts, True, False, 0)
        parent_node = self.nodes[parent]
        if parent_node.session:
            raise _Failed(BAD_ARGUMENTS, f"{parent} is ephemeral: it cannot have children")
        if sequence:
            path = f"{path}{parent_node.cversion:010d}"
        if path in self.nodes:
            raise _Failed(NODE_EXISTS, path)
        self.nodes[path] = Node(data=data, session=session, ctime=ts, mtime=ts)
        parent_node.children.add(path.rsplit("/", 1)[1])
        parent_node.cversion += 1
        return path

    def _remove(self, path: str, recursive: bool) -> None:
        node = self.nodes.get(path)
        if node is None:
            return
        if recursive:
            for child in list(node.children):
                self._remove(f"{path.rstrip('/')}/{child}", recursive=True)
        del self.nodes[path]
        parent = self.nodes.get(_parent(path))
        if parent is not None:
            parent.children.discard(path.rsplit("/", 1)[1])
            parent.cversion += 1


class _Failed(Exception):
    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name
        self.message = message
