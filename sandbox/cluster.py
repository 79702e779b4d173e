"""The sandbox's lifecycle: ``up`` (start everything, return when healthy) and ``down``. Faults injected into
a running sandbox are in :mod:`sandbox.faults`, KRaft storage formatting in :mod:`sandbox.kraft_storage`. The
CLI (:mod:`sandbox.cli`) parses arguments and calls these.

Errors a user can fix raise :class:`SandboxError` with the message to print (the CLI exits 1).
"""

from __future__ import annotations

import fcntl
import os
import secrets
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from sandbox import (
    burrow,
    burrow_build,
    debs,
    envfile,
    hosts,
    kafka_config,
    kafka_release,
    kraft_storage,
    node_log,
    procs,
    scram,
    service,
    settings,
    sshd,
    state,
    status,
    tls,
    workload,
    zookeeper,
)
from sandbox.layout import Workdir
from sandbox.status import cluster_health

Say = Callable[[str], None]
STOP_HELPER_TIMEOUT_S = 5.0  # workload, Burrow, sshd, ZooKeeper: SIGTERM, then SIGKILL after this
BURROW_STARTS = 3  # Burrow started again after it lost its startup race with a leader move (burrow.lost_startup_race)
NODE_STOP_TIMEOUT_S = 30.0  # `down`: a node's controlled shutdown, then SIGKILL


class SandboxError(procs.Abort):
    """A problem the user can act on; the message says what and how."""


def say_to_stderr(message: str) -> None:
    """The CLI's default ``say``: one progress line on standard error, flushed."""
    print(message, file=sys.stderr, flush=True)


