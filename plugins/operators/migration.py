"""The ZooKeeper-to-KRaft migration's tasks besides its rolls (rules: ``kafka_ops.migration``; reads and edits:
``runtime.migration_steps``):

- :class:`MigrationCheckOperator` (``check_migration``): where the cluster is, what refuses the migration (or the
  revert), the run's cluster mode, and in a dry run every edit per host;
- :class:`ProvisionControllersOperator` (``provision_controllers``): phase 1;
- :class:`MigrationWaitOperator`: the end of a phase as the cluster shows it (``migrated``, ``kraft_brokers``,
  ``finalized``; a revert's ``zookeeper``);
- :class:`MigrationApprovalOperator`: the approvals before phase 3 and before the point of no return;
- :class:`DeprovisionControllersOperator` (a revert): the controllers stopped and their metadata removed,
  ``/controller`` and ``/migration`` deleted.
"""

from __future__ import annotations

import shlex
from typing import Any

from hooks.kafka_admin import KafkaAdminHook
from hooks.zookeeper import ZooKeeperHook
from kafka_ops import migration, properties_file
from kafka_ops.done_lines import controllers_line
from kafka_ops.migration import BrokerMode, ControllerState, Phase
from runtime import migration_steps as steps
from runtime.cluster_mode import MODE_KEY
from runtime.config_steps import read_properties_text
from runtime.failures import RunRefused
from runtime.host_files import node_paths, run_on_host
from runtime.params import is_true
from runtime.waiting import Check

from operators.cluster_operator import ClusterOperator
from operators.upgrade_approval import ProtocolBumpApprovalOperator

CHECK_TASK_ID = "check_migration"


