"""The KRaft controller roll's tasks (``operators.controller_roll``), the broker plan's roles and KRaft path
(``operators.roll_plan``), and the rolling restart DAG's shape, without servers.

:class:`FakeQuorum` stands in for the cluster: three controllers (voters 100, 101, 102 on hosts h100-h102)
whose service commands (``svc stop|start|status``, run through a fake ``BrokerShell``) stop and start them, and
whose DescribeQuorum answers (through a fake ``KafkaAdminHook``) follow: a stopped voter stops fetching, a
stopped leader is replaced by the lowest running voter, a started one fetches from the second answer on. The
roll's record lives in a dict (a ``RollStore`` without Airflow Variables); the lock checks are recorded as
``"held"`` events beside the commands, so their order can be asserted.
"""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowFailException
from kafka_ops.cluster import Broker, ClusterState, Partition
from kafka_ops.profile import ClusterProfile
from kafka_ops.quorum import Endpoint, Quorum, Voter
from kafka_ops.roll import RollRecord
from operators import controller_roll as tasks
from operators import node_roll, roll_plan
from runtime import broker_commands, profiles
from runtime.roll_store import RollStore, now_ms
from runtime.start_dependencies import Dependency
from runtime.waiting import Check

REPO = Path(__file__).resolve().parents[2]
HOSTS = {"100": "h100", "101": "h101", "102": "h102"}
SERVICE = {"ssh_conn_id": "ssh", "service_stop": "svc stop", "service_start": "svc start",
           "service_status": "svc status"}
PROFILE = ClusterProfile.from_connection_fields("kafka_kraft", "b1:9092", {**SERVICE, "controller_hosts": HOSTS})
SETTINGS = {"cluster": "kafka_kraft", "roles": "all", "controllers": [], "dry_run": False,
            "healthcheck_interval_s": 1, "healthcheck_timeout_s": 10, "soak_s": 0, "window_policy": "wait"}


class FakeQuorum:
    """Controllers 100, 101, 102 and their quorum (see the module docstring). ``events`` records ``("stop",
    id)``, ``("start", id)`` and ``"held"`` (a lock check); ``ssh`` counts every SSH command (status included);
    ``fail_start``: controllers whose start exits 1; ``on_describe``: callables run before each answer."""

    def __init__(self, leader: int = 102, kraft: bool = True, endpoints: tuple[Endpoint, ...] = ()) -> None:
        self.kraft = kraft
        self.voters = [100, 101, 102]
        self.brokers = [1, 2]  # registered brokers (Metadata); a voter among them is a combined node
        self.running = {v: True for v in self.voters}
        self.leader = leader
        self.epoch = 5
        self.stopped_at: dict[int, int] = {}
        self.warming: dict[int, int] = {}
        self.lagging: set[int] = set()
        self.endpoints = endpoints
        self.events: list[Any] = []
        self.ssh = 0
        self.fail_start: set[int] = set()
        self.on_describe: list[Any] = []
        self.partitions: tuple[Partition, ...] = ()  # what the Metadata answer says (none: healthy)
        self.hung: dict[int, str] = {}  # brokers that do not answer a request sent to them: id -> why

    def quorum(self) -> Quorum:
        for hook in list(self.on_describe):
            hook(self)
        now = now_ms()
        voters = []
        for v in self.voters:
            if v == self.leader:
                voters.append(Voter(v, 500, None, now))
            elif not self.running[v] or self.warming.get(v, 0) > 0:
                if self.warming.get(v, 0) > 0:
                    self.warming[v] -= 1
                last = self.stopped_at.get(v, now - 60_000)
                voters.append(Voter(v, 400, last, last))
            elif v in self.lagging:
                voters.append(Voter(v, 300, now, now - 30_000))
            else:
                voters.append(Voter(v, 500, now, now))
        return Quorum(self.leader, self.epoch, 500, tuple(voters), (Voter(1, 500), Voter(2, 500)), self.endpoints)

    def stop(self, v: int) -> None:
        self.running[v] = False
        self.stopped_at[v] = now_ms()
        if v == self.leader:  # an election among the voters left
            self.leader = min(c for c in self.voters if self.running[c])
            self.epoch += 1

    def start(self, v: int) -> None:
        self.running[v] = True
        self.warming[v] = 1  # its first fetch shows in the second DescribeQuorum answer

    def shell(self, command: str, host: str) -> tuple[int, str, str]:
        self.ssh += 1
        v = int(host.removeprefix("h"))
        if "svc stop" in command:
            self.events.append(("stop", v))
            self.stop(v)
            return 0, f"controller {v} stopped\n", ""
        if "svc start" in command:
            self.events.append(("start", v))
            if v in self.fail_start:
                return 1, "", "boom"
            self.start(v)
            return 0, "", ""
        assert "svc status" in command, command
        return (0, "active\n", "") if self.running[v] else (3, "inactive\n", "")


