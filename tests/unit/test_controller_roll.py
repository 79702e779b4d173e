"""The KRaft controller roll's pure rules (``kafka_ops.controller_roll``, with the quorum additions of
``kafka_ops.quorum`` and the controller wording of ``kafka_ops.roll``): which path a run takes, hosts, the
frozen order, the active controller last at each turn, gate refusals, gone and back, resume decisions. No
servers."""

from __future__ import annotations

import pytest
from kafka_ops.cluster import Broker, ClusterState, Partition
from kafka_ops.controller_roll import (
    controller_back,
    controller_items,
    describe_quorum_line,
    leader_last,
    must_go_later,
    observer_gate,
    partitions_gate,
    plan_controllers,
    reorder_steps,
    resolve_hosts,
    role_plan,
    service_state,
)
from kafka_ops.quorum import (
    Endpoint,
    Quorum,
    Voter,
    can_restart_controller,
    controller_order,
    directory_id_text,
    observer_controllers,
)
from kafka_ops.roll import RollRecord, decide, turn

NOW = 1_800_000_000_000
VOTERS = (100, 101, 102)


def quorum(leader: int = 101, lags_ms: dict[int, int | None] | None = None,
           fetched: dict[int, int | None] | None = None, endpoints: tuple[Endpoint, ...] = (),
           ids: tuple[int, ...] = VOTERS, observers=(1, 2, 3)) -> Quorum:
    """A quorum at leader time NOW: ``lags_ms`` = how long before NOW a voter was last caught up (None = never;
    default 0), ``fetched`` = its last fetch (default NOW; DescribeQuorum reports -1 = None for the leader)."""
    lags, fetches = lags_ms or {}, fetched or {}
    voters = tuple(Voter(i, 500 if lags.get(i, 0) == 0 else 400,
                         None if i == leader else fetches.get(i, NOW),
                         NOW if i == leader else (None if lags.get(i, 0) is None else NOW - lags.get(i, 0)))
                   for i in ids)
    return Quorum(leader, 7, 500, voters, tuple(Voter(o, 500) for o in observers), endpoints)


# --- which path a run takes -------------------------------------------------------------------------------------


@pytest.mark.parametrize("roles, controllers, brokers, line", [
    ("all", True, True, "KRaft cluster: roles=all: the controllers first (one at a time, the quorum leader last), "
                        "then the brokers"),
    ("brokers", False, True, "KRaft cluster: roles=brokers"),
    ("controllers", True, False, "KRaft cluster: roles=controllers"),
])
def test_on_kraft_roles_choose_the_rolls(roles, controllers, brokers, line):
    plan = role_plan(roles, [], kraft=True)
    assert (plan.controllers, plan.brokers) == (controllers, brokers)
    assert plan.reason.startswith(line)


def test_roles_all_naming_nodes_of_one_kind_restarts_only_those():
    brokers_only = role_plan("all", [], kraft=True, requested_brokers=[3])
    assert (brokers_only.controllers, brokers_only.brokers) == (False, True)
    assert brokers_only.reason == ("KRaft cluster: roles=all with brokers [3] named and no controllers: those brokers "
                                   "only, no controller restarted (name controllers too, or roles=controllers, to "
                                   "restart them)")
    controllers_only = role_plan("all", [101], kraft=True, requested_brokers=[])
    assert (controllers_only.controllers, controllers_only.brokers) == (True, False)
    assert "those controllers only" in controllers_only.reason
    both = role_plan("all", [101], kraft=True, requested_brokers=[3])
    assert (both.controllers, both.brokers) == (True, True)
    assert (role_plan("controllers", [], kraft=True, requested_brokers=[3]).brokers,
            role_plan("all", [], kraft=False, requested_brokers=[3]).brokers) == (False, True)


@pytest.mark.parametrize("roles", ["all", "brokers"])
def test_zookeeper_mode_rolls_brokers_with_the_controller_last(roles):
    plan = role_plan(roles, [], kraft=False)
    assert (plan.controllers, plan.brokers) == (False, True)
    assert plan.reason.startswith("ZooKeeper mode: the controller is a broker, rolled last")


