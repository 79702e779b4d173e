"""The ZooKeeper-to-KRaft migration (``kafka_zk_to_kraft``) and its revert (``kafka_zk_to_kraft_revert``) run end to
end (``dag.test()``) on real Kafka 3.9.1: a sandbox of this module (3 ZooKeeper-mode brokers, 3 hosts for KRaft
controllers with the release installed and nothing configured), judged from outside: each node's own log (every
start), ZooKeeper's znodes, the hosts' server.properties, a metadata watcher (offline partitions), ``acks=all``
traffic whose acknowledged messages must all be read back, the workload's consumer groups, and at the end Kafka's
own ``kafka-metadata-quorum describe --status``.

The tests run in file order on one sandbox: refusals and the dry run touch nothing; a migration stopped after phase 2
(Reject) is reverted (one broker roll); one stopped after phase 3 is reverted (two broker rolls); the last migrates
the whole way, failing in the middle of phase 3 (a broker's file cannot be parsed), cleared and resumed without
restarting a broker twice.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading

import pytest
from airflow_env import Responder, clear_and_resume, failure_lines, run_dag
from broker_support import module_sandbox
from observers import MetadataWatcher, assert_no_acknowledged_message_lost

from sandbox.traffic_watch import watched_traffic

MIGRATE, REVERT = "kafka_zk_to_kraft", "kafka_zk_to_kraft_revert"
SLOT_MIGRATION = 216  # third address octet of this module's sandbox (see tests/integration/broker_support.py)
# a wait fails after 300 s: on a loaded 2-core CI machine one of its waits once ran out at 120 s (six JVMs, traffic)
FAST = {"healthcheck_interval_s": 1, "healthcheck_timeout_s": 300, "lag_ok_consecutive": 2}
CONTROLLERS = [100, 101, 102]
# A legacy cluster's id that starts with "-" (ZooKeeper mode's ids do, once in 64; CI's sandbox drew this one on
# 2026-12-05 and phase 1 failed: `kafka-storage format -t -ogs...` read the id as a missing value). Every run here
# migrates a cluster with such an id, so the storage tool must get it as one `--cluster-id=<id>` word.
LEGACY_CLUSTER_ID = "-ogsUktwTxKZV4yK-4fLig"


@pytest.fixture(scope="module")
def cluster(request, tmp_path_factory):
    with module_sandbox(request, tmp_path_factory, SLOT_MIGRATION, brokers=3, racks=3, kafka_version="3.9.1",
                        controller_hosts=3, cluster_id=LEGACY_CLUSTER_ID) as running:
        yield running


@pytest.fixture
def variant(cluster, use_sandbox, monkeypatch):
    """``variant(**extra)``: an Airflow connection ``kafka_variant``: this sandbox's profile with ``extra`` changed."""
    from airflow_env import connection_env

    def make(**extra) -> str:
        env = connection_env(cluster.workdir)
        conn = json.loads(env["AIRFLOW_CONN_KAFKA_SANDBOX"])
        conn["extra"] = {**conn["extra"], **extra}
        monkeypatch.setenv("AIRFLOW_CONN_KAFKA_VARIANT", json.dumps(conn))
        return "kafka_variant"

    use_sandbox(cluster.workdir)
    return make


@pytest.fixture
def zk39(cluster, use_sandbox):
    """This module's sandbox, healthy, the Airflow connections pointed at it."""
    use_sandbox(cluster.workdir)
    cluster.wait_healthy(timeout_s=120)
    return cluster


def output(capfd, caplog) -> str:
    return capfd.readouterr().out + caplog.text


def starts(sandbox) -> dict[int, int]:
    """Node id -> how often Kafka logged that it started (brokers and controllers)."""
    return sandbox.starts(sandbox.broker_ids + CONTROLLERS)


def since(sandbox, before: dict[int, int]) -> dict[int, int]:
    now = starts(sandbox)
    return {n: now[n] - before[n] for n in before}


def files(sandbox, ids: list[int]) -> dict[int, str | None]:
    out = {}
    for n in ids:
        path = sandbox.host_dir(n).server_properties
        out[n] = path.read_text() if path.exists() else None
    return out


