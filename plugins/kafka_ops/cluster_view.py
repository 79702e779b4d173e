"""What the cluster view shows (the fleet page's rows, one cluster's page), computed from what one read of a cluster
found: pure functions over plain inputs, no I/O and no Airflow imports.

A read (``fleet_view.sources``) fills a :class:`ClusterReading`: the cluster's :class:`~kafka_ops.cluster.ClusterState`
(or why it could not be read), its KRaft quorum, Burrow's statuses of the watched groups, the operation lock's
holder, the maintenance window of the holder's DAG, the holder run's roll records, and a few per-broker figures.
:func:`fleet_row` and :func:`cluster_page` turn it into JSON-able dicts; the rules are the gates' own
(``kafka_ops.health``: offline, URP, leader imbalance, consumer lag; ``kafka_ops.roll``: done / total and the ETA
the task logs give), so the page and the gates never disagree on what "healthy" means.

Terms are Kafka's: *URP* = partitions with ``|isr| < |replicas|``; *offline* = no leader (``leader == -1``);
*under min ISR* = ``|isr| < min.insync.replicas`` of the topic (Kafka's UnderMinIsrPartitionCount: acks=all
producers get NotEnoughReplicas); *leader imbalance* per broker = the share of the partitions it is the preferred
leader of that another broker leads (``leader.imbalance.per.broker.percentage`` is the limit). A broker is *down*
when replicas are assigned to it but it is not registered (a broker without replicas that is not registered is
invisible to the metadata, as it is to Kafka's tools).

Times are ms since the epoch, durations seconds, sizes bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafka_ops import metadata_version
from kafka_ops.cluster import ClusterState, Partition, Registration, fenced_down
from kafka_ops.health import ConsumerGroupStatus, leader_imbalance_ratios
from kafka_ops.quorum import Quorum, combined_nodes, observer_controllers, replica_caught_up
from kafka_ops.roll import RollRecord, eta_s, names

#: At most this many partitions are listed per kind (URP, offline, under min ISR) on a cluster's page; the counts
#: are always complete. A broker down on a cluster of 2,000 topics makes thousands of URP.
PARTITIONS_LISTED = 200
#: Burrow statuses, best first; a fleet row shows the worst of the watched groups.
LAG_ORDER = ("OK", "WARN", "ERR", "STOP", "STALL", "REWIND", "NOTFOUND")

#: Status of a cluster: ``ok``; ``warn`` (leader imbalance over the limit, a group WARN, or a part of the read
#: failed); ``bad`` (offline, URP, under min ISR, a broker down, a group worse than WARN, no quorum leader);
#: ``unreachable`` (the cluster's metadata could not be read within the deadline).
STATUSES = ("ok", "warn", "bad", "unreachable")


@dataclass(frozen=True)
class LockInfo:
    """The operation lock's holder (``hooks.cluster_lock.LockHolder``'s fields): ``holder`` =
    ``"<dag_id>/<run_id>"``, since when (ms), the operation's name."""

    holder: str
    since_ms: int
    operation: str

    @property
    def dag_id(self) -> str | None:
        """The holding DAG (Airflow's DAG ids hold no ``/``), or None for a holder of another shape."""
        dag, sep, run = self.holder.partition("/")
        return dag if sep and dag and run else None

    @property
    def run_id(self) -> str | None:
        dag, sep, run = self.holder.partition("/")
        return run if sep and dag and run else None


@dataclass(frozen=True)
class WindowInfo:
    """The maintenance window of the operation running on the cluster (its DAG's timetable): ``state`` is
    ``"open"``, ``"closed"`` or ``"none"`` (the DAG has no window: always open); ``message`` the window gate's own
    sentence (``kafka_ops.windows.judge``); ``closes_ms`` / ``opens_ms`` when known."""

    state: str
    message: str = ""
    closes_ms: int | None = None
    opens_ms: int | None = None


@dataclass(frozen=True)
class RunRolls:
    """The roll records of one DAG run (``runtime.roll_store``: one Variable per roll)."""

    dag_id: str
    run_id: str
    records: tuple[RollRecord, ...] = ()


