"""The upgrade's rules (``kafka_ops.upgrade``): versions, the server.properties edit, the phases'
needs-action rules. Pure, no servers."""

from __future__ import annotations

import pytest
from kafka_ops import upgrade
from kafka_ops.upgrade import IBP, LMF, check_target, edited_properties, needs_action, set_property

PROPS = "# comment first\nbroker.id=1\ninter.broker.protocol.version = 3.6\n! bang comment\nlog.dirs=/data\n"


def test_versions() -> None:
    assert upgrade.parse_version("3.7.1") == (3, 7, 1)
    assert upgrade.protocol_version("3.7.1") == "3.7"
    assert upgrade.installed_version("kafka_2.13-3.6.2\n") == "3.6.2"
    assert upgrade.installed_version("/opt/kafka_2.12-2.8.1/") == "2.8.1"
    for bad in ("3.7", "v3.7.1", "3.7.1; rm -rf /", ""):
        with pytest.raises(ValueError, match="major.minor.patch"):
            upgrade.parse_version(bad)
    with pytest.raises(ValueError, match="cannot tell the Kafka version"):
        upgrade.installed_version("/opt/kafka-current")


def test_set_property_replaces_in_place_or_appends_keeping_comments() -> None:
    edited = set_property(PROPS, IBP, "3.7")
    assert edited == PROPS.replace("inter.broker.protocol.version = 3.6", f"{IBP}=3.7")
    appended = set_property(PROPS, LMF, "3.6")
    assert appended == PROPS + f"{LMF}=3.6\n"
    assert set_property("a=1", "b", "2") == "a=1\nb=2\n"
    # a commented-out key is not the key
    assert set_property(f"#{IBP}=2.8\n", IBP, "3.6") == f"#{IBP}=2.8\n{IBP}=3.6\n"


def test_check_target_refuses_downgrades_and_a_third_release() -> None:
    assert check_target("3.7.1", {0: "3.6.2", 1: "3.6.2"}) == []
    assert check_target("3.7.1", {0: "3.7.1", 1: "3.6.2"}) == []  # resuming
    assert "downgrades are not supported" in check_target("3.5.0", {0: "3.6.2"})[0]
    assert "finish or undo the last upgrade first" in check_target("3.8.0", {0: "3.6.2", 1: "3.7.1"})[0]
    assert "major.minor.patch" in check_target("latest", {0: "3.6.2"})[0]


def test_a_zookeeper_mode_cluster_is_refused_a_release_without_zookeeper() -> None:
    [reason] = upgrade.check_zookeeper_target("4.0.0")
    assert "KIP-833" in reason and "3.9.x first" in reason and "kafka_zk_to_kraft" in reason
    assert upgrade.check_zookeeper_target("4.1.0") and upgrade.check_zookeeper_target("10.0.0")
    assert upgrade.check_zookeeper_target("3.9.1") == [] and upgrade.check_zookeeper_target("3.7.1") == []
    assert upgrade.check_zookeeper_target("latest") == []  # check_target names a malformed target


def test_fenced_registrations_refuse_a_metadata_version_bump_and_name_the_remedy() -> None:
    [reason], notes = upgrade.fenced_registrations([3], upgrade.PHASES)
    assert notes == [] and "broker 3 registered with the controller but fenced" in reason
    assert "would fail after every node was rolled" in reason and "kafka-cluster.sh unregister --id 3" in reason
    [reason], _ = upgrade.fenced_registrations([5, 3], ["binaries", "metadata_version"])
    assert "brokers 3, 5 registered" in reason
    # without the metadata_version phase: a note, no refusal
    refusals, [note] = upgrade.fenced_registrations([3], ["binaries"])
    assert refusals == [] and "a later metadata.version upgrade is refused" in note
    assert upgrade.fenced_registrations([], upgrade.PHASES) == ([], [])
    # a cluster that cannot list them (Kafka before 4.0): a note
    refusals, [note] = upgrade.fenced_registrations(None, upgrade.PHASES)
    assert refusals == [] and "DescribeCluster v2" in note