class MemoryStore(RollStore):
    """A roll store in a dict (JSON round trip, as the Variable does)."""

    records: dict[str, Any] = {}

    def load(self) -> RollRecord | None:
        data = self.records.get(self.roll_id)
        return None if data is None else RollRecord.from_dict(json.loads(data))

    def save(self, record: RollRecord) -> None:
        self.records[self.roll_id] = json.dumps(record.to_dict())


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeQuorum:
    fake = FakeQuorum()

    class Admin:
        def __init__(self, profile: Any = None, **kwargs: Any) -> None:
            pass

        def __enter__(self) -> Admin:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def is_kraft(self) -> bool:
            return fake.kraft

        def describe_quorum(self) -> Quorum:
            assert fake.kraft, "DescribeQuorum on a ZooKeeper-mode cluster"
            return fake.quorum()

        def cluster_state(self, configs: bool = True, **_: Any) -> ClusterState:
            return ClusterState(tuple(Broker(b, f"b{b}", 9092) for b in fake.brokers), fake.partitions)

        def unanswered_brokers(self, brokers: dict[int, str]) -> dict[int, str]:
            assert all(address == f"b{b}:9092" for b, address in brokers.items()), brokers
            return {b: why for b, why in fake.hung.items() if b in brokers}

    class Shell:
        def __init__(self, ssh_conn_id: str, host: str, conn: object = None) -> None:
            self.host = host

        def run(self, command: str, timeout_s: float) -> tuple[int, str, str]:
            return fake.shell(command, self.host)

    MemoryStore.records = {}
    monkeypatch.setattr(tasks, "KafkaAdminHook", Admin)
    for module in (tasks, node_roll):  # the plan task; the loop every node roll runs
        monkeypatch.setattr(module, "RollStore", MemoryStore)
    monkeypatch.setattr(profiles, "profile_or_fail", lambda conn_id: fake.profile)
    monkeypatch.setattr(node_roll, "ensure_held", lambda profile, context, operation, log: fake.events.append("held"))
    monkeypatch.setattr(node_roll, "release_held", lambda profile, context, log, why: fake.events.append("released"))
    monkeypatch.setattr(tasks.ControllerRollOperator, "_sleep", lambda self, seconds: None)
    monkeypatch.setattr(broker_commands, "BrokerShell", Shell)
    fake.profile = PROFILE
    return fake


def context(position: int = 1, previous_failed: bool = False) -> dict:
    states = {f"controllers.controller_{position - 2}": "failed"} if previous_failed else {}
    ti = SimpleNamespace(dag_id="kafka_rolling_restart", task_id="controllers.controller", run_id="r1",
                         map_index=position - 1, get_task_states=lambda **kwargs: {"r1": states})
    return {"params": {}, "dag": SimpleNamespace(dag_id="kafka_rolling_restart", timetable=None), "run_id": "r1",
            "ti": ti, "dag_run": SimpleNamespace(triggering_user_name="alice")}


def plan(**settings: Any) -> list[dict]:
    op = tasks.ControllerPlanOperator(task_id="plan", roll_id="controllers", settings={**SETTINGS, **settings})
    return op.execute(context())


def controller(item: dict, previous_failed: bool = False, **settings: Any) -> tuple[dict, tasks.ControllerRollOperator]:
    op = tasks.ControllerRollOperator(task_id="controller", roll_id="controllers", item=item,
                                      settings={**SETTINGS, **settings})
    return op.execute(context(item["position"], previous_failed)), op


def record() -> RollRecord:
    return MemoryStore({"dag": SimpleNamespace(dag_id="d"), "run_id": "r"}, "controllers").load()


def restarts(events: list) -> list:
    return [e for e in events if e != "held"]


# --- the plan ---------------------------------------------------------------------------------------------------


