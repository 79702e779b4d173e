"""Integration tests of the plugins' hooks, operators, sensors and trigger against real sandboxes.

The Airflow connections come from a sandbox's ``airflow.env`` (``AIRFLOW_CONN_*`` environment variables,
see tests/dags/airflow_env.py); no scheduler runs: operators and sensors are executed directly with a
minimal context (``dag_run.run_after`` for the resume rule, ``dag`` / ``run_id`` for the lock) and the
trigger's async generator is driven with asyncio. What the components report is checked against
independent observers (confluent-kafka metadata, kazoo on ZooKeeper, SSH to the broker hosts).

The shared ``sandbox`` is left healthy and balanced; the tests that stop a broker or move a replica use a
sandbox of this module's own (one ``sandbox up`` for both, like ``fresh_sandbox`` but module-scoped to keep
the runtime down; slot 210). PreviousBrokerDoneSensor needs a task instance talking to the Airflow API
(``ti.get_task_states``): its logic is unit-tested with a stub in tests/unit/test_components_pure.py and
its real use is covered by the DAG tests in tests/dags.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
from airflow.sdk.exceptions import (
    AirflowException,
    AirflowFailException,
    AirflowSensorTimeout,
    AirflowSkipException,
    TaskDeferred,
)
from airflow_env import connection_env
from broker_support import module_sandbox
from confluent_kafka import ElectionType
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from hooks import cluster_lock
from hooks.broker_ssh import BrokerHostKeyError, BrokerShell
from hooks.burrow import BurrowHook
from hooks.cluster_profile import get_cluster_profile
from hooks.kafka_admin import KafkaAdminHook
from hooks.zookeeper import ZooKeeperHook
from observers import ClusterView, admin, registration, snapshot, wait_for
from operators.broker_service import BrokerServiceOperator
from operators.leader_election import PreferredLeaderElectionOperator
from sensors.cluster import ClusterHealthySensor, ISRCaughtUpSensor, RestartGateSensor
from sensors.lock import ClusterLockSensor, ReleaseClusterLockOperator
from sensors.probes import ProbeResult, ProbeSpec, run_probe
from triggers.cluster_probe import ClusterProbeTrigger

from sandbox.testing import RunningSandbox

pytestmark = [pytest.mark.sandbox, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

CONN = "kafka_sandbox"
SLOT_COMPONENTS = 210  # third address octet of this module's own sandbox (see tests/integration/broker_support.py)
SSH_CONN = "sandbox_ssh"
SSH_ENV = "AIRFLOW_CONN_SANDBOX_SSH"


# --- helpers ---------------------------------------------------------------------------------------


def point_connections(mp: pytest.MonkeyPatch, sb: RunningSandbox) -> None:
    """Airflow's connections (kafka_sandbox, sandbox_ssh, sandbox_burrow) now name ``sb``."""
    for name, value in connection_env(Path(sb.workdir)).items():
        mp.setenv(name, value)


def run_context(run_after: datetime) -> dict:
    """The part of a task context the resume rule reads: the DAG run's ``run_after``."""
    return {"dag_run": SimpleNamespace(run_after=run_after, start_date=run_after)}


def lock_context(run_id: str, dag_id: str = "kafka_rolling_restart") -> dict:
    return {"dag": SimpleNamespace(dag_id=dag_id), "run_id": run_id}


def probe(kind: str, broker: int | None = None, groups: list[str] | None = None) -> ProbeResult:
    return run_probe(ProbeSpec(kind=kind, conn_id=CONN, broker_id=broker, consumer_groups=groups))


def passing(kind: str, broker: int | None = None, groups: list[str] | None = None) -> ProbeResult | None:
    """The probe's result when it passes, else None (for wait_for)."""
    result = probe(kind, broker, groups)
    return result if result.ok else None


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


def collect(trigger: ClusterProbeTrigger) -> tuple[list[dict], float]:
    """Drive the trigger's async generator to its end: (event payloads, seconds it took)."""

    async def drain() -> list[dict]:
        return [event.payload async for event in trigger.run()]

    began = time.monotonic()
    events = asyncio.run(drain())
    return events, time.monotonic() - began


