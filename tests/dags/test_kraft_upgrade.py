"""kafka_upgrade on a KRaft cluster (3 controllers, 3 brokers, Kafka 4.0.0, metadata.version 25), run end to end
with ``dag.test()`` on a sandbox of its own per test: 4.0.0 -> 4.1.0, then metadata.version 4.1-IV1 (27).

Judged from outside the DAG: each node's own log (how often it started, on which release), the controllers'
shutdown order, every broker's ApiVersions (its finalized metadata.version), an independent metadata watcher (no
partition offline) and acks=all client traffic (no acknowledged message lost).
"""

from __future__ import annotations

import contextlib
import os
import re
import time

import pytest
from airflow_env import failure_lines, run_dag
from kraft_support import CONTROLLERS, assert_quorum_leader_stopped_last, controller_shutdowns, quorum_of
from observers import MetadataWatcher, admin, assert_no_acknowledged_message_lost, snapshot, wait_for
from test_kafka_upgrade import Responder

from sandbox.traffic_watch import watched_traffic

pytestmark = [pytest.mark.sandbox, pytest.mark.destructive]

FAST = {"healthcheck_interval_s": 1, "healthcheck_timeout_s": 120, "lag_ok_consecutive": 1}
TARGET = "4.1.0"




def nodes(sandbox) -> list[int]:
    return CONTROLLERS + list(sandbox.broker_ids)


def started(sandbox) -> dict[int, list[str]]:
    """Node id -> the release of every start in its own log ("controller 100 started (Kafka 4.0.0, ...").
    Waits until every node's first start is there (a fresh sandbox's log may trail its health by a moment)."""

    def read() -> dict[int, list[str]]:
        out = {}
        for n in nodes(sandbox):
            out[n] = [release.removeprefix("Kafka ") for release in sandbox.started_releases(n)]
        return out

    return wait_for(lambda: (s := read()) and all(s.values()) and s, 30, what="every node's first start in its log")






def finalized(sandbox) -> dict[int, int | None]:
    """Broker id -> the metadata.version its own ApiVersions answer finalizes (asked of each broker by node id)."""
    from hooks.kafka_admin import KafkaAdminHook

    with KafkaAdminHook(bootstrap_servers=sandbox.bootstrap_servers) as hook:
        return {b: f["finalized"] for b, f in hook.broker_features(sandbox.broker_ids).items()}


def kafka_features(sandbox, version: str | None = None) -> dict[str, str]:
    """Feature -> its FinalizedVersionLevel as Kafka's own ``kafka-features.sh describe`` (of release ``version``,
    default the sandbox's: an older one names a newer metadata.version "UNKNOWN 27") prints it
    (``"metadata.version": "4.1-IV1"``, ``"eligible.leader.replicas.version": "1"``)."""
    described = sandbox.kafka_tool("kafka-features.sh", "--bootstrap-server", sandbox.bootstrap_servers, "describe",
                                   version=version)
    assert described.returncode == 0, described.stderr
    fields = [dict(f.split(": ", 1) for f in line.split("\t") if ": " in f) for line in described.stdout.splitlines()]
    return {f["Feature"]: f["FinalizedVersionLevel"] for f in fields if "Feature" in f}


def cluster_level_min_insync(sandbox) -> str | None:
    """The cluster-level ``min.insync.replicas`` as Kafka's own ``kafka-configs.sh --entity-default`` prints it
    (None when unset)."""
    described = sandbox.kafka_tool("kafka-configs.sh", "--bootstrap-server", sandbox.bootstrap_servers,
                                   "--entity-type", "brokers", "--entity-default", "--describe")
    assert described.returncode == 0, described.stderr
    found = [line.split("=", 1)[1].split()[0] for line in described.stdout.splitlines()
             if line.strip().startswith("min.insync.replicas=")]
    return found[0] if found else None


def broker_min_insync(sandbox, broker: int, value: str | None) -> None:
    """Set (or delete, ``value`` None) broker ``broker``'s own dynamic ``min.insync.replicas`` with
    ``kafka-configs.sh --entity-name``."""
    change = ["--add-config", f"min.insync.replicas={value}"] if value else ["--delete-config", "min.insync.replicas"]
    done = sandbox.kafka_tool("kafka-configs.sh", "--bootstrap-server", sandbox.bootstrap_servers, "--entity-type",
                              "brokers", "--entity-name", str(broker), "--alter", *change)
    assert done.returncode == 0, done.stderr


