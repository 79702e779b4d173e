"""The sandbox CLI's pure parts, without starting anything: addresses and racks, env.json/airflow.env
rendering, workload topic plan and stall files, package check, argument validation, waits and ports."""

from __future__ import annotations

import json
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException

from sandbox import cluster, controller_request, debs, envfile, hosts, procs, scram, settings, sshd, state, workload
from sandbox.layout import Workdir


def test_addresses_racks_and_spares() -> None:
    specs = hosts.specs(brokers=3, spares=2, racks=2, address_base="127.5.0.11")
    assert [(s.id, s.host, s.rack, s.spare) for s in specs] == [
        (0, "127.5.0.11", "rack-0", False),
        (1, "127.5.0.12", "rack-1", False),
        (2, "127.5.0.13", "rack-0", False),
        (3, "127.5.0.14", "rack-1", True),
        (4, "127.5.0.15", "rack-0", True),
    ]
    assert hosts.address(0, settings.BROKER_HOST_BASE) == settings.broker_host(0)
    with pytest.raises(ValueError, match="does not fit"):
        hosts.address(250, "127.0.0.11")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((0, 0, 3, "3.6.2", "127.0.0.11"), "--brokers must be at least 1"),
        ((3, -1, 3, "3.6.2", "127.0.0.11"), "--spare-brokers cannot be negative"),
        ((3, 0, 0, "3.6.2", "127.0.0.11"), "--racks must be at least 1"),
        ((3, 0, 3, "3.6", "127.0.0.11"), "--kafka-version must be a pinned Kafka release"),
        ((3, 0, 3, "3.5.0", "127.0.0.11"), "--kafka-version must be a pinned Kafka release .3.6.2, "),
        ((3, 0, 3, "3.6.2", "10.0.0.11"), "--address-base must be a loopback address"),
        ((3, 250, 3, "3.6.2", "127.0.0.11"), "does not fit"),
    ],
)
def test_up_arguments_are_validated(args, message) -> None:
    with pytest.raises(cluster.SandboxError, match=message):
        cluster._validate_up_args(*args)


def test_missing_package_message_names_package_file_and_command(monkeypatch) -> None:
    monkeypatch.setitem(debs.REQUIRED, "zookeeper", ("/nonexistent/zookeeper.jar",))
    with pytest.raises(debs.MissingPackage) as info:
        debs.check_packages()
    assert "zookeeper (/nonexistent/zookeeper.jar not found)" in str(info.value)
    assert "apt-get install -y --no-install-recommends zookeeper" in str(info.value)


def _state(workdir: Workdir) -> state.SandboxState:
    specs = hosts.specs(3, 1, 3, "127.9.0.11")
    return state.SandboxState(
        workdir=str(workdir.root),
        brokers=3,
        spare_brokers=1,
        racks=3,
        kafka_version="3.6.2",
        address_base="127.9.0.11",
        zookeeper_port=2181,
        burrow_port=8000,
        hosts=[vars(s) for s in specs],
    )


def test_env_json_and_airflow_env(tmp_path) -> None:
    workdir = Workdir.at(tmp_path)
    sshd.generate_keys(workdir)
    info = _state(workdir)
    envfile.write(workdir, info)
    env = json.loads(workdir.env_json.read_text())
    assert env == {
        "bootstrap_servers": "127.9.0.11:9092,127.9.0.12:9092,127.9.0.13:9092",
        "zookeeper_connect": "127.0.0.1:2181",
        "burrow_url": "http://127.0.0.1:8000",
        "burrow_cluster": settings.BURROW_CLUSTER,
        "consumer_groups": list(settings.WORKLOAD_GROUPS),
        "kafka_version": "3.6.2",
        "brokers": [
            {"id": i, "host": f"127.9.0.{11 + i}", "port": 9092, "ssh_port": 2222, "rack": f"rack-{i % 3}"}
            for i in range(4)
        ],
        "ssh": {
            "user": sshd.user(),
            "key_file": str(workdir.client_key),
            "known_hosts": str(workdir.known_hosts),
        },
    }
    script = f". {shlex.quote(str(workdir.airflow_env))}; printf %s \"$AIRFLOW_CONN_KAFKA_SANDBOX\""
    kafka = json.loads(subprocess.run(["bash", "-c", script], capture_output=True, check=True).stdout)
    assert kafka["extra"]["server_properties"].format(broker_id=2) == str(
        workdir.host(2).server_properties
    )
    assert kafka["extra"]["kafka_home"].format(broker_id=0) == str(workdir.host(0).kafka_link)


