"""The records of ``__consumer_offsets`` in Kafka's own format, and the group -> partition rule.

Kafka's group coordinator stores two kinds of records in ``__consumer_offsets`` (the schemas of
``group-coordinator/src/main/resources/common/message/*.json`` in apache/kafka; Kafka 3.x's
``GroupMetadataManager`` writes them). A record's key and value each start with an ``int16`` version
followed by the fields of that version (non-flexible versions: int16-length strings, int32-length bytes):

- offset commit: key version 1 ``OffsetCommitKey`` (``group``, ``topic``, ``partition``; version 0 has
  the same layout); value version 3 ``OffsetCommitValue`` (``offset`` int64, ``leaderEpoch`` int32,
  ``metadata`` string, ``commitTimestamp`` int64 in ms); versions 0 and 1 (with ``expireTimestamp``) are
  read too. A null value is a tombstone (the offset was deleted).
- group metadata: key version 2 ``GroupMetadataKey`` (``group``); value ``GroupMetadataValue`` version 3
  (IBP >= 2.3; 2 from 2.1, 1 before): ``protocolType``, ``generation``, ``protocol`` (nullable),
  ``leader`` (nullable), ``currentStateTimestamp`` (v2+), ``members`` (``memberId``, ``groupInstanceId``
  v3+, ``clientId``, ``clientHost``, ``rebalanceTimeout`` v1+, ``sessionTimeout``, ``subscription``,
  ``assignment``). A null value deletes the group.

The entities below are kio data entities (the same dataclass shape kio generates from Kafka's JSON
schemas), so kio's ``entity_writer`` / ``entity_reader`` do all the encoding; record batches are built
and read with kafka-python's ``kafka.record`` codecs. Burrow 1.2.1's ``kafka`` consumer module decodes
offset commit keys 0/1 with values 0, 1 and 3, and group metadata values 0 and 1 only (it logs "failed to
decode ... value version" for 2 and 3, as it does against Kafka >= 2.1).

Which partition holds a group (Kafka's ``GroupMetadataManager.partitionFor``):
``Utils.abs(groupId.hashCode()) % partition count`` with Java's ``String.hashCode`` (UTF-16 code units,
``h = 31 * h + c`` in int32) and ``Utils.abs`` mapping ``Integer.MIN_VALUE`` to 0.
"""

# no `from __future__ import annotations`: kio reads the entities' field types at run time
import io
import time
from dataclasses import dataclass, field
from typing import ClassVar

from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords
from kio.serial import entity_reader, entity_writer
from kio.serial.readers import read_int16
from kio.serial.writers import write_int16
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i64

