"""Pure parts of the plugins' probes, operators and task groups: no servers.

- ``probes.cluster.PROBES``: each kind's rule on hand-built cluster states, and ``ClusterProber.look`` with
  a stubbed snapshot (which kinds read configs, which need a broker);
- the operators' constructor checks and defaults (``WaitForClusterOperator``, ``BrokerRollOperator``);
- ``groups.broker_roll`` / ``groups.cluster_guard``: the task graph they build in a DAG;
- ``runtime.roll_store.key``, ``runtime.grid.show_step`` outside a task runner;
- ``kafka_ops.restart_plan.resolve_groups``, ``hooks.kafka_admin.normalize_log_dirs``.

The text sent over SSH (``runtime.broker_commands.remote_command``) is tested in tests/unit/test_runtime.py;
the cluster lock and the operators' ``execute`` against real sandboxes in
tests/integration/test_airflow_components.py (kazoo ships no in-memory test double).
"""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
from hooks.kafka_admin import normalize_log_dirs
from kafka_ops.cluster import Broker, ClusterState, Partition
from kafka_ops.profile import ClusterProfile
from kafka_ops.restart_plan import resolve_groups
from probes.cluster import PROBES, ClusterProber

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

BROKERS = tuple(Broker(b, f"10.0.0.{b}", 9092, f"r{b}") for b in (0, 1, 2))


def state(partitions: list[Partition], brokers: tuple[Broker, ...] = BROKERS, **kwargs) -> ClusterState:
    kwargs.setdefault("default_min_insync", 2)
    return ClusterState(brokers=brokers, partitions=tuple(partitions), controller_id=0, **kwargs)


HEALTHY = state([Partition("orders", p, p, (p, (p + 1) % 3, (p + 2) % 3), (0, 1, 2)) for p in range(3)])
# broker 2 stopped: gone from the metadata and from every ISR; it led orders-2, which moved to 0
WITHOUT_2 = state([Partition("orders", 0, 0, (0, 1, 2), (0, 1)), Partition("orders", 1, 1, (1, 2, 0), (1, 0)),
                   Partition("orders", 2, 0, (2, 0, 1), (0, 1))], brokers=BROKERS[:2])
# broker 2 back and caught up, but orders-2 is still led by 0
BACK_UNBALANCED = state([Partition("orders", 0, 0, (0, 1, 2), (0, 1, 2)),
                         Partition("orders", 1, 1, (1, 2, 0), (1, 2, 0)),
                         Partition("orders", 2, 0, (2, 0, 1), (0, 1, 2))])


# --- probes: rules ---------------------------------------------------------------------------------


def test_every_probe_kind_is_registered() -> None:
    assert sorted(PROBES) == ["caught_up", "gate", "gone", "healthy", "leadership", "registered"]
    assert {k for k, p in PROBES.items() if p.needs_broker} == {"gate", "gone", "registered"}
    # only these cost a DescribeConfigs per poll
    assert {k for k, p in PROBES.items() if p.configs} == {"gate", "healthy", "leadership"}


def test_probe_descriptions() -> None:
    assert PROBES["gone"].describe(3) == "broker 3 has left the cluster metadata"
    assert PROBES["caught_up"].describe(3) == "broker 3 is back in every ISR"
    assert PROBES["caught_up"].describe(None) == "every replica is back in its ISR (URP = 0)"
    assert PROBES["leadership"].describe(None) == "preferred leaders lead again everywhere"
    assert PROBES["healthy"].describe(None).startswith("the cluster is healthy")
    assert "None" not in PROBES["healthy"].describe(None)


def test_gone_and_registered() -> None:
    assert PROBES["gone"].rule(WITHOUT_2, 2).ok and not PROBES["registered"].rule(WITHOUT_2, 2).ok
    assert PROBES["registered"].rule(WITHOUT_2, 2).message() == "registered: broker 2 not in the metadata yet"
    still = PROBES["gone"].rule(HEALTHY, 2)
    assert not still.ok and still.message() == "gone: broker 2 still in the metadata"
    assert PROBES["registered"].rule(HEALTHY, 2).message() == "registered: OK"