def test_fenced_down_leaves_out_live_and_unfenced_brokers() -> None:
    from kafka_ops.cluster import Broker, Registration, fenced_down

    states = ((0, False), (1, True), (5, True), (3, True))
    regs = [Registration(Broker(b, f"h{b}", 9092), fenced) for b, fenced in states]
    # 1 is fenced a moment but Metadata lists it live (caught up since): not down
    assert [b.id for b in fenced_down(regs, [0, 1])] == [3, 5]
    assert fenced_down([], [0]) == []


def test_phase_rules() -> None:
    facts = {"installed": "3.6.2", "ibp": "3.6", "lmf": None}
    to_371 = {"target_version": "3.7.1", "phases": upgrade.PHASES}
    assert needs_action("pin")(0, facts, to_371) == (False, f"{IBP} pinned at 3.6")
    assert needs_action("pin")(0, {**facts, "ibp": None}, to_371)[0]
    assert needs_action("binaries")(0, facts, to_371) == (True, "running 3.6.2, target 3.7.1")
    assert needs_action("binaries")(0, {**facts, "installed": "3.7.1"}, to_371)[0] is False
    assert needs_action("ibp")(0, facts, to_371) == (True, f"{IBP} 3.6, target 3.7")
    every_phase = {"target_version": "3.7.1", "phases": None}
    assert needs_action("ibp")(0, facts, every_phase) == (True, f"{IBP} 3.6, target 3.7")
    act, why = needs_action("lmf")(0, facts, to_371)
    assert not act and "KIP-724" in why
    assert needs_action("lmf")(0, {"installed": "2.7.1", "ibp": "2.8", "lmf": "2.7"},
                               {"target_version": "2.8.2", "phases": upgrade.PHASES})[0]
    assert needs_action("ibp")(0, facts, {**to_371, "phases": ["binaries"]}) == (False, "phase ibp not requested")
    with pytest.raises(ValueError, match="unknown upgrade phase"):
        needs_action("kraft")
    with pytest.raises(ValueError, match="major.minor"):
        needs_action("ibp")(0, facts, {"target_version": "latest"})


def test_edits_per_phase() -> None:
    facts = {"installed": "3.6.2"}
    unpinned = "broker.id=1\n"
    assert edited_properties("pin", "3.7.1", facts, unpinned) == f"broker.id=1\n{IBP}=3.6\n"
    assert edited_properties("pin", "3.7.1", facts, PROPS) == PROPS, "pin never overwrites a value"
    assert edited_properties("pin", "2.8.2", {"installed": "2.7.1"}, unpinned) == \
        f"broker.id=1\n{IBP}=2.7\n{LMF}=2.7\n"
    assert f"{IBP}=3.7\n" in edited_properties("ibp", "3.7.1", facts, PROPS)
    assert edited_properties("lmf", "2.8.2", facts, unpinned).endswith(f"{LMF}=2.8\n")
    assert edited_properties("binaries", "3.7.1", facts, PROPS) == PROPS


def test_check_phases_refuses_a_phase_list_that_skips_a_needed_step() -> None:
    from kafka_ops.upgrade import check_phases

    old_unpinned = {0: {"installed": "3.6.2", "ibp": None}, 1: {"installed": "3.6.2", "ibp": None}}
    old_pinned = {b: {**f, "ibp": "3.6"} for b, f in old_unpinned.items()}
    new_pinned = {b: {"installed": "3.7.1", "ibp": "3.6"} for b in (0, 1)}
    assert check_phases("3.7.1", ["pin", "binaries", "ibp", "lmf"], old_unpinned) == []
    assert check_phases("3.7.1", ["binaries"], old_pinned) == []
    assert check_phases("3.7.1", ["ibp", "lmf"], new_pinned) == [], "the README's second step"
    assert check_phases("3.7.1", ["binaries", "ibp"], old_unpinned) == [
        "phases ['binaries', 'ibp'] roll the binaries of brokers [0, 1] whose inter.broker.protocol.version is not "
        "pinned: the new binaries would raise it by themselves with no way back; add 'pin'"]
    assert check_phases("3.7.1", ["ibp"], old_pinned) == [
        "phase ibp needs every broker on 3.7.1, but brokers [0, 1] run ['3.6.2']; add 'binaries'"]
    assert check_phases("2.8.2", ["lmf"], {0: {"installed": "2.8.2", "ibp": "2.7"}}) == [
        "phase lmf needs inter.broker.protocol.version 2.8 first, but brokers [0] are below it; add 'ibp'"]


