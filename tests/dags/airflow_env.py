"""Airflow for tests: a throwaway AIRFLOW_HOME with SQLite, our dags/ and plugins/, set before Airflow
is imported (Airflow reads its configuration at import time), and a runner for ``dag.test()``.

Connections come from the sandbox's ``airflow.env`` (``AIRFLOW_CONN_*`` environment variables), so
each test points the DAG at the sandbox it uses.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

REPO = Path(__file__).resolve().parents[2]
TEST_DAGS = Path(__file__).resolve().parent / "dag_files"


def dags_folder(home: Path) -> Path:
    """The test DAG folder: links to the product's dags/*.py plus the test-only DAGs of tests/dags/dag_files."""
    folder = home / "dags"
    folder.mkdir(exist_ok=True)
    for source in [*sorted((REPO / "dags").glob("*.py")), *sorted(TEST_DAGS.glob("*.py"))]:
        link = folder / source.name
        if not link.exists():
            link.symlink_to(source)
    return folder


def configure_environment() -> Path:
    """Point Airflow at a temp home (once per process); returns it. Must run before ``import airflow``.

    The home is kept in ``$KAFKA_OPS_TEST_AIRFLOW_HOME`` (suffixed with the pytest-xdist worker name under
    ``-n``): helpers started from a test share it, while parallel workers, which inherit the environment of the
    process that spawned them, each get their own (one SQLite database per worker)."""
    key = "KAFKA_OPS_TEST_AIRFLOW_HOME" + (f"_{os.environ['PYTEST_XDIST_WORKER']}"
                                           if os.environ.get("PYTEST_XDIST_WORKER") else "")
    if key in os.environ:
        return Path(os.environ[key])
    if "airflow" in sys.modules:
        raise RuntimeError("airflow was imported before the test Airflow home was configured")
    home = Path(tempfile.mkdtemp(prefix="kafka-ops-airflow-"))
    os.environ.update({
        key: str(home),
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder(home)),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        # spark-submit (the reassignment planner's SparkSubmitOperator) comes with the venv's pyspark
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    })
    return home


def migrate_db() -> None:
    """``airflow db migrate`` into the test home (SQLite, a few seconds)."""
    airflow = Path(sys.executable).with_name("airflow")
    subprocess.run([str(airflow), "db", "migrate"], check=True, capture_output=True, timeout=300)


def connection_env(workdir: Path) -> dict[str, str]:
    """The ``AIRFLOW_CONN_*`` variables a sandbox's ``airflow.env`` exports."""
    env = {}
    for line in (workdir / "airflow.env").read_text().splitlines():
        if line.startswith("export "):
            name, _, value = line.removeprefix("export ").partition("=")
            env[name] = shlex.split(value)[0]
    return env


@dataclass
class DagRunResult:
    """A finished ``dag.test()`` run: its state and every task instance's state by (task_id, map_index)."""

    state: str
    states: dict[tuple[str, int], str | None]
    labels: dict[tuple[str, int], str | None]
    task_instances: list[Any]
    run_id: str = ""

    def state_of(self, task_id: str, map_index: int = -1) -> str | None:
        return self.states.get((task_id, map_index))

    def mapped_states(self, task_id: str = "restart.broker") -> list[str | None]:
        """States of a mapped task's instances by map index (for a roll's broker task: roll position)."""
        keys = sorted(k for k in self.states if k[0] == task_id and k[1] >= 0)
        return [self.states[k] for k in keys]

    def mapped_labels(self, task_id: str = "restart.broker") -> list[str | None]:
        """The Grid labels of a mapped task's instances by map index."""
        keys = sorted(k for k in self.labels if k[0] == task_id and k[1] >= 0)
        return [self.labels[k] for k in keys]


def published_labels(dag_id: str, run_id: str) -> dict[str, list[str]]:
    """The Grid labels the run's plan tasks published for the scheduler (``runtime.pending_labels``), merged:
    ``{mapped task id: [label of map index 0, ...]}``."""
    from airflow import settings
    from airflow.models.xcom import XComModel
    from runtime.pending_labels import GRID_LABELS_KEY
    from sqlalchemy import select

    with settings.Session() as session:
        rows = session.scalars(select(XComModel).where(XComModel.dag_id == dag_id, XComModel.run_id == run_id,
                                                       XComModel.key == GRID_LABELS_KEY)).all()
        merged: dict[str, list[str]] = {}
        for row in rows:
            merged.update(XComModel.deserialize_value(row))
    return merged


def xcom_value(dag_id: str, run_id: str, task_id: str, key: str = "return_value", map_index: int = -1) -> Any:
    """A task's XCom ``key`` in run ``run_id`` (None when absent), read from the metadata database; ``map_index``
    for a mapped task's instance (-1: an unmapped task)."""
    from airflow import settings
    from airflow.models.xcom import XComModel
    from sqlalchemy import select

    with settings.Session() as session:
        row = session.scalars(select(XComModel).where(XComModel.dag_id == dag_id, XComModel.run_id == run_id,
                                                      XComModel.task_id == task_id, XComModel.key == key,
                                                      XComModel.map_index == map_index)).first()
        return None if row is None else XComModel.deserialize_value(row)


