"""The sandbox's Kafka parts without starting anything: releases assembled from Maven Central (pom, main class
choice, launchers), the nodes' server.properties, what a node's log says, the Burrow source change."""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import javaproperties
import pytest

from sandbox import burrow, burrow_build, kafka_config, kafka_release, kraft_storage, node_log, settings
from sandbox.layout import Workdir


def _jar(path: Path, classes: list[str]) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        for name in classes:
            archive.writestr(name.replace(".", "/") + ".class", b"\xca\xfe\xba\xbe")


def test_the_pom_asks_for_the_server_the_tools_and_the_logging_backend_of_4x() -> None:
    pom = kafka_release._pom(kafka_release.RELEASES["4.0.0"])
    assert "<artifactId>kafka_2.13</artifactId><version>4.0.0</version>" in pom
    assert "<artifactId>kafka-tools</artifactId><version>4.0.0</version>" in pom
    assert f"<artifactId>log4j-slf4j-impl</artifactId><version>{kafka_release.LOG4J2_VERSION}</version>" in pom
    three = kafka_release._pom(kafka_release.RELEASES["3.6.2"])
    assert "log4j" not in three, "3.x: slf4j-reload4j is already a runtime dependency of kafka_2.13"


def test_each_launcher_runs_the_newest_main_class_the_release_has(tmp_path) -> None:
    libs = tmp_path / "libs"
    libs.mkdir()
    _jar(libs / "kafka_2.13-3.6.2.jar", ["kafka.Kafka", "kafka.tools.StorageTool", "kafka.admin.TopicCommand",
                                        "kafka.admin.TopicCommand$TopicService"])
    _jar(libs / "kafka-tools-3.6.2.jar", ["org.apache.kafka.tools.MetadataQuorumCommand"])
    tools = kafka_release.main_classes(libs)
    assert tools == {"kafka-server-start.sh": "kafka.Kafka", "kafka-storage.sh": "kafka.tools.StorageTool",
                     "kafka-topics.sh": "kafka.admin.TopicCommand",
                     "kafka-metadata-quorum.sh": "org.apache.kafka.tools.MetadataQuorumCommand"}
    _jar(libs / "kafka-tools-3.7.1.jar", ["org.apache.kafka.tools.TopicCommand"])
    assert kafka_release.main_classes(libs)["kafka-topics.sh"] == "org.apache.kafka.tools.TopicCommand"


def test_a_library_without_kafkas_server_is_refused(tmp_path) -> None:
    libs = tmp_path / "libs"
    libs.mkdir()
    _jar(libs / "kafka-clients-4.0.0.jar", ["org.apache.kafka.clients.admin.Admin"])
    with pytest.raises(kafka_release.ReleaseError, match=r"no class for \['kafka-server-start.sh', "
                                                         r"'kafka-storage.sh'\]"):
        kafka_release.main_classes(libs)


def test_launchers_run_java_on_the_release_libs_with_its_log_config(tmp_path) -> None:
    root = tmp_path / "4.0.0"
    (root / "libs").mkdir(parents=True)
    kafka_release.write_launchers(root, kafka_release.RELEASES["4.0.0"],
                                  {"kafka-server-start.sh": "kafka.Kafka",
                                   "kafka-topics.sh": "org.apache.kafka.tools.TopicCommand"})
    run_class = (root / "bin/kafka-run-class.sh").read_text()
    assert '-cp "$libs/*" "$@"' in run_class
    assert "config/tools-log4j2.properties" in run_class
    assert "config/log4j2.properties" in (root / "bin/kafka-server-start.sh").read_text()
    assert (root / "bin/kafka-topics.sh").read_text().endswith(
        'kafka-run-class.sh" org.apache.kafka.tools.TopicCommand "$@"\n')
    assert all(p.stat().st_mode & 0o111 for p in (root / "bin").iterdir())
    # the launcher execs java with what the caller sets: a fake java that prints its arguments
    fake = tmp_path / "jdk/bin/java"
    fake.parent.mkdir(parents=True)
    fake.write_text("#!/bin/sh\necho \"$@\"\n")
    fake.chmod(0o755)
    out = subprocess.run([str(root / "bin/kafka-topics.sh"), "--version"], capture_output=True, text=True,
                         env={"JAVA_HOME": str(tmp_path / "jdk"), "PATH": "/usr/bin:/bin",
                              "KAFKA_HEAP_OPTS": "-Xmx64m"}, check=True).stdout.split()
    assert out[0] == "-Xmx64m" and out[-2:] == ["org.apache.kafka.tools.TopicCommand", "--version"]
    assert f"{root.resolve()}/libs/*" in out
    assert not any(a.startswith("-XX:SharedArchiveFile") for a in out)  # no archive: none named
    (root / "kafka.jsa").write_bytes(b"archive")
    out = subprocess.run([str(root / "bin/kafka-topics.sh"), "--version"], capture_output=True, text=True,
                         env={"JAVA_HOME": str(tmp_path / "jdk"), "PATH": "/usr/bin:/bin"}, check=True).stdout.split()
    assert f"-XX:SharedArchiveFile={root.resolve()}/libs/../kafka.jsa" in out


