"""The upgrade's rules.

ZooKeeper mode (Kafka's upgrade notes): pin ``inter.broker.protocol.version`` (IBP) and
``log.message.format.version`` (LMF) to the running version, roll the new binaries, bump the IBP and roll
again, then the LMF (ignored from IBP 3.0 on: KIP-724) and roll a third time.

KRaft (Kafka's upgrade notes for KRaft clusters, KIP-584 / KIP-778): no IBP or LMF; roll the new binaries on
the controllers, then on the brokers, then finalize ``metadata.version`` (a feature level, UpdateFeatures) at
the target release's level (:mod:`kafka_ops.metadata_version`). The pin / ibp / lmf phases do nothing there
(:data:`KRAFT_SKIP`), and the metadata_version phase does nothing in ZooKeeper mode.

Pure: versions, the ``server.properties`` edit (comments and order kept), one needs-action rule per roll
phase over the facts read from a node's host: ``{"installed": "3.6.2", "ibp": "3.6" | None, "lmf": ...}``,
and the refusals made before anything is touched.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import javaproperties

from kafka_ops import metadata_version as mv
from kafka_ops.metadata_version import MetadataVersion, MetadataVersionError
from kafka_ops.migration import BRIDGE_RELEASE
from kafka_ops.roll_spec import NeedsAction

#: Every phase, in the order a run does them (the ``phases`` param's default).
PHASES = ("pin", "binaries", "ibp", "lmf", "metadata_version")
#: The phases that are rolls (one restart per node that needs it), with a needs-action rule each.
ROLL_PHASES = ("pin", "binaries", "ibp", "lmf")
#: The rolls of ZooKeeper mode only: on a KRaft cluster they plan nothing (:data:`KRAFT_SKIP`).
ZOOKEEPER_PHASES = ("pin", "ibp", "lmf")
#: Why the pin / ibp / lmf rolls plan nothing on a KRaft cluster.
KRAFT_SKIP = "KRaft: metadata.version replaces inter.broker.protocol.version"
#: Why the controllers' roll and the metadata_version step do nothing in ZooKeeper mode.
ZOOKEEPER_SKIP = ("ZooKeeper mode: no KRaft controllers and no metadata.version (the ibp / lmf phases bump "
                  "the protocol)")
IBP = "inter.broker.protocol.version"
LMF = "log.message.format.version"
_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")
_INSTALL = re.compile(r"kafka_[\d.]+-(\d+\.\d+\.\d+)$")


def parse_version(text: str) -> tuple[int, int, int]:
    """``"3.7.1"`` -> ``(3, 7, 1)``.

    :raises ValueError: not ``major.minor.patch`` digits (named).
    """
    m = _VERSION.match(str(text).strip())
    if not m:
        raise ValueError(f"version {text!r} is not major.minor.patch (e.g. 3.7.1)")
    return int(m[1]), int(m[2]), int(m[3])


def protocol_version(version: str) -> str:
    """The IBP / LMF value of a release: ``"3.7.1"`` -> ``"3.7"``."""
    major, minor, _ = parse_version(version)
    return f"{major}.{minor}"


def _protocol_tuple(value: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", value)[:2])


def installed_version(link_target: str) -> str:
    """The release a ``kafka`` symlink points at: ``"kafka_2.13-3.6.2"`` (or a path ending in it) -> ``"3.6.2"``.

    :raises ValueError: the target does not name a ``kafka_<scala>-<x.y.z>`` distribution.
    """
    m = _INSTALL.search(link_target.strip().rstrip("/"))
    if not m:
        raise ValueError(f"cannot tell the Kafka version from the installation {link_target.strip()!r}")
    return m[1]


def read_properties(text: str) -> dict[str, str]:
    """``server.properties`` text -> {key: value} (Java properties syntax, via ``javaproperties``)."""
    return dict(javaproperties.loads(text))


def set_property(text: str, key: str, value: str) -> str:
    """``server.properties`` text with ``key`` set to ``value``: the first ``key=...`` line is replaced in
    place (other lines, comments and their order untouched), or ``key=value`` is appended."""
    pattern = re.compile(rf"^\s*{re.escape(key)}\s*[=:\s]")
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if pattern.match(line) and not line.lstrip().startswith(("#", "!")):
            lines[i] = f"{key}={value}\n"
            return "".join(lines)
    tail = "" if not text or text.endswith("\n") else "\n"
    return f"{text}{tail}{key}={value}\n"


def check_target(target: str, installed: Mapping[int, str], nodes: str = "brokers") -> list[str]:
    """Refusals before any action: unparsable target, a node on a newer release than the target, nodes
    on more than two releases (the upgrade's own old and new). ``installed``: node id -> release (brokers; on
    a KRaft cluster the controllers too, with ``nodes="nodes"`` naming them in the messages)."""
    try:
        goal = parse_version(target)
    except ValueError as exc:
        return [str(exc)]
    reasons = []
    newer = sorted(b for b, v in installed.items() if parse_version(v) > goal)
    if newer:
        reasons.append(f"{nodes} {newer} run a release newer than the target {target} "
                       f"({', '.join(f'{b}: {installed[b]}' for b in newer)}): downgrades are not supported")
    releases = sorted(set(installed.values()), key=parse_version)
    if len(releases) > 2 or (len(releases) == 2 and target not in releases):
        reasons.append(f"{nodes} run {releases}: finish or undo the last upgrade first (only the old release "
                       f"and the target {target} may be mixed, as when a run is resumed)")
    return reasons


#: The first release without ZooKeeper mode (KIP-833: Kafka 4.0 runs in KRaft mode only).
KRAFT_ONLY_FROM = (4, 0, 0)


def check_zookeeper_target(target: str) -> list[str]:
    """Refusals of ``target`` for a ZooKeeper-mode cluster: from Kafka 4.0 on there is no ZooKeeper mode
    (KIP-833), so a broker started on those binaries with its ZooKeeper-mode ``server.properties`` does not start,
    and the roll would stop with its first broker down. Such a cluster upgrades to the bridge release
    (``kafka_ops.migration.BRIDGE_RELEASE``), migrates to KRaft, then upgrades. A malformed target is left to
    :func:`check_target` (no message here)."""
    try:
        goal = parse_version(target)
    except ValueError:
        return []
    if goal < KRAFT_ONLY_FROM:
        return []
    return [f"Kafka {target} has no ZooKeeper mode (KIP-833: from 4.0 on KRaft only) and this cluster runs in "
            f"ZooKeeper mode: its brokers would not start on it. Upgrade to {BRIDGE_RELEASE}.x first (kafka_upgrade), "
            f"migrate to KRaft (kafka_zk_to_kraft), then upgrade to {target}"]


def fenced_registrations(down: Sequence[int] | None, phases: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(refusals, notes)`` for the brokers a KRaft cluster has registered but not live: fenced (stopped, crashed,
    or decommissioned without UnregisterBroker). Metadata leaves them out, so the rolls do not see them, yet the
    active controller counts their registrations when asked to finalize a feature level: Kafka's
    ``FeatureControlManager`` refuses ``metadata.version`` while a registered broker's binaries do not support it,
    and these keep the release they stopped on. So with phase ``metadata_version`` they are refused up front (the
    upgrade would otherwise roll every node and fail at its last step); without it, a note.

    :param down: their ids (``kafka_ops.cluster.fenced_down`` over ``KafkaAdminHook.broker_registrations``,
        DescribeCluster v2, Kafka 4.0+); None when the cluster cannot list them (a note says so).
    """
    if down is None:
        return [], ["the brokers do not offer DescribeCluster v2 (KIP-1073, Kafka 4.0+): fenced broker registrations "
                    "cannot be listed; one would make the metadata.version step fail (the controller names it)"]
    down = sorted(down)
    if not down:
        return [], []
    what = (f"broker{'s' if len(down) > 1 else ''} {', '.join(map(str, down))} registered with the controller but "
            "fenced (stopped or crashed; Metadata leaves them out, so the upgrade would not roll them)")
    remedy = ("start them so that the upgrade rolls them too, or, if they are gone for good, unregister them "
              f"(kafka_decommission does; by hand: kafka-cluster.sh unregister --id {down[0]})")
    if "metadata_version" in phases:
        return [f"{what}: the controller refuses a metadata.version its registered brokers do not support, so the "
                f"last phase would fail after every node was rolled; {remedy}"], []
    return [], [f"{what}: they keep their binaries; a later metadata.version upgrade is refused while they are "
                f"registered: {remedy}"]


