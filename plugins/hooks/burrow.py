"""Burrow hook: consumer group status over Burrow's HTTP API v3 (requests + urllib3 Retry).

``GET {burrow}/v3/kafka/{cluster}/consumer/{group}/lag`` returns Burrow's evaluation of a group
(OK / WARN / ERR / STOP / STALL / REWIND) with every partition and the window of commits it judged
(``start`` / ``end`` offsets with their timestamps, ``complete``); ``/status`` is the same evaluation
listing only the partitions in trouble. HTTP 404 means Burrow does not know the cluster or group: that
is a NOTFOUND status (a failing verdict), never a pass.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from airflow.sdk import BaseHook
from kafka_ops.health import ConsumerGroupStatus, PartitionLag
from kafka_ops.profile import ClusterProfile

if TYPE_CHECKING:  # imported where a session is made: a task that never asks does not pay for it
    import requests


class BurrowError(RuntimeError):
    """Burrow answered with an unexpected HTTP status or body (not 200/404). Waiting may fix it."""


class BurrowClusterUnknown(ValueError):
    """Burrow does not know the profile's ``burrow_cluster`` (HTTP 404): a profile error, waiting cannot fix it."""


def parse_status_response(group: str, http_status: int, body: Any) -> ConsumerGroupStatus:
    """Turn Burrow's /lag (or /status) answer into a :class:`kafka_ops.health.ConsumerGroupStatus`: the
    partitions in trouble, ``complete``, and the window every partition's stored commits cover (from the
    partitions' ``start`` / ``end`` timestamps; /status lists too few partitions for one, so None there).

    :param http_status: HTTP status code; 404 -> status ``NOTFOUND``.
    :param body: the decoded JSON body (dict) or None.
    :raises BurrowError: any other non-200 status, or a 200 body without ``status.status``.
    """
    message = body.get("message", "") if isinstance(body, dict) else ""
    if http_status == 404:
        return ConsumerGroupStatus(group=group, status="NOTFOUND", message=message or "HTTP 404")
    if http_status != 200:
        raise BurrowError(f"Burrow answered HTTP {http_status} for group {group}: {message or repr(body)}"[:500])
    status = body.get("status") if isinstance(body, dict) else None
    if not isinstance(status, dict) or not isinstance(status.get("status"), str):
        raise BurrowError(f"Burrow answer for group {group} has no status.status: {body!r}"[:500])
    partitions = []
    listed = [p for p in status.get("partitions") or [] if isinstance(p, dict)]
    for p in listed:
        if p.get("status") == "OK":
            continue
        partitions.append(
            PartitionLag(
                topic=str(p.get("topic")),
                partition=int(p.get("partition", -1)),
                status=str(p.get("status")),
                lag=_lag(p),
            )
        )
    total = status.get("totallag")
    complete = status.get("complete")
    return ConsumerGroupStatus(
        group=group,
        status=status["status"],
        total_lag=int(total) if _number(total) else None,
        partitions=tuple(partitions),
        message=message,
        complete=float(complete) if _number(complete) else None,
        window=_common_window(listed, status.get("partition_count")),
    )


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _common_window(listed: list[dict[str, Any]], partition_count: Any) -> tuple[int, int] | None:
    """(latest window start ms, earliest window end ms) over every partition, or None unless every counted
    partition is listed with both timestamps (a /status answer lists only the partitions in trouble)."""
    spans = []
    for p in listed:
        start, end = p.get("start"), p.get("end")
        if not (isinstance(start, dict) and isinstance(end, dict)
                and _number(start.get("timestamp")) and _number(end.get("timestamp"))):
            return None
        spans.append((int(start["timestamp"]), int(end["timestamp"])))
    if not spans or not _number(partition_count) or len(spans) != int(partition_count):
        return None
    return max(s for s, _ in spans), min(e for _, e in spans)


def _lag(p: dict[str, Any]) -> int | None:
    if isinstance(p.get("current_lag"), int):
        return p["current_lag"]
    end = p.get("end")
    if isinstance(end, dict) and isinstance(end.get("lag"), int):
        return end["lag"]
    return None


#: Seconds a budgeted ask gets at least, however little time is left (:meth:`BurrowHook.budget_within`).
LAST_TRY_MIN_S = 1.0


