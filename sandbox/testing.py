"""A running sandbox as tests see it: the parsed ``env.json`` plus helpers (CLI, SSH, ZooKeeper, Burrow,
Kafka's own command line tools, the nodes' logs).

The pytest fixtures in ``tests/conftest.py`` hand out :class:`RunningSandbox` objects; this module
holds no pytest code so scripts and benchmarks can use it too. Helpers observe the sandbox from
outside through the real clients (paramiko with host key checking, confluent-kafka, kazoo, Burrow's HTTP
API) and Kafka's own tools run from the assembled release.
"""

from __future__ import annotations

import getpass
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import paramiko
from kazoo.client import KazooClient

from sandbox import burrow, kafka_release, node_log, procs, state, workload
from sandbox.layout import PROJECT_ROOT, HostDir, Workdir

T = TypeVar("T")
CLI_TIMEOUT_S = 180.0
#: A test's `up`: 25-60 s on 2 idle cores, 120 s and more on a loaded machine (seen: a KRaft sandbox with TLS 77 s
#: from its state file to its controllers' start, while other sandboxes ran beside it); `up`'s own deadline (the
#: CLI's default is settings.UP_TIMEOUT_S, 120 s) is this less UP_GRACE_S, so it stops what it started and says
#: why before the subprocess is killed.
UP_TIMEOUT_S = 300.0
UP_GRACE_S = 30.0