def metadata_target(target: str, requested: str | int | None) -> MetadataVersion:
    """The ``metadata.version`` a KRaft upgrade to release ``target`` finalizes: ``requested`` (the
    ``metadata_version`` param: ``"4.1-IV1"``, ``"4.1"`` = that release's latest level, or the level ``"27"``),
    or when None / empty the latest level of ``target`` itself (``"4.1.0"`` -> 4.1-IV1, level 27; Kafka's
    ``MetadataVersion``, as ``kafka-features.sh upgrade --release-version`` picks it).

    :raises MetadataVersionError: a malformed or unknown ``requested``; a ``target`` whose levels kafka-ops
        does not know (then ``requested`` must name one).
    """
    if requested is None or not str(requested).strip():
        return mv.for_release(target)
    return mv.parse(requested)


def check_metadata_version(target: str, requested: str | int | None,
                           current: MetadataVersion | None) -> tuple[MetadataVersion | None, list[str]]:
    """The KRaft upgrade's ``metadata.version`` and the refusals of it before anything is touched:
    ``(target level or None when refused for being malformed, reasons)``.

    - ``requested`` malformed or unknown (named, with the accepted forms);
    - a level above what the binaries of ``target`` support (too new: named, with the release's latest
      level; :func:`kafka_ops.metadata_version.supported_max`), which the controller would refuse once the
      binaries are rolled, i.e. after every node was restarted for nothing;
    - a level below the cluster's ``current`` finalized one: an upgrade never downgrades (Kafka allows only
      safe downgrades, KIP-778, and only when asked for: ``kafka-features.sh downgrade``, by hand).

    :param current: the cluster's finalized level (None: not read, no downgrade check).
    """
    try:
        goal = metadata_target(target, requested)
    except MetadataVersionError as exc:
        given = requested is not None and str(requested).strip()
        return None, [f"param metadata_version: {exc}" if given else str(exc)]
    reasons = []
    top = mv.supported_max(target)
    if top is None or goal.level > top.level:
        can = f"up to {top}" if top else "no metadata.version kafka-ops knows"
        reasons.append(f"metadata.version {goal} is too new for Kafka {target}: its binaries support {can}; "
                       f"choose a level up to {top.name if top else '-'} or a newer target_version")
    if current is not None and goal.level < current.level:
        reasons.append(f"metadata.version {goal} is below the cluster's finalized {current}: an upgrade does not "
                       "downgrade it (a safe downgrade is done by hand: kafka-features.sh downgrade)")
    return goal, reasons


