"""The kafka_rolling_restart DAG (and a two-roll test DAG built from the same parts) run end to end
(``dag.test()``) against sandbox clusters.

Observers are independent of the DAG: ZooKeeper registrations (restart = new registration timestamp), the
brokers' own logs (each start and controlled shutdown), a background metadata watcher (offline partitions),
the lock znode, files the broker hosts' commands write.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from airflow_env import clear_and_resume, failure_lines, published_labels, roll_records, run_dag
from batch_checks import assert_one_election_per_batch, batches_of
from imbalance import make_leader_imbalance
from observers import MetadataWatcher, admin, assert_no_acknowledged_message_lost, snapshot, wait_for
from timed_faults import FaultAfterTrigger, ThawOnceLogged

from sandbox.traffic_watch import watched_traffic

DAG_ID = "kafka_rolling_restart"
FAST = {"healthcheck_interval_s": 1, "healthcheck_timeout_s": 120, "lag_ok_consecutive": 2}
LOCK = "/kafka-ops/operation-lock"


def registrations(sandbox) -> dict[int, int]:
    """Broker id -> registration timestamp (ms) from ZooKeeper."""
    with sandbox.zk() as zk:
        return {
            int(b): int(json.loads(zk.get(f"/brokers/ids/{b}")[0])["timestamp"])
            for b in zk.get_children("/brokers/ids")
        }


def starts(sandbox) -> dict[int, int]:
    """Broker id -> how often Kafka logged that it started, from the broker's own log."""
    return sandbox.starts()


def last_shutdowns(sandbox) -> list[int]:
    """Brokers ordered by the time their last shutdown began, from their own logs."""
    return sandbox.shutdown_order()


def controller(sandbox) -> int:
    with sandbox.zk() as zk:
        return int(json.loads(zk.get("/controller")[0])["brokerid"])


def controller_epoch(sandbox) -> int:
    """How many controller elections the cluster has had (ZooKeeper's ``/controller_epoch``)."""
    with sandbox.zk() as zk:
        return int(zk.get("/controller_epoch")[0])


def lock_holder(sandbox) -> str | None:
    with sandbox.zk() as zk:
        if not zk.exists(LOCK):
            return None
        return json.loads(zk.get(LOCK)[0])["holder"]


def brokers_in_order(result, task_id: str = "restart.broker") -> list[int]:
    """Broker ids by roll position, from the Grid labels "broker <id> (<pos>/<total>)"."""
    return [int(label.split()[1]) for label in result.mapped_labels(task_id)]


def with_profile(monkeypatch: pytest.MonkeyPatch, **changes) -> None:
    """Change the kafka_sandbox connection's profile (extra) for this test."""
    import os

    conn = json.loads(os.environ["AIRFLOW_CONN_KAFKA_SANDBOX"])
    conn["extra"] = {**conn["extra"], **changes}
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_SANDBOX", json.dumps(conn))


def output(capfd, caplog) -> str:
    return capfd.readouterr().out + caplog.text


@pytest.fixture
def shared(sandbox, use_sandbox):
    use_sandbox(sandbox.workdir)
    sandbox.wait_healthy(timeout_s=120)
    return sandbox


def test_rolling_restart_restarts_every_broker_once_controller_last(shared, monkeypatch, tmp_path, capfd, caplog):
    marks = tmp_path / "stops"
    # {broker_id} in service_stop is filled per broker (by the profile, not the shell)
    with_profile(monkeypatch, service_stop=f"echo {{broker_id}} >> {marks} && kafka-service stop")
    before = registrations(shared)
    started_before = starts(shared)
    first_controller = controller(shared)
    with watched_traffic(shared.workdir, shared.bootstrap_servers, sorted(before)) as traffic, \
            MetadataWatcher(shared.bootstrap_servers, interval_s=0.25, zookeeper=shared.zookeeper_connect) as watcher:
        result = run_dag(DAG_ID, {"cluster": "kafka_sandbox", **FAST})
    print(traffic.summary())
    assert_no_acknowledged_message_lost(traffic)
    after = registrations(shared)
    now = starts(shared)
    started = {b: now[b] - started_before[b] for b in before}
    assert started == {b: 1 for b in before}, f"each broker was started exactly once: {started}"

    assert result.state == "success", result.states
    assert sorted(after) == sorted(before), "every broker is registered again"
    assert all(after[b] > before[b] for b in before), f"every broker restarted: {before} -> {after}"
    assert last_shutdowns(shared)[-1] == first_controller, "the controller is restarted last"
    assert watcher.ever_offline() == [], "no partition offline during the roll\n" + watcher.explain_offline(shared)
    end = snapshot(admin(shared.bootstrap_servers))
    assert end.under_replicated == [] and end.offline == []
    order = brokers_in_order(result)
    assert sorted(order) == sorted(before) and order == last_shutdowns(shared), "labels name the brokers in order"
    assert result.mapped_labels() == [f"broker {b} ({i + 1}/{len(order)})" for i, b in enumerate(order)]
    assert marks.read_text().split() == [str(b) for b in order], "the {broker_id} placeholder was filled"
    assert result.mapped_states() == ["success"] * len(before)
    assert result.state_of("run_outcome") == "success" and lock_holder(shared) is None
    spans = sorted((ti.start_date, ti.end_date) for ti in result.task_instances
                   if ti.task_id == "restart.broker" and ti.state == "success")
    for (_, previous_end), (next_start, _) in zip(spans, spans[1:], strict=False):
        assert next_start >= previous_end, "a broker's task started before the previous broker finished"
    # the succeeded run keeps its roll records (the cleanup DAG deletes them keep_days later): the whole run
    # cleared, as the UI's "Clear Run" on a green run does, finds every broker done and restarts none again
    assert roll_records(DAG_ID, result.run_id) == [f"kafka_ops_roll__{DAG_ID}__{result.run_id}__{r}"
                                                   for r in ("controllers", "restart")]
    output(capfd, caplog)
    cleared = clear_and_resume(DAG_ID, result.run_id, only_failed=False)
    assert cleared.state == "success", cleared.states
    assert starts(shared) == now, "clearing a run that succeeded restarted no broker again"
    text = output(capfd, caplog)
    assert "roll 'restart': every node of it finished in this run: none is restarted again" in text
    assert all(f"broker {b}: skip: finished in roll 'restart'" in text for b in before), failure_lines(text)
    assert lock_holder(shared) is None, "the cleared run took the lock and released it"


def test_a_roll_on_a_profile_without_zookeeper_keeps_its_lock_in_the_cluster(shared, monkeypatch):
    """What a KRaft cluster's connection looks like (no ``zookeeper``): the whole roll runs on the admin API and
    SSH alone, its lock a topic in the cluster; an independent client sees the lock topic during the run
    and not after; each broker started once; nothing written to ZooKeeper's lock node."""
    import os

    from hooks.kafka_lock import LOCK_TOPIC

    conn = json.loads(os.environ["AIRFLOW_CONN_KAFKA_SANDBOX"])
    conn["extra"] = {k: v for k, v in conn["extra"].items() if k not in ("zookeeper", "reassignment_via")}
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_SANDBOX", json.dumps(conn))
    import threading

    seen: list[bool] = []
    client = admin(shared.bootstrap_servers)
    stop = threading.Event()

    def watch_lock_topic() -> None:
        while not stop.wait(0.5):
            seen.append(LOCK_TOPIC in client.list_topics(timeout=10).topics)

    started_before = starts(shared)
    with MetadataWatcher(shared.bootstrap_servers, interval_s=0.25, zookeeper=shared.zookeeper_connect) as watcher:
        poller = threading.Thread(target=watch_lock_topic, daemon=True)
        poller.start()
        try:
            result = run_dag(DAG_ID, {"cluster": "kafka_sandbox", "brokers": [0, 1], **FAST})
        finally:
            stop.set()
            poller.join(10)
    assert result.state == "success", result.states
    now = starts(shared)
    assert {b: now[b] - started_before[b] for b in (0, 1)} == {0: 1, 1: 1}
    assert any(seen), "the lock topic existed while the run held the lock"
    # released by run_outcome (each broker's metadata cache follows the deletion within a second or so)
    wait_for(lambda: LOCK_TOPIC not in client.list_topics(timeout=10).topics, 15, what="the lock topic gone")
    assert lock_holder(shared) is None, "nothing in ZooKeeper's lock node"
    # the lock topic itself is leaderless for a moment right after its creation and during its deletion
    offline = [(at, [p for p in parts if p.topic != LOCK_TOPIC]) for at, parts in watcher.ever_offline()]
    assert [(at, parts) for at, parts in offline if parts] == []
    assert result.state_of("run_outcome") == "success"


