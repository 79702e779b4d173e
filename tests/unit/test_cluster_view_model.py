"""The cluster view's models (kafka_ops.cluster_view): fleet rows and cluster pages from plain readings."""

from dataclasses import replace

from kafka_ops.cluster import Broker, ClusterState, Partition, Registration
from kafka_ops.cluster_view import (
    ClusterReading,
    LockInfo,
    RunRolls,
    WaveInfo,
    WindowInfo,
    cluster_page,
    fleet_row,
)
from kafka_ops.health import ConsumerGroupStatus
from kafka_ops.quorum import Quorum, Voter
from kafka_ops.roll import RollRecord

NOW_MS = 1_800_000_000_000


def run_url(dag_id: str, run_id: str) -> str:
    return f"/dags/{dag_id}/runs/{run_id}"


def brokers(*ids: int) -> tuple[Broker, ...]:
    return tuple(Broker(i, f"10.0.0.{i}", 9092, rack=f"r{i}") for i in ids)


def healthy_state(live=(1, 2, 3)) -> ClusterState:
    """orders: 3 partitions RF 3 (min ISR 2), preferred leaders 1, 2, 3; every replica in sync."""
    parts = [Partition("orders", i, leader=i + 1, replicas=tuple((i + k) % 3 + 1 for k in range(3)),
                       isr=tuple((i + k) % 3 + 1 for k in range(3))) for i in range(3)]
    return ClusterState(brokers(*live), tuple(parts), controller_id=1, topic_min_insync={"orders": 2})


def broker_down_state() -> ClusterState:
    """Broker 3 gone: out of every ISR, partition 2 (led by 3) now led by 1."""
    parts = []
    for p in healthy_state().partitions:
        isr = tuple(r for r in p.isr if r != 3)
        parts.append(Partition(p.topic, p.partition, p.leader if p.leader != 3 else 1, p.replicas, isr))
    return ClusterState(brokers(1, 2), tuple(parts), controller_id=1, topic_min_insync={"orders": 2})


def reading(state=None, **kwargs) -> ClusterReading:
    return ClusterReading("prod", NOW_MS - 2000, 0.3, state=state, **kwargs)


def test_healthy_cluster_row():
    row = fleet_row(reading(healthy_state(), kraft=False, groups=(ConsumerGroupStatus("orders-service", "OK", 0),)),
                    NOW_MS, run_url)
    assert row["status"] == "ok", row["reasons"]
    assert row["reasons"] == []
    assert (row["mode"], row["brokers_up"], row["brokers_total"], row["brokers_down"]) == ("ZooKeeper", 3, 3, [])
    assert row["controller"] == {"kind": "controller", "id": 1}
    assert (row["offline"], row["urp"], row["under_min_isr"]) == (0, 0, 0)
    assert row["leader_imbalance"] == {"threshold_pct": 10, "worst_pct": 0.0, "brokers_over": []}
    assert row["lag"]["status"] == "OK"
    assert row["lock"] is None and row["operation"] is None
    assert row["age_s"] == 2.0


def test_broker_down_raises_urp_and_is_bad():
    row = fleet_row(reading(broker_down_state(), kraft=False), NOW_MS, run_url)
    assert (row["brokers_up"], row["brokers_total"], row["brokers_down"]) == (2, 3, [3])
    assert row["urp"] == 3
    assert row["offline"] == 0
    assert row["under_min_isr"] == 0  # 2 in sync of min 2
    assert row["status"] == "bad"
    assert row["reasons"][:2] == ["broker 3 down", "3 under-replicated partitions"]
    # broker 3 preferred orders-2 and leads nothing: 100 % imbalance
    assert row["leader_imbalance"]["brokers_over"] == [3]
    page = cluster_page(reading(broker_down_state(), kraft=False), NOW_MS, run_url)
    down = [b for b in page["brokers"] if b["id"] == 3][0]
    assert down == {"id": 3, "host": None, "port": None, "rack": None, "up": False, "controller": False, "voter": False,
                    "leaders": 0, "replicas": 3, "preferred": 1, "disk_bytes": None, "kafka_version": None, "ibp": None,
                    "metadata_version": None}
    assert [b["leaders"] for b in page["brokers"]] == [2, 1, 0]
    urp = page["partitions"]["under_replicated"]
    assert urp["count"] == 3 and urp["listed"][0]["missing"] == [3]