def release_everywhere(sandbox, version: str, switch: bool = False) -> None:
    """What configuration management does first: ``version`` unpacked beside the running release on every broker
    and controller host; ``switch`` also points the ``kafka`` symlink at it (installed, but nothing restarted)."""
    from sandbox.hosts import install_kafka, unpack_kafka

    for n in nodes(sandbox):
        (install_kafka if switch else unpack_kafka)(sandbox.host_dir(n), version)


def output(capfd, caplog) -> str:
    return capfd.readouterr().out + caplog.text


def test_kraft_upgrade_rolls_controllers_then_brokers_then_bumps_metadata_version(kraft, capfd, caplog):
    release_everywhere(kraft, TARGET)
    before = started(kraft)
    features_before = kafka_features(kraft)
    assert features_before["eligible.leader.replicas.version"] == "0" and features_before["group.version"] == "1"
    approver = Responder("kafka_upgrade", "approve_protocol_bump", "Approve")
    approver.start()
    began, roll_began = time.monotonic(), time.time()
    try:
        with watched_traffic(kraft.workdir, kraft.bootstrap_servers, kraft.broker_ids) as traffic, \
                MetadataWatcher(kraft.bootstrap_servers, interval_s=0.25) as watcher:
            result = run_dag("kafka_upgrade", {"cluster": "kafka_sandbox", "target_version": TARGET, **FAST})
    finally:
        approver.stop.set()
    print(f"KRaft upgrade 4.0.0 -> {TARGET} of 3 controllers + 3 brokers: {time.monotonic() - began:.1f} s; "
          f"{traffic.summary()}")
    text = output(capfd, caplog)
    assert result.state == "success", (result.states, failure_lines(text))
    assert_no_acknowledged_message_lost(traffic)
    assert approver.answered.is_set(), "the run waited for the metadata.version bump's approval"

    # every controller, then every broker, restarted exactly once, on the target release
    after = started(kraft)
    assert {n: after[n][len(before[n]):] for n in nodes(kraft)} == {n: [TARGET] for n in nodes(kraft)}
    for n in nodes(kraft):
        assert kraft.host_dir(n).kafka_link.resolve().name == f"kafka_2.13-{TARGET}"
    order = [int(label.split()[1]) for label in result.mapped_labels("controller_binaries.controller")]
    assert sorted(order) == CONTROLLERS, order
    assert controller_shutdowns(kraft) == order, "one at a time, in the order of the roll's tasks"
    assert_quorum_leader_stopped_last(kraft, order, roll_began)
    tis = result.task_instances
    last_controller = max(ti.end_date for ti in tis if ti.task_id == "controller_binaries.controller")
    first_broker = min(ti.start_date for ti in tis if ti.task_id == "binaries.broker")
    assert first_broker >= last_controller, "the brokers roll after the controllers"
    approval = next(ti for ti in tis if ti.task_id == "approve_protocol_bump")
    bump = next(ti for ti in tis if ti.task_id == "metadata_version")
    assert approval.state == "success" and bump.start_date >= approval.end_date

    # the ZooKeeper-mode rolls planned nothing (skipped) and did not skip what follows
    for roll in ("pin", "ibp", "lmf"):
        assert result.state_of(f"{roll}.plan") == "success" and result.state_of(f"{roll}.broker") == "skipped"
        assert result.mapped_states(f"{roll}.broker") == []
        # and the closing report says why, then what the other rolls restarted
        assert f"roll '{roll}': nothing to roll (KRaft: metadata.version replaces inter.broker.protocol.version)" \
            in text, failure_lines(text)
    assert f"roll 'controller_binaries': restarted {order} of {order}" in text
    assert re.search(r"roll 'binaries': restarted \[\d, \d, \d\] of \[\d, \d, \d\](?!;)", text)
    assert result.state_of("run_outcome") == "success"

    # metadata.version finalized at 4.1-IV1 (27) on every broker
    assert finalized(kraft) == {b: 27 for b in kraft.broker_ids}
    assert "metadata.version 4.0-IV3 (25) -> 4.1-IV1 (27)" in text
    assert "metadata.version 4.1-IV1 (27) finalized on every broker: 0, 1, 2" in text
    assert re.search(r"upgrade to Kafka 4\.1\.0; found: 4\.0\.0 on brokers \[0, 1, 2\], 4\.0\.0 on controllers "
                     r"\[\d+, \d+, \d+\]; metadata\.version 4\.0-IV3 \(25\) -> 4\.1-IV1 \(27\) asked", text), \
        text[-3000:]
    assert "metadata.version 4.0-IV3 (25) -> 4.1-IV1 (27) finalized (UpdateFeatures); " \
           "eligible.leader.replicas.version 0 -> 1" in text, "the note says what the run finalized"
    # with it, as `kafka-features.sh upgrade --release-version 4.1` would: ELR (4.1's new default) on, the rest as
    # they were, kraft.version (a static quorum) untouched; judged by Kafka's own tool
    features_after = kafka_features(kraft, TARGET)
    assert features_after["metadata.version"] == "4.1-IV1"
    assert features_after["eligible.leader.replicas.version"] == "1", features_after
    assert {f: features_after[f] for f in ("group.version", "transaction.version", "kraft.version")} == \
        {f: features_before[f] for f in ("group.version", "transaction.version", "kraft.version")}
    assert "eligible.leader.replicas.version 0 -> 1" in text
    # turning ELR on made Kafka write the active controller's static min.insync.replicas as the cluster-level one;
    # the upgrade checked first that it is the brokers' value, so topics keep needing 2 in-sync replicas
    assert "min.insync.replicas stays 2 when ELR is turned on (the active controller" in text
    assert cluster_level_min_insync(kraft) == "2"
    assert "KRaft cluster (it answers DescribeQuorum)" in text, "check_upgrade says which path it takes"
    assert "KRaft: metadata.version replaces inter.broker.protocol.version" in text
    assert watcher.ever_offline() == [], "no partition offline during the upgrade"
    end = snapshot(admin(kraft.bootstrap_servers))
    assert end.offline == [] and end.under_replicated == []