class MigrationCheckOperator(ClusterOperator):
    """Read where the migration is and refuse what cannot work, before anything is touched.

    :param direction: ``"migrate"`` (the preconditions of ``kafka_ops.migration.refusals``, then the controllers'
        hosts over SSH) or ``"revert"`` (refused once a controller is finalized).
    :param settings: ``cluster``, ``dry_run``, ``healthcheck_interval_s``, ``healthcheck_timeout_s``.

    Keeps the run's cluster mode under XCom ``cluster_mode`` (``migrating``; ``zookeeper`` for a dry run of a
    cluster where no controller runs yet: the rolls then plan as in ZooKeeper mode and the controllers' roll plans
    nothing). Returns ``{"phase": int, "cluster_id": str, "inter_broker_listener": str, "protocol_map": str,
    "brokers": [ids]}``.

    :raises runtime.failures.RunRefused: naming every refusal ("nothing was touched").
    """

    ui_color = "#eeeeee"

    def __init__(self, *, direction: str = "migrate", **kwargs: Any) -> None:
        kwargs.setdefault("task_id", CHECK_TASK_ID)
        super().__init__(**kwargs)
        if direction not in ("migrate", "revert"):
            raise ValueError(f"direction must be migrate or revert, got {direction!r}")
        self.direction = direction

    def execute(self, context: Any) -> dict[str, Any]:
        self.resolve(context)
        profile = self.profile
        with KafkaAdminHook(profile=profile) as admin:
            state = self.ask(lambda: admin.cluster_state(configs=False), "the cluster's brokers (Metadata)")
            ids = list(state.broker_ids)
            described = self.ask(lambda: admin.describe_broker_config_entries(ids), "every broker's configs")
            releases = self.ask(lambda: admin.broker_features(ids), "every broker's release (ApiVersions)")
            reassigning = len(self.ask(admin.list_partition_reassignments, "running reassignments"))
            try:
                view, found = steps.read_view(profile, admin, ids)
            except ValueError as exc:
                raise RunRefused(f"cluster {profile.cluster!r}: {exc} (nothing was touched)") from exc
        phase = view.phase()
        self.log.info("cluster %s: %s", profile.cluster, view.describe())
        if self.direction == "revert":
            refusal = migration.revert_refusal(view)
            if refusal:
                raise RunRefused(f"revert refused (nothing was touched): {refusal}")
            reasons = [] if not state.offline_partitions() else [f"{len(state.offline_partitions())} partitions "
                                                                 "are offline"]
        else:
            facts = [migration.BrokerFacts.read(b, described[b], releases[b].get("release")) for b in ids]
            reasons = migration.refusals(facts, profile.controller_hosts, profile.controller_properties,
                                         zookeeper=profile.zookeeper, cluster_id=found["cluster_id"],
                                         reassigning=reassigning, offline=len(state.offline_partitions()),
                                         urp=len(state.under_replicated_partitions()))
            if not reasons and phase < Phase.FINALIZED:
                reasons = self._hosts_refusals(profile)
        if reasons:
            raise RunRefused(f"{'revert' if self.direction == 'revert' else 'migration'} refused (nothing was "
                             "touched): " + "; ".join(reasons))
        first = described[ids[0]]
        listener = migration.config_value(first.get("inter.broker.listener.name", "")) or "PLAINTEXT"
        protocol_map = migration.config_value(first.get("listener.security.protocol.map", "")) \
            or migration.DEFAULT_PROTOCOL_MAP
        dry_start = self.dry_run and not view.in_state(ControllerState.MIGRATING) and phase < Phase.KRAFT_BROKERS
        mode = "zookeeper" if dry_start else "migrating"
        context["ti"].xcom_push(key=MODE_KEY, value=mode)
        self.log.info("run's cluster mode: %s (the rolls and the controllers' roll follow it)", mode)
        if self.dry_run:
            self._log_edits(profile, state, view, listener, protocol_map)
        return {"phase": int(phase), "cluster_id": found["cluster_id"], "inter_broker_listener": listener,
                "protocol_map": protocol_map, "brokers": ids}

    def _hosts_refusals(self, profile: Any) -> list[str]:
        """The controllers' hosts answer over SSH and hold Kafka's storage tool (``kafka_home``)."""
        out = []
        for node in steps.controllers(profile):
            try:
                home, _ = node_paths(profile, int(node["id"]))
                tool = shlex.quote(f"{home}/bin/kafka-storage.sh")
                run_on_host(profile, node, f"test -x {tool}", "looking for Kafka", read_only=True)
            except Exception as exc:  # noqa: BLE001 - each unreachable host is a refusal, named
                out.append(f"controller {node['id']} ({node['host']}): {str(exc)[-200:]}")
        return out

    def _log_edits(self, profile: Any, state: Any, view: migration.MigrationView, listener: str,
                   protocol_map: str) -> None:
        """DRY RUN: every edit per host, phase by phase, as the run would make it from the files as they are."""
        action = "revert" if self.direction == "revert" else "migration"
        self.log.info("DRY RUN: the %s's edits per host, from the files as they are now:", action)
        if self.direction == "migrate":
            for node in steps.controllers(profile):
                if view.controllers[node["id"]] is ControllerState.ABSENT:
                    text = steps.controller_text(profile, node, inter_broker_listener=listener,
                                                 protocol_map=protocol_map)
                    self.log.info("DRY RUN: phase 1, controller %s (%s): server.properties:\n%s", node["id"],
                                  node["host"], text)
        for broker in state.brokers:
            node = {"id": broker.id, "host": broker.host}
            text = read_properties_text(profile, node)
            kinds = ["migrate", "kraft"] if self.direction == "migrate" else ["zookeeper", "drop_flag"]
            for kind in kinds:
                props = properties_file.parse(text)
                try:
                    edits = steps.edits_for(kind, profile, node, props)
                except ValueError as exc:
                    self.log.info("DRY RUN: broker %s: %s edit impossible: %s", broker.id, kind, exc)
                    break
                new = properties_file.edit(text, edits)
                changed = properties_file.diff(text, new)
                self.log.info("DRY RUN: roll %s, broker %s (%s): %s", kind, broker.id, broker.host,
                              "; ".join(f"{k} {b if b is not None else 'unset'} -> "
                                        f"{a if a is not None else 'removed'}" for k, (b, a) in changed.items())
                              or "nothing to change")
                text = new
        if self.direction == "migrate":
            for node in steps.controllers(profile):
                self.log.info("DRY RUN: phase 4, controller %s: %s and every zookeeper.* key removed from "
                              "server.properties", node["id"], migration.FLAG)