@pytest.mark.extended
def test_two_rolls_in_one_run_each_restart_their_brokers(shared, monkeypatch, tmp_path, capfd, caplog):
    """Roll 1 restarts every broker; roll 2 (a needs-action rule leaving broker 0 alone, a before-start step)
    restarts the others once more, its before-start step running while each of them is down."""
    from hooks.burrow import BurrowHook
    from hooks.cluster_profile import get_cluster_profile
    from kafka_ops.health import judged_window_s

    marks = tmp_path / "before-start"
    monkeypatch.setenv("KAFKA_OPS_TEST_BEFORE_START", str(marks))
    # the shared sandbox's earlier rolls cut the groups' commits: wait (with a deadline) until Burrow rates every
    # group OK over a window of commits again, so the first gate below can be judged by that window
    profile = get_cluster_profile("kafka_sandbox")
    with BurrowHook.from_profile(profile) as burrow:
        wait_for(lambda: judged_window_s(burrow.group_statuses(profile.consumer_groups)) >= 3.0, 60,
                 what="Burrow rating every group OK over 3 s of commits")
    before = registrations(shared)
    started_before = starts(shared)
    with MetadataWatcher(shared.bootstrap_servers, interval_s=0.25, zookeeper=shared.zookeeper_connect) as watcher:
        result = run_dag("kafka_two_rolls_test", {"cluster": "kafka_sandbox", **FAST})
    assert result.state == "success", result.states
    assert result.mapped_states("first.broker") == ["success"] * len(before)
    assert result.mapped_states("second.broker") == ["success"] * len(before)
    now = starts(shared)
    started = {b: now[b] - started_before[b] for b in before}
    assert started == {b: 1 if b == 0 else 2 for b in before}, f"starts per broker: {started}"
    second_order = brokers_in_order(result, "second.broker")
    assert marks.read_text().split() == [str(b) for b in second_order if b != 0], "before_start ran per broker"
    out = output(capfd, caplog)
    assert "broker 0: left alone: broker 0 is already where the test wants it" in out
    # the first gate read Burrow's window of commits on real Burrow (what lets it pass without spaced polls)
    assert re.search(r"broker \d+ may be stopped: yes \(.*Burrow judged \d+\.\d s of commits OK", out), out[-3000:]
    assert watcher.ever_offline() == [], watcher.explain_offline(shared)
    assert all(registrations(shared)[b] > before[b] for b in before)


def scratch_partitions(sandbox) -> list:
    return [p for p in snapshot(admin(sandbox.bootstrap_servers)).partitions if p.topic == "scratch-rf1"]


def test_dry_run_touches_nothing(shared, capfd, caplog):
    from confluent_kafka.admin import NewTopic

    before = registrations(shared)
    # a topic with one replica per partition: no gate can keep it online while its broker restarts; the plan says so
    client = admin(shared.bootstrap_servers)  # kept referenced: a dropped client cancels its futures
    client.create_topics([NewTopic("scratch-rf1", 2, 1)])["scratch-rf1"].result(30)
    try:
        wait_for(lambda: len(scratch_partitions(shared)) == 2, 30, what="scratch-rf1 in the metadata")
        # no "cluster" in the conf: the DAG's default, kafka_sandbox (as a scheduled run or a REST trigger with some
        # params only)
        result = run_dag(DAG_ID, {"dry_run": True, "pre_stop": "show-broker", **FAST})
    finally:
        client.delete_topics(["scratch-rf1"])["scratch-rf1"].result(30)
        wait_for(lambda: not scratch_partitions(shared), 60, what="scratch-rf1 deleted")
    assert result.state == "success", result.states
    assert result.mapped_states() == ["success"] * len(before)
    # the labels the plan gave the scheduler for the instances before they ran are the ones they ran under
    labels = result.mapped_labels()
    assert published_labels(DAG_ID, result.run_id) == {"restart.broker": labels}
    assert all(re.fullmatch(r"broker \d+ \(\d/\d\) · dry run", label) for label in labels), labels
    assert registrations(shared) == before, "a dry run restarts no broker"
    out = output(capfd, caplog)
    assert "DRY RUN: would run broker" in out and "profile command 'show-broker'" in out
    # a healthy cluster's gate, judged by one look and one Burrow poll, says what a real run would do: stop now
    assert len(re.findall(r"DRY RUN: broker \d+ may be stopped now: ", out)) == len(before), out[-3000:]
    assert "may not be stopped" not in out and "a real run waits for 2 OK polls in a row" in out
    assert re.search(r"unavoidable during the roll: topic scratch-rf1: 2 partitions with one replica \(on brokers "
                     r"\[[\d, ]+\]\) offline while the broker restarts", out), out[-3000:]
    # the note says why the controllers' roll is empty, once, in its own words
    assert "roll 'controllers': nothing to roll (ZooKeeper mode: the controller is a broker, rolled last; no KRaft " \
           "controllers to roll)" in out, out[-3000:]
    # the cluster view's "Last operations" finds the run by its DAG's default cluster
    from fleet_view.metadata import AirflowMetadata

    past = AirflowMetadata().past_runs("kafka_sandbox")
    assert past and past[0].run_id == result.run_id and past[0].dag_id == DAG_ID, past
    assert past[0].state == "success", past[0]
    assert result.run_id not in [r.run_id for r in AirflowMetadata().past_runs("kafka_other")]


def test_broker_instances_are_labelled_before_they_run(shared):
    # the broker instances are set to success when ready, without running: their labels are what the
    # scheduler gave them when it created them, i.e. what the Grid shows while they wait (issue: bare "0")
    brokers = sorted(registrations(shared))
    result = run_dag(DAG_ID, {"cluster": "kafka_sandbox", "dry_run": True, **FAST},
                     mark_success_pattern=r"restart\.broker")
    assert result.state == "success", result.states
    labels = result.mapped_labels()
    parsed = [re.fullmatch(r"broker (\d+) \((\d+)/(\d+)\) · dry run", label or "") for label in labels]
    assert all(parsed), labels
    assert sorted(int(m[1]) for m in parsed) == brokers
    assert [(int(m[2]), int(m[3])) for m in parsed] == [(i + 1, len(brokers)) for i in range(len(brokers))]


@pytest.mark.parametrize(
    "conf, failed_task, expected",
    [
        ({"cluster": "kafka_sandbox", "brokers": [7]}, "restart.plan", "unknown broker ids [7]"),
        ({"cluster": "no_such_cluster"}, "check_and_lock", "no_such_cluster"),
        ({"cluster": "kafka_sandbox", "consumer_groups": ["nobody-consumes-this"]}, "restart.plan",
         "nobody-consumes-this"),
        ({"cluster": "kafka_sandbox", "broker": [1], "dry_run": True}, "check_and_lock",
         "unknown param 'broker'; did you mean 'brokers'?"),
        ({"cluster": "kafka_sandbox", "pre_stop": "true; touch /tmp/kafka-ops-adhoc"}, "check_and_lock",
         "is not a command named in connection 'kafka_sandbox'"),
        # a number outside its bounds is refused, never clamped (the form's schema has no bounds to clamp to)
        ({"cluster": "kafka_sandbox", "healthcheck_timeout_s": -5}, "check_and_lock",
         "param healthcheck_timeout_s: -5 is less than the minimum of 10"),
        ({"cluster": "kafka_sandbox", "healthcheck_interval_s": 5, "healthcheck_timeout_s": 10,
          "lag_ok_consecutive": 3}, "check_and_lock", "healthcheck_timeout_s 10 cannot pass the lag gate"),
    ],
)
def test_bad_params_fail_before_anything_is_touched(shared, conf, failed_task, expected, capfd, caplog):
    before = registrations(shared)
    result = run_dag(DAG_ID, {**FAST, **conf})
    assert result.state == "failed"
    assert result.state_of(failed_task) == "failed"
    assert set(result.mapped_states()) <= {"upstream_failed", None}, "no broker task ran"
    out = output(capfd, caplog)
    assert expected in out
    # the run's outcome (its note's first line, in run_outcome's log): refused, naming the task and its reason
    assert result.state_of("run_outcome") == "failed"
    headline = re.search(r"\*\*Refused\*\*: rolling restart on \S+( \(DRY RUN: nothing was touched\))?: "
                         rf"{re.escape(failed_task)}: [^\n]*", out)
    assert headline and expected in headline[0], out[-3000:]
    assert "trigger a new run" in out
    assert registrations(shared) == before
    assert lock_holder(shared) is None, "the lock is not left behind"
    # refused before the lock: the teardown does not ask the lock store; refused after it: the teardown released it
    assert ("cluster lock: never taken (check_and_lock refused the run first)" if failed_task == "check_and_lock"
            else "cluster lock released") in out, out[-3000:]