def roll_records(dag_id: str, run_id: str) -> list[str]:
    """The keys of run ``run_id``'s roll records (``runtime.roll_store``) still in the metadata database."""
    from airflow import settings
    from airflow.models.variable import Variable
    from runtime.roll_store import key
    from sqlalchemy import select

    with settings.Session() as session:
        return sorted(session.scalars(select(Variable.key).where(Variable.key.startswith(key(dag_id, run_id, "")))))


def _dag(dag_id: str) -> Any:
    from airflow.dag_processing.dagbag import DagBag

    with _test_alarm_kept():
        bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    assert not bag.import_errors, bag.import_errors
    return bag.dags[dag_id]


@contextmanager
def _test_alarm_kept() -> Iterator[None]:
    """Keep the test's own timeout (pytest-timeout's SIGALRM, ``timeout`` in pyproject.toml) across DAG parsing:
    Airflow parses each DAG file under ``dagbag_import_timeout`` by installing its own SIGALRM handler and, when
    done, cancelling the real-time timer (``setitimer(ITIMER_REAL, 0)``), the test's alarm with it, so a hung DAG
    test used to run until CI's limit. The handler and the timer's remaining seconds (less the time parsing took)
    are put back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handler = signal.getsignal(signal.SIGALRM)
    remaining, _ = signal.getitimer(signal.ITIMER_REAL)
    began = time.monotonic()
    try:
        yield
    finally:
        if remaining > 0:
            signal.signal(signal.SIGALRM, handler)
            signal.setitimer(signal.ITIMER_REAL, max(remaining - (time.monotonic() - began), 0.001))


def _result(run: Any) -> DagRunResult:
    tis = list(run.get_task_instances())
    timeline = os.environ.get("KAFKA_OPS_TEST_TIMELINE")  # a file: where each run's time went, task by task
    if timeline:
        began = min((ti.start_date for ti in tis if ti.start_date), default=None)
        with open(timeline, "a") as out:
            out.write(f"run {run.dag_id} {run.run_id} {run.state}\n")
            for ti in sorted((ti for ti in tis if ti.start_date), key=lambda ti: ti.start_date):
                took = (ti.end_date - ti.start_date).total_seconds() if ti.end_date else float("nan")
                out.write(f"{(ti.start_date - began).total_seconds():7.1f}s +{took:6.1f}s {ti.state} "
                          f"{ti.task_id}[{ti.map_index}]\n")
    return DagRunResult(
        state=str(run.state),
        states={(ti.task_id, ti.map_index): (str(ti.state) if ti.state else None) for ti in tis},
        labels={(ti.task_id, ti.map_index): ti.rendered_map_index for ti in tis},
        task_instances=tis,
        run_id=run.run_id,
    )


def run_dag(dag_id: str, conf: dict[str, Any], logical_date: datetime | None = None,
            mark_success_pattern: str | None = None) -> DagRunResult:
    """Run ``dag_id`` with ``dag.test()`` in this process. ``dag.test()`` deletes an existing run of the same
    ``logical_date`` and starts a new one with the same run id: to resume a run the way an operator does, use
    :func:`clear_and_resume`. ``mark_success_pattern``: task ids (a regex) set to success when they are
    ready, without running (their instances keep what the scheduler gave them, e.g. their Grid labels)."""
    dag = _dag(dag_id)
    kwargs: dict[str, Any] = {"run_conf": conf, "mark_success_pattern": mark_success_pattern}
    if logical_date is not None:  # run_id derives from run_after: both pin the same DAG run
        kwargs["logical_date"] = logical_date
        kwargs["run_after"] = logical_date
    with _quick_idle():
        return _result(dag.test(**kwargs))


LOOP_IDLE_S = 0.2  # how long the run loops below wait when no task is ready (dag.test()'s own: 1 s)


@contextmanager
def _quick_idle():
    """``dag.test()``'s loop with its idle wait cut to ``LOOP_IDLE_S``: it waits 1 s (``time.sleep(1)``, the
    ``time`` module imported inside it) whenever no task is ready, which a failed run pays once per level of the
    tasks it marks upstream-failed (about 15 s per refused upgrade). Only that loop's own calls are shortened:
    tasks and every other thread sleep as they ask; a scheduler polls as often."""
    from airflow.sdk.definitions.dag import DAG

    loop = DAG.test.__code__
    real = time.sleep

    def sleep(seconds: float) -> None:
        real(min(seconds, LOOP_IDLE_S) if sys._getframe(1).f_code is loop else seconds)

    time.sleep = sleep
    try:
        yield
    finally:
        time.sleep = real


def clear_and_resume(dag_id: str, run_id: str, only_failed: bool) -> DagRunResult:
    """Resume a finished run the way the README says: ``airflow dags clear DAG --run-id RUN [--only-failed]
    --yes`` (what the UI's "Clear Run" does, with or without "Only failed"), then run the cleared tasks in this
    process with ``dag.test()``'s scheduling loop (dependencies, trigger rules and reschedules as the
    scheduler applies them), on the same run: nothing else of it is reset."""
    from airflow import settings
    from airflow.models.dagrun import DagRun
    from airflow.sdk.definitions.dag import _run_task
    from airflow.serialization.serialized_objects import DagSerialization
    from airflow.utils.state import DagRunState, TaskInstanceState
    from sqlalchemy import select

    airflow = Path(sys.executable).with_name("airflow")
    command = [str(airflow), "dags", "clear", dag_id, "--run-id", run_id, "--yes"]
    if only_failed:
        command.insert(-1, "--only-failed")
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{' '.join(command)} failed: {done.stderr[-2000:]}"
    dag = _dag(dag_id)
    session = settings.Session()
    run = session.scalar(select(DagRun).where(DagRun.dag_id == dag_id, DagRun.run_id == run_id))
    run.dag = DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag))
    run.state = DagRunState.RUNNING  # the scheduler moves a cleared (queued) run to running
    session.commit()
    while run.state == DagRunState.RUNNING:
        session.expire_all()
        schedulable, _ = run.update_state(session=session)
        for ti in schedulable:
            if ti.state != TaskInstanceState.UP_FOR_RESCHEDULE:
                ti.try_number += 1
            ti.state = TaskInstanceState.SCHEDULED
        session.commit()
        scheduled = [ti for ti in run.get_task_instances(session=session) if ti.state == TaskInstanceState.SCHEDULED]
        if not scheduled:
            time.sleep(LOOP_IDLE_S)
        for ti in scheduled:
            _run_task(ti=ti, task=dag.task_dict[ti.task_id], run_triggerer=True)
    result = _result(run)
    session.close()
    return result


def failure_lines(text: str, limit: int = 12) -> str:
    """The lines of a run's output that say why tasks failed (errors, failed tasks' reasons), for assertion
    messages: ``dag.test()`` logs into pytest's capture, which a test reads before it asserts."""
    keep = [line for line in text.splitlines()
            if any(word in line for word in ("AirflowFailException", "[error", "ERROR", "Task failed", "failed:"))
            and "kafka.net" not in line and "kafka.cluster" not in line]
    return "\n".join(keep[-limit:])


