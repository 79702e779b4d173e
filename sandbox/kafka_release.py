"""Real Apache Kafka releases for the sandbox, assembled from Maven Central.

Apache publishes Kafka's server and tools as Maven artifacts (``org.apache.kafka:kafka_2.13`` with its
``kafka-server``, ``kafka-metadata``, ``kafka-raft``, ``kafka-storage`` ... dependencies, and
``org.apache.kafka:kafka-tools``), not the ``kafka_2.13-<v>.tgz`` distribution. :func:`assemble` builds what
that tarball holds from them, once per pinned release, into ``.cache/kafka/<version>/``:

- ``libs/``: every runtime jar of ``kafka_2.13`` and ``kafka-tools`` at that version, copied by Maven's
  ``dependency:copy-dependencies`` (``--strict-checksums``: a jar whose checksum differs from Central's fails
  the build), plus the logging backend Kafka's own tarball ships, which the poms leave to the distribution
  (3.x: reload4j through ``slf4j-reload4j``, already a runtime dependency of ``kafka_2.13``; 4.x: Log4j 2,
  ``log4j-core`` and ``log4j-slf4j-impl``, KIP-653);
- ``bin/``: launchers named like the tarball's: ``kafka-run-class.sh`` (Java on ``libs/*``), and
  ``kafka-server-start.sh`` (``kafka.Kafka``, brokers and controllers alike), ``kafka-storage.sh``,
  ``kafka-topics.sh``, ``kafka-metadata-quorum.sh``, ``kafka-features.sh``, ``kafka-reassign-partitions.sh``
  ... each running the tool's main class *of that release* (classes moved from Scala's ``kafka.admin`` to
  ``org.apache.kafka.tools`` between releases: the first candidate found in ``libs/`` wins, as the
  release's own script names it);
- ``config/``: the log configuration: the server logs to standard output (``kafka-service`` appends it to
  the host's ``logs/server.log``), the tools log warnings to standard error;
- ``RELEASE.json``: the manifest (version, jars, main classes), written last: a release without it is
  incomplete and assembled again.

``python -m sandbox.kafka_release install [VERSION ...]`` (``make install``) assembles the pinned releases
(:data:`RELEASES`) that are missing; a second run downloads nothing. Nothing is downloaded at test time:
:func:`release_dir` raises when a release is not assembled.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sandbox import procs
from sandbox.layout import PROJECT_ROOT

#: Where releases are assembled (outside git; ``KAFKA_OPS_CACHE`` moves it).
CACHE_DIR = Path(os.environ.get("KAFKA_OPS_CACHE", PROJECT_ROOT / ".cache"))
SCALA_VERSION = "2.13"
#: The Maven plugin that copies the jars, pinned so that a build does not depend on Maven's default.
COPY_DEPENDENCIES = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies"
#: Kafka 4.x's tarball ships Log4j 2 (KIP-653) at this version with the SLF4J 1.7 binding.
LOG4J2_VERSION = "2.24.3"
MANIFEST = "RELEASE.json"
#: The release's class data sharing archive (a static AppCDS archive, JEP 310), beside libs/.
CLASS_ARCHIVE = "kafka.jsa"
#: How the archive is made (``RELEASE.json``'s ``class_archive_from``): ``install`` trains an assembled release's
#: archive again when its manifest says otherwise.
ARCHIVE_TRAINING = "static: the classes a KRaft node and a ZooKeeper-mode broker (3.x) load at start"
TRAINING_TIMEOUT_S = 120.0
#: The JVM options of the training runs and of the dump: the sandbox's (``sandbox.settings.JVM_OPTS``' collector and
#: compiler; an archive dumped under another collector is still used, its archived heap objects are not).
TRAINING_JVM_OPTS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true"


@dataclass(frozen=True)
class Release:
    """One pinned Kafka release: ``version`` (``"3.6.2"``) and the extra ``group:artifact:version`` jars its
    tarball carries beside what the poms bring (the logging backend)."""

    version: str
    extra_artifacts: tuple[str, ...] = ()

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    @property
    def version_tuple(self) -> tuple[int, ...]:
        """``(3, 9, 1)`` for ``"3.9.1"``."""
        return tuple(int(part) for part in self.version.split("."))

    @property
    def log4j2(self) -> bool:
        """Kafka 4.0 moved from reload4j (Log4j 1 API) to Log4j 2."""
        return self.major >= 4


_LOG4J2 = (f"org.apache.logging.log4j:log4j-core:{LOG4J2_VERSION}",
           f"org.apache.logging.log4j:log4j-slf4j-impl:{LOG4J2_VERSION}")

#: The releases the sandbox runs: ZooKeeper mode on 3.x (3.6.2 the default, 3.7.1 / 3.8.1 upgrade targets,
#: 3.9.1 the bridge release of the ZooKeeper-to-KRaft migration), KRaft mode on 4.x (4.0.0 the default,
#: 4.1.0 an upgrade target with a newer metadata.version).
RELEASES: dict[str, Release] = {r.version: r for r in (
    Release("3.6.2"),
    Release("3.7.1"),
    Release("3.8.1"),
    Release("3.9.1"),
    Release("4.0.0", _LOG4J2),
    Release("4.1.0", _LOG4J2),
)}

#: Launcher name -> main class candidates, newest location first (the first found in ``libs/`` is used);
#: launchers whose class a release lacks are not written. Server and storage tool are required.
TOOLS: dict[str, tuple[str, ...]] = {
    "kafka-server-start.sh": ("kafka.Kafka",),
    "kafka-storage.sh": ("kafka.tools.StorageTool", "org.apache.kafka.tools.StorageTool"),
    "kafka-topics.sh": ("org.apache.kafka.tools.TopicCommand", "kafka.admin.TopicCommand"),
    "kafka-configs.sh": ("org.apache.kafka.tools.ConfigCommand", "kafka.admin.ConfigCommand"),
    "kafka-reassign-partitions.sh": ("org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
                                     "kafka.admin.ReassignPartitionsCommand"),
    "kafka-features.sh": ("org.apache.kafka.tools.FeatureCommand", "kafka.admin.FeatureCommand"),
    "kafka-metadata-quorum.sh": ("org.apache.kafka.tools.MetadataQuorumCommand",),
    "kafka-consumer-groups.sh": ("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
                                 "kafka.admin.ConsumerGroupCommand"),
    "kafka-leader-election.sh": ("org.apache.kafka.tools.LeaderElectionCommand", "kafka.admin.LeaderElectionCommand"),
    "kafka-log-dirs.sh": ("org.apache.kafka.tools.LogDirsCommand", "kafka.admin.LogDirsCommand"),
    "kafka-broker-api-versions.sh": ("org.apache.kafka.tools.BrokerApiVersionsCommand",
                                     "kafka.admin.BrokerApiVersionsCommand"),
    "kafka-get-offsets.sh": ("org.apache.kafka.tools.GetOffsetShell", "kafka.tools.GetOffsetShell"),
    "kafka-cluster.sh": ("org.apache.kafka.tools.ClusterTool", "kafka.tools.ClusterTool"),
    "kafka-console-producer.sh": ("org.apache.kafka.tools.ConsoleProducer", "kafka.tools.ConsoleProducer"),
    "kafka-console-consumer.sh": ("org.apache.kafka.tools.consumer.ConsoleConsumer", "kafka.tools.ConsoleConsumer"),
    "zookeeper-shell.sh": ("org.apache.zookeeper.ZooKeeperMainWithTlsSupportForKafka",),
}
REQUIRED_TOOLS = ("kafka-server-start.sh", "kafka-storage.sh")


class ReleaseError(RuntimeError):
    """A release is unknown, not assembled, or could not be assembled; the message says what to run."""


def release_root(version: str, cache_dir: Path | None = None) -> Path:
    """``.cache/kafka/<version>`` (whether or not it is assembled)."""
    return (cache_dir or CACHE_DIR) / "kafka" / version


def is_assembled(version: str, cache_dir: Path | None = None) -> bool:
    """Whether the release's manifest exists (written last by :func:`assemble`)."""
    return (release_root(version, cache_dir) / MANIFEST).is_file()