def test_a_release_that_is_not_pinned_or_not_assembled_says_what_to_run(tmp_path) -> None:
    with pytest.raises(kafka_release.ReleaseError, match="not a release the sandbox pins"):
        kafka_release.release_dir("2.8.2", tmp_path)
    with pytest.raises(kafka_release.ReleaseError, match="run `make install`"):
        kafka_release.release_dir("3.6.2", tmp_path)


def test_an_assembled_release_is_not_assembled_again_and_a_partial_one_is(tmp_path) -> None:
    """A second ``make install`` downloads nothing: a release with its manifest (written last) is taken as it
    is, Maven is not even looked for; one without it (an interrupted assembly) is assembled again."""
    root = kafka_release.release_root("3.6.2", tmp_path)
    (root / "libs").mkdir(parents=True)
    (root / kafka_release.MANIFEST).write_text('{"version": "3.6.2"}')
    assert kafka_release.assemble("3.6.2", tmp_path, mvn="no-such-mvn-here") == root
    (root / kafka_release.MANIFEST).unlink()
    with pytest.raises(kafka_release.ReleaseError, match="Maven .* is needed"):
        kafka_release.assemble("3.6.2", tmp_path, mvn="no-such-mvn-here")


def test_class_lists_merge_each_class_once_and_the_at_lines_after_them(tmp_path) -> None:
    """The archive's class list is the union of a KRaft node's and a ZooKeeper-mode broker's
    (``-XX:DumpLoadedClassList``): ``-Xshare:dump`` wants each class once, the ``@`` lines (lambda proxies) after
    the classes they name."""
    kraft, zookeeper = tmp_path / "kraft.classlist", tmp_path / "zookeeper.classlist"
    kraft.write_text("# NOTE: Do not modify this file.\njava/lang/Object\nkafka/Kafka\n"
                     "@lambda-proxy kafka/Kafka run ()V\norg/apache/kafka/controller/QuorumController\n")
    zookeeper.write_text("# NOTE\njava/lang/Object\nkafka/Kafka\nkafka/zk/KafkaZkClient\n"
                         "@lambda-proxy kafka/Kafka run ()V\n@lambda-proxy kafka/zk/KafkaZkClient x ()V\n")
    merged = tmp_path / "merged.classlist"
    assert kafka_release.merge_class_lists([kraft, zookeeper], merged) == 4
    assert merged.read_text().splitlines() == [
        "java/lang/Object", "kafka/Kafka", "org/apache/kafka/controller/QuorumController", "kafka/zk/KafkaZkClient",
        "@lambda-proxy kafka/Kafka run ()V", "@lambda-proxy kafka/zk/KafkaZkClient x ()V"]


def test_install_trains_an_archive_made_otherwise_again_and_only_then(tmp_path, monkeypatch) -> None:
    """A release assembled before the archive's training changed (its manifest names no ``class_archive_from``, or
    another) gets the archive trained again by ``install``, without Maven; one trained so is left alone."""
    root = kafka_release.release_root("3.6.2", tmp_path)
    (root / "libs").mkdir(parents=True)
    (root / kafka_release.MANIFEST).write_text('{"version": "3.6.2", "jars": ["a.jar"], "class_archive": "kafka.jsa"}')
    trained: list[Path] = []
    monkeypatch.setattr(kafka_release, "train_class_archive", lambda r: trained.append(r) or True)
    assert kafka_release.refresh_class_archive("3.6.2", tmp_path, say=lambda _: None)
    meta = kafka_release.json.loads((root / kafka_release.MANIFEST).read_text())
    assert trained == [root] and meta["jars"] == ["a.jar"]
    assert meta["class_archive_from"] == kafka_release.ARCHIVE_TRAINING and meta["class_archive"] == "kafka.jsa"
    assert not kafka_release.refresh_class_archive("3.6.2", tmp_path, say=lambda _: None)
    assert trained == [root], "trained so already: not again"


@pytest.mark.parametrize(("version", "shared_class"), [("3.6.2", "kafka.controller.KafkaController"),
                                                        ("4.0.0", "org.apache.kafka.controller.QuorumController")])
