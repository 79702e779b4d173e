"""Every setting an operation reads, in one table: its default, its trigger-form schema and its description.

The DAG params come from here (:func:`param`, :func:`params`: ``operations.roll_params``,
``operations.reassignment_params``) and the operators take their defaults from here
(``operators.cluster_operator.ClusterOperator.setting``), so a default is written once. Settings without a schema
are not params: operation builders set them (``command_timeout_s``, ``quorum_fetch_timeout_ms``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow.sdk import Param
from kafka_ops.quorum import DEFAULT_FETCH_TIMEOUT_MS
from kafka_ops.upgrade import PHASES as UPGRADE_PHASES

from runtime.params import form_schema

COMMAND = {"type": ["null", "string"], "maxLength": 4096}
WINDOW = ("Outside the DAG's maintenance window (a MaintenanceWindowTimetable schedule) before a broker, batch or "
          "wave: wait (deferred) for the next window, or fail; a started broker always finishes. No window = always "
          "open")


@dataclass(frozen=True)
class Setting:
    """One setting: ``default`` (what an operator uses when the run does not set it), ``schema`` (JSON Schema
    keywords of its trigger-form param; empty = not a param) and ``description`` (the form's help text)."""

    default: Any
    schema: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""


SETTINGS: dict[str, Setting] = {
    # the cluster and what to roll
    "cluster": Setting("kafka_sandbox", {"type": "string", "minLength": 1},
                       "Airflow connection id (conn type kafka) of the cluster profile"),
    "brokers": Setting([], {"type": "array", "items": {"type": "integer", "minimum": 0}, "uniqueItems": True},
                       "Broker ids to restart; empty = all, controller last"),
    "keep_order": Setting(False, {"type": "boolean"},
                          "Keep the given broker order (do not move the controller last)"),
    "roles": Setting("all", {"type": "string", "enum": ["all", "brokers", "controllers"]},
                     "KRaft: all = the controllers first (one at a time, the active controller last), then the "
                     "brokers; brokers; controllers. Combined nodes (process.roles=broker,controller) roll with the "
                     "brokers, under the quorum check. ZooKeeper mode: all and brokers roll the brokers (the "
                     "controller is a broker, rolled last); controllers is refused"),
    "controllers": Setting([], {"type": "array", "items": {"type": "integer", "minimum": 0}, "uniqueItems": True},
                           "KRaft controller node ids to restart; empty = every dedicated voter of the metadata "
                           "quorum, the active controller last, and first the controllers of the connection's "
                           "controller_hosts that are observers, not voters (a combined node rolls with the brokers)"),
    # commands (names of the profile's commands)
    "pre_stop": Setting(None, COMMAND, "Name of a profile command to run on the broker host before stopping "
                        "(non-zero exit fails the step); empty = none"),
    "pre_start": Setting(None, COMMAND, "Name of a profile command to run before starting"),
    "stop_command": Setting(None, COMMAND, "Name of a profile command replacing service_stop"),
    "start_command": Setting(None, COMMAND, "Name of a profile command replacing service_start"),
    "command_timeout_s": Setting(300),  # an SSH command's deadline, seconds
    # gates and waits
    "healthcheck_interval_s": Setting(5, {"type": "integer", "minimum": 1, "maximum": 600},
                                      "Seconds between health checks"),
    "healthcheck_timeout_s": Setting(900, {"type": "integer", "minimum": 10, "maximum": 86400},
                                     "A wait fails after this many seconds, naming what is unhealthy"),
    "consumer_groups": Setting([], {"type": ["array", "null"], "items": {"type": "string"}},
                               "Burrow-watched groups: [] = the profile's list, null = no lag gate"),
    "lag_ok_consecutive": Setting(3, {"type": "integer", "minimum": 1, "maximum": 100},
                                  "Burrow must say OK this many polls in a row before a stop"),
    "fix_leader_imbalance": Setting(True, {"type": "boolean"},
                                    "A gate or health check that waits only on a leader imbalance elects the "
                                    "preferred leaders of the partitions that need it (off: wait for the brokers' "
                                    "own rebalance)"),
    "soak_s": Setting(0, {"type": "integer", "minimum": 0, "maximum": 86400}, "Pause after each broker, seconds"),
    "quorum_fetch_timeout_ms": Setting(DEFAULT_FETCH_TIMEOUT_MS),  # the cluster's controller.quorum.fetch.timeout.ms
    # batches
    "max_parallel": Setting(1, {"type": "integer", "minimum": 1, "maximum": 1000},
                            "Brokers that may be down together (1 = one at a time). A batch keeps every partition at "
                            "min.insync.replicas and a leader candidate; the controller goes last, after its "
                            "batch-mates"),
    "batch_by": Setting("none", {"type": "string", "enum": ["none", "rack"]},
                        "rack = a batch holds brokers of one rack only (needs broker.rack)"),
    # the run
    "window_policy": Setting("wait", {"type": "string", "enum": ["wait", "fail"]}, WINDOW),
    "dry_run": Setting(False, {"type": "boolean"}, "Plan and log every step; touch nothing"),
    "lock_wait": Setting("wait", {"type": "string", "enum": ["wait", "fail"]},
                         "Another operation holds the cluster: wait for it, or fail at once"),
    # reassignments (scale-out, decommission)
    "throttle_bytes_per_s": Setting(50_000_000, {"type": "integer", "minimum": 1},
                                    "Replication throttle while a wave copies, bytes/s per broker "
                                    "(leader/follower.replication.throttled.rate)"),
    "wave_bytes": Setting(None, {"type": ["null", "integer"], "minimum": 1},
                          "Most bytes a wave copies; empty = the planner's default"),
    "wave_moves_per_broker": Setting(None, {"type": ["null", "integer"], "minimum": 1},
                                     "Most replica moves per broker in a wave; empty = no cap"),
    "max_bytes": Setting(None, {"type": ["null", "integer"], "minimum": 1},
                         "Most bytes the whole plan may copy; empty = no cap"),
    "verify_interval_s": Setting(10, {"type": "integer", "minimum": 1, "maximum": 600},
                                 "Seconds between progress checks of a wave"),
    "verify_timeout_s": Setting(21600, {"type": "integer", "minimum": 10, "maximum": 7 * 86400},
                                "A wave not complete after this many seconds fails"),
    "cancel_on_timeout": Setting(True, {"type": "boolean"},
                                 "Cancel a wave's moves that are still running at its timeout"),
    "start_new_brokers": Setting(False, {"type": "boolean"}, "Start the new brokers over SSH (hosts from the "
                                 "profile's broker_hosts) and wait until they are registered; with dry_run nothing "
                                 "starts: the plan places them as their server.properties describe them"),
    "drain_only": Setting(False, {"type": "boolean"},
                          "Move only the drained brokers' replicas: the kept brokers exchange nothing (the plan "
                          "copies exactly the drained bytes; without it the plan also evens out the kept brokers "
                          "within 2 % of the mean)"),
    "stop_brokers": Setting(True, {"type": "boolean"},
                            "Stop the drained brokers (service_stop over SSH) once they hold nothing; on a KRaft "
                            "cluster also unregister them (UnregisterBroker), or a later metadata.version upgrade "
                            "is refused"),
    # maintenance (the roll-records cleanup)
    "keep_days": Setting(14, {"type": "number", "minimum": 1},
                         "Days a run's roll records are kept after it ended: while they exist, clearing a failed "
                         "run's failed tasks resumes the roll without restarting a broker twice, and clearing a "
                         "run that succeeded restarts none again"),
    "enabled": Setting(True),  # a step an operation builder switches by a param (start_new_brokers, stop_brokers)
    # upgrades
    "target_version": Setting("3.7.1", {"type": "string", "pattern": r"^\d+\.\d+\.\d+$"},
                              "The Kafka release to upgrade to (major.minor.patch)"),
    "install_command": Setting(None, {"type": ["null", "string"], "maxLength": 4096},
                               "Name of a profile command installing the release on a broker or controller host "
                               "({version} is filled in); empty = switch the kafka symlink under kafka_home to the "
                               "unpacked kafka_*-<version> beside it"),
    "revert_failed_broker": Setting(False, {"type": "boolean"},
                                    "A broker (or controller) that does not come back after its new release or "
                                    "server.properties edit: put it back as it was (the previous release's symlink, "
                                    "the server.properties backup), start it and wait until it is back, then fail; "
                                    "false = fail and say how"),
    "approve_protocol_bump": Setting(False, {"type": "boolean"},
                                     "Approve the IBP/LMF bump (KRaft: the metadata.version bump) in advance; false = "
                                     "the run waits for Approve / Reject (Required Actions) before the irreversible "
                                     "phases"),
    "phases": Setting(list(UPGRADE_PHASES), {"type": "array", "items": {"type": "string", "enum": list(UPGRADE_PHASES)},
                                             "uniqueItems": True, "minItems": 1},
                      "Phases to run, in this order: pin, binaries, ibp, lmf (ZooKeeper mode), metadata_version "
                      "(KRaft); binaries rolls the KRaft controllers first"),
    "metadata_version": Setting(None, {"type": ["null", "string"], "maxLength": 32},
                                "KRaft: the metadata.version to finalize ('4.1-IV1', '4.1' or the feature level "
                                "'27'); empty = the latest level of target_version"),
    "release_features": Setting(True, {"type": "boolean"},
                                "KRaft: with metadata.version, raise the other features to their defaults for it "
                                "(group.version, transaction.version, eligible.leader.replicas.version), as "
                                "kafka-features.sh upgrade --release-version does; kraft.version is never changed; "
                                "false = metadata.version only"),
    # ZooKeeper-to-KRaft migration
    "approve_kraft_brokers": Setting(False, {"type": "boolean"},
                                     "Approve phase 3 in advance (every broker restarted as a KRaft broker); false = "
                                     "the run waits for Approve / Reject (Required Actions) after the metadata is "
                                     "migrated"),
    "approve_finalize": Setting(False, {"type": "boolean"},
                                "Approve phase 4 in advance: the controllers lose the migration flag, the POINT OF NO "
                                "RETURN; false = the run waits for Approve / Reject before it"),
    # config change
    "changes": Setting({}, {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean",
                                                                                 "null"]}},
                       'Broker configs to change: {"config.name": "value"}, null removes one; dynamic keys are '
                       "changed live (IncrementalAlterConfigs), read-only ones in server.properties followed by a "
                       "restart of only the brokers whose file and running config differ"),
    "scope": Setting("cluster", {"type": ["string", "array"], "pattern": "^cluster$",
                                 "items": {"type": "integer", "minimum": 0}, "minItems": 1, "uniqueItems": True},
                     '"cluster" = every broker, dynamic keys as the cluster-wide default; or broker ids [1, 2] = '
                     "those brokers only, dynamic keys per broker (listener and security keys need broker ids)"),
}


