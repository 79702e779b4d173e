"""A real roll under Airflow's own scheduler (``airflow standalone`` of the UI tests), not ``dag.test()``:
``dag.test()`` runs ready tasks one by one in no fixed order and ignores ``max_active_tis_per_dagrun``, so
only a scheduler shows that the brokers go strictly one after another (Kafka's own logs: each shutdown after the
previous broker started again), in the plan's order, without a single retry (the earlier sensor-based sequencing
needed dozens against apache/airflow#71172), with at most two broker tasks at once (the acting one and the next one,
waiting in its task for its turn). While the first broker runs, the Grid already labels the brokers still waiting
("broker 3 (3/3)", not a bare map index)."""

from __future__ import annotations

import json
import re
import time
from datetime import datetime
from pathlib import Path
from urllib.parse import quote

import pytest
from test_airflow_ui import unsuccessful
from ui_standalone import DAG_ID, RunningAirflow, wait_until

from demo import airflow_proc

pytestmark = [pytest.mark.ui, pytest.mark.sandbox]


def _registrations(sandbox) -> dict[int, int]:
    with sandbox.zk() as zk:
        return {int(b): int(json.loads(zk.get(f"/brokers/ids/{b}")[0])["timestamp"])
                for b in zk.get_children("/brokers/ids")}


def _at(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _not_started(tis: list[dict]) -> dict[int, str]:
    """The broker instances that have not started (no state or scheduled: nothing of theirs has run, so no
    template has been rendered), with the label the API (and the Grid) shows for each."""
    return {t["map_index"]: t["rendered_map_index"] for t in tis
            if t["task_id"] == "restart.broker" and t["map_index"] >= 0 and t["state"] in (None, "scheduled")
            and not t["start_date"]}


def _worker_maps(home: Path) -> dict[int, str]:
    """``{pid: /proc/<pid>/maps}`` of the LocalExecutor workers and task processes of the Airflow in ``home``
    (their titles: "airflow worker -- LocalExecutor: <idle>", "airflow worker -- <task instance>")."""
    found = {}
    for pid in airflow_proc.marked_processes(home):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"airflow worker -- "):
                found[pid] = Path(f"/proc/{pid}/maps").read_text()
        except OSError:
            continue  # gone meanwhile
    return found


def _run_end(client, run_id: str, timeout_s: float = 600) -> dict:
    """The run once it ended (success or failed), polled every 2 s up to ``timeout_s``."""
    return wait_until(f"run {run_id} to end", timeout_s,
                      lambda: (r := client.get_run(DAG_ID, run_id))["state"] in ("success", "failed") and r,
                      poll_s=2.0)


def test_the_scheduler_imports_the_operations_for_its_task_processes(airflow_ui: RunningAirflow) -> None:
    """``runtime.task_preimport`` in a real ``airflow scheduler``: it says so on its stderr (standalone's log), and
    the LocalExecutor workers it forked hold confluent-kafka's native library, which Airflow itself never loads: a
    task process forked from them starts with the operations and their clients imported."""
    said = [line for line in (airflow_ui.home / airflow_proc.LOG_NAME).read_text(errors="replace").splitlines()
            if "kafka-ops: " in line and "imported" in line]
    assert any(" modules imported for the task processes in " in line for line in said), said
    assert not any("not imported ahead of the tasks" in line for line in said), said
    workers = _worker_maps(airflow_ui.home)
    assert workers, "no LocalExecutor worker of this Airflow found"
    assert all("confluent_kafka" in maps for maps in workers.values()), sorted(workers)