@pytest.mark.parametrize("roles, named, expected", [
    ("controllers", [], "so roles=controllers cannot be rolled"),
    ("all", [100], r"so controllers=\[100\] cannot be rolled"),
    ("brokers", [100], r"so controllers=\[100\] cannot be rolled"),
])
def test_zookeeper_mode_refuses_controllers(roles, named, expected):
    with pytest.raises(ValueError, match=rf"ZooKeeper mode \(the cluster does not answer DescribeQuorum\): there are "
                                         rf"no KRaft controllers, {expected}.*Nothing was touched"):
        role_plan(roles, named, kraft=False)


def test_contradictory_or_unknown_roles_are_refused():
    with pytest.raises(ValueError, match=r"roles=brokers restarts no controller, but controllers=\[101\]"):
        role_plan("brokers", [101], kraft=True)
    with pytest.raises(ValueError, match=r"roles 'everything': must be one of \['all', 'brokers', 'controllers'\]"):
        role_plan("everything", [], kraft=True)


def test_the_quorum_line_names_leader_voters_and_observers():
    assert describe_quorum_line(quorum()) == ("KRaft cluster: quorum leader 101 (epoch 7), voters 100, 101, 102; "
                                              "observers 1, 2, 3; high watermark 500")
    assert "NO quorum leader (leader id -1)" in describe_quorum_line(quorum(leader=-1))


# --- DescribeQuorum v2 endpoints, ids ---------------------------------------------------------------------------


def test_describe_quorum_v2_nodes_become_endpoints():
    wire = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{
        "partition_index": 0, "error": None, "leader_id": 101, "leader_epoch": 3, "high_watermark": 50,
        "current_voters": [{"replica_id": 100, "replica_directory_id": None, "log_end_offset": 50,
                            "last_fetch_timestamp": 1, "last_caught_up_timestamp": 1}],
        "observers": []}]}],
        "nodes": [{"node_id": 100, "listeners": [{"name": "CONTROLLER", "host": "ctrl-100", "port": 9093},
                                                 {"name": "CONTROLLER_TLS", "host": "ctrl-100", "port": 9094}]},
                  {"node_id": 101, "listeners": [{"name": "CONTROLLER", "host": "ctrl-101", "port": 9093}]}]}
    q = Quorum.from_describe(wire)
    assert q.endpoints[0] == Endpoint(100, "CONTROLLER", "ctrl-100", 9093) and len(q.endpoints) == 3
    assert q.hosts_of(100) == ["ctrl-100"] and q.hosts_of(102) == []
    v1 = Quorum.from_describe({k: v for k, v in wire.items() if k != "nodes"})
    assert v1.endpoints == () and v1.hosts_of(100) == []


def test_has_leader_needs_a_leader_that_is_a_voter():
    assert quorum().has_leader
    assert not quorum(leader=-1).has_leader
    assert not Quorum(7, 1, 0, quorum().voters).has_leader  # an observer cannot lead the quorum


def test_requested_controllers_must_be_voters_once_each():
    q = quorum()
    with pytest.raises(ValueError, match=r"unknown controller ids \[7\]: the quorum's voters are \[100, 101, 102\]"):
        controller_order(q, [100, 7])
    with pytest.raises(ValueError, match=r"controller ids repeated: \[100\]"):
        controller_order(q, [100, 100])
    with pytest.raises(ValueError, match="must be integer node ids"):
        controller_order(q, ["100"])


# --- hosts ------------------------------------------------------------------------------------------------------


