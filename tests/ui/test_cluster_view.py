"""The cluster view (``plugins/kafka_fleet_view.py``) in Airflow's own UI, in a real headless Chromium: the fleet
page under "Kafka clusters" in the navigation bar and the "Cluster" tab of a DAG run, against real clusters.

Two clusters: the session's shared sandbox (ZooKeeper mode, connection ``kafka_sandbox``, as every UI test has it)
and a KRaft sandbox of this module (slot 214, Kafka 4.1.0, 3 brokers, a dynamic quorum of 3 controllers and a
controller 103 started but not added to it, an observer, KIP-853) added to the running Airflow through the REST API
as ``kafka_kraft`` (with its own ``kraft_ssh`` and ``kraft_burrow``), removed again at the end. Only the KRaft
sandbox is rolled and has a broker crashed; the shared one is only read.

Each wait is a condition with a deadline. Screenshots land in each test's ``tmp_path``; their paths are printed
(``pytest -s`` shows them).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import requests
from broker_support import module_sandbox
from playwright.sync_api import expect
from ui_standalone import DAG_ID, RunningAirflow, wait_until

from demo import sandbox_env
from demo.rest import AirflowApiError
from sandbox.testing import RunningSandbox

pytestmark = [pytest.mark.ui, pytest.mark.sandbox]

SLOT = 214
ZK_CLUSTER = "kafka_sandbox"
KRAFT_CLUSTER = "kafka_kraft"
KRAFT_CONNECTIONS = {"kafka_sandbox": KRAFT_CLUSTER, "sandbox_ssh": "kraft_ssh", "sandbox_burrow": "kraft_burrow"}
REFRESH_S = 5  # the page's own refresh (fleet_view.app.REFRESH_S); reads are cached 4 s on top
FLEET_FRAME = "iframe[title='Kafka clusters']"
RUN_FRAME = "iframe[title='Cluster']"
ROLL_TIMEOUT_S = 300  # 2 KRaft brokers: about 45 s on an idle machine


def shot(page: Any, tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path), animations="disabled")
    print(f"screenshot: {path}")
    return path


def kraft_connections(workdir: Path, ids: dict[str, str] = KRAFT_CONNECTIONS) -> list[dict[str, Any]]:
    """A sandbox's connections (its ``airflow.env``) under the ids ``ids`` gives them (old id -> new id), the cluster's
    extra pointing at its own SSH and Burrow connections (the shared sandbox's ``sandbox_ssh`` / ``sandbox_burrow``
    stay as they are)."""
    bodies = sandbox_env.connection_bodies(sandbox_env.connection_env(workdir))
    out = []
    for old, new in ids.items():
        body = {**bodies[old], "connection_id": new}
        if old == "kafka_sandbox":
            extra = json.loads(str(body["extra"]))
            extra.update(ssh_conn_id=ids["sandbox_ssh"], burrow_conn_id=ids["sandbox_burrow"])
            body["extra"] = json.dumps(extra)
        out.append(body)
    return out


@contextmanager
def registered(airflow_ui: RunningAirflow, running: RunningSandbox, ids: dict[str, str]) -> Iterator[RunningSandbox]:
    """``running``'s connections in the running Airflow's metadata DB (under ``ids``) while the block runs."""
    client = airflow_ui.client
    written = client.put_connections(kraft_connections(running.workdir, ids))
    assert sorted(written) == sorted(ids.values()), written
    try:
        yield running
    finally:
        for conn_id in ids.values():
            try:
                client.request("DELETE", f"/connections/{conn_id}")
            except AirflowApiError as exc:
                print(f"connection {conn_id} not deleted: {exc}")


@pytest.fixture(scope="module")
def kraft(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
          airflow_ui: RunningAirflow) -> Iterator[RunningSandbox]:
    """A KRaft sandbox of this module, its connections in the running Airflow's metadata DB while it is up."""
    with module_sandbox(request, tmp_path_factory, SLOT, brokers=3, mode="kraft", controllers=3, kafka_version="4.1.0",
                        quorum="dynamic", observer_controllers=1) as running, \
            registered(airflow_ui, running, KRAFT_CONNECTIONS):
        yield running


