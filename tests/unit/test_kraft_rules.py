"""KRaft rules without servers: which controller may be restarted (``kafka_ops.quorum``, Strimzi's rule on
DescribeQuorum's caught-up timestamps) and metadata.version names and bumps (``kafka_ops.metadata_version``,
Kafka's MetadataVersion table and UpdateFeatures rules)."""

from __future__ import annotations

import pytest
from kafka_ops.metadata_version import MetadataVersion, MetadataVersionError, check_bump, parse, safe_downgrade
from kafka_ops.quorum import Quorum, Voter, can_restart_controller, caught_up, controller_order, majority


def quorum(leader=3000, lags_ms=(0, 0, 0), ids=(3000, 3001, 3002), now=1_000_000) -> Quorum:
    """Voters whose last caught-up time is ``lags_ms`` before the leader's (None = never)."""
    return Quorum(leader, 7, 500, tuple(Voter(i, 500 if lag == 0 else 400, now, None if lag is None else now - lag)
                                        for i, lag in zip(ids, lags_ms, strict=True)))


def test_a_follower_may_go_when_the_others_keep_a_majority():
    q = quorum()
    assert caught_up(q) == {3000, 3001, 3002}
    assert can_restart_controller(q, 3001).ok and can_restart_controller(q, 3000).ok
    assert majority(3) == 2 and majority(4) == 3 and majority(5) == 3


def test_no_controller_may_go_when_that_would_leave_no_caught_up_majority():
    q = quorum(lags_ms=(0, 0, 5400))  # 3002 fell 5.4 s behind (fetch timeout 2 s)
    assert caught_up(q) == {3000, 3001}
    verdict = can_restart_controller(q, 3001)
    assert not verdict.ok
    assert "without it 1 of 3 voters caught up (needs 2" in verdict.message()
    assert "lagging: 3002 (last caught up 5400 ms before the leader, log end 400 of 500)" in verdict.message()
    assert can_restart_controller(q, 3002).ok, "the lagging voter itself may go: 2 of 3 stay caught up"
    assert can_restart_controller(q, 3001, fetch_timeout_ms=10_000).ok, "within a longer fetch timeout"
    never = quorum(lags_ms=(0, 0, None))
    assert "never caught up" in can_restart_controller(never, 3001).message()


def test_unknown_controllers_and_a_leaderless_quorum_are_refused():
    assert "not a voter" in can_restart_controller(quorum(), 7).message()
    assert "no leader" in can_restart_controller(quorum(leader=-1), 3001).message()


def test_controller_order_is_followers_first_active_controller_last():
    q = quorum(leader=3001)
    assert controller_order(q) == [3000, 3002, 3001]
    assert controller_order(q, [3002, 3001, 3000], keep_order=True) == [3002, 3000, 3001]
    assert controller_order(q, [3000]) == [3000]
    with pytest.raises(ValueError, match=r"unknown controller ids \[9\]: the quorum's voters are \[3000, 3001, 3002\]"):
        controller_order(q, [9])


def test_quorum_from_a_describe_quorum_answer_on_the_wire_and_flat():
    wire = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{
        "partition_index": 0, "leader_id": 3001, "leader_epoch": 4, "high_watermark": 900,
        "current_voters": [{"replica_id": 3000, "log_end_offset": 900, "last_fetch_timestamp": 10,
                            "last_caught_up_timestamp": 10},
                           {"replica_id": 3001, "log_end_offset": 900, "last_fetch_timestamp": -1,
                            "last_caught_up_timestamp": -1}],
        "observers": [{"replica_id": 0, "log_end_offset": 880}]}]}]}
    q = Quorum.from_describe(wire)
    assert (q.leader_id, q.leader_epoch, q.high_watermark, q.voter_ids) == (3001, 4, 900, [3000, 3001])
    assert q.voter(3001).last_caught_up_ms is None and q.observers[0].replica_id == 0
    flat = Quorum.from_describe(wire["topics"][0]["partitions"][0])
    assert flat == q
    with pytest.raises(ValueError, match="without a partition"):
        Quorum.from_describe({"topics": []})


@pytest.mark.parametrize("text, level, name", [
    ("3.7-IV4", 19, "3.7-IV4"), ("3.7", 19, "3.7-IV4"), ("19", 19, "3.7-IV4"), ("4.0", 25, "4.0-IV3"),
    ("3.3-IV3", 7, "3.3-IV3"), (" 3.9 ", 21, "3.9-IV0"),
])
def test_metadata_version_names(text, level, name):
    mv = parse(text)
    assert mv.level == level and mv.name == name and str(mv) == f"{name} (level {level})"


@pytest.mark.parametrize("text, message", [
    ("3.7-IV9", "unknown"), ("2.8", "unknown"), ("3", "level 3 is unknown"), ("v3.7", "malformed"), ("", "malformed"),
])
def test_malformed_or_unknown_metadata_versions_are_refused(text, message):
    with pytest.raises(MetadataVersionError, match=message):
        parse(text)


def test_a_bump_needs_every_node_to_support_the_target():
    assert check_bump(parse("3.7"), parse("3.9"), {1: 21, 2: 21, 3000: 21}) == []
    reasons = check_bump(parse("3.7"), parse("3.9"), {1: 21, 2: 19, 3000: 19})
    assert reasons == ["3.9-IV0 (level 21) is above what the binaries of nodes [2, 3000] support (up to 2: 3.7-IV4 "
                       "(level 19), 3000: 3.7-IV4 (level 19)): roll the new binaries first"]


def test_downgrades_need_the_flag_and_must_be_safe():
    assert "needs allow_downgrade" in check_bump(parse("3.9"), parse("3.8"), {1: 21})[0]
    assert check_bump(parse("3.9"), parse("3.8"), {1: 21}, allow_downgrade=True) == []
    assert safe_downgrade(parse("3.9"), parse("3.7-IV3")) and not safe_downgrade(parse("3.7-IV2"), parse("3.7-IV1"))
    unsafe = check_bump(parse("4.0-IV1"), parse("3.9"), {1: 25}, allow_downgrade=True)
    assert unsafe and "would lose metadata (4.0-IV1 changed its format)" in unsafe[0]
    assert MetadataVersion(99).name == "level 99"


def test_combined_nodes_are_the_voters_that_are_registered_brokers_too():
    from kafka_ops.quorum import combined_in_controller_roll, combined_nodes

    quorum = Quorum(1, 4, 900, (Voter(0), Voter(1), Voter(2)))
    assert combined_nodes(quorum, [3, 4, 5]) == []
    assert combined_nodes(quorum, [5, 2, 0, 4]) == [0, 2]
    said = combined_in_controller_roll([2, 0], quorum)
    assert said.startswith("nodes [0, 2] are KRaft controllers (voters of the metadata quorum [0, 1, 2], leader 1) "
                           "and brokers at once (combined mode, process.roles=broker,controller): they roll with the "
                           "brokers")
    assert said.endswith("Nothing was touched")