def test_hosts_come_from_the_profile_first_then_describe_quorum():
    q = quorum(endpoints=(Endpoint(101, "CONTROLLER", "ctrl-101.dq", 9093), Endpoint(102, "CONTROLLER", "x", 1)))
    hosts = resolve_hosts([100, 101, 102], {100: "ctrl-100.example.com", 102: "ctrl-102.example.com"}, q)
    assert hosts == {100: ("ctrl-100.example.com", "profile controller_hosts"),
                     101: ("ctrl-101.dq", "DescribeQuorum endpoint CONTROLLER"),
                     102: ("ctrl-102.example.com", "profile controller_hosts")}


def test_a_controller_without_a_host_is_named_with_the_profile_field():
    with pytest.raises(ValueError) as err:
        resolve_hosts([100, 101, 102], {100: "h100"}, quorum(), cluster="kafka_prod")
    text = str(err.value)
    assert text.startswith("no host known for controller(s) [101, 102]: connection 'kafka_prod' has no "
                           "controller_hosts entry")
    assert '"controller_hosts": {"101": "<host of controller 101>", "102": "<host of controller 102>"}' in text


# --- the frozen order -------------------------------------------------------------------------------------------


def test_the_plan_puts_followers_by_id_first_and_the_quorum_leader_last():
    plan = plan_controllers(quorum(leader=100), [], {100: "h100", 101: "h101", 102: "h102"})
    assert plan.order == [101, 102, 100]
    assert plan.steps[2] == {"id": 100, "host": "h100", "host_from": "profile controller_hosts", "position": 3,
                             "total": 3, "role": "controller", "leader": True}
    assert "controller 100 goes last: it is the quorum leader (the active controller)" in plan.reasons
    assert controller_items(plan.steps)[2] == {"position": 3, "total": 3, "id": 100, "host": "h100",
                                               "label": "controller 100", "active": True,
                                               "grid_label": "controller 100 (3/3) · active"}
    assert [i["grid_label"] for i in controller_items(plan.steps, dry_run=True)] == [
        "controller 101 (1/3) · dry run", "controller 102 (2/3) · dry run", "controller 100 (3/3) · active · dry run"]


def test_a_requested_subset_keeps_the_leader_last_or_leaves_it_out():
    hosts = {c: f"h{c}" for c in VOTERS}
    assert plan_controllers(quorum(leader=101), [101, 102], hosts).order == [102, 101]
    plan = plan_controllers(quorum(leader=101), [102, 100], hosts)
    assert plan.order == [100, 102] and "the quorum leader 101 is not restarted" in plan.reasons


def test_the_plan_refuses_a_leaderless_quorum_and_notes_lagging_voters():
    hosts = {c: f"h{c}" for c in VOTERS}
    with pytest.raises(ValueError, match="the quorum has no leader now"):
        plan_controllers(quorum(leader=-1), [], hosts)
    plan = plan_controllers(quorum(lags_ms={102: 9000}), [], hosts)
    assert any(r.startswith("voters not caught up now: [102]") for r in plan.reasons)


@pytest.mark.parametrize("ids", [(100,), (100, 101)])
def test_the_plan_refuses_a_quorum_that_cannot_lose_a_voter(ids):
    with pytest.raises(ValueError, match=rf"the quorum has {len(ids)} voter\(s\) .*no majority is left"):
        plan_controllers(quorum(leader=100, ids=ids), [], {c: f"h{c}" for c in ids})


# --- at each turn: the active controller goes last --------------------------------------------------------------


def test_nothing_moves_while_the_leader_is_last_or_done():
    assert leader_last([100, 102, 101], 0, 101) == ([100, 102, 101], None)
    assert leader_last([100, 102, 101], 1, 100) == ([100, 102, 101], None), "the leader is done already"
    assert leader_last([100, 102], 0, 101) == ([100, 102], None), "the leader is not in the roll"


def test_a_leader_that_moved_onto_a_controller_still_to_go_goes_last():
    order, reason = leader_last([100, 102, 101], 1, 102)
    assert order == [100, 101, 102]
    assert reason.startswith("controller 102 is the quorum leader now (the order had it at position 2/3): it goes "
                             "last, controller 101 takes position 2")
    order, _ = leader_last([100, 101, 102, 103, 104], 0, 100)
    assert order == [101, 102, 103, 104, 100]


