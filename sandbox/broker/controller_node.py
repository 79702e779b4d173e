"""One KRaft controller process of the sandbox (``process.roles=controller``).

Lifecycle (as a Kafka controller): start -> load the metadata log from ``log.dirs`` -> listen on the
CONTROLLER listener (the sandbox's JSON-line channel, :mod:`sandbox.broker.rpc`) -> take part in the quorum
(:mod:`sandbox.broker.quorum`) -> register itself (``/sandbox/controllers/<id>``: host, version, supported
``metadata.version`` range, as Kafka's ControllerRegistrationRecord, KIP-919). The quorum leader, once its
epoch is committed, is the **active controller**: it runs the partition controller
(:class:`sandbox.broker.controller.Controller`: leader election, ISR changes, controlled shutdown,
reassignments, preferred elections) on the replicated tree, answers the requests brokers forward to it
(AlterPartition, ControlledShutdown, ElectLeaders, reassignments, UpdateFeatures, DescribeQuorum) and fences
brokers whose sessions expire. SIGTERM -> a leader tells the other voters to elect at once (EndQuorumEpoch)
-> exit 0.

The partition controller's calls block on quorum writes, so they run in one worker thread of their own while
the event loop keeps replicating.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import signal
import time
from typing import Any

from sandbox import settings
from sandbox.broker import features, rpc, zkpaths
from sandbox.broker.config import BrokerConfig
from sandbox.broker.controller import Controller
from sandbox.broker.metadata import MetadataCache
from sandbox.broker.metadata_tree import encode
from sandbox.broker.quorum import QuorumNode
from sandbox.broker.quorum_client import LocalQuorumClient

log = logging.getLogger(__name__)

CONTROLLERS = "/sandbox/controllers"
FEATURES = "/feature"  # {"features": {"metadata.version": level}, "epoch": n}
BOOTSTRAP_FILE = "bootstrap.json"  # written into log.dirs by `sandbox up` (kafka-storage format)
NOT_CONTROLLER = 41
HOUSEKEEPING_S = 5.0


def read_features(client: Any) -> tuple[dict[str, int], int]:
    """``({feature: finalized level}, epoch)`` from the tree (``({}, -1)`` before the cluster is formatted)."""
    found = client.exists(FEATURES)
    if found is None:
        return {}, -1
    data = json.loads(client.get(FEATURES)[0] or b"{}")
    return {k: int(v) for k, v in data.get("features", {}).items()}, int(found.version)


class ControllerProcess:
    """Wires the quorum node, the partition controller and the request handlers of one controller."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.broker_id
        self.node = QuorumNode(self.node_id, config.quorum_voters or {}, config.log_dir, settings.REPLICATION_PORT,
                               on_role=self._on_role, on_applied=self._on_applied)
        self.worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="controller")
        self.loop: asyncio.AbstractEventLoop | None = None
        self.client: LocalQuorumClient | None = None
        self.cache: MetadataCache | None = None
        self.controller: Controller | None = None
        self._stop = asyncio.Event()
        self._registered = False

    async def run(self) -> None:
        """Serve until SIGTERM/SIGINT."""
        self.loop = asyncio.get_running_loop()
        server = await rpc.serve(self.config.host, settings.REPLICATION_PORT, self._on_rpc)
        self.node.start()
        for sig in (signal.SIGTERM, signal.SIGINT):
            self.loop.add_signal_handler(sig, self._stop.set)
        low, high = features.supported_range(self.config.version)
        log.info("controller %s started (Kafka %s, metadata.version %s-%s) on %s:%s, voters %s", self.node_id,
                 self.config.version, low, high, self.config.host, settings.REPLICATION_PORT,
                 sorted(self.config.quorum_voters or {}))
        register = asyncio.create_task(self._register())
        housekeeping = asyncio.create_task(self._housekeeping())
        status = asyncio.create_task(self._write_status())
        await self._stop.wait()
        log.info("controller %s: shutting down", self.node_id)
        register.cancel()
        housekeeping.cancel()
        status.cancel()
        (self.config.host_dir / "quorum-status.json").unlink(missing_ok=True)
        await self.node.stop()
        server.close()
        self.worker.shutdown(wait=False, cancel_futures=True)
        log.info("controller %s stopped", self.node_id)

    async def _register(self) -> None:
        """Write this controller's registration through the leader (retried until a leader takes it)."""
        low, high = features.supported_range(self.config.version)
        document = {"host": self.config.host, "port": settings.REPLICATION_PORT, "version": self.config.version,
                    "features": {features.FEATURE: [low, high]}, "timestamp": str(zkpaths.now_ms())}
        record = {"op": "create", "path": f"{CONTROLLERS}/{self.node_id}", "data": encode(zkpaths.dumps(document)),
                  "makepath": True}
        client = rpc.RpcClient(settings.REPLICATION_PORT, timeout_s=5.0)
        voters = self.config.quorum_voters or {}
        try:
            while True:
                leader = self.node.leader_id
                if leader is not None and (leader != self.node_id or self.node.active):
                    try:
                        answer = await client.call(voters[leader], {"op": "write", "records": [
                            {"op": "delete", "path": f"{CONTROLLERS}/{self.node_id}"}, record]})
                        if not answer.get("error"):
                            self._registered = True
                            log.info("controller %s registered with the active controller %s", self.node_id, leader)
                            return
                    except (OSError, TimeoutError):
                        pass
                await asyncio.sleep(0.2)
        finally:
            client.close()

    async def _write_status(self) -> None:
        """``HOST_DIR/quorum-status.json``: what `kafka-service` and `sandbox up` wait for (role, leader,
        epoch, log end offset, high watermark, wall time)."""
        path = self.config.host_dir / "quorum-status.json"
        tmp = path.with_suffix(".tmp")
        while True:
            node = self.node
            tmp.write_text(json.dumps({"node": self.node_id, "role": node.role, "leader": node.leader_id,
                                       "active": node.active, "epoch": node.epoch, "end_offset": node.end_offset,
                                       "high_watermark": node.hw, "applied": node.tree.applied,
                                       "registered": self._registered, "ts": time.time()}))
            tmp.replace(path)
            await asyncio.sleep(0.3)

    # --- the active controller ---------------------------------------------------------------------
    def _on_role(self, leader: bool, epoch: int) -> None:
        self.worker.submit(self._activate if leader else self._deactivate, epoch)

    def _on_applied(self) -> None:
        if self.client is not None and self.controller is not None and self.controller.active:
            self.worker.submit(self._safely, self.client.notify)

    @staticmethod
    def _safely(fn, *args) -> Any:
        try:
            return fn(*args)
        except Exception:
            log.exception("controller task failed")
            return None

    def _activate(self, epoch: int) -> None:
        try:
            if self.client is None:
                self.client = LocalQuorumClient(self.node, self.loop)
                self.cache = MetadataCache(self.client)
                self.controller = Controller(self.node_id, self.client, self.cache)
            self._format()
            self.controller.epoch = epoch
            self.controller.active = True
            self.controller.live = set()
            self.controller.shutting_down = set()
            self.cache.refresh()
            self.controller.on_metadata_change()
            self.controller.on_reassign_node()
            if not getattr(self, "_watching", False):
                self._install_watches()
                self._watching = True
        except Exception:
            log.exception("activating the controller failed")

    def _deactivate(self, _epoch: int) -> None:
        if self.controller is not None:
            self.controller.active = False

    def _format(self) -> None:
        """First leader of a new cluster: the persistent nodes, the cluster id and the bootstrap
        ``metadata.version`` (``kafka-storage format --release-version``)."""
        zkpaths.ensure_cluster_paths(self.client)
        if self.client.exists(FEATURES) is None:
            bootstrap = self.config.log_dir / BOOTSTRAP_FILE
            level = json.loads(bootstrap.read_text())[features.FEATURE] if bootstrap.exists() else \
                features.supported_range(self.config.version)[1]
            self.client.create(FEATURES, zkpaths.dumps({"features": {features.FEATURE: int(level)}}))
            log.info("formatted the cluster: metadata.version level %s", level)

    def _install_watches(self) -> None:
        client = self.client

        def refresh(*_args) -> None:
            if self.controller.active:
                self.cache.refresh()
                self.controller.on_metadata_change()

        client.ChildrenWatch(zkpaths.BROKER_IDS, refresh)
        client.ChildrenWatch(zkpaths.BROKER_TOPICS, refresh)
        client.ChildrenWatch(zkpaths.CONFIG_CHANGES, refresh)
        client.DataWatch(zkpaths.METADATA_VERSION, refresh)  # partition state written: e.g. a reassignment done

        def on_reassign(data, _stat, *_args) -> None:
            if data is not None:
                self.controller.on_reassign_node()

        def on_election(data, _stat, *_args) -> None:
            if data is not None:
                self.controller.on_preferred_election_node()

        client.DataWatch(zkpaths.REASSIGN, on_reassign)
        client.DataWatch(zkpaths.PREFERRED_ELECTION, on_election)

    async def _housekeeping(self) -> None:
        """The partition controller's fallback pass (every ``HOUSEKEEPING_S``; the tree's watches trigger it on
        every change) and the leader rebalance of ``auto.leader.rebalance.enable``."""
        last_rebalance = time.monotonic()
        interval = self.config.leader_imbalance_check_interval_s
        while True:
            await asyncio.sleep(HOUSEKEEPING_S)
            if self.controller is None or not self.controller.active:
                continue

            def tick(rebalance: bool) -> None:
                self.cache.refresh()
                self.controller.on_metadata_change()
                if rebalance:
                    self.controller.auto_rebalance(self.config.leader_imbalance_per_broker_percentage)

            rebalance = self.config.auto_leader_rebalance and time.monotonic() - last_rebalance >= interval
            if rebalance:
                last_rebalance = time.monotonic()
            await self.loop.run_in_executor(self.worker, self._safely, tick, rebalance)

    # --- requests --------------------------------------------------------------------------------
    def _on_rpc(self, request: dict) -> Any:
        op = request.get("op")
        if op in ("vote", "begin_epoch", "end_epoch", "quorum_fetch", "write"):
            return self.node.handle(request)
        return self._controller_request(op, request)

    async def _controller_request(self, op: str, request: dict) -> dict:
        if op == "describe_quorum":
            answer = self.node.describe()
            if "error" not in answer:
                answer["nodes"] = self._voter_endpoints()
            return answer
        if not self.node.active or self.controller is None or not self.controller.active:
            return {"error": NOT_CONTROLLER, "leader": self.node.leader_id}
        handler = {
            "alter_partition": lambda r: self.controller.alter_partition(
                r["broker"], r["topic"], r["partition"], r["leader_epoch"], r["isr"]),
            "controlled_shutdown": lambda r: self.controller.controlled_shutdown(r["broker"]),
            "elect_preferred": lambda r: {"results": [[t, p, code] for (t, p), code in self.controller.elect_preferred(
                None if r.get("partitions") is None else [tuple(k) for k in r["partitions"]]).items()]},
            "reassign": lambda r: {"results": [[t, p, code, message] for (t, p), (code, message) in
                                               self.controller.reassign({(t, p): replicas for t, p, replicas in
                                                                         r["partitions"]}).items()]},
            "ongoing_reassignments": lambda _r: {"partitions": [
                {"topic": p.topic, "partition": p.partition, "replicas": p.replicas, "adding": p.adding,
                 "removing": p.removing} for p in self.controller.ongoing_reassignments()]},
            "update_features": self._update_features,
        }.get(op)
        if handler is None:
            return {"error": f"unknown op {op!r}"}
        return await self.loop.run_in_executor(self.worker, handler, request)

    def _voter_endpoints(self) -> list[dict]:
        return [{"node_id": v, "listeners": [{"name": "CONTROLLER", "host": host, "port": settings.REPLICATION_PORT}]}
                for v, host in sorted((self.config.quorum_voters or {}).items())]

    def _supported(self) -> dict[str, tuple[int, int]]:
        supported: dict[str, tuple[int, int]] = {}
        client = self.client
        for child in client.get_children(zkpaths.BROKER_IDS):
            data = json.loads(client.get(f"{zkpaths.BROKER_IDS}/{child}")[0] or b"{}")
            rng = (data.get("features") or {}).get(features.FEATURE)
            if rng:
                supported[f"broker {child}"] = (int(rng[0]), int(rng[1]))
        if client.exists(CONTROLLERS):
            for child in client.get_children(CONTROLLERS):
                data = json.loads(client.get(f"{CONTROLLERS}/{child}")[0] or b"{}")
                rng = (data.get("features") or {}).get(features.FEATURE)
                if rng:
                    supported[f"controller {child}"] = (int(rng[0]), int(rng[1]))
        return supported

    def _update_features(self, request: dict) -> dict:
        """UpdateFeatures (KIP-584): ``updates`` = ``[{"feature", "level", "upgrade_type"}]``, ``validate_only``.
        Returns ``{"results": [{"feature", "error_code", "error_message"}]}``."""
        finalized, _epoch = read_features(self.client)
        results = []
        new = dict(finalized)
        for update in request.get("updates", []):
            name, level, kind = update["feature"], int(update["level"]), int(update.get("upgrade_type", 1))
            if name != features.FEATURE:
                results.append({"feature": name, "error_code": features.INVALID_UPDATE_VERSION,
                                "error_message": f"Invalid update version {level} for feature {name}. The "
                                                 "controller does not support the given feature."})
                continue
            reason = features.check_update(finalized.get(name, 0), level, kind, self._supported())
            if reason:
                log.info("UpdateFeatures %s=%s refused: %s", name, level, reason)
                results.append({"feature": name, "error_code": features.INVALID_UPDATE_VERSION,
                                "error_message": reason})
                continue
            new[name] = level
            results.append({"feature": name, "error_code": 0, "error_message": None})
        if new != finalized and not request.get("validate_only") and all(r["error_code"] == 0 for r in results):
            self.client.set(FEATURES, zkpaths.dumps({"features": new}))
            log.info("finalized features %s (were %s)", new, finalized)
            self.controller.bump()
        return {"results": results}
