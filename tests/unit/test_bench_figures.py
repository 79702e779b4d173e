"""The benchmarks' arithmetic (``bench/restart_overhead.py``'s ``summarize``), without a cluster: where a roll's wall
time goes between Airflow's start, our fixed part, the per-broker tasks and the waits no orchestrator can avoid."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from restart_overhead import summarize, table  # noqa: E402

T0 = 1_000_000.0  # the trigger, epoch seconds


def ti(task_id: str, start: float, end: float, map_index: int = -1, state: str = "success") -> dict:
    return {"task_id": task_id, "map_index": map_index, "state": state, "start": T0 + start, "end": T0 + end}


def marks(stop_sent: float, gone: float, start_sent: float, registered: float, caught_up: float,
          leadership: float) -> dict:
    return {k: T0 + v for k, v in locals().items()}


def test_the_wall_time_splits_into_airflows_start_our_fixed_part_and_the_brokers() -> None:
    tis = [ti("check_and_lock", 2.0, 3.5), ti("restart.plan", 4.0, 4.5),
           ti("restart.broker", 5.0, 15.0, 0), ti("restart.broker", 15.5, 25.0, 1), ti("run_outcome", 25.5, 27.0),
           ti("controllers.controller", 0, 0, -1, "skipped")]
    rows = [{"map_index": 0, "rendered_map_index": "broker 0 (1/2)", "marks": marks(6, 8, 9, 12, 13, 14)},
            {"map_index": 1, "rendered_map_index": "broker 1 (2/2)", "marks": marks(16, 18, 19, 22, 23, 24)}]
    out = summarize("success", T0, T0 + 27.0, tis, rows)
    assert out["wall_s"] == 27.0
    assert (out["began"], out["ended"]) == (T0, T0 + 27.0), "the measured run's own trigger and end, for judges"
    assert out["airflow_start_s"] == 2.0, "the trigger to the first task's start"
    assert out["first_stop_s"] == 4.0, "the first task's start to the first stop sent"
    assert out["fixed_s"] == 4.0 + 3.0, "plus the last leadership back to the end"
    assert [(b["stop"], b["start"], b["catch_up"]) for b in out["brokers"]] == [(2, 3, 1), (2, 3, 1)]
    assert out["failed"] == [] and out["controllers"] == 0
    line = table([{"size": 2, "mode": "zookeeper", "runner": "dag.test", **out}]).splitlines()[2].split()
    # wall 27, unavoidable 12, airflow 2, 1st stop 4, fixed 7: (27 - 2 - 7 - 12) / 2 brokers = 3 s each
    assert line[5:] == ["27.0", "4.0", "6.0", "2.0", "12.0", "2.2", "2.0", "4.0", "7.0", "3.0"]


def test_a_broker_tasks_steps_are_the_gaps_between_the_marks_it_reached() -> None:
    from restart_overhead import mark_steps

    steps = mark_steps({"began": 1.0, "stop_sent": 1.25, "gone": 2.0, "start_sent": 2.5, "registered": 4.0,
                        "caught_up": 4.5, "leadership": 4.75, "done": 5.0})
    assert steps == [("began->stop_sent", 0.25), ("stop_sent->gone", 0.75), ("gone->start_sent", 0.5),
                     ("start_sent->registered", 1.5), ("registered->caught_up", 0.5),
                     ("caught_up->leadership", 0.25), ("leadership->done", 0.25)]
    # a combined node's quorum mark goes between registered and caught up; a mark not reached is left out
    assert mark_steps({"began": 0.0, "registered": 1.0, "caught_up": 3.0, "quorum": 2.0}) == [
        ("began->registered", 1.0), ("registered->quorum", 1.0), ("quorum->caught_up", 1.0)]
    assert mark_steps({}) == []


def test_keep_slow_names_the_steps_from_the_stop_on_that_took_that_long() -> None:
    """``--keep-slow 5`` keeps a run whose controller broker led again 15 s after its catch-up; the gate's wait
    before the stop (the lag streak, by design) does not count."""
    from restart_overhead import slow_steps

    brokers = [{"broker": "broker 0", "ids": [0],
                "marks": {"began": 0.0, "stop_sent": 6.0, "gone": 7.0, "start_sent": 7.1, "registered": 9.0,
                          "caught_up": 9.5, "leadership": 24.5, "done": 24.6}},
               {"broker": None, "ids": [1, 4], "marks": {"began": 30.0, "stop_sent": 30.5, "gone": 31.5}}]
    assert slow_steps(brokers, 5.0) == ["broker 0: caught_up->leadership 15.0 s"]
    assert slow_steps(brokers, 1.0) == ["broker 0: stop_sent->gone 1.0 s", "broker 0: start_sent->registered 1.9 s",
                                        "broker 0: caught_up->leadership 15.0 s", "brokers 1, 4: stop_sent->gone 1.0 s"]
    assert slow_steps(brokers, 20.0) == []


def test_a_kraft_controllers_roll_is_neither_fixed_nor_a_brokers() -> None:
    tis = [ti("check_and_lock", 1.0, 1.5), ti("controllers.controller", 2.0, 12.0, 0),
           ti("controllers.controller", 12.0, 22.0, 1), ti("restart.broker", 23.0, 33.0, 0)]
    rows = [{"map_index": 0, "marks": marks(24, 26, 27, 30, 31, 32)}]
    out = summarize("success", T0, T0 + 34.0, tis, rows)
    assert out["controllers_s"] == 20.0 and out["controllers"] == 2
    assert out["first_stop_s"] == pytest.approx(24.0 - 1.0 - 20.0)


def test_a_run_that_stopped_nothing_has_no_fixed_part() -> None:
    out = summarize("failed", T0, T0 + 5.0, [ti("check_and_lock", 1.0, 2.0, state="failed")], [])
    assert out["first_stop_s"] is None and out["fixed_s"] is None
    assert out["failed"] == ["check_and_lock[-1]"]


def test_the_imbalance_bench_reads_the_gate_from_the_broker_tasks_marks() -> None:
    from imbalance_gate import broker_task_seconds, gate_seconds

    tis = [ti("check_and_lock", 1.0, 1.5), ti("restart.broker", 5.0, 20.0, 0)]
    passed = summarize("success", T0, T0 + 25.0, tis,
                       [{"map_index": 0, "rendered_map_index": "broker 2 (1/1)",
                         "marks": {"began": T0 + 5.2, **marks(8.4, 10, 11, 14, 15, 16)}}])
    assert gate_seconds(passed) == pytest.approx(3.2), "the task's start to its stop sent"
    assert broker_task_seconds(passed) == 15.0
    failed = summarize("failed", T0, T0 + 30.0, [ti("restart.broker", 5.0, 26.0, 0, "failed")],
                       [{"map_index": 0, "rendered_map_index": "broker 2 (1/1)", "marks": {}}])
    assert gate_seconds(failed) is None, "no stop sent: the gate never passed"
    assert broker_task_seconds(failed) == 21.0


def test_the_benches_start_a_run_once_the_cpu_rests_or_say_it_did_not(monkeypatch: pytest.MonkeyPatch) -> None:
    """A turn of ``bench/side_by_side.py`` and a run of ``bench/restart_overhead.py`` wait until the CPU was busy at
    most ``REST_CPU_BUSY`` over a span (a run on a busy machine pays for whatever else runs); after the limit it goes
    on and reports the last fraction. ``cpu_busy`` reads /proc/stat: a fraction between 0 and 1."""
    import cpu_share

    busy = iter([0.9, 0.8, 0.2, 0.1])
    monkeypatch.setattr(cpu_share, "cpu_busy", lambda: next(busy))
    waited, last = cpu_share.machine_at_rest(limit_s=60)
    assert last == 0.2 and next(busy) == 0.1, "stopped at the first span at rest"
    monkeypatch.setattr(cpu_share, "cpu_busy", lambda: 0.9)
    waited, last = cpu_share.machine_at_rest(limit_s=0.0)
    assert last == 0.9, "never at rest: goes on after the limit with what it saw"
    monkeypatch.undo()
    assert 0.0 <= cpu_share.cpu_busy(0.05) <= 1.0


def test_the_side_by_side_bench_says_what_a_turn_cost_the_cpu() -> None:
    """``CpuDuring`` (around a turn): the machine's busy fraction and this process's CPU seconds (the client
    traffic's threads), printed in each row of the table."""
    import time

    import side_by_side

    with side_by_side.CpuDuring() as cpu:
        until = time.process_time() + 0.05
        while time.process_time() < until:
            pass
    cost = cpu.result()
    assert cost["clients_cpu_s"] >= 0.05 and 0.0 < cost["cpu_busy"] <= 1.0
    traffic = {"lost_count": 0, "acknowledged": 10}
    row = {"size": 3, "who": "compared", "ok": True, "wall_s": 20.0, "first_stop_s": 1.0,
           "at_end": {"urp": 0, "not_preferred": 0}, "settled_s": 0.1, "done_s": 20.1, "restarts": {0: 1},
           "traffic": traffic, "traffic_kafka_python": traffic, "cpu_busy": 0.83, "clients_cpu_s": 12.34}
    line = side_by_side.table([row]).splitlines()[2].split()
    assert line[-2:] == ["83%", "12.3"]


def test_the_overhead_bench_sets_kafkas_own_time_beside_each_broker_task(tmp_path: Path) -> None:
    """Each broker task's row gets Kafka's own seconds from the node logs between its began and done marks; the table
    prints them and what is left for the task (ours)."""
    from restart_overhead import kafka_own

    def stamp(t: float) -> str:
        from datetime import datetime
        return datetime.fromtimestamp(T0 + t).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]

    logs = {
        0: (f"[{stamp(0)}] kafka-service: start /h/0/kafka (pid 1)\n"
            f"[{stamp(6)}] INFO [KafkaServer id=0] shutting down (kafka.server.KafkaServer)\n"
            f"[{stamp(7)}] INFO [KafkaServer id=0] shut down completed (kafka.server.KafkaServer)\n"
            f"[{stamp(8.5)}] kafka-service: start /h/0/kafka (pid 2)\n"
            f"[{stamp(11)}] INFO [KafkaServer id=0] started (kafka.server.KafkaServer)\n"
            f"[{stamp(13)}] INFO [Broker id=0] Leader orders-0 with topic id Some(x) starts at leader epoch 2\n"),
        1: (f"[{stamp(0)}] kafka-service: start /h/1/kafka (pid 3)\n"
            f"[{stamp(12)}] INFO [Partition orders-1 broker=1] ISR updated to 1,0  and version updated to 3 (x)\n"),
    }
    for b, text in logs.items():
        (tmp_path / "hosts" / str(b) / "logs").mkdir(parents=True)
        (tmp_path / "hosts" / str(b) / "logs" / "server.log").write_text(text)
    rows = [{"map_index": 0, "rendered_map_index": "broker 0 (1/1)", "ids": [0],
             "marks": {**marks(6, 7.2, 8, 11.5, 12.2, 13.3), "began": T0 + 5, "done": T0 + 14}}]
    out = summarize("success", T0, T0 + 15, [ti("restart.broker", 5, 14, 0)], rows)
    kafka_own(tmp_path, 2, out["brokers"])
    (row,) = out["brokers"]
    assert row["task_s"] == 9.0
    assert row["kafka"]["shutdown_s"] == pytest.approx(1.0) and row["kafka"]["start_s"] == pytest.approx(2.5)
    assert row["kafka"]["catch_up_s"] == pytest.approx(1.0) and row["kafka"]["leadership_s"] == pytest.approx(1.0)
    assert row["kafka"]["kafka_s"] == pytest.approx(5.5)
    text = table([{"size": 2, "mode": "zookeeper", "runner": "scheduler", **out}])
    assert "Kafka's own (its logs): shutdown 1.0 s, start 2.5 s (JVM launch to started), catch-up 1.0 s, " \
           "leadership 1.0 s = 5.5 s of the task's 9.0 s; ours 3.5 s (exit to next launch 1.5 s)" in text
    assert "1 broker tasks: Kafka's own 5.5 s of their 9.0 s; ours 3.5 s, 3.5 s a task" in text


