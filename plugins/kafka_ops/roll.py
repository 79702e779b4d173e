"""A roll's own record and the one decision rule every step of it follows, for any node kind (brokers, KRaft
controllers: the reasons name the kind).

A *roll* restarts a list of nodes one batch at a time (a rolling restart is two rolls: the KRaft controllers,
then the brokers; an upgrade is one per phase). Each roll keeps its own record (:class:`RollRecord`) of what it
did to each node, written before and after every action on a node, so that a resumed run (failed tasks cleared)
acts only on what this roll left unfinished and never on what someone else did:

``None`` (untouched) -> ``stopping`` (stop sent) -> ``stopped`` (gone) -> ``prepared`` (the roll's
``before_start`` step done) -> ``starting`` (start sent) -> ``done`` (back, caught up, soaked) — or ``done`` at
once when the roll's *needs-action rule* (``kafka_ops.roll_spec``) says the node needs nothing ("running 3.7.1,
target 3.7.1").

:func:`decide` turns (step, the node's record, whether the node is alive now) into act / skip / fail
with a reason that is logged verbatim ("broker 3: skip stop: this roll stopped it at 12:01:07 UTC").
The rules follow Strimzi's KafkaRoller: every action on a node carries its reason; a node found in a
state the roll did not cause is not touched (a failure the operator must look at). Nothing here needs
ZooKeeper, so KRaft clusters resume the same way. (The record's JSON keeps the key ``brokers`` for the nodes'
progress, whatever their kind, so runs recorded by earlier releases resume.)

Pure: no Airflow, no I/O. Times are ms since the epoch.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

#: A broker's progress in one roll, in order.
PHASES = ("stopping", "stopped", "prepared", "starting", "done")
#: Steps that can skip, in the order a broker goes through them.
STEPS = ("gate", "pre_stop", "stop", "wait_gone", "before_start", "pre_start", "start")


def clock(ms: int) -> str:
    """``ms`` since the epoch as ``"12:01:07 UTC"`` (the day is left out: rolls last hours, not days)."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%H:%M:%S UTC")


def _rank(phase: str | None) -> int:
    return -1 if phase is None else PHASES.index(phase)


@dataclass(frozen=True)
class BrokerProgress:
    """What this roll did to one broker: the last ``phase`` reached (one of :data:`PHASES`), when (ms),
    and why (for ``done``: "restarted", or the needs-action reason it was left alone), and the way back
    from what it changed on the node, if anything."""

    broker_id: int
    phase: str
    at_ms: int
    reason: str = ""
    took_s: float = 0.0
    #: How to undo what the roll's before-start step changed on the node (``{"what", "command"}``,
    #: ``kafka_ops.roll_spec.WayBack``), kept through the later phases; None = nothing to undo.
    way_back: Mapping[str, str] | None = None
    #: While the node soaks after it is back (``soak_s``): when the soak ends (epoch ms). It is ``done`` already (a run
    #: stopped during the soak must not restart it again), but the next batch waits until then
    #: (:func:`turn`); the mark after the soak drops it. None = not soaking.
    soak_until_ms: int | None = None

    def __post_init__(self) -> None:
        if self.phase not in PHASES:
            raise ValueError(f"unknown roll phase {self.phase!r}; expected one of {PHASES}")


@dataclass(frozen=True)
class LagStreak:
    """Burrow said OK for every watched group ``polls`` times in a row, the last time at ``at_ms``."""

    polls: int
    at_ms: int

    def carried(self, now_ms: int, interval_s: float) -> int:
        """The OK polls a gate at ``now_ms`` may count as its own: all of them when the last one is at most
        two poll intervals old (the streak is unbroken), else none (Burrow was not watched meanwhile)."""
        return self.polls if 0 <= now_ms - self.at_ms <= 2 * interval_s * 1000 else 0


