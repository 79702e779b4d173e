"""The sandbox CLI and its real parts, observed from outside: env.json/airflow.env, SSH with host key
checking, Kafka's own tools, Burrow's HTTP API, ZooKeeper, /proc. Non-destructive tests use the shared session
sandbox and leave it healthy; tests that stop brokers or stall groups get their own (``fresh_sandbox``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import paramiko
import pytest

from sandbox import burrow, procs, settings, workload
from sandbox.layout import PROJECT_ROOT, Workdir
from sandbox.testing import RunningSandbox, run_cli, wait_for

pytestmark = pytest.mark.sandbox

ENV_KEYS = {
    "bootstrap_servers",
    "zookeeper_connect",
    "burrow_url",
    "burrow_cluster",
    "consumer_groups",
    "kafka_version",
    "brokers",
    "ssh",
}


def airflow_env(sandbox: RunningSandbox) -> dict[str, str]:
    """The variables ``airflow.env`` exports, as bash sees them after sourcing it."""
    script = f"set -e; . {sandbox.workdir}/airflow.env; env -0"
    out = subprocess.run(["bash", "-c", script], capture_output=True, check=True).stdout.decode()
    env = dict(item.split("=", 1) for item in out.split("\0") if "=" in item)
    return {k: v for k, v in env.items() if k.startswith("AIRFLOW_CONN_")}


def test_up_is_healthy_within_60_s(sandbox: RunningSandbox) -> None:
    if sandbox.up_seconds is None:
        pytest.skip("reusing a sandbox started outside this session")
    assert sandbox.up_seconds < 60, sandbox.up_output
    status = sandbox.status()
    assert status["healthy"] is True
    assert status["alive_brokers"] == [0, 1, 2]
    assert status["controller"] in (0, 1, 2)
    assert [b["service"] for b in status["brokers"]] == ["active", "active", "active", "inactive"]
    assert status["urp_count"] == 0 and status["offline_partitions"] == []
    expected_partitions = (
        sum(p for p, _, _ in settings.WORKLOAD_TOPICS.values()) + settings.CONSUMER_OFFSETS_PARTITIONS
    )
    assert status["partitions"] == expected_partitions


def test_env_json_has_exactly_the_issue_keys(sandbox: RunningSandbox) -> None:
    env = sandbox.env
    assert set(env) == ENV_KEYS | {"client_listener"}, "the shared sandbox runs with --client-sasl"
    assert env["client_listener"]["security_protocol"] == "SASL_PLAINTEXT"
    assert env["burrow_cluster"] == settings.BURROW_CLUSTER
    assert env["consumer_groups"] == list(settings.WORKLOAD_GROUPS)
    assert [b["id"] for b in env["brokers"]] == [0, 1, 2, 3]  # 3 brokers + 1 spare host
    for broker in env["brokers"]:
        assert set(broker) == {"id", "host", "port", "ssh_port", "rack"}
        assert broker["port"] == settings.BROKER_PORT and broker["ssh_port"] == settings.SSH_PORT
        assert broker["rack"] == f"rack-{broker['id'] % 3}"
    hosts = [b["host"] for b in env["brokers"]]
    assert env["bootstrap_servers"] == ",".join(f"{h}:9092" for h in hosts[:3])
    base = [int(x) for x in hosts[0].split(".")]
    assert hosts == [".".join(map(str, base[:3] + [base[3] + i])) for i in range(4)]
    assert set(env["ssh"]) == {"user", "key_file", "known_hosts"}
    assert os.path.isfile(env["ssh"]["key_file"]) and os.path.isfile(env["ssh"]["known_hosts"])
    known = open(env["ssh"]["known_hosts"]).read().splitlines()
    assert [line.split()[0] for line in known] == [f"[{h}]:2222" for h in hosts]


def test_airflow_env_defines_the_connections(sandbox: RunningSandbox) -> None:
    env = airflow_env(sandbox)
    assert sorted(env) == [
        "AIRFLOW_CONN_KAFKA_SANDBOX",
        "AIRFLOW_CONN_SANDBOX_BURROW",
        "AIRFLOW_CONN_SANDBOX_SSH",
        "AIRFLOW_CONN_SPARK_DEFAULT",
    ]
    assert json.loads(env["AIRFLOW_CONN_SPARK_DEFAULT"]) == {"conn_type": "spark", "host": "local[*]"}
    kafka = json.loads(env["AIRFLOW_CONN_KAFKA_SANDBOX"])
    ssh = json.loads(env["AIRFLOW_CONN_SANDBOX_SSH"])
    http = json.loads(env["AIRFLOW_CONN_SANDBOX_BURROW"])
    assert kafka["conn_type"] == "kafka" and kafka["host"] == sandbox.client_bootstrap_servers
    assert kafka["login"] == "kafkaops" and kafka["password"] == sandbox.env["client_listener"]["password"]
    extra = kafka["extra"]
    assert extra["ssh_conn_id"] == "sandbox_ssh" and extra["burrow_conn_id"] == "sandbox_burrow"
    assert extra["zookeeper"] == sandbox.zookeeper_connect
    assert extra["consumer_groups"] == sandbox.env["consumer_groups"]
    assert extra["service_status"] == "kafka-service status"
    assert extra["broker_hosts"] == {str(b): sandbox.broker(b)["host"] for b in sandbox.broker_ids}
    server_properties = extra["server_properties"].format(broker_id=1)
    assert os.path.isfile(server_properties) and "broker.id=1" in open(server_properties).read()
    assert ssh["conn_type"] == "ssh" and ssh["port"] == 2222 and ssh["login"] == sandbox.env["ssh"]["user"]
    assert ssh["extra"]["no_host_key_check"] is False and ssh["extra"]["host_key"].startswith("ssh-ed25519 ")
    assert (
        http["conn_type"] == "http"
        and f"{http['schema']}://{http['host']}:{http['port']}" == sandbox.burrow_url
    )
    # The cluster profile code of the plugins accepts the kafka connection as it is.
    sys.path.insert(0, str(PROJECT_ROOT / "plugins"))
    from kafka_ops.profile import ClusterProfile

    profile = ClusterProfile.from_connection_fields("kafka_sandbox", kafka["host"], extra, login=kafka["login"],
                                                    password=kafka["password"])
    assert profile.zookeeper == sandbox.zookeeper_connect
    assert profile.client_config["security.protocol"] == "SASL_PLAINTEXT"


def test_ssh_with_host_key_checking_runs_kafka_service_on_that_host(sandbox: RunningSandbox) -> None:
    rc, out, _ = sandbox.ssh(1, "kafka-service status; echo host=$KAFKA_HOST_DIR")
    assert rc == 0
    assert out.splitlines() == ["active", f"host={sandbox.host_dir(1).path}"]
    # SFTP works too (config edits): the host's server.properties at the profile's path pattern
    with sandbox.ssh_client(1) as client, client.open_sftp() as sftp:
        with sftp.open(str(sandbox.host_dir(1).server_properties)) as handle:
            assert b"broker.id=1" in handle.read()
    rc, out, _ = sandbox.ssh(3, "kafka-service status")  # the spare host: sshd up, broker not started
    assert (rc, out.strip()) == (3, "inactive")
    assert 3 not in sandbox.registered_brokers()


def test_ssh_sessions_have_a_home_of_the_host_s_own(sandbox: RunningSandbox) -> None:
    """The broker hosts do not run the machine user's shell startup files (Debian's bash sources ~/.bashrc for each
    command sshd runs: a developer's pyenv setup cost every SSH command 0.1-0.3 s and put its PATH first)."""
    rc, out, _ = sandbox.ssh(1, 'echo "home=$HOME"; ls -A "$HOME"; echo "path=$PATH"')
    assert rc == 0
    lines = out.splitlines()
    assert lines[0] == f"home={sandbox.host_dir(1).home}" and lines[1].startswith("path="), lines
    assert lines[1].split("=", 1)[1].split(":")[0].endswith("sandbox/bin"), "the sandbox's PATH comes first"


