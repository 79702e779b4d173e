"""KRaft controller quorum rules: which controller may be restarted now, and in what order.

The rule is Strimzi's KafkaRoller's (``KafkaQuorumCheck``), from Kafka's own definition of a caught-up
voter (KIP-595, ``DescribeQuorum``): a follower voter is caught up when its ``lastCaughtUpTimestamp`` is
within ``controller.quorum.fetch.timeout.ms`` (Kafka default 2,000 ms) of the leader's; the leader is
caught up by definition. A controller may be restarted only when, without it, the caught-up voters still
form a majority of all voters (``voters // 2 + 1``): otherwise the quorum could not commit (or elect) while
it is down. Order: followers first (in id order, or as requested), the active controller (the quorum
leader) last, one at a time.

Pure rules: the quorum comes in as a :class:`Quorum` (built from kafka-python's ``describe_metadata_quorum``
answer by :meth:`Quorum.from_describe`). Timestamps in that answer are the *leader's* wall clock (ms since the
epoch): ``LastFetchTimestamp`` is -1 for the leader itself, ``LastCaughtUpTimestamp`` the leader's current
time (DescribeQuorumResponse v1, KIP-836). DescribeQuorum v2 (Kafka 3.8+, KIP-853) also names each
controller's listeners (``nodes``): :attr:`Quorum.endpoints`.

What a controller roll adds on top (host resolution, leader-last at each turn, "gone" and "back") lives in
:mod:`kafka_ops.controller_roll`.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kafka_ops.health import Verdict

#: Kafka's default ``controller.quorum.fetch.timeout.ms``.
DEFAULT_FETCH_TIMEOUT_MS = 2000


#: The directory id DescribeQuorum gives a replica of a static quorum (KIP-853: no directory id).
NO_DIRECTORY_ID = "00000000-0000-0000-0000-000000000000"


@dataclass(frozen=True)
class Voter:
    """One replica of the metadata log: ``replica_id``; ``log_end_offset``; epoch milliseconds of its last fetch
    and of the last time it was caught up with the leader (-1 / None when unknown); ``directory_id``: the id of its
    metadata log directory in a dynamic quorum (KIP-853, DescribeQuorum v2; a UUID in its dashed form), None in a
    static quorum or before v2. In a dynamic quorum a voter is its node id *and* that directory id."""

    replica_id: int
    log_end_offset: int = -1
    last_fetch_ms: int | None = None
    last_caught_up_ms: int | None = None
    directory_id: str | None = None


def directory_id_text(directory_id: str) -> str:
    """A directory id as Kafka's tools print and take it (``kafka-metadata-quorum --controller-directory-id``:
    22 characters, URL-safe base64 of the 16 bytes, no padding) from the dashed UUID form kafka-python answers with
    (``"eda73901-4fd6-9f51-8704-bde596549ae2"`` -> ``"7ac5AU_Wn1GHBL3lllSa4g"``); anything else is returned as is."""
    try:
        raw = uuid.UUID(directory_id).bytes
    except ValueError:
        return directory_id
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@dataclass(frozen=True)
class Endpoint:
    """One listener of a controller, as DescribeQuorum v2 names it (``Nodes[].Listeners[]``, KIP-853):
    the controller's node id, the listener name (``"CONTROLLER"``), host and port."""

    node_id: int
    listener: str
    host: str
    port: int


