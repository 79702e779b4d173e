"""The KRaft-mode sandbox (``sandbox up --mode kraft``): Apache Kafka 4.0.0, 3 dedicated controllers (node
ids 100-102) and 3 brokers, no ZooKeeper for Kafka. Observed from outside only: Kafka's own tools
(``kafka-metadata-quorum``, ``kafka-features``, ``kafka-storage``'s formatting in ``meta.properties``),
kafka-python (DescribeQuorum), confluent-kafka (metadata, CreateTopics), ``kafka-service`` over SSH on the
controller hosts with host key checking, ``sandbox crash-broker`` / ``freeze`` and Burrow's HTTP API. Each test
starts from and restores a healthy cluster with all three controllers running.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator

import pytest
from broker_support import SLOT_KRAFT, QuickWatcher, module_sandbox
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from hooks.kafka_admin import KafkaAdminHook
from kafka import KafkaAdminClient
from observers import admin, wait_for

from sandbox import settings, status
from sandbox.testing import RunningSandbox

pytestmark = [pytest.mark.sandbox, pytest.mark.destructive]

CONTROLLERS = [100, 101, 102]
# the id of a cluster migrated from ZooKeeper mode keeps its ZooKeeper-made id, which may start with "-" (Kafka's own
# random-uuid never does): the sandbox formats every node with it as one `--cluster-id=<id>` word
MIGRATED_CLUSTER_ID = "-J8iB2zLTd6sMiXcWqE-xA"


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningSandbox]:
    with module_sandbox(request, tmp_path_factory, SLOT_KRAFT, brokers=3, racks=3, mode="kraft",
                        controllers=3, cluster_id=MIGRATED_CLUSTER_ID) as running:
        yield running


def quorum(client: KafkaAdminClient) -> dict:
    """DescribeQuorum's partition entry (leader_id, leader_epoch, high_watermark, current_voters, observers)."""
    return client.describe_metadata_quorum()["topics"][0]["partitions"][0]


def led_quorum(client: KafkaAdminClient) -> dict | None:
    """The quorum when it has a leader (None while an election runs or no controller answers)."""
    try:
        found = quorum(client)
    except Exception:  # noqa: BLE001 - a broker or the leader may be moving
        return None
    return found if found["leader_id"] in CONTROLLERS else None


def controller_service(cluster: RunningSandbox, node: int, action: str) -> str:
    code, out, err = cluster.ssh(node, f"kafka-service {action}")
    assert code == 0, f"kafka-service {action} on controller {node}: {out} {err}"
    return out


@pytest.fixture
def healthy(cluster: RunningSandbox) -> Iterator[RunningSandbox]:
    """Every controller running and caught up, every broker registered, URP 0; restored after the test."""
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)

    def all_caught_up() -> bool:
        q = led_quorum(client)
        return bool(q) and all(v["log_end_offset"] >= q["high_watermark"] - 5 for v in q["current_voters"])

    wait_for(all_caught_up, 20, what="every voter caught up")
    cluster.wait_healthy(timeout_s=30)
    yield cluster
    for node in CONTROLLERS:
        controller_service(cluster, node, "start")
    for broker in (0, 1, 2):
        cluster.ssh(broker, "kafka-service start")
    wait_for(all_caught_up, 30, what="every voter caught up again")
    cluster.wait_healthy(timeout_s=60)
    client.close()


