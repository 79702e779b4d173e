"""Rolling the KRaft controllers: which path a run takes, where each controller runs, in what order, and when a
controller is gone and back. Pure: no Airflow, no I/O; times are ms since the epoch.

A KRaft cluster (Kafka 3.3+; the only mode from 4.0) keeps its metadata in the ``__cluster_metadata`` Raft
quorum of the controller processes (``process.roles=controller``): its *voters*. One of them, the quorum
leader, is the *active controller*. Brokers (and controllers that are not voters) fetch the log as
*observers*. The roll follows Strimzi's KafkaRoller for controllers:

- one controller at a time, the active controller (quorum leader) last, so leadership moves once, at the end
  (:func:`kafka_ops.quorum.controller_order` at plan time, :func:`leader_last` again at each turn: the
  leader may have moved since the plan, and the active controller is never stopped while other controllers
  of the roll remain);
- a controller goes down only when, without it, a majority of the voters stays caught up
  (:func:`kafka_ops.quorum.can_restart_controller`: KIP-595's caught-up voter, Strimzi's ``KafkaQuorumCheck``,
  within ``controller.quorum.fetch.timeout.ms``), and only while no partition is offline or under-replicated
  (:func:`partitions_gate`: a planned roll does not go on while the cluster is degraded);
- *gone* (:func:`service_state`): the host's service status command says the process stopped. DescribeQuorum
  cannot say it: a stopped voter stays a voter, only its ``LastFetchTimestamp`` stops advancing (and a
  stopped *leader* is replaced after ``controller.quorum.fetch.timeout.ms`` plus an election);
- *back* (:func:`controller_back`): it is a voter again that fetched from the leader after the moment it was
  started, is caught up, and the quorum has a leader (or it is that leader).

On a ZooKeeper-mode cluster there are no KRaft controllers: the controller is one of the brokers, which the
broker roll restarts last (:func:`role_plan`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafka_ops.cluster import ClusterState
from kafka_ops.health import Verdict, combine, offline_partitions, under_replicated_partitions
from kafka_ops.quorum import (
    DEFAULT_FETCH_TIMEOUT_MS,
    Quorum,
    caught_up,
    controller_order,
    majority,
    replaced_voter,
    replica_caught_up,
)
from kafka_ops.roll import clock, grid_label

#: The ``roles`` param's values.
ROLES = ("all", "brokers", "controllers")


# -- which rolls a run does --------------------------------------------------------------------------------


@dataclass(frozen=True)
class RolePlan:
    """Which rolls a run does: ``controllers`` (the KRaft controllers), ``brokers``; ``reason`` is the one line
    the plan logs ("KRaft cluster: ...", "ZooKeeper mode: ...")."""

    controllers: bool
    brokers: bool
    reason: str


def role_plan(roles: str, requested_controllers: Sequence[int] | None, kraft: bool,
              requested_brokers: Sequence[int] | None = None) -> RolePlan:
    """The rolls a run does for its ``roles`` param (``all`` | ``brokers`` | ``controllers``), its
    ``controllers`` param (node ids; empty = every voter), its ``brokers`` param (ids; empty = every broker) and the
    cluster's mode (``kraft``: the cluster answered DescribeQuorum).

    - KRaft: ``all`` = the controllers first (one at a time, the quorum leader last), then the brokers;
      ``brokers`` = the brokers only; ``controllers`` = the controllers only. A run of ``all`` that names nodes
      of one kind only restarts only those: brokers named and no controller = those brokers, no controller (an
      operator who restarts broker 3 does not mean to bounce the quorum); controllers named and no broker = those
      controllers, no broker. Both named, or neither: both rolls.
    - ZooKeeper mode: ``all`` and ``brokers`` roll the brokers (the controller is a broker, rolled last).

    :raises ValueError: an unknown ``roles``; on a ZooKeeper-mode cluster ``roles=controllers`` or a non-empty
        ``controllers`` list (there are no KRaft controllers); ``roles=brokers`` with a non-empty
        ``controllers`` list (contradictory: say which you mean). Each says nothing was touched.
    """
    if roles not in ROLES:
        raise ValueError(f"roles {roles!r}: must be one of {list(ROLES)}")
    named = list(requested_controllers or [])
    if not kraft:
        if roles == "controllers" or named:
            asked = "roles=controllers" if roles == "controllers" else f"controllers={named}"
            raise ValueError(
                f"ZooKeeper mode (the cluster does not answer DescribeQuorum): there are no KRaft controllers, "
                f"so {asked} cannot be rolled; the ZooKeeper-mode controller is a broker, which roles=brokers "
                "(or all) restarts last. Nothing was touched")
        return RolePlan(False, True, "ZooKeeper mode: the controller is a broker, rolled last; no KRaft "
                                     "controllers to roll")
    if roles == "brokers":
        if named:
            raise ValueError(f"roles=brokers restarts no controller, but controllers={named} names some: use "
                             "roles=all or roles=controllers, or drop the list. Nothing was touched")
        return RolePlan(False, True, "KRaft cluster: roles=brokers: the brokers only, no controller restarted")
    if roles == "controllers":
        return RolePlan(True, False, "KRaft cluster: roles=controllers: the controllers only (one at a time, "
                                     "the quorum leader last), no broker restarted")
    brokers = list(requested_brokers or [])
    if brokers and not named:
        return RolePlan(False, True, f"KRaft cluster: roles=all with brokers {brokers} named and no controllers: "
                                     "those brokers only, no controller restarted (name controllers too, or "
                                     "roles=controllers, to restart them)")
    if named and not brokers:
        return RolePlan(True, False, f"KRaft cluster: roles=all with controllers {named} named and no brokers: "
                                     "those controllers only (the quorum leader last), no broker restarted")
    return RolePlan(True, True, "KRaft cluster: roles=all: the controllers first (one at a time, the quorum "
                                "leader last), then the brokers")


def describe_quorum_line(quorum: Quorum) -> str:
    """``"KRaft cluster: quorum leader 101 (epoch 7), voters 100, 101, 102; observers 1, 2, 3; high watermark
    5400"``: the plan's and each turn's view of the quorum, for the log."""
    leader = f"quorum leader {quorum.leader_id} (epoch {quorum.leader_epoch})" if quorum.has_leader else \
        f"NO quorum leader (leader id {quorum.leader_id})"
    observers = ", ".join(str(i) for i in sorted(o.replica_id for o in quorum.observers)) or "none"
    return (f"KRaft cluster: {leader}, voters {', '.join(str(i) for i in quorum.voter_ids)}; observers "
            f"{observers}; high watermark {quorum.high_watermark}")


