"""Airflow's own public REST API (v2), for what a task cannot do through the Task SDK: the DAG run's note, and
the listings the roll-records cleanup reads (Variables by key prefix, DAG ids, one DAG run).

A task of Airflow 3 talks to the execution API only, which sets no notes. The run's summary therefore goes
through the public API as a service user: the connection :data:`CONN_ID` (conn type ``http``; host = the
api-server's base URL or host with ``schema`` / ``port``; ``login`` / ``password`` = a user allowed to edit
DAG runs: role ``user`` or above with the simple auth manager, the equivalent permission with FAB). A token
comes from ``POST /auth/token`` (what both auth managers offer), the note from
``PATCH /api/v2/dags/{dag_id}/dagRuns/{run_id}`` (``{"note": ...}``, at most 1,000 characters: Airflow's
limit). Listing Variables needs role ``op`` with the simple auth manager (Variables are an operator's resource).
requests with urllib3 ``Retry`` for transient errors (connects, 429/5xx).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from airflow.sdk import BaseHook

if TYPE_CHECKING:  # imported where a session is made: a task that never asks does not pay for it
    import requests

CONN_ID = "kafka_ops_airflow_api"
NOTE_MAX_CHARS = 1000  # DAGRunPatchBody.note max_length
PAGE = 100  # Airflow's default maximum_page_limit


class AirflowApiError(RuntimeError):
    """The api-server refused or failed a call (the message has the status and its detail)."""


class AirflowApiHook(BaseHook):
    """A logged-in session on Airflow's public REST API, from the connection ``conn_id``.

    :param timeout_s: connect and read timeout of each call, seconds.
    :param retries: retries of a failed connect or a 429/5xx answer (exponential backoff).
    """

    conn_name_attr = "conn_id"
    default_conn_name = CONN_ID
    conn_type = "http"
    hook_name = "Airflow REST API (kafka-ops run notes)"

    def __init__(self, conn_id: str = CONN_ID, timeout_s: float = 10.0, retries: int = 3) -> None:
        super().__init__()
        self.conn_id = conn_id
        self.timeout_s = timeout_s
        self.retries = retries
        self._session: requests.Session | None = None
        self._base_url: str | None = None

    def get_conn(self) -> requests.Session:
        """A session with a bearer token (``POST /auth/token`` with the connection's login and password).

        :raises AirflowApiError: no host in the connection, or the token was refused.
        """
        import requests
        from requests.adapters import HTTPAdapter
        from urllib3.util.retry import Retry

        if self._session is not None:
            return self._session
        conn = self.get_connection(self.conn_id)
        host = (conn.host or "").strip()
        if not host:
            raise AirflowApiError(f"connection {self.conn_id!r}: host (the api-server's address) is empty")
        if "://" not in host:
            host = f"{conn.schema or 'http'}://{host}" + (f":{conn.port}" if conn.port else "")
        self._base_url = host.rstrip("/")
        retry = Retry(total=self.retries, connect=self.retries, read=self.retries, status=self.retries,
                      backoff_factor=0.5, status_forcelist=(429, 500, 502, 503, 504),
                      allowed_methods=frozenset({"GET", "POST", "PATCH"}), raise_on_status=False)
        session = requests.Session()
        session.mount("http://", HTTPAdapter(max_retries=retry))
        session.mount("https://", HTTPAdapter(max_retries=retry))
        answer = session.post(f"{self._base_url}/auth/token", timeout=self.timeout_s,
                              json={"username": conn.login or "", "password": conn.password or ""})
        if answer.status_code not in (200, 201):
            raise AirflowApiError(f"{self._base_url}/auth/token refused user {conn.login!r}: HTTP "
                                  f"{answer.status_code} {answer.text[:200]}")
        session.headers["Authorization"] = f"Bearer {answer.json()['access_token']}"
        session.headers["Accept"] = "application/json"
        self._session = session
        return session

    @staticmethod
    def _run_path(dag_id: str, run_id: str) -> str:
        return f"/dags/{quote(dag_id, safe='')}/dagRuns/{quote(run_id, safe='')}"

    def get_dag_run_note(self, dag_id: str, run_id: str) -> str:
        """The note of DAG run ``run_id`` ("" when it has none).

        :raises AirflowApiError: the api-server refused (e.g. HTTP 404 for an unknown run).
        """
        return self._get(self._run_path(dag_id, run_id)).get("note") or ""

    def set_dag_run_note(self, dag_id: str, run_id: str, note: str) -> dict[str, Any]:
        """Replace the note of DAG run ``run_id`` (longer notes are cut to :data:`NOTE_MAX_CHARS`, ending in
        "..."). Returns the API's DAG run document.

        :raises AirflowApiError: the api-server refused (e.g. HTTP 403 for a user without edit rights).
        """
        session = self.get_conn()
        if len(note) > NOTE_MAX_CHARS:
            note = note[:NOTE_MAX_CHARS - 3] + "..."
        url = f"{self._base_url}/api/v2{self._run_path(dag_id, run_id)}"
        answer = session.patch(url, params={"update_mask": "note"}, json={"note": note}, timeout=self.timeout_s)
        if answer.status_code != 200:
            raise AirflowApiError(f"PATCH {url}: HTTP {answer.status_code} {answer.text[:300]}")
        return answer.json()

    def _get(self, path: str, params: Mapping[str, Any] | None = None, ok_404: bool = False) -> Any:
        session = self.get_conn()
        url = f"{self._base_url}/api/v2{path}"
        answer = session.get(url, params=dict(params or {}), timeout=self.timeout_s)
        if answer.status_code == 404 and ok_404:
            return None
        if answer.status_code != 200:
            raise AirflowApiError(f"GET {url}: HTTP {answer.status_code} {answer.text[:300]}")
        return answer.json()

    def _pages(self, path: str, field: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        while True:
            page = self._get(path, {**params, "limit": PAGE, "offset": len(items)})
            items += page.get(field) or []
            if not page.get(field) or len(items) >= int(page.get("total_entries", 0)):
                return items

    def variable_keys(self, prefix: str) -> list[str]:
        """The keys of every Variable starting with ``prefix`` (``GET /variables?variable_key_prefix_pattern=``,
        all pages; the API's over-match of ``_`` filtered out).

        :raises AirflowApiError: refused (HTTP 403: the connection's user lacks role ``op``) or failed.
        """
        rows = self._pages("/variables", "variables", {"variable_key_prefix_pattern": prefix})
        return sorted(str(r["key"]) for r in rows if str(r.get("key", "")).startswith(prefix))

    def dag_ids(self) -> list[str]:
        """Every DAG id Airflow knows, stale ones (their file gone) included.

        :raises AirflowApiError: refused or failed.
        """
        return sorted(str(d["dag_id"]) for d in self._pages("/dags", "dags", {"exclude_stale": "false"}))

    def dag_run(self, dag_id: str, run_id: str) -> dict[str, Any] | None:
        """DAG run ``run_id`` (``state``, ``end_date``, ...), or None when there is no such run.

        :raises AirflowApiError: refused or failed.
        """
        return self._get(self._run_path(dag_id, run_id), ok_404=True)

    def hitl_answer(self, dag_id: str, run_id: str, task_id: str, map_index: int, try_number: int) \
            -> dict[str, Any] | None:
        """The human-in-the-loop detail of one try of a task instance (``GET .../hitlDetails/tries/{try_number}``:
        ``response_received``, ``chosen_options``, ``params_input``, ``responded_at``, ``responded_by_user``), or
        None when that try asked nothing.

        :raises AirflowApiError: refused or failed.
        """
        return self._get(f"{self._run_path(dag_id, run_id)}/taskInstances/{quote(task_id, safe='')}/{map_index}"
                         f"/hitlDetails/tries/{try_number}", ok_404=True)

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None