def rows(table: Any) -> list[dict[str, str]]:
    """A table of the page as ``[{header: cell text}]``, read in one go (the page redraws every few seconds)."""
    cells = table.evaluate("t => [...t.rows].map(r => [...r.cells].map(c => c.innerText.trim()))")
    return [dict(zip(cells[0], row, strict=False)) for row in cells[1:]] if cells else []


def fleet_rows(frame: Any) -> dict[str, dict[str, str]]:
    table = frame.locator("#main table")
    if not table.count():
        return {}
    return {row["cluster"]: row for row in rows(table)}


def open_fleet(page: Any) -> Any:
    """Click "Kafka clusters" in Airflow's navigation bar; returns the page's frame once its table is drawn."""
    page.goto("/")
    page.get_by_role("link", name="Kafka clusters").click()
    # Airflow's UI then shows the frame's own path in its address (/plugin/kafka-clusters/kafka-ops/clusters) once the
    # frame has loaded: on a fast or a loaded machine the click may return after that already
    page.wait_for_url(re.compile(r"/plugin/kafka-clusters(/kafka-ops/clusters)?/?$"))
    frame = page.frame_locator(FLEET_FRAME)
    frame.locator("#main table").wait_for()
    return frame


def test_the_backend_refuses_anonymous_requests(airflow_ui: RunningAirflow) -> None:
    """Nothing without Airflow's login: no token is 401, a forged one 403; a logged-in API client gets the JSON."""
    base = airflow_ui.base_url
    for path in ("/kafka-ops/api/clusters", f"/kafka-ops/api/clusters/{ZK_CLUSTER}", "/kafka-ops/clusters",
                 f"/kafka-ops/clusters/{ZK_CLUSTER}", f"/kafka-ops/runs/{DAG_ID}/whatever"):
        anonymous = requests.get(base + path, timeout=30)
        assert anonymous.status_code == 401, (path, anonymous.status_code, anonymous.text[:200])
        assert "kafka_sandbox" not in anonymous.text and "127." not in anonymous.text
        forged = requests.get(base + path, headers={"Authorization": "Bearer not.a.token"}, timeout=30)
        assert forged.status_code in (401, 403), (path, forged.status_code)
        cookie = requests.get(base + path, cookies={"_token": "not.a.token"}, timeout=30)
        assert cookie.status_code in (401, 403), (path, cookie.status_code)
    fleet = airflow_ui.client.session.get(f"{base}/kafka-ops/api/clusters", timeout=30)
    assert fleet.status_code == 200, fleet.text[:300]
    assert ZK_CLUSTER in [c["cluster"] for c in fleet.json()["clusters"]]