# -- where controllers run -----------------------------------------------------------------------------------


def resolve_hosts(ids: Iterable[int], profile_hosts: Mapping[int, str], quorum: Quorum,
                  cluster: str = "") -> dict[int, tuple[str, str]]:
    """The host of each controller and where it came from: ``{101: ("ctrl-101.example.com", "profile
    controller_hosts")}``.

    The profile's ``controller_hosts`` wins (owned by whoever owns the connection, like ``broker_hosts``);
    else the first host of the controller's listeners in DescribeQuorum v2's ``nodes`` (Kafka 3.8+, KIP-853:
    ``"DescribeQuorum endpoint CONTROLLER"``).

    :raises ValueError: naming every controller without a host and the profile field to set.
    """
    out: dict[int, tuple[str, str]] = {}
    missing = []
    for cid in ids:
        if cid in profile_hosts:
            out[cid] = (profile_hosts[cid], "profile controller_hosts")
            continue
        found = [e for e in quorum.endpoints if e.node_id == cid and e.host]
        if found:
            out[cid] = (found[0].host, f"DescribeQuorum endpoint {found[0].listener or '?'}")
        else:
            missing.append(cid)
    if missing:
        where = f"connection {cluster!r}" if cluster else "the cluster profile"
        example = ", ".join(f'"{c}": "<host of controller {c}>"' for c in missing)
        raise ValueError(
            f"no host known for controller(s) {missing}: {where} has no controller_hosts entry for them and "
            f"DescribeQuorum named no endpoint (it does from Kafka 3.8, DescribeQuorum v2). Add "
            f'"controller_hosts": {{{example}}} to the extra of {where}')
    return out


