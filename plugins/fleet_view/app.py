"""The cluster view's backend: a FastAPI app mounted in Airflow's api-server (``kafka_fleet_view`` registers it under
:data:`URL_PREFIX`), read-only (GET routes only; it starts nothing), behind Airflow's own authentication.

Routes (below the prefix):

- ``/clusters`` and ``/clusters/{cluster}``: the fleet page and one cluster's page (HTML, ``fleet_view.page``);
- ``/runs/{dag_id}/{run_id}``: the page of the cluster a DAG run works on (the "Cluster" tab of a DAG run);
- ``/api/clusters`` and ``/api/clusters/{cluster}``: the JSON they draw (``kafka_ops.cluster_view``: fleet rows,
  the cluster page).

Security: every route depends on Airflow's ``airflow.api_fastapi.core_api.security.get_user`` (through
``requires_authenticated``, as the app's own dependency): no JWT (``Authorization: Bearer`` or the UI's ``_token``
cookie) is 401, an invalid one 403. The clusters shown are the ``kafka`` connections the user may read
(``auth_manager.is_authorized_connection(method="GET")``: role ``op`` and above with the simple auth manager, "can
read Connections" with FAB); another cluster's page is 403. The run route also needs read access to the DAG's runs
(``requires_access_dag("GET", DagAccessEntity.RUN)``). Nothing of a connection but its id reaches the page: the
view's JSON carries what the cluster's metadata says (broker hosts, racks, partitions), never the profile, and error
messages are scrubbed of the profile's secret values (``fleet_view.sources.scrub``). OpenAPI docs are off.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Annotated, Any, Protocol
from urllib.parse import quote

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.auth.managers.models.resource_details import ConnectionDetails, DagAccessEntity
from airflow.api_fastapi.core_api.security import GetUserDep, requires_access_dag, requires_authenticated
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse
from kafka_ops.cluster_view import cluster_page, fleet_row

from fleet_view import page
from fleet_view.reader import FleetReader

#: Where the app is mounted in the api-server.
URL_PREFIX = "/kafka-ops"
#: How often the pages fetch their JSON again, seconds.
REFRESH_S = 5.0


class Catalog(Protocol):
    """What the app asks Airflow (``fleet_view.metadata.AirflowMetadata``)."""

    def kafka_connections(self) -> list[str]: ...

    def cluster_of_run(self, dag_id: str, run_id: str) -> str | None: ...


def connection_reader(user: GetUserDep) -> Callable[[str], bool]:
    """Dependency: ``may_read(conn_id)``, whether the logged-in user may read that connection (the auth manager's
    ``is_authorized_connection`` with method GET)."""
    manager = get_auth_manager()

    def may_read(conn_id: str) -> bool:
        return manager.is_authorized_connection(method="GET", details=ConnectionDetails(conn_id=conn_id), user=user)

    return may_read


MayRead = Annotated[Callable[[str], bool], Depends(connection_reader)]
#: The run route's access check (Airflow's own; a module attribute so tests can override it).
run_access = requires_access_dag("GET", DagAccessEntity.RUN)


def ui_base(request: Request) -> str:
    """The path Airflow's UI lives under (the mount's root path without :data:`URL_PREFIX`; "" at the root)."""
    root = request.scope.get("root_path", "")
    return root[: -len(URL_PREFIX)] if root.endswith(URL_PREFIX) else ""


def own(request: Request, *parts: str) -> str:
    """The path of one of the app's own routes: its mount's root path, then ``parts`` (each quoted). Not
    ``request.url_for``: under the api-server the request's router is Airflow's, which does not know these names."""
    return request.scope.get("root_path", "") + "".join("/" + quote(p, safe="") for p in parts)


def run_link(request: Request) -> Callable[[str, str], str]:
    """``run_url(dag_id, run_id)``: the DAG run's page in Airflow's UI (``/dags/<dag_id>/runs/<run_id>``)."""
    base = ui_base(request)
    return lambda dag_id, run_id: f"{base}/dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}"


def create_app(reader: FleetReader, catalog: Catalog, *, clock: Callable[[], float] = time.time,
               refresh_s: float = REFRESH_S) -> FastAPI:
    """The app (see the module docstring): cluster readings from ``reader``, clusters and runs from ``catalog``."""
    app = FastAPI(title="kafka-ops cluster view", docs_url=None, redoc_url=None, openapi_url=None,
                  dependencies=[Depends(requires_authenticated())])

    def readable(may_read: Callable[[str], bool]) -> list[str]:
        return [c for c in catalog.kafka_connections() if may_read(c)]

    def one(cluster: str, may_read: Callable[[str], bool]) -> None:
        if not may_read(cluster):
            raise HTTPException(403, "Forbidden")
        if cluster not in catalog.kafka_connections():
            raise HTTPException(404, f"no connection of conn type kafka named {cluster!r}")

    @app.get("/api/clusters", name="fleet_json")
    def fleet_json(request: Request, may_read: MayRead) -> dict[str, Any]:
        clusters = readable(may_read)
        readings = reader.readings(clusters)
        now_ms = int(clock() * 1000)
        rows = []
        for cluster in clusters:
            row = fleet_row(readings[cluster], now_ms, run_link(request))
            row["page_url"] = own(request, "clusters", cluster)
            rows.append(row)
        return {"now_ms": now_ms, "refresh_s": refresh_s, "clusters": rows}

    @app.get("/api/clusters/{cluster}", name="cluster_json")
    def cluster_json(request: Request, cluster: str, may_read: MayRead) -> dict[str, Any]:
        one(cluster, may_read)
        now_ms = int(clock() * 1000)
        return {"now_ms": now_ms, "refresh_s": refresh_s,
                **cluster_page(reader.reading(cluster), now_ms, run_link(request))}

    @app.get("/clusters", name="fleet_html", response_class=HTMLResponse)
    def fleet_html(request: Request) -> str:
        return page.render(kind="fleet", title="Kafka clusters", refresh_s=refresh_s,
                           api_url=own(request, "api", "clusters"))

    @app.get("/clusters/{cluster}", name="cluster_html", response_class=HTMLResponse)
    def cluster_html(request: Request, cluster: str) -> str:
        return page.render(kind="cluster", title=f"Kafka cluster {cluster}", refresh_s=refresh_s,
                           api_url=own(request, "api", "clusters", cluster),
                           back_url=own(request, "clusters"))

    @app.get("/runs/{dag_id}/{run_id}", name="run_html", response_class=HTMLResponse,
             dependencies=[Depends(run_access)])
    def run_html(request: Request, dag_id: str, run_id: str) -> str:
        cluster = catalog.cluster_of_run(dag_id, run_id)
        if cluster is None:
            return page.message("Kafka cluster", f"DAG run {dag_id} / {run_id} names no Kafka cluster.",
                                own(request, "clusters"))
        return cluster_html(request, cluster)

    return app