def test_fleet_page_shows_both_clusters_with_their_brokers(page: Any, sandbox: RunningSandbox,
                                                           kraft: RunningSandbox, tmp_path: Path) -> None:
    sandbox.wait_healthy(timeout_s=120)
    kraft.wait_healthy(timeout_s=120)
    t0 = time.monotonic()
    frame = open_fleet(page)
    both = wait_until("both clusters read in the fleet page", 30,
                      lambda: (r := fleet_rows(frame)) and all(r.get(c, {}).get("brokers up") for c in
                                                               (ZK_CLUSTER, KRAFT_CLUSTER)) and r, poll_s=0.3)
    print(f"fleet page drawn {time.monotonic() - t0:.1f} s after the click")
    shot(page, tmp_path, "fleet")
    zk, kr = both[ZK_CLUSTER], both[KRAFT_CLUSTER]
    shown = ("mode", "brokers up", "status", "URP", "offline")
    assert [zk[k] for k in shown] == ["ZooKeeper", "3 / 3", "ok", "0", "0"], zk
    assert re.fullmatch(r"controller [012]", zk["controller"]), zk
    assert [kr[k] for k in shown] == ["KRaft", "3 / 3", "ok", "0", "0"], kr
    assert re.fullmatch(r"quorum leader 10[012]", kr["controller"]), kr
    assert zk["lag"] == kr["lag"] == "OK" and zk["lock"] == kr["lock"] == "free", both

    # the JSON the page draws, with the browser's own login (Airflow's _token cookie reaches the plugin's routes),
    # carries what Kafka says and nothing of the connection's profile
    answer = page.request.get(f"/kafka-ops/api/clusters/{KRAFT_CLUSTER}")
    assert answer.status == 200, answer.text()
    text = answer.text()
    for secretish in ("ssh_conn_id", "key_file", "server_properties", "kraft_ssh", "burrow_conn_id"):
        assert secretish not in text, secretish

    # one cluster's page, inside the same frame (the UI mirrors it in its own URL)
    frame.get_by_role("link", name=KRAFT_CLUSTER, exact=True).click()
    page.wait_for_url(f"**/plugin/kafka-clusters/kafka-ops/clusters/{KRAFT_CLUSTER}")
    frame.get_by_role("heading", name="KRaft controllers").wait_for()
    brokers = rows(frame.locator("table:has(th:text-is('on disk'))"))
    assert [(b["id"], b["state"], b["rack"]) for b in brokers] == [(str(i), "up", f"rack-{i}") for i in range(3)], \
        brokers
    releases = wait_until("each broker's Kafka release shown", 30, lambda: (r := [b["Kafka"] for b in rows(
        frame.locator("table:has(th:text-is('on disk'))"))]) and all(r) and r, poll_s=0.3)
    assert releases == ["4.1"] * 3, "the release the brokers' API versions match (the sandbox runs Kafka 4.1.0)"
    controllers = rows(frame.locator("table:has(th:text-is('controller'))"))
    assert [v["controller"] for v in controllers][-1] == "103", "the voters first, then the controller not added"
    voters = controllers[:-1]
    assert sorted(v["controller"] for v in voters) == ["100", "101", "102"], voters
    assert [v["role"] for v in voters].count("leader") == 1, voters
    assert controllers[-1]["role"] == "observer (not a voter)", controllers
    expect(frame.get_by_text("null", exact=True)).to_have_count(0)
    shot(page, tmp_path, "cluster-kraft")


@pytest.mark.extended
def test_a_combined_cluster_marks_its_voters_in_both_tables(page: Any, airflow_ui: RunningAirflow,
                                                            request: pytest.FixtureRequest,
                                                            tmp_path_factory: pytest.TempPathFactory,
                                                            tmp_path: Path) -> None:
    """Kafka's quickstart layout: three nodes that are brokers and quorum voters at once
    (``process.roles=broker,controller``), no dedicated controllers. The cluster's page marks each broker row as a
    quorum voter too, and each voter row as combined with its broker."""
    ids = {"kafka_sandbox": "kafka_combined", "sandbox_ssh": "combined_ssh", "sandbox_burrow": "combined_burrow"}
    with module_sandbox(request, tmp_path_factory, SLOT + 1, brokers=3, mode="kraft", combined=3) as combined, \
            registered(airflow_ui, combined, ids):
        combined.wait_healthy(timeout_s=120)
        frame = open_fleet(page)
        row = wait_until("the combined cluster read in the fleet page", 30,
                         lambda: (r := fleet_rows(frame).get("kafka_combined")) and r.get("brokers up") and r,
                         poll_s=0.3)
        assert [row[k] for k in ("mode", "brokers up", "status")] == ["KRaft", "3 / 3", "ok"], row
        frame.get_by_role("link", name="kafka_combined", exact=True).click()
        page.wait_for_url("**/plugin/kafka-clusters/kafka-ops/clusters/kafka_combined")
        frame.get_by_role("heading", name="KRaft controllers").wait_for()
        brokers = rows(frame.locator("table:has(th:text-is('on disk'))"))
        assert [b["id"].split()[0] for b in brokers] == ["0", "1", "2"], brokers
        assert all(b["id"].endswith(" (quorum voter too)") for b in brokers), brokers
        voters = rows(frame.locator("table:has(th:text-is('controller'))"))
        assert sorted(v["controller"] for v in voters) == ["0", "1", "2"], voters
        assert all(v["role"].endswith(f" · combined with broker {v['controller']}") for v in voters), voters
        assert [v["role"].split(" · ")[0] for v in voters].count("leader") == 1, voters
        shot(page, tmp_path, "cluster-combined")


