"""``operators.cluster_checks.wait_for_cluster`` facing a leader imbalance: the health waits between an operation's
steps and ``run_outcome``'s final check elect the preferred leaders when the imbalance is all that is wrong (as a
roll's gate does), never when anything else is, never in a dry run, never with ``fix_leader_imbalance`` off.

The cluster is a scripted admin client (its snapshots in order, the elections it was asked for); the wait is the
operator's own (``ClusterOperator.wait``: ``runtime.waiting.wait_until``) on a clock its sleeps move on, nothing
slept.
"""

from __future__ import annotations

import functools
import logging

import pytest
from airflow.sdk.exceptions import AirflowFailException
from kafka_ops.cluster import Broker, ClusterState, Partition
from operators import cluster_checks, cluster_operator
from operators.cluster_checks import WaitForClusterOperator, wait_for_cluster
from probes.cluster import ClusterProber
from runtime.waiting import wait_until

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

BROKERS = tuple(Broker(b, f"10.0.0.{b}", 9092, f"r{b}") for b in (0, 1, 2))


def cluster(leaders: dict[int, int], isr_of_1: tuple[int, ...] = (0, 1, 2)) -> ClusterState:
    """Three partitions of ``orders`` preferring brokers 0, 1, 1 (their first replica), led as ``leaders`` says;
    partition 1's ISR is ``isr_of_1`` (a URP when a broker is missing from it)."""
    replicas = {0: (0, 1, 2), 1: (1, 2, 0), 2: (1, 0, 2)}
    return ClusterState(brokers=BROKERS, controller_id=0, default_min_insync=2, partitions=tuple(
        Partition("orders", p, leaders[p], replicas[p], isr_of_1 if p == 1 else (0, 1, 2)) for p in replicas))


BALANCED = cluster({0: 0, 1: 1, 2: 1})
IMBALANCED = cluster({0: 0, 1: 2, 2: 0})  # broker 1 leads none of the 2 it prefers: 100% > 10%


class ScriptedAdmin:
    """The prober's admin client: the snapshots it answers in order (the last one again once they run out) and the
    preferred leader elections it was asked for."""

    def __init__(self, *states: ClusterState) -> None:
        self.states = list(states)
        self.elections: list[list[tuple[str, int]]] = []

    def cluster_state(self, configs: bool, describe_cluster: bool) -> ClusterState:
        return self.states.pop(0) if len(self.states) > 1 else self.states[0]

    def elect_preferred_leaders(self, partitions):
        self.elections.append(list(partitions))
        return {f"{t}-{p}": None for t, p in partitions}

    def close(self) -> None:
        pass


def operator(monkeypatch, admin: ScriptedAdmin, **settings) -> tuple[WaitForClusterOperator, list[float]]:
    """A health gate whose prober asks ``admin``, settings resolved as a run would (2 s apart, 10 s at most), the
    profile stubbed; returns it and the list of its waits' sleeps (seconds), which move the wait's clock."""
    prober = ClusterProber.__new__(ClusterProber)
    prober.admin = admin
    monkeypatch.setattr(cluster_checks, "ClusterProber", lambda profile: prober)
    monkeypatch.setattr(WaitForClusterOperator, "profile", "profile of kafka_prod")
    slept: list[float] = []
    monkeypatch.setattr(cluster_operator, "wait_until",
                        functools.partial(wait_until, sleep=slept.append, clock=lambda: sum(slept)))
    op = WaitForClusterOperator(task_id="health_gate", kind="healthy", settings={
        "cluster": "kafka_prod", "dry_run": False, "healthcheck_interval_s": 2, "healthcheck_timeout_s": 10,
        **settings})
    op.resolve({"params": {}})
    return op, slept


