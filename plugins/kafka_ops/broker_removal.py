"""What a decommission's last step does to each drained broker: stop it, and on a KRaft cluster remove its
registration too.

Why unregister: a stopped KRaft broker stays registered with the active controller (fenced) until someone sends
UnregisterBroker (KIP-631; ``kafka-cluster.sh unregister --id N``). Metadata no longer lists it, but the
controller still counts it: a later ``metadata.version`` (or other feature) upgrade is refused while a registered
broker's binaries do not support the level (Kafka's ``FeatureControlManager`` checks every registration), so a
broker decommissioned on 4.0 blocks the finalize step of the upgrade to 4.1. Kafka's operations guide ends a
KRaft decommission with the unregister. ZooKeeper mode has nothing to remove: a stopped broker's ephemeral
``/brokers/ids/N`` znode goes with its session.

The steps, in order: ``"stop"`` (a broker that is registered and live), ``"unregister"`` (KRaft only, once it is
gone). A broker that still holds or leads a replica gets neither: stopping it would leave its partitions
under-replicated, unregistering it would drop it from their ISRs for good.
"""

from __future__ import annotations

STOP = "stop"
UNREGISTER = "unregister"


class NotDrained(ValueError):
    """The broker still holds or leads replicas: it must not be stopped or unregistered."""


def removal_steps(broker: int, *, live: bool, held: list[str], led: list[str], kraft: bool) -> list[str]:
    """The steps for ``broker``: ``[]``, ``["stop"]``, ``["unregister"]`` or ``["stop", "unregister"]``.

    :param live: the broker is in the cluster's Metadata (registered and, on KRaft, unfenced).
    :param held: partitions (``"topic-N"``) that list it as a replica; ``led``: those it leads.
    :param kraft: the cluster runs in KRaft mode.
    :raises NotDrained: ``held`` or ``led`` is not empty (named with up to five partitions).
    """
    if held or led:
        outcome = "not stopped" if live else "down, but not drained: nothing done"
        raise NotDrained(f"broker {broker} still holds {len(held)} replicas and leads {len(led)} partitions "
                         f"(e.g. {(held or led)[:5]}): {outcome}")
    return ([STOP] if live else []) + ([UNREGISTER] if kraft else [])