def test_a_host_without_the_stop_command_stops_the_roll_before_any_broker(shared, monkeypatch, capfd, caplog):
    """ZooKeeper mode: the empty controller roll is skipped by its plan as soon as that ends, which may be before the
    preflight ends; the broker roll still waits for the preflight, whose refusal (a stop command whose program no
    host has) stops the run with no broker touched."""
    with_profile(monkeypatch, commands={"absent_stop": "/opt/kafka-ops-absent/bin/kafka-stop"})
    before = registrations(shared)
    result = run_dag(DAG_ID, {"cluster": "kafka_sandbox", "stop_command": "absent_stop", **FAST})
    assert result.state == "failed" and result.state_of("preflight") == "failed", result.states
    assert result.state_of("controllers.plan") == "success" and result.state_of("restart.plan") == "success"
    assert result.state_of("controllers.controller") == "skipped"
    assert set(result.mapped_states()) <= {"upstream_failed", None}, "no broker task ran"
    out = output(capfd, caplog)
    assert "roll 'controllers' has nothing to do: controllers.controller is skipped now" in out, "by its plan"
    assert "/opt/kafka-ops-absent/bin/kafka-stop" in out and "not found on the PATH" in out, out[-3000:]
    assert re.search(r"\*\*Refused\*\*: rolling restart on kafka_sandbox: preflight: ", out), out[-3000:]
    assert registrations(shared) == before
    assert lock_holder(shared) is None, "the lock is not left behind"


def test_a_reassignment_by_hand_refuses_the_roll_and_one_started_during_it_is_named_by_the_gate(
        shared, monkeypatch, tmp_path, capfd, caplog):
    """A reassignment started with Kafka's own kafka-reassign-partitions.sh (throttled to 1 byte/s, so it stays in
    progress) refuses the roll at its plan, naming the partition and how to finish or cancel it; no broker is touched.
    Cancelled, then started again right after the first broker's stop of the next roll: the second broker's gate holds
    on the new replica (a URP to the metadata) and, when it gives up, names the reassignment; the second broker is not
    touched. That roll names the ZooKeeper controller first with ``keep_order``, which keeps it first. Each
    reassignment is cancelled the same way (its throttles removed), and the topic deleted."""
    from confluent_kafka import Producer

    topic = "kafka-ops-test-reassigning"
    bootstrap = shared.bootstrap_servers
    # the controller first: the second roll's keep_order must keep it there (not move it last)
    first = controller(shared)
    second, third = sorted(b for b in shared.broker_ids if b != first)[:2]
    plan, later = tmp_path / "move.json", tmp_path / "move-later.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [first, third]}]}))
    # started right after the first broker's start: the targets are brokers the roll did not stop
    later.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [second, third]}]}))

    def tool(*args: str) -> str:
        done = shared.kafka_tool(*args)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def move(*args: str, path: Path = plan) -> str:
        return tool("kafka-reassign-partitions.sh", "--bootstrap-server", bootstrap, "--reassignment-json-file",
                    str(path), *args)

    in_progress = f"{topic}-0: adding [{third}], removing [{second}]"
    tool("kafka-topics.sh", "--bootstrap-server", bootstrap, "--create", "--topic", topic,
         "--replica-assignment", f"{first}:{second}")
    try:
        # more than one fetch can carry (replica.fetch.max.bytes, 1 MiB): the throttle then holds the copy back
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20, "log_level": 0})
        for _ in range(300):
            producer.produce(topic, b"x" * 10_000)
        assert producer.flush(60) == 0
        del producer  # no reconnect attempts logged once the session's sandbox is down
        move("--execute", "--throttle", "1")
        assert "still in progress" in move("--verify")
        before = registrations(shared)
        result = run_dag(DAG_ID, {"cluster": "kafka_sandbox", **FAST})
        assert result.state == "failed" and result.state_of("restart.plan") == "failed", result.states
        assert set(result.mapped_states()) <= {"upstream_failed", None}, "no broker task ran"
        out = output(capfd, caplog)
        assert f"a partition reassignment is in progress (1 partition: {in_progress})" in out, out[-3000:]
        assert "kafka-reassign-partitions.sh --verify" in out and "(--cancel)" in out
        assert re.search(r"\*\*Refused\*\*: rolling restart on kafka_sandbox: restart\.plan: ", out), out[-3000:]
        assert registrations(shared) == before, "no broker was touched"
        assert lock_holder(shared) is None, "the lock is not left behind"
        move("--cancel")

        # the first broker's start marks it started, then holds until the reassignment runs (Kafka's tool takes a few
        # seconds to start, and sets the throttle on every broker of the move, the restarted one too): the next gate
        # comes after it
        trigger, applied = tmp_path / "first-started", tmp_path / "reassignment-started"
        with_profile(monkeypatch, commands={"start-then-mark": f"kafka-service start && touch {trigger} && for i in "
                                            f"$(seq 900); do [ -e {applied} ] && break; sleep 0.1; done"})

        def start_moving() -> None:
            move("--execute", "--throttle", "1", path=later)
            applied.touch()

        before = starts(shared)
        with FaultAfterTrigger(trigger, start_moving, lambda: move("--cancel", path=later), hold_s=600) as started:
            result = run_dag(DAG_ID, {"cluster": "kafka_sandbox", "brokers": [first, second], "keep_order": True,
                                      "start_command": "start-then-mark", **FAST, "healthcheck_timeout_s": 20})
        assert started.began is not None, "the reassignment was started during the roll"
        assert result.state == "failed" and result.mapped_states() == ["success", "failed"], result.states
        out = output(capfd, caplog)
        assert f"waiting until broker {second} may be stopped" in out and f"(missing [{third}])" in out, out[-3000:]
        assert f"a partition reassignment started during the roll is in progress (1 partition: {topic}-0: adding " \
               f"[{third}], removing [{first}]): its new replicas stay out of sync until it ends" in out, out[-3000:]
        after = starts(shared)
        assert (after[first] - before[first], after[second] - before[second]) == (1, 0), (before, after)
    finally:
        for path in (plan, later):  # in case a step above failed while one was in progress
            shared.kafka_tool("kafka-reassign-partitions.sh", "--bootstrap-server", bootstrap,
                              "--reassignment-json-file", str(path), "--cancel")
        tool("kafka-topics.sh", "--bootstrap-server", bootstrap, "--delete", "--topic", topic)
    throttles = tool("kafka-configs.sh", "--bootstrap-server", bootstrap, "--describe", "--entity-type", "brokers")
    assert "replication.throttled.rate" not in throttles, "the cancel removed the throttles it set"
    wait_for(lambda: not snapshot(admin(bootstrap)).under_replicated, 60, what="the cluster without URPs again")


def test_param_schema_rejects_malformed_values(shared):
    from airflow.sdk.exceptions import ParamValidationError

    with pytest.raises(ParamValidationError):
        run_dag(DAG_ID, {"cluster": "kafka_sandbox", "brokers": "all"})


