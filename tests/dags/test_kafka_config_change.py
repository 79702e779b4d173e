"""The kafka_config_change DAG run end to end (``dag.test()``) on real Kafka: a sandbox of this module (3 brokers,
ZooKeeper mode), judged from outside: DescribeConfigs of every broker from an independent client, the brokers'
own logs (each start), the server.properties files on the hosts, a metadata watcher (offline partitions) and
``acks=all`` traffic whose acknowledged messages must all be read back.

The tests run in file order on one sandbox and each leaves it healthy; the keys each test changes are its own.
"""

from __future__ import annotations

import re

import pytest
from airflow_env import failure_lines, run_dag
from broker_support import module_sandbox
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)
from imbalance import make_leader_imbalance
from observers import MetadataWatcher, assert_no_acknowledged_message_lost, wait_for

from sandbox.traffic_watch import watched_traffic

DAG_ID = "kafka_config_change"
SLOT_CONFIG = 212  # third address octet of this module's sandbox (see tests/integration/broker_support.py)
FAST = {"healthcheck_interval_s": 1, "healthcheck_timeout_s": 120, "lag_ok_consecutive": 2}


@pytest.fixture(scope="module")
def cluster(request, tmp_path_factory):
    with module_sandbox(request, tmp_path_factory, SLOT_CONFIG, brokers=3, racks=3) as running:
        yield running


@pytest.fixture
def sandbox(cluster, use_sandbox):
    use_sandbox(cluster.workdir)
    cluster.wait_healthy(timeout_s=120)
    return cluster


def configs(sandbox, broker: int, *names: str) -> dict[str, tuple[str | None, str]]:
    """DescribeConfigs of one broker from an independent client: name -> (value, source)."""
    client = AdminClient({"bootstrap.servers": sandbox.bootstrap_servers})
    resource = ConfigResource(ResourceType.BROKER, str(broker))
    entries = client.describe_configs([resource])[resource].result(timeout=30)
    return {n: (entries[n].value, ConfigSource(entries[n].source).name) for n in names}


def properties(sandbox, broker: int) -> str:
    """The broker host's server.properties."""
    return sandbox.host_dir(broker).server_properties.read_text()


def backups(sandbox, broker: int) -> list[str]:
    """The backups beside it (``server.properties.bak-<epoch>``)."""
    path = sandbox.host_dir(broker).server_properties
    return sorted(p.name for p in path.parent.glob(f"{path.name}.bak-*"))


def restarts(sandbox, before: dict[int, int]) -> dict[int, int]:
    now = sandbox.starts()
    return {b: now[b] - before[b] for b in before}


def output(capfd, caplog) -> str:
    return capfd.readouterr().out + caplog.text


def broker_labels(result) -> dict[int, str]:
    """Broker id -> the Grid label its roll task ended with (``"broker 0 (1/3) · left alone"``)."""
    return {int(label.split()[1]): label for (task, _), label in result.labels.items()
            if task == "restart.broker" and label}


def test_dry_run_names_the_brokers_it_would_restart_and_touches_nothing(sandbox, capfd, caplog):
    files = {b: properties(sandbox, b) for b in sandbox.broker_ids}
    before = sandbox.starts()
    result = run_dag(DAG_ID, {"cluster": "kafka_sandbox", "dry_run": True, "scope": [1, 2],
                              "changes": {"log.cleaner.backoff.ms": 20000, "queued.max.requests": 400}, **FAST})
    text = output(capfd, caplog)
    assert result.state == "success", failure_lines(text)
    assert re.search(r"broker 1: dynamic log\.cleaner\.backoff\.ms -> 20000; server\.properties "
                     r"queued\.max\.requests unset -> 400; unchanged none; restart: yes", text), text[-3000:]
    assert "DRY RUN: would send IncrementalAlterConfigs to broker 2: {'log.cleaner.backoff.ms': '20000'}" in text
    assert re.search(r"broker 1: rolling it due to: queued\.max\.requests 400 in server\.properties, the broker runs "
                     r"500 \(DEFAULT_CONFIG, read-only\): restart", text)
    assert "broker 0: left alone: not in the change's scope [1, 2]" in text
    labels = broker_labels(result)
    assert labels[0].endswith(" · dry run · left alone") and not any("left alone" in labels[b] for b in (1, 2)), labels
    assert {b: properties(sandbox, b) for b in sandbox.broker_ids} == files, "no file was written"
    assert configs(sandbox, 1, "log.cleaner.backoff.ms")["log.cleaner.backoff.ms"][1] == "DEFAULT_CONFIG"
    assert restarts(sandbox, before) == {0: 0, 1: 0, 2: 0}


