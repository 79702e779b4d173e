"""Burrow (Debian's 1.2.1 built from source for Kafka 4.x, :mod:`sandbox.burrow_build`): its config,
start, and a small HTTP v3 client.

Modules configured (Burrow 1.2.1 key names):

- ``[zookeeper]``: Burrow's own coordination (required by 1.2.1), under ``/burrow`` in the sandbox's
  ZooKeeper (in KRaft mode that ZooKeeper serves Burrow only);
- ``[cluster.sandbox]`` class ``kafka``: sarama client on the brokers (``kafka-version`` of the client
  profile picks sarama's request versions: 2.0.0, Metadata v5; ListOffsets v1 by the build's change); the
  brokers' log end offsets every ``settings.BURROW_OFFSET_REFRESH_S``;
- ``[consumer.sandbox_kafka]`` class ``kafka``: consumes every partition of ``__consumer_offsets`` from the
  oldest offset and decodes the group coordinators' offset commit records: the workload's groups and any
  other group (``sandbox traffic --group``). It lists the topic's partitions once at start, so ``sandbox up``
  starts Burrow after the first commits created the topic. Group metadata values v3 (what Kafka >= 2.3
  writes) are logged as "failed to decode" by 1.2.1; offsets are unaffected;
- ``[storage.default]`` in memory, ``intervals = settings.BURROW_INTERVALS``;
- ``[httpserver.default]`` on 127.0.0.1:<port>.

Burrow reads ``burrow.toml`` from ``-config-dir``.
"""

from __future__ import annotations

import json
from typing import Any

import requests

from sandbox import burrow_build, procs, settings
from sandbox.layout import Workdir

START_TIMEOUT_S = 20.0
CLIENT_KAFKA_VERSION = "2.0.0"


def _toml_list(values: list[str]) -> str:
    return "[ " + ", ".join(json.dumps(v) for v in values) + " ]"


def render_config(workdir: Workdir, *, brokers: list[str], zookeeper_connect: str, port: int) -> str:
    """The text of ``burrow.toml``: ``brokers`` are ``host:port`` bootstrap servers."""
    cluster = settings.BURROW_CLUSTER
    zk = _toml_list([zookeeper_connect])
    return f"""# written by `python -m sandbox up` (Burrow {burrow_build.BUILD})
[general]
pidfile="{workdir.burrow / "burrow.run.pid"}"
stdout-logfile="{workdir.burrow / "burrow.out"}"

[logging]
filename="{workdir.burrow_log}"
level="info"
maxsize=100
maxbackups=2
maxage=1
use-localtime=false
use-compression=false

[zookeeper]
servers={zk}
timeout=6
root-path="/burrow"

[client-profile.sandbox]
client-id="burrow-sandbox"
kafka-version="{CLIENT_KAFKA_VERSION}"

[cluster.{cluster}]
class-name="kafka"
servers={_toml_list(brokers)}
client-profile="sandbox"
topic-refresh={settings.BURROW_TOPIC_REFRESH_S}
offset-refresh={settings.BURROW_OFFSET_REFRESH_S}

[consumer.{cluster}_kafka]
class-name="kafka"
cluster="{cluster}"
servers={_toml_list(brokers)}
client-profile="sandbox"
offsets-topic="__consumer_offsets"
start-latest=false

[storage.default]
class-name="inmemory"
workers=4
intervals={settings.BURROW_INTERVALS}
expire-group=604800
min-distance=1

[evaluator.default]
class-name="caching"
expire-cache=1

[httpserver.default]
address="127.0.0.1:{port}"
"""


def start(workdir: Workdir, *, brokers: list[str], zookeeper_connect: str, port: int) -> int:
    """Write ``burrow/burrow.toml`` and start Burrow (detached). Returns its pid.

    Raises:
        burrow_build.BurrowBuildError: Burrow is not built (``make install``).
    """
    binary = burrow_build.require()
    workdir.burrow.mkdir(parents=True, exist_ok=True)
    (workdir.burrow / "burrow.run.pid").unlink(missing_ok=True)  # Burrow refuses a stale pid file
    (workdir.burrow / "burrow.toml").write_text(
        render_config(workdir, brokers=brokers, zookeeper_connect=zookeeper_connect, port=port)
    )
    return procs.spawn(
        [str(binary), "-config-dir", str(workdir.burrow)],
        log_file=workdir.burrow / "burrow.out",
        pid_file=workdir.burrow_pid,
        workdir=workdir.root,
        cwd=workdir.burrow,
    )


