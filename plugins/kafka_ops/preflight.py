"""Preflight: what a run needs from every host it will touch, checked before the first stop, all problems reported
together per host (a run that stops broker 2 and only then finds its host lacking leaves it down).

What a host must offer (:class:`HostNeeds`):

- the programs of the commands the run will send there (``service_stop`` / ``service_start`` / ``service_status``,
  the profile commands a run chose): each command's program found on the host's ``PATH`` (``command -v``), as the
  SSH command will run it (``bash -c``);
- for an upgrade's binaries with the default install: the target release unpacked beside ``kafka_home``
  (``kafka_*-<version>``) and complete: its ``libs/`` holds jars and its launcher ``bin/kafka-server-start.sh``
  is executable; ``kafka_home`` itself a symbolic link (the install re-points it);
- where the run edits ``server.properties`` (an upgrade's IBP / LMF phases): the file readable and writable and its
  directory writable (the edit keeps a backup beside it and renames a new file over it);
- where a reassignment copies data onto a broker: usable bytes on its log dirs (DescribeLogDirs v4, KIP-827) for the
  bytes the plan sends it, with a margin (:func:`disk_problems`).

Reaching the host at all (SSH, with a known host key) is the first check; the probe below runs in one SSH command
per host and prints one line per check (``check<TAB>ok`` or ``check<TAB>problem``), which :func:`problems` reads.

Pure: no Airflow, no I/O.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: The launcher a Kafka release starts with (Kafka's distribution and the sandbox's assembled releases).
LAUNCHER = "bin/kafka-server-start.sh"


@dataclass(frozen=True)
class HostNeeds:
    """What a run needs from one node's host.

    :param node: the node, as logs name it (``"broker 0"``, ``"controller 100"``).
    :param host: its host name or address.
    :param commands: shell commands the run will send there (``{broker_id}`` already filled).
    :param release: a Kafka release (``"3.7.1"``) that must be unpacked and complete beside ``kafka_home``, or None.
    :param kafka_home: the node's ``kafka_home`` (the profile's), needed with ``release``.
    :param properties: a ``server.properties`` path the run edits, or None.
    """

    node: str
    host: str
    commands: tuple[str, ...] = ()
    release: str | None = None
    kafka_home: str | None = None
    properties: str | None = None


def program(command: str) -> str | None:
    """The program a shell command runs first: its first word after ``VAR=value`` assignments
    (``"KAFKA_HEAP_OPTS=-Xmx1g systemctl start kafka"`` -> ``"systemctl"``; ``"sudo -u kafka systemctl ..."`` ->
    ``"sudo"``: what a wrapper runs depends on its options, so only the wrapper is checked). None for text that is
    not a plain command (unbalanced quotes, a word built at run time such as ``$KAFKA/bin/x``): the run's own command
    then reports its failure."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        return None
    words = [w for w in words if not _ASSIGNMENT.match(w)] if words and _ASSIGNMENT.match(words[0]) else words
    if not words or any(c in words[0] for c in "$`(){};|&<>"):
        return None
    return words[0]


_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def probe_script(needs: HostNeeds) -> str:
    """The shell text run on the host (one SSH command): one line ``<check>\\t<ok | problem>`` per check."""
    lines = ["ok() { printf '%s\\tok\\n' \"$1\"; }", "no() { printf '%s\\t%s\\n' \"$1\" \"$2\"; }"]
    for name in dict.fromkeys(p for p in map(program, needs.commands) if p):
        q = shlex.quote(name)
        lines.append(f"if command -v {q} >/dev/null 2>&1; then ok program:{q}; "
                     f"else no program:{q} 'not found on the PATH of the SSH user'; fi")
    if needs.release is not None:
        home, version = shlex.quote(needs.kafka_home or ""), shlex.quote(needs.release)
        lines.append(
            f'home={home}; dir=$(dirname "$home"); d=$(ls -d "$dir"/kafka_*-{version} 2>/dev/null | head -1); '
            f'if [ -z "$d" ]; then no release "no unpacked Kafka {needs.release} in $dir"; '
            f'elif ! ls "$d"/libs/*.jar >/dev/null 2>&1; then no release "$d/libs holds no jar"; '
            f'elif [ ! -x "$d/{LAUNCHER}" ]; then no release "$d/{LAUNCHER} missing or not executable"; '
            f'else ok release; fi; '
            f'if [ -L "$home" ]; then ok kafka_home; else no kafka_home "$home is not a symbolic link"; fi')
    if needs.properties is not None:
        p = shlex.quote(needs.properties)
        lines.append(f'p={p}; if [ ! -r "$p" ]; then no properties "$p is not readable"; '
                     f'elif [ ! -w "$p" ]; then no properties "$p is not writable"; '
                     f'elif [ ! -w "$(dirname "$p")" ]; then no properties "$(dirname "$p") is not writable (the '
                     f'backup and the new file go there)"; else ok properties; fi')
    lines.append("printf 'done\\tok\\n'")
    return "\n".join(lines)