def default(name: str) -> Any:
    """The default of setting ``name``.

    :raises KeyError: not a setting of the table (named, with the known ones).
    """
    try:
        return SETTINGS[name].default
    except KeyError:
        raise KeyError(f"no setting {name!r} in the settings table; known: {sorted(SETTINGS)}") from None


def value_or_default(name: str, settings: Mapping[str, Any]) -> Any:
    """Setting ``name`` as ``settings`` hold it, or its default when absent, or null where null means nothing (its
    param does not allow null: ``soak_s``). A null that means something stays null (``consumer_groups``: no lag
    gate; ``wave_bytes``: the planner's default).

    :raises KeyError: absent and not a setting of the table.
    """
    if name not in settings:
        return default(name)
    value = settings[name]
    if value is None and name in SETTINGS:
        kinds = SETTINGS[name].schema.get("type", "null")
        if "null" not in ([kinds] if isinstance(kinds, str) else kinds):
            return default(name)
    return value


def param(name: str, description: str | None = None, **schema: Any) -> Param:
    """The trigger-form param of setting ``name`` (a fresh object), its schema extended or overridden by
    ``schema`` and its description replaced by ``description`` when given (an operation's own wording). Number
    bounds are kept out of the form's schema (``runtime.params.form_schema``: the form would clamp the value)
    and named in the description.

    :raises KeyError: not a setting of the table. :raises ValueError: a setting that is not a param.
    """
    setting = SETTINGS.get(name)
    if setting is None:
        raise KeyError(f"no setting {name!r} in the settings table; known: {sorted(SETTINGS)}")
    if not setting.schema:
        raise ValueError(f"setting {name!r} is not a param (an operation builder sets it)")
    shown, bounds = form_schema({**setting.schema, **schema})
    text = description or setting.description
    if bounds:  # the form would clamp a number to its bounds: check_and_lock refuses it instead (runtime.params)
        text += f" ({bounds}; a value outside is refused by check_and_lock)"
    return Param(setting.default, description=text, **shown)


def params(*names: str) -> dict[str, Param]:
    """The params of ``names``, in that order (fresh objects)."""
    return {name: param(name) for name in names}
