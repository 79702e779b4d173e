"""Decommission (the scale-out runs the same waves) under faults, on sandboxes of their own, each judged from
outside: an independent metadata watcher, acks=all traffic whose acknowledged messages must all be read back,
throttle configs read back through the clients, ZooKeeper registrations and the lock znode.

- a broker that receives moves, or the controller (ZooKeeper mode; the quorum leader on KRaft), SIGKILLed
  mid-wave and started again 10 s later: the waves wait it out and finish; the drained broker is stopped, no
  throttle left, the lock released;
- the wave's task dying mid-wave (its process gone: the moves keep running in Kafka, the task fails without
  cancelling them) and the run cleared: the wave finds its moves again and starts none twice;
- a topic created mid-run with a replica on the drained broker: the stop refuses it (the broker still holds a
  replica), nothing stopped; the topic deleted and the stop failing over SSH: the run fails naming it; fixed and
  cleared: the broker is stopped;
- topics deleted, and a partition moved by hand, between the plan and its wave or while it copies: the wave leaves
  them alone (named), moves the rest and leaves no throttle; the hand move is not undone.
"""

from __future__ import annotations

import json
import os
import re
import time

import pytest
from airflow_env import clear_and_resume, run_dag, xcom_value
from confluent_kafka.admin import NewTopic
from kafka import KafkaAdminClient
from observers import MetadataWatcher, admin, assert_no_acknowledged_message_lost, snapshot, wait_for
from test_kafka_reassignment_dags import registered, throttles_left, with_profile
from timed_faults import FaultAfterTrigger

from sandbox.traffic_watch import watched_traffic

pytestmark = [pytest.mark.sandbox, pytest.mark.destructive]

FAST = {"healthcheck_interval_s": 1, "healthcheck_timeout_s": 180, "verify_interval_s": 1, "verify_timeout_s": 300}
THROTTLE = {"throttle_bytes_per_s": 400_000}  # waves of tens of seconds: room for a fault in the middle
LOCK = "/kafka-ops/operation-lock"


def controller(sandbox) -> int:
    with sandbox.zk() as zk:
        return int(json.loads(zk.get("/controller")[0])["brokerid"])


def lock_free(sandbox) -> bool:
    with sandbox.zk() as zk:
        return not zk.exists(LOCK)


def in_sync_after_the_crash(sandbox, watcher: MetadataWatcher, fault: FaultAfterTrigger, grace_s: float = 20.0):
    """Assert that nothing was offline outside the crash (from ``fault.began`` to ``grace_s`` after it), then wait
    until every partition is in sync; returns that view.

    A SIGKILLed ZooKeeper-mode broker is dead to the controller only once its session expires (6 s); a killed
    controller is replaced then, and the new one elects leaders for what the dead one led: partitions may show no
    leader in between. That is the crash, not the run."""
    outside = [(at, views) for at, views in watcher.ever_offline() if not fault.began <= at <= fault.began + grace_s]
    assert outside == [], "no partition offline outside the crash and the elections after it"
    return wait_for(lambda: (v := snapshot(admin(sandbox.bootstrap_servers))) and not v.under_replicated and v, 60,
                    what="every partition in sync")


class Reassigning:
    """A condition for :class:`FaultAfterTrigger`: a reassignment is under way (ListPartitionReassignments) with a
    replica being added; ``adding`` keeps the brokers it adds to and ``partitions`` the (topic, partition) pairs
    being moved, as last seen."""

    def __init__(self, bootstrap_servers: str) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.adding: set[int] = set()
        self.partitions: set[tuple[str, int]] = set()

    def __call__(self) -> bool:
        client = KafkaAdminClient(bootstrap_servers=self.bootstrap_servers, request_timeout_ms=5000)
        try:
            ongoing = client.list_partition_reassignments()
        except Exception:  # noqa: BLE001 - asked again in 0.5 s
            return False
        finally:
            client.close()
        self.adding = {b for info in ongoing.values() for b in info.get("adding_replicas", [])}
        self.partitions = {(tp.topic, tp.partition) for tp in ongoing}
        return bool(self.adding)


