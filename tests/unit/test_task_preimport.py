"""runtime.task_preimport: which process imports the operations ahead of the tasks, what a failed import does, and
that an Airflow scheduler (Airflow's own start, reading the plugins folder's airflow_local_settings) holds the
modules a task needs before it forks anything."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from runtime import task_preimport
from runtime.task_preimport import ENV_SWITCH, module_names, preimport, wanted

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("argv", [
    ["/opt/airflow/.venv/bin/airflow", "scheduler"],
    ["airflow", "scheduler", "--num-runs", "5"],
    ["/usr/lib/python3/site-packages/airflow/__main__.py", "scheduler"],
])
def test_a_scheduler_imports_ahead(argv):
    assert wanted(argv, {})
    assert wanted(argv, {ENV_SWITCH: "1"})


@pytest.mark.parametrize("argv", [
    ["airflow", "dag-processor"],  # its parses must see the files as they are now
    ["airflow", "api-server"],
    ["airflow", "standalone"],  # starts the scheduler as a process of its own, which imports then
    ["airflow", "tasks", "test", "scheduler"],
    ["/work/.venv/bin/pytest", "scheduler"],
    ["airflow"],
    [],
])
def test_other_processes_do_not(argv):
    assert not wanted(argv, {})


@pytest.mark.parametrize("off", ["0", "false", "No", " off "])
def test_the_switch_turns_it_off(off):
    assert not wanted(["airflow", "scheduler"], {ENV_SWITCH: off})


def test_the_modules_are_every_operation_and_the_task_time_libraries():
    names = module_names()
    operations = [n for n in names if n.startswith("operations.")]
    assert operations == sorted(operations)
    assert {"operations.rolling_restart", "operations.upgrade", "operations.zk_to_kraft"} <= set(operations)
    assert names[len(operations):] == list(task_preimport.USED_BY_TASKS)


def test_each_library_named_is_one_the_plugins_import_where_they_use_it():
    """:data:`USED_BY_TASKS` holds no dead name: each is imported by some module under plugins/ (inside a function,
    where a task first uses it)."""
    sources = "\n".join(p.read_text() for p in (REPO / "plugins").rglob("*.py"))
    for name in task_preimport.USED_BY_TASKS:
        assert re.search(rf"^\s+(import {re.escape(name)}$|from {re.escape(name)} import )", sources, re.M), name


def test_a_module_that_fails_is_reported_and_the_rest_imported(capsys):
    sys.modules.pop("json.tool", None)
    failed = preimport(["json.tool", "kafka_ops_no_such_module"])
    assert list(failed) == ["kafka_ops_no_such_module"]
    assert "ModuleNotFoundError" in failed["kafka_ops_no_such_module"]
    assert "json.tool" in sys.modules
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("kafka-ops: kafka_ops_no_such_module not imported ahead of the tasks")
    assert lines[1].startswith("kafka-ops: 1 modules imported for the task processes in ")


def test_a_broken_operations_package_does_not_stop_the_scheduler(monkeypatch):
    monkeypatch.setattr(task_preimport, "OPERATIONS_PACKAGE", "kafka_ops_no_such_package")
    assert list(preimport()) == ["kafka_ops_no_such_package"]


#: Airflow's start as ``airflow scheduler`` gives it (argv), then what the process holds: the modules a broker task
#: imports at its start and where it first sends an SSH command.
PROBE = """
import json, sys
sys.argv = ["/opt/venv/bin/airflow", "scheduler"]
import airflow  # airflow.settings.initialize(): imports airflow_local_settings from the plugins folder
wanted = ["operations.rolling_restart", "operators.broker_roll", "hooks.broker_ssh", "paramiko",
          "airflow.providers.ssh.hooks.ssh", "kafka.admin", "confluent_kafka.admin"]
print(json.dumps({name: name in sys.modules for name in wanted}))
"""


def _scheduler_start(tmp_path: Path, **extra: str) -> tuple[dict[str, bool], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW__") and k != ENV_SWITCH}
    env.update({"AIRFLOW_HOME": str(tmp_path / "airflow"), "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
                "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False", **extra})
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_airflow_scheduler_start_holds_what_the_tasks_import(tmp_path):
    held, err = _scheduler_start(tmp_path)
    assert held == dict.fromkeys(held, True)
    said = [line for line in err.splitlines() if line.startswith("kafka-ops: ")]
    assert len(said) == 1 and " modules imported for the task processes in " in said[0], err[-2000:]


def test_airflow_scheduler_start_with_the_switch_off_imports_none_of_it(tmp_path):
    held, err = _scheduler_start(tmp_path, **{ENV_SWITCH: "0"})
    assert not any(held[name] for name in ("operations.rolling_restart", "paramiko", "kafka.admin"))
    assert "kafka-ops: " not in err