def reasons_of(message: str) -> tuple[list[str], int]:
    """Split a verdict message ``"rule: r1; r2; ... and N more"`` into (shown reasons, N)."""
    body = message.split(": ", 1)[1]
    more = 0
    found = re.search(r"; \.\.\. and (\d+) more$", body)
    if found:
        more = int(found.group(1))
        body = body[: found.start()]
    return body.split("; "), more


def ssh_env_with(sb: RunningSandbox, **extra_changes) -> str:
    """The sandbox's ``sandbox_ssh`` connection (JSON) with extras changed (None = removed)."""
    conn = json.loads(connection_env(Path(sb.workdir))[SSH_ENV])
    for key, value in extra_changes.items():
        if value is None:
            conn["extra"].pop(key, None)
        else:
            conn["extra"][key] = value
    return json.dumps(conn)


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
    assert profile.bootstrap_servers == shared.bootstrap_servers
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


def test_zookeeper_hook_registrations_and_controller(shared: RunningSandbox) -> None:
    with shared.zk() as zk:
        raw = {b: registration(zk, b) for b in (0, 1, 2, 3)}
        controller = json.loads(zk.get("/controller")[0])["brokerid"]
    with ZooKeeperHook(CONN) as hook:
        assert hook.broker_ids() == [0, 1, 2]
        assert hook.controller_id() == controller
        registrations = hook.broker_registrations()
        assert hook.broker_registration(3) is None, "the spare host is not registered"
        assert hook.registration_timestamps_ms() == {b: int(raw[b]["timestamp"]) for b in (0, 1, 2)}
        assert hook.reassignment_in_progress() is None
    assert sorted(registrations) == [0, 1, 2]
    for b, reg in registrations.items():
        assert (reg.host, reg.port, reg.rack) == (raw[b]["host"], raw[b]["port"], raw[b]["rack"])
        assert reg.rack == shared.broker(b)["rack"]


def test_burrow_hook_ok_groups_and_notfound_for_an_unknown_group(shared: RunningSandbox) -> None:
    groups = shared.env["consumer_groups"]
    with BurrowHook.from_profile(get_cluster_profile(CONN)) as hook:
        def all_ok():
            statuses = hook.group_statuses(groups)
            return statuses if all(s.status == "OK" for s in statuses) else None

        statuses = wait_for(all_ok, 30, what="every workload group OK in Burrow")
        unknown = hook.group_status("nobody-reads-this")
    assert [s.group for s in statuses] == groups
    assert all(s.ok and s.partitions == () for s in statuses)
    # Burrow's answer says it does not know the group: a failing status, never a pass
    assert unknown.status == "NOTFOUND" and not unknown.ok


# --- hooks: SSH to broker hosts -----------------------------------------------------------------------


def test_broker_shell_runs_kafka_service_status_with_host_key_checking(shared: RunningSandbox) -> None:
    for broker in (0, 2):
        shell = BrokerShell(SSH_CONN, shared.broker(broker)["host"])
        assert not shell.hook.no_host_key_check
        rc, out, err = shell.run("kafka-service status; echo host=$KAFKA_HOST_DIR", timeout_s=30)
        assert (rc, out.splitlines()) == (0, ["active", f"host={shared.host_dir(broker).path}"]), err
    rc, out, _ = BrokerShell(SSH_CONN, shared.broker(3)["host"]).run("kafka-service status", timeout_s=30)
    assert (rc, out.strip()) == (3, "inactive"), "the spare host has no running broker"


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
    monkeypatch.setenv(SSH_ENV, ssh_env_with(shared, known_hosts=str(known_hosts)))
    marker = tmp_path / "ran"
    with pytest.raises(paramiko.BadHostKeyException):
        BrokerShell(SSH_CONN, host1).run(f"touch {marker}", timeout_s=30)
    assert not marker.exists()


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


