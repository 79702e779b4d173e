"""Usable bytes under a stopped broker's log dirs, read on its host with ``df``: what a scale-out's dry run checks a
new broker's disk against before anything starts it (a started broker answers Kafka's DescribeLogDirs instead).

``df``'s ``avail`` column is what a non-root process may still write on the filesystem, the same figure a broker
reports as a log dir's ``usableBytes`` (DescribeLogDirs v4, KIP-827: Java's ``FileStore.getUsableSpace``). A log dir
that does not exist yet is judged by the filesystem it would be created on (its nearest existing parent), as Kafka
creates it at start. Pure: the command to run and the parse of its output.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

#: Kafka's default ``log.dir`` (KafkaConfig ``log.dir``), used when a file sets neither ``log.dirs`` nor ``log.dir``.
DEFAULT_LOG_DIR = "/tmp/kafka-logs"


def log_dirs(props: dict[str, str]) -> list[str]:
    """The log dirs a broker's ``server.properties`` gives it, in order, without duplicates: ``log.dirs`` (comma
    separated) when set, else ``log.dir``, else Kafka's default ``/tmp/kafka-logs`` (KafkaConfig)."""
    raw = props.get("log.dirs", "").strip() or props.get("log.dir", "").strip() or DEFAULT_LOG_DIR
    return list(dict.fromkeys(d.strip() for d in raw.split(",") if d.strip()))


def usable_bytes_command(dirs: Sequence[str]) -> str:
    """A POSIX shell command printing ``<dir>\\t<usable bytes>`` per log dir (GNU ``df --output=avail -B1`` on the
    dir or, when it does not exist yet, its nearest existing parent). Every dir is quoted.

    :raises ValueError: no dirs, or a dir that is not an absolute path (Kafka's log dirs are).
    """
    if not dirs:
        raise ValueError("no log dir to measure")
    relative = [d for d in dirs if not d.startswith("/")]
    if relative:
        raise ValueError(f"log dirs must be absolute paths: {relative}")
    return ("set -e; for d in " + " ".join(shlex.quote(d) for d in dirs) + "; do p=\"$d\"; "
            "while [ ! -e \"$p\" ]; do p=$(dirname -- \"$p\"); done; "
            "printf '%s\\t%s\\n' \"$d\" \"$(df -B1 --output=avail -- \"$p\" | tail -n 1 | tr -d ' ')\"; done")


def parse_usable_bytes(output: str, dirs: Sequence[str]) -> dict[str, int]:
    """``{log dir: usable bytes}`` from :func:`usable_bytes_command`'s output.

    :raises ValueError: a dir missing from the output, or a figure that is not a whole number of bytes (a ``df``
        without ``--output``, e.g. BusyBox's), named with the line.
    """
    found: dict[str, int] = {}
    for line in output.splitlines():
        d, sep, figure = line.rpartition("\t")
        if not sep:
            continue
        if not figure.isdigit():
            raise ValueError(f"df gave no byte count for {d}: {line!r} (GNU df's --output=avail is needed)")
        found[d] = int(figure)
    missing = [d for d in dirs if d not in found]
    if missing:
        raise ValueError(f"df gave no figure for {missing}: {output.strip()[-300:]!r}")
    return {d: found[d] for d in dirs}
