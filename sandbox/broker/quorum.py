"""The KRaft controller quorum of the sandbox: leader election and replication of the metadata log.

Follows KIP-595 (Kafka's Raft), simplified to what operators observe:

- Voters (``controller.quorum.voters``) elect a leader per epoch: a voter that has not heard from a leader
  for ``controller.quorum.fetch.timeout.ms`` (2 s) becomes a candidate (epoch + 1, votes for itself) and
  asks the others; a vote is granted once per epoch and only to a candidate whose log is at least as
  up to date (last epoch, then end offset). A majority of votes makes the leader, which writes a
  ``leader_change`` record (LeaderChangeMessage) and tells the others (BeginQuorumEpoch). Failed elections
  back off randomly (``controller.quorum.election.backoff.max.ms``, 1 s). A leader that stops cleanly tells
  the others to elect at once (EndQuorumEpoch); one that has not been fetched from by a majority for 1.5 x
  the fetch timeout resigns (check-quorum).
- Replication is pull-based: followers and observers (brokers) send Fetch long polls with their log end
  offset and the epoch of their last record; a follower whose log diverged from the leader's is told
  where to truncate (DivergingEpoch). The high watermark is the largest offset held by a majority of
  voters, counted only once the current epoch's first record is among it. Observers receive committed
  records only.
- DescribeQuorum's numbers are the leader's: per replica the log end offset it last fetched from, the time
  of that fetch, and the last time it was caught up (Kafka's rule: a fetch at or beyond the leader's end
  offset is caught up now; a fetch at or beyond the end offset the leader had at the replica's previous
  fetch was caught up then).
- Broker sessions: each broker keeps a session alive by fetching (KRaft's BrokerHeartbeat); the leader
  closes a session whose broker has not fetched for its timeout (``broker.session.timeout.ms``): the broker
  is fenced (its registration node goes, see :mod:`sandbox.broker.metadata_tree`).

The log and the vote are kept in the controller's ``log.dirs`` (``metadata.log``, JSON lines of
``[epoch, record]``, and ``quorum-state.json``), so a restarted controller comes back with its log and
catches up from the leader. Messages travel on the sandbox's JSON-line channel (:mod:`sandbox.broker.rpc`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sandbox.broker import rpc
from sandbox.broker.metadata_tree import MetadataTree

log = logging.getLogger(__name__)

FETCH_TIMEOUT_S = 2.0  # controller.quorum.fetch.timeout.ms (Kafka default 2000)
ELECTION_TIMEOUT_S = 1.0  # controller.quorum.election.timeout.ms (Kafka default 1000)
ELECTION_BACKOFF_MAX_S = 1.0  # controller.quorum.election.backoff.max.ms (Kafka default 1000)
FETCH_MAX_WAIT_S = 0.5  # a fetch long poll's maximum wait (Kafka: controller.quorum.fetch... 500 ms)
MAX_RECORDS_PER_FETCH = 2000
OBSERVER_FORGET_S = 60.0  # an observer not heard from for this long leaves DescribeQuorum's list
WRITE_TIMEOUT_S = 10.0


def now_ms() -> int:
    return int(time.time() * 1000)


class QuorumNode:
    """One voter of the metadata quorum (runs in the controller process's event loop).

    ``voters``: node id -> host (the RPC port is the same everywhere). ``on_role`` is called (in the loop)
    with ``(is_leader, epoch)`` whenever this node becomes or stops being the active leader with its epoch
    committed; ``on_applied`` after each batch of committed records is applied to :attr:`tree`.
    """

    def __init__(self, node_id: int, voters: dict[int, str], data_dir: Path, port: int,
                 on_role: Callable[[bool, int], None] | None = None,
                 on_applied: Callable[[], None] | None = None) -> None:
        if node_id not in voters:
            raise ValueError(f"node {node_id} is not one of the voters {sorted(voters)}")
        self.node_id = node_id
        self.voters = dict(voters)
        self.data_dir = data_dir
        self.port = port
        self.on_role = on_role or (lambda _leader, _epoch: None)
        self.on_applied = on_applied or (lambda: None)
        self.tree = MetadataTree()
        self.entries: list[tuple[int, dict]] = []  # (epoch, record); offset = index
        self.epoch = 0
        self.voted_for: int | None = None
        self.role = "follower"
        self.leader_id: int | None = None
        self.hw = 0
        self.active = False  # leader with its epoch's first record committed
        self._last_contact = time.monotonic()
        self._election_at = time.monotonic() + ELECTION_TIMEOUT_S + random.uniform(0, ELECTION_BACKOFF_MAX_S)
        self._changed = asyncio.Event()
        self._waiters: dict[int, asyncio.Future] = {}
        self._replicas: dict[int, dict[str, Any]] = {}  # leader's view: replica id -> fetch state
        self._leader_since = time.monotonic()
        self._heartbeats: dict[int, float] = {}  # session id -> monotonic time of the last fetch
        self._closing: set[int] = set()
        self._fetch_rpc = rpc.RpcClient(port, timeout_s=FETCH_MAX_WAIT_S + 1.5)
        self._vote_rpc = rpc.RpcClient(port, timeout_s=0.5)
        self._tasks: list[asyncio.Task] = []
        self._load()

    # --- persistence ----------------------------------------------------------------------------
    @property
    def _log_file(self) -> Path:
        return self.data_dir / "metadata.log"

    @property
    def _state_file(self) -> Path:
        return self.data_dir / "quorum-state.json"

    def _load(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self._state_file.exists():
            state = json.loads(self._state_file.read_text())
            self.epoch, self.voted_for = int(state["epoch"]), state.get("voted_for")
            # Kafka's quorum-state keeps the last known leader: a restarted voter fetches from it at once
            # instead of starting an election that would depose a healthy leader
            leader = state.get("leader_id")
            if leader is not None and int(leader) != self.node_id and int(leader) in self.voters:
                self.leader_id = int(leader)
        if self._log_file.exists():
            for line in self._log_file.read_text().splitlines():
                if line.strip():
                    epoch, record = json.loads(line)
                    self.entries.append((int(epoch), record))
        log.info("quorum node %s: epoch %s, %s records on disk", self.node_id, self.epoch, len(self.entries))

    def _save_state(self) -> None:
        tmp = self._state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps({"epoch": self.epoch, "voted_for": self.voted_for, "leader_id": self.leader_id}))
        tmp.replace(self._state_file)

    def _append_to_disk(self, entries: list[tuple[int, dict]]) -> None:
        with self._log_file.open("a", encoding="utf-8") as handle:
            for epoch, record in entries:
                handle.write(json.dumps([epoch, record]) + "\n")

    def _truncate(self, offset: int) -> None:
        if offset >= len(self.entries):
            return
        log.info("truncating the metadata log from %s to %s (diverged from leader %s)", len(self.entries), offset,
                 self.leader_id)
        del self.entries[offset:]
        tmp = self._log_file.with_suffix(".tmp")
        tmp.write_text("".join(json.dumps([e, r]) + "\n" for e, r in self.entries))
        tmp.replace(self._log_file)

    # --- helpers -------------------------------------------------------------------------------
    @property
    def end_offset(self) -> int:
        return len(self.entries)

    @property
    def last_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else 0

    def _majority(self) -> int:
        return len(self.voters) // 2 + 1

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _set_epoch(self, epoch: int, leader: int | None) -> None:
        was_active = self.active
        if epoch > self.epoch:
            self.epoch, self.voted_for = epoch, None
            self._save_state()
        self.role = "follower"
        changed = leader != self.leader_id
        self.leader_id = leader
        if changed:
            self._save_state()
        self.active = False
        self._last_contact = time.monotonic()
        self._fail_waiters()
        if was_active:
            log.info("node %s is no longer the active controller (epoch %s, leader %s)", self.node_id, epoch, leader)
            self.on_role(False, epoch)

    def _fail_waiters(self) -> None:
        for future in self._waiters.values():
            if not future.done():
                future.set_result({"error": "not_leader", "leader": self.leader_id})
        self._waiters.clear()

    def _apply_committed(self) -> None:
        applied_any = False
        while self.tree.applied < self.hw:
            offset = self.tree.applied
            result = self.tree.apply(self.entries[offset][1])
            applied_any = True
            waiter = self._waiters.pop(offset, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(result)
            if (self.role == "leader" and not self.active and self.entries[offset][1].get("op") == "leader_change"
                    and self.entries[offset][0] == self.epoch):
                self.active = True
                self._leader_since = time.monotonic()
                for session in self.tree.sessions:
                    self._heartbeats[session] = time.monotonic()
                log.info("node %s is the active controller (epoch %s)", self.node_id, self.epoch)
                self.on_role(True, self.epoch)
        if applied_any:
            self.on_applied()

    # --- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the election, fetch and leader housekeeping loops (in the running event loop)."""
        self._tasks = [asyncio.create_task(self._follower_loop()), asyncio.create_task(self._leader_loop())]

    async def stop(self) -> None:
        """Stop; a leader first asks the other voters to elect a new leader at once (EndQuorumEpoch)."""
        if self.role == "leader":
            await asyncio.gather(*(self._call(v, {"op": "end_epoch", "epoch": self.epoch, "leader": self.node_id},
                                              self._vote_rpc) for v in self.voters if v != self.node_id),
                                 return_exceptions=True)
        for task in self._tasks:
            task.cancel()
        self._fail_waiters()
        self._fetch_rpc.close()
        self._vote_rpc.close()

    async def _call(self, voter: int, request: dict, client: rpc.RpcClient) -> dict:
        return await client.call(self.voters[voter], request)

    # --- follower / candidate --------------------------------------------------------------------
    async def _follower_loop(self) -> None:
        while True:
            try:
                if self.role == "leader":
                    await asyncio.sleep(0.1)
                    continue
                now = time.monotonic()
                if self.leader_id is None or self.leader_id == self.node_id:
                    if now >= self._election_at:
                        await self._campaign()
                    else:
                        await asyncio.sleep(0.05)
                    continue
                await self._fetch_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("quorum loop failed")
                await asyncio.sleep(0.2)

    async def _fetch_once(self) -> None:
        leader = self.leader_id
        request = {"op": "quorum_fetch", "replica": self.node_id, "epoch": self.epoch, "offset": self.end_offset,
                   "last_epoch": self.last_epoch, "hw": self.hw, "max_wait_s": FETCH_MAX_WAIT_S}
        try:
            answer = await self._call(leader, request, self._fetch_rpc)
        except (OSError, TimeoutError) as exc:
            answer = {"error": f"unreachable: {exc}"}
        if answer.get("error"):
            hint, epoch = answer.get("leader"), int(answer.get("epoch", 0))
            if epoch > self.epoch or (epoch == self.epoch and hint not in (None, leader)):
                self._set_epoch(epoch, hint)
            elif time.monotonic() - self._last_contact > FETCH_TIMEOUT_S:
                log.info("no fetch answer from leader %s for %.1f s: starting an election", leader, FETCH_TIMEOUT_S)
                self.leader_id = None
                self._election_at = time.monotonic()
            else:
                await asyncio.sleep(0.1)
            return
        if int(answer["epoch"]) > self.epoch:
            self._set_epoch(int(answer["epoch"]), int(answer["leader"]))
        self._last_contact = time.monotonic()
        if "truncate_to" in answer:
            self._truncate(int(answer["truncate_to"]))
            return
        records = [(int(e), r) for e, r in answer.get("records", [])]
        if records and int(answer["start"]) == self.end_offset:
            self.entries.extend(records)
            self._append_to_disk(records)
        self.hw = max(self.hw, min(int(answer["hw"]), self.end_offset))
        self._apply_committed()

    async def _campaign(self) -> None:
        if not await self._pre_vote():
            return
        self.epoch += 1
        self.voted_for = self.node_id
        self.role = "candidate"
        self.leader_id = None
        self._save_state()
        epoch = self.epoch
        log.info("node %s is a candidate in epoch %s", self.node_id, epoch)
        request = {"op": "vote", "epoch": epoch, "candidate": self.node_id, "last_epoch": self.last_epoch,
                   "end_offset": self.end_offset}
        others = [v for v in self.voters if v != self.node_id]
        answers = await asyncio.gather(*(self._call(v, request, self._vote_rpc) for v in others),
                                       return_exceptions=True)
        if self.epoch != epoch or self.role != "candidate":
            return  # a newer epoch or a leader appeared meanwhile
        granted = 1
        for answer in answers:
            if isinstance(answer, dict):
                if int(answer.get("epoch", 0)) > self.epoch:
                    self._set_epoch(int(answer["epoch"]), None)
                    self._election_at = time.monotonic() + ELECTION_TIMEOUT_S
                    return
                granted += bool(answer.get("granted"))
        if granted >= self._majority():
            self._become_leader()
        else:
            self._election_at = time.monotonic() + random.uniform(0.1, ELECTION_BACKOFF_MAX_S)

    async def _pre_vote(self) -> bool:
        """KIP-996 pre-vote: ask whether the others would vote, changing no epoch. A voter that still hears from
        a leader refuses and names it, so a restarted or cut-off voter follows that leader instead of deposing
        it. True when a majority would vote."""
        request = {"op": "vote", "prevote": True, "epoch": self.epoch + 1, "candidate": self.node_id,
                   "last_epoch": self.last_epoch, "end_offset": self.end_offset}
        others = [v for v in self.voters if v != self.node_id]
        answers = await asyncio.gather(*(self._call(v, request, self._vote_rpc) for v in others),
                                       return_exceptions=True)
        granted = 1
        for answer in answers:
            if not isinstance(answer, dict):
                continue
            leader, epoch = answer.get("leader"), int(answer.get("epoch", 0))
            if leader is not None and leader != self.node_id and epoch >= self.epoch:
                log.info("node %s: voter reports leader %s in epoch %s: following it", self.node_id, leader, epoch)
                self._set_epoch(epoch, int(leader))
                return False
            granted += bool(answer.get("granted"))
        if granted >= self._majority():
            return True
        self._election_at = time.monotonic() + random.uniform(0.1, ELECTION_BACKOFF_MAX_S)
        return False

    def _become_leader(self) -> None:
        self.role = "leader"
        self.leader_id = self.node_id
        self._save_state()
        self.active = False
        self._leader_since = time.monotonic()
        self._replicas = {v: {"leo": -1, "last_fetch_ms": -1, "caught_up_ms": -1, "leader_leo_at_fetch": 0,
                              "seen": 0.0} for v in self.voters if v != self.node_id}
        log.info("node %s is the quorum leader in epoch %s", self.node_id, self.epoch)
        self._append([{"op": "leader_change", "epoch": self.epoch, "leader": self.node_id}])
        for voter in self.voters:
            if voter != self.node_id:
                asyncio.ensure_future(self._begin_epoch(voter))

    async def _begin_epoch(self, voter: int) -> None:
        try:
            await self._call(voter, {"op": "begin_epoch", "epoch": self.epoch, "leader": self.node_id}, self._vote_rpc)
        except (OSError, TimeoutError):
            pass

    # --- leader --------------------------------------------------------------------------------
    def _append(self, records: list[dict]) -> list[int]:
        ts = now_ms()
        first = self.end_offset
        entries = [(self.epoch, {**r, "ts": ts}) for r in records]
        self.entries.extend(entries)
        self._append_to_disk(entries)
        self._advance_hw()
        self._notify()
        return list(range(first, self.end_offset))

    def _advance_hw(self) -> None:
        if self.role != "leader":
            return
        offsets = sorted([self.end_offset] + [r["leo"] for v, r in self._replicas.items() if v in self.voters],
                         reverse=True)
        candidate = offsets[self._majority() - 1]
        if candidate > self.hw and self.entries[candidate - 1][0] == self.epoch:
            self.hw = candidate
            self._apply_committed()
            self._notify()

    async def write(self, records: list[dict]) -> list[dict]:
        """Append ``records`` (leader only) and wait until they are committed and applied; returns each
        record's result (``{"ok": ...}`` / ``{"error": ...}``), or ``[{"error": "not_leader", "leader"}]``."""
        if self.role != "leader" or not self.active:
            return [{"error": "not_leader", "leader": self.leader_id}]
        loop = asyncio.get_running_loop()
        first = self.end_offset
        futures = []
        for offset in range(first, first + len(records)):
            future = loop.create_future()
            self._waiters[offset] = future
            futures.append(future)
        self._append(records)
        done, _ = await asyncio.wait(futures, timeout=WRITE_TIMEOUT_S)
        if len(done) < len(futures):
            return [{"error": "timeout", "leader": self.leader_id}]
        return [f.result() for f in futures]

    async def _leader_loop(self) -> None:
        while True:
            await asyncio.sleep(0.2)
            if self.role != "leader":
                continue
            try:
                now = time.monotonic()
                fetched = 1 + sum(1 for v, r in self._replicas.items() if v in self.voters
                                  and now - r["seen"] <= FETCH_TIMEOUT_S * 1.5)
                if fetched < self._majority() and now - self._leader_since > FETCH_TIMEOUT_S * 1.5:
                    log.warning("node %s: no fetch from a majority of voters for %.1f s: resigning",
                                self.node_id, FETCH_TIMEOUT_S * 1.5)
                    self._set_epoch(self.epoch, None)
                    self._election_at = time.monotonic() + ELECTION_TIMEOUT_S
                    continue
                if not self.active:
                    continue
                for session, info in list(self.tree.sessions.items()):
                    last = self._heartbeats.setdefault(session, now)
                    if session not in self._closing and now - last > info["timeout_ms"] / 1000.0:
                        self._closing.add(session)
                        log.info("session %s of %s expired (no heartbeat for %.1f s): fencing it", session,
                                 info["owner"], now - last)
                        asyncio.ensure_future(self._close_session(session, "expired"))
                for replica, info in list(self._replicas.items()):
                    if replica not in self.voters and now - info["seen"] > OBSERVER_FORGET_S:
                        del self._replicas[replica]
            except Exception:
                log.exception("leader housekeeping failed")

    async def _close_session(self, session: int, reason: str) -> None:
        try:
            await self.write([{"op": "session_close", "session": session, "reason": reason}])
        finally:
            self._closing.discard(session)

    # --- requests ----------------------------------------------------------------------------------
    def handle(self, request: dict) -> Any:
        """Answer a quorum request (``vote``, ``begin_epoch``, ``end_epoch``, ``quorum_fetch``, ``write``,
        ``describe_quorum``); a dict or an awaitable of one."""
        op = request.get("op")
        if op == "vote":
            return self._on_vote(request)
        if op == "begin_epoch":
            if int(request["epoch"]) >= self.epoch and int(request["leader"]) != self.node_id:
                self._set_epoch(int(request["epoch"]), int(request["leader"]))
            return {"epoch": self.epoch}
        if op == "end_epoch":
            if int(request["epoch"]) == self.epoch and self.leader_id == int(request["leader"]):
                self.leader_id = None
                self._election_at = time.monotonic() + random.uniform(0, 0.2)
            return {"epoch": self.epoch}
        if op == "quorum_fetch":
            return self._on_fetch(request)
        if op == "write":
            return self._on_write(request)
        if op == "describe_quorum":
            return self.describe()
        return {"error": f"unknown op {op!r}"}

    async def _on_write(self, request: dict) -> dict:
        results = await self.write(list(request["records"]))
        if results and results[0].get("error") in ("not_leader", "timeout"):
            return {"error": results[0]["error"], "leader": self.leader_id, "epoch": self.epoch}
        return {"results": results, "applied": self.tree.applied}

    def _on_vote(self, request: dict) -> dict:
        epoch, candidate = int(request["epoch"]), int(request["candidate"])
        log_ok = (int(request["last_epoch"]), int(request["end_offset"])) >= (self.last_epoch, self.end_offset)
        if request.get("prevote"):
            hears_leader = self.role == "leader" or (
                self.leader_id is not None and time.monotonic() - self._last_contact < FETCH_TIMEOUT_S)
            leader = self.leader_id if hears_leader else None
            return {"epoch": self.epoch, "leader": leader, "granted": log_ok and not hears_leader}
        if epoch < self.epoch:
            return {"epoch": self.epoch, "granted": False}
        if epoch > self.epoch:
            self._set_epoch(epoch, None)
        granted = log_ok and self.voted_for in (None, candidate) and self.role != "leader"
        if granted:
            self.voted_for = candidate
            self._save_state()
            self._election_at = time.monotonic() + ELECTION_TIMEOUT_S + random.uniform(0, ELECTION_BACKOFF_MAX_S)
        log.info("vote for %s in epoch %s: %s", candidate, epoch, "granted" if granted else "refused")
        return {"epoch": self.epoch, "granted": granted}

    def _track(self, replica: int, offset: int, session: int | None) -> None:
        now, wall = time.monotonic(), now_ms()
        info = self._replicas.setdefault(replica, {"leo": -1, "last_fetch_ms": -1, "caught_up_ms": -1,
                                                   "leader_leo_at_fetch": 0, "seen": 0.0})
        if offset >= self.end_offset:
            info["caught_up_ms"] = wall
        elif offset >= info["leader_leo_at_fetch"] and info["last_fetch_ms"] > 0:
            info["caught_up_ms"] = max(info["caught_up_ms"], info["last_fetch_ms"])
        info.update(leo=offset, last_fetch_ms=wall, leader_leo_at_fetch=self.end_offset, seen=now)
        if session is not None:
            self._heartbeats[int(session)] = now

    async def _on_fetch(self, request: dict) -> dict:
        if self.role != "leader" or int(request.get("epoch", 0)) > self.epoch:
            return {"error": "not_leader", "leader": self.leader_id, "epoch": self.epoch}
        replica, offset = int(request["replica"]), int(request["offset"])
        observer = bool(request.get("observer"))
        if not observer:
            last_epoch = int(request.get("last_epoch", 0))
            if offset > self.end_offset or (offset > 0 and self.entries[offset - 1][0] != last_epoch):
                end_of_epoch = next((i for i, (e, _) in enumerate(self.entries) if e > last_epoch), self.end_offset)
                return {"epoch": self.epoch, "leader": self.node_id,
                        "truncate_to": max(0, min(end_of_epoch, offset - 1))}
        if observer and offset > self.hw:
            return {"error": "offset_out_of_range", "leader": self.node_id, "epoch": self.epoch}
        if replica >= 0:  # tools fetch as replica -1: not replicas, not listed (as in Kafka)
            self._track(replica, offset, request.get("session"))
        elif request.get("session") is not None:
            self._heartbeats[int(request["session"])] = time.monotonic()
        if not observer:
            self._advance_hw()
        limit = self.hw if observer else self.end_offset
        deadline = time.monotonic() + min(float(request.get("max_wait_s", 0.0)), FETCH_MAX_WAIT_S)
        while offset >= limit and int(request.get("hw", 0)) >= self.hw and self.role == "leader":
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except TimeoutError:
                break
            limit = self.hw if observer else self.end_offset
        if self.role != "leader":
            return {"error": "not_leader", "leader": self.leader_id, "epoch": self.epoch}
        end = min(limit, offset + MAX_RECORDS_PER_FETCH)
        return {"epoch": self.epoch, "leader": self.node_id, "start": offset,
                "records": [list(e) for e in self.entries[offset:end]], "hw": self.hw}

    def describe(self) -> dict:
        """DescribeQuorum's answer (leader only): ``leader_id``, ``leader_epoch``, ``high_watermark``,
        ``voters`` / ``observers`` rows with ``replica_id``, ``log_end_offset``, ``last_fetch_timestamp``,
        ``last_caught_up_timestamp`` (epoch ms, -1 unknown)."""
        if self.role != "leader":
            return {"error": "not_leader", "leader": self.leader_id, "epoch": self.epoch}
        wall = now_ms()

        def row(replica: int, info: dict | None) -> dict:
            if replica == self.node_id:
                return {"replica_id": replica, "log_end_offset": self.end_offset, "last_fetch_timestamp": wall,
                        "last_caught_up_timestamp": wall}
            info = info or {}
            return {"replica_id": replica, "log_end_offset": info.get("leo", -1),
                    "last_fetch_timestamp": info.get("last_fetch_ms", -1),
                    "last_caught_up_timestamp": info.get("caught_up_ms", -1)}

        return {
            "leader_id": self.node_id, "leader_epoch": self.epoch, "high_watermark": self.hw,
            "voters": [row(v, self._replicas.get(v)) for v in sorted(self.voters)],
            "observers": [row(r, info) for r, info in sorted(self._replicas.items()) if r not in self.voters],
        }
