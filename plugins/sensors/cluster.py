"""Sensors that wait for the cluster to reach a state, judged by ``sensors.probes``.

Each sensor checks once right away; if the state is not reached it defers to
:class:`triggers.cluster_probe.ClusterProbeTrigger` (no worker slot held while waiting) or, with
``deferrable=False``, pokes in place. At the timeout it fails with the last verdict, which names the
partitions, brokers or groups at fault. With ``dry_run`` it looks once, logs, and passes.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseSensorOperator
from airflow.sdk.exceptions import AirflowSensorTimeout, AirflowSkipException
from hooks.cluster_profile import get_cluster_profile
from operators.params import is_true
from operators.resume import restarted_in_run
from triggers.cluster_probe import ClusterProbeTrigger

from sensors.probes import ProbeResult, ProbeSpec, run_probe


class ClusterProbeSensor(BaseSensorOperator):
    """Wait until the probe ``probe_kind`` passes ``ok_streak`` polls in a row.

    :param cluster: the ``kafka`` connection id of the cluster profile (templated).
    :param probe_kind: one of ``sensors.probes.KINDS``.
    :param broker: ``{"id": int, "host": str, ...}`` for broker probes (templated / mapped).
    :param consumer_groups: Burrow groups for the gate; None skips the lag check (templated).
    :param ok_streak: consecutive passing polls required (templated; >= 1).
    :param dry_run: look once, log, pass (templated).
    :param interval_s: seconds between polls (templated; sets ``poke_interval`` at run time).
    :param timeout_s: give up after this many seconds (templated; sets ``timeout`` at run time).
    :param deferrable: wait in the triggerer (default) instead of poking in a worker slot.
    """

    template_fields = ("cluster", "broker", "consumer_groups", "ok_streak", "dry_run", "interval_s", "timeout_s")
    ui_color = "#e8f4fd"

    def __init__(
        self,
        *,
        cluster: str,
        probe_kind: str,
        broker: dict | None = None,
        consumer_groups: list[str] | None = None,
        ok_streak: int | str = 1,
        dry_run: bool | str = False,
        interval_s: float | str = 5,
        timeout_s: float | str = 900,
        deferrable: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.cluster = cluster
        self.probe_kind = probe_kind
        self.broker = broker
        self.consumer_groups = consumer_groups
        self.ok_streak = ok_streak
        self.dry_run = dry_run
        self.deferrable = deferrable
        self._streak = 0

    # --- helpers ---------------------------------------------------------------------------------
    @property
    def broker_id(self) -> int | None:
        return None if self.broker is None else int(self.broker["id"])

    def spec(self) -> ProbeSpec:
        return ProbeSpec(
            kind=self.probe_kind,
            conn_id=self.cluster,
            broker_id=self.broker_id,
            consumer_groups=list(self.consumer_groups) if self.consumer_groups else None,
        )

    def _streak_needed(self) -> int:
        return max(1, int(self.ok_streak))

    def _is_dry_run(self) -> bool:
        return is_true(self.dry_run)

    def check(self) -> ProbeResult:
        result = run_probe(self.spec())
        self.log.info("%s: %s", self.spec().describe(), result.message)
        return result

    # --- execution --------------------------------------------------------------------------------
    def execute(self, context: Any) -> Any:
        self.poke_interval = float(self.interval_s)
        self.timeout = float(self.timeout_s)
        self.before_wait(context)
        if self._is_dry_run():
            result = self.check()
            self.log.info("DRY RUN: would wait until %s (now: %s)", self.spec().describe(),
                          "reached" if result.ok else "not reached")
            return None
        result = self.check()
        self._streak = 1 if result.ok else 0
        if self._streak >= self._streak_needed():
            return None
        if not self.deferrable:
            return super().execute(context)
        self.defer(
            trigger=ClusterProbeTrigger(
                self.spec().to_dict(), float(self.poke_interval), float(self.timeout), self._streak_needed()
            ),
            method_name="execute_complete",
        )

    def before_wait(self, context: Any) -> None:
        """Hook for subclasses: raise AirflowSkipException to skip (resume), etc."""

    def poke(self, context: Any) -> bool:
        result = self.check()
        self._streak = self._streak + 1 if result.ok else 0
        return self._streak >= self._streak_needed()

    def execute_complete(self, context: Any, event: dict[str, Any]) -> None:
        if event.get("status") == "ok":
            self.log.info("%s: %s", self.spec().describe(), event.get("message"))
            return
        raise AirflowSensorTimeout(
            f"{self.task_id}: gave up after {float(self.timeout_s):.0f} s waiting until {self.spec().describe()}: "
            f"{event.get('message')}"
        )


class _SkipWhenRestarted(ClusterProbeSensor):
    """Skips itself when ``broker`` was already restarted in this run (resume after a clear)."""

    def before_wait(self, context: Any) -> None:
        profile = get_cluster_profile(self.cluster)
        restarted = restarted_in_run(profile, int(self.broker_id), context)
        if restarted is not None:
            raise AirflowSkipException(
                f"broker {self.broker_id} already restarted in this run (registered at {restarted} ms): not again"
            )


class RestartGateSensor(_SkipWhenRestarted):
    """The gate before restarting ``broker``: cluster healthy, min-ISR safe, watched groups OK in Burrow
    ``ok_streak`` polls in a row. Skips itself when the broker was already restarted in this run, so a
    cleared run resumes without a second restart."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(probe_kind="gate", **kwargs)


class BrokerGoneSensor(_SkipWhenRestarted):
    """Wait until ``broker`` has left the cluster metadata (its controlled shutdown finished)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(probe_kind="gone", **kwargs)


class BrokerRegisteredSensor(ClusterProbeSensor):
    """Wait until ``broker`` is registered and in the metadata again after its start."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(probe_kind="registered", **kwargs)


class ISRCaughtUpSensor(ClusterProbeSensor):
    """Wait until ``broker`` is back in the ISR of every partition it hosts (caught up with its leaders);
    without ``broker``, until no partition is under-replicated."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(probe_kind="caught_up", **kwargs)


class LeadershipBalancedSensor(ClusterProbeSensor):
    """Wait until ``broker`` (or, without it, every broker) leads its preferred partitions within
    ``leader.imbalance.per.broker.percentage``."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(probe_kind="leadership", **kwargs)


class ClusterHealthySensor(ClusterProbeSensor):
    """Wait until the cluster is healthy: no offline partitions, no URP, leaders balanced."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(probe_kind="healthy", **kwargs)
