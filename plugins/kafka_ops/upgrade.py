"""The upgrade's rules (Kafka's upgrade notes, ZooKeeper mode): pin ``inter.broker.protocol.version`` (IBP)
and ``log.message.format.version`` (LMF) to the running version, roll the new binaries, bump the IBP and
roll again, then the LMF (ignored from IBP 3.0 on: KIP-724) and roll a third time.

Pure: versions, the ``server.properties`` edit (comments and order kept), and one needs-action rule per
phase over the facts read from a broker host: ``{"installed": "3.6.2", "ibp": "3.6" | None, "lmf": ...}``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import javaproperties

from kafka_ops.roll import NeedsAction

PHASES = ("pin", "binaries", "ibp", "lmf")
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


def check_target(target: str, installed: Mapping[int, str]) -> list[str]:
    """Refusals before any action: unparsable target, a broker on a newer release than the target, brokers
    on more than two releases (the upgrade's own old and new). ``installed``: broker id -> release."""
    try:
        goal = parse_version(target)
    except ValueError as exc:
        return [str(exc)]
    reasons = []
    newer = sorted(b for b, v in installed.items() if parse_version(v) > goal)
    if newer:
        reasons.append(f"brokers {newer} run a release newer than the target {target} "
                       f"({', '.join(f'{b}: {installed[b]}' for b in newer)}): downgrades are not supported")
    releases = sorted(set(installed.values()), key=parse_version)
    if len(releases) > 2 or (len(releases) == 2 and target not in releases):
        reasons.append(f"brokers run {releases}: finish or undo the last upgrade first (only the old release "
                       f"and the target {target} may be mixed, as when a run is resumed)")
    return reasons


def check_phases(target: str, phases: Sequence[str], facts: Mapping[int, Mapping[str, Any]]) -> list[str]:
    """Refusals of a phase list that skips a step the brokers still need (Kafka's upgrade notes: pin, then
    binaries, then the IBP, then the LMF). ``facts``: broker id -> ``{"installed", "ibp", "lmf"}``.

    - ``binaries`` without ``pin`` while a broker has no IBP in server.properties: the new binaries would
      raise its IBP by themselves, with no way back to the old release;
    - ``ibp`` or ``lmf`` without ``binaries`` while a broker does not run the target (a broker refuses an
      IBP newer than its binaries and would not start);
    - ``lmf`` without ``ibp`` while a broker's IBP is below the target's (the LMF may not pass the IBP).
    """
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


def needs_action(phase: str, target: str, phases: Sequence[str]) -> NeedsAction:
    """The needs-action rule of ``phase`` for an upgrade to ``target``; facts as in the module docstring.

    - a phase not in ``phases``: nothing to do ("phase ibp not requested");
    - ``pin``: act when the IBP is not set in server.properties (it would follow the binaries);
    - ``binaries``: act when the installed release is not the target ("running 3.6.2, target 3.7.1");
    - ``ibp``: act when the IBP is not the target's ("IBP 3.6, target 3.7");
    - ``lmf``: nothing from a target IBP of 3.0 on (KIP-724: the broker ignores it); else act when the LMF
      is not the target's.

    :raises ValueError: unknown phase or malformed target.
    """
    if phase not in PHASES:
        raise ValueError(f"unknown upgrade phase {phase!r}; expected one of {PHASES}")
    goal = protocol_version(target)

    def rule(broker_id: int, facts: Mapping[str, Any]) -> tuple[bool, str]:
        if phase not in phases:
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


def edited_properties(phase: str, target: str, facts: Mapping[str, Any], text: str) -> str:
    """``server.properties`` after ``phase``'s edit: ``pin`` fills in what is absent with the running
    release's protocol version (IBP always, LMF only below 3.0, where it still matters), never overwriting
    a value already set; ``ibp`` / ``lmf`` set theirs to the target's; ``binaries`` edits nothing."""
    if phase == "pin":
        running = protocol_version(facts["installed"])
        present = read_properties(text)
        if IBP not in present:
            text = set_property(text, IBP, running)
        if LMF not in present and _protocol_tuple(running) < (3, 0):
            text = set_property(text, LMF, running)
        return text
    if phase == "ibp":
        return set_property(text, IBP, protocol_version(target))
    if phase == "lmf":
        return set_property(text, LMF, protocol_version(target))
    return text