def test_scheduler_rolls_brokers_one_at_a_time_without_retries(airflow_ui: RunningAirflow, sandbox, page,
                                                               tmp_path) -> None:
    sandbox.wait_healthy(timeout_s=120)
    before = _registrations(sandbox)
    client = airflow_ui.client
    # a soak keeps the last broker's task from starting for a while: the next task starts beside the acting one,
    # so without it the last one started about 4 s after the first broker's, before the browser read the labels
    run_id = client.trigger(DAG_ID, {"cluster": "kafka_sandbox", "healthcheck_interval_s": 2,
                                     "lag_ok_consecutive": 2, "soak_s": 15})["dag_run_id"]
    waiting: dict[int, str] = {}  # map index -> label shown while the instance waited for its turn

    def last_waits() -> bool:
        tis = client.task_instances(DAG_ID, run_id)
        waiting.update(_not_started(tis))
        return len(before) - 1 in _not_started(tis) and any(
            t["task_id"] == "restart.broker" and t["state"] == "running" for t in tis)

    # the Grid's list of the broker instances while the first one runs and the last one waits: every one
    # is labelled "broker <id> (<n>/<total>)", not by a bare map index (apache/airflow#57208)
    wait_until("the first broker running and the last one waiting", 300, last_waits, poll_s=1.0)
    page.goto(f"/dags/{DAG_ID}/runs/{quote(run_id, safe='')}/tasks/restart.broker/mapped")
    page.get_by_role("heading", name=f"restart.broker [{len(before)}]").wait_for()
    cells = page.get_by_role("table").get_by_role("cell").filter(has_text=re.compile(r"^broker \d+ \(\d+/\d+\)"))
    wait_until(f"{len(before)} broker labels in the mapped instances list", 60,
               lambda: cells.count() == len(before), poll_s=0.5)
    shown = {int((c.get_by_role("link").get_attribute("href") or "").rsplit("/", 1)[1]): c.inner_text().strip()
             for c in cells.all()}
    still = _not_started(client.task_instances(DAG_ID, run_id))
    path = tmp_path / "grid-waiting-brokers.png"
    page.screenshot(path=str(path))
    print(f"screenshot: {path}; labels {shown}; not started after reading them: {sorted(still)}")
    assert len(before) - 1 in still, "the last broker started before its label was read: the check proves nothing"

    run = _run_end(client, run_id, 900)
    tis = client.task_instances(DAG_ID, run_id)
    assert run["state"] == "success", [(t["task_id"], t["map_index"], t["state"]) for t in tis]
    # a skipped instance never ran (try 0: the empty controllers roll of a ZooKeeper-mode cluster)
    assert {t["task_id"]: t["try_number"] for t in tis if t["try_number"] != 1 and t["state"] != "skipped"} == {}, \
        "no task was retried"
    brokers = sorted((t for t in tis if t["task_id"] == "restart.broker"), key=lambda t: t["map_index"])
    assert len(brokers) == len(before)
    # at most the acting instance and the next one (started ahead, waiting in its task for its turn) at once
    for earlier, later in zip(brokers, brokers[2:], strict=False):
        assert _at(later["start_date"]) >= _at(earlier["end_date"]), (
            f"{later['rendered_map_index']} started before {earlier['rendered_map_index']} ended: three at once")
    after = _registrations(sandbox)
    assert all(after[b] > before[b] for b in before), "every broker was restarted"
    order = [int(t["rendered_map_index"].split()[1]) for t in brokers]
    assert sorted(order) == sorted(before)
    # strictly one broker at a time, judged from Kafka's own logs: each broker's shutdown began only after the
    # broker before it in the plan had started again
    runs = {b: sandbox.node_runs(b) for b in order}
    assert all(len(runs[b]) >= 2 and runs[b][-1].started and runs[b][-2].shutdown for b in order), runs
    for previous, current in zip(order, order[1:], strict=False):
        assert runs[current][-2].shutdown >= runs[previous][-1].started, (
            f"broker {current} began to shut down before broker {previous} had started again")
    labels = {t["map_index"]: t["rendered_map_index"] for t in brokers}
    # (the running one showed its current step after its label: "broker 3 (1/3) · gate")
    assert {i: shown[i] for i in still} == {i: labels[i] for i in still}, "the Grid labelled the waiting brokers"
    assert all(shown[i].startswith(labels[i]) for i in labels), (shown, labels)
    assert waiting and {i: labels[i] for i in waiting} == waiting, "waiting instances had their final labels"
    sandbox.wait_healthy(timeout_s=120)