@pytest.mark.parametrize("victim", ["receiving broker", pytest.param("controller", marks=pytest.mark.extended)])
def test_a_broker_killed_mid_wave_and_back_10_s_later_is_waited_out(victim, fresh_sandbox, use_sandbox):
    sandbox = fresh_sandbox(brokers=4, racks=2)
    use_sandbox(sandbox.workdir)
    sandbox.wait_healthy(timeout_s=120)
    active = controller(sandbox)
    drained = max(b for b in sandbox.broker_ids if b != active)
    reassigning = Reassigning(sandbox.bootstrap_servers)
    killed: list[int] = []

    def kill() -> None:
        target = active if victim == "controller" else min(reassigning.adding - {active} or reassigning.adding)
        done = sandbox.cli("crash-broker", str(target))
        assert done.returncode == 0, done.stderr
        killed.append(target)

    def start_again() -> None:
        rc, _, err = sandbox.ssh(killed[0], "kafka-service start")
        assert rc == 0, err

    before = sandbox.starts()
    began = time.monotonic()
    with watched_traffic(sandbox.workdir, sandbox.bootstrap_servers, sandbox.broker_ids) as traffic, \
            MetadataWatcher(sandbox.bootstrap_servers, interval_s=0.5) as watcher, \
            FaultAfterTrigger(reassigning, kill, start_again, hold_s=10) as fault:
        result = run_dag("kafka_decommission", {"cluster": "kafka_sandbox", "brokers": [drained], **THROTTLE,
                                                **FAST})
    took = time.monotonic() - began
    print(f"decommission of broker {drained}, {victim} {killed} killed mid-wave for {fault.held_s} s: {took:.1f} s; "
          f"{traffic.summary()}")
    assert killed and fault.held_s is not None, "the fault happened mid-wave"
    assert victim != "receiving broker" or killed[0] != drained
    assert result.state == "success", result.states
    assert_no_acknowledged_message_lost(traffic)
    after = in_sync_after_the_crash(sandbox, watcher, fault)
    assert all(drained not in p.replicas for p in after.partitions), "the drained broker holds nothing"
    assert drained not in registered(sandbox), "the drained broker was stopped"
    assert throttles_left(sandbox) == {}, "no throttle left"
    assert lock_free(sandbox), "the lock was released"
    now = sandbox.starts([killed[0]])
    assert now[killed[0]] - before[killed[0]] == 1, "the killed broker was started once (by the test), not by the run"