def check_phases(target: str, phases: Sequence[str], facts: Mapping[int, Mapping[str, Any]], *,
                 kraft: bool = False, metadata_version: MetadataVersion | None = None) -> list[str]:
    """Refusals of a phase list that skips a step the nodes still need (Kafka's upgrade notes: pin, then
    binaries, then the IBP, then the LMF; on KRaft: binaries, then metadata.version). ``facts``: node id ->
    ``{"installed", "ibp", "lmf"}`` (brokers; on KRaft the controllers too).

    Either mode: phases none of which applies to it (only pin / ibp / lmf on KRaft, only metadata_version in
    ZooKeeper mode): the run would do nothing and report success.

    KRaft (``kraft``; ``metadata_version`` = the level the run finalizes):

    - ``metadata_version`` without ``binaries`` while a node's installed release does not support the level
      (every broker and controller must, KIP-584: the controller refuses the UpdateFeatures otherwise).

    ZooKeeper mode:

    - ``binaries`` without ``pin`` while a broker has no IBP in server.properties: the new binaries would
      raise its IBP by themselves, with no way back to the old release;
    - ``ibp`` or ``lmf`` without ``binaries`` while a broker does not run the target (a broker refuses an
      IBP newer than its binaries and would not start);
    - ``lmf`` without ``ibp`` while a broker's IBP is below the target's (the LMF may not pass the IBP).
    """
    mode_phases = [p for p in PHASES if (p not in ZOOKEEPER_PHASES if kraft else p != "metadata_version")]
    if phases and not set(phases) & set(mode_phases):
        why = KRAFT_SKIP if kraft else ZOOKEEPER_SKIP
        return [f"phases {list(phases)} do nothing on this {'KRaft' if kraft else 'ZooKeeper-mode'} cluster ({why}): "
                f"request some of {list(mode_phases)}"]
    if kraft:
        return _check_kraft_phases(phases, facts, metadata_version)
    goal = protocol_version(target)
    reasons = []
    unpinned = sorted(b for b, f in facts.items() if not f.get("ibp") and f.get("installed") != target)
    if "binaries" in phases and "pin" not in phases and unpinned:
        reasons.append(f"phases {list(phases)} roll the binaries of brokers {unpinned} whose {IBP} is not pinned: "
                       "the new binaries would raise it by themselves with no way back; add 'pin'")
    behind = sorted(b for b, f in facts.items() if f.get("installed") != target)
    for phase in ("ibp", "lmf"):
        if phase in phases and "binaries" not in phases and behind:
            reasons.append(f"phase {phase} needs every broker on {target}, but brokers {behind} run "
                           f"{sorted({facts[b].get('installed') for b in behind})}; add 'binaries'")
    low = sorted(b for b, f in facts.items() if f.get("ibp") and _protocol_tuple(f["ibp"]) < _protocol_tuple(goal))
    if "lmf" in phases and "ibp" not in phases and low and _protocol_tuple(goal) < (3, 0):
        reasons.append(f"phase lmf needs {IBP} {goal} first, but brokers {low} are below it; add 'ibp'")
    return reasons


