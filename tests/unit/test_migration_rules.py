"""The ZooKeeper-to-KRaft migration's pure rules (kafka_ops.migration): where a cluster is, what refuses a
migration, each phase's server.properties edit, the rolls' needs-action rules."""

from __future__ import annotations

import javaproperties
import pytest
from kafka_ops import migration, properties_file
from kafka_ops.config_change import DescribedConfig
from kafka_ops.migration import BrokerFacts, BrokerMode, ControllerState, MigrationView, Phase
from kafka_ops.profile import ClusterProfile

CONTROLLERS = {100: "c0", 101: "c1", 102: "c2"}
ZK_FILE = ("# hand-written\nbroker.id=1\nlisteners=PLAINTEXT://b1:9092\nzookeeper.connect=zk:2181/kafka\n"
           "zookeeper.session.timeout.ms=6000\ninter.broker.protocol.version=3.9\nlog.message.format.version=3.9\n"
           "log.dirs=/data\n")


def described(**values: str) -> dict[str, DescribedConfig]:
    return {k.replace("_", "."): DescribedConfig(name=k, value=v, read_only=True, source="STATIC_BROKER_CONFIG")
            for k, v in values.items()}


@pytest.mark.parametrize(("values", "mode"), [
    ({}, BrokerMode.ZOOKEEPER),
    ({"zookeeper_metadata_migration_enable": "true"}, BrokerMode.MIGRATING),
    ({"zookeeper_metadata_migration_enable": "false"}, BrokerMode.ZOOKEEPER),
    ({"process_roles": "broker"}, BrokerMode.KRAFT),
    ({"process_roles": "", "zookeeper_metadata_migration_enable": "true"}, BrokerMode.MIGRATING),
])
def test_a_brokers_mode_comes_from_its_running_config(values, mode):
    assert migration.broker_mode(described(**values)) is mode


def test_a_controllers_state_comes_from_its_api_versions():
    assert migration.controller_state(None) is ControllerState.ABSENT
    assert migration.controller_state({"zk_migration_ready": True}) is ControllerState.MIGRATING
    assert migration.controller_state({"zk_migration_ready": False}) is ControllerState.KRAFT


def view(brokers, controllers, migrated=False, registered=(0, 1, 2)) -> MigrationView:
    return MigrationView(dict(enumerate(brokers)), dict(zip(CONTROLLERS, controllers, strict=True)),
                         {"kraft_metadata_offset": 234, "kraft_controller_id": 101} if migrated else None,
                         {"brokerid": 101 if migrated else 0}, tuple(registered))


Z, M, K = BrokerMode.ZOOKEEPER, BrokerMode.MIGRATING, BrokerMode.KRAFT
A, R, F = ControllerState.ABSENT, ControllerState.MIGRATING, ControllerState.KRAFT


@pytest.mark.parametrize(("v", "phase"), [
    (view([Z, Z, Z], [A, A, A]), Phase.ZOOKEEPER),
    (view([Z, Z, Z], [R, R, A]), Phase.CONTROLLERS),
    (view([M, M, Z], [R, R, R]), Phase.CONTROLLERS),
    (view([M, M, M], [R, R, R]), Phase.CONTROLLERS),  # every broker flagged, the copy not done yet
    (view([M, M, M], [R, R, R], migrated=True), Phase.MIGRATED),
    (view([K, M, M], [R, R, R], migrated=True), Phase.MIGRATED),  # phase 3 under way
    (view([K, K, K], [R, R, R], migrated=True, registered=()), Phase.KRAFT_BROKERS),
    (view([K, K, K], [F, R, R], migrated=True, registered=()), Phase.KRAFT_BROKERS),  # phase 4 under way
    (view([K, K, K], [F, F, F], migrated=True, registered=()), Phase.FINALIZED),
])
def test_the_phase_is_the_last_one_the_cluster_completed(v, phase):
    assert v.phase() is phase
    assert f"phase {int(phase)} done" in v.describe()


def test_metadata_is_migrated_only_when_a_controller_holds_the_controller_znode():
    v = MigrationView({0: M}, {100: R}, {"kraft_metadata_offset": 5, "kraft_controller_id": 100}, {"brokerid": 0})
    assert not v.metadata_migrated(), "a broker still holds /controller"
    v = MigrationView({0: M}, {100: R}, {"kraft_metadata_offset": -1, "kraft_controller_id": 100}, {"brokerid": 100})
    assert not v.metadata_migrated(), "no metadata offset yet"