# -- the plan ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ControllerPlan:
    """The frozen order: ``steps`` are the roll record's step dicts ``{"id", "host", "host_from", "position",
    "total", "role": "controller", "leader": bool}`` (``leader``: the quorum leader at plan time), in restart
    order; ``reasons`` are log lines."""

    steps: list[dict[str, Any]]
    reasons: list[str] = field(default_factory=list)

    @property
    def order(self) -> list[int]:
        return [int(s["id"]) for s in self.steps]


def plan_controllers(quorum: Quorum, requested: Sequence[int] | None, profile_hosts: Mapping[int, str],
                     cluster: str = "", observers: Sequence[int] = ()) -> ControllerPlan:
    """Validate and order the controllers to restart: the requested node ids (empty = every voter and every
    controller of ``observers``), the observers first, then the followers by id, the quorum leader last
    (:func:`kafka_ops.quorum.controller_order`), each with its host (:func:`resolve_hosts`). ``observers``:
    controllers that fetch as observers, not voters (:func:`kafka_ops.quorum.observer_controllers`); their steps
    say ``"observer": True``.

    :raises ValueError: no quorum leader now; an unknown id (named, with the voters); a repeated id; a
        controller without a host (named, with the profile field); voters to restart in a quorum of fewer than 3
        voters (without any one of them no majority is left, so no gate could ever pass: a restart there is an
        outage of the metadata quorum, which this roll does not do).
    """
    if not quorum.has_leader:
        raise ValueError(f"the quorum has no leader now (leader id {quorum.leader_id}, voters "
                         f"{quorum.voter_ids}): not planning a controller roll during an election")
    order = controller_order(quorum, requested, observers=observers)
    watching = [c for c in order if quorum.voter(c) is None]
    if len(watching) < len(order) and len(quorum.voters) - 1 < majority(len(quorum.voters)):
        raise ValueError(f"the quorum has {len(quorum.voters)} voter(s) {quorum.voter_ids}: without any one of them "
                         f"no majority is left (needs {majority(len(quorum.voters))}), so restarting a controller "
                         "stops the metadata quorum; roll these by hand in a maintenance window, or add voters "
                         "(3 or more)")
    hosts = resolve_hosts(order, profile_hosts, quorum, cluster)
    steps = [{"id": cid, "host": hosts[cid][0], "host_from": hosts[cid][1], "position": i + 1, "total": len(order),
              "role": "controller", "leader": cid == quorum.leader_id,
              **({"observer": True} if cid in watching else {})} for i, cid in enumerate(order)]
    reasons = [f"requested controllers: {list(requested)}" if requested else
               f"every voter: {quorum.voter_ids}" + (f", and the controllers that are observers: {watching}"
                                                     if watching else "")]
    if watching:
        reasons.append(f"controllers {watching} go first: they are observers, not voters (KIP-853: not added to the "
                       "voter set), so their restart leaves the quorum's majority as it is")
    if quorum.leader_id in order:
        reasons.append(f"controller {quorum.leader_id} goes last: it is the quorum leader (the active controller)")
    else:
        reasons.append(f"the quorum leader {quorum.leader_id} is not restarted")
    behind = sorted(set(quorum.voter_ids) - caught_up(quorum))
    if behind:
        reasons.append(f"voters not caught up now: {behind} (each controller's gate waits for a caught-up "
                       "majority without it)")
    reasons += [f"controller {cid}: host {hosts[cid][0]} ({hosts[cid][1]})" for cid in order]
    return ControllerPlan(steps, reasons)


