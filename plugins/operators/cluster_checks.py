"""An operation's checks of the run and of the whole cluster: the trigger's params refused before anything is
touched (:func:`refuse_bad_params`, which ``check_and_lock`` runs before it takes the lock), and waits until a
cluster-wide probe passes (:func:`wait_for_cluster`: a health gate between steps, and ``run_outcome``'s final health
check)."""

from __future__ import annotations

from typing import Any

from airflow.sdk.exceptions import AirflowFailException
from kafka_ops import health
from kafka_ops.param_rules import impossible_combinations
from probes.cluster import PROBES, ClusterProber
from runtime.broker_commands import check_commands
from runtime.failures import RunRefused
from runtime.params import is_true, out_of_range, unknown_conf_keys
from runtime.settings_table import value_or_default
from runtime.waiting import Check

from operators.cluster_operator import ClusterOperator


def refuse_bad_params(op: ClusterOperator, context: Any) -> None:
    """Refuse the run (before anything else) when the trigger's conf has a key that is not a param ("unknown param
    'broker'; did you mean 'brokers'?"), a number outside its bounds (the form's schema leaves them out:
    ``runtime.params.out_of_range``) or a combination that can never pass (``kafka_ops.param_rules``), or when the
    cluster connection holds no valid profile or the commands the run names are not allowed by that profile.
    Touches no cluster. ``op`` has resolved its settings (``cluster`` and the command choices); logs the commands
    chosen and who triggered the run.

    :raises runtime.failures.RunRefused: naming every problem found ("... (nothing was done)").
    """
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
    try:
        profile = op.profile
        chosen_commands = check_commands(profile, op.cfg, {"id": 0, "host": "?"})
    except AirflowFailException as exc:  # an unknown connection, an invalid profile, a command it does not allow
        raise RunRefused(f"{exc} (nothing was done)") from exc
    for chosen in chosen_commands:
        op.log.info("command %s", chosen)
    who = getattr(context.get("dag_run"), "triggering_user_name", None)
    op.log.info("cluster %s (%s); triggered by %s%s", profile.cluster, profile.bootstrap_servers,
                who or "unknown", "; DRY RUN: nothing will be touched" if op.dry_run else "")


def wait_for_cluster(op: ClusterOperator, kind: str) -> str:
    """Wait (in ``op``'s process, every ``healthcheck_interval_s`` up to ``healthcheck_timeout_s``) until probe
    ``kind`` (a cluster-wide kind of ``probes.cluster.PROBES``, e.g. ``"healthy"``: no offline partition, no URP,
    leaders balanced) passes for the whole cluster; returns the last check's message. In a dry run: one look,
    logged, whatever it says. ``op`` has resolved its settings.

    A look that fails only on a leader imbalance (``kafka_ops.health.only_leader_imbalance``), with the setting
    ``fix_leader_imbalance`` on (its default), elects the preferred leaders of the partitions that need it and looks
    again at once, as a roll's gate does (``ClusterProber.elect_for_imbalance``): the wait never waits for the
    brokers' own rebalance (``leader.imbalance.check.interval.seconds``, 300 s; never with
    ``auto.leader.rebalance.enable=false``). A dry run elects nothing and says what a real run would elect.

    :raises AirflowFailException: at the timeout, naming what is still unhealthy; at once for a fatal error.
    """
    profile = op.profile
    probe = PROBES[kind]
    what = probe.describe(None)
    fix_imbalance = is_true(op.setting("fix_leader_imbalance"))
    with ClusterProber(profile) as prober:
        def check() -> Check:
            state = prober.state(configs=probe.configs)
            verdict = probe.rule(state, None)
            if fix_imbalance and health.only_leader_imbalance(verdict):
                if op.dry_run:
                    count = len(health.imbalance_elections(state))
                    if count:
                        return Check(False, f"{verdict.message()}; a real run elects the preferred leaders of "
                                            f"{count} partitions here")
                else:
                    elected = prober.elect_for_imbalance(state)
                    if elected is not None:
                        op.log.info("%s: leader imbalance: %s", what, elected)
                        verdict = probe.rule(prober.state(configs=probe.configs), None)
            return Check(verdict.ok, verdict.message())

        if op.dry_run:
            result = check()
            op.log.info("DRY RUN: %s: %s", what, result.message)
            return result.message
        return op.wait(check, what).message


class WaitForClusterOperator(ClusterOperator):
    """Wait until probe ``kind`` passes for the whole cluster (:func:`wait_for_cluster`), e.g. ``"healthy"`` as
    the health gate between a scale-out's or a decommission's steps.

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
        return wait_for_cluster(self, self.kind)
