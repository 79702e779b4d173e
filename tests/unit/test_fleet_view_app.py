"""The cluster view's backend (fleet_view): Airflow's authentication in front of it, per-connection authorization,
no secret in its answers, read-only; the reader's deadline, concurrency and cache. Fake clusters, real Airflow auth
(the simple auth manager, its JWTs), FastAPI's TestClient."""

import threading
import time

import pytest
from airflow.api_fastapi.app import create_auth_manager
from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
from airflow.api_fastapi.core_api.security import get_user
from fastapi.testclient import TestClient
from fleet_view import app as app_module
from fleet_view.app import URL_PREFIX, create_app
from fleet_view.metadata import env_kafka_connections, first_line
from fleet_view.reader import FleetReader, sourced_reader
from fleet_view.sources import ClusterSource, scrub, secret_values
from kafka_ops.cluster import Broker, ClusterState, Partition
from kafka_ops.cluster_view import ClusterReading, LockInfo
from kafka_ops.profile import ClusterProfile

SECRET = "s3cr3t-Passw0rd"


def state() -> ClusterState:
    return ClusterState((Broker(1, "10.0.0.1", 9092), Broker(2, "10.0.0.2", 9092)),
                        (Partition("orders", 0, 1, (1, 2), (1, 2)),), controller_id=1)


class Catalog:
    def __init__(self, clusters=("prod_eu", "prod_us"), runs=None):
        self.clusters = list(clusters)
        self.runs = runs or {}

    def kafka_connections(self):
        return self.clusters

    def cluster_of_run(self, dag_id, run_id):
        return self.runs.get((dag_id, run_id))


def fake_read(cluster: str) -> ClusterReading:
    if cluster == "prod_us":
        # an error that quotes a secret, as a client library might: the source scrubs it (tested below), the app
        # must not add anything of the profile on its own
        return ClusterReading(cluster, int(time.time() * 1000), 1.0, errors={"kafka": "KafkaException: timed out"})
    return ClusterReading(cluster, int(time.time() * 1000), 0.1, state=state(), kraft=False,
                          lock=LockInfo("kafka_rolling_restart/manual__1", int(time.time() * 1000), "rolling restart"))


@pytest.fixture(scope="module", autouse=True)
def auth_manager():
    """Airflow's configured auth manager (the simple one), as the api-server has it."""
    return create_auth_manager()


@pytest.fixture
def app():
    reader = FleetReader(fake_read, ttl_s=60)
    application = create_app(reader, Catalog(runs={("kafka_rolling_restart", "manual__1"): "prod_eu"}))
    yield application
    reader.close()


def client_for(application, root_path=URL_PREFIX) -> TestClient:
    return TestClient(application, root_path=root_path)


def as_user(application, role: str) -> TestClient:
    application.dependency_overrides[get_user] = lambda: SimpleAuthManagerUser(username="someone", role=role)
    return client_for(application)


@pytest.mark.parametrize("path", ["/api/clusters", "/api/clusters/prod_eu", "/clusters", "/clusters/prod_eu",
                                  "/runs/kafka_rolling_restart/manual__1"])
def test_anonymous_gets_nothing(app, path):
    resp = client_for(app).get(path)
    assert resp.status_code == 401
    assert "prod_eu" not in resp.text and "10.0.0.1" not in resp.text


def test_invalid_token_is_refused(app):
    resp = client_for(app).get("/api/clusters", headers={"Authorization": "Bearer not-a-jwt"})
    assert resp.status_code == 403
    resp = client_for(app).get("/api/clusters", cookies={"_token": "not-a-jwt"})
    assert resp.status_code == 403


def test_logged_in_ui_cookie_is_accepted(app, auth_manager, monkeypatch):
    """The UI's own cookie (``_token``), a JWT signed by Airflow's auth manager, as the iframe's fetch sends it."""
    monkeypatch.setattr("airflow.models.revoked_token.RevokedToken.is_revoked", lambda jti: False)
    token = auth_manager.generate_jwt(SimpleAuthManagerUser(username="admin", role="admin"))
    resp = client_for(app).get("/api/clusters", cookies={"_token": token})
    assert resp.status_code == 200
    assert [c["cluster"] for c in resp.json()["clusters"]] == ["prod_eu", "prod_us"]
    bearer = client_for(app).get("/api/clusters", headers={"Authorization": f"Bearer {token}"})
    assert bearer.status_code == 200


