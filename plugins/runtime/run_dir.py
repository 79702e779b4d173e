"""Where a run keeps its files: the cluster snapshot, the plan, the rollback file and the chart.

``<data root>/<dag_id>/<run_id>/`` with ``snapshot/`` (``brokers.json``, ``partitions.jsonl``) and ``plan/``
(the planner's output). The data root is ``$KAFKA_OPS_DATA_DIR`` (docker-compose mounts it into the Airflow
workers and the Spark workers alike: executors read the snapshot from the same path as the driver), else
``$AIRFLOW_HOME/kafka-ops-data``. The path is a pure function of the run, so a cleared task finds the files
its run wrote before.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

_UNSAFE = re.compile(r"[^A-Za-z0-9_.+-]")


def data_root() -> Path:
    """``$KAFKA_OPS_DATA_DIR``, else ``$AIRFLOW_HOME/kafka-ops-data`` (``~/airflow`` without AIRFLOW_HOME)."""
    root = os.environ.get("KAFKA_OPS_DATA_DIR")
    if root:
        return Path(root)
    return Path(os.environ.get("AIRFLOW_HOME") or Path.home() / "airflow") / "kafka-ops-data"


def run_directory(context: Any, create: bool = True) -> Path:
    """This run's directory (created unless ``create`` is False: a reader that only looks), named by DAG id and run
    id (characters outside ``[A-Za-z0-9_.+-]`` become ``_``: run ids hold ``:`` and ``+``)."""
    path = data_root() / context["dag"].dag_id / _UNSAFE.sub("_", str(context["run_id"]))
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path
