"""What turning Eligible Leader Replicas on does to ``min.insync.replicas``, and when the upgrade refuses it.

Raising the feature ``eligible.leader.replicas.version`` from 0 to 1 (ELR, KIP-966; ``kafka-features.sh upgrade
--release-version 4.1`` does it, and so does the upgrade's metadata_version step with ``release_features``) makes
the active controller write, in the same batch as the feature (Kafka's ``ConfigurationControlManager.
maybeGenerateElrSafetyRecords``; the ops docs' "Eligible Leader Replicas" section):

- a cluster-level ``min.insync.replicas`` (``kafka-configs.sh --entity-type brokers --entity-default``) when there
  is none, with the value of **the active controller's own static config** (its server.properties, else Kafka's
  default 1);
- the removal of every broker-level ``min.insync.replicas`` (``--entity-name <id>``).

A broker's server.properties ranks below the cluster-level value (DescribeConfigs' precedence: per-broker dynamic
> cluster-level dynamic > static > default), so afterwards every topic without its own ``min.insync.replicas``
has the cluster-level value. A fleet whose brokers set 2 in server.properties and whose controllers leave it
unset (controllers serve no topics, so their files rarely carry it) drops to 1 without a word: ``acks=all``
writes then succeed with a single in-sync replica. Once ELR is on, the cluster-level value cannot be deleted and
no broker-level one can be set (:func:`kafka_ops.config_change.elr_refusals`).

:func:`refusal` names every broker whose value would change, and how to make the value explicit first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kafka_ops.config_change import (
    DEFAULT_CONFIG,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    MIN_INSYNC_REPLICAS,
    STATIC_BROKER_CONFIG,
)

FEATURE = "eligible.leader.replicas.version"
CONFIG = MIN_INSYNC_REPLICAS
#: One node's answer for ``min.insync.replicas`` with synonyms: ``{"value": effective, "<source>": value, ...}``
#: (``KafkaAdminHook.broker_config_layers`` / ``controller_config_layers``).
Layers = Mapping[str, "str | None"]


def enables_elr(changes: Mapping[str, Sequence[int]]) -> bool:
    """True when ``changes`` (feature -> ``[from, to]`` levels, as ``release_features.FeaturePlan.changes`` gives
    them) raises ``eligible.leader.replicas.version`` from 0 to 1 or more: the raise that writes the records
    above. A raise from 1 on writes nothing (Kafka makes the same records only when they are missing)."""
    levels = changes.get(FEATURE)
    return bool(levels) and int(levels[0]) < 1 <= int(levels[1])


@dataclass(frozen=True)
class MinIsrLayers:
    """Where ``min.insync.replicas`` comes from on a cluster about to turn ELR on.

    :param brokers: broker id -> its value now (DescribeConfigs of its BROKER resource: per-broker dynamic,
        else cluster-level, else its server.properties, else Kafka's default), >= 1.
    :param cluster_default: the cluster-level value (DescribeConfigs source ``DYNAMIC_DEFAULT_BROKER_CONFIG``),
        None when none is set.
    :param controller_id: the active controller (the quorum leader), whose static value Kafka copies.
    :param controller_static: that controller's static value (source ``STATIC_BROKER_CONFIG``, else
        ``DEFAULT_CONFIG``), None when it could not be read (``controller_error`` says why).
    :param own: broker id -> its own dynamic value (``kafka-configs.sh --entity-name <id>``, source
        ``DYNAMIC_BROKER_CONFIG``), for the brokers that have one: Kafka removes them.
    """

    brokers: Mapping[int, int]
    cluster_default: int | None
    controller_id: int
    controller_static: int | None = None
    controller_error: str = ""
    own: Mapping[int, int] = field(default_factory=dict)

    @classmethod
    def from_answers(cls, brokers: Mapping[int, Layers], controller_id: int, controller: Layers | None,
                     controller_error: str = "") -> MinIsrLayers:
        """Read from DescribeConfigs answers with synonyms: each broker's own (its value, its own dynamic value,
        the cluster-level one any broker reports) and the active controller's (``controller``, None when it could
        not be asked: ``controller_error`` says why), whose static value is the ``STATIC_BROKER_CONFIG`` synonym,
        else ``DEFAULT_CONFIG``.

        :raises ValueError: a value that is not an integer.
        """
        cluster_level = next((int(v) for found in brokers.values()
                              if (v := found.get(DYNAMIC_DEFAULT_BROKER_CONFIG)) is not None), None)
        static = None if controller is None else controller.get(STATIC_BROKER_CONFIG, controller.get(DEFAULT_CONFIG))
        if controller is not None and static is None:
            controller_error = f"its DescribeConfigs answer names no static or default {CONFIG}"
        own = {b: int(v) for b, found in brokers.items() if (v := found.get(DYNAMIC_BROKER_CONFIG)) is not None}
        return cls(brokers={b: int(found["value"]) for b, found in brokers.items()},
                   cluster_default=cluster_level, controller_id=controller_id,
                   controller_static=None if static is None else int(static), controller_error=controller_error,
                   own=own)

    def after(self) -> int | None:
        """Every broker's value once ELR is on: the cluster-level value if set (Kafka keeps it), else the active
        controller's static value; None when neither is known."""
        return self.cluster_default if self.cluster_default is not None else self.controller_static

    def source_of_after(self) -> str:
        """Where :meth:`after` comes from, for log lines."""
        if self.cluster_default is not None:
            return "the cluster-level value, kept"
        return f"the active controller {self.controller_id}'s static value, which Kafka writes as the cluster-level one"

    def changed(self) -> dict[int, int]:
        """broker id -> its value now, for each broker whose value :meth:`after` would change (all of them when
        :meth:`after` is unknown)."""
        after = self.after()
        return {b: v for b, v in sorted(self.brokers.items()) if after is None or v != after}


