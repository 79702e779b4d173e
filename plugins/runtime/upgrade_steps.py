"""The upgrade's work on a node's host over SSH (the roll's ``facts`` and ``before_start`` hooks), for brokers
and, on a KRaft cluster, controllers alike (a controller's step dict has ``"role": "controller"``; its host's
``kafka_home`` and ``server_properties`` are the profile's, ``{broker_id}`` filled with its node id):

- facts: the release the ``kafka`` symlink (profile ``kafka_home``) points at, and the IBP / LMF in
  ``server.properties`` (profile ``server_properties``), read in one SSH command;
- the ``server.properties`` edit of a phase (``kafka_ops.upgrade.edited_properties``), written atomically:
  a timestamped backup (``server.properties.bak-<epoch>``) kept beside it, the new text written to a temp
  file and renamed over it;
- the binaries' install: the profile command named by the run's ``install_command``, or by default the
  ``kafka`` symlink switched to the already unpacked ``kafka_*-<target>`` beside it. ``{version}`` is
  filled only after the target was validated, shell-quoted.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from airflow.sdk.exceptions import AirflowFailException
from hooks.broker_ssh import BrokerShell, IncompleteOutput
from kafka_ops import upgrade
from kafka_ops.profile import ClusterProfile

from runtime.broker_commands import remote_command

SPLIT = "---kafka-ops-8<---"
#: The default install: point the ``kafka`` symlink at the unpacked target release (atomic rename).
DEFAULT_INSTALL = (
    'home={home}; dir=$(dirname "$home"); d=$(ls -d "$dir"/kafka_*-{version} 2>/dev/null | head -1); '
    'test -n "$d" || {{ echo "no unpacked Kafka {version} in $dir" >&2; exit 3; }}; '
    'ln -sfn "$(basename "$d")" "$home.kafka-ops-new" && mv -T "$home.kafka-ops-new" "$home"'
)


def who(node: Mapping[str, Any]) -> str:
    """``"broker 0"`` or ``"controller 100"`` (a step dict's ``role``, brokers by default)."""
    return f"{node.get('role') or 'broker'} {node['id']}"


def _paths(profile: ClusterProfile, broker_id: int) -> tuple[str, str]:
    home, props = profile.kafka_home_for(broker_id), profile.server_properties_for(broker_id)
    if not home or not props:
        raise AirflowFailException(f"connection {profile.conn_id!r}: an upgrade needs kafka_home and "
                                   "server_properties in the profile")
    return home, props


def _run(profile: ClusterProfile, broker: Mapping[str, Any], command: str, what: str, timeout_s: float = 120,
         read_only: bool = False) -> str:
    """``command`` on the node's host; its stdout. ``read_only``: complete output guaranteed
    (:meth:`hooks.broker_ssh.BrokerShell.read`), what every read that an edit is computed from needs."""
    shell = BrokerShell(profile.ssh_conn_id, str(broker["host"]))
    try:
        rc, out, err = (shell.read if read_only else shell.run)(remote_command(command, int(broker["id"])), timeout_s)
    except IncompleteOutput as exc:
        raise AirflowFailException(f"{who(broker)}: {what}: {exc}") from exc
    if rc != 0:
        raise AirflowFailException(f"{who(broker)} ({broker['host']}): {what} exited {rc}: "
                                   f"{(err.strip() or out.strip())[-500:]}")
    return out


def host_state(profile: ClusterProfile, broker: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """(facts ``{"installed", "ibp", "lmf"}``, the server.properties text) of a broker's (or controller's) host."""
    home, props = _paths(profile, int(broker["id"]))
    out = _run(profile, broker, f"readlink {shlex.quote(home)}; echo {shlex.quote(SPLIT)}; cat {shlex.quote(props)}",
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


def write_properties(profile: ClusterProfile, broker: Mapping[str, Any], text: str) -> None:
    """Replace server.properties atomically, keeping a timestamped backup beside it, then read it back.

    :raises AirflowFailException: the write failed, or the file read back is not ``text`` (the node is not
        started on it; the backup is beside it).
    """
    _, props = _paths(profile, int(broker["id"]))
    p = shlex.quote(props)
    _run(profile, broker, f'cp -p {p} {p}.bak-$(date +%s) && printf %s {shlex.quote(text)} > {p}.kafka-ops-new '
                          f'&& mv {p}.kafka-ops-new {p}', "writing server.properties")
    back = _run(profile, broker, f"cat {p}", "reading server.properties back", read_only=True)
    if back != text:
        raise AirflowFailException(f"{who(broker)}: server.properties read back differs from what was written "
                                   f"({len(back)} vs {len(text)} characters): not started on it; the previous "
                                   f"file is kept beside it as {props}.bak-<epoch>")


def before_start(phase: str):
    """The ``before_start`` hook of ``phase`` (settings ``target_version``, ``install_command``)."""

    def step(profile: ClusterProfile, broker: Mapping[str, Any], settings: Mapping[str, Any], log: Any,
             dry_run: bool) -> None:
        target = str(settings["target_version"])
        upgrade.parse_version(target)  # validated before {version} reaches a shell
        if phase == "binaries":
            choice = settings.get("install_command")
            home, _ = _paths(profile, int(broker["id"]))
            if choice:
                found = profile.command(choice, "install", int(broker["id"]))
                command = found[0].replace("{version}", shlex.quote(target))
            else:
                command = DEFAULT_INSTALL.format(home=shlex.quote(home), version=shlex.quote(target))
            log.info("%s: installing Kafka %s: %s", who(broker), target, command)
            if not dry_run:
                _run(profile, broker, command, f"installing Kafka {target}", timeout_s=600)
                now = host_state(profile, broker)[0]["installed"]
                if now != target:
                    raise AirflowFailException(f"{who(broker)}: the install ran but the host still runs {now}, "
                                               f"not {target}: the {broker.get('role') or 'broker'} is left stopped")
            return
        state, text = host_state(profile, broker)
        edited = upgrade.edited_properties(phase, target, state, text)
        if edited == text:
            log.info("broker %s: server.properties needs no %s edit", broker["id"], phase)
            return
        after = upgrade.read_properties(edited)
        log.info("broker %s: server.properties %s edit: %s %s -> %s, %s %s -> %s (backup kept beside it)",
                 broker["id"], phase, upgrade.IBP, state.get("ibp"), after.get(upgrade.IBP), upgrade.LMF,
                 state.get("lmf"), after.get(upgrade.LMF))
        if not dry_run:
            write_properties(profile, broker, edited)

    return step
