"""Integration tests of the plugins' hooks, probes, operators and broker commands against real sandboxes.

The Airflow connections come from a sandbox's ``airflow.env`` (``AIRFLOW_CONN_*`` environment variables,
see tests/dags/airflow_env.py); no scheduler runs: operators are executed directly with a minimal context
(``params``, ``dag`` / ``run_id`` for the lock holder, ``ti``) and probes, waits and broker commands are
called as the broker roll calls them. What the components report is checked against independent observers
(confluent-kafka metadata, kazoo on ZooKeeper, SSH to the broker hosts).

The shared ``sandbox`` is left healthy and balanced; the tests that stop a broker or move a replica use a
sandbox of this module's own (one ``sandbox up`` for both, like ``fresh_sandbox`` but module-scoped to keep
the runtime down; slot 210). ``BrokerRollOperator`` (turn, record, resume) needs the Airflow API
(``ti.get_task_states``, Variables): it is covered by the DAG tests in tests/dags; its rules are unit-tested
in tests/unit/test_roll.py.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import shlex
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from airflow.sdk.exceptions import AirflowFailException
from airflow_env import connection_env
from broker_support import module_sandbox
from confluent_kafka import ElectionType
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from hooks import cluster_lock
from hooks.broker_ssh import BrokerHostKeyError, BrokerShell
from hooks.burrow import BurrowClusterUnknown, BurrowHook
from hooks.cluster_profile import get_cluster_profile
from hooks.kafka_admin import KafkaAdminHook
from hooks.kafka_lock import LOCK_TOPIC, KafkaLockStore
from hooks.zookeeper import ZooKeeperHook
from kafka_ops.health import Verdict
from kafka_ops.profile import ClusterProfile
from observers import ClusterView, admin, registration, snapshot, wait_for
from operators.cluster_checks import WaitForClusterOperator
from operators.cluster_lock import LOCK_SETTINGS, LockClusterOperator
from operators.preflight import PreflightOperator
from operators.run_outcome import RunOutcomeOperator
from probes.cluster import PROBES, ClusterProber
from runtime.broker_commands import BrokerCommand, BrokerCommandFailed
from runtime.lock_holding import ensure_held
from runtime.params import FromParam
from runtime.waiting import Check, WaitTimeout, wait_until

from sandbox import settings
from sandbox.testing import RunningSandbox

pytestmark = [pytest.mark.sandbox, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

CONN = "kafka_sandbox"
SLOT_COMPONENTS = 210  # third address octet of this module's own sandbox (see tests/integration/broker_support.py)
SSH_CONN = "sandbox_ssh"
SSH_ENV = "AIRFLOW_CONN_SANDBOX_SSH"
KAFKA_ENV = "AIRFLOW_CONN_KAFKA_SANDBOX"
LOG = logging.getLogger("test_airflow_components")


# --- helpers ---------------------------------------------------------------------------------------


def point_connections(mp: pytest.MonkeyPatch, sb: RunningSandbox) -> None:
    """Airflow's connections (kafka_sandbox, sandbox_ssh, sandbox_burrow) now name ``sb``."""
    for name, value in connection_env(Path(sb.workdir)).items():
        mp.setenv(name, value)


def op_context(run_id: str, dag_id: str = "kafka_rolling_restart", **params) -> dict:
    """The part of a task context the operators read: ``params`` (cluster = the sandbox, lock_wait = wait,
    overridden by ``params``), ``dag.dag_id`` and ``run_id`` (the lock holder), ``dag.params`` (the declared ones,
    which ``check_and_lock`` checks the run's against), ``ti``."""
    from airflow.sdk.definitions.param import Param, ParamsDict

    xcom: dict[tuple[str, str], object] = {}
    ti = SimpleNamespace(dag_id=dag_id, run_id=run_id, task_id="t", map_index=-1, xcom=xcom,
                         xcom_push=lambda key, value: xcom.__setitem__(("t", key), value),
                         xcom_pull=lambda task_ids, key="return_value", **_: xcom.get((task_ids, key)))
    values = {"cluster": CONN, "lock_wait": "wait", "dry_run": False, **params}
    declared = ParamsDict({name: Param(value) for name, value in values.items()})
    return {"params": values, "dag": SimpleNamespace(dag_id=dag_id, params=declared), "run_id": run_id, "ti": ti,
            "dag_run": None}


RELEASED = ("cluster lock released", None)
NO_PROFILE = ("cluster lock: none (the cluster's profile is unreadable)", None)
NOT_HELD = ("cluster lock not held by this run at its end (never taken, or released by the task that failed)", None)


def unlock(context: dict, timeout_s: float = 30) -> tuple[str, str | None]:
    """What the ``run_outcome`` teardown does first: release the lock if this run holds it (its note's line about
    the lock, the error if it could not)."""
    outcome = RunOutcomeOperator(task_id="run_outcome", settings={**LOCK_SETTINGS, "dry_run": FromParam("dry_run")},
                                 operation="rolling restart", lock_timeout_s=timeout_s)
    outcome.resolve(context)
    return outcome.release(context, lock_task_ran=True)


def look(kind: str, broker: int | None = None, conn_id: str = CONN) -> Verdict:
    """One probe with a prober of its own (``ClusterProber.look``)."""
    with ClusterProber(get_cluster_profile(conn_id), request_timeout_s=10) as prober:
        return prober.look(kind, broker)


def passing(kind: str, broker: int | None = None) -> Verdict | None:
    """The probe's verdict when it passes, else None (for wait_for)."""
    verdict = look(kind, broker)
    return verdict if verdict.ok else None


def view(sb: RunningSandbox) -> ClusterView:
    return snapshot(admin(sb.bootstrap_servers))


def preferred_led(sb: RunningSandbox) -> bool:
    return all(p.leader == p.replicas[0] for p in view(sb).partitions)


def balance(sb: RunningSandbox) -> None:
    """Every partition led by its preferred leader (elected through a plain confluent-kafka client)."""
    if not preferred_led(sb):
        client = admin(sb.bootstrap_servers)  # held until the future resolves (a dropped client cancels it)
        client.elect_leaders(ElectionType.PREFERRED, None).result(timeout=30)
        wait_for(lambda: preferred_led(sb), 20, what="preferred leaders")


def registration_ms(sb: RunningSandbox, broker: int) -> int | None:
    with sb.zk() as zk:
        found = registration(zk, broker)
    return None if found is None else int(found["timestamp"])


def alter_topic_config(sb: RunningSandbox, topic: str, name: str, value: str | None) -> None:
    """IncrementalAlterConfigs through a plain confluent-kafka client: SET ``value``, DELETE for None."""
    op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=op)])
    client = admin(sb.bootstrap_servers)  # held until the futures resolve
    for future in client.incremental_alter_configs([resource], request_timeout=10).values():
        future.result(timeout=30)


def reasons_of(message: str) -> tuple[list[str], int]:
    """Split a verdict message ``"rule: r1; r2; ... and N more"`` into (shown reasons, N)."""
    body = message.split(": ", 1)[1]
    more = 0
    found = re.search(r"; \.\.\. and (\d+) more$", body)
    if found:
        more = int(found.group(1))
        body = body[: found.start()]
    return body.split("; "), more


def env_with(sb: RunningSandbox, env_name: str, **extra_changes) -> str:
    """A sandbox connection (JSON, by its ``AIRFLOW_CONN_*`` name) with extras changed (None = removed)."""
    conn = json.loads(connection_env(Path(sb.workdir))[env_name])
    for key, value in extra_changes.items():
        if value is None:
            conn["extra"].pop(key, None)
        else:
            conn["extra"][key] = value
    return json.dumps(conn)


def ssh_env_with(sb: RunningSandbox, **extra_changes) -> str:
    """The sandbox's ``sandbox_ssh`` connection (JSON) with extras changed (None = removed)."""
    return env_with(sb, SSH_ENV, **extra_changes)


def kafka_env_with(sb: RunningSandbox, **extra_changes) -> str:
    """The sandbox's ``kafka_sandbox`` connection (JSON) with extras changed (None = removed)."""
    return env_with(sb, KAFKA_ENV, **extra_changes)


def on_host(sb: RunningSandbox, broker: int) -> dict:
    """A roll plan entry for ``broker`` (what ``BrokerCommand.choose`` reads: id and host)."""
    return {"id": broker, "host": sb.broker(broker)["host"], "rack": sb.broker(broker)["rack"], "position": 1,
            "total": 1}


# --- fixtures --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shared(sandbox: RunningSandbox) -> Iterator[RunningSandbox]:
    """The session's sandbox with the connections pointing at it, healthy and balanced before and
    after this module."""
    with pytest.MonkeyPatch.context() as mp:
        point_connections(mp, sandbox)
        sandbox.wait_healthy(timeout_s=60)
        balance(sandbox)
        yield sandbox
        sandbox.wait_healthy(timeout_s=60)
        balance(sandbox)