def test_an_assembled_release_s_archive_serves_its_modes_classes(version, shared_class) -> None:
    """The release's archive, as ``make install`` trained it, is usable by a JVM that must use it (``-Xshare:on``
    on the launchers' class path) and holds what a ZooKeeper-mode broker (3.x: its controller, which a KRaft node
    never loads) or a KRaft controller loads: the class is mapped from it, not loaded from its jar."""
    root = kafka_release.release_dir(version)
    libs = (root / "libs").resolve()
    out = subprocess.run(["java", "-Xshare:on", f"-XX:SharedArchiveFile={root / kafka_release.CLASS_ARCHIVE}",
                          *kafka_release.TRAINING_JVM_OPTS.split(), "-Xmx256m", "-Xlog:class+load=info",
                          "-cp", f"{libs}/*", shared_class], capture_output=True, text=True, timeout=60)
    loaded = [line for line in out.stdout.splitlines() if f" {shared_class} source:" in line]
    assert loaded and "source: shared objects file" in loaded[0], (out.stdout[-500:], out.stderr[-500:])


def test_zookeeper_mode_broker_properties_pin_the_ibp_and_cap_internal_rfs(tmp_path) -> None:
    props = javaproperties.loads(kafka_config.zookeeper_broker(
        broker_id=2, rack="rack-2", host="127.0.0.13", zookeeper_connect="127.0.0.1:2181", log_dir=tmp_path,
        kafka_version="3.6.2", brokers=2))
    assert props["broker.id"] == "2" and props["broker.rack"] == "rack-2"
    assert props["listeners"] == "PLAINTEXT://127.0.0.13:9092"
    assert props["inter.broker.protocol.version"] == props["log.message.format.version"] == "3.6"
    assert props["offsets.topic.replication.factor"] == "2" and props["min.insync.replicas"] == "2"
    assert props["zookeeper.session.timeout.ms"] == str(settings.ZK_SESSION_TIMEOUT_MS)
    assert "process.roles" not in props


def test_broker_config_of_the_caller_comes_last_and_wins(tmp_path) -> None:
    """``sandbox up --broker-config KEY=VALUE``: every broker's file gets it after the sandbox's own settings (a
    controller's does not)."""
    from sandbox.cli import build_parser

    extra = dict(build_parser().parse_args(["up", "--broker-config", "leader.imbalance.check.interval.seconds=5",
                                            "--broker-config", "min.insync.replicas = 1"]).broker_config)
    assert extra == {"leader.imbalance.check.interval.seconds": "5", "min.insync.replicas": "1"}
    zk = javaproperties.loads(kafka_config.zookeeper_broker(
        broker_id=0, rack=None, host="h", zookeeper_connect="z:2181", log_dir=tmp_path, kafka_version="3.6.2",
        brokers=3, extra=extra))
    assert zk["leader.imbalance.check.interval.seconds"] == "5" and zk["min.insync.replicas"] == "1"
    voters = kafka_config.static_quorum({100: "127.0.0.111"})
    broker = javaproperties.loads(kafka_config.kraft_node(node_id=0, role="broker", rack=None, host="h",
                                                          quorum=voters, log_dir=tmp_path, brokers=3,
                                                          extra=extra))
    assert broker["min.insync.replicas"] == "1"
    controller = javaproperties.loads(kafka_config.kraft_node(node_id=100, role="controller", rack=None, host="h",
                                                              quorum=voters, log_dir=tmp_path, brokers=3,
                                                              extra=extra))
    assert "leader.imbalance.check.interval.seconds" not in controller
    # but the brokers' min.insync.replicas: turning ELR on copies the active controller's to the cluster level
    assert controller["min.insync.replicas"] == "1"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["up", "--broker-config", "no-equals-sign"])