class BurrowHook(BaseHook):
    """Consumer group status from Burrow.

    Build it from either:

    :param burrow_conn_id: an Airflow HTTP connection (host = ``http://burrow:8000`` or a host with
        ``schema`` = http/https and ``port``; login/password = basic auth, if set), plus ``cluster``;
    :param base_url: ``"http://127.0.0.1:8000"`` plus ``cluster`` (tests, scripts);
    :param profile: / :meth:`from_profile`: a cluster profile's ``burrow_conn_id`` and ``burrow_cluster``.
    :param cluster: the Kafka cluster's name in Burrow's config.
    :param connect_timeout_s: TCP connect timeout per attempt, seconds (default 3.05).
    :param read_timeout_s: read timeout per attempt, seconds (default 10).
    :param retries: retries on connection errors and HTTP 429/500/502/503/504 (default 3).
    :param backoff_factor: urllib3 backoff factor, seconds (0.5 -> 0.5, 1, 2 s ...).

    Requests always carry a timeout. Connection failures after the retries raise
    ``requests.RequestException``; other unexpected answers raise :class:`BurrowError`.
    """

    conn_name_attr = "burrow_conn_id"
    default_conn_name = "burrow_default"
    conn_type = "http"
    hook_name = "Burrow (kafka-ops)"

    def __init__(
        self,
        burrow_conn_id: str | None = None,
        *,
        cluster: str,
        base_url: str | None = None,
        connect_timeout_s: float = 3.05,
        read_timeout_s: float = 10.0,
        retries: int = 3,
        backoff_factor: float = 0.5,
    ) -> None:
        super().__init__()
        if (burrow_conn_id is None) == (base_url is None):
            raise ValueError("give exactly one of burrow_conn_id, base_url")
        if not cluster:
            raise ValueError("cluster (the cluster's name in Burrow) must be set")
        if connect_timeout_s <= 0 or read_timeout_s <= 0:
            raise ValueError("timeouts must be > 0 seconds")
        if retries < 0:
            raise ValueError(f"retries must be >= 0, got {retries}")
        self.burrow_conn_id = burrow_conn_id
        self.cluster = cluster
        self._base_url = base_url.rstrip("/") if base_url else None
        self._auth: tuple[str, str] | None = None
        self.timeout = (connect_timeout_s, read_timeout_s)
        self.retries = retries
        self.backoff_factor = backoff_factor
        self._session: requests.Session | None = None
        self._single: requests.Session | None = None

    @classmethod
    def from_profile(cls, profile: ClusterProfile, **kwargs: Any) -> BurrowHook:
        """Hook for the profile's ``burrow_conn_id`` / ``burrow_cluster``.

        :raises ValueError: the profile does not set them (named).
        """
        profile.require("burrow_conn_id", "burrow_cluster")
        return cls(profile.burrow_conn_id, cluster=profile.burrow_cluster, **kwargs)  # type: ignore[arg-type]

    @property
    def base_url(self) -> str:
        """Burrow's base URL, e.g. ``http://burrow:8000`` (from the connection on first use)."""
        if self._base_url is None:
            conn = self.get_connection(self.burrow_conn_id)  # type: ignore[arg-type]
            host = (conn.host or "").strip()
            if not host:
                raise ValueError(f"connection {self.burrow_conn_id!r}: host (Burrow's address) is empty")
            if "://" not in host:
                scheme = conn.schema or "http"
                host = f"{scheme}://{host}"
                if conn.port:
                    host = f"{host}:{conn.port}"
            self._base_url = host.rstrip("/")
            if conn.login:
                self._auth = (conn.login, conn.password or "")
        return self._base_url

    def get_conn(self) -> requests.Session:
        """A ``requests.Session`` with urllib3 ``Retry`` mounted for http and https."""
        from urllib3.util.retry import Retry

        if self._session is None:
            self._session = _json_session(Retry(
                total=self.retries,
                connect=self.retries,
                read=self.retries,
                status=self.retries,
                backoff_factor=self.backoff_factor,
                status_forcelist=(429, 500, 502, 503, 504),
                allowed_methods=frozenset({"GET"}),
                raise_on_status=False,
            ))
        return self._session

    def close(self) -> None:
        """Close the HTTP session."""
        for session in (self._session, self._single):
            if session is not None:
                session.close()
        self._session = self._single = None

    def __enter__(self) -> BurrowHook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def status_url(self, group: str) -> str:
        """``{base}/v3/kafka/{cluster}/consumer/{group}/lag`` with path parts URL-quoted: Burrow's status of the
        group with every partition (``/status`` lists only the partitions in trouble)."""
        return (
            f"{self.base_url}/v3/kafka/{quote(self.cluster, safe='')}/consumer/"
            f"{quote(group, safe='')}/lag"
        )

    def cluster_servers(self, budget_s: float | None = None) -> list[str]:
        """The bootstrap servers Burrow's ``kafka`` cluster module uses for ``cluster``
        (``GET /v3/kafka/{cluster}``, ``module.servers``), e.g. ``["10.0.0.1:9092"]``. ``budget_s``: as for
        :meth:`group_status`.

        :raises BurrowClusterUnknown: Burrow has no cluster of that name (HTTP 404): a profile error.
        :raises requests.RequestException: Burrow unreachable after the retries.
        :raises BurrowError: unexpected HTTP status or body.
        """
        url = f"{self.base_url}/v3/kafka/{quote(self.cluster, safe='')}"
        resp = self._get(url, budget_s, f"the servers of cluster {self.cluster}")
        if resp.status_code == 404:
            raise BurrowClusterUnknown(f"Burrow at {self.base_url} has no Kafka cluster named {self.cluster!r} "
                                       f"(HTTP 404 for {url}): check burrow_cluster in the profile")
        try:
            body = resp.json()
        except ValueError:
            body = None
        module = body.get("module") if isinstance(body, dict) else None
        if resp.status_code != 200 or not isinstance(module, dict) or not isinstance(module.get("servers"), list):
            raise BurrowError(f"Burrow answered HTTP {resp.status_code} for {url} without module.servers: "
                              f"{(body if body is not None else resp.text)!r}"[:500])
        return [str(s) for s in module["servers"]]

    def group_status(self, group: str, budget_s: float | None = None) -> ConsumerGroupStatus:
        """Burrow's status of one consumer group; ``NOTFOUND`` for HTTP 404.

        :param budget_s: at most this many seconds (one attempt, its timeouts cut to the budget, no retries: a
            caller whose wait has a deadline, or that only wants extra evidence); None = the hook's timeouts and
            retries.
        :raises requests.RequestException: Burrow unreachable after the retries (or within the budget).
        :raises BurrowError: unexpected HTTP status or body.
        """
        resp = self._get(self.status_url(group), budget_s, f"group {group}")
        try:
            body = resp.json()
        except ValueError:
            body = None
            if resp.status_code == 200:
                text = resp.text[:200]
                raise BurrowError(f"Burrow answered non-JSON for group {group}: {text!r}") from None
        return parse_status_response(group, resp.status_code, body)

    def group_statuses(self, groups: Iterable[str], budget_s: float | None = None) -> list[ConsumerGroupStatus]:
        """:meth:`group_status` for each group, in the given order.

        :param budget_s: seconds for all of them together (each request gets what is left, without retries), or
            None (each group the hook's timeouts and retries: up to :attr:`worst_case_s` each).
        :raises requests.Timeout: the budget ran out (named).
        """
        if budget_s is None:
            return [self.group_status(g) for g in groups]
        deadline = time.monotonic() + budget_s
        return [self.group_status(g, budget_s=deadline - time.monotonic()) for g in groups]

    @property
    def worst_case_s(self) -> float:
        """Seconds one :meth:`group_status` without a budget can take against a Burrow that accepts connections and
        never answers: every attempt's connect and read timeouts plus urllib3's backoff between them (``backoff
        x 2^(n-1)`` before retry n, the first retry without a pause: urllib3 2's ``Retry.get_backoff_time``)."""
        backoff = sum(self.backoff_factor * 2 ** (n - 1) for n in range(2, self.retries + 1))
        return (self.retries + 1) * (self.timeout[0] + self.timeout[1]) + backoff

    def _get(self, url: str, budget_s: float | None, what: str) -> requests.Response:
        """GET ``url``: with the hook's timeouts and retries, or, with ``budget_s``, one attempt whose timeouts are
        cut to it (a budget spent already raises ``requests.Timeout`` naming ``what``)."""
        if budget_s is None:
            return self.get_conn().get(url, timeout=self.timeout, auth=self._auth)
        if budget_s <= 0:
            import requests

            raise requests.Timeout(f"Burrow at {self.base_url}: no time left to ask for {what}")
        timeout = (min(self.timeout[0], budget_s), min(self.timeout[1], budget_s))
        return self._single_try().get(url, timeout=timeout, auth=self._auth)

    def budget_within(self, time_left_s: float, requests_n: int) -> float | None:
        """The ``budget_s`` for ``requests_n`` requests that must end within ``time_left_s`` seconds: None (the hook's
        own retries) when their worst case (:attr:`worst_case_s` each) fits, else what is left, at least
        :data:`LAST_TRY_MIN_S` (one short last try rather than none)."""
        if time_left_s >= self.worst_case_s * requests_n:
            return None
        return max(LAST_TRY_MIN_S, time_left_s)

    def _single_try(self) -> requests.Session:
        """A session without retries, for the budgeted calls."""
        if self._single is None:
            self._single = _json_session(0)
        return self._single


def _json_session(retries: Any) -> requests.Session:
    """A ``requests.Session`` asking for JSON, with ``HTTPAdapter(max_retries=retries)`` (a urllib3 ``Retry`` or a
    count) mounted for http and https."""
    import requests
    from requests.adapters import HTTPAdapter

    session = requests.Session()
    adapter = HTTPAdapter(max_retries=retries)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    session.headers["Accept"] = "application/json"
    return session