def test_params_reach_the_code_exactly_as_typed(shared, monkeypatch, tmp_path, capfd, caplog):
    """A string that parses as a Python literal stays a string (no native rendering of params)."""
    marker = tmp_path / "typed"
    with_profile(monkeypatch, commands={"0": f"echo zero >> {marker}", "None": f"echo none >> {marker}"})
    result = run_dag(DAG_ID, {"cluster": "kafka_sandbox", "brokers": [0], "pre_stop": "0", "pre_start": "None",
                              **FAST})
    assert result.state == "success", result.states
    assert marker.read_text().split() == ["zero", "none"], "'0' and 'None' were taken as command names"


def test_fatal_misconfiguration_fails_at_once_not_at_the_timeout(shared, monkeypatch, capfd, caplog):
    with_profile(monkeypatch, burrow_cluster="some-other-cluster")
    before = registrations(shared)
    started = time.monotonic()
    result = run_dag(DAG_ID, {"cluster": "kafka_sandbox", "healthcheck_interval_s": 5, "healthcheck_timeout_s": 600})
    took = time.monotonic() - started
    assert result.state == "failed"
    assert result.state_of("restart.plan") == "failed"
    assert "no Kafka cluster named 'some-other-cluster'" in output(capfd, caplog)
    assert took < 120, f"a misconfiguration failed after {took:.0f} s, not at once"
    assert registrations(shared) == before


def test_lock_held_by_another_operation_fails_fast(shared, capfd, caplog):
    with shared.zk() as zk:
        zk.create(LOCK, json.dumps({"holder": "kafka_decommission/manual__other", "since_ms": 0,
                                    "operation": "decommission"}).encode(), makepath=True)
    try:
        before = registrations(shared)
        result = run_dag(DAG_ID, {"cluster": "kafka_sandbox", "lock_wait": "fail", **FAST})
        assert result.state == "failed"
        assert result.state_of("check_and_lock") == "failed"
        assert "kafka_decommission/manual__other" in output(capfd, caplog)
        assert registrations(shared) == before
        assert lock_holder(shared) == "kafka_decommission/manual__other", "never releases another run's lock"
    finally:
        with shared.zk() as zk:
            zk.delete(LOCK)


def test_lag_gate_waits_then_fails_naming_the_group(fresh_sandbox, use_sandbox, capfd, caplog):
    sandbox = fresh_sandbox()
    use_sandbox(sandbox.workdir)
    stalled = sandbox.cli("lag", "orders-service", "--stall-seconds", "300")
    assert stalled.returncode == 0, stalled.stderr
    wait_for(lambda: sandbox.group_status("orders-service") in ("WARN", "ERR", "STOP", "STALL"), 90,
             what="Burrow to rate the stalled group")
    before = registrations(sandbox)
    result = run_dag(DAG_ID, {"cluster": "kafka_sandbox", "healthcheck_interval_s": 2,
                              "healthcheck_timeout_s": 20, "lag_ok_consecutive": 1})
    assert result.state == "failed"
    states = result.mapped_states()
    assert states[0] == "failed" and set(states[1:]) == {"failed"}, states
    out = output(capfd, caplog)
    assert "broker" in out and "may not be stopped yet" in out
    assert "group orders-service: ERR" in out or "group orders-service: WARN" in out
    assert "gave up after 20 s" in out
    assert "NOT touched" in out, "the next broker says why it was not touched"
    # the run's summary (run_outcome): the first task that failed, with its reason, and the advice for a failure
    assert re.search(r"\*\*Failed\*\*: rolling restart on kafka_sandbox: restart\.broker\[0\] \(broker \d+ "
                     r"\(1/3\)\): [^\n]*gave up after 20 s", out), out[-3000:]
    assert "also failed: restart.broker[1]" in out and "next: fix the cause" in out
    assert registrations(sandbox) == before, "no broker was touched"
    assert result.state_of("run_outcome") == "failed", "the teardown that makes the run fail"
    # the failing broker task released the lock as the roll stopped; the teardown found it released
    assert lock_holder(sandbox) is None
    assert "cluster lock not held by this run at its end (never taken, or released by the task that failed)" in out, \
        out[-3000:]


@pytest.mark.extended
def test_a_burrow_that_stops_answering_mid_roll_holds_no_wait_past_its_time(fresh_sandbox, use_sandbox, capfd,
                                                                            caplog):
    """Burrow frozen (SIGSTOP: it accepts connections and answers nothing) once the first broker's stop is sent: that
    broker's waits to see it back poll Burrow on the side, each poll cut short (a few seconds, not the hook's
    ~43 s of retries); the second broker's gate cannot see the groups OK and fails at its timeout, its last poll cut
    to the time left, naming the silence; the second broker is not touched."""
    import os
    import signal

    sandbox = fresh_sandbox()
    use_sandbox(sandbox.workdir)
    first, second = _first_two(sandbox)
    burrow = _pid(sandbox, "burrow")
    before = registrations(sandbox)
    timeout_s = 30
    # thawed when the run ends (the text never shows)
    with ThawOnceLogged(capfd, caplog, "never logged", lambda: os.kill(burrow, signal.SIGCONT), 600,
                        freeze=(f"running broker {first} (", lambda: os.kill(burrow, signal.SIGSTOP))) as thawing:
        result = run_dag(DAG_ID, {"cluster": "kafka_sandbox", "brokers": [first, second], "consumer_groups": [],
                                  "healthcheck_interval_s": 2, "healthcheck_timeout_s": timeout_s,
                                  "lag_ok_consecutive": 2})
    assert thawing.frozen_at is not None, "Burrow was frozen once the first broker's stop was sent"
    out = thawing.output + output(capfd, caplog)
    assert result.state == "failed" and result.mapped_states() == ["success", "failed"], result.states
    after = registrations(sandbox)
    assert after[first] > before[first] and after[second] == before[second], "the first restarted, the second not"
    first_task = next(ti for ti in result.task_instances if ti.task_id == "restart.broker" and ti.map_index == 0)
    took = (first_task.end_date - first_task.start_date).total_seconds()
    assert took < 60, f"the first broker's task took {took:.0f} s: its side polls of a silent Burrow held its waits"
    gave_up = re.search(rf"gave up after {timeout_s} s \(\d+ checks\) waiting until broker {second} may be "
                        rf"stopped: could not check: (?:ReadTimeout|Timeout|ConnectTimeout|ConnectionError)[^\n]*", out)
    assert gave_up, out[-3000:]
    print(f"first broker's task {took:.1f} s; {gave_up[0]}")
    overrun = re.search(r"\[the wait took (\d+) s", gave_up[0])
    assert overrun is None or int(overrun[1]) <= timeout_s + 5, gave_up[0]
    assert lock_holder(sandbox) is None


def test_a_broker_down_at_plan_time_is_refused_not_dropped(fresh_sandbox, use_sandbox, capfd, caplog):
    sandbox = fresh_sandbox()
    use_sandbox(sandbox.workdir)
    rc, _, err = sandbox.ssh(1, "kafka-service stop")
    assert rc == 0, err
    wait_for(lambda: 1 not in registrations(sandbox), 60, what="broker 1 to leave ZooKeeper")
    before = registrations(sandbox)
    every = run_dag(DAG_ID, {"cluster": "kafka_sandbox", **FAST})
    assert every.state == "failed" and every.state_of("restart.plan") == "failed"
    assert "brokers [1] are down" in output(capfd, caplog)
    named = run_dag(DAG_ID, {"cluster": "kafka_sandbox", "brokers": [2, 1], **FAST})
    assert named.state == "failed" and named.state_of("restart.plan") == "failed"
    assert "broker 1 is down (it holds replicas but is not registered): start it first" in output(capfd, caplog)
    assert registrations(sandbox) == before, "nothing was touched"
    assert lock_holder(sandbox) is None
    rc, _, err = sandbox.ssh(1, "kafka-service start")
    assert rc == 0, err