# --- KRaft: metadata.version ----------------------------------------------------------------------------------


def test_the_metadata_version_of_a_release_and_what_its_binaries_support() -> None:
    from kafka_ops import metadata_version as mv

    assert mv.for_release("4.1.0") == mv.parse("4.1-IV1") == mv.MetadataVersion(27)
    assert mv.for_release("4.0.2").level == 25 and mv.for_release("3.7.1").name == "3.7-IV4"
    assert mv.supported_max("4.0.0").level == 25 and mv.supported_max("4.2.1").level == 29
    assert mv.supported_max("3.8.1").level == 20, "a release supports the levels up to its own latest"
    assert mv.supported_max("9.0.0").level == mv.TABLE[-1][0], "newer than the table: its last level (a bound)"
    assert mv.supported_max("3.2.3") is None, "before KRaft's first level (3.3-IV3)"
    with pytest.raises(mv.MetadataVersionError, match="knows no metadata.version level of Kafka 9.0"):
        mv.for_release("9.0.0")
    with pytest.raises(mv.MetadataVersionError, match="not major.minor"):
        mv.supported_max("four")
    assert mv.change_line(mv.MetadataVersion(25), mv.MetadataVersion(27)) == \
        "metadata.version 4.0-IV3 (25) -> 4.1-IV1 (27)"


def test_the_metadata_version_target_defaults_to_the_target_releases_latest_level() -> None:
    from kafka_ops.upgrade import metadata_target

    for requested in (None, "", "  "):
        assert metadata_target("4.1.0", requested).level == 27
    assert metadata_target("4.1.0", "4.1-IV1").level == 27
    assert metadata_target("4.1.0", "4.1").level == 27
    assert metadata_target("4.1.0", "27").level == 27
    assert metadata_target("4.2.0", "4.1-IV0").level == 26


def test_metadata_version_refusals_malformed_too_new_and_downgrade() -> None:
    from kafka_ops.metadata_version import MetadataVersion
    from kafka_ops.upgrade import check_metadata_version

    current = MetadataVersion(25)
    assert check_metadata_version("4.1.0", None, current) == (MetadataVersion(27), [])
    assert check_metadata_version("4.1.0", "4.0-IV3", current) == (MetadataVersion(25), []), "already there: no-op"
    goal, reasons = check_metadata_version("4.1.0", "4.2", current)
    assert goal == MetadataVersion(29)
    assert reasons == ["metadata.version 4.2-IV1 (level 29) is too new for Kafka 4.1.0: its binaries support up to "
                       "4.1-IV1 (level 27); choose a level up to 4.1-IV1 or a newer target_version"]
    goal, reasons = check_metadata_version("4.1.0", "4.1-IV7", current)
    assert goal is None and reasons[0].startswith("param metadata_version: metadata.version '4.1-IV7' is unknown")
    goal, reasons = check_metadata_version("4.1.0", "latest", current)
    assert goal is None and "is malformed" in reasons[0]
    goal, reasons = check_metadata_version("4.1.0", "24", current)
    assert goal == MetadataVersion(24)
    assert reasons == ["metadata.version 4.0-IV2 (level 24) is below the cluster's finalized 4.0-IV3 (level 25): an "
                       "upgrade does not downgrade it (a safe downgrade is done by hand: kafka-features.sh downgrade)"]
    goal, reasons = check_metadata_version("9.0.0", None, current)
    assert goal is None and "name the level explicitly" in reasons[0] and not reasons[0].startswith("param")