@contextmanager
def workdir_lock(workdir: Workdir) -> Iterator[None]:
    """Hold an exclusive lock on the workdir (one `up`/`down` at a time per workdir).

    Raises:
        SandboxError: another `up` or `down` holds it.
    """
    workdir.root.mkdir(parents=True, exist_ok=True)
    with open(workdir.lock_file, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SandboxError(
                f"another `python -m sandbox up/down` is working on {workdir.root} right now; wait for it"
            ) from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _validate_up_args(brokers: int, spares: int, racks: int, kafka_version: str, address_base: str) -> None:
    if brokers < 1:
        raise SandboxError(f"--brokers must be at least 1 (got {brokers})")
    if spares < 0:
        raise SandboxError(f"--spare-brokers cannot be negative (got {spares})")
    if racks < 1:
        raise SandboxError(f"--racks must be at least 1 (got {racks})")
    if kafka_version not in kafka_release.RELEASES:
        raise SandboxError(f"--kafka-version must be a pinned Kafka release ({', '.join(kafka_release.RELEASES)}); "
                           f"got {kafka_version!r}")
    parts = address_base.split(".")
    if len(parts) != 4 or parts[0] != "127" or not all(p.isdigit() and 0 <= int(p) <= 255 for p in parts):
        raise SandboxError(
            f"--address-base must be a loopback address like 127.0.0.11 (got {address_base!r})"
        )
    try:
        hosts.address(brokers + spares - 1, address_base)
    except ValueError as exc:
        raise SandboxError(str(exc)) from None


def _owner_of(host: str, port: int) -> str:
    """Who holds ``host:port``: "the sandbox in DIR (pid N)" or "pid N (cmd)" or "another process"."""
    for pid in procs.listener_pids(host, port):
        owner = procs.environ(pid).get("SANDBOX_WORKDIR")
        if owner:
            return (
                f"the sandbox in {owner} (pid {pid}); stop it with `python -m sandbox down --workdir {owner}`"
            )
        cmd = " ".join(procs.cmdline(pid))[:80]
        return f"pid {pid} ({cmd})"
    return "another process"


def check_addresses_free(specs: list[hosts.BrokerSpec]) -> None:
    """Every host's Kafka (broker and controller) and SSH ports must be free.

    Raises:
        SandboxError: naming the address and its owner (another sandbox's workdir when it is one).
    """
    for spec in specs:
        for port in (settings.BROKER_PORT, settings.CONTROLLER_PORT, settings.SSH_PORT):
            if procs.port_in_use(spec.host, port):
                raise SandboxError(
                    f"broker host address {spec.host}:{port} (broker {spec.id}) is in use by "
                    f"{_owner_of(spec.host, port)}; or start this sandbox on other addresses with "
                    "--address-base (e.g. 127.0.1.11)"
                )


def _prepare_workdir(workdir: Workdir) -> None:
    """Empty a stopped sandbox's workdir (keeping the lock file); refuse a directory that is not one.

    Raises:
        SandboxError: ``workdir`` holds files but no ``sandbox.json``.
    """
    entries = [p for p in workdir.root.iterdir() if p.name != workdir.lock_file.name]
    if entries and not workdir.state_json.exists():
        raise SandboxError(
            f"{workdir.root} is not empty and holds no sandbox (no sandbox.json); choose another --workdir"
        )
    for path in entries:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def up(
    workdir: Workdir,
    *,
    brokers: int = 3,
    spares: int = 0,
    racks: int = 3,
    kafka_version: str = settings.DEFAULT_KAFKA_VERSION,
    address_base: str = settings.BROKER_HOST_BASE,
    timeout_s: float = settings.UP_TIMEOUT_S,
    say: Say = say_to_stderr,
    mode: str = "zookeeper",
    controllers: int = 3,
    controller_hosts: int = 0,
    broker_config: dict[str, str] | None = None,
    combined: int = 0,
    quorum: str = "static",
    observer_controllers: int = 0,
    client_sasl: bool = False,
    client_tls: bool = False,
    sasl_mechanism: str = settings.SASL_MECHANISM,
    client_auth: bool = False,
    cluster_id: str = "",
) -> state.SandboxState:
    """Start the sandbox in ``workdir`` and return when it is healthy: every broker registered, every
    partition led, URP = 0, Burrow rating the workload's groups OK; then write env.json/airflow.env.

    Idempotent: on a running sandbox with the same options it says so and returns its state.

    ``mode="kraft"``: no ZooKeeper for Kafka; ``controllers`` dedicated KRaft controllers (node ids 100, 101,
    ...) on hosts of their own form the metadata quorum, their storage formatted by Kafka's ``kafka-storage``
    with a cluster id it generated. A ZooKeeper still runs for Burrow's own coordination (Burrow 1.2.1
    requires one); Kafka never uses it. ZooKeeper mode needs a 3.x release (4.0 removed it). ``combined`` (KRaft
    only): the first N brokers are the quorum's voters too (``process.roles=broker,controller``, Kafka's
    quickstart layout) and no dedicated controller runs (``controllers`` is ignored). ``quorum`` (KRaft only):
    ``"static"`` (``controller.quorum.voters`` in every file, KIP-595) or ``"dynamic"`` (KIP-853, Kafka 3.9+, as
    Kafka 4's quickstart formats it: ``controller.quorum.bootstrap.servers`` in the files, the voter set in the
    metadata log, formatted with ``--initial-controllers`` and a new directory id per voter). ``observer_controllers``
    (dynamic quorum only): that many controllers more (node ids after the voters'), formatted with
    ``--no-initial-controllers`` and started but never added to the voter set: observers, as a controller is between
    its start and ``kafka-metadata-quorum add-controller`` (KIP-853). ``client_sasl`` / ``client_tls``: every
    broker gets a second listener, SASL_PLAINTEXT with one user (``settings.SASL_USER``, a password made here) and
    ``sasl_mechanism`` (PLAIN; or SCRAM-SHA-256/512, the credential created in Kafka once the brokers are up and
    accepted by every broker before `up` goes on, ``sandbox.scram``), SSL with a certificate of the sandbox's own
    CA (``sandbox.tls``), or both (SASL_SSL), which the Airflow connection uses (the user and password in its
    login and password, the CA in ``ssl.ca.location``, as an operator's secured cluster); the rest of the sandbox
    keeps the PLAINTEXT listener. ``client_auth`` (with ``client_tls``): the listener requires a client certificate
    of the sandbox's CA (``ssl.client.auth=required``, mutual TLS); the connection names its key pair.
    ``cluster_id``: the cluster's id instead of a random one (Kafka's format,
    :func:`sandbox.kafka_config.check_cluster_id`): in ZooKeeper mode written to ``/cluster/id`` before the first
    broker starts (as a legacy cluster's first broker wrote it; such ids may start with ``-``), in KRaft mode the
    id every node's storage is formatted with.

    Raises:
        SandboxError: bad options, a missing Debian package, a release or Burrow not assembled (``make
            install``), the workdir or broker addresses in use by
            another sandbox, or not healthy within ``timeout_s`` seconds (everything started is stopped
            again; the message names the log to read).
    """
    _validate_up_args(brokers, spares, racks, kafka_version, address_base)
    if cluster_id:
        try:
            kafka_config.check_cluster_id(cluster_id)
        except ValueError as exc:
            raise SandboxError(f"--cluster-id: {exc}") from None
    if sasl_mechanism not in settings.SASL_MECHANISMS:
        raise SandboxError(f"--sasl-mechanism must be one of {', '.join(settings.SASL_MECHANISMS)} "
                           f"(got {sasl_mechanism!r})")
    if sasl_mechanism != settings.SASL_MECHANISM and not client_sasl:
        raise SandboxError(f"--sasl-mechanism {sasl_mechanism} needs --client-sasl (the listener it is for)")
    if client_auth and not client_tls:
        raise SandboxError("--client-auth needs --client-tls (client certificates are checked by the TLS listener)")
    if mode not in ("zookeeper", "kraft"):
        raise SandboxError(f"--mode must be zookeeper or kraft (got {mode!r})")
    if mode == "zookeeper" and kafka_release.RELEASES[kafka_version].major >= 4:
        raise SandboxError(f"Kafka {kafka_version} has no ZooKeeper mode (removed in 4.0): use --mode kraft "
                           "or a 3.x release")
    if mode == "zookeeper":
        if controller_hosts < 0:
            raise SandboxError(f"--controller-hosts cannot be negative (got {controller_hosts})")
        controllers = controller_hosts
    elif controller_hosts:
        raise SandboxError("--controller-hosts is for --mode zookeeper (a KRaft sandbox's controllers run: "
                           "--controllers)")
    if combined and mode != "kraft":
        raise SandboxError("--combined is for --mode kraft (ZooKeeper-mode brokers are no KRaft controllers)")
    if combined < 0 or combined > brokers:
        raise SandboxError(f"--combined must be between 0 and --brokers {brokers} (got {combined})")
    if quorum not in ("static", "dynamic"):
        raise SandboxError(f"--quorum must be static or dynamic (got {quorum!r})")
    if quorum == "dynamic" and mode != "kraft":
        raise SandboxError("--quorum dynamic is for --mode kraft (a ZooKeeper-mode cluster has no quorum of its own)")
    if quorum == "dynamic" and kafka_release.RELEASES[kafka_version].version_tuple < (3, 9):
        raise SandboxError(f"--quorum dynamic needs Kafka 3.9 or later (KIP-853; got {kafka_version})")
    if observer_controllers and (quorum != "dynamic" or combined):
        raise SandboxError("--observer-controllers needs --quorum dynamic and dedicated controllers (no --combined)")
    if observer_controllers < 0:
        raise SandboxError(f"--observer-controllers cannot be negative (got {observer_controllers})")
    if combined:
        controllers = 0  # the quorum is the first `combined` brokers
    elif mode == "kraft" and controllers < 1:
        raise SandboxError(f"--controllers must be at least 1 (got {controllers})")
    if controllers:
        try:
            hosts.address(settings.CONTROLLER_ID_BASE + controllers + observer_controllers - 1, address_base)
        except ValueError as exc:
            raise SandboxError(str(exc)) from None
        if brokers + spares > settings.CONTROLLER_ID_BASE:
            raise SandboxError(f"broker ids must stay below the controllers' "
                               f"{settings.CONTROLLER_ID_BASE} (got {brokers + spares} brokers and spares)")
    try:
        debs.check_packages()
        kafka_release.release_dir(kafka_version)
        burrow_build.require()
    except (debs.MissingPackage, kafka_release.ReleaseError, burrow_build.BurrowBuildError) as exc:
        raise SandboxError(str(exc)) from None
    started = time.monotonic()
    deadline = started + timeout_s

    def remaining() -> float:
        return max(0.1, deadline - time.monotonic())

    def say_timed(message: str) -> None:
        say(f"[{time.monotonic() - started:5.1f} s] {message}")

    with workdir_lock(workdir):
        running = state.running_processes(workdir)
        if running:
            try:
                existing = state.load(workdir)
            except state.NotASandbox:
                existing = None
            wanted = {
                "brokers": brokers,
                "spare_brokers": spares,
                "racks": racks,
                "kafka_version": kafka_version,
                "address_base": address_base,
                "mode": mode,
                "controllers": controllers,
                "broker_config": dict(broker_config or {}),
                "combined": combined,
                "quorum": quorum,
                "observer_controllers": observer_controllers,
                "client_sasl": client_sasl,
                "sasl_mechanism": sasl_mechanism if client_sasl else "",
                "client_tls": client_tls,
                "client_auth": client_auth,
            }
            if existing is not None and existing.options() == wanted and cluster_id in ("", existing.cluster_id):
                problems = _health_problems(existing)
                if problems:
                    raise SandboxError(
                        f"the sandbox in {workdir.root} is already running but not healthy: {problems}; "
                        "start stopped brokers with `kafka-service start` on their hosts, or run "
                        f"`python -m sandbox down --workdir {workdir.root}` and `up` again"
                    )
                say(
                    f"sandbox already running in {workdir.root} ({len(running)} processes); "
                    f"bootstrap servers {existing.bootstrap_servers}"
                )
                return existing
            options = ({**existing.options(), "cluster_id": existing.cluster_id or "Kafka's own"} if existing
                       else "unknown options")
            raise SandboxError(
                f"{workdir.root} is the workdir of another running sandbox ({options}); "
                f"stop it first with `python -m sandbox down --workdir {workdir.root}` "
                "or choose another --workdir"
            )
        _prepare_workdir(workdir)
        specs = hosts.specs(brokers, spares, racks, address_base)
        controller_specs = hosts.controller_specs(controllers + observer_controllers, address_base)
        check_addresses_free(specs + controller_specs)
        info = state.SandboxState(
            workdir=str(workdir.root),
            brokers=brokers,
            spare_brokers=spares,
            racks=racks,
            kafka_version=kafka_version,
            address_base=address_base,
            zookeeper_port=procs.pick_port("127.0.0.1", settings.ZOOKEEPER_PREFERRED_PORT),
            burrow_port=procs.pick_port("127.0.0.1", settings.BURROW_PREFERRED_PORT),
            hosts=[vars(s) for s in specs],
            mode=mode,
            controller_hosts=[{"id": c.id, "host": c.host} for c in controller_specs],
            broker_config=dict(broker_config or {}),
            combined=combined,
            quorum=quorum,
            observer_controllers=observer_controllers,
            sasl_password=secrets.token_urlsafe(18) if client_sasl else "",
            tls_password=secrets.token_urlsafe(18) if client_tls else "",
            sasl_mechanism=sasl_mechanism,
            client_auth=client_auth,
            cluster_id=cluster_id,
        )
        if quorum == "dynamic":
            info.directory_ids = {str(i): kafka_config.new_directory_id() for i in sorted(info.voters)}
        state.save(workdir, info)
        try:
            _start_all(workdir, info, remaining, say_timed)
        except BaseException as exc:
            say(f"sandbox up failed: {exc}; stopping what was started")
            _stop_all(workdir, say=lambda _msg: None)
            if isinstance(exc, SandboxError) or not isinstance(exc, Exception):
                raise
            raise SandboxError(f"sandbox up failed: {exc}") from exc
        metadata = (f"KRaft controllers {sorted(info.voters)}" + (" (combined with brokers)" if combined else "")
                    + (" (dynamic quorum)" if quorum == "dynamic" else "")
                    + (f", observer controllers {sorted(set(info.controllers) - set(info.voters))}"
                       if observer_controllers else "")
                    if info.kraft
                    else f"ZooKeeper {info.zookeeper_connect}")
        say(
            f"sandbox up in {time.monotonic() - started:.1f} s: "
            f"{brokers} brokers ({info.bootstrap_servers}), "
            f"{spares} spare hosts, {metadata}, Burrow {info.burrow_url}; "
            f"see {workdir.env_json}"
        )
        return info


def _health_problems(info: state.SandboxState) -> str | None:
    """None when the running sandbox is healthy (brokers live, URP = 0), else what is wrong."""
    expected = [s.id for s in info.active_specs]
    try:
        health = cluster_health(info.bootstrap_servers, timeout_s=5.0)
    except Exception as exc:  # noqa: BLE001 - no broker answering is the problem to report
        return f"no broker of {info.bootstrap_servers} answers ({exc})"
    return None if health.healthy(expected) else health.problems(expected)


def _failed_start(workdir: Workdir, node_ids: list[int]) -> None:
    """Raise when one of ``node_ids`` has no running JVM and its last start failed (Kafka's reason)."""
    for node_id in node_ids:
        host = workdir.host(node_id)
        if procs.is_alive(procs.read_pid(host.kafka_pid)):  # not kafka_pid(): its command line changes at each exec
            continue
        state_, reason = service.status(host)
        raise SandboxError(f"node {node_id} is not running ({state_}"
                           f"{': ' + reason if reason else ''}); see {host.server_log}")


def _start_all(workdir: Workdir, info: state.SandboxState, remaining: Callable[[], float], say: Say) -> None:
    specs = info.broker_specs
    active = info.active_specs
    sshd.generate_keys(workdir)
    _start_on_free_port(
        workdir,
        info,
        "zookeeper_port",
        "ZooKeeper",
        start=lambda port: zookeeper.start(workdir, port),
        wait=lambda port: zookeeper.wait_serving(workdir, port, timeout_s=remaining()),
        say=say,
        pid_file=workdir.zookeeper_pid,
        logs=(workdir.zookeeper_log,),
    )
    say(f"ZooKeeper serving on {info.zookeeper_connect}" + (" (for Burrow only)" if info.kraft else ""))
    if info.cluster_id and not info.kraft:
        zookeeper.seed_cluster_id(info.zookeeper_port, info.cluster_id)
        say(f"/cluster/id set to {info.cluster_id} before the first broker starts")
    controller_specs = [hosts.BrokerSpec(id=c["id"], host=c["host"], rack="", spare=False)
                        for c in info.controller_hosts]
    for spec in controller_specs:
        if info.kraft:
            hosts.prepare_controller(workdir, spec, info.kafka_version, info.quorum_config, brokers=len(active),
                                     extra=info.broker_config)
        else:  # hosts a migration provisions: no server.properties, nothing started
            hosts.prepare_bare(workdir, spec, info.kafka_version)
    if info.tls_password:  # one broker certificate for every host (spares too), signed by the sandbox's own CA
        tls.write(info.tls_dir, [s.host for s in specs], info.tls_password, client=info.client_auth)
    for spec in specs:
        hosts.prepare(workdir, spec, info.zookeeper_connect, info.kafka_version, brokers=len(active),
                      quorum=info.quorum_config if info.kraft else None, extra=info.broker_config,
                      combined=spec.id in info.voters and info.combined > 0, client=info.client_listener)
    for spec in specs + controller_specs:
        sshd.start(workdir, spec.id, spec.host)
    sshd.write_known_hosts(workdir, [s.host for s in specs + controller_specs])
    if info.kraft:
        first = workdir.host((controller_specs or active)[0].id)
        info.cluster_id = info.cluster_id or kraft_storage.random_cluster_id(first)
        state.save(workdir, info)
        kraft_storage.format_storage(workdir, [s.id for s in controller_specs + active], info.cluster_id, say,
                                     initial_controllers=info.initial_controllers, voter_ids=set(info.voters))
        for spec in controller_specs:
            service.start(workdir.host(spec.id), wait_s=0)
        if controller_specs:
            _wait_quorum_settled(workdir, info, remaining, say)
    for spec in active:
        service.start(workdir.host(spec.id), wait_s=0)
    expected = [s.id for s in active]
    nodes = [s.id for s in (controller_specs if info.kraft else []) + active]
    last: dict = {}

    def all_live() -> bool:
        _failed_start(workdir, nodes)
        last["health"] = cluster_health(info.bootstrap_servers, timeout_s=2.0)
        return set(expected) <= set(last["health"].brokers)

    procs.wait_for(all_live, remaining(), f"brokers {expected} to be live in Kafka's metadata", poll_s=0.3)
    say(f"brokers {expected} live" + (f", controllers {sorted(info.voters)} in the quorum" if info.kraft else "")
        + (f", controllers {sorted(set(info.controllers) - set(info.voters))} observers" if info.observer_controllers
           else ""))
    if info.sasl_password and scram.is_scram(info.sasl_mechanism):
        scram.create_user(info, remaining())
        say(f"{info.sasl_mechanism} user {settings.SASL_USER} created; every broker accepts its login")
    created = workload.create_topics(info.bootstrap_servers, len(active), timeout_s=remaining())
    _wait_partitions_led(info, remaining())
    written = workload.seed(info.bootstrap_servers, len(active), timeout_s=remaining())
    say(f"topics {', '.join(created) or '(existing)'} created, {written} records written")
    procs.spawn(
        [sys.executable, "-m", "sandbox.workload", "--workdir", str(workdir.root)],
        log_file=workdir.workload_log,
        pid_file=workdir.workload_pid,
        workdir=workdir.root,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(Path(__file__).resolve().parent.parent), os.environ.get("PYTHONPATH")])
            ),
        },
    )
    procs.wait_for(lambda: workload.CONSUMER_OFFSETS in cluster_health(info.bootstrap_servers, 2.0).topics,
                   remaining(), "the consumer groups' first commits (__consumer_offsets)", poll_s=0.3)
    _wait_partitions_led(info, remaining())  # __consumer_offsets led before Burrow lists its partitions
    brokers = [f"{s.host}:{settings.BROKER_PORT}" for s in active]
    _start_on_free_port(
        workdir,
        info,
        "burrow_port",
        "Burrow",
        start=lambda port: burrow.start(workdir, brokers=brokers, zookeeper_connect=info.zookeeper_connect,
                                        port=port),
        wait=lambda port: burrow.wait_serving(workdir, burrow.url(port), brokers, timeout_s=remaining()),
        say=say,
        pid_file=workdir.burrow_pid,
        logs=(workdir.burrow_log, workdir.burrow / "burrow.out"),
    )
    for spec in specs + controller_specs:
        sshd.wait_listening(workdir, spec.id, spec.host, timeout_s=remaining())

    def healthy() -> bool:
        _failed_start(workdir, nodes)
        last["health"] = cluster_health(info.bootstrap_servers, timeout_s=2.0)
        return last["health"].healthy(expected)

    try:
        procs.wait_for(healthy, remaining(), "every partition to have a leader and a full ISR", poll_s=0.3)
    except procs.Timeout as exc:
        raise procs.Timeout(f"{exc}: {last['health'].problems(expected)}") from None
    say(f"{last['health'].partitions} partitions led, URP = 0")
    for attempt in range(1, BURROW_STARTS + 1):
        try:
            burrow.wait_ready(workdir, info.burrow_url, list(settings.WORKLOAD_GROUPS), timeout_s=remaining())
            break
        except procs.Abort:
            if attempt == BURROW_STARTS or not burrow.lost_startup_race(workdir):
                raise
            say("Burrow exited: its consumer started while a partition of __consumer_offsets changed leader "
                "(Burrow 1.2 gives up then); starting it again")
            burrow.start(workdir, brokers=brokers, zookeeper_connect=info.zookeeper_connect, port=info.burrow_port)
            burrow.wait_serving(workdir, info.burrow_url, brokers, timeout_s=remaining())
    say(f"Burrow at {info.burrow_url} rates groups {', '.join(settings.WORKLOAD_GROUPS)} OK")
    envfile.write(workdir, info)