def url(port: int) -> str:
    return f"http://127.0.0.1:{port}"


def get(base_url: str, path: str, timeout_s: float = 2.0) -> dict[str, Any]:
    """GET ``base_url + path`` from Burrow's HTTP API; returns the JSON body.

    Raises:
        requests.RequestException: connection failure or an HTTP error status.
    """
    response = requests.get(base_url + path, timeout=timeout_s)
    response.raise_for_status()
    return response.json()


def consumers(base_url: str, cluster: str = settings.BURROW_CLUSTER) -> list[str]:
    """The consumer groups Burrow knows in ``cluster``."""
    return list(get(base_url, f"/v3/kafka/{cluster}/consumer").get("consumers", []))


def group_status(base_url: str, group: str, cluster: str = settings.BURROW_CLUSTER) -> dict[str, Any]:
    """Burrow's evaluation of ``group``: the ``status`` object (``status``: OK/WARN/ERR/NOTFOUND,
    ``totallag``, ``partitions``...)."""
    return get(base_url, f"/v3/kafka/{cluster}/consumer/{group}/status").get("status", {})


def wait_serving(
    workdir: Workdir, base_url: str, brokers: list[str], timeout_s: float = START_TIMEOUT_S
) -> None:
    """Wait until our Burrow answers at ``base_url``: its cluster module lists ``brokers``
    (``GET /v3/kafka/<cluster>``), so another sandbox's Burrow on that port does not count.

    Raises:
        procs.Abort: Burrow exited (e.g. its HTTP port was taken; see ``burrow/burrow.log``), or
            another Burrow answers on that port.
        procs.Timeout: not serving after ``timeout_s`` seconds.
    """

    def serving() -> bool:
        if not procs.alive_from_pid_file(workdir.burrow_pid):
            raise procs.Abort(f"Burrow exited; see {workdir.burrow_log} and {workdir.burrow / 'burrow.out'}")
        servers = get(base_url, f"/v3/kafka/{settings.BURROW_CLUSTER}", timeout_s=1.0)["module"]["servers"]
        if sorted(servers) != sorted(brokers):
            raise procs.Abort(f"{base_url} is another sandbox's Burrow (brokers {servers})")
        return True

    procs.wait_for(serving, timeout_s, f"Burrow serving HTTP at {base_url}", poll_s=0.1)


#: What Burrow 1.2 logs before it exits when its consumer of ``__consumer_offsets`` starts while a partition's
#: leader moves (NOT_LEADER from a broker its metadata still names): it gives up instead of refreshing.
STARTUP_RACE = '"msg":"failed to start consumer"'


def lost_startup_race(workdir: Workdir) -> bool:
    """Whether Burrow exited because its consumer started during a leader move (:data:`STARTUP_RACE` in the tail
    of ``burrow/burrow.log``): starting it again is what its service manager would do."""
    try:
        with open(workdir.burrow_log, "rb") as handle:
            handle.seek(max(0, workdir.burrow_log.stat().st_size - 8192))
            return STARTUP_RACE in handle.read().decode(errors="replace")
    except OSError:
        return False


def wait_ready(
    workdir: Workdir, base_url: str, groups: list[str], timeout_s: float = START_TIMEOUT_S
) -> dict[str, str | None]:
    """Wait until Burrow rates every group of ``groups`` OK, with offsets for every partition of the
    group's topics (``settings.WORKLOAD_GROUPS``); before its first evaluation Burrow answers OK for
    0 partitions. Returns the last status of each group.

    Raises:
        procs.Abort: Burrow exited (see ``burrow/burrow.log`` and ``burrow.out``).
        procs.Timeout: not all OK in time (the message lists each group's status).
    """
    last: dict[str, str | None] = {}

    def ready() -> bool:
        if not procs.alive_from_pid_file(workdir.burrow_pid):
            raise procs.Abort(f"Burrow exited; see {workdir.burrow_log} and {workdir.burrow / 'burrow.out'}")
        for group in groups:
            status = group_status(base_url, group)
            expected = sum(settings.WORKLOAD_TOPICS[t][0] for t in settings.WORKLOAD_GROUPS.get(group, []))
            counted = status.get("partition_count", 0)
            last[group] = status.get("status") if counted >= expected else f"{counted}/{expected} partitions"
        return all(status == "OK" for status in last.values())

    try:
        procs.wait_for(ready, timeout_s, f"Burrow at {base_url} to rate groups {groups} OK", poll_s=0.3)
    except procs.Timeout as exc:
        raise procs.Timeout(f"{exc}; last statuses {last}") from None
    return last