def test_the_side_by_side_bench_names_the_threads_that_took_the_clients_cpu() -> None:
    """``CpuDuring`` keeps each thread's CPU by name, also of a thread that ended before the turn did (the traffic's
    threads are joined first), and the table names the busiest threads of a turn whose clients took over
    ``BUSY_CLIENTS_S``."""
    import threading
    import time

    import side_by_side

    def spin() -> None:
        until = time.thread_time() + 1.2
        while time.thread_time() < until:
            pass
        # idle a few sample periods before ending, so that a sample sees all it took: what a thread takes after the
        # last sample before its end is lost (samples every THREAD_SAMPLE_S of wall time, later under load; a loaded
        # full run once counted under 0.5 of a 1.2 CPU s spin ended at once, and the table dropped it)
        time.sleep(side_by_side.THREAD_SAMPLE_S * 4)

    with side_by_side.CpuDuring() as cpu:
        worker = threading.Thread(target=spin, name="kp-consumer")
        worker.start()
        worker.join()
        time.sleep(side_by_side.THREAD_SAMPLE_S * 2)  # the thread is gone from /proc when the turn ends
    threads = cpu.result()["cpu_threads"]
    assert 1.0 <= threads["kp-consumer"] <= 1.3, threads  # counted although it ended inside the turn
    traffic = {"lost_count": 0, "acknowledged": 10}
    row = {"size": 3, "who": "compared", "ok": True, "wall_s": 26.0, "first_stop_s": 1.0,
           "at_end": {"urp": 0, "not_preferred": 0}, "settled_s": 0.1, "done_s": 26.1, "restarts": {0: 1},
           "traffic": traffic, "traffic_kafka_python": traffic, "cpu_busy": 0.9, "clients_cpu_s": 30.6,
           "cpu_threads": {"kp-consumer": 13.7}}
    quiet = {**row, "clients_cpu_s": 2.0, "cpu_threads": {}}
    lines = side_by_side.table([row, quiet]).splitlines()
    named = [line for line in lines if "the clients took" in line]
    assert named == ['3 brokers, compared, wall 26.0 s: the clients took 30.6 CPU s, most in {"kp-consumer": 13.7}']


