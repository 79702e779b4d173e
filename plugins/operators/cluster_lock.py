"""The per-cluster operation lock as a task: take it (the setup; every action checks it, and the teardown
``run_outcome`` releases it: ``runtime.lock_holding``). The lock itself is a znode in the cluster's ZooKeeper
(``hooks.cluster_lock``) or, for KRaft clusters (no ZooKeeper) or ``"lock_store": "kafka"``, a lock topic in the
cluster (``hooks.kafka_lock``): the profile's :attr:`~kafka_ops.profile.ClusterProfile.lock_in` decides.

Every wait here polls in the task's own process (``runtime.waiting``): transient ZooKeeper errors are
waited out up to the deadline with the cause logged; another holder is never waited out by a step that
acts on the cluster.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException
from hooks.cluster_profile import get_cluster_profile
from runtime.cluster_mode import MODE_KEY, describe_mode
from runtime.lock_holding import LockHeldByOther, holder_of, take
from runtime.params import FromParam, resolve_settings
from runtime.run_note import note_run
from runtime.settings_table import value_or_default
from runtime.waiting import Check, WaitAborted, WaitTimeout, wait_until


class LockClusterOperator(BaseOperator):
    """Take the cluster's operation lock for this run (the setup of :func:`groups.cluster_guard.cluster_guard`).

    :param settings: ``cluster`` (connection id) and ``lock_wait`` (``"wait"``: poll until free, up to
        ``lock_timeout_s``; ``"fail"``: fail at once naming the holder); values or
        :class:`runtime.params.FromParam`.
    :param operation: label stored with the lock ("rolling restart").
    :param lock_timeout_s: longest wait for another operation, seconds (default 6 h).
    :param interval_s: seconds between tries (default 10).
    """

    ui_color = "#fff4d6"

    def __init__(self, *, settings: dict, operation: str, lock_timeout_s: float = 6 * 3600,
                 interval_s: float = 10, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.settings = settings
        self.operation = operation
        self.lock_timeout_s = lock_timeout_s
        self.interval_s = interval_s

    def execute(self, context: Any) -> str:
        cfg = resolve_settings(self.settings, context["params"])
        try:
            profile = get_cluster_profile(cfg["cluster"])
        except Exception as exc:
            raise AirflowFailException(f"cluster {cfg['cluster']!r}: {exc}") from exc
        holder = holder_of(context)
        decided, mode = describe_mode(profile)
        self.log.info("%s", mode)
        dry = str(context["params"].get("dry_run")).lower() == "true"
        note_run(context, (f"DRY RUN (nothing is touched): {self.operation}" if dry else
                           f"{self.operation} running") + f" on {mode}", self.log)

        self._waited = False

        def check() -> Check:
            ok, other = take(profile, holder, self.operation)
            if ok:
                return Check(True, f"locked for {holder}")
            self._waited = True
            message = f"cluster {profile.cluster} is busy: {other.describe()}"
            if value_or_default("lock_wait", cfg) == "fail":
                raise LockHeldByOther(message + " (lock_wait=fail)")
            return Check(False, message)

        try:
            wait_until(check, what=f"cluster {profile.cluster} is locked for this run", interval_s=self.interval_s,
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
