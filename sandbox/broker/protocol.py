"""Kafka wire protocol framing for the sandbox broker, on top of ``kio``'s generated schemas.

A request frame is ``int32 size`` + request header + body; the header's version follows the
request class (``__header_schema__``: v1 for non-flexible, v2 for flexible versions). Responses
are ``int32 size`` + response header (v0 or v1, again from the class; ApiVersions always v0) + body.

kio only carries Kafka 4.x schemas, so the one old version a real peer of ours sends that kio lacks,
ListOffsets v0 (Burrow 1.2.1 / sarama 1.22), is coded here from kio's primitive readers and
writers (Kafka's ``ListOffsetsRequest.json`` v0 layout).
"""

from __future__ import annotations

import dataclasses
import datetime
import io
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kio.index import load_payload_module, load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.serial import entity_reader, entity_writer
from kio.serial.readers import (
    read_int16,
    read_int32,
    read_int64,
    read_legacy_array_length,
    read_legacy_string,
)
from kio.serial.writers import (
    write_int16,
    write_int32,
    write_int64,
    write_legacy_array_length,
    write_legacy_string,
)
from kio.static.constants import EntityType

from sandbox.broker.config import parse_version

API_VERSIONS = 18
LIST_OFFSETS = 2
PRODUCE = 0
FETCH = 1

# api key -> (min, max) the sandbox serves for Kafka 3.6; `supported_apis` adjusts per version.
# Produce and Fetch start at v3 / v4: kio (Kafka 4.x schemas) has no older ones (KIP-896 removed them).
_BASE_APIS: dict[int, tuple[int, int]] = {
    0: (3, 9),  # Produce (RecordBatch v2 only)
    1: (4, 15),  # Fetch
    2: (0, 8),  # ListOffsets (v0 hand-coded, see module docstring)
    3: (0, 12),  # Metadata
    8: (2, 8),  # OffsetCommit (kio has no v0/v1, removed by KIP-896)
    9: (1, 8),  # OffsetFetch (kio has no v0)
    10: (0, 4),  # FindCoordinator (group keys; transaction keys refused)
    11: (0, 9),  # JoinGroup
    12: (0, 4),  # Heartbeat
    13: (0, 5),  # LeaveGroup
    14: (0, 5),  # SyncGroup
    15: (0, 5),  # DescribeGroups
    16: (0, 4),  # ListGroups
    18: (0, 3),  # ApiVersions
    19: (2, 7),  # CreateTopics (controller only, as in ZK mode)
    20: (1, 6),  # DeleteTopics (controller only)
    22: (0, 4),  # InitProducerId (idempotent producers; no transactions)
    23: (2, 4),  # OffsetForLeaderEpoch (KIP-101/KIP-320; kio has v2+, Kafka's v2 came in 2.1, v4 in 2.4)
    32: (1, 4),  # DescribeConfigs
    33: (0, 2),  # AlterConfigs
    35: (1, 4),  # DescribeLogDirs
    43: (0, 2),  # ElectLeaders
    44: (0, 1),  # IncrementalAlterConfigs
    45: (0, 0),  # AlterPartitionReassignments
    46: (0, 0),  # ListPartitionReassignments
    60: (0, 1),  # DescribeCluster (kafka-python 3.x needs v1's endpoint_type)
}