def test_a_sandbox_of_30_brokers_names_its_bootstrap_servers_where_airflow_keeps_them(tmp_path) -> None:
    """Airflow keeps 500 characters of a connection's host (PostgreSQL refuses more: the REST API answered 422 for a
    30-broker sandbox): the connection then has no host and its extra's ``bootstrap.servers`` names every broker,
    which the product's profile reads; a small sandbox keeps both."""
    from kafka_ops.profile import ClusterProfile

    workdir = Workdir.at(tmp_path)
    sshd.generate_keys(workdir)
    specs = hosts.specs(30, 0, 3, "127.9.100.11")
    info = state.SandboxState(workdir=str(workdir.root), brokers=30, spare_brokers=0, racks=3, kafka_version="3.6.2",
                              address_base="127.9.100.11", zookeeper_port=2181, burrow_port=8000,
                              hosts=[vars(s) for s in specs])
    kafka = envfile.connections(workdir, info)["kafka_sandbox"]
    servers = info.client_bootstrap_servers
    assert len(servers) > envfile.AIRFLOW_HOST_MAX and kafka["host"] is None
    assert kafka["extra"]["bootstrap.servers"] == servers
    profile = ClusterProfile.from_connection_fields("kafka_sandbox", kafka["host"], kafka["extra"])
    assert profile.confluent_config()["bootstrap.servers"].split(",") == [f"127.9.100.{11 + i}:9092" for i in range(30)]
    small = envfile.connections(workdir, _state(workdir))["kafka_sandbox"]
    assert small["host"] == small["extra"]["bootstrap.servers"] == "127.9.0.11:9092,127.9.0.12:9092,127.9.0.13:9092"


def test_a_client_listener_sandbox_s_connection_authenticates_on_it(tmp_path) -> None:
    """``up --client-sasl``: the Airflow connection names the SASL listener with the user and password in its login
    and password (what the product's profile reads), env.json names them for the tests; with ``--client-tls`` too
    the protocol is SASL_SSL and the connection trusts the sandbox's CA; a KRaft one's controllers keep PLAINTEXT
    (``controller_client``); without the options nothing of it appears."""
    from kafka_ops.profile import ClusterProfile

    workdir = Workdir.at(tmp_path)
    sshd.generate_keys(workdir)
    info = _state(workdir)
    assert "client_listener" not in envfile.env_document(workdir, info)
    assert "login" not in envfile.connections(workdir, info)["kafka_sandbox"]
    info.sasl_password = "pw-1"
    kafka = envfile.connections(workdir, info)["kafka_sandbox"]
    assert kafka["host"] == "127.9.0.11:9094,127.9.0.12:9094,127.9.0.13:9094" == kafka["extra"]["bootstrap.servers"]
    assert (kafka["login"], kafka["password"]) == (settings.SASL_USER, "pw-1")
    assert "controller_client" not in kafka["extra"], "ZooKeeper mode: no controllers"
    profile = ClusterProfile.from_connection_fields("kafka_sandbox", kafka["host"], kafka["extra"],
                                                    login=kafka["login"], password=kafka["password"])
    assert profile.confluent_config()["security.protocol"] == "SASL_PLAINTEXT"
    assert profile.kafka_python_config()["sasl_plain_password"] == "pw-1"
    env = envfile.env_document(workdir, info)
    assert env["bootstrap_servers"] == "127.9.0.11:9092,127.9.0.12:9092,127.9.0.13:9092", "the sandbox's own"
    assert env["client_listener"] == {"bootstrap_servers": kafka["host"], "security_protocol": "SASL_PLAINTEXT",
                                      "mechanism": "PLAIN", "user": "kafkaops", "password": "pw-1"}
    assert info.options()["client_sasl"] is True and info.options()["client_tls"] is False
    info.tls_password = "kpw"
    extra = envfile.connections(workdir, info)["kafka_sandbox"]["extra"]
    assert extra["security.protocol"] == "SASL_SSL" and extra["ssl.ca.location"] == str(tmp_path / "tls" / "ca.pem")
    assert ClusterProfile.from_connection_fields("k", kafka["host"], extra).kafka_python_config()["ssl_cafile"] == \
        str(tmp_path / "tls" / "ca.pem")
    assert info.client_listener.keystore == str(tmp_path / "tls" / "broker.p12")
    info.mode, info.controller_hosts = "kraft", [{"id": 100, "host": "127.9.0.111"}]
    kraft = envfile.connections(workdir, info)["kafka_sandbox"]["extra"]
    assert kraft["controller_client"] == {"security.protocol": "PLAINTEXT"}