def test_the_plan_freezes_followers_first_and_the_quorum_leader_last(cluster, capfd):
    items = plan()
    assert [(i["id"], i["position"], i["active"]) for i in items] == [(100, 1, False), (101, 2, False), (102, 3, True)]
    assert items[0] == {"position": 1, "total": 3, "id": 100, "host": "h100", "label": "controller 100",
                        "active": False, "grid_label": "controller 100 (1/3)"}
    assert items[2]["grid_label"] == "controller 102 (3/3) · active"
    logged = capfd.readouterr().out
    assert "KRaft cluster: roles=all: the controllers first" in logged
    assert "KRaft cluster: quorum leader 102 (epoch 5), voters 100, 101, 102; observers 1, 2" in logged
    assert "command stop: service command (service_stop; no controller_service_stop): svc stop" in logged
    cluster.leader = 100
    assert plan() == items, "the plan is frozen at its first computation"
    assert cluster.events == [] and cluster.ssh == 0, "the plan touches nothing"


def test_hosts_missing_from_the_profile_come_from_describe_quorum_or_fail_the_plan(cluster):
    cluster.profile = ClusterProfile.from_connection_fields("kafka_kraft", "b1:9092",
                                                            {**SERVICE, "controller_hosts": {"100": "h100"}})
    with pytest.raises(AirflowFailException, match=r"no host known for controller\(s\) \[101, 102\]: connection "
                                                   r"'kafka_kraft' has no controller_hosts entry"):
        plan()
    cluster.endpoints = (Endpoint(101, "CONTROLLER", "h101", 9093), Endpoint(102, "CONTROLLER", "h102", 9093))
    assert [i["host"] for i in plan()] == ["h100", "h101", "h102"]


def test_zookeeper_mode_plans_no_controller_or_refuses_a_controllers_roll(cluster, capfd):
    cluster.kraft = False
    with pytest.raises(AirflowFailException, match="ZooKeeper mode .*roles=controllers cannot be rolled"):
        plan(roles="controllers")
    with pytest.raises(AirflowFailException, match=r"ZooKeeper mode .*controllers=\[100\] cannot be rolled"):
        plan(controllers=[100])
    assert record() is None, "a refused plan freezes nothing"
    assert plan() == []
    logged = capfd.readouterr().out
    assert "ZooKeeper mode: the controller is a broker, rolled last" in logged
    assert record().order == [], "an empty roll is frozen too"


def test_roles_brokers_and_unknown_controllers(cluster):
    assert plan(roles="brokers") == []
    MemoryStore.records = {}
    with pytest.raises(AirflowFailException, match=r"unknown controller ids \[7\]: the quorum's voters are "
                                                   r"\[100, 101, 102\]"):
        plan(controllers=[101, 7])
    assert [i["id"] for i in plan(controllers=[102, 100])] == [100, 102]


# --- the controller tasks ---------------------------------------------------------------------------------------


def test_a_roll_restarts_each_controller_once_the_leader_last_checking_the_lock(cluster):
    items = plan()
    results = [controller(item)[0] for item in items]
    assert [r["action"] for r in results] == ["restarted"] * 3
    assert restarts(cluster.events) == [("stop", 100), ("start", 100), ("stop", 101), ("start", 101),
                                        ("stop", 102), ("start", 102)]
    first = cluster.events[:cluster.events.index(("start", 100)) + 1]
    assert first == ["held", "held", ("stop", 100), "held", ("start", 100)], \
        "the lock is checked before acting, before the stop and before the start"
    assert record().finished() == [100, 101, 102]
    assert {"stop_sent", "gone", "start_sent", "back", "done"} <= set(results[0]["marks"])
    assert cluster.leader == 100 and all(cluster.running.values())


def test_an_item_planned_before_grid_labels_existed_still_rolls_and_is_labelled(cluster):
    # a run planned by an earlier kafka-ops and resumed after an upgrade: its items have no grid_label
    items = [{k: v for k, v in item.items() if k != "grid_label"} for item in plan()]
    result, op = controller(items[0])
    assert result["action"] == "restarted" and op.item["grid_label"] == "controller 100 (1/3)"


def test_the_quorum_leader_moving_since_the_plan_still_goes_last(cluster, capfd):
    items = plan()  # 100, 101, 102 (leader)
    controller(items[0])
    cluster.leader = 101  # leadership moved onto the controller planned second
    result, op = controller(items[1])
    assert result["controller"] == 102 and op.item["label"] == "controller 102"
    logged = capfd.readouterr().out
    assert "controller 101 is the quorum leader now (the order had it at position 2/3): it goes last" in logged
    result, op = controller(items[2])
    assert result["controller"] == 101
    assert restarts(cluster.events)[2:] == [("stop", 102), ("start", 102), ("stop", 101), ("start", 101)]
    assert [s["id"] for s in record().steps] == [100, 102, 101]