def test_kraft_properties_of_a_broker_and_a_controller(tmp_path) -> None:
    voters = kafka_config.static_quorum({101: "127.0.0.112", 100: "127.0.0.111"})
    assert voters == {"controller.quorum.voters": "100@127.0.0.111:9093,101@127.0.0.112:9093"}
    broker = javaproperties.loads(kafka_config.kraft_node(node_id=0, role="broker", rack="rack-0", host="127.0.0.11",
                                                          quorum=voters, log_dir=tmp_path, brokers=3))
    assert broker["process.roles"] == "broker" and broker["node.id"] == "0"
    assert broker["controller.listener.names"] == "CONTROLLER"
    assert broker["controller.quorum.voters"] == "100@127.0.0.111:9093,101@127.0.0.112:9093"
    assert "controller.quorum.bootstrap.servers" not in broker
    assert "zookeeper.connect" not in broker and "inter.broker.protocol.version" not in broker
    controller = javaproperties.loads(kafka_config.kraft_node(node_id=100, role="controller", rack=None,
                                                              host="127.0.0.111", quorum=voters,
                                                              log_dir=tmp_path, brokers=3))
    assert controller["listeners"] == "CONTROLLER://127.0.0.111:9093" and "broker.rack" not in controller
    # the active controller enforces broker.session.timeout.ms (fencing, and a restarted broker's re-registration);
    # the brokers read it too (heartbeat request timeout, registration retries)
    session = str(settings.BROKER_SESSION_TIMEOUT_MS)
    assert controller["broker.session.timeout.ms"] == session == broker["broker.session.timeout.ms"]
    # ELR (KIP-966) writes the active controller's static min.insync.replicas as the cluster-level value, which
    # outranks the brokers' files: the controllers carry the brokers' value
    min_isr = str(settings.MIN_INSYNC_REPLICAS)
    assert controller["min.insync.replicas"] == min_isr == broker["min.insync.replicas"]
    combined = javaproperties.loads(kafka_config.kraft_node(node_id=1, role="broker,controller", rack="r1", host="h",
                                                            quorum=voters, log_dir=tmp_path, brokers=3))
    assert combined["process.roles"] == "broker,controller"
    assert combined["listeners"] == "PLAINTEXT://h:9092,CONTROLLER://h:9093"
    assert combined["advertised.listeners"] == "PLAINTEXT://h:9092" and combined["broker.rack"] == "r1"
    with pytest.raises(ValueError, match="broker, controller or broker,controller"):
        kafka_config.kraft_node(node_id=1, role="controller,broker", rack=None, host="h", quorum=voters,
                                log_dir=tmp_path, brokers=3)
    with pytest.raises(ValueError, match="quorum must set one of"):
        kafka_config.kraft_node(node_id=1, role="broker", rack=None, host="h",
                                quorum={**voters, "controller.quorum.bootstrap.servers": "h:9093"},
                                log_dir=tmp_path, brokers=3)


def test_a_client_listener_beside_the_plaintext_one(tmp_path) -> None:
    """``up --client-sasl`` / ``--client-tls``: a broker's file adds SASL_PLAINTEXT with PLAIN and the one user (the
    listener's own JAAS config, KIP-103's prefix), SSL with the PKCS12 keystore, or both (SASL_SSL); replication
    stays on PLAINTEXT; a KRaft broker's explicit protocol map names it; a controller's file is unchanged; neither
    option, no listener."""
    sasl = kafka_config.ClientListener(sasl_password="pw")
    zk = javaproperties.loads(kafka_config.zookeeper_broker(
        broker_id=0, rack=None, host="h", zookeeper_connect="z:2181", log_dir=tmp_path, kafka_version="3.6.2",
        brokers=3, client=sasl))
    assert zk["listeners"] == zk["advertised.listeners"] == "PLAINTEXT://h:9092,SASL_PLAINTEXT://h:9094"
    assert zk["listener.name.sasl_plaintext.sasl.enabled.mechanisms"] == "PLAIN"
    assert zk["listener.name.sasl_plaintext.plain.sasl.jaas.config"] == (
        'org.apache.kafka.common.security.plain.PlainLoginModule required user_kafkaops="pw";')
    assert "inter.broker.listener.name" not in zk and "security.inter.broker.protocol" not in zk, "PLAINTEXT"
    voters = kafka_config.static_quorum({100: "127.0.0.111"})
    broker = javaproperties.loads(kafka_config.kraft_node(node_id=0, role="broker", rack=None, host="h",
                                                          quorum=voters, log_dir=tmp_path, brokers=3,
                                                          client=sasl))
    assert broker["listener.security.protocol.map"] == (
        "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT")
    assert broker["inter.broker.listener.name"] == "PLAINTEXT"
    controller = kafka_config.kraft_node(node_id=100, role="controller", rack=None, host="c", quorum=voters,
                                         log_dir=tmp_path, brokers=3, client=sasl)
    assert "SASL" not in controller
    both = kafka_config.ClientListener(sasl_password="pw", keystore="/k/broker.p12", keystore_password="kpw")
    tls = javaproperties.loads(kafka_config.kraft_node(node_id=0, role="broker", rack=None, host="h",
                                                       quorum=voters, log_dir=tmp_path, brokers=3, client=both))
    assert tls["listeners"] == "PLAINTEXT://h:9092,SASL_SSL://h:9094"
    assert (tls["listener.name.sasl_ssl.ssl.keystore.type"], tls["listener.name.sasl_ssl.ssl.keystore.location"],
            tls["listener.name.sasl_ssl.ssl.keystore.password"]) == ("PKCS12", "/k/broker.p12", "kpw")
    assert tls["listener.name.sasl_ssl.sasl.enabled.mechanisms"] == "PLAIN"
    scram = kafka_config.ClientListener(sasl_password="pw", sasl_mechanism="SCRAM-SHA-256", keystore="/k/broker.p12",
                                        keystore_password="kpw")
    scram_broker = javaproperties.loads(kafka_config.zookeeper_broker(
        broker_id=0, rack=None, host="h", zookeeper_connect="z:2181", log_dir=tmp_path, kafka_version="3.6.2",
        brokers=3, client=scram))
    assert scram_broker["listener.name.sasl_ssl.sasl.enabled.mechanisms"] == "SCRAM-SHA-256"
    assert scram_broker["listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required;"), "SCRAM: no password in the file"
    assert "pw" not in "".join(v for k, v in scram_broker.items() if "jaas" in k)
    with pytest.raises(ValueError, match="SASL mechanism 'GSSAPI': must be one of"):
        kafka_config.client_listener({"listeners": "PLAINTEXT://h:9092", "advertised.listeners": "x"}, "h",
                                     kafka_config.ClientListener(sasl_password="pw", sasl_mechanism="GSSAPI"))
    only_tls = kafka_config.ClientListener(keystore="/k/broker.p12", keystore_password="kpw")
    assert only_tls.protocol == "SSL" and kafka_config.ClientListener().protocol == ""
    plain = kafka_config.zookeeper_broker(broker_id=0, rack=None, host="h", zookeeper_connect="z:2181",
                                          log_dir=tmp_path, kafka_version="3.6.2", brokers=3)
    assert "SASL" not in plain


