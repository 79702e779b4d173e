"""``python -m sandbox up|down|status|unpack|lag|crash-broker|replace-metadata-dir|freeze|thaw|traffic``: the sandbox
cluster's command line.

Every subcommand takes ``--workdir`` (default ``.sandbox``; env ``SANDBOX_WORKDIR_DEFAULT`` overrides the
default). Errors the user can fix print one line ``sandbox: error: ...`` and exit 1.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import time

from sandbox import cluster, faults, hosts, kafka_release, settings, state
from sandbox import status as status_mod
from sandbox.layout import Workdir

DEFAULT_WORKDIR = ".sandbox"
ADDRESS_BASE_ENV = (
    "SANDBOX_ADDRESS_BASE"  # default of --address-base (tests give destructive sandboxes their own)
)


def key_value(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` as a pair (argparse type); the key must look like a Kafka setting."""
    key, sep, value = text.partition("=")
    if not sep or not re.fullmatch(r"[a-z][a-z0-9._-]*", key.strip()):
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE with a Kafka setting as KEY, got {text!r}")
    return key.strip(), value.strip()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sandbox", description="The local Kafka sandbox cluster.")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--workdir",
        default=os.environ.get("SANDBOX_WORKDIR_DEFAULT", DEFAULT_WORKDIR),
        help="the sandbox's work directory (default: %(default)s)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    up = sub.add_parser("up", parents=[common], help="start the sandbox; returns when it is healthy")
    up.add_argument(
        "--brokers", type=int, default=3, help="brokers started (ids 0..N-1; default %(default)s)"
    )
    up.add_argument(
        "--spare-brokers",
        type=int,
        default=0,
        help="spare broker hosts prepared with sshd but no broker (ids N..N+K-1; default %(default)s)",
    )
    up.add_argument(
        "--racks", type=int, default=3, help="racks; broker id is in rack-(id %% R) (default %(default)s)"
    )
    up.add_argument(
        "--kafka-version",
        default=None,
        help=f"the Apache Kafka release installed on every host, one of {', '.join(kafka_release.RELEASES)} "
        f"(default {settings.DEFAULT_KAFKA_VERSION}; {settings.DEFAULT_KRAFT_KAFKA_VERSION} with --mode kraft)",
    )
    up.add_argument(
        "--mode",
        choices=("zookeeper", "kraft"),
        default="zookeeper",
        help="zookeeper: brokers keep metadata in ZooKeeper (Kafka <= 3.9); kraft: dedicated controllers form "
        "a metadata quorum, no ZooKeeper for Kafka (every Kafka since 4.0) (default %(default)s)",
    )
    up.add_argument(
        "--controllers",
        type=int,
        default=3,
        help=f"KRaft controllers (node ids {settings.CONTROLLER_ID_BASE}..; --mode kraft only; default %(default)s)",
    )
    up.add_argument(
        "--combined",
        type=int,
        default=0,
        help="--mode kraft: the first N brokers are KRaft controllers too (process.roles=broker,controller, "
        "combined mode, as Kafka's quickstart config), forming the quorum; no dedicated controllers "
        "(--controllers is ignored) (default %(default)s)",
    )
    up.add_argument(
        "--quorum",
        choices=("static", "dynamic"),
        default="static",
        help="--mode kraft: static: the voters listed in every node's controller.quorum.voters (KIP-595); dynamic: "
        "controller.quorum.bootstrap.servers, the voter set in the metadata log, storage formatted with "
        "--initial-controllers (KIP-853, Kafka 3.9+, as Kafka 4's quickstart) (default %(default)s)",
    )
    up.add_argument(
        "--observer-controllers",
        type=int,
        default=0,
        help="--quorum dynamic: that many controllers more (node ids after the voters'), started but not added to "
        "the voter set: observers, as between a controller's start and kafka-metadata-quorum add-controller "
        "(KIP-853) (default %(default)s)",
    )
    up.add_argument(
        "--controller-hosts",
        type=int,
        default=0,
        help=f"--mode zookeeper: hosts for KRaft controllers (node ids {settings.CONTROLLER_ID_BASE}..) with the "
        "release installed and sshd running, not configured or started: what a ZooKeeper-to-KRaft migration "
        "provisions (default %(default)s)",
    )
    up.add_argument(
        "--address-base",
        default=os.environ.get(ADDRESS_BASE_ENV, settings.BROKER_HOST_BASE),
        help="address of broker 0; broker N gets the address + N "
        f"(default %(default)s; env {ADDRESS_BASE_ENV})",
    )
    up.add_argument(
        "--broker-config",
        type=key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting for every broker's server.properties, after the sandbox's own (repeatable), e.g. "
        "leader.imbalance.check.interval.seconds=5",
    )
    up.add_argument(
        "--client-sasl",
        action="store_true",
        help=f"every broker gets a second listener on port {settings.BROKER_CLIENT_PORT}, SASL_PLAINTEXT with "
        "SASL (--sasl-mechanism) and one user ({settings.SASL_USER}, a password made at up), and the "
        "Airflow connection uses it (login and password in the connection); the sandbox's own tools, Burrow and "
        "replication keep the PLAINTEXT listener",
    )
    up.add_argument(
        "--sasl-mechanism",
        choices=settings.SASL_MECHANISMS,
        default=settings.SASL_MECHANISM,
        help="--client-sasl's mechanism (default %(default)s): PLAIN keeps the password in the listener's JAAS "
        "config; SCRAM-SHA-256 or SCRAM-SHA-512 keep a salted credential in Kafka's own metadata, created at up "
        "through the PLAINTEXT listener (AlterUserScramCredentials) before anything uses the SASL listener",
    )
    up.add_argument(
        "--client-tls",
        action="store_true",
        help="the same second listener with TLS: SSL (with --client-sasl: SASL_SSL), the brokers' certificate from "
        "a CA the sandbox makes (DIR/tls/ca.pem, in the connection's ssl.ca.location)",
    )
    up.add_argument(
        "--client-auth",
        action="store_true",
        help="with --client-tls: the listener requires a client certificate of the sandbox's CA (mutual TLS; "
        "DIR/tls/client.pem and client.key, in the connection's ssl.certificate.location and ssl.key.location)",
    )
    up.add_argument(
        "--cluster-id",
        default="",
        metavar="ID",
        help="the cluster's id (22 characters of URL-safe base64) instead of a random one: ZooKeeper mode writes it "
        "to /cluster/id before the first broker starts (a legacy cluster's id may start with '-': give it as "
        "--cluster-id=-...), KRaft mode formats every node with it",
    )
    up.add_argument(
        "--timeout",
        type=float,
        default=settings.UP_TIMEOUT_S,
        help="seconds to wait for a healthy cluster (default %(default)s)",
    )

    down = sub.add_parser("down", parents=[common], help="stop everything the sandbox started")
    down.add_argument("--kill", action="store_true",
                      help="SIGKILL everything at once (a sandbox to throw away: no controlled shutdown)")
    sub.add_parser("status", parents=[common], help="print the sandbox's state as JSON")

    unpack = sub.add_parser(
        "unpack",
        parents=[common],
        help="unpack a Kafka release beside the running one on every host (what an upgrade's target needs; the "
        "kafka symlink is left for the upgrade to switch)",
    )
    unpack.add_argument("--version", required=True, help=f"one of {', '.join(kafka_release.RELEASES)}")

    lag = sub.add_parser(
        "lag",
        parents=[common],
        help="make a consumer group stop progressing for a while (it re-commits its old offsets)",
    )
    lag.add_argument("group", help=f"one of {', '.join(settings.WORKLOAD_GROUPS)}")
    lag.add_argument(
        "--stall-seconds", type=float, required=True, help="how long the group makes no progress, seconds"
    )

    crash = sub.add_parser("crash-broker", parents=[common],
                           help="SIGKILL a broker's (or KRaft controller's) JVM: no controlled shutdown")
    crash.add_argument("broker_id", type=int, metavar="ID")
    replace = sub.add_parser(
        "replace-metadata-dir", parents=[common],
        help="a dynamic quorum's voter gets a new disk: stop it, format its log dir again (a new directory id, "
        "--no-initial-controllers), start it; it comes back as an observer (KIP-853)")
    replace.add_argument("node_id", type=int, metavar="ID")
    for name, verb in (("freeze", "SIGSTOP (it holds its sockets and sessions but answers nothing)"),
                       ("thaw", "SIGCONT (resume what freeze stopped)")):
        fault = sub.add_parser(name, parents=[common], help=f"{verb}: a node id, zookeeper, burrow or workload")
        fault.add_argument("target", metavar="TARGET")

    traffic = sub.add_parser(
        "traffic",
        parents=[common],
        help="produce numbered messages (idempotent, acks=all) and read them back; print what was lost",
    )
    traffic.add_argument("--seconds", type=float, required=True, help="how long to produce, seconds")
    traffic.add_argument("--topic", default="traffic", help="topic (created with RF 3, min ISR 2 when missing)")
    traffic.add_argument("--partitions", type=int, default=3, help="partitions of a new topic (default %(default)s)")
    traffic.add_argument("--rate", type=float, default=2000.0,
                         help="messages per second, 0 for as fast as possible (default %(default)s)")
    traffic.add_argument("--group", default=None,
                         help="read as a member of this consumer group (subscribe, offsets committed to the "
                         "group coordinator; Burrow rates it) instead of assigning every partition")
    return parser