def _wait_quorum_settled(workdir: Workdir, info: state.SandboxState, remaining: Callable[[], float],
                         say: Say) -> None:
    """KRaft with dedicated controllers: wait until one controller leads the quorum, every voter has fetched
    from it in its epoch (DescribeQuorum: no voter at end offset -1), and every voter's own log says it follows
    (or is) that leader in that epoch, before any broker starts (the leader's view can run a few ms ahead of a
    follower's logged transition). Started side by
    side on a loaded machine, the voters may elect two leaders in a row (epochs 1 and 2 within milliseconds); a
    broker that came up between them could keep its AlterPartition channel on the deposed one, so its ISR
    expansions never reached the active controller (KAFKA-14154's family). Brokers started after this find the
    settled leader in the metadata log.

    Raises:
        procs.Timeout: no settled quorum within ``remaining()``; SandboxError: a controller exited.
    """
    addresses = [f"{host}:{settings.CONTROLLER_PORT}" for _, host in sorted(info.voters.items())]
    last: dict = {}

    def settled() -> bool:
        _failed_start(workdir, sorted(info.controllers))
        for address in addresses:
            try:
                described = status.controller_quorum(address, timeout_s=2.0)
            except Exception as exc:  # noqa: BLE001 - not listening yet: ask the next one
                last["error"] = f"{address}: {exc}"
                continue
            if described is None:
                continue
            last["quorum"] = described
            offsets = {v["id"]: v["end_offset"] for v in described["voters"]}
            return (set(offsets) >= set(info.voters) and min(offsets.values()) >= 0
                    and all(described["epoch"] in node_log.raft_settled_epochs(workdir.host(voter).server_log)
                            for voter in info.voters))
        return False

    try:
        procs.wait_for(settled, remaining(), "the KRaft quorum to elect a leader every voter follows", poll_s=0.2)
    except procs.Timeout as exc:
        raise procs.Timeout(f"{exc}: last answer {last.get('quorum') or last.get('error')}") from None
    say(f"quorum leader {last['quorum']['leader']} (epoch {last['quorum']['epoch']}), followed by every voter")