def test_offline_and_under_min_isr():
    parts = (Partition("orders", 0, leader=-1, replicas=(1, 2, 3), isr=(1,)),
             Partition("orders", 1, leader=2, replicas=(2, 3, 1), isr=(2,)),
             Partition("audit", 0, leader=2, replicas=(2, 1), isr=(2,)))
    state = ClusterState(brokers(2), parts, controller_id=2, topic_min_insync={"orders": 2})
    assert [p.name for p in state.under_min_isr_partitions()] == ["orders-0", "orders-1"]  # audit: default min 1
    row = fleet_row(reading(state, kraft=False), NOW_MS, run_url)
    assert (row["offline"], row["urp"], row["under_min_isr"]) == (1, 3, 2)
    assert "1 offline partition" in row["reasons"] and "2 under min ISR partitions" in row["reasons"]
    page = cluster_page(reading(state, kraft=False), NOW_MS, run_url, limit=1)
    assert page["partitions"]["under_replicated"]["count"] == 3
    assert [p["name"] for p in page["partitions"]["under_replicated"]["listed"]] == ["audit-0"]
    assert page["partitions"]["offline"]["listed"][0]["leader"] == -1


def test_unreachable_cluster():
    r = ClusterReading("prod", NOW_MS, 5.0, errors={"kafka": "KafkaException: all brokers down"})
    row = fleet_row(r, NOW_MS, run_url)
    assert row["status"] == "unreachable"
    assert row["error"] == "KafkaException: all brokers down"
    assert row["brokers_up"] is None and row["urp"] is None and row["mode"] is None
    page = cluster_page(r, NOW_MS, run_url)
    assert page["brokers"] == [] and "offline" not in page["partitions"]


def test_part_errors_warn_without_hiding_the_cluster():
    row = fleet_row(reading(healthy_state(), kraft=False, errors={"burrow": "ConnectionError: refused"}),
                    NOW_MS, run_url)
    assert row["status"] == "warn"
    assert row["reasons"] == ["burrow: ConnectionError: refused"]
    assert row["brokers_up"] == 3


def test_lag_worst_group_decides():
    groups = (ConsumerGroupStatus("a", "OK"), ConsumerGroupStatus("b", "WARN"), ConsumerGroupStatus("c", "OK"))
    assert fleet_row(reading(healthy_state(), groups=groups), NOW_MS, run_url)["status"] == "warn"
    groups += (ConsumerGroupStatus("d", "STALL", total_lag=1200),)
    row = fleet_row(reading(healthy_state(), groups=groups), NOW_MS, run_url)
    assert row["lag"]["status"] == "STALL" and row["status"] == "bad"
    assert fleet_row(reading(healthy_state()), NOW_MS, run_url)["lag"]["status"] == "not watched"


def test_kraft_quorum_leader_and_controllers():
    quorum = Quorum(101, 7, 500, (Voter(100, 500, None, NOW_MS), Voter(101, 500, None, NOW_MS),
                                  Voter(102, 380, None, NOW_MS - 60_000)))
    features = {1: {"finalized": 25, "supported": (1, 25), "release": "4.0"}}
    r = reading(healthy_state(), kraft=True, quorum=quorum, features=features)
    row = fleet_row(r, NOW_MS, run_url)
    assert row["mode"] == "KRaft"
    assert row["controller"] == {"kind": "quorum leader", "id": 101, "epoch": 7}
    page = cluster_page(r, NOW_MS, run_url)
    assert [(c["id"], c["leader"], c["caught_up"], c["lag_offsets"]) for c in page["controllers"]] == [
        (100, False, True, 0), (101, True, True, 0), (102, False, False, 120)]
    assert page["brokers"][0]["metadata_version"] == {"level": 25, "name": "4.0-IV3", "supported_max": 25}
    assert page["brokers"][0]["kafka_version"] == "4.0", "the release its API ranges match"
    zk = cluster_page(reading(healthy_state(), features={1: {"finalized": None, "supported": None,
                                                                "release": "3.6"}}), NOW_MS, run_url)
    assert zk["brokers"][0]["kafka_version"] == "3.6" and zk["brokers"][0]["metadata_version"] is None
    assert page["brokers"][0]["controller"] is False  # KRaft: no broker is the controller
    assert [c["combined"] for c in page["controllers"]] == [False, False, False]
    assert [b["voter"] for b in page["brokers"]] == [False, False, False]
    leaderless = Quorum(-1, 8, 500, quorum.voters)
    row = fleet_row(reading(healthy_state(), kraft=True, quorum=leaderless), NOW_MS, run_url)
    assert "no quorum leader" in row["reasons"] and row["status"] == "bad"