@dataclass(frozen=True)
class RollRecord:
    """One roll's record: its id (``"restart"``, ``"ibp"``), when it began (ms), the planned brokers in
    order (step dicts ``{"id", "host", "rack", "position", "total", "batch"}``; ``batch`` is the 1-based
    batch the broker goes down with, absent = its own), each broker's progress, and the Burrow groups its
    lag gate watches (None = no lag gate), frozen with the plan.

    ``lag_ok``: the Burrow OK streak the last batch saw while it waited for its brokers to come back
    (:class:`LagStreak`), so the next gate continues it instead of starting from zero.

    ``empty_because``: why its plan holds no node (``"KRaft: metadata.version replaces ..."``), said by the run's
    closing note; None for a roll that planned nodes (or an empty one recorded before the reason was kept).

    JSON shape (:meth:`to_dict`): ``{"roll_id", "began_ms", "steps": [...], "consumer_groups": [...] | null,
    "brokers": {"3": {"phase", "at_ms", "reason", "took_s", "way_back"?}}, "lag_ok": {"polls", "at_ms"} | null,
    "empty_because"?: "..."}``.
    """

    roll_id: str
    began_ms: int
    steps: tuple[Mapping[str, Any], ...] = ()
    brokers: Mapping[int, BrokerProgress] = field(default_factory=dict)
    consumer_groups: tuple[str, ...] | None = None
    lag_ok: LagStreak | None = None
    empty_because: str | None = None

    @property
    def order(self) -> list[int]:
        """Planned broker ids, in roll order."""
        return [int(s["id"]) for s in self.steps]

    @property
    def batches(self) -> list[list[int]]:
        """Planned broker ids grouped in the batches that go down together, in roll order (a step without
        ``batch`` is a batch of its own: a serial roll has one broker per batch)."""
        groups: dict[int, list[int]] = {}
        for position, s in enumerate(self.steps):
            groups.setdefault(int(s.get("batch", position + 1)), []).append(int(s["id"]))
        return [groups[k] for k in sorted(groups)]

    @property
    def voters(self) -> set[int]:
        """Planned brokers that are KRaft quorum voters too (combined nodes: steps with ``"voter": True``)."""
        return {int(s["id"]) for s in self.steps if s.get("voter")}

    def regrouped(self, batches: list[list[int]]) -> RollRecord:
        """A copy whose steps go in ``batches`` (broker ids, in roll order), each step's ``batch`` (1-based) and
        ``position`` (1-based, counting brokers) renumbered; the progress is kept.

        :raises ValueError: ``batches`` do not hold each planned broker exactly once.
        """
        by_id = {int(s["id"]): s for s in self.steps}
        flat = [int(b) for batch in batches for b in batch]
        if sorted(flat) != sorted(by_id) or len(flat) != len(self.steps) or any(not batch for batch in batches):
            raise ValueError(f"batches {batches} do not hold the roll's brokers {sorted(by_id)} once each")
        steps, position = [], 0
        for number, batch in enumerate(batches, start=1):
            for b in batch:
                position += 1
                steps.append({**by_id[int(b)], "position": position, "batch": number})
        return replace(self, steps=tuple(steps))

    def progress(self, broker_id: int) -> BrokerProgress | None:
        """The broker's progress in this roll, or None when the roll has not touched it."""
        return self.brokers.get(int(broker_id))

    def phase(self, broker_id: int) -> str | None:
        """The broker's phase, or None (untouched)."""
        p = self.progress(broker_id)
        return p.phase if p else None

    def is_done(self, broker_id: int) -> bool:
        return self.phase(broker_id) == "done"

    def mark(self, broker_id: int, phase: str, at_ms: int, reason: str = "", took_s: float = 0.0,
             way_back: Mapping[str, str] | None = None, soak_until_ms: int | None = None) -> RollRecord:
        """A copy with ``broker_id`` at ``phase``; ``way_back`` (see :class:`BrokerProgress`) replaces the node's,
        else the one it had is kept; ``soak_until_ms`` (epoch ms) marks it soaking until then (not kept by the next
        mark).

        :raises ValueError: going back to an earlier phase (a roll never un-does progress), or an
            unknown phase.
        """
        if phase not in PHASES:
            raise ValueError(f"unknown roll phase {phase!r}; expected one of {PHASES}")
        current = self.phase(broker_id)
        if _rank(phase) < _rank(current):
            raise ValueError(f"broker {broker_id}: roll {self.roll_id!r} cannot go from {current} back to {phase}")
        before = self.progress(broker_id)
        kept = way_back if way_back is not None else (before.way_back if before else None)
        brokers = dict(self.brokers)
        brokers[int(broker_id)] = BrokerProgress(int(broker_id), phase, int(at_ms), reason, float(took_s),
                                                 None if kept is None else dict(kept),
                                                 None if soak_until_ms is None else int(soak_until_ms))
        return replace(self, brokers=brokers)

    def soak_left_ms(self, broker_id: int, now_ms: int) -> int:
        """How much longer ``broker_id`` soaks at ``now_ms`` (epoch ms), ms; 0 = not soaking."""
        p = self.progress(broker_id)
        return max(0, p.soak_until_ms - now_ms) if p is not None and p.soak_until_ms is not None else 0

    def last_action_ms(self) -> int | None:
        """When this roll last recorded progress on any broker (epoch ms: a stop, a start, back in every ISR), or
        None before its first action."""
        return max((p.at_ms for p in self.brokers.values()), default=None)

    def reverted(self, broker_id: int) -> RollRecord:
        """A copy in which the roll never touched ``broker_id``: what its before-start step changed was undone
        (its way back run, the node back as it was), so a resumed roll judges the node afresh."""
        return replace(self, brokers={b: p for b, p in self.brokers.items() if b != int(broker_id)})

    def finished(self) -> list[int]:
        """Brokers done in this roll, in roll order."""
        return [b for b in self.order if self.is_done(b)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "roll_id": self.roll_id,
            "began_ms": self.began_ms,
            "steps": [dict(s) for s in self.steps],
            "consumer_groups": None if self.consumer_groups is None else list(self.consumer_groups),
            "brokers": {
                str(b): {"phase": p.phase, "at_ms": p.at_ms, "reason": p.reason, "took_s": p.took_s,
                         **({"way_back": dict(p.way_back)} if p.way_back else {}),
                         **({"soak_until_ms": p.soak_until_ms} if p.soak_until_ms is not None else {})}
                for b, p in sorted(self.brokers.items())
            },
            "lag_ok": None if self.lag_ok is None else {"polls": self.lag_ok.polls, "at_ms": self.lag_ok.at_ms},
            **({"empty_because": self.empty_because} if self.empty_because is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RollRecord:
        """Inverse of :meth:`to_dict`.

        :raises ValueError: missing fields or an unknown phase (a corrupted record: say so, do not guess).
        """
        try:
            brokers = {
                int(b): BrokerProgress(int(b), p["phase"], int(p["at_ms"]), p.get("reason", ""),
                                       float(p.get("took_s", 0)), _way_back(p.get("way_back")),
                                       None if p.get("soak_until_ms") is None else int(p["soak_until_ms"]))
                for b, p in (data.get("brokers") or {}).items()
            }
            groups = data.get("consumer_groups")
            lag = data.get("lag_ok")
            empty = data.get("empty_because")
            return cls(str(data["roll_id"]), int(data["began_ms"]), tuple(data.get("steps") or ()), brokers,
                       None if groups is None else tuple(groups),
                       None if lag is None else LagStreak(int(lag["polls"]), int(lag["at_ms"])),
                       None if empty is None else str(empty))
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"roll record is malformed ({exc!r}): {data!r}"[:500]) from None


def _way_back(data: Any) -> dict[str, str] | None:
    if data is None:
        return None
    if not isinstance(data, Mapping) or not {"what", "command"} <= set(data):
        raise ValueError(f"way_back needs 'what' and 'command', got {data!r}")
    return {"what": str(data["what"]), "command": str(data["command"])}


@dataclass(frozen=True)
class Decision:
    """``action`` is ``"act"``, ``"skip"`` or ``"fail"``; ``reason`` is the sentence to log (first words
    first: the broker, then what happens)."""

    action: str
    reason: str

    @property
    def act(self) -> bool:
        return self.action == "act"


def decide(step: str, broker_id: int, record: RollRecord, alive: bool, node: str = "broker") -> Decision:
    """May ``step`` act on ``broker_id`` now, given this roll's record and whether the broker is alive
    (in the cluster metadata)?

    - a broker done in this roll: every step skips;
    - ``gate`` / ``pre_stop`` / ``stop``: act on a running broker the roll has not stopped (or whose stop
      it sent but which still runs); skip when the roll stopped it; **fail** when the broker is down and
      the roll did not stop it (a crash or another operation: nothing of ours to resume);
    - ``wait_gone``: act after the roll sent its stop, until it has seen the broker gone (``stopped``);
    - ``before_start``: act on a broker the roll stopped and has not prepared; **fail** when it runs again
      although the roll never started it (someone else did, unprepared);
    - ``pre_start`` / ``start``: act while the broker the roll stopped is down; skip when it runs again.

    The same rule serves a roll of KRaft controllers (``kafka_ops.controller_roll``): ``node="controller"``
    names it so in every reason, and ``alive`` is then what the host's service status command says.

    :raises ValueError: unknown step.
    """
    if step not in STEPS:
        raise ValueError(f"unknown roll step {step!r}; expected one of {STEPS}")
    who = f"{node} {broker_id}"
    progress = record.progress(broker_id)
    phase = progress.phase if progress else None
    when = clock(progress.at_ms) if progress else ""
    roll = f"roll {record.roll_id!r}"
    if phase == "done":
        return Decision("skip", f"{who}: skip {step}: finished in {roll} at {when} ({progress.reason})")
    if step in ("gate", "pre_stop", "stop"):
        if phase is None:
            if alive:
                return Decision("act", f"{who}: {step}")
            return Decision("fail", f"{who} is down and {roll} did not stop it: a crash or another operation. "
                                    f"Start it (or find out who stopped it), then clear this task")
        if phase == "stopping" and alive:
            return Decision("act", f"{who}: {step} again: {roll} sent a stop at {when} but the {node} still runs")
        return Decision("skip", f"{who}: skip {step}: {roll} stopped it at {when}")
    if step == "wait_gone":
        if phase == "stopping":
            return Decision("act", f"{who}: waiting until it has left the cluster metadata" if node == "broker"
                                   else f"{who}: waiting until its service has stopped")
        return Decision("skip", f"{who}: skip {step}: {roll} saw it gone by {when}")
    if phase is None:
        return Decision("fail", f"{who}: {step} refused: {roll} has not stopped this {node}")
    if step == "before_start":
        if _rank(phase) >= _rank("prepared"):
            return Decision("skip", f"{who}: skip {step}: done at {when}")
        if alive:
            return Decision("fail", f"{who} runs again although {roll} never started it (stopped at {when}): "
                                    f"someone else started it before its {step} step. Check the {node}, then "
                                    f"clear this task")
        return Decision("act", f"{who}: {step}")
    # pre_start, start
    if alive:
        return Decision("skip", f"{who}: skip {step}: already running again ({roll}: {phase} at {when})")
    return Decision("act", f"{who}: {step}")


def before(position: int, record: RollRecord) -> list[int]:
    """The nodes of the batches before ``position``, in roll order."""
    return [b for batch in record.batches[:position] for b in batch]


def unfinished_before(position: int, record: RollRecord) -> list[int]:
    """The nodes of the batches before ``position`` not done in this roll, in roll order."""
    return [b for b in before(position, record) if not record.is_done(b)]


def soak_left_ms(position: int, record: RollRecord, now_ms: int) -> int:
    """How much longer the nodes of the batches before ``position`` soak at ``now_ms`` (epoch ms), ms (0: none
    soaks)."""
    return max((record.soak_left_ms(b, now_ms) for b in before(position, record)), default=0)


def turn(position: int, record: RollRecord, previous_failed: bool, node: str = "broker",
         now_ms: int | None = None) -> Decision:
    """May the batch at ``position`` (0-based, in :attr:`RollRecord.batches`; in a serial roll a batch is one
    broker) begin?

    Only when every broker of the batches before it is done in this roll, and none of them soaks any more
    (``soak_s``: :attr:`BrokerProgress.soak_until_ms` after ``now_ms``, epoch ms, default now): ``act``. When the
    previous batch's task failed (or was marked failed) with a broker unfinished: ``fail``, naming it, so a failed
    broker stops the roll before the next one is touched. Otherwise ``skip`` = not yet (still going, or soaking: a
    soak is waited out even when its task was stopped). ``node`` names the nodes in the reasons (``"controller"``
    for a roll of KRaft controllers).
    """
    batches = record.batches
    if not 0 <= position < len(batches):
        raise ValueError(f"position {position} outside the roll's {len(batches)} batches")
    pending = unfinished_before(position, record)
    me = names(batches[position], node)
    if not pending:
        now = int(time.time() * 1000) if now_ms is None else now_ms
        left = soak_left_ms(position, record, now)
        if left:
            soaking = [b for b in before(position, record) if record.soak_left_ms(b, now)]
            return Decision("skip", f"{me}: waiting for {names(soaking, node)} to end the soak (until "
                                    f"{clock(now + left)})")
        return Decision("act", f"{me}: {'its' if len(batches[position]) == 1 else 'their'} turn "
                               f"({position + 1}/{len(batches)})")
    if previous_failed:
        return Decision("fail", f"{me} NOT touched: {node} {pending[-1]} (before it in roll "
                                f"{record.roll_id!r}) did not finish; resume by clearing the failed tasks")
    return Decision("skip", f"{me}: waiting for {node} {pending[-1]} to finish")


def names(ids: list[int], node: str = "broker") -> str:
    """``"broker 3"`` or ``"brokers 0, 3, 6"`` (``node="controller"``: ``"controller 101"``)."""
    return f"{node} {ids[0]}" if len(ids) == 1 else f"{node}s " + ", ".join(str(i) for i in ids)


def batch_label(ids: list[int]) -> str:
    """The Grid label of a batch: ``"broker 3"`` / ``"brokers 0, 3, 6"``."""
    return names(list(ids))


def grid_label(name: str, number: int, total: int, *marks: str, dry_run: bool = False) -> str:
    """A mapped instance's Grid label: ``"broker 3 (2/3)"``, ``"controller 101 (3/3) · active · dry run"``.

    ``number`` / ``total`` count the roll's batches (or controllers); ``marks`` are appended after " · ", then
    "dry run" for a dry run. The same text labels the instance before it runs (``runtime.pending_labels``) and
    after (its ``map_index_template``); a running instance shows it followed by its current step.
    """
    return " · ".join([f"{name} ({number}/{total})", *marks, *(["dry run"] if dry_run else [])])


def batch_grid_label(item: Mapping[str, Any], dry_run: bool = False) -> str:
    """A broker batch item's Grid label (``{"label", "batch", "batches", ...}``): ``"brokers 0, 3 (1/2)"``."""
    return grid_label(str(item["label"]), int(item["batch"]), int(item["batches"]), dry_run=dry_run)


def labelled_batch(item: Mapping[str, Any], dry_run: bool = False) -> dict[str, Any]:
    """The batch item with its ``grid_label``: as it is when it has one, else computed (an item planned by a
    kafka-ops release before Grid labels were planned, when such a run is resumed after an upgrade)."""
    return dict(item) if "grid_label" in item else {**item, "grid_label": batch_grid_label(item, dry_run)}


#: How the reason of a node the needs-action rule left alone begins (``"left alone: <why>"``).
LEFT_ALONE = "left alone"


def left_alone(record: RollRecord, ids: list[int]) -> list[int]:
    """Those of ``ids`` the roll marked done without touching them (reason ``"left alone: ..."``: the needs-action
    rule found nothing to do), in the order given; a node restarted, not done yet or unknown to the record is not."""
    return [n for n in ids if record.is_done(n) and (p := record.progress(n)) is not None
            and p.reason.startswith(LEFT_ALONE)]


def left_alone_mark(record: RollRecord, ids: list[int], node: str = "broker") -> str | None:
    """The Grid label's mark for a task over ``ids`` (its batch): ``"left alone"`` when the roll left every one
    alone, ``"left alone: broker 0"`` when some (:func:`left_alone`), None when it left none alone."""
    alone = left_alone(record, ids)
    if not alone:
        return None
    return LEFT_ALONE if len(alone) == len(ids) else f"{LEFT_ALONE}: {names(alone, node)}"


def summary(record: RollRecord) -> str:
    """What the roll did, for a run's closing note: ``"restarted [2, 0] of [2, 0, 1]; left broker 1 stopped at
    12:00:03 UTC"``, ``"restarted none of [0, 1]; left alone [0, 1]: running 4.1.0 already"`` (one group per reason
    of the needs-action rule), ``"dry run (nothing restarted) over [0, 1] of [0, 1]"``, ``"nothing to roll (<why the
    plan is empty>)"``. The nodes are listed in roll order; a node another try of the task finished counts as
    restarted (its reason is not a "left alone" one)."""
    if not record.order:
        return f"nothing to roll ({record.empty_because or 'its plan holds no node'})"
    done = record.finished()
    alone = left_alone(record, done)
    dry = [n for n in done if n not in alone and record.progress(n).reason == "dry run"]
    restarted = [n for n in done if n not in alone and n not in dry]
    parts = [f"dry run (nothing restarted) over {dry} of {record.order}"] if dry else []
    if restarted or not dry:
        parts.append(f"restarted {restarted or 'none'}" + ("" if dry else f" of {record.order}"))
    reasons: dict[str, list[int]] = {}
    for n in alone:
        reasons.setdefault(record.progress(n).reason.removeprefix(LEFT_ALONE).removeprefix(":").strip(), []).append(n)
    parts += [f"{LEFT_ALONE} {ids}" + (f": {why}" if why else "") for why, ids in reasons.items()]
    noun = {int(s["id"]): s.get("role", "broker") for s in record.steps}
    left = [f"{noun.get(n, 'broker')} {n} {record.phase(n)} at {clock(record.progress(n).at_ms)}"
            for n in record.order if record.phase(n) not in (None, "done")]
    if left:
        parts.append(f"left {'; '.join(left)}")
    return "; ".join(parts)


def eta_s(record: RollRecord) -> float | None:
    """Seconds until the roll ends: the mean time of the batches restarted so far (``took_s`` of the
    brokers done with a time, one figure per batch) times the batches not done yet; None before the first
    batch is done. In a serial roll a batch is one broker."""
    took, remaining = [], 0
    for batch in record.batches:
        times = [record.progress(b).took_s for b in batch
                 if record.is_done(b) and record.progress(b).took_s > 0]
        if times:
            took.append(max(times))
        if not all(record.is_done(b) for b in batch):
            remaining += 1
    if not took:
        return None
    return sum(took) / len(took) * remaining