def test_caught_up_for_a_broker_and_for_the_cluster() -> None:
    missing = PROBES["caught_up"].rule(WITHOUT_2, 2)
    assert not missing.ok and missing.reasons == ["orders-0: broker 2 not in isr [0, 1] (leader 0)",
                                                  "orders-1: broker 2 not in isr [1, 0] (leader 1)",
                                                  "orders-2: broker 2 not in isr [0, 1] (leader 0)"]
    assert PROBES["caught_up"].rule(WITHOUT_2, 1).ok, "broker 1 is in every ISR it belongs to"
    urp = PROBES["caught_up"].rule(WITHOUT_2, None)
    assert not urp.ok and urp.rule == "urp" and len(urp.reasons) == 3
    assert PROBES["caught_up"].rule(BACK_UNBALANCED, 2).ok and PROBES["caught_up"].rule(BACK_UNBALANCED, None).ok


def test_leadership_for_a_broker_and_for_the_cluster() -> None:
    away = PROBES["leadership"].rule(BACK_UNBALANCED, 2)
    assert not away.ok and "broker 2 leads 0 of its 1 preferred partitions" in away.message()
    assert PROBES["leadership"].rule(BACK_UNBALANCED, 1).ok
    assert not PROBES["leadership"].rule(BACK_UNBALANCED, None).ok
    assert PROBES["leadership"].rule(HEALTHY, 2).ok and PROBES["leadership"].rule(HEALTHY, None).ok


def test_healthy() -> None:
    assert PROBES["healthy"].rule(HEALTHY, None).message() == "cluster-health: OK"
    assert not PROBES["healthy"].rule(WITHOUT_2, None).ok
    assert not PROBES["healthy"].rule(BACK_UNBALANCED, None).ok


def test_gate_passes_on_a_healthy_cluster_and_names_the_blockers() -> None:
    assert PROBES["gate"].rule(HEALTHY, 1).message() == "gate broker 1: OK"
    closed = PROBES["gate"].rule(WITHOUT_2, 1)
    assert not closed.ok
    assert "urp (3)" in closed.message() and "can-restart (3)" in closed.message()


def test_gate_of_a_broker_that_is_down_fails() -> None:
    down = PROBES["gate"].rule(WITHOUT_2, 2)
    assert not down.ok and down.message() == "gate: broker 2 is not in the metadata (down)"


# --- probes: ClusterProber -------------------------------------------------------------------------


@pytest.fixture
def prober(monkeypatch: pytest.MonkeyPatch) -> ClusterProber:
    """A prober whose snapshots come from ``prober.snapshots`` (no cluster), recording ``configs``."""
    p = ClusterProber(ClusterProfile(cluster="c", bootstrap_servers="127.0.0.1:1"), request_timeout_s=1)
    p.asked = []
    p.snapshot = HEALTHY

    def fake_state(configs: bool = True) -> ClusterState:
        p.asked.append(configs)
        return p.snapshot

    monkeypatch.setattr(p, "state", fake_state)
    return p


def test_prober_look_judges_a_fresh_snapshot(prober: ClusterProber) -> None:
    assert prober.look("gate", 1).ok
    assert not prober.look("gone", 1).ok
    prober.snapshot = WITHOUT_2
    assert prober.look("gone", 2).ok and not prober.look("caught_up").ok
    assert prober.asked == [True, False, False, False]


@pytest.mark.parametrize("kind", ["caught_up", "leadership", "healthy"])
def test_prober_configs_only_where_the_rule_needs_them(prober: ClusterProber, kind: str) -> None:
    prober.look(kind)
    assert prober.asked == [PROBES[kind].configs]


@pytest.mark.parametrize("kind", ["gate", "gone", "registered"])
def test_prober_refuses_a_broker_probe_without_a_broker(prober: ClusterProber, kind: str) -> None:
    with pytest.raises(ValueError, match=f"probe '{kind}' needs a broker"):
        prober.look(kind)
    assert prober.asked == [], "nothing was asked"


def test_prober_refuses_an_unknown_kind(prober: ClusterProber) -> None:
    with pytest.raises(KeyError, match="healthy_ish"):
        prober.look("healthy_ish")


# --- operators and groups --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["gate", "gone", "registered", "healthy_ish"])
def test_wait_for_cluster_needs_a_cluster_wide_probe(kind: str) -> None:
    from operators.cluster_checks import WaitForClusterOperator

    with pytest.raises(ValueError, match=f"kind must be a cluster-wide probe, got '{kind}'"):
        WaitForClusterOperator(task_id="health_gate", kind=kind, settings={})
    assert WaitForClusterOperator(task_id="ok", kind="healthy", settings={}).kind == "healthy"