def _wait_partitions_led(info: state.SandboxState, timeout_s: float) -> None:
    """Wait until every partition in Kafka's metadata has a leader."""
    last: dict = {}

    def led() -> bool:
        last["health"] = cluster_health(info.bootstrap_servers, timeout_s=2.0)
        return last["health"].partitions > 0 and not last["health"].offline

    try:
        procs.wait_for(led, timeout_s, "every partition to have a leader", poll_s=0.2)
    except procs.Timeout as exc:
        raise procs.Timeout(f"{exc}: {last.get('health') and last['health'].problems([])}") from None


def _start_on_free_port(
    workdir: Workdir,
    info: state.SandboxState,
    attr: str,
    what: str,
    *,
    start: Callable[[int], object],
    wait: Callable[[int], object],
    say: Say,
    pid_file: Path,
    logs: tuple[Path, ...] = (),
    attempts: int = 3,
) -> None:
    """Start a server on the port ``info.<attr>`` and wait until it serves. When it dies because another
    process took that port since it was picked (sandboxes starting side by side: the port is held now,
    or one of ``logs`` says "address already in use"), retry on a free port (``info`` and sandbox.json
    updated).

    Raises:
        procs.Abort: it died for another reason, or after ``attempts`` tries.
        procs.Timeout: it did not serve in time.
    """
    for attempt in range(1, attempts + 1):
        port = getattr(info, attr)
        start(port)
        try:
            wait(port)
            return
        except procs.Abort:
            taken = procs.port_in_use("127.0.0.1", port) or any(
                "address already in use" in _tail(path).lower() for path in logs
            )
            if attempt == attempts or not taken:
                raise
            procs.stop_pids([p for p in [procs.read_pid(pid_file)] if p], STOP_HELPER_TIMEOUT_S)
            new_port = procs.free_port("127.0.0.1")
            say(f"{what}: port {port} was taken by another process meanwhile; retrying on {new_port}")
            setattr(info, attr, new_port)
            state.save(workdir, info)


