"""Behaviours 1-7 of issue 2 that stop, crash and start brokers, on a sandbox of this module (one
``sandbox up`` shared by the tests here; each test starts from and restores a healthy cluster).

Observed from outside only: confluent-kafka metadata (snapshots and a background QuickWatcher),
kafka-python, kazoo on ZooKeeper, ``kafka-service`` over SSH, ``sandbox crash-broker`` and TCP connects.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from broker_support import (
    SLOT_LIFECYCLE,
    QuickWatcher,
    kadmin,
    log_dir_sizes,
    module_sandbox,
    observe,
    quick_snapshot,
    restore,
    start_broker,
    stop_broker,
)
from confluent_kafka import ElectionType, KafkaError, KafkaException
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from kafka.errors import UnknownBrokerIdError
from kazoo.client import KazooClient
from observers import ClusterView, admin, registration, wait_for

from sandbox import settings
from sandbox.broker import zkpaths
from sandbox.testing import RunningSandbox

pytestmark = [pytest.mark.sandbox, pytest.mark.destructive]

SESSION_S = settings.ZK_SESSION_TIMEOUT_S


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningSandbox]:
    with module_sandbox(request, tmp_path_factory, SLOT_LIFECYCLE, brokers=3, racks=3) as running:
        yield running


@pytest.fixture
def healthy(cluster: RunningSandbox) -> Iterator[RunningSandbox]:
    """The module's sandbox, healthy and balanced (every partition on its preferred leader) at the start
    of the test; after it, stopped brokers are started again and the cluster is healthy."""
    cluster.wait_healthy(timeout_s=30)
    confluent = admin(cluster.bootstrap_servers)
    if any(p.leader != p.replicas[0] for p in observe(confluent).partitions):
        confluent.elect_leaders(ElectionType.PREFERRED, None).result()
        wait_for(lambda: all(p.leader == p.replicas[0] for p in observe(confluent).partitions), 10,
                 what="preferred leaders")
    yield cluster
    restore(cluster)


class RegistrationLog:
    """Records when each broker's ``/brokers/ids/<id>`` appears and vanishes (kazoo ChildrenWatch)."""

    def __init__(self, zk: KazooClient) -> None:
        self.events: list[tuple[float, frozenset[int]]] = []
        zk.ChildrenWatch(zkpaths.BROKER_IDS, self._on_children)

    def _on_children(self, children: list[str]) -> None:
        self.events.append((time.monotonic(), frozenset(int(c) for c in children)))

    def vanished_at(self, broker: int) -> float | None:
        present = False
        for at, ids in self.events:
            if broker in ids:
                present = True
            elif present:
                return at
        return None