def run_traffic(workdir: Workdir, seconds: float, topic: str, partitions: int, rate: float,
                group: str | None = None) -> int:
    """The ``traffic`` subcommand: progress lines on stderr, the figures as JSON on stdout.
    Returns 0 when nothing acknowledged was lost, duplicated or reordered, else 2."""
    from sandbox import traffic

    info = state.load(workdir)
    began = time.monotonic()

    def progress(sent: int, acknowledged: int, read: int) -> None:
        print(f"[{time.monotonic() - began:5.1f} s] sent {sent}, acknowledged {acknowledged}, read {read}",
              file=sys.stderr)

    result = traffic.run(info.bootstrap_servers, seconds, topic, partitions=partitions,
                         rate_per_s=rate or None, group=group, progress=progress)
    print(json.dumps(result.to_dict(), indent=2))
    return 0 if result.ok else 2


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; returns the exit code (0 ok, 1 a problem the message explains)."""
    args = build_parser().parse_args(argv)
    # Probes meet servers that are starting or stopping: the clients' reconnect chatter is no news here.
    logging.getLogger("kazoo").setLevel(logging.ERROR)
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    workdir = Workdir.at(args.workdir)
    try:
        if args.command == "up":
            cluster.up(
                workdir,
                brokers=args.brokers,
                spares=args.spare_brokers,
                racks=args.racks,
                kafka_version=args.kafka_version or (
                    settings.DEFAULT_KRAFT_KAFKA_VERSION if args.mode == "kraft" else settings.DEFAULT_KAFKA_VERSION),
                address_base=args.address_base,
                timeout_s=args.timeout,
                mode=args.mode,
                controllers=args.controllers,
                controller_hosts=args.controller_hosts,
                combined=args.combined,
                quorum=args.quorum,
                observer_controllers=args.observer_controllers,
                broker_config=dict(args.broker_config),
                client_sasl=args.client_sasl,
                client_tls=args.client_tls,
                sasl_mechanism=args.sasl_mechanism,
                client_auth=args.client_auth,
                cluster_id=args.cluster_id,
            )
        elif args.command == "down":
            cluster.down(workdir, kill=args.kill)
        elif args.command == "status":
            print(status_mod.dumps(status_mod.report(workdir)))
        elif args.command == "unpack":
            for path in hosts.unpack_everywhere(workdir, args.version):
                print(path)
        elif args.command == "lag":
            faults.stall_group(workdir, args.group, args.stall_seconds)
        elif args.command == "crash-broker":
            faults.crash_broker(workdir, args.broker_id)
        elif args.command == "replace-metadata-dir":
            faults.replace_metadata_dir(workdir, args.node_id)
        elif args.command == "freeze":
            faults.freeze(workdir, args.target)
        elif args.command == "thaw":
            faults.thaw(workdir, args.target)
        elif args.command == "traffic":
            return run_traffic(workdir, args.seconds, args.topic, args.partitions, args.rate, args.group)
    except (cluster.SandboxError, state.NotASandbox, kafka_release.ReleaseError, FileNotFoundError) as exc:
        print(f"sandbox: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("sandbox: interrupted", file=sys.stderr)
        return 130
    return 0