def test_a_scram_sandbox_s_connection_names_its_mechanism(tmp_path) -> None:
    """``up --client-sasl --sasl-mechanism SCRAM-SHA-512``: the connection's ``sasl.mechanism`` and env.json name
    SCRAM, which both of the product's clients are given; `up` on a running workdir tells the mechanism apart."""
    from kafka_ops.profile import ClusterProfile

    workdir = Workdir.at(tmp_path)
    sshd.generate_keys(workdir)
    info = _state(workdir)
    info.sasl_password, info.sasl_mechanism = "pw-1", "SCRAM-SHA-512"
    kafka = envfile.connections(workdir, info)["kafka_sandbox"]
    assert kafka["extra"]["sasl.mechanism"] == "SCRAM-SHA-512"
    profile = ClusterProfile.from_connection_fields("kafka_sandbox", kafka["host"], kafka["extra"],
                                                    login=kafka["login"], password=kafka["password"])
    assert profile.confluent_config()["sasl.mechanism"] == "SCRAM-SHA-512"
    assert profile.kafka_python_config()["sasl_mechanism"] == "SCRAM-SHA-512"
    assert envfile.env_document(workdir, info)["client_listener"]["mechanism"] == "SCRAM-SHA-512"
    assert info.options()["sasl_mechanism"] == "SCRAM-SHA-512"
    info.sasl_password = ""
    assert info.options()["sasl_mechanism"] == "", "no SASL listener: no mechanism to compare"


def test_a_mutual_tls_sandbox_s_connection_names_its_client_certificate(tmp_path) -> None:
    """``up --client-tls --client-auth``: the connection's extra names the client certificate and key (paths, no
    password), which both of the product's clients are given; `up` on a running workdir tells it apart."""
    from kafka_ops.profile import ClusterProfile

    workdir = Workdir.at(tmp_path)
    sshd.generate_keys(workdir)
    info = _state(workdir)
    info.tls_password, info.client_auth = "kpw", True
    kafka = envfile.connections(workdir, info)["kafka_sandbox"]
    tls_dir = tmp_path / "tls"
    assert {k: v for k, v in kafka["extra"].items() if k.startswith(("ssl.", "security."))} == {
        "security.protocol": "SSL", "ssl.ca.location": str(tls_dir / "ca.pem"),
        "ssl.certificate.location": str(tls_dir / "client.pem"), "ssl.key.location": str(tls_dir / "client.key")}
    assert "password" not in kafka or not kafka["password"], "no secret in the connection: the key file is 0600"
    profile = ClusterProfile.from_connection_fields("kafka_sandbox", kafka["host"], kafka["extra"])
    assert profile.confluent_config()["ssl.certificate.location"] == str(tls_dir / "client.pem")
    python = profile.kafka_python_config()
    assert (python["ssl_certfile"], python["ssl_keyfile"]) == (str(tls_dir / "client.pem"), str(tls_dir / "client.key"))
    listener = envfile.env_document(workdir, info)["client_listener"]
    assert listener["cert_file"] == str(tls_dir / "client.pem") and listener["key_file"] == str(tls_dir / "client.key")
    assert info.client_listener.truststore == str(tls_dir / "ca.pem")
    assert info.options()["client_auth"] is True


def test_known_hosts_lists_every_host_with_the_shared_key(tmp_path) -> None:
    workdir = Workdir.at(tmp_path)
    sshd.generate_keys(workdir)
    sshd.write_known_hosts(workdir, ["127.9.0.11", "127.9.0.12"])
    lines = workdir.known_hosts.read_text().splitlines()
    key = sshd.host_public_key(workdir)
    assert lines == [f"[127.9.0.11]:2222 {key}", f"[127.9.0.12]:2222 {key}"]
    assert key.startswith("ssh-ed25519 ")


def test_topic_plan_caps_the_replication_factor_at_the_broker_count() -> None:
    plan = workload.topic_plan(2)
    assert set(plan) == set(settings.WORKLOAD_TOPICS)
    assert all(rf <= 2 for _, rf, _ in plan.values())
    assert workload.topic_plan(3)["orders"] == settings.WORKLOAD_TOPICS["orders"]


