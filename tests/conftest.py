"""Shared pytest fixtures: the sandbox cluster (one per session) and fresh sandboxes for destructive tests.

- ``sandbox`` (session): ``python -m sandbox up`` once per session in a temp workdir (the files that use it run
  last, see ``pytest_collection_modifyitems``); yields a
  :class:`sandbox.testing.RunningSandbox` (``.env`` = parsed env.json, ``.workdir``, ``.up_seconds``,
  helpers ``.cli()``, ``.ssh()``, ``.zk()``, ``.status()``, ``.wait_healthy()``, ``.group_status()``);
  ``down`` at the end. Tests using it must leave it healthy (every broker running, URP = 0).
- ``sandbox_env`` (session): just the parsed env.json of ``sandbox``.
- ``sandbox_net`` (session): the second address octet of this session's sandboxes (see below), for
  module-scoped sandboxes of their own (``sandbox.testing.start(workdir, address_base=...)``).
- ``fresh_sandbox`` (function): a factory ``fresh_sandbox(brokers=3, spare_brokers=0, racks=3,
  kafka_version=None)`` -> RunningSandbox in its own workdir, downed when the test ends. For tests that
  crash brokers, reassign, stall groups or otherwise leave damage.

Addresses: broker N of a sandbox listens on ``<address base> + N`` (``up --address-base``). Every sandbox
of a test session gets its own /24 in 127/8, so the shared sandbox and fresh ones run side by side:
``127.<A>.0.11`` for the shared one, ``127.<A>.<k>.11`` for the k-th fresh one (k = 1, 2, ...), where
``A`` is claimed per session (a lock file in /tmp), starting at ``--sandbox-net`` / ``$SANDBOX_TEST_NET``
(default 0) plus the pytest-xdist worker number, so parallel sessions (or a developer's own `sandbox up`
on 127.0.0.11) do not collide. Once a session holds a net's lock, test sandboxes still running on that net
(under pytest's temporary directories) were left by a session that ended without its teardown (the hang guard,
``faulthandler_exit_on_timeout`` in pyproject.toml, or a kill): they are thrown away (``down --kill``) before the
net is used.
ZooKeeper and Burrow fall back to free ports by themselves.

``--sandbox-workdir DIR`` reuses a sandbox that is already up in DIR (not stopped at the end).

Marker ``extended`` (pyproject.toml): the rest of the fault matrix beyond CI's tier, and operations in a shape CI
runs in another (the ZooKeeper-mode batched roll, the combined-mode KRaft roll); ``make test`` runs
``-m "not extended"``, ``make test-all`` everything.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sandbox import procs, testing

# Airflow reads its configuration when first imported: give every test session a throwaway
# AIRFLOW_HOME (SQLite) with our dags/ and plugins/ before any test module imports it.
# Test helper modules are imported by name from their folders (observers, broker_support, airflow_env).
for _helpers in ("dags", "integration"):
    sys.path.insert(0, str(Path(__file__).resolve().parent / _helpers))
import airflow_env  # noqa: E402

airflow_env.configure_environment()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("sandbox")
    group.addoption(
        "--sandbox-net",
        type=int,
        default=int(os.environ.get("SANDBOX_TEST_NET", "0")),
        help="second octet of the 127.X.0.0/16 the test sandboxes' brokers use "
        "(default $SANDBOX_TEST_NET or 0)",
    )
    group.addoption(
        "--sandbox-workdir",
        default=os.environ.get("SANDBOX_TEST_WORKDIR"),
        help="use the sandbox already running in this workdir instead of starting one",
    )


_NET_KEY = pytest.StashKey[int]()
_net_locks: list = []  # open lock files: a claim lasts as long as this process


def _net(config: pytest.Config) -> int:
    """Claim this session's address net: the first ``A`` from ``--sandbox-net`` (+ xdist worker number)
    up whose lock ``/tmp/kafka-ops-sandbox-net-A.lock`` we get and whose ``127.A.0.11:9092`` is free,
    so concurrent test sessions on one machine never share broker addresses. ``config.option.sandbox_net``
    is updated to match (helpers that read the option see the claimed net)."""
    if _NET_KEY in config.stash:
        return config.stash[_NET_KEY]
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
    start = config.getoption("--sandbox-net") + worker
    for net in range(start, 256):
        handle = open(f"/tmp/kafka-ops-sandbox-net-{net}.lock", "a+")  # held for the session
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            continue
        _stop_orphaned_sandboxes(net)
        if procs.port_in_use(f"127.{net}.0.11", 9092):  # e.g. a sandbox started by hand on this net
            handle.close()
            continue
        _net_locks.append(handle)
        config.stash[_NET_KEY] = net
        config.option.sandbox_net = net - worker
        return net
    raise pytest.UsageError(f"no free sandbox address net in 127.{start}..255.0.0")


def _stop_orphaned_sandboxes(net: int) -> None:
    """Throw away the test sandboxes an earlier session left running on ``net``, whose lock this session now holds
    (:func:`sandbox.testing.stop_orphaned_sandboxes`): the hang guard ends a session without its fixtures'
    teardown, and the next session's sandbox on the same addresses would meet the old one's brokers."""
    for workdir, result in testing.stop_orphaned_sandboxes(net, testing.pytest_temp_root()).items():
        print(f"stopped a sandbox an earlier test session left running on 127.{net}.*: {workdir} "
              f"(exit {result.returncode}{': ' + result.stderr.strip() if result.returncode else ''})",
              file=sys.stderr)


def pytest_configure(config: pytest.Config) -> None:
    _net(config)  # claim the net before any fixture or helper reads --sandbox-net


@pytest.fixture(scope="session")
def sandbox_net(request: pytest.FixtureRequest) -> int:
    """Second octet of this session's sandbox addresses (``--sandbox-net`` plus the xdist worker number):
    a sandbox of your own goes on ``127.<sandbox_net>.<slot>.11`` with a slot no other fixture uses."""
    return _net(request.config)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The test files that use the shared sandbox run last, one after the other: the ``sandbox`` fixture starts
    it when the first of them needs it, so it does not idle (its brokers, ZooKeeper, Burrow and workload take
    about 0.4 of a core at rest) beside the files that start sandboxes of their own. The files keep their order
    within each group and their tests the order they have in the file (a module's fixtures are set up once)."""
    users = {item.path for item in items if {"sandbox", "sandbox_env"} & set(item.fixturenames)}
    items.sort(key=lambda item: item.path in users)  # stable