def test_a_leader_moving_onto_the_controller_while_its_gate_waits_is_chosen_again(cluster, capfd):
    items = plan()
    controller(items[0])
    answers = []

    def move_on_the_gate(fake: FakeQuorum) -> None:
        answers.append(1)
        if len(answers) == 2:  # the turn's read saw 102 lead; the gate's first look sees 101
            fake.leader = 101

    cluster.on_describe.append(move_on_the_gate)
    result, _ = controller(items[1])
    cluster.on_describe.clear()
    assert result["controller"] == 102
    logged = capfd.readouterr().out
    assert "controller 101 is the quorum leader (the active controller) and controllers [102] of this roll remain: " \
           "it goes last: choosing again" in logged
    assert restarts(cluster.events)[2:] == [("stop", 102), ("start", 102)]


def test_the_gate_refuses_while_another_voter_is_behind_and_touches_nothing(cluster):
    items = plan()
    cluster.lagging = {101}
    with pytest.raises(AirflowFailException) as err:
        controller(items[0], healthcheck_timeout_s=0.2)
    text = str(err.value)
    assert "waiting until controller 100 may be stopped: quorum without controller 100: without it 1 of 3 voters " \
           "caught up (needs 2" in text
    assert "lagging: 101" in text and text.endswith("(controller 100 not stopped by this roll)")
    assert restarts(cluster.events) == ["released"]


def test_the_gate_holds_while_a_partition_is_under_replicated_or_offline_and_touches_nothing(cluster, capfd):
    """A broker down (here: missing from the ISRs) holds every controller's gate, the quorum being fine: the run
    stops before a controller is touched, naming the partitions; once the ISRs are full again the roll goes on."""
    items = plan()
    cluster.partitions = (Partition("orders", 0, 1, (1, 2, 3), (1,)), Partition("audit", 0, -1, (3,), ()))
    with pytest.raises(AirflowFailException) as err:
        controller(items[0], healthcheck_timeout_s=0.2)
    text = str(err.value)
    assert "waiting until controller 100 may be stopped: partitions before controller 100: offline (1): audit-0: " \
           "leader -1 (offline), isr [] | urp (2): audit-0: under-replicated, isr [] of replicas [3] (missing [3]); " \
           "orders-0: under-replicated, isr [1] of replicas [1, 2, 3] (missing [2, 3])" in text, text
    assert text.endswith("(controller 100 not stopped by this roll)")
    assert restarts(cluster.events) == ["released"]
    cluster.partitions = (Partition("orders", 0, 1, (1, 2, 3), (1, 2, 3)),)
    controller(items[0])
    assert restarts(cluster.events) == ["released", ("stop", 100), ("start", 100)], cluster.events
    out = capfd.readouterr().out
    assert "controller 100 may be stopped: yes (a caught-up majority of the voters stays without it (KRaft " \
           "cluster: quorum leader 102" in out, out
    assert "; no partition offline or under-replicated; every broker answers)" in out, out


def test_the_gate_holds_while_a_broker_does_not_answer(cluster):
    """A hung broker is still in the metadata (its partitions look in-sync): every broker must answer too."""
    items = plan()
    cluster.hung = {2: "no answer within 5.0 s"}
    with pytest.raises(AirflowFailException) as err:
        controller(items[0], healthcheck_timeout_s=0.2)
    assert "answers: broker 2 does not answer (no answer within 5.0 s): it is still in the metadata" in str(err.value)
    assert restarts(cluster.events) == ["released"]
    cluster.hung = {}
    controller(items[0])
    assert restarts(cluster.events) == ["released", ("stop", 100), ("start", 100)], cluster.events


