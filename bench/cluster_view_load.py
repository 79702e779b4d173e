"""Cluster view load time: how long the fleet page (``plugins/kafka_fleet_view.py``) and its JSON take with two real
clusters, then with many topics on one of them.

Starts a ZooKeeper-mode sandbox (3 brokers, Kafka 3.6.2) and a KRaft one (3 brokers, 3 controllers, Kafka 4.0.0) on
loopback addresses of their own, ``airflow standalone`` with both clusters' connections (``tests/ui/ui_standalone.py``,
as the UI tests run it) and headless Debian Chromium (Playwright). Then, with the two clusters as they come up and
again after ``--topics`` topics (1 partition, replication factor 1, ``min.insync.replicas=1``) were created on the
ZooKeeper-mode cluster, each ``--repeat`` times:

- ``json cold``: ``GET /kafka-ops/api/clusters`` (bearer token) once the reader's cache (4 s) has expired, so both
  clusters are read anew; ``json warm``: the same again at once (from the cache);
- ``cluster json cold``: ``GET /kafka-ops/api/clusters/<the ZooKeeper-mode cluster>`` (its page's JSON), cache expired;
- ``page cold`` / ``page warm``: a logged-in browser tab's navigation to ``/plugin/kafka-clusters`` (Airflow's UI, the
  "Kafka clusters" entry of its navigation bar, with the view in its iframe) until the fleet table shows every
  cluster's broker count: time to the first full render;
- ``frame cold``: the view's page alone (``/kafka-ops/clusters``, what the iframe loads) to its first full render;
- once, right after the topics were created: the first read of the cluster (it asks DescribeConfigs of every new
  topic; the reader's deadline is 3 s).

Prints the figures (seconds: median and max) and the JSON sizes. Everything it started is stopped at the end (also on
errors and Ctrl-C). Usage: ``.venv/bin/python bench/cluster_view_load.py [--topics 2000] [--repeat 5]``; it starts a
sandbox, Airflow and Chromium: on a shared machine, serialize it with other heavy runs
(``flock /tmp/kafka-ops-heavy.lock .venv/bin/python bench/cluster_view_load.py``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "ui"))
import ui_standalone  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from demo import sandbox_env  # noqa: E402
from sandbox import procs, testing  # noqa: E402

ADDRESS_BASES = {"zookeeper": "127.0.36.11", "kraft": "127.0.37.11"}
ZK_CLUSTER, KRAFT_CLUSTER = "kafka_sandbox", "kafka_kraft"
CACHE_S = 4.0  # fleet_view.reader.TTL_S
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def kraft_bodies(workdir: Path) -> list[dict[str, Any]]:
    """The KRaft sandbox's connections as ``kafka_kraft`` / ``kraft_ssh`` / ``kraft_burrow``."""
    bodies = sandbox_env.connection_bodies(sandbox_env.connection_env(workdir))
    kafka = dict(bodies["kafka_sandbox"], connection_id=KRAFT_CLUSTER)
    extra = json.loads(str(kafka["extra"]))
    extra.update(ssh_conn_id="kraft_ssh", burrow_conn_id="kraft_burrow")
    kafka["extra"] = json.dumps(extra)
    return [kafka, dict(bodies["sandbox_ssh"], connection_id="kraft_ssh"),
            dict(bodies["sandbox_burrow"], connection_id="kraft_burrow")]


def create_topics(bootstrap: str, count: int) -> float:
    """``count`` topics ``bench-NNNN`` (1 partition, RF 1, min.insync.replicas 1); seconds until the metadata lists
    them all."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [f"bench-{i:05d}" for i in range(count)]
    t0 = time.monotonic()
    for start in range(0, count, 500):
        futures = admin.create_topics([NewTopic(n, 1, 1, config={"min.insync.replicas": "1"})
                                       for n in names[start:start + 500]], operation_timeout=60, request_timeout=120)
        for future in futures.values():
            future.result()
    testing.wait_for(lambda: sum(t.startswith("bench-") for t in admin.list_topics(timeout=30).topics) >= count,
                     120, f"{count} topics in the metadata", poll_s=0.5)
    return time.monotonic() - t0


class Bench:
    def __init__(self, url: str, session: Any, context: Any, repeat: int) -> None:
        self.url, self.session, self.context, self.repeat = url, session, context, repeat
        self.last_read = 0.0
        self.figures: dict[str, list[float]] = {}
        self.sizes: dict[str, int] = {}

    def cold(self) -> None:
        """Wait until the reader's cache has expired (no other reader runs: pages are closed after each run)."""
        time.sleep(max(0.0, self.last_read + CACHE_S + 0.5 - time.monotonic()))

    def get(self, path: str) -> tuple[float, dict[str, Any]]:
        t0 = time.monotonic()
        resp = self.session.get(self.url + path, timeout=60)
        took = time.monotonic() - t0
        resp.raise_for_status()
        self.last_read = time.monotonic()
        self.sizes[path] = len(resp.content)
        return took, resp.json()

    def page(self, path: str, frame_of: Callable[[Any], Any], clusters: list[str]) -> float:
        """Seconds from the navigation to ``path`` until the fleet table shows every cluster's broker count."""
        tab = self.context.new_page()
        try:
            t0 = time.monotonic()
            tab.goto(path, wait_until="commit")
            frame = frame_of(tab)
            frame.locator("#main table").wait_for()
            script = ("(t, want) => want.every(c => [...t.rows].some(r => r.cells[0].innerText.trim() === c"
                      " && /\\d+ \\/ \\d+/.test(r.cells[3].innerText)))")
            table = frame.locator("#main table")
            while not table.evaluate(script, clusters):
                time.sleep(0.02)
                if time.monotonic() - t0 > 60:
                    raise RuntimeError(f"{path}: the fleet table did not show {clusters} within 60 s")
            took = time.monotonic() - t0
        finally:
            tab.close()
        self.last_read = time.monotonic()
        return took

    def add(self, name: str, value: float) -> None:
        self.figures.setdefault(name, []).append(value)

    def round(self, label: str, clusters: list[str], big: str) -> None:
        for _ in range(self.repeat):
            self.cold()
            self.add(f"{label} json cold", self.get("/kafka-ops/api/clusters")[0])
            self.add(f"{label} json warm", self.get("/kafka-ops/api/clusters")[0])
            self.cold()
            self.add(f"{label} cluster json cold", self.get(f"/kafka-ops/api/clusters/{big}")[0])
            self.cold()
            self.add(f"{label} page cold", self.page("/plugin/kafka-clusters",
                                                      lambda t: t.frame_locator("iframe[title='Kafka clusters']"),
                                                      clusters))
            self.add(f"{label} page warm", self.page("/plugin/kafka-clusters",
                                                      lambda t: t.frame_locator("iframe[title='Kafka clusters']"),
                                                      clusters))
            self.cold()
            self.add(f"{label} frame cold", self.page("/kafka-ops/clusters", lambda t: t, clusters))