def test_fleet_json_for_an_op(app):
    data = as_user(app, "op").get("/api/clusters").json()
    rows = {c["cluster"]: c for c in data["clusters"]}
    assert rows["prod_eu"]["status"] == "ok" and rows["prod_eu"]["brokers_up"] == 2
    assert rows["prod_eu"]["page_url"] == "/kafka-ops/clusters/prod_eu"
    # the lock holder links to its DAG run in Airflow's UI (the mount's root path without the prefix)
    assert rows["prod_eu"]["lock"]["url"] == "/dags/kafka_rolling_restart/runs/manual__1"
    assert rows["prod_us"]["status"] == "unreachable" and rows["prod_us"]["error"] == "KafkaException: timed out"
    assert data["refresh_s"] == 5.0


def test_links_follow_a_base_path(app):
    app.dependency_overrides[get_user] = lambda: SimpleAuthManagerUser(username="a", role="admin")
    data = client_for(app, root_path="/airflow" + URL_PREFIX).get("/api/clusters").json()
    assert data["clusters"][0]["lock"]["url"] == "/airflow/dags/kafka_rolling_restart/runs/manual__1"
    assert data["clusters"][0]["page_url"] == "/airflow/kafka-ops/clusters/prod_eu"


def test_users_who_may_not_read_connections_see_no_cluster(app):
    client = as_user(app, "viewer")
    assert client.get("/api/clusters").json()["clusters"] == []
    assert client.get("/api/clusters/prod_eu").status_code == 403


def test_cluster_json_and_unknown_cluster(app):
    client = as_user(app, "admin")
    page = client.get("/api/clusters/prod_eu").json()
    assert [b["id"] for b in page["brokers"]] == [1, 2]
    assert page["summary"]["cluster"] == "prod_eu"
    assert client.get("/api/clusters/nope").status_code == 404


def test_html_pages_point_at_their_json(app):
    client = as_user(app, "admin")
    fleet = client.get("/clusters")
    assert fleet.status_code == 200 and fleet.headers["content-type"].startswith("text/html")
    assert '"api": "/kafka-ops/api/clusters"' in fleet.text
    one = client.get("/clusters/prod_eu")
    assert '"api": "/kafka-ops/api/clusters/prod_eu"' in one.text and '"kind": "cluster"' in one.text


def test_run_tab_shows_the_runs_cluster(app):
    app.dependency_overrides[app_module.run_access] = lambda: None
    client = as_user(app, "admin")
    assert '"api": "/kafka-ops/api/clusters/prod_eu"' in client.get("/runs/kafka_rolling_restart/manual__1").text
    other = client.get("/runs/some_dag/r9")
    assert other.status_code == 200 and "names no Kafka cluster" in other.text


def test_read_only(app):
    client = as_user(app, "admin")
    assert client.post("/api/clusters").status_code == 405
    assert client.delete("/api/clusters/prod_eu").status_code == 405
    assert client.get("/openapi.json").status_code == 404  # no anonymous docs either


# -- secrets ---------------------------------------------------------------------------------------------------


def profile() -> ClusterProfile:
    return ClusterProfile.from_connection_fields(
        "prod_eu", "10.0.0.1:9092", {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                                     "ssl.key.password": "k3y-pass"}, login="ops", password=SECRET)


def test_secret_values_and_scrub():
    assert set(secret_values(profile())) == {SECRET, "k3y-pass"}
    assert scrub(f"auth failed for ops:{SECRET} (key k3y-pass)", secret_values(profile())) == \
        "auth failed for ops:*** (key ***)"


def test_a_failing_cluster_read_never_shows_the_connections_secrets(app, monkeypatch):
    """A real ClusterSource whose client fails with a message quoting the password: the page gets the error,
    scrubbed."""

    class FailingAdmin:
        def __init__(self, **kwargs):
            pass

        def cluster_state(self, **kwargs):
            raise RuntimeError(f"SASL authentication failed: password {SECRET!r} rejected")

        def close(self):
            pass

    monkeypatch.setattr("fleet_view.sources.KafkaAdminHook", FailingAdmin)
    source = ClusterSource("prod_eu", metadata=None, profile_of=lambda _c: profile())
    reader = FleetReader(lambda c: source.read(), ttl_s=60)
    application = create_app(reader, Catalog(clusters=("prod_eu",)))
    try:
        resp = as_user(application, "admin").get("/api/clusters/prod_eu")
    finally:
        reader.close()
    assert resp.status_code == 200
    assert SECRET not in resp.text and "k3y-pass" not in resp.text
    assert resp.json()["summary"]["error"] == "RuntimeError: SASL authentication failed: password '***' rejected"
    assert resp.json()["summary"]["status"] == "unreachable"