def facts(bid=0, release="3.9", ibp="3.9-IV0", static=True, mode=Z) -> BrokerFacts:
    return BrokerFacts(bid, release, ibp, static, mode)


def refuse(brokers, hosts=CONTROLLERS, props=None, **kw) -> list[str]:
    args = {"zookeeper": "zk:2181", "cluster_id": "abc", "reassigning": 0, "offline": 0, "urp": 0, **kw}
    return migration.refusals(brokers, hosts, {"log.dirs": "/meta"} if props is None else props, **args)


def test_a_ready_cluster_is_not_refused():
    assert refuse([facts(0), facts(1), facts(2)]) == []


def test_every_precondition_refuses_with_its_reason():
    reasons = refuse([facts(0, release="3.8", ibp="3.8"), facts(1, static=False), facts(2)],
                     hosts={1: "h", 100: "c"}, props={}, reassigning=2, offline=1, urp=3)
    text = " | ".join(reasons)
    assert "brokers must run Kafka 3.9.x to migrate (the bridge release): brokers 0 (3.8)" in text
    assert "inter.broker.protocol.version must be 3.9 on every broker before the migration" in text and \
           "brokers 0 (3.8)" in text
    assert "brokers [1] have no broker.id in server.properties" in text
    assert "controller node ids [1] are broker ids too" in text
    assert "controller_properties name no log.dirs" in text
    assert "2 partition reassignments are running" in text and "1 partitions are offline" in text
    assert "3 partitions are under-replicated" in text
    assert "lists no controller_hosts" in " ".join(refuse([facts()], hosts={}))
    assert "names no zookeeper" in " ".join(refuse([facts()], zookeeper=None))
    assert "no /cluster/id" in " ".join(refuse([facts()], cluster_id=None))


def test_kraft_brokers_are_not_judged_by_release_or_ibp():
    """A resumed migration: brokers already KRaft report no IBP."""
    assert refuse([facts(0, ibp="", mode=K, release="3.9"), facts(1, mode=M)]) == []


def test_broker_facts_read_the_ibp_and_whether_broker_id_was_set():
    entries = described(inter_broker_protocol_version="3.9-IV0")
    entries["broker.id"] = DescribedConfig(name="broker.id", value="1", read_only=True, source="DEFAULT_CONFIG")
    f = BrokerFacts.read(1, entries, "3.9")
    assert (f.ibp, f.broker_id_static, f.mode) == ("3.9-IV0", False, Z)


def test_the_controller_file_holds_the_migration_keys_and_the_profiles_own():
    text = migration.controller_file(101, "c1", CONTROLLERS, {"log.dirs": "/var/meta/{broker_id}",
                                                              "listeners": "CONTROLLER://{host}:9094"},
                                     zookeeper="zk:2181/kafka", inter_broker_listener="INTERNAL",
                                     protocol_map="INTERNAL:SSL")
    props = javaproperties.loads(text)
    assert props["process.roles"] == "controller" and props["node.id"] == "101"
    assert props["controller.quorum.voters"] == "100@c0:9094,101@c1:9094,102@c2:9094"
    assert props["listeners"] == "CONTROLLER://c1:9094" and props["log.dirs"] == "/var/meta/101"
    assert props["listener.security.protocol.map"] == "INTERNAL:SSL,CONTROLLER:PLAINTEXT"
    assert props["inter.broker.listener.name"] == "INTERNAL"
    assert props["zookeeper.connect"] == "zk:2181/kafka" and props[migration.FLAG] == "true"
    assert migration.controller_port({"listeners": "CONTROLLER://{host}:9094"}) == 9094
    assert migration.controller_port({}) == 9093


def apply(text: str, edits) -> dict[str, str]:
    return properties_file.parse(properties_file.edit(text, edits))


