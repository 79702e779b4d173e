"""Pause after a broker before the next one (kafka_roller's healthcheck wait; Zalando: let
producers and consumers settle after leadership moves). Deferred: no worker slot is held."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.providers.standard.triggers.temporal import TimeDeltaTrigger
from airflow.sdk import BaseOperator

from operators.params import is_true


class SoakOperator(BaseOperator):
    """Wait ``soak_s`` seconds (deferred), then mark ``broker`` as done (XCom ``{"broker": id}``).

    :param broker: ``{"id": int, ...}`` (templated / mapped).
    :param soak_s: seconds to wait (templated); 0 = no wait.
    :param dry_run: do not wait (templated).
    """

    template_fields = ("broker", "soak_s", "dry_run")
    ui_color = "#f0e8fd"

    def __init__(self, *, broker: dict, soak_s: int | str = 0, dry_run: bool | str = False, **kwargs: Any):
        super().__init__(**kwargs)
        self.broker = broker
        self.soak_s = soak_s
        self.dry_run = dry_run

    def execute(self, context: Any) -> dict:
        seconds = float(self.soak_s or 0)
        if seconds > 0 and not is_true(self.dry_run):
            self.log.info("soaking %.0f s after broker %s", seconds, self.broker["id"])
            self.defer(trigger=TimeDeltaTrigger(timedelta(seconds=seconds)), method_name="execute_complete")
        return self.execute_complete(context)

    def execute_complete(self, context: Any, event: Any = None) -> dict:
        self.log.info("broker %s done", self.broker["id"])
        return {"broker": int(self.broker["id"])}
