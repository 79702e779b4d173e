"""The closing note's lines about what a run's acting steps did to the cluster, beside its plan and its rolls: the
brokers a decommission stopped (and unregistered) or a scale-out started, the broker configs a config change set
and the files it wrote, the ``metadata.version`` an upgrade finalized, the KRaft controllers a migration provisioned
or a revert deprovisioned; and where an upgrade began (its target, what each node ran). Each is read from the
step's own return value (its XCom), so a run reports only what it did itself: a resumed run's step that found the
work done says so.

Pure: ``runtime.run_report.done_lines`` pulls the values and asks each step's operator (``note_line``) for its line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kafka_ops.metadata_version import MetadataVersion, label

#: Longest line, characters (the note holds 1,000 in all: ``kafka_ops.run_outcome.NOTE_LIMIT``).
LINE_LIMIT = 300


def _ids(values: Sequence[Any] | None) -> list[int]:
    return sorted(int(v) for v in values or ())


def _cut(text: str) -> str:
    return text if len(text) <= LINE_LIMIT else text[:LINE_LIMIT - 3] + "..."


def service_line(result: Mapping[str, Any] | None, dry_run: bool) -> str | None:
    """The line about a broker service step (``operators.broker_service``: a decommission's ``stop_brokers``, a
    scale-out's ``start_new_brokers``).

    ``"brokers stopped: [3]; unregistered (KRaft): [3]"``, ``"brokers started: [4]; storage formatted: [4]"``,
    ``"brokers stopped: none; stopped already: [3]"`` (a resume), a dry run's ``"brokers (dry run: nothing ran):
    would stop [3], would unregister [3]"``; a decommission asked not to stop (``stop_brokers`` false):
    ``"brokers [3] drained, not stopped (stop_brokers is false): left as they are"``.

    :param result: the step's return value: ``{"action": "stop" | "start", "brokers": [ids asked],
        "acted": [ids stopped / started by this run], "unregistered": [ids], "formatted": [ids],
        "asked": bool}``. None or another shape (a step of an older version): None.
    :return: the line, or None when there is nothing to say (a scale-out not asked to start brokers).
    """
    if not isinstance(result, Mapping) or result.get("action") not in ("stop", "start"):
        return None
    stop = result["action"] == "stop"
    wanted, acted = _ids(result.get("brokers")), _ids(result.get("acted"))
    if not result.get("asked", True):
        return (f"brokers {wanted} drained, not stopped (stop_brokers is false): left as they are"
                if stop and wanted else None)
    extra = [("unregistered (KRaft)", "unregister", _ids(result.get("unregistered"))),
             ("storage formatted", "format the storage of", _ids(result.get("formatted")))]
    if dry_run:
        parts = [f"would {result['action']} {acted or 'none'}"]
        parts += [f"would {verb} {ids}" for _, verb, ids in extra if ids]
        text = "brokers (dry run: nothing ran): " + ", ".join(parts)
    else:
        text = f"brokers {'stopped' if stop else 'started'}: {acted or 'none'}" + "".join(
            f"; {name}: {ids}" for name, _, ids in extra if ids)
    already = [b for b in wanted if b not in acted]
    if already:
        text += f"; {'stopped' if stop else 'registered'} already: {already}"
    return _cut(text)


def _assignments(changes: Mapping[str, Any], keys: Sequence[str]) -> str:
    return ", ".join(f"{k} removed" if changes.get(k) is None else f"{k}={changes[k]}" for k in sorted(keys))


def _target(name: str) -> str:
    return "the cluster-wide default" if name == "cluster" else f"broker {name}"


def config_line(result: Mapping[str, Any] | None, dry_run: bool) -> str | None:
    """The line about a config change's ``apply_config`` step (``operators.config_change.ConfigApplyOperator``).

    ``"config: changed live at the cluster-wide default: log.retention.ms=3600000; server.properties written on brokers
    [0, 1, 2] (each previous file kept beside it)"``; a value set to null reads ``"<key> removed"``; nothing to do:
    ``"config: nothing changed (every broker in scope has the values already)"``; a dry run begins ``"config (dry
    run: nothing changed): would change live ..."``.

    :param result: the step's return value: ``{"changes": {key: value or None}, "altered": {"cluster" | "<id>":
        [keys]}, "files": {"<id>": backup path}, "formatted": [ids]}``, a dry run's ``"would_alter"`` /
        ``"would_write"`` / ``"would_format"`` (ids) in place of ``"altered"`` / ``"files"`` / ``"formatted"``
        (``"; formatted the new log directories of brokers [3]"``). None or another shape: None.
    """
    if not isinstance(result, Mapping) or "changes" not in result:
        return None
    changes = result.get("changes") or {}
    altered = result.get("would_alter" if dry_run else "altered") or {}
    written = _ids(result.get("would_write") if dry_run else list(result.get("files") or {}))
    live_verb, file_verb = ("would change live", "would write server.properties on brokers") if dry_run else (
        "changed live", "server.properties written on brokers")
    parts = [f"{live_verb} at {_target(str(name))}: {_assignments(changes, keys)}"
             for name, keys in sorted(altered.items(), key=lambda item: (item[0] != "cluster", str(item[0])))
             if keys]
    if written:
        parts.append(f"{file_verb} {written}" + ("" if dry_run else " (each previous file kept beside it)"))
    formatted = _ids(result.get("would_format" if dry_run else "formatted") or [])
    if formatted:
        parts.append(f"{'would format' if dry_run else 'formatted'} the new log directories of brokers {formatted}")
    head = "config (dry run: nothing changed)" if dry_run else "config"
    if not parts:
        return f"{head}: nothing {'would change' if dry_run else 'changed'} (every broker in scope has the values " \
               "already)"
    return _cut(f"{head}: " + "; ".join(parts))


def _level(level: Any) -> str:
    """``"4.1-IV1 (27)"`` for a known metadata.version level, the level as it is otherwise."""
    try:
        return label(MetadataVersion(int(level)))
    except (TypeError, ValueError):
        return str(level)


def metadata_version_line(result: Mapping[str, Any] | None, dry_run: bool) -> str | None:
    """The line about a KRaft upgrade's ``metadata.version`` step (``operators.metadata_version``).

    ``"metadata.version 4.0-IV3 (25) -> 4.1-IV1 (27) finalized (UpdateFeatures); group.version 0 -> 1"``,
    ``"metadata.version 4.1-IV1 (27) already (nothing sent)"``, a dry run's ``"metadata.version (dry run: nothing
    sent): would finalize 4.0-IV3 (25) -> 4.1-IV1 (27)"``: the feature levels Kafka finalizes (KIP-584, as
    ``kafka-features.sh describe`` shows them) with their release names.

    :param result: the step's return value: ``{"action": "bumped" | "already" | "dry run" | "skipped", "from": int,
        "to": int, "features": {feature: [from, to]}}``. None, ``"skipped"`` (ZooKeeper mode, or the phase not
        asked) or another shape: None.
    """
    if not isinstance(result, Mapping) or result.get("action") not in ("bumped", "already", "dry run"):
        return None
    before, after = _level(result.get("from")), _level(result.get("to"))
    features = "".join(f"; {f} {old} -> {new}" for f, (old, new) in sorted((result.get("features") or {}).items()))
    if result["action"] == "already":
        return _cut(f"metadata.version {after} already (nothing sent)")
    if result["action"] == "dry run" or dry_run:
        return _cut(f"metadata.version (dry run: nothing sent): would finalize {before} -> {after}{features}")
    moved = f"{before} -> {after} finalized" if before != after else f"{after} kept"
    return _cut(f"metadata.version {moved} (UpdateFeatures){features}")


def controllers_line(result: Mapping[str, Any] | None, dry_run: bool) -> str | None:
    """The line about the ZooKeeper-to-KRaft migration's controller steps (``operators.migration``): the KRaft
    controllers phase 1 provisioned (``server.properties`` written, storage formatted, started) or a revert
    deprovisioned (stopped, metadata log removed, ``server.properties`` moved aside).

    ``"KRaft controllers provisioned and started: [100, 101, 102]"``, ``"KRaft controllers provisioned: none (every
    controller answered already)"`` (a resume), ``"KRaft controllers stopped and deprovisioned: [100, 101, 102]"``,
    a dry run's ``"KRaft controllers (dry run: nothing ran): would provision and start [100, 101, 102]"``.

    :param result: the step's return value: ``{"provisioned": {"<id>": what was done}}`` or ``{"deprovisioned":
        {...}}``. None or another shape: None.
    """
    if not isinstance(result, Mapping):
        return None
    for key, verb, dry_verb, none in (
            ("provisioned", "provisioned and started", "provision and start", "every controller answered already"),
            ("deprovisioned", "stopped and deprovisioned", "stop and deprovision", "no controller in the connection")):
        if key in result:
            ids = _ids(result.get(key) or {})
            if dry_run:
                return _cut(f"KRaft controllers (dry run: nothing ran): would {dry_verb} {ids or 'none'}")
            return _cut(f"KRaft controllers {verb}: {ids}" if ids else f"KRaft controllers {key}: none ({none})")
    return None


def upgrade_start_line(result: Mapping[str, Any] | None, dry_run: bool) -> str | None:
    """The line about where an upgrade began (``operators.upgrade_checks``, ``check_upgrade``): the target and what
    each node ran when the run checked it, so that the rolls' lines below it ("roll 'binaries': restarted [0, 1,
    2]") read as from-to. ``"upgrade to Kafka 3.7.1; found: 3.6.2 on brokers [0, 1, 2] (inter.broker.protocol.version
    3.6)"``, a KRaft cluster's ``"...; found: 4.0.0 on brokers [0, 1, 2], 4.0.0 on controllers [100, 101, 102];
    metadata.version 4.0-IV3 (25) -> 4.1-IV1 (27) asked"``.

    :param result: the step's return value: ``{"target": release, "nodes": {"<id>": {"installed": release | None,
        "ibp": str | None, "role": "controller" (controllers only)}}, "metadata_version": {"current": level,
        "target": level} | None}``. None, or without ``target`` (an older step): None.
    """
    if not isinstance(result, Mapping) or not result.get("target"):
        return None
    groups: dict[tuple[str, str], list[int]] = {}
    ibps: set[str] = set()
    for node, facts in (result.get("nodes") or {}).items():
        role = "controllers" if facts.get("role") == "controller" else "brokers"
        groups.setdefault((str(facts.get("installed") or "an unknown release"), role), []).append(int(node))
        if role == "brokers" and facts.get("ibp"):
            ibps.add(str(facts["ibp"]))
    found = ", ".join(f"{release} on {role} {sorted(ids)}" for (release, role), ids in
                      sorted(groups.items(), key=lambda item: (item[0][1], item[0][0])))
    text = f"upgrade to Kafka {result['target']}" + (" (dry run: nothing changed)" if dry_run else "")
    text += f"; found: {found or 'no node'}"
    if ibps:
        text += f" (inter.broker.protocol.version {', '.join(sorted(ibps))})"
    mv = result.get("metadata_version")
    if isinstance(mv, Mapping) and mv.get("current") is not None and mv.get("target") is not None:
        text += f"; metadata.version {_level(mv['current'])}" + (
            f" -> {_level(mv['target'])} asked" if mv["current"] != mv["target"] else " (the target's already)")
    return _cut(text)
