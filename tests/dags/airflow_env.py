"""Airflow for tests: a throwaway AIRFLOW_HOME with SQLite, our dags/ and plugins/, set before Airflow
is imported (Airflow reads its configuration at import time), and a runner for ``dag.test()``.

Connections come from the sandbox's ``airflow.env`` (``AIRFLOW_CONN_*`` environment variables), so
each test points the DAG at the sandbox it uses.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
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
    """Point Airflow at a temp home (once per process); returns it. Must run before ``import airflow``."""
    if "KAFKA_OPS_TEST_AIRFLOW_HOME" in os.environ:
        return Path(os.environ["KAFKA_OPS_TEST_AIRFLOW_HOME"])
    if "airflow" in sys.modules:
        raise RuntimeError("airflow was imported before the test Airflow home was configured")
    home = Path(tempfile.mkdtemp(prefix="kafka-ops-airflow-"))
    os.environ.update({
        "KAFKA_OPS_TEST_AIRFLOW_HOME": str(home),
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder(home)),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
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


def run_dag(dag_id: str, conf: dict[str, Any], logical_date: datetime | None = None,
            only_failed: bool = False) -> DagRunResult:
    """Run ``dag_id`` with ``dag.test()`` in this process; with the same ``logical_date`` a second call
    clears and re-runs that DAG run: every task (the UI's "Clear" of the whole run), or with ``only_failed``
    only the failed and upstream-failed ones (the UI's "Clear" with "Only failed", ``airflow tasks clear
    --only-failed``), the way the README's resume recipe does it."""
    from contextlib import ExitStack
    from unittest import mock

    from airflow.dag_processing.dagbag import DagBag
    from airflow.serialization.definitions.dag import SerializedDAG

    bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    assert not bag.import_errors, bag.import_errors
    dag = bag.dags[dag_id]
    kwargs: dict[str, Any] = {"run_conf": conf}
    if logical_date is not None:  # run_id derives from run_after: both pin the same DAG run
        kwargs["logical_date"] = logical_date
        kwargs["run_after"] = logical_date
    with ExitStack() as stack:
        if only_failed:
            clear = SerializedDAG.clear_dags

            def clear_only_failed(*args: Any, **kw: Any) -> Any:
                return clear(*args, **{**kw, "only_failed": True})

            stack.enter_context(mock.patch.object(SerializedDAG, "clear_dags", clear_only_failed))
        run = dag.test(**kwargs)
    tis = list(run.get_task_instances())
    return DagRunResult(
        state=str(run.state),
        states={(ti.task_id, ti.map_index): (str(ti.state) if ti.state else None) for ti in tis},
        labels={(ti.task_id, ti.map_index): ti.rendered_map_index for ti in tis},
        task_instances=tis,
    )