@pytest.mark.extended
def test_a_replica_placed_on_the_drained_broker_mid_run_or_a_failing_stop_leaves_it_running(
        fresh_sandbox, use_sandbox, monkeypatch):
    """The plan drains broker D; mid-wave someone creates a topic with a replica on D. The waves finish, the stop
    finds D still holding a replica and refuses (D keeps running, no throttle left, the lock released). The topic
    deleted and the profile's stop command failing, a cleared run fails at the stop over SSH, D still running.
    The stop command fixed, clearing again stops D."""
    sandbox = fresh_sandbox(brokers=4, racks=2)
    use_sandbox(sandbox.workdir)
    sandbox.wait_healthy(timeout_s=120)
    drained = max(b for b in sandbox.broker_ids if b != controller(sandbox))
    others = [b for b in sandbox.broker_ids if b != drained]

    def create_late_topic() -> None:
        client = admin(sandbox.bootstrap_servers)  # kept: the futures need their client alive
        futures = client.create_topics([NewTopic("late-topic", 1, replica_assignment=[[drained, *others[:2]]])])
        futures["late-topic"].result(timeout=30)

    with MetadataWatcher(sandbox.bootstrap_servers, interval_s=0.5) as watcher, \
            FaultAfterTrigger(Reassigning(sandbox.bootstrap_servers), create_late_topic, lambda: None,
                              hold_s=0) as late:
        refused = run_dag("kafka_decommission", {"cluster": "kafka_sandbox", "brokers": [drained], **THROTTLE,
                                                 **FAST})
    assert late.began is not None, "the topic was created while the waves ran"
    assert refused.state == "failed" and refused.state_of("stop_brokers") == "failed", refused.states
    assert refused.state_of("reassign.remove_throttles") == "success"
    view = snapshot(admin(sandbox.bootstrap_servers))
    assert [p.replicas for p in view.partitions if p.topic == "late-topic"] == [(drained, others[0], others[1])]
    assert all(drained not in p.replicas for p in view.partitions if p.topic != "late-topic"), "the plan was done"
    assert drained in registered(sandbox), "a broker that holds a replica is not stopped"
    assert throttles_left(sandbox) == {} and lock_free(sandbox)
    assert watcher.ever_offline() == []

    client = admin(sandbox.bootstrap_servers)
    client.delete_topics(["late-topic"])["late-topic"].result(timeout=30)
    wait_for(lambda: all(p.topic != "late-topic" for p in snapshot(admin(sandbox.bootstrap_servers)).partitions),
             30, what="the late topic gone")
    profile = os.environ["AIRFLOW_CONN_KAFKA_SANDBOX"]
    with_profile(monkeypatch, service_stop="echo 'kafka.service: permission denied' >&2; exit 4")
    failing = clear_and_resume("kafka_decommission", refused.run_id, only_failed=True)
    assert failing.state == "failed" and failing.state_of("stop_brokers") == "failed", failing.states
    assert drained in registered(sandbox), "the stop failed: the broker still runs"
    assert lock_free(sandbox), "the lock was released after the failure"

    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_SANDBOX", profile)  # the stop command fixed
    stopped = clear_and_resume("kafka_decommission", refused.run_id, only_failed=True)
    assert stopped.state == "success", stopped.states
    assert drained not in registered(sandbox), "the drained broker was stopped"
    assert lock_free(sandbox)


@pytest.mark.extended
@pytest.mark.parametrize("clear", ["only failed", "whole run"])
def test_a_wave_task_that_dies_mid_wave_is_resumed_without_starting_a_move_twice(clear, fresh_sandbox, use_sandbox,
                                                                                  monkeypatch, capfd, caplog):
    """The wave's task dies right after it started its moves (what a killed worker leaves: the reassignment runs
    on in Kafka, the task failed, nothing cancelled). Clearing the failed tasks runs the wave again: it finds every
    move running or done and starts none (its XCom says 0 moves started), the broker is drained and stopped, no
    throttle is left and the lock is released. Clearing the whole run instead (the advice for a run stopped from
    outside) does the same: its snapshot task keeps the earlier try's snapshot and plan (its moves done by then: the
    failed run's remove_throttles let them finish; running ones would be kept too, unit-tested), no new plan is made,
    and nothing the run moved is "another reassignment in progress"."""
    import operators.reassignment_wave as wave_op

    sandbox = fresh_sandbox(brokers=4, racks=2)
    use_sandbox(sandbox.workdir)
    sandbox.wait_healthy(timeout_s=120)
    drained = max(b for b in sandbox.broker_ids if b != controller(sandbox))
    real_verify = wave_op.ReassignmentWaveOperator._verify
    died: list[float] = []

    def dies_once(self, *args, **kwargs):
        if not died:
            died.append(time.monotonic())
            raise RuntimeError("worker lost (the test's stand-in for a killed task process)")
        return real_verify(self, *args, **kwargs)

    monkeypatch.setattr(wave_op.ReassignmentWaveOperator, "_verify", dies_once)
    with watched_traffic(sandbox.workdir, sandbox.bootstrap_servers, sandbox.broker_ids) as traffic, \
            MetadataWatcher(sandbox.bootstrap_servers, interval_s=0.5) as watcher:
        failed = run_dag("kafka_decommission", {"cluster": "kafka_sandbox", "brokers": [drained], **THROTTLE,
                                                **FAST})
        assert died and failed.state == "failed" and "failed" in failed.mapped_states("reassign.wave"), failed.states
        first = xcom_value("kafka_decommission", failed.run_id, "reassign.check_plan")
        assert first, "the plan had waves"
        caplog.clear()
        capfd.readouterr()
        resumed = clear_and_resume("kafka_decommission", failed.run_id, only_failed=clear == "only failed")
    text = capfd.readouterr().out + caplog.text
    assert resumed.state == "success", resumed.states
    if clear == "whole run":
        kept = re.search(r"an earlier try of this run planned \d+ moves \([^)]*\): (this try goes on with that plan "
                         r"and its snapshot instead of planning again|all made; this try keeps that plan)", text)
        assert kept, text[-3000:]
        print(f"the whole run cleared: {kept.group(0)}")
        assert "not planning: the snapshot task kept the plan of an earlier try of this run" in text
        assert "another reassignment is in progress" not in text
    result = xcom_value("kafka_decommission", failed.run_id, "reassign.wave", map_index=0)
    assert result is not None and result["moves"] == 0, f"the resumed wave started no move again: {result}"
    assert_no_acknowledged_message_lost(traffic)
    assert watcher.ever_offline() == []
    after = snapshot(admin(sandbox.bootstrap_servers))
    assert all(drained not in p.replicas for p in after.partitions), "the drained broker holds nothing"
    assert drained not in registered(sandbox), "the drained broker was stopped"
    assert throttles_left(sandbox) == {} and lock_free(sandbox)


