"""Import what kafka-ops tasks import, once, in the Airflow scheduler, so that each task process starts with it.

With the LocalExecutor (as ``make demo`` and docker-compose run Airflow) a task is a process forked from a worker
that the scheduler forked when it started: whatever the scheduler imported before is already in each task process.
Without this, each task imports the operations, their hooks and clients when it parses its DAG file, and again
paramiko, the SSH provider and kafka-python where it first uses them (kept out of the DAG files' imports so the
dag-processor parses quickly): measured on 2 cores, 0.2 s (idle) to 0.8 s (loaded) for the operations and
0.1-0.9 s more for the rest, paid by every task of a run (a 3-broker roll starts 8 tasks one after another).

:func:`wanted` limits it to the scheduler: the dag-processor, whose parses must see a DAG or plugin file as it is
now, and the api-server keep importing at their own pace. The trade-off: a changed file under ``plugins/`` reaches
the tasks when the scheduler restarts (as Airflow's own plugins do); ``KAFKA_OPS_PREIMPORT=0`` in the scheduler's
environment turns this off. Nothing here opens a connection or starts a thread: the modules only define things,
so forking after them is safe (``hooks.broker_ssh``'s connection pool empties itself in a forked child).
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import PurePath

#: The environment variable that turns the import off ("0", "false", "no", "off"; anything else or unset: on).
ENV_SWITCH = "KAFKA_OPS_PREIMPORT"
#: Libraries the tasks import where they first use them, not when a DAG file is parsed (module names).
USED_BY_TASKS = ("paramiko", "airflow.providers.ssh.hooks.ssh", "kafka.admin", "kafka.errors", "kafka.protocol.admin",
                 "kafka.protocol.metadata", "kafka.net.compat")
#: The package whose modules build the operation DAGs (every ``operations.<name>``: their operators, hooks and
#: clients come with them).
OPERATIONS_PACKAGE = "operations"


def wanted(argv: Sequence[str], environ: Mapping[str, str]) -> bool:
    """True in an Airflow scheduler process (``airflow scheduler ...``, or ``python -m airflow scheduler``) unless
    :data:`ENV_SWITCH` says off. ``argv`` is ``sys.argv``, ``environ`` ``os.environ``."""
    if environ.get(ENV_SWITCH, "").strip().lower() in ("0", "false", "no", "off"):
        return False
    if len(argv) < 2 or argv[1] != "scheduler":
        return False
    program = PurePath(argv[0])
    return program.name == "airflow" or program.parts[-2:] == ("airflow", "__main__.py")


def module_names() -> list[str]:
    """The modules :func:`preimport` imports: every module of :data:`OPERATIONS_PACKAGE` (sorted), then
    :data:`USED_BY_TASKS`. Raises ImportError when the package itself cannot be imported."""
    package = importlib.import_module(OPERATIONS_PACKAGE)
    names = sorted(f"{OPERATIONS_PACKAGE}.{m.name}" for m in pkgutil.iter_modules(package.__path__))
    return names + list(USED_BY_TASKS)


def preimport(names: Sequence[str] | None = None) -> dict[str, str]:
    """Import ``names`` (default :func:`module_names`) and say so in one line on stderr, with the time taken (Airflow
    imports ``airflow_local_settings`` before it configures logging, so a log record would be lost; the scheduler's
    stderr is its log). A module that fails to import is left out and named on a line of its own (a task that needs
    it then fails with the error itself); the scheduler starts either way. Returns ``{module: error}`` for those
    that failed (empty when all imported)."""
    began = time.monotonic()
    failed: dict[str, str] = {}
    try:
        chosen = list(names) if names is not None else module_names()
    except Exception as exc:  # noqa: BLE001 - the scheduler must start whatever a plugin file holds
        chosen, failed[OPERATIONS_PACKAGE] = [], f"{type(exc).__name__}: {exc}"
    for name in chosen:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - as above
            failed[name] = f"{type(exc).__name__}: {exc}"
    for name, error in failed.items():
        print(f"kafka-ops: {name} not imported ahead of the tasks (each task imports it itself): {error}",
              file=sys.stderr, flush=True)
    print(f"kafka-ops: {len(chosen) - len(failed)} modules imported for the task processes in "
          f"{time.monotonic() - began:.2f} s (pid {os.getpid()})", file=sys.stderr, flush=True)
    return failed