def test_kafkas_own_tools_describe_the_quorum_and_the_features(healthy: RunningSandbox) -> None:
    status = healthy.kafka_tool("kafka-metadata-quorum.sh", "--bootstrap-server", healthy.bootstrap_servers,
                                "describe", "--status")
    assert status.returncode == 0, status.stderr
    fields = dict(line.split(":", 1) for line in status.stdout.splitlines() if ":" in line)
    assert fields["ClusterId"].strip() == healthy.env["cluster_id"] == MIGRATED_CLUSTER_ID
    assert int(fields["LeaderId"]) in CONTROLLERS
    assert all(re.search(rf"\b{c}\b", fields["CurrentVoters"]) for c in CONTROLLERS), fields["CurrentVoters"]
    replication = healthy.kafka_tool("kafka-metadata-quorum.sh", "--bootstrap-server", healthy.bootstrap_servers,
                                     "describe", "--replication")
    rows = [line.split() for line in replication.stdout.splitlines()[1:] if line.strip()]
    assert sorted(int(r[0]) for r in rows) == [0, 1, 2, *CONTROLLERS], replication.stdout
    assert {r[-1] for r in rows} >= {"Leader", "Follower", "Observer"}
    features = healthy.kafka_tool("kafka-features.sh", "--bootstrap-server", healthy.bootstrap_servers, "describe")
    assert features.returncode == 0, features.stderr
    mv = next(line for line in features.stdout.splitlines() if "Feature: metadata.version" in line)
    assert "FinalizedVersionLevel: 4.0-IV3" in mv, mv
    # every node's storage was formatted by kafka-storage with the cluster's id
    for node in [0, 1, 2, *CONTROLLERS]:
        meta = (healthy.host_dir(node).data / "meta.properties").read_text()
        assert f"cluster.id={healthy.env['cluster_id']}" in meta and f"node.id={node}" in meta

    # real clients: DescribeQuorum names the voters and the brokers as observers
    client = KafkaAdminClient(bootstrap_servers=healthy.bootstrap_servers)
    q = quorum(client)
    assert sorted(v["replica_id"] for v in q["current_voters"]) == CONTROLLERS
    assert sorted(o["replica_id"] for o in q["observers"]) == [0, 1, 2]
    client.close()
    # clients never see controllers: Metadata names a broker as "controller"
    confluent = admin(healthy.bootstrap_servers)
    md = confluent.list_topics(timeout=10)
    assert sorted(md.brokers) == [0, 1, 2] and md.controller_id in (0, 1, 2)

    # the profile Airflow gets has no ZooKeeper, and names the controller hosts
    assert "zookeeper_connect" not in healthy.env
    env_text = (healthy.workdir / "airflow.env").read_text()
    profile = json.loads(env_text.split("AIRFLOW_CONN_KAFKA_SANDBOX=", 1)[1].split("\n", 1)[0].strip("'"))["extra"]
    assert "zookeeper" not in profile
    assert profile["controller_hosts"] == {str(c["id"]): c["host"] for c in healthy.env["controllers"]}
    # Burrow rates the workload's groups from __consumer_offsets written by Kafka 4.0
    for group in settings.WORKLOAD_GROUPS:
        wait_for(lambda g=group: healthy.group_status(g) == "OK", 30, what=f"{group} OK")


LOG_TIME = r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]"


def last_logged_before(node_log: str, pattern: str, before: str) -> tuple[str, str] | None:
    """The time (Kafka's log timestamp) and first group of the last line of ``node_log`` matching ``pattern`` (a regex
    with one group, applied after the timestamp) logged before ``before`` (a timestamp in the same format: the
    sandbox's nodes share one clock); None when no such line."""
    found = [(m.group(1), m.group(2)) for m in re.finditer(LOG_TIME + r".*?" + pattern, node_log, re.M)
             if m.group(1) < before]
    return found[-1] if found else None


def first_logged(node_log: str, pattern: str) -> tuple[str, re.Match]:
    """The time (Kafka's log timestamp, sortable as text) and match of the first line of ``node_log`` matching
    ``pattern`` (a regex applied after the timestamp)."""
    found = re.search(LOG_TIME + r".*?" + pattern, node_log, re.M)
    assert found, f"no line matching {pattern!r}"
    return found.group(1), found


def test_the_brokers_start_once_every_voter_follows_one_quorum_leader(healthy: RunningSandbox) -> None:
    # Kafka's own logs: before the first broker started, every voter had left the election (to Leader, or to
    # FollowerState of a leader), and the last such transition of each named one epoch (on a loaded machine the voters
    # may elect twice in a row, epochs 1 and 2 within milliseconds: a voter's first transition can name epoch 1, the
    # others' epoch 2; up waits for them to follow one leader)
    first_start = min(first_logged(healthy.host_dir(broker).server_log.read_text(), r"kafka-service: start")[0]
                      for broker in (0, 1, 2))
    settled = {c: last_logged_before(healthy.host_dir(c).server_log.read_text(),
                                     r"Completed transition to (?:Leader|FollowerState)\(.*?epoch=(\d+)", first_start)
               for c in CONTROLLERS}
    assert all(settled.values()), f"a voter still electing when the first broker started at {first_start}: {settled}"
    epochs = {c: found[1] for c, found in settled.items()}
    assert len(set(epochs.values())) == 1, (first_start, epochs)
    # what up waited on, asked of each controller (KIP-919): only the leader answers, naming every voter fetching
    answers = {c: status.controller_quorum(f"{c_host}:{settings.CONTROLLER_PORT}")
               for c, c_host in ((c["id"], c["host"]) for c in healthy.env["controllers"])}
    leaders = [c for c, answer in answers.items() if answer]
    assert len(leaders) == 1 and answers[leaders[0]]["leader"] == leaders[0], answers
    voters = answers[leaders[0]]["voters"]
    assert sorted(v["id"] for v in voters) == CONTROLLERS and min(v["end_offset"] for v in voters) >= 0, voters