def _tail(path: Path, size: int = 4096) -> str:
    """The last ``size`` bytes of ``path`` as text ("" when missing)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, path.stat().st_size - size))
            return handle.read().decode(errors="replace")
    except OSError:
        return ""


def _stop_all(workdir: Workdir, say: Say) -> list[str]:
    """Stop every process of ``workdir`` in dependency order; returns what was stopped."""
    stopped: list[str] = []

    def stop(names: list[str], pids: list[int], timeout_s: float) -> None:
        pairs = [(n, p) for n, p in zip(names, pids, strict=True) if p]
        if not pairs:
            return
        killed = set(procs.stop_pids([p for _, p in pairs], timeout_s))
        for name, pid in pairs:
            stopped.append(name + (" (SIGKILL)" if pid in killed else ""))

    running = state.running_processes(workdir)
    for pid in running.values():  # a frozen (SIGSTOP) process would not see SIGTERM
        procs.signal_pid(pid, signal.SIGCONT)
    for name in ("workload", "burrow"):
        stop([name], [running.get(name, 0)], STOP_HELPER_TIMEOUT_S)
    # brokers before KRaft controllers: a broker's controlled shutdown needs the active controller, and
    # controllers stopped alongside would leave every broker waiting for the SIGKILL
    controllers = _controller_ids(workdir)
    nodes = [n for n in running if n.startswith("kafka-")]
    for is_controller in (False, True):
        names = [n for n in nodes if (int(n.split("-")[1]) in controllers) == is_controller]
        stop(names, [running[n] for n in names], NODE_STOP_TIMEOUT_S)
    sshd_names = [n for n in running if n.startswith("sshd-")]
    stop(sshd_names, [running[n] for n in sshd_names], STOP_HELPER_TIMEOUT_S)
    stop(["zookeeper"], [running.get("zookeeper", 0)], STOP_HELPER_TIMEOUT_S)
    leftovers = procs.find_workdir_processes(workdir.root)
    if leftovers:
        say(f"stopping leftover processes of {workdir.root}: {leftovers}")
        stop([f"pid-{p}" for p in leftovers], leftovers, STOP_HELPER_TIMEOUT_S)
    return stopped


def _controller_ids(workdir: Workdir) -> set[int]:
    """The node ids of the KRaft voters (dedicated controllers, or combined brokers), and of the hosts a migration
    provisions; empty for a workdir without a sandbox."""
    try:
        info = state.load(workdir)
    except state.NotASandbox:
        return set()
    return set(info.controllers)


def _kill_all(workdir: Workdir) -> list[str]:
    """SIGKILL every process of ``workdir`` at once (a frozen one too) and wait until each is gone; returns
    what was killed."""
    running = {n: p for n, p in state.running_processes(workdir).items() if p}
    leftovers = [p for p in procs.find_workdir_processes(workdir.root) if p not in running.values()]
    pids = [*running.values(), *leftovers]
    alive = [p for p in pids if procs.is_alive(p)]
    procs.stop_pids(alive, STOP_HELPER_TIMEOUT_S, signal.SIGKILL)
    return [f"{n} (SIGKILL)" for n, p in running.items() if p in alive] + [f"pid-{p} (SIGKILL)" for p in leftovers
                                                                            if p in alive]


def down(workdir: Workdir, say: Say = say_to_stderr, kill: bool = False) -> list[str]:
    """Stop everything the sandbox in ``workdir`` started (workload, Burrow, brokers with SIGTERM =
    controlled shutdown then SIGKILL, then KRaft controllers likewise, sshd, ZooKeeper, then any leftover
    process marked with this workdir). Keeps logs and data; removes env.json and airflow.env. Returns what was
    stopped.

    ``kill``: SIGKILL everything at once instead, for a sandbox that is thrown away (no controlled shutdown:
    10 Kafka nodes go in about a second instead of one controlled shutdown after another)."""
    if not workdir.root.exists():
        say(f"no sandbox in {workdir.root}")
        return []
    with workdir_lock(workdir):
        stopped = _kill_all(workdir) if kill else _stop_all(workdir, say)
        for path in (workdir.env_json, workdir.airflow_env):
            path.unlink(missing_ok=True)
    say(
        f"sandbox in {workdir.root} stopped: {', '.join(stopped)}"
        if stopped
        else f"nothing running in {workdir.root}"
    )
    return stopped