def test_run_outcome_checks_health_only_after_a_run_that_did_its_work(monkeypatch) -> None:
    """The teardown's final health check: after a run whose tasks all succeeded and whose rolls finished, it waits
    until the cluster is healthy, then releases the lock; the roll records stay (a clear of the succeeded run
    restarts nothing again). A cluster still unhealthy fails the run there (clearing the task checks again); the
    lock is released all the same. A run with a failed task, or a roll left unfinished, is not checked."""
    from airflow.sdk.exceptions import AirflowFailException
    from kafka_ops.run_outcome import TaskFailure
    from operators import run_outcome

    events: list = []
    verdicts: list = []

    def wait(op, kind):
        assert kind == "healthy"
        verdict = verdicts.pop(0)
        if isinstance(verdict, Exception):
            raise verdict
        events.append("healthy")
        return verdict

    unfinished: list[str] = []
    failures: list = []
    notes: list = []
    monkeypatch.setattr(run_outcome, "wait_for_cluster", wait)
    monkeypatch.setattr(run_outcome, "release_lock",
                        lambda profile, holder, log, timeout_s: events.append(("release", holder)) or True)
    monkeypatch.setattr(run_outcome.RunOutcomeOperator, "profile", "profile of kafka_prod")
    monkeypatch.setattr(run_outcome.run_report, "task_states",
                        lambda context: [{"task_id": "check_and_lock", "map_index": -1, "state": "success"}])
    monkeypatch.setattr(run_outcome.run_report, "failed_tasks", lambda context, crumbs, exclude: list(failures))
    monkeypatch.setattr(run_outcome.run_report, "roll_lines",
                        lambda context, ids, dry, failed: ([f"roll {i!r}" for i in ids], list(unfinished)))
    monkeypatch.setattr(run_outcome.run_report, "cluster_line", lambda profile: ("cluster kafka_prod: fine", []))
    marks: list[str | None] = []
    monkeypatch.setattr(run_outcome, "note_outcome", lambda context, first, items, log, keep_mark: (
        notes.append((first, items)), marks.append(keep_mark)))
    ti = SimpleNamespace(dag_id="kafka_rolling_restart", run_id="manual__1")
    context = {"params": {}, "ti": ti, "dag": SimpleNamespace(dag_id="kafka_rolling_restart"), "run_id": "manual__1"}
    op = run_outcome.RunOutcomeOperator(task_id="run_outcome", settings={"cluster": "kafka_prod"},
                                        operation="rolling restart", roll_ids=["controllers", "restart"])
    verdicts[:] = [AirflowFailException("gave up after 900 s waiting until the cluster is healthy: 2 under-replicated")]
    with pytest.raises(AirflowFailException, match="the run failed at run_outcome: final health: gave up after 900 s"
                                                   ".*2 under-replicated"):
        op.execute(context)
    assert events == [("release", "kafka_rolling_restart/manual__1")], \
        "a run whose cluster is not healthy has its lock released"
    assert notes[-1][0].startswith("**Failed**: rolling restart on kafka_prod: run_outcome: final health: gave up")
    events.clear()
    verdicts[:] = ["healthy: nothing offline, nothing under-replicated"]
    assert op.execute(context) == "succeeded"
    assert events == ["healthy", ("release", "kafka_rolling_restart/manual__1")]
    assert marks[-2:] == [run_outcome.MAP_INDEX_MARK, None], \
        "the map-index lines are kept while the run may be cleared, left out once it succeeded"
    assert notes[-1] == ("**Succeeded**: rolling restart on kafka_prod",
                         ["cluster kafka_prod: fine",
                          "final health: healthy: nothing offline, nothing under-replicated", "roll 'controllers'",
                          "roll 'restart'", "cluster lock released"])
    # not after a failure, nor after a roll left unfinished (verdicts is empty: a wait would fail the test)
    events.clear()
    failures[:] = [TaskFailure("restart.broker", 1, error="broker 1 did not come back", at=5.0)]
    with pytest.raises(AirflowFailException, match="the run failed at restart.broker"):
        op.execute(context)
    items = notes[-1][1]
    advice_at = next(i for i, item in enumerate(items) if item.startswith("next:"))
    assert advice_at < items.index("roll 'controllers'"), \
        f"the advice comes before the details, which a note at Airflow's limit loses first: {items}"
    failures.clear()
    unfinished[:] = ["restart"]
    with pytest.raises(AirflowFailException, match="the run stopped"):
        op.execute(context)
    assert events == [("release", "kafka_rolling_restart/manual__1")] * 2


