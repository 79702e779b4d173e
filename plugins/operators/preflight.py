"""The preflight task of every operation: after the lock (and the operation's own input checks), before anything is
touched, every host the run will touch is asked, in one SSH command each (host keys checked), whether it offers what
the run needs (``kafka_ops.preflight``); every problem of every host is reported together in one failure, and a dry
run logs the same report.

Which hosts, by ``scope``:

- ``roll`` (the rolling restart): the brokers of the ``brokers`` setting (empty = every registered broker) and, with a
  KRaft quorum and ``roles`` ``all`` or ``controllers``, the controllers of ``controllers`` (empty = every voter,
  and every controller of ``controller_hosts`` that is an observer); their stop / start commands (the run's
  choices, the pre-steps) and, for controllers, the status command;
- ``upgrade``: every broker and, with a KRaft quorum, every controller; besides the service commands, the target
  release unpacked and complete beside ``kafka_home`` (phase ``binaries`` with the default install; a named
  ``install_command``'s program otherwise) and, in ZooKeeper mode with a ``pin`` / ``ibp`` / ``lmf`` phase, a
  writable ``server.properties``;
- ``scale-out``: with ``start_new_brokers``, each new broker that is not registered (its host from the profile's
  ``broker_hosts``): the start command;
- ``decommission``: with ``stop_brokers``, each drained broker: the stop command.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from hooks.broker_ssh import BrokerShell, step_connection
from hooks.kafka_admin import KafkaAdminHook
from kafka_ops import upgrade
from kafka_ops.command_output import failure_text
from kafka_ops.controller_roll import resolve_hosts, role_plan
from kafka_ops.preflight import HostNeeds, probe_script, problems, report
from kafka_ops.profile import ClusterProfile
from kafka_ops.quorum import observer_controllers
from kafka_ops.roll_spec import ClusterMode
from runtime.broker_commands import remote_command
from runtime.failures import RunRefused, describe
from runtime.params import is_true

from operators.cluster_operator import ClusterOperator

if TYPE_CHECKING:
    from airflow.sdk import Connection

SCOPES = ("roll", "upgrade", "scale-out", "decommission")
#: The run's command choices per roll step (the DAG params of the same names).
CHOICES = {"pre_stop": "pre_stop", "stop": "stop_command", "pre_start": "pre_start", "start": "start_command"}


class PreflightOperator(ClusterOperator):
    """Check every host the run will touch before anything is touched (see the module docstring).

    :param scope: one of :data:`SCOPES`.
    :param settings: ``cluster``, ``dry_run``, ``healthcheck_*``, ``command_timeout_s`` and what the scope reads:
        ``brokers``, ``roles``, ``controllers``, the command choices (``pre_stop``, ``stop_command``, ``pre_start``,
        ``start_command``), ``target_version``, ``install_command``, ``phases``, ``enabled`` (values or
        ``FromParam``).

    Returns (XCom) ``{"hosts": n, "problems": {node: [problem, ...]}}`` (only nodes with problems, a dry run's).

    :raises AirflowFailException: naming every problem of every host ("nothing was touched"); a profile or
        command choice that is invalid; a cluster that cannot be read within ``healthcheck_timeout_s``.
    """

    ui_color = "#eeeeee"

    def __init__(self, *, scope: str, settings: dict, **kwargs: Any) -> None:
        if scope not in SCOPES:
            raise ValueError(f"scope must be one of {SCOPES}, got {scope!r}")
        super().__init__(settings=settings, **kwargs)
        self.scope = scope

    def execute(self, context: Any) -> dict[str, Any]:
        self.resolve(context)
        profile = self.profile
        try:
            needs = self._needs(context, profile)
        except ValueError as exc:
            raise RunRefused(f"cluster {profile.cluster!r}: {exc} (nothing was touched)") from exc
        if not needs:
            self.log.info("preflight: no host to check for this run (%s)", self.scope)
            return {"hosts": 0, "problems": {}}
        timeout_s = float(self.setting("command_timeout_s"))
        # the connection settings are read here, in the task's own thread (its requests to Airflow stay in one
        # thread); the hosts are asked side by side
        conn = step_connection(profile.ssh_conn_id)  # one read serves every host's shell
        shells = {need.node: self._shell(profile, need, conn) for need, _ in needs}
        with ThreadPoolExecutor(max_workers=min(len(needs), 8)) as pool:
            found = dict(zip([n.node for n, _ in needs],
                             pool.map(lambda item: self._probe(shells[item[0].node], item[0], item[1], timeout_s),
                                      needs),
                             strict=True))
        hosts = {n.node: n.host for n, _ in needs}
        for need, _ in needs:
            if not found[need.node]:
                self.log.info("preflight: %s (%s): ok (%s)", need.node, need.host, self._what(need))
        bad = {node: f for node, f in found.items() if f}
        if not bad:
            self.log.info("preflight: every host the run will touch is ready (%d hosts)", len(needs))
            return {"hosts": len(needs), "problems": {}}
        text = report(bad, hosts)
        if self.dry_run:
            self.log.warning("DRY RUN: preflight: a real run would stop here, nothing touched: %s", text)
            return {"hosts": len(needs), "problems": bad}
        raise RunRefused(f"preflight: {len(bad)} of {len(needs)} hosts are not ready (nothing was "
                                   f"touched): {text}")

    @staticmethod
    def _what(need: HostNeeds) -> str:
        parts = [f"{len(need.commands)} commands"]
        if need.release:
            parts.append(f"Kafka {need.release} unpacked")
        if need.properties:
            parts.append("server.properties writable")
        return ", ".join(parts)

    @staticmethod
    def _shell(profile: ClusterProfile, need: HostNeeds, conn: Connection | None) -> BrokerShell | Exception:
        """The host's shell, or why there is none (a connection that disables host key checking, an unknown host
        key): reported as the host's problem by :meth:`_probe`."""
        try:
            return BrokerShell(profile.ssh_conn_id, need.host, conn=conn)
        except Exception as exc:  # noqa: BLE001 - every way of not reaching the host is the host's problem
            return exc

    def _probe(self, shell: BrokerShell | Exception, need: HostNeeds, node_id: int, timeout_s: float) -> list[str]:
        """The host's problems; an SSH failure (unreachable, unknown host key, refused login) is one."""
        try:
            if isinstance(shell, Exception):
                raise shell
            rc, out, err = shell.read(remote_command(probe_script(need), node_id), timeout_s)
        except Exception as exc:  # noqa: BLE001 - every way of not reaching the host is the host's problem
            return [f"SSH: {describe(exc)}"]
        found = problems(need, out)
        if rc != 0 and not found:
            found.append(f"the preflight probe exited {rc}: {failure_text(err, out, 300)}")
        return found

    # -- what the run needs, per scope --------------------------------------------------------------------------

    def _needs(self, context: Any, profile: ClusterProfile) -> list[tuple[HostNeeds, int]]:
        """``[(HostNeeds, node id)]`` of every host the run will touch."""
        if self.scope in ("scale-out", "decommission"):
            if not is_true(self.setting("enabled")):
                return []
            with KafkaAdminHook(profile=profile) as admin:
                state = self.ask(lambda: admin.cluster_state(configs=False), "the cluster's metadata")
            wanted = [int(b) for b in self.setting("brokers")]
            step = "start" if self.scope == "scale-out" else "stop"
            out = []
            for bid in wanted:
                registered = state.has_broker(bid)
                if registered == (step == "start"):
                    continue  # started or stopped already: nothing runs there
                host = state.broker(bid).host if registered else profile.broker_hosts.get(bid)
                if host is None:
                    continue  # refused by the operation's own checks, naming the missing broker_hosts entry
                text, _ = profile.command(None, step, bid)
                out.append((HostNeeds(f"broker {bid}", host, (text,)), bid))
            return out
        with KafkaAdminHook(profile=profile) as admin:
            state = self.ask(lambda: admin.cluster_state(configs=False), "the cluster's metadata")
            mode = self.mode(context, admin)
            roles = str(self.setting("roles"))
            named = [int(b) for b in self.setting("brokers")]
            controllers, with_brokers = mode.has_quorum and roles in ("all", "controllers"), roles != "controllers"
            if self.scope == "roll":  # the rolling restart: nodes of one kind named = only those (role_plan)
                try:
                    plan = role_plan(roles, [int(c) for c in self.setting("controllers")], mode.has_quorum, named)
                except ValueError:  # refused by the controller roll's plan, naming it
                    plan = None
                controllers = bool(plan and plan.controllers and mode.has_quorum)
                with_brokers = bool(plan and plan.brokers)
            quorum = self.ask(admin.describe_quorum, "DescribeQuorum") if controllers else None
        brokers = (named or list(state.broker_ids)) if with_brokers else []
        release, properties = self._upgrade_needs(mode)
        out = []
        for bid in brokers:
            if not state.has_broker(bid):
                continue  # an unknown or stopped broker is refused by the roll's plan, naming it
            commands = [c[0] for step, setting in CHOICES.items()
                        if (c := profile.command(self.cfg.get(setting), step, bid)) is not None]
            commands += self._install(profile, bid)
            out.append((HostNeeds(f"broker {bid}", state.broker(bid).host, tuple(commands), release,
                                  profile.kafka_home_for(bid) if release else None,
                                  profile.server_properties_for(bid) if properties else None), bid))
        if quorum is not None:
            observers = observer_controllers(quorum, profile.controller_hosts)  # controllers, not voters: rolled too
            known = set(quorum.voter_ids) | set(observers)
            wanted = [int(c) for c in self.setting("controllers")] or [*observers, *quorum.voter_ids]
            # a combined node (a voter that is a registered broker too) rolls as a broker: asked above, once
            hosts = resolve_hosts([c for c in wanted if c in known and not state.has_broker(c)],
                                  profile.controller_hosts, quorum, profile.cluster)
            for cid, (host, _) in sorted(hosts.items()):
                commands = [profile.controller_service_command(a, cid)[0] for a in ("stop", "start", "status")]
                commands += self._install(profile, cid)
                out.append((HostNeeds(f"controller {cid}", host, tuple(commands), release,
                                      profile.kafka_home_for(cid) if release else None), cid))
        return out

    def _upgrade_needs(self, mode: ClusterMode) -> tuple[str | None, bool]:
        """(the release that must be unpacked on every node, or None; whether server.properties is edited)."""
        if self.scope != "upgrade":
            return None, False
        return upgrade.host_needs(str(self.cfg["target_version"]), self.cfg.get("phases"),
                                  self.cfg.get("install_command"), mode is ClusterMode.ZOOKEEPER)

    def _install(self, profile: ClusterProfile, node_id: int) -> list[str]:
        """The upgrade's named install command on a node (its program must be there), else nothing."""
        choice = self.cfg.get("install_command") if self.scope == "upgrade" else None
        if not choice:
            return []
        return [profile.command(choice, "install", node_id)[0].replace("{version}", "0.0.0")]