def release_dir(version: str, cache_dir: Path | None = None) -> Path:
    """The assembled release ``version``.

    Raises:
        ReleaseError: not a pinned release, or not assembled (the message names the command that assembles it).
    """
    if version not in RELEASES:
        raise ReleaseError(f"Kafka {version} is not a release the sandbox pins ({', '.join(RELEASES)}); "
                           "add it to sandbox.kafka_release.RELEASES")
    if not is_assembled(version, cache_dir):
        raise ReleaseError(f"Kafka {version} is not assembled in {release_root(version, cache_dir)}: run "
                           f"`make install` (or `python -m sandbox.kafka_release install {version}`)")
    return release_root(version, cache_dir)


def manifest(version: str, cache_dir: Path | None = None) -> dict:
    """The release's ``RELEASE.json``: ``{"version", "jars": [names], "tools": {launcher: main class}}``.

    Raises:
        ReleaseError: see :func:`release_dir`.
    """
    return json.loads((release_dir(version, cache_dir) / MANIFEST).read_text())


def _pom(release: Release) -> str:
    coordinates = [f"org.apache.kafka:kafka_{SCALA_VERSION}:{release.version}",
                   f"org.apache.kafka:kafka-tools:{release.version}", *release.extra_artifacts]
    deps = "\n".join(
        "    <dependency><groupId>{}</groupId><artifactId>{}</artifactId><version>{}</version></dependency>"
        .format(*c.split(":")) for c in coordinates)
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <!-- written by sandbox.kafka_release: the jars of Apache Kafka {release.version}'s distribution -->
  <modelVersion>4.0.0</modelVersion>
  <groupId>kafka-ops.sandbox</groupId>
  <artifactId>kafka-{release.version}</artifactId>
  <version>1</version>
  <dependencies>
{deps}
  </dependencies>
