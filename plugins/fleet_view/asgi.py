"""The cluster view's ASGI app as the plugin registers it: built on its first request, in the api-server.

Airflow imports every plugin module in every process that loads plugins, each task's process included (the task
runner integrates the plugins' macros), but only the api-server serves the app. Importing FastAPI and Airflow's
security module costs about 0.7 s of CPU (measured on the 2-core machine: ``import
airflow.api_fastapi.core_api.security`` on top of ``airflow.plugins_manager``), which every task of every roll
would pay; so the plugin module imports only this file, and the app (``fleet_view.app``) with its reader is made
when the api-server first routes a request to it.

kafka-python logs every connection it opens at INFO (bootstrap, connect, "Broker version identified", metadata
updates); the admin hook opens a client for each DescribeQuorum, so the api-server's log got about 1,600 such lines in
3.5 minutes (two clusters, the page open, one roll). :func:`build` puts the ``kafka`` logger at WARNING unless a
logging config gave it a level.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any


class LazyApp:
    """An ASGI app that builds the real one (``factory()``) on its first call, once."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self._factory = factory
        self._app: Any = None
        self._lock = threading.Lock()

    @property
    def app(self) -> Any:
        if self._app is None:
            with self._lock:
                if self._app is None:
                    self._app = self._factory()
        return self._app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)

    def __repr__(self) -> str:
        return "kafka-ops cluster view (fleet_view.app.create_app, built on first request)"


def build() -> Any:
    """The app as the api-server runs it: the Airflow metadata catalog and one long-lived source per cluster."""
    from fleet_view.app import create_app
    from fleet_view.metadata import AirflowMetadata
    from fleet_view.reader import sourced_reader
    from fleet_view.sources import ClusterSource

    kafka_python = logging.getLogger("kafka")
    if kafka_python.level == logging.NOTSET:
        kafka_python.setLevel(logging.WARNING)
    metadata = AirflowMetadata()
    reader = sourced_reader(lambda cluster: ClusterSource(cluster, metadata))
    return create_app(reader, metadata)


app = LazyApp(build)
