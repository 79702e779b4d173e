"""The controller: the one broker that owns ``/controller`` decides leaders and ISRs.

It follows Kafka's ZK-mode ``KafkaController`` rules, simplified to what operators observe:

- Election: the first broker to create the ephemeral ``/controller`` wins; when it goes away
  (stop, or ZooKeeper session expiry after a crash) the others race again.
- Broker failure (its ``/brokers/ids`` node vanishes): partitions it led get the first live ISR
  replica (in replica order) as leader, it leaves every ISR; with no live ISR replica the
  partition goes offline (leader -1) keeping its last ISR (``unclean.leader.election.enable=false``).
- Broker start: offline partitions whose ISR holds it get it back as leader; elsewhere it is a
  follower and rejoins ISRs when its leader reports it caught up (AlterPartition, KIP-497).
- Controlled shutdown (``controlled.shutdown.enable``): leadership moves to other live ISR
  replicas, the broker leaves the ISRs of partitions it follows; partitions where it is the only
  ISR replica keep it as leader until it exits.
- Preferred leader election (ElectLeaders, ``/admin/preferred_replica_election``, and the auto
  rebalance of ``auto.leader.rebalance.enable`` / ``leader.imbalance.per.broker.percentage``).
- Reassignment (KIP-455; AlterPartitionReassignments and ``/admin/reassign_partitions``): replicas
  become target + old, new replicas copy the log and join the ISR, then the old ones are dropped
  and leadership moves into the target set if needed; cancel restores the original replicas.

All partition state is written to ZooKeeper (the source of truth), then
``/sandbox/metadata_version`` is bumped so that every broker refreshes its cache.
"""

from __future__ import annotations

import logging

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from sandbox.broker import zkpaths
from sandbox.broker.metadata import MetadataCache, PartitionState

log = logging.getLogger(__name__)

# Kafka error codes used in controller answers (see kio.schema.errors.ErrorCode)
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_REPLICA_ASSIGNMENT = 39
NOT_CONTROLLER = 41
PREFERRED_LEADER_NOT_AVAILABLE = 80
ELECTION_NOT_NEEDED = 84
NO_REASSIGNMENT_IN_PROGRESS = 85