def operation_progress(frame: Any) -> tuple[str, str] | None:
    """``(done / total, now)`` of the roll on the Cluster tab (None while no operation is shown)."""
    table = frame.locator("table:has(th:text-is('done / total'))")
    if not table.count():
        return None
    found = rows(table)
    return (found[0]["done / total"], found[0]["now"]) if found else None


@pytest.mark.extended
def test_a_roll_shows_its_lock_linked_to_the_run_and_its_progress_moving(
    page: Any, airflow_ui: RunningAirflow, kraft: RunningSandbox, tmp_path: Path
) -> None:
    kraft.wait_healthy(timeout_s=120)
    client = airflow_ui.client
    run_id = client.trigger(DAG_ID, {"cluster": KRAFT_CLUSTER, "roles": "brokers", "brokers": [0, 1],
                                     "healthcheck_interval_s": 2, "lag_ok_consecutive": 2})["dag_run_id"]
    run_path = f"/dags/{DAG_ID}/runs/{quote(run_id, safe='')}"
    holder = f"{DAG_ID}/{run_id}"

    # the fleet: the lock holder, linked to the run, and the roll's plan
    fleet = open_fleet(page)
    row = wait_until("the fleet to show the run holding the KRaft cluster's lock and its roll", ROLL_TIMEOUT_S,
                     lambda: (r := fleet_rows(fleet).get(KRAFT_CLUSTER, {})).get("lock", "").startswith(holder)
                     and "restart: 0/2 brokers done" in r.get("operation", "") and r, poll_s=0.5)
    print(f"fleet row once the roll began: {row}")
    assert "(rolling restart, " in row["lock"], row
    shot(page, tmp_path, "fleet-roll-began")
    link = fleet.locator("tr", has=fleet.get_by_role("link", name=KRAFT_CLUSTER, exact=True)).get_by_role(
        "link", name=holder)
    assert link.get_attribute("href") == run_path
    link.click()
    # Airflow's UI goes to the run (the iframe's script moves the UI's router; the run is not opened in the frame)
    page.wait_for_url(re.compile(re.escape(run_path) + "/?$"))
    # the router keeps the old page mounted until the run page's code and data have loaded: the URL moves at once,
    # the frame goes once the run page renders (CI once took over 5 s for that, the screenshot then showing the run)
    expect(page.locator(FLEET_FRAME)).to_have_count(0, timeout=30_000)
    page.get_by_role("link", name="Cluster", exact=True).wait_for()
    page.go_back()  # the link made a history entry: Back is the fleet again, Forward the run
    page.frame_locator(FLEET_FRAME).locator("#main table").wait_for()
    page.go_forward()
    page.wait_for_url(re.compile(re.escape(run_path) + "/?$"))

    # the run's "Cluster" tab refreshes by itself: what it shows of the roll moves without a reload. How far the roll
    # got before the tab opened depends on the machine's load (CI's tab once opened with broker 0 already done), so
    # any move counts: another broker or step (stopping -> starting), or the roll's end (the lock freed).
    page.get_by_role("link", name="Cluster", exact=True).click()
    page.wait_for_url(re.compile(r"/plugin/kafka-cluster-of-run$"))  # the UI's link has the run id unquoted
    frame = page.frame_locator(RUN_FRAME)
    frame.get_by_role("heading", name=f"Kafka cluster {KRAFT_CLUSTER}").wait_for()
    seen: list[tuple[str, str]] = []  # (done / total, now), in the order shown
    holder_links: list[str | None] = []  # the lock holder's link, read with the first progress shown (lock held)

    def lock_free() -> bool:
        return bool(frame.get_by_text("none running (the lock is free)").count())

    def moved() -> bool:
        progress = operation_progress(frame)
        if progress and progress[1] and progress not in seen:
            if not seen:
                holder_links.append(frame.get_by_role("link", name=holder).first.get_attribute("href"))
            seen.append(progress)
            print(f"cluster tab: {progress[0]}, now {progress[1]}")
            shot(page, tmp_path, f"cluster-tab-{len(seen)}")
        return len(seen) >= 2 or (len(seen) == 1 and lock_free())

    wait_until("the Cluster tab to show the roll's progress and then a move (another broker or step, or its end)",
               ROLL_TIMEOUT_S, moved, poll_s=0.5)
    assert all(re.fullmatch(r"[01] / 2 brokers", done) for done, _ in seen), seen
    assert all(re.fullmatch(r"broker [01] \(.+\)", now) for _, now in seen), seen
    done_counts = [int(done.split()[0]) for done, _ in seen]
    assert done_counts == sorted(done_counts), f"the count done never goes back: {seen}"
    assert holder_links == [run_path], "while the roll runs, the tab links the lock holder to its run"

    run = wait_until(f"run {run_id} to end", ROLL_TIMEOUT_S,
                     lambda: (r := client.get_run(DAG_ID, run_id))["state"] in ("success", "failed") and r, poll_s=2)
    assert run["state"] == "success", run
    wait_until("the Cluster tab to show the lock free and the run among the last operations", 3 * REFRESH_S + 10,
               lambda: lock_free() and any(
                   r["state"] == "success" and r["run"] == holder.replace("/", " / ")
                   for r in rows(frame.locator("table:has(th:text-is('outcome'))"))), poll_s=0.5)
    shot(page, tmp_path, "cluster-tab-after-roll")


