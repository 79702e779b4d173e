"""The KRaft upgrade's tasks without servers: the ``metadata_version`` step (``operators.metadata_version``), the
approval's KRaft path (``operators.upgrade_approval``), ``check_upgrade``'s mode detection and refusals
(``operators.upgrade_checks``) and a roll of one mode only (``operators.roll_plan``, ``only_in``).

:class:`FakeFeatures` stands in for the cluster: brokers 0-2 reporting a finalized ``metadata.version`` and the
range their binaries support (ApiVersions), and an active controller that applies UpdateFeatures the way the
sandbox and Kafka do (refused with INVALID_UPDATE_VERSION naming the first node that does not support the
level; a validate-only request changes nothing).
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowFailException
from kafka_ops.cluster import Broker, ClusterState, Registration
from kafka_ops.profile import ClusterProfile
from kafka_ops.quorum import Quorum, Voter
from operators import metadata_version as step
from operators import node_roll, roll_plan, upgrade_checks
from operators.upgrade_approval import ProtocolBumpApprovalOperator
from runtime import profiles

PROFILE = ClusterProfile.from_connection_fields("kafka_kraft", "b1:9092", {
    "ssh_conn_id": "ssh", "kafka_home": "/opt/kafka", "server_properties": "/etc/kafka/server.properties",
    "controller_hosts": {"100": "h100", "101": "h101", "102": "h102"}})
SETTINGS = {"cluster": "kafka_kraft", "target_version": "4.1.0", "metadata_version": None,
            "phases": ["pin", "binaries", "ibp", "lmf", "metadata_version"], "dry_run": False,
            "healthcheck_interval_s": 0.01, "healthcheck_timeout_s": 2}


#: The other features a cluster formatted by Kafka 4.0 finalizes (its defaults at 4.0-IV3; ELR 0 is left out
#: of ApiVersions, as Kafka leaves out every feature at level 0).
FEATURES_4_0 = {"group.version": 1, "transaction.version": 2, "kraft.version": 0}
#: The levels the binaries of Kafka 4.1 support (ApiVersions SupportedFeatures).
SUPPORT_4_1 = {"group.version": (0, 1), "transaction.version": (0, 2), "eligible.leader.replicas.version": (0, 1),
               "kraft.version": (0, 1)}


class FakeFeatures:
    """Brokers 0, 1, 2 (finalized level, supported max; the other features, cluster-wide, and the levels the
    binaries support) and controllers (supported max), see the module docstring; ``sent`` records every
    UpdateFeatures as (levels, validate_only)."""

    def __init__(self, finalized: int = 25, brokers_max: int = 27, controllers_max: int = 27,
                 kraft: bool = True) -> None:
        self.finalized = {b: finalized for b in (0, 1, 2)}
        self.supported = {b: brokers_max for b in (0, 1, 2)}
        self.controllers = {c: controllers_max for c in (100, 101, 102)}
        self.features = {b: dict(FEATURES_4_0) for b in (0, 1, 2)}
        self.feature_support = {b: dict(SUPPORT_4_1) for b in (0, 1, 2)}
        self.kraft = kraft
        self.sent: list[Any] = []
        self.applied: dict[str, int] = {}
        self.lagging_polls = 0  # brokers answer the old levels this many more times after an update
        # min.insync.replicas: each broker's layers (DescribeConfigs synonyms) and each controller's own answer
        self.broker_layers = {b: {"value": "2", "STATIC_BROKER_CONFIG": "2", "DEFAULT_CONFIG": "1"} for b in (0, 1, 2)}
        self.controller_layers: dict[int, dict | Exception] = {
            c: {"value": "2", "STATIC_BROKER_CONFIG": "2", "DEFAULT_CONFIG": "1"} for c in (100, 101, 102)}
        self.asked_controllers: list[tuple[str, int]] = []
        # brokers registered with the controller but fenced (down; Metadata leaves them out): id -> supported max
        self.fenced: dict[int, int] = {}

    def update(self, levels: dict[str, int], validate_only: bool = False) -> str:
        self.sent.append((dict(levels), validate_only))
        level = levels.get("metadata.version")
        registered = {**self.supported, **self.fenced}  # the controller checks every registration, fenced too
        for role, nodes in (("Broker", registered), ("Controller", self.controllers)):
            for node, top in sorted(nodes.items()):
                if level is not None and level > top:
                    return (f"InvalidUpdateVersionError: Invalid update version {level} for feature metadata.version. "
                            f"{role} {node} only supports versions 7-{top}")
        for feature, wanted in sorted(levels.items()):
            for node, spans in sorted(self.feature_support.items()):
                top = spans.get(feature, (0, 0))[1]
                if feature != "metadata.version" and wanted > top:
                    return (f"InvalidUpdateVersionError: Invalid update version {wanted} for feature {feature}. "
                            f"Broker {node} only supports versions 0-{top}")
        if not validate_only:
            self.applied = dict(levels)
            self.lagging_polls = 1
        return "OK"

    def answer(self, brokers: list[int]) -> dict[int, dict]:
        if self.applied:
            if self.lagging_polls:
                self.lagging_polls -= 1
            else:
                for b in self.finalized:
                    self.finalized[b] = self.applied.get("metadata.version", self.finalized[b])
                    self.features[b].update({f: lv for f, lv in self.applied.items() if f != "metadata.version"})
                self.applied = {}
        return {b: {"finalized": self.finalized[b], "supported": (7, self.supported[b]),
                    "features": {**{f: lv for f, lv in self.features[b].items() if lv},
                                 "metadata.version": self.finalized[b]},
                    "feature_support": {**self.feature_support[b], "metadata.version": (7, self.supported[b])}}
                for b in brokers}


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeFeatures:
    fake = FakeFeatures()

    class Admin:
        def __init__(self, profile: Any = None, **kwargs: Any) -> None:
            pass

        def __enter__(self) -> Admin:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def is_kraft(self) -> bool:
            return fake.kraft

        def cluster_state(self, configs: bool = True, **_: Any) -> ClusterState:
            return ClusterState(tuple(Broker(b, f"b{b}", 9092) for b in (0, 1, 2)), (), controller_id=0)

        def broker_features(self, brokers: Any) -> dict[int, dict]:
            return fake.answer(list(brokers))

        def broker_registrations(self) -> list[Registration]:
            return [Registration(Broker(b, f"b{b}", 9092), b in fake.fenced) for b in (0, 1, 2, *fake.fenced)]

        def update_features(self, levels: dict[str, int], *, validate_only: bool = False) -> str:
            return fake.update(levels, validate_only)

        def describe_quorum(self) -> Quorum:
            return Quorum(101, 3, 500, tuple(Voter(c, 500) for c in (100, 101, 102)), ())

        def broker_config_layers(self, name: str, brokers: Any) -> dict[int, dict]:
            assert name == "min.insync.replicas"
            return {b: dict(fake.broker_layers[b]) for b in brokers}

        def controller_config_layers(self, address: str, node_id: int, name: str,
                                     broker_listener: bool = False) -> dict:
            assert name == "min.insync.replicas"
            fake.asked_controllers.append((address, node_id))
            found = fake.controller_layers[node_id]
            if isinstance(found, Exception):
                raise found
            return dict(found)

    for module in (step, roll_plan, upgrade_checks):
        monkeypatch.setattr(module, "KafkaAdminHook", Admin)
    monkeypatch.setattr(profiles, "profile_or_fail", lambda conn_id: PROFILE)
    monkeypatch.setattr(step, "ensure_held", lambda profile, context, operation, log: fake.sent.append("held"))
    return fake


def run_step(**settings: Any) -> dict:
    op = step.MetadataVersionOperator(task_id="metadata_version", settings={**SETTINGS, **settings})
    return op.execute({"params": {}})


def test_the_step_bumps_then_waits_until_every_broker_reports_the_level(cluster, capfd):
    assert run_step() == {"action": "bumped", "from": 25, "to": 27,
                          "features": {"eligible.leader.replicas.version": [0, 1]}}
    assert cluster.sent == ["held", ({"metadata.version": 27, "eligible.leader.replicas.version": 1}, False)], \
        "the lock checked, then one UpdateFeatures with metadata.version and the release's new feature level"
    out = capfd.readouterr().out
    assert "metadata.version 4.0-IV3 (25) -> 4.1-IV1 (27); eligible.leader.replicas.version 0 -> 1" in out
    assert "group.version 1: at or above its default for 4.1-IV1 already" in out
    assert "kraft.version stays at 0: raising it makes a static quorum dynamic (KIP-853)" in out
    assert "not yet on 0 (finalized 25)" in out, "a broker behind the controller for a moment is waited for"
    assert ("verified: metadata.version 4.1-IV1 (27) finalized on every broker: 0, 1, 2; "
            "eligible.leader.replicas.version 1, group.version 1, transaction.version 2 finalized on every broker: "
            "0, 1, 2") in out
    assert cluster.features[0] == {"group.version": 1, "transaction.version": 2, "kraft.version": 0,
                                   "eligible.leader.replicas.version": 1}, "kraft.version left alone"
    # a resumed run finds it done: verified, nothing sent again
    cluster.sent.clear()
    assert run_step()["action"] == "already" and cluster.sent == []


def test_without_release_features_only_metadata_version_is_finalized(cluster, capfd):
    assert run_step(release_features=False) == {"action": "bumped", "from": 25, "to": 27, "features": {}}
    assert cluster.sent == ["held", ({"metadata.version": 27}, False)]
    assert "eligible.leader.replicas.version" not in cluster.features[0]
    # a later run with the default raises only what is left, metadata.version being done
    cluster.sent.clear()
    assert run_step()["features"] == {"eligible.leader.replicas.version": [0, 1]}
    assert cluster.sent == ["held", ({"eligible.leader.replicas.version": 1}, False)]
    assert "KRaft cluster: eligible.leader.replicas.version 0 -> 1 (UpdateFeatures" in capfd.readouterr().out


def test_features_below_their_defaults_are_raised_and_those_above_are_never_lowered(cluster):
    for b in (0, 1, 2):
        cluster.features[b] = {"group.version": 0, "transaction.version": 1, "kraft.version": 1}
    result = run_step(metadata_version="4.0")
    assert result["features"] == {"group.version": [0, 1], "transaction.version": [1, 2]}
    assert cluster.sent[-1] == ({"group.version": 1, "transaction.version": 2}, False), \
        "metadata.version is 4.0-IV3 already: only the features; ELR's default at 4.0 is 0, kraft.version alone"


def test_a_feature_level_a_brokers_binaries_lack_is_named_and_nothing_is_sent(cluster):
    cluster.feature_support[2].pop("eligible.leader.replicas.version")
    with pytest.raises(AirflowFailException) as failed:
        run_step()
    assert ("eligible.leader.replicas.version 1 (the default of 4.1-IV1) is above what the binaries of brokers [2] "
            "support (2: not at all)") in str(failed.value)
    assert "not sent (nothing was touched)" in str(failed.value)
    assert cluster.sent == []


def test_brokers_whose_binaries_lack_the_level_are_named_and_nothing_is_sent(cluster):
    cluster.supported = {0: 25, 1: 27, 2: 25}
    with pytest.raises(AirflowFailException) as failed:
        run_step()
    assert str(failed.value).startswith(
        "metadata.version 4.0-IV3 (25) -> 4.1-IV1 (27); eligible.leader.replicas.version 0 -> 1 not sent (nothing was "
        "touched): 4.1-IV1 (level 27) is above "
        "what the binaries of nodes [0, 2] support (up to 0: 4.0-IV3 (level 25), 2: 4.0-IV3 (level 25)): roll the "
        "new binaries first")
    assert "roll the binaries of Kafka 4.1.0 first (phase binaries)" in str(failed.value)
    assert cluster.sent == [] and cluster.finalized == {0: 25, 1: 25, 2: 25}


def test_a_controller_the_brokers_cannot_see_is_named_from_the_controllers_refusal(cluster):
    cluster.controllers[101] = 25
    with pytest.raises(AirflowFailException) as failed:
        run_step()
    message = str(failed.value)
    assert "refused by the controller (nothing was changed)" in message
    assert "controller 101 supports only up to 4.0-IV3 (level 25): roll the binaries of Kafka 4.1.0 on it first" \
        in message
    assert cluster.finalized == {0: 25, 1: 25, 2: 25}


def test_a_fenced_broker_the_controller_names_gets_start_or_unregister_as_its_remedy(cluster):
    cluster.fenced[3] = 25  # stopped on 4.0: Metadata leaves it out, the controller still counts it
    with pytest.raises(AirflowFailException) as failed:
        run_step()
    message = str(failed.value)
    assert "refused by the controller (nothing was changed): InvalidUpdateVersionError" in message
    assert "broker 3 supports only up to 4.0-IV3 (level 25) and is not running (a fenced registration): start it " \
           "so that a roll upgrades it, or, if it is gone for good, unregister it (kafka-cluster.sh unregister " \
           "--id 3)" in message
    assert "roll the binaries of Kafka 4.1.0 on it first" not in message
    assert cluster.finalized == {0: 25, 1: 25, 2: 25}


def test_a_dry_run_asks_the_controller_to_validate_only(cluster, capfd):
    cluster.supported = {0: 25, 1: 25, 2: 25}
    assert run_step(dry_run=True)["action"] == "dry run"
    assert cluster.sent == [({"metadata.version": 27, "eligible.leader.replicas.version": 1}, True)], \
        "validate_only, no lock needed, nothing applied"
    out = capfd.readouterr().out
    assert "DRY RUN: would send UpdateFeatures eligible.leader.replicas.version=1, metadata.version=27 (UPGRADE)" in out
    assert "Broker 0 only supports versions 7-25" in out and cluster.finalized[0] == 25


def test_turning_elr_on_is_refused_when_it_would_change_the_brokers_min_insync_replicas(cluster, capfd):
    """Kafka writes the active controller's static min.insync.replicas as the cluster-level one when ELR goes on
    (none set); controllers that leave it at Kafka's default 1 under brokers with 2 would lower it silently."""
    cluster.controller_layers[101] = {"value": "1", "DEFAULT_CONFIG": "1"}
    with pytest.raises(AirflowFailException) as failed:
        run_step()
    message = str(failed.value)
    assert message.startswith("metadata.version 4.0-IV3 (25) -> 4.1-IV1 (27); eligible.leader.replicas.version "
                              "0 -> 1 not sent (nothing was touched): raising eligible.leader.replicas.version to 1 "
                              "(ELR, KIP-966) would change min.insync.replicas of every topic without its own: Kafka "
                              "sets the cluster-level min.insync.replicas (none is set) to the active controller "
                              "101's static value, 1, and removes broker-level values; brokers 0, 1, 2 use 2 now")
    assert 'kafka_config_change with scope "cluster" and changes {"min.insync.replicas": "2"}' in message
    assert cluster.sent == [] and cluster.finalized == {0: 25, 1: 25, 2: 25}
    assert cluster.asked_controllers == [("h101:9093", 101)], "the quorum leader, at its CONTROLLER listener"
    assert "min.insync.replicas would become 1 when ELR is turned on" in capfd.readouterr().out
    # a dry run says so too, and sends only its validate_only request
    assert run_step(dry_run=True)["action"] == "dry run"
    assert "but it would be refused: raising eligible.leader.replicas.version to 1" in capfd.readouterr().out
    assert cluster.sent == [({"metadata.version": 27, "eligible.leader.replicas.version": 1}, True)]
    # the operator sets the cluster-level value (kafka_config_change, scope cluster): Kafka keeps it, the step goes on
    cluster.sent.clear()
    for b in (0, 1, 2):
        cluster.broker_layers[b] = {"value": "2", "DYNAMIC_DEFAULT_BROKER_CONFIG": "2", "STATIC_BROKER_CONFIG": "2",
                                    "DEFAULT_CONFIG": "1"}
    assert run_step()["action"] == "bumped"
    assert "min.insync.replicas stays 2 when ELR is turned on (the cluster-level value, kept): brokers 0, 1, 2 use 2" \
        in capfd.readouterr().out