OFFSET_COMMIT_KEY_VERSION = 1
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_KEY_VERSION = 2
NO_LEADER_EPOCH = -1


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode()`` of ``text`` as a signed int32 (over UTF-16 code units)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition of ``group_id`` among ``partitions`` (Kafka's rule, above).

    Raises:
        ValueError: ``partitions`` < 1.
    """
    if partitions < 1:
        raise ValueError(f"__consumer_offsets needs at least one partition, not {partitions}")
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


# --- kio entities (non-flexible versions; the version is written before them) ---------------------



@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitKey:
    """Key versions 0 and 1 (same layout)."""

    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    group: str = field(metadata={"kafka_type": "string"})
    topic: str = field(metadata={"kafka_type": "string"})
    partition: i32 = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitValueV0:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    offset: i64 = field(metadata={"kafka_type": "int64"})
    metadata: str = field(metadata={"kafka_type": "string"})
    commit_timestamp: i64 = field(metadata={"kafka_type": "int64"})


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitValueV1:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    offset: i64 = field(metadata={"kafka_type": "int64"})
    metadata: str = field(metadata={"kafka_type": "string"})
    commit_timestamp: i64 = field(metadata={"kafka_type": "int64"})
    expire_timestamp: i64 = field(metadata={"kafka_type": "int64"})


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitValueV3:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = False
    offset: i64 = field(metadata={"kafka_type": "int64"})
    leader_epoch: i32 = field(metadata={"kafka_type": "int32"})
    metadata: str = field(metadata={"kafka_type": "string"})
    commit_timestamp: i64 = field(metadata={"kafka_type": "int64"})


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMetadataKey:
    """Key version 2."""

    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(2)
    __flexible__: ClassVar[bool] = False
    group: str = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberMetadataV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    member_id: str = field(metadata={"kafka_type": "string"})
    client_id: str = field(metadata={"kafka_type": "string"})
    client_host: str = field(metadata={"kafka_type": "string"})
    session_timeout: i32 = field(metadata={"kafka_type": "int32"})
    subscription: bytes = field(metadata={"kafka_type": "bytes"})
    assignment: bytes = field(metadata={"kafka_type": "bytes"})


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberMetadataV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    member_id: str = field(metadata={"kafka_type": "string"})
    client_id: str = field(metadata={"kafka_type": "string"})
    client_host: str = field(metadata={"kafka_type": "string"})
    rebalance_timeout: i32 = field(metadata={"kafka_type": "int32"})
    session_timeout: i32 = field(metadata={"kafka_type": "int32"})
    subscription: bytes = field(metadata={"kafka_type": "bytes"})
    assignment: bytes = field(metadata={"kafka_type": "bytes"})


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberMetadataV3:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = False
    member_id: str = field(metadata={"kafka_type": "string"})
    group_instance_id: str | None = field(metadata={"kafka_type": "string"})
    client_id: str = field(metadata={"kafka_type": "string"})
    client_host: str = field(metadata={"kafka_type": "string"})
    rebalance_timeout: i32 = field(metadata={"kafka_type": "int32"})
    session_timeout: i32 = field(metadata={"kafka_type": "int32"})
    subscription: bytes = field(metadata={"kafka_type": "bytes"})
    assignment: bytes = field(metadata={"kafka_type": "bytes"})


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMetadataValueV0:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    protocol_type: str = field(metadata={"kafka_type": "string"})
    generation: i32 = field(metadata={"kafka_type": "int32"})
    protocol: str | None = field(metadata={"kafka_type": "string"})
    leader: str | None = field(metadata={"kafka_type": "string"})
    members: tuple[MemberMetadataV0, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMetadataValueV1:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    protocol_type: str = field(metadata={"kafka_type": "string"})
    generation: i32 = field(metadata={"kafka_type": "int32"})
    protocol: str | None = field(metadata={"kafka_type": "string"})
    leader: str | None = field(metadata={"kafka_type": "string"})
    members: tuple[MemberMetadataV1, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMetadataValueV2:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(2)
    __flexible__: ClassVar[bool] = False
    protocol_type: str = field(metadata={"kafka_type": "string"})
    generation: i32 = field(metadata={"kafka_type": "int32"})
    protocol: str | None = field(metadata={"kafka_type": "string"})
    leader: str | None = field(metadata={"kafka_type": "string"})
    current_state_timestamp: i64 = field(metadata={"kafka_type": "int64"})
    members: tuple[MemberMetadataV1, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMetadataValueV3:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = False
    protocol_type: str = field(metadata={"kafka_type": "string"})
    generation: i32 = field(metadata={"kafka_type": "int32"})
    protocol: str | None = field(metadata={"kafka_type": "string"})
    leader: str | None = field(metadata={"kafka_type": "string"})
    current_state_timestamp: i64 = field(metadata={"kafka_type": "int64"})
    members: tuple[MemberMetadataV3, ...]


OFFSET_VALUES = {0: OffsetCommitValueV0, 1: OffsetCommitValueV1, 3: OffsetCommitValueV3}
GROUP_VALUES = {0: GroupMetadataValueV0, 1: GroupMetadataValueV1, 2: GroupMetadataValueV2, 3: GroupMetadataValueV3}
MEMBER_CLASSES = {0: MemberMetadataV0, 1: MemberMetadataV1, 2: MemberMetadataV1, 3: MemberMetadataV3}


# --- plain views the coordinator works with ---------------------------------------------------------


@dataclass(frozen=True)
class CommittedOffset:
    """One committed offset: ``offset`` (the next message to read), ``leader_epoch`` (-1: unknown),
    ``metadata`` (the client's string), ``commit_timestamp_ms``."""

    offset: int
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str = ""
    commit_timestamp_ms: int = 0


@dataclass(frozen=True)
class StoredMember:
    """A member as group metadata stores it (times in ms, subscription/assignment as the client sent them)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class StoredGroup:
    """Group metadata: ``protocol`` / ``leader`` are None for an empty group; ``state_timestamp_ms`` -1
    when the record version lacks it."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    state_timestamp_ms: int
    members: tuple[StoredMember, ...]


# --- encoding ---------------------------------------------------------------------------------------


def _encode(version: int, entity) -> bytes:
    buffer = io.BytesIO()
    write_int16(buffer, i16(version))
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    """The key of an offset commit record (version 1)."""
    return _encode(OFFSET_COMMIT_KEY_VERSION, OffsetCommitKey(group=group, topic=topic, partition=i32(partition)))


def offset_commit_value(committed: CommittedOffset) -> bytes:
    """The value of an offset commit record (version 3)."""
    return _encode(OFFSET_COMMIT_VALUE_VERSION, OffsetCommitValueV3(
        offset=i64(committed.offset), leader_epoch=i32(committed.leader_epoch), metadata=committed.metadata,
        commit_timestamp=i64(committed.commit_timestamp_ms)))


def group_metadata_key(group: str) -> bytes:
    """The key of a group metadata record (version 2)."""
    return _encode(GROUP_METADATA_KEY_VERSION, GroupMetadataKey(group=group))


def group_metadata_value(stored: StoredGroup, version: int = 3) -> bytes:
    """The value of a group metadata record, ``version`` 0-3 (Kafka picks it from the IBP: 3 from 2.3).

    Raises:
        ValueError: an unknown version.
    """
    if version not in GROUP_VALUES:
        raise ValueError(f"GroupMetadataValue version {version} is not one of {sorted(GROUP_VALUES)}")
    member_cls = MEMBER_CLASSES[version]
    members = []
    for m in stored.members:
        fields = {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                  "client_host": m.client_host, "rebalance_timeout": i32(m.rebalance_timeout_ms),
                  "session_timeout": i32(m.session_timeout_ms), "subscription": m.subscription,
                  "assignment": m.assignment}
        members.append(member_cls(**{k: v for k, v in fields.items() if k in member_cls.__dataclass_fields__}))
    value_cls = GROUP_VALUES[version]
    fields = {"protocol_type": stored.protocol_type, "generation": i32(stored.generation), "protocol": stored.protocol,
              "leader": stored.leader, "current_state_timestamp": i64(stored.state_timestamp_ms),
              "members": tuple(members)}
    return _encode(version, value_cls(**{k: v for k, v in fields.items() if k in value_cls.__dataclass_fields__}))


# --- decoding ---------------------------------------------------------------------------------------


class RecordFormatError(ValueError):
    """A key or value that is not one of the versions above."""


@dataclass(frozen=True)
class OffsetsRecord:
    """One decoded ``__consumer_offsets`` record: ``kind`` "offset" (``group``, ``topic``, ``partition``,
    ``committed``) or "group" (``group``, ``stored``); ``committed`` / ``stored`` None for a tombstone.
    ``key_version`` / ``value_version`` as found (value -1 for a tombstone)."""

    kind: str
    key_version: int
    value_version: int
    group: str
    topic: str | None = None
    partition: int | None = None
    committed: CommittedOffset | None = None
    stored: StoredGroup | None = None


def decode(key: bytes, value: bytes | None) -> OffsetsRecord:
    """Decode one record of ``__consumer_offsets`` (key and value bytes as stored).

    Raises:
        RecordFormatError: unknown key or value version, or truncated data.
    """
    try:
        key_version, used = read_int16(key, 0)
        if key_version in (0, 1):
            k, _ = entity_reader(OffsetCommitKey)(key, used)
            if value is None:
                return OffsetsRecord("offset", key_version, -1, k.group, k.topic, int(k.partition))
            value_version, used = read_int16(value, 0)
            cls = OFFSET_VALUES.get(value_version)
            if cls is None:
                raise RecordFormatError(f"offset commit value version {value_version}")
            v, _ = entity_reader(cls)(value, used)
            committed = CommittedOffset(int(v.offset), int(getattr(v, "leader_epoch", NO_LEADER_EPOCH)),
                                        v.metadata, int(v.commit_timestamp))
            return OffsetsRecord("offset", key_version, value_version, k.group, k.topic, int(k.partition), committed)
        if key_version == GROUP_METADATA_KEY_VERSION:
            k, _ = entity_reader(GroupMetadataKey)(key, used)
            if value is None:
                return OffsetsRecord("group", key_version, -1, k.group)
            value_version, used = read_int16(value, 0)
            cls = GROUP_VALUES.get(value_version)
            if cls is None:
                raise RecordFormatError(f"group metadata value version {value_version}")
            v, _ = entity_reader(cls)(value, used)
            members = tuple(
                StoredMember(m.member_id, getattr(m, "group_instance_id", None), m.client_id, m.client_host,
                             int(getattr(m, "rebalance_timeout", m.session_timeout)), int(m.session_timeout),
                             bytes(m.subscription), bytes(m.assignment))
                for m in v.members)
            stored = StoredGroup(v.protocol_type, int(v.generation), v.protocol, v.leader,
                                 int(getattr(v, "current_state_timestamp", -1)), members)
            return OffsetsRecord("group", key_version, value_version, k.group, stored=stored)
    except RecordFormatError:
        raise
    except Exception as exc:  # kio raises struct / index errors on truncated data
        raise RecordFormatError(f"cannot decode record: {exc}") from exc
    raise RecordFormatError(f"key version {key_version}")


def build_batch(records: list[tuple[bytes, bytes | None]], timestamp_ms: int | None = None) -> bytes:
    """A RecordBatch v2 (no producer id, uncompressed) holding ``records`` (``(key, value)`` pairs,
    value None for a tombstone), built by kafka-python's ``DefaultRecordBatchBuilder`` (CRC included)."""
    now = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    for i, (key, value) in enumerate(records):
        builder.append(i, timestamp=now, key=key, value=value, headers=[])
    return bytes(builder.build())


def read_records(data: bytes) -> list[tuple[int, bytes | None, bytes | None]]:
    """``(offset, key, value)`` of every record in ``data`` (record batches back to back, as Fetch or a
    log segment holds them), read with kafka-python's ``MemoryRecords``."""
    found = []
    records = MemoryRecords(bytes(data))
    while records.has_next():
        batch = records.next_batch()
        if batch is None:
            break
        for record in batch:
            found.append((record.offset, record.key, record.value))
    return found