def test_a_dynamic_change_restarts_nothing_and_a_rerun_does_nothing(sandbox, capfd, caplog):
    before = sandbox.starts()
    change = {"cluster": "kafka_sandbox", "changes": {"num.io.threads": 4, "log.cleaner.threads": 2}, **FAST}
    with watched_traffic(sandbox.workdir, sandbox.bootstrap_servers, sandbox.broker_ids) as traffic:
        result = run_dag(DAG_ID, change)
    text = output(capfd, caplog)
    assert result.state == "success", failure_lines(text)
    assert_no_acknowledged_message_lost(traffic)
    for b in sandbox.broker_ids:
        assert configs(sandbox, b, "num.io.threads", "log.cleaner.threads") == {
            "num.io.threads": ("4", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
            "log.cleaner.threads": ("2", "DYNAMIC_DEFAULT_BROKER_CONFIG")}, f"broker {b} runs the change"
        file = properties(sandbox, b)
        assert "num.io.threads=4" in file and "log.cleaner.threads=2" in file, "the file says what runs"
    assert restarts(sandbox, before) == {0: 0, 1: 0, 2: 0}, "a dynamic change restarts nothing"
    assert text.count("left alone: server.properties and the running config agree") == 3
    written = {b: backups(sandbox, b) for b in sandbox.broker_ids}

    again = run_dag(DAG_ID, change)
    text = output(capfd, caplog)
    assert again.state == "success", failure_lines(text)
    assert "IncrementalAlterConfigs to" not in text, "nothing is sent again"
    assert text.count("already 4 (DYNAMIC_DEFAULT_BROKER_CONFIG) and in server.properties: nothing to do") == 3
    assert {b: backups(sandbox, b) for b in sandbox.broker_ids} == written, "no file is written again"
    assert restarts(sandbox, before) == {0: 0, 1: 0, 2: 0}


def test_a_static_change_on_two_brokers_restarts_exactly_those(sandbox, capfd, caplog):
    """A mixed change with broker ids as the scope: the dynamic key per broker, the read-only one in the two files,
    then only those two brokers restart, each once; a re-run restarts nothing."""
    before = sandbox.starts()
    untouched = properties(sandbox, 0)
    change = {"cluster": "kafka_sandbox", "scope": [1, 2],
              "changes": {"log.cleaner.backoff.ms": 20000, "queued.max.requests": 400}, **FAST}
    with watched_traffic(sandbox.workdir, sandbox.bootstrap_servers, sandbox.broker_ids) as traffic, \
            MetadataWatcher(sandbox.bootstrap_servers, interval_s=0.25) as watcher:
        result = run_dag(DAG_ID, change)
    text = output(capfd, caplog)
    assert result.state == "success", failure_lines(text)
    assert_no_acknowledged_message_lost(traffic)
    assert watcher.ever_offline() == [], watcher.explain_offline(sandbox)
    assert restarts(sandbox, before) == {0: 0, 1: 1, 2: 1}, "exactly brokers 1 and 2 restarted, once each"
    for b in (1, 2):
        assert configs(sandbox, b, "queued.max.requests", "log.cleaner.backoff.ms") == {
            "queued.max.requests": ("400", "STATIC_BROKER_CONFIG"),
            "log.cleaner.backoff.ms": ("20000", "DYNAMIC_BROKER_CONFIG")}
        assert "queued.max.requests=400" in properties(sandbox, b)
        assert f"broker {b}: rolling it due to: queued.max.requests 400 in server.properties" in text
    assert configs(sandbox, 0, "queued.max.requests", "log.cleaner.backoff.ms") == {
        "queued.max.requests": ("500", "DEFAULT_CONFIG"), "log.cleaner.backoff.ms": ("15000", "DEFAULT_CONFIG")}
    assert properties(sandbox, 0) == untouched
    assert "broker 0: left alone: not in the change's scope [1, 2]" in text
    labels = broker_labels(result)
    assert labels[0].endswith(" · left alone") and not any("left alone" in labels[b] for b in (1, 2)), \
        f"the Grid calls only broker 0 left alone: {labels}"

    again = run_dag(DAG_ID, change)
    text = output(capfd, caplog)
    assert again.state == "success", failure_lines(text)
    assert restarts(sandbox, before) == {0: 0, 1: 1, 2: 1}, "a re-run restarts nothing"
    assert all(label.endswith(" · left alone") for label in broker_labels(again).values()), broker_labels(again)
    assert text.count("left alone: server.properties and the running config agree on log.cleaner.backoff.ms, "
                      "queued.max.requests") == 2


@pytest.mark.parametrize("changes, scope, expected", [
    ({"log.retension.hours": 72, "num.io.threads": 100, "auto.create.topics.enable": "maybe",
      "listener.name.plaintext.ssl.keystore.password": "x", "listeners": "PLAINTEXT://:9092", "broker.id": 5},
     "cluster",
     ["log.retension.hours: not a broker config this cluster knows: did you mean log.retention.hours",
      "num.io.threads", "at most double the current value",
      "auto.create.topics.enable: 'maybe' is not a BOOLEAN",
      "listener.name.plaintext.ssl.keystore.password: a password config",
      "listeners: Kafka sets it per broker only",
      "broker.id: not changed by a config change: a broker's id is its identity"]),
    ({"message.max.bytes": -5}, "cluster",
     ["Kafka refused the config change at the cluster-wide default: Invalid value -5 for configuration "
      "message.max.bytes"]),
    ({"log.cleaner.backoff.ms": 1000}, [1, 7], ["scope: brokers [7] are not among the described brokers [0, 1, 2]"]),
    ({}, "cluster", ["no config changes given"]),
])
def test_bad_input_is_refused_before_anything_is_touched(sandbox, changes, scope, expected, capfd, caplog):
    files = {b: properties(sandbox, b) for b in sandbox.broker_ids}
    before = sandbox.starts()
    result = run_dag(DAG_ID, {"cluster": "kafka_sandbox", "changes": changes, "scope": scope, **FAST})
    text = output(capfd, caplog)
    assert result.state == "failed"
    assert result.state_of("plan_config") == "failed" and result.state_of("apply_config") == "upstream_failed"
    for part in expected:
        assert part in text, (part, failure_lines(text))
    assert "nothing was touched" in text
    assert {b: properties(sandbox, b) for b in sandbox.broker_ids} == files
    assert restarts(sandbox, before) == {0: 0, 1: 0, 2: 0}


def test_a_mixed_change_on_a_kraft_cluster_restarts_the_brokers_not_the_controllers(kraft, capfd, caplog):
    """KRaft (Kafka 4.0, no ZooKeeper): the dynamic key reaches every broker through the controllers' metadata log,
    the read-only key rolls every broker once; the KRaft controllers are not restarted."""
    nodes = kraft.broker_ids + kraft.controller_ids
    before = kraft.starts(nodes)
    change = {"cluster": "kafka_sandbox", "changes": {"log.cleaner.backoff.ms": 20000, "queued.max.requests": 400},
              **FAST}
    with watched_traffic(kraft.workdir, kraft.bootstrap_servers, kraft.broker_ids) as traffic:
        result = run_dag(DAG_ID, change)
    text = output(capfd, caplog)
    assert result.state == "success", failure_lines(text)
    assert_no_acknowledged_message_lost(traffic)
    now = kraft.starts(nodes)
    assert {n: now[n] - before[n] for n in nodes} == {**{b: 1 for b in kraft.broker_ids},
                                                      **{c: 0 for c in kraft.controller_ids}}
    for b in kraft.broker_ids:
        assert configs(kraft, b, "queued.max.requests", "log.cleaner.backoff.ms") == {
            "queued.max.requests": ("400", "STATIC_BROKER_CONFIG"),
            "log.cleaner.backoff.ms": ("20000", "DYNAMIC_DEFAULT_BROKER_CONFIG")}
    assert "KRaft cluster" in text

    # one broker gets a second log directory: a KRaft broker exits at start on an unformatted one ("No
    # `meta.properties` found in ..."), so the run formats it (kafka-storage --ignore-formatted) after writing the
    # file and before the broker's restart; the broker comes back with both
    b = kraft.broker_ids[-1]
    first = kraft.host_dir(b).server_properties.parent / "data"
    assert f"log.dirs={first}" in properties(kraft, b)
    second = first.with_name("data2")
    both = f"{first},{second}"
    before = kraft.starts(nodes)
    added = run_dag(DAG_ID, {"cluster": "kafka_sandbox", "changes": {"log.dirs": both}, "scope": [b], **FAST})
    text = output(capfd, caplog)
    assert added.state == "success", failure_lines(text)
    assert (second / "meta.properties").exists(), "the new log directory was formatted"
    now = kraft.starts(nodes)
    assert {n: now[n] - before[n] for n in nodes} == {n: int(n == b) for n in nodes}
    assert configs(kraft, b, "log.dirs") == {"log.dirs": (both, "STATIC_BROKER_CONFIG")}
    assert f"broker {b}: new log directories ['{second}'] formatted for cluster" in text, failure_lines(text)
    assert "formatted the new log directories of brokers [" in text

    # new partitions go to the emptier directory: dropping it now would lose the broker's replicas there: refused
    client = AdminClient({"bootstrap.servers": kraft.bootstrap_servers})
    client.create_topics([NewTopic("dirs-probe", 3, 3)])["dirs-probe"].result(30)
    wait_for(lambda: replicas_in(kraft, b).get(str(second)), 60, what=f"dirs-probe's replicas in {second}")
    refused = run_dag(DAG_ID, {"cluster": "kafka_sandbox", "changes": {"log.dirs": str(first)}, "scope": [b],
                               **FAST})
    text = output(capfd, caplog)
    assert refused.state_of("plan_config") == "failed", failure_lines(text)
    assert re.search(rf"broker {b}: the log directory {second} would be dropped while it holds \d+ replicas", text)
    assert configs(kraft, b, "log.dirs") == {"log.dirs": (both, "STATIC_BROKER_CONFIG")}, "nothing was touched"
    # nor may the metadata log move (the first log directory holds it)
    moved = run_dag(DAG_ID, {"cluster": "kafka_sandbox", "changes": {"log.dirs": f"{second},{first}"},
                             "scope": [b], **FAST})
    text = output(capfd, caplog)
    assert moved.state_of("plan_config") == "failed", failure_lines(text)
    assert f"the change moves the KRaft metadata log from {first} to {second}" in text, failure_lines(text)

    # emptied (the topic deleted), the directory may go: the broker restarts on its first one alone
    client.delete_topics(["dirs-probe"])["dirs-probe"].result(30)
    wait_for(lambda: not replicas_in(kraft, b).get(str(second)), 60, what=f"{second} empty")
    before = kraft.starts(nodes)
    dropped = run_dag(DAG_ID, {"cluster": "kafka_sandbox", "changes": {"log.dirs": str(first)}, "scope": [b],
                               **FAST})
    text = output(capfd, caplog)
    assert dropped.state == "success", failure_lines(text)
    now = kraft.starts(nodes)
    assert {n: now[n] - before[n] for n in nodes} == {n: int(n == b) for n in nodes}
    assert configs(kraft, b, "log.dirs") == {"log.dirs": (str(first), "STATIC_BROKER_CONFIG")}


def replicas_in(sandbox, broker: int) -> dict[str, int]:
    """Log directory -> replicas in it, of one broker (DescribeLogDirs through kafka-python, an independent
    client)."""
    from hooks.kafka_admin import normalize_log_dirs
    from kafka import KafkaAdminClient
    from kafka_ops.log_dirs import replicas_by_dir

    client = KafkaAdminClient(bootstrap_servers=sandbox.bootstrap_servers, client_id="test-log-dirs")
    try:
        return replicas_by_dir(normalize_log_dirs(client.describe_log_dirs(brokers=[broker])), broker)
    finally:
        client.close()


@pytest.mark.extended
def test_elr_refuses_min_insync_replicas_per_broker_on_kafka_4_1(fresh_sandbox, use_sandbox, capfd, caplog):
    """Kafka 4.1 with Eligible Leader Replicas on (KIP-966): min.insync.replicas per broker, or removed cluster-wide,
    is refused before anything is touched (Strimzi's endless rolls, strimzi#11685 / #11854)."""
    sandbox = fresh_sandbox(mode="kraft", controllers=3, kafka_version="4.1.0")
    use_sandbox(sandbox.workdir)
    sandbox.wait_healthy(timeout_s=120)
    for changes, scope, expected in (
            ({"min.insync.replicas": 2}, [1],
             "Broker-level min.insync.replicas cannot be altered while ELR is enabled"),
            ({"min.insync.replicas": None}, "cluster", "Cluster-level min.insync.replicas cannot be removed while ELR "
                                                       "is enabled")):
        result = run_dag(DAG_ID, {"cluster": "kafka_sandbox", "changes": changes, "scope": scope, **FAST})
        text = output(capfd, caplog)
        assert result.state_of("plan_config") == "failed", failure_lines(text)
        assert "ELR (KIP-966) on" in text and expected in text, failure_lines(text)


def leaders(sandbox) -> dict[tuple[str, int], int]:
    """Every partition's leader, from an independent client's Metadata."""
    topics = AdminClient({"bootstrap.servers": sandbox.bootstrap_servers}).list_topics(timeout=30).topics
    return {(name, p): meta.leader for name, topic in topics.items() for p, meta in topic.partitions.items()}


def test_a_leader_imbalance_at_the_end_is_elected_not_waited_for(sandbox, capfd, caplog):
    """A change that restarts nothing still ends with run_outcome's final health check. A leader imbalance found there
    (made before the run: broker 1 the preferred leader of partitions others lead) is no safety problem: the check
    elects the preferred leaders of the partitions that need it and the run ends, instead of waiting up to 300 s for
    Kafka's own rebalance (forever with auto.leader.rebalance.enable=false). With fix_leader_imbalance off it waits
    and, at its timeout, fails the run naming the imbalance. Last in this module: the partitions it reorders keep
    their new preferred leaders."""
    before = sandbox.starts()
    reordered = make_leader_imbalance(sandbox, 1)
    change = {"cluster": "kafka_sandbox", "changes": {"log.cleaner.backoff.ms": 20000}, "healthcheck_interval_s": 1}

    waited = run_dag(DAG_ID, {**change, "fix_leader_imbalance": False, "healthcheck_timeout_s": 10})
    text = output(capfd, caplog)
    assert waited.state == "failed" and waited.state_of("run_outcome") == "failed", waited.states
    assert waited.state_of("apply_config") == "success", waited.states
    assert re.search(r"final health: .*gave up after 10 s.*broker 1: leader imbalance", text), failure_lines(text)
    assert "elected the preferred leaders" not in text
    now = leaders(sandbox)
    assert all(now[tp] != 1 for tp in reordered), {tp: now[tp] for tp in reordered}

    fixed = run_dag(DAG_ID, {**change, "healthcheck_timeout_s": 120})
    text = output(capfd, caplog)
    assert fixed.state == "success", failure_lines(text)
    assert re.search(r"leaders balanced\): leader imbalance: elected the preferred leaders of \d+ partitions", text), (
        failure_lines(text))
    now = leaders(sandbox)
    assert all(now[tp] == 1 for tp in reordered), {tp: now[tp] for tp in reordered}
    assert restarts(sandbox, before) == {0: 0, 1: 0, 2: 0}, "a dynamic change restarts nothing"


def test_a_change_that_reaches_a_broker_that_is_down_is_refused_naming_it(sandbox, capfd, caplog):
    """Broker 2 stopped: a cluster-wide change, or one scoped to broker 2, is refused at plan_config naming it (its
    server.properties cannot be edited nor its running config compared; before, the cluster-wide change edited the
    live brokers and reported success with broker 2 unchanged). Nothing touched; broker 2 started again after."""
    files = {b: properties(sandbox, b) for b in sandbox.broker_ids}
    rc, _, err = sandbox.ssh(2, "kafka-service stop")
    assert rc == 0, err
    try:
        for scope, says in [("cluster", "brokers [2] are down (in replica lists, not registered): a cluster-wide "
                                        "change would leave their server.properties unchanged"),
                            ([1, 2], "scope: brokers [2] are down (in replica lists, not registered)")]:
            result = run_dag(DAG_ID, {"cluster": "kafka_sandbox", "changes": {"queued.max.requests": 450},
                                      "scope": scope, **FAST})
            text = output(capfd, caplog)
            assert result.state == "failed" and result.state_of("plan_config") == "failed", result.states
            assert result.state_of("apply_config") == "upstream_failed"
            assert says in text and "nothing was touched" in text, failure_lines(text)
        assert {b: properties(sandbox, b) for b in sandbox.broker_ids} == files
    finally:
        rc, _, err = sandbox.ssh(2, "kafka-service start")
        assert rc == 0, err
        sandbox.wait_healthy(timeout_s=120)


def test_a_cluster_wide_change_a_broker_override_would_shadow_is_refused_then_the_note_says_what_was_set(
        sandbox, capfd, caplog):
    """Broker 1 has its own dynamic ``log.cleaner.delete.retention.ms`` (``kafka-configs --entity-name 1``), which
    wins over the cluster-wide default: a cluster-wide change to another value is refused at plan_config naming it
    and the way on (before, the run set the default, wrote every file and reported success while broker 1 kept its
    own value). Once the override is deleted (scope [1], null) the change goes through, and the run's note says what
    it set and wrote (``kafka_ops.done_lines``)."""
    key = "log.cleaner.delete.retention.ms"
    client = AdminClient({"bootstrap.servers": sandbox.bootstrap_servers})
    resource = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry(key, "172800000", incremental_operation=AlterConfigOpType.SET)])
    client.incremental_alter_configs([resource])[resource].result(timeout=30)
    files = {b: properties(sandbox, b) for b in sandbox.broker_ids}
    change = {"cluster": "kafka_sandbox", "changes": {key: 259200000}, **FAST}
    refused = run_dag(DAG_ID, change)
    text = output(capfd, caplog)
    assert refused.state == "failed" and refused.state_of("plan_config") == "failed", refused.states
    assert (f"broker 1: {key}: its own dynamic value 172800000 (set for broker 1 alone) takes precedence over the "
            f"cluster-wide default 259200000, so the change would not reach it") in text, failure_lines(text)
    assert "nothing was touched" in text
    assert {b: properties(sandbox, b) for b in sandbox.broker_ids} == files
    assert configs(sandbox, 0, key)[key] == ("86400000", "DEFAULT_CONFIG"), "no default was set"

    removed = run_dag(DAG_ID, {"cluster": "kafka_sandbox", "changes": {key: None}, "scope": [1], **FAST})
    text = output(capfd, caplog)
    assert removed.state == "success", failure_lines(text)
    assert f"config: changed live at broker 1: {key} removed" in text, text[-3000:]
    applied = run_dag(DAG_ID, change)
    text = output(capfd, caplog)
    assert applied.state == "success", failure_lines(text)
    for b in sandbox.broker_ids:
        assert configs(sandbox, b, key)[key] == ("259200000", "DYNAMIC_DEFAULT_BROKER_CONFIG"), f"broker {b}"
    assert (f"config: changed live at the cluster-wide default: {key}=259200000; server.properties written on brokers "
            f"[0, 1, 2] (each previous file kept beside it)") in text, text[-3000:]
