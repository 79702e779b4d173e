"""A new broker that has not started yet, as its host's ``server.properties`` describes it: what a scale-out's dry
run plans onto without starting anything (a real run starts the broker first and plans onto it as registered).

The id is the one the broker will register with: ``node.id`` (KRaft) or ``broker.id`` (ZooKeeper mode; Kafka
refuses a file where both are set and differ); the rack is ``broker.rack``. Pure: text in, a
:class:`~kafka_ops.cluster.Broker` out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from kafka_ops import properties_file
from kafka_ops.cluster import Broker

#: The keys that give the id a broker registers with, in the order Kafka reads them (KafkaConfig: ``node.id``,
#: and ``broker.id`` in ZooKeeper mode).
ID_KEYS = ("node.id", "broker.id")

def unstarted_broker(broker_id: int, host: str, text: str) -> Broker:
    """The broker ``broker_id`` that ``text`` (its host's ``server.properties``) will start, on ``host`` (the
    profile's ``broker_hosts`` entry).

    :param broker_id: the id the operator named.
    :param host: the host it runs on.
    :param text: the file's text.
    :returns: ``Broker(id, host, 0, rack)``: ``rack`` is ``broker.rack`` (None when unset or empty); the port is 0,
        unknown before the broker registers its listeners (the planner does not use it).
    :raises ValueError: the file names no id (``broker.id.generation.enable`` would pick one at start: it cannot be
        planned onto before), an id that is not a whole number or not ``broker_id`` (the ``broker_hosts`` entry
        points at another broker's host), two different ids, or ``process.roles`` without ``broker`` (a KRaft
        controller holds no partitions).
    """
    props = properties_file.parse(text)
    found = {key: props[key].strip() for key in ID_KEYS if props.get(key, "").strip()}
    if not found:
        raise ValueError(f"broker {broker_id}: its server.properties on {host} sets neither node.id nor broker.id, so "
                         "the id it registers with is only known once it starts")
    for key, value in found.items():
        if not re.fullmatch(r"-?\d+", value):
            raise ValueError(f"broker {broker_id}: its server.properties on {host} has {key}={value}, not a number")
        if int(value) != broker_id:
            raise ValueError(f"broker {broker_id}: its server.properties on {host} has {key}={value}: that host "
                             f"starts broker {value}, not {broker_id} (check the connection's broker_hosts)")
    roles = [r.strip() for r in props.get("process.roles", "").split(",") if r.strip()]
    if roles and "broker" not in roles:
        raise ValueError(f"broker {broker_id}: its server.properties on {host} has process.roles={','.join(roles)}: "
                         "a controller, which holds no partitions")
    rack = props.get("broker.rack", "").strip() or None
    return Broker(id=broker_id, host=host, port=0, rack=rack)


def rack_problem(broker: Broker, cluster: Iterable[Broker]) -> str | None:
    """Why ``broker`` (a new one) cannot join ``cluster``'s registered brokers as its rack stands, or None.

    The planner places replicas rack-aware and, like Kafka's own rack-aware assignment (``kafka-reassign-partitions.sh
    --generate`` and topic creation: "Not all brokers have rack information"), refuses a cluster where only some
    brokers have a ``broker.rack``: a new broker without one joining brokers that have racks, or one with a rack
    joining brokers without.

    :param broker: the new broker (:func:`unstarted_broker`). :param cluster: the registered brokers.
    :returns: the refusal, naming the broker, its host and the racks; None when the racks fit.
    """
    racks = sorted({b.rack for b in cluster if b.rack is not None})
    without = sorted(b.id for b in cluster if b.rack is None)
    if broker.rack is None and racks:
        return (f"broker {broker.id}: its server.properties on {broker.host} sets no broker.rack, while the brokers "
                f"have racks {racks}: set its broker.rack (the plan is rack-aware and needs a rack on every broker)")
    if broker.rack is not None and without:
        return (f"broker {broker.id}: its server.properties on {broker.host} sets broker.rack={broker.rack}, while "
                f"brokers {without} have none: a rack on some brokers only is refused (as Kafka's rack-aware "
                f"assignment refuses it)")
    return None
