"""A small client of Airflow 3's REST API (``/api/v2``) with SimpleAuthManager's token login.

Every request has a timeout; a 401 triggers one re-login. Errors raise :class:`AirflowApiError`
naming the method, path, status and Airflow's ``detail``.
"""

from __future__ import annotations

from typing import Any

import requests

from demo.errors import DemoError

TIMEOUT_S = 30  # per request (connect + read); a loaded 2-core machine answers slowly
PAGE = 100  # Airflow's default maximum_page_limit


class AirflowApiError(DemoError):
    """An API call failed (status and Airflow's message in the text)."""


class AirflowClient:
    """REST client for one Airflow api-server.

    :param base_url: e.g. ``http://localhost:8080`` (no trailing slash).
    :param timeout_s: per-request timeout in seconds.
    """

    def __init__(self, base_url: str, timeout_s: float = TIMEOUT_S) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.session = requests.Session()
        self._credentials: tuple[str, str] | None = None

    def health(self) -> dict[str, Any] | None:
        """``GET /api/v2/monitor/health`` (no login needed); None when the server does not answer yet."""
        try:
            resp = self.session.get(f"{self.base_url}/api/v2/monitor/health", timeout=self.timeout_s)
        except requests.RequestException:
            return None
        return resp.json() if resp.ok else None

    def login(self, username: str, password: str) -> None:
        """Get a JWT from ``POST /auth/token`` and send it as a bearer token from now on.

        Raises:
            AirflowApiError: wrong credentials or the server refused.
        """
        self._credentials = (username, password)
        resp = self.session.post(
            f"{self.base_url}/auth/token",
            json={"username": username, "password": password},
            timeout=self.timeout_s,
        )
        if not resp.ok:
            raise AirflowApiError(f"login as {username} failed: HTTP {resp.status_code} {resp.text[:200]}")
        self.session.headers["Authorization"] = f"Bearer {resp.json()['access_token']}"

    def request(self, method: str, path: str, *, ok_404: bool = False, **kwargs: Any) -> Any:
        """Call ``/api/v2{path}``; returns the decoded JSON (None for 404 when ``ok_404``).

        Raises:
            AirflowApiError: any other non-2xx status, or no answer within the timeout.
        """
        url = f"{self.base_url}/api/v2{path}"
        for attempt in (1, 2):
            try:
                resp = self.session.request(method, url, timeout=self.timeout_s, **kwargs)
            except requests.RequestException as exc:
                raise AirflowApiError(f"{method} {path}: {exc}") from exc
            if resp.status_code == 401 and attempt == 1 and self._credentials:
                self.login(*self._credentials)  # token expired: one fresh login
                continue
            break
        if resp.status_code == 404 and ok_404:
            return None
        if not resp.ok:
            try:
                detail = resp.json().get("detail", resp.text)
            except ValueError:
                detail = resp.text
            raise AirflowApiError(f"{method} {path}: HTTP {resp.status_code}: {str(detail)[:300]}")
        return resp.json() if resp.content else None

    def put_connections(self, bodies: list[dict[str, Any]]) -> list[str]:
        """Create the connections, overwriting those that exist (one bulk ``PATCH /connections``), so they are in
        the metadata DB: listed under Admin -> Connections, editable there. Returns the ids written.

        Raises:
            AirflowApiError: the request failed or Airflow refused a connection (its reason in the text).
        """
        if not bodies:
            return []
        answer = self.request("PATCH", "/connections", json={"actions": [
            {"action": "create", "entities": bodies, "action_on_existence": "overwrite"}]})
        result = (answer or {}).get("create") or {}
        if result.get("errors"):
            raise AirflowApiError(f"PATCH /connections: refused: {str(result['errors'])[:300]}")
        return list(result.get("success") or [])

    def get_dag(self, dag_id: str) -> dict[str, Any] | None:
        """The DAG's details, or None while the dag-processor has not parsed it yet."""
        return self.request("GET", f"/dags/{dag_id}", ok_404=True)

    def import_errors(self) -> list[dict[str, Any]]:
        """Current DAG import errors (``filename``, ``stack_trace``)."""
        return self.request("GET", "/importErrors", params={"limit": PAGE})["import_errors"]

    def set_paused(self, dag_id: str, paused: bool) -> None:
        """Pause or un-pause the DAG."""
        self.request("PATCH", f"/dags/{dag_id}", json={"is_paused": paused})

    def trigger(self, dag_id: str, conf: dict[str, Any]) -> dict[str, Any]:
        """Trigger a run now (``logical_date`` null) with ``conf``; returns the new DAG run."""
        return self.request("POST", f"/dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": conf})

    def get_run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        """One DAG run (``state``, ``start_date``, ``end_date``...)."""
        return self.request("GET", f"/dags/{dag_id}/dagRuns/{run_id}")

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        """Every task instance of the run, mapped ones included (one per map index), all pages."""
        items: list[dict[str, Any]] = []
        while True:
            page = self.request(
                "GET",
                f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances",
                params={"limit": PAGE, "offset": len(items)},
            )
            items += page["task_instances"]
            if not page["task_instances"] or len(items) >= page["total_entries"]:
                return items

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int, map_index: int) -> list[dict[str, Any]]:
        """The structured log of one try (a list of ``{"event", "level", ...}``; [] if there is none)."""
        params: dict[str, Any] = {"full_content": "true"}
        if map_index >= 0:
            params["map_index"] = map_index
        path = f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{max(1, try_number)}"
        doc = self.request("GET", path, ok_404=True, params=params, headers={"Accept": "application/json"})
        content = (doc or {}).get("content") or []
        return [e for e in content if isinstance(e, dict)]
