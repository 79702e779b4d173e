"""A config change of a broker's log directories: what Kafka does with a changed list at the broker's next start, what
a change must refuse, and what it must do before that start.

Kafka reads its log directories from ``log.dirs`` if set, else ``log.dir`` (default ``/tmp/kafka-logs``): a comma
list, read at start-up only (``KafkaConfig.logDirs``; both read-only). At the next start:

- a directory left out of the list is not read any more: the replicas in it are gone from the broker (Kafka moves a
  replica between a broker's directories only when asked, AlterReplicaLogDirs, KIP-113): the broker fetches them
  again from scratch where it is still assigned them, and a partition whose only in-sync copy was there goes
  offline. A change that drops a directory holding replicas (DescribeLogDirs) is refused; an empty one may go;
- ZooKeeper mode: a new directory is created and used (JBOD);
- KRaft: every directory must hold a ``meta.properties`` of the cluster, else the broker exits at start ("No
  `meta.properties` found in <dir> (have you run `kafka-storage.sh` to format the directory?)", seen on Kafka 4.1):
  a new one is formatted first, as Kafka's JBOD guide says (KIP-858), with ``kafka-storage format
  --ignore-formatted`` (the formatted ones are left as they are; ``runtime.host_files.storage_format_command``);
- KRaft: the metadata log (``__cluster_metadata``) lives in ``metadata.log.dir``, else in the first log directory: a
  change that moves it (another first directory, or another ``metadata.log.dir``) is refused; the node would start
  without its metadata log.
"""

from __future__ import annotations

import posixpath
from collections.abc import Collection, Mapping
from dataclasses import dataclass

#: Kafka's default of ``log.dir`` (``ServerLogConfigs.LOG_DIR_DEFAULT``).
DEFAULT_LOG_DIR = "/tmp/kafka-logs"
LOG_DIRS = "log.dirs"
LOG_DIR = "log.dir"
METADATA_LOG_DIR = "metadata.log.dir"
#: The keys whose change changes where a broker keeps its data.
KEYS = frozenset({LOG_DIRS, LOG_DIR, METADATA_LOG_DIR})


def split(value: str | None) -> list[str]:
    """``"/a, /b/"`` -> ``["/a", "/b"]``: a comma list of directories, each normalised (``posixpath.normpath``: a
    trailing slash or ``a/./b`` name the same directory Kafka opens), empty entries dropped, order kept."""
    return [posixpath.normpath(p.strip()) for p in (value or "").split(",") if p.strip()]


def effective(values: Mapping[str, str | None]) -> list[str]:
    """The directories a broker uses with ``values`` (``{key: value or None}``): ``log.dirs`` if set, else
    ``log.dir``, else Kafka's default."""
    return split(values.get(LOG_DIRS)) or split(values.get(LOG_DIR)) or [DEFAULT_LOG_DIR]


def metadata_dir(values: Mapping[str, str | None]) -> str:
    """Where a KRaft node keeps its metadata log: ``metadata.log.dir``, else the first log directory."""
    named = split(values.get(METADATA_LOG_DIR))
    return named[0] if named else effective(values)[0]


@dataclass(frozen=True)
class LogDirChange:
    """A broker's log directories before and after a change (each list as :func:`effective` gives it)."""

    broker_id: int
    before: tuple[str, ...]
    after: tuple[str, ...]
    metadata_before: str
    metadata_after: str

    @property
    def added(self) -> list[str]:
        return [d for d in self.after if d not in self.before]

    @property
    def dropped(self) -> list[str]:
        return [d for d in self.before if d not in self.after]

    def moves_data(self, kraft: bool) -> bool:
        """Whether the change moves where the broker keeps data: another list of directories, or (KRaft) another
        place of the metadata log. A change that only restates the list (``"/d1/"`` for ``/d1``) does not."""
        return self.before != self.after or (kraft and self.metadata_before != self.metadata_after)


def change(broker_id: int, current: Mapping[str, str | None],
           changes: Mapping[str, str | None]) -> LogDirChange | None:
    """The change to broker ``broker_id``'s log directories, or None when ``changes`` touches none of :data:`KEYS`.

    :param current: the broker's values of :data:`KEYS` now (None = unset), as DescribeConfigs reports them.
    :param changes: ``{key: new value}``, None = delete.
    """
    if not KEYS & set(changes):
        return None
    after = {**current, **{k: v for k, v in changes.items() if k in KEYS}}
    return LogDirChange(broker_id, tuple(effective(current)), tuple(effective(after)), metadata_dir(current),
                        metadata_dir(after))


def refusals(moved: LogDirChange, kraft: bool, replicas_in: Mapping[str, int]) -> list[str]:
    """What is wrong with ``moved`` (see the module docstring); empty = it may go ahead.

    :param kraft: the cluster runs in KRaft mode (the metadata log's place matters).
    :param replicas_in: the broker's directory (normalised) -> replicas in it (DescribeLogDirs); a directory
        missing from it counts as holding none.
    """
    who = f"broker {moved.broker_id}"
    out = []
    for gone in moved.dropped:
        held = replicas_in.get(gone, 0)
        if held:
            out.append(f"{who}: the log directory {gone} would be dropped while it holds {held} replicas: Kafka does "
                       "not move them, they would be gone from the broker at its restart (fetched again from "
                       "scratch, offline where it held the only in-sync copy): move them to its other directories "
                       'first (kafka-reassign-partitions with "log_dirs", KIP-113), then drop it')
    if kraft and moved.metadata_before != moved.metadata_after:
        out.append(f"{who}: the change moves the KRaft metadata log from {moved.metadata_before} to "
                   f"{moved.metadata_after} ({METADATA_LOG_DIR}, else the first of {LOG_DIRS}): the node would start "
                   f"without it; keep {moved.metadata_before} first, or set {METADATA_LOG_DIR}={moved.metadata_before}")
    return out


def replicas_by_dir(rows: list[Mapping[str, object]], broker_id: int,
                    exclude_topics: Collection[str] = ()) -> dict[str, int]:
    """``{directory: replicas}`` of one broker from ``hooks.kafka_admin.KafkaAdminHook.describe_log_dirs`` rows. A
    directory reporting an error (an offline disk: its replicas are offline already, and dropping it is how a
    failed disk leaves the list) and an empty one are not in it; nor are the replicas of ``exclude_topics`` (the
    run's own lock topic, ``hooks.kafka_lock.LOCK_TOPIC``: RF 3 with min ISR 2, it outlives a replica lost)."""
    out: dict[str, int] = {}
    for row in rows:
        if row.get("broker") != broker_id or not row.get("log_dir") or row.get("error_code") \
                or row.get("topic") in exclude_topics:
            continue
        d = posixpath.normpath(str(row["log_dir"]))
        out[d] = out.get(d, 0) + 1
    return out