def test_a_bad_connection_is_shown_not_raised():
    def bad(_cluster):
        raise ValueError("connection 'prod_eu': unknown field(s) ['colour'] in extra")

    reading = ClusterSource("prod_eu", metadata=None, profile_of=bad).read()
    assert reading.state is None
    assert reading.errors["kafka"].startswith("connection 'prod_eu': ValueError: connection 'prod_eu': unknown")


# -- the reader ------------------------------------------------------------------------------------------------


def test_clusters_are_read_concurrently_and_a_hung_one_does_not_block():
    release = threading.Event()
    started = []

    def read(cluster):
        started.append(cluster)
        if cluster == "hung":
            release.wait(10)
        return ClusterReading(cluster, int(time.time() * 1000), state=state())

    reader = FleetReader(read, deadline_s=0.5, ttl_s=60)
    try:
        began = time.monotonic()
        out = reader.readings(["a", "hung", "b"])
        took = time.monotonic() - began
        assert took < 2.0
        assert list(out) == ["a", "hung", "b"]
        assert out["a"].state is not None and out["b"].state is not None
        assert out["hung"].state is None and out["hung"].errors["kafka"].startswith("no answer within 0.5 s")
        # a second refresh while it still hangs starts no second read of it
        reader.readings(["hung"])
        assert reader.reads["hung"] == 1
        release.set()
        for _ in range(50):
            if "hung" not in reader._inflight:
                break
            time.sleep(0.05)
        assert reader.reading("hung").state is not None  # the late answer is cached for the next refresh
        assert reader.reads["hung"] == 1
    finally:
        release.set()
        reader.close()


def test_readings_are_cached_for_ttl():
    now = [1000.0]
    reader = FleetReader(lambda c: ClusterReading(c, int(now[0] * 1000), state=state()), ttl_s=4, clock=lambda: now[0])
    try:
        reader.readings(["a"])
        now[0] += 3
        reader.readings(["a"])
        assert reader.reads["a"] == 1
        now[0] += 2
        reader.readings(["a"])
        assert reader.reads["a"] == 2
    finally:
        reader.close()


def test_a_read_that_raises_shows_as_unreachable():
    def read(_cluster):
        raise OSError("no route to host")

    reader = FleetReader(read)
    try:
        reading = reader.reading("x")
    finally:
        reader.close()
    assert reading.state is None and reading.errors == {"kafka": "OSError: no route to host"}


def test_sourced_reader_keeps_one_source_per_cluster():
    made = []

    class Source:
        def __init__(self, cluster):
            made.append(cluster)
            self.cluster = cluster

        def read(self):
            return ClusterReading(self.cluster, int(time.time() * 1000))

    reader = sourced_reader(Source, ttl_s=0)
    try:
        reader.readings(["a", "b"])
        reader.readings(["a", "b"])
    finally:
        reader.close()
    assert sorted(made) == ["a", "b"] and reader.reads == {"a": 2, "b": 2}


# -- metadata helpers ------------------------------------------------------------------------------------------


def test_env_connections_of_conn_type_kafka():
    env = {"AIRFLOW_CONN_KAFKA_SANDBOX": '{"conn_type": "kafka", "host": "127.0.0.11:9092"}',
           "AIRFLOW_CONN_SANDBOX_SSH": '{"conn_type": "ssh", "host": "x"}',
           "AIRFLOW_CONN_KAFKA_URI": "kafka://b1:9092", "AIRFLOW_CONN_BROKEN": "{not json", "PATH": "/bin"}
    assert env_kafka_connections(env) == ["kafka_sandbox", "kafka_uri"]


def test_first_line_of_a_note():
    assert first_line("\n**Succeeded**: 3 brokers restarted\n- cluster healthy") == \
        "Succeeded: 3 brokers restarted"
    assert first_line(None) == ""


# -- the plugin ------------------------------------------------------------------------------------------------


def test_plugin_registers_a_valid_app_and_views():
    from airflow.api_fastapi.app import RESERVED_URL_PREFIXES
    from airflow.api_fastapi.core_api.datamodels.plugins import ExternalViewResponse
    from kafka_fleet_view import KafkaFleetViewPlugin

    (entry,) = KafkaFleetViewPlugin.fastapi_apps
    assert entry["url_prefix"] == URL_PREFIX and not any(URL_PREFIX.startswith(p) for p in RESERVED_URL_PREFIXES)
    views = [ExternalViewResponse(**v) for v in KafkaFleetViewPlugin.external_views]
    assert [(v.name, v.destination, v.href) for v in views] == [
        ("Kafka clusters", "nav", "/kafka-ops/clusters"), ("Cluster", "dag_run", "/kafka-ops/runs/{DAG_ID}/{RUN_ID}")]