@dataclass(frozen=True)
class WaveInfo:
    """The reassignment waves of the running operation: its mapped ``wave`` task instances ``done`` (success) of
    ``total``, and the 1-based number of the wave running now (None: none runs)."""

    done: int
    total: int
    running: int | None = None


@dataclass(frozen=True)
class PastRun:
    """One earlier (or current) operation on the cluster: its DAG run, state, start / end (ms) and the first line of
    its note (``run_outcome`` writes the outcome there: "Succeeded: ...", "Failed: ...")."""

    dag_id: str
    run_id: str
    state: str
    start_ms: int | None = None
    end_ms: int | None = None
    outcome: str = ""


@dataclass(frozen=True)
class ClusterReading:
    """Everything one read of one cluster found. Only ``cluster`` and ``read_at_ms`` are always set: every part
    that could not be read is None (or empty) with its error in ``errors`` (part name -> message).

    :param cluster: the ``kafka`` connection id.
    :param read_at_ms: when the read began. :param took_s: how long it took (seconds).
    :param state: brokers, partitions, controller, min-ISR settings; None = the cluster could not be read
        (``errors["kafka"]`` says why): the cluster is *unreachable*.
    :param kraft: True = KRaft (answers DescribeQuorum), False = ZooKeeper mode, None = unknown.
    :param quorum: the KRaft metadata quorum (None in ZooKeeper mode or when it could not be read).
    :param groups: Burrow's status of each watched group; None = no Burrow in the profile (not watched).
    :param lock: the operation lock's holder, None = free (or unknown: ``errors["lock"]``).
    :param window: the window of the lock holder's DAG; None = nothing runs.
    :param rolls: the lock holder run's roll records.
    :param waves: the lock holder run's reassignment waves, None = it has none (or not read).
    :param reassigning: partitions being reassigned now (``{"topic", "partition", "adding_replicas",
        "removing_replicas"}``).
    :param ibp: ZooKeeper mode: broker id -> ``inter.broker.protocol.version``.
    :param features: KRaft: broker id -> ``{"finalized": level or None, "supported": (min, max) or None}``
        (``metadata.version`` as each broker reports it).
    :param disk_bytes: broker id -> bytes of its replicas on disk (DescribeLogDirs).
    :param past_runs: the last operations on the cluster, newest first.
    :param controller_ids: the node ids of the connection's ``controller_hosts`` (KRaft): how a controller that is
        an observer, not a voter, is told from a broker.
    :param registrations: KRaft, Kafka 4.0+: every broker the controller has registered, fenced ones too
        (DescribeCluster v2, KIP-1073); a fenced one is down even when it holds no replica (stopped without being
        unregistered). Empty when not offered or not read.
    :param errors: part (``kafka``, ``quorum``, ``burrow``, ``lock``, ``rolls``, ``brokers``, ...) -> why it
        could not be read.
    """

    cluster: str
    read_at_ms: int
    took_s: float = 0.0
    state: ClusterState | None = None
    kraft: bool | None = None
    quorum: Quorum | None = None
    groups: tuple[ConsumerGroupStatus, ...] | None = None
    lock: LockInfo | None = None
    window: WindowInfo | None = None
    rolls: RunRolls | None = None
    waves: WaveInfo | None = None
    reassigning: tuple[Mapping[str, Any], ...] = ()
    ibp: Mapping[int, str | None] = field(default_factory=dict)
    features: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)
    disk_bytes: Mapping[int, int] = field(default_factory=dict)
    past_runs: tuple[PastRun, ...] = ()
    errors: Mapping[str, str] = field(default_factory=dict)
    controller_ids: tuple[int, ...] = ()
    registrations: tuple[Registration, ...] = ()

    def down_broker_ids(self) -> list[int]:
        """The brokers this reading shows down: in a replica list without being live (``ClusterState``), or
        registered but fenced (KRaft), ascending; [] when the cluster could not be read."""
        if self.state is None:
            return []
        fenced = {b.id for b in fenced_down(self.registrations, self.state.broker_ids)}
        return sorted(set(self.state.down_broker_ids) | fenced)


# -- rules the gates do not need, in Kafka's terms ------------------------------------------------------------