def test_a_broker_task_waiting_for_its_turn_fails_untouched_when_the_one_before_fails(airflow_ui: RunningAirflow,
                                                                                       sandbox) -> None:
    """Under the scheduler the second broker's task starts while the first one works and waits in its task for its
    turn. The first one's gate fails (a broker outside the roll stopped behind the run's back: its partitions
    under-replicated until ``healthcheck_timeout_s``): the waiting task fails at once, its broker untouched, and no
    broker of the run is restarted."""
    sandbox.wait_healthy(timeout_s=120)
    client = airflow_ui.client
    brokers = sorted(sandbox.registered_brokers())
    down, rolled = brokers[-1], brokers[:2]
    starts_before = sandbox.starts(brokers)
    rc, _, err = sandbox.ssh(down, "kafka-service stop")
    assert rc == 0, err
    try:
        run_id = client.trigger(DAG_ID, {"cluster": "kafka_sandbox", "brokers": rolled, "consumer_groups": None,
                                         "healthcheck_interval_s": 1,
                                         "healthcheck_timeout_s": 12})["dag_run_id"]
        run = _run_end(client, run_id)
        tis = {(t["task_id"], t["map_index"]): t for t in client.task_instances(DAG_ID, run_id)}
        assert run["state"] == "failed", {k: t["state"] for k, t in tis.items()}
        first, second = tis[("restart.broker", 0)], tis[("restart.broker", 1)]
        assert first["state"] == "failed" and second["state"] == "failed", (first, second)
        assert _at(second["start_date"]) < _at(first["end_date"]), "the second task started while the first worked"
        said = " ".join(str(e.get("event", "")) for e in client.task_log(DAG_ID, run_id, "restart.broker",
                                                                          second["try_number"], 1))
        assert "waiting for broker" in said and "started ahead of its turn" in said, said[-2000:]
        one, two = (int(t["rendered_map_index"].split()[1]) for t in (first, second))
        assert sorted([one, two]) == rolled
        assert f"broker {two} NOT touched: broker {one} (before it in roll 'restart') did not finish" in said, \
            said[-2000:]
        assert "Running command" not in said, "no command was sent by the waiting task"
    finally:
        rc, _, err = sandbox.ssh(down, "kafka-service start")
        assert rc == 0, err
    assert sandbox.starts(brokers) == {b: starts_before[b] + (b == down) for b in brokers}, \
        "no broker of the run was restarted (only the one stopped behind its back was started again)"
    sandbox.wait_healthy(timeout_s=120)


def test_a_paused_roll_restarts_no_broker_whose_task_was_already_waiting_and_goes_on_when_unpaused(
        airflow_ui: RunningAirflow, sandbox) -> None:
    """Airflow's pause holds only tasks not started yet, and the next broker's task starts ahead of its turn to wait
    in its task. Paused during the first broker's soak, the roll restarts no other broker: the waiting task gives its
    worker slot back at its turn (``up_for_reschedule``) and stays there while the DAG is paused; unpaused, the run
    goes on and ends with every broker restarted exactly once."""
    sandbox.wait_healthy(timeout_s=120)
    client = airflow_ui.client
    brokers = sorted(sandbox.registered_brokers())
    rolled = brokers[:2]
    starts_before = sandbox.starts(brokers)
    run_id = client.trigger(DAG_ID, {"cluster": "kafka_sandbox", "brokers": rolled, "soak_s": 10,
                                     "healthcheck_interval_s": 2, "lag_ok_consecutive": 2})["dag_run_id"]

    def rolls() -> dict[int, dict]:
        return {t["map_index"]: t for t in client.task_instances(DAG_ID, run_id) if t["task_id"] == "restart.broker"}

    def first_soaking_second_waiting() -> bool:
        tis = rolls()
        restarted = [b for b, n in sandbox.starts(brokers).items() if n > starts_before[b]]
        return bool(restarted) and all(tis.get(i, {}).get("state") == "running" for i in (0, 1)) and restarted

    paused = False
    try:
        restarted = wait_until("the first broker restarted (soaking) and the second one's task waiting", 300,
                               first_soaking_second_waiting, poll_s=0.5)
        client.set_paused(DAG_ID, True)
        paused = True
        assert len(restarted) == 1, f"paused too late: {restarted} restarted already"
        first = restarted[0]
        second = next(b for b in rolled if b != first)
        given_back = wait_until("the second broker's task at its turn", 120,
                                lambda: (s := rolls()[1]["state"]) in ("up_for_reschedule", "success", "failed") and s,
                                poll_s=0.5)
        assert given_back == "up_for_reschedule", f"broker {second}'s task went on while the DAG was paused"
        # the task asked to run again 2 s on: while the DAG stays paused the scheduler queues it no more
        seen = set()
        held_until = time.monotonic() + 6
        while time.monotonic() < held_until:
            seen.add(rolls()[1]["state"])
            time.sleep(0.5)
        assert seen <= {"up_for_reschedule", "scheduled"}, seen
        assert sandbox.starts(brokers) == {b: starts_before[b] + (b == first) for b in brokers}, \
            f"broker {second} was not touched while the DAG was paused"
        client.set_paused(DAG_ID, False)
        paused = False
        run = _run_end(client, run_id)
    finally:
        if paused:
            client.set_paused(DAG_ID, False)
    tis = rolls()
    assert run["state"] == "success", {i: t["state"] for i, t in tis.items()}
    said = " ".join(str(e.get("event", "")) for e in client.task_log(DAG_ID, run_id, "restart.broker",
                                                                      tis[1]["try_number"], 1))
    assert f"broker {second}: its turn, but the DAG is paused: nothing touched" in said, said[-2000:]
    assert said.count(f"stdout: broker {second} stopped (pid") == 1, said[-2000:]
    assert sandbox.starts(brokers) == {b: starts_before[b] + (b in rolled) for b in brokers}, \
        "each broker of the run restarted exactly once, the others not at all"
    sandbox.wait_healthy(timeout_s=120)