def run_cli(
    *args: str, timeout_s: float = CLI_TIMEOUT_S, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run ``python -m sandbox ARGS`` from the project root; returns the completed process (text output).

    Raises:
        subprocess.TimeoutExpired: it ran longer than ``timeout_s`` seconds.
    """
    child_env = dict(os.environ if env is None else env)
    child_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), child_env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "sandbox", *args],
        cwd=PROJECT_ROOT,
        env=child_env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def wait_for(condition: Callable[[], T], timeout_s: float, what: str, poll_s: float = 0.2) -> T:
    """:func:`sandbox.procs.wait_for` (a truthy result before the deadline, else ``procs.Timeout``)."""
    return procs.wait_for(condition, timeout_s, what, poll_s=poll_s)


class SandboxBroken(RuntimeError):
    """The sandbox lost a part that waiting cannot bring back (its workload died or hung)."""


@dataclass
class RunningSandbox:
    """A sandbox started by ``python -m sandbox up``. ``env`` is its parsed ``env.json``."""

    workdir: Path
    env: dict[str, Any]
    up_seconds: float | None = None  # how long `up` took, when this object started it
    up_output: str = ""
    _ssh_clients: dict[int, paramiko.SSHClient] = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, workdir: Path, **kwargs: Any) -> RunningSandbox:
        """Read ``workdir/env.json`` (raises FileNotFoundError when the sandbox is not up)."""
        return cls(workdir=Path(workdir), env=json.loads((Path(workdir) / "env.json").read_text()), **kwargs)

    # --- addresses ----------------------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        """The brokers' PLAINTEXT listener (what the tests' own clients use)."""
        return self.env["bootstrap_servers"]

    @property
    def client_bootstrap_servers(self) -> str:
        """What the Airflow connection names: the client listener of ``--client-sasl`` / ``--client-tls`` when the
        sandbox has one, else :attr:`bootstrap_servers`."""
        return (self.env.get("client_listener") or {}).get("bootstrap_servers") or self.bootstrap_servers

    @property
    def zookeeper_connect(self) -> str:
        return self.env["zookeeper_connect"]

    @property
    def burrow_url(self) -> str:
        return self.env["burrow_url"]

    @property
    def broker_ids(self) -> list[int]:
        """Every broker host, spares included."""
        return [b["id"] for b in self.env["brokers"]]

    def broker(self, broker_id: int) -> dict[str, Any]:
        """The ``env.json`` entry of broker (or KRaft controller) ``broker_id`` (KeyError when unknown)."""
        for entry in [*self.env["brokers"], *self.env.get("controllers", [])]:
            if entry["id"] == broker_id:
                return entry
        raise KeyError(broker_id)

    def host_dir(self, broker_id: int) -> HostDir:
        return Workdir.at(self.workdir).host(broker_id)

    # --- CLI ----------------------------------------------------------------------------------
    def cli(self, *args: str, timeout_s: float = CLI_TIMEOUT_S) -> subprocess.CompletedProcess:
        """``python -m sandbox ARGS --workdir <this workdir>``."""
        return run_cli(*args, "--workdir", str(self.workdir), timeout_s=timeout_s)

    def status(self) -> dict[str, Any]:
        """The parsed output of ``python -m sandbox status``.

        Raises:
            AssertionError: the command failed.
        """
        result = self.cli("status")
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    @property
    def kraft(self) -> bool:
        return self.env.get("mode") == "kraft"

    @property
    def controller_ids(self) -> list[int]:
        """The KRaft controllers' node ids: a KRaft cluster's, or the controller hosts a ZooKeeper-mode sandbox keeps
        for a migration (``--controller-hosts``; not started until the migration provisions them); else ``[]``."""
        return [c["id"] for c in self.env.get("controllers", [])]

    # --- metadata ---------------------------------------------------------------------------------
    @contextmanager
    def zk(self, timeout_s: float = 10.0) -> Iterator[KazooClient]:
        """A started kazoo client on the ZooKeeper-mode cluster's ZooKeeper, stopped on exit.

        Raises:
            ValueError: a KRaft sandbox (its ZooKeeper is Burrow's, Kafka keeps no metadata there).
        """
        if self.kraft:
            raise ValueError("a KRaft sandbox keeps no Kafka metadata in ZooKeeper: use health() or kafka_tool()")
        client = KazooClient(hosts=self.zookeeper_connect, timeout=timeout_s)
        client.start(timeout=timeout_s)
        try:
            yield client
        finally:
            client.stop()
            client.close()

    def health(self, timeout_s: float = 5.0) -> Any:
        """:class:`sandbox.status.ClusterHealth`: Kafka's Metadata as a client sees it."""
        from sandbox.status import cluster_health

        return cluster_health(self.bootstrap_servers, timeout_s=timeout_s)

    def registered_brokers(self) -> list[int]:
        """The live brokers in Kafka's Metadata (registered in ZooKeeper mode, unfenced in KRaft mode)."""
        return self.health().brokers

    def wait_healthy(self, timeout_s: float = 60.0, brokers: list[int] | None = None) -> None:
        """Wait until ``brokers`` (default: the non-spare brokers) are live and URP = 0.

        :raises SandboxBroken: at once, when the workload is dead or hung (``sandbox.workload.problem``).
        :raises procs.Timeout: not healthy within ``timeout_s``.
        """
        expected = (
            brokers if brokers is not None else [b["id"] for b in self.env["brokers"]][: self.active_count]
        )
        last: dict[str, Any] = {}
        stopped = workload.problem(Workdir.at(self.workdir))
        if stopped:  # waiting cannot mend it: say so now, not at each lag gate's timeout
            raise SandboxBroken(stopped)

        def healthy() -> bool:
            last["h"] = self.health()
            return last["h"].healthy(expected)

        try:
            wait_for(healthy, timeout_s, "a healthy cluster", poll_s=0.3)
        except procs.Timeout as exc:
            raise procs.Timeout(f"{exc}: {last.get('h') and last['h'].problems(expected)}") from None

    # --- Kafka's own tools and logs ---------------------------------------------------------------
    def kafka_tool(self, tool: str, *args: str, version: str | None = None, timeout_s: float = 120.0,
                   ) -> subprocess.CompletedProcess:
        """Run Kafka's own ``bin/<tool>`` (e.g. ``kafka-topics.sh``) of the assembled release ``version``
        (default: the sandbox's) with ``args``; returns the completed process (text output).

        Raises:
            kafka_release.ReleaseError: the release is not assembled.
            FileNotFoundError: the release has no such tool.
        """
        release = kafka_release.release_dir(version or self.env["kafka_version"])
        path = release / "bin" / tool
        if not path.is_file():
            raise FileNotFoundError(f"Kafka {release.name} has no bin/{tool}")
        return subprocess.run([str(path), *args], capture_output=True, text=True, timeout=timeout_s,
                              env={**os.environ, "KAFKA_HEAP_OPTS": "-Xmx128m"})

    def node_runs(self, node_id: int) -> list[node_log.Run]:
        """Every start of node ``node_id`` (broker or controller) from its ``logs/server.log``."""
        return node_log.runs(self.host_dir(node_id).server_log)

    def starts(self, node_ids: list[int] | None = None) -> dict[int, int]:
        """Node id -> how often Kafka logged that it started (every broker host by default): an observer that
        cannot miss a short restart the way a metadata poll can."""
        ids = self.broker_ids if node_ids is None else node_ids
        return {n: sum(1 for run in self.node_runs(n) if run.started) for n in ids}

    def started_releases(self, node_id: int) -> list[str]:
        """``"Kafka 3.7.1, IBP 3.6"`` (ZooKeeper mode) or ``"Kafka 4.1.0"`` for each start of the node that Kafka
        logged as started, oldest first: the release it ran and the IBP it parsed."""
        return [f"Kafka {run.version}" + (f", IBP {run.ibp_major_minor}" if run.ibp else "")
                for run in self.node_runs(node_id) if run.started]

    def shutdown_order(self, node_ids: list[int] | None = None) -> list[int]:
        """Node ids ordered by the time their last shutdown began (nodes never shut down are left out)."""
        last = {}
        for n in self.broker_ids if node_ids is None else node_ids:
            times = [run.shutdown for run in self.node_runs(n) if run.shutdown]
            if times:
                last[n] = times[-1]
        return sorted(last, key=last.get)

    def shutdown_times(self, node_id: int) -> list[float]:
        """Epoch seconds at which each shutdown of the node began, oldest first."""
        return [run.shutdown for run in self.node_runs(node_id) if run.shutdown]

    @property
    def active_count(self) -> int:
        return len(self.bootstrap_servers.split(","))

    # --- Burrow -------------------------------------------------------------------------------
    def group_status(self, group: str) -> str | None:
        """Burrow's status of ``group`` (OK, WARN, ERR, NOTFOUND, ...)."""
        return burrow.group_status(self.burrow_url, group, self.env["burrow_cluster"]).get("status")

    # --- SSH ----------------------------------------------------------------------------------
    def ssh_client(self, broker_id: int, known_hosts: Path | None = None) -> paramiko.SSHClient:
        """A paramiko client connected to broker host ``broker_id`` with host key checking ON
        (RejectPolicy, the sandbox's known_hosts file unless ``known_hosts`` is given).

        Raises:
            paramiko.SSHException: host key unknown or mismatched, authentication failed.
        """
        ssh = self.env["ssh"]
        broker = self.broker(broker_id)
        client = paramiko.SSHClient()
        client.load_host_keys(str(known_hosts or ssh["known_hosts"]))
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        client.connect(
            broker["host"],
            port=broker["ssh_port"],
            username=ssh["user"],
            key_filename=ssh["key_file"],
            look_for_keys=False,
            allow_agent=False,
            timeout=10,
        )
        return client

    def ssh(self, broker_id: int, command: str, timeout_s: float = 60.0) -> tuple[int, str, str]:
        """Run ``command`` on broker host ``broker_id`` over SSH; returns (exit code, stdout, stderr).

        One connection per host is kept for the test session; each command gets its own channel, closed after
        it. A channel that cannot be opened within 10 s on the kept connection (seen after hours of a session:
        the connection lives on while sshd stops answering channel requests on it) is retried once on a new
        connection; ``timeout_s`` bounds the command's reads."""
        for attempt in (1, 2):
            client = self._ssh_clients.get(broker_id)
            if client is None or not (client.get_transport() and client.get_transport().is_active()):
                client = self.ssh_client(broker_id)
                self._ssh_clients[broker_id] = client
            try:
                channel = client.get_transport().open_session(timeout=10)
                break
            except (paramiko.SSHException, EOFError, OSError):
                client.close()
                self._ssh_clients.pop(broker_id, None)
                if attempt == 2:
                    raise
        with channel:
            channel.settimeout(timeout_s)
            channel.exec_command(command)
            out = channel.makefile("rb").read().decode()
            err = channel.makefile_stderr("rb").read().decode()
            return channel.recv_exit_status(), out, err

    def close(self) -> None:
        for client in self._ssh_clients.values():
            client.close()
        self._ssh_clients.clear()

    # --- leadership ---------------------------------------------------------------------------
    def make_leader_imbalance(self, broker: int, leave_alone: tuple[int, ...] = (), count: int = 12,
                              timeout_s: float = 60.0) -> list[tuple[str, int]]:
        """Make ``broker`` the preferred leader (first replica) of up to ``count`` partitions it is in sync for but
        does not lead: the same replicas in a new order, no data moves (AlterPartitionReassignments, KIP-455;
        kafka-python). Another broker keeps leading them, so Kafka counts them against ``broker``'s
        ``leader.imbalance.per.broker.percentage`` until a preferred leader election, or its own rebalance after
        ``leader.imbalance.check.interval.seconds`` (300 s by default). Partitions whose first replica is in
        ``leave_alone`` are not touched; user topics first. Returns the partitions ``(topic, partition)`` once every
        reorder is done and the metadata shows them led by another broker.

        Raises:
            ValueError: fewer than 3 partitions qualify (a leader imbalance needs a few).
            sandbox.procs.Timeout: the reorders did not complete within ``timeout_s`` seconds.
        """
        from kafka import TopicPartition
        from kafka.admin import KafkaAdminClient

        from sandbox.status import admin_client

        metadata = admin_client(self.bootstrap_servers)

        def layout() -> dict[tuple[str, int], Any]:
            md = metadata.list_topics(timeout=10)
            return {(name, p): meta for name, topic in md.topics.items() if topic.error is None
                    for p, meta in topic.partitions.items()}

        before = layout()
        candidates = [tp for tp, m in before.items() if m.leader not in (broker, -1) and broker in m.isrs
                      and m.replicas[0] not in (broker, *leave_alone)]
        chosen = sorted(candidates, key=lambda tp: (tp[0].startswith("__"), tp))[:count]
        if len(chosen) < 3:
            raise ValueError(f"only {len(chosen)} partitions can be reordered to make broker {broker} their "
                             "preferred leader: a leader imbalance needs at least 3")
        order = {TopicPartition(t, p): [broker, *[r for r in before[(t, p)].replicas if r != broker]]
                 for t, p in chosen}
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap_servers, client_id="sandbox-imbalance")
        try:
            errors = {tp: e for tp, e in admin.alter_partition_reassignments(order).items() if e is not None}
            if errors:
                raise RuntimeError(f"reorders refused: {errors}")
            wait_for(lambda: not admin.list_partition_reassignments(), timeout_s, what="the reorders to complete")
        finally:
            admin.close()

        def reordered() -> bool:
            now = layout()
            return all(now[tp].replicas[0] == broker and now[tp].leader != broker for tp in chosen)

        wait_for(reordered, timeout_s, what=f"the metadata to show broker {broker} preferred but not leading")
        return chosen

    # --- processes ----------------------------------------------------------------------------
    def processes(self) -> dict[int, str]:
        """Every process (but this one) that references this workdir anywhere: command line, environment,
        current directory or an open file. ``{pid: how}``. Independent of the marker `down` uses."""
        return processes_referencing(Path(self.workdir).resolve())


