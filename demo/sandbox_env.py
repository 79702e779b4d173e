"""The sandbox as the demo uses it: ``python -m sandbox up|down`` and the connections in ``airflow.env``."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

from demo.errors import DemoError

CONN_PREFIX = "AIRFLOW_CONN_"
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


DEFAULT_OPTIONS = {"brokers": 3, "spare_brokers": 0, "mode": "zookeeper"}


def running_options(workdir: Path) -> dict[str, object] | None:
    """The ``up`` options of the sandbox running in ``workdir`` (``sandbox.state.SandboxState.options``), or None
    when none runs there."""
    from sandbox import state
    from sandbox.layout import Workdir

    wd = Workdir.at(workdir)
    if not state.running_processes(wd):
        return None
    try:
        return state.load(wd).options()
    except state.NotASandbox:
        return None


def sandbox_options(workdir: Path, asked: dict[str, object | None]) -> dict[str, object]:
    """The sandbox the demo runs on: what ``asked`` sets (None = not set), the rest from the sandbox running in
    ``workdir`` (so a plain ``make demo`` reuses a sandbox started with spare brokers or in KRaft mode), else
    :data:`DEFAULT_OPTIONS`. Keys: ``brokers``, ``spare_brokers``, ``mode`` and, of a running sandbox, the
    others of its options (``controller_hosts``: a ZooKeeper-mode sandbox's hosts for a migration's controllers)."""
    running = running_options(workdir) or {}
    if running.get("mode", "zookeeper") != "kraft" and "controllers" in running:  # ZooKeeper mode: unstarted hosts
        running["controller_hosts"] = running.pop("controllers")
    chosen = {k: v for k, v in asked.items() if v is not None}
    if running and any(running.get(k) != v for k, v in chosen.items()):
        running = {}  # other options asked for: ``sandbox up`` names the running sandbox and refuses
    options = {**DEFAULT_OPTIONS, **running, **chosen}
    if options.get("mode") != "kraft":
        options.pop("controllers", None)
        if not options.get("controller_hosts"):
            options.pop("controller_hosts", None)
    return options


def up(repo: Path, workdir: Path, address_base: str | None, options: dict[str, object]) -> None:
    """Start the sandbox with ``options`` (:func:`sandbox_options`) in ``workdir`` unless it is already up with
    them (``sandbox up`` is idempotent).

    ``address_base`` None means the running sandbox's, else the sandbox's default (127.0.0.11 or
    ``$SANDBOX_ADDRESS_BASE``).

    Raises:
        DemoError: the sandbox could not start or runs but is unhealthy.
    """
    if address_base:
        options = {**options, "address_base": address_base}
    # every option as ``sandbox up`` names it (``spare_brokers`` -> ``--spare-brokers``, a switch when boolean): a
    # running sandbox is reused only when all of them match, one in combined mode or with a SASL / TLS listener too
    args = ["up", "--workdir", str(workdir)]
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if key == "broker_config":  # a running sandbox's: kept as it was started
            args += [a for k, v in (value or {}).items() for a in ("--broker-config", f"{k}={v}")]
        elif isinstance(value, bool):
            args += [flag] if value else []
        elif value is not None and value != "":
            args += [flag, str(value)]
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


def unpack_release(repo: Path, workdir: Path, version: str) -> None:
    """``python -m sandbox unpack --version VERSION``: Kafka ``version`` unpacked beside the running release on
    every host of the sandbox in ``workdir`` (what configuration management does before an upgrade; the ``kafka``
    symlink is left for the upgrade's binaries phase to switch); it prints each host's directory.

    Raises:
        DemoError: the release is not pinned or assembled, or the sandbox has no hosts (not up?).
    """
    _run_sandbox(repo, ["unpack", "--workdir", str(workdir), "--version", version], 300)


def connection_bodies(env: dict[str, str]) -> dict[str, dict[str, object]]:
    """The ``AIRFLOW_CONN_<ID>`` variables of :func:`connection_env` (Airflow's JSON format) as bodies of Airflow's
    REST ``/connections`` (``connection_id`` = the id lower-cased, as Airflow looks it up; ``extra`` a JSON string).

    Raises:
        DemoError: a value that is not a JSON object with a ``conn_type``.
    """
    bodies: dict[str, dict[str, object]] = {}
    for name, value in env.items():
        if not name.startswith(CONN_PREFIX):
            continue
        conn_id = name[len(CONN_PREFIX):].lower()
        try:
            conn = json.loads(value)
        except ValueError as exc:
            raise DemoError(f"{name}: not a JSON connection: {exc}") from exc
        if not isinstance(conn, dict) or not conn.get("conn_type"):
            raise DemoError(f"{name}: a JSON connection needs a conn_type")
        body: dict[str, object] = {"connection_id": conn_id, "conn_type": conn["conn_type"]}
        for key in ("description", "host", "login", "schema", "port", "password"):
            if conn.get(key) is not None:
                body[key] = conn[key]
        if conn.get("extra") is not None:
            body["extra"] = conn["extra"] if isinstance(conn["extra"], str) else json.dumps(conn["extra"])
        bodies[conn_id] = body
    return bodies