def test_an_elr_outcome_that_cannot_be_known_is_refused_and_no_elr_raise_reads_nothing(cluster):
    from kafka.errors import KafkaConnectionError

    cluster.controller_layers[101] = KafkaConnectionError("no answer from h101:9093")
    with pytest.raises(AirflowFailException, match=r"to the active controller 101's static value, which could not "
                                                   r"be read \(KafkaConnectionError: .*no answer from h101:9093\); "
                                                   r"brokers 0, 1, 2 use 2 now"):
        run_step()
    assert cluster.sent == []
    # without the release's features (ELR stays off) nothing about min.insync.replicas is asked
    cluster.asked_controllers.clear()
    assert run_step(release_features=False)["action"] == "bumped" and cluster.asked_controllers == []


def test_check_upgrade_refuses_an_elr_raise_that_changes_a_brokers_min_insync_replicas(cluster, hosts, capfd):
    # a per-broker dynamic value (kafka-configs --entity-name 0), which turning ELR on removes
    cluster.broker_layers[0] = {"value": "3", "DYNAMIC_BROKER_CONFIG": "3", "STATIC_BROKER_CONFIG": "2",
                                "DEFAULT_CONFIG": "1"}
    with pytest.raises(AirflowFailException) as failed:
        check()
    assert "upgrade to '4.1.0' refused (nothing was touched)" in str(failed.value)
    assert "the active controller 101's static value, 2, and removes broker-level values; broker 0 uses 3 now" \
        in str(failed.value)
    assert "delete the own min.insync.replicas of broker 0 if it should not go" in str(failed.value)
    assert "min.insync.replicas would become 2 when ELR is turned on" in capfd.readouterr().out
    # without the metadata_version phase no feature is raised: nothing to judge
    assert check(phases=["binaries"])["mode"] == "kraft"