@pytest.fixture(scope="module")
def own_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningSandbox]:
    """A sandbox of this module's own for the destructive tests (stops, reassignments): one ``sandbox up``
    for both; each test starts from a healthy cluster and leaves it healthy."""
    with module_sandbox(request, tmp_path_factory, SLOT_COMPONENTS, brokers=3, racks=3) as running:
        yield running


@pytest.fixture
def destructible(own_cluster: RunningSandbox, monkeypatch: pytest.MonkeyPatch) -> RunningSandbox:
    """The module's own sandbox, healthy and balanced, with the connections pointing at it for this test."""
    point_connections(monkeypatch, own_cluster)
    own_cluster.wait_healthy(timeout_s=60)
    balance(own_cluster)
    return own_cluster


@pytest.fixture
def free_lock(shared: RunningSandbox) -> Iterator[RunningSandbox]:
    """No operation lock on the shared sandbox before and after the test."""
    with shared.zk() as zk:
        assert cluster_lock.current_holder(zk) is None, "a lock was left on the shared sandbox"
    yield shared
    with shared.zk() as zk:
        if zk.exists(cluster_lock.LOCK_PATH):
            zk.delete(cluster_lock.LOCK_PATH)


# --- hooks: profile, admin, ZooKeeper, Burrow --------------------------------------------------------


def test_cluster_profile_from_the_sandbox_connection_env(shared: RunningSandbox) -> None:
    profile = get_cluster_profile(CONN)
    assert profile.bootstrap_servers == shared.client_bootstrap_servers, "the SASL listener (--client-sasl)"
    assert profile.zookeeper == shared.zookeeper_connect
    assert (profile.ssh_conn_id, profile.burrow_conn_id, profile.burrow_cluster) == (
        SSH_CONN, "sandbox_burrow", shared.env["burrow_cluster"])
    assert list(profile.consumer_groups) == shared.env["consumer_groups"]
    assert (profile.service_stop, profile.service_start, profile.service_status) == (
        "kafka-service stop", "kafka-service start", "kafka-service status")


def test_cluster_state_brokers_racks_controller_and_min_isr(shared: RunningSandbox) -> None:
    with KafkaAdminHook(CONN) as hook:
        state = hook.cluster_state()
    seen = view(shared)
    racks = {b["id"]: b["rack"] for b in shared.env["brokers"]}
    assert state.broker_ids == [0, 1, 2], "the spare host runs no broker"
    assert {b.id: b.rack for b in state.brokers} == {b: racks[b] for b in (0, 1, 2)}
    assert {b.id: b.host for b in state.brokers} == {b: shared.broker(b)["host"] for b in (0, 1, 2)}
    with shared.zk() as zk:
        zk_controller = json.loads(zk.get("/controller")[0])["brokerid"]
    assert state.controller_id == zk_controller == seen.controller
    # the broker default from server.properties, not the library default (1)
    assert state.default_min_insync == 2
    assert state.leader_imbalance_percentage == 10
    assert state.topic_min_insync == {}, "no topic overrides in the sandbox"
    assert {(p.topic, p.partition): (p.leader, p.replicas, p.isr) for p in state.partitions} == {
        (p.topic, p.partition): (p.leader, p.replicas, p.isr) for p in seen.partitions}
    with KafkaAdminHook(CONN) as hook:
        audit = hook.cluster_state(topics=["audit"])
    assert audit.topics == ["audit"] and len(audit.partitions) == 3 and audit.broker_ids == [0, 1, 2]


def test_each_broker_names_the_controller_that_holds_the_controller_znode(shared: RunningSandbox) -> None:
    from kafka.errors import KafkaConnectionError

    with shared.zk() as zk:
        zk_controller = json.loads(zk.get("/controller")[0])["brokerid"]
    # each broker at the listener of the connection (SASL, --client-sasl), as the roll asks it
    addresses = dict(zip((0, 1, 2), shared.client_bootstrap_servers.split(","), strict=True))
    with KafkaAdminHook(CONN) as hook:
        named = {b: hook.controller_named_by(addresses[b]) for b in (0, 1, 2)}
        assert named == {0: zk_controller, 1: zk_controller, 2: zk_controller}
        with pytest.raises(KafkaConnectionError):
            hook.controller_named_by("127.0.0.1:1")


def test_a_zookeeper_mode_cluster_has_no_broker_registrations_to_list_or_remove(shared: RunningSandbox) -> None:
    """Fenced registrations and UnregisterBroker are KRaft's (the KRaft DAG tests use them on real 4.0 brokers);
    a ZooKeeper-mode 3.6 cluster offers neither: the listing says it cannot tell, the removal raises."""
    from kafka.errors import IncompatibleBrokerVersion, UnsupportedVersionError

    with KafkaAdminHook(CONN) as hook:
        assert hook.broker_registrations() is None
        with pytest.raises((IncompatibleBrokerVersion, UnsupportedVersionError)):
            hook.unregister_broker(2)
    assert view(shared).brokers == {0, 1, 2}, "every broker still there"


def test_cluster_state_sees_a_topic_min_insync_override(shared: RunningSandbox) -> None:
    def overrides() -> dict[str, int]:
        with KafkaAdminHook(CONN) as hook:
            return hook.cluster_state().topic_min_insync

    try:
        alter_topic_config(shared, "audit", "min.insync.replicas", "1")
        found = wait_for(lambda: overrides() or None, 15, what="the audit override in cluster_state")
        assert found == {"audit": 1}
        with KafkaAdminHook(CONN) as hook:
            state = hook.cluster_state()
        assert state.min_insync_replicas("audit") == 1 and state.min_insync_replicas("orders") == 2
    finally:
        alter_topic_config(shared, "audit", "min.insync.replicas", None)
    wait_for(lambda: overrides() == {}, 15, what="the override gone after the revert")


def test_elect_preferred_leaders_on_a_balanced_cluster_reports_no_errors(shared: RunningSandbox) -> None:
    wanted = [("orders", 0), ("payments", 1), ("audit", 2)]
    with KafkaAdminHook(CONN) as hook:
        result = hook.elect_preferred_leaders(wanted)
        assert hook.elect_preferred_leaders([]) == {}
    # ELECTION_NOT_NEEDED counts as success: nothing moves
    assert result == {"audit-2": None, "orders-0": None, "payments-1": None}
    assert preferred_led(shared)


def test_describe_log_dirs_lists_every_replica(shared: RunningSandbox) -> None:
    with KafkaAdminHook(CONN) as hook:
        rows = hook.describe_log_dirs()
        only_two = hook.describe_log_dirs(brokers=[2])
    seen = view(shared)
    expected = {(r, p.topic, p.partition) for p in seen.partitions for r in p.replicas}
    assert {(r["broker"], r["topic"], r["partition"]) for r in rows} == expected
    assert all(r["log_dir"] == str(shared.host_dir(r["broker"]).path / "data") for r in rows), rows[:3]
    workload = [r for r in rows if r["topic"] in ("orders", "payments", "clicks", "audit")]
    assert workload and all(r["size_bytes"] > 0 and not r["is_future"] for r in workload)
    assert {r["broker"] for r in only_two} == {2}
    assert len(only_two) == len([e for e in expected if e[0] == 2])
    with KafkaAdminHook(CONN) as hook:
        assert hook.list_partition_reassignments() == []


def test_zookeeper_hook_sees_no_reassignment_on_a_quiet_cluster(shared: RunningSandbox) -> None:
    with shared.zk() as zk:
        assert zk.exists("/admin/reassign_partitions") is None
    with ZooKeeperHook(CONN) as hook:
        assert hook.reassignment_in_progress() is None

def test_burrow_hook_ok_groups_and_notfound_for_an_unknown_group(shared: RunningSandbox) -> None:
    groups = shared.env["consumer_groups"]
    with BurrowHook.from_profile(get_cluster_profile(CONN)) as hook:
        def all_ok():
            statuses = hook.group_statuses(groups)
            return statuses if all(s.status == "OK" for s in statuses) else None

        def full_windows():
            statuses = hook.group_statuses(groups)
            return statuses if all(s.window_s() > 0 for s in statuses) else None

        statuses = wait_for(all_ok, 30, what="every workload group OK in Burrow")
        unknown = hook.group_status("nobody-reads-this")
        # /lag lists every partition with the window of commits Burrow judged (the lag gate's hysteresis): a
        # running workload's groups get full windows spanning their last storage.intervals commits, ending lately
        judged = wait_for(full_windows, 60, what="every workload group with a full window of commits in Burrow")
        now_ms = time.time() * 1000
    assert [s.group for s in statuses] == groups
    assert all(s.ok and s.partitions == () for s in statuses)
    for status in judged:
        start, end = status.window
        assert status.complete == 1.0 and 0 < end - start and now_ms - end < 60_000, status
    # Burrow's answer says it does not know the group: a failing status, never a pass
    assert unknown.status == "NOTFOUND" and not unknown.ok


