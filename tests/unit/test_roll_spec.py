"""What a roll does as data (``kafka_ops.roll_spec``) and the run's cluster mode (``runtime.cluster_mode``)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
from kafka_ops.roll_spec import EVERY_MODE, ClusterMode, RollSpec, parse_modes, requested, ruled_out
from runtime.cluster_mode import decided_mode, mode_of, run_mode

LOG = logging.getLogger("test")


def test_a_bare_spec_restarts_every_node_in_every_mode() -> None:
    spec = RollSpec("restart")
    assert spec.modes == EVERY_MODE and spec.needs_action is requested and spec.before_start is None
    assert spec.needs_action(3, {}, {}) == (True, "requested")
    assert all(spec.ruled_out(m) is None for m in ClusterMode)


def test_modes_rule_a_roll_out_with_its_reason_or_a_sentence_naming_them() -> None:
    ibp = RollSpec("ibp", modes={"zookeeper"}, skip_reason="KRaft: metadata.version replaces the IBP")
    assert ibp.modes == {ClusterMode.ZOOKEEPER}
    assert ibp.ruled_out(ClusterMode.ZOOKEEPER) is None
    assert ibp.ruled_out(ClusterMode.KRAFT) == "KRaft: metadata.version replaces the IBP"
    quorum = RollSpec("ctl", modes=frozenset({ClusterMode.KRAFT, ClusterMode.MIGRATING}))
    assert quorum.ruled_out(ClusterMode.ZOOKEEPER) == \
        "ZooKeeper mode: for KRaft mode or migrating from ZooKeeper to KRaft only"
    assert ruled_out(frozenset({ClusterMode.KRAFT}), "", ClusterMode.MIGRATING) == \
        "migrating from ZooKeeper to KRaft: for KRaft mode only"


@pytest.mark.parametrize("bad", [set(), {"kraft-only"}, ["zookeeper", 3]])
def test_unknown_or_no_modes_are_refused(bad) -> None:
    with pytest.raises(ValueError, match="modes must be a non-empty set of"):
        parse_modes(bad)
    with pytest.raises(ValueError, match="modes must be a non-empty set of"):
        RollSpec("r", modes=bad)


@pytest.mark.parametrize("roll_id", ["", "a.b", "two words", "x-y"])
def test_a_roll_id_must_be_task_id_safe(roll_id) -> None:
    with pytest.raises(ValueError, match="letters, digits and underscores"):
        RollSpec(roll_id)


def test_the_mode_a_describe_quorum_answer_means_and_only_a_quorum_has_controllers() -> None:
    assert mode_of(True) is ClusterMode.KRAFT and mode_of(False) is ClusterMode.ZOOKEEPER
    assert [m.has_quorum for m in (ClusterMode.ZOOKEEPER, ClusterMode.MIGRATING, ClusterMode.KRAFT)] == \
        [False, True, True]


def test_the_mode_decided_under_the_lock_is_taken_as_it_is(caplog) -> None:
    xcom = {("check_and_lock", "cluster_mode"): "kraft"}
    context = {"ti": SimpleNamespace(xcom_pull=lambda task_ids, key: xcom.get((task_ids, key)))}
    asked = []
    with caplog.at_level(logging.INFO, logger="test"):
        assert run_mode(context, lambda: asked.append(1) or False, LOG) is ClusterMode.KRAFT
    assert asked == [], "no DescribeQuorum when the run decided its mode"
    assert "KRaft mode (decided under the lock by check_and_lock)" in caplog.text


@pytest.mark.parametrize("ti", [None, SimpleNamespace(), SimpleNamespace(xcom_pull=lambda task_ids, key: None),
                                SimpleNamespace(xcom_pull=lambda task_ids, key: "kraft-ish"),
                                SimpleNamespace(xcom_pull=lambda task_ids, key: 1 / 0)])
def test_without_a_decision_the_cluster_is_asked(ti, caplog) -> None:
    context = {"ti": ti}
    assert decided_mode(context) is None
    with caplog.at_level(logging.INFO, logger="test"):
        assert run_mode(context, lambda: False, LOG) is ClusterMode.ZOOKEEPER
    assert "ZooKeeper mode (asked now: no mode decided under the lock)" in caplog.text


def test_an_operator_reads_the_run_s_mode_once_per_execution() -> None:
    """``ClusterOperator.mode``: one XCom read per execution however often a task asks (a broker task asked nine
    times); ``resolve``, at the start of the next execution (a retry), forgets it."""
    from operators.cluster_operator import ClusterOperator

    pulls = []
    decided = {"value": "kraft"}
    ti = SimpleNamespace(xcom_pull=lambda task_ids, key: pulls.append(task_ids) or decided["value"])
    context = {"ti": ti, "params": {"cluster": "c"}}
    op = ClusterOperator(task_id="t", settings={"cluster": "c"})
    op.resolve(context)
    assert [op.mode(context, None) for _ in range(9)] == [ClusterMode.KRAFT] * 9 and len(pulls) == 1
    decided["value"] = "zookeeper"
    op.resolve(context)
    assert op.mode(context, None) is ClusterMode.ZOOKEEPER and len(pulls) == 2