def test_cluster_lock_sensor_and_release_operator(free_lock: RunningSandbox) -> None:
    run_a, run_b = lock_context("manual__a"), lock_context("manual__b")
    take = ClusterLockSensor(task_id="lock_cluster", cluster=CONN, operation="rolling restart", wait="fail")
    take_waiting = ClusterLockSensor(task_id="lock_cluster_w", cluster=CONN, operation="rolling restart")
    release = ReleaseClusterLockOperator(task_id="unlock_cluster", cluster=CONN)

    assert take.poke(run_a) is True
    with free_lock.zk() as zk:
        stored = json.loads(zk.get(cluster_lock.LOCK_PATH)[0])
    assert stored["holder"] == "kafka_rolling_restart/manual__a" and stored["operation"] == "rolling restart"
    assert take.poke(run_a) is True, "the holder's run takes it again (cleared setup task)"
    with pytest.raises(AirflowFailException, match=r"busy: kafka_rolling_restart/manual__a \(rolling restart"):
        take.poke(run_b)
    assert take_waiting.poke(run_b) is False, "wait mode keeps poking"
    assert release.execute(run_b) is False, "another run cannot release it"
    with free_lock.zk() as zk:
        assert zk.exists(cluster_lock.LOCK_PATH)
    assert release.execute(run_a) is True
    with free_lock.zk() as zk:
        assert not zk.exists(cluster_lock.LOCK_PATH)
    assert take_waiting.poke(run_b) is True, "free again: the waiting run gets it"
    assert release.execute(run_b) is True


# --- probes, sensors and the trigger on the healthy shared cluster -----------------------------------------


def test_probes_on_a_healthy_cluster(shared: RunningSandbox) -> None:
    groups = shared.env["consumer_groups"]
    gate = wait_for(lambda: passing("gate", 1, groups), 30, what="the gate with every group OK")
    assert gate.message == "gate broker 1: OK"
    for kind in ("caught_up", "leadership", "healthy"):
        assert probe(kind).ok, (kind, probe(kind).message)
    for kind in ("registered", "caught_up", "leadership"):
        result = probe(kind, 2)
        assert result.ok, (kind, result.message)
    assert probe("registered", 2).message == "broker 2 registered"
    gone = probe("gone", 2)
    assert (gone.ok, gone.message) == (False, "broker 2 still in the metadata")
    assert not probe("registered", 3).ok, "the spare host runs no broker"
    # a watched group Burrow does not know closes the gate, named
    unknown = probe("gate", 1, ["nobody-reads-this"])
    assert not unknown.ok
    assert "group nobody-reads-this: NOTFOUND" in unknown.message and "urp" not in unknown.message


def test_trigger_yields_ok_at_once_and_timeout_with_the_last_verdict(shared: RunningSandbox) -> None:
    healthy = ClusterProbeTrigger(ProbeSpec("healthy", CONN).to_dict(), poll_interval_s=0.2, timeout_s=30,
                                  ok_streak=2)
    events, took = collect(healthy)
    assert events == [{"status": "ok", "message": "cluster-health: OK"}]
    assert took < 15
    never = ClusterProbeTrigger(ProbeSpec("gone", CONN, broker_id=1).to_dict(), poll_interval_s=0.3, timeout_s=1.5)
    events, took = collect(never)
    assert events == [{"status": "timeout", "message": "broker 1 still in the metadata"}]
    assert 1.5 <= took < 15
    # serialize() rebuilds an equal trigger (the triggerer process does this)
    path, kwargs = never.serialize()
    assert path == "triggers.cluster_probe.ClusterProbeTrigger"
    assert ClusterProbeTrigger(**kwargs).serialize() == (path, kwargs)


def test_trigger_counts_errors_as_failing_polls(shared: RunningSandbox) -> None:
    unknown = ClusterProbeTrigger(ProbeSpec("healthy", "no_such_cluster").to_dict(), poll_interval_s=0.2,
                                  timeout_s=0.5)
    events, _ = collect(unknown)
    assert len(events) == 1 and events[0]["status"] == "timeout"
    assert events[0]["message"].startswith("probe failed:") and "no_such_cluster" in events[0]["message"]