def test_the_gate_of_a_migrating_controller_holds_while_zookeeper_does_not_answer(cluster, monkeypatch, capfd):
    """During the migration a controller also connects to ZooKeeper (``kafka_ops.start_needs``): while ZooKeeper does
    not answer (nothing can change the metadata either), no controller is stopped; once it answers, the gate says so."""
    zookeeper = {"answer": "ZooKeeper zk:2181 does not answer: KazooTimeoutError: Connection time-out"}
    found = []

    def dependencies(self, nodes) -> list[Dependency]:
        found.append(list(nodes))
        return [Dependency("ZooKeeper zk:2181", "ZooKeeper",
                           lambda: Check(not zookeeper["answer"], zookeeper["answer"] or "ZooKeeper answers"))]

    monkeypatch.setattr(tasks.ControllerRollOperator, "_dependencies", dependencies)
    items = plan()
    with pytest.raises(AirflowFailException) as err:
        controller(items[0], healthcheck_timeout_s=0.2)
    assert "registers-with: ZooKeeper zk:2181 does not answer: KazooTimeoutError: Connection time-out: a node " \
           "stopped now could not register when started again" in str(err.value), str(err.value)
    assert restarts(cluster.events) == ["released"] and found == [[100]]
    zookeeper["answer"] = ""
    controller(items[0])
    assert restarts(cluster.events) == ["released", ("stop", 100), ("start", 100)], cluster.events
    assert "; every broker answers; ZooKeeper answers)" in capfd.readouterr().out


def test_a_controller_down_that_this_roll_did_not_stop_fails_its_gate(cluster):
    items = plan()
    cluster.stop(100)
    with pytest.raises(AirflowFailException, match="controller 100 is down and roll 'controllers' did not stop it"):
        controller(items[0])
    assert ("start", 100) not in cluster.events


def test_a_controller_this_roll_left_stopped_is_started_when_the_task_is_cleared(cluster):
    items = plan()
    cluster.fail_start = {100}
    with pytest.raises(AirflowFailException) as err:
        controller(items[0])
    assert "start on controller 100 (h100) exited 1: boom (controller 100 is DOWN (service status: inactive " \
           "(exit 3)); this roll's record: starting at" in str(err.value)
    assert record().phase(100) == "starting"
    with pytest.raises(AirflowFailException, match="controller 101 NOT touched: controller 100"):
        controller(items[1], previous_failed=True)
    cluster.fail_start = set()
    cluster.events.clear()
    result, _ = controller(items[0])
    assert result["action"] == "restarted"
    assert restarts(cluster.events) == [("start", 100)], "no gate, no second stop: only the start"
    assert record().is_done(100)


def test_a_finished_controller_is_never_restarted_again(cluster):
    items = plan()
    controller(items[0])
    cluster.events.clear()
    result, op = controller(items[0])
    assert result == {"controller": 100, "action": "skip"} and cluster.events == []
    assert op.item["label"] == "controller 100"


def test_a_dry_run_logs_every_step_and_touches_nothing(cluster, capfd):
    items = plan(dry_run=True)
    results = [controller(item, dry_run=True)[0] for item in items]
    assert [r["action"] for r in results] == ["dry run"] * 3
    assert cluster.events == [] and cluster.ssh == 0, "no SSH command at all, no lock taken"
    logged = capfd.readouterr().out
    for text in ("DRY RUN: controller 100 may be stopped now", "DRY RUN: would run controller 100 (h100): stop: "
                 "service command (service_stop; no controller_service_stop): svc stop",
                 "DRY RUN: would wait until controller 100's service status says it stopped",
                 "DRY RUN: would run controller 102 (h102): start",
                 "DRY RUN: would wait until controller 102 is a voter again"):
        assert text in logged
    assert all(record().progress(c).reason == "dry run" for c in (100, 101, 102))


def test_a_controller_the_needs_action_rule_leaves_alone_is_not_restarted(cluster):
    items = plan()
    op = tasks.ControllerRollOperator(task_id="controller", roll_id="controllers", item=items[0], settings=SETTINGS,
                                      needs_action=lambda cid, facts, cfg: (False, f"{cid} runs {facts['v']} already"),
                                      facts=lambda profile, step, cfg: {"v": "4.1.0"})
    label = items[0]["grid_label"]
    assert op.execute(context())["action"] == "left alone"
    assert restarts(cluster.events) == [] and record().progress(100).reason == "left alone: 100 runs 4.1.0 already"
    assert op.item["grid_label"] == f"{label} · left alone", "the Grid label it ends with says so"


# --- the broker plan: roles and KRaft ---------------------------------------------------------------------------

BROKER_SETTINGS = {"cluster": "c", "brokers": [], "keep_order": False, "consumer_groups": None, "roles": "all",
                   "max_parallel": 1, "batch_by": "none", "healthcheck_interval_s": 1, "healthcheck_timeout_s": 5}
STATE = ClusterState(tuple(Broker(b, f"b{b}", 9092) for b in (0, 1, 2)),
                     tuple(Partition("t", p, p % 3, (p % 3, (p + 1) % 3, (p + 2) % 3), (0, 1, 2)) for p in range(3)),
                     controller_id=1)