def test_a_controller_this_roll_began_keeps_its_place():
    assert leader_last([100, 102, 101], 1, 102, begun={102}) == ([100, 102, 101], None)
    order, _ = leader_last([100, 102, 103, 101], 1, 103, begun={102})
    assert order == [100, 102, 101, 103], "the begun controller is finished first, then the leader goes last"


def test_reorder_steps_renumbers_positions():
    steps = ({"id": 100, "position": 1}, {"id": 102, "position": 2}, {"id": 101, "position": 3})
    assert reorder_steps(steps, [100, 101, 102]) == ({"id": 100, "position": 1}, {"id": 101, "position": 2},
                                                     {"id": 102, "position": 3})
    with pytest.raises(ValueError, match="not a permutation"):
        reorder_steps(steps, [100, 101])


def test_the_active_controller_is_not_stopped_while_others_remain():
    q = quorum(leader=101)
    assert must_go_later(q, 101, [102]) == ("controller 101 is the quorum leader (the active controller) and "
                                            "controllers [102] of this roll remain: it goes last")
    assert must_go_later(q, 101, []) is None and must_go_later(q, 101, [101]) is None
    assert must_go_later(q, 102, [101]) is None


# --- gate refusals ----------------------------------------------------------------------------------------------


def test_the_gate_refuses_a_follower_while_another_voter_is_behind():
    q = quorum(leader=101, lags_ms={102: 5400})
    verdict = can_restart_controller(q, 100)
    assert not verdict.ok
    assert "without it 1 of 3 voters caught up (needs 2" in verdict.message()
    assert "lagging: 102" in verdict.message()
    assert can_restart_controller(q, 102).ok, "the voter that is behind may go itself"


def test_the_gate_refuses_when_no_majority_would_stay():
    q = quorum(leader=100, lags_ms={101: None, 102: None, 103: 0, 104: 0}, ids=(100, 101, 102, 103, 104))
    assert not can_restart_controller(q, 103).ok, "5 voters need 3 caught up; without 103 only 100 and 104"
    assert "needs 3" in can_restart_controller(q, 103).message()
    assert can_restart_controller(q, 101).ok


# --- gone and back ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("rc, out, state", [
    (0, "active\n", "running"), (3, "inactive\n", "stopped"), (3, "failed\n", "stopped"),
    (3, "failed: broker exited at startup\n", "stopped"), (4, "", "stopped"), (3, "deactivating\n", "transition"),
    (3, "activating\n", "transition"), (0, "", "running"),
])
def test_service_state_follows_systemctl_is_active(rc, out, state):
    assert service_state(rc, out) == state


def test_back_needs_a_fetch_after_the_start_and_caught_up():
    started = NOW - 5000
    assert controller_back(quorum(fetched={100: NOW}), 100, started).ok
    stale = controller_back(quorum(fetched={100: started - 1}), 100, started)
    assert not stale.ok and "controller 100 has not fetched from the leader 101 since its start at" in stale.message()
    never = controller_back(quorum(fetched={100: None}), 100, started)
    assert not never.ok and "(last fetch: never)" in never.message()
    behind = controller_back(quorum(lags_ms={100: 5000}), 100, started)
    assert not behind.ok and "fetches again but is not caught up (log end 400 of high watermark 500" in \
        behind.message()


def test_back_needs_a_leader_and_a_voter_and_takes_the_leader_as_back():
    started = NOW - 5000
    assert "the quorum has no leader" in controller_back(quorum(leader=-1), 100, started).message()
    assert "is not a voter" in controller_back(quorum(), 7, started).message()
    assert controller_back(quorum(leader=100), 100, started).ok, "the leader reports no fetch of its own"


