"""The release's feature defaults an upgrade finalizes beside metadata.version (``kafka_ops.release_features``)."""

from __future__ import annotations

import pytest
from kafka_ops.metadata_version import MetadataVersion
from kafka_ops.release_features import (
    KNOWN_THROUGH,
    change_lines,
    cluster_levels,
    defaults_for,
    finalized_everywhere,
    plan,
)

# What `kafka-features.sh version-mapping --release-version <level>` printed with the binaries of Kafka 4.1.0
# (4.0.0 agrees on every level it knows), kraft.version / share.version / streams.version left out.
VERSION_MAPPING_4_1 = {
    7: (0, 0, 0), 21: (0, 0, 0), 22: (1, 0, 0), 23: (1, 0, 0), 24: (1, 2, 0), 25: (1, 2, 0), 26: (1, 2, 1),
    27: (1, 2, 1),
}
SUPPORT = {"group.version": (0, 1), "transaction.version": (0, 2), "eligible.leader.replicas.version": (0, 1)}


@pytest.mark.parametrize("level", sorted(VERSION_MAPPING_4_1))
def test_the_defaults_are_kafkas_own_version_mapping(level):
    group, transaction, elr = VERSION_MAPPING_4_1[level]
    assert defaults_for(level) == {"group.version": group, "transaction.version": transaction,
                                   "eligible.leader.replicas.version": elr}


def test_a_cluster_formatted_on_4_0_gets_only_elr_on_its_way_to_4_1():
    finalized = {"group.version": 1, "transaction.version": 2, "kraft.version": 0}
    got = plan(MetadataVersion(27), finalized, {0: SUPPORT, 1: SUPPORT})
    assert got.raise_to == {"eligible.leader.replicas.version": 1}
    assert got.unchanged == {"group.version": 1, "transaction.version": 2}
    assert got.refusals == [] and got.unknown is None
    assert got.changes() == {"eligible.leader.replicas.version": [0, 1]}
    assert change_lines(got.changes()) == ["eligible.leader.replicas.version 0 -> 1"]


def test_the_clusters_levels_are_the_highest_any_broker_reports():
    """A broker applies an update a moment after the controller: the cluster's level is the highest seen."""
    answers = {0: {"features": {"metadata.version": 27, "eligible.leader.replicas.version": 1}},
               1: {"features": {"metadata.version": 27, "group.version": 1}}, 2: {}}
    assert cluster_levels(answers) == {"eligible.leader.replicas.version": 1, "group.version": 1}


def test_features_are_never_lowered_and_level_0_features_stay_quiet():
    got = plan(MetadataVersion(22), {"group.version": 1, "transaction.version": 2}, {0: SUPPORT})
    assert got.raise_to == {} and got.unchanged == {"group.version": 1, "transaction.version": 2}
    assert plan(MetadataVersion(21), {}, {0: SUPPORT}) == plan(MetadataVersion(21), {}, {})
    assert plan(MetadataVersion(21), {}, {}).raise_to == {} and plan(MetadataVersion(21), {}, {}).unchanged == {}


def test_a_broker_whose_binaries_lack_a_level_is_named():
    old = {"group.version": (0, 1), "transaction.version": (0, 2)}  # Kafka 4.0: ELR not at all
    got = plan(MetadataVersion(27), {"group.version": 1, "transaction.version": 2},
               {0: SUPPORT, 1: old, 2: {**SUPPORT, "transaction.version": (0, 1)}})
    assert got.raise_to == {"eligible.leader.replicas.version": 1}
    assert got.refusals == ["eligible.leader.replicas.version 1 (the default of 4.1-IV1) is above what the binaries "
                            "of brokers [1] support (1: not at all)"]
    got = plan(MetadataVersion(25), {}, {0: SUPPORT, 2: {**SUPPORT, "transaction.version": (0, 1)}})
    assert got.refusals == ["transaction.version 2 (the default of 4.0-IV3) is above what the binaries of brokers "
                            "[2] support (2: up to 1)"]


def test_a_level_newer_than_the_table_says_what_it_cannot_know():
    got = plan(MetadataVersion(KNOWN_THROUGH + 1), {}, {0: SUPPORT})
    assert got.raise_to == {"group.version": 1, "transaction.version": 2, "eligible.leader.replicas.version": 1}
    assert got.unknown.startswith("kafka-ops knows the features' default levels up to 4.1-IV1 (27); 4.2-IV0 may raise "
                                  "more: compare with kafka-features.sh version-mapping --release-version 4.2-IV0")


def test_every_broker_must_report_the_levels():
    levels = {"eligible.leader.replicas.version": 1, "group.version": 1}
    ok, line = finalized_everywhere(levels, {0: {"group.version": 1, "eligible.leader.replicas.version": 1},
                                             1: {"group.version": 1}})
    assert not ok and line == ("eligible.leader.replicas.version 1, group.version 1: not yet finalized on 1 "
                               "(eligible.leader.replicas.version 0)")
    ok, line = finalized_everywhere(levels, {0: {"group.version": 1, "eligible.leader.replicas.version": 1}})
    assert ok and line == "eligible.leader.replicas.version 1, group.version 1 finalized on every broker: 0"
    assert finalized_everywhere(levels, {}) == (False, "eligible.leader.replicas.version 1, group.version 1: not yet "
                                                       "finalized on any broker (none answered)")
