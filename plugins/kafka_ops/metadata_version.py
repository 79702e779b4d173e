"""``metadata.version`` of KRaft clusters: names, feature levels, and the rules of an upgrade.

The table is Kafka's ``MetadataVersion`` enum (server-common, Kafka 4.x): each level has a release
("3.7"), an internal version ("IV4") and whether it changed the metadata format (``didMetadataChange``).
Kafka's rules for ``UpdateFeatures`` of ``metadata.version`` (KIP-778, ``kafka-features.sh``):

- a new level must be supported by every broker's and controller's binaries (their ``ApiVersions``
  SupportedFeatures range);
- a downgrade is refused unless asked for explicitly, and even then only when no level between the target
  (exclusive) and the current one (inclusive) changed the metadata format ("safe" downgrade; "unsafe" ones
  lose metadata and are not offered here at all).

Names are accepted as Kafka's tools print them: ``"3.7-IV4"``, ``"3.7"`` (= that release's latest level
``3.7-IV4``), or the bare level ``"19"``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FEATURE = "metadata.version"

#: (level, release, internal version, changed the metadata format) - Kafka's MetadataVersion, 3.3-IV3 on
#: (the oldest level Kafka 4.x accepts, MINIMUM_VERSION).
TABLE: tuple[tuple[int, str, str, bool], ...] = (
    (7, "3.3", "IV3", True), (8, "3.4", "IV0", True), (9, "3.5", "IV0", False), (10, "3.5", "IV1", False),
    (11, "3.5", "IV2", True), (12, "3.6", "IV0", False), (13, "3.6", "IV1", True), (14, "3.6", "IV2", True),
    (15, "3.7", "IV0", True), (16, "3.7", "IV1", False), (17, "3.7", "IV2", True), (18, "3.7", "IV3", False),
    (19, "3.7", "IV4", False), (20, "3.8", "IV0", False), (21, "3.9", "IV0", False), (22, "4.0", "IV0", False),
    (23, "4.0", "IV1", True), (24, "4.0", "IV2", False), (25, "4.0", "IV3", False), (26, "4.1", "IV0", False),
    (27, "4.1", "IV1", False), (28, "4.2", "IV0", False), (29, "4.2", "IV1", False), (30, "4.3", "IV0", True),
)
_BY_LEVEL = {level: (release, iv, changed) for level, release, iv, changed in TABLE}
_NAME = re.compile(r"^(\d+)\.(\d+)(?:-(IV\d+))?$")


class MetadataVersionError(ValueError):
    """A malformed or unknown metadata.version, or a bump Kafka would refuse; the message says why."""


@dataclass(frozen=True)
class MetadataVersion:
    """One level of ``metadata.version``: ``level`` (the feature level UpdateFeatures takes) and its name."""

    level: int

    @property
    def release(self) -> str:
        return _BY_LEVEL[self.level][0] if self.level in _BY_LEVEL else "?"

    @property
    def name(self) -> str:
        """``"3.7-IV4"`` (``"level 42"`` outside the table)."""
        if self.level not in _BY_LEVEL:
            return f"level {self.level}"
        release, iv, _ = _BY_LEVEL[self.level]
        return f"{release}-{iv}"

    def __str__(self) -> str:
        return f"{self.name} (level {self.level})"


def parse(text: str | int) -> MetadataVersion:
    """``"3.7-IV4"``, ``"3.7"`` (that release's latest level) or ``"19"`` -> :class:`MetadataVersion`.

    :raises MetadataVersionError: malformed, or not a level of the table (named with the known range).
    """
    value = str(text).strip()
    if value.isdigit():
        level = int(value)
        if level not in _BY_LEVEL:
            raise MetadataVersionError(f"metadata.version level {level} is unknown (known: {TABLE[0][0]}-"
                                       f"{TABLE[-1][0]}, {TABLE[0][1]}-{TABLE[0][2]} to {TABLE[-1][1]}-{TABLE[-1][2]})")
        return MetadataVersion(level)
    m = _NAME.match(value)
    if not m:
        raise MetadataVersionError(f"metadata.version {text!r} is malformed: use a release and internal version "
                                   "such as '3.7-IV4', a release such as '3.7', or a feature level such as '19'")
    release = f"{int(m.group(1))}.{int(m.group(2))}"
    levels = [lv for lv, rel, iv, _ in TABLE if rel == release and (m.group(3) is None or iv == m.group(3))]
    if not levels:
        raise MetadataVersionError(f"metadata.version {text!r} is unknown (known: {TABLE[0][1]}-{TABLE[0][2]} to "
                                   f"{TABLE[-1][1]}-{TABLE[-1][2]})")
    return MetadataVersion(max(levels))


def _release_tuple(version: str) -> tuple[int, int]:
    m = re.match(r"^(\d+)\.(\d+)(?:\.\d+)?$", str(version).strip())
    if not m:
        raise MetadataVersionError(f"Kafka release {version!r} is not major.minor[.patch] (e.g. 4.1.0)")
    return int(m.group(1)), int(m.group(2))


def _rel(release: str) -> tuple[int, int]:
    major, minor = release.split(".")
    return int(major), int(minor)


def supported_max(version: str) -> MetadataVersion | None:
    """The highest ``metadata.version`` the binaries of Kafka ``version`` (``"4.0.0"``, ``"4.1"``) support: the
    latest level of that release or of the newest release before it in :data:`TABLE` (Kafka's
    ``MetadataVersion.latestProduction()`` of that release: 4.0.x -> 4.0-IV3 = 25, 4.1.x -> 4.1-IV1 = 27). A
    release newer than the table gets the table's last level (a lower bound: kafka-ops knows no newer level);
    one older than 3.3 gets None (no KRaft level this table knows).

    :raises MetadataVersionError: ``version`` is not ``major.minor[.patch]``.
    """
    release = _release_tuple(version)
    levels = [level for level, rel, _, _ in TABLE if _rel(rel) <= release]
    return MetadataVersion(max(levels)) if levels else None


def for_release(version: str) -> MetadataVersion:
    """The ``metadata.version`` an upgrade to Kafka ``version`` finalizes by default: the latest level of that
    very release (``"4.1.0"`` -> 4.1-IV1, level 27), as ``kafka-features.sh upgrade --release-version`` does.

    :raises MetadataVersionError: malformed ``version``, or a release :data:`TABLE` has no level for (older
        than 3.3, or newer than kafka-ops knows: then name the level explicitly).
    """
    release = _release_tuple(version)
    levels = [level for level, rel, _, _ in TABLE if _rel(rel) == release]
    if not levels:
        raise MetadataVersionError(
            f"kafka-ops knows no metadata.version level of Kafka {release[0]}.{release[1]} (its table covers "
            f"{TABLE[0][1]}-{TABLE[0][2]} to {TABLE[-1][1]}-{TABLE[-1][2]}, Kafka's MetadataVersion): name the level "
            "explicitly (param metadata_version, e.g. '27')")
    return MetadataVersion(max(levels))


def safe_downgrade(current: MetadataVersion, target: MetadataVersion) -> bool:
    """True when going from ``current`` down to ``target`` loses no metadata: no level in (target, current]
    changed the metadata format (Kafka's ``MetadataVersion.checkIfMetadataChanged``)."""
    return not any(changed for level, _, _, changed in TABLE if target.level < level <= current.level)


def check_bump(current: MetadataVersion, target: MetadataVersion, supported_max: dict[int, int],
               allow_downgrade: bool = False) -> list[str]:
    """Why ``UpdateFeatures(metadata.version=target)`` must not be sent (empty: it may).

    :param supported_max: node id -> the highest ``metadata.version`` level its binaries support (from its
        ApiVersions SupportedFeatures), for every broker and controller.
    :param allow_downgrade: a lower target is accepted only with this, and only when safe.
    """
    reasons = []
    short = {n: lv for n, lv in supported_max.items() if lv < target.level}
    if short:
        reasons.append(f"{target} is above what the binaries of nodes {sorted(short)} support (up to "
                       + ", ".join(f"{n}: {MetadataVersion(lv)}" for n, lv in sorted(short.items()))
                       + "): roll the new binaries first")
    if target.level < current.level:
        if not allow_downgrade:
            reasons.append(f"{target} is below the cluster's {current}: a downgrade needs allow_downgrade")
        elif not safe_downgrade(current, target):
            changed = [MetadataVersion(lv).name for lv, _, _, ch in TABLE if target.level < lv <= current.level and ch]
            reasons.append(f"downgrading {current} to {target} would lose metadata ({', '.join(changed)} changed "
                           "its format): Kafka refuses it unless unsafe, and kafka-ops never sends unsafe ones")
    return reasons


def label(version: MetadataVersion) -> str:
    """``"4.1-IV1 (27)"``: a level as the upgrade's log lines show it."""
    return f"{version.name} ({version.level})"


def change_line(current: MetadataVersion, target: MetadataVersion) -> str:
    """``"metadata.version 4.0-IV3 (25) -> 4.1-IV1 (27)"``."""
    return f"{FEATURE} {label(current)} -> {label(target)}"


_REFUSED_NODE = re.compile(r"\b(Broker|Controller) (\d+) only supports versions (\d+)-(\d+)", re.IGNORECASE)


def short_nodes_in(answer: str) -> dict[int, tuple[str, int]]:
    """The nodes a controller's refusal names as not supporting a level: ``"Invalid update version 27 for
    feature metadata.version. Broker 0 only supports versions 7-25"`` -> ``{0: ("broker", 25)}`` (node id ->
    (role, highest level it supports)). Kafka's ``QuorumFeatures.reasonNotSupported`` wording; empty when the
    answer names none."""
    return {int(m.group(2)): (m.group(1).lower(), int(m.group(4))) for m in _REFUSED_NODE.finditer(answer or "")}


def finalized_everywhere(target: MetadataVersion, finalized: dict[int, int | None]) -> tuple[bool, str]:
    """Whether every broker reports ``target`` as the finalized ``metadata.version`` (each broker answers
    ApiVersions from its own copy of the metadata log, so it follows the controller a moment later), and the
    line to log: ``"metadata.version 4.1-IV1 (27) finalized on every broker: 0, 1, 2"`` or ``"... on brokers
    0, 1; not yet on 2 (finalized 25)"``.

    :param finalized: broker id -> the level its ApiVersions answer finalizes (None: none, or not answered).
    """
    done = sorted(b for b, level in finalized.items() if level == target.level)
    behind = sorted(b for b in finalized if b not in done)
    if finalized and not behind:
        return True, f"{FEATURE} {label(target)} finalized on every broker: {', '.join(map(str, done))}"
    late = ", ".join(f"{b} (finalized {finalized[b] if finalized[b] is not None else 'nothing / no answer'})"
                     for b in behind)
    return False, (f"{FEATURE} {label(target)} finalized on brokers {', '.join(map(str, done)) or 'none'}; "
                   f"not yet on {late or 'any broker (none answered)'}")
