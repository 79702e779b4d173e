"""What a roll kind supplies to the node-roll operators (``operators.broker_roll``,
``operators.controller_roll``), and the constants both loops share.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kafka_ops.profile import ClusterProfile

#: Task states that count as failed (an earlier roll position in one stops the later ones; the run report names them).
FAILED_STATES = {"failed", "upstream_failed"}
#: First pause of the waits after an action, seconds (doubling up to healthcheck_interval_s).
RAMP_FROM_S = 0.5

#: A roll's optional step between "gone" and "start" (an upgrade switches binaries or edits
#: server.properties there): ``before_start(profile, broker, settings, log, dry_run)`` (``settings``: the
#: roll's resolved settings); raise to fail the broker.
BeforeStart = Callable[[ClusterProfile, Mapping[str, Any], Mapping[str, Any], Any, bool], None]
#: What a needs-action rule is told about a broker: ``facts(profile, broker, settings) -> dict``.
Facts = Callable[[ClusterProfile, Mapping[str, Any], Mapping[str, Any]], Mapping[str, Any]]