class Responder(threading.Thread):
    """Answers the run's human-in-the-loop request the way the UI's Required Actions does: through the HITL
    REST API's handler (in this process, on the same metadata database), once the task waits for input.

    It answers a task instance only when it saw it waiting at its previous look too (0.5 s before), as a person would
    at the earliest: ``dag.test``'s task runner writes the state the task process ended in (``awaiting_input``) to the
    database right after the process returns, so an answer within those milliseconds (the handler moves the task to
    ``scheduled``) was overwritten and the run then waited for ever (seen once: answered 0.09 s after the request)."""

    def __init__(self, dag_id: str, task_id: str, option: str) -> None:
        super().__init__(daemon=True)
        self.dag_id, self.task_id, self.option = dag_id, task_id, option
        self.answered = threading.Event()
        self.stop = threading.Event()
        self.errors: list[str] = []

    def run(self) -> None:
        from airflow import settings
        from airflow.api_fastapi.core_api.datamodels.hitl import UpdateHITLDetailPayload
        from airflow.api_fastapi.core_api.routes.public.hitl import update_hitl_detail
        from airflow.models.taskinstance import TaskInstance
        from sqlalchemy import select

        seen: tuple | None = None  # the task instance (id, try) waiting at the previous look
        while not self.stop.is_set():
            session = settings.Session()
            try:
                ti = session.scalar(select(TaskInstance).where(TaskInstance.dag_id == self.dag_id,
                                                               TaskInstance.task_id == self.task_id,
                                                               TaskInstance.state == "awaiting_input"))
                waiting, seen = seen, (None if ti is None else (ti.id, ti.try_number))
                if ti is not None and waiting == seen:
                    update_hitl_detail(dag_id=self.dag_id, dag_run_id=ti.run_id, task_id=self.task_id,
                                       update_hitl_detail_payload=UpdateHITLDetailPayload(chosen_options=[self.option]),
                                       user=SimpleNamespace(get_id=lambda: "operator", get_name=lambda: "operator"),
                                       session=session, map_index=-1)
                    session.commit()
                    self.answered.set()
                    return
            except Exception as exc:  # SQLite shared with the running dag.test: "database is locked"; ask again
                self.errors.append(repr(exc))
                session.rollback()
            finally:
                session.close()
            time.sleep(0.5)