def test_check_phases_on_kraft_needs_binaries_supporting_the_level() -> None:
    from kafka_ops.metadata_version import MetadataVersion
    from kafka_ops.upgrade import check_phases

    old = {n: {"installed": "4.0.0", "ibp": None} for n in (0, 1, 100)}
    new = {n: {"installed": "4.1.0", "ibp": None} for n in (0, 1, 100)}
    level = MetadataVersion(27)
    assert check_phases("4.1.0", ["metadata_version"], old, kraft=True, metadata_version=level) == [
        "phase metadata_version needs binaries supporting metadata.version 4.1-IV1 (level 27) on every node, but "
        "nodes [0, 1, 100] run 4.0.0 (metadata.version up to 4.0-IV3, level 25); add 'binaries'"]
    assert check_phases("4.1.0", ["binaries", "metadata_version"], old, kraft=True, metadata_version=level) == []
    assert check_phases("4.1.0", ["metadata_version"], new, kraft=True, metadata_version=level) == [], \
        "the binaries were rolled by an earlier run"
    mixed = {**new, 1: {"installed": "4.0.0"}}
    assert "nodes [1] run 4.0.0" in check_phases("4.1.0", ["metadata_version"], mixed, kraft=True,
                                                 metadata_version=level)[0]
    # the ZooKeeper rules do not apply on KRaft: no IBP to pin there
    assert check_phases("4.1.0", ["binaries"], old, kraft=True, metadata_version=level) == []
    assert check_phases("4.1.0", ["pin", "binaries", "ibp", "lmf"], old, kraft=True, metadata_version=level) == []
    # phases none of which applies to the mode would do nothing and report success: refused
    assert check_phases("4.1.0", ["ibp", "lmf"], new, kraft=True, metadata_version=level) == [
        "phases ['ibp', 'lmf'] do nothing on this KRaft cluster (KRaft: metadata.version replaces "
        "inter.broker.protocol.version): request some of ['binaries', 'metadata_version']"]
    assert check_phases("3.7.1", ["metadata_version"], {0: {"installed": "3.7.1", "ibp": "3.6"}})[0].startswith(
        "phases ['metadata_version'] do nothing on this ZooKeeper-mode cluster (ZooKeeper mode: no KRaft "
        "controllers and no metadata.version")
    with pytest.raises(ValueError, match="unknown upgrade phase"):
        needs_action("metadata_version")


def test_check_target_over_brokers_and_controllers_names_nodes() -> None:
    assert check_target("4.1.0", {0: "4.0.0", 100: "4.1.0"}, "nodes") == []
    assert check_target("4.0.0", {0: "4.0.0", 100: "4.1.0"}, "nodes") == [
        "nodes [100] run a release newer than the target 4.0.0 (100: 4.1.0): downgrades are not supported"]


def test_the_controllers_refusal_and_the_verification_are_read_per_node() -> None:
    from kafka_ops.metadata_version import MetadataVersion, finalized_everywhere, short_nodes_in

    answer = ("InvalidUpdateVersionError: Invalid update version 27 for feature metadata.version. Broker 0 only "
              "supports versions 7-25")
    assert short_nodes_in(answer) == {0: ("broker", 25)}
    assert short_nodes_in("Controller 101 only supports versions 7-25") == {101: ("controller", 25)}
    assert short_nodes_in("OK") == {}
    goal = MetadataVersion(27)
    assert finalized_everywhere(goal, {0: 27, 1: 27, 2: 27}) == (
        True, "metadata.version 4.1-IV1 (27) finalized on every broker: 0, 1, 2")
    assert finalized_everywhere(goal, {0: 27, 1: 25, 2: None}) == (
        False, "metadata.version 4.1-IV1 (27) finalized on brokers 0; not yet on 1 (finalized 25), 2 (finalized "
               "nothing / no answer)")
    assert finalized_everywhere(goal, {})[0] is False


def test_the_phases_and_what_each_mode_skips() -> None:
    assert upgrade.PHASES == ("pin", "binaries", "ibp", "lmf", "metadata_version")
    assert upgrade.ZOOKEEPER_PHASES == ("pin", "ibp", "lmf")
    assert upgrade.KRAFT_SKIP == "KRaft: metadata.version replaces inter.broker.protocol.version"


