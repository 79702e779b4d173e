"""Rolling-restart overhead: the DAG's wall time against the waits no orchestrator can avoid.

For each cluster size (default 3 and 6 brokers, one after the other) this starts a sandbox in its own
workdir and address range, runs ``kafka_rolling_restart`` once, stops the sandbox, and prints a table. Two
runners (``--runner``):

- ``dagtest`` (default): ``dag.test()`` in a child process (fresh AIRFLOW_HOME, SQLite, ``airflow db migrate``; the
  sandbox's connections in its environment; a dry run of the DAG before the clock starts, as a deployment's
  Airflow has run tasks before: dag.test()'s first task starts its in-process execution API, 6-21 s on 2 cores);
- ``scheduler``: a real Airflow (``airflow standalone``: scheduler, LocalExecutor, dag-processor, api-server; what
  ``make demo`` starts), triggered over the REST API after a warm-up dry run: what an operator sees.

The table:

- wall: the trigger to the run's end (plan, lock, every broker, final health, unlock), seconds; ``airflow_s``: the
  trigger to the first task's start (Airflow's own: dag.test() serializes the DAG and syncs the bundle, a scheduler
  picks the run up); ``1st_stop_s``: the first task's start to the first stop sent (ours: checks, lock, preflight,
  plans, the first gate); ``fixed_s``: that plus the last broker's leadership back to the run's end;
- unavoidable, per broker, from the marks the roll's broker task returns (``restart.broker`` XCom):
  stop = stop sent -> gone from the metadata (controlled shutdown until the broker is gone),
  start = start sent -> registered again,
  catch-up = registered -> back in every ISR;
  these include the waits' poll latency (up to ``healthcheck_interval_s`` each), so they are upper
  bounds of the cluster's own time and the ratio is a conservative (low) estimate of the overhead;
- client traffic during the run (unless ``--no-traffic``), confluent-kafka and kafka-python each: an idempotent
  ``acks=all`` producer and a consumer-group reader on a topic of their own (``sandbox.traffic_watch``):
  acknowledged, lost, duplicated, and producer errors by code per restarted broker;
- Kafka's own, per broker task (one broker, or a batch), from the sandbox nodes' logs between the task's ``began`` and
  ``done`` marks (``sandbox.restart_timeline``): shutdown (``shutting down`` -> ``shut down completed``), start (the
  JVM's launch -> ``started``), catch-up (-> the last ISR join a leader logged), leadership (-> the last time one of
  the batch's brokers became a partition's leader), their sum beside the task's time, the rest being ours (the
  gate, the SSH commands, the waits' polls; "exit to next launch" is ours too: the gone wait and the start command);
- ratio = wall / sum of unavoidable; overhead per broker = (wall - airflow - fixed - ctrl_s - unavoidable) /
  brokers: the per-broker tasks' own cost (Airflow's task start, the gate, the SSH commands, the waits' polls).
- the machine at rest before the run: it starts once the CPU was busy at most 35% over 3 s (at most 60 s waited,
  the fraction printed; ``cpu_share.machine_at_rest``);
- the machine's CPU during the run (``bench/cpu_share.py``: every process sampled every 0.5 s, about 1% of a core),
  by what took it: the Kafka JVMs, the bench's clients, Airflow's scheduler, api-server, PostgreSQL and tasks; on a
  machine of few cores a broker's start is CPU-bound, so these say what a faster roll would take CPU from;
- seen from outside during the run: an independent client (the tests' ``observers.MetadataWatcher``) reads the
  metadata every 0.5 s; the reads with an offline partition and those with a partition under
  ``min.insync.replicas`` although its replication factor is above it are counted and named;
- Burrow's answer time during the run (``bench/burrow_latency.py``: each workload group's lag asked every 1 s): the
  roll's side polls of Burrow get 3 s each (``runtime.lag_watch``), and these say how often the loaded machine's
  Burrow takes longer;
- ``--mode kraft``: a KRaft sandbox (``--controllers``, default 3; Kafka 4.0.0); the roll restarts the
  controllers first (``roles=all``, unless ``--conf`` says otherwise): ``ctrl_s`` is the controllers' roll,
  from its first task's start to its last task's end, and is left out of ``fixed``.

Usage: ``.venv/bin/python bench/restart_overhead.py [--sizes 3 6] [--conf '{"healthcheck_interval_s": 5}']``;
``--dag kafka_config_change --conf '{"changes": {"queued.max.requests": 400}, "scope": [1]}'`` times a config change
(its roll's broker task is the same; brokers it leaves alone have no stop / start).
The sandboxes are always stopped (also on errors and Ctrl-C); their workdirs are removed after a successful
measurement unless ``--keep``, or ``--keep-slow SECONDS`` and a broker task's step from its stop on took that long
(a rare stall, e.g. a leadership wait of 15 s, caught with its logs). Exit 1 if a measurement or a run failed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from burrow_latency import BurrowLatency  # noqa: E402

sys.path.insert(0, str(REPO / "tests" / "integration"))
from cpu_share import REST_CPU_BUSY, CpuSampler, describe, machine_at_rest  # noqa: E402
from observers import MetadataWatcher  # noqa: E402 - the tests' independent metadata watcher, reused

from sandbox import restart_timeline, settings  # noqa: E402
from sandbox import state as sandbox_state  # noqa: E402
from sandbox.layout import Workdir  # noqa: E402
from sandbox.traffic_watch import watched_traffic  # noqa: E402

DAG_ID = "kafka_rolling_restart"
ADDRESS_BASES = {3: "127.0.20.11", 6: "127.0.21.11"}
UNAVOIDABLE = {  # name -> (mark that begins it, mark that ends it)
    "stop": ("stop_sent", "gone"),
    "start": ("start_sent", "registered"),
    "catch_up": ("registered", "caught_up"),
}
RUN_TIMEOUT_S = 3600


def _address_base(size: int) -> str:
    return ADDRESS_BASES.get(size, f"127.0.{20 + size}.11")


def _sandbox(args: list[str], timeout_s: float = 600) -> None:
    """Run ``python -m sandbox ARGS`` (output on our stderr); raises CalledProcessError / TimeoutExpired."""
    subprocess.run([sys.executable, "-m", "sandbox", *args], cwd=REPO, check=True, timeout=timeout_s,
                   stdout=sys.stderr)


def _connections(workdir: Path) -> dict[str, str]:
    """``AIRFLOW_CONN_*`` variables from the sandbox's ``airflow.env`` (``export NAME='json'`` lines)."""
    import shlex

    env = {}
    for line in (workdir / "airflow.env").read_text().splitlines():
        words = [w for w in shlex.split(line, comments=True) if w != "export"]
        if words and "=" in words[0]:
            name, value = words[0].split("=", 1)
            env[name] = value
    return env


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    return (end - start).total_seconds() if start and end else None