def test_min_insync_replicas_is_read_from_each_broker_and_from_the_active_controller_itself(healthy: RunningSandbox
                                                                                            ) -> None:
    """What the upgrade judges before it turns ELR on (KIP-966 copies the active controller's static
    min.insync.replicas to the cluster level): read from the real nodes, and as Kafka's own kafka-configs.sh reads
    it; a cluster-level value set with that tool is seen as the one Kafka keeps."""
    from hooks.kafka_admin import KafkaAdminHook
    from kafka_ops.elr_min_isr import MinIsrLayers, refusal
    from kafka_ops.profile import ClusterProfile
    from runtime.elr_layers import read_min_isr_layers

    hosts = {c["id"]: c["host"] for c in healthy.env["controllers"]}
    profile = ClusterProfile.from_connection_fields("kafka_sandbox", healthy.bootstrap_servers, {
        "controller_hosts": {str(i): h for i, h in hosts.items()}})

    def read() -> tuple[MinIsrLayers, int]:
        with KafkaAdminHook(profile=profile) as hook:
            state = hook.cluster_state(configs=False)
            quorum = hook.describe_quorum()
            return read_min_isr_layers(hook, profile, state.brokers, quorum), quorum.leader_id

    layers, leader = read()
    assert layers == MinIsrLayers(brokers={0: 2, 1: 2, 2: 2}, cluster_default=None, controller_id=leader,
                                  controller_static=settings.MIN_INSYNC_REPLICAS)
    assert refusal(layers) is None
    described = healthy.kafka_tool("kafka-configs.sh", "--bootstrap-controller", f"{hosts[leader]}:9093",
                                   "--entity-type", "brokers", "--entity-name", str(leader), "--describe", "--all")
    assert described.returncode == 0, described.stderr
    line = next(x for x in described.stdout.splitlines() if x.strip().startswith("min.insync.replicas="))
    assert f"STATIC_BROKER_CONFIG:min.insync.replicas={settings.MIN_INSYNC_REPLICAS}" in line, line

    def configs(*args: str) -> None:
        done = healthy.kafka_tool("kafka-configs.sh", "--bootstrap-server", healthy.bootstrap_servers,
                                  "--entity-type", "brokers", "--entity-default", "--alter", *args)
        assert done.returncode == 0, done.stderr

    configs("--add-config", "min.insync.replicas=3")
    try:
        # each broker applies the new metadata record from its own copy of the log, a moment apart
        layers = wait_for(lambda: (found := read()[0]).brokers == {0: 3, 1: 3, 2: 3} and found, 30,
                          what="the cluster-level value on every broker")
        assert layers.cluster_default == 3 and layers.after() == 3 and refusal(layers) is None
    finally:
        configs("--delete-config", "min.insync.replicas")
    wait_for(lambda: read()[0].cluster_default is None, 30, what="the cluster-level value gone")


def test_stopping_the_active_controller_moves_leadership_and_it_rejoins(healthy: RunningSandbox) -> None:
    client = KafkaAdminClient(bootstrap_servers=healthy.bootstrap_servers)
    before = quorum(client)
    leader, epoch = before["leader_id"], before["leader_epoch"]
    with QuickWatcher(healthy.bootstrap_servers) as watcher:
        stopped_at = time.time()
        controller_service(healthy, leader, "stop")
        after = wait_for(lambda: (q := led_quorum(client)) and q["leader_id"] != leader and q, 10,
                         what="a new active controller")
        elected_s = time.time() - stopped_at
        assert after["leader_epoch"] > epoch
        gone = next(v for v in after["current_voters"] if v["replica_id"] == leader)
        assert gone["log_end_offset"] < after["high_watermark"] or gone["last_fetch_timestamp"] < stopped_at * 1000
        # metadata still changes while one voter is down: a new topic is created and led
        name = f"kraft-while-down-{int(time.time())}"
        confluent = admin(healthy.bootstrap_servers)  # kept referenced: a collected client cancels its futures
        confluent.create_topics([NewTopic(name, 3, 3)])[name].result(15)
        controller_service(healthy, leader, "start")
        back = wait_for(lambda: (q := led_quorum(client)) and all(
            v["log_end_offset"] >= q["high_watermark"] for v in q["current_voters"] if v["replica_id"] == leader) and q,
            15, what=f"controller {leader} caught up again")
    # the restarted voter follows the new leader without an election (pre-vote, KIP-996)
    assert back["leader_id"] == after["leader_id"] and back["leader_epoch"] == after["leader_epoch"]
    assert elected_s < 5.0, f"a new leader took {elected_s:.1f} s"
    assert not watcher.ever_offline(), watcher.ever_offline()[:2]
    assert all(sorted(v.brokers) == [0, 1, 2] for v in watcher.views), "a broker was fenced"
    client.close()