@pytest.fixture(scope="session")
def sandbox(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[testing.RunningSandbox]:
    """The session's shared sandbox (3 brokers, racks 3, 1 spare host), healthy when handed out. Its Airflow
    connection goes through the brokers' SASL listener (``--client-sasl``): every operation run on it authenticates,
    as on a secured fleet (the fresh sandboxes' connections use PLAINTEXT, so both are run)."""
    existing = request.config.getoption("--sandbox-workdir")
    if existing:
        running = testing.RunningSandbox.load(Path(existing))
        yield running
        running.close()
        return
    workdir = tmp_path_factory.mktemp("sandbox-shared")
    running = testing.start(
        workdir, brokers=3, spare_brokers=1, address_base=f"127.{_net(request.config)}.0.11", client_sasl=True
    )
    print(f"\nsandbox up took {running.up_seconds:.1f} s ({workdir}, brokers on {running.bootstrap_servers})")
    try:
        yield running
    finally:
        result = testing.stop(running)
        assert result.returncode == 0, f"sandbox down failed: {result.stderr}"


@pytest.fixture(scope="session")
def sandbox_env(sandbox: testing.RunningSandbox) -> dict:
    """The shared sandbox's env.json, parsed."""
    return sandbox.env


_fresh_counter = itertools.count(1)


@pytest.fixture
def fresh_sandbox(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., testing.RunningSandbox]]:
    """Factory for sandboxes of this test only (own workdir and broker addresses); all downed at the end."""
    started: list[testing.RunningSandbox] = []

    def make(
        brokers: int = 3, spare_brokers: int = 0, racks: int = 3, kafka_version: str | None = None,
        mode: str = "zookeeper", controllers: int = 3, combined: int = 0, quorum: str = "static",
        observer_controllers: int = 0, broker_config: dict[str, str] | None = None, client_sasl: bool = False,
        client_tls: bool = False, sasl_mechanism: str | None = None, client_auth: bool = False,
    ) -> testing.RunningSandbox:
        k = next(_fresh_counter)
        if k > 254:
            raise pytest.UsageError("more than 254 fresh sandboxes in one session")
        workdir = tmp_path_factory.mktemp("sandbox-fresh")
        running = testing.start(
            workdir,
            brokers=brokers,
            spare_brokers=spare_brokers,
            racks=racks,
            kafka_version=kafka_version,
            address_base=f"127.{_net(request.config)}.{k}.11",
            mode=mode,
            controllers=controllers,
            combined=combined,
            quorum=quorum,
            observer_controllers=observer_controllers,
            broker_config=broker_config,
            client_sasl=client_sasl,
            client_tls=client_tls,
            sasl_mechanism=sasl_mechanism,
            client_auth=client_auth,
        )
        started.append(running)
        return running

    yield make
    errors = []
    for running in started:  # thrown away: SIGKILL, no controlled shutdown to wait for (the shared one is downed)
        result = testing.stop(running, kill=True)
        if result.returncode != 0:
            errors.append(result.stderr)
        elif left := procs.find_workdir_processes(running.workdir):
            errors.append(f"still running after down --kill: {left}")
    assert not errors, f"sandbox down failed: {errors}"