def test_a_dynamic_quorum_has_bootstrap_servers_in_the_files_and_its_voters_in_the_format(tmp_path) -> None:
    voters = {101: "127.0.0.112", 100: "127.0.0.111"}
    quorum = kafka_config.dynamic_quorum(voters)
    assert quorum == {"controller.quorum.bootstrap.servers": "127.0.0.111:9093,127.0.0.112:9093"}
    controller = javaproperties.loads(kafka_config.kraft_node(node_id=100, role="controller", rack=None,
                                                              host="127.0.0.111", quorum=quorum,
                                                              log_dir=tmp_path, brokers=3))
    assert "controller.quorum.voters" not in controller
    assert controller["controller.quorum.bootstrap.servers"] == "127.0.0.111:9093,127.0.0.112:9093"
    ids = {100: kafka_config.new_directory_id(), 101: kafka_config.new_directory_id()}
    assert ids[100] != ids[101]
    text = kafka_config.initial_controllers(voters, ids)
    assert text == f"100@127.0.0.111:9093:{ids[100]},101@127.0.0.112:9093:{ids[101]}"
    with pytest.raises(KeyError):
        kafka_config.initial_controllers({**voters, 102: "h"}, ids)
    # the voters get the voter set, every other node formats to join later (Kafka's operations guide)
    assert kraft_storage.format_args(100, text, {100, 101}) == ["--initial-controllers", text]
    assert kraft_storage.format_args(0, text, {100, 101}) == ["--no-initial-controllers"]
    assert kraft_storage.format_args(0, None, {100, 101}) == []


def test_new_directory_ids_are_kafka_uuids() -> None:
    import base64

    for _ in range(300):
        text = kafka_config.new_directory_id()
        assert len(text) == 22 and not text.startswith("-")
        raw = base64.urlsafe_b64decode(text + "==")
        assert len(raw) == 16 and int.from_bytes(raw, "big") > 1


