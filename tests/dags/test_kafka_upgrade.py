"""kafka_upgrade run end to end (``dag.test()``) on a sandbox of its own: 3.6.2 -> 3.7.1.

Judged from the brokers and their hosts, not from the DAG: the ``kafka`` symlink and server.properties on
each host, each broker's own log (how often it started, with which release and IBP), an independent
metadata watcher (no partition offline).
"""

from __future__ import annotations

import os
import re
import time

import pytest
from airflow_env import Responder, run_dag
from observers import MetadataWatcher, admin, assert_no_acknowledged_message_lost, snapshot

from sandbox.traffic_watch import watched_traffic

FAST = {"healthcheck_interval_s": 1, "healthcheck_timeout_s": 120, "lag_ok_consecutive": 1}


def unpack(sandbox, version: str) -> None:
    """What an operator's configuration management does before an upgrade: the release unpacked beside the
    running one on every broker host (the ``kafka`` symlink still on the old one)."""
    from sandbox.hosts import unpack_kafka

    for b in sandbox.broker_ids:
        unpack_kafka(sandbox.host_dir(b), version)


def starts_so_far(sandbox) -> dict[int, list[str]]:
    """:func:`started` once every broker's own first start is in its log (a fresh sandbox's log may trail
    its health by a moment)."""
    from observers import wait_for

    return wait_for(lambda: (s := started(sandbox)) and all(s[b] for b in sandbox.broker_ids) and s, 30,
                    what="every broker's first start in its log")


def started(sandbox) -> dict[int, list[str]]:
    """Broker id -> the "(Kafka x, IBP y)" of every start in its own log."""
    out = {}
    for b in sandbox.broker_ids:
        out[b] = sandbox.started_releases(b)
    return out


