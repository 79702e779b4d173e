"""A node's host over SSH, for every operation that reads or edits it (brokers and KRaft controllers alike: a
step dict ``{"id", "host", "role"?}``): run a command (complete output for reads an edit is computed from),
where Kafka lives and its ``server.properties`` (the profile's ``kafka_home`` / ``server_properties``), and the
safe edit of that file: a timestamped backup (``server.properties.bak-<epoch>``) kept beside it, the new text
written to a temp file and renamed over it, then read back; and a new broker not started yet as its file describes
it (:func:`unstarted_broker_on_host`) and its log dirs' free space (:func:`unstarted_broker_space`).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from airflow.sdk.exceptions import AirflowFailException
from hooks.broker_ssh import BrokerShell, IncompleteOutput
from kafka_ops import free_space, properties_file
from kafka_ops.cluster import Broker
from kafka_ops.command_output import failure_text
from kafka_ops.profile import ClusterProfile
from kafka_ops.unstarted_broker import unstarted_broker

from runtime.broker_commands import remote_command


def who(node: Mapping[str, Any]) -> str:
    """``"broker 0"`` or ``"controller 100"`` (a step dict's ``role``, brokers by default)."""
    return f"{node.get('role') or 'broker'} {node['id']}"


def node_paths(profile: ClusterProfile, broker_id: int) -> tuple[str, str]:
    """``(kafka_home, server_properties)`` of node ``broker_id``'s host (the profile's, ``{broker_id}`` filled).

    :raises AirflowFailException: the profile sets either not (an operation that edits hosts needs both).
    """
    home, props = profile.kafka_home_for(broker_id), profile.server_properties_for(broker_id)
    if not home or not props:
        raise AirflowFailException(f"connection {profile.cluster!r}: editing a node's host needs kafka_home and "
                                   "server_properties in the profile")
    return home, props


def storage_format_command(profile: ClusterProfile, node_id: int, cluster_id: str, release: str | None = None) -> str:
    """Kafka's ``kafka-storage format`` of a KRaft node joining ``cluster_id`` (its log dirs from its
    ``server.properties``): ``<kafka_home>/bin/kafka-storage.sh format --cluster-id=<id> -c <server.properties>
    [-r <release>] --ignore-formatted`` (a log dir formatted already is left as it is; one formatted for another
    cluster makes the node refuse to start, naming it). ``release``: the bootstrap ``metadata.version`` a new
    controller writes; a broker takes the cluster's from the controllers and needs none. Every value quoted.

    The id goes in ``--cluster-id=<id>`` form, never as ``-t <id>``: a ZooKeeper-mode cluster's id (made by the
    first broker, Kafka's ``CoreUtils.generateUuidAsBase64``) starts with ``-`` once in 64 clusters, and the tool's
    parser reads ``-t -ogs...`` as a missing value ("argument --cluster-id/-t: expected one argument"). KRaft ids
    (``kafka-storage random-uuid``) never start with ``-``, migrated clusters keep their ZooKeeper id.

    :raises AirflowFailException: the profile sets no ``kafka_home`` / ``server_properties`` (:func:`node_paths`).
    """
    home, props = node_paths(profile, node_id)
    version = f" -r {shlex.quote(release)}" if release else ""
    return (f"{shlex.quote(f'{home}/bin/kafka-storage.sh')} format {shlex.quote(f'--cluster-id={cluster_id}')} -c "
            f"{shlex.quote(props)}{version} --ignore-formatted")


def run_on_host(profile: ClusterProfile, node: Mapping[str, Any], command: str, what: str, timeout_s: float = 120,
                read_only: bool = False) -> str:
    """``command`` on the node's host; its stdout. ``read_only``: complete output guaranteed
    (:meth:`hooks.broker_ssh.BrokerShell.read`), what every read that an edit is computed from needs.

    :raises AirflowFailException: the command exited non-zero, or a read's output was incomplete.
    """
    shell = BrokerShell(profile.ssh_conn_id, str(node["host"]))
    try:
        rc, out, err = (shell.read if read_only else shell.run)(remote_command(command, int(node["id"])), timeout_s)
    except IncompleteOutput as exc:
        raise AirflowFailException(f"{who(node)}: {what}: {exc}") from exc
    if rc != 0:
        raise AirflowFailException(f"{who(node)} ({node['host']}): {what} exited {rc}: {failure_text(err, out)}")
    return out


def write_properties(profile: ClusterProfile, node: Mapping[str, Any], text: str) -> str:
    """Replace server.properties atomically, keeping a timestamped backup beside it, then read it back; returns
    the backup's path (``<server.properties>.bak-<epoch>``; ``""`` when there was no file to back up: a new
    controller's first file).

    :raises AirflowFailException: the write failed, or the file read back is not ``text`` (the node is not
        started on it; the backup is beside it).
    """
    _, props = node_paths(profile, int(node["id"]))
    p = shlex.quote(props)
    keep = f"b={p}.bak-$(date +%s); if test -e {p}; then cp -p {p} \"$b\"; else b=; fi"
    out = run_on_host(profile, node, f"{keep} && printf %s "
                      f"{shlex.quote(text)} > {p}.kafka-ops-new && mv {p}.kafka-ops-new {p} && echo \"$b\"",
                      "writing server.properties")
    backup = (out.strip().splitlines() or [""])[-1]
    back = run_on_host(profile, node, f"cat {p}", "reading server.properties back", read_only=True)
    if back != text:
        raise AirflowFailException(f"{who(node)}: server.properties read back differs from what was written "
                                   f"({len(back)} vs {len(text)} characters): not started on it; the previous "
                                   f"file is kept beside it as {backup}")
    return backup


def unstarted_broker_on_host(profile: ClusterProfile, broker_id: int) -> Broker:
    """New broker ``broker_id``, not started yet, as its host's ``server.properties`` describes it: the host from the
    profile's ``broker_hosts``, the file from its ``server_properties`` (read over SSH, nothing changed; the rules
    are :func:`kafka_ops.unstarted_broker.unstarted_broker`'s).

    :raises AirflowFailException: the profile names no host or file for it, the read failed, or the file describes
        another broker, no id, or a controller.
    """
    host, text = _unstarted_file(profile, broker_id)
    try:
        return unstarted_broker(broker_id, host, text)
    except ValueError as exc:
        raise AirflowFailException(str(exc)) from exc


def unstarted_broker_space(profile: ClusterProfile, broker_id: int) -> dict[str, int]:
    """Usable bytes of new broker ``broker_id``'s log dirs, ``{log dir: bytes}``, measured on its host with ``df``
    (a broker not started answers no DescribeLogDirs; the dirs from its ``server.properties``, a dir not created yet
    judged by the filesystem it would be created on: :mod:`kafka_ops.free_space`). Nothing is changed.

    :raises AirflowFailException: the profile names no host or file for it, the read or ``df`` failed, or ``df``'s
        output has no byte count (GNU ``df`` is needed).
    """
    host, text = _unstarted_file(profile, broker_id)
    dirs = free_space.log_dirs(properties_file.parse(text))
    try:
        out = run_on_host(profile, {"id": broker_id, "host": host}, free_space.usable_bytes_command(dirs),
                          "measuring its log dirs' free space (df)", read_only=True)
        return free_space.parse_usable_bytes(out, dirs)
    except ValueError as exc:
        raise AirflowFailException(f"broker {broker_id} ({host}): {exc}") from exc


def _unstarted_file(profile: ClusterProfile, broker_id: int) -> tuple[str, str]:
    """``(host, server.properties text)`` of a broker not registered yet, read over SSH.

    :raises AirflowFailException: the profile names no ``broker_hosts`` entry or ``server_properties`` for it, or
        the read failed."""
    host, path = profile.broker_hosts.get(broker_id), profile.server_properties_for(broker_id)
    if not host or not path:
        raise AirflowFailException(f"broker {broker_id} is not registered, and connection {profile.cluster!r} names "
                                   f"no {'broker_hosts entry' if not host else 'server_properties'} to read it from")
    return host, run_on_host(profile, {"id": broker_id, "host": host}, f"cat {shlex.quote(path)}",
                             "reading server.properties", read_only=True)
