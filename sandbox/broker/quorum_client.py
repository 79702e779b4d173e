"""Reading and changing a KRaft-mode sandbox's metadata through the controller quorum, kazoo-style.

:class:`QuorumClient` offers the part of kazoo's ``KazooClient`` API the sandbox's brokers, partition
controller and tools use (``get``, ``exists``, ``get_children``, ``create``, ``set``, ``delete``,
``ensure_path``, ``DataWatch``, ``ChildrenWatch``, ``add_listener``, ``connected``), over the replicated tree
of :mod:`sandbox.broker.metadata_tree`, so the same code runs in both modes:

- :class:`RemoteQuorumClient` (brokers, tools): an observer of the quorum. A background thread long-polls the
  leader for committed records (KRaft brokers replicate ``__cluster_metadata`` the same way) and applies them
  to a local copy; reads are local. Its fetches are its session's heartbeats: a broker that stops
  fetching for ``session_timeout_s`` is fenced by the leader (its ephemeral nodes go), the client then reports
  ``KazooState.LOST`` and opens a new session, as kazoo does after an expiry.
- :class:`LocalQuorumClient` (the active controller): reads the quorum node's own tree, writes through it.

Writes go to the quorum leader and return once the record is committed and applied locally, raising kazoo's
exceptions (NodeExistsError, NoNodeError, BadVersionError, NotEmptyError); ``ConnectionLoss`` when no leader
answers within ``WRITE_TIMEOUT_S``. Watch callbacks run in the client's thread, as kazoo's do.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kazoo import exceptions as kazoo_errors
from kazoo.client import KazooState

from sandbox.broker import rpc
from sandbox.broker.metadata_tree import MetadataTree, encode
from sandbox.broker.quorum import FETCH_MAX_WAIT_S, QuorumNode

log = logging.getLogger(__name__)

WRITE_TIMEOUT_S = 15.0
ERRORS = {
    "NodeExistsError": kazoo_errors.NodeExistsError,
    "NoNodeError": kazoo_errors.NoNodeError,
    "BadVersionError": kazoo_errors.BadVersionError,
    "NotEmptyError": kazoo_errors.NotEmptyError,
    "SessionExpiredError": kazoo_errors.SessionExpiredError,
    "BadArgumentsError": kazoo_errors.BadArgumentsError,
}


def _raise_for(result: dict) -> Any:
    error = result.get("error")
    if error:
        raise ERRORS.get(error, kazoo_errors.ConnectionLoss)(result.get("message") or error)
    return result.get("ok")


class QuorumClient:
    """The kazoo-like API over a :class:`MetadataTree`; subclasses provide the writes and the session."""

    def __init__(self, tree: MetadataTree) -> None:
        self.tree = tree
        self.session: int | None = None
        self._applied = threading.Condition()
        self._data_watches: list[list[Any]] = []  # [path, func, last snapshot]
        self._child_watches: list[list[Any]] = []
        self._listeners: list[Callable[[str], Any]] = []

    # --- to implement -----------------------------------------------------------------------------
    def _write(self, records: list[dict]) -> list[dict]:
        raise NotImplementedError

    @property
    def connected(self) -> bool:
        raise NotImplementedError

    # --- kazoo API ----------------------------------------------------------------------------------
    def add_listener(self, listener: Callable[[str], Any]) -> None:
        self._listeners.append(listener)

    def get(self, path: str, watch: Any = None) -> tuple[bytes, Any]:
        found = self.tree.get(path)
        if found is None:
            raise kazoo_errors.NoNodeError(path)
        return found

    def exists(self, path: str, watch: Any = None) -> Any:
        found = self.tree.get(path)
        return None if found is None else found[1]

    def get_children(self, path: str, watch: Any = None) -> list[str]:
        children = self.tree.children(path)
        if children is None:
            raise kazoo_errors.NoNodeError(path)
        return children

    def create(self, path: str, value: bytes = b"", acl: Any = None, ephemeral: bool = False, sequence: bool = False,
               makepath: bool = False, include_data: bool = False) -> str:
        record = {"op": "create", "path": path, "data": encode(value or b""), "makepath": makepath,
                  "sequence": sequence}
        if ephemeral:
            if self.session is None:
                raise kazoo_errors.SessionExpiredError("no session")
            record["session"] = self.session
        return _raise_for(self._write([record])[0])

    def set(self, path: str, value: bytes, version: int = -1) -> Any:
        _raise_for(self._write([{"op": "set", "path": path, "data": encode(value or b""), "version": version}])[0])
        return self.exists(path)

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> bool:
        _raise_for(self._write([{"op": "delete", "path": path, "version": version, "recursive": recursive}])[0])
        return True

    def ensure_path(self, path: str, acl: Any = None) -> bool:
        if self.tree.get(path) is None:
            _raise_for(self._write([{"op": "ensure", "path": path}])[0])
        return True

    def put_many(self, items: list[tuple[str, bytes]]) -> None:
        """Write every ``(path, data)`` (set when the node exists, else create with its parents) in one
        append to the metadata log, committed together (how a KRaft controller writes a batch of records).

        Raises:
            kazoo exceptions: the first record that failed (the others are applied all the same).
        """
        records = [{"op": "set", "path": path, "data": encode(data), "version": -1} if self.tree.get(path) else
                   {"op": "create", "path": path, "data": encode(data), "makepath": True} for path, data in items]
        for result in self._write(records):
            _raise_for(result)

    def DataWatch(self, path: str, func: Callable) -> None:  # noqa: N802 - kazoo's name
        """Call ``func(data, stat)`` now and whenever ``path`` is created, changed or deleted (data/stat
        None when it does not exist); a callback returning False stops its watch."""
        watch = [path, func, self.tree.snapshot_of(path)]
        self._data_watches.append(watch)
        self._fire_data(watch)

    def ChildrenWatch(self, path: str, func: Callable) -> None:  # noqa: N802 - kazoo's name
        """Call ``func(children)`` now and whenever the children of ``path`` change."""
        watch = [path, func, self.tree.snapshot_of(path)]
        self._child_watches.append(watch)
        self._fire_children(watch)

    def start(self, timeout: float = 15.0) -> None:
        """Nothing to do here (see subclasses)."""

    def stop(self) -> None:
        """Nothing to do here (see subclasses)."""

    def close(self) -> None:
        """Nothing to release (kazoo compatibility)."""

    # --- watches --------------------------------------------------------------------------------
    def _fire_data(self, watch: list) -> None:
        found = self.tree.get(watch[0])
        data, stat = (None, None) if found is None else found
        try:
            func = watch[1]
            arity = len(inspect.signature(func).parameters)
            keep = func(data, stat) if arity < 3 else func(data, stat, None)
        except Exception:
            log.exception("data watch on %s failed", watch[0])
            keep = True
        if keep is False:
            self._data_watches.remove(watch)

    def _fire_children(self, watch: list) -> None:
        children = self.tree.children(watch[0]) or []
        try:
            keep = watch[1](children)
        except Exception:
            log.exception("children watch on %s failed", watch[0])
            keep = True
        if keep is False:
            self._child_watches.remove(watch)

    def _after_apply(self) -> None:
        """Fire the watches whose node changed, wake writers waiting for their offset."""
        with self._applied:
            self._applied.notify_all()
        for watch in list(self._data_watches):
            snap = self.tree.snapshot_of(watch[0])
            if snap != watch[2]:
                watch[2] = snap
                self._fire_data(watch)
        for watch in list(self._child_watches):
            snap = self.tree.snapshot_of(watch[0])
            if snap is None or watch[2] is None or snap[1] != watch[2][1]:
                if snap != watch[2]:
                    watch[2] = snap
                    self._fire_children(watch)

    def _wait_applied(self, offset: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        with self._applied:
            while self.tree.applied < offset:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise kazoo_errors.ConnectionLoss(f"record {offset} not applied locally after {timeout_s} s")
                self._applied.wait(remaining)

    def _state(self, state: str) -> None:
        for listener in list(self._listeners):
            try:
                listener(state)
            except Exception:
                log.exception("state listener failed")


class RemoteQuorumClient(QuorumClient):
    """An observer of the quorum at ``voters`` (node id -> host, RPC port ``port``); see the module docstring.

    ``replica_id``: the broker id (DescribeQuorum lists it among the observers), or a negative id for tools
    (not listed, as Kafka's non-broker observers). ``session_timeout_s``: ``broker.session.timeout.ms``;
    ``None`` opens no session (tools that only read and write persistent nodes).
    """

    def __init__(self, voters: dict[int, str], port: int, replica_id: int, owner: str,
                 session_timeout_s: float | None = 6.0) -> None:
        super().__init__(MetadataTree())
        self.voters = dict(voters)
        self.port = port
        self.replica_id = replica_id
        self.owner = owner
        self.session_timeout_s = session_timeout_s
        self.leader_id: int | None = None
        self.leader_epoch = 0
        self._last_ok = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._caught_up = threading.Event()
        self._hw = 0

    @property
    def connected(self) -> bool:
        limit = self.session_timeout_s or 6.0
        return self._last_ok > 0 and time.monotonic() - self._last_ok < limit

    def leader_host(self) -> str | None:
        return self.voters.get(self.leader_id) if self.leader_id is not None else None

    def start(self, timeout: float = 15.0) -> None:
        """Find the leader, open the session, and return once the local copy caught up with the leader's
        high watermark (a KRaft broker catches up with the metadata log before it unfences).

        Raises:
            kazoo.exceptions.ConnectionLoss / TimeoutError: no quorum leader answered within ``timeout``.
        """
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"quorum-client-{self.owner}",
                                        daemon=True)
        self._thread.start()
        self._rpc_fetch = rpc.RpcClient(self.port, timeout_s=FETCH_MAX_WAIT_S + 1.5)
        self._rpc_write = rpc.RpcClient(self.port, timeout_s=5.0)
        self._fetcher = asyncio.run_coroutine_threadsafe(self._fetch_loop(), self._loop)
        deadline = time.monotonic() + timeout
        if not self._caught_up.wait(timeout):
            self._shutdown_loop()
            raise kazoo_errors.ConnectionLoss(f"no quorum leader among {self.voters} answered in {timeout} s")
        if self.session_timeout_s is not None:
            self.session = self._open_session(max(1.0, deadline - time.monotonic()))

    def _open_session(self, timeout_s: float) -> int:
        result = self._write([{"op": "session_open", "owner": self.owner,
                               "timeout_ms": int(self.session_timeout_s * 1000)}], timeout_s)[0]
        return int(_raise_for(result))

    def stop(self) -> None:
        """Close the session (its ephemeral nodes go at once: a clean shutdown) and stop the thread."""
        if self._loop is None:
            return
        if self.session is not None:
            try:
                self._write([{"op": "session_close", "session": self.session, "reason": "closed"}], 5.0)
            except Exception as exc:  # noqa: BLE001 - the leader then expires it
                log.warning("closing session %s failed: %s", self.session, exc)
            self.session = None
        self._shutdown_loop()

    def _shutdown_loop(self) -> None:
        self._stopping = True
        loop = self._loop
        if loop is None:
            return

        async def close() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._rpc_fetch.close()
            self._rpc_write.close()

        try:
            asyncio.run_coroutine_threadsafe(close(), loop).result(2.0)
        except Exception:  # noqa: BLE001
            pass
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(5.0)
        self._loop = None

    def _candidates(self) -> list[int]:
        order = sorted(self.voters)
        if self.leader_id in self.voters:
            order.remove(self.leader_id)
            order.insert(0, self.leader_id)
        return order

    async def _fetch_loop(self) -> None:
        backoff = 0.05
        while not self._stopping:
            target = self._candidates()[0]
            request = {"op": "quorum_fetch", "replica": self.replica_id, "observer": True,
                       "offset": self.tree.applied, "hw": self._hw, "max_wait_s": FETCH_MAX_WAIT_S,
                       "session": self.session, "epoch": 0}
            try:
                answer = await self._rpc_fetch.call(self.voters[target], request)
            except (OSError, TimeoutError):
                answer = {"error": "unreachable"}
            except asyncio.CancelledError:
                return
            if answer.get("error"):
                hint = answer.get("leader")
                if hint is not None and hint in self.voters and hint != target:
                    self.leader_id = hint
                    continue
                # unknown leader: try the next voter after a short pause
                order = sorted(self.voters)
                self.leader_id = order[(order.index(target) + 1) % len(order)]
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 0.5)
                continue
            backoff = 0.05
            self.leader_id = int(answer["leader"])
            self.leader_epoch = int(answer["epoch"])
            self._last_ok = time.monotonic()
            self._hw = int(answer["hw"])
            records = answer.get("records", [])
            if int(answer["start"]) == self.tree.applied and records:
                for _epoch, record in records:
                    self.tree.apply(record)
                self._after_apply_safely()
            if self.tree.applied >= self._hw:
                self._caught_up.set()
            if self.session is not None and self.session not in self.tree.sessions and self.tree.applied >= self._hw:
                self._session_lost()

    def _after_apply_safely(self) -> None:
        try:
            self._after_apply()
        except Exception:
            log.exception("applying metadata records failed")

    def _session_lost(self) -> None:
        log.warning("quorum session %s of %s expired (fenced): opening a new one", self.session, self.owner)
        self.session = None
        self._state(KazooState.LOST)

        def reopen() -> None:
            while not self._stopping:
                try:
                    self.session = self._open_session(5.0)
                    self._state(KazooState.CONNECTED)
                    return
                except Exception as exc:  # noqa: BLE001
                    log.warning("opening a new session failed: %s", exc)
                    time.sleep(0.5)

        threading.Thread(target=reopen, daemon=True).start()

    def _write(self, records: list[dict], timeout_s: float = WRITE_TIMEOUT_S) -> list[dict]:
        if self._loop is None:
            raise kazoo_errors.ConnectionLoss("client not started")
        if threading.current_thread() is self._thread:
            raise RuntimeError("a write from a watch callback would deadlock the quorum client")
        deadline = time.monotonic() + timeout_s
        future = asyncio.run_coroutine_threadsafe(self._send_write(records, deadline), self._loop)
        try:
            answer = future.result(timeout_s + 1.0)
        except concurrent.futures.TimeoutError:
            raise kazoo_errors.ConnectionLoss(f"no quorum leader accepted a write in {timeout_s} s") from None
        self._wait_applied(int(answer["applied"]), max(1.0, deadline - time.monotonic()))
        return answer["results"]

    async def _send_write(self, records: list[dict], deadline: float) -> dict:
        while True:
            target = self._candidates()[0]
            try:
                answer = await self._rpc_write.call(self.voters[target], {"op": "write", "records": records})
            except (OSError, TimeoutError) as exc:
                answer = {"error": f"unreachable: {exc}"}
            if not answer.get("error"):
                return answer
            hint = answer.get("leader")
            if hint is not None and hint in self.voters and hint != target:
                self.leader_id = hint
            elif answer.get("error") != "timeout":
                order = sorted(self.voters)
                self.leader_id = order[(order.index(target) + 1) % len(order)]
            if time.monotonic() > deadline:
                raise kazoo_errors.ConnectionLoss(f"write not accepted: {answer.get('error')}")
            await asyncio.sleep(0.1)


class LocalQuorumClient(QuorumClient):
    """The active controller's client: reads ``node.tree``, writes through ``node`` in ``loop`` (call it
    from another thread). Watches fire from :meth:`notify` (the controller process calls it after each
    applied batch, in its controller thread)."""

    def __init__(self, node: QuorumNode, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(node.tree)
        self.node = node
        self.loop = loop

    @property
    def connected(self) -> bool:
        return self.node.active

    def _write(self, records: list[dict]) -> list[dict]:
        future = asyncio.run_coroutine_threadsafe(self.node.write(records), self.loop)
        try:
            results = future.result(WRITE_TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            raise kazoo_errors.ConnectionLoss("write not committed in time") from None
        if results and results[0].get("error") in ("not_leader", "timeout"):
            raise kazoo_errors.ConnectionLoss(f"this controller is no longer the leader ({results[0]['error']})")
        return results

    def notify(self) -> None:
        self._after_apply()
