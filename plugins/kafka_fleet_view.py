"""The cluster view in Airflow's UI: "Kafka clusters" in the navigation (the fleet: one row per ``kafka``
connection) and a "Cluster" tab on every DAG run (the page of the cluster the run works on).

``fastapi_apps`` mounts the backend (``fleet_view.app``, built on its first request: ``fleet_view.asgi``) in the
api-server under ``/kafka-ops``; ``external_views`` puts its pages in Airflow's UI, which shows them in an iframe:
``destination: "nav"`` with ``nav_top_level`` adds an entry to the navigation bar itself (not under "Plugins"),
``destination: "dag_run"`` a tab on each DAG run's page, its ``href``'s ``{DAG_ID}`` and ``{RUN_ID}`` filled in by
the UI (Airflow 3.3's destinations: nav, dag, dag_run, task, task_instance, base). The backend is behind Airflow's
authentication (see ``fleet_view.app``). It lives at the top level of plugins/, as Airflow needs a plugin to.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin
from fleet_view.asgi import app

URL_PREFIX = "/kafka-ops"


class KafkaFleetViewPlugin(AirflowPlugin):
    """Registers the cluster view's backend and its two places in the UI."""

    name = "kafka_ops_fleet_view"
    fastapi_apps = [{"app": app, "url_prefix": URL_PREFIX, "name": "kafka-ops cluster view"}]
    external_views = [
        {"name": "Kafka clusters", "href": f"{URL_PREFIX}/clusters", "destination": "nav",
         "url_route": "kafka-clusters", "nav_top_level": True},
        {"name": "Cluster", "href": URL_PREFIX + "/runs/{DAG_ID}/{RUN_ID}", "destination": "dag_run",
         "url_route": "kafka-cluster-of-run"},
    ]