# Lines as Kafka 3.6.2 and 4.0.0 write them (from sandbox nodes' logs), with kafka-service's markers.
ZK_LOG = """\
[2026-11-25 12:59:28,722] kafka-service: start /w/hosts/1/kafka_2.13-3.6.2 (pid 12470)
[2026-11-25 12:59:29,100] INFO KafkaConfig values:
\tinter.broker.protocol.version = 3.6
\tlog.message.format.version = 3.6
[2026-11-25 12:59:31,418] INFO Kafka version: 3.6.2 (org.apache.kafka.common.utils.AppInfoParser)
[2026-11-25 12:59:31,422] INFO [KafkaServer id=1] started (kafka.server.KafkaServer)
[2026-11-25 12:59:43,967] INFO [KafkaServer id=1] shutting down (kafka.server.KafkaServer)
[2026-11-25 12:59:43,968] INFO [KafkaServer id=1] Starting controlled shutdown (kafka.server.KafkaServer)
[2026-11-25 12:59:44,563] kafka-service: start /w/hosts/1/kafka_2.13-3.7.1 (pid 13027)
[2026-11-25 12:59:44,900] INFO KafkaConfig values:
\tinter.broker.protocol.version = 3.8
[2026-11-25 12:59:45,229] ERROR Exiting Kafka due to fatal exception (kafka.Kafka$)
org.apache.kafka.common.config.ConfigException: Invalid value 3.8 for configuration inter.broker.protocol.version: \
Version 3.8 is not a valid version
\tat org.apache.kafka.server.common.MetadataVersion.fromVersionString(MetadataVersion.java:1)
[2026-11-25 13:00:01,000] kafka-service: start /w/hosts/1/kafka_2.13-3.7.1 (pid 13100)
[2026-11-25 13:00:03,000] INFO Kafka version: 3.7.1 (org.apache.kafka.common.utils.AppInfoParser)
[2026-11-25 13:00:03,100] INFO [KafkaServer id=1] started (kafka.server.KafkaServer)
"""
KRAFT_LOG = """\
[2026-11-25 12:59:55,225] kafka-service: start /w/hosts/1/kafka_2.13-4.0.0 (pid 13290)
[2026-11-25 13:00:03,351] INFO Kafka version: 4.0.0 (org.apache.kafka.common.utils.AppInfoParser)
[2026-11-25 13:00:03,360] INFO [KafkaRaftServer nodeId=1] Kafka Server started (kafka.server.KafkaRaftServer)
[2026-11-25 13:00:30,349] INFO [BrokerServer id=1] shutting down (kafka.server.BrokerServer)
[2026-11-25 13:00:31,000] kafka-service: start /w/hosts/1/kafka_2.13-4.0.0 (pid 13500)
"""


def test_a_nodes_log_tells_each_start_its_release_ibp_shutdown_and_failure(tmp_path) -> None:
    log = tmp_path / "server.log"
    log.write_text("[2026-11-25 12:00:00,000] INFO lines before the first start are ignored\n" + ZK_LOG)
    first, failed, third = node_log.runs(log)
    assert (first.pid, first.version, first.ibp_major_minor) == (12470, "3.6.2", "3.6")
    assert first.started == pytest.approx(node_log.parse_time("2026-11-25 12:59:31,422"))
    assert first.shutdown == pytest.approx(node_log.parse_time("2026-11-25 12:59:43,967"))
    assert failed.started is None and failed.release_dir.endswith("kafka_2.13-3.7.1")
    assert failed.failure == ("ConfigException: Invalid value 3.8 for configuration inter.broker.protocol.version: "
                              "Version 3.8 is not a valid version")
    assert third.version == "3.7.1" and third.started and third.failure is None
    assert node_log.last_run(log) == third
    assert node_log.restart_windows(log, since=0) == [(first.shutdown, failed.started or float("inf"))]


def test_kraft_starts_and_a_start_still_running(tmp_path) -> None:
    log = tmp_path / "server.log"
    log.write_text(KRAFT_LOG)
    first, second = node_log.runs(log)
    assert first.version == "4.0.0" and first.ibp is None and first.started
    assert second.started is None and second.failure is None
    assert node_log.restart_windows(log, since=first.shutdown + 1) == []
    assert node_log.restart_windows(log, since=0) == [(first.shutdown, float("inf"))]
    assert node_log.runs(tmp_path / "missing.log") == [] and node_log.last_run(tmp_path / "missing.log") is None


def test_the_last_start_is_read_from_its_own_marker_on(tmp_path) -> None:
    """``last_run`` parses only the text from the last marker (``kafka-service start`` looks every 0.1 s): the same
    answer as the last of ``runs``, also when the marker's text appears inside another line after it, and None
    before the first marker."""
    log = tmp_path / "server.log"
    log.write_text(KRAFT_LOG + "[2026-11-25 13:00:32,000] INFO a client sent ] kafka-service: start x (pid 1) "
                   "in a request\n[2026-11-25 13:00:33,000] INFO [KafkaRaftServer nodeId=1] Kafka Server started "
                   "(kafka.server.KafkaRaftServer)\n")
    last = node_log.last_run(log)
    assert last == node_log.runs(log)[-1]
    assert (last.pid, last.started) == (13500, node_log.parse_time("2026-11-25 13:00:33,000"))
    log.write_text("[2026-11-25 12:00:00,000] INFO no start yet\n")
    assert node_log.last_run(log) is None


