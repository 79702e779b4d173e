"""The ZooKeeper-to-KRaft migration's reads and edits of the cluster, for the rules of ``kafka_ops.migration``:

- :func:`read_view`: where the cluster is (:class:`kafka_ops.migration.MigrationView`): every broker's running
  config (DescribeConfigs), every controller's ApiVersions, ZooKeeper's ``/migration``, ``/controller`` and
  ``/brokers/ids``;
- the rolls' hooks: :func:`broker_facts` / :func:`controller_facts` (what the needs-action rules judge, read at
  the node's turn) and :func:`before_start` (the node's ``server.properties`` edit of a phase, while it is down:
  backup beside it, atomic rename, read back, and the way back in the roll's record);
- a controller's provisioning (:func:`provision_controller`) and deprovisioning (:func:`deprovision_controller`).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from typing import Any

from airflow.sdk.exceptions import AirflowFailException
from hooks.kafka_admin import KafkaAdminHook
from hooks.zookeeper import ZooKeeperHook
from kafka_ops import migration, properties_file
from kafka_ops.profile import ClusterProfile
from kafka_ops.roll_spec import WayBack

from runtime.config_steps import read_properties_text
from runtime.host_files import node_paths, run_on_host, storage_format_command, who, write_properties
from runtime.upgrade_steps import properties_way_back


def controller_address(profile: ClusterProfile, node: Mapping[str, Any]) -> str:
    """``host:port`` of a controller's CONTROLLER listener (its host, the port of ``controller_properties``)."""
    return f"{node['host']}:{migration.controller_port(profile.controller_properties)}"


def controllers(profile: ClusterProfile) -> list[dict[str, Any]]:
    """The profile's controllers as step dicts ``{"id", "host", "role": "controller"}``, by node id."""
    return [{"id": i, "host": h, "role": "controller"} for i, h in sorted(profile.controller_hosts.items())]


def controller_answer(admin: KafkaAdminHook, profile: ClusterProfile, node: Mapping[str, Any]) -> dict | None:
    """A controller's ApiVersions answer (``kafka_ops.migration.controller_state`` reads it), None when it does
    not answer (not provisioned, stopped, starting)."""
    try:
        return admin.controller_api_versions(controller_address(profile, node))
    except Exception:  # noqa: BLE001 - no answer is the answer: the controller is not running
        return None


def read_json(zk: Any, path: str) -> Any:
    """A znode's JSON (a started kazoo client ``zk``), None when the znode is absent or empty."""
    return json.loads(zk.get(path)[0] or b"null") if zk.exists(path) else None


def znodes(profile: ClusterProfile) -> dict[str, Any]:
    """``{"cluster_id", "migration", "controller", "zk_registered"}`` from ZooKeeper (JSON parsed; None when a
    znode is absent).

    :raises ValueError: the profile names no ZooKeeper.
    """
    if not profile.zookeeper:
        raise ValueError(f"connection {profile.cluster!r} names no ZooKeeper (profile field 'zookeeper' in extra): "
                         "a migration to KRaft, and its revert, act on a ZooKeeper-mode cluster through its "
                         "ZooKeeper; a KRaft cluster (no ZooKeeper) has nothing to migrate")
    with ZooKeeperHook(profile=profile) as hook:
        zk = hook.get_conn()
        cluster = read_json(zk, "/cluster/id")
        ids = zk.get_children("/brokers/ids") if zk.exists("/brokers/ids") else []
        return {"cluster_id": (cluster or {}).get("id"), "migration": read_json(zk, "/migration"),
                "controller": read_json(zk, "/controller"), "zk_registered": tuple(sorted(int(i) for i in ids))}


def raise_controller_epoch(zk: Any, log: Any) -> int | None:
    """Before a revert deletes ``/controller``: raise ``/controller_epoch`` to the KRaft controller's epoch when it
    is below it (:func:`kafka_ops.migration.controller_epoch_floor`, KAFKA-20488), so the next ZooKeeper-mode
    controller may elect leaders for the partitions whose state the KRaft controller wrote. The write is
    version-checked: a ZooKeeper-mode controller elected meanwhile makes it fail rather than be overwritten.

    :param zk: a started kazoo client (``ZooKeeperHook.get_conn()``).
    :param log: where to say what was done (a ``logging.Logger``).
    :returns: the epoch written, or None when ``/controller_epoch`` stays (already past it, or no KRaft controller
        in ``/controller``).
    :raises kazoo.exceptions.BadVersionError: ``/controller_epoch`` changed between the read and the write.
    """
    controller = read_json(zk, "/controller")
    if controller is None or not zk.exists("/controller_epoch"):
        return None
    raw, stat = zk.get("/controller_epoch")
    zk_epoch = int(raw.decode().strip())
    floor = migration.controller_epoch_floor(zk_epoch, controller)
    if floor is None:
        log.info("/controller_epoch %d is not below the KRaft controller's epoch %s: kept", zk_epoch,
                 controller.get("kraftControllerEpoch", "(none)"))
        return None
    zk.set("/controller_epoch", str(floor).encode(), version=stat.version)
    log.info("/controller_epoch raised from %d to %d, the KRaft controller's epoch, which every partition state it "
             "wrote names: the next ZooKeeper-mode controller (epoch %d) may elect their leaders (KAFKA-20488)",
             zk_epoch, floor, floor + 1)
    return floor