def test_upgrade_refused_by_the_preflight_then_resumed_rolls_binaries_then_ibp_each_broker_once_per_phase(
        fresh_sandbox, use_sandbox, capfd, caplog):
    """Refusals touch nothing: a downgrade (check_upgrade), a target unpacked on every broker host but one (the
    preflight, after the lock and before the first stop, names that host and only it), a phase that needs every
    broker on the target; a dry run changes no file. Once the target is unpacked there too, clearing the refused
    run's failed tasks runs the upgrade under ``acks=all`` traffic: each broker started once per phase, the IBP
    bump approved in Airflow's required actions, an operator's comment kept, nothing offline, nothing lost."""
    from airflow_env import clear_and_resume

    sandbox = fresh_sandbox(brokers=3, racks=3)
    use_sandbox(sandbox.workdir)
    sandbox.wait_healthy(timeout_s=120)
    for b in sandbox.broker_ids:  # an operator's comment must survive the edits
        props = sandbox.host_dir(b).server_properties
        props.write_text("# managed by hand: keep this line\n" + props.read_text())
    before = starts_so_far(sandbox)

    refused = run_dag("kafka_upgrade", {"cluster": "kafka_sandbox", "target_version": "3.5.0", **FAST})
    assert refused.state == "failed" and refused.state_of("check_upgrade") == "failed"
    assert "downgrades are not supported" in capfd.readouterr().out + caplog.text
    assert started(sandbox) == before, "a refused upgrade restarts nothing"
    # no ZooKeeper mode from 4.0 on: refused by the check, before the preflight looks for the release on the hosts
    refused = run_dag("kafka_upgrade", {"cluster": "kafka_sandbox", "target_version": "4.0.0", **FAST})
    assert refused.state == "failed" and refused.state_of("check_upgrade") == "failed"
    assert "has no ZooKeeper mode (KIP-833" in capfd.readouterr().out + caplog.text
    assert started(sandbox) == before, "a refused upgrade restarts nothing"

    from sandbox.hosts import unpack_kafka

    lacking = sandbox.broker_ids[-1]
    for b in sandbox.broker_ids[:-1]:
        unpack_kafka(sandbox.host_dir(b), "3.7.1")
    failed = run_dag("kafka_upgrade", {"cluster": "kafka_sandbox", "target_version": "3.7.1", **FAST})
    assert failed.state == "failed"
    assert failed.state_of("preflight") == "failed" and failed.state_of("check_upgrade") == "success"
    logged = capfd.readouterr().out + caplog.text
    host = sandbox.broker(lacking)["host"]
    assert f"preflight: 1 of 3 hosts are not ready (nothing was touched): broker {lacking} ({host}): " \
           f"no unpacked Kafka 3.7.1 in" in logged
    assert all(f"broker {b} ({sandbox.broker(b)['host']}): no unpacked" not in logged
               for b in sandbox.broker_ids[:-1])
    assert started(sandbox) == before, "the preflight stopped no broker"
    assert set(snapshot(admin(sandbox.bootstrap_servers)).brokers) == set(sandbox.broker_ids)

    unpack_kafka(sandbox.host_dir(lacking), "3.7.1")
    skipping = run_dag("kafka_upgrade", {"cluster": "kafka_sandbox", "target_version": "3.7.1", "phases": ["ibp"],
                                         **FAST})
    assert skipping.state == "failed" and skipping.state_of("check_upgrade") == "failed"
    assert "phase ibp needs every broker on 3.7.1" in capfd.readouterr().out + caplog.text
    props = {b: sandbox.host_dir(b).server_properties.read_text() for b in sandbox.broker_ids}
    links = {b: os.readlink(sandbox.host_dir(b).path / "kafka") for b in sandbox.broker_ids}
    dry = run_dag("kafka_upgrade", {"cluster": "kafka_sandbox", "target_version": "3.7.1", "dry_run": True, **FAST})
    assert dry.state == "success", dry.states
    assert "DRY RUN" in capfd.readouterr().out + caplog.text
    assert started(sandbox) == before, "a refused or dry run restarts nothing"
    assert {b: sandbox.host_dir(b).server_properties.read_text() for b in sandbox.broker_ids} == props
    assert {b: os.readlink(sandbox.host_dir(b).path / "kafka") for b in sandbox.broker_ids} == links

    approver = Responder("kafka_upgrade", "approve_protocol_bump", "Approve")
    approver.start()
    try:
        with watched_traffic(sandbox.workdir, sandbox.bootstrap_servers, sandbox.broker_ids) as traffic, \
                MetadataWatcher(sandbox.bootstrap_servers, interval_s=0.25,
                                zookeeper=sandbox.zookeeper_connect) as watcher:
            result = clear_and_resume("kafka_upgrade", failed.run_id, only_failed=True)
    finally:
        approver.stop.set()
    print(traffic.summary())
    assert_no_acknowledged_message_lost(traffic)
    assert result.state == "success", result.states
    assert approver.answered.is_set(), "the run waited for the protocol bump's approval"
    out = capfd.readouterr().out + caplog.text
    after = started(sandbox)
    for b in sandbox.broker_ids:
        new = after[b][len(before[b]):]
        # pin: IBP already pinned (left alone); binaries: 3.7.1 on IBP 3.6; ibp: 3.7.1 on IBP 3.7; lmf: skipped
        assert new == ["Kafka 3.7.1, IBP 3.6", "Kafka 3.7.1, IBP 3.7"], f"broker {b} starts: {new}"
        host = sandbox.host_dir(b)
        assert host.kafka_link.resolve().name == "kafka_2.13-3.7.1"
        text = host.server_properties.read_text()
        assert text.startswith("# managed by hand: keep this line\n")
        assert "inter.broker.protocol.version=3.7\n" in text
        assert list(host.path.glob("server.properties.bak-*")), "a backup is kept beside server.properties"
    assert "KIP-724" in out, "the LMF phase says why it does nothing"
    assert "inter.broker.protocol.version pinned at 3.6" in out
    assert watcher.ever_offline() == [], watcher.explain_offline(sandbox)
    end = snapshot(admin(sandbox.bootstrap_servers))
    assert end.offline == [] and end.under_replicated == []
    # the closing report says what each roll did: pin left every broker alone, binaries and ibp restarted each
    order = r"\[\d, \d, \d\]"
    assert re.search(rf"roll 'pin': restarted none of {order}; left alone {order}: ", out), out[-3000:]
    assert re.search(rf"roll 'binaries': restarted {order} of {order}(?!;)", out), out[-3000:]
    assert re.search(rf"roll 'ibp': restarted {order} of {order}(?!;)", out), out[-3000:]
    assert re.search(rf"upgrade to Kafka 3\.7\.1; found: 3\.6\.2 on brokers {order}", out), \
        "the note says where the upgrade began"

    # the same upgrade again: every broker runs 3.7.1 on IBP 3.7 already; nothing restarted, and the report says so
    again = run_dag("kafka_upgrade", {"cluster": "kafka_sandbox", "target_version": "3.7.1", **FAST})
    assert again.state == "success", again.states
    out = capfd.readouterr().out + caplog.text
    assert started(sandbox) == after, "an upgrade to the release and IBP every broker runs restarts none"
    for roll in ("binaries", "ibp"):
        assert re.search(rf"roll '{roll}': restarted none of {order}; left alone {order}: ", out), out[-3000:]