def processes_referencing(path: Path) -> dict[int, str]:
    """``{pid: how}`` for every process other than this one whose command line or environment mentions
    ``path``, or whose current directory or an open file descriptor lies under it."""
    root = str(path)
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        pid = int(entry.name)
        try:
            if root in (entry / "cmdline").read_bytes().decode(errors="replace"):
                found[pid] = "cmdline"
            elif root in (entry / "environ").read_bytes().decode(errors="replace"):
                found[pid] = "environ"
            elif (os.readlink(entry / "cwd") + "/").startswith(root + "/"):
                found[pid] = "cwd"
            else:
                for fd in (entry / "fd").iterdir():
                    target = os.readlink(fd)
                    if target == root or target.startswith(root + "/"):
                        found[pid] = f"open file {target}"
                        break
        except OSError:  # gone meanwhile, or a kernel thread
            continue
    return found


def pytest_temp_root() -> Path:
    """Where pytest puts each session's temporary directory by default: ``pytest-of-<user>`` in
    ``$PYTEST_DEBUG_TEMPROOT`` or the system's temporary directory (pytest's tmp_path plugin). A session run with
    ``--basetemp`` puts its sandboxes elsewhere."""
    try:
        user = getpass.getuser()
    except (ImportError, KeyError, OSError):
        user = "unknown"
    return Path(os.environ.get("PYTEST_DEBUG_TEMPROOT") or tempfile.gettempdir()).resolve() / f"pytest-of-{user}"