@pytest.mark.extended
def test_a_burrow_watching_another_cluster_is_refused(shared, fresh_sandbox, monkeypatch, capfd, caplog):
    """The lag gate would otherwise accept answers about another cluster that has the same Burrow cluster name."""
    from airflow_env import connection_env

    other = fresh_sandbox()  # its own Burrow, with a cluster of the same name
    monkeypatch.setenv("AIRFLOW_CONN_OTHER_BURROW", connection_env(other.workdir)["AIRFLOW_CONN_SANDBOX_BURROW"])
    with_profile(monkeypatch, burrow_conn_id="other_burrow")
    before = registrations(shared)
    result = run_dag(DAG_ID, {"cluster": "kafka_sandbox", **FAST})
    assert result.state == "failed" and result.state_of("restart.plan") == "failed"
    out = output(capfd, caplog)
    assert "none of which is on a broker host of cluster 'kafka_sandbox'" in out, out[-3000:]
    assert registrations(shared) == before


def _resume_profile(monkeypatch, flag: Path, second: int) -> None:
    # fails on the second broker's pre-start while the flag exists: that broker is left stopped
    with_profile(monkeypatch, commands={"block-second": f'test "$KAFKA_BROKER_ID" != {second} || test ! -e {flag}'})


def _first_two(sandbox) -> tuple[int, int]:
    result = run_dag(DAG_ID, {"cluster": "kafka_sandbox", "dry_run": True, **FAST})
    assert result.state == "success", result.states
    order = brokers_in_order(result)
    return order[0], order[1]


def _fail_at_second_broker(sandbox, monkeypatch, tmp_path):
    """A run that restarts the first broker and fails at the second one's pre-start (left stopped) while a
    flag file exists; returns (first, second, flag, the failed run)."""
    first, second = _first_two(sandbox)
    flag = tmp_path / "block-pre-start"
    flag.touch()
    _resume_profile(monkeypatch, flag, second)
    failed = run_dag(DAG_ID, {"cluster": "kafka_sandbox", "pre_start": "block-second", **FAST})
    assert failed.state == "failed"
    return first, second, flag, failed


# Extended: CI covers the kind (a failure leaves a broker stopped, clearing the failed tasks resumes there and
# restarts no finished broker again) in the migration's phase-3 resume (tests/dags/test_kafka_zk_to_kraft.py: the
# same broker roll task group), and this DAG's run marked failed mid-roll then cleared in the UI
# (tests/ui/test_airflow_ui.py: each broker restarted once over both attempts).
@pytest.mark.extended
@pytest.mark.parametrize("clear", ["whole run", "only failed"])
def test_cleared_run_resumes_without_restarting_finished_brokers(fresh_sandbox, use_sandbox, monkeypatch, tmp_path,
                                                                   clear):
    sandbox = fresh_sandbox()
    use_sandbox(sandbox.workdir)
    before = registrations(sandbox)
    first, second, flag, failed = _fail_at_second_broker(sandbox, monkeypatch, tmp_path)
    assert failed.mapped_states()[:2] == ["success", "failed"], failed.states
    after_failure = registrations(sandbox)
    assert after_failure[first] > before[first], "the first broker was restarted"
    assert second not in after_failure, "the second broker was stopped and left down"
    assert lock_holder(sandbox) is None, "the teardown released the lock after the failure"

    flag.unlink()
    resumed = clear_and_resume(DAG_ID, failed.run_id, only_failed=clear == "only failed")
    after = registrations(sandbox)
    assert resumed.state == "success", resumed.states
    assert after[first] == after_failure[first], "the finished broker was not restarted twice"
    assert all(after[b] > before[b] for b in before), "the others were restarted"
    assert lock_holder(sandbox) is None, "the lock is released at the end"


@pytest.mark.extended
def test_resumed_run_fails_when_another_run_took_the_lock(fresh_sandbox, use_sandbox, monkeypatch, tmp_path,
                                                          capfd, caplog):
    """Clearing only the failed tasks does not re-run check_and_lock: the broker step itself checks the lock."""
    sandbox = fresh_sandbox()
    use_sandbox(sandbox.workdir)
    first, second, flag, failed = _fail_at_second_broker(sandbox, monkeypatch, tmp_path)
    down = registrations(sandbox)
    assert second not in down
    with sandbox.zk() as zk:  # meanwhile another operation takes the cluster
        zk.create(LOCK, json.dumps({"holder": "kafka_upgrade/manual__other", "since_ms": 0,
                                    "operation": "upgrade"}).encode(), makepath=True)
    flag.unlink()
    try:
        resumed = clear_and_resume(DAG_ID, failed.run_id, only_failed=True)
        assert resumed.state == "failed"
        assert resumed.state_of("check_and_lock") == "success", "the lock task was not cleared"
        assert resumed.mapped_states()[1] == "failed"
        assert "kafka_upgrade/manual__other" in output(capfd, caplog)
        assert registrations(sandbox) == down, "nothing was started or stopped without the lock"
        assert lock_holder(sandbox) == "kafka_upgrade/manual__other"
    finally:
        with sandbox.zk() as zk:
            zk.delete(LOCK)


@pytest.mark.extended
def test_a_run_only_skips_what_it_did_itself(fresh_sandbox, use_sandbox, monkeypatch, tmp_path):
    """An old failed run cleared after another run restarted every broker restarts them itself (its record
    says it never did), instead of reporting restarts it did not do."""
    sandbox = fresh_sandbox()
    use_sandbox(sandbox.workdir)
    first, _ = _first_two(sandbox)
    flag = tmp_path / "block-pre-stop"
    flag.touch()
    _resume_profile(monkeypatch, flag, first)  # the first broker's pre-stop fails: nothing stopped
    conf = {"cluster": "kafka_sandbox", "pre_stop": "block-second", **FAST}
    failed = run_dag(DAG_ID, conf)
    assert failed.state == "failed" and failed.mapped_states()[0] == "failed"
    flag.unlink()
    other = run_dag(DAG_ID, {"cluster": "kafka_sandbox", **FAST})  # another run restarts every broker
    assert other.state == "success", other.states
    before = registrations(sandbox)
    resumed = clear_and_resume(DAG_ID, failed.run_id, only_failed=True)
    assert resumed.state == "success", resumed.states
    after = registrations(sandbox)
    assert all(after[b] > before[b] for b in before), "the old run restarted every broker itself"


def _pid(sandbox, name: str) -> int:
    from sandbox.layout import Workdir
    from sandbox.state import running_processes

    return running_processes(Workdir(Path(sandbox.workdir)))[name]


class ZooKeeperOutage:
    """A TCP proxy between kafka-ops and ZooKeeper (the brokers keep their own direct sessions) that goes dark
    for ``seconds`` once ``trigger`` exists: new connections are refused and open ones cut, as a network
    partition between Airflow and ZooKeeper would. ``address`` is its ``host:port``."""

    def __init__(self, target: str, trigger: Path, seconds: float) -> None:
        import socket
        import threading

        self.target = target.split("/")[0]
        self.trigger, self.seconds = trigger, seconds
        self.server = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.server.getsockname()[1]}"
        self.dark_until = 0.0
        self.went_dark_at: float | None = None
        self.conns: list = []
        self.stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def dark(self) -> bool:
        if self.went_dark_at is None and self.trigger.exists():
            self.went_dark_at = time.monotonic()
            self.dark_until = self.went_dark_at + self.seconds
            for conn in self.conns:
                conn.close()
        return time.monotonic() < self.dark_until

    def _accept(self) -> None:
        import socket
        import threading

        self.server.settimeout(0.2)
        while not self.stop.is_set():
            self.dark()
            try:
                client, _ = self.server.accept()
            except (TimeoutError, OSError):
                continue
            if self.dark():
                client.close()
                continue
            host, port = self.target.rsplit(":", 1)
            upstream = socket.create_connection((host, int(port)))
            self.conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source, sink) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.close()
                except OSError:
                    pass

    def close(self) -> None:
        self.stop.set()
        self.server.close()