def login(context: Any, url: str, password: str) -> None:
    tab = context.new_page()
    tab.goto(url + "/")
    tab.get_by_label("Username").fill("admin")
    tab.get_by_label("Password").fill(password)
    tab.get_by_role("button", name="Sign in").click()
    tab.wait_for_url(lambda u: "/auth/login" not in u)
    tab.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topics", type=int, default=2000,
                    help="topics created on the ZooKeeper-mode cluster (default 2000)")
    ap.add_argument("--repeat", type=int, default=5, help="measurements of each figure (default 5)")
    args = ap.parse_args(argv)
    for base in ADDRESS_BASES.values():
        if procs.port_in_use(base, 9092):
            print(f"{base}:9092 is in use (another sandbox?)", file=sys.stderr)
            return 1
    from playwright.sync_api import sync_playwright

    root = Path(tempfile.mkdtemp(prefix="kafka-ops-cluster-view-bench-"))
    started: list[testing.RunningSandbox] = []
    home = root / "airflow"
    airflow = None
    try:
        zk = testing.start(root / "zk", brokers=3, address_base=ADDRESS_BASES["zookeeper"])
        started.append(zk)
        kraft = testing.start(root / "kraft", brokers=3, address_base=ADDRESS_BASES["kraft"], mode="kraft",
                              controllers=3)
        started.append(kraft)
        print(f"sandboxes up: ZooKeeper mode {zk.up_seconds:.0f} s, KRaft {kraft.up_seconds:.0f} s")
        airflow = ui_standalone.start_airflow(home, zk.workdir)
        airflow.client.put_connections(kraft_bodies(kraft.workdir))
        clusters = [KRAFT_CLUSTER, ZK_CLUSTER]
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            context = browser.new_context(viewport={"width": 1600, "height": 1000}, base_url=airflow.base_url)
            context.set_default_timeout(60_000)
            login(context, airflow.base_url, airflow.password)
            bench = Bench(airflow.base_url, airflow.client.session, context, args.repeat)
            first, _ = bench.get("/kafka-ops/api/clusters")
            print(f"first request (the app built, both clusters read for the first time): {first:.2f} s")
            bench.page("/plugin/kafka-clusters", lambda t: t.frame_locator("iframe[title='Kafka clusters']"),
                       clusters)  # the browser's first load of Airflow's UI (its cache), not measured
            bench.round("2 clusters", clusters, ZK_CLUSTER)
            made = create_topics(zk.bootstrap_servers, args.topics)
            print(f"{args.topics} topics created on {ZK_CLUSTER} in {made:.0f} s")
            bench.cold()
            took, body = bench.get("/kafka-ops/api/clusters")
            row = next(c for c in body["clusters"] if c["cluster"] == ZK_CLUSTER)
            print(f"first read after creating them: request {took:.2f} s, the cluster's read took {row['took_s']} s "
                  f"(status {row['status']}{', ' + row['error'] if row['error'] else ''})")
            bench.round(f"+{args.topics} topics", clusters, ZK_CLUSTER)
            _, body = bench.get(f"/kafka-ops/api/clusters/{ZK_CLUSTER}")
            partitions = sum(b["replicas"] for b in body["brokers"])
            browser.close()
        print(f"\n{ZK_CLUSTER} at the end: {partitions} replicas on its brokers\n")
        print(f"{'figure (s)':<40}{'median':>8}{'max':>8}")
        for name, values in bench.figures.items():
            print(f"{name:<40}{statistics.median(values):>8.3f}{max(values):>8.3f}")
        print("\nJSON sizes (bytes, last answer): " + ", ".join(f"{p} {n:,}" for p, n in bench.sizes.items()))
        return 0
    finally:
        if airflow is not None or home.exists():
            ui_standalone.stop_airflow(home)
        for running in started:
            result = testing.stop(running)
            if result.returncode != 0:
                print(f"sandbox down failed in {running.workdir}: {result.stderr}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