def test_phase_2_adds_the_flag_and_the_quorum_and_keeps_the_rest():
    edits = migration.broker_migrating_edits(properties_file.parse(ZK_FILE), CONTROLLERS, 9093)
    new = properties_file.edit(ZK_FILE, edits)
    assert new.startswith("# hand-written\nbroker.id=1\n"), "comments and order kept"
    props = properties_file.parse(new)
    assert props[migration.FLAG] == "true" and props["controller.listener.names"] == "CONTROLLER"
    assert props["listener.security.protocol.map"].endswith(",CONTROLLER:PLAINTEXT")
    assert props["zookeeper.connect"] == "zk:2181/kafka"
    assert properties_file.edit(new, migration.broker_migrating_edits(props, CONTROLLERS, 9093)) == new, \
        "a second edit changes nothing (a resumed roll writes nothing twice)"


def test_phase_3_makes_a_kraft_broker_with_its_old_id():
    migrating = apply(ZK_FILE, migration.broker_migrating_edits(properties_file.parse(ZK_FILE), CONTROLLERS, 9093))
    text = javaproperties.dumps({**migrating, "authorizer.class.name": migration.ZK_AUTHORIZER}, timestamp=False)
    props = apply(text, migration.broker_kraft_edits(properties_file.parse(text)))
    assert props["process.roles"] == "broker" and props["node.id"] == "1"
    assert not [k for k in props if k.startswith("zookeeper.") or k in migration.ZOOKEEPER_ONLY]
    assert props["authorizer.class.name"] == migration.KRAFT_AUTHORIZER
    assert props["controller.quorum.voters"].startswith("100@c0:9093")
    with pytest.raises(ValueError, match="no broker.id"):
        migration.broker_kraft_edits({"listeners": "x"})


def test_phase_4_removes_the_flag_and_zookeeper_from_a_controller():
    edits = migration.controller_finalized_edits({"process.roles": "controller", migration.FLAG: "true",
                                                  "zookeeper.connect": "zk", "zookeeper.ssl.client.enable": "false"})
    assert edits == {migration.FLAG: None, "zookeeper.connect": None, "zookeeper.ssl.client.enable": None}


def test_a_revert_restores_zookeeper_mode_from_the_backup_or_the_profile():
    kraft = {"process.roles": "broker", "node.id": "1", "listeners": "PLAINTEXT://b1:9092",
             "authorizer.class.name": migration.KRAFT_AUTHORIZER}
    edits = migration.broker_back_to_zookeeper_edits(kraft, properties_file.parse(ZK_FILE), zookeeper="other:2181")
    assert edits["process.roles"] is None and edits["node.id"] is None and edits["broker.id"] == "1"
    assert edits["zookeeper.connect"] == "zk:2181/kafka", "the backup's value, chroot included"
    assert edits["zookeeper.session.timeout.ms"] == "6000" and edits["inter.broker.protocol.version"] == "3.9"
    assert edits[migration.FLAG] == "true" and edits["authorizer.class.name"] == migration.ZK_AUTHORIZER
    bare = migration.broker_back_to_zookeeper_edits(kraft, None, zookeeper="other:2181")
    assert bare["zookeeper.connect"] == "other:2181" and bare["inter.broker.protocol.version"] == "3.9"
    assert migration.is_zookeeper_file(properties_file.parse(ZK_FILE)) and not migration.is_zookeeper_file(kraft)


def test_the_revert_drops_the_flag_and_the_controller_listener():
    props = {migration.FLAG: "true", "controller.quorum.voters": "v", "controller.listener.names": "CONTROLLER",
             "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"}
    edits = migration.broker_flag_removed_edits(props)
    assert edits[migration.FLAG] is None and edits["controller.quorum.voters"] is None
    assert edits["listener.security.protocol.map"] == "PLAINTEXT:PLAINTEXT"


@pytest.mark.parametrize(("rule", "mode", "act"), [
    (migration.needs_flag, Z, True), (migration.needs_flag, M, False), (migration.needs_flag, K, False),
    (migration.needs_kraft, M, True), (migration.needs_kraft, K, False), (migration.needs_kraft, Z, False),
    (migration.needs_zookeeper, K, True), (migration.needs_zookeeper, M, False),
    (migration.needs_flag_removed, M, True), (migration.needs_flag_removed, Z, False),
    (migration.needs_flag_removed, K, False),
])
def test_each_roll_restarts_only_the_brokers_not_yet_where_its_phase_wants_them(rule, mode, act):
    decided, reason = rule(1, {"mode": mode.value}, {})
    assert decided is act and reason