class ProvisionControllersOperator(ClusterOperator):
    """Phase 1: each controller that does not answer gets its ``server.properties`` (migration on), its storage
    formatted with the cluster's id and is started; then waits until the quorum has a leader and every controller
    says ``ZkMigrationReady``. Controllers that answer already are left alone (a resumed run provisions nothing
    twice); on a finalized cluster there is nothing to do.

    :param settings: ``cluster``, ``dry_run``, ``healthcheck_interval_s``, ``healthcheck_timeout_s``.
    """

    ui_color = "#dfe7fd"

    def note_line(self, result: Any, dry_run: bool) -> str | None:
        return controllers_line(result, dry_run)

    def execute(self, context: Any) -> dict[str, Any]:
        self.resolve(context)
        profile = self.profile
        checked = context["ti"].xcom_pull(task_ids=CHECK_TASK_ID) or {}
        nodes = steps.controllers(profile)
        done: dict[str, str] = {}
        with KafkaAdminHook(profile=profile) as admin:
            states = {n["id"]: migration.controller_state(steps.controller_answer(admin, profile, n)) for n in nodes}
            if all(s is ControllerState.KRAFT for s in states.values()):
                self.log.info("every controller runs without the migration flag (finalized): nothing to provision")
                return {"provisioned": {}}
            for node in nodes:
                if states[node["id"]] is not ControllerState.ABSENT:
                    self.log.info("controller %s (%s) answers (%s): left alone", node["id"], node["host"],
                                  states[node["id"]].value)
                    continue
                text = steps.controller_text(profile, node, inter_broker_listener=checked["inter_broker_listener"],
                                             protocol_map=checked["protocol_map"])
                done[str(node["id"])] = steps.provision_controller(profile, node, text, checked["cluster_id"],
                                                                   migration.BRIDGE_RELEASE, self.log, self.dry_run)
                self.log.info("controller %s (%s): %s", node["id"], node["host"], done[str(node["id"])])
            if self.dry_run:
                self.log.info("DRY RUN: would wait until the quorum has a leader and every controller is ready to "
                              "migrate (ApiVersions ZkMigrationReady)")
                return {"provisioned": done}

            def ready() -> Check:
                answers = {n["id"]: steps.controller_answer(admin, profile, n) for n in nodes}
                late = [c for c, a in answers.items() if not a or not a.get("zk_migration_ready")]
                if late:
                    return Check(False, f"controllers {late} not ready to migrate yet (ApiVersions)")
                quorum = admin.controller_quorum(profile.controller_addresses())
                return Check(quorum.has_leader, f"quorum leader {quorum.leader_id} (epoch {quorum.leader_epoch}); "
                                                 f"every controller ready to migrate (ZkMigrationReady)")

            self.wait(ready, "the KRaft controllers to form a quorum ready to migrate", ramp_from_s=0.5)
        return {"provisioned": done}


#: What each wait waits for (``MigrationWaitOperator(until=...)``).
UNTIL = ("migrated", "kraft_brokers", "finalized", "zookeeper")


