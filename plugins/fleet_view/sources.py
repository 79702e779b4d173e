"""One read of one cluster for the cluster view: what Kafka, its quorum, Burrow and the operation lock say now, with
the Airflow side (roll records, waves, window, past runs: ``fleet_view.metadata``), into a
:class:`kafka_ops.cluster_view.ClusterReading`.

Each part is read on its own: a part that fails leaves its error (secrets scrubbed) and the rest is still shown;
only a cluster whose metadata cannot be read is *unreachable*. Every request carries a short timeout
(:data:`REQUEST_TIMEOUT_S`); the reader (``fleet_view.reader``) adds the page's deadline on top.

Cost of a read, per cluster: Metadata + DescribeCluster (the admin hook's config cache keeps DescribeConfigs to the
first read and to new topics), DescribeQuorum (KRaft; ZooKeeper mode asks again only every
:data:`SLOW_EVERY_S`), the lock (a znode read on a kept ZooKeeper session, or nothing when the lock topic is absent
from the metadata just read), one Burrow GET per watched group, ListPartitionReassignments while an operation holds
the lock; and every :data:`SLOW_EVERY_S`, or as soon as the live brokers change (one stopped or back: a roll), the
per-broker figures (DescribeLogDirs, IBP or metadata.version), so a broker that went down does not keep the figures of
its last read nor one that came back show none for half a minute.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from hooks import cluster_lock
from hooks.burrow import BurrowHook
from hooks.cluster_profile import get_cluster_profile
from hooks.kafka_admin import KafkaAdminHook
from hooks.kafka_lock import LOCK_TOPIC, KafkaLockStore
from hooks.zookeeper import ZooKeeperHook
from kafka_ops.cluster_view import ClusterReading, LockInfo
from kafka_ops.profile import ClusterProfile, is_secret_setting
from kafka_ops.upgrade import IBP

log = logging.getLogger(__name__)

#: Timeout of each request to a cluster, its ZooKeeper or Burrow, seconds.
REQUEST_TIMEOUT_S = 5.0
#: The per-broker figures (disk, IBP, metadata.version) and a ZooKeeper-mode cluster's mode are read this often,
#: seconds: they change with operations, not with every refresh.
SLOW_EVERY_S = 30.0


def secret_values(profile: ClusterProfile) -> list[str]:
    """The values of the profile's secret client settings (passwords, keys, tokens: ``is_secret_setting``),
    longest first, for :func:`scrub`."""
    values = {str(v) for k, v in profile.client_config.items() if is_secret_setting(k) and str(v)}
    return sorted(values, key=len, reverse=True)


def scrub(text: str, secrets: list[str]) -> str:
    """``text`` with every secret value replaced by ``***`` (an error message may quote a client setting)."""
    for value in secrets:
        text = text.replace(value, "***")
    return text


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:300]


class ClusterSource:
    """Reads one cluster; kept by the reader for the life of the api-server, so the admin hook's config cache, the
    ZooKeeper session and the slow figures carry from one read to the next.

    :param cluster: the ``kafka`` connection id.
    :param metadata: the Airflow side (``fleet_view.metadata.AirflowMetadata``).
    :param profile_of: connection id -> profile (default: the connection, as the DAGs read it).
    :param clock: seconds since the epoch.
    """

    def __init__(self, cluster: str, metadata: Any, *,
                 profile_of: Callable[[str], ClusterProfile] = get_cluster_profile,
                 clock: Callable[[], float] = time.time) -> None:
        self.cluster = cluster
        self.metadata = metadata
        self.profile_of = profile_of
        self.clock = clock
        self._profile: ClusterProfile | None = None
        self._admin: KafkaAdminHook | None = None
        self._zk: ZooKeeperHook | None = None
        self._kraft: bool | None = None
        self._kraft_at = 0.0
        self._slow: dict[str, Any] = {}
        self._slow_at = 0.0
        self._slow_brokers: tuple[int, ...] = ()

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None
        if self._zk is not None:
            self._zk.close()
            self._zk = None

    def _clients(self, profile: ClusterProfile) -> KafkaAdminHook:
        """The admin hook, new when the connection changed (its cache and sessions belong to the old one)."""
        if self._profile is None or self._profile.redacted() != profile.redacted() \
                or secret_values(self._profile) != secret_values(profile):
            self.close()
            self._profile = profile
            self._kraft, self._slow, self._slow_at = None, {}, 0.0
        if self._admin is None:
            self._admin = KafkaAdminHook(profile=profile, request_timeout_s=REQUEST_TIMEOUT_S, cache_configs=True)
        return self._admin

    def read(self) -> ClusterReading:
        """Read the cluster now (see the module docstring). Never raises: what fails is in ``errors``."""
        began = self.clock()
        reading = ClusterReading(self.cluster, int(began * 1000))
        try:
            profile = self.profile_of(self.cluster)
        except Exception as exc:  # noqa: BLE001 - a bad connection is shown, not raised
            return replace(reading, errors={"kafka": f"connection {self.cluster!r}: {_error(exc)}"},
                           took_s=self.clock() - began)
        secrets = secret_values(profile)
        errors: dict[str, str] = {}
        parts: dict[str, Any] = {"controller_ids": tuple(sorted(profile.controller_hosts))}
        try:
            admin = self._clients(profile)
            parts["state"] = admin.cluster_state(configs=True)
        except Exception as exc:  # noqa: BLE001 - unreachable: shown as such
            self.close()
            errors["kafka"] = _error(exc)
        else:
            self._read_parts(profile, admin, parts, errors)
        reading = replace(reading, **parts, errors={k: scrub(v, secrets) for k, v in errors.items()},
                          took_s=self.clock() - began)
        return reading

    def _read_parts(self, profile: ClusterProfile, admin: KafkaAdminHook, parts: dict[str, Any],
                    errors: dict[str, str]) -> None:
        now = self.clock()
        state = parts["state"]
        try:
            if self._kraft is not False or now - self._kraft_at > SLOW_EVERY_S:
                self._kraft_at = now
                try:
                    parts["quorum"] = admin.describe_quorum()
                    self._kraft = True
                except Exception as exc:
                    if type(exc).__name__ not in ("UnsupportedVersionError", "IncompatibleBrokerVersion"):
                        raise
                    self._kraft = False
            parts["kraft"] = self._kraft
        except Exception as exc:  # noqa: BLE001
            parts["kraft"] = self._kraft
            errors["quorum"] = _error(exc)
        if profile.burrow_conn_id:
            try:
                with BurrowHook.from_profile(profile, retries=0, connect_timeout_s=2.0,
                                             read_timeout_s=REQUEST_TIMEOUT_S) as burrow:
                    # the groups together within one request's time: a Burrow that does not answer costs the
                    # page REQUEST_TIMEOUT_S, not that much per group
                    parts["groups"] = tuple(burrow.group_statuses(profile.consumer_groups,
                                                                 budget_s=REQUEST_TIMEOUT_S))
            except Exception as exc:  # noqa: BLE001
                errors["burrow"] = _error(exc)
        try:
            parts["lock"] = self._lock(profile, LOCK_TOPIC in state.topics)
        except Exception as exc:  # noqa: BLE001
            errors["lock"] = _error(exc)
            if self._zk is not None:
                self._zk.close()
                self._zk = None
        lock = parts.get("lock")
        if lock is not None:
            try:
                parts["reassigning"] = tuple(admin.list_partition_reassignments())
            except Exception as exc:  # noqa: BLE001
                errors["reassignments"] = _error(exc)
            self._operation(lock, parts, errors)
        try:
            parts["past_runs"] = tuple(self.metadata.past_runs(self.cluster))
        except Exception as exc:  # noqa: BLE001
            errors["past runs"] = _error(exc)
        self._slow_parts(admin, state, parts, errors, now)

    def _lock(self, profile: ClusterProfile, topic_present: bool) -> LockInfo | None:
        """The lock's holder: the znode on a kept ZooKeeper session, or the lock topic's holder record (only read
        when the metadata lists the topic)."""
        if profile.lock_in == "zookeeper":
            if self._zk is None:
                self._zk = ZooKeeperHook(profile=profile, timeout_s=REQUEST_TIMEOUT_S)
            holder = cluster_lock.current_holder(self._zk.get_conn())
        elif not topic_present:
            return None
        else:
            with KafkaLockStore(profile) as store:
                holder = store.current_holder(wait_s=2.0)
        return None if holder is None else LockInfo(holder.holder, holder.since_ms, holder.operation)

    def _operation(self, lock: LockInfo, parts: dict[str, Any], errors: dict[str, str]) -> None:
        """The holder run's roll records, waves and maintenance window (Airflow's metadata database)."""
        if lock.dag_id is None or lock.run_id is None:
            return
        for part, read in (("rolls", lambda: self.metadata.roll_records(lock.dag_id, lock.run_id)),
                           ("waves", lambda: self.metadata.waves(lock.dag_id, lock.run_id)),
                           ("window", lambda: self.metadata.window(lock.dag_id, self.clock()))):
            try:
                parts[part] = read()
            except Exception as exc:  # noqa: BLE001
                errors[part] = _error(exc)

    def _slow_parts(self, admin: KafkaAdminHook, state: Any, parts: dict[str, Any], errors: dict[str, str],
                    now: float) -> None:
        """Bytes on disk and IBP / metadata.version per broker, and on KRaft the broker registrations (fenced ones
        too), read again every :data:`SLOW_EVERY_S` and whenever the live brokers differ from the last such read's
        (a broker that stops changes them)."""
        ids = tuple(sorted(state.broker_ids))
        if now - self._slow_at > SLOW_EVERY_S or ids != self._slow_brokers:
            self._slow_at, self._slow_brokers = now, ids
            slow: dict[str, Any] = {}
            try:
                disk: dict[int, int] = {}
                for row in admin.describe_log_dirs(ids):
                    if not row.get("error_code") and not row.get("is_future"):
                        disk[int(row["broker"])] = disk.get(int(row["broker"]), 0) + int(row.get("size_bytes") or 0)
                slow["disk_bytes"] = disk
            except Exception as exc:  # noqa: BLE001
                slow["error"] = _error(exc)
            try:
                slow["features"] = admin.broker_features(ids)  # both modes: the release each broker runs
                if self._kraft is False:
                    slow["ibp"] = {b: admin.describe_broker_configs(b, [IBP]).get(IBP) for b in ids}
            except Exception as exc:  # noqa: BLE001
                slow["error"] = _error(exc)
            if self._kraft:
                try:  # fenced registrations: a broker stopped without being unregistered is down, holding nothing
                    slow["registrations"] = tuple(admin.broker_registrations() or ())
                except Exception as exc:  # noqa: BLE001
                    slow["error"] = _error(exc)
            self._slow = slow
        for key in ("disk_bytes", "features", "ibp", "registrations"):
            if key in self._slow:
                parts[key] = self._slow[key]
        if "error" in self._slow:
            errors["brokers"] = self._slow["error"]