def test_the_cpu_shares_count_each_process_over_the_window_only() -> None:
    from cpu_share import CpuSampler

    kafka = "java -Xmx320m -cp libs/* kafka.Kafka server.properties"
    pg = "postgres: airflow airflow [local] SELECT"
    old, new, sched, db, worker = (1, 50.0), (4, 61.0), (2, 40.0), (3, 45.0), (5, 61.5)  # (pid, start time)
    sampler = CpuSampler()
    sampler.samples = [
        (T0, {old: (kafka, 10.0), sched: ("airflow scheduler", 5.0), db: (pg, 1.0)}),
        (T0 + 1, {old: (kafka, 11.0), sched: ("airflow scheduler", 5.5), db: (pg, 1.2), new: (kafka, 0.5)}),
        # the scheduler's reading at T0 + 1 is its last: it ended inside the window; the old JVM exited and waits to
        # be reaped: its command line is gone, its CPU time is not
        (T0 + 2, {old: ("<java>", 12.0), db: (pg, 1.4), new: (kafka, 1.5), worker: ("airflow worker -- x", 0.3),
                  (1, 62.0): ("/bin/sh -c true", 0.1)}),  # pid 1 again: another process, counted from its start
        (T0 + 3, {old: (kafka, 20.0), db: (pg, 9.0), new: (kafka, 9.5)}),  # after the window
    ]
    shares = sampler.spent(T0 + 0.5, T0 + 1.5)
    # from the reading at T0 to the one at T0 + 2: the old JVM's 2.0, the new one's whole 1.5
    assert shares == pytest.approx({"Kafka JVMs": 3.5, "Airflow scheduler": 0.5, "PostgreSQL": 0.4,
                                    "Airflow tasks and workers": 0.3, "other": 0.1})
    assert list(shares)[0] == "Kafka JVMs"  # the biggest first
    assert sampler.spent(group=lambda label: label.split()[0])["java"] == pytest.approx(20.0 - 10.0 + 9.5)
    with pytest.raises(ValueError, match="do not span"):
        sampler.spent(T0 - 1, T0 + 1)
    with pytest.raises(ValueError, match="do not span"):
        sampler.spent(T0 + 1, T0 + 4)
    with pytest.raises(ValueError, match="empty window"):
        sampler.spent(T0 + 1, T0 + 1)
    # a window after the scheduler ended (its last reading at T0 + 1): it is in no reading from the window's on, so
    # none of its CPU is counted (before, it counted as born inside the window, with all of its 5.5 s)
    later = sampler.spent(T0 + 2, T0 + 2.5)
    assert "Airflow scheduler" not in later
    assert later == pytest.approx({"PostgreSQL": 7.6, "Kafka JVMs": 8.0 + 8.0})