def test_back_guards_against_a_leader_clock_ahead_with_the_fetch_seen_before_the_stop():
    started = NOW - 5000
    # the leader's clock runs ahead: the old fetch (before the stop) looks later than the worker's start time
    assert controller_back(quorum(fetched={100: NOW - 1000}), 100, started).ok
    assert not controller_back(quorum(fetched={100: NOW - 1000}), 100, started, fetched_before_ms=NOW - 1000).ok
    assert controller_back(quorum(fetched={100: NOW}), 100, started, fetched_before_ms=NOW - 1000).ok


def test_a_voter_back_with_a_new_metadata_log_directory_is_named_with_the_commands_that_put_it_back():
    """A dynamic quorum (KIP-853): the node formatted again fetches as an observer under a new directory id (as Kafka
    4.0 answered DescribeQuorum after ``sandbox replace-metadata-dir``); the voter it was stays silent."""
    started = NOW - 5000
    old, new = "eda73901-4fd6-9f51-8704-bde596549ae2", "5d8e134c-83b5-3e9e-5913-f6301bebc2f8"
    wire = {"topics": [{"partitions": [{
        "leader_id": 100, "leader_epoch": 3, "high_watermark": 500,
        "current_voters": [{"replica_id": 100, "replica_directory_id": "7691d49f-8a85-fa57-7d16-5d52abf62923",
                            "log_end_offset": 500, "last_fetch_timestamp": NOW, "last_caught_up_timestamp": NOW},
                           {"replica_id": 101, "replica_directory_id": old, "log_end_offset": 480,
                            "last_fetch_timestamp": -1, "last_caught_up_timestamp": -1}],
        "observers": [{"replica_id": 101, "replica_directory_id": new, "log_end_offset": 500,
                       "last_fetch_timestamp": NOW - 10, "last_caught_up_timestamp": NOW - 10}]}]}]}
    q = Quorum.from_describe(wire)
    assert q.voter(101).directory_id == old and q.observer(101).directory_id == new
    verdict = controller_back(q, 101, started)
    assert not verdict.ok
    assert ("controller 101 fetches again, but as an observer with a new metadata log directory (directory id "
            f"{directory_id_text(new)}; the voter set has 7ac5AU_Wn1GHBL3lllSa4g)") in verdict.message()
    assert ("remove-controller --controller-id 101 --controller-directory-id 7ac5AU_Wn1GHBL3lllSa4g"
            in verdict.message()) and "add-controller" in verdict.message()
    # an observer entry from before the start is not the node's new life: the plain "not fetched" line
    wire["topics"][0]["partitions"][0]["observers"][0]["last_fetch_timestamp"] = started - 1
    assert "has not fetched from the leader 100 since its start" in controller_back(
        Quorum.from_describe(wire), 101, started).message()


def test_a_gate_names_a_voter_whose_directory_was_replaced_among_the_lagging():
    old, new = "eda73901-4fd6-9f51-8704-bde596549ae2", "5d8e134c-83b5-3e9e-5913-f6301bebc2f8"
    voters = [{"replica_id": c, "replica_directory_id": f"{c}0000000-0000-0000-0000-000000000001",
               "log_end_offset": 500, "last_fetch_timestamp": NOW, "last_caught_up_timestamp": NOW} for c in (100, 102)]
    voters.append({"replica_id": 101, "replica_directory_id": old, "log_end_offset": 480, "last_fetch_timestamp": -1,
                   "last_caught_up_timestamp": -1})
    q = Quorum.from_describe({"leader_id": 100, "high_watermark": 500, "current_voters": voters, "observers": [
        {"replica_id": 101, "replica_directory_id": new, "log_end_offset": 500, "last_fetch_timestamp": NOW,
         "last_caught_up_timestamp": NOW}]})
    verdict = can_restart_controller(q, 102)
    assert not verdict.ok
    assert ("lagging: 101 (never caught up; its metadata log directory was replaced: it fetches as an observer under "
            f"directory id {directory_id_text(new)}, the voter set has 7ac5AU_Wn1GHBL3lllSa4g, log end 480 of 500)"
            ) in verdict.message()