@pytest.mark.extended
def test_zookeeper_unreachable_right_after_a_stop_is_ridden_out(fresh_sandbox, use_sandbox, monkeypatch, tmp_path,
                                                                 capfd, caplog):
    """ZooKeeper unreachable from Airflow for 20 s (twice the lock hook's connect timeout) as the first broker
    stops: the start waits it out (ZooKeeper must answer before a broker starts; the cause logged), the broker
    comes back, the run succeeds and releases its lock."""
    sandbox = fresh_sandbox()
    use_sandbox(sandbox.workdir)
    trigger = tmp_path / "stopped"
    outage = ZooKeeperOutage(sandbox.zookeeper_connect, trigger, seconds=20)
    chroot = sandbox.zookeeper_connect.partition("/")[2]
    with_profile(monkeypatch, zookeeper=outage.address + (f"/{chroot}" if chroot else ""),
                 commands={"stop-then-cut-zookeeper": f"kafka-service stop && touch {trigger}"})
    before = registrations(sandbox)
    try:
        result = run_dag(DAG_ID, {"cluster": "kafka_sandbox", "brokers": [0],
                                  "stop_command": "stop-then-cut-zookeeper", **FAST})
    finally:
        outage.close()
    assert outage.went_dark_at is not None, "the outage happened"
    assert result.state == "success", result.states
    assert time.monotonic() - outage.went_dark_at >= 20, "the run did not end before ZooKeeper came back"
    assert registrations(sandbox)[0] > before[0], "broker 0 was restarted"
    assert lock_holder(sandbox) is None, "the lock was released"
    out = output(capfd, caplog)
    # the start waits until ZooKeeper answers the run (the lock check right before it then passes at once)
    assert f"not starting broker 0 yet: ZooKeeper {outage.address}" in out, "the outage was logged"


@pytest.mark.parametrize("after", ["stop", "detached start"])
@pytest.mark.extended
def test_zookeeper_frozen_40_s_right_after_a_stop_or_start_is_ridden_out(fresh_sandbox, use_sandbox, monkeypatch,
                                                                         tmp_path, after, capfd, caplog):
    """ZooKeeper itself frozen (SIGSTOP) for 40 s right after the first broker stopped, or right after its start
    was sent by a start command that returns at once (like ``systemctl start``): the brokers lose their sessions,
    a broker starting then cannot register (Kafka exits after ``zookeeper.connection.timeout.ms``). The run does
    not start it while ZooKeeper does not answer, starts it again once it does if it exited, and the roll ends:
    every broker rolled (all after a stop; one after a detached start) started exactly once more than before (a
    start that exited without registering logs no "started"), nothing offline outside the outage, no acknowledged
    message lost, the lock released."""
    sandbox = fresh_sandbox()
    use_sandbox(sandbox.workdir)
    trigger = tmp_path / "marked"
    commands = {"stop-then-mark": f"kafka-service stop && touch {trigger}",
                "start-detached-then-mark": f"setsid nohup kafka-service start >/dev/null 2>&1 & touch {trigger}"}
    with_profile(monkeypatch, commands=commands)
    # after a stop: the whole roll; after a detached start: one broker (the exit and the start again are the point)
    choice = ({"stop_command": "stop-then-mark"} if after == "stop"
              else {"start_command": "start-detached-then-mark", "brokers": [sandbox.broker_ids[0]]})
    before = starts(sandbox)
    rolled = choice.get("brokers") or sandbox.broker_ids
    began = time.monotonic()
    with watched_traffic(sandbox.workdir, sandbox.bootstrap_servers, sandbox.broker_ids) as traffic, \
            MetadataWatcher(sandbox.bootstrap_servers, interval_s=0.5,
                            zookeeper=sandbox.zookeeper_connect) as watcher, \
            FaultAfterTrigger(trigger, lambda: _cli_ok(sandbox, "freeze", "zookeeper"),
                              lambda: _cli_ok(sandbox, "thaw", "zookeeper"), hold_s=40) as fault:
        result = run_dag(DAG_ID, {"cluster": "kafka_sandbox", **choice, "healthcheck_interval_s": 1,
                                  "healthcheck_timeout_s": 240, "lag_ok_consecutive": 2})
    took = time.monotonic() - began
    print(f"roll with ZooKeeper frozen {fault.held_s} s right after a {after}: {took:.1f} s; {traffic.summary()}")
    assert fault.held_s is not None and fault.held_s >= 39, "ZooKeeper was frozen 40 s during the run"
    assert result.state == "success", result.states
    now = starts(sandbox)
    assert {b: now[b] - before[b] for b in before} == {b: int(b in rolled) for b in before}, \
        "each broker rolled started exactly once, the others not at all"
    assert_no_acknowledged_message_lost(traffic)
    # When ZooKeeper resumes it expires the sessions it could not hear (6 s timeout): every broker is dead to the
    # controller until it registers again, so a partition whose other replica is the broker the run holds down
    # is leaderless for a moment. That is the outage, not the run: nothing may be offline outside it.
    outside = [(at, views) for at, views in watcher.ever_offline() if not fault.began <= at <= fault.ended + 20]
    assert outside == [], "no partition offline outside the outage and the re-registrations after it"
    out = output(capfd, caplog)
    assert "answers before starting broker" in out, "the start waited for ZooKeeper"
    if after == "stop":
        assert "not starting broker" in out or "starting again once it answers" in out, "the start was held"
    else:
        assert "exited after its start while ZooKeeper" in out, "the exit was seen and blamed on the outage"
        assert "started again" in out
    assert lock_holder(sandbox) is None, "the lock was released"


def test_zookeeper_that_does_not_answer_holds_the_gate_until_it_answers_again(fresh_sandbox, use_sandbox, monkeypatch,
                                                                            capfd, caplog):
    """ZooKeeper frozen (SIGSTOP) mid-roll, while the first broker soaks: nothing can change the metadata, which keeps
    calling the cluster healthy, and every broker answers; but a broker stopped now could not register again (Kafka
    exits after ``zookeeper.connection.timeout.ms``) and no controller could move its leaders. The second broker's
    gate holds, naming ZooKeeper, and that broker is stopped only after ZooKeeper answers again (thawed once the gate
    named it, inside the brokers' 30 s sessions); the roll then ends as usual, each broker restarted exactly once.
    The lock lives in the cluster here: a lock in ZooKeeper holds the roll at its lock check already, and before the
    lock is taken an outage holds the run anyway (in ZooKeeper mode both lock stores need ZooKeeper)."""
    sandbox = fresh_sandbox(broker_config={"zookeeper.session.timeout.ms": "30000"})
    use_sandbox(sandbox.workdir)
    sandbox.wait_healthy(timeout_s=60)
    with_profile(monkeypatch, lock_store="kafka")
    rolled = [b for b in sandbox.broker_ids if b != controller(sandbox)][:2]
    named = "a node stopped now could not register when started again"
    before = starts(sandbox)
    with ThawOnceLogged(capfd, caplog, named, lambda: _cli_ok(sandbox, "thaw", "zookeeper"), 20, settle_s=1,
                        freeze=("soaking", lambda: _cli_ok(sandbox, "freeze", "zookeeper"))) as thawing:
        result = run_dag(DAG_ID, {"cluster": "kafka_sandbox", "brokers": rolled, "soak_s": 2,
                                  "consumer_groups": None, **FAST})
    out = thawing.output + output(capfd, caplog)
    assert result.state == "success", result.states
    second = brokers_in_order(result)[1]
    assert thawing.frozen_at is not None and thawing.thawed_at is not None, "ZooKeeper was frozen and thawed"
    assert "registers-with (1): ZooKeeper" in out and named in out, "the gate named ZooKeeper"
    stopped_at = sandbox.shutdown_times(second)[-1]
    assert stopped_at > thawing.thawed_at, \
        f"broker {second} was stopped {thawing.thawed_at - stopped_at:.1f} s before ZooKeeper answered again"
    now = starts(sandbox)
    assert {b: now[b] - before[b] for b in before} == {b: int(b in rolled) for b in before}


def _cli_ok(sandbox, *args: str) -> None:
    done = sandbox.cli(*args)
    assert done.returncode == 0, done.stderr


