"""Whether what a node registers with answers now, as seen from the run (``kafka_ops.start_needs`` says what
that is): ZooKeeper (a kazoo session opened and ``/brokers/ids`` read within a few seconds) or a KRaft quorum
leader (DescribeQuorum answered with a leader, KIP-595; brokers forward it to the active controller).

A roll waits for these before it starts a node and asks them again when a start failed
(``operators.node_roll``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from kafka_ops.profile import ClusterProfile
from kafka_ops.roll_spec import ClusterMode
from kafka_ops.start_needs import QUORUM_LEADER, ZOOKEEPER, registers_with

from runtime import kept_clients
from runtime.waiting import Check

#: Seconds a ZooKeeper check may take (connect + one read).
ZOOKEEPER_CHECK_S = 5.0
#: kazoo's connect / close lines at INFO would come with every check: only its warnings are kept.
_QUIET = logging.getLogger("kafka_ops.kazoo")
_QUIET.setLevel(logging.WARNING)


@dataclass(frozen=True)
class Dependency:
    """What a node needs answering before it starts: ``name`` for the log ("ZooKeeper 127.0.0.1:2181/kafka"),
    ``short`` for the Grid label ("ZooKeeper"), ``answers()`` a fresh look (never raises: an error is a negative
    answer with its reason)."""

    name: str
    short: str
    answers: Callable[[], Check]


def zookeeper_answers(connect: str, timeout_s: float = ZOOKEEPER_CHECK_S) -> Check:
    """ZooKeeper ``connect`` (with chroot) gives a session and answers a read within ``timeout_s`` seconds. Within
    ``runtime.kept_clients.kept_open`` (a node roll's task) the session is kept for the next check, which reads again
    on it (a session opened per check took 0.1-0.7 s of a batch's critical path on a loaded 2-core sandbox, three
    times a batch); a check that fails closes it, so the next one asks for a new session."""
    try:
        with kept_clients.client(("zookeeper", connect), lambda: _kazoo_session(connect, timeout_s)) as zk:
            brokers = zk.get_children_async("/brokers/ids").get(timeout=timeout_s)
        return Check(True, f"ZooKeeper answers ({len(brokers)} brokers registered)")
    except Exception as exc:  # noqa: BLE001 - every failure is the answer "does not answer"
        return Check(False, f"ZooKeeper {connect} does not answer: {type(exc).__name__}: {exc}")


@contextmanager
def _kazoo_session(connect: str, timeout_s: float) -> Iterator[Any]:
    """A started kazoo client on ``connect`` (its session opened within ``timeout_s`` s), stopped and closed after."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=connect, timeout=timeout_s, logger=_QUIET)
    try:
        client.start(timeout=timeout_s)
        yield client
    finally:
        try:
            client.stop()
            client.close()
        except Exception:  # noqa: BLE001, S110 - closing a client that never connected
            pass


def quorum_leader_answers(admin: Any) -> Check:
    """DescribeQuorum through ``admin`` (a ``hooks.kafka_admin.KafkaAdminHook``) names a leader; when the brokers
    cannot forward it (ZooKeeper-mode brokers during the migration), asked of the profile's controllers directly."""
    try:
        quorum = admin.describe_quorum()
    except Exception as exc:  # noqa: BLE001 - the answer is "no leader reachable"
        addresses = admin.profile.controller_addresses() if getattr(admin, "profile", None) else []
        if not addresses:
            return Check(False, f"no KRaft quorum leader answers: {type(exc).__name__}: {exc}")
        try:
            quorum = admin.controller_quorum(addresses)
        except Exception as direct:  # noqa: BLE001 - the answer is "no leader reachable"
            return Check(False, f"no KRaft quorum leader answers (brokers: {type(exc).__name__}; controllers "
                                f"{', '.join(addresses)}: {type(direct).__name__}: {direct})")
    if not quorum.has_leader:
        return Check(False, "the KRaft quorum has no leader (an election is going on)")
    return Check(True, f"KRaft quorum leader {quorum.leader_id} answers (epoch {quorum.leader_epoch})")


def zookeeper_connect(profile: ClusterProfile, admin: Any, running: Callable[[], list[int]]) -> str | None:
    """The ZooKeeper connect string: the profile's ``zookeeper``, else the ``zookeeper.connect`` a running broker
    reports (DescribeConfigs; ``running()`` gives their ids, asked only then); None when neither can be had."""
    if profile.zookeeper:
        return profile.zookeeper
    for bid in running():
        try:
            value = admin.describe_broker_configs(bid, ["zookeeper.connect"]).get("zookeeper.connect")
        except Exception:  # noqa: BLE001 - try the next broker
            continue
        if value:
            return str(value)
    return None


def dependencies(node: str, mode: ClusterMode, profile: ClusterProfile, admin: Any,
                 running: Callable[[], list[int]]) -> list[Dependency]:
    """What ``node`` (``"broker"``, ``"controller"``) needs answering in ``mode``, as checks. A ZooKeeper whose
    connect string cannot be had (not in the profile, no running broker to ask) is left out: nothing to check."""
    out = []
    for need in registers_with(node, mode):
        if need == ZOOKEEPER:
            connect = zookeeper_connect(profile, admin, running)
            if connect:
                out.append(Dependency(f"ZooKeeper {connect}", "ZooKeeper", lambda c=connect: zookeeper_answers(c)))
        elif need == QUORUM_LEADER:
            out.append(Dependency("the KRaft quorum leader", "quorum leader", lambda: quorum_leader_answers(admin)))
    return out


def all_answer(deps: list[Dependency]) -> Check:
    """Every one of ``deps`` answers now (the first that does not is named)."""
    lines = []
    for dep in deps:
        check = dep.answers()
        if not check.ok:
            return check
        lines.append(check.message)
    return Check(True, "; ".join(lines) or "nothing to wait for")

