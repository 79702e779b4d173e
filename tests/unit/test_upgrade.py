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


def test_phase_rules() -> None:
    facts = {"installed": "3.6.2", "ibp": "3.6", "lmf": None}
    everything = upgrade.PHASES
    assert needs_action("pin", "3.7.1", everything)(0, facts) == (False, f"{IBP} pinned at 3.6")
    assert needs_action("pin", "3.7.1", everything)(0, {**facts, "ibp": None})[0]
    assert needs_action("binaries", "3.7.1", everything)(0, facts) == (True, "running 3.6.2, target 3.7.1")
    assert needs_action("binaries", "3.7.1", everything)(0, {**facts, "installed": "3.7.1"})[0] is False
    assert needs_action("ibp", "3.7.1", everything)(0, facts) == (True, f"{IBP} 3.6, target 3.7")
    act, why = needs_action("lmf", "3.7.1", everything)(0, facts)
    assert not act and "KIP-724" in why
    assert needs_action("lmf", "2.8.2", everything)(0, {"installed": "2.7.1", "ibp": "2.8", "lmf": "2.7"})[0]
    assert needs_action("ibp", "3.7.1", ["binaries"])(0, facts) == (False, "phase ibp not requested")
    with pytest.raises(ValueError, match="unknown upgrade phase"):
        needs_action("kraft", "3.7.1", everything)


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