@pytest.mark.extended
def test_burrow_down_during_a_gate_is_waited_out(fresh_sandbox, use_sandbox, capfd, caplog):
    """Burrow frozen (SIGSTOP) when the run starts: the plan's Burrow check fails past the hook's own retries
    (~45 s of read timeouts), the wait logs it and tries again; Burrow is thawed once that was logged, and
    the run goes on and succeeds."""
    sandbox = fresh_sandbox()
    use_sandbox(sandbox.workdir)
    import os
    import signal

    burrow = _pid(sandbox, "burrow")
    os.kill(burrow, signal.SIGSTOP)
    before = registrations(sandbox)
    with ThawOnceLogged(capfd, caplog, "trying again", lambda: os.kill(burrow, signal.SIGCONT), 240) as thawing:
        result = run_dag(DAG_ID, {"cluster": "kafka_sandbox", "brokers": [0], "consumer_groups": [],
                                  "healthcheck_interval_s": 2, "healthcheck_timeout_s": 180, "lag_ok_consecutive": 1})
    assert result.state == "success", result.states
    assert registrations(sandbox)[0] > before[0]
    out = thawing.output + output(capfd, caplog)
    assert "could not check" in out and "trying again" in out, "Burrow's outage was logged and waited out"


@pytest.mark.extended
def test_a_broker_stopped_by_someone_else_fails_its_gate(fresh_sandbox, use_sandbox, capfd, caplog):
    """While the first broker soaks, someone stops the second one (a controlled shutdown by hand): its task
    refuses to touch it, naming why, instead of "starting" a broker this run never stopped."""
    import threading

    sandbox = fresh_sandbox()
    use_sandbox(sandbox.workdir)
    first, second = _first_two(sandbox)
    before = registrations(sandbox)
    stopped: list[int] = []

    def stop_second_once_first_is_back() -> None:
        wait_for(lambda: registrations(sandbox).get(first, 0) > before[first], 300, what="the first restart")
        sandbox.wait_healthy(timeout_s=120)
        rc, _, err = sandbox.ssh(second, "kafka-service stop")
        stopped.append(rc)

    meddler = threading.Thread(target=stop_second_once_first_is_back, daemon=True)
    meddler.start()
    result = run_dag(DAG_ID, {"cluster": "kafka_sandbox", "brokers": [first, second], "soak_s": 20, **FAST})
    meddler.join(timeout=60)
    assert stopped == [0], "the second broker was stopped behind the run's back during the first one's soak"
    assert result.state == "failed"
    assert result.mapped_states() == ["success", "failed"], result.states
    out = output(capfd, caplog)
    assert f"broker {second} is down and roll 'restart' did not stop it: a crash or another operation" in out
    assert f"running broker {second} (" not in out, "no command was sent to the broker the run did not stop"
    assert lock_holder(sandbox) is None
    rc, _, err = sandbox.ssh(second, "kafka-service start")
    assert rc == 0, err


@pytest.mark.extended
def test_controller_crash_during_a_gate_is_waited_for_and_named(fresh_sandbox, use_sandbox, capfd, caplog):
    """The controller dies as a roll of another broker begins: the gate keeps polling through the errors and
    the URP, and at its timeout names the under-replicated partitions (not a raw traceback)."""
    sandbox = fresh_sandbox()
    use_sandbox(sandbox.workdir)
    victim = controller(sandbox)
    target = next(b for b in sorted(registrations(sandbox)) if b != victim)
    crashed = sandbox.cli("crash-broker", str(victim))
    assert crashed.returncode == 0, crashed.stderr
    started = time.monotonic()
    result = run_dag(DAG_ID, {"cluster": "kafka_sandbox", "brokers": [target], "consumer_groups": None,
                              "healthcheck_interval_s": 2, "healthcheck_timeout_s": 15})
    took = time.monotonic() - started
    assert result.state == "failed" and result.mapped_states() == ["failed"], result.states
    out = output(capfd, caplog)
    assert f"broker {target} may not be stopped yet" in out
    assert "under-replicated" in out and "gave up after 15 s" in out
    assert took >= 15, "it waited, it did not fail at the first error"
    assert registrations(sandbox).get(target), "the target broker was not touched"
    rc, _, err = sandbox.ssh(victim, "kafka-service start")
    assert rc == 0, err


@pytest.mark.extended
def test_batched_roll_by_rack_keeps_min_isr_and_restarts_each_broker_once(fresh_sandbox, use_sandbox, capfd, caplog):
    """max_parallel + batch_by=rack on 6 brokers in 3 racks (RF 3, min.insync.replicas 2): brokers of one
    rack go down together, never one batch across racks, one batch per rack; the controller goes last in its
    rack's batch, stopped once its batch-mates have shut down (their JVMs launched again while it shuts down), and
    moves once; an independent watcher sees no
    offline partition and none under min ISR; each broker is started exactly once; a batch's brokers get their
    preferred leaderships back in one election, and no broker ends over the leader imbalance threshold."""
    from hooks.kafka_admin import KafkaAdminHook
    from kafka_ops import health

    from sandbox import node_log, restart_timeline, settings
    from sandbox.layout import Workdir

    sandbox = fresh_sandbox(brokers=6, racks=3)
    use_sandbox(sandbox.workdir)
    sandbox.wait_healthy(timeout_s=120)
    racks = {b: sandbox.broker(b)["rack"] for b in sandbox.broker_ids}
    first_controller = controller(sandbox)
    epoch_before = controller_epoch(sandbox)
    started_before = starts(sandbox)
    since = time.time()
    with watched_traffic(sandbox.workdir, sandbox.bootstrap_servers, sandbox.broker_ids) as traffic, \
            MetadataWatcher(sandbox.bootstrap_servers, interval_s=0.25, zookeeper=sandbox.zookeeper_connect) as watcher:
        result = run_dag(DAG_ID, {"cluster": "kafka_sandbox", "max_parallel": 6, "batch_by": "rack", **FAST})
    print(traffic.summary())
    assert_no_acknowledged_message_lost(traffic)
    assert result.state == "success", result.states
    now = starts(sandbox)
    assert {b: now[b] - started_before[b] for b in racks} == {b: 1 for b in racks}, "each broker started once"
    labels = result.mapped_labels()
    batches = batches_of(labels)
    assert sorted(b for batch in batches for b in batch) == sorted(racks), labels
    assert all(len({racks[b] for b in batch}) == 1 for batch in batches), f"a batch mixed racks: {labels}"
    assert len(batches) == len(set(racks.values())), f"one batch per rack: {labels}"
    last = batches[-1]
    assert last[-1] == first_controller and len(last) >= 2, f"the controller goes last in its rack's batch: {labels}"
    assert controller_epoch(sandbox) == epoch_before + 1, "the controller moved once"
    shutdowns = restart_timeline.restarts_of(restart_timeline.read_logs(Workdir.at(sandbox.workdir), last), since)
    ended = {r.broker: r.shut_down for r in shutdowns}
    began = {r.broker: r.shutdown_begun for r in shutdowns}
    assert set(ended) == set(last), shutdowns
    assert all(ended[b] is not None and ended[b] <= began[first_controller] for b in last[:-1]), \
        f"the controller began its shutdown after its batch-mates had shut down: {shutdowns}"
    launched = {r.broker: r.launched for r in shutdowns}
    assert all(launched[b] is not None and launched[b] < ended[first_controller] for b in last[:-1]), \
        f"the batch-mates were started while the controller shut down, not after it: {shutdowns}"
    assert labels == [f"{'broker' if len(b) == 1 else 'brokers'} {', '.join(map(str, b))} ({i + 1}/{len(batches)})"
                      for i, b in enumerate(batches)]
    assert watcher.ever_offline() == [], "no partition was ever offline\n" + watcher.explain_offline(sandbox)
    assert watcher.ever_under_min_isr(settings.MIN_INSYNC_REPLICAS) == [], "no partition went under min ISR"
    end = snapshot(admin(sandbox.bootstrap_servers))
    assert end.under_replicated == [] and end.offline == []
    out = output(capfd, caplog)
    assert (f"{', '.join(map(str, last))}: broker {first_controller} is the controller: it stops once the others "
            "are gone") in out
    mates = last[:-1]
    assert (f"stopping broker {first_controller} while starting {'broker' if len(mates) == 1 else 'brokers'} "
            f"{', '.join(map(str, mates))} (gone already)") in out
    with KafkaAdminHook("kafka_sandbox") as hook:
        state = hook.cluster_state(configs=True)
    assert health.leader_imbalance(state).ok, "every broker leads its partitions"
    # the new controller's automatic preferred election, 5 s after its failover, may have given a batch its
    # leaderships back before the roll's leadership step looked: the brokers preferred for the partitions it named
    preferred = {f"{p.topic}-{p.partition}": p.replicas[0] for p in state.partitions}
    new_controller = sandbox.host_dir(controller(sandbox)).server_log.read_text(errors="replace")
    kafka_led = {preferred[name] for _, names in node_log.automatic_elections(new_controller, began[first_controller])
                 for name in names if name in preferred}
    assert_one_election_per_batch(batches, out, kafka_led)