def controller_items(steps: Sequence[Mapping[str, Any]], dry_run: bool = False) -> list[dict[str, Any]]:
    """The mapped items of the roll's controller task, one per step in roll order: ``{"position", "total",
    "id", "host", "label": "controller 101", "active": bool, "grid_label": "controller 101 (3/3) · active"}``
    (``active``: the quorum leader when last looked at; ``grid_label``: :func:`controller_grid_label`)."""
    items = [{"position": i + 1, "total": len(steps), "id": int(s["id"]), "host": s["host"],
              "label": f"controller {int(s['id'])}", "active": bool(s.get("leader")),
              **({"observer": True} if s.get("observer") else {})} for i, s in enumerate(steps)]
    return [{**item, "grid_label": controller_grid_label(item, dry_run)} for item in items]


def controller_grid_label(item: Mapping[str, Any], dry_run: bool = False) -> str:
    """A controller item's Grid label: ``"controller 101 (3/3) · active"``, ``"controller 103 (1/4) · observer"``
    (``· dry run`` for a dry run)."""
    tags = ["active"] if item.get("active") else ["observer"] if item.get("observer") else []
    return grid_label(str(item["label"]), int(item["position"]), int(item["total"]), *tags, dry_run=dry_run)


# -- at each turn: the active controller goes last ------------------------------------------------------------


def leader_last(order: Sequence[int], position: int, leader_id: int,
                begun: Collection[int] = ()) -> tuple[list[int], str | None]:
    """The roll's order with the *current* quorum leader moved behind every other controller still to go, and
    the reason to log (None when nothing moves).

    Controllers before ``position`` (0-based) are done (the roll's turn rule). A controller this roll already
    began (``begun``: stop sent, stopped, starting) keeps its place, so a resumed task finishes what it began;
    a leader the roll began is not moved either (it is down or going down: moving it would not help). Rule:
    never stop the active controller while other controllers of this roll remain (Strimzi's KafkaRoller
    restarts the active controller last; a leader restart costs an election of the whole quorum).

    :raises ValueError: ``position`` outside the order.
    """
    order = [int(c) for c in order]
    if not 0 <= position < len(order):
        raise ValueError(f"position {position} outside the roll's {len(order)} controllers")
    rest = order[position:]
    if leader_id not in rest or leader_id in begun or rest[-1] == leader_id:
        return order, None
    keep = [rest[0]] if rest[0] in begun else []
    moved = keep + [c for c in rest if c != leader_id and c not in keep] + [leader_id]
    new = order[:position] + moved
    return new, (f"controller {leader_id} is the quorum leader now (the order had it at position "
                 f"{order.index(leader_id) + 1}/{len(order)}): it goes last, controller {new[position]} "
                 f"takes position {position + 1}; the active controller is never stopped while other controllers "
                 f"of the roll remain. Order now {new}")


def reorder_steps(steps: Sequence[Mapping[str, Any]], order: Sequence[int]) -> tuple[dict[str, Any], ...]:
    """The record's step dicts in ``order`` with ``position`` renumbered (1-based).

    :raises ValueError: ``order`` is not a permutation of the steps' ids.
    """
    by_id = {int(s["id"]): s for s in steps}
    if sorted(by_id) != sorted(int(c) for c in order) or len(order) != len(steps):
        raise ValueError(f"order {list(order)} is not a permutation of the roll's controllers {sorted(by_id)}")
    return tuple({**by_id[int(c)], "position": i + 1} for i, c in enumerate(order))