@pytest.mark.parametrize("transient", ["REQUEST_TIMED_OUT", "_DESTROY_BROKER"])
def test_topic_creation_tries_a_timed_out_create_again_and_fails_on_a_real_refusal(monkeypatch, transient) -> None:
    """CreateTopics answered REQUEST_TIMED_OUT (a KRaft broker's forward to a slow controller; the sandbox's up failed
    on it once on 2 cores), or failed with the connection librdkafka dropped under it (_DESTROY_BROKER, once too), is
    tried again for the topics still missing; every topic missing at the call is reported created, also one whose
    failed create went through; a refusal (a bad replication factor) fails at once."""
    from concurrent.futures import Future
    from types import SimpleNamespace


    monkeypatch.setattr(controller_request, "RETRY_S", 0.0)
    plan = sorted(workload.topic_plan(3))
    went_through, lost = plan[0], plan[1]  # both timed out; the first was created all the same
    exists: set[str] = {"__consumer_offsets"}
    calls: list[list[str]] = []
    waits: list[float] = []
    refuse: list[int] = []

    class Admin:
        def __init__(self, conf):
            pass

        def list_topics(self, timeout):
            return SimpleNamespace(topics=dict.fromkeys(exists))

        def create_topics(self, new, operation_timeout, request_timeout):
            waits.append(request_timeout)
            calls.append(sorted(t.topic for t in new))
            futures = {}
            for topic in new:
                future: Future = Future()
                if refuse:
                    future.set_exception(KafkaException(KafkaError(refuse[0])))
                elif len(calls) == 1 and topic.topic in (went_through, lost):
                    if topic.topic == went_through:
                        exists.add(topic.topic)
                    future.set_exception(KafkaException(KafkaError(getattr(KafkaError, transient))))
                else:
                    exists.add(topic.topic)
                    future.set_result(None)
                futures[topic.topic] = future
            return futures

    monkeypatch.setattr(workload, "AdminClient", Admin)
    assert sorted(workload.create_topics("b:9092", 3, timeout_s=10)) == plan
    assert calls == [plan, [lost]], "tried again for the topic still missing only"
    waits.clear()
    exists.clear()
    calls.clear()
    assert sorted(workload.create_topics("b:9092", 3, timeout_s=60)) == plan
    assert waits[0] == controller_request.ATTEMPT_S, "one try never takes the whole timeout (a controller unknown yet)"
    exists.clear()
    calls.clear()
    refuse.append(KafkaError.INVALID_REPLICATION_FACTOR)
    with pytest.raises(KafkaException):
        workload.create_topics("b:9092", 3, timeout_s=10)
    assert len(calls) == 1, "a refusal is not tried again"


def test_the_scram_user_is_created_again_after_a_wait_for_the_controller_timed_out(tmp_path, monkeypatch) -> None:
    """AlterUserScramCredentials goes to the controller librdkafka's last Metadata named; right after a
    ZooKeeper-mode sandbox's brokers registered none may be named yet (a `sandbox up` of 4 brokers failed "Failed
    while waiting for controller" on its one try of 30 s). Each try is waited for ATTEMPT_S at most and, after a
    fresh Metadata, tried again; a refusal fails at once."""
    from concurrent.futures import Future
    from types import SimpleNamespace

    monkeypatch.setattr(controller_request, "RETRY_S", 0.0)
    info = _state(Workdir.at(tmp_path))
    info.sasl_password, info.sasl_mechanism = "pw-1", "SCRAM-SHA-512"
    waits: list[float] = []
    metadata_reads: list[float] = []
    answers: list[int] = [KafkaError._TIMED_OUT]

    class Admin:
        def list_topics(self, timeout):
            metadata_reads.append(timeout)
            return SimpleNamespace(topics={})

        def alter_user_scram_credentials(self, upserts, request_timeout):
            waits.append(request_timeout)
            future: Future = Future()
            code = answers.pop(0) if answers else None
            if code is None:
                future.set_result(None)
            else:
                future.set_exception(KafkaException(KafkaError(code, "Failed while waiting for controller")))
            return {upserts[0].user: future}

    monkeypatch.setattr(scram.status, "admin_client", lambda *a, **k: Admin())
    monkeypatch.setattr(scram, "login_error", lambda *a, **k: None)
    scram.create_user(info, timeout_s=120.0)
    assert waits == [controller_request.ATTEMPT_S] * 2, "two tries, neither given the whole timeout"
    assert len(metadata_reads) == 1, "a fresh Metadata (naming the controller) before the second try"
    waits.clear()
    answers.extend([KafkaError.UNSUPPORTED_VERSION])
    with pytest.raises(KafkaException):
        scram.create_user(info, timeout_s=120.0)
    assert len(waits) == 1, "a refusal is not tried again"


