"""Probe cost: requests and milliseconds per poll of the roll's cluster probes, before and after the config cache.

Starts a sandbox of its own (3 brokers on 127.0.22.11-13, a temp workdir), adds ``--topics`` topics of
``--partitions`` partitions (RF 3, or ``--replication-factor``) in steps of ``--step`` topics, sets a
``min.insync.replicas`` override on a few of them, and after each step that the sandbox absorbs (every
partition led, URP = 0) measures ``--polls`` polls of each kind, interleaved so that background load hits
every kind alike:

- ``metadata``: a Metadata-only wait (``gone``; ``cluster_state(configs=False)``), the same before and after;
- ``configs before``: a config-reading probe (``gate``) as it was: an uncached ``KafkaAdminHook``, so
  every poll sends Metadata, DescribeCluster, DescribeConfigs(broker) and one DescribeConfigs per 200 topics;
- ``configs after``: the same probe through ``ClusterProber`` (``cache_configs=True``): its first poll
  (``after, 1st``, reported on its own) reads every config, the later ones none.

Requests are counted by the hook (``KafkaAdminHook.requests``: admin calls by API name, one per
DescribeConfigs batch), ms per poll is wall time of the whole look (median and p90); a step whose sandbox
had URP right after the polls is starred (overloaded: its ms say more about the sandbox than the probes).
The sandbox is always stopped (also on errors and Ctrl-C); its workdir is removed after a complete run
unless ``--keep`` (kept after errors and when the sandbox stopped absorbing topics).

Topics are created with Kafka's CreateTopics (``AdminClient.create_topics``, 200 per request). When a step
does not settle within ``--settle-timeout`` the bench stops growing, prints why (URP, Metadata latency) and
reports the steps measured so far (exit 2). The request counts per poll do not depend on the cluster
(tests/unit/test_config_cache.py checks them at 2,000 x 5: 13 before, 2 after); the milliseconds do.

Usage: ``.venv/bin/python bench/probe_cost.py [--topics 2000] [--partitions 5] [--polls 10] [--step 200] [--keep]``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
ADDRESS_BASE = "127.0.22.11"
BROKERS = 3
CHUNK = 200  # topics per create call / ZooKeeper multi-op
OVERRIDES = 5  # topics given a min.insync.replicas override
OVERRIDE_VALUE = "1"  # below the sandbox's broker default (2): the gate stays open
PREFIX = "bench-"


def _sandbox(args: list[str], timeout_s: float = 600) -> None:
    """Run ``python -m sandbox ARGS`` (output on our stderr); raises CalledProcessError / TimeoutExpired."""
    subprocess.run([sys.executable, "-m", "sandbox", *args], cwd=REPO, check=True, timeout=timeout_s, stdout=sys.stderr)


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --- topics ------------------------------------------------------------------------------------------


class TopicMaker:
    """Creates the bench topics with Kafka's CreateTopics (Kafka places the replicas), ``CHUNK`` per request."""

    def __init__(self, env: dict[str, Any], partitions: int, replication_factor: int = 3) -> None:
        from confluent_kafka.admin import AdminClient

        self.env = env
        self.partitions = partitions
        self.rf = replication_factor
        self.admin = AdminClient({"bootstrap.servers": env["bootstrap_servers"]})

    def create(self, names: list[str]) -> None:
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import NewTopic

        for i in range(0, len(names), CHUNK):
            chunk = names[i : i + CHUNK]
            futures = self.admin.create_topics([NewTopic(n, self.partitions, self.rf) for n in chunk],
                                               request_timeout=60)
            for name, future in futures.items():
                try:
                    future.result(timeout=90)
                except KafkaException as exc:
                    err = exc.args[0] if exc.args else None
                    if isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                        continue
                    raise RuntimeError(f"creating {name} failed: {exc}") from exc

    def set_min_insync(self, names: list[str], value: str) -> None:
        """IncrementalAlterConfigs (the sandbox has it): ``min.insync.replicas`` = ``value`` on ``names``."""
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

        resources = [
            ConfigResource(
                ResourceType.TOPIC,
                n,
                incremental_configs=[
                    ConfigEntry("min.insync.replicas", value, incremental_operation=AlterConfigOpType.SET)
                ],
            )
            for n in names
        ]
        for future in self.admin.incremental_alter_configs(resources, request_timeout=30).values():
            future.result(timeout=60)

    def close(self) -> None:
        self.admin = None


