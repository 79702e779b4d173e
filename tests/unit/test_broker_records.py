"""The sandbox broker's record log (sandbox/broker/records.py), without a cluster: offsets assigned by
the leader, idempotent-producer rules, epoch-based truncation (KIP-279), persistence."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords
from kio.schema.errors import ErrorCode

from sandbox.broker.records import BatchError, PartitionLog, parse_batches


def batch(producer_id: int = -1, epoch: int = -1, base_sequence: int = -1, count: int = 2) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=producer_id, producer_epoch=epoch,
                                        base_sequence=base_sequence, batch_size=1 << 20)
    for i in range(count):
        builder.append(i, timestamp=int(time.time() * 1000), key=b"k%d" % i, value=b"v", headers=[])
    return bytes(builder.build())


def append(plog: PartitionLog, data: bytes, leader_epoch: int = 0):
    (parsed,) = parse_batches(data)
    return plog.append_as_leader(parsed, leader_epoch)


def test_leader_assigns_offsets_and_keeps_the_crc(tmp_path: Path) -> None:
    plog = PartitionLog.open(tmp_path / "t-0", "id")
    assert [append(plog, batch()).base_offset for _ in range(3)] == [0, 2, 4]
    assert plog.leo == 6
    chunks = plog.read(2, 1, plog.leo)  # the first batch is returned whole whatever the limit (KIP-74)
    assert len(chunks) == 1
    (stored,) = parse_batches(chunks[0])  # CRC still valid after the offset rewrite
    assert [r.offset for r in stored] == [2, 3]
    assert plog.read(0, 1 << 20, 4) == [b.data for b in plog.batches[:2]]  # up to the high watermark
    reopened = PartitionLog.open(tmp_path / "t-0", "id")
    assert reopened.leo == 6 and reopened.size_bytes == plog.size_bytes
    assert [r.offset for b in MemoryRecords(b"".join(reopened.read(0, 1 << 20, 6))) for r in b] == list(range(6))
    assert PartitionLog.open(tmp_path / "t-0", "other-id").leo == 0  # a re-created topic starts empty


def test_idempotent_producer_rules(tmp_path: Path) -> None:
    plog = PartitionLog.open(tmp_path / "t-0", "id")
    assert append(plog, batch(7, 0, 0)).base_offset == 0
    assert append(plog, batch(7, 0, 0)).base_offset == 0 and plog.leo == 2  # duplicate: not appended
    for data, code in ((batch(7, 0, 5), ErrorCode.out_of_order_sequence_number),
                       (batch(7, 1, 3), ErrorCode.out_of_order_sequence_number)):
        with pytest.raises(BatchError) as raised:
            append(plog, data)
        assert raised.value.code == code
    assert append(plog, batch(7, 0, 2)).base_offset == 2
    assert append(plog, batch(7, 1, 0)).base_offset == 4  # a new epoch starts at sequence 0
    with pytest.raises(BatchError) as raised:
        append(plog, batch(7, 0, 4))
    assert raised.value.code == ErrorCode.invalid_producer_epoch
    assert append(plog, batch(8, 0, 40)).base_offset == 6  # an unknown producer may start anywhere
    plog.truncate_to(4)  # producer state is rebuilt from what is left
    assert append(plog, batch(7, 0, 4)).base_offset == 4


def test_divergent_follower_truncates_to_the_leaders_epoch_end(tmp_path: Path) -> None:
    leader = PartitionLog.open(tmp_path / "leader", "id")
    follower = PartitionLog.open(tmp_path / "follower", "id")
    for _ in range(3):  # epoch 3: offsets 0..5 on both
        follower.append_replicated(append(leader, batch(), 3).data)
    append(leader, batch(), 3)  # epoch 3: 6..7 on the leader only
    append(follower, batch(), 7)  # the follower led briefly (epoch 7) and wrote 6..7 nobody has
    found, end = leader.end_for_epoch(follower.last_epoch)
    assert (found, end) == (3, 8)  # the leader never had epoch 7: its end of epoch 3 is 8 ...
    follower.truncate_to(min(end, follower.end_for_epoch(found)[1]))  # ... the follower's own is 6
    assert follower.leo == 6 and follower.last_epoch == 3
    assert leader.end_for_epoch(3) == (3, 8) and follower.leo <= 8
    for data in leader.read(follower.leo, 1 << 20, leader.leo):
        assert follower.append_replicated(data) is not None
    assert [b.data for b in follower.batches] == [b.data for b in leader.batches]
    assert leader.end_for_epoch(2) == (-1, 0)


# --- __consumer_offsets records (sandbox/broker/group_records.py) ----------------------------------------


def test_group_partition_follows_javas_string_hash() -> None:
    from sandbox.broker.group_records import java_string_hash, partition_for

    assert java_string_hash("hello") == 99162322  # "hello".hashCode() in Java
    assert java_string_hash("") == 0
    assert java_string_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE: Utils.abs gives 0
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    assert java_string_hash("é€") == (0xE9 * 31 + 0x20AC)  # UTF-16 code units


def test_offsets_records_encode_in_kafkas_layout_and_decode_back() -> None:
    from sandbox.broker.group_records import (
        CommittedOffset,
        StoredGroup,
        StoredMember,
        build_batch,
        decode,
        group_metadata_key,
        group_metadata_value,
        offset_commit_key,
        offset_commit_value,
        read_records,
    )

    key = offset_commit_key("g", "t", 3)
    # int16 version 1, int16-length "g", int16-length "t", int32 partition (OffsetCommitKey.json)
    assert key == bytes.fromhex("0001" "0001" "67" "0001" "74" "00000003")
    value = offset_commit_value(CommittedOffset(42, 5, "m", 1000))
    # int16 version 3, int64 offset, int32 leader epoch, string metadata, int64 commit timestamp
    assert value == bytes.fromhex("0003" "000000000000002a" "00000005" "0001" "6d" "00000000000003e8")
    record = decode(key, value)
    assert (record.kind, record.key_version, record.value_version, record.group, record.topic, record.partition) == (
        "offset", 1, 3, "g", "t", 3)
    assert record.committed == CommittedOffset(42, 5, "m", 1000)
    assert decode(key, None).committed is None  # a tombstone

    member = StoredMember("m1", None, "client", "/127.0.0.1", 300000, 45000, b"sub", b"assignment")
    group = StoredGroup("consumer", 7, "range", "m1", 1234, (member,))
    for version in (0, 1, 2, 3):
        found = decode(group_metadata_key("g"), group_metadata_value(group, version))
        assert (found.kind, found.key_version, found.value_version, found.group) == ("group", 2, version, "g")
        assert found.stored.generation == 7 and found.stored.members[0].assignment == b"assignment"
    assert decode(group_metadata_key("g"), group_metadata_value(group, 3)).stored == group
    assert group_metadata_key("g") == bytes.fromhex("0002" "0001" "67")

    batch_ = build_batch([(key, value), (group_metadata_key("g"), None)])
    assert [(o, k, v) for o, k, v in read_records(batch_)] == [(0, key, value), (1, group_metadata_key("g"), None)]