class PortProbe(threading.Thread):
    """Connects to a broker's Kafka port every 10 ms; ``closed_at`` is the first refused connect (the
    moment a killed process's listening socket is gone)."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(daemon=True)
        self.address = (host, port)
        self.closed_at: float | None = None
        self._stop = threading.Event()

    def run(self) -> None:
        while not self._stop.is_set():
            try:
                socket.create_connection(self.address, timeout=0.5).close()
            except OSError:
                self.closed_at = time.monotonic()
                return
            self._stop.wait(0.01)

    def stop(self) -> None:
        self._stop.set()


def keys(partitions) -> set[tuple[str, int]]:
    return {(p.topic, p.partition) for p in partitions}


def busiest_follower_broker(view: ClusterView) -> int:
    """A broker that is not the controller and leads partitions (the most of them)."""
    return max((b for b in view.brokers if b != view.controller), key=lambda b: len(view.led_by(b)))


# --- 1 + 3: graceful stop -------------------------------------------------------------------------


def test_graceful_stop_is_a_controlled_shutdown(healthy: RunningSandbox) -> None:
    sb = healthy
    confluent = admin(sb.bootstrap_servers)
    before = observe(confluent)
    victim = busiest_follower_broker(before)
    led, hosted = before.led_by(victim), [p for p in before.partitions if victim in p.replicas]
    assert led and all(len(p.isr) > 1 for p in led)
    with sb.zk() as zk:
        regs = RegistrationLog(zk)
        with QuickWatcher(sb.bootstrap_servers, interval_s=0.1) as watcher:
            began = time.monotonic()
            stop_broker(sb, victim)  # kafka-service stop over SSH: SIGTERM, waits for the exit
            stopped = time.monotonic()
            gone_at = wait_for(lambda: regs.vanished_at(victim), 5, what=f"broker {victim}'s registration to vanish")
            wait_for(lambda: sum(v.at > gone_at and victim not in v.brokers for v in watcher.views) >= 5, 10,
                     what="metadata views after the stop")
        # ZooKeeper's own order (zxids are its clock): the partitions the broker led got other leaders in
        # writes that precede the deletion of its registration. A state written again later (an unrelated
        # ISR change) proves nothing either way, so at least half of them must still show the order.
        ids_pzxid = zk.exists(zkpaths.BROKER_IDS).pzxid
        ordered = 0
        for p in hosted:
            data, stat = zk.get(zkpaths.partition_state_path(p.topic, p.partition))
            state = json.loads(data)
            assert state["leader"] != victim and victim not in state["isr"], (p, state)
            ordered += p in led and stat.mzxid < ids_pzxid
    assert ordered >= len(led) / 2, f"only {ordered} of {len(led)} leader moves provably preceded the exit"
    print(f"\nkafka-service stop of broker {victim} took {stopped - began:.2f} s; registration gone "
          f"{gone_at - began:.2f} s after the stop began; {len(led)} leaders moved, {ordered} provably before it")
    # the independent watcher: never an offline partition, never the stopped broker as leader once it was gone
    assert watcher.ever_offline() == []
    late = [v for v in watcher.views if victim not in v.brokers]
    assert late and all(not v.led_by(victim) for v in late)
    # Metadata lists the live brokers only (behaviour 1)
    after = wait_for(lambda: (v := observe(confluent)) and victim not in v.brokers and v, 10, what="Metadata")
    assert after.brokers == before.brokers - {victim}
    client = kadmin(sb)
    try:
        assert victim not in {b["broker_id"] for b in client.describe_cluster()["brokers"]}
    finally:
        client.close()
    # out of every ISR; exactly its partitions are under-replicated; new leaders come from the old ISR
    assert after.in_isr_of(victim) == [] and after.offline == []
    assert keys(after.under_replicated) == keys(hosted)
    for p in led:
        now = after.partition(p.topic, p.partition)
        assert now.leader != victim and now.leader in p.isr


# --- 2: controller failover -------------------------------------------------------------------------


def test_controller_stop_elects_a_new_controller(healthy: RunningSandbox) -> None:
    sb = healthy
    confluent = admin(sb.bootstrap_servers)
    with sb.zk() as zk:
        old = json.loads(zk.get(zkpaths.CONTROLLER)[0])["brokerid"]
        epoch = int(zk.get(zkpaths.CONTROLLER_EPOCH)[0])
        changes: list[tuple[float, int | None]] = []
        zk.DataWatch(zkpaths.CONTROLLER,
                     lambda data, _stat, *_: changes.append((time.monotonic(), json.loads(data)["brokerid"]
                                                             if data else None)))
        stop_broker(sb, old)
        stopped = time.monotonic()

        def new_controller() -> tuple[float, int] | None:
            return next(((at, b) for at, b in changes if b is not None and b != old), None)

        elected_at, new = wait_for(new_controller, 10, what="a new controller")
        new_epoch = int(zk.get(zkpaths.CONTROLLER_EPOCH)[0])
    # the old controller resigns (deletes /controller) just before it exits, so the new one may be
    # elected before `kafka-service stop` returns
    vanished_at = next((at for at, b in changes if b is None), elected_at)
    print(f"\ncontroller {old} stopped; /controller gone {vanished_at - stopped:+.2f} s after the stop returned, "
          f"broker {new} elected {elected_at - vanished_at:.2f} s later (epoch {epoch} -> {new_epoch})")
    assert new != old and new in sb.broker_ids[: sb.active_count]
    assert elected_at - vanished_at < 3.0 and elected_at - stopped < 3.0
    assert new_epoch > epoch
    wait_for(lambda: observe(confluent).controller == new, 10, what="the new controller in Metadata")
    wait_for(lambda: confluent.describe_cluster().result().controller.id == new, 10, what="... in DescribeCluster")
    # the old controller comes back as an ordinary broker: the controller does not move back
    start_broker(sb, old)
    sb.wait_healthy(timeout_s=30)
    with sb.zk() as zk:
        assert json.loads(zk.get(zkpaths.CONTROLLER)[0])["brokerid"] == new
    assert observe(confluent).controller == new


# --- 4: crash --------------------------------------------------------------------------------------


def test_crash_moves_leaders_only_after_the_session_expires(healthy: RunningSandbox) -> None:
    sb = healthy
    confluent = admin(sb.bootstrap_servers)
    before = observe(confluent)
    victim = busiest_follower_broker(before)
    led = before.led_by(victim)
    assert led
    probe = PortProbe(sb.broker(victim)["host"], sb.broker(victim)["port"])
    with sb.zk() as zk:
        regs = RegistrationLog(zk)
        probe.start()
        with QuickWatcher(sb.bootstrap_servers, interval_s=0.1) as watcher:
            # every broker's metadata cache agrees on the victim's leadership first (each re-reads ZooKeeper every
            # second; a leadership change just before the test, e.g. a preferred election, can still be in flight,
            # so the leadership to watch is the one the views settle on, not necessarily `before`'s)
            def settled() -> set | None:
                last = watcher.views[-10:]
                if len(last) < 10 or not all(victim in v.brokers for v in last):
                    return None
                seen = {frozenset(keys(v.led_by(victim))) for v in last}
                return set(next(iter(seen))) if len(seen) == 1 and next(iter(seen)) else None

            settled_keys = wait_for(settled, 30, what="every broker's metadata agreeing on the victim's leadership")
            led = [p for p in watcher.views[-1].led_by(victim) if (p.topic, p.partition) in settled_keys]
            result = sb.cli("crash-broker", str(victim))
            assert result.returncode == 0, result.stderr
            killed_at = wait_for(lambda: probe.closed_at, 5, what="the killed broker's port to close")

            def moved() -> float | None:
                try:
                    view = quick_snapshot(confluent)
                except KafkaException:
                    return None
                return view.at if all(view.partition(p.topic, p.partition).leader != victim for p in led) else None

            moved_at = wait_for(moved, SESSION_S + 10, interval_s=0.05, what="leaders to move off the crashed broker")
            wait_for(lambda: any(victim not in v.brokers for v in watcher.views), 5, what="a view without it")
        gone_at = regs.vanished_at(victim)
    probe.stop()
    assert gone_at is not None
    lingered, delay = gone_at - killed_at, moved_at - killed_at
    print(f"\nbroker {victim} killed: registration lingered {lingered:.2f} s, leaders moved {delay:.2f} s "
          f"after the kill (zookeeper.session.timeout.ms = {SESSION_S * 1000:.0f})")
    # the session expires zookeeper.session.timeout.ms after the broker's last request to ZooKeeper (it
    # talks to it at least every second), so between ~T - 1 s and T + a tick after the kill
    assert 0.6 * SESSION_S <= lingered <= SESSION_S + 4
    assert 0.6 * SESSION_S <= delay <= SESSION_S + 5
    # Metadata as clients saw it: the dead broker stayed listed, leading its partitions, for most of the
    # session timeout (the views are timed by the observer, so no ZooKeeper notification delay matters)
    first_without = min(v.at for v in watcher.views if victim not in v.brokers)
    assert first_without - killed_at >= 0.6 * SESSION_S
    during = [v for v in watcher.views if killed_at + 0.3 < v.at < first_without - 0.3]
    assert during, ("no metadata view between the kill and the session expiry: "
                    f"{[(round(v.at - killed_at, 2), sorted(v.brokers)) for v in watcher.views]} {watcher.errors}")
    wrong = [(round(v.at - killed_at, 2), sorted(v.brokers), sorted(keys(led) - keys(v.led_by(victim))))
             for v in during if victim not in v.brokers or keys(v.led_by(victim)) != keys(led)]
    assert not wrong, f"views (s after the kill, brokers, partitions no longer led) before the expiry: {wrong}"
    # afterwards: new leaders from the ISR, nothing offline (every partition had another in-sync replica)
    after = wait_for(lambda: (v := observe(confluent)) and victim not in v.brokers and v, 10, what="Metadata")
    assert after.offline == []
    assert all(after.partition(p.topic, p.partition).leader in p.isr for p in led)


# --- 5: restart and catch-up -------------------------------------------------------------------------


def incremental(sb: RunningSandbox, kind: ResourceType, name: str, ops: dict[str, str | None]) -> None:
    client = admin(sb.bootstrap_servers)
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET if v is not None
                           else AlterConfigOpType.DELETE) for k, v in ops.items()]
    for future in client.incremental_alter_configs([ConfigResource(kind, name, incremental_configs=entries)],
                                                   request_timeout=10).values():
        future.result()


CATCHUP_TOPIC = "catchup"
CATCHUP_MSGS_PER_S = 1000.0  # 512 KB/s into the one partition of the topic
CATCHUP_THROTTLE = 1024 * 1024  # the restarted broker's follower throttle for that partition (bytes/s)


def test_restart_catches_up_and_rejoins_the_isr(healthy: RunningSandbox) -> None:
    """A restarted broker resumes from its log (behind by downtime x produce rate), catches up at the
    replication rate (at the throttle for a throttled replica), rejoins every ISR, URP returns to 0."""
    sb = healthy
    confluent = admin(sb.bootstrap_servers)
    with sb.zk() as zk:
        if not zk.exists(zkpaths.topic_path(CATCHUP_TOPIC)):  # kafka-topics.sh --zookeeper style creation
            zkpaths.create_topic(zk, CATCHUP_TOPIC, 1, 3, [(b["id"], b["rack"]) for b in sb.env["brokers"]],
                                 produce_msgs_per_s=CATCHUP_MSGS_PER_S)
    view = wait_for(lambda: (v := observe(confluent)) and any(p.topic == CATCHUP_TOPIC and len(p.isr) == 3
                                                               for p in v.partitions) and v,
                    15, what="the catchup topic to be led with a full ISR")
    hot = view.partition(CATCHUP_TOPIC, 0)
    victim = next(b for b in hot.replicas if b not in (hot.leader, view.controller))
    leader = hot.leader
    produce_bytes_per_s = CATCHUP_MSGS_PER_S * settings.MESSAGE_BYTES
    clients = [kadmin(sb)]  # kafka-python; replaced when it lost track of the restarted broker
    incremental(sb, ResourceType.BROKER, str(victim), {"follower.replication.throttled.rate": str(CATCHUP_THROTTLE)})
    incremental(sb, ResourceType.TOPIC, CATCHUP_TOPIC, {"follower.replication.throttled.replicas": f"0:{victim}"})
    hot_key = (CATCHUP_TOPIC, 0)

    def size_on(broker: int) -> int | None:
        try:
            return log_dir_sizes(clients[-1], broker, {CATCHUP_TOPIC: [0]})[hot_key]["partition_size"]
        except UnknownBrokerIdError:  # its Metadata dropped the broker while it was down: start afresh
            clients.append(kadmin(sb))
            return None

    try:
        with sb.zk() as zk:
            registered_before = int(registration(zk, victim)["timestamp"])
        logged_before_stop = size_on(victim)
        stop_broker(sb, victim)
        stopped_at, at_stop = time.monotonic(), size_on(leader)
        # downtime: until the leader appended ~1.5 MB the stopped replica misses (a deadline, not a sleep)
        wait_for(lambda: size_on(leader) >= at_stop + 1.5 * 1024 * 1024, 15, interval_s=0.2, what="traffic while down")
        start_began = time.monotonic()
        start_broker(sb, victim)  # returns once the broker registered again
        started_at = time.monotonic()
        with sb.zk() as zk:
            registered_after = int(registration(zk, victim)["timestamp"])
        assert registered_after > registered_before  # a new registration, new timestamp

        samples: list[tuple[float, int, int]] = []  # (time, restarted replica's size, leader's size)
        unthrottled: list[float] = []  # when every other partition was back to a full ISR

        def progress() -> bool:
            view = observe(confluent)
            if not unthrottled and not [p for p in view.under_replicated if p.topic != CATCHUP_TOPIC]:
                unthrottled.append(time.monotonic())
            mine = size_on(victim)
            if mine is None:
                return False
            samples.append((time.monotonic(), mine, size_on(leader)))
            in_isr = victim in view.partition(CATCHUP_TOPIC, 0).isr
            return bool(unthrottled) and in_isr and samples[-1][2] - mine < 64 * 1024

        wait_for(progress, 40, interval_s=0.2, what="every replica, the throttled one last, back in its ISR")
        unthrottled_done = unthrottled[0]
        sb.wait_healthy(timeout_s=30)
        healthy_at = time.monotonic()
    finally:
        incremental(sb, ResourceType.TOPIC, CATCHUP_TOPIC, {"follower.replication.throttled.replicas": None})
        incremental(sb, ResourceType.BROKER, str(victim), {"follower.replication.throttled.rate": None})
        for client in clients:
            client.close()
    downtime = start_began - stopped_at
    # the throttled copy: the samples while it was clearly behind (it copies unthrottled once back in the ISR)
    caught = next(i for i, (_, mine, theirs) in enumerate(samples) if theirs - mine < 128 * 1024)
    copying = [(t, mine, theirs) for t, mine, theirs in samples[:caught] if theirs - mine >= 256 * 1024]
    assert len(copying) >= 2, f"caught up before the catch-up could be observed: {samples}"
    (_, mine_first, theirs_first) = samples[0]
    (t_from, mine_from, _), (t_to, mine_to, _) = copying[0], copying[-1]
    copy_rate = (mine_to - mine_from) / (t_to - t_from)
    print(f"\nbroker {victim} down {downtime:.1f} s (missed ~{downtime * produce_bytes_per_s / 1024:.0f} KiB of "
          f"{CATCHUP_TOPIC}-0); unthrottled replicas back in their ISRs "
          f"{unthrottled_done - started_at:.2f} s after it registered; throttled {CATCHUP_TOPIC}-0 was "
          f"{(theirs_first - mine_first) / 1024:.0f} KiB behind at the first sample, copied at {copy_rate / 1024:.0f} "
          f"KiB/s (throttle {CATCHUP_THROTTLE / 1024:.0f} KiB/s); URP = 0 {healthy_at - started_at:.2f} s after the "
          f"start, {healthy_at - stopped_at:.1f} s after the stop")
    # it resumed from its own log (at least what it had before the stop), so it came back behind by about
    # downtime x produce rate, and was still visibly behind at the first sample
    assert mine_first >= logged_before_stop, (mine_first, logged_before_stop)
    assert theirs_first - mine_first >= 256 * 1024
    # it copied at the throttle, not at the unthrottled replication rate
    assert 0.6 * CATCHUP_THROTTLE <= copy_rate <= 1.4 * CATCHUP_THROTTLE
    # about 10 s on an idle machine (printed above); generous bounds for a loaded one
    assert unthrottled_done - started_at < 20 and healthy_at - stopped_at < 60


# --- 6: preferred leader election ------------------------------------------------------------------


def test_restarted_broker_leads_nothing_until_preferred_election(healthy: RunningSandbox) -> None:
    sb = healthy
    confluent = admin(sb.bootstrap_servers)
    before = observe(confluent)
    victim = busiest_follower_broker(before)
    preferred = keys(p for p in before.partitions if p.replicas[0] == victim)
    assert preferred and keys(before.led_by(victim)) == preferred  # a balanced cluster to begin with
    stop_broker(sb, victim)
    start_broker(sb, victim)
    sb.wait_healthy(timeout_s=30)
    hosted = keys(p for p in before.partitions if victim in p.replicas)
    # back in every ISR as clients see it (a broker's metadata cache trails ZooKeeper by a refresh) ...
    after = wait_for(lambda: (v := observe(confluent)) and keys(v.in_isr_of(victim)) == hosted and v, 10,
                     what=f"broker {victim} in every ISR in Metadata")
    assert after.led_by(victim) == []  # ... but leading nothing (the controller's rebalance runs every 300 s)
    results = confluent.elect_leaders(ElectionType.PREFERRED, None).result()  # every partition
    elected = {(tp.topic, tp.partition) for tp, error in results.items() if error is None}
    assert preferred <= elected, results
    final = wait_for(lambda: (v := observe(confluent)) and keys(v.led_by(victim)) == preferred and v, 10,
                     what=f"broker {victim} to lead its preferred partitions again")
    assert all(p.leader == p.replicas[0] for p in final.partitions)  # every partition on its preferred leader
    # a second election has nothing to do: kafka-python sees ELECTION_NOT_NEEDED (84) per partition
    client = kadmin(sb)
    try:
        topic, partition = sorted(preferred)[0]
        answer = client.elect_leaders(0, {topic: [partition]}, raise_errors=False)
    finally:
        client.close()
    codes = [r.error_code for t in answer.replica_election_results for r in t.partition_result]
    assert codes == [84], answer


# --- 7: offline partitions -------------------------------------------------------------------------


def test_partition_offline_when_every_isr_replica_is_down(healthy: RunningSandbox) -> None:
    sb = healthy
    confluent = admin(sb.bootstrap_servers)
    before = observe(confluent)
    target = next(p for p in before.partitions if len(p.replicas) == 2 and p.topic == "clicks")
    first, last = target.leader, next(r for r in target.replicas if r != target.leader)
    pair = {first, last}
    doomed = keys(p for p in before.partitions if set(p.replicas) <= pair)
    stop_broker(sb, first)  # controlled shutdown: leadership moves to `last`, still online
    wait_for(lambda: (v := observe(confluent)) and first not in v.brokers
             and v.partition(target.topic, target.partition).leader == last, 10, what="leadership on the other replica")
    stop_broker(sb, last)  # the last ISR replica goes: offline
    view = wait_for(lambda: (v := observe(confluent)) and last not in v.brokers and keys(v.offline) == doomed and v,
                    10, what="exactly the partitions of the two stopped brokers offline")
    offline = view.partition(target.topic, target.partition)
    assert offline.leader == -1 and offline.isr == (last,)  # the last ISR is kept (no unclean election)
    md = confluent.list_topics(target.topic, timeout=10)
    error = md.topics[target.topic].partitions[target.partition].error
    assert error is not None and error.code() == KafkaError.LEADER_NOT_AVAILABLE
    # the replica that left the ISR first may not lead (unclean.leader.election.enable=false) ...
    start_broker(sb, first)
    wait_for(lambda: first in observe(confluent).brokers, 10, what=f"broker {first} in Metadata")
    assert observe(confluent).partition(target.topic, target.partition).leader == -1
    # ... the last in-sync replica brings the partition back
    start_broker(sb, last)
    back = wait_for(lambda: (v := observe(confluent)) and v.partition(target.topic, target.partition).leader == last
                    and v, 10, what="the partition to come back online")
    assert back.offline == []
