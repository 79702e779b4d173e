"""The cluster mode of a run (:class:`kafka_ops.roll_spec.ClusterMode`), decided once, under the cluster lock.

``check_and_lock`` asks the cluster which mode it is in right after it took the lock (nothing else can change the
mode while the run holds it) and keeps the answer as its XCom ``cluster_mode``; every later task that takes a
mode-dependent path (a roll's plan, the upgrade's checks, the metadata.version step) reads it from there
(:func:`run_mode`), so the whole run follows one path and the log says where it was decided. A task of a DAG
without the lock task (or a run whose lock task could not ask the cluster) asks the cluster itself.

How a mode is told: a cluster that answers DescribeQuorum (KIP-595) has a KRaft metadata quorum; one that does
not is in ZooKeeper mode. A cluster in the middle of the ZooKeeper-to-KRaft migration (KIP-866) is reported as
``MIGRATING`` by the migration's own check (task ``check_migration``), which knows it and keeps the mode under
the same XCom key; a revert's ``deprovision_controllers`` decides ``ZOOKEEPER`` for what follows it (no controller
runs any more). :func:`decided_mode` reads the latest decider's decision first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafka_ops.profile import ClusterProfile
from kafka_ops.roll_spec import ClusterMode

#: The task that decides the mode (``groups.cluster_guard``) and the XCom key it keeps it under.
LOCK_TASK_ID = "check_and_lock"
MODE_KEY = "cluster_mode"
#: The ZooKeeper-to-KRaft migration's check, whose decision (``migrating``) overrides the lock's, and a revert's
#: deprovisioning of the controllers, whose decision (``zookeeper``) overrides the check's once it ran.
MIGRATION_CHECK_TASK_ID = "check_migration"
DEPROVISION_TASK_ID = "deprovision_controllers"


def mode_of(kraft: bool) -> ClusterMode:
    """The mode a DescribeQuorum answer means: answered = KRaft, refused = ZooKeeper mode."""
    return ClusterMode.KRAFT if kraft else ClusterMode.ZOOKEEPER


def decided_mode(context: Any) -> ClusterMode | None:
    """The mode decided for this run: the migration's check's (in a DAG that has one), else ``check_and_lock``'s; None
    when neither decided (no lock task, or it could not ask)."""
    ti = context.get("ti")
    pull = getattr(ti, "xcom_pull", None)
    if pull is None:
        return None
    dag = getattr(getattr(ti, "task", None), "dag", None)
    deciders = [t for t in (DEPROVISION_TASK_ID, MIGRATION_CHECK_TASK_ID) if t in getattr(dag, "task_ids", ())]
    for task_id in [*deciders, LOCK_TASK_ID]:
        try:
            value = pull(task_ids=task_id, key=MODE_KEY)
        except Exception:  # noqa: BLE001 - no decision: the caller asks the cluster
            continue
        if isinstance(value, str) and value in ClusterMode._value2member_map_:
            return ClusterMode(value)
    return None


def run_mode(context: Any, ask_kraft: Callable[[], bool], log: Any) -> ClusterMode:
    """The run's cluster mode: the one decided under the lock (:func:`decided_mode`), else asked now through
    ``ask_kraft`` (a DescribeQuorum probe, waiting out transient errors: it raises what it raises)."""
    decided = decided_mode(context)
    if decided is not None:
        log.info("cluster mode: %s (decided under the lock by %s)", decided.describe, LOCK_TASK_ID)
        return decided
    mode = mode_of(ask_kraft())
    log.info("cluster mode: %s (asked now: no mode decided under the lock)", mode.describe)
    return mode


def describe_mode(profile: ClusterProfile) -> tuple[ClusterMode | None, str]:
    """The cluster's mode and one line on the path an operation takes: KRaft (the quorum's leader, epoch and
    voters, from DescribeQuorum) or ZooKeeper mode, and where the operation lock lives. Best effort: a cluster that
    cannot be asked now gives None and says so (the steps that need it ask again and report their own errors)."""
    from hooks.kafka_admin import KafkaAdminHook

    lock = (f"lock in ZooKeeper ({profile.zookeeper})" if profile.lock_in == "zookeeper"
            else "lock in the cluster (topic kafka-ops.operation-lock)")
    mode: ClusterMode | None = None
    try:
        with KafkaAdminHook(profile=profile) as admin:
            if admin.is_kraft():
                mode = ClusterMode.KRAFT
                q = admin.describe_quorum()
                line = (f"KRaft mode (metadata quorum leader {q.leader_id}, epoch {q.leader_epoch}, voters "
                        f"{', '.join(str(v) for v in q.voter_ids)}; metadata.version, no IBP)")
            else:
                mode = ClusterMode.ZOOKEEPER
                line = "ZooKeeper mode (the controller is a broker; inter.broker.protocol.version)"
    except Exception as exc:  # noqa: BLE001 - a description only
        line = f"mode unknown for now ({type(exc).__name__}: {exc})"
    return mode, f"cluster {profile.cluster}: {line}; {lock}"