def problems(needs: HostNeeds, output: str) -> list[str]:
    """The problems ``output`` (of :func:`probe_script`) reports, one sentence each; a probe cut short (no ``done``
    line) is a problem too."""
    found: list[str] = []
    done = False
    for line in output.splitlines():
        check, _, verdict = line.partition("\t")
        if check == "done":
            done = True
        elif verdict and verdict != "ok":
            what = check.split(":", 1)
            found.append(f"{what[1]}: {verdict}" if len(what) == 2 else verdict)
    if not done:
        found.append("the preflight probe did not finish (its output was cut short)")
    return found


def report(by_node: Mapping[str, Iterable[str]], hosts: Mapping[str, str]) -> str:
    """One sentence listing every node with problems: ``"broker 2 (kafka-3): no unpacked Kafka 3.7.1 in /opt;
    controller 100 (ctl-1): systemctl: not found ..."``; empty when none has any."""
    parts = [f"{node} ({hosts.get(node, '?')}): " + "; ".join(found) for node, found in by_node.items() if found]
    return " | ".join(parts)


# -- disk space for a reassignment --------------------------------------------------------------------------------

#: Free space a broker must keep beyond the bytes a plan copies onto it (the partitions keep growing while they
#: copy, and a full log dir takes the broker's replicas offline).
DISK_MARGIN = 0.10


def bytes_to_receive(moves: Iterable[Any]) -> dict[int, int]:
    """Bytes each broker receives from ``moves`` (``kafka_ops.plan_files.Move``: its ``size_bytes`` once per
    adding replica, the replicas in ``replicas`` but not in ``current``): ``{broker: bytes}``, brokers that
    receive nothing left out."""
    out: dict[int, int] = {}
    for m in moves:
        for b in set(m.replicas) - set(m.current):
            out[int(b)] = out.get(int(b), 0) + int(m.size_bytes)
    return {b: n for b, n in out.items() if n > 0}


def disk_problems(receive: Mapping[int, int], usable: Mapping[int, Mapping[str, int]],
                  margin: float = DISK_MARGIN) -> tuple[list[str], list[str]]:
    """(problems, notes) of the free space each receiving broker has for what a plan copies onto it.

    :param receive: broker -> bytes it receives (:func:`bytes_to_receive`).
    :param usable: broker -> {log dir: usable bytes} (DescribeLogDirs v4, KIP-827, Kafka 3.3+; -1 = not reported).
    :returns: problems: a broker whose reported usable bytes over all its log dirs are less than ``receive x (1 +
        margin)``, or that reported no log dir; notes: a broker whose log dirs do not report their space (an older
        Kafka): not judged, said so.
    """
    problems_found: list[str] = []
    notes: list[str] = []
    for broker, need in sorted(receive.items()):
        dirs = usable.get(broker)
        if not dirs:
            problems_found.append(f"broker {broker}: no log dir reported (DescribeLogDirs): cannot place "
                                  f"{_size(need)}")
            continue
        known = {d: n for d, n in dirs.items() if n >= 0}
        if not known:
            notes.append(f"broker {broker}: its log dirs report no free space (Kafka before 3.3): {_size(need)} "
                         f"to receive not checked against it")
            continue
        free = sum(known.values())
        wanted = int(need * (1 + margin))
        if free < wanted:
            problems_found.append(f"broker {broker}: receives {_size(need)}, its log dirs have {_size(free)} usable "
                                  f"(needs {_size(wanted)} with a {margin:.0%} margin): "
                                  + ", ".join(f"{d} {_size(n)}" for d, n in sorted(known.items())))
    return problems_found, notes


def _size(n: int) -> str:
    """``"1.50 GB"`` / ``"840.00 MB"`` / ``"12 B"`` (decimal units, as Kafka's tools print)."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"
