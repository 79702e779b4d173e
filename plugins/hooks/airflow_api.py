"""Airflow's own public REST API (v2), for what a task cannot do through the Task SDK: the DAG run's note.

A task of Airflow 3 talks to the execution API only, which sets no notes. The run's summary therefore goes
through the public API as a service user: the connection :data:`CONN_ID` (conn type ``http``; host = the
api-server's base URL or host with ``schema`` / ``port``; ``login`` / ``password`` = a user allowed to edit
DAG runs: role ``user`` or above with the simple auth manager, the equivalent permission with FAB). A token
comes from ``POST /auth/token`` (what both auth managers offer), the note from
``PATCH /api/v2/dags/{dag_id}/dagRuns/{run_id}`` (``{"note": ...}``, at most 1,000 characters: Airflow's
limit). requests with urllib3 ``Retry`` for transient errors (connects, 429/5xx).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import requests
from airflow.sdk import BaseHook
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

CONN_ID = "kafka_ops_airflow_api"
NOTE_MAX_CHARS = 1000  # DAGRunPatchBody.note max_length


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

    def _run_url(self, dag_id: str, run_id: str) -> str:
        return f"{self._base_url}/api/v2/dags/{quote(dag_id, safe='')}/dagRuns/{quote(run_id, safe='')}"

    def get_dag_run_note(self, dag_id: str, run_id: str) -> str:
        """The note of DAG run ``run_id`` ("" when it has none).

        :raises AirflowApiError: the api-server refused (e.g. HTTP 404 for an unknown run).
        """
        session = self.get_conn()
        url = self._run_url(dag_id, run_id)
        answer = session.get(url, timeout=self.timeout_s)
        if answer.status_code != 200:
            raise AirflowApiError(f"GET {url}: HTTP {answer.status_code} {answer.text[:300]}")
        return answer.json().get("note") or ""

    def set_dag_run_note(self, dag_id: str, run_id: str, note: str) -> dict[str, Any]:
        """Replace the note of DAG run ``run_id`` (longer notes are cut to :data:`NOTE_MAX_CHARS`, ending in
        "..."). Returns the API's DAG run document.

        :raises AirflowApiError: the api-server refused (e.g. HTTP 403 for a user without edit rights).
        """
        session = self.get_conn()
        if len(note) > NOTE_MAX_CHARS:
            note = note[:NOTE_MAX_CHARS - 3] + "..."
        url = self._run_url(dag_id, run_id)
        answer = session.patch(url, params={"update_mask": "note"}, json={"note": note}, timeout=self.timeout_s)
        if answer.status_code != 200:
            raise AirflowApiError(f"PATCH {url}: HTTP {answer.status_code} {answer.text[:300]}")
        return answer.json()

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None
