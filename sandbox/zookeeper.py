"""ZooKeeper standalone from Debian's ``zookeeper`` package: config, start, wait until it serves.

Debian's ``zookeeper.jar`` names its dependencies in its manifest ``Class-Path`` (jute, netty,
slf4j-api, ...), so the class path only adds the config dir and an SLF4J binding (slf4j-simple,
logging to stderr, which goes to ``zookeeper.log``) -- without a binding ZooKeeper logs nothing.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

from kazoo.client import KazooClient

from sandbox import debs, procs
from sandbox.layout import Workdir

ZOOKEEPER_JAR = "/usr/share/java/zookeeper.jar"
SLF4J_BINDING = "/usr/share/java/slf4j-simple.jar"  # libslf4j-java, a dependency of libzookeeper-java
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
START_TIMEOUT_S = 30.0


def connect_string(port: int) -> str:
    return f"127.0.0.1:{port}"


def write_config(workdir: Workdir, port: int) -> Path:
    """Write ``zoo.cfg`` for a standalone server on 127.0.0.1:``port``; returns its path."""
    conf = workdir.zookeeper
    (conf / "data").mkdir(parents=True, exist_ok=True)
    cfg = conf / "zoo.cfg"
    cfg.write_text(
        "\n".join(
            [
                "# written by `python -m sandbox up`",
                "tickTime=500",  # session timeouts must fit in [2, 20] ticks: 1 s .. 10 s
                "minSessionTimeout=1000",
                "maxSessionTimeout=30000",
                "initLimit=10",
                "syncLimit=5",
                f"dataDir={conf / 'data'}",
                f"clientPort={port}",
                "clientPortAddress=127.0.0.1",
                "maxClientCnxns=0",
                "admin.enableServer=false",
                "4lw.commands.whitelist=ruok,conf,srvr,stat,mntr",
                "autopurge.purgeInterval=0",
                "",
            ]
        )
    )
    return cfg


def start(workdir: Workdir, port: int) -> int:
    """Start ZooKeeper on ``port`` (detached, pid in ``zookeeper/zookeeper.pid``). Returns the pid."""
    cfg = write_config(workdir, port)
    classpath = ":".join([str(workdir.zookeeper), ZOOKEEPER_JAR, SLF4J_BINDING])
    argv = [
        debs.JAVA,
        "-Xms64m",
        "-Xmx256m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",  # starts faster; ZooKeeper here serves a handful of clients
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
        "-Dorg.slf4j.simpleLogger.showDateTime=true",
        "-Dzookeeper.jmx.log4j.disable=true",
        f"-Dzookeeper.log.dir={workdir.zookeeper}",
        "-cp",
        classpath,
        MAIN_CLASS,
        str(cfg),
    ]
    return procs.spawn(
        argv, log_file=workdir.zookeeper_log, pid_file=workdir.zookeeper_pid, workdir=workdir.root
    )


def wait_serving(workdir: Workdir, port: int, timeout_s: float = START_TIMEOUT_S) -> None:
    """Wait until this workdir's ZooKeeper answers on ``port`` (Kafka's brokers create their own paths).

    Raises:
        procs.Abort: ZooKeeper exited, or another sandbox's ZooKeeper holds the port.
        procs.Timeout: not serving after ``timeout_s`` seconds.
    """

    def serving() -> bool:
        if not procs.alive_from_pid_file(workdir.zookeeper_pid):
            raise procs.Abort(f"ZooKeeper exited; see {workdir.zookeeper_log}")
        if not ruok(port):
            return False
        ours = is_ours(workdir, port)
        if ours is False:  # another sandbox's ZooKeeper took the port meanwhile
            raise procs.Abort(f"127.0.0.1:{port} is served by another ZooKeeper (not {workdir.zookeeper})")
        return bool(ours)

    procs.wait_for(serving, timeout_s, f"ZooKeeper on 127.0.0.1:{port}")


def ruok(port: int, timeout_s: float = 1.0) -> bool:
    """ZooKeeper's ``ruok`` four-letter word: True when the server answers ``imok`` (it serves)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
            sock.sendall(b"ruok")
            return sock.recv(16) == b"imok"
    except OSError:
        return False


def is_ours(workdir: Workdir, port: int, timeout_s: float = 1.0) -> bool | None:
    """Whether the ZooKeeper on ``port`` is this workdir's: its ``conf`` names our data directory.
    None while that cannot be told yet (no answer, or "not currently serving requests")."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
            sock.sendall(b"conf")
            answer = b""
            while chunk := sock.recv(4096):
                answer += chunk
    except OSError:
        return None
    if b"dataDir=" not in answer:
        return None
    return f"dataDir={workdir.zookeeper / 'data'}/".encode() in answer


def client(port: int, timeout_s: float = 10.0) -> KazooClient:
    """A started kazoo client for the sandbox's ZooKeeper (caller stops it).

    Raises:
        kazoo.handlers.threading.KazooTimeoutError: ZooKeeper not reachable within ``timeout_s``.
    """
    zk = KazooClient(hosts=connect_string(port), timeout=timeout_s)
    zk.start(timeout=timeout_s)
    return zk


def seed_cluster_id(port: int, cluster_id: str, timeout_s: float = 10.0) -> None:
    """Create ``/cluster/id`` as Kafka's first ZooKeeper-mode broker would (``{"version":"1","id":<id>}``, Kafka's
    ``ClusterIdZNode``), before any broker starts: the brokers then take this id instead of making one. For ids a
    random one rarely gives (one that starts with ``-``, once in 64 clusters).

    Raises:
        kazoo.exceptions.NodeExistsError: the cluster has an id already.
    """
    zk = client(port, timeout_s)
    try:
        zk.create("/cluster/id", json.dumps({"version": "1", "id": cluster_id}).encode(), makepath=True)
    finally:
        zk.stop()
        zk.close()