def supported_apis(kafka_version: str, kraft: bool = False) -> dict[int, tuple[int, int]]:
    """The ApiVersions table a broker of ``kafka_version`` advertises: ``{api_key: (min, max)}``.

    Follows Kafka's own history for the highest versions:

    - ListOffsets: v8 (KIP-405) arrived in 3.5, v9 (KIP-1005) in 3.8.
    - Produce: v9 (flexible, KIP-482) in 2.4, v10 (KIP-951) in 3.7, v11 (KIP-890) in 3.8.
    - Fetch: v12 (flexible, diverging epoch) in 2.7, v13 (topic ids, KIP-516) in 3.1, v14-v15
      (KIP-405, KIP-903) in 3.5, v16 (KIP-951) in 3.7.
    - CreateTopics v5 (KIP-525) and DeleteTopics v4 in 2.4, CreateTopics v7 / DeleteTopics v6 (topic
      ids) in 2.8; InitProducerId v3 (KIP-360) in 2.5, v4 in 2.7.

    - Group APIs (:mod:`sandbox.broker.groups`): FindCoordinator v3 (flexible) in 2.4, v4 (batched,
      KIP-699) in 3.0; JoinGroup v4 (KIP-394) in 2.2, v5 / SyncGroup v3 / Heartbeat v3 (KIP-345) in 2.3,
      v6 / SyncGroup v4 / Heartbeat v4 / LeaveGroup v3-4 (flexible, batched leave) in 2.4, JoinGroup v7 /
      SyncGroup v5 (KIP-559) in 2.5, JoinGroup v8-9 / LeaveGroup v5 (KIP-800, KIP-814) in 3.2;
      OffsetCommit v7 in 2.3, v8 in 2.4, v9 (KIP-848) in 3.7; OffsetFetch v6 in 2.4, v7 (KIP-447) in 2.5,
      v8 (KIP-709) in 3.0, v9 in 3.7; DescribeGroups v4 in 2.3, v5 in 2.4; ListGroups v3 in 2.4, v4
      (KIP-518) in 2.6, v5 (KIP-848) in 3.8.

    ``kraft``: a KRaft-mode broker also serves DescribeQuorum (v2 from 3.8) and UpdateFeatures (v0-v1),
    which a ZooKeeper-mode broker does not.

    The lowest versions are those kio can decode (Produce v3, Fetch v4, CreateTopics v2, DeleteTopics
    v1, OffsetCommit v2, OffsetFetch v1), not Kafka's. DescribeCluster v1 came with 3.7 in Kafka, but
    the sandbox serves it from 3.0 on because kafka-python 3.x cannot parse a v0 answer.
    """
    apis = dict(_BASE_APIS)
    version = parse_version(kafka_version)
    if version >= (3, 8):
        apis[2] = (0, 9)
    if version < (3, 5):
        apis[2] = (0, 7)
    apis[0] = (3, 11 if version >= (3, 8) else 10 if version >= (3, 7) else 9 if version >= (2, 4) else 7)
    apis[1] = (4, 16 if version >= (3, 7) else 15 if version >= (3, 5) else 13 if version >= (3, 1)
               else 12 if version >= (2, 7) else 11)
    if version < (2, 8):
        apis[19] = (2, 5 if version >= (2, 4) else 4)
        apis[20] = (1, 5 if version >= (2, 7) else 4 if version >= (2, 4) else 3)
    if version < (2, 7):
        apis[22] = (0, 3 if version >= (2, 5) else 2)

    def upto(key: int, *steps: tuple[tuple[int, int], int]) -> None:
        """Lower ``key``'s max version to that of the newest release step ``version`` reached."""
        lo, _ = apis[key]
        apis[key] = (lo, next((v for since, v in steps if version >= since), steps[-1][1]))

    upto(8, ((3, 7), 9), ((2, 4), 8), ((2, 3), 7), ((0, 0), 6))
    upto(9, ((3, 7), 9), ((3, 0), 8), ((2, 5), 7), ((2, 4), 6), ((0, 0), 5))
    upto(10, ((3, 0), 4), ((2, 4), 3), ((0, 0), 2))
    upto(11, ((3, 2), 9), ((2, 5), 7), ((2, 4), 6), ((2, 3), 5), ((2, 2), 4), ((0, 0), 3))
    upto(12, ((2, 4), 4), ((2, 3), 3), ((0, 0), 2))
    upto(13, ((3, 2), 5), ((2, 4), 4), ((0, 0), 2))
    upto(14, ((2, 5), 5), ((2, 4), 4), ((2, 3), 3), ((0, 0), 2))
    upto(15, ((2, 4), 5), ((2, 3), 4), ((0, 0), 3))
    upto(16, ((3, 8), 5), ((2, 6), 4), ((2, 4), 3), ((0, 0), 2))
    if kraft:  # KRaft-only APIs a broker forwards to the active controller (KIP-595, KIP-584)
        apis[55] = (0, 2 if version >= (3, 8) else 1)  # DescribeQuorum (v2: KIP-853 in 3.8)
        apis[57] = (0, 1)  # UpdateFeatures (v1: upgrade types, KIP-778)
    return apis


