"""What a running sandbox tells its users: ``DIR/env.json`` (tests, tools) and ``DIR/airflow.env``
(Airflow connections, as ``export AIRFLOW_CONN_<ID>='<json>'`` lines in Airflow's JSON format).

Connections (ids in :data:`KAFKA_CONN_ID`, :data:`SSH_CONN_ID`, :data:`BURROW_CONN_ID`):

- ``kafka_sandbox`` (conn type ``kafka``): host = the bootstrap servers (none when longer than Airflow keeps,
  :data:`AIRFLOW_HOST_MAX`), extra = librdkafka settings (``bootstrap.servers``) plus the cluster profile
  (docs/architecture.md). Paths that differ per broker host carry a ``{broker_id}`` placeholder
  (``server_properties``, ``kafka_home``): profile code fills them with ``str.format(broker_id=...)``, a no-op for
  the fixed paths of a real fleet.
- ``sandbox_ssh`` (conn type ``ssh``): login, port 2222, extra ``key_file`` and ``host_key`` (the
  broker hosts share one host key, so host key checking stays on whichever broker is the remote
  host; ``known_hosts`` names the file with every host for clients that read one).
- ``sandbox_burrow`` (conn type ``http``): Burrow's HTTP API.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from sandbox import settings, sshd
from sandbox.layout import Workdir
from sandbox.state import SandboxState

KAFKA_CONN_ID = "kafka_sandbox"
SSH_CONN_ID = "sandbox_ssh"
BURROW_CONN_ID = "sandbox_burrow"
SPARK_CONN_ID = "spark_default"
#: Characters Airflow's connection table keeps of a connection's ``host`` (``Connection.host``: a VARCHAR(500);
#: PostgreSQL refuses a longer value, the REST API answers 422, SQLite does not check). The bootstrap servers of a
#: sandbox of 30 brokers are longer: they are then in the extra's ``bootstrap.servers`` alone (a TEXT column), which
#: the cluster profile reads as well.
AIRFLOW_HOST_MAX = 500
SSH_CMD_TIMEOUT_S = int(settings.STOP_TIMEOUT_S + settings.START_WAIT_S + 15)  # kafka-service restart, with grace


def env_document(workdir: Workdir, info: SandboxState) -> dict[str, Any]:
    """The ``env.json`` document: exactly the keys of the sandbox issue (spare brokers included); a KRaft
    sandbox adds ``mode``, ``controllers`` (id, host, ssh_port) and has no ``zookeeper_connect`` (its ZooKeeper
    is Burrow's only)."""
    doc = {
        "bootstrap_servers": info.bootstrap_servers,
        "zookeeper_connect": info.zookeeper_connect,
        "burrow_url": info.burrow_url,
        "burrow_cluster": settings.BURROW_CLUSTER,
        "consumer_groups": list(settings.WORKLOAD_GROUPS),
        "kafka_version": info.kafka_version,
        "brokers": [
            {
                "id": s.id,
                "host": s.host,
                "port": settings.BROKER_PORT,
                "ssh_port": settings.SSH_PORT,
                "rack": s.rack,
            }
            for s in info.broker_specs
        ],
        "ssh": {
            "user": sshd.user(),
            "key_file": str(workdir.client_key),
            "known_hosts": str(workdir.known_hosts),
        },
    }
    listener = info.client_listener
    if listener.protocol:  # `up --client-sasl` / `--client-tls`: what a client of the connection's listener needs
        doc["client_listener"] = {"bootstrap_servers": info.client_bootstrap_servers,
                                  "security_protocol": listener.protocol}
        if info.sasl_password:
            doc["client_listener"].update(mechanism=info.sasl_mechanism, user=settings.SASL_USER,
                                          password=info.sasl_password)
        files = {"ssl.ca.location": "ca_file", "ssl.certificate.location": "cert_file", "ssl.key.location": "key_file"}
        doc["client_listener"].update({files[k]: v for k, v in info.client_ssl_config.items()})
    if info.controller_hosts and not info.kraft:  # hosts a migration provisions (not started)
        doc["controllers"] = [{"id": i, "host": h, "ssh_port": settings.SSH_PORT, "provisioned": False}
                              for i, h in sorted(info.controllers.items())]
    if info.kraft:
        del doc["zookeeper_connect"]
        doc["mode"] = "kraft"
        doc["cluster_id"] = info.cluster_id
        doc["controllers"] = [{"id": i, "host": h, "ssh_port": settings.SSH_PORT, "voter": i in info.voters}
                              for i, h in sorted(info.controllers.items())]
    return doc


def connections(workdir: Workdir, info: SandboxState) -> dict[str, dict[str, Any]]:
    """``{conn_id: Airflow connection as a JSON-format dict}`` for this sandbox."""
    host_pattern = str(workdir.hosts / "{broker_id}")
    kafka = {
        "conn_type": "kafka",
        "host": info.client_bootstrap_servers if len(info.client_bootstrap_servers) <= AIRFLOW_HOST_MAX else None,
        "extra": {
            "bootstrap.servers": info.client_bootstrap_servers,
            "ssh_conn_id": SSH_CONN_ID,
            "zookeeper": info.zookeeper_connect,
            "burrow_conn_id": BURROW_CONN_ID,
            "burrow_cluster": settings.BURROW_CLUSTER,
            "consumer_groups": list(settings.WORKLOAD_GROUPS),
            "service_stop": "kafka-service stop",
            "service_start": "kafka-service start",
            "service_status": "kafka-service status",
            "server_properties": f"{host_pattern}/server.properties",
            "kafka_home": f"{host_pattern}/kafka",
            # what a run may choose by name for its pre-stop / pre-start steps (no ad-hoc shell text)
            "commands": {
                "show-broker": "echo \"broker $KAFKA_BROKER_ID on $(hostname): $(kafka-service status)\"",
            },
            # every host, spares included: a scale-out starts brokers that are not registered yet
            "broker_hosts": {str(s.id): s.host for s in info.broker_specs},
        },
    }
    if info.kraft:  # a KRaft cluster's profile has no ZooKeeper; its controllers run on hosts of their own
        del kafka["extra"]["zookeeper"]
    listener = info.client_listener
    if listener.protocol:  # `up --client-sasl` / `--client-tls`: the connection uses the client listener
        kafka["extra"]["security.protocol"] = listener.protocol
        if info.sasl_password:  # the credentials in the connection's login and password
            kafka.update(login=settings.SASL_USER, password=info.sasl_password)
            kafka["extra"]["sasl.mechanism"] = info.sasl_mechanism
        # the sandbox's own CA (the brokers' addresses are in its certificate); with --client-auth the client's
        # certificate and key (paths: the key file is readable by its owner only, no password in the connection)
        kafka["extra"].update(info.client_ssl_config)
        if info.kraft:  # the controllers' CONTROLLER listener (combined nodes' too) stays PLAINTEXT
            kafka["extra"]["controller_client"] = {"security.protocol": "PLAINTEXT"}
    if info.controller_hosts:
        kafka["extra"]["controller_hosts"] = {str(i): h for i, h in sorted(info.controllers.items())}
    if info.controller_hosts and not info.kraft:
        # what a ZooKeeper-to-KRaft migration writes into each controller's server.properties besides its own keys
        kafka["extra"]["controller_properties"] = {
            "log.dirs": f"{host_pattern}/data",
            "listeners": f"CONTROLLER://{{host}}:{settings.CONTROLLER_PORT}",
            **settings.CONTROLLER_CONFIG,
        }
    first = info.broker_specs[0]
    ssh = {
        "conn_type": "ssh",
        "host": first.host,
        "port": settings.SSH_PORT,
        "login": sshd.user(),
        "extra": {
            "key_file": str(workdir.client_key),
            "host_key": sshd.host_public_key(workdir),
            "no_host_key_check": False,
            "allow_host_key_change": False,
            "look_for_keys": False,
            "known_hosts": str(workdir.known_hosts),
            "conn_timeout": 10,
            "cmd_timeout": SSH_CMD_TIMEOUT_S,
        },
    }
    burrow = {"conn_type": "http", "host": "127.0.0.1", "port": info.burrow_port, "schema": "http"}
    # the reassignment planner's spark-submit runs in the worker's own JVM here (a Spark master elsewhere)
    spark = {"conn_type": "spark", "host": "local[*]"}
    return {KAFKA_CONN_ID: kafka, SSH_CONN_ID: ssh, BURROW_CONN_ID: burrow, SPARK_CONN_ID: spark}


def render_airflow_env(workdir: Workdir, info: SandboxState) -> str:
    """The ``airflow.env`` text: one ``export AIRFLOW_CONN_<ID>='<json>'`` line per connection."""
    lines = [f"# Airflow connections of the sandbox in {workdir.root} (source this file)"]
    for conn_id, conn in connections(workdir, info).items():
        value = json.dumps(conn, separators=(",", ":"))
        lines.append(f"export AIRFLOW_CONN_{conn_id.upper()}={shlex.quote(value)}")
    return "\n".join(lines) + "\n"


def write(workdir: Workdir, info: SandboxState) -> None:
    """Write ``env.json`` and ``airflow.env`` (atomically: readers never see half a file)."""
    for path, text in [
        (workdir.env_json, json.dumps(env_document(workdir, info), indent=2) + "\n"),
        (workdir.airflow_env, render_airflow_env(workdir, info)),
    ]:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(path)