@pytest.fixture
def broker_plan(monkeypatch: pytest.MonkeyPatch):
    mode = {"kraft": True, "voters": (100, 101, 102), "reassigning": [], "state_awaits_reassignments": False}
    reassignments_asked = threading.Event()

    class Admin:
        def __init__(self, profile: Any = None, **kwargs: Any) -> None:
            pass

        def __enter__(self) -> Admin:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def cluster_state(self, configs: bool = True, **_: Any) -> ClusterState:
            if mode["state_awaits_reassignments"]:  # answers only once the reassignments were asked meanwhile
                assert reassignments_asked.wait(5), "the reassignments were not asked while the metadata was read"
            return STATE

        def is_kraft(self) -> bool:
            return mode["kraft"]

        def describe_quorum(self) -> Quorum:
            assert mode["kraft"], "DescribeQuorum on a ZooKeeper-mode cluster"
            return Quorum(mode["voters"][-1], 3, 500, tuple(Voter(v, 500) for v in mode["voters"]))

        def list_partition_reassignments(self) -> list[dict]:
            reassignments_asked.set()
            return mode["reassigning"]

    MemoryStore.records = {}
    noted: list[dict] = []
    monkeypatch.setattr(roll_plan, "KafkaAdminHook", Admin)
    monkeypatch.setattr(roll_plan, "RollStore", MemoryStore)
    monkeypatch.setattr(roll_plan, "note_lines", lambda context, lines, task_log: noted.append(dict(lines)))
    monkeypatch.setattr(profiles, "profile_or_fail", lambda conn_id: PROFILE)

    def run(**settings: Any) -> list[dict]:
        MemoryStore.records = {}
        noted.clear()
        op = roll_plan.RollPlanOperator(task_id="plan", roll_id="restart", settings={**BROKER_SETTINGS, **settings})
        return op.execute(context())

    run.mode = mode
    run.noted = noted
    return run


def test_on_kraft_no_broker_goes_last_as_the_controller(broker_plan, capfd):
    assert [b["label"] for b in broker_plan()] == ["broker 0", "broker 1", "broker 2"]
    logged = capfd.readouterr().out
    assert "KRaft cluster: the controller id of the Metadata answer (1) is a broker chosen at random" in logged
    broker_plan.mode["kraft"] = False
    capfd.readouterr()
    assert [b["label"] for b in broker_plan()] == ["broker 0", "broker 2", "broker 1"]
    logged = capfd.readouterr().out
    assert "ZooKeeper mode: the controller is a broker, rolled last (broker 1)" in logged


def test_a_reassignment_in_progress_refuses_the_roll_before_anything_is_frozen(broker_plan):
    from runtime.failures import RunRefused

    broker_plan.mode["reassigning"] = [{"topic": "t", "partition": 0, "replicas": [0, 1, 2], "adding_replicas": [2],
                                        "removing_replicas": [1]}]
    with pytest.raises(RunRefused, match=r"^cluster 'kafka_kraft': a partition reassignment is in progress "
                                         r"\(1 partition: t-0: adding \[2\], removing \[1\]\)"):
        broker_plan()
    assert MemoryStore.records == {}, "nothing frozen: a new run after the reassignment plans afresh"
    assert broker_plan(roles="controllers") == [], "a roll of the controllers alone is not in the way"
    broker_plan.mode["reassigning"] = []
    assert len(broker_plan()) == 3


def test_the_plan_notes_its_map_indexes_and_unavoidable_outages_in_one_edit(broker_plan, monkeypatch):
    monkeypatch.setattr(roll_plan, "unavoidable_outages", lambda state, order: ["topic t: RF 1"])
    broker_plan()
    assert broker_plan.noted == [{"roll 'restart' unavoidable outages": "topic t: RF 1",
                                  "roll 'restart'": "map index 0 = broker 0, 1 = broker 1, 2 = broker 2"}]
    monkeypatch.setattr(roll_plan, "unavoidable_outages", lambda state, order: [])
    broker_plan()
    assert broker_plan.noted == [{"roll 'restart'": "map index 0 = broker 0, 1 = broker 1, 2 = broker 2"}]