def test_burrow_hook_cluster_servers_are_the_sandbox_brokers(shared: RunningSandbox) -> None:
    profile = get_cluster_profile(CONN)
    with BurrowHook.from_profile(profile) as hook:
        servers = hook.cluster_servers()
    assert sorted(servers) == sorted(shared.bootstrap_servers.split(",")) == sorted(
        f"{shared.broker(b)['host']}:{shared.broker(b)['port']}" for b in (0, 1, 2))
    with BurrowHook(profile.burrow_conn_id, cluster="no-such-cluster") as hook:
        with pytest.raises(BurrowClusterUnknown, match=r"has no Kafka cluster named 'no-such-cluster' \(HTTP 404"):
            hook.cluster_servers()


# --- hooks: SSH to broker hosts -----------------------------------------------------------------------


def test_broker_shell_runs_kafka_service_status_with_host_key_checking(shared: RunningSandbox) -> None:
    for broker in (0, 2):
        shell = BrokerShell(SSH_CONN, shared.broker(broker)["host"])
        assert not shell.hook.no_host_key_check
        rc, out, err = shell.run("kafka-service status; echo host=$KAFKA_HOST_DIR", timeout_s=30)
        assert (rc, out.splitlines()) == (0, ["active", f"host={shared.host_dir(broker).path}"]), err
    rc, out, _ = BrokerShell(SSH_CONN, shared.broker(3)["host"]).run("kafka-service status", timeout_s=30)
    assert (rc, out.strip()) == (3, "inactive"), "the spare host has no running broker"


def test_broker_shell_read_returns_a_file_whole_with_the_command_exit_code(shared: RunningSandbox) -> None:
    """``read`` (what the upgrade computes a server.properties edit from): the whole file, byte for byte, over
    many reads (the provider's reader alone once returned it empty), and the command's own exit code."""
    shell = BrokerShell(SSH_CONN, shared.broker(1)["host"])
    props = shared.host_dir(1).path / "server.properties"
    expected = props.read_text()
    for _ in range(20):
        rc, out, _ = shell.read(f"cat {shlex.quote(str(props))}", timeout_s=30)
        assert (rc, out) == (0, expected)
    assert shell.read("printf 'no newline'; exit 7", timeout_s=30)[:2] == (7, "no newline")


@pytest.mark.parametrize("extra", [
    {"no_host_key_check": True, "host_key": None, "known_hosts": None},
    {"allow_host_key_change": True},
])
def test_broker_shell_refuses_a_connection_without_host_key_checking(
    shared: RunningSandbox, monkeypatch: pytest.MonkeyPatch, extra: dict
) -> None:
    monkeypatch.setenv(SSH_ENV, ssh_env_with(shared, **extra))
    with pytest.raises(BrokerHostKeyError, match="disables host key checking"):
        BrokerShell(SSH_CONN, shared.broker(1)["host"])