def test_a_run_marked_success_while_a_broker_waits_at_its_gate_leaves_no_broker_down_and_the_lock_free(
        airflow_ui: RunningAirflow, sandbox) -> None:
    """Airflow 3 tells a running task that its run was marked only at the task's next heartbeat, with SIGTERM, on
    which the Task SDK calls ``on_kill`` and nothing else (SIGKILL 5 s later); the run's teardown meanwhile releases
    the lock. Seen before ``runtime.stopping``: the second broker's task, at its gate when the run was marked success,
    passed the gate, took the lock again, stopped and started its broker, and was killed holding the lock, so that no
    later run could take it. Now the task stops at the request: before its broker's stop it touches nothing; after
    it (the gate passed before the SIGTERM came) it starts its broker again first and stops there. Either way no
    broker is left down, none is restarted twice, the lock is free and the next run takes it."""
    from hooks.cluster_lock import LOCK_PATH

    sandbox.wait_healthy(timeout_s=120)
    client = airflow_ui.client
    brokers = sorted(sandbox.registered_brokers())
    rolled = brokers[:2]
    starts_before = sandbox.starts(brokers)
    # sixteen OK Burrow polls in a row per gate, 1 s apart: a streak of 15 s, longer than Burrow's window (11 s in
    # the sandbox) and than the first broker's come-back, whose polls feed the streak (with 4 polls a slow come-back
    # could carry the whole streak and the second gate pass at once: a run that ended before that gate was seen in
    # CI); so the second broker holds at its gate for seconds, long enough for the mark to land there
    run_id = client.trigger(DAG_ID, {"cluster": "kafka_sandbox", "brokers": rolled, "healthcheck_interval_s": 1,
                                     "lag_ok_consecutive": 16})["dag_run_id"]

    def second_at_its_gate() -> bool:
        tis = {t["map_index"]: t for t in client.task_instances(DAG_ID, run_id) if t["task_id"] == "restart.broker"}
        second = tis.get(1) or {}
        if client.get_run(DAG_ID, run_id)["state"] in ("success", "failed"):
            raise AssertionError(f"run {run_id} ended before its second broker's gate: {unsuccessful(client, run_id)}")
        return second.get("state") == "running" and str(second.get("rendered_map_index") or "").endswith("gate")

    wait_until("the second broker's task at its gate", 300, second_at_its_gate, poll_s=0.3)
    client.request("PATCH", f"/dags/{DAG_ID}/dagRuns/{quote(run_id, safe='')}", json={"state": "success"})
    _run_end(client, run_id, 120)
    second_ti = next(t for t in client.task_instances(DAG_ID, run_id)
                     if t["task_id"] == "restart.broker" and t["map_index"] == 1)

    def second_ended() -> str:
        said = " ".join(str(e.get("event", "")) for e in client.task_log(
            DAG_ID, run_id, "restart.broker", second_ti["try_number"], 1))
        return said if "Task killed" in said else ""

    # the supervisor's last word on the task process (SIGTERM, then SIGKILL within 5 s): past it nothing of it acts
    said = wait_until("the second broker's task process ended", 60, second_ended, poll_s=1.0)
    assert "told to stop from outside" in said, said[-3000:]
    assert "took it again" not in said, f"the task took the lock again after the run's teardown: {said[-3000:]}"
    with sandbox.zk() as zk:
        assert zk.exists(LOCK_PATH) is None, f"the lock is free: {zk.get(LOCK_PATH)[0] if zk.exists(LOCK_PATH) else ''}"
    second = int(str(second_ti["rendered_map_index"]).split()[1])
    sandbox.wait_healthy(timeout_s=120)  # no broker left down
    started = {b: n - starts_before[b] for b, n in sandbox.starts(brokers).items()}
    assert started[second] <= 1 and all(started[b] == 0 for b in brokers if b not in rolled), (started, said[-3000:])
    if started[second]:
        assert "is brought back first, without the lock" in said, said[-3000:]
    # the next run takes the lock
    dry = client.trigger(DAG_ID, {"cluster": "kafka_sandbox", "brokers": rolled, "dry_run": True,
                                  "lock_wait": "fail"})["dag_run_id"]
    ended = _run_end(client, dry, 300)
    assert ended["state"] == "success", ended.get("note")