@pytest.mark.extended
def test_the_kraft_quorum_leader_killed_mid_wave_and_back_10_s_later_is_waited_out(fresh_sandbox, use_sandbox):
    """KRaft: the active controller (quorum leader) SIGKILLed while a wave copies, started again 10 s later: the
    other voters elect a leader, the reassignment goes on, the run succeeds (the broker drained and stopped, no
    throttle left, the lock topic free); nothing offline, no acknowledged message lost."""
    from hooks.cluster_profile import get_cluster_profile
    from hooks.kafka_lock import KafkaLockStore
    from kraft_support import leader_of

    sandbox = fresh_sandbox(mode="kraft", controllers=3, brokers=4, racks=2)
    use_sandbox(sandbox.workdir)
    sandbox.wait_healthy(timeout_s=120)
    drained = max(sandbox.broker_ids)
    reassigning = Reassigning(sandbox.bootstrap_servers)
    killed: list[int] = []

    def kill_leader() -> None:
        killed.append(leader_of(sandbox))
        done = sandbox.cli("crash-broker", str(killed[0]))
        assert done.returncode == 0, done.stderr

    def start_again() -> None:
        rc, _, err = sandbox.ssh(killed[0], "kafka-service start")
        assert rc == 0, err

    with watched_traffic(sandbox.workdir, sandbox.bootstrap_servers, sandbox.broker_ids) as traffic, \
            MetadataWatcher(sandbox.bootstrap_servers, interval_s=0.5) as watcher, \
            FaultAfterTrigger(reassigning, kill_leader, start_again, hold_s=10) as fault:
        result = run_dag("kafka_decommission", {"cluster": "kafka_sandbox", "brokers": [drained], **THROTTLE,
                                                **FAST})
    assert killed and fault.held_s is not None, "the quorum leader was killed mid-wave"
    assert result.state == "success", result.states
    assert_no_acknowledged_message_lost(traffic)
    assert watcher.ever_offline() == [], "no partition offline: the brokers keep leading while the quorum elects"
    after = wait_for(lambda: (v := snapshot(admin(sandbox.bootstrap_servers))) and not v.under_replicated and v, 60,
                     what="every partition in sync")
    assert all(drained not in p.replicas for p in after.partitions), "the drained broker holds nothing"
    assert drained not in after.brokers, "the drained broker was stopped"
    assert throttles_left(sandbox) == {}, "no throttle left"
    with KafkaLockStore(get_cluster_profile("kafka_sandbox")) as store:
        assert store.current_holder(wait_s=1) is None, "the lock was released"