def must_go_later(quorum: Quorum, controller_id: int, others_left: Collection[int]) -> str | None:
    """Why ``controller_id`` must not be stopped now although the quorum could do without it: it is the quorum
    leader and ``others_left`` (controllers of the roll not done yet, itself excluded) is not empty. None when
    it may go."""
    others = sorted(c for c in others_left if c != controller_id)
    if quorum.leader_id == controller_id and others:
        return (f"controller {controller_id} is the quorum leader (the active controller) and controllers "
                f"{others} of this roll remain: it goes last")
    return None


# -- gone and back -------------------------------------------------------------------------------------------

#: ``systemctl is-active`` states of a unit that still has (or is about to have) a process.
_IN_TRANSITION = ("activating", "deactivating", "reloading", "refreshing")


def service_state(exit_code: int, output: str) -> str:
    """What the service status command says (``service_status`` / ``controller_service_status`` of the
    profile; default ``sudo systemctl is-active kafka``): ``"running"`` (exit 0), ``"stopped"`` (non-zero and
    not in transition: ``inactive``, ``failed``, ``unknown``), or ``"transition"`` (non-zero while the first
    word printed is ``activating``, ``deactivating``, ``reloading`` or ``refreshing``: systemd is starting or
    stopping it, the process may still hold the controller's ports and log).

    The convention is ``systemctl is-active``'s (exit 0 only when active, 3 when inactive, the state on
    stdout); the sandbox's ``kafka-service status`` follows it.
    """
    if exit_code == 0:
        return "running"
    first = (output or "").strip().split()
    if first and first[0].lower().rstrip(":") in _IN_TRANSITION:
        return "transition"
    return "stopped"


def partitions_gate(state: ClusterState, controller_id: int) -> Verdict:
    """The partitions' part of a controller's gate: no partition offline and none under-replicated (the broker
    gate's own checks, :func:`kafka_ops.health.offline_partitions` and
    :func:`kafka_ops.health.under_replicated_partitions`, read from the Metadata of the whole cluster).

    A controller holds no partition replica, yet a planned roll does not go on while the cluster is degraded: a
    broker that is down, crashed or behind shows as its partitions under-replicated (offline when it held the last
    in-sync replica), and the active controller's stop suspends the leader elections and ISR changes those
    partitions wait for until a new quorum leader is elected. A leader imbalance does not hold a controller (its
    stop moves no partition leadership). Reasons as in the broker gate, e.g. ``"urp (3): orders-3:
    under-replicated, isr [1, 3] of replicas [1, 2, 3] (missing [2]); ..."``.
    """
    return combine([offline_partitions(state), under_replicated_partitions(state)],
                   rule=f"partitions before controller {controller_id}")


def observer_gate(quorum: Quorum, controller_id: int) -> Verdict:
    """The gate of a controller that is an observer, not a voter: its stop leaves the voters' majority as it is, so
    the quorum only needs a leader now (no stop during an election); and it must still be an observer (a voter now
    means the voter set changed during the roll: the voters' gate would apply, so the run must plan again)."""
    rule = f"controller {controller_id} (an observer)"
    if not quorum.has_leader:
        return Verdict(False, [f"the quorum has no leader (leader id {quorum.leader_id}): an election is under way"],
                       rule)
    if quorum.voter(controller_id) is not None:
        return Verdict(False, [f"controller {controller_id} was an observer when planned and is a voter now: the "
                               "voter set changed during the roll; restart the run to plan again"], rule)
    return Verdict(True, [], rule)