@dataclass(frozen=True)
class Quorum:
    """The ``__cluster_metadata`` quorum: leader (-1 = none known), epoch, high watermark (offset), voters,
    observers (brokers and controllers that are not voters), and the controllers' endpoints (DescribeQuorum
    v2 only; empty before Kafka 3.8)."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[Voter, ...]
    observers: tuple[Voter, ...] = ()
    endpoints: tuple[Endpoint, ...] = ()

    @property
    def voter_ids(self) -> list[int]:
        return sorted(v.replica_id for v in self.voters)

    @property
    def has_leader(self) -> bool:
        """True when the answer names a leader that is one of the voters (no election under way)."""
        return self.leader_id >= 0 and self.voter(self.leader_id) is not None

    def voter(self, replica_id: int) -> Voter | None:
        return next((v for v in self.voters if v.replica_id == replica_id), None)

    def observer(self, replica_id: int) -> Voter | None:
        """The observer entry of node ``replica_id`` (a broker, or a controller that is not a voter), if any."""
        return next((o for o in self.observers if o.replica_id == replica_id), None)

    def hosts_of(self, node_id: int) -> list[str]:
        """The distinct hosts of ``node_id``'s listeners, in the answer's order (empty when DescribeQuorum did
        not name its endpoints: v0/v1, or a node it does not know)."""
        return list(dict.fromkeys(e.host for e in self.endpoints if e.node_id == node_id and e.host))

    @classmethod
    def from_describe(cls, answer: Mapping[str, Any]) -> Quorum:
        """From kafka-python's ``KafkaAdminClient.describe_metadata_quorum()`` (DescribeQuorum v1+ fields:
        ``leader_id``, ``leader_epoch``, ``high_watermark``, ``current_voters`` / ``observers`` with
        ``replica_id``, ``log_end_offset``, ``last_fetch_timestamp``, ``last_caught_up_timestamp``), either
        flat or under ``topics[0].partitions[0]`` as on the wire. kafka-python 3.0 returns the wire shape
        (``{"topics": [...], "nodes": [...]}``); v2's top-level ``nodes`` (``[{"node_id", "listeners":
        [{"name", "host", "port"}]}]``) become :attr:`endpoints`.

        :raises ValueError: no quorum partition in the answer.
        """
        part: Mapping[str, Any] = answer
        if "topics" in answer:
            try:
                part = answer["topics"][0]["partitions"][0]
            except (IndexError, KeyError, TypeError):
                raise ValueError(f"DescribeQuorum answer without a partition: {answer!r}"[:300]) from None

        def voters(rows: Iterable[Mapping[str, Any]] | None) -> tuple[Voter, ...]:
            out = []
            for r in rows or ():
                fetch = r.get("last_fetch_timestamp")
                caught = r.get("last_caught_up_timestamp")
                directory = r.get("replica_directory_id")
                directory = str(directory) if directory and str(directory) != NO_DIRECTORY_ID else None
                out.append(Voter(int(r["replica_id"]), int(r.get("log_end_offset", -1)),
                                 None if fetch is None or int(fetch) < 0 else int(fetch),
                                 None if caught is None or int(caught) < 0 else int(caught), directory))
            return tuple(out)

        endpoints = []
        for node in answer.get("nodes") or ():
            for listener in node.get("listeners") or ():
                endpoints.append(Endpoint(int(node["node_id"]), str(listener.get("name") or ""),
                                          str(listener.get("host") or ""), int(listener.get("port") or 0)))
        return cls(int(part["leader_id"]), int(part.get("leader_epoch", -1)), int(part.get("high_watermark", -1)),
                   voters(part.get("current_voters")), voters(part.get("observers")), tuple(endpoints))


def caught_up(quorum: Quorum, fetch_timeout_ms: int = DEFAULT_FETCH_TIMEOUT_MS) -> set[int]:
    """Voter ids caught up with the leader (see the module docstring); empty without a leader."""
    leader = quorum.voter(quorum.leader_id)
    if leader is None:
        return set()
    return {leader.replica_id} | {v.replica_id for v in quorum.voters
                                  if v.replica_id != leader.replica_id and replica_caught_up(quorum, v,
                                                                                             fetch_timeout_ms)}


def replica_caught_up(quorum: Quorum, replica: Voter, fetch_timeout_ms: int = DEFAULT_FETCH_TIMEOUT_MS) -> bool:
    """Whether ``replica`` (a voter's or an observer's entry) was caught up with the leader within
    ``fetch_timeout_ms`` of the leader's own time (its ``LastCaughtUpTimestamp``; KIP-595, KIP-836); False without a
    leader or when it never caught up."""
    leader = quorum.voter(quorum.leader_id)
    if leader is None or replica.last_caught_up_ms is None:
        return False
    reference = leader.last_caught_up_ms if leader.last_caught_up_ms is not None else leader.last_fetch_ms
    return reference is None or reference - replica.last_caught_up_ms < fetch_timeout_ms


def replaced_voter(quorum: Quorum, node_id: int, since_ms: int | None = None) -> tuple[str, str] | None:
    """``(voter's directory id, observer's directory id)``, in Kafka's form (:func:`directory_id_text`), when voter
    ``node_id`` of a dynamic quorum (KIP-853: a voter is its node id and its directory id) also fetches as an
    *observer* under another directory id: its metadata log directory was formatted again or replaced, and the voter
    it was stays silent until ``kafka-metadata-quorum remove-controller`` / ``add-controller``. ``since_ms``: only an
    observer that fetched after it (epoch ms, the leader's clock) counts. None otherwise (and in a static quorum,
    which has no directory ids)."""
    voter, observer = quorum.voter(node_id), quorum.observer(node_id)
    if voter is None or observer is None or not voter.directory_id or not observer.directory_id:
        return None
    if observer.directory_id == voter.directory_id:
        return None
    if since_ms is not None and (observer.last_fetch_ms or 0) <= since_ms:
        return None
    return directory_id_text(voter.directory_id), directory_id_text(observer.directory_id)


def majority(voters: int) -> int:
    """Votes a quorum of ``voters`` needs (Raft: more than half)."""
    return voters // 2 + 1


def can_restart_controller(quorum: Quorum, controller_id: int,
                           fetch_timeout_ms: int = DEFAULT_FETCH_TIMEOUT_MS) -> Verdict:
    """Whether ``controller_id`` may go down now: without it a majority of all voters stays caught up.

    The verdict's reasons name the lagging voters and the counts ("controller 3001 may NOT be restarted:
    without it 1 of 3 voters caught up (needs 2); lagging: 3002 (last caught up 5400 ms before the
    leader)").
    """
    rule = f"quorum without controller {controller_id}"
    if quorum.voter(controller_id) is None:
        return Verdict(False, [f"controller {controller_id} is not a voter of the quorum {quorum.voter_ids}"], rule)
    if quorum.voter(quorum.leader_id) is None:
        return Verdict(False, [f"the quorum has no leader (leader id {quorum.leader_id})"], rule)
    up = caught_up(quorum, fetch_timeout_ms) - {controller_id}
    need = majority(len(quorum.voters))
    if len(up) >= need:
        return Verdict(True, [], rule)
    leader = quorum.voter(quorum.leader_id)
    ref = leader.last_caught_up_ms or leader.last_fetch_ms
    lagging = []
    for v in quorum.voters:
        if v.replica_id in up or v.replica_id == controller_id:
            continue
        behind = "never caught up" if v.last_caught_up_ms is None or ref is None else \
            f"last caught up {ref - v.last_caught_up_ms} ms before the leader"
        replaced = replaced_voter(quorum, v.replica_id)
        if replaced:
            behind += (f"; its metadata log directory was replaced: it fetches as an observer under directory id "
                       f"{replaced[1]}, the voter set has {replaced[0]}")
        lagging.append(f"{v.replica_id} ({behind}, log end {v.log_end_offset} of {quorum.high_watermark})")
    return Verdict(False, [f"without it {len(up)} of {len(quorum.voters)} voters caught up (needs {need}, "
                           f"controller.quorum.fetch.timeout.ms {fetch_timeout_ms})",
                           *(f"lagging: {x}" for x in lagging)], rule)


def controller_order(quorum: Quorum, requested: Iterable[int] | None = None, keep_order: bool = False,
                     observers: Collection[int] = ()) -> list[int]:
    """The controllers to restart: controllers that are observers first (not voters: their restart leaves the
    quorum's majority as it is), then the follower voters, the active controller (quorum leader) last.

    :param requested: controller ids (default: every voter and every id of ``observers``); ``keep_order`` keeps
        their order within the observers and within the followers (the leader still goes last).
    :param observers: controllers known to be observers of the quorum, not voters
        (:func:`observer_controllers`).
    :raises ValueError: an id that is neither a voter nor one of ``observers`` (named, with both), a repeated
        id, or a non-integer.
    """
    observers = [c for c in observers if quorum.voter(c) is None]
    ids = list(requested) if requested else sorted(observers) + quorum.voter_ids
    bad = [c for c in ids if isinstance(c, bool) or not isinstance(c, int)]
    if bad:
        raise ValueError(f"controller ids must be integer node ids, got {bad!r}")
    repeated = sorted({c for c in ids if ids.count(c) > 1})
    if repeated:
        raise ValueError(f"controller ids repeated: {repeated}")
    unknown = sorted(set(ids) - set(quorum.voter_ids) - set(observers))
    if unknown:
        also = f"; controllers that are observers: {sorted(observers)}" if observers else ""
        raise ValueError(f"unknown controller ids {unknown}: the quorum's voters are {quorum.voter_ids}{also}")
    ordered = ids if keep_order else sorted(ids)
    first = [c for c in ordered if c in observers]
    followers = [c for c in ordered if c not in observers and c != quorum.leader_id]
    return first + followers + ([quorum.leader_id] if quorum.leader_id in ids else [])


def observer_controllers(quorum: Quorum, controller_ids: Iterable[int]) -> list[int]:
    """The controllers among ``controller_ids`` (the connection's ``controller_hosts``: its owner says these nodes
    are controllers) that fetch as *observers* of the quorum, not as voters, ascending: a controller between its
    start and ``kafka-metadata-quorum add-controller`` (KIP-853, dynamic quorums), or one kept as a spare.
    DescribeQuorum alone cannot tell such a controller from a broker (both are observers, and it names no
    observer's listeners), hence the connection's word."""
    return sorted({int(c) for c in controller_ids if quorum.voter(int(c)) is None and quorum.observer(int(c))})


def combined_nodes(quorum: Quorum, broker_ids: Iterable[int]) -> list[int]:
    """The node ids that are voters of the quorum *and* registered brokers, ascending: KRaft *combined* servers
    (``process.roles=broker,controller``; the default of Kafka 4's quickstart ``config/server.properties``). Empty
    on a cluster with dedicated controllers (``process.roles=controller``), the layout Kafka's KRaft operations
    docs advise outside development ("combined mode is not recommended in critical deployment environments")."""
    return sorted(set(quorum.voter_ids) & {int(b) for b in broker_ids})


def combined_in_controller_roll(nodes: Iterable[int], quorum: Quorum) -> str:
    """Why a controller roll refuses combined ``nodes`` (see :func:`combined_nodes`) that were asked for by name
    or by ``roles=controllers``; the caller adds the cluster's name and raises. A combined node holds partition
    replicas too: it rolls with the brokers, whose roll adds the quorum check to its min-ISR and URP checks
    (``operators.broker_roll``); the controller roll would restart it without those, and a roll of every role
    would restart it twice."""
    ids = sorted(nodes)
    return (f"nodes {ids} are KRaft controllers (voters of the metadata quorum {quorum.voter_ids}, leader "
            f"{quorum.leader_id}) and brokers at once (combined mode, process.roles=broker,controller): they roll with "
            f"the brokers, which add the quorum check to the partition checks (roles=all, or roles=brokers with "
            f"param brokers naming them), not in the controller roll. Nothing was touched")


def controllers_not_brokers(requested: Iterable[object], voter_ids: Iterable[int],
                            broker_ids: Iterable[int]) -> str | None:
    """The KRaft controllers among ids given as brokers (voters of the metadata quorum that are no registered
    broker), as ``"[100] is a KRaft controller (a voter of the metadata quorum), not a broker"`` (plural for
    several); None when there is none. Combined nodes are brokers too: never named."""
    named = sorted({b for b in requested if isinstance(b, int)} & set(voter_ids) - set(broker_ids))
    if not named:
        return None
    if len(named) == 1:
        return f"[{named[0]}] is a KRaft controller (a voter of the metadata quorum), not a broker"
    return f"{named} are KRaft controllers (voters of the metadata quorum), not brokers"