def cluster_view(admin: Any, prefix: str) -> dict[str, Any]:
    """Metadata summary: bench topics fully led, URP and offline partitions (whole cluster), latency."""
    t0 = time.monotonic()
    md = admin.list_topics(timeout=60)
    ms = 1000 * (time.monotonic() - t0)
    led = urp = offline = partitions = 0
    for name, tmd in md.topics.items():
        parts = tmd.partitions.values()
        partitions += len(parts)
        urp += sum(1 for p in parts if len(p.isrs) < len(p.replicas))
        offline += sum(1 for p in parts if p.leader < 0)
        if name.startswith(prefix) and parts and all(p.leader >= 0 for p in parts):
            led += 1
    return {"led": led, "urp": urp, "offline": offline, "ms": ms, "topics": len(md.topics), "partitions": partitions}


def settle(admin: Any, want: int, timeout_s: float) -> tuple[bool, dict[str, Any]]:
    """Wait until ``want`` bench topics are led and URP = offline = 0 twice in a row; (ok, last view)."""
    deadline = time.monotonic() + timeout_s
    good = 0
    view: dict[str, Any] = {}
    while time.monotonic() < deadline:
        try:
            view = cluster_view(admin, PREFIX)
        except Exception as exc:  # a Metadata timeout while the sandbox is busy: keep waiting
            view = {"error": str(exc)}
            good = 0
            continue
        good = good + 1 if view["led"] >= want and view["urp"] == 0 and view["offline"] == 0 else 0
        if good >= 2:
            return True, view
        time.sleep(1.0)
    return False, view


# --- measuring ---------------------------------------------------------------------------------------


def _poll(hook: Any, look: Callable[[], Any]) -> tuple[float, dict[str, int], Any]:
    before = dict(hook.requests)
    t0 = time.monotonic()
    verdict = look()
    ms = 1000 * (time.monotonic() - t0)
    return ms, {k: v - before.get(k, 0) for k, v in hook.requests.items() if v != before.get(k, 0)}, verdict


def measure(profile: Any, polls: int, overridden: list[str], broker: int = 0) -> dict[str, Any]:
    """``polls`` interleaved polls of each kind (see module doc); returns per kind ms list and requests."""
    from hooks.kafka_admin import KafkaAdminHook
    from probes.cluster import PROBES, ClusterProber

    gate = PROBES["gate"].rule
    plain = KafkaAdminHook(profile=profile, request_timeout_s=60)  # as the prober was: no cache
    prober = ClusterProber(profile, request_timeout_s=60)
    metadata = ClusterProber(profile, request_timeout_s=60)
    kinds: dict[str, tuple[Any, Callable[[], Any]]] = {
        "metadata (gone)": (metadata.admin, lambda: metadata.look("gone", broker)),
        "configs before (gate, uncached)": (plain, lambda: gate(plain.cluster_state(configs=True), broker)),
        "configs after (gate, cached)": (prober.admin, lambda: prober.look("gate", broker)),
    }
    out: dict[str, Any] = {k: {"ms": [], "requests": []} for k in kinds}
    try:
        # warm-up: connections and bootstrap for the uncached and metadata hooks; the cached prober's
        # first poll is the cold one that fills its cache, reported on its own
        plain.cluster_state(configs=False)
        metadata.look("gone", broker)
        prober.admin.cluster_state(configs=False)
        ms, reqs, verdict = _poll(prober.admin, lambda: prober.look("gate", broker))
        out["first"] = {"ms": ms, "requests": reqs, "verdict": verdict.message()}
        cached_state = prober.state()
        plain_state = plain.cluster_state()
        missing = [t for t in overridden if cached_state.topic_min_insync.get(t) != int(OVERRIDE_VALUE)]
        if missing or dict(cached_state.topic_min_insync) != dict(plain_state.topic_min_insync):
            raise RuntimeError(
                f"overrides differ: cached {dict(cached_state.topic_min_insync)}, "
                f"uncached {dict(plain_state.topic_min_insync)}, expected {overridden}"
            )
        for _ in range(polls):
            for name, (hook, look) in kinds.items():
                ms, reqs, verdict = _poll(hook, look)
                out[name]["ms"].append(ms)
                out[name]["requests"].append(reqs)
                out[name]["verdict"] = verdict.message()
    finally:
        plain.close()
        prober.close()
        metadata.close()
    return out


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    return statistics.quantiles(ordered, n=100, method="inclusive")[int(q) - 1]