def test_broker_roll_operator_runs_one_batch_at_a_time_without_retries() -> None:
    """At most the acting instance and the next one (waiting in its task for its turn) at once; no retries."""
    from operators.broker_roll import BrokerRollOperator
    from operators.node_roll import ACTIVE_PER_ROLL

    op = BrokerRollOperator(task_id="broker", roll_id="restart", batch={"batch": 1, "batches": 1, "label": "broker 1",
                                                                         "brokers": [{"id": 1}]}, settings={})
    assert ACTIVE_PER_ROLL == 2 and op.max_active_tis_per_dagrun == ACTIVE_PER_ROLL and op.retries == 0


def test_run_outcome_releases_the_lock_and_says_so(monkeypatch) -> None:
    """The teardown releases the lock if this run still holds it and says so in the note; a lock it cannot release
    fails the run (the note, with the hand-break hint, is written first); a run refused before its lock was taken
    does not ask the lock store; a run whose task states cannot be read releases a lock it may hold. The task
    states are read once."""
    from airflow.sdk.exceptions import AirflowFailException
    from operators import run_outcome
    from runtime.failure_record import FAILURE_KEY

    answers: list = []

    def release_lock(profile, holder, log, timeout_s):
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        assert (profile, holder, timeout_s) == ("profile of kafka_prod", "kafka_rolling_restart/manual__1", 300)
        return answer

    xcoms: dict = {}
    notes: list = []
    reads: list = []
    crumbs: list | None = [{"task_id": "check_and_lock", "map_index": -1, "state": "success"}]

    def breadcrumbs(dag_id, run_id):
        reads.append(run_id)
        if crumbs is None:
            raise ConnectionError("the execution API did not answer")
        return crumbs

    monkeypatch.setattr(run_outcome, "release_lock", release_lock)
    monkeypatch.setattr(run_outcome, "wait_for_cluster", lambda op, kind: "healthy")
    monkeypatch.setattr(run_outcome.RunOutcomeOperator, "profile", "profile of kafka_prod")
    monkeypatch.setattr(run_outcome.run_report, "roll_lines", lambda context, ids, dry, failed: ([], []))
    monkeypatch.setattr(run_outcome.run_report, "cluster_line", lambda profile: ("cluster kafka_prod: fine", []))
    monkeypatch.setattr(run_outcome, "note_outcome",
                        lambda context, first, items, log, keep_mark: notes.append((first, items)))
    ti = SimpleNamespace(dag_id="kafka_rolling_restart", run_id="manual__1", get_task_breadcrumbs=breadcrumbs,
                         xcom_pull=lambda task_ids, key="return_value", map_indexes=-1: xcoms.get((task_ids, key)))
    context = {"params": {"cluster": "kafka_prod", "dry_run": False}, "ti": ti,
               "dag": SimpleNamespace(dag_id="kafka_rolling_restart"), "run_id": "manual__1"}
    op = run_outcome.RunOutcomeOperator(task_id="run_outcome", settings={"cluster": "kafka_prod", "dry_run": False},
                                        operation="rolling restart")
    answers[:] = [True]
    assert op.execute(context) == "succeeded"
    assert notes[-1] == ("**Succeeded**: rolling restart on kafka_prod", ["cluster kafka_prod: fine",
                                                                            "final health: healthy",
                                                                            "cluster lock released"])
    assert reads == ["manual__1"], "the task states are read once"
    answers[:] = [False]
    op.execute(context)
    assert notes[-1][1][-1] == ("cluster lock not held by this run at its end (never taken, or released by the task "
                                "that failed)")
    answers[:] = [AirflowFailException("gave up after 300 s ... break it by hand: zkCli.sh delete /kafka-ops/lock")]
    with pytest.raises(AirflowFailException, match="the run failed at run_outcome: gave up after 300 s"):
        op.execute(context)
    first, items = notes[-1]
    assert first.startswith("**Failed**: rolling restart on kafka_prod: run_outcome: gave up after 300 s")
    assert "cluster lock NOT released" in items and "zkCli.sh delete" in first
    # refused before the lock: the lock store is not asked (release_lock would fail: no answer queued)
    crumbs[:] = [{"task_id": "check_and_lock", "map_index": -1, "state": "failed"}]
    xcoms[("check_and_lock", FAILURE_KEY)] = {"error": "unknown param 'broker'", "refused": True, "at": 1.0}
    with pytest.raises(AirflowFailException, match="the run refused at check_and_lock: unknown param 'broker'"):
        op.execute(context)
    assert notes[-1][0] == "**Refused**: rolling restart on kafka_prod: check_and_lock: unknown param 'broker'"
    assert "cluster lock: never taken (check_and_lock refused the run first)" in notes[-1][1]
    crumbs[:] = []  # not run at all (Airflow failed the run before it started)
    xcoms.clear()
    op.execute(context)
    assert "cluster lock: never taken (check_and_lock did not run)" in notes[-1][1]
    # the states unreadable: the lock task may have run, so a lock this run holds is released
    crumbs = None
    answers[:] = [True]
    with pytest.raises(AirflowFailException, match="the run failed"):
        op.execute(context)
    assert "cluster lock released" in notes[-1][1] and answers == []
    assert notes[-1][1][0].startswith("task states unreadable: the execution API did not answer")