def test_the_finalize_roll_restarts_only_controllers_still_migrating():
    assert migration.needs_finalize(100, {"migration_ready": True}, {})[0] is True
    assert migration.needs_finalize(100, {"migration_ready": False}, {})[0] is False


def test_a_finalized_controller_refuses_the_revert():
    assert migration.revert_refusal(view([K, K, K], [R, R, R], migrated=True)) is None
    assert "no way back" in migration.revert_refusal(view([K, K, K], [F, R, R], migrated=True))


def test_the_profile_lists_the_controllers_addresses_and_their_properties():
    profile = ClusterProfile.from_connection_fields("c", "b:9092", {
        "controller_hosts": {"101": "c1", "100": "c0"},
        "controller_properties": {"listeners": "CONTROLLER://{host}:9095", "log.dirs": "/meta"}})
    assert profile.controller_addresses() == ["c0:9095", "c1:9095"]
    assert profile.controller_properties["log.dirs"] == "/meta"
    with pytest.raises(ValueError, match="controller_properties"):
        ClusterProfile.from_connection_fields("c", "b:9092", {"controller_properties": {"log.dirs": 5}})


def test_each_step_end_is_read_from_the_view():
    assert view([M, M, M], [R, R, R], migrated=True).shows("migrated")
    assert not view([M, M, Z], [R, R, R], migrated=True).shows("migrated"), "a broker without the flag"
    assert not view([K, K, K], [R, R, R], migrated=True).shows("kraft_brokers"), "still registered in ZooKeeper"
    assert view([K, K, K], [R, R, R], migrated=True, registered=()).shows("kraft_brokers")
    assert view([K, K, K], [F, F, F], migrated=True, registered=()).shows("finalized")
    assert view([Z, Z, Z], [A, A, A]).shows("zookeeper")
    assert not view([Z, Z, Z], [A, R, A]).shows("zookeeper"), "a controller still answers"
    assert not view([Z, Z, Z], [A, A, A], migrated=True).shows("zookeeper"), "/migration left behind"
    with pytest.raises(ValueError):
        view([Z], [A, A, A]).shows("done")


def test_a_new_zookeeper_controller_is_settled_once_every_broker_names_it():
    settled = migration.broker_controller_settled
    assert settled(-1, {0: 100, 1: 100}) == (False, "no broker holds /controller yet")
    ok, seen = settled(0, {0: 0, 1: 0, 2: 0})
    assert ok and seen == "/controller held by broker 0, and every broker names it (3 brokers)"
    # broker 1 has not applied the new controller's UpdateMetadata: it still names the stopped KRaft controller
    ok, seen = settled(0, {0: 0, 1: 100, 2: 0})
    assert not ok and seen == "/controller held by broker 0; broker 1 names controller 100"
    ok, seen = settled(2, {0: 2, 1: None, 2: 2})
    assert not ok and seen == "/controller held by broker 2; broker 1 did not answer Metadata"
    assert settled(2, {0: -1, 1: 2, 2: 2})[0] is False, "a broker naming no controller yet is not settled"


def test_controller_epoch_floor_raises_to_the_kraft_epoch_only_when_it_is_ahead():
    # the KRaft controller's partition states name its epoch 7; a ZooKeeper controller at 4 + 1 would abort
    # their elections (KAFKA-20488), so /controller_epoch goes to 7 (the next controller is 8)
    assert migration.controller_epoch_floor(4, {"kraftControllerId": 101, "kraftControllerEpoch": 7}) == 7
    assert migration.controller_epoch_floor(6, {"kraftControllerEpoch": 7}) == 7
    # already at or past it: kept
    assert migration.controller_epoch_floor(7, {"kraftControllerEpoch": 7}) is None
    assert migration.controller_epoch_floor(9, {"kraftControllerEpoch": 7}) is None
    # a ZooKeeper-mode controller's /controller (no KRaft epoch), or none at all: kept
    assert migration.controller_epoch_floor(3, {"brokerid": 0, "version": 2}) is None
    assert migration.controller_epoch_floor(3, None) is None