def test_the_reassignments_in_progress_are_asked_beside_the_metadata(broker_plan):
    """Each waits on the network (0.3 s one after the other on a loaded sandbox): the plan asks both at once, and a
    reassignment found so still refuses the roll."""
    broker_plan.mode["state_awaits_reassignments"] = True
    assert len(broker_plan()) == 3
    broker_plan.mode["reassigning"] = [{"topic": "t", "partition": 0, "replicas": [0, 1, 2], "adding_replicas": [2],
                                        "removing_replicas": [1]}]
    with pytest.raises(Exception, match="a partition reassignment is in progress"):
        broker_plan()


def test_keep_order_keeps_the_zookeeper_controller_where_the_list_has_it(broker_plan):
    """ZooKeeper mode, controller 1: a list of brokers goes controller last unless keep_order (the log's order and
    the batches agree); a full roll puts it last either way."""
    broker_plan.mode["kraft"] = False
    assert [b["label"] for b in broker_plan(brokers=[1, 0])] == ["broker 0", "broker 1"]
    assert [b["label"] for b in broker_plan(brokers=[1, 0], keep_order=True)] == ["broker 1", "broker 0"]
    assert [b["label"] for b in broker_plan(keep_order=True)] == ["broker 0", "broker 2", "broker 1"]


def test_roles_controllers_plans_no_broker(broker_plan):
    assert broker_plan(roles="controllers") == []
    stored = json.loads(MemoryStore.records["restart"])
    assert stored["steps"] == [] and stored["brokers"] == {}
    assert len(broker_plan(roles="brokers")) == 3


def test_a_controller_id_in_the_broker_list_is_refused_as_a_controller(broker_plan):
    """``brokers: [100]`` on KRaft: refused as unknown, and named as a controller with the param that rolls it
    (where the DAG has one); an id that is neither is only unknown."""
    from runtime.failures import RunRefused

    def refusal(roles: str, params: dict) -> str:
        op = roll_plan.RollPlanOperator(task_id="plan", roll_id="restart",
                                        settings={**BROKER_SETTINGS, "brokers": [1, 100, 7], "roles": roles})
        with pytest.raises(RunRefused) as refused:
            op.execute({**context(), "params": params})
        return str(refused.value)

    assert refusal("all", {"controllers": []}) == (
        "cluster 'kafka_kraft': unknown broker ids [100, 7]; registered brokers are [0, 1, 2]; [100] is a KRaft "
        "controller (a voter of the metadata quorum), not a broker: controllers are rolled by the controllers param")
    assert refusal("brokers", {"controllers": []}).endswith(
        "rolled by the controllers param and roles=controllers or all")
    assert refusal("all", {}).endswith("[100] is a KRaft controller (a voter of the metadata quorum), not a broker"), \
        "no controllers param to name"
    broker_plan.mode["kraft"] = False
    assert refusal("all", {"controllers": []}).endswith("registered brokers are [0, 1, 2]"), "ZooKeeper mode"



# --- combined nodes (process.roles=broker,controller): the broker roll restarts them, the controller roll does not --


def test_the_controller_plan_leaves_combined_voters_to_the_broker_roll_and_refuses_them_by_name(cluster, capfd):
    cluster.brokers = [1, 2, 101]  # 101 is a combined node: a voter and a registered broker
    assert [i["id"] for i in plan()] == [100, 102], "roles=all: the dedicated controllers, the leader (102) last"
    assert "combined nodes [101] (quorum voters that are brokers too) roll with the brokers" in capfd.readouterr().out
    for settings in ({"controllers": [101, 100]}, {"roles": "controllers"}):
        MemoryStore.records = {}
        with pytest.raises(AirflowFailException) as refused:
            plan(**settings)
        said = str(refused.value)
        assert said.startswith("cluster 'kafka_kraft': nodes [101] are KRaft controllers (voters of the metadata "
                               "quorum [100, 101, 102], leader 102) and brokers at once (combined mode"), said
        assert "they roll with the brokers" in said and "Nothing was touched" in said
        assert record() is None
    MemoryStore.records = {}
    cluster.brokers = [100, 101, 102]  # every voter combined (Kafka 4's quickstart layout)
    assert plan() == [] and record().steps == (), "no dedicated controller to restart"
    assert cluster.events == [] and cluster.ssh == 0


