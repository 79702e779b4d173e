"""This run and the cluster's operation lock, for any task that acts on a cluster: who holds it
(``"<dag_id>/<run_id>"``), the lock store the profile names (a znode in the cluster's ZooKeeper,
``hooks.cluster_lock``, or a lock topic in the cluster, ``hooks.kafka_lock``: the profile's
:attr:`~kafka_ops.profile.ClusterProfile.lock_in` decides), make sure this run holds it before acting, and
release it (:func:`release_lock`, what the ``run_outcome`` teardown does first). The lock task is
``operators.cluster_lock``.

Every wait here polls in the task's own process (``runtime.waiting``): transient ZooKeeper errors are
waited out up to the deadline with the cause logged; another holder is never waited out by a step that
acts on the cluster.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from airflow.sdk.exceptions import AirflowFailException
from hooks import cluster_lock
from hooks.kafka_lock import KafkaLockStore
from hooks.zookeeper import ZooKeeperHook
from kafka_ops.profile import ClusterProfile

from runtime import kept_clients, stopping, task_states
from runtime.failures import Misconfiguration
from runtime.waiting import Check, WaitAborted, WaitTimeout, wait_until


class LockHeldByOther(Exception):
    """Another run holds the cluster (fatal for a step that would act on it)."""


def holder_of(context: Any) -> str:
    """This run's lock holder string: ``"<dag_id>/<run_id>"``."""
    return f"{context['dag'].dag_id}/{context['run_id']}"


#: The run's teardown (``groups.cluster_guard``): once it is scheduled, the run is ending and its lock released (or
#: about to be).
TEARDOWN_TASK_ID = "run_outcome"


def ended_from_outside(context: Any) -> str | None:
    """Why this task must not act any more though no SIGTERM reached it yet (Airflow tells a task at its next
    heartbeat, seconds later), read through the Task SDK in one request: its own instance is no longer ``running``
    (marked success or failed, or cleared: ``restarting``), or the run's ``run_outcome`` has a state (it is
    scheduled only once every other task is done: the run is ending, and its lock is released or about to be; a
    run resumed by a clear has it cleared, no state). None: go on (also where no task instance is in ``context``).
    """
    ti = context.get("ti") if isinstance(context, dict) else None
    if ti is None or not hasattr(ti, "get_task_states"):
        return None
    own = task_states.instance_key(ti.task_id, getattr(ti, "map_index", -1))
    found = task_states.in_this_run(ti, [ti.task_id, TEARDOWN_TASK_ID])
    mine, teardown = found.get(own), found.get(TEARDOWN_TASK_ID)
    if own in found and mine not in (None, "running"):
        return f"this task instance is {mine} (marked or cleared from outside)"
    if teardown is not None and ti.task_id != TEARDOWN_TASK_ID:
        return f"the run is ending: its {TEARDOWN_TASK_ID} is {teardown}"
    return None


@contextmanager
def lock_store(profile: ClusterProfile) -> Iterator[Any]:
    """The cluster's lock store, opened: ``hooks.cluster_lock.ZooKeeperLockStore`` or
    ``hooks.kafka_lock.KafkaLockStore`` (per ``profile.lock_in``); within ``runtime.kept_clients.kept_open`` (a node
    roll's task), the one kept open for the cluster: each check still reads the holder again.

    :raises runtime.failures.Misconfiguration: a ZooKeeper lock without a ``zookeeper`` connect string.
    """
    key = ("lock store", profile.cluster, profile.lock_in, profile.zookeeper)
    with kept_clients.client(key, lambda: _opened_store(profile)) as store:
        yield store


