"""Behaviour 13 of issue 2: what a broker advertises and accepts depends on the Kafka version installed
on its host (the ``kafka`` symlink) and on ``server.properties``.

Compared: the shared sandbox (installed 3.6.2, read only) and a 3.8.0 sandbox of this module, on which
one broker is restarted with an inter.broker.protocol.version newer than its software (it must refuse).
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterator

import javaproperties
import pytest
from broker_support import (
    SLOT_VERSIONS,
    kadmin,
    module_sandbox,
    observe,
    raw_request,
    service,
    start_broker,
    stop_broker,
)
from confluent_kafka.admin import ConfigResource, ResourceType
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import ConfigResourceType
from observers import admin, registration

from sandbox.testing import RunningSandbox

pytestmark = pytest.mark.sandbox

API_VERSIONS, LIST_OFFSETS, PRODUCE, FETCH = 18, 2, 0, 1
OFFSET_COMMIT, OFFSET_FETCH, LIST_GROUPS = 8, 9, 16


@pytest.fixture(scope="module")
def kafka38(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningSandbox]:
    with module_sandbox(request, tmp_path_factory, SLOT_VERSIONS, brokers=3, racks=3, kafka_version="3.8.0") as sb:
        yield sb


def api_versions_v0(host: str, port: int) -> dict[int, tuple[int, int]]:
    """A raw ApiVersions v0 request (empty body) and its decoded answer: {api_key: (min, max)}."""
    payload = raw_request(host, port, API_VERSIONS, 0, b"")
    error, count = struct.unpack_from(">hi", payload, 0)
    assert error == 0
    table = {}
    for i in range(count):
        key, low, high = struct.unpack_from(">hhh", payload, 6 + 6 * i)
        table[key] = (low, high)
    assert 6 + 6 * count == len(payload)
    return table


def kafka_python_api_versions(sb: RunningSandbox) -> dict[int, tuple[int, int]]:
    client = kadmin(sb)
    try:
        return {int(key): tuple(span) for key, span in client.api_versions().items()}
    finally:
        client.close()


def remote_properties(sb: RunningSandbox, broker: int) -> dict[str, str]:
    code, out, err = sb.ssh(broker, 'cat "$KAFKA_HOST_DIR/server.properties"')
    assert code == 0, err
    return dict(javaproperties.load(io.StringIO(out)))


def installed(sb: RunningSandbox, broker: int) -> str:
    code, out, err = sb.ssh(broker, 'readlink "$KAFKA_HOST_DIR/kafka"')
    assert code == 0, err
    return out.strip()


def test_api_versions_follow_the_installed_version(sandbox: RunningSandbox, kafka38: RunningSandbox) -> None:
    tables = {}
    for sb, version in ((sandbox, "3.6.2"), (kafka38, "3.8.0")):
        for broker in sb.broker_ids[: sb.active_count]:
            assert installed(sb, broker) == f"kafka_2.13-{version}"
            entry = sb.broker(broker)
            table = api_versions_v0(entry["host"], entry["port"])
            tables.setdefault(version, table)
            assert table == tables[version], f"broker {broker} of the {version} sandbox advertises another table"
        # kafka-python's negotiation (it asks with ApiVersions v4, gets UNSUPPORTED_VERSION and the table)
        assert kafka_python_api_versions(sb) == tables[version]
    old, new = tables["3.6.2"], tables["3.8.0"]
    # Kafka 3.8 added ListOffsets v9 (KIP-1005), 3.7 Produce v10 / Fetch v16 (KIP-951), 3.8 Produce v11
    # (KIP-890), 3.7 OffsetCommit v9 / OffsetFetch v9 and 3.8 ListGroups v5 (KIP-848); everything else the
    # sandbox serves is the same
    assert old[LIST_OFFSETS] == (0, 8) and new[LIST_OFFSETS] == (0, 9)
    assert old[PRODUCE] == (3, 9) and new[PRODUCE] == (3, 11)
    assert old[FETCH] == (4, 15) and new[FETCH] == (4, 16)
    assert (old[OFFSET_COMMIT], old[OFFSET_FETCH], old[LIST_GROUPS]) == ((2, 8), (1, 8), (0, 4))
    assert (new[OFFSET_COMMIT], new[OFFSET_FETCH], new[LIST_GROUPS]) == ((2, 9), (1, 9), (0, 5))
    changed = (LIST_OFFSETS, PRODUCE, FETCH, OFFSET_COMMIT, OFFSET_FETCH, LIST_GROUPS)
    assert {k: v for k, v in old.items() if k not in changed} == {k: v for k, v in new.items() if k not in changed}
    assert old[API_VERSIONS] == (0, 3)


@pytest.mark.parametrize("which", ["shared-3.6.2", "module-3.8.0"])
def test_describe_configs_shows_ibp_and_message_format_from_server_properties(
    which: str, request: pytest.FixtureRequest
) -> None:
    sb: RunningSandbox = request.getfixturevalue("sandbox" if which.startswith("shared") else "kafka38")
    major_minor = which.rsplit("-", 1)[1].rsplit(".", 1)[0]
    keys = ("inter.broker.protocol.version", "log.message.format.version")
    confluent = admin(sb.bootstrap_servers)
    client = kadmin(sb)
    try:
        for broker in sb.broker_ids[: sb.active_count]:
            props = remote_properties(sb, broker)
            assert [props[k] for k in keys] == [major_minor, major_minor]
            (future,) = confluent.describe_configs([ConfigResource(ResourceType.BROKER, str(broker))]).values()
            described = future.result()
            python = client.describe_configs([KConfigResource(ConfigResourceType.BROKER, str(broker))],
                                             config_filter="ALL")["broker"][str(broker)]
            for key in keys:
                assert described[key].value == props[key] and described[key].is_read_only
                assert python[key]["value"] == props[key]
                assert python[key]["config_source"] == "STATIC_BROKER_CONFIG"
    finally:
        client.close()


@pytest.mark.destructive
def test_broker_refuses_an_ibp_newer_than_its_software(kafka38: RunningSandbox) -> None:
    sb = kafka38
    view = observe(admin(sb.bootstrap_servers))
    broker = next(b for b in sorted(view.brokers) if b != view.controller)
    edit = 'sed -i "s/^inter.broker.protocol.version=.*/inter.broker.protocol.version={}/" ' \
           '"$KAFKA_HOST_DIR/server.properties"'
    stop_broker(sb, broker)
    try:
        code, _, err = sb.ssh(broker, edit.format("3.9"))
        assert code == 0, err
        assert remote_properties(sb, broker)["inter.broker.protocol.version"] == "3.9"
        code, out, err = service(sb, broker, "start")
        reason = "inter.broker.protocol.version 3.9 is newer than the installed Kafka 3.8.0"
        assert code == 1 and reason in err, (code, out, err)
        code, out, _ = service(sb, broker, "status")  # systemctl is-active style
        assert code == 3 and out.startswith("failed: ") and reason in out, (code, out)
        code, out, _ = sb.ssh(broker, 'cat "$KAFKA_HOST_DIR/logs/server.log"')
        fatal = [line for line in out.splitlines() if "Fatal error during KafkaServer startup" in line]
        assert fatal and reason in fatal[-1], fatal
        with sb.zk() as zk:
            assert registration(zk, broker) is None
        assert broker not in observe(admin(sb.bootstrap_servers)).brokers
    finally:
        sb.ssh(broker, edit.format("3.8"))
    # the operator fixes server.properties: the broker starts and rejoins
    start_broker(sb, broker)
    code, out, _ = service(sb, broker, "status")
    assert (code, out.strip()) == (0, "active")
    sb.wait_healthy(timeout_s=30)