def test_stall_file_holds_a_deadline(tmp_path) -> None:
    workdir = Workdir.at(tmp_path)
    assert workload.stalled_until(workdir, "auditor") is None
    deadline = workload.stall(workdir, "auditor", 30)
    assert workload.stalled_until(workdir, "auditor") == pytest.approx(deadline, abs=0.01)
    assert workload.stalled_until(workdir, "auditor", now=deadline + 1) is None
    assert workload.stalled_until(workdir, "analytics") is None


def test_a_dead_or_hung_workload_is_named_with_its_log(tmp_path) -> None:
    workdir = Workdir.at(tmp_path)
    workdir.workload.mkdir(parents=True)
    workdir.workload_log.write_text("workload started\nThread 0x1 (most recent call first):\n  File consume\n")
    found = workload.problem(workdir)
    assert found.startswith(f"the workload of {tmp_path} is not running; its log ends:\n") and "File consume" in found
    # a live process whose command line names the workload
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "sandbox.workload"])
    try:
        workdir.workload_pid.write_text(f"{proc.pid}\n")
        # until the child has exec'd, /proc shows the forking test's command line (on a loaded machine, a moment)
        cmdline = Path(f"/proc/{proc.pid}/cmdline")
        procs.wait_for(lambda: b"sandbox.workload" in cmdline.read_bytes(), 10, "the child's own command line")
        assert workload.problem(workdir) is None, "no heartbeat yet: nothing to judge"
        workdir.workload_heartbeat.write_text("1000.0\n")
        assert workload.problem(workdir, now=1029.0) is None
        hung = workload.problem(workdir, now=1031.0)
        assert hung.startswith(f"the workload of {tmp_path} runs but its loop has not gone round for 31 s (hung)")
        assert hung.endswith("  File consume")
    finally:
        proc.kill()
        proc.wait()
    assert workload.problem(workdir, now=1001.0).startswith(f"the workload of {tmp_path} is not running")


def test_wait_for_returns_the_value_or_times_out_or_aborts() -> None:
    began = time.monotonic()
    assert procs.wait_for(lambda: time.monotonic() - began > 0.1 and "done", 2, "0.1 s") == "done"

    def failing() -> bool:
        raise ValueError("boom")

    with pytest.raises(procs.Timeout, match="waiting for never .last error: boom"):
        procs.wait_for(failing, 0.2, "never")

    def dead() -> bool:
        raise procs.Abort("the process died")

    began = time.monotonic()
    with pytest.raises(procs.Abort, match="died"):
        procs.wait_for(dead, 10, "a dead process")
    assert time.monotonic() - began < 1


def test_pick_port_prefers_the_given_port_when_free() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        assert procs.port_in_use("127.0.0.1", taken)
        other = procs.pick_port("127.0.0.1", taken)
        assert other != taken and not procs.port_in_use("127.0.0.1", other)
    free = procs.free_port("127.0.0.1")
    assert procs.pick_port("127.0.0.1", free) == free


def test_state_round_trip_and_missing_state(tmp_path) -> None:
    workdir = Workdir.at(tmp_path)
    with pytest.raises(state.NotASandbox, match="no sandbox in"):
        state.load(workdir)
    info = _state(workdir)
    state.save(workdir, info)
    loaded = state.load(workdir)
    assert loaded == info
    assert loaded.bootstrap_servers == "127.9.0.11:9092,127.9.0.12:9092,127.9.0.13:9092"
    assert [s.id for s in loaded.active_specs] == [0, 1, 2]
    assert state.running_processes(workdir) == {}