@pytest.mark.extended
def test_refusals_and_a_dry_run_touch_nothing(kraft, capfd, caplog):
    """On one sandbox, each run leaving it as it was: metadata_version without the binaries refused naming the
    nodes; a too-new level refused; a dry run of the real upgrade; the step refusing a level above what the
    running binaries support (4.1.0 installed, nothing restarted)."""
    before = started(kraft)
    only_mv = {"cluster": "kafka_sandbox", "target_version": TARGET, "phases": ["metadata_version"],
               "approve_protocol_bump": True, **FAST}
    # every host still has 4.0.0 installed: check_upgrade refuses the phase list
    refused = run_dag("kafka_upgrade", only_mv)
    assert refused.state == "failed" and refused.state_of("check_upgrade") == "failed", refused.states
    assert "phase metadata_version needs binaries supporting metadata.version 4.1-IV1 (level 27) on every node, but " \
           "nodes [0, 1, 2, 100, 101, 102] run 4.0.0 (metadata.version up to 4.0-IV3, level 25); add 'binaries'" \
           in output(capfd, caplog)

    refused = run_dag("kafka_upgrade", {"cluster": "kafka_sandbox", "target_version": TARGET,
                                        "metadata_version": "4.2", **FAST})
    assert refused.state == "failed" and refused.state_of("check_upgrade") == "failed", refused.states
    text = output(capfd, caplog)
    assert "metadata.version 4.2-IV1 (level 29) is too new for Kafka 4.1.0: its binaries support up to 4.1-IV1 " \
           "(level 27)" in text
    assert "nothing was touched" in text
    assert refused.state_of("controller_binaries.plan") != "success", "no controller roll was planned"

    # a broker's own min.insync.replicas, which turning ELR on would remove (Kafka keeps only the cluster-level
    # value, here the active controller's static 2): refused before anything is touched, broker 1 named
    release_everywhere(kraft, TARGET)
    links = {n: os.readlink(kraft.host_dir(n).path / "kafka") for n in nodes(kraft)}
    broker_min_insync(kraft, 1, "3")
    try:
        refused = run_dag("kafka_upgrade", {"cluster": "kafka_sandbox", "target_version": TARGET, **FAST})
    finally:
        broker_min_insync(kraft, 1, None)
    assert refused.state == "failed" and refused.state_of("check_upgrade") == "failed", refused.states
    text = output(capfd, caplog)
    assert "raising eligible.leader.replicas.version to 1 (ELR, KIP-966) would change min.insync.replicas of every " \
           "topic without its own: Kafka sets the cluster-level min.insync.replicas (none is set) to the active " \
           "controller" in text
    assert "static value, 2, and removes broker-level values; broker 1 uses 3 now" in text
    assert "delete the own min.insync.replicas of broker 1 if it should not go" in text
    assert cluster_level_min_insync(kraft) is None

    # a dry run of the real upgrade: logs what it would send, touches nothing
    dry = run_dag("kafka_upgrade", {"cluster": "kafka_sandbox", "target_version": TARGET, "dry_run": True, **FAST})
    assert dry.state == "success", dry.states
    text = output(capfd, caplog)
    assert "DRY RUN: would send UpdateFeatures eligible.leader.replicas.version=1, metadata.version=27 (UPGRADE)" \
        in text, "with metadata.version, the feature 4.1 turns on by default, in the same request"
    assert "DRY RUN: the run would wait here for approval of the metadata.version bump" in text
    assert started(kraft) == before, "a refused or dry run restarts nothing"
    assert {n: os.readlink(kraft.host_dir(n).path / "kafka") for n in nodes(kraft)} == links
    assert finalized(kraft) == {b: 25 for b in kraft.broker_ids}

    # 4.1.0 installed on every host (the kafka symlink switched), but no node restarted: the running binaries
    # still support up to 25, which only the brokers' ApiVersions tell; the step sends nothing
    release_everywhere(kraft, TARGET, switch=True)
    failed = run_dag("kafka_upgrade", only_mv)
    assert failed.state == "failed" and failed.state_of("metadata_version") == "failed", failed.states
    assert failed.state_of("check_upgrade") == "success"
    text = output(capfd, caplog)
    assert "metadata.version 4.0-IV3 (25) -> 4.1-IV1 (27); eligible.leader.replicas.version 0 -> 1 not sent " \
           "(nothing was touched): 4.1-IV1 (level 27) is " \
           "above what the binaries of nodes [0, 1, 2] support (up to 0: 4.0-IV3 (level 25), 1: 4.0-IV3 (level 25), " \
           "2: 4.0-IV3 (level 25)): roll the new binaries first" in text
    assert "roll the binaries of Kafka 4.1.0 first (phase binaries)" in text
    assert "phase binaries not requested" in text, "the binaries rolls left every node alone"
    assert finalized(kraft) == {b: 25 for b in kraft.broker_ids}, "metadata.version unchanged"
    assert started(kraft) == before, "no node restarted"