def _up_to(release: str) -> str:
    """``"metadata.version up to 4.0-IV3, level 25"``: what the binaries of ``release`` support."""
    top = mv.supported_max(release)
    return f"metadata.version up to {top.name}, level {top.level}" if top else "no KRaft metadata.version"


def _level_of(release: str) -> int:
    top = mv.supported_max(release)
    return top.level if top else 0


def _check_kraft_phases(phases: Sequence[str], facts: Mapping[int, Mapping[str, Any]],
                        goal: MetadataVersion | None) -> list[str]:
    if goal is None or "metadata_version" not in phases or "binaries" in phases:
        return []
    short = sorted(n for n, f in facts.items() if _level_of(str(f.get("installed"))) < goal.level)
    if not short:
        return []
    releases = sorted({str(facts[n].get("installed")) for n in short}, key=parse_version)
    runs = ", ".join(f"{r} ({_up_to(r)})" for r in releases)
    return [f"phase metadata_version needs binaries supporting metadata.version {goal} on every node, but nodes "
            f"{short} run {runs}; add 'binaries'"]


def needs_action(phase: str) -> NeedsAction:
    """The needs-action rule of ``phase``: ``rule(node_id, facts, settings)`` with the facts of the module
    docstring and the run's settings ``target_version`` and ``phases`` (None = every phase; the param refuses []).

    - a phase not in ``phases``: nothing to do ("phase ibp not requested");
    - ``pin``: act when the IBP is not set in server.properties (it would follow the binaries);
    - ``binaries``: act when the installed release is not the target ("running 3.6.2, target 3.7.1");
    - ``ibp``: act when the IBP is not the target's ("IBP 3.6, target 3.7");
    - ``lmf``: nothing from a target IBP of 3.0 on (KIP-724: the broker ignores it); else act when the LMF
      is not the target's.

    :raises ValueError: unknown phase (``metadata_version`` included: it is a step, not a roll); the rule raises
        it for a malformed target.
    """
    if phase not in ROLL_PHASES:
        raise ValueError(f"unknown upgrade phase {phase!r}; expected one of {ROLL_PHASES}")

    def rule(broker_id: int, facts: Mapping[str, Any], settings: Mapping[str, Any]) -> tuple[bool, str]:
        target = str(settings["target_version"])
        goal = protocol_version(target)
        if phase not in (settings.get("phases") or PHASES):
            return False, f"phase {phase} not requested"
        if phase == "pin":
            if facts.get("ibp"):
                return False, f"{IBP} pinned at {facts['ibp']}"
            return True, f"{IBP} not pinned: pin it at {protocol_version(facts['installed'])}"
        if phase == "binaries":
            if facts["installed"] == target:
                return False, f"running {target} already"
            return True, f"running {facts['installed']}, target {target}"
        if phase == "ibp":
            if facts.get("ibp") == goal:
                return False, f"{IBP} is {goal} already"
            return True, f"{IBP} {facts.get('ibp')}, target {goal}"
        if _protocol_tuple(goal) >= (3, 0):
            return False, f"{LMF} is ignored from {IBP} 3.0 on (KIP-724): nothing to bump"
        if facts.get("lmf") == goal:
            return False, f"{LMF} is {goal} already"
        return True, f"{LMF} {facts.get('lmf')}, target {goal}"

    return rule