def _advice(layers: MinIsrLayers) -> str:
    """How to make the value explicit: the cluster-level value the brokers without their own value use now (the
    most common of them; ties: the higher), and the brokers' own values to delete first."""
    shared = [v for b, v in layers.brokers.items() if b not in layers.own] or list(layers.brokers.values())
    value = max(Counter(shared).items(), key=lambda item: (item[1], item[0]))[0]
    own = sorted(layers.own)
    delete = (f"delete the own {CONFIG} of broker{'s' if len(own) > 1 else ''} {', '.join(map(str, own))} if it "
              f"should not go (Kafka removes it; kafka-configs.sh --entity-type brokers --entity-name <id> --alter "
              f"--delete-config {CONFIG}), and " if own else "")
    return (f"make the value explicit first: {delete}set the cluster-level {CONFIG} to what the brokers should keep "
            f"(DAG kafka_config_change with scope \"cluster\" and changes {{\"{CONFIG}\": \"{value}\"}}, or "
            f"kafka-configs.sh --entity-type brokers --entity-default --alter --add-config {CONFIG}={value}), or set "
            f"{CONFIG} in the controllers' server.properties and roll them; or leave the feature where it is (param "
            "release_features false)")


def _by_value(values: Mapping[int, int]) -> str:
    groups: dict[int, list[int]] = {}
    for b, v in sorted(values.items()):
        groups.setdefault(v, []).append(b)
    return "; ".join(f"broker{'s' if len(ids) > 1 else ''} {', '.join(map(str, ids))} use{'' if len(ids) > 1 else 's'} "
                     f"{v}" for v, ids in sorted(groups.items()))


def refusal(layers: MinIsrLayers) -> str | None:
    """Why raising ``eligible.leader.replicas.version`` to 1 must not be sent, or None when no broker's
    ``min.insync.replicas`` changes.

    Refused: a value that Kafka's ELR records would change on any broker (lowered or raised: either changes what
    ``acks=all`` writes need, and the operator decides that, not a side effect), and an unknown outcome (no
    cluster-level value and the active controller's static value not read). Topics with their own
    ``min.insync.replicas`` are not affected and not judged.
    """
    changed = layers.changed()
    if not changed:
        return None
    now = _by_value(changed)
    after = layers.after()
    if after is None:
        return (f"raising {FEATURE} to 1 (ELR, KIP-966) makes Kafka set the cluster-level {CONFIG} (none is set) "
                f"to the active controller {layers.controller_id}'s static value, which could not be read "
                f"({layers.controller_error or 'no answer'}); {now} now; {_advice(layers)}")
    where = ("Kafka keeps the cluster-level value" if layers.cluster_default is not None else
             f"Kafka sets the cluster-level {CONFIG} (none is set) to the active controller "
             f"{layers.controller_id}'s static value")
    return (f"raising {FEATURE} to 1 (ELR, KIP-966) would change {CONFIG} of every topic without its own: {where}, "
            f"{after}, and removes broker-level values; {now} now; {_advice(layers)}")


def summary(layers: MinIsrLayers) -> str:
    """One log line: what each broker uses now and what ELR leaves, e.g. ``"min.insync.replicas stays 2 when ELR
    is turned on (the cluster-level value, kept): brokers 0, 1, 2 use 2"``."""
    after = layers.after()
    verb = "stays" if not layers.changed() else "would become"
    return (f"{CONFIG} {verb} {after if after is not None else 'unknown'} when ELR is turned on "
            f"({layers.source_of_after()}): {_by_value(layers.brokers) or 'no brokers'}")