class MigrationWaitOperator(ClusterOperator):
    """Wait until the cluster shows a phase's end (``runtime.migration_steps.read_view``), polling every
    ``healthcheck_interval_s`` up to ``healthcheck_timeout_s``:

    - ``migrated`` (phase 2): every broker with the flag, ``/migration`` naming a metadata offset and
      ``/controller`` held by a KRaft controller (it logged "Completed migration of metadata from ZooKeeper to
      KRaft"), and the metadata readable through the brokers;
    - ``kraft_brokers`` (phase 3): every broker a KRaft broker and none registered in ZooKeeper (``/brokers/ids``);
    - ``finalized`` (phase 4): every controller without the flag, DescribeQuorum answered through the brokers and
      ``metadata.version`` finalized;
    - ``zookeeper`` (a revert's end): no controller answers, every broker in plain ZooKeeper mode, ``/migration``
      gone and ``/controller`` held by a broker.

    :param until: one of :data:`UNTIL`.
    """

    ui_color = "#e8f7e4"

    def __init__(self, *, until: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if until not in UNTIL:
            raise ValueError(f"until must be one of {UNTIL}, got {until!r}")
        self.until = until

    def execute(self, context: Any) -> str:
        self.resolve(context)
        if self.dry_run:
            self.log.info("DRY RUN: would wait until the cluster shows %s", self.until)
            return "dry run"
        profile = self.profile
        with KafkaAdminHook(profile=profile) as admin:
            ids = list(self.ask(lambda: admin.cluster_state(configs=False), "the cluster's brokers").broker_ids)

            def check() -> Check:
                view, _ = steps.read_view(profile, admin, ids)
                return Check(self._done(admin, view), view.describe())

            seen = self.wait(check, f"the cluster to show {self.until}", ramp_from_s=0.5)
            if self.until == "finalized":
                quorum = admin.describe_quorum()
                level, _ = admin.metadata_version()
                self.log.info("DescribeQuorum through the brokers: leader %s, epoch %s, voters %s; metadata.version "
                              "level %s", quorum.leader_id, quorum.leader_epoch, list(quorum.voter_ids), level)
        self.log.info("%s: %s", self.until, seen.message)
        return seen.message

    def _done(self, admin: KafkaAdminHook, view: migration.MigrationView) -> bool:
        """The view shows the step's end (``MigrationView.shows``); once finalized, the brokers also answer
        DescribeQuorum and report metadata.version."""
        if not view.shows(self.until):
            return False
        if self.until != "finalized":
            return True
        try:
            return admin.describe_quorum().has_leader and admin.metadata_version()[0] is not None
        except Exception:  # noqa: BLE001 - not answering yet: keep waiting
            return False


class MigrationApprovalOperator(ProtocolBumpApprovalOperator):
    """Approve or reject the next phase of the migration (Airflow's human-in-the-loop, as the upgrade's protocol
    bump): before phase 3 (the brokers become KRaft brokers; a revert then takes two broker rolls) and before
    phase 4 (the point of no return). Passes at once when its param is true (approved in advance), in a dry run,
    and when the cluster was past the phase already when the run began. Reject skips everything after it (the lock
    is still released).

    :param approves: ``"kraft_brokers"`` or ``"finalize"``.
    """

    TEXTS = {
        "kraft_brokers": ("Move the brokers of cluster {{ params.cluster }} to KRaft?",
                          "The metadata is migrated: the KRaft controllers run the cluster and write every change to "
                          "ZooKeeper too. Approve to restart every broker as a KRaft broker (process.roles=broker, "
                          "no ZooKeeper). Still reversible afterwards: a revert then takes two broker rolls. Reject "
                          "to end the run here, the brokers in ZooKeeper mode with the migration flag.",
                          Phase.KRAFT_BROKERS),
        "finalize": ("Finalize the migration of cluster {{ params.cluster }}: no way back to ZooKeeper",
                     "Every broker is a KRaft broker. Approve to restart the controllers without the migration flag "
                     "and zookeeper.connect: the POINT OF NO RETURN. Afterwards ZooKeeper is no longer written and "
                     "the cluster cannot go back to ZooKeeper mode. Reject to end the run here: it can still be "
                     "reverted (kafka_zk_to_kraft_revert).", Phase.FINALIZED),
    }

    def __init__(self, *, approves: str, **kwargs: Any) -> None:
        subject, body, _ = self.TEXTS[approves]
        kwargs.setdefault("subject", subject)
        kwargs.setdefault("body", body)
        kwargs.setdefault("checks_task_id", CHECK_TASK_ID)
        super().__init__(**kwargs)
        self.approves = approves

    def execute(self, context: Any) -> Any:
        params = context["params"]
        param = f"approve_{self.approves}"
        if is_true(params.get(param, False)):
            return self._approved(f"approved in advance (param {param})")
        if is_true(params.get("dry_run", False)):
            return self._approved(f"DRY RUN: the run would wait here for approval ({self.subject})")
        checked = context["ti"].xcom_pull(task_ids=self.checks_task_id) or {}
        guarded = self.TEXTS[self.approves][2]
        if int(checked.get("phase", 0)) >= guarded:
            return self._approved(f"the cluster was past phase {int(guarded)} when the run began: nothing to approve")
        self.log.info("waiting for approval: %s", self.subject)
        return self._ask(context)


class DeprovisionControllersOperator(ClusterOperator):
    """A revert's middle step (Kafka 3.9 docs, "Reverting to ZooKeeper mode During the Migration"), once every
    broker runs ZooKeeper mode again: every controller stopped, its metadata log and ``meta.properties`` removed
    (a later migration formats afresh), its ``server.properties`` moved aside; then ``/controller`` deleted (a
    broker becomes the controller) and ``/migration`` (so a later migration starts over), ``/controller_epoch``
    raised first to the KRaft controller's epoch where it is below it (KAFKA-20488). Waits until a broker holds
    ``/controller``.

    :raises runtime.failures.RunRefused: a broker still runs as a KRaft broker, or a controller is finalized.
    """

    ui_color = "#fde2e2"

    def note_line(self, result: Any, dry_run: bool) -> str | None:
        return controllers_line(result, dry_run)

    def execute(self, context: Any) -> dict[str, Any]:
        self.resolve(context)
        profile = self.profile
        with KafkaAdminHook(profile=profile) as admin:
            ids = list(self.ask(lambda: admin.cluster_state(configs=False), "the cluster's brokers").broker_ids)
            view, _ = steps.read_view(profile, admin, ids)
            refusal = migration.revert_refusal(view)
            kraft = view.with_mode(BrokerMode.KRAFT)
            if refusal or (kraft and not self.dry_run):
                raise RunRefused(refusal or f"brokers {kraft} still run as KRaft brokers: they must be back in "
                                            "ZooKeeper mode before the controllers go")
            done = {str(n["id"]): steps.deprovision_controller(profile, n, self.log, self.dry_run)
                    for n in steps.controllers(profile)}
            if self.dry_run:
                self.log.info("DRY RUN: would raise /controller_epoch to the KRaft controller's epoch if below "
                              "it, delete /controller and /migration, then wait for a broker to become "
                              "the controller")
                return {"deprovisioned": done}
            with ZooKeeperHook(profile=profile) as hook:
                zk = hook.get_conn()
                steps.raise_controller_epoch(zk, self.log)
                for path in ("/controller", "/migration"):
                    if zk.exists(path):
                        self.log.info("deleting %s (was %s)", path, zk.get(path)[0].decode(errors="replace"))
                        zk.delete(path)

            def broker_controls() -> Check:
                holder = int((steps.znodes(profile)["controller"] or {}).get("brokerid", -1))
                if holder not in ids:
                    return Check(False, f"/controller held by {holder}")
                brokers = admin.cluster_state(configs=False, describe_cluster=False).brokers
                addresses = {b.id: b.address for b in brokers}
                named = {b: self._controller_named_by(admin, addresses.get(b)) for b in ids}
                return Check(*migration.broker_controller_settled(holder, named))

            settled = self.wait(broker_controls, "a broker to become the controller again (/controller), known "
                                "to every broker", ramp_from_s=0.5)
            self.log.info("ZooKeeper-mode controller: %s", settled.message)
        context["ti"].xcom_push(key=MODE_KEY, value="zookeeper")
        self.log.info("run's cluster mode from here: ZooKeeper mode (no KRaft controller runs)")
        return {"deprovisioned": done}

    @staticmethod
    def _controller_named_by(admin: KafkaAdminHook, address: str | None) -> int | None:
        """The controller id the broker at ``address`` names (its own Metadata), None when it has no address (not
        in the Metadata) or does not answer."""
        from kafka.errors import KafkaError

        if address is None:
            return None
        try:
            return admin.controller_named_by(address)
        except KafkaError:
            return None
