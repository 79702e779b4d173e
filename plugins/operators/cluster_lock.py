"""The per-cluster operation lock as tasks: take it (setup), check it before every action, release it
(teardown). The lock itself is a znode in the cluster's ZooKeeper (``hooks.cluster_lock``) or, for KRaft
clusters (no ZooKeeper) or ``"lock_store": "kafka"``, a lock topic in the cluster (``hooks.kafka_lock``):
the profile's :attr:`~kafka_ops.profile.ClusterProfile.lock_in` decides.

Every wait here polls in the task's own process (``runtime.waiting``): transient ZooKeeper errors are
waited out up to the deadline with the cause logged; another holder is never waited out by a step that
acts on the cluster.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException
from hooks import cluster_lock
from hooks.cluster_profile import get_cluster_profile
from hooks.kafka_lock import KafkaLockStore
from hooks.zookeeper import ZooKeeperHook
from kafka_ops.profile import ClusterProfile
from runtime.failures import Misconfiguration
from runtime.params import FromParam, resolve_settings
from runtime.run_note import note_run
from runtime.waiting import Check, WaitAborted, WaitTimeout, wait_until


class LockHeldByOther(Exception):
    """Another run holds the cluster (fatal for a step that would act on it)."""


def holder_of(context: Any) -> str:
    """This run's lock holder string: ``"<dag_id>/<run_id>"``."""
    return f"{context['dag'].dag_id}/{context['run_id']}"


@contextmanager
def lock_store(profile: ClusterProfile) -> Iterator[Any]:
    """The cluster's lock store, opened: ``hooks.cluster_lock.ZooKeeperLockStore`` or
    ``hooks.kafka_lock.KafkaLockStore`` (per ``profile.lock_in``).

    :raises runtime.failures.Misconfiguration: a ZooKeeper lock without a ``zookeeper`` connect string.
    """
    if profile.lock_in == "zookeeper":
        if not profile.zookeeper:
            raise Misconfiguration(f"connection {profile.conn_id!r}: the cluster lock lives in ZooKeeper and the "
                                   "profile sets no 'zookeeper'")
        with ZooKeeperHook(profile=profile) as zk:
            yield cluster_lock.ZooKeeperLockStore(zk.get_conn(), profile.zookeeper)
    else:
        with KafkaLockStore(profile) as store:
            yield store


def take(profile: ClusterProfile, holder: str, operation: str) -> tuple[bool, cluster_lock.LockHolder | None]:
    """Try once: (held by ``holder`` now, the other holder if not). (True, None) also when it was ours."""
    with lock_store(profile) as store:
        other = store.try_acquire(holder, operation)
    return other is None, other


def ensure_held(profile: ClusterProfile, context: Any, operation: str, log: Any, timeout_s: float = 120.0) -> None:
    """Make sure this run holds the cluster's lock before it acts: re-take it when it is free (a run resumed
    by clearing only its failed tasks never re-runs the lock task), fail when another run holds it.

    :raises AirflowFailException: another run holds it (named), or the lock store (ZooKeeper, or the cluster
        for a lock topic) stayed unreachable ``timeout_s`` seconds.
    """
    holder = holder_of(context)

    def check() -> Check:
        with lock_store(profile) as store:
            before = store.current_holder()
            other = store.try_acquire(holder, operation)
        if other is not None:
            raise LockHeldByOther(
                f"cluster {profile.conn_id} is held by {other.describe()}, not by this run ({holder}): "
                "not acting on it"
            )
        if before is None:
            log.warning("cluster %s: this run did not hold the lock (resumed without its lock task?): "
                        "took it again", profile.conn_id)
        return Check(True, f"held by {holder}")

    try:
        wait_until(check, what=f"this run holds the lock of cluster {profile.conn_id}", interval_s=5,
                   timeout_s=timeout_s, log=log)
    except (WaitAborted, WaitTimeout) as exc:
        raise AirflowFailException(str(exc)) from exc