def controller_back(quorum: Quorum, controller_id: int, started_ms: int,
                    fetch_timeout_ms: int = DEFAULT_FETCH_TIMEOUT_MS, fetched_before_ms: int | None = None,
                    observer: bool = False) -> Verdict:
    """Is ``controller_id`` back after its start at ``started_ms``?

    Yes when the quorum has a leader and the controller is (a) that leader (it answers as leader, so it runs;
    DescribeQuorum reports -1 as the leader's own ``LastFetchTimestamp``), or (b) a voter whose
    ``LastFetchTimestamp`` is after ``started_ms`` (and after ``fetched_before_ms``, the last fetch the leader
    reported before the stop, when known) and which is caught up (:func:`kafka_ops.quorum.caught_up`: its
    ``LastCaughtUpTimestamp`` within ``fetch_timeout_ms`` of the leader's; KIP-595, Strimzi's quorum check).

    Clocks: the fetch timestamps are the leader's wall clock, ``started_ms`` the Airflow worker's. Keep the
    hosts NTP-synced: a worker clock *ahead* of the leader's by d ms delays "back" by about d ms (the fetches
    keep coming); a leader clock ahead is caught by ``fetched_before_ms`` (both on the leader's clock), which
    the controller task records when it sees the controller gone.

    ``observer``: the controller was planned as an observer, not a voter (``kafka_ops.quorum.observer_controllers``):
    its *observer* entry must have fetched since the start and be caught up by the same rule; it must not have
    become a voter meanwhile (the voter set changed during the roll, which the roll does not judge).
    """
    rule = f"controller {controller_id} back"
    if not quorum.has_leader:
        return Verdict(False, [f"the quorum has no leader (leader id {quorum.leader_id}): an election is under "
                               "way"], rule)
    who = f"controller {controller_id}" + (" (an observer)" if observer else "")
    if observer:
        if quorum.voter(controller_id) is not None:
            return Verdict(False, [f"controller {controller_id} was an observer when planned and is a voter now: the "
                                   "voter set changed during the roll (kafka-metadata-quorum add-controller?); "
                                   "restart the run to plan again"], rule)
        entry = quorum.observer(controller_id)
    else:
        entry = quorum.voter(controller_id)
        if entry is None:
            return Verdict(False, [f"controller {controller_id} is not a voter of the quorum {quorum.voter_ids}"],
                           rule)
        if quorum.leader_id == controller_id:
            return Verdict(True, [], rule)
    since = max(started_ms, fetched_before_ms or 0)
    if entry is None or entry.last_fetch_ms is None or entry.last_fetch_ms <= since:
        replaced = None if observer else replaced_directory(quorum, controller_id, since)
        if replaced:
            return Verdict(False, [replaced], rule)
        last = "never" if entry is None or entry.last_fetch_ms is None else clock(entry.last_fetch_ms)
        return Verdict(False, [f"{who} has not fetched from the leader {quorum.leader_id} since its start at "
                               f"{clock(started_ms)} (last fetch: {last})"], rule)
    if not replica_caught_up(quorum, entry, fetch_timeout_ms):
        return Verdict(False, [f"{who} fetches again but is not caught up (log end {entry.log_end_offset} of high "
                               f"watermark {quorum.high_watermark}; controller.quorum.fetch.timeout.ms "
                               f"{fetch_timeout_ms})"], rule)
    return Verdict(True, [], rule)


def replaced_directory(quorum: Quorum, controller_id: int, since_ms: int) -> str | None:
    """Why voter ``controller_id`` does not come back, when the reason is its metadata log directory
    (:func:`kafka_ops.quorum.replaced_voter`: it fetches as an observer under a new directory id since ``since_ms``);
    no wait fixes that. Returns the line naming both ids and the ``kafka-metadata-quorum`` commands that put the node
    back; else None."""
    replaced = replaced_voter(quorum, controller_id, since_ms)
    if replaced is None:
        return None
    old, new = replaced
    return (f"controller {controller_id} fetches again, but as an observer with a new metadata log directory "
            f"(directory id {new}; the voter set has {old}): its metadata log directory was formatted again or "
            "replaced, so it is no longer the voter (KIP-853) and the quorum counts voter "
            f"{controller_id} as down. Waiting does not fix this: put it back by hand with `kafka-metadata-quorum "
            f"--bootstrap-controller <a controller> remove-controller --controller-id {controller_id} "
            f"--controller-directory-id {old}`, then `add-controller` run on the node with its own config")