@contextmanager
def _opened_store(profile: ClusterProfile) -> Iterator[Any]:
    if profile.lock_in == "zookeeper":
        if not profile.zookeeper:
            raise Misconfiguration(f"connection {profile.cluster!r}: the cluster lock lives in ZooKeeper and the "
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
    by clearing only its failed tasks never re-runs the lock task), fail when another run holds it. The holder is
    read first and, when it is this run (every check but a resumed run's first), nothing else is asked: a take
    (``try_acquire``: re-entrant, but a CreateTopics and a second read on a lock topic) costs a KRaft broker's roll
    0.1-0.4 s per check, three checks a broker.

    :raises AirflowFailException: another run holds it (named), or the lock store (ZooKeeper, or the cluster
        for a lock topic) stayed unreachable ``timeout_s`` seconds.
    :raises runtime.stopping.TaskStopped: the task was told to stop from outside, by a SIGTERM or as
        :func:`ended_from_outside` reads it before the SIGTERM comes (its instance marked, or the run's teardown
        scheduled): it neither acts nor takes the lock again; a batch it stopped is started first
        (``runtime.stopping.in_flight``), without the lock.
    """
    stopping.check(f"acting on cluster {profile.cluster} ({operation})")
    if stopping.finishing() is None and (ended := ended_from_outside(context)) is not None:
        log.warning("told to stop from outside: %s: no further action on the cluster from this task", ended)
        stopping.request_stop(ended)  # as a SIGTERM would: raises below, or lets a batch in flight be started
        stopping.check(f"acting on cluster {profile.cluster} ({operation})")
    if (back := stopping.finishing()) is not None:
        log.warning("told to stop from outside: %s is brought back first, without the lock (the run has ended or is "
                    "ending)", back)
        return
    holder = holder_of(context)

    def check() -> Check:
        with lock_store(profile) as store:
            before = store.current_holder()
            if before is not None and before.holder == holder:  # the usual answer: one read, no take
                return Check(True, f"held by {holder}")
            other = store.try_acquire(holder, operation)
        if other is not None:
            raise LockHeldByOther(
                f"cluster {profile.cluster} is held by {other.describe()}, not by this run ({holder}): "
                "not acting on it"
            )
        if before is None:
            log.warning("cluster %s: this run did not hold the lock (resumed without its lock task?): "
                        "took it again", profile.cluster)
        return Check(True, f"held by {holder}")

    try:
        wait_until(check, what=f"this run holds the lock of cluster {profile.cluster}", interval_s=5,
                   timeout_s=timeout_s, log=log)
    except (WaitAborted, WaitTimeout) as exc:
        raise AirflowFailException(str(exc)) from exc


def release_held(profile: ClusterProfile, context: Any, log: Any, why: str) -> bool:
    """Release the lock if this run holds it (best effort, logged); True when this call released it. A run resumed
    by clearing only its failed tasks re-takes the lock in its broker tasks (:func:`ensure_held`) while its
    ``run_outcome`` teardown, which succeeded before, is not run again: so the task that ends such a run releases
    it itself."""
    try:
        with lock_store(profile) as store:
            if store.release(holder_of(context)):
                log.warning("cluster %s: lock released (%s)", profile.cluster, why)
                return True
    except Exception as exc:  # the teardown, when it runs, tries again
        log.warning("cluster %s: could not release the lock (%s): %s", profile.cluster, why, exc)
    return False


def release_lock(profile: ClusterProfile, holder: str, log: Any, timeout_s: float = 300) -> bool:
    """Release the cluster's lock if ``holder`` holds it: what ``run_outcome``, the teardown of every operation's
    ``check_and_lock``, does (after failures too). Retries transient errors of the lock store (ZooKeeper, or
    the cluster for a lock topic) every 5 s for ``timeout_s`` seconds.

    :param profile: the cluster's profile (its ``lock_in`` names the lock store).
    :param holder: this run, ``"<dag_id>/<run_id>"`` (``runtime.lock_holding.holder_of``).
    :returns: True when it released the lock, False when ``holder`` did not hold it (released earlier, another
        holder, or never taken: another run's lock is never touched).
    :raises AirflowFailException: the lock store stayed unreachable; the message says how to break the lock by hand.
    """
    released: list[bool] = []
    hint: list[str] = []

    def check() -> Check:
        with lock_store(profile) as store:
            hint[:] = [store.break_hint]
            released.append(store.release(holder))
        return Check(True, "released" if released[-1] else "was not held by this run")

    try:
        wait_until(check, what=f"the lock of cluster {profile.cluster} is released", interval_s=5,
                   timeout_s=timeout_s, log=log)
    except (WaitAborted, WaitTimeout) as exc:
        raise AirflowFailException(
            f"{exc}. The lock may still be held by {holder}: clear this task to try again, or break it by "
            f"hand after checking no run works on the cluster: "
            + (hint[0] if hint else f"zkCli.sh -server '{profile.zookeeper}' delete {cluster_lock.LOCK_PATH}"
               if profile.lock_in == "zookeeper" else KafkaLockStore(profile).break_hint)
        ) from exc
    return released[-1]
