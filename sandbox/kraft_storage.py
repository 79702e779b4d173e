"""KRaft storage through Kafka's own tool: a cluster id from ``kafka-storage random-uuid`` and each node's log
dir formatted by ``kafka-storage format`` (``meta.properties``; on controllers the bootstrap checkpoint with the
release's latest production ``metadata.version``), as Kafka's operations guide has it for a new cluster.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
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


def format_storage(workdir: Workdir, node_ids: list[int], cluster_id: str, say: Callable[[str], None]) -> None:
    """Format each KRaft node's log dir with Kafka's storage tool (``kafka-storage format -t <cluster id> -c
    server.properties``: ``meta.properties``, and on controllers the bootstrap checkpoint holding the
    release's latest production ``metadata.version``), two nodes at a time.

    Raises:
        StorageError: a format failed.
    """
    def one(node_id: int) -> str:
        host = workdir.host(node_id)
        out = _storage_tool(host, "format", "-t", cluster_id, "-c", str(host.server_properties))
        return next((line for line in out.splitlines() if line.startswith("Formatting")), out.strip())

    with ThreadPoolExecutor(max_workers=2) as pool:
        lines = list(pool.map(one, node_ids))
    say(f"kafka-storage formatted nodes {node_ids} for cluster {cluster_id} ({lines[0].split(' with ')[-1]})")
