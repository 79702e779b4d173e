"""``metadata.version`` in the KRaft-mode sandbox: what each release supports, and UpdateFeatures' rules.

Levels and releases follow Kafka's ``MetadataVersion`` enum (server-common): 3.3-IV3 is level 7, 4.0-IV3
level 25, and so on. A node supports the levels from ``MINIMUM`` (3.3-IV3 from Kafka 4.0 on, 3.0-IV1 = 1
before) up to the latest level of its release. Kafka's controller rules for ``UpdateFeatures`` (KIP-584,
KIP-778, ``QuorumFeatures`` / ``FeatureControlManager``):

- an upgrade must be supported by every registered broker and controller (else INVALID_UPDATE_VERSION,
  "... only supports versions ...");
- a lower level needs a downgrade type (``allow_downgrade`` in v0) and is refused when a level between the
  target (exclusive) and the current one (inclusive) changed the metadata format, and always when unsafe
  ("Unsafe metadata.version downgrades are not supported").
"""

from __future__ import annotations

FEATURE = "metadata.version"
#: release (major, minor) -> its latest metadata.version level
LATEST_LEVEL = {(3, 3): 7, (3, 4): 8, (3, 5): 11, (3, 6): 14, (3, 7): 19, (3, 8): 20, (3, 9): 21, (4, 0): 25,
                (4, 1): 27, (4, 2): 29, (4, 3): 30}
#: levels whose ``didMetadataChange`` is true
CHANGED_FORMAT = {7, 8, 11, 13, 14, 15, 17, 23, 30}
INVALID_UPDATE_VERSION = 95  # Kafka error code


def supported_range(kafka_version: str) -> tuple[int, int]:
    """``(min, max)`` metadata.version levels the binaries of ``kafka_version`` ("4.0.0") support."""
    major_minor = tuple(int(x) for x in kafka_version.split(".")[:2])
    known = [level for release, level in LATEST_LEVEL.items() if release <= major_minor]
    top = max(known) if known else 1
    return (7 if major_minor >= (4, 0) else 1), top


def check_update(current: int, target: int, upgrade_type: int, supported: dict[str, tuple[int, int]]) -> str | None:
    """Why the controller refuses ``metadata.version`` ``current`` -> ``target`` (None: accepted).

    ``upgrade_type``: 1 upgrade, 2 safe downgrade, 3 unsafe downgrade (UpdateFeatures v1; v0's
    ``allow_downgrade`` maps to 2). ``supported``: ``"broker 1"`` / ``"controller 100"`` -> its range.
    """
    if target < 1:
        return "metadata.version cannot be removed"
    for node, (low, high) in sorted(supported.items()):
        if not low <= target <= high:
            return (f"Invalid update version {target} for feature {FEATURE}. {node.capitalize()} only supports "
                    f"versions {low}-{high}")
    if target < current:
        if upgrade_type == 1:
            return (f"Invalid update version {target} for feature {FEATURE}. Can't downgrade the version of this "
                    "feature without setting the upgrade type to either safe or unsafe downgrade.")
        if upgrade_type == 3:
            return "Unsafe metadata.version downgrades are not supported."
        changed = sorted(level for level in CHANGED_FORMAT if target < level <= current)
        if changed:
            return (f"Invalid metadata.version {target}. Refusing to perform the requested downgrade because it "
                    f"might delete metadata information (levels {changed} changed the metadata format).")
    return None