</project>
"""


def _class_index(libs: Path) -> set[str]:
    """Every class name (``a.b.C``) in the jars of ``libs``."""
    names: set[str] = set()
    for jar in libs.glob("*.jar"):
        with zipfile.ZipFile(jar) as archive:
            for entry in archive.namelist():
                if entry.endswith(".class") and "$" not in entry:
                    names.add(entry[: -len(".class")].replace("/", "."))
    return names


def main_classes(libs: Path) -> dict[str, str]:
    """Launcher -> the main class it runs in this release (first candidate of :data:`TOOLS` present).

    Raises:
        ReleaseError: a required launcher's class is missing (not a Kafka server distribution).
    """
    classes = _class_index(libs)
    found = {tool: next(c for c in candidates if c in classes)
             for tool, candidates in TOOLS.items() if any(c in classes for c in candidates)}
    missing = [t for t in REQUIRED_TOOLS if t not in found]
    if missing:
        raise ReleaseError(f"{libs} holds no class for {missing}: not a Kafka server distribution")
    return found


_RUN_CLASS = """#!/bin/sh
# kafka-run-class.sh CLASS [ARGS]: runs CLASS of Apache Kafka {version} on this release's libs/
# (assembled from Maven Central by kafka-ops' sandbox; the variables are those of Kafka's own script).
# The class path is the jars' physical directory, the one the release's class data sharing archive
# (kafka.jsa beside it, written at assembly) was dumped with: the JVM maps those classes instead of loading
# and verifying them, or ignores the archive (silently) where it does not match.
base=$(CDPATH= cd -- "$(dirname -- "$0")/.." && pwd)
libs=$(CDPATH= cd -- "$base/libs" && pwd -P)
: "${{KAFKA_HEAP_OPTS:=-Xmx256m}}"
: "${{KAFKA_JVM_PERFORMANCE_OPTS:=-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true}}"
: "${{KAFKA_LOG4J_OPTS:={tools_log}}}"
cds=""
if [ -f "$libs/../{archive}" ]; then
  cds="-XX:SharedArchiveFile=$libs/../{archive} -Xlog:cds=off -Xlog:cds+dynamic=off"