def test_a_fenced_registration_holding_nothing_is_a_broker_down_with_its_registered_address():
    # KRaft: broker 4 was stopped without being unregistered; it holds no replica, Metadata leaves it out
    regs = (*(Registration(b, False) for b in brokers(1, 2, 3)), Registration(Broker(4, "10.0.0.4", 9092, "r1"), True))
    r = reading(healthy_state(), kraft=True, registrations=regs)
    row = fleet_row(r, NOW_MS, run_url)
    assert (row["brokers_up"], row["brokers_total"], row["brokers_down"]) == (3, 4, [4])
    assert row["status"] == "bad" and row["urp"] == 0
    [down] = [b for b in cluster_page(r, NOW_MS, run_url)["brokers"] if b["id"] == 4]
    assert (down["up"], down["host"], down["rack"], down["replicas"]) == (False, "10.0.0.4", "r1", 0)
    # a broker fenced a moment while live in the Metadata (caught up since) is not down; without the listing
    # (Kafka before 4.0) nothing changes
    regs_live = tuple(Registration(b, b.id == 3) for b in brokers(1, 2, 3))
    live_row = fleet_row(reading(healthy_state(), kraft=True, registrations=regs_live), NOW_MS, run_url)
    assert live_row["brokers_down"] == []
    assert fleet_row(reading(healthy_state(), kraft=True), NOW_MS, run_url)["brokers_down"] == []


def test_combined_nodes_are_marked_among_brokers_and_voters():
    """Kafka 4's quickstart layout: brokers that are quorum voters too (process.roles=broker,controller)."""
    state = healthy_state()
    ids = sorted(state.broker_ids)
    quorum = Quorum(ids[0], 3, 500, tuple(Voter(b, 500, None, NOW_MS) for b in ids[:2]) + (Voter(100, 500, None,
                                                                                                  NOW_MS),))
    page = cluster_page(reading(state, kraft=True, quorum=quorum), NOW_MS, run_url)
    assert [(b["id"], b["voter"]) for b in page["brokers"]] == [(b, b in ids[:2]) for b in ids]
    assert [(c["id"], c["combined"]) for c in page["controllers"]] == [(ids[0], True), (ids[1], True), (100, False)]


def test_controllers_that_are_observers_are_listed_after_the_voters():
    """A dynamic quorum (KIP-853): controller 103 is in the connection's controller_hosts and fetches as an observer;
    broker observers (1, 2, 3) are not listed, nor is a controller_hosts entry that is not an observer (104)."""
    voters = (Voter(100, 500, None, NOW_MS), Voter(101, 500, NOW_MS, NOW_MS), Voter(102, 500, NOW_MS, NOW_MS))
    observers = (Voter(1, 500, NOW_MS, NOW_MS), Voter(103, 480, NOW_MS, NOW_MS - 10_000))
    r = replace(reading(healthy_state(), kraft=True, quorum=Quorum(100, 3, 500, voters, observers)),
                controller_ids=(100, 101, 102, 103, 104))
    rows = cluster_page(r, NOW_MS, run_url)["controllers"]
    assert [(c["id"], c["observer"], c["caught_up"], c["lag_offsets"]) for c in rows] == [
        (100, False, True, 0), (101, False, True, 0), (102, False, True, 0), (103, True, False, 20)]


def roll_record() -> RollRecord:
    steps = tuple({"id": b, "host": f"h{b}", "position": i + 1, "total": 3} for i, b in enumerate((1, 2, 3)))
    record = RollRecord("restart", NOW_MS - 600_000, steps)
    record = record.mark(1, "done", NOW_MS - 400_000, "restarted", took_s=120.0)
    record = record.mark(2, "done", NOW_MS - 200_000, "restarted", took_s=180.0)
    return record.mark(3, "stopped", NOW_MS - 10_000)


