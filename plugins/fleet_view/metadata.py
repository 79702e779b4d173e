"""The Airflow side of the cluster view, read in the api-server from Airflow's metadata database: which connections
are Kafka clusters, the running operation's roll records (``runtime.roll_store``'s Variables), its reassignment
waves (the mapped ``wave`` task's instances), its DAG's maintenance window, and the last operations on a cluster.

Read-only: nothing here writes.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from typing import Any

from kafka_ops.cluster_view import PastRun, RunRolls, WaveInfo, WindowInfo
from kafka_ops.roll import RollRecord
from kafka_ops.windows import MaintenanceWindow, judge
from runtime.roll_store import SEPARATOR, key
from sqlalchemy import select

#: The conn type of a cluster's connection.
CONN_TYPE = "kafka"
ENV_PREFIX = "AIRFLOW_CONN_"
#: How many of a cluster's last operations the page lists, and how many recent DAG runs are searched for them.
PAST_RUNS = 5
RUNS_SEARCHED = 200


def _env_conn_type(value: str) -> str | None:
    """The conn type of an ``AIRFLOW_CONN_*`` value: JSON (``{"conn_type": ...}``) or a URI (``kafka://...``)."""
    text = value.strip()
    if text.startswith("{"):
        try:
            doc = json.loads(text)
        except ValueError:
            return None
        return str(doc.get("conn_type") or "") if isinstance(doc, dict) else None
    scheme, sep, _ = text.partition("://")
    return scheme.replace("-", "_") if sep else None


def env_kafka_connections(environ: dict[str, str] | None = None) -> list[str]:
    """Connection ids of conn type ``kafka`` defined as ``AIRFLOW_CONN_<ID>`` environment variables (lower case,
    as Airflow looks them up)."""
    env = os.environ if environ is None else environ
    return sorted(name[len(ENV_PREFIX):].lower() for name, value in env.items()
                  if name.startswith(ENV_PREFIX) and _env_conn_type(value) == CONN_TYPE)


def first_line(note: str | None) -> str:
    """The first non-empty line of a run's note (``run_outcome`` puts the outcome there), at most 300 characters,
    without Markdown's ``**`` (the note is Markdown, ``**Succeeded**: ...``; the page shows text)."""
    for line in (note or "").splitlines():
        if line.strip():
            return line.strip().replace("**", "")[:300]
    return ""


def _ms(when: datetime | None) -> int | None:
    return None if when is None else int(when.timestamp() * 1000)


class AirflowMetadata:
    """Reads of Airflow's metadata database (each in its own short session)."""

    def kafka_connections(self) -> list[str]:
        """Every connection of conn type ``kafka``: the metadata database's and the environment's, sorted.
        Connections only a secrets backend holds cannot be listed (backends look ids up, they do not list)."""
        from airflow.models.connection import Connection
        from airflow.utils.session import create_session

        with create_session() as session:
            ids = set(session.scalars(select(Connection.conn_id).where(Connection.conn_type == CONN_TYPE)))
        return sorted(ids | set(env_kafka_connections()))

    def roll_records(self, dag_id: str, run_id: str) -> RunRolls:
        """The run's roll records (Variables ``kafka_ops_roll__<dag_id>__<run_id>__<roll_id>``)."""
        from airflow.models.variable import Variable
        from airflow.utils.session import create_session

        prefix = key(dag_id, run_id, "")
        records = []
        with create_session() as session:
            for var in session.scalars(select(Variable).where(Variable.key.startswith(prefix, autoescape=True))):
                roll_id = var.key[len(prefix):]
                if not roll_id or SEPARATOR in roll_id:
                    continue
                records.append(RollRecord.from_dict(json.loads(var.val)))
        return RunRolls(dag_id, run_id, tuple(sorted(records, key=lambda r: r.began_ms)))

    def waves(self, dag_id: str, run_id: str) -> WaveInfo | None:
        """The run's reassignment waves (instances of its mapped ``<group>.wave`` task), None when it has none."""
        from airflow.models.taskinstance import TaskInstance
        from airflow.utils.session import create_session

        with create_session() as session:
            rows = session.execute(select(TaskInstance.map_index, TaskInstance.state).where(
                TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id,
                TaskInstance.task_id.endswith(".wave", autoescape=True), TaskInstance.map_index >= 0)).all()
        if not rows:
            return None
        running = sorted(i for i, state in rows if state in ("running", "deferred", "queued", "up_for_retry"))
        return WaveInfo(done=sum(1 for _, state in rows if state == "success"), total=len(rows),
                        running=running[0] + 1 if running else None)

    def window(self, dag_id: str, now_s: float) -> WindowInfo:
        """The maintenance window of ``dag_id``'s timetable judged now (``kafka_ops.windows.judge``: the gate's own
        sentence), ``state="none"`` for a DAG without one."""
        from airflow.models.serialized_dag import SerializedDagModel

        dag = SerializedDagModel.get_dag(dag_id)
        window = getattr(getattr(dag, "timetable", None), "window", None)
        if not isinstance(window, MaintenanceWindow):
            return WindowInfo("none", "no maintenance window: always open")
        verdict = judge(window, datetime.fromtimestamp(now_s, UTC))
        return WindowInfo("open" if verdict.open else "closed", verdict.message, _ms(verdict.closes),
                          _ms(verdict.opens))

    def past_runs(self, cluster: str, limit: int = PAST_RUNS) -> list[PastRun]:
        """The last ``limit`` DAG runs that work on ``cluster`` (among the :data:`RUNS_SEARCHED` latest runs), newest
        first: their conf's ``cluster``, or, for a run whose conf has none (a scheduled run, or one triggered through
        the REST API or the CLI with some params only), its DAG's default ``cluster`` param (looked up once per
        DAG)."""
        from airflow.models.dagrun import DagRun
        from airflow.utils.session import create_session

        with create_session() as session:  # read out before the session ends (a DAG's default opens its own)
            runs = [(run.conf if isinstance(run.conf, dict) else {},
                     PastRun(run.dag_id, run.run_id, str(run.state), _ms(run.start_date), _ms(run.end_date),
                             first_line(run.note)))
                    for run in session.scalars(select(DagRun).order_by(DagRun.id.desc()).limit(RUNS_SEARCHED))]
        out: list[PastRun] = []
        defaults: dict[str, str | None] = {}
        for conf, run in runs:
            named = conf.get("cluster")
            if not isinstance(named, str):
                if run.dag_id not in defaults:
                    defaults[run.dag_id] = self.default_cluster(run.dag_id)
                named = defaults[run.dag_id]
            if named == cluster:
                out.append(run)
                if len(out) >= limit:
                    break
        return out

    def cluster_of_run(self, dag_id: str, run_id: str) -> str | None:
        """The ``cluster`` a DAG run works on: its conf's, else its DAG's default ``cluster`` param; None for a run
        of a DAG without one (not a kafka-ops operation) or a run that does not exist."""
        from airflow.models.dagrun import DagRun
        from airflow.utils.session import create_session

        with create_session() as session:
            run = session.scalar(select(DagRun).where(DagRun.dag_id == dag_id, DagRun.run_id == run_id))
            if run is None:
                return None
            conf = run.conf if isinstance(run.conf, dict) else {}
        if isinstance(conf.get("cluster"), str):
            return conf["cluster"]
        return self.default_cluster(dag_id)

    def default_cluster(self, dag_id: str) -> str | None:
        """The DAG's default ``cluster`` param (its serialized form in the metadata database); None for a DAG
        without one (not a kafka-ops operation) or one not parsed."""
        from airflow.models.serialized_dag import SerializedDagModel

        dag = SerializedDagModel.get_dag(dag_id)
        params: Any = getattr(dag, "params", None) or {}
        try:
            value = params["cluster"]
        except (KeyError, TypeError):
            return None
        value = getattr(value, "value", value)
        return value if isinstance(value, str) else None