def orphaned_sandboxes(net: int, root: Path) -> list[Path]:
    """Workdirs under ``root`` (:func:`pytest_temp_root`) of sandboxes whose processes still run with broker
    addresses on ``127.<net>.0.0/16`` (the ``address_base`` in their ``sandbox.json``), sorted.

    A test session claims its net by a lock it holds while it lives (``tests/conftest.py``), so once a session
    holds the lock, a sandbox of a test session on that net outlived its session: the hang guard
    (``faulthandler_exit_on_timeout``) ends a session without running its fixtures' teardown. A sandbox started by
    hand or by a bench lives outside pytest's directories and is never named; a workdir without a readable
    ``sandbox.json`` neither (it cannot be told apart)."""
    found = []
    for workdir in procs.running_workdirs():
        if not workdir.is_relative_to(root):
            continue
        try:
            address_base = state.load(Workdir(workdir)).address_base
        except state.NotASandbox:
            continue
        if address_base.startswith(f"127.{net}."):
            found.append(workdir)
    return sorted(found)


def stop_orphaned_sandboxes(net: int, root: Path) -> dict[Path, subprocess.CompletedProcess]:
    """Throw away (``down --kill``) each of :func:`orphaned_sandboxes`; returns what each ``down`` did, by workdir
    (empty when none was left)."""
    return {workdir: run_cli("down", "--workdir", str(workdir), "--kill") for workdir in orphaned_sandboxes(net, root)}