@pytest.mark.extended
def test_scale_out_whose_new_broker_is_killed_mid_wave_and_back_10_s_later_finishes(fresh_sandbox, use_sandbox):
    """Scale-out onto broker 3 (started by the run): broker 3, the target of every move, SIGKILLed while a wave
    copies and started again 10 s later: the run waits it out and finishes; broker 3 holds its share, nothing
    offline outside the crash, no throttle left, the lock released, no acknowledged message lost."""
    sandbox = fresh_sandbox(brokers=3, spare_brokers=1, racks=2)
    use_sandbox(sandbox.workdir)
    sandbox.wait_healthy(timeout_s=120)
    reassigning = Reassigning(sandbox.bootstrap_servers)

    def kill_new_broker() -> None:
        assert 3 in reassigning.adding, f"broker 3 receives the moves: {reassigning.adding}"
        done = sandbox.cli("crash-broker", "3")
        assert done.returncode == 0, done.stderr

    def start_again() -> None:
        rc, _, err = sandbox.ssh(3, "kafka-service start")
        assert rc == 0, err

    with watched_traffic(sandbox.workdir, sandbox.bootstrap_servers, sandbox.broker_ids) as traffic, \
            MetadataWatcher(sandbox.bootstrap_servers, interval_s=0.5) as watcher, \
            FaultAfterTrigger(reassigning, kill_new_broker, start_again, hold_s=10) as fault:
        result = run_dag("kafka_scale_out", {"cluster": "kafka_sandbox", "brokers": [3], "start_new_brokers": True,
                                             **THROTTLE, **FAST})
    assert fault.held_s is not None, "broker 3 was killed mid-wave"
    assert result.state == "success", result.states
    assert_no_acknowledged_message_lost(traffic)
    after = in_sync_after_the_crash(sandbox, watcher, fault)
    assert any(3 in p.replicas for p in after.partitions), "broker 3 holds its share"
    assert 3 in registered(sandbox)
    assert throttles_left(sandbox) == {} and lock_free(sandbox)