@pytest.mark.extended
def test_a_rejected_protocol_bump_ends_the_run_on_the_pinned_ibp(fresh_sandbox, use_sandbox):
    sandbox = fresh_sandbox(brokers=3, racks=3)
    use_sandbox(sandbox.workdir)
    sandbox.wait_healthy(timeout_s=120)
    unpack(sandbox, "3.7.1")
    before = starts_so_far(sandbox)
    rejecter = Responder("kafka_upgrade", "approve_protocol_bump", "Reject")
    rejecter.start()
    try:
        result = run_dag("kafka_upgrade", {"cluster": "kafka_sandbox", "target_version": "3.7.1",
                                           "phases": ["binaries", "ibp"], **FAST})
    finally:
        rejecter.stop.set()
    assert rejecter.answered.is_set()
    assert result.state == "success", result.states
    assert result.state_of("ibp.plan") == "skipped" and result.state_of("run_outcome") == "success"
    after = started(sandbox)
    for b in sandbox.broker_ids:
        assert after[b][len(before[b]):] == ["Kafka 3.7.1, IBP 3.6"], "binaries rolled, the IBP left pinned"
        assert "inter.broker.protocol.version=3.6\n" in sandbox.host_dir(b).server_properties.read_text()


@pytest.mark.extended
def test_a_broker_that_fails_on_the_new_release_stops_the_run_with_the_way_back_or_is_reverted(
        fresh_sandbox, use_sandbox, capfd, caplog):
    """Kafka 3.7.1 unpacked on every host, but broken on one (its ``libs/`` holds one corrupt jar: it passes the
    preflight's look, the JVM cannot load ``kafka.Kafka``). (1) The run stops at that broker, which it leaves down,
    and its failure says the way back: the command it prints, run on that host, brings the broker back on 3.6.2.
    (2) With ``revert_failed_broker`` the run does that itself: the broker is back on 3.6.2 and registered when the
    run fails. (3) Once the release is fixed, clearing the failed tasks upgrades it: every broker ends on 3.7.1,
    started once on it; nothing offline at any time, no acknowledged message lost."""
    import re
    import shutil

    from airflow_env import clear_and_resume

    from sandbox.hosts import unpack_kafka

    sandbox = fresh_sandbox(brokers=3, racks=3)
    use_sandbox(sandbox.workdir)
    sandbox.wait_healthy(timeout_s=120)
    before = starts_so_far(sandbox)
    unpack(sandbox, "3.7.1")
    with sandbox.zk() as zk:
        controller = int(__import__("json").loads(zk.get("/controller")[0])["brokerid"])
    broken = next(b for b in sandbox.broker_ids if b != controller)
    host = sandbox.host_dir(broken)
    libs = host.install_dir("3.7.1") / "libs"
    libs.unlink()
    libs.mkdir()
    (libs / "kafka_2.13-3.7.1.jar").write_bytes(b"not a jar")
    params = {"cluster": "kafka_sandbox", "target_version": "3.7.1", "phases": ["pin", "binaries"], **FAST}
    address = sandbox.broker(broken)["host"]

    with watched_traffic(sandbox.workdir, sandbox.bootstrap_servers, sandbox.broker_ids) as traffic, \
            MetadataWatcher(sandbox.bootstrap_servers, interval_s=0.5, zookeeper=sandbox.zookeeper_connect) as watcher:
        began = time.monotonic()
        failed = run_dag("kafka_upgrade", params)
        took = time.monotonic() - began
        out = capfd.readouterr().out + caplog.text
        assert failed.state == "failed", failed.states
        way_back = re.search(rf"broker {broken} is DOWN; this roll's record: (?:prepared|starting) at [^;]+; the way "
                             rf"back: point \S+ back at kafka_2\.13-3\.6\.2 \(Kafka 3\.6\.2, the release it ran "
                             rf"before this roll\): run `([^`]+)` on {re.escape(address)}, then start it", out)
        assert way_back, "the failure says how to put the broker back"
        print(f"(1) stopped at broker {broken} after {took:.1f} s; way back: {way_back.group(1)}")
        assert broken not in snapshot(admin(sandbox.bootstrap_servers)).brokers, "the run left it down"
        assert "and elect its preferred leaders" in out
        rc, _, err = sandbox.ssh(broken, f"{way_back.group(1)} && kafka-service start")
        assert rc == 0, err
        assert host.kafka_link.resolve().name == "kafka_2.13-3.6.2"
        sandbox.wait_healthy(timeout_s=120)
        elected = sandbox.kafka_tool("kafka-leader-election.sh", "--bootstrap-server", sandbox.bootstrap_servers,
                                     "--election-type", "PREFERRED", "--all-topic-partitions")
        assert elected.returncode == 0, elected.stderr
        runs_before = len(sandbox.node_runs(broken))

        began = time.monotonic()
        reverting = run_dag("kafka_upgrade", {**params, "revert_failed_broker": True})
        took = time.monotonic() - began
        assert reverting.state == "failed", reverting.states
        # (the logs of a second dag.test in one process are not captured: judged from the broker and its host)
        print(f"(2) reverted broker {broken} and failed after {took:.1f} s")
        assert host.kafka_link.resolve().name == "kafka_2.13-3.6.2"
        assert broken in snapshot(admin(sandbox.bootstrap_servers)).brokers, "the reverted broker is back"
        assert sandbox.started_releases(broken)[-1].startswith("Kafka 3.6.2"), "back on the old release"
        runs = [os.path.basename(r.release_dir) for r in sandbox.node_runs(broken)][runs_before:]
        assert runs == [host.install_dir("3.7.1").name, host.install_dir("3.6.2").name], \
            f"broker {broken} in the reverting run: a start on the broken 3.7.1, then the run's own on 3.6.2: {runs}"

        shutil.rmtree(libs)
        unpack_kafka(host, "3.7.1")
        resumed = clear_and_resume("kafka_upgrade", reverting.run_id, only_failed=True)
        assert resumed.state == "success", resumed.states
    assert_no_acknowledged_message_lost(traffic)
    assert watcher.ever_offline() == [], "no partition offline\n" + watcher.explain_offline(sandbox)
    after = started(sandbox)
    for b in sandbox.broker_ids:
        assert sandbox.host_dir(b).kafka_link.resolve().name == "kafka_2.13-3.7.1"
        new = after[b][len(before[b]):]
        assert sum(1 for s in new if s.startswith("Kafka 3.7.1")) == 1, f"broker {b} starts: {new}"
    end = snapshot(admin(sandbox.bootstrap_servers))
    assert end.offline == [] and end.under_replicated == []