@pytest.mark.extended
def test_a_batch_failing_before_its_controller_stops_resumes_there(fresh_sandbox, use_sandbox, monkeypatch, tmp_path,
                                                                  capfd, caplog):
    """The controller's pre-stop fails once its batch-mates are gone (ZooKeeper mode, 6 brokers in 3 racks): the
    task fails naming the mates down and the controller untouched (still the controller); clearing the failed task
    stops the controller, starts the whole batch and finishes the roll: each broker started once over both attempts,
    one controller election, nothing offline or under min ISR seen from outside."""
    from sandbox import settings

    sandbox = fresh_sandbox(brokers=6, racks=3)
    use_sandbox(sandbox.workdir)
    sandbox.wait_healthy(timeout_s=120)
    ctrl = controller(sandbox)
    epoch_before = controller_epoch(sandbox)
    started_before = starts(sandbox)
    flag = tmp_path / "block-controller"
    flag.touch()
    with_profile(monkeypatch, commands={"block-controller": f'test "$KAFKA_BROKER_ID" != {ctrl} || test ! -e {flag}'})
    conf = {"cluster": "kafka_sandbox", "max_parallel": 6, "batch_by": "rack", "pre_stop": "block-controller", **FAST}
    with MetadataWatcher(sandbox.bootstrap_servers, interval_s=0.25, zookeeper=sandbox.zookeeper_connect) as watcher:
        failed = run_dag(DAG_ID, conf)
        assert failed.state == "failed", failed.states
        states = failed.mapped_states()
        assert states[:-1] == ["success"] * (len(states) - 1) and states[-1] == "failed", failed.states
        last = [int(x) for x in re.match(r"brokers ([\d, ]+) \(", failed.mapped_labels()[-1]).group(1).split(", ")]
        mates = last[:-1]
        assert last[-1] == ctrl and mates, failed.mapped_labels()
        live = registrations(sandbox)
        assert all(b not in live for b in mates) and ctrl in live, f"mates down, the controller up: {sorted(live)}"
        assert controller(sandbox) == ctrl and controller_epoch(sandbox) == epoch_before, "the controller stayed"
        out = output(capfd, caplog)
        for mate in mates:
            assert f"broker {mate} is DOWN; this roll's record: stopped" in out, out[-3000:]
        assert f"broker {ctrl} not stopped by this roll; clearing this task resumes it from there" in out, out[-3000:]

        flag.unlink()
        resumed = clear_and_resume(DAG_ID, failed.run_id, only_failed=True)
    assert resumed.state == "success", resumed.states
    now = starts(sandbox)
    assert {b: now[b] - started_before[b] for b in now} == {b: 1 for b in now}, "each broker started once"
    assert controller_epoch(sandbox) == epoch_before + 1, "the controller moved once"
    assert watcher.ever_offline() == [], "no partition was ever offline\n" + watcher.explain_offline(sandbox)
    assert watcher.ever_under_min_isr(settings.MIN_INSYNC_REPLICAS) == [], "no partition went under min ISR"
    assert lock_holder(sandbox) is None


def test_a_gate_waiting_only_on_a_leader_imbalance_elects_the_preferred_leaders(fresh_sandbox, use_sandbox, capfd,
                                                                                  caplog):
    """A leader imbalance on a broker outside the roll is no safety problem: the gate elects the preferred leaders
    of the partitions that need it and goes on at once, instead of waiting up to 300 s for Kafka's own rebalance
    (or forever with auto.leader.rebalance.enable=false). With fix_leader_imbalance off it waits, and at its
    timeout names the imbalance."""
    from hooks.kafka_admin import KafkaAdminHook

    sandbox = fresh_sandbox()
    use_sandbox(sandbox.workdir)
    imbalanced, target = 1, 2
    reordered = make_leader_imbalance(sandbox, imbalanced, leave_alone=(target,))
    conf = {"cluster": "kafka_sandbox", "brokers": [target], "consumer_groups": None, "healthcheck_interval_s": 2}
    before = starts(sandbox)

    waited = run_dag(DAG_ID, {**conf, "fix_leader_imbalance": False, "healthcheck_timeout_s": 15})
    out = output(capfd, caplog)
    assert waited.state == "failed" and waited.mapped_states() == ["failed"], waited.states
    assert "gave up after 15 s" in out and f"broker {imbalanced}: leader imbalance" in out
    assert "elected the preferred leaders" not in out
    assert starts(sandbox) == before, "nothing was restarted"

    dry = run_dag(DAG_ID, {**conf, "dry_run": True})
    out = output(capfd, caplog)
    assert dry.state == "success", dry.states
    assert re.search(rf"DRY RUN: broker {target} may be stopped now: .*a real run elects the preferred leaders of "
                     rf"\d+ partitions first \(.*broker {imbalanced}: leader imbalance", out), out[-3000:]
    assert "elected the preferred leaders" not in out
    assert starts(sandbox) == before, "the dry run restarted nothing"

    fixed = run_dag(DAG_ID, {**conf, "healthcheck_timeout_s": 120})
    out = output(capfd, caplog)
    assert fixed.state == "success", fixed.states
    assert f"gate broker {target}: leader imbalance: elected the preferred leaders of" in out
    with KafkaAdminHook("kafka_sandbox") as hook:
        leaders = {(p.topic, p.partition): p.leader for p in hook.cluster_state(configs=False).partitions}
    assert all(leaders[tp] == imbalanced for tp in reordered), {tp: leaders[tp] for tp in reordered}
    after = starts(sandbox)
    assert {b: after[b] - before[b] for b in after} == {b: int(b == target) for b in after}, (before, after)


def test_a_hung_broker_holds_the_gate_until_it_answers_again(fresh_sandbox, use_sandbox, capfd, caplog):
    """A broker hung (SIGSTOP: a long GC pause or a frozen VM from outside) stays registered and in every ISR until
    its ZooKeeper session expires or the leaders drop it (here both 60 s, as long as a slow production cluster
    takes): the metadata calls the cluster healthy. The gate of another broker holds, naming it, and the broker is
    stopped only after the hung one answers again (it is thawed once the gate named it); the roll then ends as
    usual, that broker restarted exactly once."""
    sandbox = fresh_sandbox(broker_config={"zookeeper.session.timeout.ms": "60000", "replica.lag.time.max.ms": "60000"})
    use_sandbox(sandbox.workdir)
    sandbox.wait_healthy(timeout_s=60)
    active = controller(sandbox)
    hung, rolled = [b for b in sandbox.broker_ids if b != active][:2]  # the controller answers the DescribeCluster
    named = f"broker {hung} does not answer (no answer within 5.0 s): it is still in the metadata"
    before = starts(sandbox)
    done = sandbox.cli("freeze", str(hung))
    assert done.returncode == 0, done.stderr
    # thawed 3 s after the gate named it (a few more looks held), at the latest 50 s on: inside the 60 s session
    with ThawOnceLogged(capfd, caplog, named, lambda: sandbox.cli("thaw", str(hung)), 50, settle_s=3) as thawing:
        result = run_dag(DAG_ID, {"cluster": "kafka_sandbox", "brokers": [rolled], **FAST})
    out = thawing.output + output(capfd, caplog)
    assert result.state == "success", result.states
    assert named in out, "the gate named the hung broker"
    stopped_at = sandbox.shutdown_times(rolled)[-1]
    assert thawing.thawed_at is not None and stopped_at > thawing.thawed_at, \
        f"broker {rolled} was stopped {thawing.thawed_at - stopped_at:.1f} s before broker {hung} answered again"
    now = starts(sandbox)
    assert {b: now[b] - before[b] for b in before} == {b: int(b == rolled) for b in before}