def read_view(profile: ClusterProfile, admin: KafkaAdminHook, broker_ids: list[int]) -> tuple[migration.MigrationView,
                                                                                              dict[str, Any]]:
    """(where the migration is, the znodes read) for the brokers ``broker_ids`` and the profile's controllers."""
    described = admin.describe_broker_config_entries(broker_ids) if broker_ids else {}
    found = znodes(profile)
    view = migration.MigrationView(
        brokers={b: migration.broker_mode(described[b]) for b in broker_ids},
        controllers={c["id"]: migration.controller_state(controller_answer(admin, profile, c))
                     for c in controllers(profile)},
        migration_znode=found["migration"], controller_znode=found["controller"],
        zk_registered=found["zk_registered"])
    return view, found


def broker_facts(profile: ClusterProfile, broker: Mapping[str, Any], settings: Mapping[str, Any]) -> dict[str, Any]:
    """A broker roll's ``facts`` hook: ``{"mode": BrokerMode value}`` from the broker's running config."""
    bid = int(broker["id"])
    with KafkaAdminHook(profile=profile) as admin:
        described = admin.describe_broker_config_entries([bid])[bid]
    return {"mode": migration.broker_mode(described).value}


def controller_facts(profile: ClusterProfile, node: Mapping[str, Any], settings: Mapping[str, Any]) -> dict[str, Any]:
    """The finalize roll's ``facts`` hook: ``{"migration_ready": bool}`` from the controller's ApiVersions.

    :raises AirflowFailException: the controller does not answer (the roll's gate saw it in the quorum).
    """
    with KafkaAdminHook(profile=profile) as admin:
        answer = controller_answer(admin, profile, node)
    if answer is None:
        raise AirflowFailException(f"controller {node['id']} ({controller_address(profile, node)}) does not answer "
                                   "ApiVersions")
    return {"migration_ready": bool(answer["zk_migration_ready"])}


def zookeeper_mode_backup(profile: ClusterProfile, node: Mapping[str, Any]) -> dict[str, str] | None:
    """The newest backup of the node's ``server.properties`` that is a ZooKeeper-mode broker's file (the one the
    migration's phase 3 edit replaced), parsed; None when there is none."""
    _, props = node_paths(profile, int(node["id"]))
    p = shlex.quote(props)
    out = run_on_host(profile, node, f"for f in $(ls -1t {p}.bak-* 2>/dev/null); do "
                                     "grep -q '^zookeeper.connect' \"$f\" && ! grep -q '^process.roles' \"$f\" && "
                                     "{ cat \"$f\"; break; }; done; true", "reading the ZooKeeper-mode backup",
                      read_only=True)
    return properties_file.parse(out) if out.strip() else None


def edits_for(kind: str, profile: ClusterProfile, node: Mapping[str, Any], props: Mapping[str, str]
              ) -> dict[str, str | None]:
    """The ``server.properties`` edit of roll ``kind`` on ``node`` (file ``props``), by the rules of
    ``kafka_ops.migration``.

    :raises ValueError: an unknown kind, or a file the rule cannot edit (named).
    """
    port = migration.controller_port(profile.controller_properties)
    if kind == "migrate":
        return migration.broker_migrating_edits(props, profile.controller_hosts, port)
    if kind == "kraft":
        return migration.broker_kraft_edits(props)
    if kind == "finalize":
        return migration.controller_finalized_edits(props)
    if kind == "zookeeper":
        return migration.broker_back_to_zookeeper_edits(props, zookeeper_mode_backup(profile, node),
                                                        zookeeper=str(profile.zookeeper))
    if kind == "drop_flag":
        return migration.broker_flag_removed_edits(props)
    raise ValueError(f"unknown migration edit {kind!r}")


