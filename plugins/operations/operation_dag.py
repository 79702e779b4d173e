"""``operation_dag(...)``: the DAG object every kafka-ops operation is built in (manual or scheduled
runs, no catch-up, up to 4 runs at once: runs on different clusters may overlap, the cluster lock
serializes them per cluster)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.sdk import DAG, Param
from runtime import task_log
from runtime.failure_record import record_failure

#: The JSON Schema dialect of every param's schema. Airflow checks each param's value with
#: ``jsonschema.validate``, which first checks the schema itself against its dialect's meta-schema, for every
#: param of every task each time a DAG is serialized (parsing, ``dag.test()``): against draft 2020-12 (the default
#: when a schema names none) that check costs 3x what it does against draft 7 (1.0 ms against 0.3 ms per param,
#: several thousand per parse of the four operations). The params use only draft-7 keywords (type, enum, minimum,
#: maximum, items, uniqueItems, minItems, minLength, maxLength, pattern).
SCHEMA_DIALECT = "http://json-schema.org/draft-07/schema#"


def with_defaults(params: Mapping[str, Param], defaults: Mapping[str, Any] | None) -> dict[str, Param]:
    """``params`` with the trigger-form defaults in ``defaults`` replaced (schema and description kept), each
    schema naming its dialect (:data:`SCHEMA_DIALECT`).

    :raises ValueError: a name that is not one of ``params`` (a typo would otherwise be ignored).
    """
    out = dict(params)
    unknown = sorted(set(defaults or {}) - set(out))
    if unknown:
        raise ValueError(f"defaults for unknown params {unknown}; known: {sorted(out)}")
    for name, old in params.items():
        value = (defaults or {}).get(name, old.value)
        out[name] = Param(value, description=old.description, **{"$schema": SCHEMA_DIALECT, **old.schema})
    return out


#: Every task of a kafka-ops DAG: it records why it failed for the run's note (``runtime.failure_record``) and logs
#: a deliberate failure as one line, library chatter at WARNING (``runtime.task_log``).
TASK_CALLBACKS = {"on_execute_callback": task_log.on_execute, "on_failure_callback": record_failure}


def operation_dag(dag_id: str, *, description: str, doc_md: str | None, params: dict[str, Any],
                  schedule: Any = None, defaults: Mapping[str, Any] | None = None) -> DAG:
    """A DAG with the operations' shared settings; use as ``with operation_dag(...) as dag:``. Every task records
    why it failed for the run's note (``runtime.failure_record``) and logs a deliberate failure as one line, library
    chatter at WARNING (``runtime.task_log``).

    :param schedule: None (manual runs only) or a timetable, e.g.
        ``kafka_timetables.MaintenanceWindowTimetable("0 2 * * 6", timedelta(hours=4))``, whose window also
        gates every broker, batch and wave of the run (``runtime.window_gate``).
    :param defaults: trigger-form defaults replacing the operation's own (a per-cluster DAG sets
        ``{"cluster": "kafka_prod"}``); scheduled runs run with them.
    """
    return DAG(dag_id=dag_id, description=description, schedule=schedule, catchup=False, max_active_runs=4,
               tags=["kafka", "kafka-ops"], doc_md=doc_md, params=with_defaults(params, defaults),
               default_args=dict(TASK_CALLBACKS))
