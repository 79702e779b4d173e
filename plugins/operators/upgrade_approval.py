"""The approval before an upgrade's irreversible step. Airflow's human-in-the-loop ``ApprovalOperator``
(standard provider): the task waits in ``awaiting_input`` (no worker slot, no triggerer on Airflow 3.3) until
someone chooses Approve or Reject in the UI's Required Actions (or the HITL REST API).

- ZooKeeper mode: once ``inter.broker.protocol.version`` is bumped, the brokers cannot go back to the old
  release. Reject ends the run on the new binaries with the old IBP pinned.
- KRaft: once ``metadata.version`` is finalized at the new level (UpdateFeatures, KIP-584 / KIP-778), no node
  can start on binaries that do not support it (the old release), and going back down is a downgrade Kafka
  allows only when no level in between changed the metadata format. Reject ends the run on the new binaries
  with ``metadata.version`` unchanged.

An answer is never lost to Airflow: when the answer arrives before the scheduler has seen the task pause (a few
seconds after the question appears), Airflow 3.3's scheduler fails the resumed try ("state mismatch": it takes the
pause's exit for a task killed from outside). The task has one retry, and a retry first reads the answer given to
an earlier try (the REST API's ``hitlDetails/tries/{n}``, ``hooks.airflow_api``) and acts on it instead of asking
again.

The mode and the levels come from the ``check_upgrade`` task's XCom (``operators.upgrade_checks``). Reject skips
every task after this one (``ignore_downstream_trigger_rules``): the rolls that follow run with
``none_failed`` (a roll with nothing to do in this mode is *skipped*), which a plain skip of the next task
would not stop. Teardowns (the lock's release) still run.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from airflow.providers.standard.operators.hitl import ApprovalOperator
from hooks.airflow_api import AirflowApiHook
from kafka_ops.metadata_version import MetadataVersion, label, safe_downgrade
from kafka_ops.release_features import change_lines
from kafka_ops.upgrade import pending_protocol_bumps
from runtime import profiles
from runtime.lock_holding import release_held
from runtime.params import is_true

#: How many of the pending bumps the approval question names (one per broker and phase; the rest counted).
SHOWN_BUMPS = 6


class ProtocolBumpApprovalOperator(ApprovalOperator):
    """Approve or reject the IBP / LMF bump (ZooKeeper mode) or the ``metadata.version`` bump (KRaft) of an
    upgrade; passes at once when the run's param ``approve_protocol_bump`` is true (approved in advance), when
    no protocol phase of the cluster's mode is requested (``ibp`` / ``lmf``; ``metadata_version``), when
    ``metadata.version`` is at the target already, when no broker's IBP / LMF would change (ZooKeeper mode:
    ``kafka_ops.upgrade.pending_protocol_bumps``, e.g. a patch release of the running minor), and in a dry run.
    The question names the bumps it asks for.

    :param checks_task_id: the task whose XCom says the mode and the metadata.version levels.
    """

    def __init__(self, *, checks_task_id: str = "check_upgrade", **kwargs: Any) -> None:
        kwargs.setdefault("subject", "Bump the protocol versions of cluster {{ params.cluster }} to "
                                     "{{ params.target_version }}?")
        kwargs.setdefault("body", "Every broker runs the new binaries. After the inter.broker.protocol.version "
                                  "bump the brokers cannot be downgraded to the old release. Approve to roll the "
                                  "IBP (and LMF) phases; Reject to end the run here, the old IBP pinned.")
        kwargs.setdefault("ignore_downstream_trigger_rules", True)
        kwargs.setdefault("retries", 1)  # a try Airflow failed after the answer arrived: see the module docstring
        kwargs.setdefault("retry_delay", timedelta(seconds=5))
        super().__init__(**kwargs)
        self.checks_task_id = checks_task_id

    def _approved(self, why: str) -> dict:
        self.log.info("%s", why)
        return {"chosen_options": [self.APPROVE], "params_input": {}}

    def execute(self, context: Any) -> Any:
        params = context["params"]
        checked = context["ti"].xcom_pull(task_ids=self.checks_task_id) or {}
        kraft = checked.get("mode") == "kraft"
        phases = set(params.get("phases") or ())
        if is_true(params.get("approve_protocol_bump", False)):
            what = "metadata.version bump" if kraft else "protocol bump"
            return self._approved(f"{what} approved in advance (param approve_protocol_bump)")
        if kraft:
            levels = checked.get("metadata_version") or {}
            if "metadata_version" not in phases or not levels:
                return self._approved("KRaft cluster: no metadata_version phase requested: nothing to approve")
            current, target = MetadataVersion(int(levels["current"])), MetadataVersion(int(levels["target"]))
            if current == target:
                return self._approved(f"KRaft cluster: metadata.version is {label(target)} already: nothing to "
                                      "approve")
            if is_true(params.get("dry_run", False)):
                return self._approved("DRY RUN: the run would wait here for approval of the metadata.version bump "
                                      f"{label(current)} -> {label(target)}")
            self.subject = (f"Bump metadata.version of cluster {params.get('cluster')} to {label(target)} "
                            f"(Kafka {params.get('target_version')})?")
            back = ("Kafka can still downgrade it safely afterwards (no level in between changed the metadata "
                    "format: kafka-features.sh downgrade, by hand)" if safe_downgrade(target, current) else
                    "a later downgrade to the old level would lose metadata: Kafka refuses it")
            raises = change_lines(levels.get("features") or {})
            also = (f" In the same request, the release's other features go to their defaults for it: "
                    f"{', '.join(raises)} (param release_features)." if raises else "")
            if levels.get("elr_min_insync"):  # ELR turned on: what it leaves of min.insync.replicas (check_upgrade)
                also += f" ELR (KIP-966): {levels['elr_min_insync']}."
            self.body = (f"Every controller and broker runs the new binaries. metadata.version {label(current)} -> "
                         f"{label(target)} (UpdateFeatures, KIP-584 / KIP-778): after the bump no node can start on "
                         f"binaries older than Kafka {target.release}, and {back}.{also} Approve to finalize it; "
                         "Reject to end the run here, on the new binaries with metadata.version unchanged.")
            self.log.info("KRaft cluster: waiting for approval of metadata.version %s -> %s", label(current),
                          label(target))
            return self._ask(context)
        if not {"ibp", "lmf"} & phases:
            return self._approved("no protocol phase requested: nothing to approve")
        target = str(params.get("target_version"))
        nodes = checked.get("nodes") or {}
        pending = pending_protocol_bumps(target, sorted(phases), nodes) if nodes else None
        if pending == []:
            return self._approved(f"ZooKeeper-mode cluster: every broker's inter.broker.protocol.version (and "
                                  f"log.message.format.version) is already what Kafka {target} needs once pinned: "
                                  "nothing to bump, nothing to approve")
        if is_true(params.get("dry_run", False)):
            return self._approved("DRY RUN: the run would wait here for approval of the protocol bump"
                                  + (f" ({'; '.join(pending)})" if pending else ""))
        if pending:
            shown = pending[:SHOWN_BUMPS] + ([f"{len(pending) - SHOWN_BUMPS} more"] if len(pending) > SHOWN_BUMPS
                                             else [])
            self.body = f"{self.body} To bump: {'; '.join(shown)}."
            self.log.info("waiting for approval of the protocol bump: %s", "; ".join(pending))
        return self._ask(context)

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        """Airflow's handling of the answer (Reject skips everything after this task); on Reject, also release the
        cluster lock if this run holds it: a run resumed by clearing only its failed tasks re-took the lock in a
        roll task, and ``run_outcome`` (its teardown succeeded before and is not run again) would not release it."""
        result = super().execute_complete(context, event)
        if self.REJECT in (event.get("chosen_options") or []):
            cluster = (context.get("params") or {}).get("cluster")
            if cluster:
                try:
                    profile = profiles.profile_or_fail(str(cluster))
                except Exception as exc:  # noqa: BLE001 - the teardown, when it runs, releases it
                    self.log.warning("lock not released after Reject: %s", exc)
                else:
                    release_held(profile, context, self.log, "rejected: the run ends here")
        return result

    def _ask(self, context: Any) -> Any:
        """Ask (Airflow's HITL), unless an earlier try of this task got its answer already: then act on that."""
        earlier = self.earlier_answer(context)
        if earlier is None:
            return super().execute(context)
        who = (earlier.get("responded_by_user") or {}).get("name", "?")
        self.log.info("the answer given to an earlier try stands (%s by %s at %s): Airflow failed that try after "
                      "the answer arrived; not asked again", earlier["chosen_options"], who,
                      earlier["responded_at"].isoformat())
        return self.execute_complete(context, earlier)

    def earlier_answer(self, context: Any) -> dict[str, Any] | None:
        """The answer an earlier try of this task instance received (newest first), as the event
        ``execute_complete`` takes, or None: a first try, no earlier answer, or the REST API not reachable (then
        the question is asked again, logged)."""
        ti = context["ti"]
        if int(getattr(ti, "try_number", None) or 1) <= 1:
            return None
        api = AirflowApiHook()
        try:
            for earlier in range(int(ti.try_number) - 1, 0, -1):
                detail = api.hitl_answer(ti.dag_id, ti.run_id, ti.task_id, int(ti.map_index), earlier)
                if detail and detail.get("response_received") and detail.get("chosen_options"):
                    return {"chosen_options": list(detail["chosen_options"]),
                            "params_input": detail.get("params_input") or {},
                            "responded_at": datetime.fromisoformat(str(detail["responded_at"]).replace("Z", "+00:00")),
                            "responded_by_user": detail.get("responded_by_user")}
        except Exception as exc:  # noqa: BLE001 - without it the question is asked again, which is safe
            self.log.warning("the answers of earlier tries could not be read (%s): asking again", exc)
        finally:
            api.close()
        return None
