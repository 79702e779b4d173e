"""The DAG-test harness itself (airflow_env.py): a DAG test keeps its own timeout (pytest-timeout's SIGALRM, 600 s
in pyproject.toml) while Airflow parses the DAG files, so a hung DAG test fails with its stack instead of running
until CI's hard limit."""

from __future__ import annotations

import os
import signal

import airflow_env
import pytest

DAG_ID = "kafka_pending_labels_test"


@pytest.mark.timeout(300, method="signal")
def test_parsing_the_dags_keeps_the_tests_own_alarm(airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    handler = signal.getsignal(signal.SIGALRM)
    armed, _ = signal.getitimer(signal.ITIMER_REAL)
    assert 0 < armed <= 300 and callable(handler), "pytest-timeout armed the test's alarm"
    # Airflow alone cancels it: DagBag parses each file under dagbag_import_timeout, then setitimer(ITIMER_REAL, 0)
    try:
        DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
        assert signal.getitimer(signal.ITIMER_REAL)[0] == 0, "Airflow's parse no longer cancels the alarm"
    finally:
        signal.signal(signal.SIGALRM, handler)
        signal.setitimer(signal.ITIMER_REAL, armed)
    # the harness's parse keeps it: the same handler, the time left (less what parsing took)
    assert airflow_env._dag(DAG_ID).dag_id == DAG_ID
    left, _ = signal.getitimer(signal.ITIMER_REAL)
    assert signal.getsignal(signal.SIGALRM) is handler
    assert 0 < left <= armed and armed - left < 120, (armed, left)
