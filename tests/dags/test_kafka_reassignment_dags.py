"""kafka_scale_out and kafka_decommission run end to end (``dag.test()``, the planner through the real
``spark-submit`` in local mode) against sandbox clusters of their own.

Outcomes are read back through the clients, not from the DAG: replica assignment and ISRs from Metadata,
throttle configs from DescribeConfigs, registrations from ZooKeeper, the planner's files from the run's
directory; an independent metadata watcher sees no offline partition.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from airflow_env import clear_and_resume, published_labels, run_dag
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import ConfigResource, ResourceType
from kafka_ops import properties_file
from observers import MetadataWatcher, admin, assert_no_acknowledged_message_lost, snapshot, wait_for

from sandbox.traffic_watch import watched_traffic

THROTTLE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
TOPIC_THROTTLE_KEYS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
FAST = {"healthcheck_interval_s": 1, "healthcheck_timeout_s": 180, "verify_interval_s": 1}


def registered(sandbox) -> set[int]:
    with sandbox.zk() as zk:
        return {int(b) for b in zk.get_children("/brokers/ids")}


def throttles_left(sandbox) -> dict[str, dict[str, str]]:
    """Every throttle config still set on a broker or topic (dynamic values), as the clients see them."""
    client = admin(sandbox.bootstrap_servers)
    view = snapshot(client)
    calls = [[ConfigResource(ResourceType.BROKER, str(b))] for b in sorted(view.brokers)]  # one broker per call
    calls.append([ConfigResource(ResourceType.TOPIC, t) for t in sorted({p.topic for p in view.partitions})])
    futures = {res: fut for call in calls for res, fut in client.describe_configs(call).items()}
    left = {}
    for res, fut in futures.items():
        try:
            entries = fut.result(timeout=30)
        except KafkaException as exc:  # a topic deleted since the snapshot (the traffic's own) holds no throttle
            if res.restype == ResourceType.TOPIC and exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                continue
            raise
        keys = THROTTLE_KEYS if res.restype == ResourceType.BROKER else TOPIC_THROTTLE_KEYS
        dynamic = {k: entries[k].value for k in keys if k in entries and not entries[k].is_default
                   and entries[k].value not in ("", None, "9223372036854775807")}
        if dynamic:
            left[f"{res.restype.name.lower()} {res.name}"] = dynamic
    return left


def replica_counts(view) -> dict[int, int]:
    counts = {b: 0 for b in view.brokers}
    for p in view.partitions:
        for r in p.replicas:
            counts[r] = counts.get(r, 0) + 1
    return counts


def replication_factors(view) -> dict[tuple[str, int], int]:
    """``{(topic, partition): replication factor}`` of a metadata view."""
    return {(p.topic, p.partition): len(p.replicas) for p in view.partitions}


def run_directory(run_id_prefix: str, dag_id: str) -> Path:
    """The newest run directory of ``dag_id`` (``$AIRFLOW_HOME/kafka-ops-data/<dag>/<run>``)."""
    root = Path(os.environ["AIRFLOW_HOME"]) / "kafka-ops-data" / dag_id
    runs = sorted((p for p in root.iterdir() if p.name.startswith(run_id_prefix)), key=lambda p: p.stat().st_mtime)
    return runs[-1]


def defer_every_wave(monkeypatch) -> None:
    """Waves wait deferred at once (no minute of in-task polling first) and the trigger checks after 1 s, so
    the deferred path (triggers.wave_progress, run inline by dag.test) carries the waves of this test."""
    import operators.reassignment_wave as wave_op
    import triggers.wave_progress as progress

    monkeypatch.setattr(wave_op, "VERIFY_INLINE_S", 0.0)
    monkeypatch.setattr(progress, "FIRST_CHECK_AFTER_S", 1.0)


def test_scale_out_starts_the_new_broker_and_moves_its_share_to_it(fresh_sandbox, use_sandbox, monkeypatch, capfd,
                                                                   caplog):
    defer_every_wave(monkeypatch)
    # racks the new broker can even out; the product reaches the cluster through SASL_SSL (replication and the
    # observers below through the PLAINTEXT listener), the new broker too
    sandbox = fresh_sandbox(brokers=3, spare_brokers=1, racks=2, client_sasl=True, client_tls=True)
    use_sandbox(sandbox.workdir)
    sandbox.wait_healthy(timeout_s=120)
    assert 3 not in registered(sandbox)
    before = snapshot(admin(sandbox.bootstrap_servers))

    # a new broker's host whose server.properties starts another broker (a broker_hosts entry pointing at the wrong
    # host): refused before anything is touched, in a real run as in a dry run
    # or one without the broker.rack the other brokers have, which the rack-aware plan cannot place
    props = sandbox.host_dir(3).server_properties
    good = props.read_text()
    rack_line = next(line for line in good.splitlines(keepends=True) if line.startswith("broker.rack="))
    assert "broker.id=3\n" in good
    wrong_files = {"has broker.id=4: that host starts broker 4, not 3": good.replace("broker.id=3\n", "broker.id=4\n"),
                   "sets no broker.rack, while the brokers have racks": good.replace(rack_line, "")}
    for refusal, bad in wrong_files.items():
        props.write_text(bad)
        try:
            wrong = run_dag("kafka_scale_out", {"cluster": "kafka_sandbox", "brokers": [3], "start_new_brokers": True,
                                                **FAST})
        finally:
            props.write_text(good)
        text = capfd.readouterr().out + caplog.text
        assert wrong.state == "failed" and wrong.state_of("validate") == "failed", wrong.states
        assert refusal in text and "nothing was touched" in text, text[-3000:]
        assert sandbox.starts([3]) == {3: 0} and 3 not in registered(sandbox)

    # a host whose key the SSH connection does not know: refused, naming it, before anything is touched
    hosts = json.loads(os.environ["AIRFLOW_CONN_KAFKA_SANDBOX"])["extra"]["broker_hosts"]
    with monkeypatch.context() as patch:
        with_profile(patch, broker_hosts={**hosts, "3": "127.0.0.251"})
        unknown = run_dag("kafka_scale_out", {"cluster": "kafka_sandbox", "brokers": [3], "start_new_brokers": True,
                                              "dry_run": True, **FAST})
    text = capfd.readouterr().out + caplog.text
    assert unknown.state == "failed" and unknown.state_of("validate") == "failed", unknown.states
    assert "broker 3 (127.0.0.251): reading server.properties: " in text and "nothing was touched" in text, \
        text[-3000:]

    # a dry run with no server_properties in the profile cannot learn the new broker's rack: refused, named
    with monkeypatch.context() as patch:
        conn = json.loads(os.environ["AIRFLOW_CONN_KAFKA_SANDBOX"])
        conn["extra"] = {k: v for k, v in conn["extra"].items() if k != "server_properties"}
        patch.setenv("AIRFLOW_CONN_KAFKA_SANDBOX", json.dumps(conn))
        blind = run_dag("kafka_scale_out", {"cluster": "kafka_sandbox", "brokers": [3], "start_new_brokers": True,
                                            "dry_run": True, **FAST})
    text = capfd.readouterr().out + caplog.text
    assert blind.state == "failed" and blind.state_of("validate") == "failed", blind.states
    assert "names no server_properties to read it from" in text and "nothing was touched" in text, text[-3000:]

    # the runbook's dry run first: broker 3 is planned onto as its host's server.properties describes it, nothing is
    # started, throttled or moved
    dry = run_dag("kafka_scale_out", {"cluster": "kafka_sandbox", "brokers": [3], "start_new_brokers": True,
                                      "dry_run": True, **FAST})
    text = capfd.readouterr().out + caplog.text
    assert dry.state == "success", dry.states
    assert sandbox.starts([3]) == {3: 0} and 3 not in registered(sandbox), "a dry run starts nothing"
    dry_dir = run_directory("manual", "kafka_scale_out")
    listed = {b["id"]: b for b in json.loads((dry_dir / "snapshot" / "brokers.json").read_text())}
    rack = properties_file.parse(sandbox.host_dir(3).server_properties.read_text())["broker.rack"]
    assert listed[3]["rack"] == rack == sandbox.broker(3)["rack"] and listed[3]["host"] == sandbox.broker(3)["host"]
    dry_moves = json.loads((dry_dir / "plan" / "reassignment.json").read_text())["partitions"]
    assert any(3 in p["replicas"] for p in dry_moves), "the dry run's plan moves replicas onto broker 3"
    assert "brokers [3] are not started: planned onto as their server.properties describe them" in text, text[-3000:]
    # its disk, which answers no DescribeLogDirs before it starts, measured on its host (df) and judged with the rest
    data = properties_file.parse(sandbox.host_dir(3).server_properties.read_text())["log.dirs"]
    measured = re.search(rf"disk preflight: broker 3 is not started: its log dirs measured on its host \(df\): "
                         rf"{re.escape(data)} (\d+) bytes usable", text)
    assert measured, text[-3000:]
    existing = next(p for p in [Path(data), *Path(data).parents] if p.exists())
    stat = os.statvfs(existing)
    assert abs(int(measured[1]) - stat.f_bavail * stat.f_frsize) < 256 * 1024 * 1024, measured[0]
    assert re.search(rf"disk preflight: every receiving broker has room \(.*broker 3: \d+ bytes to receive, "
                     rf"{measured[1]} usable", text), text[-3000:]
    assert "DRY RUN: wave 1/" in text
    # the run's note (run_outcome logs its items) says what the plan would move and where its files are
    files = re.escape(str(dry_dir / "plan"))
    line = re.search(rf"plan \(dry run: nothing moved\): {len(dry_moves)} moves in \d+ waves?, [\d.]+ GB; replicas "
                     rf"per broker: ([^;]+); files in {files}", text)
    assert line, text[-3000:]
    net = {int(b): int(n) for b, n in (pair.split() for pair in line[1].split(", "))}
    assert net[3] == sum(3 in p["replicas"] for p in dry_moves) > 0 and sum(net.values()) == 0, net
    layout_before = {(p.topic, p.partition): p.replicas for p in before.partitions}
    unmoved = {(p.topic, p.partition): p.replicas for p in snapshot(admin(sandbox.bootstrap_servers)).partitions}
    assert {k: v for k, v in unmoved.items() if k in layout_before} == layout_before, "nothing moved"
    assert throttles_left(sandbox) == {}, "nothing throttled"

    caplog.clear()
    with watched_traffic(sandbox.workdir, sandbox.bootstrap_servers, sandbox.broker_ids) as traffic, \
            MetadataWatcher(sandbox.bootstrap_servers, interval_s=0.5) as watcher:
        result = run_dag("kafka_scale_out", {"cluster": "kafka_sandbox", "brokers": [3], "start_new_brokers": True,
                                             "throttle_bytes_per_s": 200_000_000, **FAST})
        # read before Kafka's verify below (it clears every throttle it finds) and before the traffic's topics,
        # which the plan moved too, are deleted
        throttles_after_run = throttles_left(sandbox)
        run_dir = run_directory("manual", "kafka_scale_out")
        # Kafka's own tool judges the plan the run executed: every partition's reassignment is complete
        verify = sandbox.kafka_tool("kafka-reassign-partitions.sh", "--bootstrap-server", sandbox.bootstrap_servers,
                                    "--verify", "--reassignment-json-file", str(run_dir / "plan" / "reassignment.json"))
    print(traffic.summary())
    assert_no_acknowledged_message_lost(traffic)
    assert result.state == "success", result.states
    text = capfd.readouterr().out + caplog.text
    assert "waiting deferred (no worker slot held)" in text
    waves = len(json.loads((run_dir / "plan" / "waves.json").read_text()))
    assert f"waves done {waves} of {waves}; files in {run_dir / 'plan'}" in text, text[-3000:]
    assert 3 in registered(sandbox), "the new broker was started and registered"
    assert "brokers started: [3]" in text, "the note says what the run started"
    after = wait_for(lambda: (v := snapshot(admin(sandbox.bootstrap_servers))) and not v.under_replicated and v, 60,
                     what="every partition in sync")
    counts = replica_counts(after)
    # per partition of the topics there before the run: the traffic's own topics, created after `before` and deleted
    # when the traffic ends, may still be listed while Kafka deletes them
    factors_before = replication_factors(before)
    factors_after = {k: rf for k, rf in replication_factors(after).items() if k in factors_before}
    assert factors_after == factors_before, "replication factors kept"
    # bytes per broker as the brokers report them (DescribeLogDirs): the planner balances bytes; on this
    # 57-partition cluster the largest partition is ~10 % of a broker's share, so "even" is within 15 %
    from broker_support import log_dir_sizes
    from kafka import KafkaAdminClient

    kp = KafkaAdminClient(bootstrap_servers=sandbox.bootstrap_servers)
    try:
        held = {b: sum(int(part["partition_size"]) for part in log_dir_sizes(kp, b).values()) for b in counts}
    finally:
        kp.close()
    mean = sum(held.values()) / len(held)
    assert held[3] >= 0.85 * mean, f"broker 3 holds its share of the bytes: {held} (replicas {counts})"
    assert max(held.values()) <= 1.15 * mean, f"bytes are even across brokers: {held}"
    assert after.offline == [] and watcher.ever_offline() == []
    assert throttles_after_run == {}, "no throttle is left on any broker or topic"
    labels = result.mapped_labels("reassign.wave")
    assert labels and all(label.startswith("wave ") and " moves)" in label for label in labels), labels
    assert published_labels("kafka_scale_out", result.run_id) == {"reassign.wave": labels}
    for name in ("reassignment.json", "rollback.json", "waves.json", "summary.json", "balance.png"):
        assert (run_dir / "plan" / name).stat().st_size > 0, name
    rollback = json.loads((run_dir / "plan" / "rollback.json").read_text())
    assert rollback["version"] == 1 and all(3 not in p["replicas"] for p in rollback["partitions"])
    plan = json.loads((run_dir / "plan" / "reassignment.json").read_text())
    assert verify.returncode == 0, verify.stdout + verify.stderr
    statuses = re.findall(r"^Reassignment of partition (\S+) is (.*)$", verify.stdout, re.M)
    assert len(statuses) == len(plan["partitions"]) > 0, verify.stdout
    assert all(status.startswith("complete") for _, status in statuses), verify.stdout

    # the same scale-out triggered again (twice by accident): refused before anything is touched, broker 3 neither
    # started again nor drained, nothing moved
    caplog.clear()
    starts = sandbox.starts([3])
    layout = {(p.topic, p.partition): p.replicas for p in after.partitions if (p.topic, p.partition) in factors_before}
    again = run_dag("kafka_scale_out", {"cluster": "kafka_sandbox", "brokers": [3], "start_new_brokers": True,
                                        "throttle_bytes_per_s": 200_000_000, **FAST})
    text = capfd.readouterr().out + caplog.text
    assert again.state == "failed" and again.state_of("validate") == "failed", again.states
    assert again.state_of("start_new_brokers") != "success" and again.state_of("reassign.plan") != "success"
    assert "broker 3 already holds" in text and "this is a rebalance, not a scale-out" in text, text[-3000:]
    assert "nothing was touched" in text
    assert sandbox.starts([3]) == starts, "broker 3 was not started again"
    now = {(p.topic, p.partition): p.replicas for p in snapshot(admin(sandbox.bootstrap_servers)).partitions}
    assert layout and {k: v for k, v in now.items() if k in layout} == layout, "nothing moved"

    # the succeeded run cleared whole (the UI's "Clear Run", as after a run stopped from outside): its validate tells
    # the replicas it moved to broker 3 from anyone else's (the record its first try left in the run's directory),
    # broker 3 is not started again, and the run keeps its own finished plan: no new snapshot, no spark-submit, no
    # partition moved again (a new plan would even out the bytes the traffic wrote since: a few moves each clear)
    caplog.clear()
    plan_before = (run_dir / "plan" / "reassignment.json").read_text()
    cleared = clear_and_resume("kafka_scale_out", result.run_id, only_failed=False)
    text = capfd.readouterr().out + caplog.text
    assert cleared.state == "success", cleared.states
    assert re.search(r"broker 3 holds \d+ replicas this run moved to it \(it held none when the run was accepted at ",
                     text), text[-3000:]
    assert "broker 3 is registered already: not started" in text and sandbox.starts([3]) == starts
    # the test's traffic topics, moved by the plan too, were deleted when the traffic ended: nothing to move for them
    moves = len(plan["partitions"])
    kept = re.search(rf"an earlier try of this run planned {moves} moves \((\d+) at their target(?:, (\d+) of "
                     r"deleted partitions)?\): all made; this try keeps that plan and its snapshot: nothing is moved "
                     r"again", text)
    assert kept, text[-3000:]
    made = int(kept.group(1))
    assert made + int(kept.group(2) or 0) == moves and made > 0
    assert "not planning: the snapshot task kept the plan of an earlier try of this run" in text
    assert f"{made} of {moves} moves are at their target already (a resumed run)" in text
    idle = re.findall(r"\): nothing left to move \(\d+ at their target", text)
    assert len(idle) == waves, "no wave moved a partition"
    assert (run_dir / "plan" / "reassignment.json").read_text() == plan_before, "the plan files are the first try's"
    assert "**Succeeded**: scale-out on kafka_sandbox" in text
    assert "brokers started: none; registered already: [3]" in text, "the note names nothing started by the clear"
    final = wait_for(lambda: (v := snapshot(admin(sandbox.bootstrap_servers))) and not v.under_replicated and v, 60,
                     what="every partition in sync after the cleared run")
    now = {(p.topic, p.partition): p.replicas for p in final.partitions}
    assert {k: v for k, v in now.items() if k in layout} == layout, "the clear moved nothing"
    assert final.offline == [] and throttles_left(sandbox) == {}


def with_profile(monkeypatch: pytest.MonkeyPatch, **changes) -> None:
    """Change the kafka_sandbox connection's profile (extra) for this test."""
    conn = json.loads(os.environ["AIRFLOW_CONN_KAFKA_SANDBOX"])
    conn["extra"] = {**conn["extra"], **changes}
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_SANDBOX", json.dumps(conn))