def imbalance(state: ClusterState) -> dict[str, Any]:
    """The leader imbalance (``kafka_ops.health.leader_imbalance_ratios``): ``{"threshold_pct", "worst_pct",
    "brokers_over": [ids over the threshold]}``; ``worst_pct`` 0.0 on a cluster without partitions."""
    threshold = state.leader_imbalance_percentage
    ratios = {b: 100.0 * n / total for b, (n, total) in leader_imbalance_ratios(state).items()}
    return {"threshold_pct": threshold, "worst_pct": round(max(ratios.values(), default=0.0), 1),
            "brokers_over": sorted(b for b, pct in ratios.items() if pct > threshold)}


def lag_summary(groups: Sequence[ConsumerGroupStatus] | None) -> dict[str, Any]:
    """``{"status", "groups": [{"group", "status", "total_lag"}]}``: the worst Burrow status of the watched groups
    (:data:`LAG_ORDER`; an unknown status counts as the worst), ``"not watched"`` without Burrow in the profile,
    ``"no groups"`` when Burrow is set but the profile watches no group."""
    if groups is None:
        return {"status": "not watched", "groups": []}
    rows = [{"group": g.group, "status": g.status, "total_lag": g.total_lag} for g in groups]
    if not rows:
        return {"status": "no groups", "groups": []}

    def rank(status: str) -> int:
        return LAG_ORDER.index(status) if status in LAG_ORDER else len(LAG_ORDER)

    return {"status": max((g.status for g in groups), key=rank), "groups": rows}


def node_kind(record: RollRecord) -> str:
    """``"controller"`` for a roll of KRaft controllers (its plan names where each host came from: ``host_from``;
    or its id says so: ``controllers``, ``controller_binaries``), else ``"broker"``."""
    if any("host_from" in s for s in record.steps) or "controller" in record.roll_id:
        return "controller"
    return "broker"


def roll_progress(record: RollRecord, now_ms: int) -> dict[str, Any]:
    """One roll's progress, the figures its tasks log after each batch (``operators.node_roll``: "3/6 brokers
    done; about 4.0 min left"): ``{"roll_id", "node", "done", "total", "batches_done", "batches_total", "current",
    "current_phases", "next", "eta_s", "ends_ms", "finished"}``.

    ``current`` names the batch being worked on (a node of it touched and not done: ``"broker 3"``), None between
    batches; ``current_phases`` its nodes' phases (``{"3": "stopped"}``); ``next`` the first batch not begun;
    ``eta_s`` :func:`kafka_ops.roll.eta_s` (None before the first batch is done), ``ends_ms`` = now + ETA.
    """
    node = node_kind(record)
    batches = record.batches
    done_batches = [b for b in batches if all(record.is_done(n) for n in b)]
    current = next((b for b in batches if any(record.phase(n) not in (None, "done") for n in b)), None)
    pending = [b for b in batches if all(record.phase(n) is None for n in b)]
    left = eta_s(record)
    finished = len(done_batches) == len(batches)
    return {
        "roll_id": record.roll_id,
        "node": node,
        "done": len(record.finished()),
        "total": len(record.order),
        "batches_done": len(done_batches),
        "batches_total": len(batches),
        "current": names(current, node) if current else None,
        "current_phases": {str(n): record.phase(n) for n in current} if current else {},
        "next": names(pending[0], node) if pending and not finished else None,
        "eta_s": None if left is None or finished else round(left, 1),
        "ends_ms": None if left is None or finished else now_ms + int(left * 1000),
        "finished": finished,
    }