def test_broker_roll_and_cluster_guard_build_the_operation_graph() -> None:
    from airflow.sdk import DAG
    from groups.broker_roll import broker_roll
    from groups.cluster_guard import cluster_guard

    with DAG(dag_id="roll_shape", schedule=None, params={}) as dag:
        outcome = cluster_guard(broker_roll("restart"), operation="rolling restart")
    ids = set(dag.task_dict)
    assert ids == {"check_and_lock", "restart.plan", "restart.broker", "run_outcome"}
    tasks = dag.task_dict

    def downstream(task_id: str) -> set[str]:
        return set(tasks[task_id].downstream_task_ids)

    assert downstream("check_and_lock") == {"restart.plan", "run_outcome"}
    assert downstream("restart.plan") == {"restart.broker"}
    assert downstream("restart.broker") == {"run_outcome"}
    assert tasks["check_and_lock"].is_setup and outcome.upstream_task_ids == {"restart.broker", "check_and_lock"}
    # the run's one leaf and the lock's teardown (it releases the lock, after failures too): it fails the run when
    # it fails, and runs after a refusal before the lock
    assert outcome.task_id == "run_outcome" and outcome.is_teardown and outcome.on_failure_fail_dagrun
    assert outcome.trigger_rule == "all_done" and outcome.roll_ids == ["restart"]
    broker = tasks["restart.broker"]
    assert broker.partial_kwargs.get("max_active_tis_per_dagrun", getattr(broker, "max_active_tis_per_dagrun",
                                                                             None)) == 2


# --- runtime: roll store key, grid label -----------------------------------------------------------


def test_roll_store_key_names_dag_run_and_roll() -> None:
    from runtime.roll_store import RollStore, key

    assert key("kafka_rolling_restart", "manual__2026-11-22T10:00:00", "restart") == (
        "kafka_ops_roll__kafka_rolling_restart__manual__2026-11-22T10:00:00__restart")
    context = {"dag": SimpleNamespace(dag_id="kafka_upgrade"), "run_id": "manual__1"}
    assert RollStore(context, "ibp").key == "kafka_ops_roll__kafka_upgrade__manual__1__ibp"
    assert RollStore(context, "ibp").key != RollStore(context, "lmf").key


def test_grid_label_outside_a_task_runner_changes_nothing(caplog: pytest.LogCaptureFixture) -> None:
    from runtime.grid import show_step

    ti = SimpleNamespace(map_index=2, rendered_map_index="broker 3 (3/3)")
    caplog.set_level(logging.DEBUG, logger="runtime.grid")
    show_step({"ti": ti}, "broker 3 (3/3) · caught up?" + "x" * 300)
    assert ti.rendered_map_index == "broker 3 (3/3)"
    show_step({}, "no task instance")  # never raises


# --- resolve_groups --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "requested, profile, expected",
    [
        (None, ("a", "b"), None),  # null param: no lag gate
        ([], ("a", "b"), ["a", "b"]),  # empty: the profile's list
        ([], (), None),  # nothing watched anywhere: no lag gate
        (["c"], ("a", "b"), ["c"]),  # given: replaces the profile's list
        (["b", "a", "b", "c", "a"], (), ["b", "a", "c"]),  # duplicates dropped, order kept
        ([], ("a", "a", "b"), ["a", "b"]),
    ],
)
def test_resolve_groups(requested, profile, expected) -> None:
    assert resolve_groups(requested, profile) == expected