def release_held(profile: ClusterProfile, context: Any, log: Any, why: str) -> None:
    """Release the lock if this run holds it (best effort, logged). A run resumed by clearing only its failed
    tasks re-takes the lock in its broker tasks (:func:`ensure_held`) while its ``unlock_cluster`` teardown,
    which succeeded before, is not run again: so the task that ends such a run releases it itself."""
    try:
        with lock_store(profile) as store:
            if store.release(holder_of(context)):
                log.warning("cluster %s: lock released (%s)", profile.conn_id, why)
    except Exception as exc:  # the teardown, when it runs, tries again
        log.warning("cluster %s: could not release the lock (%s): %s", profile.conn_id, why, exc)


def describe_mode(profile: ClusterProfile) -> str:
    """One line on which path an operation takes on this cluster: KRaft (the quorum's leader, epoch and voters,
    from DescribeQuorum) or ZooKeeper mode, and where the operation lock lives. Best effort: a cluster that
    cannot be asked now is said so (the steps that need it report their own errors)."""
    from hooks.kafka_admin import KafkaAdminHook

    lock = (f"lock in ZooKeeper ({profile.zookeeper})" if profile.lock_in == "zookeeper"
            else "lock in the cluster (topic kafka-ops.operation-lock)")
    try:
        with KafkaAdminHook(profile=profile) as admin:
            if admin.is_kraft():
                q = admin.describe_quorum()
                mode = (f"KRaft mode (metadata quorum leader {q.leader_id}, epoch {q.leader_epoch}, voters "
                        f"{', '.join(str(v) for v in q.voter_ids)}; metadata.version, no IBP)")
            else:
                mode = "ZooKeeper mode (the controller is a broker; inter.broker.protocol.version)"
    except Exception as exc:  # noqa: BLE001 - a description only
        mode = f"mode unknown for now ({type(exc).__name__}: {exc})"
    return f"cluster {profile.conn_id}: {mode}; {lock}"


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
        mode = describe_mode(profile)
        self.log.info("%s", mode)
        dry = str(context["params"].get("dry_run")).lower() == "true"
        note_run(context, (f"DRY RUN (nothing is touched): {self.operation}" if dry else
                           f"{self.operation} running") + f" on {mode}", self.log)

        def check() -> Check:
            ok, other = take(profile, holder, self.operation)
            if ok:
                return Check(True, f"locked for {holder}")
            message = f"cluster {profile.conn_id} is busy: {other.describe()}"
            if cfg.get("lock_wait", "wait") == "fail":
                raise LockHeldByOther(message + " (lock_wait=fail)")
            return Check(False, message)

        try:
            wait_until(check, what=f"cluster {profile.conn_id} is locked for this run", interval_s=self.interval_s,
                       timeout_s=self.lock_timeout_s, log=self.log)
        except (WaitAborted, WaitTimeout) as exc:
            raise AirflowFailException(str(exc)) from exc
        return holder


