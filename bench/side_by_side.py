"""Side by side: ``kafka_rolling_restart`` and another rolling-restart tool on the same sandbox, taking turns.

For each size this starts one sandbox (``--broker-config`` settings in every broker's file, e.g. a short
``leader.imbalance.check.interval.seconds`` for a tool that waits for Kafka's own leader rebalance), then ``--repeat``
times: our roll and the other tool's command, taking turns going first, each after the cluster settled (no URP,
every partition led by its preferred replica), its consumers rested (Burrow rates the watched groups OK over 10 s of
commits since the previous turn: a roll starts on a cluster at rest) and the machine too (its CPU busy at most 35%
over 3 s, waited for up to 60 s, the fraction printed), each with client traffic (an idempotent ``acks=all`` producer
and a consumer-group reader per client library, ``sandbox.traffic_watch``). Both are judged alike, from outside:

- ``wall_s``: the trigger (ours) or the command's start to the run's end or the command's exit;
- ``1st_stop_s``: that start to the first broker shutdown Kafka logged (the node logs);
- ``restarts``: how often each broker logged a start since (must be 1 each);
- at the end: under-replicated partitions and partitions not led by their preferred replica, from one Metadata
  read right after the end (a tool that exits before its last broker is back leaves some);
- ``settled_s``: the end to the cluster settled (no URP, every broker leading at least 90% of its preferred
  partitions: Kafka's ``leader.imbalance.per.broker.percentage`` 10), polled every 0.2 s for up to 300 s;
  ``done_s`` = ``wall_s`` + ``settled_s``: when the roll's work was really over;
- lost: acknowledged messages not read back (both libraries);
- ``cpu_busy``: the machine's CPU busy during the turn (every core); ``clients_cpu_s``: the CPU seconds the client
  traffic took (this process's threads): on a 2-core sandbox the clients, the cluster and the tool share the cores.

The other tool is any command line (``--compare``), run by the shell, with ``{workdir}``, ``{bootstrap}`` and
``{zookeeper}`` replaced by the sandbox's; its output goes to ``<logs>/<size>/compare-<n>.log``. This repository
ships no other tool: install it yourself and point ``--compare`` at it. kafka_roller (Tesla's kafka-helmsman; its
pins are older than this Python: fabric 3.0.1, invoke 2.0.0 and today's confluent-kafka and kazoo work) on the
sandbox: its ``restart`` lists the brokers itself (controller last), asks for Enter, and runs ``sudo stop kafka`` /
``sudo start kafka`` (``service kafka stop`` where PID 1 is systemd) over SSH on port 22 of each broker's address.
The sandbox's sshd listens on 2222 and its hosts have no ``sudo``: give kafka_roller a HOME whose ``.ssh/config``
says ``Port 2222``, and for the bench's duration put on the machine's PATH a ``sudo`` that runs its arguments and
``stop`` / ``start`` scripts that run ``kafka-service stop`` / ``start`` (remove them after: the product's
preflight checks that a service command's program exists on the host). With the kafka_roller script on PATH::

    --compare 'echo | HOME=/tmp/roller-home kafka_roller -i {workdir}/ssh/id_ed25519 restart \
               --bootstrap={bootstrap} --zk={zookeeper} -e 1'

Usage: ``.venv/bin/python bench/side_by_side.py --compare 'CMD' [--sizes 3 6] [--repeat 3] [--runner scheduler]
[--broker-config leader.imbalance.check.interval.seconds=5] [--conf '{...}']``. Exit 1 if a run failed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "plugins"))  # the Burrow hook and the lag gate's window rule (consumers_at_rest)
from cpu_share import REST_CPU_BUSY, CpuSampler, busy_between, machine_at_rest, own_threads, proc_stat  # noqa: E402
from restart_overhead import RUNNERS, _sandbox, traffic_result, up_sandbox  # noqa: E402

from sandbox.cli import key_value  # noqa: E402
from sandbox.status import admin_client  # noqa: E402
from sandbox.testing import RunningSandbox  # noqa: E402
from sandbox.traffic_watch import watched_traffic  # noqa: E402

SETTLE_LIMIT_S = 300.0
#: Seconds of commits Burrow must judge OK for every watched group, counted from the previous turn's end, before a
#: turn starts: the consumers at rest again (our lag gate's default hysteresis, 3 polls 5 s apart, spans 10 s).
REST_SPAN_S = 10.0
#: A turn whose client traffic took more CPU seconds than this is named with its busiest threads after the table (at
#: 50 msg/s the clients take 1-3 CPU s in a turn of 15-30 s).
BUSY_CLIENTS_S = 10.0
IMBALANCE_PERCENT = 10.0  # Kafka's leader.imbalance.per.broker.percentage default


def cluster_look(bootstrap: str) -> dict[str, Any]:
    """One Metadata read: ``{"urp": n, "offline": n, "not_preferred": n, "imbalanced": [broker ids]}`` (a broker is
    imbalanced when more than 10% of the partitions whose preferred replica it is are led by another broker)."""
    md = admin_client(bootstrap).list_topics(timeout=10)
    urp = offline = not_preferred = 0
    preferred: dict[int, int] = {}
    elsewhere: dict[int, int] = {}
    for topic in md.topics.values():
        for p in topic.partitions.values():
            if not p.replicas:
                continue
            offline += p.leader < 0
            urp += len(p.isrs) < len(p.replicas)
            first = p.replicas[0]
            preferred[first] = preferred.get(first, 0) + 1
            if p.leader != first:
                not_preferred += 1
                elsewhere[first] = elsewhere.get(first, 0) + 1
    imbalanced = sorted(b for b, n in elsewhere.items() if 100.0 * n / preferred[b] > IMBALANCE_PERCENT)
    return {"urp": urp, "offline": offline, "not_preferred": not_preferred, "imbalanced": imbalanced}


def settle(bootstrap: str, limit_s: float = SETTLE_LIMIT_S) -> float | None:
    """Seconds until no URP and no imbalanced broker (None: not within ``limit_s``)."""
    began = time.monotonic()
    while time.monotonic() - began < limit_s:
        try:
            look = cluster_look(bootstrap)
        except Exception:  # noqa: BLE001 - a broker still starting: look again
            look = None
        if look and not look["urp"] and not look["offline"] and not look["imbalanced"]:
            return time.monotonic() - began
        time.sleep(0.2)
    return None


def consumers_at_rest(env: dict[str, Any], since: float, limit_s: float = SETTLE_LIMIT_S) -> float | None:
    """Seconds until Burrow rates every watched group of the sandbox (``env.json``'s ``consumer_groups``) OK over a
    full window spanning :data:`REST_SPAN_S` of commits after ``since`` (epoch seconds; None: not within
    ``limit_s``). A roll is started on a cluster at rest: right after the previous turn the consumers' windows
    still hold its disruption (a lag gate rightly waits it out; a tool without one does not), and whichever tool
    went second would pay for the first."""
    from hooks.burrow import BurrowHook
    from kafka_ops.health import judged_window_s

    burrow = BurrowHook(cluster=env["burrow_cluster"], base_url=env["burrow_url"])
    began = time.monotonic()
    while time.monotonic() - began < limit_s:
        try:
            if judged_window_s(burrow.group_statuses(env["consumer_groups"]), int(since * 1000)) >= REST_SPAN_S:
                return time.monotonic() - began
        except Exception:  # noqa: BLE001 - Burrow busy: look again
            pass
        time.sleep(1.0)
    return None


class CpuDuring:
    """What a turn cost the machine's CPU: ``busy`` (0..1 of every core, ``/proc/stat``) and ``clients_s``, the CPU
    seconds of this process (the client traffic's producers and readers run in its threads; the other tool and
    Airflow run in processes of their own), and ``threads``: the threads that took the most of it, by name (a
    Python thread's name, or the kernel's name of a native one, e.g. librdkafka's ``rdk:broker1``), read every
    :data:`THREAD_SAMPLE_S` (``cpu_share.own_threads``): the traffic's threads end, and leave /proc, before the turn
    does."""

    def __enter__(self) -> CpuDuring:
        self._stat, self._own = proc_stat(), time.process_time()
        self._threads = CpuSampler(read=own_threads, interval_s=THREAD_SAMPLE_S).__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._threads.__exit__(*exc)
        self.busy = busy_between(self._stat, proc_stat())
        self.clients_s = time.process_time() - self._own
        spent = self._threads.spent(group=lambda name: name)
        self.threads = {name: round(s, 1) for name, s in list(spent.items())[:THREADS_SHOWN] if s >= 0.5}

    def result(self) -> dict[str, Any]:
        return {"cpu_busy": self.busy, "clients_cpu_s": self.clients_s, "cpu_threads": self.threads}


THREADS_SHOWN = 4
THREAD_SAMPLE_S = 0.5


def judged(workdir: Path, brokers: list[int], began: float, ended: float, bootstrap: str) -> dict[str, Any]:
    """What the node logs and the cluster say of a roll that ran from ``began`` to ``ended`` (epoch seconds)."""
    shutdowns, restarts = [], {}
    sandbox = RunningSandbox.load(workdir)
    for b in brokers:
        runs = sandbox.node_runs(b)
        shutdowns += [r.shutdown for r in runs if r.shutdown and r.shutdown >= began]
        restarts[b] = sum(1 for r in runs if r.began >= began)
    at_end = cluster_look(bootstrap)
    settled = settle(bootstrap)
    wall = ended - began
    return {"wall_s": wall, "first_stop_s": min(shutdowns) - began if shutdowns else None, "restarts": restarts,
            "at_end": at_end, "settled_s": settled, "done_s": wall + settled if settled is not None else None}


def ours(runner: Any, conf: dict[str, Any], workdir: Path, brokers: list[int], bootstrap: str,
         rate: float) -> dict[str, Any]:
    """Our roll by ``runner``, judged from the trigger of the measured run to its end (a runner's warm-up dry run,
    before it, is not part of it)."""
    with CpuDuring() as cpu, watched_traffic(workdir, bootstrap, brokers, rate_per_s=rate) as watched:
        result = runner.run(conf)
    return {"who": f"kafka-ops ({runner.name})", "ok": result["state"] == "success" and not result["failed"],
            "airflow_s": result.get("airflow_start_s"), **cpu.result(),
            **judged(workdir, brokers, result["began"], result["ended"], bootstrap), **traffic_result(watched)}


def theirs(command: str, workdir: Path, brokers: list[int], bootstrap: str, rate: float, log: Path,
           zookeeper: str) -> dict[str, Any]:
    text = command.format(workdir=workdir, bootstrap=bootstrap, zookeeper=zookeeper)
    with CpuDuring() as cpu, watched_traffic(workdir, bootstrap, brokers, rate_per_s=rate) as watched, \
            open(log, "w") as out:
        began = time.time()
        rc = subprocess.run(text, shell=True, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            timeout=3600, check=False).returncode
        ended = time.time()
    return {"who": "compared", "ok": rc == 0, "airflow_s": None, **cpu.result(),
            **judged(workdir, brokers, began, ended, bootstrap), **traffic_result(watched)}


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def table(rows: list[dict[str, Any]]) -> str:
    """One line per run, then the medians per size and tool."""
    head = (f"{'size':>4} {'tool':<24} {'ok':>3} {'wall_s':>7} {'1st_stop_s':>10} {'urp_end':>7} "
            f"{'not_pref_end':>12} {'settled_s':>9} {'done_s':>7} {'restarts':>9} {'lost':>5} {'acked':>7} "
            f"{'cpu_busy':>8} {'clients_cpu_s':>13}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lost = r["traffic"]["lost_count"] + r["traffic_kafka_python"]["lost_count"]
        acked = r["traffic"]["acknowledged"] + r["traffic_kafka_python"]["acknowledged"]
        restarts = "each 1" if set(r["restarts"].values()) == {1} else json.dumps(r["restarts"])
        lines.append(f"{r['size']:>4} {r['who']:<24} {'yes' if r['ok'] else 'NO':>3} {r['wall_s']:>7.1f} "
                     f"{_fmt(r['first_stop_s']):>10} {r['at_end']['urp']:>7} {r['at_end']['not_preferred']:>12} "
                     f"{_fmt(r['settled_s']):>9} {_fmt(r['done_s']):>7} {restarts:>9} {lost:>5} {acked:>7} "
                     f"{r['cpu_busy']:>8.0%} {r['clients_cpu_s']:>13.1f}")
    lines.append("")
    for r in rows:
        if r["clients_cpu_s"] > BUSY_CLIENTS_S:
            lines.append(f"{r['size']} brokers, {r['who']}, wall {r['wall_s']:.1f} s: the clients took "
                         f"{r['clients_cpu_s']:.1f} CPU s, most in {json.dumps(r.get('cpu_threads'))}")
    for size in sorted({r["size"] for r in rows}):
        for who in sorted({r["who"] for r in rows if r["size"] == size}):
            mine = [r for r in rows if r["size"] == size and r["who"] == who]

            def median(key: str, mine: list[dict[str, Any]] = mine) -> str:
                values = [r[key] for r in mine if r[key] is not None]
                return _fmt(statistics.median(values)) if values else "-"

            lines.append(f"median of {len(mine)}, {size} brokers, {who}: wall {median('wall_s')} s, first stop "
                         f"{median('first_stop_s')} s, done {median('done_s')} s (range of wall "
                         f"{min(r['wall_s'] for r in mine):.1f}-{max(r['wall_s'] for r in mine):.1f} s)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the comparison; returns the exit code (1 if a run failed)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--compare", required=True, help="the other tool's command line ({workdir}, {bootstrap}, "
                   "{zookeeper} replaced)")
    p.add_argument("--sizes", type=int, nargs="+", default=[3, 6], help="broker counts (default 3 6)")
    p.add_argument("--repeat", type=int, default=3, help="runs of each tool per size (default %(default)s)")
    p.add_argument("--runner", choices=sorted(RUNNERS), default="scheduler",
                   help="how our DAG runs (restart_overhead.py's runners; default %(default)s)")
    p.add_argument("--conf", type=json.loads, default={}, help="extra run conf of ours (JSON)")
    p.add_argument("--broker-config", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                   help="a setting for every broker's file (sandbox up --broker-config; repeatable)")
    p.add_argument("--rate", type=float, default=200.0, help="client traffic, messages per second (default "
                   "%(default)s)")
    p.add_argument("--keep", action="store_true", help="keep the sandboxes' workdirs (logs)")
    args = p.parse_args(argv)
    config = dict(args.broker_config)
    conf = {"cluster": "kafka_sandbox", **args.conf}
    base = Path(tempfile.mkdtemp(prefix="kops-side-by-side-"))
    print(f"side by side: ours ({args.runner}, conf {json.dumps(conf)}) and {args.compare!r}, sizes {args.sizes}, "
          f"{args.repeat} runs each, broker config {config}, logs in {base}", flush=True)
    rows: list[dict[str, Any]] = []
    for size in args.sizes:
        root = base / str(size)
        workdir = root / "sandbox"
        root.mkdir(parents=True)
        runner = None
        try:
            up_sandbox(workdir, size, broker_config=config)
            env = json.loads((workdir / "env.json").read_text())
            bootstrap, brokers = env["bootstrap_servers"], list(range(size))
            runner = RUNNERS[args.runner](root, workdir, "kafka_rolling_restart", root / "run.log")
            last_end = time.time()
            for n in range(args.repeat):
                # the tools take turns going first (a warm-up left in the machine is not one tool's alone)
                for turn in ("ours", "theirs") if n % 2 == 0 else ("theirs", "ours"):
                    if settle(bootstrap) is None:
                        raise RuntimeError(f"{size} brokers: the cluster did not settle before a run")
                    rested = consumers_at_rest(env, last_end)
                    if rested is None:
                        raise RuntimeError(f"{size} brokers: the consumers were not at rest before a run")
                    waited, busy = machine_at_rest()
                    print(f"  consumers at rest {rested:.1f} s after the cluster settled; the CPU {busy:.0%} busy "
                          f"(waited {waited:.1f} s for at most {REST_CPU_BUSY:.0%})", flush=True)
                    row = ours(runner, conf, workdir, brokers, bootstrap, args.rate) if turn == "ours" else \
                        theirs(args.compare, workdir, brokers, bootstrap, args.rate, root / f"compare-{n}.log",
                               env["zookeeper_connect"])
                    rows.append({"size": size, **row})
                    last_end = time.time()
                    print(table(rows[-1:]).splitlines()[2], flush=True)
        except (RuntimeError, subprocess.SubprocessError) as exc:
            print(f"side by side: {size} brokers: {exc} (logs in {root})", file=sys.stderr)
            return 1
        finally:
            if runner is not None:
                runner.close()
            _sandbox(["down", "--workdir", str(workdir)], timeout_s=300)
            if not args.keep:
                shutil.rmtree(workdir, ignore_errors=True)
    print(table(rows), flush=True)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