def unpacked_start_releases(sandbox, nodes: list[int]) -> dict[int, list[str]]:
    """Stage the target release on every node's host; return each node's started releases so far (from its log)."""
    from sandbox.hosts import unpack_kafka

    for n in nodes:
        unpack_kafka(sandbox.host_dir(n), TARGET)
    return wait_for(lambda: (s := {n: sandbox.started_releases(n) for n in nodes}) and all(s.values()) and s, 30,
                    what="every node's first start in its log")


def approved_upgrade(sandbox, brokers: list[int], watcher: MetadataWatcher | None = None):
    """Run ``kafka_upgrade`` to TARGET with an approver answering its approval, under acks=all traffic (and
    ``watcher`` when given, entered around the run); returns (the run, the traffic)."""
    approver = Responder("kafka_upgrade", "approve_protocol_bump", "Approve")
    approver.start()
    try:
        with watched_traffic(sandbox.workdir, sandbox.bootstrap_servers, brokers) as traffic, \
                (watcher or contextlib.nullcontext()):
            result = run_dag("kafka_upgrade", {"cluster": "kafka_sandbox", "target_version": TARGET, **FAST})
    finally:
        approver.stop.set()
    return result, traffic


@pytest.mark.extended
def test_kraft_upgrade_of_a_combined_cluster_rolls_each_node_once_the_quorum_leader_last(fresh_sandbox, use_sandbox,
                                                                                        capfd, caplog):
    """Kafka 4.0.0 -> 4.1.0 on 3 combined nodes (``process.roles=broker,controller``, Kafka's quickstart layout):
    the controller rolls have no dedicated controller, the broker roll upgrades every node once under the quorum
    check, the quorum leader last; then metadata.version 4.1-IV1 (27) is finalized; nothing offline, every
    acknowledged message read back."""
    sandbox = fresh_sandbox(mode="kraft", combined=3, brokers=3)
    use_sandbox(sandbox.workdir)
    sandbox.wait_healthy(timeout_s=120)
    ids = list(sandbox.broker_ids)
    before = unpacked_start_releases(sandbox, ids)
    roll_began = time.time()
    watcher = MetadataWatcher(sandbox.bootstrap_servers, interval_s=0.25)
    result, traffic = approved_upgrade(sandbox, ids, watcher)
    text = output(capfd, caplog)
    print(f"combined-mode upgrade: {result.mapped_labels('binaries.broker')}; {traffic.summary()}")
    assert result.state == "success", (result.states, failure_lines(text))
    assert_no_acknowledged_message_lost(traffic)
    after = {n: sandbox.started_releases(n) for n in ids}
    assert {n: [r.removeprefix("Kafka ") for r in after[n][len(before[n]):]] for n in ids} == {n: [TARGET] for n in ids}
    assert result.mapped_labels("controller_binaries.controller") == []
    order = [int(label.split()[1]) for label in result.mapped_labels("binaries.broker")]
    assert sorted(order) == ids and sandbox.shutdown_order(ids) == order, order
    assert_quorum_leader_stopped_last(sandbox, order, roll_began)
    assert finalized(sandbox) == {b: 27 for b in ids}
    assert watcher.ever_offline() == [], "no partition offline during the upgrade"