@dataclass(frozen=True)
class Request:
    """A decoded request: header fields and the kio body entity (``body`` is a dict for ListOffsets v0);
    ``client_host`` is the client's address as Kafka reports it in group membership (``/127.0.0.1``)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any
    client_host: str = ""


def read_request(frame: bytes) -> Request:
    """Decode one request frame (without its size prefix).

    Raises:
        UnsupportedVersion: the api key / version has no schema here (the caller answers with
            UNSUPPORTED_VERSION; ``correlation_id`` is carried on the exception).
    """
    api_key = read_int16(frame, 0)[0]
    api_version = read_int16(frame, 2)[0]
    correlation_id = read_int32(frame, 4)[0]
    if api_key == LIST_OFFSETS and api_version == 0:
        header, offset = entity_reader(RequestHeaderV1)(frame, 0)
        return Request(api_key, 0, correlation_id, header.client_id, _read_list_offsets_v0(frame, offset))
    try:
        request_cls = load_request_schema(api_key, api_version)
    except Exception as exc:  # kio raises its own index errors for unknown keys/versions
        raise UnsupportedVersion(api_key, api_version, correlation_id) from exc
    header, offset = entity_reader(request_cls.__header_schema__)(frame, 0)
    body, _ = entity_reader(request_cls)(frame, offset)
    return Request(api_key, api_version, correlation_id, header.client_id, body)


class UnsupportedVersion(Exception):
    """A request whose api key or version the sandbox cannot decode."""

    def __init__(self, api_key: int, api_version: int, correlation_id: int) -> None:
        super().__init__(f"unsupported api_key={api_key} version={api_version}")
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


def encode_response(correlation_id: int, response: Any) -> bytes:
    """Frame a kio response entity: size + its header (version from the class) + body."""
    buffer = io.BytesIO()
    header_cls = type(response).__header_schema__
    entity_writer(header_cls)(buffer, build(header_cls, correlation_id=correlation_id))
    entity_writer(type(response))(buffer, response)
    payload = buffer.getvalue()
    return len(payload).to_bytes(4, "big") + payload


def response_module(api_key: int, api_version: int) -> ModuleType:
    """The kio module holding the response classes of ``api_key`` at ``api_version``."""
    return load_payload_module(api_key, api_version, EntityType.response)


def response_class(api_key: int, api_version: int) -> type:
    return load_response_schema(api_key, api_version)


def build(cls: type, **values: Any) -> Any:
    """Instantiate a kio entity from keyword values, dropping fields this version lacks.

    One handler serves all versions of an API this way: it passes every field it knows and each
    version's class keeps its own. ``throttle_time`` defaults to zero.
    """
    names = {f.name for f in dataclasses.fields(cls)}
    if "throttle_time" in names and "throttle_time" not in values:
        values["throttle_time"] = datetime.timedelta(0)
    return cls(**{k: v for k, v in values.items() if k in names})


def api_versions_error(correlation_id: int, apis: dict[int, tuple[int, int]]) -> bytes:
    """ApiVersions answer to a version we do not serve: v0-encoded, error UNSUPPORTED_VERSION (35)
    and our table, as Kafka does (KIP-511), so the client retries with a version we support."""
    module = response_module(API_VERSIONS, 0)
    response = build(
        module.ApiVersionsResponse,
        error_code=ErrorCode.unsupported_version,
        api_keys=tuple(module.ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in apis.items()),
    )
    return encode_response(correlation_id, response)


# --- ListOffsets v0 (not in kio) -------------------------------------------------------------


def _read_list_offsets_v0(frame: bytes, offset: int) -> dict:
    replica_id, size = read_int32(frame, offset)
    offset += size
    topic_count, size = read_legacy_array_length(frame, offset)
    offset += size
    topics = []
    for _ in range(max(topic_count, 0)):
        name, size = read_legacy_string(frame, offset)
        offset += size
        partition_count, size = read_legacy_array_length(frame, offset)
        offset += size
        partitions = []
        for _ in range(max(partition_count, 0)):
            partition, size = read_int32(frame, offset)
            offset += size
            timestamp, size = read_int64(frame, offset)
            offset += size
            max_offsets, size = read_int32(frame, offset)
            offset += size
            partitions.append({"partition": partition, "timestamp": timestamp, "max_num_offsets": max_offsets})
        topics.append({"name": name, "partitions": partitions})
    return {"replica_id": replica_id, "topics": topics}


def encode_list_offsets_v0(correlation_id: int, topics: list[dict]) -> bytes:
    """Encode a ListOffsets v0 response: ``topics`` = ``[{"name", "partitions": [{"partition",
    "error_code", "offsets": [int, ...]}]}]`` (response header v0)."""
    buffer = io.BytesIO()
    entity_writer(ResponseHeaderV0)(buffer, ResponseHeaderV0(correlation_id=correlation_id))
    write_legacy_array_length(buffer, len(topics))
    for topic in topics:
        write_legacy_string(buffer, topic["name"])
        write_legacy_array_length(buffer, len(topic["partitions"]))
        for part in topic["partitions"]:
            write_int32(buffer, part["partition"])
            write_int16(buffer, int(part["error_code"]))
            write_legacy_array_length(buffer, len(part["offsets"]))
            for value in part["offsets"]:
                write_int64(buffer, value)
    payload = buffer.getvalue()
    return len(payload).to_bytes(4, "big") + payload
