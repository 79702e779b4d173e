"""Test sandboxes an ended test session left running are found by their net and pytest's directories, and thrown
away (sandbox.testing.orphaned_sandboxes, tests/conftest.py). Real processes stand in for the sandbox's: what is
judged is which workdirs are named and that ``down --kill`` leaves nothing of them running."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sandbox import hosts, procs, state, testing
from sandbox.layout import Workdir


def _sandbox_left_running(root: Path, address_base: str, with_state: bool = True) -> tuple[Path, int]:
    """A workdir under ``root`` with a ``sandbox.json`` on ``address_base`` and a process marked with it."""
    workdir = Workdir.at(root)
    if with_state:
        state.save(workdir, state.SandboxState(
            workdir=str(workdir.root), brokers=3, spare_brokers=0, racks=3, kafka_version="3.6.2",
            address_base=address_base, zookeeper_port=2181, burrow_port=8000,
            hosts=[vars(s) for s in hosts.specs(3, 0, 3, address_base)],
        ))
    pid = procs.spawn([sys.executable, "-c", "import time; time.sleep(120)"], log_file=workdir.root / "stand-in.log",
                      pid_file=None, workdir=workdir.root)
    return workdir.root, pid


@pytest.fixture
def left_running(tmp_path):
    pids: list[int] = []

    def make(*parts: str, address_base: str, with_state: bool = True) -> Path:
        workdir, pid = _sandbox_left_running(tmp_path.joinpath(*parts), address_base, with_state)
        pids.append(pid)
        return workdir

    yield make
    procs.stop_pids(pids, timeout_s=5)


def test_only_the_test_sandboxes_on_the_claimed_net_are_named_and_thrown_away(tmp_path, left_running):
    pytest_root = tmp_path / "pytest-of-someone"
    hung_fresh = left_running("pytest-of-someone", "pytest-7", "sandbox-fresh3", address_base="127.201.3.11")
    hung_shared = left_running("pytest-of-someone", "pytest-7", "sandbox-shared0", address_base="127.201.0.11")
    other_net = left_running("pytest-of-someone", "pytest-8", "sandbox-fresh1", address_base="127.202.1.11")
    by_hand = left_running("bench", "12", "sandbox", address_base="127.201.32.11")  # outside pytest's directories
    unreadable = left_running("pytest-of-someone", "pytest-7", "sandbox-fresh4", address_base="127.201.4.11",
                              with_state=False)

    assert testing.orphaned_sandboxes(201, pytest_root) == sorted([hung_fresh, hung_shared])
    assert testing.orphaned_sandboxes(202, pytest_root) == [other_net]
    assert testing.orphaned_sandboxes(203, pytest_root) == []
    assert testing.stop_orphaned_sandboxes(203, pytest_root) == {}

    stopped = testing.stop_orphaned_sandboxes(201, pytest_root)  # what tests/conftest.py runs on its claimed net
    assert {w: r.returncode for w, r in stopped.items()} == {hung_fresh: 0, hung_shared: 0}, \
        {w: r.stderr for w, r in stopped.items()}
    running = procs.running_workdirs()
    assert not {hung_fresh, hung_shared} & running
    assert {other_net, by_hand, unreadable} <= running
    assert testing.orphaned_sandboxes(201, pytest_root) == []


def test_the_temp_root_looked_in_is_where_pytest_put_this_session(tmp_path, request):
    if request.config.option.basetemp:
        pytest.skip("--basetemp puts the session's directories elsewhere (documented: not looked in)")
    assert tmp_path.resolve().is_relative_to(testing.pytest_temp_root())