def broker_waits(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per broker (by map index): its label and the unavoidable waits in seconds (None when a step was
    skipped, e.g. a resumed broker). ``rows`` are dicts with map_index, rendered_map_index, ``marks`` (the broker
    task's XCom marks, epoch seconds) and ``ids`` (its XCom's broker ids)."""
    out = []
    for r in sorted(rows, key=lambda r: r["map_index"]):
        marks = r.get("marks") or {}
        row: dict[str, Any] = {"broker": r.get("rendered_map_index") or f"map {r['map_index']}", "marks": marks,
                               "ids": list(r.get("ids") or [])}
        for name, (first, last) in UNAVOIDABLE.items():
            row[name] = marks[last] - marks[first] if first in marks and last in marks else None
        out.append(row)
    return out


def timeline(tis: list[dict[str, Any]], began: float) -> list[dict[str, Any]]:
    """Every task instance that ran, in start order: ``{"task", "start_s", "duration_s"}`` with ``start_s``
    seconds from the trigger (``began``, epoch seconds): where the fixed overhead goes. ``tis``: dicts with
    ``task_id``, ``map_index``, ``start`` and ``end`` (epoch seconds or None)."""
    ran = sorted((t for t in tis if t["start"] and t["end"]), key=lambda t: t["start"])
    return [{"task": t["task_id"] + (f"[{t['map_index']}]" if t["map_index"] >= 0 else ""),
             "start_s": t["start"] - began, "duration_s": t["end"] - t["start"]} for t in ran]


def kafka_own(workdir: Path, size: int, brokers: list[dict[str, Any]]) -> None:
    """Add each batch's Kafka-own seconds (``sandbox.restart_timeline.batch_summary``: shutdown, down, start,
    catch-up, leadership, their sum ``kafka_s``) to its row of :func:`broker_waits` as ``"kafka"``, read from the
    node logs of the sandbox in ``workdir`` (read once) between the batch task's ``began`` and ``done`` marks
    (every broker's log: the partitions' leaders log the ISR joins); ``"task_s"``: the task's ``began`` to
    ``done``."""
    logs = restart_timeline.read_logs(Workdir.at(workdir), range(size))
    for b in brokers:
        marks, ids = b["marks"], b.get("ids") or []
        if not ids or "began" not in marks or "done" not in marks:
            continue
        found = restart_timeline.restarts_of(logs, since=marks["began"], until=marks["done"])
        b["kafka"] = restart_timeline.batch_summary(found, ids)
        b["task_s"] = marks["done"] - marks["began"]


def summarize(state: str, began: float, ended: float, tis: list[dict[str, Any]],
              rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The result of one run, whoever ran it: ``tis`` as for :func:`timeline` plus ``state``; ``rows`` the broker
    task's marks as for :func:`broker_waits`; ``began`` / ``ended``: trigger and end, epoch seconds (returned too:
    a caller judging the run from outside needs the measured run's, not the warm-up's).

    ``airflow_start_s``: the trigger to the first task's start (Airflow's: dag.test() serializes the DAG and syncs
    the bundle; a scheduler picks the run up); ``first_stop_s``: the first task's start to the first stop sent
    (ours: checks, lock, preflight, plans, the first gate; a KRaft controllers' roll left out); ``fixed_s``: that
    plus the last broker's leadership back to the run's end."""
    brokers = broker_waits(rows)
    stops = [b["marks"]["stop_sent"] for b in brokers if "stop_sent" in b["marks"]]
    backs = [b["marks"]["leadership"] for b in brokers if "leadership" in b["marks"]]
    ctrl = [t for t in tis if t["task_id"] == "controllers.controller" and t["map_index"] >= 0 and t["start"]]
    ctrl_s = max(t["end"] for t in ctrl) - min(t["start"] for t in ctrl) if ctrl else 0.0
    ran = [t for t in tis if t["start"] and t["state"] not in ("skipped", "upstream_failed", "removed")]
    first_task = min((t["start"] for t in ran), default=began)
    first_stop = min(stops) - first_task - ctrl_s if stops else None
    return {
        "state": state,
        "began": began,
        "ended": ended,
        "wall_s": ended - began,
        "controllers_s": ctrl_s,
        "controllers": len(ctrl),
        "airflow_start_s": first_task - began,
        "first_stop_s": first_stop,
        "fixed_s": first_stop + (ended - max(backs)) if first_stop is not None and backs else None,
        "failed": sorted(f"{t['task_id']}[{t['map_index']}]" for t in tis if t["state"] == "failed"),
        "brokers": brokers,
        "timeline": timeline(tis, began),
    }


