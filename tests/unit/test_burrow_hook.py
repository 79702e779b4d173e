"""BurrowHook against a local http.server stub: statuses, 404 = NOTFOUND, retries, timeouts, the cluster's
servers (404 = an unknown cluster, a profile error)."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
from hooks.burrow import BurrowClusterUnknown, BurrowError, BurrowHook, parse_status_response
from kafka_ops.health import consumer_lag
from kafka_ops.profile import ClusterProfile


def burrow_body(group, status, partitions=(), totallag=0):
    return {
        "error": False,
        "message": "consumer status returned",
        "status": {
            "cluster": "sandbox",
            "group": group,
            "status": status,
            "complete": 1.0,
            "partitions": list(partitions),
            "partition_count": 3,
            "maxlag": None,
            "totallag": totallag,
        },
        "request": {"url": f"/v3/kafka/sandbox/consumer/{group}/lag", "host": "burrow"},
    }


class Stub:
    """Routes: path -> list of (http status, body, delay s); the last entry repeats."""

    def __init__(self):
        self.routes = {}
        self.requests = []

    def answer(self, path):
        self.requests.append(path)
        script = self.routes.get(path)
        if not script:
            return 404, {"error": True, "message": "cluster or consumer not found"}, 0
        return script.pop(0) if len(script) > 1 else script[0]


@pytest.fixture
def burrow():
    stub = Stub()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server API)
            status, body, delay = stub.answer(self.path)
            if delay:
                time.sleep(delay)
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    stub.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield stub
    server.shutdown()
    server.server_close()


def hook_for(stub, **kwargs):
    kwargs.setdefault("backoff_factor", 0)
    return BurrowHook(base_url=stub.url + "/", cluster="sandbox", **kwargs)


def test_ok_status(burrow):
    burrow.routes["/v3/kafka/sandbox/consumer/billing/lag"] = [(200, burrow_body("billing", "OK", totallag=7), 0)]
    with hook_for(burrow) as hook:
        status = hook.group_status("billing")
    assert status.ok
    assert status.status == "OK" and status.total_lag == 7 and status.partitions == ()
    assert consumer_lag([status]).ok


def test_error_status_lists_partitions_in_trouble(burrow):
    parts = [
        {"topic": "orders", "partition": 3, "status": "STALL", "current_lag": 1200,
         "end": {"offset": 10, "lag": 1100}},
        {"topic": "orders", "partition": 4, "status": "WARN", "end": {"offset": 10, "lag": 50}},
        {"topic": "orders", "partition": 5, "status": "OK", "current_lag": 0},
    ]
    burrow.routes["/v3/kafka/sandbox/consumer/billing/lag"] = [
        (200, burrow_body("billing", "ERR", parts, totallag=1250), 0)
    ]
    status = hook_for(burrow).group_status("billing")
    assert not status.ok
    assert status.status == "ERR" and status.total_lag == 1250
    assert [(p.topic, p.partition, p.status, p.lag) for p in status.partitions] == [
        ("orders", 3, "STALL", 1200),
        ("orders", 4, "WARN", 50),
    ]
    verdict = consumer_lag([status])
    assert verdict.reasons == ["group billing: ERR, total lag 1250 (orders-3 STALL lag 1200, orders-4 WARN lag 50)"]


def test_404_is_notfound_and_fails_the_verdict(burrow):
    status = hook_for(burrow).group_status("ghost")
    assert status.status == "NOTFOUND"
    assert not status.ok
    assert status.message == "cluster or consumer not found"
    verdict = consumer_lag([status])
    assert not verdict.ok
    assert verdict.reasons == ["group ghost: NOTFOUND (Burrow does not know this group)"]


def test_group_statuses_keeps_order(burrow):
    burrow.routes["/v3/kafka/sandbox/consumer/a/lag"] = [(200, burrow_body("a", "OK"), 0)]
    burrow.routes["/v3/kafka/sandbox/consumer/b/lag"] = [(200, burrow_body("b", "WARN"), 0)]
    statuses = hook_for(burrow).group_statuses(["b", "a", "c"])
    assert [(s.group, s.status) for s in statuses] == [("b", "WARN"), ("a", "OK"), ("c", "NOTFOUND")]


def test_group_and_cluster_names_are_url_quoted(burrow):
    path = "/v3/kafka/sandbox/consumer/team%2Fbilling%20v2/lag"
    burrow.routes[path] = [(200, burrow_body("team/billing v2", "OK"), 0)]
    assert hook_for(burrow).group_status("team/billing v2").ok
    assert burrow.requests == [path]


def test_retries_on_503_then_succeeds(burrow):
    path = "/v3/kafka/sandbox/consumer/billing/lag"
    burrow.routes[path] = [
        (503, {"error": True, "message": "busy"}, 0),
        (503, {"error": True, "message": "busy"}, 0),
        (200, burrow_body("billing", "OK"), 0),
    ]
    assert hook_for(burrow, retries=3).group_status("billing").ok
    assert burrow.requests == [path] * 3


def test_persistent_500_raises_burrow_error_after_retries(burrow):
    path = "/v3/kafka/sandbox/consumer/billing/lag"
    burrow.routes[path] = [(500, {"error": True, "message": "boom"}, 0)]
    with pytest.raises(BurrowError, match="HTTP 500 for group billing: boom"):
        hook_for(burrow, retries=2).group_status("billing")
    assert len(burrow.requests) == 3  # first try + 2 retries


def test_read_timeout_is_enforced(burrow):
    burrow.routes["/v3/kafka/sandbox/consumer/slow/lag"] = [(200, burrow_body("slow", "OK"), 2.0)]
    hook = hook_for(burrow, retries=0, read_timeout_s=0.2)
    started = time.monotonic()
    with pytest.raises(requests.RequestException):
        hook.group_status("slow")
    assert time.monotonic() - started < 1.5


def test_unreachable_burrow_raises_after_retries():
    hook = BurrowHook(base_url="http://127.0.0.1:9", cluster="sandbox", retries=1, backoff_factor=0,
                      connect_timeout_s=0.5)
    with pytest.raises(requests.ConnectionError):
        hook.group_status("billing")


def test_non_json_200_raises(burrow):
    burrow.routes["/v3/kafka/sandbox/consumer/x/lag"] = [(200, b"<html>proxy</html>", 0)]
    with pytest.raises(BurrowError, match="non-JSON"):
        hook_for(burrow).group_status("x")


def test_parse_status_response_rejects_malformed_200():
    with pytest.raises(BurrowError, match="no status.status"):
        parse_status_response("g", 200, {"error": False, "status": {}})
    status = parse_status_response("g", 404, None)
    assert status.status == "NOTFOUND" and status.message == "HTTP 404"


def test_constructor_validation():
    with pytest.raises(ValueError, match="exactly one of burrow_conn_id, base_url"):
        BurrowHook(cluster="c")
    with pytest.raises(ValueError, match="exactly one of"):
        BurrowHook("burrow", base_url="http://x", cluster="c")
    with pytest.raises(ValueError, match="cluster"):
        BurrowHook(base_url="http://x", cluster="")
    with pytest.raises(ValueError, match="timeouts must be > 0"):
        BurrowHook(base_url="http://x", cluster="c", read_timeout_s=0)


def test_from_profile_requires_burrow_fields():
    prof = ClusterProfile.from_connection_fields("kafka_sandbox", "b1", {})
    with pytest.raises(ValueError, match=r"\['burrow_conn_id', 'burrow_cluster'\]"):
        BurrowHook.from_profile(prof)
    prof = ClusterProfile.from_connection_fields(
        "kafka_sandbox", "b1", {"burrow_conn_id": "burrow_sandbox", "burrow_cluster": "sandbox"}
    )
    hook = BurrowHook.from_profile(prof, retries=1)
    assert hook.burrow_conn_id == "burrow_sandbox" and hook.cluster == "sandbox" and hook.retries == 1


# --- cluster_servers --------------------------------------------------------------------------------


def cluster_body(servers):
    return {"error": False, "message": "cluster module detail returned",
            "module": {"class-name": "kafka", "servers": servers, "client-profile": {}},
            "request": {"url": "/v3/kafka/sandbox", "host": "burrow"}}


def test_cluster_servers(burrow):
    burrow.routes["/v3/kafka/sandbox"] = [(200, cluster_body(["127.0.0.11:9092", "127.0.0.12:9092"]), 0)]
    assert hook_for(burrow).cluster_servers() == ["127.0.0.11:9092", "127.0.0.12:9092"]
    assert burrow.requests == ["/v3/kafka/sandbox"]


def test_cluster_servers_url_quotes_the_cluster_name(burrow):
    burrow.routes["/v3/kafka/prod%2Feu%201"] = [(200, cluster_body(["b1:9092"]), 0)]
    assert BurrowHook(base_url=burrow.url, cluster="prod/eu 1", backoff_factor=0).cluster_servers() == ["b1:9092"]


def test_cluster_servers_of_an_unknown_cluster_is_a_profile_error(burrow):
    hook = BurrowHook(base_url=burrow.url, cluster="prod-eu", backoff_factor=0)
    with pytest.raises(BurrowClusterUnknown, match=r"Burrow at http://127\.0\.0\.1:\d+ has no Kafka cluster named "
                                                   r"'prod-eu' \(HTTP 404 for .*/v3/kafka/prod-eu\): check "
                                                   r"burrow_cluster in the profile"):
        hook.cluster_servers()
    assert isinstance(BurrowClusterUnknown("x"), ValueError), "a misconfiguration, not something to wait out"


@pytest.mark.parametrize("answer", [
    (200, {"error": False, "module": {"class-name": "kafka"}}, 0),
    (200, {"error": False, "module": {"servers": "b1:9092"}}, 0),
    (200, {"error": False}, 0),
    (200, b"<html>proxy</html>", 0),
    (500, {"error": True, "message": "boom"}, 0),
])
def test_cluster_servers_without_module_servers_raise_burrow_error(burrow, answer):
    burrow.routes["/v3/kafka/sandbox"] = [answer]
    with pytest.raises(BurrowError, match=f"Burrow answered HTTP {answer[0]} for .*/v3/kafka/sandbox without "
                                          "module.servers"):
        hook_for(burrow, retries=0).cluster_servers()


def test_a_budget_cuts_the_wait_for_a_burrow_that_does_not_answer(burrow):
    # without a budget: every attempt waits its read timeout (worst_case_s bounds it); with one: one attempt, cut
    burrow.routes["/v3/kafka/sandbox/consumer/slow/lag"] = [(200, burrow_body("slow", "OK"), 3.0)]
    hook = hook_for(burrow, retries=2, read_timeout_s=0.4, connect_timeout_s=0.5, backoff_factor=0.1)
    assert hook.worst_case_s == pytest.approx(3 * 0.9 + 0.2)  # 3 attempts, urllib3's pauses 0 and 0.1 x 2
    started = time.monotonic()
    with pytest.raises(requests.RequestException):
        hook.group_status("slow")
    assert len(burrow.requests) == 3 and 1.2 <= time.monotonic() - started < hook.worst_case_s + 1
    burrow.requests.clear()
    started = time.monotonic()
    with pytest.raises(requests.Timeout):
        hook.group_statuses(["slow", "slow"], budget_s=0.25)
    assert time.monotonic() - started < 0.9 and burrow.requests == ["/v3/kafka/sandbox/consumer/slow/lag"], \
        "one attempt, cut to the budget; the second group finds no time left"
    hook.close()


def test_a_budget_still_reads_an_answer_in_time(burrow):
    burrow.routes["/v3/kafka/sandbox/consumer/billing/lag"] = [(200, burrow_body("billing", "OK"), 0)]
    burrow.routes["/v3/kafka/sandbox/consumer/audit/lag"] = [(200, burrow_body("audit", "WARN"), 0)]
    with hook_for(burrow) as hook:
        statuses = hook.group_statuses(["billing", "audit"], budget_s=2.0)
    assert [(s.group, s.status) for s in statuses] == [("billing", "OK"), ("audit", "WARN")]


def test_the_plans_burrow_check_ends_by_its_waits_deadline_when_burrow_does_not_answer(monkeypatch, silent_url,
                                                                                       burrow_at):
    """operators.roll_plan.check_burrow against a socket that accepts connections and never answers (a frozen
    Burrow): with 1.5 s left of the wait, it gives up within that (the hook's retries would take 55 s a request)."""
    import operators.roll_plan as roll_plan

    monkeypatch.setattr(roll_plan, "BurrowHook", burrow_at(silent_url))
    started = time.monotonic()
    with pytest.raises(requests.RequestException):
        roll_plan.check_burrow(WATCHED, ["billing", "audit"], {"b1:9092"}, deadline=started + 1.5)
    assert time.monotonic() - started < 2.5


def test_the_plans_burrow_check_near_its_deadline_still_reads_a_burrow_that_answers(burrow, monkeypatch, burrow_at):
    import operators.roll_plan as roll_plan

    burrow.routes["/v3/kafka/sandbox"] = [(200, {"error": False, "module": {"servers": ["b1:9092"]}}, 0)]
    burrow.routes["/v3/kafka/sandbox/consumer/billing/lag"] = [(200, burrow_body("billing", "OK"), 0)]
    monkeypatch.setattr(roll_plan, "BurrowHook", burrow_at(burrow.url))
    assert roll_plan.check_burrow(WATCHED, ["billing"], {"b1:9092"}, deadline=time.monotonic() + 3) is True


WATCHED = ClusterProfile.from_connection_fields("c", "b1:9092", {"burrow_conn_id": "burrow",
                                                                  "burrow_cluster": "sandbox"})