@pytest.mark.extended
def test_the_quorum_loses_a_majority_and_recovers(healthy: RunningSandbox) -> None:
    client = KafkaAdminClient(bootstrap_servers=healthy.bootstrap_servers)
    leader = quorum(client)["leader_id"]
    followers = [c for c in CONTROLLERS if c != leader]
    confluent = admin(healthy.bootstrap_servers)
    controller_service(healthy, followers[0], "stop")
    # one of three down: the quorum still commits
    name = f"kraft-one-down-{int(time.time())}"
    confluent.create_topics([NewTopic(name, 1, 3)])[name].result(15)
    controller_service(healthy, followers[1], "stop")
    # two of three down: no majority; the leader resigns (check-quorum) and metadata cannot change
    wait_for(lambda: led_quorum(client) is None, 10, what="the quorum to lose its leader")
    stuck = f"kraft-no-quorum-{int(time.time())}"
    with pytest.raises(Exception):  # noqa: B017, PT011 - a timeout or NOT_CONTROLLER, whichever comes first
        confluent.create_topics([NewTopic(stuck, 1, 3)], request_timeout=5)[stuck].result(8)
    # brokers keep serving what they know meanwhile
    assert sorted(AdminClient({"bootstrap.servers": healthy.bootstrap_servers}).list_topics(timeout=10).brokers) \
        == [0, 1, 2]
    for node in followers:
        controller_service(healthy, node, "start")
    recovered = wait_for(lambda: led_quorum(client), 15, what="a leader again")
    assert recovered["leader_id"] in CONTROLLERS
    again = f"kraft-recovered-{int(time.time())}"
    confluent.create_topics([NewTopic(again, 1, 3)])[again].result(15)
    client.close()


def registered(confluent: AdminClient) -> set[int] | None:
    """The broker ids of one Metadata answer, or None when none came within 5 s: librdkafka may have sent the
    request to the broker just killed (its connection refused, the request waiting out its timeout), a look to
    repeat, not a failure."""
    try:
        return set(confluent.list_topics(timeout=5).brokers)
    except KafkaException:
        return None


def test_a_broker_that_stops_heartbeating_is_fenced_and_unfenced_on_restart(healthy: RunningSandbox) -> None:
    confluent = admin(healthy.bootstrap_servers)
    led_by_1 = [(t, p.id) for t, m in confluent.list_topics(timeout=10).topics.items()
                for p in m.partitions.values() if p.leader == 1]
    assert led_by_1
    with QuickWatcher(healthy.bootstrap_servers) as watcher:
        killed_at = time.time()
        result = healthy.cli("crash-broker", "1")
        assert result.returncode == 0 and "fences it after" in result.stderr, result.stderr
        wait_for(lambda: (seen := registered(confluent)) is not None and 1 not in seen, 15, what="broker 1 fenced")
        fenced_s = time.time() - killed_at
        md = confluent.list_topics(timeout=10)
        assert all(md.topics[t].partitions[p].leader not in (1, -1) for t, p in led_by_1)
        client = KafkaAdminClient(bootstrap_servers=healthy.bootstrap_servers)
        wait_for(lambda: 1 not in [o["replica_id"] for o in quorum(client)["observers"]
                                   if o["last_fetch_timestamp"] > (time.time() - 3) * 1000], 10,
                 what="broker 1 no longer fetching the metadata log")
        code, out, _ = healthy.ssh(1, "kafka-service start")
        assert code == 0, out
        wait_for(lambda: 1 in (registered(confluent) or ()), 20, what="broker 1 unfenced")
    # fenced after broker.session.timeout.ms without heartbeats, not at once (a crash is no clean shutdown); the
    # active controller looks for stale sessions periodically, and logs the fencing
    session_s = settings.BROKER_SESSION_TIMEOUT_MS / 1000
    assert session_s - 1 <= fenced_s <= 2 * session_s + 2, fenced_s
    assert any("Fencing broker 1 at epoch" in healthy.host_dir(c).server_log.read_text() for c in CONTROLLERS)
    assert not watcher.ever_offline(), watcher.ever_offline()[:2]  # RF 3 everywhere: others lead
    healthy.wait_healthy(timeout_s=60)
    client.close()