def test_the_burrow_changes_apply_once_to_debians_source(tmp_path) -> None:
    cluster = tmp_path / "core/internal/cluster/kafka_cluster.go"
    client = tmp_path / "core/internal/consumer/kafka_client.go"
    for path in (cluster, client):
        path.parent.mkdir(parents=True)
    cluster.write_text("\t\t\t\trequests[broker.ID()] = &sarama.OffsetRequest{}\n")
    client.write_text("\tswitch valueVersion {\n\tcase 3:\n\t\tmodule.decodeAndSendOffset(offsetKey, valueBuffer, "
                      "offsetLogger, decodeOffsetValueV3)\n\tdefault:\n\t}\n\nfunc decodeOffsetValueV3(b) {}\n")
    burrow_build.apply_patch(tmp_path)
    assert "&sarama.OffsetRequest{Version: 1}" in cluster.read_text()
    patched = client.read_text()
    assert "\tcase 4:\n\t\tmodule.decodeAndSendOffset(offsetKey, valueBuffer, offsetLogger, decodeOffsetValueV4)" \
        in patched
    assert "func decodeOffsetValueV4(valueBuffer *bytes.Buffer)" in patched and "func decodeOffsetValueV3(b)" in patched
    with pytest.raises(burrow_build.BurrowBuildError, match="expected exactly one"):
        burrow_build.apply_patch(tmp_path)


def test_traffic_compare_judges_acknowledged_messages_by_what_was_read() -> None:
    from sandbox.traffic import compare

    acked = {0: (0, 0), 1: (0, 1), 2: (1, 0), 3: (1, None), 4: (1, 5),  # 3: delivered, offset unknown (a retry)
             5: (2, 1), 6: (2, 0)}
    reads = {(0, 0): 0, (0, 1): 1, (1, 0): 2, (1, 1): 3, (1, 2): 1, (2, 0): 6, (2, 1): 5}
    result = compare(acked, reads, {"NOT_ENOUGH_REPLICAS": 2}, unresolved=0, seconds=1.0)
    assert result.lost == [4] and result.duplicates == [1] and result.misplaced == []
    # 5 after 6 in partition 2 is out of order; 1's second copy (after 3) is a duplicate, not an order violation
    assert result.out_of_order == [[2, 1, 5, 6]] and not result.ok
    assert compare({3: (1, None)}, {(0, 7): 3}, {}, 0, 1.0).misplaced == [3], "read in another partition"


def test_traffic_waits_until_its_own_client_lists_a_new_topic(monkeypatch) -> None:
    """A broker learns a new topic from the controller after another broker listed it (in a migration, from the
    KRaft controller): the traffic's consumer asks again on UNKNOWN_TOPIC_OR_PART / LEADER_NOT_AVAILABLE until
    its own Metadata lists the topic, and fails at once on any other error or once its deadline passed."""
    from types import SimpleNamespace

    from confluent_kafka import KafkaError

    from sandbox import procs, traffic

    monkeypatch.setattr(procs.time, "sleep", lambda _s: None)

    def answering(*errors):
        answers = iter(errors)
        asked = []

        def list_topics(topic, timeout):
            asked.append(topic)
            error = next(answers)
            return SimpleNamespace(topics={topic: SimpleNamespace(error=error and KafkaError(error), partitions={})})
        t = object.__new__(traffic.Traffic)
        t.topic = "orders"
        t.consumer = SimpleNamespace(list_topics=list_topics)
        return t, asked

    t, asked = answering(KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.LEADER_NOT_AVAILABLE, None)
    assert t._topic_metadata(timeout_s=30).error is None and asked == ["orders"] * 3

    t, asked = answering(KafkaError.TOPIC_AUTHORIZATION_FAILED, None)
    with pytest.raises(procs.Abort, match="topic orders: .*[Aa]uthoriz"):
        t._topic_metadata(timeout_s=30)
    assert len(asked) == 1

    t, asked = answering(KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.UNKNOWN_TOPIC_OR_PART)
    with pytest.raises(procs.Timeout, match="topic orders in the consumer's metadata"):
        t._topic_metadata(timeout_s=-1)
    assert len(asked) == 1