def test_the_cpu_sampler_reads_when_entered_and_left() -> None:
    """A window that begins as the sampler is entered and ends as it is left is spanned (no waiting for the sampling
    thread's first reading), and this process's threads are read by name."""
    import time

    from cpu_share import CpuSampler, own_threads

    with CpuSampler(read=own_threads, interval_s=60) as sampler:
        began = time.time()
        until = time.thread_time() + 0.1
        while time.thread_time() < until:
            pass
        ended = time.time()
    assert len(sampler.samples) == 2
    # /proc counts a thread's CPU in clock ticks (10 ms): 0.1 s burnt reads as 0.09-0.11 s (0.0899... seen once)
    assert sampler.spent(began, ended, group=lambda name: name)["MainThread"] >= 0.08


def test_the_cpu_shares_name_what_took_the_cpu() -> None:
    from cpu_share import OTHER, category, describe

    assert category("postgres: airflow airflow [local] UPDATE") == "PostgreSQL"  # not an Airflow process
    assert category("/usr/bin/java -cp /opt/zk/* org.apache.zookeeper.server.quorum.QuorumPeerMain z.cfg") == \
        "ZooKeeper"
    assert category("/work/.venv/bin/python /work/.venv/bin/airflow api-server") == "Airflow api-server"
    assert category("airflow worker -- LocalExecutor: <idle>") == "Airflow tasks and workers"
    assert category("/usr/sbin/sshd -D -f sshd_config") == "sshd"
    assert category("[ksoftirqd/0]") == "kernel threads"
    assert category("/bin/sleep 5") == OTHER
    line = describe({"Kafka JVMs": 17.4, "Airflow scheduler": 2.0, "other": 0.01}, wall_s=16.1, cores=2)
    assert line == "19.4 of 32.2 CPU s (2 cores x 16.1 s, 60% busy): Kafka JVMs 17.4, Airflow scheduler 2.0"