def test_the_broker_plan_on_kraft_rolls_combined_nodes_one_voter_a_batch_and_the_quorum_leader_last(broker_plan,
                                                                                                   capfd):
    broker_plan.mode["voters"] = (0, 1, 2)  # every broker a combined node; the fake's quorum leader is 2
    items = broker_plan()
    assert [b["label"] for b in items] == ["broker 0", "broker 1", "broker 2"]
    assert all(b["brokers"][0]["voter"] is True for b in items)
    assert "KRaft cluster with combined nodes [0, 1, 2]" in capfd.readouterr().out
    broker_plan.mode["voters"] = (2, 0)  # the quorum leader (the fake's last voter) is 0: it goes last
    items = broker_plan(max_parallel=3)
    assert [[s["id"] for s in b["brokers"]] for b in items] == [[1, 2], [0]]
    assert [s.get("voter", False) for b in items for s in b["brokers"]] == [False, True, True]
    broker_plan.mode["voters"] = (100, 101, 102)  # dedicated controllers: no broker is a voter, none moved last
    items = broker_plan()
    assert [b["label"] for b in items] == ["broker 0", "broker 1", "broker 2"]
    assert not any("voter" in s for b in items for s in b["brokers"])
    broker_plan.mode["kraft"] = False  # ZooKeeper mode asks no quorum (the fake asserts it)
    assert len(broker_plan()) == 3

# --- the DAG ----------------------------------------------------------------------------------------------------


def test_the_rolling_restart_dag_parses_with_the_controller_roll_and_its_trigger_rules(tmp_path):
    from airflow.dag_processing.dagbag import DagBag

    shutil.copy(REPO / "dags" / "kafka_rolling_restart.py", tmp_path)
    bag = DagBag(dag_folder=str(tmp_path))
    assert not bag.import_errors, bag.import_errors
    dag = bag.dags["kafka_rolling_restart"]
    t = dag.task_dict
    ahead = {"preflight", "controllers.plan", "restart.plan"}  # side by side: none touches a node
    chain = ["check_and_lock", ahead, "controllers.controller", "restart.broker", "run_outcome"]
    assert set(t) == {*ahead, *(c for c in chain if isinstance(c, str))}
    for before, after in zip(chain, chain[1:], strict=False):
        for b in (before if isinstance(before, set) else {before}):
            for a in (after if isinstance(after, set) else {after}):
                assert a in t[b].downstream_task_ids, (b, a)
    assert not {a for a in ahead for b in ahead if b in t[a].downstream_task_ids}, "the three wait for none other"
    assert t["check_and_lock"].downstream_task_ids == {*ahead, "run_outcome"}
    assert "restart.broker" in t["controllers.controller"].downstream_task_ids
    # an empty controller roll is skipped by its plan as that ends, maybe before the preflight: the broker roll
    # waits for the preflight itself
    assert t["restart.broker"].upstream_task_ids == {"preflight", "controllers.plan", "restart.plan",
                                                     "controllers.controller"}
    rules = {task_id: str(getattr(task.trigger_rule, "value", task.trigger_rule)) for task_id, task in t.items()}
    assert rules == {"check_and_lock": "all_success", "preflight": "all_success", "controllers.plan": "all_success",
                     "controllers.controller": "all_success", "restart.plan": "all_success",
                     "restart.broker": "none_failed", "run_outcome": "all_done"}
    assert t["run_outcome"].is_teardown and t["check_and_lock"].is_setup
    ctrl = t["controllers.controller"]
    assert ctrl.partial_kwargs["max_active_tis_per_dagrun"] == 2 and ctrl.partial_kwargs["retries"] == 0
    assert ctrl.partial_kwargs["map_index_template"] == "{{ task.item['grid_label'] }}"
    assert t["controllers.plan"].labels_for == "controllers.controller"
    assert t["run_outcome"].roll_ids == ["controllers", "restart"]
    assert t["run_outcome"].reporting_task_ids == [], "a roll's own lines say what it restarted"
    assert dag.params["roles"] == "all" and dag.params["controllers"] == []
    assert dag.params.get_param("roles").schema["enum"] == ["all", "brokers", "controllers"]


def test_the_controller_label_template_renders_the_items_label():
    from groups.controller_roll import LABEL
    from jinja2 import Template
    from kafka_ops.controller_roll import controller_grid_label

    item = {"label": "controller 101", "position": 2, "total": 3, "active": True}
    for it, dry in ((item, False), ({**item, "active": False}, True)):
        it = {**it, "grid_label": controller_grid_label(it, dry)}
        assert Template(LABEL).render(task=SimpleNamespace(item=it)) == it["grid_label"]
    assert controller_grid_label(item) == "controller 101 (2/3) · active"
    assert controller_grid_label({**item, "active": False}, dry_run=True) == "controller 101 (2/3) · dry run"