def child(result_path: Path, conf: dict[str, Any], dag_id: str = DAG_ID, warm: bool = True) -> int:
    """In the child process (environment prepared by the parent): run the DAG with ``dag.test()`` and write
    :func:`summarize`'s result to ``result_path``. ``warm``: a dry run of the same DAG first, so the measured run
    meets Airflow as a deployment's runs do, started (dag.test()'s in-process execution API and its serialization
    machinery start with the first task: that task took 6-21 s on 2 cores, none of it ours). Returns 0."""
    from airflow.dag_processing.dagbag import DagBag
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    bag = DagBag(dag_folder=str(REPO / "dags"))
    if bag.import_errors:
        raise SystemExit(f"DAG import errors: {bag.import_errors}")
    dag = bag.dags[dag_id]
    if warm:  # dag.test() keeps a run's conf as the DAG's param defaults: the measured run names dry_run again
        dag.test(run_conf={**conf, "dry_run": True})
        conf = {"dry_run": False, **conf}
    began = time.time()
    run = dag.test(run_conf=conf)
    ended = time.time()
    tis = list(run.get_task_instances())
    rows = []
    with create_session() as session:
        for t in tis:
            if t.task_id == "restart.broker" and t.map_index >= 0:
                query = XComModel.get_many(run_id=t.run_id, dag_ids=t.dag_id, task_ids=t.task_id,
                                           map_indexes=t.map_index, key="return_value")
                value = session.scalars(query).first()
                xcom = (XComModel.deserialize_value(value) or {}) if value else {}
                rows.append({"map_index": t.map_index, "rendered_map_index": t.rendered_map_index,
                             "marks": xcom.get("marks") or {}, "ids": xcom.get("brokers") or []})
    plain = [{"task_id": t.task_id, "map_index": t.map_index, "state": str(t.state),
              "start": t.start_date.timestamp() if t.start_date else None,
              "end": t.end_date.timestamp() if t.end_date else None} for t in tis]
    state = str(run.state.value if hasattr(run.state, "value") else run.state)
    result_path.write_text(json.dumps(summarize(state, began, ended, plain, rows), indent=1))
    return 0


def _epoch(text: str | None) -> float | None:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() if text else None


