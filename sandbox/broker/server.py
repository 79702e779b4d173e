"""One sandbox broker process: Kafka listener, inter-broker channel, ZooKeeper session, loops.

Lifecycle (as a Kafka broker in ZK mode):
start -> ZooKeeper session -> bind listeners -> register ``/brokers/ids/<id>`` (waiting for a
previous session's node to expire after a crash, as Kafka does) -> run for the controller ->
serve. SIGTERM -> controlled shutdown (leadership moved away, out of ISRs) -> persist replica
state -> resign as controller -> close the session (the ephemeral registration disappears) -> exit 0.
SIGKILL skips all of that: the registration lingers until the session times out
(``zookeeper.session.timeout.ms``), and only then does the controller move leadership.

Requests on one client connection are processed one at a time, in order (Kafka mutes a channel until
its response is sent), so a waiting acks=all Produce or long-poll Fetch holds back later requests of
that connection only (a JoinGroup waiting for its rebalance too). Followers of record topics run one
record fetcher task per leader broker (``_record_fetcher``), each a chain of long polls on the side
channel. The group coordinator (:mod:`sandbox.broker.groups`) loads the ``__consumer_offsets``
partitions this broker leads after every metadata refresh and runs its timers every 0.1 s.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import os
import signal
import time

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NodeExistsError
from kio.index import load_request_schema

from sandbox import settings
from sandbox.broker import features, rpc, zkpaths
from sandbox.broker.apis import NO_RESPONSE, KafkaApis
from sandbox.broker.config import BrokerConfig
from sandbox.broker.controller import Controller
from sandbox.broker.controller_node import read_features
from sandbox.broker.groups import GroupCoordinator
from sandbox.broker.metadata import MetadataCache
from sandbox.broker.protocol import (
    API_VERSIONS,
    Request,
    UnsupportedVersion,
    api_versions_error,
    encode_list_offsets_v0,
    encode_response,
    read_request,
    supported_apis,
)
from sandbox.broker.quorum_client import RemoteQuorumClient
from sandbox.broker.replicas import RECORD_FETCH_MAX_WAIT_S, ReplicaManager

log = logging.getLogger(__name__)
KRAFT_REFRESH_FALLBACK_S = 10.0  # KRaft: full metadata re-read without a change (watches do the rest)
MAX_NOTED_VERSIONS = 500  # distinct (api, version, client software) first-request log lines per broker run


class BrokerStartError(RuntimeError):
    """The broker cannot start (the message says why); the process exits 1."""


class Broker:
    """Wires the metadata cache, replica manager, controller and Kafka API handlers of one broker."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        if config.kraft:
            self.zk = RemoteQuorumClient(config.quorum_voters or {}, settings.REPLICATION_PORT, config.broker_id,
                                         f"broker {config.broker_id}", config.broker_session_timeout_s)
        else:
            self.zk = KazooClient(hosts=config.zookeeper_connect, timeout=config.zk_session_timeout_s)
        self.cache = MetadataCache(self.zk)
        self.controller = Controller(config.broker_id, self.zk, self.cache)
        self.replicas = ReplicaManager(config.broker_id, config.log_dir, self.cache, config.replica_lag_time_max_s)
        self.apis = KafkaApis(self)
        self.groups = GroupCoordinator(self)
        self.apis.handlers.update(self.groups.handlers)
        self.rpc = rpc.RpcClient(settings.REPLICATION_PORT)
        self.controller_rpc = rpc.RpcClient(settings.REPLICATION_PORT, timeout_s=15.0)  # KRaft: forwarded requests
        # record fetches long-poll: their own connections, so they never hold up the simulated fetches
        self.record_rpc = rpc.RpcClient(settings.REPLICATION_PORT, timeout_s=RECORD_FETCH_MAX_WAIT_S + 2.0)
        self._record_fetchers: dict[int, asyncio.Task] = {}
        self._producer_ids: tuple[int, int] = (0, -1)  # the reserved block not handed out yet (first, last)
        self.leader_leo_hint: dict[tuple[str, int], float] = {}
        self.default_min_isr = int(config.properties.get("min.insync.replicas", "1"))
        self.loop: asyncio.AbstractEventLoop | None = None
        self._refresh_pending = False
        self._stop = asyncio.Event()
        self._shutdown_done = False  # controlled shutdown finished: no longer runs for controller
        self._tasks: list[asyncio.Task] = []
        self._session_lost = False
        self._noted: set[tuple[int, int, str]] = set()  # (api key, version, client software) seen

    # --- lifecycle -----------------------------------------------------------------------------
    async def run(self) -> None:
        """Start, serve until SIGTERM/SIGINT, then shut down in a controlled way.

        Raises:
            BrokerStartError: ZooKeeper unreachable, listener address in use, or the registration
                of this broker id still held by another live session.
        """
        self.loop = asyncio.get_running_loop()
        self.replicas.load()
        try:
            self.zk.start(timeout=10)
        except Exception as exc:
            where = (f"the controller quorum {self.config.quorum_voters}" if self.config.kraft
                     else f"ZooKeeper at {self.config.zookeeper_connect}")
            raise BrokerStartError(f"cannot reach {where}: {exc}") from exc
        self.zk.add_listener(self._on_zk_state)
        try:
            kafka_server = await asyncio.start_server(
                self._on_connection, self.config.host, self.config.port, reuse_address=True
            )
            rpc_server = await rpc.serve(self.config.host, settings.REPLICATION_PORT, self._on_rpc)
        except OSError as exc:
            raise BrokerStartError(f"cannot listen on {self.config.host}:{self.config.port}: {exc}") from exc
        await self._register()
        self.cache.refresh()
        self.replicas.on_metadata()
        self.groups.on_metadata()
        self._install_watches()
        if not self.config.kraft:
            self.controller.try_elect()
        for loop_fn in (self._produce_loop, self._fetch_loop, self._record_fetch_loop, self._persist_loop,
                        self._housekeeping_loop, self._group_loop):
            self._tasks.append(asyncio.create_task(loop_fn()))
        for sig in (signal.SIGTERM, signal.SIGINT):
            self.loop.add_signal_handler(sig, self._stop.set)
        if self.config.kraft:
            log.info("broker %s started (Kafka %s, KRaft, metadata.version %s) on %s:%s, rack %s",
                     self.config.broker_id, self.config.version, self.finalized_features().get(features.FEATURE),
                     self.config.host, self.config.port, self.config.rack)
        else:
            log.info("broker %s started (Kafka %s, IBP %s) on %s:%s, rack %s", self.config.broker_id,
                     self.config.version, self.config.inter_broker_protocol_version, self.config.host,
                     self.config.port, self.config.rack)
        await self._stop.wait()
        log.info("broker %s: controlled shutdown", self.config.broker_id)
        await self._controlled_shutdown()
        self._shutdown_done = True
        for task in [*self._tasks, *self._record_fetchers.values()]:
            task.cancel()
        kafka_server.close()
        rpc_server.close()
        self.rpc.close()
        self.record_rpc.close()
        self.replicas.save()
        self.controller.resign()
        self.zk.stop()
        self.zk.close()
        log.info("broker %s stopped", self.config.broker_id)

    def _check_cluster_id(self) -> None:
        """Kafka's ``meta.properties`` rule: a log dir belongs to one cluster. The first start records
        ZooKeeper's ``/cluster/id`` there; a later start (or a ZooKeeper session re-established against
        a different ensemble) with another id is refused (InconsistentClusterIdException)."""
        data = self.cache._get_json("/cluster/id") or {}
        cluster_id = data.get("id")
        meta = self.config.log_dir / "meta.properties"
        recorded = None
        if meta.exists():
            for line in meta.read_text().splitlines():
                if line.startswith("cluster.id="):
                    recorded = line.split("=", 1)[1].strip()
        if recorded and cluster_id != recorded:
            raise BrokerStartError(
                f"the cluster id in ZooKeeper ({cluster_id}) does not match cluster.id={recorded} in {meta}: "
                "this broker's data belongs to another cluster (wrong zookeeper.connect?)"
            )
        if cluster_id and not recorded:
            self.config.log_dir.mkdir(parents=True, exist_ok=True)
            meta.write_text(f"version=0\nbroker.id={self.config.broker_id}\ncluster.id={cluster_id}\n")

    def finalized_features(self) -> dict[str, int]:
        """KRaft: ``{feature: finalized level}`` from the metadata log (``{}`` in ZooKeeper mode)."""
        if not self.config.kraft:
            return {}
        return read_features(self.zk)[0]

    async def _register(self) -> None:
        self._check_cluster_id()
        path = f"{zkpaths.BROKER_IDS}/{self.config.broker_id}"
        endpoint = f"PLAINTEXT://{self.config.host}:{self.config.port}"
        supported = {}
        if self.config.kraft:
            low, high = features.supported_range(self.config.version)
            level = self.finalized_features().get(features.FEATURE)
            if level is not None and not low <= level <= high:
                raise BrokerStartError(
                    f"the cluster's metadata.version level {level} is outside what Kafka {self.config.version} "
                    f"supports ({low}-{high}): registration refused (UNSUPPORTED_VERSION)")
            supported = {features.FEATURE: [low, high]}
        data = zkpaths.dumps({
            "features": supported,
            "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
            "endpoints": [endpoint],
            "jmx_port": -1,
            "port": self.config.port,
            "host": self.config.host,
            "version": 5,
            "timestamp": str(zkpaths.now_ms()),
            "rack": self.config.rack,
        })
        deadline = time.monotonic() + self.config.zk_session_timeout_s + 5
        while True:
            try:
                self.zk.create(path, data, ephemeral=True, makepath=True)
                return
            except NodeExistsError:
                if time.monotonic() > deadline:
                    raise BrokerStartError(
                        f"{path} is held by another ZooKeeper session: is broker {self.config.broker_id} "
                        "already running elsewhere?"
                    ) from None
                log.warning("%s still registered by an old session; waiting for it to expire", path)
                await asyncio.sleep(0.5)

    def _on_zk_state(self, state: KazooState) -> None:
        if state == KazooState.LOST:
            self._session_lost = True

    # --- ZooKeeper watches -> refreshes ----------------------------------------------------------
    def _threadsafe(self, fn) -> None:
        if self.loop is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(fn)

    def _install_watches(self) -> None:
        zk = self.zk

        def on_change(*_args) -> None:
            self._threadsafe(self.schedule_refresh)

        zk.ChildrenWatch(zkpaths.BROKER_IDS, on_change)
        zk.ChildrenWatch(zkpaths.BROKER_TOPICS, on_change)
        zk.ChildrenWatch(zkpaths.CONFIG_CHANGES, on_change)
        zk.DataWatch(zkpaths.METADATA_VERSION, on_change)
        if self.config.kraft:
            return  # the partition controller runs on the active KRaft controller

        def on_controller(data, _stat, *_args) -> None:
            self._threadsafe(self.schedule_refresh)
            if data is None:
                self._threadsafe(self._elect)

        zk.DataWatch(zkpaths.CONTROLLER, on_controller)

        def on_reassign(data, _stat, *_args) -> None:
            if data is not None:
                self._threadsafe(self.controller.on_reassign_node)

        zk.DataWatch(zkpaths.REASSIGN, on_reassign)

        def on_election(data, _stat, *_args) -> None:
            if data is not None:
                self._threadsafe(self.controller.on_preferred_election_node)

        zk.DataWatch(zkpaths.PREFERRED_ELECTION, on_election)

    def _elect(self) -> None:
        # A broker in controlled shutdown still runs for controller, as Kafka's KafkaServer.shutdown stops
        # its KafkaController only after controlledShutdown(): when the controller itself stops together
        # with other brokers (a whole-cluster stop), one of them takes over and answers their controlled
        # shutdown requests, instead of each waiting out CONTROLLED_SHUTDOWN_TIMEOUT_S for a controller.
        if not self._shutdown_done:
            self.controller.try_elect()

    def schedule_refresh(self) -> None:
        """Refresh the metadata cache soon (coalescing bursts of ZooKeeper events)."""
        if self._refresh_pending or self.loop is None:
            return
        self._refresh_pending = True
        self.loop.call_later(0.01, self._refresh)

    def _refresh(self) -> None:
        self._refresh_pending = False
        try:
            self.cache.refresh()
            self.replicas.on_metadata()
            self.groups.on_metadata()
            self.controller.on_metadata_change()
        except Exception:
            log.exception("metadata refresh failed")

    # --- loops --------------------------------------------------------------------------------
    async def _produce_loop(self) -> None:
        while True:
            await asyncio.sleep(0.1)
            try:
                for p, isr in self.replicas.produce_tick(self.default_min_isr):
                    log.info("shrinking ISR of %s from %s to %s", p.name, p.isr, isr)
                    self.replicas.mark_pending(p.key)
                    asyncio.create_task(self._alter_partition(p.topic, p.partition, p.leader_epoch, isr))
            except Exception:
                log.exception("produce tick failed")

    async def _fetch_loop(self) -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(settings.REPLICA_FETCH_INTERVAL_S)
            now = time.monotonic()
            dt, last = min(now - last, 1.0), now
            plan = self.replicas.fetch_plan()
            if not plan:
                continue
            calls = [self._fetch_from(leader, parts) for leader, parts in plan.items()]
            answers = []
            for result in await asyncio.gather(*calls, return_exceptions=True):
                if isinstance(result, list):
                    answers.extend(result)
            try:
                self.replicas.apply_fetch(answers, dt)
            except Exception:
                log.exception("applying fetch results failed")

    async def _fetch_from(self, leader: int, parts) -> list:
        broker = self.cache.brokers.get(leader)
        if broker is None:
            return []
        request = {
            "op": "fetch",
            "broker": self.config.broker_id,
            "partitions": [[p.topic, p.partition, self.replicas.replicas[p.key].leo] for p in parts],
        }
        response = await self.rpc.call(broker.host, request)
        answers = list(zip(parts, response.get("partitions", []), strict=False))
        for p, answer in answers:
            if not answer.get("error"):
                self.leader_leo_hint[p.key] = answer["leo"]
        return answers

    async def _record_fetch_loop(self) -> None:
        """Keep one record fetcher task per leader broker we follow record-topic partitions of."""
        while True:
            await asyncio.sleep(0.1)
            for leader in self.replicas.record_fetch_plan():
                task = self._record_fetchers.get(leader)
                if task is None or task.done():
                    self._record_fetchers[leader] = asyncio.create_task(self._record_fetcher(leader))

    async def _record_fetcher(self, leader: int) -> None:
        """Fetch record batches from ``leader`` back to back (each call long-polls on the leader) until
        we follow no record partition of it any more."""
        while True:
            parts = self.replicas.record_fetch_plan().get(leader)
            broker = self.cache.brokers.get(leader)
            if not parts or broker is None:
                return
            request = {"op": "record_fetch", "broker": self.config.broker_id, "max_wait_s": RECORD_FETCH_MAX_WAIT_S,
                       "partitions": self.replicas.record_fetch_request(parts)}
            try:
                response = await self.record_rpc.call(broker.host, request)
            except (OSError, TimeoutError) as exc:
                log.debug("record fetch from broker %s failed: %s", leader, exc)
                await asyncio.sleep(settings.REPLICA_FETCH_INTERVAL_S)
                continue
            answers = response.get("partitions", [])
            try:
                self.replicas.apply_record_fetch(leader, parts, answers)
            except Exception:
                log.exception("applying record fetch results failed")
                await asyncio.sleep(settings.REPLICA_FETCH_INTERVAL_S)
            for p, answer in zip(parts, answers, strict=False):
                if not answer.get("error"):
                    self.leader_leo_hint[p.key] = answer["leo"]
            if not answers or all(a.get("error") for a in answers):
                await asyncio.sleep(settings.REPLICA_FETCH_INTERVAL_S)

    async def _on_record_fetch(self, request: dict) -> dict:
        """Leader side of a record fetch: answer at once when there is something to send, else wait for a
        change up to the request's ``max_wait_s``."""
        rows = request["partitions"]
        follower = request["broker"]
        deadline = time.monotonic() + min(float(request.get("max_wait_s", 0.0)), RECORD_FETCH_MAX_WAIT_S)
        while True:
            answers = [self.replicas.on_record_fetch(follower, t, p, leo, epoch) for t, p, leo, epoch, _hw in rows]
            urgent = any(a.get("error") or a.get("batches") or "truncate" in a or "expand" in a for a in answers)
            remaining = deadline - time.monotonic()
            if urgent or remaining <= 0 or self.replicas.record_fetch_pending(rows):
                break
            await self.replicas.wait_change(remaining)
        for (topic, partition, *_rest), answer in zip(rows, answers, strict=True):
            expand = answer.pop("expand", None)
            if expand is not None:
                p = self.cache.partition(topic, partition)
                log.info("expanding ISR of %s to %s", p.name, expand)
                self.replicas.mark_pending(p.key)
                asyncio.get_running_loop().create_task(self._alter_partition(topic, partition, p.leader_epoch, expand))
        return {"partitions": answers}

    def next_producer_id(self) -> int:
        """The next producer id of this broker's reserved block; reserves a new block in ZooKeeper when
        the block is used up (Kafka's ``ProducerIdManager``)."""
        first, last = self._producer_ids
        if first > last:
            first, last = zkpaths.allocate_producer_ids(self.zk, self.config.broker_id)
        self._producer_ids = (first + 1, last)
        return first

    async def _group_loop(self) -> None:
        """The group coordinator's timers: session expiry, join and sync deadlines (every 0.1 s)."""
        while True:
            await asyncio.sleep(0.1)
            try:
                self.groups.tick()
            except Exception:
                log.exception("group coordinator tick failed")

    async def _persist_loop(self) -> None:
        while True:
            await asyncio.sleep(settings.STATE_PERSIST_INTERVAL_S)
            self.replicas.save()

    async def _housekeeping_loop(self) -> None:
        last_rebalance = last_refresh = time.monotonic()
        while True:
            await asyncio.sleep(1.0)
            try:
                if self._session_lost and self.zk.connected:
                    self._session_lost = False
                    log.warning("ZooKeeper session was lost; registering again")
                    self.controller.active = False
                    try:
                        await self._register()
                    except BrokerStartError as exc:
                        log.error("cannot register again, shutting down: %s", exc)
                        self._stop.set()
                if self.config.kraft:
                    # the local copy of the metadata log fires every watch itself: a full re-read is only a
                    # fallback here (ZooKeeper watches can be missed, so ZooKeeper mode re-reads every second);
                    # leader rebalance and elections belong to the active KRaft controller
                    if time.monotonic() - last_refresh >= KRAFT_REFRESH_FALLBACK_S:
                        last_refresh = time.monotonic()
                        self._refresh()
                    continue
                self._refresh()
                if self.cache.controller_id == -1:
                    self._elect()
                interval = self.config.leader_imbalance_check_interval_s
                if self.config.auto_leader_rebalance and time.monotonic() - last_rebalance >= interval:
                    last_rebalance = time.monotonic()
                    self.controller.auto_rebalance(self.config.leader_imbalance_per_broker_percentage)
            except Exception:
                log.exception("housekeeping failed")

    # --- controller requests -------------------------------------------------------------------
    async def _to_controller(self, request: dict) -> dict:
        """Send ``request`` to the controller (KRaft: the active controller; ZooKeeper mode: the broker
        holding ``/controller``, or answer it here when that is this broker). ``{"error": 41}`` when unknown."""
        if self.config.kraft:
            host = self.zk.leader_host()
            if host is None:
                return {"error": 41}
            answer = await self.controller_rpc.call(host, request)
            if answer.get("error") == 41 and answer.get("leader") is not None:
                self.zk.leader_id = answer["leader"]
            return answer
        if self.controller.active:
            return self._on_rpc(request)
        controller = self.cache.brokers.get(self.cache.controller_id)
        if controller is None:
            return {"error": 41}
        return await self.rpc.call(controller.host, request)

    async def _alter_partition(self, topic: str, partition: int, leader_epoch: int, isr: list[int]) -> None:
        try:
            result = await self._to_controller({
                "op": "alter_partition", "broker": self.config.broker_id, "topic": topic,
                "partition": partition, "leader_epoch": leader_epoch, "isr": isr,
            })
            if result.get("error"):
                log.info("AlterPartition %s-%s -> %s rejected: %s", topic, partition, isr, result)
        except Exception as exc:
            log.warning("AlterPartition %s-%s failed: %s", topic, partition, exc)

    async def _controlled_shutdown(self) -> None:
        self.replicas.fetching = False
        deadline = time.monotonic() + settings.CONTROLLED_SHUTDOWN_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                result = await self._to_controller({"op": "controlled_shutdown", "broker": self.config.broker_id})
                if result.get("error") == 0:
                    if result["remaining_leaders"]:
                        log.warning("no other in-sync replica to lead %s", result["remaining_leaders"])
                    return
            except Exception as exc:
                log.warning("controlled shutdown request failed: %s", exc)
            await asyncio.sleep(0.5)
        log.error("controlled shutdown did not complete in %ss; shutting down anyway",
                  settings.CONTROLLED_SHUTDOWN_TIMEOUT_S)

    # --- inter-broker channel ------------------------------------------------------------------
    def _on_rpc(self, request: dict):
        """Answer one side-channel request (a dict, or a coroutine giving it for ``record_fetch``)."""
        op = request.get("op")
        if op == "fetch":
            answers = []
            for topic, partition, leo in request["partitions"]:
                answer = self.replicas.on_follower_fetch(request["broker"], topic, partition, leo)
                expand = answer.pop("expand", None)
                if expand is not None:
                    p = self.cache.partition(topic, partition)
                    log.info("expanding ISR of %s to %s", p.name, expand)
                    self.replicas.mark_pending(p.key)
                    asyncio.get_running_loop().create_task(
                        self._alter_partition(topic, partition, p.leader_epoch, expand))
                answers.append(answer)
            return {"partitions": answers}
        if op == "record_fetch":
            return self._on_record_fetch(request)
        if op == "alter_partition":
            return self.controller.alter_partition(
                request["broker"], request["topic"], request["partition"], request["leader_epoch"], request["isr"])
        if op == "controlled_shutdown":
            return self.controller.controlled_shutdown(request["broker"])
        return {"error": f"unknown op {op!r}"}

    # --- Kafka listener -------------------------------------------------------------------------
    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        connection = {"client_host": f"/{peer[0]}" if peer else "", "software": None}
        try:
            while True:
                size = int.from_bytes(await reader.readexactly(4), "big", signed=True)
                frame = await reader.readexactly(size)
                answer = await self._answer(frame, connection)
                if answer is None:  # Kafka closes the connection on a request it cannot serve
                    break
                if answer is NO_RESPONSE:  # Produce with acks=0
                    continue
                writer.write(answer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # CancelledError at shutdown: swallowed, Python 3.11's start_server logs it otherwise
        finally:
            writer.close()

    async def _answer(self, frame: bytes, connection: dict | None = None):
        """The encoded answer to one request frame, None to close the connection, or NO_RESPONSE.
        ``connection`` carries the client's address and software name (ApiVersions v3+, KIP-511)."""
        connection = connection if connection is not None else {}
        apis = supported_apis(self.config.version, self.config.kraft)
        try:
            request = dataclasses.replace(read_request(frame), client_host=connection.get("client_host", ""))
        except UnsupportedVersion as exc:
            log.info("%s", exc)
            return api_versions_error(exc.correlation_id, apis)
        self._note_version(request, connection)
        lo_hi = apis.get(request.api_key)
        if lo_hi is None or not lo_hi[0] <= request.api_version <= lo_hi[1]:
            log.info("unsupported api_key=%s version=%s", request.api_key, request.api_version)
            return api_versions_error(request.correlation_id, apis) if request.api_key == API_VERSIONS else None
        response = self.apis.handle(request)
        if inspect.isawaitable(response):
            response = await response
        if response is None or response is NO_RESPONSE:
            return response
        if request.api_key == 2 and request.api_version == 0:
            return encode_list_offsets_v0(request.correlation_id, response)
        return encode_response(request.correlation_id, response)


    def _note_version(self, request: Request, connection: dict) -> None:
        """Log the first request of each (API, version, client software) this broker receives:
        ``first JoinGroupRequest v5 from librdkafka 2.16.0 (client id rdkafka)``. The client software is
        what ApiVersions v3+ named (KIP-511), else the client id. At most ``MAX_NOTED_VERSIONS`` lines."""
        if request.api_key == API_VERSIONS and request.api_version >= 3:
            body = request.body
            connection["software"] = f"{body.client_software_name} {body.client_software_version}"
        who = connection.get("software") or f"client id {request.client_id}"
        key = (request.api_key, request.api_version, who)
        if key in self._noted or len(self._noted) >= MAX_NOTED_VERSIONS:
            return
        self._noted.add(key)
        try:
            name = load_request_schema(request.api_key, request.api_version).__name__
        except Exception:  # noqa: BLE001 - ListOffsets v0 has no kio class
            name = f"api {request.api_key}"
        log.info("first %s v%s from %s (client id %s)", name, request.api_version, who, request.client_id)


def write_pid_file(path: os.PathLike) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(f"{os.getpid()}\n")
