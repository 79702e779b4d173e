"""A config change's reads of a broker (the roll's ``facts`` hook) and its edit of ``server.properties``, over SSH
and the admin API, for the rules of ``kafka_ops.config_change``.

- :func:`read_properties_text`: the broker host's ``server.properties`` (profile ``server_properties``), complete;
- :func:`facts`: what the roll's needs-action rule (``kafka_ops.config_change.needs_restart``) compares at the
  broker's turn: that file and the broker's own DescribeConfigs. In a dry run nothing was written, so the file
  is the one the change would write (``kafka_ops.config_change.broker_plan``), so the dry run names the brokers a
  real run would restart;
- :func:`write_changes`: the file edit of a plan's ``file_changes`` applied to the file as it is now (backup
  beside it, atomic rename, read back: ``runtime.host_files.write_properties``).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from airflow.sdk.exceptions import AirflowFailException
from hooks.kafka_admin import KafkaAdminHook
from kafka_ops import config_change, properties_file
from kafka_ops.profile import ClusterProfile

from runtime.host_files import node_paths, run_on_host, who, write_properties


def read_properties_text(profile: ClusterProfile, broker: Mapping[str, Any]) -> str:
    """The broker host's ``server.properties`` text, complete.

    :raises AirflowFailException: the profile names no ``server_properties``, the read failed or was cut short.
    """
    _, props = node_paths(profile, int(broker["id"]))
    return run_on_host(profile, broker, f"cat {shlex.quote(props)}", "reading server.properties", read_only=True)


def facts(profile: ClusterProfile, broker: Mapping[str, Any], settings: Mapping[str, Any]) -> dict[str, Any]:
    """The roll's ``facts`` hook: ``{"file_text": str, "described": name -> DescribedConfig}`` of the broker now
    (settings ``changes``, ``scope``, ``dry_run``: see the module docstring)."""
    bid = int(broker["id"])
    text = read_properties_text(profile, broker)
    with KafkaAdminHook(profile=profile) as admin:
        described = admin.describe_broker_config_entries([bid])[bid]
    scope = settings.get("scope") or config_change.CLUSTER
    if settings.get("dry_run") and config_change.in_scope(bid, scope):
        changes = config_change.parse_changes(settings.get("changes") or {})
        text = config_change.broker_plan(bid, changes, text, described, scope=scope).file_text
    return {"file_text": text, "described": described}


def write_changes(profile: ClusterProfile, broker: Mapping[str, Any],
                  file_changes: Mapping[str, Any]) -> tuple[dict[str, tuple[str | None, str | None]], str | None]:
    """Apply ``file_changes`` (key -> ``[before, after]``, after None = remove; a plan's) to the broker's
    ``server.properties`` as it is now; returns (what changed: key -> (before, after), the backup's path or None
    when the file already held every value: a resumed run writes nothing twice).

    :raises AirflowFailException: the read, the write or the read-back failed (the previous file is kept as the
        backup beside it).
    """
    text = read_properties_text(profile, broker)
    edits = {key: (pair[1] if pair is not None else None) for key, pair in file_changes.items()}
    try:
        new = properties_file.edit(text, edits)
    except ValueError as exc:
        raise AirflowFailException(f"{who(broker)}: server.properties: {exc}") from exc
    if new == text:
        return {}, None
    return properties_file.diff(text, new), write_properties(profile, broker, new)
