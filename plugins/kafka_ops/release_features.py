"""The feature levels a KRaft upgrade finalizes beside ``metadata.version``: the release's defaults.

Kafka's upgrade notes end a KRaft upgrade with ``kafka-features.sh upgrade --release-version X``, which sets
every production feature to its default level for metadata.version X in one UpdateFeatures request (KIP-584;
``FeatureCommand``, each feature's ``defaultValue(metadataVersion)``). Finalizing ``metadata.version`` alone leaves
the features a new release brings off: the new consumer group protocol (``group.version``, KIP-848), the
transaction protocol's second version (``transaction.version``, KIP-890), eligible leader replicas
(``eligible.leader.replicas.version``, KIP-966).

:data:`DEFAULTS` is what ``kafka-features.sh version-mapping --release-version <level>`` prints with the binaries
of Kafka 4.0.0 and 4.1.0, for every level from 3.3-IV3 to 4.1-IV1 (:data:`KNOWN_THROUGH`). ``share.version``
and ``streams.version`` stay 0 through 4.1-IV1, so they are not listed.

``kraft.version`` (KIP-853, default 1 from 3.9-IV0) is left alone: raising it turns a static quorum
(``controller.quorum.voters``) into a dynamic one, a change of the quorum an operator makes on purpose
(``kafka-features.sh upgrade --feature kraft.version=1``), not a side effect of an upgrade.

Pure: levels in, the update and its refusals out. A feature a cluster has not finalized counts as level 0 (Kafka
leaves features at level 0 out of ApiVersions' FinalizedFeatures). Features are only ever raised, never lowered.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_ops.metadata_version import FEATURE, MetadataVersion

#: feature -> ((level, the lowest metadata.version level whose default it is), ...), ascending: Kafka's
#: ``FeatureVersion.bootstrapMetadataVersion`` of each level, as ``version-mapping`` shows it.
DEFAULTS: dict[str, tuple[tuple[int, int], ...]] = {
    "group.version": ((1, 22),),  # 4.0-IV0: the consumer group protocol of KIP-848
    "transaction.version": ((2, 24),),  # 4.0-IV2: KIP-890's transaction protocol
    "eligible.leader.replicas.version": ((1, 26),),  # 4.1-IV0: ELR, KIP-966
}
#: The highest metadata.version level :data:`DEFAULTS` was checked against (4.1-IV1).
KNOWN_THROUGH = 27
#: Features an upgrade never changes, and why.
LEFT_ALONE = {
    "kraft.version": "raising it makes a static quorum dynamic (KIP-853): kafka-features.sh upgrade --feature "
                     "kraft.version=1, by hand, when the quorum is meant to change",
}


def defaults_for(level: int) -> dict[str, int]:
    """The default level of each feature of :data:`DEFAULTS` at metadata.version ``level`` (``27`` ->
    ``{"group.version": 1, "transaction.version": 2, "eligible.leader.replicas.version": 1}``; ``21`` -> all 0).
    Above :data:`KNOWN_THROUGH` it gives the defaults of that level (a lower bound: a newer release may raise
    more)."""
    return {feature: max((lv for lv, since in steps if since <= level), default=0)
            for feature, steps in DEFAULTS.items()}


@dataclass(frozen=True)
class FeaturePlan:
    """What an upgrade to one metadata.version does to the other features.

    ``raise_to``: feature -> the level to finalize (only features below their default);
    ``unchanged``: feature -> its finalized level, already at or above the default (never lowered);
    ``refusals``: features a broker's running binaries do not support at the level (named with what each
    supports): the controller would refuse the whole request;
    ``unknown``: a line when the metadata.version is newer than :data:`KNOWN_THROUGH` (None otherwise);
    ``current``: feature -> its finalized level (0 when absent), for the features of :data:`DEFAULTS`.
    """

    raise_to: dict[str, int] = field(default_factory=dict)
    unchanged: dict[str, int] = field(default_factory=dict)
    refusals: list[str] = field(default_factory=list)
    unknown: str | None = None
    current: dict[str, int] = field(default_factory=dict)

    def changes(self) -> dict[str, list[int]]:
        """feature -> ``[from, to]`` for each raise: ``{"eligible.leader.replicas.version": [0, 1]}``."""
        return {f: [self.current.get(f, 0), lv] for f, lv in sorted(self.raise_to.items())}


def plan(goal: MetadataVersion, finalized: Mapping[str, int],
         supported: Mapping[int, Mapping[str, tuple[int, int]]]) -> FeaturePlan:
    """The feature levels to finalize with metadata.version ``goal`` (the defaults of ``goal``'s level), beside
    the ones left as they are.

    :param finalized: feature -> the level the cluster finalized (absent = 0), from a broker's ApiVersions.
    :param supported: broker id -> feature -> (min, max) its running binaries support (ApiVersions
        SupportedFeatures); a broker that does not list a feature supports only level 0 of it.
    """
    raise_to: dict[str, int] = {}
    unchanged: dict[str, int] = {}
    refusals: list[str] = []
    for feature, default in sorted(defaults_for(goal.level).items()):
        current = int(finalized.get(feature, 0) or 0)
        if default <= current:
            if current:
                unchanged[feature] = current
            continue
        short = {b: spans.get(feature) for b, spans in supported.items()
                 if (spans.get(feature) or (0, 0))[1] < default}
        if short:
            refusals.append(f"{feature} {default} (the default of {goal.name}) is above what the binaries of brokers "
                            f"{sorted(short)} support ("
                            + ", ".join(f"{b}: {'up to ' + str(s[1]) if s else 'not at all'}"
                                        for b, s in sorted(short.items())) + ")")
        raise_to[feature] = default
    unknown = None
    if goal.level > KNOWN_THROUGH:
        known = MetadataVersion(KNOWN_THROUGH)
        unknown = (f"kafka-ops knows the features' default levels up to {known.name} ({KNOWN_THROUGH}); {goal.name} "
                   f"may raise more: compare with kafka-features.sh version-mapping --release-version {goal.name}")
    current = {f: int(finalized.get(f, 0) or 0) for f in DEFAULTS}
    return FeaturePlan(raise_to, unchanged, refusals, unknown, current)


def change_lines(changes: Mapping[str, list[int]]) -> list[str]:
    """``["eligible.leader.replicas.version 0 -> 1"]``: :meth:`FeaturePlan.changes` as log and approval lines."""
    return [f"{f} {old} -> {new}" for f, (old, new) in sorted(changes.items())]


def cluster_levels(features: Mapping[int, Mapping[str, Any]]) -> dict[str, int]:
    """feature -> the highest level any broker reports finalized (the cluster's: a broker applies an update from
    its own copy of the metadata log a moment after the controller), ``metadata.version`` left out.

    :param features: broker id -> ``{"features": {feature: level}, ...}`` (as
        ``hooks.kafka_admin.KafkaAdminHook.broker_features`` returns them).
    """
    top: dict[str, int] = {}
    for found in features.values():
        for feature, level in (found.get("features") or {}).items():
            if feature != FEATURE:
                top[feature] = max(top.get(feature, 0), int(level))
    return top


def finalized_everywhere(levels: Mapping[str, int], finalized: Mapping[int, Mapping[str, int]]) -> tuple[bool, str]:
    """Whether every broker reports each feature of ``levels`` finalized at (at least) its level, and the line
    to log: ``"group.version 1, eligible.leader.replicas.version 1 finalized on every broker: 0, 1, 2"`` or
    ``"... not yet on 2 (eligible.leader.replicas.version 0)"``.

    :param finalized: broker id -> feature -> its finalized level (absent = 0).
    """
    what = ", ".join(f"{f} {lv}" for f, lv in sorted(levels.items()))
    behind = {b: {f: int(found.get(f, 0) or 0) for f, lv in levels.items() if int(found.get(f, 0) or 0) < lv}
              for b, found in finalized.items()}
    behind = {b: late for b, late in behind.items() if late}
    if finalized and not behind:
        return True, f"{what} finalized on every broker: {', '.join(map(str, sorted(finalized)))}"
    late = "; ".join(f"{b} ({', '.join(f'{f} {lv}' for f, lv in sorted(fs.items()))})"
                     for b, fs in sorted(behind.items()))
    return False, f"{what}: not yet finalized on {late or 'any broker (none answered)'}"