def test_unpack_stages_a_release_on_every_host_and_leaves_the_running_one(tmp_path):
    """``python -m sandbox unpack --version V``: the release beside the running one on every host (brokers, spares,
    controllers), the ``kafka`` symlink untouched; a wrong version or a workdir without hosts is named."""
    from sandbox import cli, kafka_release

    wd = Workdir.at(tmp_path)
    for node in (0, 1, 100):
        wd.host(node).path.mkdir(parents=True)
        (wd.host(node).path / "kafka").symlink_to("kafka_2.13-3.6.2")
    assert cli.main(["unpack", "--workdir", str(tmp_path), "--version", "3.7.1"]) == 0
    for node in (0, 1, 100):
        staged = wd.host(node).install_dir("3.7.1")
        assert (staged / "bin" / "kafka-server-start.sh").is_file()
        assert (staged / "libs").resolve() == (kafka_release.release_dir("3.7.1") / "libs").resolve()
        assert str((wd.host(node).path / "kafka").readlink()) == "kafka_2.13-3.6.2"
    assert cli.main(["unpack", "--workdir", str(tmp_path), "--version", "9.9"]) == 1
    assert cli.main(["unpack", "--workdir", str(tmp_path / "none"), "--version", "3.7.1"]) == 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"mode": "zookeeper", "combined": 2}, "--combined is for --mode kraft"),
        ({"mode": "kraft", "combined": 4}, r"--combined must be between 0 and --brokers 3 \(got 4\)"),
        ({"mode": "kraft", "combined": -1}, "--combined must be between 0 and --brokers 3"),
        ({"mode": "kraft", "quorum": "raft"}, "--quorum must be static or dynamic"),
        ({"mode": "zookeeper", "quorum": "dynamic"}, "--quorum dynamic is for --mode kraft"),
        ({"mode": "zookeeper", "client_sasl": True, "sasl_mechanism": "SCRAM-SHA-1"},
         "--sasl-mechanism must be one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 .got 'SCRAM-SHA-1'."),
        ({"mode": "zookeeper", "sasl_mechanism": "SCRAM-SHA-512"}, "--sasl-mechanism SCRAM-SHA-512 needs --client-sa"),
        ({"mode": "zookeeper", "client_auth": True}, "--client-auth needs --client-tls"),
        ({"mode": "zookeeper", "cluster_id": "abc"}, "--cluster-id: cluster id 'abc' is not a Kafka cluster id"),
        ({"mode": "kraft", "cluster_id": "-ogsUktwTxKZV4yK-4fL!g"}, "not a Kafka cluster id .22 characters"),
    ],
)
def test_combined_mode_and_quorum_options_are_checked_before_anything_starts(tmp_path, options, message) -> None:
    workdir = Workdir.at(tmp_path / "sbx")
    kafka_version = "4.0.0" if options["mode"] == "kraft" else "3.6.2"
    with pytest.raises(cluster.SandboxError, match=message):
        cluster.up(workdir, brokers=3, kafka_version=kafka_version, **options)
    assert not (tmp_path / "sbx").exists(), "nothing was created"


def test_a_combined_sandbox_s_voters_are_its_first_brokers(tmp_path) -> None:
    info = _state(Workdir.at(tmp_path))
    info.mode, info.combined = "kraft", 2
    assert info.voters == {0: "127.9.0.11", 1: "127.9.0.12"}
    assert info.quorum_config == {"controller.quorum.voters": "0@127.9.0.11:9093,1@127.9.0.12:9093"}
    assert info.options()["combined"] == 2 and info.options()["controllers"] == 0


def test_a_dynamic_quorum_needs_kafka_3_9(tmp_path) -> None:
    with pytest.raises(cluster.SandboxError, match=r"needs Kafka 3.9 or later \(KIP-853; got 3.8.1\)"):
        cluster.up(Workdir.at(tmp_path / "sbx"), brokers=3, kafka_version="3.8.1", mode="kraft", quorum="dynamic")
    assert not (tmp_path / "sbx").exists(), "nothing was created"


def test_a_dynamic_sandbox_s_files_name_bootstrap_servers_and_its_format_the_voters(tmp_path) -> None:
    info = _state(Workdir.at(tmp_path))
    info.mode, info.combined = "kraft", 2
    assert info.quorum_config == {"controller.quorum.voters": "0@127.9.0.11:9093,1@127.9.0.12:9093"}
    assert info.initial_controllers is None
    info.quorum, info.directory_ids = "dynamic", {"0": "AAAAAAAAAAAAAAAAAAAAAg", "1": "AAAAAAAAAAAAAAAAAAAAAw"}
    assert info.quorum_config == {"controller.quorum.bootstrap.servers": "127.9.0.11:9093,127.9.0.12:9093"}
    assert info.initial_controllers == ("0@127.9.0.11:9093:AAAAAAAAAAAAAAAAAAAAAg,"
                                        "1@127.9.0.12:9093:AAAAAAAAAAAAAAAAAAAAAw")
    assert info.options()["quorum"] == "dynamic"