def before_start(kind: str):
    """The ``before_start`` hook of roll ``kind`` (``migrate``, ``kraft``, ``finalize``; a revert's ``zookeeper``,
    ``drop_flag``): the node's file edited while it is down (a dry run logs the edit). Returns the way back (the
    backup), None when the file already held every value (a resumed run writes nothing twice)."""

    def step(profile: ClusterProfile, node: Mapping[str, Any], settings: Mapping[str, Any], log: Any,
             dry_run: bool) -> WayBack | None:
        text = read_properties_text(profile, node)
        try:
            edits = edits_for(kind, profile, node, properties_file.parse(text))
            new = properties_file.edit(text, edits)
        except ValueError as exc:
            raise AirflowFailException(f"{who(node)}: server.properties: {exc}") from exc
        if new == text:
            log.info("%s: server.properties holds the %s settings already: not written", who(node), kind)
            return None
        changed = properties_file.diff(text, new)
        log.info("%s: server.properties %s edit%s: %s", who(node), kind, " (DRY RUN: not written)" if dry_run else "",
                 "; ".join(f"{k} {b if b is not None else 'unset'} -> {a if a is not None else 'removed'}"
                           for k, (b, a) in changed.items()))
        if dry_run:
            return None
        return properties_way_back(node_paths(profile, int(node["id"]))[1], write_properties(profile, node, new))

    return step


def controller_text(profile: ClusterProfile, node: Mapping[str, Any], *, inter_broker_listener: str,
                    protocol_map: str) -> str:
    """The migrating controller's ``server.properties`` (``kafka_ops.migration.controller_file``)."""
    return migration.controller_file(int(node["id"]), str(node["host"]), profile.controller_hosts,
                                     profile.controller_properties, zookeeper=str(profile.zookeeper),
                                     inter_broker_listener=inter_broker_listener, protocol_map=protocol_map)


def provision_controller(profile: ClusterProfile, node: Mapping[str, Any], text: str, cluster_id: str,
                         release: str, log: Any, dry_run: bool) -> str:
    """Write the controller's ``server.properties`` (a backup of one that differs), format its storage with the
    cluster's id when it has none (Kafka's ``kafka-storage format --cluster-id=<id> -c <file> -r <release>
    --ignore-formatted``: ``meta.properties`` and the bootstrap checkpoint), then start it (the profile's
    controller start command). Returns what it did, one line.

    :raises AirflowFailException: a step failed (its output in the message).
    """
    _, props = node_paths(profile, int(node["id"]))
    format_cmd = storage_format_command(profile, int(node["id"]), cluster_id, release)
    current = run_on_host(profile, node, f"cat {shlex.quote(props)} 2>/dev/null; true", "reading server.properties",
                          read_only=True)
    if dry_run:
        log.info("DRY RUN: %s: would write %s:\n%s\nthen run %s and start it", who(node), props, text, format_cmd)
        return "dry run"
    done = []
    if current != text:
        write_properties(profile, node, text)
        done.append(f"wrote {props}")
    out = run_on_host(profile, node, format_cmd, "formatting the metadata storage", timeout_s=180)
    done.append(out.strip().splitlines()[-1] if out.strip() else "storage formatted")
    text_start, origin = profile.controller_service_command("start", int(node["id"]))
    run_on_host(profile, node, text_start, f"starting the controller ({origin})", timeout_s=180)
    done.append(f"started ({origin})")
    return "; ".join(done)


def deprovision_controller(profile: ClusterProfile, node: Mapping[str, Any], log: Any, dry_run: bool) -> str:
    """A revert's end of a controller: stopped (the profile's controller stop command), its metadata log and
    ``meta.properties`` removed from each of its log dirs (so a later migration formats afresh instead of starting
    from stale metadata), its ``server.properties`` kept as ``server.properties.reverted-<epoch>``.

    :raises AirflowFailException: a step failed.
    """
    _, props = node_paths(profile, int(node["id"]))
    p = shlex.quote(props)
    current = run_on_host(profile, node, f"cat {p} 2>/dev/null; true", "reading server.properties", read_only=True)
    values = properties_file.parse(current) if current.strip() else {}
    dirs = [d.strip() for d in (values.get("metadata.log.dir") or values.get("log.dirs") or "").split(",")
            if d.strip()]
    stop, origin = profile.controller_service_command("stop", int(node["id"]))
    removal = " ".join(f"{shlex.quote(d + '/' + migration.METADATA_LOG)} {shlex.quote(d + '/meta.properties')}"
                       for d in dirs)
    if dry_run:
        log.info("DRY RUN: %s: would stop it (%s), remove %s and move %s aside", who(node), stop, removal or "nothing",
                 props)
        return "dry run"
    run_on_host(profile, node, stop, f"stopping the controller ({origin})", timeout_s=180)
    if removal:
        run_on_host(profile, node, f"rm -rf {removal}", "removing the metadata log")
    if current.strip():
        run_on_host(profile, node, f"mv {p} {p}.reverted-$(date +%s)", "moving server.properties aside")
    return f"stopped; removed {removal or 'no metadata log (no log.dirs)'}"
