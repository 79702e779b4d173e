"""Process plumbing: start detached processes with pid files, probe and stop them, wait on conditions.

Every sandbox process is started in its own session (so a terminal's Ctrl-C or the end of an SSH
session does not reach it) with ``SANDBOX_WORKDIR`` in its environment; :func:`find_workdir_processes`
uses that marker to find leftovers. Waiting is always on a condition with a deadline, never a
fixed sleep.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from sandbox.layout import WORKDIR_ENV

T = TypeVar("T")
POLL_S = 0.05


class Timeout(RuntimeError):
    """A condition did not hold before its deadline (the message says which)."""


class Abort(RuntimeError):
    """Raised by a :func:`wait_for` condition when waiting longer cannot help (e.g. the process died)."""


def wait_for(condition: Callable[[], T], timeout_s: float, what: str, poll_s: float = POLL_S) -> T:
    """Call ``condition`` until it returns a truthy value (returned) or ``timeout_s`` seconds pass.

    Exceptions from ``condition`` count as "not yet" (the last one is quoted in the timeout message),
    except :class:`Abort`, which ends the wait at once.

    Raises:
        Timeout: the condition stayed falsy for ``timeout_s`` seconds; the message names ``what``.
        Abort: raised by ``condition``.
    """
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while True:
        try:
            value = condition()
            if value:
                return value
        except Abort:
            raise
        except Exception as exc:  # noqa: BLE001 - "not yet", reported on timeout
            last_error = exc
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_error})" if last_error else ""
            raise Timeout(f"timed out after {timeout_s:.0f} s waiting for {what}{detail}")
        time.sleep(poll_s)


def spawn(
    argv: Sequence[str],
    *,
    log_file: Path,
    pid_file: Path | None,
    workdir: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> int:
    """Start ``argv`` detached (new session, stdin from /dev/null, stdout+stderr appended to
    ``log_file``) and write its pid to ``pid_file``. Returns the pid.

    The child's environment is ``env`` (default: ours) plus ``SANDBOX_WORKDIR=<workdir>``.
    """
    child_env = dict(os.environ if env is None else env)
    child_env[WORKDIR_ENV] = str(workdir)
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as log, open(os.devnull, "rb") as devnull:
        proc = subprocess.Popen(
            list(argv),
            stdin=devnull,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=child_env,
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
        )
    if pid_file is not None:
        write_pid(pid_file, proc.pid)
    # We never wait() for detached children: reap them in the background when they end, so a
    # long-lived caller (tests) does not accumulate zombies that look alive to kill(pid, 0).
    _reapable.add(proc)
    return proc.pid


_reapable: set[subprocess.Popen] = set()


def _reap() -> None:
    for proc in list(_reapable):
        if proc.poll() is not None:
            _reapable.discard(proc)


def write_pid(pid_file: Path, pid: int) -> None:
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = pid_file.with_suffix(".tmp")
    tmp.write_text(f"{pid}\n")
    tmp.replace(pid_file)


def read_pid(pid_file: Path) -> int | None:
    """The pid in ``pid_file``, or None when the file is missing or not a number."""
    try:
        return int(pid_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def is_alive(pid: int | None) -> bool:
    """Whether ``pid`` is a running process (zombies count as dead)."""
    if not pid:
        return False
    _reap()
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return exc.errno == errno.EPERM
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    state = stat.rsplit(")", 1)[1].split()[0]
    return state not in ("Z", "X")


def cmdline(pid: int) -> list[str]:
    """The command line of ``pid`` (empty when the process is gone or unreadable)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def environ(pid: int) -> dict[str, str]:
    """The initial environment of ``pid`` (empty when unreadable)."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode(errors="replace")] = value.decode(errors="replace")
    return env


def alive_from_pid_file(pid_file: Path, must_contain: str | None = None) -> int | None:
    """The pid in ``pid_file`` when that process runs (and its command line contains
    ``must_contain``, which guards against pid reuse); else None."""
    pid = read_pid(pid_file)
    if not is_alive(pid):
        return None
    if must_contain is not None and not any(must_contain in arg for arg in cmdline(pid)):
        return None
    return pid


def signal_pid(pid: int, sig: int) -> None:
    """Send ``sig`` to ``pid``, ignoring a process that is already gone."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def stop_pids(pids: Sequence[int], timeout_s: float, sig: int = signal.SIGTERM) -> list[int]:
    """Send ``sig`` to every pid, wait up to ``timeout_s`` for all to exit, SIGKILL the rest.

    Returns the pids that had to be killed.
    """
    pids = [pid for pid in pids if is_alive(pid)]
    for pid in pids:
        signal_pid(pid, sig)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(is_alive(pid) for pid in pids):
        time.sleep(POLL_S)
    killed = [pid for pid in pids if is_alive(pid)]
    for pid in killed:
        signal_pid(pid, signal.SIGKILL)
    if killed:
        wait_for(lambda: not any(is_alive(pid) for pid in killed), 5.0, f"pids {killed} to die after SIGKILL")
    return killed