def test_a_crashed_broker_shows_down_with_urp_within_a_refresh(page: Any, kraft: RunningSandbox,
                                                               tmp_path: Path) -> None:
    kraft.wait_healthy(timeout_s=120)
    frame = open_fleet(page)
    wait_until("the KRaft cluster healthy in the fleet", 30, lambda: (
        r := fleet_rows(frame).get(KRAFT_CLUSTER)) and r["brokers up"] == "3 / 3" and r["URP"] == "0", poll_s=0.3)
    result = kraft.cli("crash-broker", "2")
    assert result.returncode == 0, result.stderr
    crashed = time.monotonic()
    # KRaft fences the broker after broker.session.timeout.ms (6 s in the sandbox); then within a refresh
    row = wait_until("broker 2 down and URP > 0 in the fleet", 6 + 2 * REFRESH_S + 20, lambda: (
        r := fleet_rows(frame).get(KRAFT_CLUSTER)) and r["brokers up"] == "2 / 3" and r["URP"] not in ("", "0") and r,
        poll_s=0.3)
    print(f"fleet shows the crash {time.monotonic() - crashed:.1f} s after the SIGKILL: {row}")
    assert row["status"] == "bad" and "broker 2 down" in row["why"] and int(row["URP"]) > 0, row
    shot(page, tmp_path, "fleet-broker-crashed")
    frame.get_by_role("link", name=KRAFT_CLUSTER, exact=True).click()
    frame.get_by_role("heading", name=re.compile(r"^Under-replicated partitions \([1-9]\d*\)$")).wait_for()
    brokers = {b["id"]: b["state"] for b in rows(frame.locator("table:has(th:text-is('on disk'))"))}
    assert brokers == {"0": "up", "1": "up", "2": "DOWN"}, brokers
    shot(page, tmp_path, "cluster-broker-crashed")

    code, out, err = kraft.ssh(2, "kafka-service start")
    assert code == 0, out + err
    kraft.wait_healthy(timeout_s=120)
