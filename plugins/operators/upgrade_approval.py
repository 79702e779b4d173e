"""The approval before an upgrade's irreversible step: once ``inter.broker.protocol.version`` is bumped,
the brokers cannot go back to the old release. Airflow's human-in-the-loop ``ApprovalOperator``
(standard provider): the task waits in ``awaiting_input`` (no worker slot, no triggerer on Airflow 3.3)
until someone chooses Approve or Reject in the UI's Required Actions (or the HITL REST API). Reject skips
the protocol phases: the run ends cleanly, the cluster on the new binaries with the old IBP pinned."""

from __future__ import annotations

from typing import Any

from airflow.providers.standard.operators.hitl import ApprovalOperator
from runtime.params import is_true


class ProtocolBumpApprovalOperator(ApprovalOperator):
    """Approve or reject the IBP / LMF bump of an upgrade; passes at once when the run's param
    ``approve_protocol_bump`` is true (approved in advance) or no protocol phase is requested."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("subject", "Bump the protocol versions of cluster {{ params.cluster }} to "
                                     "{{ params.target_version }}?")
        kwargs.setdefault("body", "Every broker runs the new binaries. After the inter.broker.protocol.version "
                                  "bump the brokers cannot be downgraded to the old release. Approve to roll the "
                                  "IBP (and LMF) phases; Reject to end the run here, the old IBP pinned.")
        super().__init__(**kwargs)

    def execute(self, context: Any) -> Any:
        params = context["params"]
        if is_true(params.get("approve_protocol_bump", False)):
            self.log.info("protocol bump approved in advance (param approve_protocol_bump)")
            return {"chosen_options": [self.APPROVE], "params_input": {}}
        if not {"ibp", "lmf"} & set(params.get("phases") or ()):
            self.log.info("no protocol phase requested: nothing to approve")
            return {"chosen_options": [self.APPROVE], "params_input": {}}
        if is_true(params.get("dry_run", False)):
            self.log.info("DRY RUN: the run would wait here for approval of the protocol bump")
            return {"chosen_options": [self.APPROVE], "params_input": {}}
        return super().execute(context)
