"""The sandbox as the demo uses it: ``python -m sandbox up|down`` and the connections in ``airflow.env``."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from demo.errors import DemoError

UP_TIMEOUT_S = 600  # `sandbox up` has its own health deadline; this only guards against a hang


def _run_sandbox(repo: Path, args: list[str], timeout_s: float) -> None:
    """Run ``python -m sandbox ARGS`` in ``repo`` with the output on our terminal.

    Raises:
        DemoError: non-zero exit (the sandbox already printed why) or no exit within ``timeout_s`` seconds.
    """
    cmd = [sys.executable, "-m", "sandbox", *args]
    try:
        rc = subprocess.run(cmd, cwd=repo, timeout=timeout_s, check=False).returncode
    except subprocess.TimeoutExpired as exc:
        raise DemoError(f"`{shlex.join(cmd[1:])}` did not finish within {timeout_s:.0f} s") from exc
    if rc != 0:
        raise DemoError(f"`{shlex.join(cmd[1:])}` failed (exit {rc}; see its message above)")


def up(repo: Path, workdir: Path, address_base: str | None, brokers: int = 3) -> None:
    """Start the sandbox of ``brokers`` brokers in ``workdir`` unless it is already up with those settings
    (``sandbox up`` is idempotent).

    ``address_base`` None means the sandbox's default (127.0.0.11 or ``$SANDBOX_ADDRESS_BASE``).

    Raises:
        DemoError: the sandbox could not start or runs but is unhealthy.
    """
    args = ["up", "--workdir", str(workdir), "--brokers", str(brokers)]
    if address_base:
        args += ["--address-base", address_base]
    _run_sandbox(repo, args, UP_TIMEOUT_S)


def down(repo: Path, workdir: Path) -> None:
    """Stop the sandbox in ``workdir`` (a no-op when nothing runs there).

    Raises:
        DemoError: ``sandbox down`` failed.
    """
    _run_sandbox(repo, ["down", "--workdir", str(workdir)], 300)


def airflow_env_file(workdir: Path) -> Path:
    """Path of the sandbox's ``airflow.env`` (``export AIRFLOW_CONN_<ID>='<json>'`` lines)."""
    return workdir / "airflow.env"


def connection_env(workdir: Path) -> dict[str, str]:
    """The ``AIRFLOW_CONN_*`` variables of the running sandbox, parsed like ``source airflow.env`` would.

    Raises:
        DemoError: no ``airflow.env`` (the sandbox is not up) or a line that is not ``export NAME=VALUE``.
    """
    path = airflow_env_file(workdir)
    try:
        text = path.read_text()
    except FileNotFoundError as exc:
        raise DemoError(f"{path} is missing: is the sandbox in {workdir} up?") from exc
    env: dict[str, str] = {}
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        if words[0] == "export":
            words = words[1:]
        if len(words) != 1 or "=" not in words[0]:
            raise DemoError(f"{path}: cannot parse line {line!r}")
        name, value = words[0].split("=", 1)
        env[name] = value
    return env


def unpack_release(workdir: Path, version: str) -> list[Path]:
    """Unpack Kafka ``version`` beside the running release on every broker host of the sandbox in
    ``workdir`` (what configuration management does before an upgrade; the ``kafka`` symlink is left for
    the upgrade's binaries phase to switch). Returns the directories.

    Raises:
        DemoError: the sandbox in ``workdir`` has no broker hosts (not up?).
    """
    from sandbox.hosts import unpack_kafka
    from sandbox.layout import Workdir

    hosts = sorted((workdir / "hosts").glob("*")) if (workdir / "hosts").is_dir() else []
    if not hosts:
        raise DemoError(f"no broker hosts under {workdir / 'hosts'}: is the sandbox up?")
    wd = Workdir.at(workdir)
    return [unpack_kafka(wd.host(int(h.name)), version) for h in hosts if h.name.isdigit()]