def _requests(rows: list[dict[str, int]]) -> str:
    """Requests per poll: total (mean if they differ), with the breakdown of the first poll."""
    totals = [sum(r.values()) for r in rows]
    total = f"{totals[0]}" if len(set(totals)) == 1 else f"{statistics.mean(totals):.1f}"
    order = ["Metadata", "DescribeCluster", "DescribeConfigs"]
    detail = " + ".join(f"{rows[0].get(k, 0)} {k}" for k in order if rows[0].get(k))
    return f"{total} ({detail})"


def table(steps: list[dict[str, Any]]) -> str:
    head = f"{'topics':>6} {'partitions':>10}  {'probe':<32} {'requests/poll':<52} {'ms median':>9} {'ms p90':>8}"
    lines = [head, "-" * len(head)]
    for s in steps:
        r = s["result"]
        first = r["first"]
        rows = [
            (name, r[name]["requests"], r[name]["ms"])
            for name in ("metadata (gone)", "configs before (gate, uncached)", "configs after (gate, cached)")
        ]
        for i, (name, reqs, ms) in enumerate(rows):
            topics = f"{s['topics']}{'' if s.get('steady', True) else '*'}" if i == 0 else ""
            lines.append(
                f"{topics:>6} {s['partitions'] if i == 0 else '':>10}  {name:<32} "
                f"{_requests(reqs):<52} {statistics.median(ms):>9.1f} {_pct(ms, 90):>8.1f}"
            )
        lines.append(
            f"{'':>6} {'':>10}  {'  after, 1st poll (fills cache)':<32} {_requests([first['requests']]):<52} "
            f"{first['ms']:>9.1f} {'':>8}"
        )
    lines.append(
        "topics: bench topics (the sandbox's own 5 workload topics come on top); partitions: all in the cluster"
    )
    if not all(s.get("steady", True) for s in steps):
        lines.append("*: the sandbox had URP or offline partitions right after the polls (overloaded; ms unreliable)")
    return "\n".join(lines)


# --- main ----------------------------------------------------------------------------------------------