def znodes(sandbox) -> dict[str, object]:
    with sandbox.zk() as zk:
        def read(path: str):
            return json.loads(zk.get(path)[0]) if zk.exists(path) else None
        return {"migration": read("/migration"), "controller": read("/controller"),
                "controller_epoch": read("/controller_epoch"),
                "registered": sorted(int(i) for i in zk.get_children("/brokers/ids"))}


def metadata_quorum(sandbox) -> str:
    """Kafka's own judge: ``kafka-metadata-quorum --bootstrap-server <brokers> describe --status``."""
    tool = sandbox.host_dir(0).path / "kafka" / "bin" / "kafka-metadata-quorum.sh"
    done = subprocess.run([str(tool), "--bootstrap-server", sandbox.bootstrap_servers, "describe", "--status"],
                          capture_output=True, text=True, timeout=120, env={"KAFKA_HEAP_OPTS": "-Xmx128m",
                                                                           "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def controller_started(sandbox) -> list[int]:
    return [c for c in CONTROLLERS if sandbox.host_dir(c).server_properties.exists()]


def test_bad_input_is_refused_before_anything_is_touched(cluster, variant, capfd, caplog):
    before = starts(cluster)
    hosts = {str(c): cluster.broker(c)["host"] for c in CONTROLLERS}
    clash = variant(controller_hosts={**hosts, "1": hosts.pop("102")})
    result = run_dag(MIGRATE, {"cluster": clash, **FAST})
    text = output(capfd, caplog)
    assert result.state == "failed" and result.state_of("check_migration") == "failed"
    assert "controller node ids [1] are broker ids too" in text, failure_lines(text)

    unreachable = cluster.broker(102)["host"].rsplit(".", 1)[0] + ".250"
    missing = variant(controller_hosts={**{str(c): cluster.broker(c)["host"] for c in CONTROLLERS[:2]},
                                        "102": unreachable})
    result = run_dag(MIGRATE, {"cluster": missing, **FAST})
    text = output(capfd, caplog)
    assert result.state == "failed" and result.state_of("check_migration") == "failed"
    assert f"controller 102 ({unreachable})" in text, failure_lines(text)

    nowhere = variant(controller_properties={"listeners": "CONTROLLER://{host}:9093"})
    result = run_dag(MIGRATE, {"cluster": nowhere, **FAST})
    text = output(capfd, caplog)
    assert result.state == "failed"
    assert "controller_properties name no log.dirs" in text, failure_lines(text)
    assert starts(cluster) == before and controller_started(cluster) == [], "nothing was touched"


def test_brokers_not_on_the_bridge_release_are_refused(sandbox, use_sandbox, capfd, caplog):
    """The session's sandbox runs Kafka 3.6.2 with IBP 3.6 and names no controllers: each is a refusal."""
    use_sandbox(sandbox.workdir)
    before = sandbox.starts()
    result = run_dag(MIGRATE, {"cluster": "kafka_sandbox", **FAST})
    text = output(capfd, caplog)
    assert result.state == "failed" and result.state_of("check_migration") == "failed"
    assert "brokers must run Kafka 3.9.x to migrate (the bridge release): brokers 0 (3.6)" in text, \
        failure_lines(text)
    assert "inter.broker.protocol.version must be 3.9 on every broker before the migration" in text
    assert "the connection lists no controller_hosts" in text
    assert sandbox.starts() == before


def test_dry_run_prints_every_edit_per_host_and_touches_nothing(zk39, capfd, caplog):
    sandbox = zk39
    before = starts(sandbox)
    props = files(sandbox, sandbox.broker_ids)
    result = run_dag(MIGRATE, {"cluster": "kafka_sandbox", "dry_run": True, **FAST})
    text = output(capfd, caplog)
    assert result.state == "success", failure_lines(text)
    assert re.search(r"DRY RUN: phase 1, controller 100 \(\S+\): server.properties:\nprocess.roles=controller\n"
                     r"node.id=100\n", text), text[-3000:]
    assert "zookeeper.metadata.migration.enable=true" in text
    assert re.search(r"DRY RUN: roll migrate, broker 1 \(\S+\): zookeeper.metadata.migration.enable unset -> true",
                     text)
    assert re.search(r"DRY RUN: roll kraft, broker 2 \(\S+\): .*process.roles unset -> broker", text)
    assert re.search(r"broker.id 2 -> removed", text) and "zookeeper.connect 127.0.0.1" in text
    assert "DRY RUN: phase 4, controller 102" in text
    assert "KRaft controllers (dry run: nothing ran): would provision and start [100, 101, 102]" in text
    assert starts(sandbox) == before and controller_started(sandbox) == []
    assert files(sandbox, sandbox.broker_ids) == props


def test_a_migration_stopped_after_phase_2_is_reverted(zk39, capfd, caplog):
    sandbox = zk39
    before = starts(sandbox)
    original = files(sandbox, sandbox.broker_ids)
    rejecter = Responder(MIGRATE, "approve_kraft_brokers", "Reject")
    rejecter.start()
    try:
        result = run_dag(MIGRATE, {"cluster": "kafka_sandbox", **FAST})
    finally:
        rejecter.stop.set()
    text = output(capfd, caplog)
    assert rejecter.answered.is_set(), failure_lines(text)
    assert result.state == "success", failure_lines(text)
    assert result.state_of("kraft_brokers.plan") == "skipped"
    assert since(sandbox, before) == {0: 1, 1: 1, 2: 1, 100: 1, 101: 1, 102: 1}
    assert "KRaft controllers provisioned and started: [100, 101, 102]" in text, "the note names what it started"
    zk = znodes(sandbox)
    assert zk["migration"]["kraft_metadata_offset"] >= 0 and zk["controller"]["brokerid"] in CONTROLLERS
    assert zk["registered"] == [0, 1, 2], "phase 2: the brokers still register in ZooKeeper"

    before = starts(sandbox)
    with watched_traffic(sandbox.workdir, sandbox.bootstrap_servers, sandbox.broker_ids) as traffic, \
            MetadataWatcher(sandbox.bootstrap_servers, interval_s=0.5) as watcher:
        reverted = run_dag(REVERT, {"cluster": "kafka_sandbox", **FAST})
    text = output(capfd, caplog)
    assert reverted.state == "success", failure_lines(text)
    assert_no_acknowledged_message_lost(traffic)
    # the roll that drops the flag began only once every broker knew the new controller (else a controlled shutdown
    # could go to the stopped KRaft controller and end unclean)
    assert re.search(r"ZooKeeper-mode controller: /controller held by broker \d, and every broker names it", text)
    assert watcher.ever_offline() == [], watcher.explain_offline(sandbox)
    assert since(sandbox, before) == {0: 1, 1: 1, 2: 1, 100: 0, 101: 0, 102: 0}, "one roll: the flag removed"
    assert "KRaft controllers stopped and deprovisioned: [100, 101, 102]" in text
    kraft_epoch = int(zk["controller"]["kraftControllerEpoch"])  # before the revert; an election may raise it
    zk = znodes(sandbox)
    # the partition states the KRaft controller wrote name its epoch: the ZooKeeper-mode controller's epoch (read
    # from ZooKeeper, not from the run's log) is above it, else its elections abort and a controlled shutdown ends
    # unclean, its partitions offline (KAFKA-20488)
    said = re.search(r"/controller_epoch (?:raised from \d+ to|(\d+) is not below the KRaft controller's epoch) "
                     r"(\d+)", text)
    assert said, "the revert says what it did with /controller_epoch"
    kraft_epoch = max(kraft_epoch, int(said[2]))
    print(f"KRaft controller epoch {kraft_epoch}, ZooKeeper-mode controller epoch {zk['controller_epoch']}: {said[0]}")
    assert zk["controller_epoch"] > kraft_epoch, (zk["controller_epoch"], kraft_epoch)
    assert zk["migration"] is None and zk["controller"]["brokerid"] in sandbox.broker_ids
    assert controller_started(sandbox) == [], "the controllers' files moved aside"
    for c in CONTROLLERS:
        assert not (sandbox.host_dir(c).data / "__cluster_metadata-0").exists(), "metadata log removed"
    for b in sandbox.broker_ids:
        props = sandbox.host_dir(b).server_properties.read_text()
        assert "zookeeper.metadata.migration.enable" not in props and "controller.quorum.voters" not in props
        assert props.replace("listener.security.protocol.map=PLAINTEXT\\:PLAINTEXT,SSL\\:SSL,SASL_PLAINTEXT\\:"
                             "SASL_PLAINTEXT,SASL_SSL\\:SASL_SSL\n", "") == original[b]


@pytest.mark.extended
def test_a_migration_stopped_after_phase_3_is_reverted_with_two_broker_rolls(zk39, capfd, caplog):
    """Extended (``make test-all``): passed 2 of 3 runs; in the third the test process aborted inside librdkafka (a
    native abort while KRaft brokers turned back into ZooKeeper-mode brokers, in one of the process's several
    confluent-kafka clients), which would take the whole CI session down with it. Under investigation."""
    sandbox = zk39
    before = starts(sandbox)
    rejecter = Responder(MIGRATE, "approve_finalize", "Reject")
    rejecter.start()
    try:
        result = run_dag(MIGRATE, {"cluster": "kafka_sandbox", "approve_kraft_brokers": True, **FAST})
    finally:
        rejecter.stop.set()
    text = output(capfd, caplog)
    assert rejecter.answered.is_set(), failure_lines(text)
    assert result.state == "success", failure_lines(text)
    assert result.state_of("finalize.plan") == "skipped" and result.state_of("run_outcome") == "success"
    assert since(sandbox, before) == {0: 2, 1: 2, 2: 2, 100: 1, 101: 1, 102: 1}
    assert znodes(sandbox)["registered"] == [], "phase 3: no broker registers in ZooKeeper"

    before = starts(sandbox)
    with watched_traffic(sandbox.workdir, sandbox.bootstrap_servers, sandbox.broker_ids) as traffic, \
            MetadataWatcher(sandbox.bootstrap_servers, interval_s=0.5) as watcher:
        reverted = run_dag(REVERT, {"cluster": "kafka_sandbox", "lock_wait": "fail", **FAST})
    text = output(capfd, caplog)
    assert reverted.state == "success", failure_lines(text)
    assert_no_acknowledged_message_lost(traffic)
    assert watcher.ever_offline() == [], watcher.explain_offline(sandbox)
    assert since(sandbox, before) == {0: 2, 1: 2, 2: 2, 100: 0, 101: 0, 102: 0}, "two broker rolls"
    zk = znodes(sandbox)
    assert zk["registered"] == [0, 1, 2] and zk["migration"] is None
    assert zk["controller"]["brokerid"] in sandbox.broker_ids
    for b in sandbox.broker_ids:
        props = sandbox.host_dir(b).server_properties.read_text()
        assert f"broker.id={b}" in props and "process.roles" not in props and "zookeeper.connect=" in props
        assert "zookeeper.session.timeout.ms=6000" in props, "restored from the ZooKeeper-mode backup"
        assert "zookeeper.metadata.migration.enable" not in props


def test_the_whole_migration_cleared_in_the_middle_of_phase_3_resumes_and_finalizes(zk39, capfd, caplog):
    """Broker 1's server.properties gains a line its edit cannot parse once the metadata is migrated: phase 3 stops
    at broker 1 (left stopped, its failure names it); the line removed, clearing the failed tasks resumes there and
    the migration finalizes: every broker restarted exactly twice (once per broker roll), every controller started
    once and restarted once, nothing offline, no acknowledged message lost, and Kafka's own tool as the judge."""
    sandbox = zk39
    before = starts(sandbox)
    props1 = sandbox.host_dir(1).server_properties
    broken, run_ended, errors = threading.Event(), threading.Event(), []

    def migrated(zk) -> bool:
        return zk.exists("/migration") is not None and \
            json.loads(zk.get("/migration")[0]).get("kraft_metadata_offset", -1) >= 0

    def break_broker_1() -> None:
        """Watches /migration on one ZooKeeper session until the run ends (no deadline of its own: on a loaded
        machine phase 2 alone can outlast any guess); a slow or lost session is recorded and opened again."""
        while not run_ended.is_set():
            try:
                with sandbox.zk(timeout_s=30) as zk:
                    while not run_ended.is_set():
                        if migrated(zk):
                            props1.write_text(props1.read_text() + "kafka.ops.test.broken=\\uZZZZ\n")
                            broken.set()
                            return
                        run_ended.wait(0.2)
            except Exception as error:  # noqa: BLE001 - recorded, shown if the line was never written
                errors.append(repr(error))
                run_ended.wait(1)

    breaker = threading.Thread(target=break_broker_1, daemon=True)
    conf = {"cluster": "kafka_sandbox", "approve_kraft_brokers": True, "approve_finalize": True, **FAST}
    with watched_traffic(sandbox.workdir, sandbox.bootstrap_servers, sandbox.broker_ids) as traffic, \
            MetadataWatcher(sandbox.bootstrap_servers, interval_s=0.5) as watcher:
        breaker.start()
        try:
            failed = run_dag(MIGRATE, conf)
        finally:
            run_ended.set()
        text = output(capfd, caplog)
        assert broken.is_set(), (f"the migration never showed as done in /migration while the run went on "
                                 f"({failed.states}); ZooKeeper errors: {errors[-3:]}\n{failure_lines(text)}")
        assert failed.state == "failed", failed.states
        assert failed.state_of("kraft_brokers.broker", 1) == "failed", failure_lines(text)
        assert "broker 1: server.properties: " in text
        assert since(sandbox, before) == {0: 2, 1: 1, 2: 1, 100: 1, 101: 1, 102: 1}
        props1.write_text(props1.read_text().replace("kafka.ops.test.broken=\\uZZZZ\n", ""))
        resumed = clear_and_resume(MIGRATE, failed.run_id, only_failed=True)
    assert resumed.state == "success", resumed.states
    assert resumed.state_of("run_outcome") == "success"
    assert_no_acknowledged_message_lost(traffic)
    assert watcher.ever_offline() == [], watcher.explain_offline(sandbox)
    assert since(sandbox, before) == {0: 2, 1: 2, 2: 2, 100: 2, 101: 2, 102: 2}, \
        "each broker twice (phases 2 and 3; the resumed roll did not restart broker 0 again), each controller " \
        "started once and restarted once (phase 4)"
    assert "Completed migration of metadata from ZooKeeper to KRaft" in "".join(
        sandbox.host_dir(c).server_log.read_text() for c in CONTROLLERS)
    status = metadata_quorum(sandbox)
    leader = int(re.search(r"LeaderId:\s+(\d+)", status).group(1))
    assert leader in CONTROLLERS, status
    assert all(f'"id": {c}' in status for c in CONTROLLERS), status
    for node in CONTROLLERS + sandbox.broker_ids:  # one cluster, under the id it had in ZooKeeper mode
        meta = (sandbox.host_dir(node).data / "meta.properties").read_text()
        assert f"cluster.id={LEGACY_CLUSTER_ID}\n" in meta, (node, meta)
    assert znodes(sandbox)["registered"] == [], "no broker registers in ZooKeeper"
    for b in sandbox.broker_ids:
        props = sandbox.host_dir(b).server_properties.read_text()
        assert "process.roles=broker" in props and f"node.id={b}" in props and "zookeeper" not in props
    for c in CONTROLLERS:
        props = sandbox.host_dir(c).server_properties.read_text()
        assert "zookeeper" not in props and "process.roles=controller" in props
    nothing_writes_zookeeper_any_more(sandbox)


def nothing_writes_zookeeper_any_more(sandbox) -> None:
    """A topic created after the finalization exists in the cluster and not in ZooKeeper (during the dual write
    the controller would have written /brokers/topics/<name>), and /migration stays as it was."""
    from confluent_kafka.admin import AdminClient, NewTopic
    from observers import wait_for

    with sandbox.zk() as zk:
        before = zk.get("/migration")[1].mzxid
    client = AdminClient({"bootstrap.servers": sandbox.bootstrap_servers})
    client.create_topics([NewTopic("after-finalize", 3, 3)])["after-finalize"].result(timeout=30)
    wait_for(lambda: "after-finalize" in client.list_topics(timeout=5).topics, 30, what="the new topic")
    with sandbox.zk() as zk:
        assert not zk.exists("/brokers/topics/after-finalize"), "a finalized cluster does not write ZooKeeper"
        assert zk.get("/migration")[1].mzxid == before