def test_sensor_passes_at_once_when_reached_and_defers_otherwise(shared: RunningSandbox) -> None:
    healthy = ClusterHealthySensor(task_id="final_health", cluster=CONN, interval_s=2, timeout_s=60)
    assert healthy.execute({}) is None, "reached on the first look: no deferral"
    gone = RestartGateSensor(task_id="gate", cluster=CONN, broker={"id": 1, "host": "x"}, interval_s="3",
                             timeout_s="40", ok_streak="2", consumer_groups=["nobody-reads-this"])
    with pytest.raises(TaskDeferred) as deferred:
        gone.execute(run_context(datetime.now(UTC)))
    trigger = deferred.value.trigger
    assert isinstance(trigger, ClusterProbeTrigger)
    assert (trigger.poll_interval_s, trigger.timeout_s, trigger.ok_streak) == (3.0, 40.0, 2)
    assert trigger.probe == ProbeSpec("gate", CONN, broker_id=1, consumer_groups=["nobody-reads-this"]).to_dict()
    assert deferred.value.method_name == "execute_complete"
    with pytest.raises(AirflowSensorTimeout, match=r"gave up after 40 s .* group nobody-reads-this: NOTFOUND"):
        gone.execute_complete({}, {"status": "timeout", "message": "consumer-lag: group nobody-reads-this: NOTFOUND"})
    assert gone.execute_complete({}, {"status": "ok", "message": "gate broker 1: OK"}) is None
    # dry run: looks once and passes although the gate is closed
    dry = RestartGateSensor(task_id="gate_dry", cluster=CONN, broker={"id": 1, "host": "x"}, dry_run="True",
                            consumer_groups=["nobody-reads-this"])
    assert dry.execute(run_context(datetime.now(UTC))) is None


# --- BrokerServiceOperator on the shared cluster (commands that change nothing) -----------------------------


def service_op(sb: RunningSandbox, broker: int, action: str, command: str | None, **kwargs) -> BrokerServiceOperator:
    return BrokerServiceOperator(task_id=action, cluster=CONN, broker={"id": broker, "host": sb.broker(broker)["host"]},
                                 action=action, command=command, command_timeout_s=60, **kwargs)


def test_pre_stop_command_reaches_the_host_verbatim(shared: RunningSandbox, tmp_path: Path) -> None:
    verbatim, evaluated = tmp_path / "verbatim.txt", tmp_path / "evaluated.txt"
    # quotes, $(...), `;`, a backslash and a glob: bash -c must receive exactly this text as one argument
    # ($BASH_EXECUTION_STRING is the -c argument as bash got it)
    command = (
        f'printf %s "$BASH_EXECUTION_STRING" > {verbatim}; '
        f'echo "id=$KAFKA_BROKER_ID sub=$(echo \'a;b\') it\'s \\"q\\" star=*" > {evaluated}'
    )
    result = service_op(shared, 1, "pre_stop", command).execute(run_context(datetime.now(UTC)))
    assert result == {"broker": 1, "action": "pre_stop", "exit_code": 0}
    rc, out, _ = shared.ssh(1, f"cat {verbatim}")
    assert (rc, out) == (0, command)
    rc, out, _ = shared.ssh(1, f"cat {evaluated}")
    assert (rc, out) == (0, 'id=1 sub=a;b it\'s "q" star=*\n')


def test_broker_service_step_failure_carries_stderr(shared: RunningSandbox) -> None:
    failing = service_op(shared, 2, "pre_start", "echo partial; echo 'disk check failed on $HOSTNAME' >&2; exit 7")
    with pytest.raises(AirflowException, match=r"pre_start on broker 2 \(.*\) exited 7: disk check failed on "):
        failing.execute(run_context(datetime.now(UTC)))