def run(args: argparse.Namespace, base: Path) -> tuple[list[dict[str, Any]], str | None]:
    """Sandbox up -> grow and measure step by step -> (steps measured, why growing stopped or None)."""
    workdir = base / "sandbox"
    os.environ.setdefault("AIRFLOW_HOME", str(base / "airflow"))  # the hooks import Airflow; keep it here
    sys.path[:0] = [str(REPO / "plugins"), str(REPO)]
    logging.getLogger("kazoo").setLevel(logging.WARNING)  # session chatter of the topic maker's client
    from kafka_ops.profile import ClusterProfile

    up = ["up", "--workdir", str(workdir), "--brokers", str(BROKERS), "--address-base", ADDRESS_BASE]
    if args.mode == "kraft":
        up += ["--mode", "kraft", "--controllers", "3"]
    try:
        _sandbox(up)
    except subprocess.CalledProcessError:  # as bench/restart_overhead.py: retry once
        _log("sandbox up failed; retrying once")
        _sandbox(["down", "--workdir", str(workdir)], timeout_s=300)
        _sandbox(up)
    env = json.loads((workdir / "env.json").read_text())
    profile = ClusterProfile(cluster="bench", bootstrap_servers=env["bootstrap_servers"])
    maker = TopicMaker(env, args.partitions, args.replication_factor)
    steps: list[dict[str, Any]] = []
    stopped: str | None = None
    try:
        ok, view = settle(maker.admin, 0, args.settle_timeout)
        if not ok:
            return steps, f"the fresh sandbox did not settle: {view}"
        names = [f"{PREFIX}{i:05d}" for i in range(args.topics)]
        overridden = names[: min(OVERRIDES, len(names))]
        have = 0
        targets = list(range(args.step, args.topics, args.step)) + [args.topics]
        for want in targets:
            t0 = time.monotonic()
            maker.create(names[have:want])
            created_s = time.monotonic() - t0
            if have == 0 and overridden:
                ok, view = settle(maker.admin, len(overridden), args.settle_timeout)
                maker.set_min_insync(overridden, OVERRIDE_VALUE)
            ok, view = settle(maker.admin, want, args.settle_timeout)
            settled_s = time.monotonic() - t0 - created_s
            if not ok:
                stopped = (f"{want} topics x {args.partitions} partitions did not settle in "
                           f"{args.settle_timeout:.0f} s (last Metadata: {view})")
                _log(stopped)
                break
            have = want
            _log(
                f"{want} topics: created in {created_s:.1f} s, settled in {settled_s:.1f} s, "
                f"Metadata {view['ms']:.0f} ms"
            )
            result = measure(profile, args.polls, overridden)
            after = cluster_view(maker.admin, PREFIX)  # did the sandbox stay steady while we polled?
            steady = after["urp"] == 0 and after["offline"] == 0
            steps.append({"topics": want, "partitions": view["partitions"], "result": result, "steady": steady})
            if not steady:
                _log(f"{want} topics: the sandbox did not stay steady during the polls ({after})")
            _log(table(steps[-1:]))
    finally:
        maker.close()
    return steps, stopped


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; 0 when every step was measured, 2 when the sandbox stopped absorbing topics, 1 on errors."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--topics", type=int, default=2000, help="bench topics to create (default 2000)")
    p.add_argument("--partitions", type=int, default=5, help="partitions per topic (default 5)")
    p.add_argument("--replication-factor", type=int, default=3, choices=(1, 2, 3),
                   help="replication factor of the topics (default 3); 1 spares the sandbox's brokers every "
                   "follower fetch, so it holds far more partitions, while a probe's requests stay the same")
    p.add_argument("--polls", type=int, default=10, help="measured polls per probe kind and step (default 10)")
    p.add_argument("--step", type=int, default=CHUNK, help=f"topics added between measurements (default {CHUNK})")
    p.add_argument(
        "--settle-timeout",
        type=float,
        default=180.0,
        help="seconds a step may take to be led with URP = 0 (default 180)",
    )
    p.add_argument("--keep", action="store_true", help="keep the sandbox workdir (logs) after the run")
    p.add_argument("--mode", choices=("zookeeper", "kraft"), default="zookeeper",
                   help="sandbox mode; kraft: topics appended to the controller quorum's metadata log, and each "
                   "broker refreshes from its local copy of it instead of re-reading ZooKeeper (default %(default)s)")
    args = p.parse_args(argv)
    if args.topics < 1 or args.partitions < 1 or args.polls < 1 or args.step < 1:
        p.error("--topics, --partitions, --polls and --step must be >= 1")
    base = Path(tempfile.mkdtemp(prefix="kops-probe-cost-"))
    print(
        f"probe cost: {args.topics} topics x {args.partitions} partitions (RF {args.replication_factor}), "
        f"{args.polls} polls, "
        f"sandbox {BROKERS} brokers on {ADDRESS_BASE}, workdir {base}",
        flush=True,
    )
    t0 = time.monotonic()
    failed = True  # until run() returns: an exception (also Ctrl-C) keeps the workdir and its logs
    steps: list[dict[str, Any]] = []
    stopped = None
    try:
        steps, stopped = run(args, base)
        failed = False
    except (RuntimeError, subprocess.SubprocessError) as exc:
        print(f"probe cost: {exc} (logs in {base})", file=sys.stderr)
    finally:
        try:
            _sandbox(["down", "--workdir", str(base / "sandbox")], timeout_s=300)
        finally:
            if not args.keep and not failed and not stopped:  # an overloaded sandbox's logs are kept
                shutil.rmtree(base, ignore_errors=True)
    if steps:
        print(table(steps), flush=True)
    if stopped:
        print(f"stopped growing: {stopped} (sandbox logs in {base / 'sandbox'})", flush=True)
    print(
        f"{time.monotonic() - t0:.0f} s in all; load average (1/5/15 min) at the end: "
        "{:.1f} {:.1f} {:.1f} on {} cores".format(*os.getloadavg(), os.cpu_count()),
        flush=True,
    )
    if failed:
        return 1
    return 2 if stopped else 0


if __name__ == "__main__":
    sys.exit(main())