def _live_pids(exclude: set[int]) -> Iterator[int]:
    """Pids of the live processes (``/proc``), but those in ``exclude``."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) not in exclude and is_alive(int(entry.name)):
            yield int(entry.name)


def find_workdir_processes(workdir: Path) -> list[int]:
    """Pids of processes started for ``workdir``: ``SANDBOX_WORKDIR=<workdir>`` in their
    environment, or ``workdir`` on their command line. Excludes this process and its ancestors."""
    exclude = {os.getpid()}
    pid = os.getpid()
    while pid > 1:
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        exclude.add(pid)
    root = str(workdir)
    return sorted(
        pid for pid in _live_pids(exclude)
        if environ(pid).get(WORKDIR_ENV) == root or any(
            arg == root or arg.startswith(root + "/") or ("=" + root + "/") in arg for arg in cmdline(pid))
    )


def running_workdirs() -> set[Path]:
    """The workdirs of every running sandbox process, by the ``SANDBOX_WORKDIR`` marker in its environment (this
    process excluded)."""
    return {Path(marker) for pid in _live_pids({os.getpid()}) if (marker := environ(pid).get(WORKDIR_ENV))}


def port_in_use(host: str, port: int) -> bool:
    """Whether something listens on (or holds) ``host:port`` (TCP): we cannot bind it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def free_port(host: str) -> int:
    """A TCP port on ``host`` that is free now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def pick_port(host: str, preferred: int) -> int:
    """``preferred`` when free on ``host``, else a free port the kernel picks."""
    return preferred if not port_in_use(host, preferred) else free_port(host)


def listening(host: str, port: int, timeout_s: float = 0.5) -> bool:
    """Whether a TCP connection to ``host:port`` succeeds."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def listener_pids(host: str, port: int) -> list[int]:
    """Pids of processes holding a listening TCP socket on ``host:port`` (from /proc/net/tcp, and /proc/net/tcp6
    for IPv4-mapped addresses: a JVM binds its IPv4 listeners through IPv6 sockets)."""
    wanted = {f"{_hex_addr(host)}:{port:04X}", f"{_hex_addr6_mapped(host)}:{port:04X}"}
    inodes = set()
    lines: list[str] = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines += Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
    for line in lines:
        fields = line.split()
        if fields[1] in wanted and fields[3] == "0A":  # 0A = LISTEN
            inodes.add(fields[9])
    if not inodes:
        return []
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            for fd in (entry / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:[") and target[8:-1] in inodes:
                    pids.append(int(entry.name))
                    break
        except OSError:
            continue
    return pids


def _hex_addr(host: str) -> str:
    return "".join(f"{int(octet):02X}" for octet in reversed(host.split(".")))


def _hex_addr6_mapped(host: str) -> str:
    """``::ffff:a.b.c.d`` as /proc/net/tcp6 prints it (four 32-bit words, each in host byte order)."""
    return "0000000000000000FFFF0000" + _hex_addr(host)