def test_broker_shell_refuses_a_host_missing_from_known_hosts(
    shared: RunningSandbox, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    host0, host1 = shared.broker(0)["host"], shared.broker(1)["host"]
    original = Path(shared.env["ssh"]["known_hosts"]).read_text().splitlines()
    kept = [line for line in original if not line.startswith(f"[{host1}]:")]
    assert len(kept) == len(original) - 1
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("\n".join(kept) + "\n")
    monkeypatch.setenv(SSH_ENV, ssh_env_with(shared, known_hosts=str(known_hosts)))
    # the copy works for the hosts it lists ...
    assert BrokerShell(SSH_CONN, host0).run("kafka-service status", timeout_s=30)[:2] == (0, "active\n")
    # ... and the missing one is refused before any connection (the host_key extra does not count)
    with pytest.raises(BrokerHostKeyError, match=re.escape(f"no host key for [{host1}]:2222")):
        BrokerShell(SSH_CONN, host1)


def test_broker_shell_rejects_an_impostor_host_key(
    shared: RunningSandbox, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import paramiko

    host1 = shared.broker(1)["host"]
    # another ed25519 key (the client key's public half) stands in for an impostor's host key
    key_type, key = Path(shared.env["ssh"]["key_file"] + ".pub").read_text().split()[:2]
    assert key not in Path(shared.env["ssh"]["known_hosts"]).read_text()
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(f"[{host1}]:2222 {key_type} {key}\n")
    # a connection to the real host, kept by this process for the next command (hooks.broker_ssh.POOL) ...
    assert BrokerShell(SSH_CONN, host1).run("true", timeout_s=30)[0] == 0
    monkeypatch.setenv(SSH_ENV, ssh_env_with(shared, known_hosts=str(known_hosts)))
    marker = tmp_path / "ran"
    # ... does not serve a command under other settings: the new connection checks the (impostor's) host key
    with pytest.raises(paramiko.BadHostKeyException):
        BrokerShell(SSH_CONN, host1).run(f"touch {marker}", timeout_s=30)
    assert not marker.exists()


def test_commands_on_one_host_share_one_kept_ssh_connection(shared: RunningSandbox) -> None:
    """A roll sends a host several commands within seconds: the second one reuses the first one's connection (no
    new key exchange), a connection whose sshd went away is replaced, and a shell without the pool opens its own."""
    from hooks import broker_ssh

    host = shared.broker(2)["host"]
    first = BrokerShell(SSH_CONN, host)
    first.connect()
    kept = broker_ssh.POOL._idle[first._key][0]
    assert BrokerShell(SSH_CONN, host).run("kafka-service status", timeout_s=30)[:2] == (0, "active\n")
    assert broker_ssh.POOL._idle[first._key][0] is kept, "the same client served the command and was kept again"
    kept.get_transport().close()  # as when the host's sshd restarts
    assert BrokerShell(SSH_CONN, host).run("true", timeout_s=30)[0] == 0
    assert broker_ssh.POOL._idle[first._key][0] is not kept and kept.get_transport() is None, "replaced, closed"
    alone = BrokerShell(SSH_CONN, host, pool=None)
    assert alone.run("true", timeout_s=30)[0] == 0
    assert alone.hook.client.get_transport() is None, "without the pool the connection is closed after its command"


def test_connections_opened_ahead_are_kept_and_a_host_that_fails_is_only_logged(
    shared: RunningSandbox, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog
) -> None:
    """While a gate waits the roll opens its next hosts' connections (``runtime.broker_commands.connect_ahead``):
    one per host, kept for the stop's command; a host without a known key, or one whose sshd does not answer, is only
    logged: the command that needs it reports it."""
    from hooks import broker_ssh
    from runtime.broker_commands import connect_ahead

    host = shared.broker(1)["host"]
    silent, unknown = "127.0.0.250", "127.0.0.251"  # no sshd listens there
    known_hosts = tmp_path / "known_hosts"
    listed = Path(shared.env["ssh"]["known_hosts"]).read_text()
    line = next(entry for entry in listed.splitlines() if entry.startswith(f"[{host}]:"))
    known_hosts.write_text(listed + line.replace(f"[{host}]", f"[{silent}]", 1) + "\n")
    monkeypatch.setenv(SSH_ENV, ssh_env_with(shared, known_hosts=str(known_hosts)))
    key = BrokerShell(SSH_CONN, host)._key
    broker_ssh.POOL._idle.pop(key, None)  # nothing kept from an earlier test
    log = logging.getLogger("test.connect_ahead")
    with caplog.at_level(logging.DEBUG, logger=log.name):
        threads = connect_ahead(SSH_CONN, [host, silent, host, unknown], log)
        for thread in threads:
            thread.join(120)
    assert sorted(t.name for t in threads) == sorted([f"ssh-ahead-{host}", f"ssh-ahead-{silent}"]), \
        "one per host with a key"
    assert not any(t.is_alive() for t in threads)
    kept = broker_ssh.POOL._idle[key][0]
    assert kept.get_transport().is_active(), "kept for the next command"
    assert BrokerShell(SSH_CONN, host).run("true", timeout_s=30)[0] == 0
    assert broker_ssh.POOL._idle[key][0] is kept, "the command used the connection opened ahead"
    assert f"SSH to {unknown} not opened ahead" in caplog.text and "no host key" in caplog.text
    assert f"SSH to {silent} not opened ahead" in caplog.text


# --- cluster lock ---------------------------------------------------------------------------------------


def test_cluster_lock_semantics_on_zookeeper(free_lock: RunningSandbox) -> None:
    a, b = "kafka_rolling_restart/manual__a", "kafka_decommission/manual__b"
    with ZooKeeperHook(CONN) as hook:
        zk = hook.get_conn()
        assert cluster_lock.current_holder(zk) is None
        before_ms = int(time.time() * 1000)
        assert cluster_lock.try_acquire(zk, a, "rolling restart") is None
        holder = cluster_lock.current_holder(zk)
        assert (holder.holder, holder.operation) == (a, "rolling restart")
        assert before_ms <= holder.since_ms <= int(time.time() * 1000)
        # a second holder is refused and told who holds it
        other = cluster_lock.try_acquire(zk, b, "decommission")
        assert other is not None and other.holder == a and a in other.describe()
        # re-entrant for the same holder (a cleared setup task takes it again)
        assert cluster_lock.try_acquire(zk, a, "rolling restart") is None
        # a non-holder's release does nothing
        assert cluster_lock.release(zk, b) is False
        assert cluster_lock.current_holder(zk).holder == a
        assert cluster_lock.release(zk, a) is True
        assert cluster_lock.current_holder(zk) is None
        assert cluster_lock.release(zk, a) is False, "releasing a free lock is a no-op"
        assert cluster_lock.try_acquire(zk, b, "decommission") is None
        assert cluster_lock.release(zk, b) is True
    with free_lock.zk() as observer:  # the node really is gone
        assert not observer.exists(cluster_lock.LOCK_PATH)


def kafka_only_profile(mp: pytest.MonkeyPatch, sb: RunningSandbox) -> None:
    """The kafka_sandbox connection as a KRaft cluster's would be: no ``zookeeper`` (so the lock lives in the
    cluster itself: ``lock_store`` auto -> kafka)."""
    point_connections(mp, sb)
    conn = json.loads(connection_env(Path(sb.workdir))["AIRFLOW_CONN_KAFKA_SANDBOX"])
    conn["extra"] = {k: v for k, v in conn["extra"].items() if k not in ("zookeeper", "reassignment_via")}
    mp.setenv("AIRFLOW_CONN_KAFKA_SANDBOX", json.dumps(conn))


@pytest.fixture
def free_lock_topic(shared: RunningSandbox, monkeypatch: pytest.MonkeyPatch) -> Iterator[RunningSandbox]:
    """No lock topic on the shared sandbox before and after the test; the connection without ZooKeeper."""
    kafka_only_profile(monkeypatch, shared)
    assert get_cluster_profile(CONN).lock_in == "kafka"
    with KafkaLockStore(get_cluster_profile(CONN)) as store:
        assert store.current_holder() is None, "a lock topic was left on the shared sandbox"
    yield shared
    with KafkaLockStore(get_cluster_profile(CONN)) as store:
        if store._exists():
            store._delete()


def test_cluster_lock_semantics_in_a_lock_topic(free_lock_topic: RunningSandbox) -> None:
    """The same rules as the ZooKeeper lock, kept in the cluster (KRaft clusters have no ZooKeeper): one
    holder (CreateTopics is atomic), named to others, re-entrant, released only by its holder, gone after."""
    a, b = "kafka_rolling_restart/manual__a", "kafka_decommission/manual__b"
    store = KafkaLockStore(get_cluster_profile(CONN))
    before_ms = int(time.time() * 1000)
    assert store.try_acquire(a, "rolling restart") is None
    holder = store.current_holder()
    assert (holder.holder, holder.operation) == (a, "rolling restart")
    assert before_ms <= holder.since_ms <= int(time.time() * 1000)
    other = store.try_acquire(b, "decommission")
    assert other is not None and other.holder == a and a in other.describe()
    assert store.try_acquire(a, "rolling restart") is None, "re-entrant for its holder"
    assert store.release(b) is False and store.current_holder().holder == a
    # an independent client sees the lock topic and its holder record
    meta = admin(free_lock_topic.bootstrap_servers).list_topics(LOCK_TOPIC, timeout=10).topics[LOCK_TOPIC]
    assert meta.error is None and len(meta.partitions) == 1 and len(meta.partitions[0].replicas) == 3
    assert store.release(a) is True
    assert LOCK_TOPIC not in admin(free_lock_topic.bootstrap_servers).list_topics(timeout=10).topics
    assert store.current_holder() is None and store.release(a) is False
    assert store.try_acquire(b, "decommission") is None, "free again after the release"
    assert store.release(b) is True

    # a lock topic auto-created by a client's Metadata request naming it (auto.create.topics.enable=true, Kafka's
    # default, as on this sandbox; Burrow asks so for a lock topic just released) is no lock: deleted when read
    from confluent_kafka import Consumer

    asker = Consumer({"bootstrap.servers": free_lock_topic.bootstrap_servers, "group.id": "lock-stray",
                      "allow.auto.create.topics": True})
    try:
        def auto_created() -> bool:
            asker.list_topics(LOCK_TOPIC, timeout=10)  # a Metadata request naming it
            return LOCK_TOPIC in admin(free_lock_topic.bootstrap_servers).list_topics(timeout=10).topics
        wait_for(auto_created, 30, what="the lock topic auto-created by a Metadata request")
    finally:
        asker.close()
    assert store.current_holder() is None, "a stray lock topic reads as free"
    assert LOCK_TOPIC not in admin(free_lock_topic.bootstrap_servers).list_topics(timeout=10).topics, "and is gone"
    assert store.try_acquire(a, "rolling restart") is None and store.current_holder().holder == a
    assert store.release(a) is True

    # a lock topic whose creator died before writing its holder record (created with the lock's configs, as a
    # taker creates it) is held by "unknown"
    from confluent_kafka.admin import NewTopic

    client = admin(free_lock_topic.bootstrap_servers)  # kept referenced: a dropped client cancels its futures
    client.create_topics([NewTopic(LOCK_TOPIC, 1, 3, config={"retention.ms": "-1", "min.insync.replicas": "2"})]
                         )[LOCK_TOPIC].result(30)
    # CreateTopics returns before every broker's metadata lists the topic (ZooKeeper mode): until then the
    # store reads the cluster as free, as any client would
    # (and each broker learns of it from the controller on its own time: the store may ask one that has not yet)
    stuck = wait_for(lambda: store.current_holder(wait_s=1.0), 15, what="the lock topic read as held")
    assert stuck.holder.startswith("unknown"), stuck
    assert store.try_acquire(a, "rolling restart").holder.startswith("unknown"), "nobody takes a stuck lock"
    assert "kafka-topics.sh" in store.break_hint and "--delete --topic kafka-ops.operation-lock" in store.break_hint


def test_lock_operators_keep_the_lock_in_the_cluster_without_zookeeper(free_lock_topic: RunningSandbox) -> None:
    run_a, run_b = op_context("manual__a"), op_context("manual__b")
    take = LockClusterOperator(task_id="check_and_lock", settings=LOCK_SETTINGS, operation="rolling restart",
                               interval_s=0.2)
    assert take.execute(run_a) == "kafka_rolling_restart/manual__a"
    assert run_a["ti"].xcom == {("t", "cluster_mode"): "zookeeper"}, "the run's mode, decided under the lock"
    with pytest.raises(AirflowFailException, match=r"cluster kafka_sandbox is busy: kafka_rolling_restart/manual__a "
                                                   r"\(rolling restart, held for \d+ s\) \(lock_wait=fail\)"):
        take.execute(op_context("manual__b", lock_wait="fail"))
    profile = get_cluster_profile(CONN)
    with pytest.raises(AirflowFailException, match="held by kafka_rolling_restart/manual__a"):
        ensure_held(profile, run_b, "decommission", LOG, timeout_s=5)
    assert unlock(run_b) == NOT_HELD, "another run's teardown never releases it"
    assert unlock(run_a) == RELEASED
    ensure_held(profile, run_b, "decommission", LOG, timeout_s=5)  # free: re-taken by the acting run
    assert KafkaLockStore(profile).current_holder().holder == "kafka_rolling_restart/manual__b"
    assert unlock(run_b) == RELEASED
    with free_lock_topic.zk() as zk:
        assert not zk.exists(cluster_lock.LOCK_PATH), "nothing was written to ZooKeeper"


def test_lock_and_unlock_operators(free_lock: RunningSandbox) -> None:
    run_a, run_b = op_context("manual__a"), op_context("manual__b")
    take = LockClusterOperator(task_id="check_and_lock", settings=LOCK_SETTINGS, operation="rolling restart",
                               interval_s=0.2)

    assert take.execute(run_a) == "kafka_rolling_restart/manual__a"
    with free_lock.zk() as zk:
        stored = json.loads(zk.get(cluster_lock.LOCK_PATH)[0])
    assert stored["holder"] == "kafka_rolling_restart/manual__a" and stored["operation"] == "rolling restart"
    assert take.execute(run_a) == "kafka_rolling_restart/manual__a", "re-entrant: a cleared lock task takes it again"

    # lock_wait=fail: fails at once, naming the holder
    began = time.monotonic()
    with pytest.raises(AirflowFailException, match=r"cluster kafka_sandbox is busy: kafka_rolling_restart/manual__a "
                                                   r"\(rolling restart, held for \d+ s\) \(lock_wait=fail\)"):
        take.execute(op_context("manual__b", lock_wait="fail"))
    assert time.monotonic() - began < 10, "another holder is not waited out with lock_wait=fail"
    # lock_wait=wait: polls until its timeout, then fails naming the holder
    impatient = LockClusterOperator(task_id="lock_w", settings=LOCK_SETTINGS, operation="rolling restart",
                                    lock_timeout_s=1, interval_s=0.3)
    with pytest.raises(AirflowFailException, match=r"gave up after 1 s \(\d+ checks\) waiting until cluster "
                                                   r"kafka_sandbox is locked for this run: cluster kafka_sandbox is "
                                                   r"busy: kafka_rolling_restart/manual__a"):
        impatient.execute(run_b)

    # another run's unlock never releases it
    assert unlock(run_b) == NOT_HELD
    with free_lock.zk() as zk:
        assert json.loads(zk.get(cluster_lock.LOCK_PATH)[0])["holder"] == "kafka_rolling_restart/manual__a"
    # a waiting run gets it once the holder releases it
    patient = LockClusterOperator(task_id="lock_p", settings=LOCK_SETTINGS, operation="decommission",
                                  lock_timeout_s=30, interval_s=0.3)
    releaser = threading.Timer(1.0, lambda: unlock(run_a))
    releaser.start()
    try:
        began = time.monotonic()
        assert patient.execute(op_context("manual__b", dag_id="kafka_decommission")) == "kafka_decommission/manual__b"
        assert time.monotonic() - began >= 0.9, "it waited for the release"
    finally:
        releaser.join()
    with free_lock.zk() as zk:
        stored = json.loads(zk.get(cluster_lock.LOCK_PATH)[0])
    assert (stored["holder"], stored["operation"]) == ("kafka_decommission/manual__b", "decommission")
    assert unlock(op_context("manual__b", dag_id="kafka_decommission")) == RELEASED
    with free_lock.zk() as zk:
        assert not zk.exists(cluster_lock.LOCK_PATH)
    assert unlock(run_a) == NOT_HELD, "releasing a free lock is a no-op"


def test_ensure_held_retakes_a_free_lock_and_fails_when_another_run_holds_it(
    free_lock: RunningSandbox, caplog: pytest.LogCaptureFixture
) -> None:
    profile = get_cluster_profile(CONN)
    caplog.set_level(logging.INFO, logger=LOG.name)
    run_a = op_context("manual__a")
    # resumed without its lock task: the lock is free, ensure_held takes it again and says so
    ensure_held(profile, run_a, "rolling restart", LOG, timeout_s=30)
    assert "this run did not hold the lock" in caplog.text
    with free_lock.zk() as zk:
        assert json.loads(zk.get(cluster_lock.LOCK_PATH)[0])["holder"] == "kafka_rolling_restart/manual__a"
    caplog.clear()
    ensure_held(profile, run_a, "rolling restart", LOG, timeout_s=30)
    assert "did not hold the lock" not in caplog.text, "held already: nothing to say"
    # another run holds it: fail at once, naming it (never waited out by a step that acts)
    began = time.monotonic()
    with pytest.raises(AirflowFailException, match=r"cluster kafka_sandbox is held by kafka_rolling_restart/manual__a "
                                                   r"\(rolling restart, held for \d+ s\), not by this run "
                                                   r"\(kafka_rolling_restart/manual__b\): not acting on it"):
        ensure_held(profile, op_context("manual__b"), "rolling restart", LOG, timeout_s=60)
    assert time.monotonic() - began < 15
    with free_lock.zk() as zk:
        assert json.loads(zk.get(cluster_lock.LOCK_PATH)[0])["holder"] == "kafka_rolling_restart/manual__a"


def test_lock_operators_on_a_misconfigured_lock_store_or_connection(
    free_lock: RunningSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A profile that asks for a ZooKeeper lock without a ZooKeeper, or a connection that does not exist:
    the lock task fails at once naming the problem (never waited out), and the teardown has nothing to do."""
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_NOZK", kafka_env_with(free_lock, zookeeper=None, lock_store="zookeeper"))
    take = LockClusterOperator(task_id="check_and_lock", settings=LOCK_SETTINGS, operation="rolling restart",
                               lock_timeout_s=60, interval_s=1)
    began = time.monotonic()
    with pytest.raises(AirflowFailException, match=r"cluster 'kafka_nozk': connection 'kafka_nozk': lock_store "
                                                   r"'zookeeper' needs 'zookeeper'"):
        take.execute(op_context("manual__a", cluster="kafka_nozk"))
    assert time.monotonic() - began < 15, "a misconfiguration is not waited out"
    assert unlock(op_context("manual__a", cluster="kafka_nozk")) == NO_PROFILE
    with pytest.raises(AirflowFailException, match="cluster 'no_such_cluster'"):
        take.execute(op_context("manual__a", cluster="no_such_cluster"))
    assert unlock(op_context("manual__a", cluster="no_such_cluster")) == NO_PROFILE
    with free_lock.zk() as zk:
        assert not zk.exists(cluster_lock.LOCK_PATH)


# --- probes and waits on the healthy shared cluster -----------------------------------------------------------


def test_probes_on_a_healthy_cluster(shared: RunningSandbox) -> None:
    with ClusterProber(get_cluster_profile(CONN), request_timeout_s=10) as prober:
        gate = wait_for(lambda: (v := prober.look("gate", 1)).ok and v, 30, what="the gate of broker 1")
        assert gate.message() == "gate broker 1: OK"
        for kind in ("caught_up", "leadership", "healthy"):
            verdict = prober.look(kind)
            assert verdict.ok, (kind, verdict.message())
        assert prober.look("healthy").message() == "cluster-health: OK"
        for kind in ("registered", "caught_up", "leadership"):
            verdict = prober.look(kind, 2)
            assert verdict.ok, (kind, verdict.message())
        assert prober.look("registered", 2).message() == "registered: OK"
        gone = prober.look("gone", 2)
        assert (gone.ok, gone.message()) == (False, "gone: broker 2 still in the metadata")
        # the spare host runs no broker: not registered, and its gate fails (nothing of ours to stop)
        assert prober.look("registered", 3).message() == "registered: broker 3 not in the metadata yet"
        assert prober.look("gone", 3).ok
        assert prober.look("gate", 3).message() == "gate: broker 3 is not in the metadata (down)"
        # probes that need no configs skip DescribeConfigs: the broker default stays Kafka's (1)
        assert prober.state(configs=False).default_min_insync == 1
        assert prober.state().default_min_insync == 2
        with pytest.raises(ValueError, match="probe 'gone' needs a broker"):
            prober.look("gone")


def test_waiting_on_a_probe_passes_at_once_or_names_the_verdict(shared: RunningSandbox) -> None:
    with ClusterProber(get_cluster_profile(CONN), request_timeout_s=10) as prober:
        def check(kind: str, broker: int | None) -> Check:
            verdict = prober.look(kind, broker)
            return Check(verdict.ok, verdict.message())

        began = time.monotonic()
        result = wait_until(lambda: check("caught_up", 1), what=PROBES["caught_up"].describe(1), interval_s=1,
                            timeout_s=30, log=LOG)
        assert result == Check(True, "caught-up: OK") and time.monotonic() - began < 15
        with pytest.raises(WaitTimeout, match=r"gave up after 2 s \(\d+ checks\) waiting until broker 1 has left the "
                                              r"cluster metadata: gone: broker 1 still in the metadata"):
            wait_until(lambda: check("gone", 1), what=PROBES["gone"].describe(1), interval_s=0.5, timeout_s=2,
                       log=LOG)


def test_waiting_on_an_unreachable_cluster_polls_through_the_errors(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOG.name)
    nowhere = ClusterProfile(cluster="nowhere", bootstrap_servers="127.0.0.1:9")
    with ClusterProber(nowhere, request_timeout_s=1) as prober:
        with pytest.raises(WaitTimeout, match=r"gave up after 4 s \(\d+ checks\) waiting until the cluster is "
                                              r"healthy.*: could not check: KafkaException"):
            wait_until(lambda: Check(prober.look("healthy").ok, "?"), what=PROBES["healthy"].describe(None),
                       interval_s=0.5, timeout_s=4, log=LOG)
    assert any("could not check: KafkaException" in r.getMessage() and r.levelno == logging.INFO
               for r in caplog.records), "a transient error is waited through at INFO (a person is needed at the end)"


def health_op(kind: str = "healthy", timeout_s: float = 30) -> WaitForClusterOperator:
    return WaitForClusterOperator(task_id="health_gate", kind=kind, settings={
        "cluster": FromParam("cluster"), "dry_run": FromParam("dry_run"), "healthcheck_interval_s": 0.5,
        "healthcheck_timeout_s": timeout_s})


def test_wait_for_cluster_operator_on_a_healthy_cluster(shared: RunningSandbox) -> None:
    began = time.monotonic()
    assert health_op().execute(op_context("manual__a")) == "cluster-health: OK"
    assert time.monotonic() - began < 20
    assert health_op("caught_up").execute(op_context("manual__a")) == "urp: OK"
    assert health_op("leadership").execute(op_context("manual__a", dry_run=True)) == "leader-imbalance: OK"
    with pytest.raises(AirflowFailException, match="cluster 'no_such_cluster'"):
        health_op().execute(op_context("manual__a", cluster="no_such_cluster"))


# --- broker commands on the shared cluster (commands that change nothing) ----------------------------------------


def test_a_named_profile_command_reaches_the_host_verbatim(
    shared: RunningSandbox, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    verbatim, evaluated = tmp_path / "verbatim.txt", tmp_path / "evaluated.txt"
    # quotes, $(...), `;`, a backslash and a glob: bash -c must receive exactly this text as one argument
    # ($BASH_EXECUTION_STRING is the -c argument as bash got it)
    command = (
        f'printf %s "$BASH_EXECUTION_STRING" > {verbatim}; '
        f'echo "id=$KAFKA_BROKER_ID sub=$(echo \'a;b\') it\'s \\"q\\" star=*" > {evaluated}'
    )
    monkeypatch.setenv(KAFKA_ENV, kafka_env_with(shared, commands={"record": command}))
    profile = get_cluster_profile(CONN)
    chosen = BrokerCommand.choose(profile, "pre_stop", "record", on_host(shared, 1))
    assert (chosen.text, chosen.origin) == (command, "profile command 'record'")
    caplog.set_level(logging.INFO, logger=LOG.name)
    assert chosen.run(profile.ssh_conn_id, 60, LOG, triggered_by="alice") == 0
    assert f"running broker 1 ({shared.broker(1)['host']}): pre_stop: profile command 'record': " in caplog.text
    assert "(run triggered by alice)" in caplog.text
    rc, out, _ = shared.ssh(1, f"cat {verbatim}")
    assert (rc, out) == (0, command)
    rc, out, _ = shared.ssh(1, f"cat {evaluated}")
    assert (rc, out) == (0, 'id=1 sub=a;b it\'s "q" star=*\n')


def test_the_sandbox_profile_command_runs_on_the_broker_host(
    shared: RunningSandbox, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOG.name)
    profile = get_cluster_profile(CONN)
    assert "show-broker" in profile.commands
    BrokerCommand.choose(profile, "pre_start", "show-broker", on_host(shared, 2)).run(SSH_CONN, 60, LOG)
    assert any(re.fullmatch(r"stdout: broker 2 on .*: active", m) for m in caplog.messages), caplog.messages


def test_adhoc_shell_text_is_refused_by_the_sandbox_profile(shared: RunningSandbox, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    with pytest.raises(ValueError, match=r"pre_stop 'touch .*' is not a command named in connection 'kafka_sandbox' "
                                         r"\(named commands: \['show-broker'\]\)"):
        BrokerCommand.choose(get_cluster_profile(CONN), "pre_stop", f"touch {marker}", on_host(shared, 0))
    assert not marker.exists()


def test_a_failing_command_raises_with_its_stderr(shared: RunningSandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    failing = "echo partial; echo 'disk check failed on '$(hostname) >&2; exit 7"
    monkeypatch.setenv(KAFKA_ENV, kafka_env_with(shared, commands={"disk-check": failing}))
    command = BrokerCommand.choose(get_cluster_profile(CONN), "pre_start", "disk-check", on_host(shared, 2))
    host = re.escape(shared.broker(2)["host"])
    with pytest.raises(BrokerCommandFailed,
                       match=rf"^pre_start on broker 2 \({host}\) exited 7: disk check failed on "):
        command.run(SSH_CONN, 60, LOG)


def test_a_command_that_cannot_reach_the_host_names_it(shared: RunningSandbox, monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("")
    monkeypatch.setenv(SSH_ENV, ssh_env_with(shared, known_hosts=str(known_hosts)))
    command = BrokerCommand.choose(get_cluster_profile(CONN), "stop", None, on_host(shared, 0))
    with pytest.raises(BrokerCommandFailed, match=r"stop on broker 0: could not run it on .* over SSH connection "
                                                  r"'sandbox_ssh': BrokerHostKeyError: .*nothing ran") as err:
        command.run(SSH_CONN, 60, LOG)
    assert isinstance(err.value.__cause__, BrokerHostKeyError)
    assert shared.ssh(0, "kafka-service status")[:2] == (0, "active\n"), "broker 0 was not touched"


def test_broker_id_placeholders_in_the_service_commands_are_filled(
    shared: RunningSandbox, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Service commands that name the broker: ``{broker_id}`` filled by the profile, ``$KAFKA_BROKER_ID`` set by
    remote_command; run for real over SSH, but writing files instead of stopping anything."""
    stop = f"echo stop {{broker_id}} $KAFKA_BROKER_ID $(hostname) > {tmp_path}/stopped-{{broker_id}}"
    start = f"echo start {{broker_id}} > {tmp_path}/started-{{broker_id}}"
    monkeypatch.setenv(KAFKA_ENV, kafka_env_with(shared, service_stop=stop, service_start=start))
    profile = get_cluster_profile(CONN)
    for broker in (0, 2):
        command = BrokerCommand.choose(profile, "stop", None, on_host(shared, broker))
        assert command.origin == "service command (service_stop)"
        assert command.text == f"echo stop {broker} $KAFKA_BROKER_ID $(hostname) > {tmp_path}/stopped-{broker}"
        assert command.run(profile.ssh_conn_id, 60, LOG) == 0
        rc, out, _ = shared.ssh(broker, f"cat {tmp_path}/stopped-{broker}")
        hostname = shared.ssh(broker, "hostname")[1].strip()
        assert (rc, out) == (0, f"stop {broker} {broker} {hostname}\n")
    BrokerCommand.choose(profile, "start", "", on_host(shared, 1)).run(SSH_CONN, 60, LOG)
    assert shared.ssh(1, f"cat {tmp_path}/started-1")[:2] == (0, "start 1\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["started-1", "stopped-0", "stopped-2"]
    assert shared.registered_brokers() == [0, 1, 2], "nothing was stopped"


def test_a_dry_run_command_runs_nothing(shared: RunningSandbox, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOG.name)
    registered = registration_ms(shared, 0)
    command = BrokerCommand.choose(get_cluster_profile(CONN), "stop", None, on_host(shared, 0))
    assert command.text == "kafka-service stop"
    assert command.run(SSH_CONN, 60, LOG, dry_run=True) == 0
    assert [r.getMessage() for r in caplog.records if r.name == LOG.name] == [
        f"DRY RUN: would run broker 0 ({shared.broker(0)['host']}): stop: service command (service_stop): "
        "kafka-service stop"]
    assert registration_ms(shared, 0) == registered, "broker 0 was not touched"
    assert shared.ssh(0, "kafka-service status")[:2] == (0, "active\n")


# --- destructive: a broker stopped and started through broker commands, seen by the probes (own sandbox) ---------


@pytest.mark.destructive
def test_stop_start_cycle_seen_by_the_probes(destructible: RunningSandbox) -> None:
    sb = destructible
    profile = get_cluster_profile(CONN)
    controller = view(sb).controller
    victim = next(b for b in (1, 2, 0) if b != controller)
    other = next(b for b in (0, 1, 2) if b not in (victim,))
    began_ms = int(time.time() * 1000)
    assert registration_ms(sb, victim) < began_ms
    on_victim = {f"{p.topic}-{p.partition}" for p in view(sb).partitions if victim in p.replicas}
    preferring = {f"{p.topic}-{p.partition}" for p in view(sb).partitions if p.replicas[0] == victim}
    prober = ClusterProber(profile, request_timeout_s=10)

    def check(kind: str, broker: int | None = None) -> Check:
        verdict = prober.look(kind, broker)
        return Check(verdict.ok, verdict.message())

    try:
        assert check("gate", victim).ok, "the victim may be stopped"
        # stop through the profile's service_stop over SSH; wait as the roll does
        stop = BrokerCommand.choose(profile, "stop", None, on_host(sb, victim))
        assert stop.run(profile.ssh_conn_id, 120, LOG) == 0
        gone = wait_until(lambda: check("gone", victim), what=PROBES["gone"].describe(victim), interval_s=0.5,
                          timeout_s=30, log=LOG)
        assert gone.message == "gone: OK"
        assert victim not in sb.registered_brokers()

        # caught_up for the stopped broker fails, naming exactly its partitions
        # (a failing Verdict is falsy: wait_for gets it in a tuple)
        lagging, = wait_for(lambda: None if (v := prober.look("caught_up", victim)).ok else (v,), 15,
                            what="caught_up to fail")
        shown, more = reasons_of(lagging.message())
        assert len(shown) + more == len(on_victim), lagging.message()
        assert {r.split(":")[0] for r in shown} <= on_victim
        assert all(f": broker {victim} not in isr" in r for r in shown)
        # the gate of another broker fails with the under-replicated partitions (each look asks a random broker:
        # wait until that one's metadata shows the shrunk ISRs too)
        gate, = wait_for(lambda: (v,) if "urp (" in (v := prober.look("gate", other)).message() else None, 15,
                         what=f"the gate of broker {other} to name the URPs")
        assert not gate.ok
        assert "under-replicated" in gate.message() and f"(missing [{victim}])" in gate.message(), gate.message()
        assert "can-restart (" in gate.message(), "RF 3 partitions at min.insync.replicas 2 block the stop"
        urp = prober.look("caught_up")
        assert not urp.ok and urp.message().startswith("urp: ") and f"(missing [{victim}])" in urp.message()
        # the stopped broker's own gate fails: it is down
        assert prober.look("gate", victim).message() == f"gate: broker {victim} is not in the metadata (down)"
        assert not prober.look("registered", victim).ok and not prober.look("healthy").ok
        # a wait for it times out naming the broker; the final-health operator fails the same way
        with pytest.raises(WaitTimeout, match=rf"gave up after 1 s .*broker {victim} not in isr"):
            wait_until(lambda: check("caught_up", victim), what=PROBES["caught_up"].describe(victim),
                       interval_s=0.3, timeout_s=1, log=LOG)
        with pytest.raises(AirflowFailException, match=rf"gave up after 2 s .*every replica is back in its ISR "
                                                       rf"\(URP = 0\): urp: .*\(missing \[{victim}\]\)"):
            health_op("caught_up", timeout_s=2).execute(op_context("manual__cycle"))
        dry = health_op("healthy", timeout_s=2).execute(op_context("manual__cycle", dry_run=True))
        assert dry.startswith("cluster-health: ") and dry != "cluster-health: OK", "a dry run only looks"

        # start through the profile's service_start; registered and caught up within deadlines
        start = BrokerCommand.choose(profile, "start", None, on_host(sb, victim))
        assert start.run(profile.ssh_conn_id, 120, LOG) == 0
        back = wait_until(lambda: check("registered", victim), what=PROBES["registered"].describe(victim),
                          interval_s=0.3, timeout_s=30, log=LOG)
        assert back.message == "registered: OK"
        caught_up = wait_until(lambda: check("caught_up", victim), what=PROBES["caught_up"].describe(victim),
                               interval_s=0.5, timeout_s=60, log=LOG)
        assert caught_up.message == "caught-up: OK"
        assert registration_ms(sb, victim) >= began_ms

        # leadership stays away until the preferred leader election moves it back (what the roll does)
        led_away = prober.look("leadership", victim)
        assert not led_away.ok
        assert f"broker {victim} leads 0 of its {len(preferring)} preferred" in led_away.message()
        todo = [(p.topic, p.partition) for p in prober.state().partitions_preferring(victim)
                if not p.is_led_by_preferred]
        assert {f"{t}-{p}" for t, p in todo} == preferring
        assert set(prober.admin.elect_preferred_leaders(todo)) == preferring

        def elected() -> Check:  # elect again what is still led away (the preferred replica may lag a moment)
            left = [(p.topic, p.partition) for p in prober.state().partitions_preferring(victim)
                    if not p.is_led_by_preferred]
            if left:
                prober.admin.elect_preferred_leaders(left)
            return check("leadership", victim)

        wait_until(elected, what=PROBES["leadership"].describe(victim), interval_s=0.5, timeout_s=30, log=LOG)
        # an independent client's view agrees (any broker may answer it; each follows ZooKeeper within ~1 s)
        wait_for(lambda: {f"{p.topic}-{p.partition}" for p in view(sb).led_by(victim)} == preferring, 15,
                 what=f"broker {victim} leading its preferred partitions in an independent client's metadata")
        assert health_op("healthy", timeout_s=30).execute(op_context("manual__cycle")) == "cluster-health: OK"
    finally:
        prober.close()
        if victim not in sb.registered_brokers():  # a failure above: leave the cluster running for the next test
            BrokerCommand.choose(profile, "start", None, on_host(sb, victim)).run(profile.ssh_conn_id, 120, LOG)


# --- destructive: partition reassignment through the hook (own sandbox) ---------------------------------------


def _fill_partition(sb: RunningSandbox, topic: str, partition: int, size_bytes: int) -> int:
    """Append ``size_bytes`` to one partition (1 KiB records, acks=all); returns the bytes acknowledged."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": sb.bootstrap_servers, "acks": "all", "linger.ms": 20})
    acked: list[int] = []
    record = b"x" * 1024
    for _ in range(size_bytes // len(record)):
        producer.produce(topic, record, partition=partition,
                         on_delivery=lambda err, msg: acked.append(len(msg.value())) if err is None else None)
        producer.poll(0)
    assert producer.flush(30) == 0, "records left unacknowledged"
    assert sum(acked) == size_bytes, f"{sum(acked)} of {size_bytes} bytes acknowledged"
    return size_bytes


@contextlib.contextmanager
def _frozen(sb: RunningSandbox, broker_id: int) -> Iterator[None]:
    """Broker ``broker_id``'s JVM stopped (SIGSTOP) for the body, continued (SIGCONT) after it, also on failure."""
    result = sb.cli("freeze", str(broker_id))
    assert result.returncode == 0, result.stderr
    try:
        yield
    finally:
        result = sb.cli("thaw", str(broker_id))
        assert result.returncode == 0, result.stderr


@pytest.mark.destructive
def test_partition_reassignment_through_the_hook(destructible: RunningSandbox) -> None:
    sb = destructible
    hook = KafkaAdminHook(bootstrap_servers=sb.bootstrap_servers, request_timeout_s=15)
    assert hook.list_partition_reassignments() == []
    part = next(p for p in view(sb).partitions if p.topic == "clicks")  # RF 2, the largest replicas
    keep, drop = part.replicas
    new = next(b for b in (0, 1, 2) if b not in part.replicas)
    name = f"clicks-{part.partition}"
    # a replica on an unknown broker is refused, nothing starts
    refused = hook.alter_partition_reassignments([{"topic": "clicks", "partition": part.partition,
                                                   "replicas": [keep, 99]}])
    assert refused[name] is not None and refused[name] == "InvalidReplicationAssignmentError", refused
    assert hook.list_partition_reassignments() == []

    # Throttled as a wave is (KIP-73), so the reassignment is seen ongoing: unthrottled, real Kafka copies the
    # seeded log between two polls. Kafka's replication quota measures over at least 10 s (11 one-second
    # samples, replication.quota.window.num) and lets a fetch through while under the rate: the first fetch
    # takes 1 MiB (replica.fetch.max.bytes), which puts the follower over 64 KiB/s until that sample expires
    # (~11 s); the rest (< 640 KiB) then comes in one fetch. Hence 512 KiB more than the seeded 768 KiB.
    rate = 64 * 1024  # bytes/s
    seeded = settings.WORKLOAD_TOPICS["clicks"][2]  # the bytes `sandbox up` wrote into each clicks partition
    extra = _fill_partition(sb, "clicks", part.partition, 512 * 1024)
    hook.alter_throttle_configs(
        {b: {"leader.replication.throttled.rate": str(rate), "follower.replication.throttled.rate": str(rate)}
         for b in (keep, drop, new)},
        {"clicks": {"leader.replication.throttled.replicas": f"{part.partition}:{keep},{part.partition}:{drop}",
                    "follower.replication.throttled.replicas": f"{part.partition}:{new}"}})
    try:
        began = time.monotonic()
        accepted = hook.alter_partition_reassignments([{"topic": "clicks", "partition": part.partition,
                                                        "replicas": [keep, new]}])
        assert accepted == {name: None}
        assert hook.list_partition_reassignments() == [
            {"topic": "clicks", "partition": part.partition, "replicas": [keep, new, drop],
             "adding_replicas": [new], "removing_replicas": [drop]}]
        wait_for(lambda: hook.list_partition_reassignments() == [], 60, interval_s=0.2,
                 what=f"{name}'s reassignment to finish")
        copy_s = time.monotonic() - began
    finally:
        hook.delete_throttle_configs((keep, drop, new), ["clicks"])
    assert copy_s >= 3, f"the throttle held the copy back ({copy_s:.1f} s for {seeded + extra} bytes)"
    final = view(sb).partition("clicks", part.partition)
    assert final.replicas == (keep, new) and set(final.isr) == {keep, new}

    def sizes(broker: int) -> dict[tuple[str, int], int]:
        return {(r["topic"], r["partition"]): r["size_bytes"] for r in hook.describe_log_dirs([broker])}

    copied = sizes(new)[("clicks", part.partition)]
    assert copied >= seeded + extra, f"the new replica holds the whole log ({copied} bytes, {seeded + extra} written)"
    wait_for(lambda: ("clicks", part.partition) not in sizes(drop), 15, what="the old replica deleted")

    # back through ZooKeeper (what kafka-reassign-partitions.sh --zookeeper does): the ZooKeeper hook
    # reports the request while the controller works on it
    document = {"version": 1, "partitions": [{"topic": "clicks", "partition": part.partition,
                                               "replicas": list(part.replicas)}]}
    back = time.monotonic()
    with sb.zk() as zk, ZooKeeperHook(hosts=sb.zookeeper_connect) as zk_hook:
        assert zk_hook.reassignment_in_progress() is None
        # the adding replica frozen (SIGSTOP, well inside its ZooKeeper session; only ZooKeeper is read
        # meanwhile), so the controller cannot finish before the hook looks
        with _frozen(sb, drop):
            zk.create("/admin/reassign_partitions", json.dumps(document).encode())
            assert zk_hook.reassignment_in_progress() == document
        wait_for(lambda: zk_hook.reassignment_in_progress() is None, 60, interval_s=0.2,
                 what="the controller to finish the ZooKeeper reassignment")
    wait_for(lambda: view(sb).partition("clicks", part.partition).replicas == part.replicas, 15,
             what="the original replicas back")
    sb.wait_healthy(timeout_s=30)
    print(f"\n{name} {list(part.replicas)} -> {[keep, new]} in {copy_s:.1f} s, and back in "
          f"{time.monotonic() - back:.1f} s")


@pytest.mark.destructive
def test_a_hung_broker_is_named_while_the_metadata_still_lists_it(destructible: RunningSandbox) -> None:
    """A broker's JVM stopped (SIGSTOP: what a long GC pause or a frozen VM looks like from outside) keeps its
    ZooKeeper session for 6 s (the sandbox's ``zookeeper.session.timeout.ms``; Kafka's default is 18 s): the
    metadata lists it, in every ISR, while it answers nothing. ``unanswered_brokers`` names it within its timeout
    (each broker asked on a connection of its own, so the hung one cannot stall the others' answers), a stopped one
    at once by its refused connection, and none once all answer again. Meanwhile the kafka-python calls bootstrap from
    a broker that answers and send there."""
    sb = destructible
    hook = KafkaAdminHook(bootstrap_servers=sb.bootstrap_servers, request_timeout_s=15)
    state = hook.cluster_state(configs=False, describe_cluster=False)
    addresses = {b.id: b.address for b in state.brokers}
    assert sorted(addresses) == sorted(sb.broker_ids), addresses
    assert hook.unanswered_brokers(addresses) == {}
    hung = next(b for b in reversed(sb.broker_ids) if b != state.controller_id)  # the controller answers reassignments
    with _frozen(sb, hung):
        began = time.monotonic()
        missing = hook.unanswered_brokers(addresses, timeout_s=2.0)
        took = time.monotonic() - began
        listed = sb.registered_brokers()
        urp = snapshot(admin(sb.bootstrap_servers)).under_replicated
        # kafka-python calls (DescribeQuorum, ListPartitionReassignments) neither bootstrap through the hung broker,
        # though it is listed first, nor send to it as "any node" (a 2 s request timeout would fail them there)
        live = next(b for b in sb.broker_ids if b != hung)
        hung_first = KafkaAdminHook(bootstrap_servers=f"{addresses[hung]},{addresses[live]}", request_timeout_s=2)
        assert hung_first.first_answering([addresses[hung], addresses[live]], timeout_s=2.0) == addresses[live]
        answers = [(hung_first.quorum_if_kraft(), hung_first.list_partition_reassignments()) for _ in range(4)]
    assert missing == {hung: "no answer within 2.0 s"}, missing
    assert took < 3.5, f"the answers took {took:.1f} s: the hung broker held up the others"
    assert hung in listed and urp == [], "the metadata still called the cluster healthy (the hook saw what it did not)"
    assert answers == [(None, [])] * 4, answers  # ZooKeeper mode: no quorum; no reassignment running
    sb.wait_healthy(timeout_s=60)
    assert wait_for(lambda: hook.unanswered_brokers(addresses) == {}, 30, what="every broker answering again")
    refused = hook.unanswered_brokers({**addresses, 99: "127.0.0.1:1"})  # nothing listens there
    assert list(refused) == [99] and "ECONNREFUSED" in refused[99] and not refused[99].startswith(
        "KafkaConnectionError: KafkaConnectionError"), refused


# --- the preflight (shared sandbox: reads only) -------------------------------------------------------------


def preflight(scope: str, **settings) -> PreflightOperator:
    base = {"cluster": FromParam("cluster"), "dry_run": FromParam("dry_run"), "healthcheck_interval_s": 1,
            "healthcheck_timeout_s": 30}
    return PreflightOperator(task_id="preflight", scope=scope, settings={**base, **settings})


def test_preflight_asks_every_host_and_reports_every_problem_together(shared: RunningSandbox,
                                                                      monkeypatch: pytest.MonkeyPatch, capfd,
                                                                      caplog) -> None:
    sb = shared
    point_connections(monkeypatch, sb)
    brokers = sb.registered_brokers()  # a spare host runs no broker: the run touches none there
    assert preflight("roll").execute(op_context("manual__pf")) == {"hosts": 3, "problems": {}}
    assert "preflight: every host the run will touch is ready (3 hosts)" in capfd.readouterr().out + caplog.text
    # an upgrade to a release no host has unpacked, commands whose program no host has, an unknown host key for
    # one host: one failure naming every problem of every host, nothing touched
    monkeypatch.setenv(KAFKA_ENV, kafka_env_with(sb, service_stop="no-such-stopper --now",
                                                 commands={"drain": "drain-lb {broker_id}"}))
    victim = brokers[0]
    known = sb.workdir / "ssh" / "known_hosts"
    kept = known.read_text()
    host = sb.broker(victim)["host"]
    known.write_text("".join(line + "\n" for line in kept.splitlines() if host not in line))
    try:
        with pytest.raises(AirflowFailException) as err:
            preflight("upgrade", target_version="3.9.1", pre_stop="drain").execute(op_context("manual__pf"))
    finally:
        known.write_text(kept)
    text = str(err.value)
    assert text.startswith("preflight: 3 of 3 hosts are not ready (nothing was touched): "), text
    assert f"broker {victim} ({host}): SSH: " in text and "host key" in text
    for b in brokers[1:]:
        part = text.split(f"broker {b} ({sb.broker(b)['host']}): ")[1].split(" | ")[0]
        assert "no-such-stopper: not found on the PATH of the SSH user" in part, part
        assert "drain-lb: not found on the PATH of the SSH user" in part, part
        assert "no unpacked Kafka 3.9.1 in" in part, part
        assert "kafka-service" not in part, "the start command's program is there"
    assert sb.registered_brokers() == brokers, "nothing was stopped"
    # a dry run logs the same report and goes on
    result = preflight("upgrade", target_version="3.9.1").execute(op_context("manual__pf", dry_run=True))
    assert set(result["problems"]) == {f"broker {b}" for b in brokers}
    assert "DRY RUN: preflight: a real run would stop here, nothing touched" in capfd.readouterr().out + caplog.text


def test_preflight_of_a_scale_out_checks_only_the_brokers_it_will_start(shared: RunningSandbox,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    sb = shared
    point_connections(monkeypatch, sb)
    registered = sb.registered_brokers()[0]
    assert preflight("scale-out", brokers=[registered], enabled=True).execute(op_context("manual__pf")) == \
        {"hosts": 0, "problems": {}}, "a registered broker is not started: no host to ask"
    assert preflight("decommission", brokers=[registered], enabled=False).execute(op_context("manual__pf")) == \
        {"hosts": 0, "problems": {}}, "stop_brokers off: nothing is stopped"
    assert preflight("decommission", brokers=[registered], enabled=True).execute(op_context("manual__pf")) == \
        {"hosts": 1, "problems": {}}


def test_real_kafka_reports_the_usable_bytes_of_each_log_dir(shared: RunningSandbox) -> None:
    """DescribeLogDirs v4 (KIP-827): what the disk preflight of a reassignment judges, against the host's own view."""
    import shutil

    sb = shared
    brokers = sb.registered_brokers()
    with KafkaAdminHook(bootstrap_servers=sb.bootstrap_servers, request_timeout_s=15) as hook:
        space = hook.log_dir_space(brokers)
    assert sorted(space) == brokers
    for b in brokers:
        (log_dir, usable), = space[b].items()
        free = shutil.disk_usage(log_dir).free
        assert 0 < usable and abs(usable - free) < 0.05 * free + 64 * 2**20, (b, log_dir, usable, free)