class DagTestRunner:
    """Runs the DAG with ``dag.test()`` in a child process (this file with ``--child``): a fresh Airflow home
    (SQLite, ``airflow db migrate``) with the sandbox's connections, a dry run before the clock (``child``'s
    ``warm``). The child's output goes to ``log_path``."""

    name = "dag.test"

    def __init__(self, root: Path, workdir: Path, dag_id: str, log_path: Path) -> None:
        self.root, self.dag_id, self.log_path = root, dag_id, log_path
        home = root / "airflow"
        home.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW_CONN_", "AIRFLOW__"))}
        env.update(_connections(workdir))
        env.update({
            "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"), "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
            "PATH": f"{Path(sys.prefix) / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        })
        self.env = env
        with open(log_path, "ab") as log:
            subprocess.run([str(Path(sys.prefix) / "bin" / "airflow"), "db", "migrate"], env=env, cwd=root,
                           stdout=log, stderr=subprocess.STDOUT, check=True, timeout=600)

    def run(self, conf: dict[str, Any]) -> dict[str, Any]:
        """One run; :func:`summarize`'s result. Raises RuntimeError when the child failed (log named)."""
        result_path = self.root / "result.json"
        result_path.unlink(missing_ok=True)
        with open(self.log_path, "ab") as log:
            rc = subprocess.run(
                [sys.executable, __file__, "--child", str(result_path), "--dag", self.dag_id, "--conf",
                 json.dumps(conf)],
                env=self.env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, timeout=RUN_TIMEOUT_S, check=False,
            ).returncode
        if rc != 0 or not result_path.exists():
            raise RuntimeError(f"the run failed (exit {rc}); see {self.log_path}")
        return json.loads(result_path.read_text())

    def close(self) -> None:
        pass


#: Seconds between two looks at a triggered run's state. The run's end is the one Airflow recorded, so the
#: poll's pace changes no figure; each look is a REST call the api-server answers while our tasks need it too (the
#: other tool's turn in ``side_by_side.py`` has no such look). Measured on 2 cores, the bench's own CPU during our
#: 3-broker turns at 200 msg/s was alike either way (0.33 core at 0.2 s, 0.36 at 1 s; the client traffic's threads
#: take most of it).
POLL_S = 1.0


class SchedulerRunner:
    """Runs the DAG on a real Airflow (``airflow standalone`` as the demo starts it: scheduler, LocalExecutor,
    dag-processor, api-server; port ``port``) with the sandbox's connections in its metadata DB, triggered over the
    REST API and polled every :data:`POLL_S`. A dry run first: a worker's first task pays its cold start (5-6 s), once
    per worker, not once per run. :meth:`close` stops Airflow (called here when the set-up fails)."""

    name = "scheduler"

    def __init__(self, root: Path, workdir: Path, dag_id: str, log_path: Path, port: int = 8095) -> None:
        from demo import cli as demo_cli
        from demo import sandbox_env

        self.home, self.dag_id = root / "airflow", dag_id
        args = argparse.Namespace(airflow_home=self.home, port=port, start_timeout=600.0)
        try:
            with open(log_path, "a") as log, contextlib.redirect_stdout(log):
                settings = demo_cli.ensure_airflow(args)
                self.client, _ = demo_cli.login(settings, 600)
                self.client.put_connections(list(sandbox_env.connection_bodies(
                    sandbox_env.connection_env(workdir)).values()))
                demo_cli.wait_for_dag(self.client, settings.home, 600, dag_id)
            self.client.set_paused(dag_id, False)
            self._once({"dry_run": True, "cluster": "kafka_sandbox"})
        except BaseException:  # no runner for the caller to close: its Airflow (port, database) would outlive the bench
            self.close()
            raise

    def _once(self, conf: dict[str, Any]) -> tuple[str, dict[str, Any], float, float]:
        began = time.time()
        run_id = self.client.trigger(self.dag_id, conf)["dag_run_id"]
        while (run := self.client.get_run(self.dag_id, run_id))["state"] not in ("success", "failed"):
            if time.time() - began > RUN_TIMEOUT_S:
                raise RuntimeError(f"run {run_id} still {run['state']} after {RUN_TIMEOUT_S} s")
            time.sleep(POLL_S)
        return run_id, run, began, _epoch(run["end_date"]) or time.time()

    def run(self, conf: dict[str, Any]) -> dict[str, Any]:
        """One run; :func:`summarize`'s result (the run's end as Airflow recorded it)."""
        run_id, run, began, ended = self._once(conf)
        tis = self.client.task_instances(self.dag_id, run_id)
        rows = []
        for t in tis:
            if t["task_id"] == "restart.broker" and t["map_index"] >= 0:
                entry = self.client.request(
                    "GET", f"/dags/{self.dag_id}/dagRuns/{run_id}/taskInstances/restart.broker/xcomEntries/"
                    "return_value", params={"map_index": t["map_index"], "deserialize": "true"}, ok_404=True) or {}
                value = entry.get("value")
                value = value if isinstance(value, dict) else {}
                rows.append({"map_index": t["map_index"], "rendered_map_index": t.get("rendered_map_index"),
                             "marks": value.get("marks") or {}, "ids": value.get("brokers") or []})
        plain = [{"task_id": t["task_id"], "map_index": t["map_index"], "state": t.get("state"),
                  "start": _epoch(t.get("start_date")), "end": _epoch(t.get("end_date"))} for t in tis]
        return summarize(run["state"], began, ended, plain, rows)

    def close(self) -> None:
        from demo import airflow_db, airflow_proc

        airflow_proc.stop(self.home)
        airflow_db.remove(self.home)


RUNNERS = {"dagtest": DagTestRunner, "scheduler": SchedulerRunner}


def up_sandbox(workdir: Path, size: int, mode: str = "zookeeper", controllers: int = 3,
               broker_config: dict[str, str] | None = None) -> None:
    """``python -m sandbox up`` for ``size`` brokers in ``workdir`` (its own address range), retried once."""
    up = ["up", "--workdir", str(workdir), "--brokers", str(size), "--address-base", _address_base(size)]
    if mode == "kraft":
        up += ["--mode", "kraft", "--controllers", str(controllers)]
    for key, value in (broker_config or {}).items():
        up += ["--broker-config", f"{key}={value}"]
    try:
        _sandbox(up)
    except subprocess.CalledProcessError:  # seen once on the shared machine with an empty message: retry once
        print(f"{size} brokers: sandbox up failed; retrying once", file=sys.stderr, flush=True)
        _sandbox(["down", "--workdir", str(workdir)], timeout_s=300)
        _sandbox(up)


def traffic_result(watched: Any) -> dict[str, Any]:
    """What ``sandbox.traffic_watch.watched_traffic`` saw, for :func:`table`."""
    return {"traffic": {**watched.result.to_dict(), "per_restart": watched.per_restart},
            "traffic_kafka_python": {**watched.kafka_python.to_dict(), "per_restart": watched.kafka_python_per_restart}}


def measure(size: int, base: Path, conf: dict[str, Any], keep: bool, traffic: bool = True,
            mode: str = "zookeeper", controllers: int = 3, rate_per_s: float = 500.0,
            dag_id: str = DAG_ID, runner: str = "dagtest", keep_slow_s: float | None = None) -> dict[str, Any]:
    """Sandbox of ``size`` brokers up -> one DAG run (``runner``: :data:`RUNNERS`) -> sandbox down. Returns the
    run's :func:`summarize` result plus ``size``, ``cpu`` (where the machine's CPU went during the run,
    ``cpu_share.describe``) (and, with ``traffic``, what an idempotent ``acks=all`` producer and
    a reader saw during the run, producer errors per restarted broker; ``sandbox.traffic_watch``); the runner's
    output is in ``<base>/<size>/run.log`` (``<base>/<size>-2/`` for the same size's second run, and so on).
    ``rate_per_s``: the confluent-kafka producer's messages per second (the kafka-python one sends a fifth of it).
    ``keep_slow_s``: keep the sandbox's logs (its nodes' and Airflow's) when a broker task's step took that long or
    longer (:func:`slow_steps`), as ``keep`` does for every run.

    Raises:
        RuntimeError: the run failed or timed out (the log path is named).
    """
    root = base / str(size)
    n = 1
    while root.exists():  # the same size measured again (--sizes 3 3)
        n += 1
        root = base / f"{size}-{n}"
    workdir = root / "sandbox"
    root.mkdir(parents=True)
    ok, chosen = False, None
    try:
        up_sandbox(workdir, size, mode, controllers)
        chosen = RUNNERS[runner](root, workdir, dag_id, root / "run.log")
        waited, busy = machine_at_rest()
        print(f"{size} brokers: the CPU {busy:.0%} busy before the run (waited {waited:.1f} s for at most "
              f"{REST_CPU_BUSY:.0%})", flush=True)
        bootstrap = json.loads((workdir / "env.json").read_text())["bootstrap_servers"]
        loaded = sandbox_state.load(Workdir.at(workdir))
        burrow_url = loaded.burrow_url
        with watched_traffic(workdir, bootstrap, list(range(size)), rate_per_s=rate_per_s) if traffic \
                else nullcontext() as watched, CpuSampler() as cpu, \
                BurrowLatency(burrow_url, settings.BURROW_CLUSTER, list(settings.WORKLOAD_GROUPS)) as burrow, \
                MetadataWatcher(bootstrap, interval_s=OUTSIDE_POLL_S,
                                zookeeper=loaded.zookeeper_connect if mode == "zookeeper" else None) as outside:
            result = chosen.run(conf)
        ok = True
        slow = slow_steps(result["brokers"], keep_slow_s) if keep_slow_s is not None else []
        if slow:
            keep = True
            print(f"{size} brokers: keeping the logs in {workdir.parent} (a step of {keep_slow_s:g} s or more: "
                  f"{'; '.join(slow)})", flush=True)
        kafka_own(workdir, size, result["brokers"])
        try:
            cpu_line = describe(cpu.spent(result["began"], result["ended"]), result["wall_s"])
        except ValueError as exc:  # the samples do not span the run: say so, keep the run's figures
            cpu_line = f"not read ({exc})"
        for b in result["brokers"]:  # the machine while the task's brokers started: what their JVMs shared it with
            m = b.get("marks") or {}
            if "start_sent" in m and "registered" in m:
                try:
                    b["start_cpu"] = describe(cpu.spent(m["start_sent"], m["registered"]),
                                              m["registered"] - m["start_sent"])
                except ValueError:
                    pass
        out = {"size": size, "mode": mode, "runner": chosen.name, **result, "cpu": cpu_line,
               "outside": seen_from_outside(outside, settings.MIN_INSYNC_REPLICAS),
               "burrow": burrow.describe(result["began"], result["ended"])}
        if watched is not None:
            out.update(traffic_result(watched))
        return out
    finally:
        try:
            if chosen is not None:
                chosen.close()
        finally:
            try:
                _sandbox(["down", "--workdir", str(workdir)], timeout_s=300)
            finally:
                if ok and not keep:  # a failed measurement keeps the sandbox's logs
                    shutil.rmtree(workdir, ignore_errors=True)


#: Seconds between the outside watcher's metadata reads during a run (``observers.MetadataWatcher``).
OUTSIDE_POLL_S = 0.5


def seen_from_outside(watcher: Any, min_isr: int) -> str:
    """One line on what an independent client saw in the metadata it read every :data:`OUTSIDE_POLL_S` during the
    run (``observers.MetadataWatcher``): how many reads, those with an offline partition (a leaderless one that
    ZooKeeper already gave a live leader is the answering broker's stale cache, not counted), and those with a
    partition under ``min_isr`` in sync although its replication factor is above it."""
    offline = watcher.ever_offline()
    under = watcher.ever_under_min_isr(min_isr)
    return (f"{len(watcher.views)} metadata reads ({len(watcher.errors)} failed): offline partitions in "
            f"{len(offline)}{_named(offline)}, a partition under min.insync.replicas={min_isr} in {len(under)}"
            f"{_named(under)}")


def _named(found: list[tuple[float, list[Any]]], limit: int = 6) -> str:
    names = sorted({f"{p.topic}-{p.partition}" for _, parts in found for p in parts})
    if not names:
        return ""
    return f" ({', '.join(names[:limit])}{' ...' if len(names) > limit else ''})"


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


#: The broker task's marks in the order it reaches them (``operators.node_roll``, ``operators.broker_roll``).
MARK_ORDER = ("began", "stop_sent", "gone", "start_sent", "registered", "quorum", "caught_up", "leadership", "done")


def mark_steps(marks: dict[str, float]) -> list[tuple[str, float]]:
    """The seconds between consecutive marks a broker task reached (``[("began->stop_sent", 0.41), ...]``, in
    :data:`MARK_ORDER`; a mark not reached is left out): where a task's time goes, Kafka's waits and ours."""
    reached = [m for m in MARK_ORDER if m in marks]
    return [(f"{a}->{b}", marks[b] - marks[a]) for a, b in zip(reached, reached[1:], strict=False)]


def slow_steps(brokers: list[dict[str, Any]], threshold_s: float) -> list[str]:
    """The steps of the broker tasks (:func:`mark_steps`) from the stop on that took ``threshold_s`` or more, e.g.
    ``["broker 2: caught_up->leadership 15.0 s"]`` (the task's Grid label, else its broker ids): what ``--keep-slow``
    keeps a run's logs for (the gate before the stop is left out: it waits out the lag streak by design)."""
    out = []
    for b in brokers:
        who = b.get("broker") or f"brokers {', '.join(str(i) for i in b.get('ids') or [])}"
        for step, seconds in mark_steps(b.get("marks") or {}):
            if not step.startswith("began->") and seconds >= threshold_s:
                out.append(f"{who}: {step} {seconds:.1f} s")
    return out


def table(results: list[dict[str, Any]]) -> str:
    """The summary table (one row per run) followed by per-broker detail lines.

    ``airflow_s``: the trigger to the first task's start (Airflow's); ``1st_stop_s``: the first task's start to the
    first stop (ours); ``fixed_s``: that plus the last leadership back to the end; ``overhead_s/broker``: what is
    left of the wall time per broker after Airflow's start, ours fixed, the controllers' roll and the unavoidable
    waits (stop, start, catch-up)."""
    head = f"{'runner':>9} {'mode':>9} {'brokers':>7} {'ctrl_s':>6} {'state':>8} {'wall_s':>7} {'stop_s':>7} " \
           f"{'start_s':>7} {'catchup_s':>9} {'unavoid_s':>9} {'ratio':>6} {'airflow_s':>9} {'1st_stop_s':>10} " \
           f"{'fixed_s':>7} {'overhead_s/broker':>17}"
    lines = [head, "-" * len(head)]
    detail = []
    for r in results:
        sums = {k: sum(b[k] or 0 for b in r["brokers"]) for k in UNAVOIDABLE}
        unavoidable = sum(sums.values())
        ratio = r["wall_s"] / unavoidable if unavoidable else None
        fixed = r.get("fixed_s") or 0.0
        airflow = r.get("airflow_start_s") or 0.0
        # the controllers' roll (KRaft) is neither fixed overhead nor the brokers'
        per_broker = (r["wall_s"] - airflow - fixed - r.get("controllers_s", 0.0) - unavoidable) / \
            max(1, len(r["brokers"]))
        lines.append(f"{r.get('runner', 'dag.test'):>9} {r.get('mode', 'zookeeper'):>9} {r['size']:>7} "
                     f"{r.get('controllers_s', 0.0):>6.1f} {r['state']:>8} {r['wall_s']:>7.1f} {sums['stop']:>7.1f} "
                     f"{sums['start']:>7.1f} {sums['catch_up']:>9.1f} {unavoidable:>9.1f} {_fmt(ratio):>6} "
                     f"{airflow:>9.1f} {_fmt(r.get('first_stop_s')):>10} {_fmt(r.get('fixed_s')):>7} "
                     f"{per_broker:>17.1f}")
        for b in r["brokers"]:
            detail.append(f"  {r['size']} brokers, {b['broker']}: stop {_fmt(b['stop'])} s, "
                          f"start {_fmt(b['start'])} s, catch-up {_fmt(b['catch_up'])} s")
            steps = mark_steps(b["marks"])
            if steps:
                detail.append("    the task's steps (its marks): " + ", ".join(f"{name} {s:.2f}" for name, s in steps))
            k = b.get("kafka")
            if k:
                beyond = b["task_s"] - k["kafka_s"] if k.get("kafka_s") is not None else None
                detail.append(f"    Kafka's own (its logs): shutdown {_fmt(k['shutdown_s'])} s, start "
                              f"{_fmt(k['start_s'])} s (JVM launch to started), catch-up {_fmt(k['catch_up_s'])} s, "
                              f"leadership {_fmt(k['leadership_s'])} s = {_fmt(k['kafka_s'])} s of the task's "
                              f"{_fmt(b['task_s'])} s; ours {_fmt(beyond)} s (exit to next launch "
                              f"{_fmt(k['down_s'])} s)")
            if b.get("start_cpu"):
                detail.append(f"    the machine's CPU from the start sent to registered: {b['start_cpu']}")
        own = [b for b in r["brokers"] if (b.get("kafka") or {}).get("kafka_s") is not None]
        if own:
            kafka_total = sum(b["kafka"]["kafka_s"] for b in own)
            task_total = sum(b["task_s"] for b in own)
            detail.append(f"  {r['size']} brokers, {len(own)} broker tasks: Kafka's own {kafka_total:.1f} s of their "
                          f"{task_total:.1f} s; ours {task_total - kafka_total:.1f} s, "
                          f"{(task_total - kafka_total) / len(own):.1f} s a task")
        steps = r.get("timeline") or []
        if steps:
            detail.append(f"  {r['size']} brokers, task timeline (start s from the call, duration s): "
                          + ", ".join(f"{t['task']} {t['start_s']:.1f}+{t['duration_s']:.1f}" for t in steps))
        if r.get("cpu"):
            detail.append(f"  {r['size']} brokers, the machine's CPU during the run: {r['cpu']}")
        if r.get("outside"):
            detail.append(f"  {r['size']} brokers, seen from outside during the run: {r['outside']}")
        if r.get("burrow"):
            detail.append(f"  {r['size']} brokers, Burrow's answers during the run (a group's lag, every 1 s): "
                          f"{r['burrow']}")
        if r["failed"]:
            detail.append(f"  {r['size']} brokers: FAILED tasks {', '.join(r['failed'])}")
        for key, client in (("traffic", "confluent-kafka"), ("traffic_kafka_python", "kafka-python")):
            t = r.get(key)
            if not t:
                continue
            detail.append(f"  {r['size']} brokers, client traffic ({client}: idempotent acks=all producer + "
                          f"consumer-group reader): {t['acknowledged']} acknowledged, {t['lost_count']} lost, "
                          f"{t['duplicates_count']} duplicated, {t['out_of_order_count']} out of order, "
                          f"{t['unresolved']} unresolved")
            for who, errors in sorted(t["per_restart"].items()):
                detail.append(f"    producer errors, {who}: "
                              + (", ".join(f"{code} {n}" for code, n in sorted(errors.items())) or "none"))
    return "\n".join(lines + [""] + detail)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (or, with ``--child``, one DAG run); returns the exit code (1 if a run failed)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[3, 6], help="broker counts (default 3 6)")
    p.add_argument("--conf", type=json.loads, default={}, help="extra run conf (JSON), merged over "
                   '{"cluster": "kafka_sandbox"}')
    p.add_argument("--keep", action="store_true", help="keep the sandbox workdirs (logs) after the run")
    p.add_argument("--keep-slow", type=float, metavar="SECONDS", help="keep a run's workdir (logs) when a broker "
                   "task's step from the stop on took SECONDS or more (e.g. 5: a leadership wait of 15 s)")
    p.add_argument("--no-traffic", action="store_true", help="no client traffic during the runs (by default an "
                   "idempotent acks=all producer and a reader run, and producer errors per restart are printed)")
    p.add_argument("--mode", choices=("zookeeper", "kraft"), default="zookeeper",
                   help="sandbox mode (kraft: dedicated controllers, no ZooKeeper for Kafka; default %(default)s)")
    p.add_argument("--controllers", type=int, default=3, help="KRaft controllers (default %(default)s)")
    p.add_argument("--rate", type=float, default=500.0, help="client traffic, messages per second of the "
                   "confluent-kafka producer (the kafka-python one sends a fifth; default %(default)s)")
    p.add_argument("--dag", default=DAG_ID, help="the DAG to run (default %(default)s; kafka_config_change with "
                   "--conf '{\"changes\": {...}}' times a config change: its roll has the same broker task)")
    p.add_argument("--runner", choices=sorted(RUNNERS), default="dagtest",
                   help="dagtest: dag.test() in a child process, the execution API started before the clock; "
                   "scheduler: a real Airflow (airflow standalone: scheduler, LocalExecutor, api-server), triggered "
                   "over REST (default %(default)s)")
    p.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    conf = {"cluster": "kafka_sandbox", **args.conf}
    if args.child:
        return child(args.child, conf, args.dag)
    base = Path(tempfile.mkdtemp(prefix="kops-bench-"))
    print(f"restart overhead: {args.dag}, sizes {args.sizes}, conf {json.dumps(conf)}, logs in {base}", flush=True)
    results = []
    for size in args.sizes:
        t0 = time.monotonic()
        try:
            results.append(measure(size, base, conf, args.keep, traffic=not args.no_traffic, mode=args.mode,
                                   controllers=args.controllers, rate_per_s=args.rate, dag_id=args.dag,
                                   runner=args.runner, keep_slow_s=args.keep_slow))
        except (RuntimeError, subprocess.SubprocessError) as exc:
            print(f"restart overhead: {size} brokers: {exc} (logs kept in {base})", file=sys.stderr)
            return 1
        print(f"{size} brokers: {results[-1]['state']} ({time.monotonic() - t0:.0f} s including sandbox up/down)",
              flush=True)
    print(table(results), flush=True)
    print("load average (1/5/15 min) at the end: {:.1f} {:.1f} {:.1f} on {} cores".format(*os.getloadavg(),
                                                                                      os.cpu_count()))
    return 0 if all(r["state"] == "success" and not r["failed"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