def pinned(installed: str, present: Mapping[str, Any]) -> dict[str, str]:
    """What the ``pin`` phase writes into a broker's ``server.properties``: the running release's protocol version
    (``installed`` ``"3.6.2"`` -> ``"3.6"``) for IBP when ``present`` has none, and for LMF when it has none and the
    running release is below 3.0 (where it still matters, KIP-724); never a key already set.

    :raises ValueError: a malformed ``installed`` version.
    """
    running = protocol_version(installed)
    keys = (IBP, LMF) if _protocol_tuple(running) < (3, 0) else (IBP,)
    return {key: running for key in keys if not present.get(key)}


def pending_protocol_bumps(target: str, phases: Sequence[str] | None,
                           nodes: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """What the ``ibp`` / ``lmf`` phases of a ZooKeeper-mode upgrade will bump, one entry per broker and phase
    (``"broker 0: inter.broker.protocol.version 3.6, target 3.7"``, the phase rule's own words), judged before the
    run's first phase from each broker's facts (``nodes``: ``{"<id>": {"installed", "ibp", "lmf", "role"}}``,
    ``check_upgrade``'s XCom) as the ``pin`` phase will leave them (:func:`pinned`). Empty: nothing to bump (a patch
    release of the same minor, a run again after the bump), so nothing to approve. ``phases``: None = every phase.

    :raises ValueError: a malformed ``target`` or installed version.
    """
    chosen = tuple(phases or PHASES)
    settings = {"target_version": target, "phases": chosen}
    pending = []
    for node, facts in sorted(nodes.items(), key=lambda item: int(item[0])):
        if facts.get("role", "broker") != "broker":
            continue
        after_pin = dict(facts)
        if "pin" in chosen:
            set_now = {IBP: facts.get("ibp"), LMF: facts.get("lmf")}
            added = pinned(str(facts["installed"]), set_now)
            after_pin.update({"ibp": added.get(IBP, facts.get("ibp")), "lmf": added.get(LMF, facts.get("lmf"))})
        for phase in ("ibp", "lmf"):
            act, why = needs_action(phase)(int(node), after_pin, settings)
            if act:
                pending.append(f"broker {node}: {why}")
    return pending


def edited_properties(phase: str, target: str, facts: Mapping[str, Any], text: str) -> str:
    """``server.properties`` after ``phase``'s edit: ``pin`` fills in what is absent with the running
    release's protocol version (IBP always, LMF only below 3.0, where it still matters), never overwriting
    a value already set; ``ibp`` / ``lmf`` set theirs to the target's; ``binaries`` edits nothing."""
    if phase == "pin":
        for key, value in pinned(facts["installed"], read_properties(text)).items():
            text = set_property(text, key, value)
        return text
    if phase == "ibp":
        return set_property(text, IBP, protocol_version(target))
    if phase == "lmf":
        return set_property(text, LMF, protocol_version(target))
    return text


def host_needs(target: str, phases: Sequence[str] | None, install_command: str | None,
               zookeeper_mode: bool) -> tuple[str | None, bool]:
    """What an upgrade needs from every node's host before its first stop (the preflight, ``kafka_ops.preflight``):
    ``(release, edits_properties)``: the release that must be unpacked beside ``kafka_home`` (phase ``binaries``
    with the default install, which re-points the symlink; None with a named ``install_command``, which brings it
    itself), and whether ``server.properties`` is edited (ZooKeeper mode with a ``pin`` / ``ibp`` / ``lmf`` phase).

    :raises ValueError: a malformed target (refused as bad input before any host is asked).
    """
    parse_version(target)
    phases = list(phases or PHASES)
    release = target if "binaries" in phases and not install_command else None
    return release, zookeeper_mode and any(p in phases for p in ZOOKEEPER_PHASES)
