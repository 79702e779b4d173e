"""KRaft storage through Kafka's own tool: a cluster id from ``kafka-storage random-uuid`` and each node's log
dir formatted by ``kafka-storage format`` (``meta.properties``; on controllers the bootstrap checkpoint with the
release's latest production ``metadata.version``), as Kafka's operations guide has it for a new cluster.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor

from sandbox import hosts, procs
from sandbox.layout import Workdir

STORAGE_TOOL_TIMEOUT_S = 120.0  # one `kafka-storage` run (random-uuid, format)


class StorageError(procs.Abort):
    """``kafka-storage`` failed; the message carries its output."""


def _storage_tool(host: hosts.HostDir, *args: str, timeout_s: float = STORAGE_TOOL_TIMEOUT_S) -> str:
    """Run the host's own ``kafka/bin/kafka-storage.sh ARGS``; returns its standard output.

    Raises:
        StorageError: it failed (its output in the message).
    """
    tool = host.kafka_link / "bin" / "kafka-storage.sh"
    result = subprocess.run([str(tool), *args], capture_output=True, text=True, timeout=timeout_s,
                            env={**os.environ, "KAFKA_HEAP_OPTS": "-Xmx128m"})
    if result.returncode != 0:
        raise StorageError(f"{tool} {' '.join(args)} failed (exit {result.returncode}): "
                           f"{(result.stderr or result.stdout).strip()[-800:]}")
    return result.stdout


def random_cluster_id(host: hosts.HostDir) -> str:
    """A new cluster id (22 characters, a base64 UUID) from ``kafka-storage random-uuid`` of ``host``'s release.

    Raises:
        StorageError: the tool failed.
    """
    return _storage_tool(host, "random-uuid").strip().splitlines()[-1]


def format_args(node_id: int, initial_controllers: str | None, voter_ids: Collection[int]) -> list[str]:
    """The quorum arguments of ``kafka-storage format`` for node ``node_id``: none for a static quorum
    (``initial_controllers`` None: the voters are in ``controller.quorum.voters``); for a dynamic quorum (KIP-853)
    ``--initial-controllers <text>`` on the first voters (``voter_ids``: their metadata log gets the voter set) and
    ``--no-initial-controllers`` on every other node, as Kafka's operations guide formats brokers and controllers
    that join later."""
    if initial_controllers is None:
        return []
    if node_id in voter_ids:
        return ["--initial-controllers", initial_controllers]
    return ["--no-initial-controllers"]


def format_node(host: hosts.HostDir, cluster_id: str, extra: list[str]) -> str:
    """Format ``host``'s (empty) log dir for cluster ``cluster_id`` with ``kafka-storage format`` and ``extra``
    arguments (:func:`format_args`); returns the directory id it wrote (``meta.properties``' ``directory.id``).

    Raises:
        StorageError: the format failed, or wrote no directory id.
    """
    _storage_tool(host, "format", f"--cluster-id={cluster_id}", "-c", str(host.server_properties), *extra)
    for line in (host.data / "meta.properties").read_text().splitlines():
        if line.startswith("directory.id="):
            return line.split("=", 1)[1].strip()
    raise StorageError(f"kafka-storage format wrote no directory.id in {host.data / 'meta.properties'}")


def format_storage(workdir: Workdir, node_ids: list[int], cluster_id: str, say: Callable[[str], None],
                   initial_controllers: str | None = None, voter_ids: Collection[int] = ()) -> None:
    """Format each KRaft node's log dir with Kafka's storage tool (``kafka-storage format -t <cluster id> -c
    server.properties``: ``meta.properties``, and on controllers the bootstrap checkpoint holding the
    release's latest production ``metadata.version``), two nodes at a time. A dynamic quorum
    (``initial_controllers`` set, ``voter_ids`` its voters) adds :func:`format_args`.

    Raises:
        StorageError: a format failed.
    """
    def one(node_id: int) -> str:
        host = workdir.host(node_id)
        out = _storage_tool(host, "format", f"--cluster-id={cluster_id}", "-c", str(host.server_properties),
                            *format_args(node_id, initial_controllers, voter_ids))
        return next((line for line in out.splitlines() if line.startswith("Formatting")), out.strip())

    with ThreadPoolExecutor(max_workers=2) as pool:
        lines = list(pool.map(one, node_ids))
    say(f"kafka-storage formatted nodes {node_ids} for cluster {cluster_id} ({lines[0].split(' with ')[-1]})")