def observed(leader: int = 101, watcher_fetch: int | None = NOW, watcher_caught_up: int | None = NOW) -> Quorum:
    """:func:`quorum` with controller 103 fetching as an observer (a controller not added to the voter set, KIP-853)
    beside brokers 1, 2, 3."""
    q = quorum(leader=leader)
    return Quorum(q.leader_id, q.leader_epoch, q.high_watermark, q.voters,
                  (*q.observers, Voter(103, 500, watcher_fetch, watcher_caught_up)), q.endpoints)


def test_controllers_that_are_observers_come_from_the_connection_and_roll_first():
    q = observed()
    # the connection names 103 a controller; 104 is not an observer (down, or unknown); 1 is a broker it does not name
    assert observer_controllers(q, [100, 101, 102, 103, 104]) == [103]
    assert observer_controllers(q, [100, 101, 102]) == []
    assert controller_order(q, observers=[103]) == [103, 100, 102, 101]
    assert controller_order(q, [101, 103], observers=[103]) == [103, 101]
    with pytest.raises(ValueError, match=r"unknown controller ids \[104\]: the quorum's voters are \[100, 101, 102\]; "
                                         r"controllers that are observers: \[103\]"):
        controller_order(q, [104], observers=[103])
    hosts = {c: f"ctrl-{c}" for c in (100, 101, 102, 103)}
    plan = plan_controllers(q, [], hosts, "prod", observers=[103])
    assert plan.order == [103, 100, 102, 101]
    assert [s.get("observer", False) for s in plan.steps] == [True, False, False, False]
    assert "every voter: [100, 101, 102], and the controllers that are observers: [103]" in plan.reasons
    assert any("controllers [103] go first: they are observers, not voters" in r for r in plan.reasons)
    items = controller_items(plan.steps)
    assert items[0]["grid_label"] == "controller 103 (1/4) · observer" and items[0]["observer"] is True
    assert items[-1]["grid_label"] == "controller 101 (4/4) · active" and "observer" not in items[-1]
    # a quorum of 1 voter: its voter is refused (no majority without it), an observer alone is not
    single = Quorum(100, 1, 500, (Voter(100, 500, None, NOW),), (Voter(103, 500, NOW, NOW),))
    assert plan_controllers(single, [103], hosts, observers=[103]).order == [103]
    with pytest.raises(ValueError, match="the quorum has 1 voter"):
        plan_controllers(single, [], hosts, observers=[103])


def test_an_observer_controller_s_gate_needs_a_leader_and_its_back_needs_a_fresh_caught_up_fetch():
    started = NOW - 5000
    assert observer_gate(observed(), 103).ok
    assert "the quorum has no leader" in observer_gate(observed(leader=-1), 103).message()
    promoted = quorum(ids=(100, 101, 102, 103))
    assert "is a voter now: the voter set changed during the roll" in observer_gate(promoted, 103).message()
    assert controller_back(observed(), 103, started, observer=True).ok
    stale = controller_back(observed(watcher_fetch=started - 1), 103, started, observer=True)
    assert not stale.ok and "controller 103 (an observer) has not fetched from the leader 101 since its start" in \
        stale.message()
    behind = controller_back(observed(watcher_caught_up=NOW - 5000), 103, started, observer=True)
    assert not behind.ok and "fetches again but is not caught up" in behind.message()
    assert not controller_back(observed(), 103, started, fetched_before_ms=NOW, observer=True).ok, \
        "a fetch seen before the stop"
    assert "is a voter now" in controller_back(promoted, 103, started, observer=True).message()
    assert "has not fetched" in controller_back(quorum(), 103, started, observer=True).message(), \
        "not an observer at all"