def test_lock_held_links_its_run_and_gives_roll_progress_and_eta():
    lock = LockInfo("kafka_rolling_restart/manual__2026-11-26T10:00:00+00:00", NOW_MS - 600_000, "rolling restart")
    rolls = RunRolls("kafka_rolling_restart", "manual__2026-11-26T10:00:00+00:00",
                     (RollRecord("controllers", NOW_MS - 700_000), roll_record()))
    r = reading(healthy_state(), kraft=False, lock=lock, rolls=rolls, window=WindowInfo("none", "always open"))
    row = fleet_row(r, NOW_MS, run_url)
    assert row["lock"] == {"holder": lock.holder, "dag_id": "kafka_rolling_restart",
                           "run_id": "manual__2026-11-26T10:00:00+00:00",
                           "url": "/dags/kafka_rolling_restart/runs/manual__2026-11-26T10:00:00+00:00",
                           "operation": "rolling restart", "held_s": 600}
    assert row["window"]["state"] == "none"
    active = row["operation"]["active"]
    # the empty controllers roll (ZooKeeper mode) is left out; the broker roll: 2 of 3 done, broker 3 stopped now
    assert [x["roll_id"] for x in row["operation"]["rolls"]] == ["restart"]
    assert (active["done"], active["total"], active["current"], active["current_phases"]) == (
        2, 3, "broker 3", {"3": "stopped"})
    # ETA as the task log gives it (kafka_ops.roll.eta_s): mean of 120 s and 180 s times one batch left
    assert active["eta_s"] == 150.0 and active["ends_ms"] == NOW_MS + 150_000
    assert active["next"] is None and active["finished"] is False


def test_roll_progress_between_batches_and_finished():
    steps = tuple({"id": b, "host": f"h{b}", "position": i + 1, "total": 2, "batch": 1} for i, b in enumerate((4, 5)))
    steps += ({"id": 6, "host": "h6", "position": 3, "total": 3, "batch": 2},)
    record = RollRecord("binaries", NOW_MS, steps).mark(4, "done", NOW_MS, took_s=60).mark(5, "done", NOW_MS,
                                                                                            took_s=90)
    lock = LockInfo("kafka_upgrade/r1", NOW_MS, "upgrade")
    op = fleet_row(reading(healthy_state(), lock=lock, rolls=RunRolls("kafka_upgrade", "r1", (record,))),
                   NOW_MS, run_url)["operation"]
    active = op["active"]
    assert (active["batches_done"], active["batches_total"], active["current"], active["next"]) == (1, 2, None,
                                                                                                    "broker 6")
    assert active["eta_s"] == 90.0  # the batch's time is its slowest broker's
    done = record.mark(6, "done", NOW_MS, took_s=30)
    op = fleet_row(reading(healthy_state(), lock=lock, rolls=RunRolls("kafka_upgrade", "r1", (done,))),
                   NOW_MS, run_url)["operation"]
    assert op["rolls"][0]["finished"] is True and op["rolls"][0]["eta_s"] is None and op["active"] is None


def test_controller_roll_is_named_so_and_waves_are_counted():
    steps = ({"id": 100, "host": "c100", "host_from": "profile", "position": 1, "total": 1},)
    record = RollRecord("controllers", NOW_MS, steps).mark(100, "starting", NOW_MS)
    lock = LockInfo("kafka_scale_out/r2", NOW_MS, "scale-out")
    op = fleet_row(reading(healthy_state(), lock=lock, rolls=RunRolls("kafka_scale_out", "r2", (record,)),
                           waves=WaveInfo(2, 5, 3), reassigning=({"topic": "orders", "partition": 1},)),
                   NOW_MS, run_url)["operation"]
    assert op["active"]["current"] == "controller 100"
    assert op["waves"] == {"done": 2, "total": 5, "running": 3} and op["reassigning"] == 1


def test_holder_of_another_shape_gets_no_link():
    lock = LockInfo("unknown (the lock topic has no holder record: its creator died while taking it)", NOW_MS, "?")
    row = fleet_row(reading(healthy_state(), lock=lock), NOW_MS, run_url)
    assert row["lock"]["url"] is None and row["lock"]["dag_id"] is None