def test_the_overhead_bench_prints_where_the_cpu_went() -> None:
    tis = [ti("check_and_lock", 2.0, 3.5), ti("restart.broker", 5.0, 15.0, 0), ti("run_outcome", 15.5, 17.0)]
    rows = [{"map_index": 0, "rendered_map_index": "broker 0 (1/1)", "marks": marks(6, 8, 9, 12, 13, 14)}]
    result = {**summarize("success", T0, T0 + 17.0, tis, rows), "size": 1,
              "cpu": "19.4 of 34.0 CPU s (2 cores x 17.0 s, 57% busy): Kafka JVMs 17.4, Airflow scheduler 2.0"}
    assert ("  1 brokers, the machine's CPU during the run: 19.4 of 34.0 CPU s (2 cores x 17.0 s, 57% busy): "
            "Kafka JVMs 17.4, Airflow scheduler 2.0") in table([result]).splitlines()


def test_burrows_answer_times_are_summed_up_within_the_run_and_failures_kept_apart(silent_url) -> None:
    """``bench/burrow_latency.py``: the answers asked inside the run's window give its figures; a Burrow that does not
    answer within the request timeout is a failure, not a latency."""
    import time as clock

    from burrow_latency import BurrowLatency

    sampler = BurrowLatency("http://127.0.0.1:1", "sandbox", ["g"], interval_s=0.05, timeout_s=0.2)
    sampler.samples = [(T0 + 1, 0.002), (T0 + 2, 0.010), (T0 + 3, 3.5), (T0 + 99, 9.0)]
    sampler.failures = [(T0 + 2.5, "ReadTimeout")]
    assert sampler.describe(T0, T0 + 10) == ("3 answers: median 10 ms, 95th percentile 3500 ms, max 3500 ms; 1 over "
                                              "the side poll's 3 s; 1 failed (ReadTimeout)")
    assert sampler.describe(T0 + 50, T0 + 60) == "no answer sampled (0 failed)"

    with BurrowLatency(silent_url, "sandbox", ["orders-service"], interval_s=0.05, timeout_s=0.2) as silent:
        began = clock.time()
        while not silent.failures and clock.time() - began < 5:
            clock.sleep(0.05)
    assert silent.samples == [] and silent.failures, "a silent Burrow is counted as failures"
    assert silent.failures[0][1] == "ReadTimeout"


def test_what_the_outside_watcher_saw_is_one_line() -> None:
    """The bench's reading of the tests' metadata watcher: reads, offline and under-min-ISR snapshots, named."""
    from observers import ClusterView, MetadataWatcher, PartitionView
    from restart_overhead import seen_from_outside

    def view(at, *parts):
        return ClusterView(at=at, brokers=frozenset({0, 1, 2}), controller=0, partitions=tuple(parts))

    ok = PartitionView("orders", 0, leader=0, replicas=(0, 1, 2), isr=(0, 1, 2))
    thin = PartitionView("orders", 1, leader=1, replicas=(1, 2, 0), isr=(1,))
    single = PartitionView("solo", 0, leader=2, replicas=(2,), isr=(2,))  # RF 1: never "under min ISR"
    gone = PartitionView("payments", 3, leader=-1, replicas=(1, 2, 0), isr=(1,))
    watcher = MetadataWatcher("127.0.0.1:1", views=[view(1.0, ok, single), view(2.0, ok, thin), view(3.0, gone)])
    assert seen_from_outside(watcher, 2) == ("3 metadata reads (0 failed): offline partitions in 1 (payments-3), a "
                                             "partition under min.insync.replicas=2 in 2 (orders-1, payments-3)")
    quiet = MetadataWatcher("127.0.0.1:1", views=[view(1.0, ok, single)])
    assert seen_from_outside(quiet, 2) == ("1 metadata reads (0 failed): offline partitions in 0, a partition under "
                                           "min.insync.replicas=2 in 0")