def test_directory_ids_read_as_kafka_s_tools_print_them():
    # the pair seen on a Kafka 4.1 sandbox: kafka-python's dashed UUID, kafka-metadata-quorum's base64
    assert directory_id_text("eda73901-4fd6-9f51-8704-bde596549ae2") == "7ac5AU_Wn1GHBL3lllSa4g"
    assert directory_id_text("not-a-uuid") == "not-a-uuid"
    static = Quorum.from_describe({"leader_id": 100, "current_voters": [
        {"replica_id": 100, "replica_directory_id": "00000000-0000-0000-0000-000000000000"}]})
    assert static.voter(100).directory_id is None, "a static quorum's voters have no directory id"


# --- resume decisions, in a controller's words ------------------------------------------------------------------

STEPS = tuple({"id": c, "host": f"h{c}", "position": i + 1, "total": 3, "role": "controller"}
              for i, c in enumerate([100, 102, 101]))


def record(**phases: str) -> RollRecord:
    rec = RollRecord("controllers", NOW, STEPS)
    for name, phase in phases.items():
        rec = rec.mark(int(name.removeprefix("c")), phase, NOW, "restarted" if phase == "done" else "")
    return rec


def test_a_finished_controller_is_never_touched_again():
    for step in ("gate", "stop", "wait_gone", "start"):
        d = decide(step, 100, record(c100="done"), True, node="controller")
        assert d.action == "skip" and d.reason.startswith(f"controller 100: skip {step}: finished in roll "
                                                          "'controllers'")


def test_a_controller_this_roll_left_stopped_is_started():
    rec = record(c102="stopped")
    assert decide("gate", 102, rec, False, node="controller").action == "skip"
    assert decide("stop", 102, rec, False, node="controller").action == "skip"
    assert decide("wait_gone", 102, rec, False, node="controller").action == "skip"
    assert decide("start", 102, rec, False, node="controller").act
    assert decide("start", 102, rec, True, node="controller").reason.startswith(
        "controller 102: skip start: already running again")


def test_a_stop_sent_waits_for_the_service_to_stop():
    d = decide("wait_gone", 102, record(c102="stopping"), True, node="controller")
    assert d.act and d.reason == "controller 102: waiting until its service has stopped"
    again = decide("stop", 102, record(c102="stopping"), True, node="controller")
    assert again.act and "but the controller still runs" in again.reason


def test_a_controller_down_that_this_roll_did_not_stop_fails_the_gate():
    d = decide("gate", 100, record(), False, node="controller")
    assert d.action == "fail" and d.reason.startswith("controller 100 is down and roll 'controllers' did not stop it")


def test_turns_name_controllers():
    assert turn(1, record(c100="done"), False, node="controller").reason == "controller 102: its turn (2/3)"
    failed = turn(2, record(c100="done"), True, node="controller")
    assert failed.action == "fail" and failed.reason.startswith("controller 101 NOT touched: controller 102 "
                                                                "(before it in roll 'controllers') did not finish")
    assert turn(1, record(), False).reason == "broker 102: waiting for broker 100 to finish", "brokers as before"


def test_the_partitions_gate_holds_on_offline_and_under_replicated_partitions_not_on_a_leader_imbalance():
    brokers = tuple(Broker(b, f"b{b}", 9092) for b in (1, 2, 3))
    # every partition led by a broker that is not its preferred leader: an imbalance, which a controller ignores
    imbalanced = ClusterState(brokers, tuple(Partition("t", i, 3, (1, 2, 3), (1, 2, 3)) for i in range(4)))
    assert partitions_gate(imbalanced, 100).ok
    assert partitions_gate(imbalanced, 100).message() == "partitions before controller 100: OK"
    down = ClusterState(brokers[:2], (Partition("t", 0, 1, (1, 2, 3), (1, 2)), Partition("u", 0, -1, (3,), (3,))))
    verdict = partitions_gate(down, 101)
    assert not verdict.ok
    assert verdict.message() == ("partitions before controller 101: offline (1): u-0: leader -1 (offline), isr [3] | "
                                 "urp (1): t-0: under-replicated, isr [1, 2] of replicas [1, 2, 3] (missing [3])")
