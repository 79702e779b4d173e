"""What a roll does, as data: :class:`RollSpec`, and the cluster modes a roll applies to (:class:`ClusterMode`).

Every operation that restarts Kafka nodes is built from rolls (a rolling restart: the controllers, then the
brokers; an upgrade: one roll per phase). The loop that takes a node down and brings it back is one
(``operators.node_roll``) for brokers and KRaft controllers alike; what differs between rolls is only what a
:class:`RollSpec` says: which nodes need the roll (its needs-action rule and the facts it judges), what happens
while a node is down (``before_start``: an upgrade's install step, a config edit), in which cluster modes the roll
exists and what it logs when it does not. A new kind of roll is a new RollSpec, not a new operator.

Pure: no Airflow, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from kafka_ops.profile import ClusterProfile


class ClusterMode(StrEnum):
    """How a cluster keeps its metadata, which decides the path of every operation.

    - ``ZOOKEEPER``: brokers registered in ZooKeeper, one of them the controller (Kafka <= 3.9);
      ``inter.broker.protocol.version`` governs the protocol.
    - ``MIGRATING``: a ZooKeeper-mode cluster being moved to KRaft (KIP-866, Kafka 3.9): KRaft controllers run
      beside ZooKeeper-mode brokers, so both the broker and the controller sides apply.
    - ``KRAFT``: a metadata quorum of KRaft controllers, no ZooKeeper (every Kafka since 4.0);
      ``metadata.version`` governs the protocol.
    """

    ZOOKEEPER = "zookeeper"
    MIGRATING = "migrating"
    KRAFT = "kraft"

    @property
    def has_quorum(self) -> bool:
        """Whether KRaft controllers run (a controller roll has nodes to restart)."""
        return self is not ClusterMode.ZOOKEEPER

    @property
    def describe(self) -> str:
        return {"zookeeper": "ZooKeeper mode", "migrating": "migrating from ZooKeeper to KRaft",
                "kraft": "KRaft mode"}[self.value]


EVERY_MODE = frozenset(ClusterMode)

#: A needs-action rule: ``(node id, facts about it, the roll's resolved settings) -> (act?, reason)``. Facts are
#: what the roll's ``facts`` hook observed on the node (an upgrade: the installed release, the IBP in
#: server.properties); settings are the run's (an upgrade's target version and phases).
NeedsAction = Callable[[int, Mapping[str, Any], Mapping[str, Any]], tuple[bool, str]]
#: What a needs-action rule is told about a node: ``facts(profile, node, settings) -> dict``; ``node`` is the
#: roll's step dict (``{"id", "host", ...}``; a controller's has ``"role": "controller"``).
Facts = Callable[[ClusterProfile, Mapping[str, Any], Mapping[str, Any]], Mapping[str, Any]]
#: A roll's step between "gone" and "start" (an upgrade switches binaries or edits server.properties there):
#: ``before_start(profile, node, settings, log, dry_run)``; raise to fail the node, which the roll then leaves
#: stopped (its record says so; clearing the task resumes at this step). It returns the node's
#: :class:`WayBack` (how to undo what it changed), or None when it changed nothing or knows no way back.
BeforeStart = Callable[[ClusterProfile, Mapping[str, Any], Mapping[str, Any], Any, bool], "WayBack | None"]


@dataclass(frozen=True)
class WayBack:
    """How to put a node back as it was before a roll's ``before_start`` step changed it (an upgrade's new
    binaries, a server.properties edit): ``what`` in words ("point /opt/kafka back at kafka_2.13-3.6.2, the
    release it ran before this roll") and ``command``, the shell text that does it on the node's host (its
    values already quoted). Kept in the roll's record with the node, so the failure that stops the roll can say
    it, and ``revert_failed_broker`` can run it, also after a resume.
    """

    what: str
    command: str

    def to_dict(self) -> dict[str, str]:
        return {"what": self.what, "command": self.command}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> WayBack | None:
        """Inverse of :meth:`to_dict` (None stays None). :raises KeyError: a field is missing."""
        return None if data is None else cls(str(data["what"]), str(data["command"]))


def requested(node_id: int, facts: Mapping[str, Any], settings: Mapping[str, Any]) -> tuple[bool, str]:
    """The rolling restart's rule: every planned node is acted on, because the operator asked."""
    return True, "requested"


@dataclass(frozen=True)
class RollSpec:
    """One roll of an operation, as data (see the module docstring).

    :param roll_id: a task-id-safe name, unique in the DAG (``"restart"``, ``"binaries"``); the roll's record
        is kept under it, so one run can hold several rolls over the same nodes.
    :param operation: the cluster lock's label for the operation ("rolling restart", "upgrade").
    :param needs_action: :data:`NeedsAction`; default :func:`requested` (every planned node).
    :param facts: :data:`Facts`; None = no facts (``{}``).
    :param before_start: :data:`BeforeStart`; None = nothing between gone and start.
    :param modes: the cluster modes the roll exists in; in another mode its plan logs ``skip_reason`` and plans
        nothing (its mapped task is then *skipped*).
    :param skip_reason: the line logged when the cluster's mode rules the roll out ("KRaft: metadata.version
        replaces inter.broker.protocol.version"); empty = a sentence naming the modes.
    :param settings: overrides of the roll's settings (values or ``runtime.params.FromParam``).
    :param tooltip: the task group's tooltip in the Grid; empty = the node kind's.
    :raises ValueError: an empty roll id or no mode.
    """

    roll_id: str
    operation: str = "rolling restart"
    needs_action: NeedsAction = requested
    facts: Facts | None = None
    before_start: BeforeStart | None = None
    modes: frozenset[ClusterMode] = EVERY_MODE
    skip_reason: str = ""
    settings: Mapping[str, Any] = field(default_factory=dict)
    tooltip: str = ""

    def __post_init__(self) -> None:
        if not self.roll_id or not self.roll_id.replace("_", "").isalnum():
            raise ValueError(f"a roll id is letters, digits and underscores, got {self.roll_id!r}")
        object.__setattr__(self, "modes", parse_modes(self.modes))

    def ruled_out(self, mode: ClusterMode) -> str | None:
        """None when the roll exists in ``mode``, else the line its plan logs (:func:`ruled_out`)."""
        return ruled_out(self.modes, self.skip_reason, mode)


def parse_modes(modes: Any) -> frozenset[ClusterMode]:
    """``modes`` (ClusterMode members or their values; None = every mode) as a frozenset.

    :raises ValueError: an empty set or an unknown mode (named, with the known ones).
    """
    if modes is None:
        return EVERY_MODE
    values = [modes] if isinstance(modes, str) else list(modes)
    unknown = [m for m in values if str(m) not in ClusterMode._value2member_map_]
    if unknown or not values:
        raise ValueError(f"modes must be a non-empty set of {[m.value for m in ClusterMode]}, got {modes!r}")
    return frozenset(ClusterMode(str(m)) for m in values)


def ruled_out(modes: frozenset[ClusterMode], skip_reason: str, mode: ClusterMode) -> str | None:
    """None when a roll of ``modes`` exists in ``mode``; else the line its plan logs: ``skip_reason``, or a
    sentence naming the modes ("KRaft mode: for ZooKeeper mode only"; the note's line names the roll already)."""
    if mode in modes:
        return None
    wanted = " or ".join(m.describe for m in sorted(modes, key=lambda m: m.value))
    return skip_reason or f"{mode.describe}: for {wanted} only"
