"""A point-in-time snapshot of a Kafka cluster: brokers, partitions, controller, min-ISR settings.

Pure data, no I/O and no Airflow imports. The hooks build a :class:`ClusterState` from cluster
metadata (``hooks.kafka_admin.KafkaAdminHook.cluster_state``); the health rules
(``kafka_ops.health``) and the restart planner (``kafka_ops.restart_plan``) read it.

Terms follow Kafka's: a partition's *replicas* is its assigned replica list (the first replica is
the *preferred leader*), *isr* the in-sync replicas, *leader* the current leader's broker id
(``-1`` = no leader = an *offline partition*).

The snapshot round-trips through plain JSON (:meth:`ClusterState.to_dict` /
:meth:`ClusterState.from_dict`), so tasks can pass it through XCom.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

#: Kafka's default for ``min.insync.replicas`` (broker config and topic config).
DEFAULT_MIN_INSYNC_REPLICAS = 1
#: Kafka's default for ``leader.imbalance.per.broker.percentage`` (broker config, percent).
DEFAULT_LEADER_IMBALANCE_PERCENTAGE = 10
#: Leader id Kafka reports for a partition without a leader (an offline partition).
NO_LEADER = -1


def _int(value: Any, what: str) -> int:
    """``value`` as an int; bools and non-integers raise ValueError naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} must be an integer, got {value!r}")
    return value


def _int_tuple(values: Iterable[Any], what: str) -> tuple[int, ...]:
    if isinstance(values, (str, bytes)):
        raise ValueError(f"{what} must be a list of broker ids, got {values!r}")
    return tuple(_int(v, what) for v in values)


