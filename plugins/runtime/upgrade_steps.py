"""The upgrade's work on a node's host over SSH (the roll's ``facts`` and ``before_start`` hooks), for brokers
and, on a KRaft cluster, controllers alike (a controller's step dict has ``"role": "controller"``; its host's
``kafka_home`` and ``server_properties`` are the profile's, ``{broker_id}`` filled with its node id):

- facts: the release the ``kafka`` symlink (profile ``kafka_home``) points at, and the IBP / LMF in
  ``server.properties`` (profile ``server_properties``), read in one SSH command;
- the ``server.properties`` edit of a phase (``kafka_ops.upgrade.edited_properties``), written by
  ``runtime.host_files.write_properties`` (backup beside it, atomic rename, read back);
- the binaries' install: the profile command named by the run's ``install_command``, or by default the
  ``kafka`` symlink switched to the already unpacked ``kafka_*-<target>`` beside it. ``{version}`` is
  filled only after the target was validated, shell-quoted.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from airflow.sdk.exceptions import AirflowFailException
from kafka_ops import upgrade
from kafka_ops.profile import ClusterProfile
from kafka_ops.roll_spec import WayBack

from runtime.host_files import node_paths, run_on_host, who, write_properties

SPLIT = "---kafka-ops-8<---"
#: The default install: point the ``kafka`` symlink at the unpacked target release (atomic rename).
DEFAULT_INSTALL = (
    'home={home}; dir=$(dirname "$home"); d=$(ls -d "$dir"/kafka_*-{version} 2>/dev/null | head -1); '
    'test -n "$d" || {{ echo "no unpacked Kafka {version} in $dir" >&2; exit 3; }}; '
    'ln -sfn "$(basename "$d")" "$home.kafka-ops-new" && mv -T "$home.kafka-ops-new" "$home"'
)


def host_state(profile: ClusterProfile, broker: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """(facts ``{"installed", "ibp", "lmf"}``, the server.properties text) of a broker's (or controller's) host."""
    home, props = node_paths(profile, int(broker["id"]))
    out = run_on_host(profile, broker,
                      f"readlink {shlex.quote(home)}; echo {shlex.quote(SPLIT)}; cat {shlex.quote(props)}",
                      "reading the installation and server.properties", read_only=True)
    link, _, text = out.partition(SPLIT + "\n")
    try:
        installed = upgrade.installed_version(link)
    except ValueError as exc:
        raise AirflowFailException(f"{who(broker)}: {exc} ({home})") from exc
    values = upgrade.read_properties(text)
    return {"installed": installed, "ibp": values.get(upgrade.IBP), "lmf": values.get(upgrade.LMF)}, text


def facts(profile: ClusterProfile, broker: Mapping[str, Any], settings: Mapping[str, Any]) -> dict[str, Any]:
    """The roll's ``facts`` hook: what the phase's needs-action rule judges."""
    return host_state(profile, broker)[0]


def symlink_way_back(home: str, link: str, installed: str) -> WayBack:
    """Point the ``kafka`` symlink ``home`` back at ``link`` (what it pointed at before the install; Kafka
    ``installed``), atomically as the install switched it."""
    new = f"{home}.kafka-ops-new"
    return WayBack(f"point {home} back at {link} (Kafka {installed}, the release it ran before this roll)",
                   f"ln -sfn {shlex.quote(link)} {shlex.quote(new)} && mv -T {shlex.quote(new)} {shlex.quote(home)}")


def properties_way_back(props: str, backup: str) -> WayBack:
    """Put server.properties ``props`` back from ``backup`` (the copy :func:`write_properties` made)."""
    return WayBack(f"restore {props} from {backup} (the file before this roll's edit)",
                   f"cp -p {shlex.quote(backup)} {shlex.quote(props)}")


def before_start(phase: str):
    """The ``before_start`` hook of ``phase`` (settings ``target_version``, ``install_command``); returns the
    node's :class:`kafka_ops.roll_spec.WayBack` (None when it changed nothing, or a named install command whose
    undoing only its owner knows)."""

    def step(profile: ClusterProfile, broker: Mapping[str, Any], settings: Mapping[str, Any], log: Any,
             dry_run: bool) -> WayBack | None:
        target = str(settings["target_version"])
        upgrade.parse_version(target)  # validated before {version} reaches a shell
        if phase == "binaries":
            choice = settings.get("install_command")
            home, _ = node_paths(profile, int(broker["id"]))
            if choice:
                found = profile.command(choice, "install", int(broker["id"]))
                command = found[0].replace("{version}", shlex.quote(target))
            else:
                command = DEFAULT_INSTALL.format(home=shlex.quote(home), version=shlex.quote(target))
            log.info("%s: installing Kafka %s: %s", who(broker), target, command)
            if dry_run:
                return None
            # the default install re-points the symlink: what it points at now is the way back
            link = None if choice else run_on_host(profile, broker, f"readlink {shlex.quote(home)}",
                                                   "reading the kafka symlink", read_only=True).strip()
            run_on_host(profile, broker, command, f"installing Kafka {target}", timeout_s=600)
            now = host_state(profile, broker)[0]["installed"]
            if now != target:
                raise AirflowFailException(f"{who(broker)}: the install ran but the host still runs {now}, "
                                           f"not {target}: the {broker.get('role') or 'broker'} is left stopped")
            return None if link is None else symlink_way_back(home, link, upgrade.installed_version(link))
        state, text = host_state(profile, broker)
        edited = upgrade.edited_properties(phase, target, state, text)
        if edited == text:
            log.info("broker %s: server.properties needs no %s edit", broker["id"], phase)
            return None
        after = upgrade.read_properties(edited)
        log.info("broker %s: server.properties %s edit: %s %s -> %s, %s %s -> %s (backup kept beside it)",
                 broker["id"], phase, upgrade.IBP, state.get("ibp"), after.get(upgrade.IBP), upgrade.LMF,
                 state.get("lmf"), after.get(upgrade.LMF))
        if dry_run:
            return None
        return properties_way_back(node_paths(profile, int(broker["id"]))[1], write_properties(profile, broker, edited))

    return step