def test_observer_controllers_are_controllers_but_not_voters(tmp_path) -> None:
    info = _state(Workdir.at(tmp_path))
    info.mode, info.quorum, info.observer_controllers = "kraft", "dynamic", 1
    info.controller_hosts = [{"id": 100 + i, "host": f"127.9.0.{111 + i}"} for i in range(4)]
    assert sorted(info.controllers) == [100, 101, 102, 103]
    assert sorted(info.voters) == [100, 101, 102], "the last controller is an observer"
    assert info.quorum_config == {"controller.quorum.bootstrap.servers": "127.9.0.111:9093,127.9.0.112:9093,"
                                                                          "127.9.0.113:9093"}
    assert info.options()["controllers"] == 3 and info.options()["observer_controllers"] == 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"mode": "kraft", "observer_controllers": 1}, "--observer-controllers needs --quorum dynamic"),
        ({"mode": "kraft", "quorum": "dynamic", "combined": 3, "observer_controllers": 1},
         "--observer-controllers needs --quorum dynamic and dedicated controllers"),
        ({"mode": "kraft", "quorum": "dynamic", "observer_controllers": -1},
         "--observer-controllers cannot be negative"),
    ],
)
def test_observer_controller_options_are_checked_before_anything_starts(tmp_path, options, message) -> None:
    with pytest.raises(cluster.SandboxError, match=message):
        cluster.up(Workdir.at(tmp_path / "sbx"), brokers=3, kafka_version="4.1.0", **options)
    assert not (tmp_path / "sbx").exists(), "nothing was created"


def test_a_voter_counts_as_settled_only_once_its_own_log_names_the_leaders_epoch(tmp_path: Path) -> None:
    """`up` starts the brokers only when each voter's own log says it follows (or is) the leader in the epoch
    DescribeQuorum names (``node_log.raft_settled_epochs``): a follower's logged transition can trail the leader's
    view of its fetch by a few ms."""
    from sandbox import node_log

    log = Workdir.at(tmp_path).host(100).server_log
    assert node_log.raft_settled_epochs(log) == set(), "no log yet"
    log.parent.mkdir(parents=True)
    log.write_text(
        "[2026-12-03 07:04:17,951] INFO [RaftManager id=100] Completed transition to UnattachedState(epoch=1, "
        "leaderId=OptionalInt.empty, votedKey=Optional[ReplicaKey(id=101)]) from UnattachedState(epoch=0)\n")
    assert node_log.raft_settled_epochs(log) == set(), "voted, not yet following"
    log.write_text(log.read_text() + (
        "[2026-12-03 07:04:18,009] INFO [RaftManager id=100] Completed transition to FollowerState("
        "fetchTimeoutMs=2000, epoch=1, leader=101, leaderEndpoints=Endpoints(...)) from UnattachedState(epoch=1)\n"
        "[2026-12-03 07:05:02,500] INFO [RaftManager id=100] Completed transition to Leader("
        "localReplicaKey=ReplicaKey(id=100), epoch=3, epochStartOffset=90) from CandidateState(epoch=3)\n"))
    assert node_log.raft_settled_epochs(log) == {1, 3}, "a follower of epoch 1, then the leader of epoch 3"


def test_a_voters_current_raft_state_is_the_last_transition_its_log_names(tmp_path: Path) -> None:
    from sandbox import node_log

    log = Workdir.at(tmp_path).host(0).server_log
    assert node_log.last_raft_transition(log) is None, "no log yet"
    log.parent.mkdir(parents=True)
    log.write_text("[2026-12-03 07:04:17,951] INFO [KafkaRaftServer nodeId=0] starting\n")
    assert node_log.last_raft_transition(log) is None, "no transition yet"
    log.write_text(log.read_text() + (
        "[2026-12-03 07:04:18,009] INFO [RaftManager id=0] Completed transition to FollowerState("
        "fetchTimeoutMs=2000, epoch=1, leader=1, leaderEndpoints=Endpoints(...)) from UnattachedState(epoch=1)\n"))
    assert node_log.last_raft_transition(log) == ("Follower", 1)
    log.write_text(log.read_text() + (
        "[2026-12-03 07:05:02,500] INFO [RaftManager id=0] Completed transition to Leader("
        "localReplicaKey=ReplicaKey(id=0), epoch=3, epochStartOffset=90) from CandidateState(epoch=3)\n"))
    assert node_log.last_raft_transition(log) == ("Leader", 3)