class UnlockClusterOperator(BaseOperator):
    """Release the lock if this run holds it (the teardown: runs after failures too). Retries transient
    errors of the lock store for ``timeout_s``; if it still cannot, fails saying how to break the lock by hand.

    As the run's last task it ends the log with the run's summary (:func:`run_summary`): failed tasks,
    brokers down, URP, offline partitions, what each roll did, the lock, and the next action.

    :param roll_ids: the rolls of the run, for the summary.
    """

    ui_color = "#fff4d6"

    def __init__(self, *, settings: dict, roll_ids: list[str] | None = None, timeout_s: float = 300,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.settings = settings
        self.roll_ids = list(roll_ids or [])
        self.timeout_s = timeout_s

    def execute(self, context: Any) -> bool:
        cfg = resolve_settings(self.settings, context["params"])
        try:
            profile = get_cluster_profile(cfg["cluster"])
        except Exception as exc:  # nothing could have been locked on a cluster we cannot even read
            self.log.warning("cluster %r: %s: no lock to release", cfg["cluster"], exc)
            return False
        holder = holder_of(context)
        released: list[bool] = []
        hint: list[str] = []

        def check() -> Check:
            with lock_store(profile) as store:
                hint[:] = [store.break_hint]
                released.append(store.release(holder))
            return Check(True, "released" if released[-1] else "was not held by this run")

        try:
            wait_until(check, what=f"the lock of cluster {profile.conn_id} is released", interval_s=5,
                       timeout_s=self.timeout_s, log=self.log)
        except (WaitAborted, WaitTimeout) as exc:
            raise AirflowFailException(
                f"{exc}. The lock may still be held by {holder}: clear this task to try again, or break it by "
                f"hand after checking no run works on the cluster: "
                + (hint[0] if hint else f"zkCli.sh -server '{profile.zookeeper}' delete {cluster_lock.LOCK_PATH}"
                   if profile.lock_in == "zookeeper" else KafkaLockStore(profile).break_hint)
            ) from exc
        lock = "released" if released[-1] else "not held by this run (released earlier, or never taken)"
        summary = run_summary(context, profile, self.roll_ids, f"cluster lock {lock}")
        for line in summary:
            level = logging.WARNING if line.startswith(("FAILED", "next:")) else logging.INFO
            self.log.log(level, "%s", line)
        note_run(context, "\n".join(summary), self.log, keep_map_indexes=True)
        return released[-1]


#: The settings every operation's lock tasks read (the DAG's params of the same names).
LOCK_SETTINGS = {"cluster": FromParam("cluster"), "lock_wait": FromParam("lock_wait")}


def run_summary(context: Any, profile: ClusterProfile, roll_ids: list[str], lock: str) -> list[str]:
    """The run's closing lines: ``FAILED ...`` naming the failed tasks (or "run succeeded"), the cluster as
    it is now (brokers down = in replica lists but not registered, URP, offline partitions), what each roll
    did, the lock, and the next action. Best effort: a part that cannot be read says so."""
    from kafka_ops.roll import clock
    from probes.cluster import ClusterProber
    from runtime.roll_store import RollStore

    ti = context["ti"]
    lines = []
    try:
        states = ti.get_task_states(dag_id=ti.dag_id, run_ids=[ti.run_id]).get(ti.run_id, {})
        failed = sorted(k for k, v in states.items() if v in ("failed", "upstream_failed") and not
                        k.startswith(ti.task_id))
    except Exception as exc:  # the summary must never fail the teardown
        failed, lines = [], [f"task states unreadable: {exc}"]
    dry = " (DRY RUN: nothing was touched)" if str(context["params"].get("dry_run")).lower() == "true" else ""
    lines.insert(0, (f"FAILED: {', '.join(failed)}" if failed else "run succeeded") + dry)
    try:
        with ClusterProber(profile) as prober:
            state = prober.state(configs=False)
        down = state.down_broker_ids
        lines.append(f"cluster {profile.conn_id}: brokers down {down or 'none'}; "
                     f"{len(state.under_replicated_partitions())} under-replicated, "
                     f"{len(state.offline_partitions())} offline partitions")
    except Exception as exc:
        down = []
        lines.append(f"cluster {profile.conn_id}: could not be read ({type(exc).__name__}: {exc})"[:300])
    for roll_id in roll_ids:
        try:
            record = RollStore(context, roll_id).load()
        except Exception as exc:
            lines.append(f"roll {roll_id!r}: record unreadable ({exc})")
            continue
        if record is None:
            lines.append(f"roll {roll_id!r}: " + ("dry run, nothing restarted (plan and steps in its tasks' logs)"
                                                  if dry else "finished (forget_rolls deleted its record)"
                                                  if not failed else "not planned"))
            continue
        if not record.order:
            lines.append(f"roll {roll_id!r}: nothing to roll (ZooKeeper mode or the run's roles)")
            continue
        done = record.finished()
        noun = {int(s["id"]): s.get("role", "broker") for s in record.steps}
        other = [f"{noun[b]} {b} {record.phase(b)} at {clock(record.progress(b).at_ms)}" for b in record.order
                 if record.phase(b) not in (None, "done")]
        lines.append(f"roll {roll_id!r}: done {done or 'none'} of {record.order}"
                     + (f"; left {'; '.join(other)}" if other else ""))
    lines.append(lock)
    if failed:
        run = context["run_id"]
        lines.append(f"next: fix the cause named at the end of the failed task's log, then clear the failed tasks "
                     f"(UI: the run -> Clear Run -> Only failed; CLI: airflow dags clear {ti.dag_id} --run-id "
                     f"{run} --only-failed --yes)" + (f"; brokers {down} are down" if down else ""))
    return lines