def operation(reading: ClusterReading, now_ms: int, run_url: Callable[[str, str], str]) -> dict[str, Any] | None:
    """The operation running on the cluster (the lock holder's run), None when the lock is free:
    ``{"dag_id", "run_id", "url", "operation", "held_s", "rolls": [roll_progress...], "active": the roll being
    worked on (the latest begun that is not finished) or None, "waves": {"done", "total", "running"} | None,
    "reassigning": partitions being moved now}``."""
    lock = reading.lock
    if lock is None:
        return None
    records = sorted(reading.rolls.records, key=lambda r: r.began_ms) if reading.rolls else []
    rolls = [roll_progress(r, now_ms) for r in records if r.order]
    active = next((r for r in reversed(rolls) if not r["finished"] and (r["done"] or r["current"])), None)
    active = active or next((r for r in rolls if not r["finished"]), None)
    waves = reading.waves
    return {
        "dag_id": lock.dag_id,
        "run_id": lock.run_id,
        "url": run_url(lock.dag_id, lock.run_id) if lock.dag_id and lock.run_id else None,
        "holder": lock.holder,
        "operation": lock.operation,
        "held_s": max(0, (now_ms - lock.since_ms) // 1000),
        "rolls": rolls,
        "active": active,
        "waves": None if waves is None else {"done": waves.done, "total": waves.total, "running": waves.running},
        "reassigning": len(reading.reassigning),
    }


# -- the fleet row and the cluster page ------------------------------------------------------------------------


def _controller(reading: ClusterReading) -> dict[str, Any] | None:
    """KRaft: the quorum leader (DescribeCluster names a random broker to KRaft clients, KIP-919); ZooKeeper mode:
    the controller broker. None when unknown."""
    if reading.kraft and reading.quorum is not None:
        q = reading.quorum
        return {"kind": "quorum leader", "id": q.leader_id if q.has_leader else None, "epoch": q.leader_epoch}
    if reading.state is not None and reading.state.controller_id >= 0:
        return {"kind": "controller", "id": reading.state.controller_id}
    return None


def status_of(row: Mapping[str, Any]) -> tuple[str, list[str]]:
    """A fleet row's status (:data:`STATUSES`) and the reasons for it, worst first (``"2 offline partitions"``)."""
    if row["error"]:
        return "unreachable", [row["error"]]
    bad, warn = [], []
    if row["brokers_down"]:
        bad.append(f"{names(row['brokers_down'])} down")
    for key, what in (("offline", "offline"), ("urp", "under-replicated"), ("under_min_isr", "under min ISR")):
        if row[key]:
            bad.append(f"{row[key]} {what} partition{'s' if row[key] != 1 else ''}")
    controller = row["controller"]
    if controller and controller["kind"] == "quorum leader" and controller["id"] is None:
        bad.append("no quorum leader")
    if row["leader_imbalance"]["brokers_over"]:
        over = row["leader_imbalance"]
        warn.append(f"leader imbalance {over['worst_pct']}% > {over['threshold_pct']}%")
    lag = row["lag"]["status"]
    if lag not in ("OK", "not watched", "no groups"):
        (warn if lag == "WARN" else bad).append(f"consumer lag {lag}")
    warn += [f"{part}: {message}" for part, message in row["part_errors"].items()]
    return ("bad" if bad else "warn" if warn else "ok"), bad + warn


def fleet_row(reading: ClusterReading, now_ms: int, run_url: Callable[[str, str], str]) -> dict[str, Any]:
    """One row of the fleet page: ``{"cluster", "status", "reasons", "mode", "brokers_up", "brokers_total",
    "brokers_down", "controller", "offline", "urp", "under_min_isr", "leader_imbalance", "lag", "lock", "window",
    "operation", "read_at_ms", "age_s", "took_s", "error", "part_errors"}``.

    ``mode`` is ``"KRaft"``, ``"ZooKeeper"`` or None; counts are None when the cluster could not be read
    (``status`` ``"unreachable"``, ``error`` why); ``lock`` is ``{"holder", "dag_id", "run_id", "url",
    "operation", "held_s"}`` or None (free); ``run_url(dag_id, run_id)`` makes the link to a DAG run.
    """
    state = reading.state
    errors = dict(reading.errors)
    kafka_error = errors.pop("kafka", "") if state is None else ""
    if state is None and not kafka_error:
        kafka_error = "not read"
    op = operation(reading, now_ms, run_url)
    lock = None if op is None else {k: op[k] for k in ("holder", "dag_id", "run_id", "url", "operation", "held_s")}
    row: dict[str, Any] = {
        "cluster": reading.cluster,
        "mode": None if reading.kraft is None else ("KRaft" if reading.kraft else "ZooKeeper"),
        "brokers_up": None, "brokers_total": None, "brokers_down": [],
        "controller": _controller(reading),
        "offline": None, "urp": None, "under_min_isr": None,
        "leader_imbalance": {"threshold_pct": None, "worst_pct": None, "brokers_over": []},
        "lag": lag_summary(reading.groups),
        "lock": lock,
        "window": None if reading.window is None else {
            "state": reading.window.state, "message": reading.window.message,
            "closes_ms": reading.window.closes_ms, "opens_ms": reading.window.opens_ms},
        "operation": op,
        "read_at_ms": reading.read_at_ms,
        "age_s": round(max(0, now_ms - reading.read_at_ms) / 1000, 1),
        "took_s": round(reading.took_s, 2),
        "error": kafka_error,
        "part_errors": errors,
    }
    if state is not None:
        down = reading.down_broker_ids()
        row.update({
            "brokers_up": len(state.brokers), "brokers_total": len(state.brokers) + len(down), "brokers_down": down,
            "offline": len(state.offline_partitions()), "urp": len(state.under_replicated_partitions()),
            "under_min_isr": len(state.under_min_isr_partitions()), "leader_imbalance": imbalance(state),
        })
    row["status"], row["reasons"] = status_of(row)
    return row


def _partition_row(state: ClusterState, p: Partition) -> dict[str, Any]:
    return {"name": p.name, "topic": p.topic, "partition": p.partition, "leader": p.leader,
            "replicas": list(p.replicas), "isr": list(p.isr),
            "missing": [r for r in p.replicas if r not in p.isr], "min_isr": state.min_insync_replicas(p.topic)}


def _listed(state: ClusterState, parts: list[Partition], limit: int) -> dict[str, Any]:
    return {"count": len(parts), "listed": [_partition_row(state, p) for p in parts[:limit]]}


def _metadata_version(feature: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not feature:
        return None
    level = feature.get("finalized")
    supported = feature.get("supported")
    if level is None and not supported:  # ZooKeeper mode: no metadata.version
        return None
    return {"level": level, "name": None if level is None else metadata_version.MetadataVersion(int(level)).name,
            "supported_max": None if not supported else int(supported[1])}


def brokers(reading: ClusterReading) -> list[dict[str, Any]]:
    """Every broker the metadata knows, live or down, by id: ``{"id", "host", "port", "rack", "up", "controller",
    "voter", "leaders", "replicas", "preferred", "disk_bytes", "kafka_version", "ibp", "metadata_version"}``
    (``voter``: a KRaft combined node, a quorum voter too, ``kafka_ops.quorum.combined_nodes``; a down broker
    has no host unless the controller still has it registered (KRaft 4.0+, fenced): the metadata lists only live
    brokers; ``leaders`` = partitions it leads now, ``replicas`` = partitions
    assigned to it, ``preferred`` = partitions it is the preferred leader of; ``metadata_version`` =
    ``{"level", "name", "supported_max"}`` as the broker reports it, KRaft only; ``kafka_version`` = the Kafka
    major.minor its ApiVersions ranges match, e.g. ``"3.6"``)."""
    state = reading.state
    if state is None:
        return []
    leaders: dict[int, int] = {}
    replicas: dict[int, int] = {}
    preferred: dict[int, int] = {}
    for p in state.partitions:
        leaders[p.leader] = leaders.get(p.leader, 0) + 1
        for r in p.replicas:
            replicas[r] = replicas.get(r, 0) + 1
        if p.preferred_leader is not None:
            preferred[p.preferred_leader] = preferred.get(p.preferred_leader, 0) + 1
    controller = _controller(reading)
    known = sorted(set(state.broker_ids) | set(reading.down_broker_ids()))
    registered = {r.broker.id: r.broker for r in reading.registrations}
    voters = set(combined_nodes(reading.quorum, known)) if reading.kraft and reading.quorum is not None else set()
    out = []
    for broker_id in known:
        b = state.broker(broker_id) if state.has_broker(broker_id) else None
        r = b or registered.get(broker_id)  # a fenced broker: where its registration says it listens
        out.append({
            "id": broker_id, "host": r.host if r else None, "port": r.port if r else None,
            "rack": r.rack if r else None, "up": b is not None,
            "controller": bool(controller and controller["kind"] == "controller" and controller["id"] == broker_id),
            "voter": broker_id in voters,
            "leaders": leaders.get(broker_id, 0), "replicas": replicas.get(broker_id, 0),
            "preferred": preferred.get(broker_id, 0), "disk_bytes": reading.disk_bytes.get(broker_id),
            "kafka_version": (reading.features.get(broker_id) or {}).get("release"),
            "ibp": reading.ibp.get(broker_id), "metadata_version": _metadata_version(reading.features.get(broker_id)),
        })
    return out


def controllers(quorum: Quorum | None, broker_ids: Sequence[int] = (),
                controller_ids: Sequence[int] = ()) -> list[dict[str, Any]]:
    """The KRaft voters, by id, then the controllers that are observers (``controller_ids``, the connection's
    ``controller_hosts``: ``kafka_ops.quorum.observer_controllers``), by id: ``{"id", "leader", "caught_up",
    "log_end_offset", "lag_offsets", "combined", "observer"}`` (lag = the quorum's high watermark minus the log end
    offset, None when either is unknown; ``combined``: a voter that is a broker too, among ``broker_ids``, the brokers
    the metadata knows: ``kafka_ops.quorum.combined_nodes``); [] without a quorum."""
    if quorum is None:
        return []
    combined = set(combined_nodes(quorum, broker_ids))
    rows = [(v, False) for v in sorted(quorum.voters, key=lambda v: v.replica_id)]
    rows += [(quorum.observer(c), True) for c in observer_controllers(quorum, controller_ids)]
    out = []
    for v, observer in rows:
        lag = quorum.high_watermark - v.log_end_offset if quorum.high_watermark >= 0 and v.log_end_offset >= 0 \
            else None
        out.append({"id": v.replica_id, "leader": v.replica_id == quorum.leader_id,
                    "caught_up": replica_caught_up(quorum, v), "log_end_offset": v.log_end_offset,
                    "lag_offsets": None if lag is None else max(0, lag), "combined": v.replica_id in combined,
                    "observer": observer})
    return out


def cluster_page(reading: ClusterReading, now_ms: int, run_url: Callable[[str, str], str],
                 limit: int = PARTITIONS_LISTED) -> dict[str, Any]:
    """One cluster's page: ``{"summary": fleet_row, "brokers": [...], "controllers": [...], "partitions":
    {"offline", "under_replicated", "under_min_isr": {"count", "listed": [{"name", "leader", "replicas", "isr",
    "missing", "min_isr"}]}, "listed_max"}, "groups": [{"group", "status", "total_lag", "partitions": [...]}],
    "operation": see :func:`operation`, "reassigning": [...], "past_runs": [...]}``.

    At most ``limit`` partitions of each kind are listed (the counts are complete).
    """
    state = reading.state
    partitions = {"listed_max": limit}
    if state is not None:
        partitions.update({
            "offline": _listed(state, state.offline_partitions(), limit),
            "under_replicated": _listed(state, state.under_replicated_partitions(), limit),
            "under_min_isr": _listed(state, state.under_min_isr_partitions(), limit),
        })
    summary = fleet_row(reading, now_ms, run_url)
    return {
        "summary": summary,
        "brokers": brokers(reading),
        "controllers": controllers(reading.quorum, [] if state is None else
                                   sorted(set(state.broker_ids) | set(state.down_broker_ids)),
                                   reading.controller_ids) if reading.kraft else [],
        "partitions": partitions,
        "groups": [{"group": g.group, "status": g.status, "total_lag": g.total_lag,
                    "partitions": [pl.describe() for pl in g.partitions[:20]]} for g in reading.groups or ()],
        "operation": summary["operation"],
        "reassigning": [dict(r) for r in reading.reassigning[:limit]],
        "past_runs": [{"dag_id": r.dag_id, "run_id": r.run_id, "url": run_url(r.dag_id, r.run_id), "state": r.state,
                       "start_ms": r.start_ms, "end_ms": r.end_ms, "outcome": r.outcome} for r in reading.past_runs],
    }
