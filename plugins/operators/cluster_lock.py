"""The run's first task, ``check_and_lock``: refuse bad params (``operators.cluster_checks.refuse_bad_params``), then
take the per-cluster operation lock (the setup; every action checks it, and the teardown ``run_outcome`` releases
it: ``runtime.lock_holding``). The lock itself is a znode in the cluster's ZooKeeper (``hooks.cluster_lock``) or,
for KRaft clusters (no ZooKeeper) or ``"lock_store": "kafka"``, a lock topic in the cluster (``hooks.kafka_lock``):
the profile's :attr:`~kafka_ops.profile.ClusterProfile.lock_in` decides. One task, not two: a task start costs
0.3-0.5 s on a real Airflow (a ``check_params`` task of its own ran before a ``lock_cluster`` one until
2026-11-29).

Every wait here polls in the task's own process (``runtime.waiting``): transient ZooKeeper errors are
waited out up to the deadline with the cause logged; another holder is never waited out by a step that
acts on the cluster.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk.exceptions import AirflowFailException
from runtime.cluster_mode import MODE_KEY, describe_mode
from runtime.lock_holding import LockHeldByOther, holder_of, take
from runtime.params import FromParam
from runtime.run_note import note_run
from runtime.waiting import Check, WaitAborted, WaitTimeout, wait_until

from operators.cluster_checks import refuse_bad_params
from operators.cluster_operator import ClusterOperator


class LockClusterOperator(ClusterOperator):
    """Refuse the run's bad params (:func:`operators.cluster_checks.refuse_bad_params`: unknown conf keys, numbers
    out of bounds, impossible combinations, an invalid profile, commands it does not allow; touches no cluster),
    then take the cluster's operation lock for this run (the setup of :func:`groups.cluster_guard.cluster_guard`)
    and decide the run's cluster mode under it.

    :param settings: ``cluster`` (connection id), ``lock_wait`` (``"wait"``: poll until free, up to
        ``lock_timeout_s``; ``"fail"``: fail at once naming the holder), ``dry_run`` and the command choices the
        params check reads; values or :class:`runtime.params.FromParam`.
    :param operation: label stored with the lock ("rolling restart").
    :param lock_timeout_s: longest wait for another operation, seconds (default 6 h).
    :param interval_s: seconds between tries for the lock (default 10).
    """

    ui_color = "#fff4d6"

    def __init__(self, *, settings: dict, operation: str, lock_timeout_s: float = 6 * 3600,
                 interval_s: float = 10, **kwargs: Any) -> None:
        super().__init__(settings=settings, **kwargs)
        self.operation = operation
        self.lock_timeout_s = lock_timeout_s
        self.lock_interval_s = interval_s  # not interval_s: resolve() sets that to healthcheck_interval_s

    def execute(self, context: Any) -> str:
        self.resolve(context)
        refuse_bad_params(self, context)  # raises RunRefused before the lock is asked for
        profile = self.profile
        holder = holder_of(context)
        decided, mode = describe_mode(profile)
        self.log.info("%s", mode)
        note_run(context, (f"DRY RUN (nothing is touched): {self.operation}" if self.dry_run else
                           f"{self.operation} running") + f" on {mode}", self.log)

        self._waited = False

        def check() -> Check:
            ok, other = take(profile, holder, self.operation)
            if ok:
                return Check(True, f"locked for {holder}")
            self._waited = True
            message = f"cluster {profile.cluster} is busy: {other.describe()}"
            if self.setting("lock_wait") == "fail":
                raise LockHeldByOther(message + " (lock_wait=fail)")
            return Check(False, message)

        try:
            wait_until(check, what=f"cluster {profile.cluster} is locked for this run", interval_s=self.lock_interval_s,
                       timeout_s=self.lock_timeout_s, log=self.log)
        except (WaitAborted, WaitTimeout) as exc:
            raise AirflowFailException(str(exc)) from exc
        # the run's mode, decided once under the lock (runtime.cluster_mode): asked again if the lock was waited
        # for (another operation held the cluster meanwhile) or the first look could not tell
        if decided is None or self._waited:
            decided, line = describe_mode(profile)
            self.log.info("%s", line)
        if decided is not None:
            context["ti"].xcom_push(key=MODE_KEY, value=decided.value)
            self.log.info("cluster mode for this run: %s", decided.describe)
        return holder


#: The settings every operation's lock tasks read (the DAG's params of the same names).
LOCK_SETTINGS = {"cluster": FromParam("cluster"), "lock_wait": FromParam("lock_wait")}
