"""The per-cluster operation lock as a setup task (see ``hooks.cluster_lock`` for the lock itself)."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperator, BaseSensorOperator
from airflow.sdk.exceptions import AirflowFailException
from hooks import cluster_lock
from hooks.zookeeper import ZooKeeperHook


def _holder(context: Any) -> str:
    return f"{context['dag'].dag_id}/{context['run_id']}"




class ClusterLockSensor(BaseSensorOperator):
    """Take the cluster's operation lock for this DAG run; wait while another run holds it.

    :param cluster: ``kafka`` connection id (templated).
    :param operation: a label stored with the lock, e.g. ``"rolling restart"``.
    :param wait: ``"wait"`` (poke in reschedule mode until free, no worker slot held between pokes) or
        ``"fail"`` (fail at once, naming the run that holds the cluster). Templated.
    """

    template_fields = ("cluster", "wait")
    ui_color = "#fff4d6"

    def __init__(self, *, cluster: str, operation: str, wait: str = "wait", **kwargs: Any) -> None:
        kwargs.setdefault("mode", "reschedule")
        super().__init__(**kwargs)
        self.cluster = cluster
        self.operation = operation
        self.wait = wait

    def poke(self, context: Any) -> bool:
        with ZooKeeperHook(self.cluster) as zk:
            other = cluster_lock.try_acquire(zk.get_conn(), _holder(context), self.operation)
        if other is None:
            self.log.info("cluster %s locked for %s", self.cluster, _holder(context))
            return True
        message = f"cluster {self.cluster} is busy: {other.describe()}"
        if self.wait == "fail":
            raise AirflowFailException(message + " (lock_wait=fail)")
        self.log.info("%s; waiting", message)
        return False


class ReleaseClusterLockOperator(BaseOperator):
    """Release the cluster's operation lock if this run holds it (use as the teardown of the lock)."""

    template_fields = ("cluster",)
    ui_color = "#fff4d6"

    def __init__(self, *, cluster: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cluster = cluster

    def execute(self, context: Any) -> bool:
        with ZooKeeperHook(self.cluster) as zk:
            released = cluster_lock.release(zk.get_conn(), _holder(context))
        self.log.info("cluster %s lock %s", self.cluster, "released" if released else "was not held by this run")
        return released