@dataclass(frozen=True)
class Broker:
    """A registered broker.

    :param id: broker id (``broker.id``), >= 0.
    :param host: advertised host of the listener clients use.
    :param port: advertised port of that listener.
    :param rack: ``broker.rack``, or None when unset.
    """

    id: int
    host: str
    port: int
    rack: str | None = None

    def __post_init__(self) -> None:
        _int(self.id, "broker id")
        _int(self.port, f"broker {self.id} port")
        if self.id < 0:
            raise ValueError(f"broker id must be >= 0, got {self.id}")

    @property
    def address(self) -> str:
        """``host:port`` of the advertised listener (``[host]:port`` for an IPv6 literal), what a client connects to."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def to_dict(self) -> dict[str, Any]:
        """``{"id", "host", "port", "rack"}`` (the planner's ``brokers.json`` entry shape)."""
        return {"id": self.id, "host": self.host, "port": self.port, "rack": self.rack}


@dataclass(frozen=True)
class Registration:
    """A broker as a KRaft controller has it registered (DescribeCluster v2 with ``IncludeFencedBrokers``,
    KIP-1073): the broker, and whether it is fenced (down, or not caught up yet; Metadata leaves fenced brokers
    out, yet the controller counts their registrations).

    :param broker: its id, advertised listener and rack.
    :param fenced: True while fenced.
    """

    broker: Broker
    fenced: bool


def fenced_down(registrations: Iterable[Registration], live: Iterable[int]) -> list[Broker]:
    """The brokers a KRaft controller has registered but fenced that Metadata does not list as live: down (stopped,
    crashed, or decommissioned without UnregisterBroker), by id. A broker fenced only for a moment while Metadata
    already lists it is not one of them."""
    up = set(live)
    return sorted((r.broker for r in registrations if r.fenced and r.broker.id not in up), key=lambda b: b.id)


@dataclass(frozen=True)
class Partition:
    """One topic partition as the cluster metadata shows it.

    :param topic: topic name.
    :param partition: partition index, >= 0.
    :param leader: current leader's broker id, ``-1`` when the partition has no leader (offline).
    :param replicas: assigned replicas in assignment order; ``replicas[0]`` is the preferred leader.
    :param isr: in-sync replicas (order as reported; not meaningful).

    Lists are stored as tuples. Raises ValueError on non-integer ids or a negative partition.
    """

    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        _int(self.partition, f"{self.topic} partition")
        if self.partition < 0:
            raise ValueError(f"{self.topic}: partition must be >= 0, got {self.partition}")
        _int(self.leader, f"{self.topic}-{self.partition} leader")
        name = f"{self.topic}-{self.partition}"
        object.__setattr__(self, "replicas", _int_tuple(self.replicas, f"{name} replicas"))
        object.__setattr__(self, "isr", _int_tuple(self.isr, f"{name} isr"))

    @property
    def name(self) -> str:
        """``"<topic>-<partition>"``, the way Kafka's tools name a partition."""
        return f"{self.topic}-{self.partition}"

    @property
    def preferred_leader(self) -> int | None:
        """The first assigned replica (Kafka's preferred leader), or None for an empty replica list."""
        return self.replicas[0] if self.replicas else None

    @property
    def is_offline(self) -> bool:
        """True when the partition has no leader (``leader == -1``), Kafka's OfflinePartitionsCount."""
        return self.leader == NO_LEADER

    @property
    def is_under_replicated(self) -> bool:
        """True when ``|isr| < |replicas|``, Kafka's UnderReplicatedPartitions definition."""
        return len(self.isr) < len(self.replicas)

    @property
    def is_led_by_preferred(self) -> bool:
        """True when the current leader is the preferred leader."""
        return self.preferred_leader is not None and self.leader == self.preferred_leader

    def to_dict(self) -> dict[str, Any]:
        """``{"topic", "partition", "leader", "replicas", "isr"}`` with lists of ints."""
        return {
            "topic": self.topic,
            "partition": self.partition,
            "leader": self.leader,
            "replicas": list(self.replicas),
            "isr": list(self.isr),
        }


@dataclass(frozen=True)
class ClusterState:
    """Snapshot of a cluster: brokers, partitions, controller and the settings the health rules need.

    :param brokers: registered (live) brokers; ids unique.
    :param partitions: every partition of every topic (internal topics included); (topic, partition)
        unique.
    :param controller_id: broker id of the active controller, ``-1`` when unknown.
    :param topic_min_insync: per-topic ``min.insync.replicas`` overrides, topic -> int >= 1.
    :param default_min_insync: the broker default ``min.insync.replicas`` (Kafka default 1).
    :param leader_imbalance_percentage: the controller's ``leader.imbalance.per.broker.percentage``
        (Kafka default 10, percent).

    Raises ValueError on duplicate broker ids or duplicate partitions, or min-ISR values < 1.
    Lookups (:meth:`broker`) raise KeyError for unknown ids.
    """

    brokers: tuple[Broker, ...]
    partitions: tuple[Partition, ...]
    controller_id: int = -1
    topic_min_insync: Mapping[str, int] = field(default_factory=dict)
    default_min_insync: int = DEFAULT_MIN_INSYNC_REPLICAS
    leader_imbalance_percentage: int = DEFAULT_LEADER_IMBALANCE_PERCENTAGE

    def __post_init__(self) -> None:
        brokers = tuple(sorted(self.brokers, key=lambda b: b.id))
        ids = [b.id for b in brokers]
        dup_brokers = sorted({i for i in ids if ids.count(i) > 1})
        if dup_brokers:
            raise ValueError(f"duplicate broker ids in cluster state: {dup_brokers}")
        partitions = tuple(sorted(self.partitions, key=lambda p: (p.topic, p.partition)))
        seen: set[tuple[str, int]] = set()
        for p in partitions:
            key = (p.topic, p.partition)
            if key in seen:
                raise ValueError(f"duplicate partition in cluster state: {p.name}")
            seen.add(key)
        _int(self.controller_id, "controller id")
        _int(self.default_min_insync, "default min.insync.replicas")
        if self.default_min_insync < 1:
            raise ValueError(f"min.insync.replicas must be >= 1, got {self.default_min_insync}")
        overrides = {}
        for topic, value in dict(self.topic_min_insync).items():
            _int(value, f"{topic} min.insync.replicas")
            if value < 1:
                raise ValueError(f"{topic}: min.insync.replicas must be >= 1, got {value}")
            overrides[topic] = value
        pct = self.leader_imbalance_percentage
        if isinstance(pct, bool) or not isinstance(pct, (int, float)) or pct < 0:
            raise ValueError(f"leader.imbalance.per.broker.percentage must be a number >= 0, got {pct!r}")
        object.__setattr__(self, "brokers", brokers)
        object.__setattr__(self, "partitions", partitions)
        object.__setattr__(self, "topic_min_insync", MappingProxyType(overrides))

    # -- lookups -------------------------------------------------------------------------------

    @property
    def broker_ids(self) -> list[int]:
        """Registered broker ids, ascending."""
        return [b.id for b in self.brokers]

    def broker(self, broker_id: int) -> Broker:
        """The registered broker with this id; KeyError naming it when not registered."""
        for b in self.brokers:
            if b.id == broker_id:
                return b
        raise KeyError(f"broker {broker_id} is not registered (registered: {self.broker_ids})")

    def has_broker(self, broker_id: int) -> bool:
        """True when a broker with this id is registered."""
        return any(b.id == broker_id for b in self.brokers)

    def partition(self, topic: str, partition: int) -> Partition:
        """The partition ``topic``/``partition``; KeyError when absent."""
        for p in self.partitions:
            if p.topic == topic and p.partition == partition:
                return p
        raise KeyError(f"partition {topic}-{partition} not in cluster state")

    @property
    def topics(self) -> list[str]:
        """Topic names, sorted."""
        return sorted({p.topic for p in self.partitions})

    def min_insync_replicas(self, topic: str) -> int:
        """Effective ``min.insync.replicas`` of a topic: its override, else the broker default."""
        return self.topic_min_insync.get(topic, self.default_min_insync)

    def partitions_on(self, broker_id: int) -> list[Partition]:
        """Partitions with a replica assigned to ``broker_id`` (whether or not in sync)."""
        return [p for p in self.partitions if broker_id in p.replicas]

    def partitions_led_by(self, broker_id: int) -> list[Partition]:
        """Partitions whose current leader is ``broker_id``."""
        return [p for p in self.partitions if p.leader == broker_id]

    def partitions_preferring(self, broker_id: int) -> list[Partition]:
        """Partitions whose preferred leader (first replica) is ``broker_id``."""
        return [p for p in self.partitions if p.preferred_leader == broker_id]

    def offline_partitions(self) -> list[Partition]:
        """Partitions without a leader (``leader == -1``)."""
        return [p for p in self.partitions if p.is_offline]

    def under_replicated_partitions(self) -> list[Partition]:
        """Partitions with ``|isr| < |replicas|``."""
        return [p for p in self.partitions if p.is_under_replicated]

    def under_min_isr_partitions(self) -> list[Partition]:
        """Partitions whose ISR is smaller than their topic's ``min.insync.replicas`` (Kafka's
        UnderMinIsrPartitionCount): ``acks=all`` producers to them get NotEnoughReplicas. Offline partitions count
        when their ISR is that small too."""
        return [p for p in self.partitions if len(p.isr) < self.min_insync_replicas(p.topic)]

    @property
    def down_broker_ids(self) -> list[int]:
        """Brokers the cluster knows but that are not registered: ids in some replica list without a live
        broker (stopped, crashed, or left stopped by an earlier operation), ascending."""
        return sorted({r for p in self.partitions for r in p.replicas} - set(self.broker_ids))

    # -- serialisation -------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict; :meth:`from_dict` reverses it exactly."""
        return {
            "brokers": [b.to_dict() for b in self.brokers],
            "partitions": [p.to_dict() for p in self.partitions],
            "controller_id": self.controller_id,
            "topic_min_insync": dict(self.topic_min_insync),
            "default_min_insync": self.default_min_insync,
            "leader_imbalance_percentage": self.leader_imbalance_percentage,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ClusterState:
        """Build from :meth:`to_dict`'s shape. Missing optional keys take Kafka's defaults.

        Raises ValueError (or KeyError for a missing required key) on malformed input.
        """
        return cls(
            brokers=tuple(
                Broker(id=b["id"], host=b["host"], port=b["port"], rack=b.get("rack"))
                for b in data.get("brokers", [])
            ),
            partitions=tuple(
                Partition(
                    topic=p["topic"],
                    partition=p["partition"],
                    leader=p["leader"],
                    replicas=tuple(p["replicas"]),
                    isr=tuple(p.get("isr", ())),
                )
                for p in data.get("partitions", [])
            ),
            controller_id=data.get("controller_id", -1),
            topic_min_insync=dict(data.get("topic_min_insync", {})),
            default_min_insync=data.get("default_min_insync", DEFAULT_MIN_INSYNC_REPLICAS),
            leader_imbalance_percentage=data.get(
                "leader_imbalance_percentage", DEFAULT_LEADER_IMBALANCE_PERCENTAGE
            ),
        )