def test_the_step_does_nothing_in_zookeeper_mode_or_when_not_requested(cluster, capfd):
    assert run_step(phases=["binaries"]) == {"action": "skipped"}
    cluster.kraft = False
    assert run_step() == {"action": "skipped"}
    assert "ZooKeeper mode: no KRaft controllers and no metadata.version" in capfd.readouterr().out
    assert cluster.sent == []


def test_a_malformed_metadata_version_fails_the_step(cluster):
    with pytest.raises(AirflowFailException, match="param metadata_version: metadata.version '4.1-IV9' is unknown"):
        run_step(metadata_version="4.1-IV9")


# --- the approval ---------------------------------------------------------------------------------------------


def approval(params: dict, checked: dict | None, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """(the approval's result, the operator); waiting for a human is replaced by recording the question."""
    from airflow.providers.standard.operators.hitl import ApprovalOperator

    monkeypatch.setattr(ApprovalOperator, "execute", lambda self, context: "waits")
    op = ProtocolBumpApprovalOperator(task_id="approve_protocol_bump")
    ti = SimpleNamespace(xcom_pull=lambda task_ids: checked)
    return op.execute({"params": {"cluster": "kafka_kraft", "target_version": "4.1.0", **params}, "ti": ti}), op


KRAFT_CHECKED = {"mode": "kraft", "nodes": {}, "metadata_version": {"current": 25, "target": 27}}
ALL = ["pin", "binaries", "ibp", "lmf", "metadata_version"]


def test_the_approval_asks_about_metadata_version_on_kraft(monkeypatch):
    result, op = approval({"phases": ALL}, KRAFT_CHECKED, monkeypatch)
    assert result == "waits"
    assert op.subject == "Bump metadata.version of cluster kafka_kraft to 4.1-IV1 (27) (Kafka 4.1.0)?"
    assert "metadata.version 4.0-IV3 (25) -> 4.1-IV1 (27)" in op.body and "inter.broker" not in op.body
    assert "can still downgrade it safely" in op.body, "no level in 26-27 changed the metadata format"
    assert "other features" not in op.body, "an old checks result without features names none"
    levels = {"current": 25, "target": 27, "features": {"eligible.leader.replicas.version": [0, 1]}}
    _, op = approval({"phases": ALL}, {**KRAFT_CHECKED, "metadata_version": levels}, monkeypatch)
    assert ("In the same request, the release's other features go to their defaults for it: "
            "eligible.leader.replicas.version 0 -> 1 (param release_features).") in op.body
    assert "ELR (KIP-966)" not in op.body, "a checks result without the ELR line quotes none"
    elr = "min.insync.replicas stays 2 when ELR is turned on (the cluster-level value, kept): brokers 0, 1, 2 use 2"
    _, op = approval({"phases": ALL}, {**KRAFT_CHECKED, "metadata_version": {**levels, "elr_min_insync": elr}},
                     monkeypatch)
    assert op.body.endswith(f"(param release_features). ELR (KIP-966): {elr}. Approve to finalize it; Reject to end "
                            "the run here, on the new binaries with metadata.version unchanged.")
    assert op.ignore_downstream_trigger_rules, "Reject skips the none_failed tasks after it too"
    for params, checked in (({"phases": ALL, "approve_protocol_bump": True}, KRAFT_CHECKED),
                            ({"phases": ["binaries", "ibp"]}, KRAFT_CHECKED),
                            ({"phases": ALL}, {**KRAFT_CHECKED, "metadata_version": {"current": 27, "target": 27}}),
                            ({"phases": ALL, "dry_run": True}, KRAFT_CHECKED)):
        result, _ = approval(params, checked, monkeypatch)
        assert result["chosen_options"] == ["Approve"], (params, checked)


def test_the_approval_keeps_the_protocol_question_in_zookeeper_mode(monkeypatch):
    zk = {"mode": "zookeeper", "nodes": {}, "metadata_version": None}
    result, op = approval({"phases": ALL}, zk, monkeypatch)
    assert result == "waits" and op.subject.startswith("Bump the protocol versions of cluster")
    result, _ = approval({"phases": ["binaries", "metadata_version"]}, zk, monkeypatch)
    assert result["chosen_options"] == ["Approve"], "no ibp / lmf phase in ZooKeeper mode: nothing to approve"


def zk_checked(installed: str, ibp: str | None) -> dict:
    return {"mode": "zookeeper", "metadata_version": None,
            "nodes": {str(b): {"installed": installed, "ibp": ibp, "lmf": None, "role": "broker"} for b in (0, 1, 2)}}


def test_the_zookeeper_approval_names_the_bumps_and_asks_none_when_no_ibp_changes(monkeypatch):
    """A patch release of the running minor (3.7.0 -> 3.7.1) or an upgrade run again after its bump changes no
    broker's IBP: nothing to approve, the run goes on (it waited for a human before, with nothing to bump)."""
    result, op = approval({"phases": ALL, "target_version": "3.7.1"}, zk_checked("3.6.2", "3.6"), monkeypatch)
    assert result == "waits"
    assert op.body.endswith("To bump: " + "; ".join(f"broker {b}: inter.broker.protocol.version 3.6, target 3.7"
                                                    for b in (0, 1, 2)) + "."), op.body
    for checked in (zk_checked("3.7.0", "3.7"), zk_checked("3.7.0", None), zk_checked("3.7.1", "3.7")):
        result, _ = approval({"phases": ALL, "target_version": "3.7.1"}, checked, monkeypatch)
        assert result["chosen_options"] == ["Approve"], checked
    # not pinned and no pin phase: the ibp phase writes the IBP the binaries chose, a bump the question asks about
    result, _ = approval({"phases": ["binaries", "ibp"], "target_version": "3.7.1"}, zk_checked("3.6.2", None),
                         monkeypatch)
    assert result == "waits"
    result, _ = approval({"phases": ALL, "target_version": "3.7.1", "dry_run": True}, zk_checked("3.6.2", "3.6"),
                         monkeypatch)
    assert result["chosen_options"] == ["Approve"]
    many = {"mode": "zookeeper", "metadata_version": None,
            "nodes": {str(b): {"installed": "3.6.2", "ibp": "3.6", "lmf": None} for b in range(10)}}
    _, op = approval({"phases": ALL, "target_version": "3.7.1"}, many, monkeypatch)
    assert op.body.endswith("broker 5: inter.broker.protocol.version 3.6, target 3.7; 4 more."), op.body


# --- check_upgrade and a roll of one mode only ------------------------------------------------------------------


@pytest.fixture
def hosts(monkeypatch: pytest.MonkeyPatch) -> dict[int, str]:
    installed = {n: "4.0.0" for n in (0, 1, 2, 100, 101, 102)}
    monkeypatch.setattr(upgrade_checks, "host_state",
                        lambda profile, node: ({"installed": installed[int(node["id"])], "ibp": None, "lmf": None}, ""))
    return installed


def check(**settings: Any) -> dict:
    op = upgrade_checks.UpgradeChecksOperator(task_id="check_upgrade", settings={**SETTINGS, **settings})
    return op.execute({"params": {}})


def test_check_upgrade_reads_controllers_too_and_returns_the_levels(cluster, hosts, capfd):
    found = check()
    assert found["mode"] == "kraft" and found["metadata_version"] == {
        "current": 25, "target": 27, "features": {"eligible.leader.replicas.version": [0, 1]},
        "elr_min_insync": "min.insync.replicas stays 2 when ELR is turned on (the active controller 101's static "
                          "value, which Kafka writes as the cluster-level one): brokers 0, 1, 2 use 2"}
    assert check(release_features=False)["metadata_version"]["features"] == {}
    assert {n: f["role"] for n, f in found["nodes"].items()} == {
        "0": "broker", "1": "broker", "2": "broker", "100": "controller", "101": "controller", "102": "controller"}
    out = capfd.readouterr().out
    assert "KRaft cluster (it answers DescribeQuorum)" in out
    assert "phase ibp: nothing (KRaft: metadata.version replaces inter.broker.protocol.version)" in out
    assert "phase binaries: controller 100: roll: running 4.0.0, target 4.1.0" in out
    assert ("phase metadata_version: metadata.version 4.0-IV3 (25) -> 4.1-IV1 (27); "
            "eligible.leader.replicas.version 0 -> 1") in out
    hosts[101] = "4.2.0"
    with pytest.raises(AirflowFailException, match=r"nodes \[101\] run a release newer than the target 4.1.0"):
        check()


def test_check_upgrade_refuses_a_metadata_version_bump_while_a_fenced_broker_is_registered(cluster, hosts, capfd):
    cluster.fenced[3] = 25
    with pytest.raises(AirflowFailException) as refused:
        check()
    message = str(refused.value)
    assert "nothing was touched" in message
    assert "broker 3 registered with the controller but fenced (stopped or crashed; Metadata leaves them out, so " \
           "the upgrade would not roll them)" in message and "kafka-cluster.sh unregister --id 3" in message
    assert cluster.sent == []
    # a binaries-only upgrade goes ahead, with a warning
    found = check(phases=["binaries"])
    assert found["mode"] == "kraft"
    assert "a later metadata.version upgrade is refused while they are registered" in capfd.readouterr().out


def test_check_upgrade_refuses_metadata_version_in_zookeeper_mode(cluster, hosts, capfd):
    cluster.kraft = False
    with pytest.raises(AirflowFailException, match="param metadata_version '27' applies to KRaft clusters only"):
        check(metadata_version="27")
    hosts.update(dict.fromkeys(hosts, "3.8.1"))  # ZooKeeper mode ends with 3.9
    assert check(target_version="3.9.1")["mode"] == "zookeeper"
    assert "ZooKeeper mode (the cluster does not answer DescribeQuorum)" in capfd.readouterr().out
    with pytest.raises(AirflowFailException, match=r"Kafka 4\.1\.0 has no ZooKeeper mode \(KIP-833"):
        check(target_version="4.1.0")


def test_a_zookeeper_only_roll_plans_nothing_on_kraft(cluster, monkeypatch, capfd):
    from kafka_ops.roll import RollRecord

    saved: dict[str, Any] = {}

    class Store:
        def __init__(self, context: Any, roll_id: str) -> None:
            self.roll_id = roll_id

        def load(self) -> RollRecord | None:
            return None

        def save(self, record: RollRecord) -> None:
            saved[self.roll_id] = json.loads(json.dumps(record.to_dict()))

    monkeypatch.setattr(roll_plan, "RollStore", Store)
    op = roll_plan.RollPlanOperator(task_id="plan", roll_id="ibp", settings={"cluster": "kafka_kraft"},
                                    modes={"zookeeper"}, skip_reason="KRaft: metadata.version replaces "
                                    "inter.broker.protocol.version")
    assert op.execute({"params": {}}) == []
    assert saved["ibp"]["steps"] == [], "an empty plan is frozen: a resumed run plans nothing again"
    assert saved["ibp"]["empty_because"] == "KRaft: metadata.version replaces inter.broker.protocol.version", \
        "the record keeps why, for the closing note"
    assert "KRaft: metadata.version replaces inter.broker.protocol.version: roll 'ibp' plans nothing" in \
        capfd.readouterr().out
    with pytest.raises(ValueError, match="modes must be a non-empty set of"):
        roll_plan.RollPlanOperator(task_id="plan", roll_id="x", settings={}, modes={"kraft-only"})
    # the mode check_and_lock decided for the run is taken as it is: no DescribeQuorum asked again
    ti = SimpleNamespace(xcom_pull=lambda task_ids, key: "kraft" if (task_ids, key) == ("check_and_lock",
                                                                                        "cluster_mode") else None)
    assert op.execute({"params": {}, "ti": ti}) == []
    assert "cluster mode: KRaft mode (decided under the lock by check_and_lock)" in capfd.readouterr().out
    # in a DAG the plan names its mapped task: an empty plan skips it at once (not one scheduler loop later); the
    # plan task itself succeeds (Airflow's DownstreamTasksSkipped)
    from airflow.sdk.exceptions import DownstreamTasksSkipped

    published: list = []
    monkeypatch.setattr(node_roll, "publish", lambda context, task_id, items: published.append(task_id) or items)
    named = roll_plan.RollPlanOperator(task_id="plan", roll_id="ibp", settings={"cluster": "kafka_kraft"},
                                       modes={"zookeeper"}, labels_for="ibp.broker")
    with pytest.raises(DownstreamTasksSkipped) as skipped:
        named.execute({"params": {}, "ti": ti})
    assert skipped.value.tasks == ["ibp.broker"] and published == ["ibp.broker"]
    assert "roll 'ibp' has nothing to do: ibp.broker is skipped now" in capfd.readouterr().out


def test_a_retry_acts_on_the_answer_an_earlier_try_received_instead_of_asking_again(monkeypatch):
    """Airflow 3.3 fails a HITL try whose answer arrived before the scheduler saw it pause ("state mismatch"); the
    retry reads the earlier try's answer (REST hitlDetails/tries/{n}) and acts on it; with none it asks again."""
    from airflow.providers.standard.operators.hitl import ApprovalOperator
    from operators import upgrade_approval

    asked_for: list[tuple] = []
    answers = {1: {"response_received": True, "chosen_options": ["Approve"], "params_input": {},
                   "responded_at": "2026-11-26T12:05:22.903547Z",
                   "responded_by_user": {"id": "admin", "name": "admin"}}}

    class FakeApi:
        def hitl_answer(self, dag_id, run_id, task_id, map_index, try_number):
            asked_for.append((dag_id, run_id, task_id, map_index, try_number))
            return answers.get(try_number)

        def close(self):
            pass

    monkeypatch.setattr(upgrade_approval, "AirflowApiHook", FakeApi)
    monkeypatch.setattr(ApprovalOperator, "execute", lambda self, context: "waits")
    op = ProtocolBumpApprovalOperator(task_id="approve_protocol_bump")
    assert op.retries == 1

    def run(try_number):
        ti = SimpleNamespace(xcom_pull=lambda task_ids: {"mode": "zookeeper"}, try_number=try_number, dag_id="d",
                             run_id="r", task_id="approve_protocol_bump", map_index=-1)
        return op.execute({"params": {"cluster": "c", "target_version": "3.7.1", "phases": ALL}, "ti": ti})

    assert run(1) == "waits" and asked_for == [], "a first try asks"
    result = run(2)
    assert result["chosen_options"] == ["Approve"] and result["responded_by_user"]["name"] == "admin", result
    assert asked_for == [("d", "r", "approve_protocol_bump", -1, 1)]
    answers.clear()
    assert run(3) == "waits", "no earlier answer: asked again"


def test_a_reject_releases_the_lock_this_run_holds(monkeypatch):
    """A run resumed by clearing only its failed tasks re-took the lock in a roll task; a Reject then skips what
    follows and its run_outcome teardown succeeded before: the approval releases the lock itself."""
    from airflow.providers.standard.operators.hitl import ApprovalOperator
    from operators import upgrade_approval

    released: list[tuple] = []
    monkeypatch.setattr(ApprovalOperator, "execute_complete", lambda self, context, event: event)
    monkeypatch.setattr(upgrade_approval.profiles, "profile_or_fail", lambda cluster: f"profile of {cluster}")
    monkeypatch.setattr(upgrade_approval, "release_held",
                        lambda profile, context, log, why: released.append((profile, why)))
    op = ProtocolBumpApprovalOperator(task_id="approve_protocol_bump")
    context = {"params": {"cluster": "kafka_prod"}}
    op.execute_complete(context, {"chosen_options": ["Approve"]})
    assert released == [], "an approval keeps the lock: the run goes on"
    op.execute_complete(context, {"chosen_options": ["Reject"]})
    assert released == [("profile of kafka_prod", "rejected: the run ends here")]