fi
if [ -n "$JAVA_HOME" ]; then java="$JAVA_HOME/bin/java"; else java=java; fi
exec "$java" $KAFKA_HEAP_OPTS $KAFKA_JVM_PERFORMANCE_OPTS $cds $KAFKA_LOG4J_OPTS $KAFKA_OPTS -cp "$libs/*" "$@"
"""

_SERVER_START = """#!/bin/sh
# kafka-server-start.sh server.properties: Apache Kafka {version}'s broker or controller (process.roles)
base=$(CDPATH= cd -- "$(dirname -- "$0")/.." && pwd)
if [ $# -lt 1 ]; then echo "USAGE: $0 server.properties [--override property=value]*" >&2; exit 1; fi
export KAFKA_LOG4J_OPTS="${{KAFKA_LOG4J_OPTS:-{server_log}}}"
export KAFKA_HEAP_OPTS="${{KAFKA_HEAP_OPTS:--Xmx1G -Xms1G}}"
exec "$base/bin/kafka-run-class.sh" kafka.Kafka "$@"
"""

_TOOL = """#!/bin/sh
# {name}: Apache Kafka {version}'s {main_class}
exec "$(dirname -- "$0")/kafka-run-class.sh" {main_class} "$@"
"""

_LOG4J1_SERVER = """# Apache Kafka's server log (Log4j 1 API through reload4j): to standard output, which kafka-service
# appends to the host's logs/server.log. Levels as in Kafka's own config/log4j.properties.
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.org.apache.zookeeper=INFO
log4j.logger.kafka=INFO
log4j.logger.org.apache.kafka=INFO
log4j.logger.kafka.request.logger=WARN
log4j.logger.kafka.network.RequestChannel$=WARN
log4j.logger.kafka.controller=INFO
log4j.logger.kafka.log.LogCleaner=INFO
log4j.logger.state.change.logger=INFO
log4j.logger.kafka.authorizer.logger=INFO
"""

_LOG4J1_TOOLS = """# Apache Kafka's command line tools: warnings and errors to standard error.
log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.appender.stderr.Target=System.err
"""

_LOG4J2_SERVER = """# Apache Kafka's server log (Log4j 2, KIP-653): to standard output, which kafka-service appends to
# the host's logs/server.log. Levels as in Kafka's own config/log4j2.yaml.
status = warn
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.requestchannel.name = kafka.network.RequestChannel$
logger.requestchannel.level = WARN
"""

_LOG4J2_TOOLS = """# Apache Kafka's command line tools: warnings and errors to standard error.
status = warn
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stderr.ref = STDERR
"""


def _write_executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)


def write_launchers(root: Path, release: Release, tools: dict[str, str]) -> None:
    """Write ``bin/`` and ``config/`` of the release at ``root`` (its ``libs/`` assembled)."""
    bin_dir, config = root / "bin", root / "config"
    for path in (bin_dir, config):
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
    if release.log4j2:
        (config / "log4j2.properties").write_text(_LOG4J2_SERVER)
        (config / "tools-log4j2.properties").write_text(_LOG4J2_TOOLS)
        server_log = '-Dlog4j2.configurationFile=$base/config/log4j2.properties'
        tools_log = '-Dlog4j2.configurationFile=$base/config/tools-log4j2.properties'
    else:
        (config / "log4j.properties").write_text(_LOG4J1_SERVER)
        (config / "tools-log4j.properties").write_text(_LOG4J1_TOOLS)
        server_log = '-Dlog4j.configuration=file:$base/config/log4j.properties'
        tools_log = '-Dlog4j.configuration=file:$base/config/tools-log4j.properties'
    _write_executable(bin_dir / "kafka-run-class.sh",
                      _RUN_CLASS.format(version=release.version, tools_log=tools_log, archive=CLASS_ARCHIVE))
    for name, main_class in tools.items():
        if name == "kafka-server-start.sh":
            text = _SERVER_START.format(version=release.version, server_log=server_log)
        else:
            text = _TOOL.format(name=name, version=release.version, main_class=main_class)
        _write_executable(bin_dir / name, text)


def assemble(version: str, cache_dir: Path | None = None, mvn: str = "mvn", say=print) -> Path:
    """Assemble release ``version`` into ``.cache/kafka/<version>`` unless it is complete; returns the directory.

    Runs Maven (``mvn`` on PATH; its local repository ``~/.m2`` keeps the downloads, so a second assembly
    downloads nothing) in a temporary directory holding a generated pom.

    Raises:
        ReleaseError: not a pinned release, Maven missing or failing (its output's tail in the message).
    """
    release = RELEASES.get(version)
    if release is None:
        raise ReleaseError(f"Kafka {version} is not a release the sandbox pins ({', '.join(RELEASES)})")
    root = release_root(version, cache_dir)
    if is_assembled(version, cache_dir):
        return root
    if shutil.which(mvn) is None:
        raise ReleaseError("Maven (`mvn`) is needed to assemble Kafka from Maven Central: apt-get install maven")
    began = time.monotonic()
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix=f"kafka-{version}-pom-") as tmp:
        (Path(tmp) / "pom.xml").write_text(_pom(release))
        result = subprocess.run(
            [mvn, "-B", "-q", "--strict-checksums", COPY_DEPENDENCIES, f"-DoutputDirectory={root / 'libs'}",
             "-DincludeScope=runtime"],
            cwd=tmp, capture_output=True, text=True)
    if result.returncode != 0:
        tail = (result.stdout + result.stderr).strip().splitlines()[-15:]
        raise ReleaseError(f"Maven could not assemble Kafka {version} (exit {result.returncode}):\n" + "\n".join(tail))
    tools = main_classes(root / "libs")
    write_launchers(root, release, tools)
    archived = train_class_archive(root)
    jars = sorted(p.name for p in (root / "libs").glob("*.jar"))
    (root / MANIFEST).write_text(json.dumps({"version": version, "jars": jars, "tools": tools,
                                             "class_archive": CLASS_ARCHIVE if archived else None,
                                             "class_archive_from": ARCHIVE_TRAINING}, indent=2) + "\n")
    say(f"Kafka {version}: {len(jars)} jars from Maven Central, {len(tools)} launchers, "
        f"{'a' if archived else 'no'} class data sharing archive in {time.monotonic() - began:.1f} s -> {root}")
    return root


def _java() -> str:
    """The ``java`` the launchers run (``$JAVA_HOME/bin/java``, else the one on ``PATH``)."""
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else "java"


def _run_until_started(command: list[str], env: dict[str, str], log: Path, marker: str, timeout_s: float) -> bool:
    """Run ``command`` until its output (``log``) holds ``marker``, then stop it (:func:`_stop`); True when the marker
    came within ``timeout_s``, False when the process exited first or the time ran out."""
    with open(log, "wb") as out:
        node = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        return _ready_while_running(node, lambda: marker in log.read_text(errors="replace"), timeout_s)
    finally:
        _stop(node, timeout_s)


def _ready_while_running(process: subprocess.Popen, ready: Callable[[], bool], timeout_s: float) -> bool:
    """Wait until ``ready()`` holds while ``process`` runs (``procs.wait_for``); False when it exited first or
    ``timeout_s`` passed."""
    def look() -> bool:
        if ready():
            return True
        if process.poll() is not None:
            raise procs.Abort(f"exited with {process.returncode}")
        return False

    try:
        procs.wait_for(look, timeout_s, "a training run", poll_s=0.2)
    except (procs.Timeout, procs.Abort):
        return False
    return True


def _stop(process: subprocess.Popen, timeout_s: float) -> None:
    """SIGTERM (a Kafka node's or ZooKeeper's shutdown hook), SIGKILL after ``timeout_s`` (``procs.stop_pids``);
    reaps it."""
    procs.stop_pids([process.pid], timeout_s)
    process.wait()


def _kraft_class_list(root: Path, work: Path, env: dict[str, str], timeout_s: float) -> Path | None:
    """The classes one KRaft node of the release (``process.roles=broker,controller``, storage formatted by its
    ``kafka-storage``, loopback ports) loads until Kafka says it started (``-XX:DumpLoadedClassList``); None when it
    did not start."""
    plain, controller = procs.free_port("127.0.0.1"), procs.free_port("127.0.0.1")
    props = work / "kraft.properties"
    props.write_text("\n".join([
        "process.roles=broker,controller", "node.id=1", f"controller.quorum.voters=1@127.0.0.1:{controller}",
        f"listeners=PLAINTEXT://127.0.0.1:{plain},CONTROLLER://127.0.0.1:{controller}",
        "controller.listener.names=CONTROLLER",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        f"log.dirs={work / 'kraft-data'}", "offsets.topic.replication.factor=1",
        "transaction.state.log.replication.factor=1", ""]))
    tool = root / "bin" / "kafka-storage.sh"
    try:
        cluster_id = subprocess.run([str(tool), "random-uuid"], capture_output=True, text=True, env=env,
                                    timeout=timeout_s, check=True).stdout.strip().splitlines()[-1]
        subprocess.run([str(tool), "format", "-t", cluster_id, "-c", str(props)], capture_output=True, text=True,
                       env=env, timeout=timeout_s, check=True)
    except (subprocess.SubprocessError, IndexError):
        return None
    listed = work / "kraft.classlist"
    trained = {**env, "KAFKA_JVM_PERFORMANCE_OPTS": f"{TRAINING_JVM_OPTS} -XX:DumpLoadedClassList={listed}"}
    started = _run_until_started([str(root / "bin" / "kafka-server-start.sh"), str(props)], trained,
                                 work / "kraft.log", "Kafka Server started", timeout_s)
    return listed if started and listed.is_file() else None


def _zookeeper_class_list(root: Path, work: Path, env: dict[str, str], timeout_s: float) -> Path | None:
    """The classes one ZooKeeper-mode broker of the release loads until it says it started, against the ZooKeeper
    server the release's jars carry (``QuorumPeerMain``, standalone on a loopback port); None when either did not
    start."""
    port = procs.free_port("127.0.0.1")
    config = work / "zookeeper.cfg"
    config.write_text(f"dataDir={work / 'zookeeper-data'}\nclientPort={port}\nclientPortAddress=127.0.0.1\n"
                      "admin.enableServer=false\n")
    with open(work / "zookeeper.log", "wb") as out:
        zookeeper = subprocess.Popen([str(root / "bin" / "kafka-run-class.sh"),
                                      "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(config)],
                                     stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        if not _ready_while_running(zookeeper, lambda: procs.listening("127.0.0.1", port), timeout_s):
            return None
        props, listener = work / "zookeeper-broker.properties", procs.free_port("127.0.0.1")
        props.write_text("\n".join([
            "broker.id=0", f"listeners=PLAINTEXT://127.0.0.1:{listener}", f"zookeeper.connect=127.0.0.1:{port}",
            f"log.dirs={work / 'zookeeper-broker-data'}", "offsets.topic.replication.factor=1",
            "transaction.state.log.replication.factor=1", ""]))
        listed = work / "zookeeper.classlist"
        trained = {**env, "KAFKA_JVM_PERFORMANCE_OPTS": f"{TRAINING_JVM_OPTS} -XX:DumpLoadedClassList={listed}"}
        started = _run_until_started([str(root / "bin" / "kafka-server-start.sh"), str(props)], trained,
                                     work / "zookeeper-broker.log", "started (kafka.server.KafkaServer)", timeout_s)
        return listed if started and listed.is_file() else None
    finally:
        _stop(zookeeper, timeout_s)


def merge_class_lists(lists: list[Path], merged: Path) -> int:
    """Write the union of class lists (``-XX:DumpLoadedClassList`` files) to ``merged``: each class once, in the
    order first seen, then each ``@`` line (lambda proxies, lambda form invokers) once; returns the classes'
    count."""
    classes: dict[str, None] = {}
    at_lines: dict[str, None] = {}
    for path in lists:
        for line in path.read_text(errors="replace").splitlines():
            if not line or line.startswith("#"):
                continue
            (at_lines if line.startswith("@") else classes).setdefault(line, None)
    merged.write_text("\n".join([*classes, *at_lines]) + "\n")
    return len(classes)


def train_class_archive(root: Path, timeout_s: float = TRAINING_TIMEOUT_S) -> bool:
    """Dump the release's class data sharing archive (``kafka.jsa``, a static AppCDS archive, JEP 310): the classes
    one KRaft node of it loads until Kafka says it started, and, for a release with ZooKeeper mode (3.x), those of a
    ZooKeeper-mode broker (against the ZooKeeper server in its jars), merged, dumped by ``java -Xshare:dump`` on the
    jars' physical path (the class path the launchers give: ``kafka-run-class.sh``). A JVM started from the archive
    maps those classes instead of loading and verifying them. Measured on 3.6.2 (3 starts each, alternated, an idle
    machine): a ZooKeeper-mode broker's start took 0.90-0.96 CPU s with it, 1.05-1.14 with the dynamic archive of a
    KRaft node's classes used before (JEP 350: 1,241 of its 5,651 classes were not in it) and 1.51-1.58 with none; a
    KRaft node 0.93-1.04 against 0.95-1.13. The archive is checked by a JVM that must use it (``-Xshare:on``).
    Returns whether it was written (a release works without one)."""
    archive = root / CLASS_ARCHIVE
    archive.unlink(missing_ok=True)
    libs = (root / "libs").resolve()
    env = {**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m"}
    env.pop("KAFKA_JVM_PERFORMANCE_OPTS", None)
    with tempfile.TemporaryDirectory(prefix="kafka-cds-") as tmp:
        work = Path(tmp)
        lists = [listed for listed in (_kraft_class_list(root, work, env, timeout_s),
                                       _zookeeper_class_list(root, work, env, timeout_s) if _has_zookeeper(libs)
                                       else None) if listed is not None]
        if not lists:
            return False
        merged = work / "merged.classlist"
        merge_class_lists(lists, merged)
        java = _java()
        try:
            subprocess.run([java, "-Xshare:dump", f"-XX:SharedClassListFile={merged}",
                            f"-XX:SharedArchiveFile={archive}", *TRAINING_JVM_OPTS.split(), "-Xmx256m",
                            "-cp", f"{libs}/*"], capture_output=True, text=True, timeout=timeout_s, check=True)
            subprocess.run([java, "-Xshare:on", f"-XX:SharedArchiveFile={archive}", *TRAINING_JVM_OPTS.split(),
                            "-Xmx256m", "-cp", f"{libs}/*", "-version"], capture_output=True, text=True,
                           timeout=timeout_s, check=True)
        except (subprocess.SubprocessError, OSError):
            archive.unlink(missing_ok=True)
            return False
    return archive.is_file() and archive.stat().st_size > 0


def _has_zookeeper(libs: Path) -> bool:
    """Whether the release runs in ZooKeeper mode (Kafka 3.x: the ZooKeeper server and ``kafka.zk`` in its
    jars; 4.0 removed ZooKeeper mode, KIP-833)."""
    classes = _class_index(libs)
    return "org.apache.zookeeper.server.quorum.QuorumPeerMain" in classes and "kafka.zk.KafkaZkClient" in classes


def refresh_class_archive(version: str, cache_dir: Path | None = None, say=print) -> bool:
    """Train the class archive of an assembled release again when its manifest says it was made otherwise than
    :data:`ARCHIVE_TRAINING` (an assembly by an older kafka-ops); returns whether it trained. Nothing is
    downloaded."""
    root = release_root(version, cache_dir)
    meta = json.loads((root / MANIFEST).read_text())
    if meta.get("class_archive_from") == ARCHIVE_TRAINING:
        return False
    began = time.monotonic()
    archived = train_class_archive(root)
    meta.update({"class_archive": CLASS_ARCHIVE if archived else None, "class_archive_from": ARCHIVE_TRAINING})
    (root / MANIFEST).write_text(json.dumps(meta, indent=2) + "\n")
    say(f"Kafka {version}: {'a' if archived else 'no'} class data sharing archive trained again "
        f"in {time.monotonic() - began:.1f} s")
    return True


def main(argv: list[str] | None = None) -> int:
    """``python -m sandbox.kafka_release install [VERSION ...]`` / ``list``; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m sandbox.kafka_release", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    install = sub.add_parser("install", help="assemble the pinned releases that are missing")
    install.add_argument("versions", nargs="*", help=f"default: every pinned release ({', '.join(RELEASES)})")
    sub.add_parser("list", help="print each pinned release and whether it is assembled")
    args = parser.parse_args(argv)
    if args.command == "list":
        for version in RELEASES:
            print(f"{version}\t{'assembled' if is_assembled(version) else 'missing'}\t{release_root(version)}")
        return 0
    try:
        for version in args.versions or list(RELEASES):
            if is_assembled(version):
                refresh_class_archive(version)
                continue
            assemble(version)
    except ReleaseError as exc:
        print(f"kafka_release: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