def test_ssh_rejects_an_unknown_host_key(sandbox: RunningSandbox, tmp_path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with pytest.raises(paramiko.SSHException, match="not found in known_hosts"):
        sandbox.ssh_client(0, known_hosts=empty)


def test_airflow_ssh_hook_connects_with_the_connection_of_airflow_env(
    sandbox: RunningSandbox, monkeypatch
) -> None:
    pytest.importorskip("airflow.providers.ssh.hooks.ssh")
    monkeypatch.setenv("AIRFLOW_CONN_SANDBOX_SSH", airflow_env(sandbox)["AIRFLOW_CONN_SANDBOX_SSH"])
    from airflow.providers.ssh.hooks.ssh import SSHHook

    host = sandbox.broker(2)["host"]
    hook = SSHHook(ssh_conn_id="sandbox_ssh", remote_host=host, cmd_timeout=30)
    with hook.get_conn() as client:
        rc, out, _ = hook.exec_ssh_client_command(
            client, "kafka-service status", get_pty=False, environment=None
        )
    assert rc == 0 and out.decode().strip() == "active"


def test_plugin_hooks_reach_burrow_through_the_airflow_env_connections(
    sandbox: RunningSandbox, monkeypatch
) -> None:
    pytest.importorskip("airflow.sdk")
    for name, value in airflow_env(sandbox).items():
        monkeypatch.setenv(name, value)
    monkeypatch.syspath_prepend(str(PROJECT_ROOT / "plugins"))
    from hooks.burrow import BurrowHook
    from hooks.cluster_profile import get_cluster_profile

    profile = get_cluster_profile("kafka_sandbox")
    assert profile.bootstrap_servers == sandbox.client_bootstrap_servers
    hook = BurrowHook.from_profile(profile)
    assert hook.base_url == sandbox.burrow_url
    def all_ok() -> list:
        statuses = hook.group_statuses(profile.consumer_groups)
        return statuses if all(s.status == "OK" for s in statuses) else []

    statuses = wait_for(all_ok, 30, "every group OK through BurrowHook")
    assert [s.group for s in statuses] == sandbox.env["consumer_groups"]


def test_the_workload_beats_and_is_judged_alive(sandbox: RunningSandbox) -> None:
    workdir = Workdir.at(sandbox.workdir)
    first = float(workdir.workload_heartbeat.read_text())
    assert time.time() - first < workload.STALE_AFTER_S
    # the loop goes round: the heartbeat moves on within a few seconds
    wait_for(lambda: float(workdir.workload_heartbeat.read_text()) > first, 10, "the workload's next heartbeat")
    assert workload.problem(workdir) is None


def test_burrow_lists_the_groups_with_status_ok(sandbox: RunningSandbox) -> None:
    seen: dict[str, list] = {}
    for group in sandbox.env["consumer_groups"]:

        def ok(g: str = group) -> bool:
            seen.setdefault(g, []).append(sandbox.group_status(g))
            return seen[g][-1] == "OK"

        try:
            wait_for(ok, 30, f"Burrow status OK for {group}")
        except procs.Timeout as exc:
            lag = burrow.get(sandbox.burrow_url, f"/v3/kafka/sandbox/consumer/{group}/lag")
            raise AssertionError(f"{exc}; statuses seen {seen[group][-5:]}; lag {lag}") from None
    assert sorted(sandbox.status()["consumer_groups"]) == sorted(sandbox.env["consumer_groups"])


def test_up_twice_says_already_running(sandbox: RunningSandbox) -> None:
    args = ["up", "--brokers", "3", "--spare-brokers", "1", "--address-base", sandbox.broker(0)["host"],
            "--client-sasl"]
    result = sandbox.cli(*args, timeout_s=30)
    assert result.returncode == 0, result.stderr
    assert "already running" in result.stderr


def test_bad_inputs_exit_1_with_a_clear_message(sandbox: RunningSandbox, tmp_path) -> None:
    result = sandbox.cli("crash-broker", "99")
    assert result.returncode == 1 and "unknown node id 99: this sandbox has brokers [0, 1, 2], spare hosts [3]" \
        in result.stderr
    result = sandbox.cli("freeze", "kafka")
    assert result.returncode == 1 and "unknown target 'kafka'" in result.stderr
    result = sandbox.cli("up", "--kafka-version", "4.0.0", "--address-base", sandbox.broker(0)["host"])
    assert result.returncode == 1 and "Kafka 4.0.0 has no ZooKeeper mode" in result.stderr
    result = sandbox.cli("lag", "no-such-group", "--stall-seconds", "5")
    assert result.returncode == 1 and "unknown consumer group 'no-such-group'" in result.stderr
    # the workdir of a running sandbox with other options
    result = sandbox.cli("up", "--brokers", "2", "--address-base", sandbox.broker(0)["host"])
    assert result.returncode == 1 and "another running sandbox" in result.stderr
    # the same options but another cluster id: the running cluster's id is Kafka's own, and the message says so
    result = sandbox.cli("up", "--brokers", "3", "--spare-brokers", "1", "--address-base", sandbox.broker(0)["host"],
                         "--client-sasl", "--cluster-id=-ogsUktwTxKZV4yK-4fLig")
    assert result.returncode == 1 and "another running sandbox" in result.stderr and \
        "'cluster_id': \"Kafka's own\"" in result.stderr, result.stderr
    # broker addresses held by the running sandbox: the message names its workdir
    result = run_cli("up", "--workdir", str(tmp_path / "other"), "--address-base", sandbox.broker(0)["host"])
    assert result.returncode == 1 and f"in use by the sandbox in {sandbox.workdir}" in result.stderr
    assert not procs.find_workdir_processes(tmp_path / "other")
    # a directory that is not a sandbox
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("keep me")
    result = run_cli("up", "--workdir", str(tmp_path / "notes"))
    assert result.returncode == 1 and "holds no sandbox" in result.stderr
    assert (tmp_path / "notes" / "todo.txt").read_text() == "keep me"
    # commands on a workdir without a sandbox
    result = run_cli("status", "--workdir", str(tmp_path / "empty"))
    assert result.returncode == 1 and "no sandbox in" in result.stderr


def test_missing_debian_package_is_named_with_the_install_command(tmp_path) -> None:
    code = (
        "import sys, sandbox.debs as d; d.REQUIRED['zookeeper'] = ('/nonexistent/zookeeper.jar',);"
        "from sandbox.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, "up", "--workdir", str(tmp_path / "w")],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "missing Debian package(s): zookeeper (/nonexistent/zookeeper.jar not found)" in result.stderr
    assert "apt-get install -y --no-install-recommends zookeeper" in result.stderr


@pytest.mark.destructive
def test_kafka_service_over_ssh_stop_start_spare_and_ibp_failure(fresh_sandbox) -> None:
    sbx = fresh_sandbox(brokers=3, spare_brokers=1)
    # stop = SIGTERM = Kafka's controlled shutdown, and wait: the JVM is gone when the command returns
    rc, out, _ = sbx.ssh(1, "kafka-service stop")
    assert rc == 0 and "broker 1 stopped" in out
    assert sbx.ssh(1, "kafka-service status")[:2] == (3, "inactive\n")
    assert "Starting controlled shutdown" in sbx.host_dir(1).server_log.read_text()
    wait_for(lambda: 1 not in sbx.registered_brokers(), 10, "broker 1 gone from the metadata")
    # Kafka's own tool judges: broker 1's partitions are under-replicated while it is down
    urp = sbx.kafka_tool("kafka-topics.sh", "--bootstrap-server", sbx.bootstrap_servers, "--describe",
                         "--under-replicated-partitions")
    assert urp.returncode == 0 and "Topic: orders" in urp.stdout, urp.stderr
    rc, out, _ = sbx.ssh(1, "kafka-service start")
    assert rc == 0 and "broker 1 active" in out and "kafka_2.13-3.6.2" in out
    assert 1 in sbx.registered_brokers()
    sbx.wait_healthy(timeout_s=60)
    urp = sbx.kafka_tool("kafka-topics.sh", "--bootstrap-server", sbx.bootstrap_servers, "--describe",
                         "--under-replicated-partitions")
    assert urp.returncode == 0 and urp.stdout.strip() == "", urp.stdout
    # the spare host starts its broker over SSH (scale-out)
    rc, out, _ = sbx.ssh(3, "kafka-service start")
    assert rc == 0, out
    wait_for(lambda: 3 in sbx.registered_brokers(), 30, "spare broker 3 registered")
    # an IBP newer than the installed release: Kafka refuses to start, status and the log say why
    props = sbx.host_dir(3).server_properties
    assert sbx.ssh(3, "kafka-service stop")[0] == 0
    ibp = "inter.broker.protocol.version"
    props.write_text(props.read_text().replace(f"{ibp}=3.6", f"{ibp}=3.7"))
    rc, _, err = sbx.ssh(3, "kafka-service start")
    reason = f"ConfigException: Invalid value 3.7 for configuration {ibp}: Version 3.7 is not a valid version"
    assert rc == 1 and f"broker 3 failed: {reason}" in err, err
    rc, out, _ = sbx.ssh(3, "kafka-service status")
    assert (rc, out) == (3, f"failed: {reason}\n")
    assert "Exiting Kafka due to fatal exception" in sbx.host_dir(3).server_log.read_text()
    assert 3 not in sbx.registered_brokers()


@pytest.mark.destructive
@pytest.mark.extended
def test_lag_turns_the_group_err_in_burrow_then_ok_again(fresh_sandbox) -> None:
    sbx = fresh_sandbox(brokers=3)
    wait_for(lambda: sbx.group_status("auditor") == "OK", 30, "auditor OK")
    stall_s = 20
    result = sbx.cli("lag", "auditor", "--stall-seconds", str(stall_s))
    assert result.returncode == 0, result.stderr
    began = time.monotonic()
    seen = wait_for(
        lambda: (s := sbx.group_status("auditor")) in ("WARN", "ERR") and s, stall_s, "auditor WARN/ERR"
    )
    assert seen in ("WARN", "ERR")
    assert sbx.group_status("orders-service") == "OK"  # the other groups keep committing
    assert sbx.status()["consumer_groups"]["auditor"]["status"] in ("WARN", "ERR")
    remaining = stall_s - (time.monotonic() - began)
    wait_for(lambda: sbx.group_status("auditor") == "OK", remaining + 30, "auditor OK after the stall")


@pytest.mark.destructive
@pytest.mark.extended
def test_crash_broker_then_down_leaves_no_process(fresh_sandbox) -> None:
    sbx = fresh_sandbox(brokers=3)
    pid = int(sbx.host_dir(2).kafka_pid.read_text())
    gone: dict[str, float] = {}
    with sbx.zk() as zk:
        # no controlled shutdown: the registration stays until the ZooKeeper session expires, i.e. the
        # session timeout after the broker's last heartbeat (kazoo pings every third of the timeout or so)
        def registered(ids: list[str]) -> None:
            if "2" not in ids:
                gone.setdefault("at", time.monotonic())

        zk.ChildrenWatch("/brokers/ids", registered)
        crashed_at = time.monotonic()  # at most this long before the SIGKILL
        result = sbx.cli("crash-broker", "2")
        assert result.returncode == 0, result.stderr
        assert not procs.is_alive(pid)
        assert sbx.ssh(2, "kafka-service status")[:2] == (3, "inactive\n")
        session_s = settings.ZK_SESSION_TIMEOUT_MS / 1000
        wait_for(lambda: "at" in gone, session_s + 10, "broker 2's session to expire")
    assert gone["at"] - crashed_at >= session_s * 0.5
    result = sbx.cli("crash-broker", "2")
    assert result.returncode == 1 and "node 2 is not running" in result.stderr
    # `up` on the running but damaged sandbox says what is wrong instead of "already running"
    result = sbx.cli("up", "--brokers", "3", "--address-base", sbx.broker(0)["host"])
    assert result.returncode == 1, result.stderr
    assert "already running but not healthy: brokers not live: [2]" in result.stderr
    # down stops everything, including a broker started over SSH meanwhile
    assert sbx.ssh(2, "kafka-service start")[0] == 0
    sbx.close()
    assert sbx.processes()
    result = sbx.cli("down")
    assert result.returncode == 0, result.stderr
    assert sbx.processes() == {}
    for broker in sbx.env["brokers"]:
        for port in (broker["port"], broker["ssh_port"]):
            assert not procs.port_in_use(broker["host"], port)
    assert not (sbx.workdir / "env.json").exists()
    result = sbx.cli("status")
    assert result.returncode == 0  # status still reports a stopped sandbox
    assert json.loads(result.stdout)["processes"] == {}


@pytest.mark.destructive
@pytest.mark.extended
def test_zookeeper_frozen_shorter_than_a_session_is_ridden_out(fresh_sandbox) -> None:
    """SIGSTOP on ZooKeeper (a real freeze: its sockets stay open, nothing answers) shorter than the brokers'
    session timeout: every broker keeps its session and registration, none restarts, the cluster stays
    healthy; ``thaw`` resumes it."""
    from sandbox import zookeeper

    sbx = fresh_sandbox(brokers=3)
    port = int(sbx.zookeeper_connect.rsplit(":", 1)[1])
    with sbx.zk() as zk:
        sessions = {b: zk.exists(f"/brokers/ids/{b}").ephemeralOwner for b in (0, 1, 2)}
    starts = sbx.starts([0, 1, 2])
    result = sbx.cli("freeze", "zookeeper")
    assert result.returncode == 0 and "frozen with SIGSTOP" in result.stderr, result.stderr
    try:
        wait_for(lambda: not zookeeper.ruok(port), 5, "ZooKeeper to stop answering")
    finally:
        result = sbx.cli("thaw", "zookeeper")
    assert result.returncode == 0, result.stderr
    wait_for(lambda: zookeeper.ruok(port), 10, "ZooKeeper to answer again")
    sbx.wait_healthy(timeout_s=60)
    with sbx.zk() as zk:
        assert {b: zk.exists(f"/brokers/ids/{b}").ephemeralOwner for b in (0, 1, 2)} == sessions
    assert sbx.starts([0, 1, 2]) == starts


@pytest.mark.destructive
def test_a_leader_restart_under_acks_all_traffic_loses_no_acknowledged_message(fresh_sandbox) -> None:
    """The data path through a real controlled shutdown and start: an idempotent ``acks=all`` producer and a
    reader on an RF 3 / min ISR 2 topic; every acknowledged message is read back, once, in order."""
    from sandbox.traffic import Traffic, ensure_topic

    sbx = fresh_sandbox(brokers=3)
    ensure_topic(sbx.bootstrap_servers, "data-path", partitions=3, replication_factor=3, min_insync_replicas=2)
    # a topic just created may be listed with no partitions yet: all() of nothing is not "led"
    led = wait_for(lambda: (ps := _partitions(sbx, "data-path")) and all(p.leader >= 0 for p in ps) and ps, 30,
                   "data-path led")
    leader = led[0].leader
    with Traffic(sbx.bootstrap_servers, "data-path", rate_per_s=500) as traffic:
        wait_for(lambda: traffic.counts()[1] > 500, 30, "acknowledged traffic before the restart")
        rc, out, err = sbx.ssh(leader, "kafka-service restart")
        assert rc == 0, err
        acked = traffic.counts()[1]
        wait_for(lambda: traffic.counts()[1] > acked + 500, 60, "acknowledged traffic after the restart")
        result = traffic.stop()
    assert result.acknowledged > 1000 and result.ok, result.to_dict()
    assert (result.lost, result.duplicates, result.out_of_order) == ([], [], [])
    sbx.wait_healthy(timeout_s=60)


def _partitions(sbx: RunningSandbox, topic: str) -> list:
    from confluent_kafka.admin import AdminClient

    meta = AdminClient({"bootstrap.servers": sbx.bootstrap_servers}).list_topics(topic, timeout=10).topics[topic]
    return [meta.partitions[p] for p in sorted(meta.partitions)]
