"""A real worker's task process SIGKILLed mid-wave (what the OOM killer or a lost VM does), on the session's
``airflow standalone`` (scheduler, LocalExecutor, Task SDK supervisor) pointed at a sandbox of this test's own:
the wave task fails, the run fails, the reassignment runs on in Kafka; "Clear, only failed" (the REST call the UI
makes) resumes the run, whose wave finds its moves again and starts none twice; the broker is drained and
stopped, no throttle is left, the lock is released, no acknowledged message is lost, nothing went offline."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from observers import MetadataWatcher, admin, assert_no_acknowledged_message_lost, snapshot
from test_airflow_ui import states, unsuccessful, wait_for_run
from test_kafka_reassignment_dags import registered, throttles_left
from test_reassignment_faults import LOCK, Reassigning, controller
from ui_standalone import RunningAirflow, wait_until

from demo import sandbox_env
from sandbox.traffic_watch import watched_traffic

pytestmark = [pytest.mark.sandbox, pytest.mark.destructive]

DAG = "kafka_decommission"
CONF = {"cluster": "kafka_sandbox", "throttle_bytes_per_s": 400_000, "healthcheck_interval_s": 1,
        "healthcheck_timeout_s": 180, "verify_interval_s": 1, "verify_timeout_s": 600}


def point_airflow_at(client: Any, workdir: Path) -> None:
    """The sandbox's connections into the metadata DB (as the demo writes them): every task from now on uses
    that sandbox."""
    client.put_connections(list(sandbox_env.connection_bodies(sandbox_env.connection_env(workdir)).values()))


def running_wave(client: Any, run_id: str) -> dict[str, Any] | None:
    """The wave task instance that runs in a worker process now (its pid known), or None."""
    for (task_id, _), ti in states(client, run_id, DAG).items():
        if task_id == "reassign.wave" and ti["state"] == "running" and ti.get("pid"):
            return ti
    return None


def wave_result(client: Any, run_id: str, map_index: int) -> Any:
    entry = client.request("GET", f"/dags/{DAG}/dagRuns/{run_id}/taskInstances/reassign.wave/xcomEntries/"
                                  "return_value", params={"map_index": map_index, "deserialize": "true"})
    value = entry.get("value")
    return json.loads(value) if isinstance(value, str) else value


@pytest.mark.extended
def test_a_task_process_killed_mid_wave_fails_the_run_and_a_clear_resumes_it_without_a_move_twice(
    airflow_ui: RunningAirflow, sandbox: Any, fresh_sandbox: Any
) -> None:
    client = airflow_ui.client
    own = fresh_sandbox(brokers=4, racks=2)
    own.wait_healthy(timeout_s=120)
    drained = max(b for b in own.broker_ids if b != controller(own))
    point_airflow_at(client, Path(own.workdir))
    try:
        wait_until(f"the DAG {DAG} to be parsed", 120, lambda: client.get_dag(DAG), poll_s=2.0)
        client.set_paused(DAG, False)
        moving = Reassigning(own.bootstrap_servers)
        with watched_traffic(own.workdir, own.bootstrap_servers, own.broker_ids) as traffic, \
                MetadataWatcher(own.bootstrap_servers, interval_s=0.5) as watcher:
            run_id = client.trigger(DAG, {**CONF, "brokers": [drained]})["dag_run_id"]
            wave = wait_until("a wave task running while its moves copy", 300,
                              lambda: (ti := running_wave(client, run_id)) and moving() and ti, poll_s=0.5)
            os.kill(int(wave["pid"]), signal.SIGKILL)
            killed_at = time.monotonic()
            in_flight = set(moving.partitions)
            print(f"SIGKILLed {wave['task_id']}[{wave['map_index']}] (pid {wave['pid']}) while moves to "
                  f"{sorted(moving.adding)} ran")

            failed = wait_for_run(client, run_id, DAG)
            tis = states(client, run_id, DAG)
            assert failed["state"] == "failed", unsuccessful(client, run_id, DAG)
            assert tis[("reassign.wave", wave["map_index"])]["state"] == "failed", tis
            # nothing cancelled the moves in flight (a cancelled move reverts to the old replicas): they still copy,
            # or they reached their targets off the drained broker while Airflow noticed the dead task
            if not moving():
                reverted = [f"{p.topic}-{p.partition}" for p in snapshot(admin(own.bootstrap_servers)).partitions
                            if (p.topic, p.partition) in in_flight and drained in p.replicas]
                assert not reverted, f"the moves in flight at the kill were cancelled: {reverted}"
            print(f"run failed {time.monotonic() - killed_at:.0f} s after the kill")

            client.request("POST", f"/dags/{DAG}/clearTaskInstances", json={
                "dag_run_id": run_id, "only_failed": True, "reset_dag_runs": True, "dry_run": False})
            resumed = wait_for_run(client, run_id, DAG)
        assert resumed["state"] == "success", unsuccessful(client, run_id, DAG)
        result = wave_result(client, run_id, wave["map_index"])
        assert result and result.get("moves") == 0, f"the resumed wave started no move again: {result}"
        note = wait_until("the run's note", 30, lambda: client.get_run(DAG, run_id).get("note"))
        assert note.startswith("**Succeeded**"), note
        assert_no_acknowledged_message_lost(traffic)
        assert watcher.ever_offline() == []
        after = snapshot(admin(own.bootstrap_servers))
        assert all(drained not in p.replicas for p in after.partitions), "the drained broker holds nothing"
        assert drained not in registered(own), "the drained broker was stopped"
        assert throttles_left(own) == {}
        with own.zk() as zk:
            assert not zk.exists(LOCK), "the lock was released"
    finally:
        point_airflow_at(client, Path(sandbox.workdir))