class Controller:
    """Controller duties of one broker; inactive until :meth:`try_elect` wins ``/controller``."""

    def __init__(self, broker_id: int, zk: KazooClient, cache: MetadataCache) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.cache = cache
        self.active = False
        self.epoch = 0
        self.live: set[int] = set()
        self.shutting_down: set[int] = set()
        self.zk_reassignments: set[tuple[str, int]] = set()

    # --- election --------------------------------------------------------------------------
    def try_elect(self) -> bool:
        """Try to become the controller (ephemeral ``/controller``); True when this broker is it."""
        if self.active:
            return True
        try:
            self.zk.create(
                zkpaths.CONTROLLER,
                zkpaths.dumps({"version": 1, "brokerid": self.broker_id, "timestamp": str(zkpaths.now_ms())}),
                ephemeral=True,
            )
        except NodeExistsError:
            return False
        data, stat = self.zk.get(zkpaths.CONTROLLER_EPOCH)
        self.epoch = int(data or b"0") + 1
        self.zk.set(zkpaths.CONTROLLER_EPOCH, str(self.epoch).encode(), version=stat.version)
        self.active = True
        self.live = set()
        self.shutting_down = set()
        log.info("broker %s is now the controller (epoch %s)", self.broker_id, self.epoch)
        self.cache.refresh()
        self.on_metadata_change()
        self.on_reassign_node()
        return True

    def resign(self) -> None:
        """Give up the controller role (used at controlled shutdown of the controller itself)."""
        if not self.active:
            return
        self.active = False
        try:
            data, _ = self.zk.get(zkpaths.CONTROLLER)
            if (zkpaths.loads(data) or {}).get("brokerid") == self.broker_id:
                self.zk.delete(zkpaths.CONTROLLER)
        except NoNodeError:
            pass

    # --- events ------------------------------------------------------------------------------
    def on_metadata_change(self) -> None:
        """Reconcile after brokers came or went or topics appeared (cache already refreshed)."""
        if not self.active:
            return
        live = set(self.cache.brokers)
        gone, joined = self.live - live, live - self.live
        if gone or joined:
            log.info("brokers: live %s, gone %s, joined %s", sorted(live), sorted(gone), sorted(joined))
        self.live = live
        self.shutting_down &= live
        changed: list[PartitionState] = []
        for p in self.cache.partitions():
            if not p.initialized:
                alive = [r for r in p.replicas if r in live]
                p.leader = alive[0] if alive else -1
                p.isr = alive or p.replicas[:1]
                p.leader_epoch = 0
                p.initialized = True
                changed.append(p)
                continue
            isr_live = [r for r in p.isr if r in live]
            if p.leader not in live:
                candidates = [r for r in p.replicas if r in isr_live and r not in self.shutting_down]
                if candidates:
                    p.leader, p.isr = candidates[0], isr_live
                    p.leader_epoch += 1
                    changed.append(p)
                elif p.leader != -1:
                    p.leader = -1  # offline: keep the last ISR so only it may lead again
                    p.leader_epoch += 1
                    changed.append(p)
            elif isr_live != p.isr:
                p.isr = isr_live
                p.leader_epoch += 1
                changed.append(p)
        self._write_states(changed)
        self.check_reassignments()

    def alter_partition(self, sender: int, topic: str, partition: int, leader_epoch: int, isr: list[int]) -> dict:
        """A leader asks to shrink or expand an ISR (AlterPartition, KIP-497).

        Rejected when the sender is not the current leader at ``leader_epoch`` or would add a
        broker that is down or shutting down. Returns ``{"error": code, "isr": [...]}``.
        """
        p = self.cache.partition(topic, partition)
        if p is None:
            return {"error": UNKNOWN_TOPIC_OR_PARTITION}
        if not self.active:
            return {"error": NOT_CONTROLLER}
        if p.leader != sender or p.leader_epoch != leader_epoch:
            return {"error": 74, "isr": p.isr}  # FENCED_LEADER_EPOCH
        added = [r for r in isr if r not in p.isr]
        if any(r not in self.live or r in self.shutting_down or r not in p.replicas for r in added):
            return {"error": 107, "isr": p.isr}  # INELIGIBLE_REPLICA
        new_isr = [r for r in p.replicas if r in isr]
        if sender not in new_isr:
            new_isr.insert(0, sender)
        if new_isr != p.isr:
            p.isr = new_isr
            self._write_states([p])
            self.check_reassignments()
        return {"error": NONE, "isr": p.isr}

    def controlled_shutdown(self, broker: int) -> dict:
        """Move leadership off ``broker`` and take it out of ISRs before it stops.

        Returns ``{"error": 0, "remaining_leaders": [names]}``: partitions it still leads because no
        other ISR replica is alive (they go offline when it exits).
        """
        if not self.active:
            return {"error": NOT_CONTROLLER}
        self.shutting_down.add(broker)
        changed, remaining = [], []
        for p in self.cache.partitions():
            if broker not in p.replicas:
                continue
            if p.leader == broker:
                candidates = [
                    r for r in p.replicas
                    if r != broker and r in p.isr and r in self.live and r not in self.shutting_down
                ]
                if candidates:
                    p.leader = candidates[0]
                    p.isr = [r for r in p.isr if r != broker]
                    p.leader_epoch += 1
                    changed.append(p)
                else:
                    remaining.append(p.name)
            elif broker in p.isr and p.leader != -1:
                p.isr = [r for r in p.isr if r != broker]
                p.leader_epoch += 1
                changed.append(p)
        self._write_states(changed)
        log.info("controlled shutdown of broker %s: moved %s, still leading %s", broker, len(changed), remaining)
        return {"error": NONE, "remaining_leaders": remaining}

    def elect_preferred(self, partitions: list[tuple[str, int]] | None) -> dict[tuple[str, int], int]:
        """Preferred leader election: make the first replica the leader where it is alive and in
        the ISR. ``None`` means every partition (then only the elected ones are returned, as Kafka
        does). Returns ``{(topic, partition): error code}``: 0, ELECTION_NOT_NEEDED (84),
        PREFERRED_LEADER_NOT_AVAILABLE (80) or UNKNOWN_TOPIC_OR_PARTITION (3)."""
        results: dict[tuple[str, int], int] = {}
        changed = []
        keys = partitions if partitions is not None else [p.key for p in self.cache.partitions()]
        for key in keys:
            p = self.cache.partition(*key)
            if p is None:
                results[key] = UNKNOWN_TOPIC_OR_PARTITION
                continue
            preferred = p.target_replicas[0] if p.target_replicas else -1
            if p.leader == preferred:
                results[key] = ELECTION_NOT_NEEDED
            elif preferred in self.live and preferred in p.isr and preferred not in self.shutting_down:
                p.leader = preferred
                p.leader_epoch += 1
                changed.append(p)
                results[key] = NONE
            else:
                results[key] = PREFERRED_LEADER_NOT_AVAILABLE
        self._write_states(changed)
        if partitions is None:
            results = {k: v for k, v in results.items() if v == NONE}
        return results

    def auto_rebalance(self, imbalance_percentage: int) -> None:
        """``auto.leader.rebalance.enable``: for each broker whose share of partitions it should
        lead but does not exceeds ``leader.imbalance.per.broker.percentage``, elect preferred leaders."""
        if not self.active:
            return
        by_preferred: dict[int, list[PartitionState]] = {}
        for p in self.cache.partitions():
            if p.target_replicas:
                by_preferred.setdefault(p.target_replicas[0], []).append(p)
        for broker, parts in by_preferred.items():
            not_led = [p for p in parts if p.leader != broker]
            if parts and 100.0 * len(not_led) / len(parts) > imbalance_percentage:
                self.elect_preferred([p.key for p in not_led])

    # --- reassignments ---------------------------------------------------------------------------
    def reassign(self, requests: dict[tuple[str, int], list[int] | None]) -> dict[tuple[str, int], tuple[int, str]]:
        """Start (target replica list) or cancel (None) reassignments (KIP-455).

        Returns ``{(topic, partition): (error code, message)}``; unknown brokers or duplicate
        replicas give INVALID_REPLICA_ASSIGNMENT (39), unknown partitions 3, cancelling nothing 85.
        """
        results: dict[tuple[str, int], tuple[int, str]] = {}
        touched: dict[str, list[PartitionState]] = {}
        for key, target in requests.items():
            p = self.cache.partition(*key)
            if p is None:
                results[key] = (UNKNOWN_TOPIC_OR_PARTITION, f"{key[0]}-{key[1]} does not exist")
                continue
            original = [r for r in p.replicas if r not in p.adding]
            if target is None:
                if not p.adding and not p.removing:
                    results[key] = (NO_REASSIGNMENT_IN_PROGRESS, f"no reassignment of {p.name} in progress")
                    continue
                self._finish(p, original, cancelled=True)
                results[key] = (NONE, "")
                continue
            target = list(target)
            unknown = sorted(set(target) - set(self.cache.brokers))
            if not target or len(set(target)) != len(target) or unknown:
                why = f"unknown broker ids {unknown}" if unknown else f"invalid replica list {target}"
                results[key] = (INVALID_REPLICA_ASSIGNMENT, f"{p.name}: {why}")
                continue
            p.replicas = target + [r for r in original if r not in target]
            p.adding = [r for r in target if r not in original]
            p.removing = [r for r in original if r not in target]
            touched.setdefault(p.topic, []).append(p)
            results[key] = (NONE, "")
            log.info("reassigning %s: %s -> %s", p.name, original, target)
        for topic in touched:
            self._write_assignment(topic)
        self._bump()
        self.check_reassignments()
        return results

    def check_reassignments(self) -> None:
        """Complete every reassignment whose target replicas are all in the ISR."""
        if not self.active:
            return
        for p in self.cache.partitions():
            if (p.adding or p.removing) and all(r in p.isr for r in p.target_replicas):
                self._finish(p, p.target_replicas, cancelled=False)

    def ongoing_reassignments(self) -> list[PartitionState]:
        return [p for p in self.cache.partitions() if p.adding or p.removing]

    def _finish(self, p: PartitionState, replicas: list[int], *, cancelled: bool) -> None:
        p.replicas = list(replicas)
        p.adding, p.removing = [], []
        p.isr = [r for r in p.isr if r in replicas] or p.isr
        if p.leader not in replicas or p.leader not in self.live:
            candidates = [r for r in replicas if r in p.isr and r in self.live and r not in self.shutting_down]
            p.leader = candidates[0] if candidates else -1
        p.leader_epoch += 1
        self._write_assignment(p.topic)
        self._write_states([p])
        log.info("reassignment of %s %s: replicas %s", p.name, "cancelled" if cancelled else "completed", replicas)
        self.zk_reassignments.discard(p.key)
        if not self.zk_reassignments and self.zk.exists(zkpaths.REASSIGN):
            self._delete_quietly(zkpaths.REASSIGN)

    def on_reassign_node(self) -> None:
        """``/admin/reassign_partitions`` appeared or changed: start the listed reassignments."""
        if not self.active:
            return
        try:
            data, _ = self.zk.get(zkpaths.REASSIGN)
        except NoNodeError:
            return
        document = zkpaths.loads(data) or {}
        requests = {
            (item["topic"], int(item["partition"])): list(item["replicas"])
            for item in document.get("partitions", [])
            if (item["topic"], int(item["partition"])) not in self.zk_reassignments
        }
        if not requests:
            return
        results = self.reassign(requests)
        for key, (code, message) in results.items():
            if code == NONE:
                p = self.cache.partition(*key)
                if p is not None and (p.adding or p.removing):
                    self.zk_reassignments.add(key)
            else:
                log.error("rejected reassignment from %s: %s", zkpaths.REASSIGN, message)
        if not self.zk_reassignments:
            self._delete_quietly(zkpaths.REASSIGN)

    def on_preferred_election_node(self) -> None:
        """``/admin/preferred_replica_election`` (kafka-preferred-replica-election.sh): elect, delete."""
        if not self.active:
            return
        try:
            data, _ = self.zk.get(zkpaths.PREFERRED_ELECTION)
        except NoNodeError:
            return
        document = zkpaths.loads(data) or {}
        items = document.get("partitions")
        self.elect_preferred(None if items is None else [(i["topic"], int(i["partition"])) for i in items])
        self._delete_quietly(zkpaths.PREFERRED_ELECTION)

    # --- ZooKeeper writes ----------------------------------------------------------------------
    def _write_states(self, partitions: list[PartitionState]) -> None:
        if not partitions:
            return
        states = [
            (zkpaths.partition_state_path(p.topic, p.partition), zkpaths.dumps({
                "controller_epoch": self.epoch, "leader": p.leader, "version": 1, "leader_epoch": p.leader_epoch,
                "isr": p.isr}))
            for p in partitions
        ]
        if hasattr(self.zk, "put_many"):  # KRaft: one append of the whole batch (PartitionChangeRecords)
            self.zk.put_many(states)
        else:
            for path, data in states:
                if self.zk.exists(path):
                    self.zk.set(path, data)
                else:
                    self.zk.create(path, data, makepath=True)
        self._bump()

    def _write_assignment(self, topic: str) -> None:
        info = self.cache.topics[topic]
        path = zkpaths.topic_path(topic)
        data, _ = self.zk.get(path)
        document = zkpaths.loads(data) or {}
        document["version"] = 3
        document["partitions"] = {str(p.partition): p.replicas for p in info.partitions.values()}
        document["adding_replicas"] = {str(p.partition): p.adding for p in info.partitions.values() if p.adding}
        document["removing_replicas"] = {
            str(p.partition): p.removing for p in info.partitions.values() if p.removing
        }
        self.zk.set(path, zkpaths.dumps(document))

    def bump(self) -> None:
        """Tell every broker to refresh its metadata (``/sandbox/metadata_version``)."""
        self._bump()

    def _bump(self) -> None:
        try:
            self.zk.set(zkpaths.METADATA_VERSION, str(zkpaths.now_ms()).encode())
        except NoNodeError:
            self.zk.create(zkpaths.METADATA_VERSION, str(zkpaths.now_ms()).encode(), makepath=True)

    def _delete_quietly(self, path: str) -> None:
        try:
            self.zk.delete(path)
        except NoNodeError:
            pass