def test_a_hung_broker_stalls_no_admin_call(healthy: RunningSandbox) -> None:
    """A broker hung (SIGSTOP), listed first among the bootstrap servers and still registered (its session lasts
    ``broker.session.timeout.ms``): the hook's kafka-python calls bootstrap from a broker that answers and send
    there, also those for "the controller" (a KRaft broker's Metadata names a random live broker, maybe the hung
    one; any broker forwards them, KIP-590). With a 2 s request timeout, a call sent to the hung broker fails."""
    state = KafkaAdminHook(bootstrap_servers=healthy.bootstrap_servers).cluster_state(configs=False)
    addresses = {b.id: b.address for b in state.brokers}
    hung, live = 2, 0
    hook = KafkaAdminHook(bootstrap_servers=f"{addresses[hung]},{addresses[live]}", request_timeout_s=2)
    result = healthy.cli("freeze", str(hung))
    assert result.returncode == 0, result.stderr
    try:
        def calls() -> tuple[bool, list, bool]:
            return (hook.describe_quorum().leader_id in CONTROLLERS, hook.list_partition_reassignments(),
                    hook.metadata_version()[0] is not None)

        answers = [calls()]
        listed = hung in admin(healthy.bootstrap_servers).list_topics(timeout=5).brokers  # within its 6 s session
        answers += [calls() for _ in range(3)]
    finally:
        result = healthy.cli("thaw", str(hung))
        assert result.returncode == 0, result.stderr
    assert answers == [(True, [], True)] * 4, answers
    assert listed, "the hung broker was fenced before the first calls ended: they did not face it"


def test_right_after_a_crash_the_lock_avoids_the_broker_and_no_look_waits_out_the_request_timeout(
        healthy: RunningSandbox) -> None:
    """A broker crashed (SIGKILL) stays in the Metadata until the active controller fences it
    (``broker.session.timeout.ms``), and a KRaft broker names a random broker it believes alive the controller
    (KIP-590), the crashed one included: librdkafka sends DescribeCluster there and waits. Within that window the lock
    topic is placed on brokers that answer (before: a replica on the crashed broker, its holder record's acks=all
    write waiting until the fencing), and each config-reading look of a fresh hook (a gate's first look) reads every
    config within a bound far below the 15 s request timeout it waited out up to three times (45 s, then failed).
    Topic DescribeConfigs go to the broker whose DescribeConfigs answered last: when they followed the controller the
    Metadata named, librdkafka's own Metadata refreshes named the crashed broker again and a look took 21 s and
    failed (CI, 2026-12-03)."""
    from hooks.kafka_admin import CONTROLLER_ANSWER_S
    from hooks.kafka_lock import KafkaLockStore
    from kafka_ops.profile import ClusterProfile

    confluent = admin(healthy.bootstrap_servers)
    crashed = 1
    result = healthy.cli("crash-broker", str(crashed))
    assert result.returncode == 0, result.stderr
    profile = ClusterProfile(cluster="kraft-sandbox", bootstrap_servers=healthy.bootstrap_servers)
    with KafkaLockStore(profile) as store:
        began = time.monotonic()
        replicas = store.placement()
        took_s = time.monotonic() - began
        listed = crashed in confluent.list_topics(timeout=5).brokers
    looks: list[tuple[float, str]] = []
    while crashed in confluent.list_topics(timeout=5).brokers and len(looks) < 6:
        hook = KafkaAdminHook(bootstrap_servers=healthy.bootstrap_servers, request_timeout_s=15, cache_configs=True)
        began = time.monotonic()
        try:
            hook.cluster_state(configs=True)
            outcome = "read"
        except KafkaException as exc:
            outcome = str(exc)
        looks.append((time.monotonic() - began, outcome))
    print(f"lock placed on {replicas} in {took_s:.2f} s (broker {crashed} listed after it: {listed}); looks {looks}")
    assert listed, "the placement ran while the crashed broker was still in the Metadata"
    assert sorted(replicas) == [0, 2], "RF 2 on the brokers that answer (3 brokers, one crashed)"
    bound_s = 2 * CONTROLLER_ANSWER_S + 3  # DescribeCluster twice, the broker defaults' second, topic configs
    assert looks and all(took <= bound_s for took, _ in looks), looks
    assert all(outcome == "read" for _, outcome in looks), looks