# --- describe_log_dirs normalization -----------------------------------------------------------------


def test_normalize_log_dirs_flattens_and_reports_log_dir_errors() -> None:
    raw = [
        {"broker": 1, "log_dirs": [
            {"log_dir": "/d1", "error_code": 0, "topics": [
                {"name": "t", "partitions": [{"partition_index": 1, "partition_size": 10, "offset_lag": 2,
                                              "is_future_key": False},
                                             {"partition_index": 0, "partition_size": 5}]}]},
            {"log_dir": "/d2", "error_code": 57, "topics": []},
        ]},
        {"broker": 0, "log_dirs": []},
    ]
    assert normalize_log_dirs(raw) == [
        {"broker": 1, "log_dir": "/d1", "topic": "t", "partition": 0, "size_bytes": 5, "offset_lag": 0,
         "is_future": False},
        {"broker": 1, "log_dir": "/d1", "topic": "t", "partition": 1, "size_bytes": 10, "offset_lag": 2,
         "is_future": False},
        {"broker": 1, "log_dir": "/d2", "error_code": 57},
    ]


def test_cluster_guard_finds_the_rolls_it_wraps_and_refuses_a_roll_id_used_twice() -> None:
    from airflow.sdk import DAG
    from groups.broker_roll import broker_roll
    from groups.cluster_guard import cluster_guard
    from groups.controller_roll import controller_roll

    with DAG(dag_id="rolls_found", schedule=None, params={}) as dag:
        cluster_guard([controller_roll("ctl"), broker_roll("first"), broker_roll("second")], operation="test")
    assert dag.task_dict["run_outcome"].roll_ids == ["ctl", "first", "second"]
    # Airflow refuses two groups of one id; a roll id twice comes from a group of another name around a roll
    from airflow.sdk import TaskGroup

    with DAG(dag_id="rolls_twice", schedule=None, params={}):
        first = broker_roll("same")
        with TaskGroup(group_id="outer") as outer:
            broker_roll("same")
        with pytest.raises(ValueError, match="roll id 'same' is used by two rolls"):
            cluster_guard([first, outer], operation="test")


def test_a_side_by_side_part_waits_for_the_part_before_and_the_next_part_waits_for_all_of_it() -> None:
    from airflow.providers.standard.operators.empty import EmptyOperator
    from airflow.sdk import DAG
    from groups.broker_roll import broker_roll
    from groups.cluster_guard import cluster_guard, task_in
    from groups.controller_roll import controller_roll

    with DAG(dag_id="side_by_side", schedule=None, params={}) as dag:
        check = EmptyOperator(task_id="check")
        ctl, brk = controller_roll("ctl"), broker_roll("brk", broker_trigger_rule="none_failed")
        cluster_guard([[check, task_in(ctl, "plan"), task_in(brk, "plan")], task_in(ctl, "controller"),
                       task_in(brk, "broker")], operation="test")
    tasks = dag.task_dict
    ahead = {"check", "ctl.plan", "brk.plan"}
    assert set(tasks["check_and_lock"].downstream_task_ids) == {*ahead, "run_outcome"}
    for task_id in ahead:
        assert "ctl.controller" in tasks[task_id].downstream_task_ids
        assert not set(tasks[task_id].downstream_task_ids) & ahead, f"{task_id} waits for none of the others"
    assert set(tasks["ctl.controller"].downstream_task_ids) == {"brk.broker"}
    # an empty ctl roll is skipped by its plan as that ends, maybe before "check" ends: brk.broker waits for all three
    assert set(tasks["brk.broker"].upstream_task_ids) == {"brk.plan", "ctl.controller", "check", "ctl.plan"}
    assert tasks["brk.broker"].partial_kwargs["trigger_rule"] == "none_failed"
    assert set(tasks["brk.broker"].downstream_task_ids) == {"run_outcome"}
    assert tasks["run_outcome"].roll_ids == ["ctl", "brk"], "the plans are found inside a side-by-side part"

    with DAG(dag_id="no_such_task", schedule=None, params={}):
        with pytest.raises(KeyError, match=r"task group 'r' has no task 'steps' \(it has \['r.broker', 'r.plan'\]\)"):
            task_in(broker_roll("r"), "steps")