def test_what_an_upgrade_needs_from_each_host_before_its_first_stop() -> None:
    assert upgrade.host_needs("3.7.1", None, None, zookeeper_mode=True) == ("3.7.1", True)
    assert upgrade.host_needs("4.1.0", None, None, zookeeper_mode=False) == ("4.1.0", False), "KRaft edits no file"
    assert upgrade.host_needs("3.7.1", ["binaries"], "install-kafka", zookeeper_mode=True) == (None, False), \
        "a named install brings the release itself; no IBP/LMF phase edits server.properties"
    assert upgrade.host_needs("3.7.1", ["ibp"], None, zookeeper_mode=True) == (None, True)
    with pytest.raises(ValueError, match="major.minor.patch"):
        upgrade.host_needs("3.7", None, None, zookeeper_mode=True)



def test_the_way_back_from_an_install_and_an_edit_is_quoted_shell_on_the_host() -> None:
    from runtime.upgrade_steps import properties_way_back, symlink_way_back

    link = symlink_way_back("/opt/my kafka/kafka", "kafka_2.13-3.6.2", "3.6.2")
    assert link.what == ("point /opt/my kafka/kafka back at kafka_2.13-3.6.2 (Kafka 3.6.2, the release it ran "
                         "before this roll)")
    assert link.command == ("ln -sfn kafka_2.13-3.6.2 '/opt/my kafka/kafka.kafka-ops-new' && "
                            "mv -T '/opt/my kafka/kafka.kafka-ops-new' '/opt/my kafka/kafka'")
    props = properties_way_back("/etc/kafka/server.properties", "/etc/kafka/server.properties.bak-1795650000")
    assert props.command == "cp -p /etc/kafka/server.properties.bak-1795650000 /etc/kafka/server.properties"
    assert props.what.startswith("restore /etc/kafka/server.properties from /etc/kafka/server.properties.bak-")


def test_pending_protocol_bumps_judges_each_broker_as_the_pin_phase_leaves_it() -> None:
    from kafka_ops.upgrade import pending_protocol_bumps

    def node(installed: str, ibp: str | None = None, lmf: str | None = None, role: str = "broker") -> dict:
        return {"installed": installed, "ibp": ibp, "lmf": lmf, "role": role}

    assert pending_protocol_bumps("3.7.1", None, {"0": node("3.6.2", "3.6"), "1": node("3.7.1", "3.7")}) == \
        ["broker 0: inter.broker.protocol.version 3.6, target 3.7"]
    # unpinned: the pin phase pins the running minor, so a patch release bumps nothing and a minor one does
    assert pending_protocol_bumps("3.7.1", None, {"0": node("3.7.0")}) == []
    assert pending_protocol_bumps("3.7.1", None, {"0": node("3.6.2")}) == \
        ["broker 0: inter.broker.protocol.version 3.6, target 3.7"]
    # below IBP 3.0 the LMF counts too (pinned by the pin phase as well); from 3.0 on it is ignored (KIP-724)
    assert pending_protocol_bumps("2.8.2", None, {"10": node("2.7.2"), "2": node("2.8.1", "2.8", "2.8")}) == \
        ["broker 10: inter.broker.protocol.version 2.7, target 2.8",
         "broker 10: log.message.format.version 2.7, target 2.8"]
    assert pending_protocol_bumps("3.7.1", ["binaries", "ibp"], {"0": node("3.6.2", "3.6", "2.8")}) == \
        ["broker 0: inter.broker.protocol.version 3.6, target 3.7"]
    assert pending_protocol_bumps("3.7.1", ["pin", "binaries"], {"0": node("3.6.2", "3.6")}) == [], \
        "no ibp / lmf phase requested"
    assert pending_protocol_bumps("4.0.0", None, {"100": node("3.9.1", role="controller")}) == []


def test_pinned_fills_only_what_is_absent_and_the_lmf_only_below_3_0() -> None:
    from kafka_ops.upgrade import pinned

    assert pinned("3.6.2", {}) == {IBP: "3.6"}
    assert pinned("3.6.2", {IBP: "3.5"}) == {}
    assert pinned("2.8.1", {LMF: "2.7"}) == {IBP: "2.8"}
    assert pinned("2.8.1", {IBP: None}) == {IBP: "2.8", LMF: "2.8"}