@pytest.mark.extended
def test_a_frozen_active_controller_loses_leadership_and_follows_when_thawed(healthy: RunningSandbox) -> None:
    """SIGSTOP on the active controller (its sockets stay open, it answers nothing): the other voters elect a
    leader once its fetch timeout passes (``controller.quorum.fetch.timeout.ms``, 2 s by default), and metadata
    changes go on: a topic is created through the brokers meanwhile, although only after their request to the
    frozen controller timed out (``controller.socket.timeout.ms``, 30 s: measured 30.3 s, the election itself
    took about 2 s). After SIGCONT the old leader learns the higher epoch and follows. A frozen broker is fenced
    after ``broker.session.timeout.ms`` and unfenced once thawed, without a restart."""
    client = KafkaAdminClient(bootstrap_servers=healthy.bootstrap_servers)
    before = quorum(client)
    leader, epoch = before["leader_id"], before["leader_epoch"]
    starts = healthy.starts([leader, 2])
    confluent = admin(healthy.bootstrap_servers)
    result = healthy.cli("freeze", str(leader))
    assert result.returncode == 0 and "frozen with SIGSTOP" in result.stderr, result.stderr
    try:
        name = f"kraft-while-frozen-{int(time.time())}"
        confluent.create_topics([NewTopic(name, 3, 3)], request_timeout=60)[name].result(70)
    finally:
        healthy.cli("thaw", str(leader))
    # thawed, the old leader follows the new one (a higher epoch) and catches up
    back = wait_for(lambda: (q := led_quorum(client)) and q["leader_id"] != leader and all(
        v["log_end_offset"] >= q["high_watermark"] for v in q["current_voters"] if v["replica_id"] == leader) and q,
        45, what=f"controller {leader} following a new leader")
    assert back["leader_epoch"] > epoch
    # every broker learns of the topic from the metadata log once it follows the new leader: poll, do not read once
    wait_for(lambda: name in confluent.list_topics(timeout=10).topics, 30, what=f"topic {name} in the metadata")

    first = healthy.broker(0)

    def registered() -> set[int] | None:
        """The brokers in broker 0's metadata (a fresh client asks its bootstrap broker first, never the frozen
        one), or None when the request timed out."""
        try:
            return set(admin(f"{first['host']}:{first['port']}").list_topics(timeout=5).brokers)
        except KafkaException:
            return None

    wait_for(lambda: registered() == {0, 1, 2}, 30, what="every broker unfenced")
    frozen_at = time.time()
    assert healthy.cli("freeze", "2").returncode == 0
    try:
        wait_for(lambda: (seen := registered()) is not None and 2 not in seen, 30, what="frozen broker 2 fenced")
        fenced_s = time.time() - frozen_at
    finally:
        healthy.cli("thaw", "2")
    wait_for(lambda: 2 in (registered() or ()), 30, what="broker 2 unfenced once thawed")
    assert settings.BROKER_SESSION_TIMEOUT_MS / 1000 - 1 <= fenced_s, fenced_s
    assert healthy.starts([leader, 2]) == starts, "a freeze restarts nothing: the same JVMs went on"
    client.close()


@pytest.mark.extended
def test_down_stops_the_brokers_cleanly_before_the_controllers(fresh_sandbox) -> None:
    """``sandbox down`` on a KRaft sandbox: every broker first, each by its controlled shutdown (no SIGKILL: the
    active controller is still there to answer it), then the controllers."""
    from sandbox.cluster import down
    from sandbox.layout import Workdir

    sandbox = fresh_sandbox(mode="kraft", controllers=3)
    sandbox.wait_healthy(timeout_s=120)
    stopped = [name for name in down(Workdir.at(sandbox.workdir), say=lambda _: None) if name.startswith("kafka-")]
    assert stopped == ["kafka-0", "kafka-1", "kafka-2", "kafka-100", "kafka-101", "kafka-102"], stopped
    for node in (0, 1, 2):
        assert "Beginning controlled shutdown" in sandbox.host_dir(node).server_log.read_text()
