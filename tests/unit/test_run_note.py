"""The DAG run note written through Airflow's REST API (hooks.airflow_api, runtime.run_note): against a local
stand-in for the api-server's two endpoints (the real api-server is exercised by tests/ui)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from types import SimpleNamespace

import pytest
from runtime.run_note import note_lines, note_outcome, note_run


class _Api(BaseHTTPRequestHandler):
    calls: list[tuple[str, str, dict, dict]] = []
    note: str | None = None

    def _reply(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict:
        return json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self._body()
        self.calls.append(("POST", self.path, dict(self.headers), body))
        if body == {"username": "kafka-ops", "password": "s3cret"}:
            self._reply(201, {"access_token": "tok"})
        else:
            self._reply(401, {"detail": "Invalid credentials"})

    def do_PATCH(self) -> None:  # noqa: N802
        body = self._body()
        self.calls.append(("PATCH", self.path, dict(self.headers), body))
        if self.headers.get("Authorization") != "Bearer tok":
            self._reply(401, {"detail": "no token"})
        else:
            _Api.note = body["note"]
            self._reply(200, {"note": body["note"]})

    def do_GET(self) -> None:  # noqa: N802
        self.calls.append(("GET", self.path, dict(self.headers), {}))
        self._reply(200, {"dag_run_id": "manual__1", "note": _Api.note})

    def log_message(self, *_args) -> None:
        pass


@pytest.fixture
def api(monkeypatch):
    server = HTTPServer(("127.0.0.1", 0), _Api)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Api.calls = []
    _Api.note = None

    def connect(password: str = "s3cret") -> None:
        monkeypatch.setenv("AIRFLOW_CONN_KAFKA_OPS_AIRFLOW_API", json.dumps({
            "conn_type": "http", "host": "127.0.0.1", "port": server.server_port, "schema": "http",
            "login": "kafka-ops", "password": password}))

    yield connect
    server.shutdown()


CONTEXT = {"ti": SimpleNamespace(dag_id="kafka_rolling_restart", run_id="manual__1"), "run_id": "manual__1"}


def test_the_note_is_patched_with_a_token_and_cut_to_airflows_limit(api, caplog):
    api()
    assert note_run(CONTEXT, "run succeeded\n" + "x" * 2000) is True
    (post, patch) = _Api.calls
    assert post[:2] == ("POST", "/auth/token")
    assert patch[0] == "PATCH" and patch[1] == "/api/v2/dags/kafka_rolling_restart/dagRuns/manual__1?update_mask=note"
    assert patch[2]["Authorization"] == "Bearer tok"
    assert len(patch[3]["note"]) == 1000 and patch[3]["note"].startswith("run succeeded\n")
    assert patch[3]["note"].endswith("...")


def test_a_refused_login_is_logged_not_raised(api, caplog):
    api(password="wrong")
    assert note_run(CONTEXT, "run succeeded") is False
    assert "refused user 'kafka-ops'" in caplog.text and "HTTP 401" in caplog.text
    assert [c[0] for c in _Api.calls] == ["POST"]


def test_no_connection_no_note(monkeypatch, caplog):
    monkeypatch.delenv("AIRFLOW_CONN_KAFKA_OPS_AIRFLOW_API", raising=False)
    assert note_run(CONTEXT, "run succeeded") is False
    assert "no connection 'kafka_ops_airflow_api'" in caplog.text


def test_rolls_add_their_map_index_lines_as_items_of_a_markdown_list(api):
    api()
    assert note_run(CONTEXT, "rolling restart running on cluster x")
    assert note_run(CONTEXT, "map index 0 = controller 101, 1 = controller 100 (active)", line_key="roll 'controllers'")
    assert note_run(CONTEXT, "map index 0 = broker 2, 1 = broker 0", line_key="roll 'restart'")
    assert note_run(CONTEXT, "map index 0 = broker 0, 1 = broker 2", line_key="roll 'restart'")  # replaced
    assert _Api.note.splitlines() == ["rolling restart running on cluster x", "",
                                      "- roll 'controllers': map index 0 = controller 101, 1 = controller 100 (active)",
                                      "- roll 'restart': map index 0 = broker 0, 1 = broker 2"]
    assert note_run(CONTEXT, "**Succeeded**: rolling restart on x\n\n- cluster x: brokers down none")
    assert _Api.note == "**Succeeded**: rolling restart on x\n\n- cluster x: brokers down none", "rewritten, not kept"


def test_a_plan_s_items_go_in_with_one_edit_replacing_their_keys_only(api):
    """A roll's plan writes its unavoidable outages and its map index line in one edit (a login, a read and a
    write): each replaces the item of its own key; the other items stay; nothing to write is no edit."""
    api()
    assert note_run(CONTEXT, "rolling restart running on cluster x")
    assert note_run(CONTEXT, "map index 0 = controller 100", line_key="roll 'controllers'")
    assert note_run(CONTEXT, "map index 0 = broker 9", line_key="roll 'restart'")
    _Api.calls = []
    assert note_lines(CONTEXT, {"roll 'restart' unavoidable outages": "topic t: RF 1",
                                "roll 'restart'": "map index 0 = broker 2, 1 = broker 0"})
    assert [c[0] for c in _Api.calls] == ["POST", "GET", "PATCH"]
    assert _Api.note.splitlines() == ["rolling restart running on cluster x", "",
                                      "- roll 'controllers': map index 0 = controller 100",
                                      "- roll 'restart' unavoidable outages: topic t: RF 1",
                                      "- roll 'restart': map index 0 = broker 2, 1 = broker 0"]
    _Api.calls = []
    assert note_lines(CONTEXT, {}) is False and _Api.calls == []


def test_the_closing_note_keeps_the_map_index_lines_only_while_the_run_may_be_cleared(api):
    api()
    assert note_run(CONTEXT, "rolling restart running on cluster x")
    assert note_run(CONTEXT, "map index 0 = broker 2, 1 = broker 0", line_key="roll 'restart'")
    assert note_outcome(CONTEXT, "**Failed**: rolling restart on x: restart.broker", ["cluster x: brokers down [0]"])
    assert _Api.note.splitlines()[2:] == ["- cluster x: brokers down [0]",
                                          "- roll 'restart': map index 0 = broker 2, 1 = broker 0"]
    assert note_outcome(CONTEXT, "**Succeeded**: rolling restart on x", ["cluster x: brokers down none"],
                        keep_mark=None)
    assert _Api.note == "**Succeeded**: rolling restart on x\n\n- cluster x: brokers down none", \
        "nothing to clear after a success: the room goes to what the run did"