def test_a_voters_raft_state_when_it_stopped_is_its_last_transition_before_the_shutdown_line() -> None:
    """What the KRaft tests judge "the quorum leader last" by (``node_log.Run.raft_state_at_shutdown``): the last
    ``Completed transition to`` of a start before its ``shutting down`` line; the Resigned state a leader enters
    while shutting down comes after the line and does not count; a leader that resigned on its own earlier (Kafka's
    check-quorum on a loaded machine) and followed another voter stopped as a follower."""
    from sandbox import node_log

    def start(at: str, pid: int) -> str:
        return f"[2026-12-03 {at},000] kafka-service: start /h/100/kafka_2.13-4.1.0 (pid {pid})\n"

    def line(at: str, text: str) -> str:
        return f"[2026-12-03 {at},000] INFO {text}\n"

    text = (start("13:53:00", 1)
            + line("13:53:01", "[RaftManager id=100] Completed transition to Leader(localReplicaKey=ReplicaKey(id=100"
                               "), epoch=1, epochStartOffset=0) from CandidateState(epoch=1)")
            + line("13:54:07", "[ControllerServer id=100] shutting down (kafka.server.ControllerServer)")
            + line("13:54:08", "[RaftManager id=100] Completed transition to ResignedState(localId=100, epoch=1) "
                               "from Leader(epoch=1)")
            + start("13:55:00", 2)
            + line("13:55:02", "[RaftManager id=100] Completed transition to FollowerState(fetchTimeoutMs=2000, "
                               "epoch=1, leader=101) from UnattachedState(epoch=1)")
            + line("13:56:00", "[RaftManager id=100] Completed transition to Leader(localReplicaKey=ReplicaKey(id=100"
                               "), epoch=2, epochStartOffset=9) from CandidateState(epoch=2)")
            + line("13:56:30", "[RaftManager id=100] Completed transition to ResignedState(localId=100, epoch=2) "
                               "from Leader(epoch=2)")
            + line("13:56:31", "[RaftManager id=100] Completed transition to FollowerState(fetchTimeoutMs=2000, "
                               "epoch=3, leader=102) from ResignedState(epoch=2)")
            + line("13:57:00", "[ControllerServer id=100] shutting down (kafka.server.ControllerServer)")
            + start("13:58:00", 3))
    runs = node_log.runs_of_text(text)
    assert [r.raft_state_at_shutdown for r in runs] == ["Leader", "Follower", None]
class RefusingProducer:
    """A producer that refuses the first ``refusals`` calls as librdkafka does for a topic its metadata lacks."""

    def __init__(self, refusals: int) -> None:
        self.refusals = refusals
        self.queued: list[tuple[str, int]] = []

    def produce(self, topic: str, _value: bytes, partition: int, on_delivery) -> None:
        if self.refusals:
            self.refusals -= 1
            raise KafkaException(KafkaError(KafkaError._UNKNOWN_TOPIC))
        self.queued.append((topic, partition))

    def poll(self, _timeout: float) -> int:
        return 0


def test_the_workload_outlives_a_produce_refused_for_an_unknown_topic(caplog) -> None:
    # CI: a broker restarted during a ZooKeeper-to-KRaft migration answered metadata without the topic; the
    # workload died on the refusal, its groups' lag went to STOP and the next roll's lag gate held for good.
    load = object.__new__(workload.Workload)  # no Kafka: only the produce round is under test
    load.plan = workload.topic_plan(3)
    load.producer = RefusingProducer(refusals=1)
    load.sent = load.failed = 0
    load.last_refusal_log = float("-inf")
    rounds = 3
    with caplog.at_level("INFO", logger="sandbox.workload"):
        load.produce_due(rounds / settings.PRODUCE_MSGS_PER_S)
    assert load.failed == 1 and load.sent == rounds
    assert len(load.producer.queued) == rounds * len(load.plan) - 1, "only the refused message is dropped"
    assert {topic for topic, _ in load.producer.queued} == set(load.plan), "the other topics went on"
    assert "refused" in caplog.text and "_UNKNOWN_TOPIC" in caplog.text


def test_traffic_names_a_refused_produce_by_its_kafka_error() -> None:
    from sandbox import traffic

    assert traffic.error_name(KafkaException(KafkaError(KafkaError._UNKNOWN_TOPIC))) == "_UNKNOWN_TOPIC"
    assert traffic.error_name(KafkaException("broken")) == "broken"
