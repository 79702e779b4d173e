"""The metadata watcher's report of an offline partition (what a failed 'never offline' assertion prints)."""

from __future__ import annotations

import time
from types import SimpleNamespace

from observers import ClusterView, MetadataWatcher, PartitionView


def test_an_offline_snapshot_is_reported_with_who_answered_and_the_nodes_log_lines_around_it(tmp_path) -> None:
    wall = time.mktime((2026, 11, 28, 6, 32, 56, 0, 0, -1)) + 0.25
    led = PartitionView("orders", 0, 1, (1, 3), (1, 3))
    offline = PartitionView("payments", 2, -1, (3, 1, 2), (3, 1, 2))
    watcher = MetadataWatcher("unused:9092")
    watcher.views = [ClusterView(1.0, frozenset({0, 1, 2}), 0, (led,), answered_by=2, wall=wall - 5),
                     ClusterView(2.0, frozenset({0, 1, 2}), 0, (led, offline), answered_by=1, wall=wall)]
    log = tmp_path / "server.log"
    log.write_text(
        "[2026-11-28 06:32:40,000] INFO [KafkaServer id=3] shutting down (kafka.server.KafkaServer)\n"  # too early
        "[2026-11-28 06:32:55,800] INFO [KafkaServer id=3] Starting controlled shutdown (kafka.server.KafkaServer)\n"
        "[2026-11-28 06:32:55,900] INFO [ReplicaManager broker=3] nothing notable here (kafka.server.ReplicaManager)\n"
        "[2026-11-28 06:32:56,100] WARN [KafkaServer id=3] Proceeding to do an unclean shutdown as all the "
        "controlled shutdown attempts failed (kafka.server.KafkaServer)\n"
        "[2026-11-28 06:32:59,000] INFO [KafkaServer id=3] started (kafka.server.KafkaServer)\n")  # too late
    sandbox = SimpleNamespace(broker_ids=[3, 4], controller_ids=[100], host_dir=lambda b: SimpleNamespace(
        server_log=log if b == 3 else tmp_path / "missing.log"))

    report = watcher.explain_offline(sandbox)

    first, *rest = report.splitlines()
    assert first.startswith("06:32:56.250: broker 1 answered, live brokers [0, 1, 2], controller 0, 1 offline: "
                            "payments-2 replicas [3, 1, 2] isr [3, 1, 2]"), first
    assert rest[0] == "  node 3:"
    assert [line.split("] ", 1)[1][:40] for line in rest[1:]] == [
        "INFO [KafkaServer id=3] Starting control", "WARN [KafkaServer id=3] Proceeding to do"]
    assert "node 4" not in report and "node 100" not in report
    assert MetadataWatcher("unused:9092").explain_offline(sandbox) == ""


def test_a_leaderless_partition_zookeeper_already_gave_a_live_leader_is_a_stale_cache_not_offline() -> None:
    """ZooKeeper mode: the answering broker's cache lags the controller during a failover; ZooKeeper's partition
    state, written before the answer and naming a live leader, says the partition was led."""
    from observers import stale_leaderless

    wall = 1_800_000_000.0
    states = {  # path -> (leader, mtime ms)
        "/brokers/topics/payments/partitions/1/state": (0, wall * 1000 - 600),  # moved to 0 before the answer
        "/brokers/topics/payments/partitions/4/state": (2, wall * 1000 - 600),  # its leader is not live
        "/brokers/topics/clicks/partitions/1/state": (1, wall * 1000 + 200),  # elected only after the answer
    }

    class ZooKeeper:
        def get(self, path):
            leader, mtime = states[path]
            return (f'{{"leader": {leader}, "isr": [0, 1]}}'.encode(), SimpleNamespace(mtime=mtime))

    parts = (PartitionView("payments", 1, -1, (2, 0, 1), (2, 0, 1)), PartitionView("payments", 4, -1, (2, 1), (2, 1)),
             PartitionView("clicks", 1, -1, (2, 1), (2, 1)), PartitionView("orders", 0, 1, (1, 0), (1, 0)),
             PartitionView("audit", 0, -1, (2,), (2,)))  # no state node: stays offline
    view = ClusterView(1.0, frozenset({0, 1}), 0, parts, answered_by=1, wall=wall)
    stale = stale_leaderless(ZooKeeper(), view)
    assert stale == {("payments", 1)}
    from dataclasses import replace
    assert [f"{p.topic}-{p.partition}" for p in replace(view, stale=stale).offline] == \
        ["payments-4", "clicks-1", "audit-0"]
