"""Kafka's own restart times from node logs (``sandbox.restart_timeline``, ``sandbox.node_log``): the lines of Kafka
3.x (ZooKeeper mode) and 4.x (KRaft) as the sandbox's brokers write them, without a cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox import node_log
from sandbox.layout import Workdir
from sandbox.restart_timeline import batch_summary, read_logs, restarts_of

DAY = "2026-11-28"


def at(clock: str) -> float:
    return node_log.parse_time(f"{DAY} {clock}")


def line(clock: str, text: str) -> str:
    return f"[{DAY} {clock}] {text}\n"


def marker(clock: str, host: int, pid: int) -> str:
    return line(clock, f"kafka-service: start /tmp/s/hosts/{host}/kafka_2.13-3.6.2 (pid {pid})")


def zk_restart(b: int, down: str, gone: str, launch: str, started: str, server: str = "KafkaServer") -> str:
    """One restart of ZooKeeper-mode broker ``b`` (``server``: BrokerServer for KRaft's shutdown lines)."""
    started_line = (f"INFO [KafkaServer id={b}] started (kafka.server.KafkaServer)" if server == "KafkaServer"
                    else f"INFO [KafkaRaftServer nodeId={b}] Kafka Server started (kafka.server.KafkaRaftServer)")
    return (line(down, f"INFO [{server} id={b}] shutting down (kafka.server.{server})")
            + line(down, f"INFO [ReplicaManager broker={b}] Shutting down (kafka.server.ReplicaManager)")
            + line(gone, f"INFO [{server} id={b}] shut down completed (kafka.server.{server})")
            + marker(launch, b, 200 + b)
            + line(started, started_line))


def isr(clock: str, partition: str, leader: int, members: str) -> str:
    return line(clock, f"INFO [Partition {partition} broker={leader}] ISR updated to {members}  and version "
                       "updated to 4 (kafka.cluster.Partition)")


def leads(clock: str, b: int, partition: str) -> str:
    return line(clock, f"INFO [Broker id={b}] Leader {partition} with topic id Some(abc) starts at leader epoch 3 "
                       "from offset 17 with partition epoch 5, high watermark 17, ISR [0,1,2] (state.change.logger)")


def test_the_node_log_reads_shutdown_done_isr_joins_and_leader_starts() -> None:
    text = (marker("10:00:00,000", 0, 100) + zk_restart(0, "10:01:00,000", "10:01:01,500", "10:01:03,000",
                                                        "10:01:05,250")
            + isr("10:01:06,000", "orders-1", 1, "1,2,0") + leads("10:01:07,000", 0, "orders-0"))
    first, second = node_log.runs_of_text(text)
    assert (first.shutdown, first.stopped) == (at("10:01:00,000"), at("10:01:01,500"))
    assert second.began == at("10:01:03,000") and second.started == at("10:01:05,250")
    assert second.stopped is None, "the running JVM has not shut down"
    assert node_log.isr_updates_of_text(text) == [node_log.IsrUpdate(at("10:01:06,000"), "orders-1", 1, (1, 2, 0))]
    assert node_log.leader_starts_of_text(text) == [(at("10:01:07,000"), 0, "orders-0")]


def three_brokers() -> dict[int, str]:
    """Broker 0 restarted alone (caught up on the leaders 1 and 2), then broker 1; a later gate's election makes
    broker 0 lead once more while broker 1 is down."""
    logs = {b: marker("10:00:00,000", b, 100 + b) for b in range(3)}
    logs[0] += zk_restart(0, "10:01:00,000", "10:01:01,500", "10:01:03,000", "10:01:05,000")
    logs[1] += isr("10:01:06,000", "orders-1", 1, "1,2,0")
    logs[2] += isr("10:01:07,500", "orders-2", 2, "2,0,1")
    logs[0] += leads("10:01:08,000", 0, "orders-0")
    logs[1] += zk_restart(1, "10:01:20,000", "10:01:21,000", "10:01:22,000", "10:01:24,000")
    logs[0] += leads("10:01:20,500", 0, "payments-0")  # broker 1's gate / controlled shutdown: not broker 0's restart
    logs[2] += isr("10:01:25,000", "orders-2", 2, "2,0,1")
    logs[0] += isr("10:01:26,000", "orders-0", 0, "0,1,2")
    logs[1] += leads("10:01:27,000", 1, "orders-1")
    return logs


def test_a_restart_reads_kafkas_own_shutdown_start_catch_up_and_leadership() -> None:
    found = restarts_of(three_brokers(), since=at("10:00:30,000"))
    first, second = found
    assert first.broker == 0
    assert first.caught_up == at("10:01:07,500"), "the last leader's ISR join, not one after broker 1 stopped"
    alone = batch_summary(found, [0])
    assert alone["shutdown_s"] == pytest.approx(1.5) and alone["down_s"] == pytest.approx(1.5)
    assert alone["start_s"] == pytest.approx(2.0) and alone["catch_up_s"] == pytest.approx(2.5)
    assert alone["leadership_s"] == pytest.approx(0.5) and alone["kafka_s"] == pytest.approx(1.5 + 2.0 + 2.5 + 0.5)
    assert first.leading == at("10:01:08,000"), "an election after the next shutdown began is not this restart's"
    assert second.broker == 1 and second.caught_up == at("10:01:26,000") and second.leading == at("10:01:27,000")


def test_until_bounds_the_restarts_and_their_windows() -> None:
    logs = three_brokers()
    assert [r.broker for r in restarts_of(logs, since=at("10:00:30,000"), until=at("10:01:10,000"))] == [0]
    (only,) = restarts_of(logs, since=at("10:01:10,000"), until=at("10:01:25,500"))
    assert only.broker == 1 and only.caught_up == at("10:01:25,000"), "ISR changes after until are not counted"
    assert only.leading is None


def test_a_broker_not_started_again_has_no_start_catch_up_or_leadership() -> None:
    logs = {0: marker("10:00:00,000", 0, 1) + line("10:01:00,000", "INFO [KafkaServer id=0] shutting down (x)")}
    found = restarts_of(logs, since=0)
    (r,) = found
    assert (r.shut_down, r.launched, r.started, r.caught_up, r.leading) == (None, None, None, None, None)
    assert batch_summary(found, [0]) == dict.fromkeys(
        ("shutdown_s", "down_s", "start_s", "catch_up_s", "leadership_s", "kafka_s"))


def test_a_batch_spans_each_phase_from_its_first_broker_to_its_last() -> None:
    logs = {b: marker("10:00:00,000", b, 100 + b) for b in range(4)}
    logs[0] += zk_restart(0, "10:01:00,000", "10:01:02,000", "10:01:04,000", "10:01:10,000", server="BrokerServer")
    logs[2] += zk_restart(2, "10:01:00,500", "10:01:03,000", "10:01:04,500", "10:01:12,000", server="BrokerServer")
    logs[1] += isr("10:01:13,000", "orders-1", 1, "1,0")
    logs[3] += isr("10:01:14,000", "orders-3", 3, "3,0,2")  # broker 2's join: its ISR holds broker 0 too
    logs[0] += leads("10:01:15,500", 0, "orders-0")
    logs[2] += leads("10:01:14,500", 2, "orders-2")
    found = restarts_of(logs, since=0)
    out = batch_summary(found, [0, 2])
    assert out["shutdown_s"] == pytest.approx(3.0), "first shutting down to the last shut down completed"
    assert out["down_s"] == pytest.approx(1.0), "the last exit to the first launch"
    assert out["start_s"] == pytest.approx(8.0), "first launch to the last started"
    assert out["catch_up_s"] == pytest.approx(2.0), "the last started to the last ISR join"
    assert out["leadership_s"] == pytest.approx(1.5), "back in every ISR to the last leader start"
    assert out["kafka_s"] == pytest.approx(3.0 + 8.0 + 2.0 + 1.5)
    assert batch_summary(found, [0, 3])["kafka_s"] is None, "broker 3 was not restarted: nothing to say"


def test_a_batch_whose_leadership_came_with_its_catch_up_has_no_leadership_time() -> None:
    logs = {0: marker("10:00:00,000", 0, 1) + zk_restart(0, "10:01:00,000", "10:01:01,000", "10:01:02,000",
                                                         "10:01:04,000") + leads("10:01:04,500", 0, "orders-0"),
            1: marker("10:00:00,000", 1, 2) + isr("10:01:05,000", "orders-1", 1, "1,0")}
    out = batch_summary(restarts_of(logs, since=0), [0])
    assert out["catch_up_s"] == pytest.approx(1.0) and out["leadership_s"] == 0.0


def test_the_logs_are_read_from_the_sandbox_host_directories(tmp_path: Path) -> None:
    workdir = Workdir(tmp_path)
    for b, text in three_brokers().items():
        workdir.host(b).server_log.parent.mkdir(parents=True)
        workdir.host(b).server_log.write_text(text)
    logs = read_logs(workdir, [0, 1, 2, 7])  # broker 7 has no host: no log
    assert sorted(logs) == [0, 1, 2] and logs == three_brokers()
    found = restarts_of(logs, since=0)
    assert [r.broker for r in found] == [0, 1] and found[0].caught_up == at("10:01:07,500")


def test_the_controllers_own_preferred_elections_are_found_after_a_time():
    text = (
        "[2026-11-30 10:01:46,100] INFO [Controller id=0] Starting replica leader election (PREFERRED) for partitions  "
        "triggered by AutoTriggered (kafka.controller.KafkaController)\n"
        "[2026-11-30 10:02:18,141] INFO [Controller id=5] Starting replica leader election (PREFERRED) for partitions  "
        "triggered by ZkTriggered (kafka.controller.KafkaController)\n"
        "[2026-11-30 10:02:23,156] INFO [Controller id=5] Starting replica leader election (PREFERRED) for partitions "
        "clicks-7,orders-10 triggered by AutoTriggered (kafka.controller.KafkaController)\n"
        "[2026-11-30 10:02:30,000] INFO [Controller id=5] Starting replica leader election (PREFERRED) for partitions "
        "audit-1 triggered by AdminClientTriggered (kafka.controller.KafkaController)\n"
    )
    since = node_log.parse_time("2026-11-30 10:02:00,000")
    assert node_log.automatic_elections(text, since) == [
        (node_log.parse_time("2026-11-30 10:02:23,156"), ["clicks-7", "orders-10"])]
    assert node_log.automatic_elections(text, node_log.parse_time("2026-11-30 10:02:24,000")) == []
    # an empty automatic election (nothing imbalanced) is no election
    assert node_log.automatic_elections(text, 0) == [(node_log.parse_time("2026-11-30 10:02:23,156"),
                                                      ["clicks-7", "orders-10"])]
