"""An operation's bookends: check the trigger's params before anything else, wait for the cluster to be
healthy at the end and then forget the run's roll records."""

from __future__ import annotations

from typing import Any

from airflow.sdk.exceptions import AirflowFailException
from kafka_ops.param_rules import impossible_combinations
from probes.cluster import PROBES, ClusterProber
from runtime.broker_commands import check_commands
from runtime.failures import RunRefused
from runtime.lock_holding import release_held
from runtime.params import out_of_range, unknown_conf_keys
from runtime.roll_store import forget
from runtime.settings_table import value_or_default
from runtime.waiting import Check

from operators.cluster_operator import ClusterOperator


class CheckParamsOperator(ClusterOperator):
    """First task of an operation (before the lock): the trigger's conf has no key that is not a param
    ("unknown param 'broker'; did you mean 'brokers'?"), no number outside its bounds (the form's schema leaves
    them out: ``runtime.params.out_of_range``), no combination that can never pass
    (``kafka_ops.param_rules``), the cluster connection holds a valid profile, and the commands the run names
    are allowed by that profile. Touches no cluster.

    :param settings: ``cluster`` and the command choices (values or ``FromParam``).
    :raises runtime.failures.RunRefused: naming every problem found.
    """

    ui_color = "#eeeeee"

    def execute(self, context: Any) -> None:
        conf = getattr(context.get("dag_run"), "conf", None) or {}
        # context["params"] already holds the conf merged in; the DAG's own params are the declared ones
        declared = context["dag"].params
        problems = unknown_conf_keys(conf, declared.keys())
        params = context["params"]
        schemas = {name: declared.get_param(name).schema for name in declared.keys()}
        problems += out_of_range(schemas, {name: params.get(name) for name in declared.keys()})
        if not problems:  # combinations of values that are each fine
            problems += impossible_combinations({name: value_or_default(name, params) for name in declared.keys()})
        if problems:
            raise RunRefused("; ".join(problems) + " (nothing was done)")
        cfg = self.resolve(context)
        try:
            profile = self.profile
            chosen_commands = check_commands(profile, cfg, {"id": 0, "host": "?"})
        except AirflowFailException as exc:  # an unknown connection, an invalid profile, a command it does not allow
            raise RunRefused(f"{exc} (nothing was done)") from exc
        for chosen in chosen_commands:
            self.log.info("command %s", chosen)
        who = getattr(context.get("dag_run"), "triggering_user_name", None)
        self.log.info("cluster %s (%s); triggered by %s%s", profile.cluster, profile.bootstrap_servers,
                      who or "unknown", "; DRY RUN: nothing will be touched" if self.dry_run else "")


class WaitForClusterOperator(ClusterOperator):
    """Wait (in this task's process) until probe ``kind`` passes for the whole cluster, e.g. ``"healthy"``
    (no offline partition, no URP, leaders balanced) as an operation's final check.

    :param kind: a kind of ``probes.cluster.PROBES`` that needs no broker.
    :param settings: ``cluster``, ``dry_run``, ``healthcheck_interval_s``, ``healthcheck_timeout_s``.
    :raises AirflowFailException: at the timeout, naming what is still unhealthy; at once for a fatal error.
    """

    ui_color = "#e8f4fd"

    def __init__(self, *, kind: str, settings: dict, **kwargs: Any) -> None:
        super().__init__(settings=settings, **kwargs)
        if kind not in PROBES or PROBES[kind].needs_broker:
            raise ValueError(f"kind must be a cluster-wide probe, got {kind!r}")
        self.kind = kind

    def execute(self, context: Any) -> str:
        self.resolve(context)
        profile = self.profile
        what = PROBES[self.kind].describe(None)
        with ClusterProber(profile) as prober:
            def check() -> Check:
                verdict = prober.look(self.kind)
                return Check(verdict.ok, verdict.message())

            if self.dry_run:
                result = check()
                self.log.info("DRY RUN: %s: %s", what, result.message)
                return result.message
            return self.wait(check, what).message


class FinalHealthOperator(WaitForClusterOperator):
    """An operation's last step: wait until the whole cluster is healthy (as :class:`WaitForClusterOperator`
    with ``kind="healthy"``), then, the run having succeeded, delete its roll records (nothing left to resume) and
    release the cluster lock if this run holds it (so the lock is free as soon as the cluster is; and a run resumed
    by clearing only failed tasks took it back in a broker task while its ``run_outcome`` teardown, which succeeded
    before, does not run again). One task, not two: a task start costs 0.4-3 s on a real Airflow, and a run that
    fails the wait keeps its records either way.

    :param roll_ids: the run's rolls (``groups.cluster_guard.roll_ids_in``), whose records are deleted.
    :param settings: ``cluster``, ``dry_run``, ``healthcheck_interval_s``, ``healthcheck_timeout_s``.
    :raises AirflowFailException: at the wait's timeout, naming what is still unhealthy (the records are kept,
        so clearing the task resumes the run where it stopped).

    Returns (XCom) ``{"health": the last check's message, "forgotten": [roll id, ...], "lock_released": True when
    this task released the lock}`` (``run_outcome`` reports who released it).
    """

    def __init__(self, *, roll_ids: list[str], settings: dict, **kwargs: Any) -> None:
        super().__init__(kind="healthy", settings=settings, **kwargs)
        self.roll_ids = list(roll_ids)

    def execute(self, context: Any) -> dict[str, Any]:
        health = super().execute(context)
        deleted = forget(context, self.roll_ids)
        self.log.info("the run succeeded: deleted roll records: %s", deleted or "none")
        released = release_held(self.profile, context, self.log, "the run succeeded")
        return {"health": health, "forgotten": deleted, "lock_released": released}
