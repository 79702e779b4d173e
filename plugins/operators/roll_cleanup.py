"""Delete roll records nothing can resume any more (the rules: ``kafka_ops.stale_rolls``).

Reads the records' keys, the DAG ids and each record's run through Airflow's REST API (``hooks.airflow_api``: the
Task SDK lists no Variables), deletes through the Task SDK (``Variable.delete``), as ``run_outcome`` does at the end
of a successful run.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from airflow.sdk import BaseOperator, Variable
from hooks.airflow_api import CONN_ID, AirflowApiHook
from kafka_ops.stale_rolls import Verdict, verdict
from runtime import roll_store
from runtime.failures import RunRefused
from runtime.params import is_true, out_of_range


def keep_days_of(value: Any, schema: Mapping[str, Any]) -> float:
    """The ``keep_days`` param as typed, checked against its form schema's bounds (``runtime.params.out_of_range``,
    as ``check_and_lock`` checks the operations' numbers).

    :raises RunRefused: not a number, or out of its bounds, named.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RunRefused(f"param keep_days: {value!r} is not a number (nothing was deleted)")
    problems = out_of_range({"keep_days": schema}, {"keep_days": value})
    if problems:
        raise RunRefused("; ".join(problems) + " (nothing was deleted)")
    return float(value)


class ForgetStaleRollsOperator(BaseOperator):
    """Delete the roll records (``runtime.roll_store``) of runs that no longer exist, or that ended (failed or
    succeeded) more than ``keep_days`` days ago; keep those of running runs and of ended runs that may still be
    cleared. Logs one line per record (deleted or kept, and why); a dry run deletes nothing.

    Reads the params ``keep_days`` (days, 1 or more) and ``dry_run``. Returns ``{"deleted": [keys], "kept": [keys]}``.

    :param api_conn_id: the Airflow REST API connection (``hooks.airflow_api``; its user needs role ``op`` to list
        Variables).
    :raises RunRefused: ``keep_days`` is not 1 or more.
    :raises hooks.airflow_api.AirflowApiError: the API refused or failed (nothing is deleted before every record's
        run was read).
    """

    def __init__(self, *, api_conn_id: str = CONN_ID, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.api_conn_id = api_conn_id

    def execute(self, context: Any) -> dict[str, list[str]]:
        params = context["params"]
        keep_days = keep_days_of(params.get("keep_days"), context["dag"].params.get_param("keep_days").schema)
        dry_run = is_true(params.get("dry_run"))
        api = AirflowApiHook(self.api_conn_id)
        try:
            keys = api.variable_keys(roll_store.PREFIX + roll_store.SEPARATOR)
            dag_ids = api.dag_ids() if keys else []
            now = time.time()
            verdicts: dict[str, Verdict] = {}
            for key in keys:  # a key naming no DAG of this Airflow (stale ones included) has no run either
                parsed = roll_store.parse_key(key, dag_ids)
                run = api.dag_run(parsed.dag_id, parsed.run_id) if parsed else None
                verdicts[key] = verdict(run, now, keep_days)
        finally:
            api.close()
        deleted, kept = [], []
        for key, said in verdicts.items():
            if said.delete:
                if not dry_run:
                    Variable.delete(key)
                deleted.append(key)
                self.log.info("%s %s: %s", "DRY RUN: would delete" if dry_run else "deleted", key, said.why)
            else:
                kept.append(key)
                self.log.info("kept %s: %s", key, said.why)
        self.log.info("%d roll records: %d %s, %d kept (ended runs kept %g days)", len(keys), len(deleted),
                      "to delete" if dry_run else "deleted", len(kept), keep_days)
        return {"deleted": deleted, "kept": kept}