@pytest.mark.extended
def test_kraft_upgrade_on_a_dynamic_quorum_upgrades_the_controller_that_is_an_observer(fresh_sandbox, use_sandbox,
                                                                                       capfd, caplog):
    """Kafka 4.0.0 -> 4.1.0 on a dynamic quorum (KIP-853) of 3 voters and a controller 103 that is an observer (started,
    never added to the voter set; named in the connection's ``controller_hosts``): the controllers' binaries roll
    restarts 103 first, then the voters, the active controller last, each once on 4.1.0; the brokers follow;
    metadata.version 4.1-IV1 (27) is finalized; the voter set is unchanged and 103 still an observer."""
    watcher_id = 103
    sandbox = fresh_sandbox(mode="kraft", controllers=3, brokers=3, quorum="dynamic", observer_controllers=1)
    use_sandbox(sandbox.workdir)
    sandbox.wait_healthy(timeout_s=120)
    nodes = CONTROLLERS + [watcher_id] + list(sandbox.broker_ids)
    before = unpacked_start_releases(sandbox, nodes)
    roll_began = time.time()
    result, traffic = approved_upgrade(sandbox, list(sandbox.broker_ids))
    text = output(capfd, caplog)
    print(f"dynamic-quorum upgrade: {result.mapped_labels('controller_binaries.controller')}; {traffic.summary()}")
    assert result.state == "success", (result.states, failure_lines(text))
    assert_no_acknowledged_message_lost(traffic)
    after = {n: sandbox.started_releases(n) for n in nodes}
    assert {n: [r.removeprefix("Kafka ") for r in after[n][len(before[n]):]] for n in nodes} == \
        {n: [TARGET] for n in nodes}, "every node, the observer too, started once, on the target"
    order = [int(label.split()[1]) for label in result.mapped_labels("controller_binaries.controller")]
    assert order[0] == watcher_id and sorted(order[1:]) == CONTROLLERS, order
    assert sandbox.shutdown_order(CONTROLLERS + [watcher_id]) == order
    assert_quorum_leader_stopped_last(sandbox, order[1:], roll_began)  # the voters (103 is an observer)
    assert finalized(sandbox) == {b: 27 for b in sandbox.broker_ids}
    quorum = quorum_of(sandbox)
    assert sorted(quorum.voter_ids) == CONTROLLERS and quorum.observer(watcher_id) is not None

