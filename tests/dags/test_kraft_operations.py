"""Operations on a KRaft cluster (no ZooKeeper for Kafka): the rolling restart of 3 controllers and 6 brokers in
rack batches, the lock without ZooKeeper, and the metadata.version upgrade, each run with ``dag.test()`` against a
KRaft-mode sandbox (``sandbox up --mode kraft``) and judged from outside: DescribeQuorum polled by kafka-python,
metadata by confluent-kafka, acks=all traffic, and the nodes' own logs.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field, replace
from types import SimpleNamespace

import javaproperties
import pytest
from airflow_env import published_labels, run_dag, xcom_value
from batch_checks import assert_one_election_per_batch, batches_of
from kafka import KafkaAdminClient
from kraft_support import CONTROLLERS, LeadershipMover, assert_quorum_leader_stopped_last, leader_of, quorum_of
from observers import MetadataWatcher, admin, assert_no_acknowledged_message_lost, snapshot, wait_for
from timed_faults import FaultAfterTrigger, ThawOnceLogged

from sandbox.traffic_watch import watched_traffic

pytestmark = [pytest.mark.sandbox, pytest.mark.destructive]

FAST = {"healthcheck_interval_s": 1, "healthcheck_timeout_s": 120, "lag_ok_consecutive": 2}


@dataclass
class QuorumWatcher:
    """Polls DescribeQuorum every ``interval_s`` in a thread; keeps (epoch seconds, leader id or None, caught-up
    voters)."""

    bootstrap_servers: str
    interval_s: float = 0.25
    views: list[tuple[float, int | None, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        client = KafkaAdminClient(bootstrap_servers=self.bootstrap_servers, request_timeout_ms=3000)
        while not self._stop.is_set():
            try:
                q = client.describe_metadata_quorum()["topics"][0]["partitions"][0]
                leader = q["leader_id"] if q["leader_id"] >= 0 else None
                now_ms = time.time() * 1000
                caught = sum(1 for v in q["current_voters"]
                             if v["replica_id"] == leader or now_ms - v["last_caught_up_timestamp"] <= 2000 + 1000)
            except Exception:  # noqa: BLE001 - brokers restart during the roll
                leader, caught = None, 0
            self.views.append((time.time(), leader, caught))
            self._stop.wait(self.interval_s)
        client.close()

    def __enter__(self) -> QuorumWatcher:
        self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._stop.set()
        self._thread.join(15)

    def longest_leaderless_s(self) -> float:
        longest, since = 0.0, None
        for at, leader, _ in self.views:
            if leader is None and since is None:
                since = at
            elif leader is not None and since is not None:
                longest, since = max(longest, at - since), None
        return longest

    def leaders(self) -> list[int]:
        """The leaders seen, in order, without repeats."""
        seen: list[int] = []
        for _, leader, _ in self.views:
            if leader is not None and (not seen or seen[-1] != leader):
                seen.append(leader)
        return seen


def starts(sandbox, node: int, role: str) -> int:
    """How often Kafka logged that node ``node`` started (``role`` names it in messages only)."""
    return sandbox.starts([node])[node]








def voter_set(sandbox) -> dict[int, str]:
    """Kafka's own judge of the voter set: ``kafka-metadata-quorum describe --status``'s CurrentVoters, node id ->
    directory id (KIP-853: a dynamic quorum's voter is its id and its metadata log directory's id)."""
    result = sandbox.kafka_tool("kafka-metadata-quorum.sh", "--bootstrap-server", sandbox.bootstrap_servers,
                                "describe", "--status")
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith("CurrentVoters:"))
    return {int(v["id"]): v["directoryId"] for v in json.loads(line.split(":", 1)[1])}


def test_rolling_restart_on_kraft_rolls_controllers_then_a_rack_of_brokers_at_a_time(fresh_sandbox, use_sandbox,
                                                                                      capfd, caplog):
    """The whole KRaft roll, batched as a large fleet runs it, on a dynamic quorum as Kafka 4's quickstart formats
    one (Kafka 4.1, KIP-853: ``controller.quorum.bootstrap.servers``, the voter set in the metadata log; 3 voters and
    a controller 103 started but not added to the voter set, an observer; 6 brokers in 3 racks, RF 3,
    min.insync.replicas 2; ``max_parallel`` 6, ``batch_by=rack``): the controllers one at a time, the observer first
    and the active one last, then the brokers of one rack together, one batch per rack, none
    moved last for the Metadata answer's controller id (a random broker in KRaft mode). From outside: the quorum
    never lost for more than an election and its leader moved once, its voter set (ids and directory ids, by Kafka's
    own ``kafka-metadata-quorum``) unchanged, no partition offline or under min ISR, every node started exactly
    once, every acknowledged message read back, one preferred-leader election per batch. A refused plan first
    touches nothing, nor does a controller roll while a broker is down (its gate holds on the URPs). (The static
    quorum, ``controller.quorum.voters``, is the ``kraft`` fixture's, which the other KRaft tests roll.)"""
    from sandbox import settings, state
    from sandbox.layout import Workdir

    kraft = fresh_sandbox(mode="kraft", controllers=3, brokers=6, racks=3, kafka_version="4.1.0", quorum="dynamic",
                          observer_controllers=1)
    watcher_id = 103  # the controller that is an observer
    use_sandbox(kraft.workdir)
    kraft.wait_healthy(timeout_s=120)
    # the quorum is dynamic: no node's file lists the voters; Kafka formed it from the storage format's voters
    files = [kraft.host_dir(n).server_properties.read_text()
             for n in CONTROLLERS + [watcher_id] + sorted(kraft.broker_ids)]
    assert all("controller.quorum.voters" not in f and "controller.quorum.bootstrap.servers" in f for f in files)
    formatted = {int(k): v for k, v in state.load(Workdir.at(kraft.workdir)).directory_ids.items()}
    voters_before = voter_set(kraft)
    assert voters_before == formatted and sorted(voters_before) == CONTROLLERS, (voters_before, formatted)
    brokers = sorted(kraft.broker_ids)
    racks = {b: kraft.broker(b)["rack"] for b in brokers}
    assert len(brokers) == 6 and len(set(racks.values())) == 3, racks
    nodes = CONTROLLERS + [watcher_id] + brokers
    before = kraft.starts(nodes)
    # the brokers' plan runs beside the controllers' (and the preflight), before any node is touched: a broker
    # roll that would be refused stops the run before a controller restarts
    refused = run_dag("kafka_rolling_restart", {"cluster": "kafka_sandbox", "brokers": [0, 77], **FAST})
    assert refused.state == "failed" and refused.state_of("restart.plan") == "failed", refused.states
    assert refused.state_of("controllers.plan") == "success"
    assert "unknown broker ids [77]" in capfd.readouterr().out + caplog.text
    assert kraft.starts(nodes) == before, "nothing was restarted"
    # a broker down (stopped by someone else) holds the controllers' gates too, the quorum being fine: the run
    # stops before a controller is touched and names the under-replicated partitions
    code, out, err = kraft.ssh(brokers[-1], "kafka-service stop")
    assert code == 0, (out, err)
    wait_for(lambda: snapshot(admin(kraft.bootstrap_servers)).under_replicated, 30, what="URP after the stop")
    held = run_dag("kafka_rolling_restart", {"cluster": "kafka_sandbox", "roles": "controllers", **FAST,
                                             "healthcheck_timeout_s": 10})
    text = capfd.readouterr().out + caplog.text
    assert held.state == "failed" and held.state_of("controllers.controller", 0) == "failed", held.states
    assert f"waiting until controller {watcher_id} may be stopped: partitions before controller {watcher_id}: " \
           f"urp (" in text and f"(missing [{brokers[-1]}])" in text
    assert kraft.starts(nodes) == before, "no controller was restarted while the cluster was degraded"
    code, out, err = kraft.ssh(brokers[-1], "kafka-service start")
    assert code == 0, (out, err)
    kraft.wait_healthy(timeout_s=120)
    before = kraft.starts(nodes)
    began, roll_began = time.monotonic(), time.time()
    with watched_traffic(kraft.workdir, kraft.bootstrap_servers, brokers) as traffic, \
            MetadataWatcher(kraft.bootstrap_servers, interval_s=0.25) as watcher, \
            QuorumWatcher(kraft.bootstrap_servers) as quorum:
        result = run_dag("kafka_rolling_restart", {"cluster": "kafka_sandbox", "max_parallel": 6, "batch_by": "rack",
                                                   **FAST})
    wall_s = time.monotonic() - began
    text = capfd.readouterr().out + caplog.text
    labels = result.mapped_labels("restart.broker")
    print(f"KRaft roll of 3 controllers + 6 brokers in {labels}: {wall_s:.1f} s; {traffic.summary()}")
    t0 = min(ti.start_date for ti in result.task_instances if ti.start_date)
    print("timeline (s from the first task's start, duration s): " + ", ".join(
        f"{ti.task_id}[{ti.map_index}] {(ti.start_date - t0).total_seconds():.1f}+"
        f"{(ti.end_date - ti.start_date).total_seconds():.1f}"
        for ti in sorted(result.task_instances, key=lambda ti: ti.start_date or t0) if ti.start_date and ti.end_date))
    assert result.state == "success", result.states
    assert_no_acknowledged_message_lost(traffic)
    after = kraft.starts(nodes)
    assert {n: after[n] - before[n] for n in nodes} == {n: 1 for n in nodes}, "every node started exactly once"
    # controllers one at a time, the active controller last; then the brokers
    order = [int(label.split()[1]) for label in result.mapped_labels("controllers.controller")]
    assert order[0] == watcher_id and sorted(order[1:]) == CONTROLLERS, order
    assert kraft.shutdown_order(CONTROLLERS + [watcher_id]) == order
    assert result.mapped_labels("controllers.controller")[0].startswith(f"controller {watcher_id} (1/4) · observer")
    assert result.mapped_labels("controllers.controller")[-1].startswith(f"controller {order[-1]} (4/4)")
    assert f"controller {watcher_id} is an observer, not a voter: its stop leaves the quorum's majority" in text
    # the brokers a rack at a time
    batches = batches_of(labels)
    assert sorted(b for batch in batches for b in batch) == brokers, labels
    assert all(len({racks[b] for b in batch}) == 1 for batch in batches), f"a batch mixed racks: {labels}"
    assert sorted(len(batch) for batch in batches) == [2, 2, 2], f"one batch per rack: {labels}"
    assert "no broker is moved last for it" in text, "KRaft: the Metadata answer's controller id is not followed"
    assert "it is the controller" not in text, "KRaft: no broker is treated as the controller"
    assert_one_election_per_batch(batches, text)
    # the labels the instances waited under (given by the scheduler from the plans) are the ones they ran under
    assert published_labels("kafka_rolling_restart", result.run_id) == {
        "controllers.controller": result.mapped_labels("controllers.controller"), "restart.broker": labels}
    last_controller_end = max(ti.end_date for ti in result.task_instances if ti.task_id == "controllers.controller")
    first_broker_start = min(ti.start_date for ti in result.task_instances if ti.task_id == "restart.broker")
    assert first_broker_start >= last_controller_end, "brokers roll after the controllers"
    # the quorum was never lost: a leader at (almost) every poll, leaderless only for the elections
    assert quorum.views and quorum.longest_leaderless_s() < 4.0, quorum.longest_leaderless_s()
    # the roll moved leadership once at most: only the active controller, stopped last, led the quorum when it
    # stopped (restarted followers rejoin without an election, KIP-996 pre-vote), by each controller's own log; an
    # election Kafka held on its own, with no stop, is printed, not counted (the quorum never lost beyond one, above)
    print(f"quorum leaders seen: {quorum.leaders()}")
    assert_quorum_leader_stopped_last(kraft, order[1:], roll_began)  # the voters (103 is an observer)
    assert watcher.ever_offline() == [], "no partition offline during the roll"
    assert watcher.ever_under_min_isr(settings.MIN_INSYNC_REPLICAS) == [], "no partition went under min ISR"
    end = snapshot(admin(kraft.bootstrap_servers))
    assert end.under_replicated == [] and end.offline == []
    assert "KRaft cluster" in text, "the plan says which path it takes"
    assert "cluster kafka_sandbox: KRaft mode (metadata quorum leader" in text, "the lock step says the mode"
    # the mode was decided once, under the lock, and the preflight asked every node's host: controllers too
    assert xcom_value("kafka_rolling_restart", result.run_id, "check_and_lock", "cluster_mode") == "kraft"
    assert xcom_value("kafka_rolling_restart", result.run_id, "preflight") == {"hosts": 10, "problems": {}}
    # a restart keeps each voter's metadata log: the same voters, with the same directory ids; 103 is still an observer
    assert voter_set(kraft) == voters_before
    assert quorum_of(kraft).observer(watcher_id) is not None, f"controller {watcher_id} is still an observer"

    # a run that names nodes of one kind only (roles left at all) restarts only those: broker brokers[0] alone, no
    # controller bounced; then one follower controller alone, no broker (before, naming brokers rolled every
    # controller too)
    follower = next(c for c in CONTROLLERS if c != quorum_of(kraft).leader_id)
    for conf, touched, says in [
            ({"brokers": [brokers[0]]}, brokers[0],
             f"roles=all with brokers [{brokers[0]}] named and no controllers: those brokers only"),
            ({"controllers": [follower]}, follower,
             f"roles=all with controllers [{follower}] named and no brokers: those controllers only (the quorum "
             f"leader last), no broker restarted: roll 'restart' restarts no broker")]:
        before = kraft.starts(nodes)
        one = run_dag("kafka_rolling_restart", {"cluster": "kafka_sandbox", **conf, **FAST})
        text = capfd.readouterr().out + caplog.text
        assert one.state == "success", one.states
        after = kraft.starts(nodes)
        assert {n: after[n] - before[n] for n in nodes} == {n: int(n == touched) for n in nodes}, (conf, text[-3000:])
        assert says in text, (conf, text[-3000:])
        assert xcom_value("kafka_rolling_restart", one.run_id, "preflight") == {"hosts": 1, "problems": {}}, \
            "the preflight asks only the host of the node the run restarts"


@pytest.mark.extended
def test_combined_nodes_roll_with_the_brokers_one_voter_at_a_time_the_quorum_leader_last(fresh_sandbox, use_sandbox,
                                                                                         capfd, caplog):
    """Kafka 4.0 in combined mode, as its quickstart config runs it: brokers 0-2 are the quorum's voters too
    (``process.roles=broker,controller``), broker 3 is a broker only, in 2 racks. Asked to roll the controllers
    alone, or to decommission a combined node, the run refuses before anything is touched (Kafka's own logs: no
    node started again; replica sets unchanged). A rolling restart of every role, batched by rack, restarts every
    node exactly once, in the broker roll (the controller roll has no dedicated controller): never two voters in a
    batch, the quorum leader last, so leadership moves once; the quorum never lost for more than an election;
    nothing offline or under min ISR; every acknowledged message read back. Then a voter crashes: a roll of another
    voter holds at its gate, naming the quorum, and touches nothing."""
    from sandbox import settings

    sandbox = fresh_sandbox(mode="kraft", combined=3, brokers=4, racks=2)
    use_sandbox(sandbox.workdir)
    sandbox.wait_healthy(timeout_s=120)
    nodes, voters = [0, 1, 2, 3], {0, 1, 2}
    before = sandbox.starts(nodes)
    replicas = {(p.topic, p.partition): p.replicas for p in snapshot(admin(sandbox.bootstrap_servers)).partitions}
    first_leader = leader_of(sandbox)
    assert first_leader in voters, "a combined node leads the quorum"

    refused = run_dag("kafka_rolling_restart", {"cluster": "kafka_sandbox", "roles": "controllers", **FAST})
    assert refused.state == "failed" and refused.state_of("controllers.plan") == "failed", refused.states
    text = capfd.readouterr().out + caplog.text
    assert "nodes [0, 1, 2] are KRaft controllers (voters of the metadata quorum [0, 1, 2]" in text
    assert "they roll with the brokers" in text
    refused = run_dag("kafka_decommission", {"cluster": "kafka_sandbox", "brokers": [2], "healthcheck_interval_s": 1})
    assert refused.state == "failed" and refused.state_of("validate") == "failed", refused.states
    assert "brokers [2] are voters of the KRaft metadata quorum [0, 1, 2] too" in capfd.readouterr().out + caplog.text
    after = {(p.topic, p.partition): p.replicas for p in snapshot(admin(sandbox.bootstrap_servers)).partitions}
    assert {k: after.get(k) for k in replicas} == replicas, "nothing moved (the lock topic is new, not moved)"
    assert sandbox.starts(nodes) == before, "nothing restarted"

    roll_began = time.time()
    with watched_traffic(sandbox.workdir, sandbox.bootstrap_servers, nodes) as traffic, \
            MetadataWatcher(sandbox.bootstrap_servers, interval_s=0.25) as watcher, \
            QuorumWatcher(sandbox.bootstrap_servers) as quorum:
        rolled = run_dag("kafka_rolling_restart", {"cluster": "kafka_sandbox", "max_parallel": 4, "batch_by": "rack",
                                                   **FAST})
    text = capfd.readouterr().out + caplog.text
    labels = rolled.mapped_labels("restart.broker")
    print(f"combined-mode roll in {labels}; quorum leaders {quorum.leaders()}; {traffic.summary()}")
    print("\n".join(line[:300] for line in text.splitlines() if "quorum" in line and "broker" in line)[-4000:])
    assert rolled.state == "success", rolled.states
    assert {n: sandbox.starts(nodes)[n] - before[n] for n in nodes} == {n: 1 for n in nodes}, "each started once"
    assert "every voter is a combined node: no dedicated controller to restart" in text
    batches = batches_of(labels)
    assert sorted(b for batch in batches for b in batch) == nodes, labels
    assert all(len(voters & set(batch)) <= 1 for batch in batches), f"two voters in a batch: {labels}"
    assert all(len({b % 2 for b in batch}) == 1 for batch in batches), f"a batch mixed racks: {labels}"
    voters_in_order = [n for batch in batches for n in batch if n in voters]
    # the roll moved leadership once at most: of the voters, only the quorum leader, stopped last, led when it
    # stopped (each voter's own log; Kafka may move leadership itself on a loaded machine, and the roll then puts
    # the new leader last)
    assert_quorum_leader_stopped_last(sandbox, voters_in_order, roll_began)
    assert quorum.views and quorum.longest_leaderless_s() < 6.0, quorum.longest_leaderless_s()
    for voter in voters:
        assert f"broker {voter} (a quorum voter too) is back in the quorum and caught up: yes" in text, voter
    # the preflight asked each node's host once: a combined node is asked as a broker, not again as a controller
    assert xcom_value("kafka_rolling_restart", rolled.run_id, "preflight") == {"hosts": 4, "problems": {}}
    assert watcher.ever_offline() == [], watcher.explain_offline(sandbox)
    assert watcher.ever_under_min_isr(settings.MIN_INSYNC_REPLICAS) == [], "no partition went under min ISR"
    assert_no_acknowledged_message_lost(traffic)

    # a fault: voter 2 crashes (SIGKILL); a roll of the follower voter left must not stop it, since the quorum would
    # keep one caught-up voter of 3: its gate names the quorum (besides broker 2's URPs) until its timeout
    began = time.monotonic()
    crashed = sandbox.cli("crash-broker", "2")
    assert crashed.returncode == 0, crashed.stderr

    def leader_left() -> tuple[int] | None:
        try:
            leader = leader_of(sandbox)
        except Exception:  # noqa: BLE001 - an election under way
            return None
        return (leader,) if leader in (0, 1) else None

    (leader,) = wait_for(leader_left, 30, what="a quorum leader among the voters left")
    target = 1 - leader  # the other voter left: a follower, whose stop would leave one caught-up voter of 3
    elected_s = time.monotonic() - began
    before = sandbox.starts(nodes)
    held = run_dag("kafka_rolling_restart", {"cluster": "kafka_sandbox", "roles": "brokers", "brokers": [target],
                                             "consumer_groups": None, "healthcheck_interval_s": 2,
                                             "healthcheck_timeout_s": 15})
    text = capfd.readouterr().out + caplog.text
    tasks = ", ".join(f"{ti.task_id}[{ti.map_index}] {ti.state} {(ti.end_date - ti.start_date).total_seconds():.1f} s"
                      for ti in held.task_instances if ti.start_date and ti.end_date)
    print(f"voter 2 crashed; quorum leader {leader} {elected_s:.1f} s later; held run: {tasks}")
    gate_lines = "\n".join(line[:400] for line in text.splitlines()
                           if f"broker {target} may" in line or "could not check" in line or "gave up" in line)
    assert held.state == "failed" and held.mapped_states("restart.broker") == ["failed"], held.states
    assert f"broker {target} may not be stopped yet" in text, gate_lines
    assert f"quorum without controller {target} (" in text and "without it 1 of 3 voters caught up (needs 2" in text
    assert "lagging: 2 (" in text, "the gate names the crashed voter"
    assert sandbox.starts(nodes) == before, f"broker {target} was not touched"
    assert target in admin(sandbox.bootstrap_servers).list_topics(timeout=10).brokers


@pytest.mark.extended
def test_a_combined_node_that_becomes_the_quorum_leader_mid_roll_goes_last(fresh_sandbox, use_sandbox, capfd, caplog):
    """Combined mode (brokers 0-2 are the quorum's voters too), one broker at a time: the plan puts the quorum leader
    last; while the first broker soaks, Kafka's own elections (the leader frozen until the other voters elect one,
    then thawed, until the voter planned second leads) move the leadership onto a voter still to go. At that voter's
    turn (or at its gate, if it leads only then) the roll reads DescribeQuorum again and its batch goes last: the
    voter that led when the roll reached it is restarted last, as a follower none but the last stopped while leading
    (each voter's own log), each broker started exactly once, nothing offline, no acknowledged message lost."""
    sandbox = fresh_sandbox(mode="kraft", combined=3, brokers=3)
    use_sandbox(sandbox.workdir)
    sandbox.wait_healthy(timeout_s=120)
    nodes = [0, 1, 2]
    before = sandbox.starts(nodes)
    leader = leader_of(sandbox)
    first, onto = (n for n in nodes if n != leader)  # the plan: by id, the leader last
    roll_began = time.time()
    with watched_traffic(sandbox.workdir, sandbox.bootstrap_servers, nodes) as traffic, \
            MetadataWatcher(sandbox.bootstrap_servers, interval_s=0.5) as watcher, \
            LeadershipMover(sandbox, onto, capfd, caplog, when=f"broker {first}: soaking", timeout_s=24) as mover:
        # the first broker's soak (30 s) holds the roll while the leadership moves (a few elections of 3-5 s each, and
        # the frozen node back in the metadata): a turn that found a node frozen and fenced would fail the roll on a
        # broker it did not stop
        rolled = run_dag("kafka_rolling_restart", {"cluster": "kafka_sandbox", "roles": "brokers", "soak_s": 30,
                                                   "consumer_groups": None, **FAST})
    text = mover.output + capfd.readouterr().out + caplog.text
    labels = rolled.mapped_labels("restart.broker")
    print(f"planned {[first, onto, leader]}; leaders while moving: {mover.moves}; rolled {labels}; "
          f"{traffic.summary()}")
    print("\n".join(line[:600] for line in text.splitlines()
                    if "quorum leader" in line or "rror" in line or "fail" in line)[-6000:])
    assert mover.done, f"Kafka's elections never gave voter {onto} the leadership: {mover.moves}"
    assert rolled.state == "success", rolled.states
    order = [b for batch in batches_of(labels) for b in batch]
    assert order == [first, leader, onto], f"the voter that became the leader went last: {labels}"
    assert f"broker {onto} is the quorum leader now and voters [{leader}] of this roll are still to go" in text or \
        f"broker {onto} became the quorum leader (the active controller) and voters [{leader}]" in text
    assert_quorum_leader_stopped_last(sandbox, order, roll_began)
    assert {n: sandbox.starts(nodes)[n] - before[n] for n in nodes} == dict.fromkeys(nodes, 1), "each started once"
    assert watcher.ever_offline() == [], watcher.explain_offline(sandbox)
    assert_no_acknowledged_message_lost(traffic)


@pytest.mark.extended
def test_a_voter_whose_disk_was_replaced_holds_the_rolls_and_is_named_with_its_remedy(fresh_sandbox, use_sandbox,
                                                                                       capfd, caplog):
    """A dynamic quorum (Kafka 4.1.0, KIP-853) where a follower voter's disk is replaced (``sandbox
    replace-metadata-dir``: its log dir formatted again, a new directory id). It comes back fetching as an observer
    while the voter it was stays silent. A roll of the other follower holds at its gate, naming it among the lagging
    ("its metadata log directory was replaced"), and touches nothing; a roll of it restarts it once and stops at
    "back", naming both directory ids and the commands that put it back; those commands, run with Kafka's own tool,
    do (the voter set has it again, under its new directory id)."""
    kraft = fresh_sandbox(mode="kraft", controllers=3, brokers=3, racks=3, kafka_version="4.1.0", quorum="dynamic")
    use_sandbox(kraft.workdir)
    kraft.wait_healthy(timeout_s=120)
    nodes = CONTROLLERS + sorted(kraft.broker_ids)
    voters_before = voter_set(kraft)
    leader = leader_of(kraft)
    victim = next(c for c in CONTROLLERS if c != leader)
    replaced = kraft.cli("replace-metadata-dir", str(victim))
    assert replaced.returncode == 0, replaced.stderr
    meta = (kraft.host_dir(victim).data / "meta.properties").read_text()
    new_id = next(line.split("=", 1)[1] for line in meta.splitlines() if line.startswith("directory.id="))
    assert new_id != voters_before[victim]
    listeners = javaproperties.loads(kraft.host_dir(leader).server_properties.read_text())["listeners"]
    bootstrap_controller = listeners.removeprefix("CONTROLLER://")  # the active controller's listener

    def observer_ids() -> dict[int, str]:
        result = kraft.kafka_tool("kafka-metadata-quorum.sh", "--bootstrap-server", kraft.bootstrap_servers,
                                  "describe", "--status")
        line = next(line for line in result.stdout.splitlines() if line.startswith("CurrentObservers:"))
        return {int(o["id"]): o["directoryId"] for o in json.loads(line.split(":", 1)[1])}

    wait_for(lambda: observer_ids().get(victim) == new_id, 60, what=f"controller {victim} fetching as an observer")
    # the quorum is down to 2 voters that fetch: the other follower may not stop, and its gate says why
    other = next(c for c in CONTROLLERS if c not in (leader, victim))
    before = kraft.starts(nodes)
    gated = run_dag("kafka_rolling_restart", {"cluster": "kafka_sandbox", "roles": "controllers",
                                              "controllers": [other], "healthcheck_interval_s": 1,
                                              "healthcheck_timeout_s": 10})
    text = capfd.readouterr().out + caplog.text
    assert gated.state == "failed" and gated.mapped_states("controllers.controller") == ["failed"], gated.states
    assert kraft.starts(nodes) == before, f"controller {other} was not touched"
    lagging = next(line for line in text.splitlines() if f"lagging: {victim} (" in line)
    assert (f"its metadata log directory was replaced: it fetches as an observer under directory id {new_id}, the "
            f"voter set has {voters_before[victim]}") in lagging, lagging
    held = run_dag("kafka_rolling_restart", {"cluster": "kafka_sandbox", "roles": "controllers",
                                             "controllers": [victim], "healthcheck_interval_s": 1,
                                             "healthcheck_timeout_s": 15})
    text = capfd.readouterr().out + caplog.text
    assert held.state == "failed" and held.mapped_states("controllers.controller") == ["failed"], held.states
    assert {n: kraft.starts(nodes)[n] - before[n] for n in nodes} == {n: int(n == victim) for n in nodes}
    assert (f"controller {victim} fetches again, but as an observer with a new metadata log directory (directory id "
            f"{new_id}; the voter set has {voters_before[victim]})") in text
    assert voter_set(kraft) == voters_before, "the voter set still has the old directory id"
    # the remedy the message names, with Kafka's own tool: the voter with the old directory id out, the node in
    removed = kraft.kafka_tool("kafka-metadata-quorum.sh", "--bootstrap-controller", bootstrap_controller,
                               "remove-controller", "--controller-id", str(victim),
                               "--controller-directory-id", voters_before[victim])
    assert removed.returncode == 0, removed.stderr
    added = kraft.kafka_tool("kafka-metadata-quorum.sh", "--command-config",
                             str(kraft.host_dir(victim).server_properties), "--bootstrap-controller",
                             bootstrap_controller, "add-controller")
    assert added.returncode == 0, added.stderr
    wait_for(lambda: voter_set(kraft) == {**voters_before, victim: new_id} or None, 60,
             what=f"voter {victim} back with its new directory id")


@pytest.mark.extended
def test_the_lock_without_zookeeper_makes_a_second_run_wait_or_fail(kraft, capfd, caplog):
    """Another operation holds the cluster (its lock is the lock topic in the cluster, named holder): a run with
    lock_wait=fail fails at once naming it; a run with lock_wait=wait waits until it is released, then rolls."""
    from hooks.cluster_profile import get_cluster_profile
    from hooks.kafka_lock import KafkaLockStore

    profile = get_cluster_profile("kafka_sandbox")
    assert profile.lock_in == "kafka"
    other = "kafka_upgrade/manual__other-run"
    with KafkaLockStore(profile) as store:
        assert store.try_acquire(other, "upgrade") is None, "the lock was free"
    try:
        failed = run_dag("kafka_rolling_restart", {"cluster": "kafka_sandbox", "lock_wait": "fail",
                                                   "roles": "brokers", **FAST})
        assert failed.state == "failed" and failed.state_of("check_and_lock") == "failed", failed.states
        assert other in capfd.readouterr().out + caplog.text
        release_after_s = 12.0

        def release() -> None:
            time.sleep(release_after_s)
            with KafkaLockStore(profile) as store:
                store.release(other)

        releaser = threading.Thread(target=release, daemon=True)
        began = time.monotonic()
        releaser.start()
        waited = run_dag("kafka_rolling_restart", {"cluster": "kafka_sandbox", "lock_wait": "wait",
                                                   "roles": "brokers", "brokers": [0], **FAST})
        releaser.join(30)
    finally:
        with KafkaLockStore(profile) as store:
            store.release(other)
    assert waited.state == "success", waited.states
    lock_ti = next(ti for ti in waited.task_instances if ti.task_id == "check_and_lock")
    assert (lock_ti.end_date - lock_ti.start_date).total_seconds() >= release_after_s - 3
    assert time.monotonic() - began >= release_after_s
    assert waited.mapped_labels("controllers.controller") == [], "roles=brokers restarts no controller"
    with KafkaLockStore(profile) as store:
        wait_for(lambda: store.current_holder(wait_s=1) is None, 30, what="the lock released by the run")


@pytest.mark.extended
def test_a_quorum_without_a_leader_holds_the_broker_gate_until_it_has_one_again(kraft, capfd, caplog):
    """Two of the three controllers frozen (SIGSTOP) mid-roll, while the first broker soaks: the quorum has no leader,
    yet the brokers keep their metadata (nothing can change it), so the cluster still looks healthy and every broker
    answers; but a broker stopped now could not register again (it exits after
    ``initial.broker.registration.timeout.ms``) and no controller could move its leaders: its partitions would be
    unavailable for the outage. The second broker's gate holds, naming the missing quorum leader, and that broker is
    stopped only after the controllers are thawed (once the gate named it); each broker restarted exactly once."""
    brokers = [0, 1]
    leader = leader_of(kraft)
    frozen = [leader, next(c for c in CONTROLLERS if c != leader)]

    def freeze() -> None:
        for c in frozen:
            done = kraft.cli("freeze", str(c))
            assert done.returncode == 0, done.stderr

    def thaw() -> None:
        for c in frozen:
            done = kraft.cli("thaw", str(c))
            assert done.returncode == 0, done.stderr

    named = "a node stopped now could not register when started again"
    before = {b: starts(kraft, b, "broker") for b in kraft.broker_ids}
    with ThawOnceLogged(capfd, caplog, named, thaw, 90, settle_s=1, freeze=("soaking", freeze)) as thawing:
        result = run_dag("kafka_rolling_restart", {"cluster": "kafka_sandbox", "roles": "brokers", "brokers": brokers,
                                                   "soak_s": 2, "consumer_groups": None, **FAST})
    out = thawing.output + capfd.readouterr().out + caplog.text
    assert result.state == "success", result.states
    assert thawing.frozen_at is not None and thawing.thawed_at is not None, "the controllers were frozen and thawed"
    assert "registers-with" in out and "quorum" in out and named in out, "the gate named the missing quorum leader"
    second = [int(label.split()[1]) for label in result.mapped_labels("restart.broker")][1]
    stopped_at = kraft.shutdown_times(second)[-1]
    assert stopped_at > thawing.thawed_at, \
        f"broker {second} was stopped {thawing.thawed_at - stopped_at:.1f} s before the quorum had a leader again"
    assert {b: starts(kraft, b, "broker") - before[b] for b in kraft.broker_ids} == \
        {b: int(b in brokers) for b in kraft.broker_ids}


@pytest.mark.extended
def test_quorum_leader_frozen_40_s_right_after_a_broker_stop_is_ridden_out(kraft, monkeypatch, tmp_path, capfd,
                                                                           caplog):
    """The active controller (quorum leader) frozen (SIGSTOP) for 40 s right after the first broker stopped: the
    other voters elect a leader; the run waits until a quorum leader answers before it starts the broker (a KRaft
    broker that cannot register exits after initial.broker.registration.timeout.ms) and the roll ends: every
    broker started exactly once, nothing offline, no acknowledged message lost."""
    import json
    import os

    brokers = [0, 1, 2]
    trigger = tmp_path / "stopped"
    conn = json.loads(os.environ["AIRFLOW_CONN_KAFKA_SANDBOX"])
    conn["extra"] = {**conn["extra"], "commands": {"stop-then-mark": f"kafka-service stop && touch {trigger}"}}
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_SANDBOX", json.dumps(conn))
    frozen: list[int] = []

    def freeze_leader() -> None:
        frozen.append(leader_of(kraft))
        done = kraft.cli("freeze", str(frozen[0]))
        assert done.returncode == 0, done.stderr

    def thaw_leader() -> None:
        done = kraft.cli("thaw", str(frozen[0]))
        assert done.returncode == 0, done.stderr

    before = {b: starts(kraft, b, "broker") for b in brokers}
    began = time.monotonic()
    with watched_traffic(kraft.workdir, kraft.bootstrap_servers, brokers) as traffic, \
            MetadataWatcher(kraft.bootstrap_servers, interval_s=0.5) as watcher, \
            FaultAfterTrigger(trigger, freeze_leader, thaw_leader, hold_s=40) as fault:
        result = run_dag("kafka_rolling_restart", {"cluster": "kafka_sandbox", "roles": "brokers",
                                                   "stop_command": "stop-then-mark", **FAST})
    took = time.monotonic() - began
    print(f"KRaft broker roll, quorum leader {frozen} frozen {fault.held_s} s after the first stop: {took:.1f} s; "
          f"{traffic.summary()}")
    assert fault.held_s is not None and fault.held_s >= 39, "the quorum leader was frozen 40 s during the run"
    assert result.state == "success", result.states
    assert {b: starts(kraft, b, "broker") - before[b] for b in brokers} == dict.fromkeys(brokers, 1)
    assert_no_acknowledged_message_lost(traffic)
    assert watcher.ever_offline() == [], "no partition offline"
    text = capfd.readouterr().out + caplog.text
    assert "the KRaft quorum leader answers before starting broker" in text, "the start waited for a leader"


def assert_the_listener_wants_a_client_certificate(sandbox) -> None:
    """The client listener refuses a client that trusts the CA but shows no certificate (Kafka's own log line names
    the failed TLS handshake) and accepts the connection's client certificate (both of the product's clients)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient
    from hooks.cluster_profile import get_cluster_profile
    from kafka import KafkaAdminClient as PythonAdmin

    listener = sandbox.env["client_listener"]
    first = listener["bootstrap_servers"].split(",")[0]
    broker = next(b for b in sandbox.broker_ids if sandbox.broker(b)["host"] == first.rsplit(":", 1)[0])

    def handshakes_failed() -> int:
        return sandbox.host_dir(broker).server_log.read_text().count("SSL handshake failed")

    before = handshakes_failed()
    anonymous = AdminClient({"bootstrap.servers": first, "security.protocol": "SSL", "ssl.ca.location":
                             listener["ca_file"], "log_level": 0})
    with pytest.raises(KafkaException):
        anonymous.list_topics(timeout=5)
    wait_for(lambda: handshakes_failed() > before, 15, what=f"broker {broker}'s log naming the refused handshake")
    profile = get_cluster_profile("kafka_sandbox")  # the connection, as the operators read it
    assert profile.confluent_config()["ssl.certificate.location"].endswith("client.pem")
    assert len(AdminClient(profile.confluent_config()).list_topics(timeout=10).brokers) == 5
    python = PythonAdmin(**profile.kafka_python_config())
    try:
        assert len(python.describe_cluster()["brokers"]) == 5
    finally:
        python.close()


def test_decommission_on_kraft_drains_stops_and_unregisters_the_broker(fresh_sandbox, use_sandbox, monkeypatch, capfd,
                                                                       caplog):
    """The reassignment path of a KRaft cluster: AlterPartitionReassignments and the throttle configs go to
    brokers, which forward to the active controller; the lock is the lock topic; the broker is stopped, then
    unregistered (a stopped KRaft broker stays registered, fenced, and the controller would refuse a later
    metadata.version for it). Then a broker drained with ``stop_brokers: false`` and stopped by hand (fenced, still
    registered: how a cluster decommissioned before looks) makes the upgrade refuse before anything is touched,
    named with the remedy, and a second decommission of it removes the registration."""
    from confluent_kafka.admin import ConfigResource, ResourceType

    # the connection uses a mutual-TLS listener (the sandbox's own CA; ssl.client.auth=required, the connection's
    # client certificate): the snapshot, the reassignment, the throttles and the unregistration go through it
    sandbox = fresh_sandbox(mode="kraft", controllers=3, brokers=5, racks=2, client_tls=True, client_auth=True)
    use_sandbox(sandbox.workdir)
    sandbox.wait_healthy(timeout_s=120)
    assert_the_listener_wants_a_client_certificate(sandbox)
    with watched_traffic(sandbox.workdir, sandbox.bootstrap_servers, [0, 1, 2, 3, 4]) as traffic, \
            MetadataWatcher(sandbox.bootstrap_servers, interval_s=0.5) as watcher:
        result = run_dag("kafka_decommission", {"cluster": "kafka_sandbox", "brokers": [2],
                                                "throttle_bytes_per_s": 200_000_000, "healthcheck_interval_s": 2,
                                                "healthcheck_timeout_s": 180, "verify_interval_s": 2})
    print(traffic.summary())
    assert result.state == "success", result.states
    assert_no_acknowledged_message_lost(traffic)
    after = snapshot(admin(sandbox.bootstrap_servers))
    assert all(2 not in p.replicas for p in after.partitions), "broker 2 holds nothing"
    assert 2 not in admin(sandbox.bootstrap_servers).list_topics(timeout=10).brokers, "broker 2 stopped (fenced)"
    assert after.under_replicated == [] and after.offline == [] and watcher.ever_offline() == []
    client = admin(sandbox.bootstrap_servers)
    left = {}
    for broker in (0, 1, 3, 4):
        configs = client.describe_configs([ConfigResource(ResourceType.BROKER, str(broker))])
        for resource, future in configs.items():
            throttles = {k: v.value for k, v in future.result().items() if "throttled.rate" in k
                         and not v.is_default and v.value not in ("", None, "9223372036854775807")}
            if throttles:
                left[resource.name] = throttles
    assert left == {}, f"throttles left behind: {left}"
    text = capfd.readouterr().out + caplog.text
    assert "through ZooKeeper" not in text
    assert "KRaft mode (metadata quorum leader" in text and "lock in the cluster" in text
    assert "broker 2 unregistered (UnregisterBroker, KIP-631)" in text
    assert "brokers stopped: [2]; unregistered (KRaft): [2]" in text, "the note says what the run did"
    # Kafka's own tool judges: the controller has no registration of broker 2 left to remove
    tool = sandbox.kafka_tool("kafka-cluster.sh", "unregister", "--bootstrap-server", sandbox.bootstrap_servers,
                              "--id", "2")
    assert tool.returncode != 0 and "BrokerIdNotRegisteredException" in tool.stderr, (tool.stdout, tool.stderr)

    # broker 4 drained but left running, then stopped by hand: fenced, still registered, which the controller counts
    # when asked for a metadata.version
    drain = {"cluster": "kafka_sandbox", "brokers": [4], "throttle_bytes_per_s": 200_000_000,
             "healthcheck_interval_s": 1, "healthcheck_timeout_s": 120, "verify_interval_s": 1}
    drained = run_dag("kafka_decommission", {**drain, "stop_brokers": False})
    assert drained.state == "success", drained.states
    assert "brokers [4] drained, not stopped (stop_brokers is false): left as they are" in \
        capfd.readouterr().out + caplog.text
    assert all(4 not in p.replicas for p in snapshot(admin(sandbox.bootstrap_servers)).partitions)
    code, out, err = sandbox.ssh(4, "kafka-service stop")
    assert code == 0, (out, err)
    wait_for(lambda: 4 not in admin(sandbox.bootstrap_servers).list_topics(timeout=10).brokers, 60,
             what="broker 4 fenced")
    # the cluster view shows it down though it holds nothing (its registration, DescribeCluster v2)
    from fleet_view.sources import ClusterSource
    from kafka_ops.cluster_view import fleet_row

    source = ClusterSource("kafka_sandbox", SimpleNamespace(past_runs=lambda cluster: []))
    try:
        row = fleet_row(source.read(), int(time.time() * 1000), lambda dag_id, run_id: "")
    finally:
        source.close()
    assert (row["brokers_up"], row["brokers_total"], row["brokers_down"], row["urp"]) == (3, 4, [4], 0), row
    capfd.readouterr()
    caplog.clear()
    before = sandbox.starts()
    refused = run_dag("kafka_upgrade", {"cluster": "kafka_sandbox", "target_version": "4.1.0",
                                        "healthcheck_interval_s": 1, "healthcheck_timeout_s": 60})
    assert refused.state == "failed" and refused.state_of("check_upgrade") == "failed", refused.states
    text = capfd.readouterr().out + caplog.text
    assert "broker 4 registered with the controller but fenced (stopped or crashed" in text
    assert "kafka-cluster.sh unregister --id 4" in text and "nothing was touched" in text
    assert "broker 2 registered" not in text, "the decommissioned broker is not named: it was unregistered"
    assert sandbox.starts() == before, "nothing restarted"

    # the remedy: decommission it again; accepted though Metadata leaves it out, nothing to drain, unregistered.
    # Broker 4 holds nothing, so the plan holds no move, or only balancing moves among the kept brokers (which one
    # depends on the partition sizes the traffic left). The test takes the empty plan every time: the planner's
    # files, as check_plan reads them, lose their balancing moves. An empty plan maps the wave task over nothing,
    # which Airflow marks skipped: the election and the stop must run all the same (they were skipped with it, and
    # the run ended green having stopped nothing, until preferred_leaders ran none_failed)
    import operators.reassignment_plan as check_plan_module

    real_load_plan = check_plan_module.load_plan

    def without_balancing_moves(*args, **kwargs):
        return replace(real_load_plan(*args, **kwargs), moves=(), waves=())

    monkeypatch.setattr(check_plan_module, "load_plan", without_balancing_moves)
    removed = run_dag("kafka_decommission", drain)
    assert removed.state == "success", removed.states
    text = capfd.readouterr().out + caplog.text
    assert "plan: 0 moves in 0 waves" in text and removed.state_of("reassign.wave") == "skipped", removed.states
    assert (removed.state_of("reassign.preferred_leaders"), removed.state_of("stop_brokers")) == \
        ("success", "success"), removed.states
    assert "broker 4 is not in the metadata (stopped already): nothing to stop" in text
    assert "broker 4 unregistered (UnregisterBroker, KIP-631)" in text
    assert "brokers stopped: none; unregistered (KRaft): [4]; stopped already: [4]" in text, \
        "a run reports only the stop it made: the unregistration, not the stop made by hand"
    tool = sandbox.kafka_tool("kafka-cluster.sh", "unregister", "--bootstrap-server", sandbox.bootstrap_servers,
                              "--id", "4")
    assert tool.returncode != 0 and "BrokerIdNotRegisteredException" in tool.stderr, (tool.stdout, tool.stderr)
    assert sandbox.starts() == before, "nothing restarted"
    end = snapshot(admin(sandbox.bootstrap_servers))
    assert end.under_replicated == [] and end.offline == []


def test_scale_out_on_kraft_formats_the_new_brokers_storage_then_starts_it_and_moves_its_share(
        fresh_sandbox, use_sandbox, capfd, caplog):
    """KRaft (a dynamic quorum, Kafka 4.1): the new broker's host is prepared as an operator prepares one (Kafka and
    its server.properties, empty log dir: no ``meta.properties``). The dry run plans onto it as its file describes it
    and formats and starts nothing; the real run formats its storage for the cluster (``kafka-storage format``, as
    Kafka's operations guide adds a broker; it refused to start before: "No readable meta.properties files found"),
    starts it and moves its share in throttled waves. Nothing offline, no acknowledged message lost."""
    sandbox = fresh_sandbox(mode="kraft", controllers=3, brokers=3, spare_brokers=1, racks=2, kafka_version="4.1.0",
                            quorum="dynamic")
    use_sandbox(sandbox.workdir)
    sandbox.wait_healthy(timeout_s=120)
    meta = sandbox.host_dir(3).data / "meta.properties"
    assert not meta.exists(), "the spare host's log dir is not formatted"
    conf = {"cluster": "kafka_sandbox", "brokers": [3], "start_new_brokers": True, "healthcheck_interval_s": 1,
            "healthcheck_timeout_s": 120, "verify_interval_s": 1, "throttle_bytes_per_s": 200_000_000}
    dry = run_dag("kafka_scale_out", {**conf, "dry_run": True})
    text = capfd.readouterr().out + caplog.text
    assert dry.state == "success", dry.states
    rack = javaproperties.loads(sandbox.host_dir(3).server_properties.read_text())["broker.rack"]
    assert (f"brokers [3] are not started: planned onto as their server.properties describe them (broker 3 on "
            f"{sandbox.broker(3)['host']}, rack {rack})") in text, text[-3000:]
    assert "DRY RUN: broker 3 (" in text and "would format its storage for cluster" in text
    assert not meta.exists() and starts(sandbox, 3, "broker") == 0, "a dry run formats and starts nothing"
    assert "brokers (dry run: nothing ran): would start [3], would format the storage of [3]" in text

    cluster_id = admin(sandbox.bootstrap_servers).list_topics(timeout=10).cluster_id
    # a host reused from another cluster: its log dir formatted for that one. Kafka's format refuses it, and the run
    # fails at once naming Kafka's reason (not the tool's stack frames), the broker not started; the operator wipes
    # the log dir and runs again
    meta.write_text("version=1\nnode.id=3\ncluster.id=OldClusterAAAAAAAAAAAAA\n"
                    "directory.id=QWERTYUIOPASDFGHJKLZXC\n")
    stale = run_dag("kafka_scale_out", conf)
    text = capfd.readouterr().out + caplog.text
    assert stale.state == "failed" and stale.state_of("start_new_brokers") == "failed", stale.states
    assert (f"formatting its storage exited 1: Exception in thread \"main\" java.lang.RuntimeException: Invalid "
            f"cluster.id in: {meta}. Expected {cluster_id}, but read OldClusterAAAAAAAAAAAAA") in text, \
        text[-3000:]
    assert starts(sandbox, 3, "broker") == 0
    meta.unlink()
    with watched_traffic(sandbox.workdir, sandbox.bootstrap_servers, [0, 1, 2]) as traffic, \
            MetadataWatcher(sandbox.bootstrap_servers, interval_s=0.5) as watcher:
        result = run_dag("kafka_scale_out", conf)
    print(traffic.summary())
    text = capfd.readouterr().out + caplog.text
    assert result.state == "success", result.states
    assert_no_acknowledged_message_lost(traffic)
    assert javaproperties.loads(meta.read_text())["cluster.id"] == cluster_id, "formatted for this cluster"
    assert f"broker 3 ({sandbox.broker(3)['host']}): storage for cluster {cluster_id}" in text, text[-3000:]
    assert starts(sandbox, 3, "broker") == 1, "started once"
    assert "brokers started: [3]; storage formatted: [3]" in text, "the note says what the run did"
    after = wait_for(lambda: (v := snapshot(admin(sandbox.bootstrap_servers))) and not v.under_replicated and v, 60,
                     what="every partition in sync")
    assert 3 in after.brokers and any(3 in p.replicas for p in after.partitions), "broker 3 holds its share"
    assert after.offline == [] and watcher.ever_offline() == []