def test_topics_deleted_or_moved_by_hand_after_the_plan_are_left_alone_and_named(fresh_sandbox, use_sandbox,
                                                                                 monkeypatch, capfd):
    """Someone acts on the cluster between the plan and its wave, and while the wave copies: topic ``gone-early``
    deleted and partition ``handmoved-0`` reassigned by hand before the wave starts (the test's stand-in: a step run
    right before the wave's task), topic ``gone-mid`` deleted while the wave copies. The wave leaves the deleted
    partitions alone (nothing to move or throttle: Kafka dropped their configs with them) and does not undo the hand
    move; every other partition leaves the drained broker; no throttle is left. The drained broker still holds
    ``handmoved-0``, so the stop refuses it and the run fails there, naming it; the note names the moves not made.
    Before ``kafka_ops.plan_drift``, the wave failed on the deleted topic's throttle configs
    (UNKNOWN_TOPIC_OR_PARTITION), and clearing it failed the same way for good."""
    import operators.reassignment_wave as wave_op
    from kafka import KafkaAdminClient, TopicPartition

    sandbox = fresh_sandbox(brokers=4, racks=2)
    use_sandbox(sandbox.workdir)
    sandbox.wait_healthy(timeout_s=120)
    drained = max(b for b in sandbox.broker_ids if b != controller(sandbox))
    a, b, c = [x for x in sandbox.broker_ids if x != drained]
    client = admin(sandbox.bootstrap_servers)
    layouts = {"gone-early": [[drained, a], [b, drained]], "gone-mid": [[drained, a], [drained, b], [c, drained]],
               "handmoved": [[drained, a]]}
    for topic, layout in layouts.items():
        client.create_topics([NewTopic(topic, len(layout), replica_assignment=layout)])[topic].result(timeout=30)
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": sandbox.bootstrap_servers, "acks": "all"})
    for i in range(12_000):  # about 2.4 MB per topic: seconds of copying at THROTTLE
        for topic, layout in layouts.items():
            producer.produce(topic, value=b"x" * 200, partition=i % len(layout))
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    hand_target = [drained, c]  # neither where the plan found it ([drained, a]) nor where it moves it (off drained)

    def delete(topic: str) -> None:
        deleting = admin(sandbox.bootstrap_servers)  # kept: the future needs its client alive
        deleting.delete_topics([topic])[topic].result(timeout=30)
        wait_for(lambda: all(p.topic != topic for p in snapshot(admin(sandbox.bootstrap_servers)).partitions), 30,
                 what=f"{topic} gone")

    real_execute = wave_op.ReassignmentWaveOperator.execute
    acted: list[float] = []

    def someone_acts_first(self, context):
        if not acted:
            acted.append(time.monotonic())
            delete("gone-early")
            kp = KafkaAdminClient(bootstrap_servers=sandbox.bootstrap_servers)
            try:
                answer = kp.alter_partition_reassignments({TopicPartition("handmoved", 0): hand_target})
                assert all(err is None for err in answer.values()), answer
            finally:
                kp.close()
            wait_for(lambda: [p.replicas for p in snapshot(admin(sandbox.bootstrap_servers)).partitions
                              if p.topic == "handmoved"] == [tuple(hand_target)], 60, what="handmoved-0 moved by hand")
        return real_execute(self, context)

    monkeypatch.setattr(wave_op.ReassignmentWaveOperator, "execute", someone_acts_first)
    reassigning = Reassigning(sandbox.bootstrap_servers)
    with watched_traffic(sandbox.workdir, sandbox.bootstrap_servers, sandbox.broker_ids) as traffic, \
            MetadataWatcher(sandbox.bootstrap_servers, interval_s=0.5) as watcher, \
            FaultAfterTrigger(lambda: reassigning() and ("gone-mid", 0) in reassigning.partitions,
                              lambda: delete("gone-mid"), lambda: None, hold_s=0) as mid:
        result = run_dag("kafka_decommission", {"cluster": "kafka_sandbox", "brokers": [drained], **THROTTLE,
                                                **FAST})
    out = capfd.readouterr().out
    assert acted and mid.began is not None, (
        f"gone-early deleted before the wave, gone-mid while it copied: {out[-6000:]}")
    assert result.mapped_states("reassign.wave") == ["success"], result.states
    assert result.state == "failed" and result.state_of("stop_brokers") == "failed", result.states
    assert result.state_of("reassign.remove_throttles") == "success"
    not_moved = xcom_value("kafka_decommission", result.run_id, "reassign.wave", map_index=0)["not_moved"]
    assert sorted(not_moved) == ["gone-early-0", "gone-early-1", "gone-mid-0", "gone-mid-1", "gone-mid-2",
                                 "handmoved-0"], not_moved
    assert "changed by someone else since the plan" in out and "deleted since the plan" in out
    assert re.search(r"6 moves not made \(deleted or changed since the plan\): gone-early-0, ", out), out[-3000:]
    view = snapshot(admin(sandbox.bootstrap_servers))
    assert [p.replicas for p in view.partitions if p.topic == "handmoved"] == [tuple(hand_target)], "not undone"
    assert all(drained not in p.replicas for p in view.partitions if p.topic != "handmoved"), "the rest drained"
    assert not {"gone-early", "gone-mid"} & {p.topic for p in view.partitions}
    assert drained in registered(sandbox), "a broker that still holds a replica is not stopped"
    assert throttles_left(sandbox) == {} and lock_free(sandbox)
    # a topic being deleted shows no leader on its way out: the deletion, not the run
    offline = [(at, [p for p in views if p.topic not in ("gone-early", "gone-mid")]) for at, views in
               watcher.ever_offline()]
    assert [(at, views) for at, views in offline if views] == [], watcher.explain_offline(sandbox)
    assert_no_acknowledged_message_lost(traffic)