def test_broker_service_skips_what_it_should_not_run(shared: RunningSandbox, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    registered = registration_ms(shared, 0)
    # the run began before broker 0's registration: it counts as already restarted by this run
    earlier = datetime.fromtimestamp((registered - 60_000) / 1000, UTC)
    for action in ("pre_stop", "stop"):
        with pytest.raises(AirflowSkipException, match="broker 0 already restarted in this run"):
            service_op(shared, 0, action, f"touch {marker}").execute(run_context(earlier))
    with pytest.raises(AirflowSkipException, match="no pre-start command given"):
        service_op(shared, 0, "pre_start", "  ").execute(run_context(datetime.now(UTC)))
    dry = service_op(shared, 0, "stop", None, dry_run="true").execute(run_context(datetime.now(UTC)))
    assert dry == {"broker": 0, "action": "stop", "dry_run": True}
    assert not marker.exists()
    assert registration_ms(shared, 0) == registered, "broker 0 was not touched"
    assert shared.ssh(0, "kafka-service status")[:2] == (0, "active\n")


# --- destructive: a broker stopped and started through the operators (own sandbox) ----------------------------


@pytest.mark.destructive
def test_stop_start_cycle_seen_by_probes_sensors_and_trigger(destructible: RunningSandbox) -> None:
    sb = destructible
    controller = view(sb).controller
    victim = next(b for b in (1, 2, 0) if b != controller)
    other = next(b for b in (0, 1, 2) if b not in (victim,))
    run = run_context(datetime.now(UTC))
    assert registration_ms(sb, victim) < int(time.time() * 1000)
    on_victim = {f"{p.topic}-{p.partition}" for p in view(sb).partitions if victim in p.replicas}
    preferring = {f"{p.topic}-{p.partition}" for p in view(sb).partitions if p.replicas[0] == victim}

    # stop through the operator (the profile's service_stop over SSH)
    assert service_op(sb, victim, "stop", None).execute(run)["exit_code"] == 0
    gone = wait_for(lambda: passing("gone", victim), 30, what=f"broker {victim} gone")
    assert gone.message == f"broker {victim} gone from the metadata"
    assert victim not in sb.registered_brokers()

    # caught_up for the stopped broker fails, naming exactly its partitions
    def caught_up_failure() -> ProbeResult | None:
        result = probe("caught_up", victim)
        return None if result.ok else result

    lagging = wait_for(caught_up_failure, 15, what="caught_up to fail")
    shown, more = reasons_of(lagging.message)
    assert len(shown) + more == len(on_victim), lagging.message
    assert {r.split(":")[0] for r in shown} <= on_victim
    assert all(f": broker {victim} not in isr" in r for r in shown)
    # the gate of another broker fails with the under-replicated partitions (each probe asks a random broker:
    # wait until that one's metadata shows the shrunk ISRs too)
    gate = wait_for(lambda: (r := probe("gate", other)) and not r.ok and "urp (" in r.message and r, 15,
                    what=f"the gate of broker {other} to name the URPs")
    assert "under-replicated" in gate.message and f"(missing [{victim}])" in gate.message, gate.message
    assert "can-restart (" in gate.message, "RF 3 partitions at min.insync.replicas 2 block the stop"
    urp = probe("caught_up")
    assert not urp.ok and urp.message.startswith("urp: ") and f"(missing [{victim}])" in urp.message
    # the stopped broker's own gate passes: nothing left to protect
    assert probe("gate", victim).message.startswith(f"broker {victim} is already down")
    assert not probe("registered", victim).ok and not probe("healthy").ok
    # the deferrable wait times out naming the broker; the sensor turns that into a named failure
    events, _ = collect(ClusterProbeTrigger(ProbeSpec("caught_up", CONN, broker_id=victim).to_dict(), 0.3, 1.0))
    assert events[0]["status"] == "timeout" and f"broker {victim} not in isr" in events[0]["message"]
    sensor = ISRCaughtUpSensor(task_id="wait_caught_up", cluster=CONN, broker={"id": victim, "host": "x"},
                               interval_s=1, timeout_s=5)
    with pytest.raises(TaskDeferred):
        sensor.execute(run)
    with pytest.raises(AirflowSensorTimeout, match=f"broker {victim} not in isr"):
        sensor.execute_complete(run, events[0])

    # start through the operator; the trigger sees it registered and caught up within deadlines
    assert service_op(sb, victim, "start", None).execute(run)["exit_code"] == 0
    events, _ = collect(ClusterProbeTrigger(ProbeSpec("registered", CONN, broker_id=victim).to_dict(), 0.3, 30))
    assert events == [{"status": "ok", "message": f"broker {victim} registered"}], events
    events, _ = collect(ClusterProbeTrigger(ProbeSpec("caught_up", CONN, broker_id=victim).to_dict(), 0.5, 60,
                                            ok_streak=2))
    assert events == [{"status": "ok", "message": "caught-up: OK"}], events
    assert registration_ms(sb, victim) >= int(run["dag_run"].run_after.timestamp() * 1000)

    # resume: the same run does not stop it again, and its gate skips itself
    before = registration_ms(sb, victim)
    for action in ("pre_stop", "stop"):
        with pytest.raises(AirflowSkipException, match=f"broker {victim} already restarted in this run"):
            service_op(sb, victim, action, "kafka-service stop").execute(run)
    gate_sensor = RestartGateSensor(task_id="gate", cluster=CONN, broker={"id": victim, "host": "x"})
    with pytest.raises(AirflowSkipException, match="already restarted"):
        gate_sensor.execute(run)
    assert registration_ms(sb, victim) == before

    # leadership stays away until the preferred leader election moves it back
    led_away = probe("leadership", victim)
    assert not led_away.ok and f"broker {victim} leads 0 of its {len(preferring)} preferred" in led_away.message
    elect = PreferredLeaderElectionOperator(task_id="elect_preferred", cluster=CONN, broker={"id": victim})
    assert elect.execute({}) == len(preferring)
    wait_for(lambda: passing("leadership", victim), 20, what="leadership back")
    now = view(sb)
    assert {f"{p.topic}-{p.partition}" for p in now.led_by(victim)} == preferring
    assert elect.execute({}) == 0, "nothing left to elect"
    wait_for(lambda: passing("healthy"), 30, what="a healthy cluster at the end")


# --- destructive: partition reassignment through the hook (own sandbox) ---------------------------------------


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

    began = time.monotonic()
    accepted = hook.alter_partition_reassignments([{"topic": "clicks", "partition": part.partition,
                                                    "replicas": [keep, new]}])
    assert accepted == {name: None}
    seen: list[list[dict]] = []

    def finished() -> bool:
        ongoing = hook.list_partition_reassignments()
        seen.append(ongoing)
        return ongoing == []

    wait_for(finished, 60, interval_s=0.1, what=f"{name}'s reassignment to finish")
    during = [s for s in seen if s]
    assert during, "the reassignment never showed as ongoing"
    assert during[0] == [{"topic": "clicks", "partition": part.partition, "replicas": [keep, new, drop],
                          "adding_replicas": [new], "removing_replicas": [drop]}]
    final = view(sb).partition("clicks", part.partition)
    assert final.replicas == (keep, new) and set(final.isr) == {keep, new}

    def sizes(broker: int) -> dict[tuple[str, int], int]:
        return {(r["topic"], r["partition"]): r["size_bytes"] for r in hook.describe_log_dirs([broker])}

    copied = sizes(new)[("clicks", part.partition)]
    assert copied >= 24 * 1024 * 1024, f"the new replica holds the whole log ({copied} bytes)"
    wait_for(lambda: ("clicks", part.partition) not in sizes(drop), 15, what="the old replica deleted")

    # back through ZooKeeper (what kafka-reassign-partitions.sh --zookeeper does): the ZooKeeper hook
    # reports the request while the controller works on it
    document = {"version": 1, "partitions": [{"topic": "clicks", "partition": part.partition,
                                               "replicas": list(part.replicas)}]}
    with sb.zk() as zk, ZooKeeperHook(hosts=sb.zookeeper_connect) as zk_hook:
        assert zk_hook.reassignment_in_progress() is None
        zk.create("/admin/reassign_partitions", json.dumps(document).encode())
        assert zk_hook.reassignment_in_progress() == document
        wait_for(lambda: zk_hook.reassignment_in_progress() is None, 60, interval_s=0.2,
                 what="the controller to finish the ZooKeeper reassignment")
    wait_for(lambda: view(sb).partition("clicks", part.partition).replicas == part.replicas, 15,
             what="the original replicas back")
    sb.wait_healthy(timeout_s=30)
    print(f"\n{name} {list(part.replicas)} -> {[keep, new]} in {time.monotonic() - began:.1f} s")