def test_burrow_losing_its_startup_race_with_a_leader_move_is_told_from_other_exits(tmp_path) -> None:
    """Burrow 1.2's own lines (seen when a combined KRaft sandbox moved a __consumer_offsets leader as Burrow
    started): it is started again only for this one."""
    workdir = Workdir.at(tmp_path)
    assert not burrow.lost_startup_race(workdir), "no log yet"
    workdir.burrow.mkdir(parents=True)
    workdir.burrow_log.write_text(
        '{"level":"error","ts":1795961518.57,"msg":"failed to consume partition","type":"module","topic":'
        '"__consumer_offsets","partition":1,"error":"kafka server: Tried to send a message to a replica that is '
        'not the leader for some partition. Your metadata is out of date."}\n')
    assert not burrow.lost_startup_race(workdir)
    with open(workdir.burrow_log, "a") as log:
        log.write('{"level":"error","ts":1795961518.57,"msg":"failed to start consumer","type":"module",'
                  '"coordinator":"consumer","class":"kafka","name":"sandbox_kafka","error":"kafka server: Tried to '
                  'send a message to a replica that is not the leader for some partition."}\n')
        log.write('{"level":"info","ts":1795961518.58,"msg":"stopping","type":"coordinator","name":"zookeeper"}\n')
    assert burrow.lost_startup_race(workdir)


def test_the_tls_material_certifies_every_broker_address_under_the_sandbox_s_own_ca(tmp_path) -> None:
    """``up --client-tls``: the CA certificate and a PKCS12 keystore (opened only with its password) holding the
    broker key, its certificate for every address (IP subject alternative names, what clients check the address
    against) signed by the CA, and the CA; the keystore readable by its owner only."""
    import ipaddress
    import stat

    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import pkcs12

    from sandbox import tls

    ca_path, keystore = tls.write(tmp_path / "tls", ["127.0.0.11", "127.0.0.12"], "kpw")
    ca = x509.load_pem_x509_certificate(ca_path.read_bytes())
    key, cert, chain = pkcs12.load_key_and_certificates(keystore.read_bytes(), b"kpw")
    assert key is not None and [c.subject for c in chain] == [ca.subject]
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.11"),
                                                        ipaddress.ip_address("127.0.0.12")]
    cert.verify_directly_issued_by(ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert stat.S_IMODE(keystore.stat().st_mode) == 0o600
    with pytest.raises(ValueError):
        pkcs12.load_key_and_certificates(keystore.read_bytes(), b"wrong")
    with pytest.raises(ValueError, match="no broker address"):
        tls.write(tmp_path / "none", [], "kpw")


def test_client_auth_material_is_a_client_key_pair_of_the_same_ca(tmp_path) -> None:
    """``up --client-auth``: beside the broker's keystore, a client certificate signed by the sandbox's CA for client
    authentication only (clientAuth, ``CN=kafkaops``) and its unencrypted PEM key, readable by its owner only;
    without it no client material is written."""
    import stat

    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    from sandbox import tls

    ca_path, _ = tls.write(tmp_path / "tls", ["127.0.0.11"], "kpw", client=True)
    ca = x509.load_pem_x509_certificate(ca_path.read_bytes())
    cert = x509.load_pem_x509_certificate((tmp_path / "tls" / tls.CLIENT_CERT_FILE).read_bytes())
    cert.verify_directly_issued_by(ca)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == tls.CLIENT_NAME
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    key_file = tmp_path / "tls" / tls.CLIENT_KEY_FILE
    key = serialization.load_pem_private_key(key_file.read_bytes(), password=None)
    assert key.public_key().public_numbers() == cert.public_key().public_numbers(), "the key of the certificate"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    tls.write(tmp_path / "plain", ["127.0.0.11"], "kpw")
    assert not (tmp_path / "plain" / tls.CLIENT_CERT_FILE).exists()


def test_the_mutual_tls_listener_requires_a_client_certificate_of_the_ca() -> None:
    """KIP-103 prefixed settings of the client listener: ``ssl.client.auth=required`` and the CA as a PEM truststore
    (KIP-651) only when a truststore is given; a truststore without TLS is refused."""
    from sandbox import kafka_config

    props = {"listeners": "PLAINTEXT://h:9092", "advertised.listeners": "PLAINTEXT://h:9092"}
    tls_only = kafka_config.ClientListener(keystore="/t/broker.p12", keystore_password="kpw")
    assert "listener.name.ssl.ssl.client.auth" not in kafka_config.client_listener(props, "h", tls_only)
    mutual = kafka_config.ClientListener(keystore="/t/broker.p12", keystore_password="kpw", truststore="/t/ca.pem")
    out = kafka_config.client_listener(props, "h", mutual)
    assert out["listeners"] == "PLAINTEXT://h:9092,SSL://h:9094"
    assert (out["listener.name.ssl.ssl.client.auth"], out["listener.name.ssl.ssl.truststore.type"],
            out["listener.name.ssl.ssl.truststore.location"]) == ("required", "PEM", "/t/ca.pem")
    with pytest.raises(ValueError, match="needs the TLS listener"):
        kafka_config.client_listener(props, "h", kafka_config.ClientListener(sasl_password="pw", truststore="/ca"))