def test_importing_the_plugin_loads_no_fastapi_security():
    """Every task process imports the plugin (macros): the app and Airflow's security module wait for a request."""
    import subprocess
    import sys

    code = ("import sys, kafka_fleet_view; "
            "print(sorted(m for m in ('fastapi', 'fleet_view.app', 'airflow.api_fastapi.core_api.security') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True,
                         cwd="plugins")
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_mounted_lazily_as_the_api_server_mounts_it(app):
    """``app.mount(url_prefix, plugin app)``, as ``airflow.api_fastapi.app.init_plugins`` does, with the lazy app."""
    from fastapi import FastAPI
    from fleet_view.asgi import LazyApp

    built = []
    lazy = LazyApp(lambda: built.append(1) or app)
    parent = FastAPI()
    parent.mount(URL_PREFIX, lazy)
    assert built == []
    client = TestClient(parent)
    assert client.get("/kafka-ops/api/clusters").status_code == 401
    app.dependency_overrides[get_user] = lambda: SimpleAuthManagerUser(username="a", role="admin")
    row = client.get("/kafka-ops/api/clusters").json()["clusters"][0]
    assert row["page_url"] == "/kafka-ops/clusters/prod_eu"
    assert row["lock"]["url"] == "/dags/kafka_rolling_restart/runs/manual__1"
    assert built == [1]


class FigureAdmin:
    """The admin hook's per-broker reads, counted."""

    def __init__(self):
        self.log_dirs: list[tuple[int, ...]] = []

    def describe_log_dirs(self, ids):
        self.log_dirs.append(tuple(ids))
        return [{"broker": b, "size_bytes": 100 * b} for b in ids]

    def describe_broker_configs(self, broker, names):
        return {names[0]: "3.6"}

    def broker_features(self, ids):
        return {b: {"finalized": None, "supported": None, "release": "3.6"} for b in ids}


def test_per_broker_figures_are_read_again_when_the_live_brokers_change():
    """Every SLOW_EVERY_S, and at once when a broker went down or came back (a roll): a down broker keeps no
    figures of its last read, one back has its figures without waiting half a minute."""
    now = [1000.0]
    source = ClusterSource("prod_eu", metadata=None, clock=lambda: now[0])
    source._kraft = False
    admin = FigureAdmin()
    two = state()
    one = ClusterState((Broker(1, "10.0.0.1", 9092),), two.partitions, controller_id=1)
    for current in (two, two, one, one, two):
        parts, errors = {}, {}
        source._slow_parts(admin, current, parts, errors, now[0])
        now[0] += 5
    assert admin.log_dirs == [(1, 2), (1,), (1, 2)]
    assert parts["disk_bytes"] == {1: 100, 2: 200} and parts["ibp"] == {1: "3.6", 2: "3.6"} and not errors
    assert {b: f["release"] for b, f in parts["features"].items()} == {1: "3.6", 2: "3.6"}
    now[0] += 31
    source._slow_parts(admin, two, {}, {}, now[0])
    assert admin.log_dirs[-1] == (1, 2) and len(admin.log_dirs) == 4


def test_a_burrow_that_does_not_answer_costs_the_view_one_request_timeout_not_one_per_group(monkeypatch, silent_url,
                                                                                          burrow_at):
    """A socket that accepts connections (the kernel's backlog) and never answers, like a frozen Burrow: the three
    groups' reads share one REQUEST_TIMEOUT_S; the error is shown, the rest of the cluster still read."""
    from fleet_view import sources

    class Admin:
        def __init__(self, **kwargs):
            pass

        def cluster_state(self, **kwargs):
            return ClusterState((Broker(0, "h0", 9092),), (Partition("t", 0, 0, (0,), (0,)),), controller_id=0)

        def close(self):
            pass

    monkeypatch.setattr(sources, "REQUEST_TIMEOUT_S", 0.5)
    monkeypatch.setattr(sources, "BurrowHook", burrow_at(silent_url))
    monkeypatch.setattr(sources, "KafkaAdminHook", Admin)
    watched = ClusterProfile.from_connection_fields(
        "prod_eu", "10.0.0.1:9092", {"burrow_conn_id": "burrow", "burrow_cluster": "prod",
                                     "consumer_groups": ["billing", "audit", "search"]})
    started = time.monotonic()
    reading = ClusterSource("prod_eu", metadata=None, profile_of=lambda _c: watched).read()
    took = time.monotonic() - started
    assert reading.state is not None, "the metadata is read"
    assert reading.errors["burrow"].startswith(("ReadTimeout", "Timeout")), reading.errors
    assert took < 1.5, f"{took:.1f} s: the groups shared one request's time"