def test_decommission_drains_and_stops_the_broker_and_refuses_bad_input(fresh_sandbox, use_sandbox, monkeypatch,
                                                                       capfd, caplog):
    """Also the path of ZooKeeper clusters before Kafka 2.4 (``reassignment_via: zookeeper``: the moves go
    through /admin/reassign_partitions); the scale-out and stuck-wave tests use the admin API. The product reaches
    the brokers through SASL_PLAINTEXT with SCRAM-SHA-512 (KIP-84): a salted credential in ZooKeeper, which Kafka's
    own kafka-configs describes and every broker checks (a wrong password refused)."""
    from sandbox import scram, state
    from sandbox.layout import Workdir

    sandbox = fresh_sandbox(brokers=4, racks=2, client_sasl=True, sasl_mechanism="SCRAM-SHA-512")
    use_sandbox(sandbox.workdir)
    with_profile(monkeypatch, reassignment_via="zookeeper")
    sandbox.wait_healthy(timeout_s=120)
    described = sandbox.kafka_tool("kafka-configs.sh", "--bootstrap-server", sandbox.bootstrap_servers, "--describe",
                                   "--entity-type", "users", "--entity-name", "kafkaops")
    assert "SCRAM-SHA-512=iterations=4096" in described.stdout, (described.stdout, described.stderr)
    info = state.load(Workdir.at(sandbox.workdir))
    for address in sandbox.client_bootstrap_servers.split(","):
        assert scram.login_error(info, address) is None, f"{address} accepts the connection's login"
        assert "Authentication failed" in (scram.login_error(info, address, password="wrong") or ""), address
    before = snapshot(admin(sandbox.bootstrap_servers))

    for conf, expected in [({"brokers": [9]}, "unknown"), ({"brokers": [1, 2, 3]}, "replication factor")]:
        refused = run_dag("kafka_decommission", {"cluster": "kafka_sandbox", **FAST, **conf})
        assert refused.state == "failed" and refused.state_of("validate") == "failed"
        assert expected in capfd.readouterr().out + caplog.text
    assert snapshot(admin(sandbox.bootstrap_servers)).partitions == before.partitions, "refusals touched nothing"

    dry = run_dag("kafka_decommission", {"cluster": "kafka_sandbox", "brokers": [2], "dry_run": True, **FAST})
    assert dry.state == "success", dry.states
    assert registered(sandbox) == {0, 1, 2, 3}
    assert sorted((p.topic, p.partition, p.replicas) for p in snapshot(admin(sandbox.bootstrap_servers)).partitions) \
        == sorted((p.topic, p.partition, p.replicas) for p in before.partitions), "a dry run moves nothing"
    dry_dir = run_directory("manual", "kafka_decommission")
    assert (dry_dir / "plan" / "waves.json").exists() and (dry_dir / "plan" / "balance.png").exists()

    with watched_traffic(sandbox.workdir, sandbox.bootstrap_servers, sandbox.broker_ids) as traffic, \
            MetadataWatcher(sandbox.bootstrap_servers, interval_s=0.5) as watcher:
        result = run_dag("kafka_decommission", {"cluster": "kafka_sandbox", "brokers": [2], "drain_only": True,
                                                "throttle_bytes_per_s": 200_000_000, **FAST})
    print(traffic.summary())
    assert_no_acknowledged_message_lost(traffic)
    assert result.state == "success", result.states
    after = snapshot(admin(sandbox.bootstrap_servers))
    assert all(2 not in p.replicas for p in after.partitions), "broker 2 holds nothing"
    # drain only: a partition without a replica on broker 2 kept its replica list (order too), one with it kept
    # its other replicas; the plan copied exactly what broker 2 held
    now = {(p.topic, p.partition): p.replicas for p in after.partitions}
    for p in before.partitions:
        if 2 in p.replicas:
            assert set(p.replicas) - {2} <= set(now[p.topic, p.partition]), (p.topic, p.partition, p.replicas)
        elif (p.topic, p.partition) in now:  # not a topic the traffic deleted since
            assert now[p.topic, p.partition] == p.replicas, (p.topic, p.partition)
    run_dir = run_directory("manual", "kafka_decommission")
    summary = json.loads((run_dir / "plan" / "summary.json").read_text())
    held = sum(json.loads(line)["size_bytes"] * json.loads(line)["replicas"].count(2)
               for line in (run_dir / "snapshot" / "partitions.jsonl").read_text().splitlines() if line.strip())
    assert summary["options"]["drain_only"] is True and summary["bytes_moved"] == held
    assert any(note.startswith("drain only:") for note in summary["notes"])
    logs = capfd.readouterr().out + caplog.text
    assert "--drain-only" in logs
    # the run's note: every wave done, broker 2 losing exactly the replicas the run's snapshot had on it
    held_count = sum(2 in json.loads(line)["replicas"]
                     for line in (run_dir / "snapshot" / "partitions.jsonl").read_text().splitlines() if line.strip())
    line = re.search(r"plan: \d+ moves? in (\d+) waves?, [\d.]+ GB; replicas per broker: ([^;]+); waves done (\d+) of "
                     r"(\d+)", logs)
    assert line and line[1] == line[3] == line[4], logs[-3000:]
    net = {int(b): int(n) for b, n in (pair.split() for pair in line[2].split(", "))}
    assert net[2] == -held_count and sum(net.values()) == 0, net
    assert after.led_by(2) == []
    assert 2 not in registered(sandbox), "broker 2 was stopped"
    assert "brokers stopped: [2]" in logs and "unregistered" not in logs.split("brokers stopped: [2]")[1][:40], \
        "the note says what the run stopped (ZooKeeper mode: nothing to unregister)"
    rc, out, _ = sandbox.ssh(2, "kafka-service status")
    assert rc != 0 or "stopped" in out or "not running" in out, out
    assert after.under_replicated == [] and after.offline == [] and watcher.ever_offline() == []
    assert throttles_left(sandbox) == {}
    assert "through ZooKeeper" in logs

    # the succeeded run cleared whole (the UI's "Clear Run", as after a run stopped from outside): broker 2, which the
    # run itself drained and stopped, is not refused as an unknown broker; nothing is left to do, the rest skipped
    starts = sandbox.starts()
    cleared = clear_and_resume("kafka_decommission", result.run_id, only_failed=False)
    text = capfd.readouterr().out + caplog.text
    assert cleared.state == "success", cleared.states
    assert cleared.state_of("validate") == "skipped" and cleared.state_of("reassign.plan") == "skipped", \
        cleared.states
    assert "broker 2 was drained and stopped by this run (registered when the run was accepted at " in text
    assert "done by an earlier try of this run (drained and stopped): nothing left to do" in text, text[-3000:]
    assert "unknown broker ids" not in text and "**Succeeded**: decommission on kafka_sandbox" in text
    assert sandbox.starts() == starts and registered(sandbox) == {0, 1, 3}, "nothing started or stopped"
    assert throttles_left(sandbox) == {}