def test_an_imbalance_alone_is_elected_away_and_the_wait_passes_at_its_first_look(monkeypatch, caplog,
                                                                                 capsys) -> None:
    admin = ScriptedAdmin(IMBALANCED, BALANCED)
    op, slept = operator(monkeypatch, admin)
    with caplog.at_level(logging.INFO):
        message = wait_for_cluster(op, "healthy")
    assert admin.elections == [[("orders", 1), ("orders", 2)]]
    assert message == "cluster-health: OK"
    assert slept == [], "no wait for the brokers' own rebalance"
    assert ("the cluster is healthy (no offline partitions, no URP, leaders balanced): leader imbalance: elected the "
            "preferred leaders of 2 partitions (orders-1, orders-2)") in capsys.readouterr().out + caplog.text


def test_an_imbalance_beside_an_urp_is_not_elected_the_wait_goes_on(monkeypatch) -> None:
    """The URP is what the wait is for: no election while anything but the imbalance fails."""
    urp = cluster({0: 0, 1: 2, 2: 0}, isr_of_1=(1, 2))
    admin = ScriptedAdmin(urp, urp, IMBALANCED, BALANCED)
    op, slept = operator(monkeypatch, admin)
    assert wait_for_cluster(op, "healthy") == "cluster-health: OK"
    assert admin.elections == [[("orders", 1), ("orders", 2)]], "elected once the URP was gone, not before"
    assert len(slept) == 2


def test_with_fix_leader_imbalance_off_the_wait_waits_and_names_the_imbalance(monkeypatch) -> None:
    admin = ScriptedAdmin(IMBALANCED)
    op, slept = operator(monkeypatch, admin, fix_leader_imbalance=False)
    with pytest.raises(AirflowFailException, match=r"broker 1: leader imbalance 100\.0% > 10%"):
        wait_for_cluster(op, "healthy")
    assert admin.elections == []
    assert sum(slept) >= 10, f"it waited its timeout: {slept}"


def test_a_dry_run_elects_nothing_and_says_what_a_real_run_would_elect(monkeypatch, caplog, capsys) -> None:
    admin = ScriptedAdmin(IMBALANCED)
    op, _ = operator(monkeypatch, admin, dry_run=True)
    with caplog.at_level(logging.INFO):
        message = wait_for_cluster(op, "healthy")
    assert admin.elections == []
    assert "broker 1: leader imbalance" in message
    assert message.endswith("a real run elects the preferred leaders of 2 partitions here")
    assert "DRY RUN: the cluster is healthy" in capsys.readouterr().out + caplog.text


def test_only_a_leader_imbalance_is_what_an_election_fixes() -> None:
    from kafka_ops import health

    assert health.only_leader_imbalance(health.cluster_health(IMBALANCED))
    assert health.only_leader_imbalance(health.leader_imbalance(IMBALANCED))
    assert not health.only_leader_imbalance(health.cluster_health(BALANCED)), "nothing fails"
    urp = cluster({0: 0, 1: 2, 2: 0}, isr_of_1=(1, 2))
    assert not health.only_leader_imbalance(health.cluster_health(urp)), "an URP beside it"
    assert not health.only_leader_imbalance(health.under_replicated_partitions(urp)), "an URP alone"


def test_every_operations_final_check_and_health_gate_follow_the_fix_leader_imbalance_param() -> None:
    """The waits above read ``fix_leader_imbalance`` from the run's params: every operation's ``run_outcome`` and the
    scale-out's and decommission's ``health_gate`` take it from the form, which offers it (default true)."""
    from operations.config_change import config_change_dag
    from operations.decommission import decommission_dag
    from operations.rolling_restart import rolling_restart_dag
    from operations.scale_out import scale_out_dag
    from operations.upgrade import upgrade_dag
    from runtime.params import FromParam

    for dag in (rolling_restart_dag(), scale_out_dag(), decommission_dag(), upgrade_dag(), config_change_dag()):
        assert dag.params["fix_leader_imbalance"] is True, dag.dag_id
        waits = ["run_outcome"] + (["health_gate"] if dag.dag_id in ("kafka_scale_out", "kafka_decommission") else [])
        for task_id in waits:
            settings = dag.get_task(task_id).settings
            assert settings["fix_leader_imbalance"] == FromParam("fix_leader_imbalance"), (dag.dag_id, task_id)