def start(
    workdir: Path,
    *,
    brokers: int = 3,
    spare_brokers: int = 0,
    racks: int = 3,
    kafka_version: str | None = None,
    address_base: str | None = None,
    timeout_s: float = UP_TIMEOUT_S,
    mode: str = "zookeeper",
    controllers: int = 3,
    controller_hosts: int = 0,
    combined: int = 0,
    quorum: str = "static",
    observer_controllers: int = 0,
    broker_config: dict[str, str] | None = None,
    client_sasl: bool = False,
    client_tls: bool = False,
    sasl_mechanism: str | None = None,
    client_auth: bool = False,
    cluster_id: str = "",
) -> RunningSandbox:
    """``python -m sandbox up`` in ``workdir``; returns the running sandbox (``up_seconds`` measured).
    ``broker_config``: settings over the sandbox's own in every broker's server.properties (``--broker-config``);
    ``client_sasl`` / ``client_tls``: the Airflow connection goes through a SASL and/or TLS listener
    (``--client-sasl`` / ``--client-tls``); ``sasl_mechanism``: the SASL mechanism (``--sasl-mechanism``; PLAIN by
    default); ``client_auth``: the TLS listener requires the connection's client certificate (``--client-auth``);
    ``cluster_id``: the cluster's id instead of a random one (``--cluster-id``).

    Raises:
        RuntimeError: `up` failed (its stderr is in the message).
    """
    args = [
        "up",
        "--workdir",
        str(workdir),
        "--brokers",
        str(brokers),
        "--spare-brokers",
        str(spare_brokers),
        "--racks",
        str(racks),
    ]
    if kafka_version:
        args += ["--kafka-version", kafka_version]
    if address_base:
        args += ["--address-base", address_base]
    if mode != "zookeeper":
        args += ["--mode", mode, "--controllers", str(controllers)]
    if controller_hosts:
        args += ["--controller-hosts", str(controller_hosts)]
    if combined:
        args += ["--combined", str(combined)]
    if quorum != "static":
        args += ["--quorum", quorum]
    if observer_controllers:
        args += ["--observer-controllers", str(observer_controllers)]
    for key, value in (broker_config or {}).items():
        args += ["--broker-config", f"{key}={value}"]
    if client_sasl:
        args += ["--client-sasl"]
    if sasl_mechanism:
        args += ["--sasl-mechanism", sasl_mechanism]
    if client_tls:
        args += ["--client-tls"]
    if client_auth:
        args += ["--client-auth"]
    if cluster_id:
        args += [f"--cluster-id={cluster_id}"]
    args += ["--timeout", str(timeout_s - UP_GRACE_S)]  # up gives up (and stops what it started) first
    began = time.monotonic()
    result = run_cli(*args, timeout_s=timeout_s)
    elapsed = time.monotonic() - began
    if result.returncode != 0:
        raise RuntimeError(f"sandbox up failed (exit {result.returncode}):\n{result.stderr}")
    try:
        return RunningSandbox.load(workdir, up_seconds=elapsed, up_output=result.stderr)
    except BaseException:  # nobody holds a handle to stop it: stop it here rather than leave it running
        run_cli("down", "--workdir", str(workdir), "--kill")
        raise


def stop(sandbox: RunningSandbox, kill: bool = False) -> subprocess.CompletedProcess:
    """``python -m sandbox down`` for ``sandbox`` (closes its SSH clients first); ``kill``: ``down --kill``
    (SIGKILL, for a sandbox thrown away)."""
    sandbox.close()
    return run_cli("down", "--workdir", str(sandbox.workdir), *(["--kill"] if kill else []))