@pytest.mark.parametrize("deferred", [pytest.param(False, marks=pytest.mark.extended), True],
                         ids=["in-task", "deferred"])
def test_a_stuck_wave_is_cancelled_and_its_throttles_removed(deferred, fresh_sandbox, use_sandbox, monkeypatch, capfd,
                                                             caplog):
    """A throttle of 1 byte/s, below what the moved partitions are written at (the sandbox's producers), is refused
    by check_plan's throttle preflight before anything moves, naming a broker and the rate. Past that preflight (the
    test's stand-in for a throttle it cannot judge: readings too close together), a wave at 1 byte/s times out (in
    its task, or in the triggerer when the wait was deferred): its moves are cancelled, the DAG fails naming them,
    the throttles are removed, the cluster ends healthy."""
    import operators.reassignment_plan as reassignment_plan

    if deferred:
        defer_every_wave(monkeypatch)
    sandbox = fresh_sandbox(brokers=4, racks=2)
    use_sandbox(sandbox.workdir)
    sandbox.wait_healthy(timeout_s=120)
    before = snapshot(admin(sandbox.bootstrap_servers))
    refused = run_dag("kafka_decommission", {"cluster": "kafka_sandbox", "brokers": [3], "throttle_bytes_per_s": 1,
                                             **FAST})
    out = capfd.readouterr().out + caplog.text
    assert refused.state == "failed" and refused.state_of("reassign.check_plan") == "failed", refused.states
    assert "**Refused**: decommission on kafka_sandbox: reassign.check_plan: throttle preflight" in out
    assert "and trigger a new run (clearing would run the same params again)" in out
    assert re.search(r"throttle preflight: throttle_bytes_per_s 1 is too low \(nothing was moved\): wave 1: broker "
                     r"\d+ (receives|leads, for the replicas it feeds,) partitions written at [\d.]+ (bytes|kB)/s in "
                     r"all \([^)]+\), above the throttle of 1 bytes/s", out), out[-3000:]
    # lead_away put broker 3 last in its replica lists before the plan (leadership only): no replica moved
    now = snapshot(admin(sandbox.bootstrap_servers))
    replica_sets = {(p.topic, p.partition): set(p.replicas) for p in now.partitions}
    assert replica_sets == {(p.topic, p.partition): set(p.replicas) for p in before.partitions}, "nothing moved"
    monkeypatch.setattr(reassignment_plan, "MIN_WINDOW_S", 1e9)
    result = run_dag("kafka_decommission", {"cluster": "kafka_sandbox", "brokers": [3], "throttle_bytes_per_s": 1,
                                            "verify_timeout_s": 10, **FAST})
    assert result.state == "failed"
    assert "failed" in result.mapped_states("reassign.wave")
    out = capfd.readouterr().out + caplog.text
    assert "stuck partitions" in out and "cancelled" in out
    assert throttles_left(sandbox) == {}, "the throttles were removed after the failure"
    assert 3 in registered(sandbox), "a broker that still holds replicas is not stopped"
    view = wait_for(lambda: (v := snapshot(admin(sandbox.bootstrap_servers))) and not v.under_replicated and v, 60,
                    what="the cluster healthy again")
    assert view.offline == []
    assert {(p.topic, p.partition) for p in view.partitions} == {(p.topic, p.partition) for p in before.partitions}


@pytest.mark.parametrize("dag_id", ["kafka_scale_out", "kafka_decommission"])
def test_reassignment_dags_need_brokers(dag_id, sandbox, use_sandbox):
    from airflow.sdk.exceptions import ParamValidationError

    use_sandbox(sandbox.workdir)
    with pytest.raises(ParamValidationError):
        run_dag(dag_id, {"cluster": "kafka_sandbox", "brokers": []})
