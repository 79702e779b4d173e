"""Real record logs of the sandbox broker: RecordBatch v2 bytes as clients produced them.

Which topics hold real records: those created through the CreateTopics API (their sandbox node
``/sandbox/topics/<t>`` carries ``"records": true``, see :mod:`sandbox.broker.zkpaths`). The workload
topics that ``sandbox up`` creates keep the simulated growth of :mod:`sandbox.broker.replicas` (offsets
and sizes only), which the existing size, catch-up and reassignment measurements rely on; Produce to
them is refused (INVALID_REQUEST), Fetch from them returns no records.

A :class:`PartitionLog` is one replica's log, kept in memory and appended to one segment file
``log.dirs/<topic>-<partition>/00000000000000000000.log`` in Kafka's on-disk format (record batches
back to back), with Kafka's ``partition.metadata`` (the topic id) beside it, so a restarted broker
resumes with its data. Batch framing and header fields are read with kafka-python's
``kafka.record`` codecs (``MemoryRecords`` / ``DefaultRecordBatch``, which also checks the CRC32C);
the sandbox never decodes records itself. The leader assigns offsets by rewriting the batch's
``baseOffset`` and ``partitionLeaderEpoch``: both lie before the CRC-covered part (attributes onward,
KIP-98), so the client's CRC stays valid.

Producer state (KIP-98 idempotence, Kafka 3.x ``ProducerStateManager`` rules) is rebuilt from the
batches on load and after a truncation, on leaders and followers alike, so a new leader knows each
producer's last sequence:

- epoch lower than the producer's current one: INVALID_PRODUCER_EPOCH (47);
- same epoch and the same (first, last) sequence as one of the producer's last five batches: a
  duplicate, answered with that batch's original base offset and no error (nothing is appended);
- a new epoch must start at sequence 0, otherwise OUT_OF_ORDER_SEQUENCE_NUMBER (45);
- same epoch: the first sequence must follow the last one (wrapping at 2^31-1), otherwise
  OUT_OF_ORDER_SEQUENCE_NUMBER (45), which is also what Kafka 3.x answers for an old duplicate
  that left the five-batch cache (DUPLICATE_SEQUENCE_NUMBER, 46, is not returned by Kafka >= 1.0);
- a producer id the log has never seen may start at any sequence (Kafka accepts it: its state may have
  been removed by retention).
"""

from __future__ import annotations

import bisect
import logging
import shutil
import struct
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords
from kio.schema.errors import ErrorCode

log = logging.getLogger(__name__)

SEGMENT = "00000000000000000000.log"
PRODUCER_BATCHES_CACHED = 5  # Kafka's ProducerStateEntry.NumBatchesToRetain
MAX_SEQUENCE = 2**31 - 1
_BASE_OFFSET = struct.Struct(">q")  # RecordBatch v2: baseOffset int64 at byte 0
_LEADER_EPOCH = struct.Struct(">i")  # partitionLeaderEpoch int32 at byte 12
LEADER_EPOCH_AT = 12


class BatchError(Exception):
    """A produced batch the log refuses; ``code`` is the Kafka error to answer."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class StoredBatch:
    """One record batch of a log: offsets ``base_offset..last_offset`` (inclusive), its leader epoch,
    its producer fields, its bytes (with the assigned offsets) and its byte position in the segment."""

    base_offset: int
    last_offset: int
    leader_epoch: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    data: bytes
    position: int


@dataclass
class ProducerEntry:
    """What a log knows of one producer id: its epoch, and its last batches (newest last)."""

    epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=PRODUCER_BATCHES_CACHED))

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else -1


def parse_batches(data: bytes) -> list[DefaultRecordBatch]:
    """Split ``data`` (records bytes of a request or a segment file) into RecordBatch v2 objects.

    Raises:
        BatchError: CORRUPT_MESSAGE (truncated data or CRC mismatch), UNSUPPORTED_FOR_MESSAGE_FORMAT
            (magic 0 or 1: the sandbox stores v2 batches only).
    """
    records = MemoryRecords(bytes(data))
    batches = []
    while records.has_next():
        batch = records.next_batch()
        if not isinstance(batch, DefaultRecordBatch):
            raise BatchError(ErrorCode.unsupported_for_message_format, "only RecordBatch v2 (magic 2) is stored")
        if not batch.validate_crc():
            raise BatchError(ErrorCode.corrupt_message, "record batch CRC32C mismatch")
        batches.append(batch)
    if records.valid_bytes() != len(data):
        raise BatchError(ErrorCode.corrupt_message, "truncated record batch")
    return batches


def _in_sequence(last: int, first: int) -> bool:
    return first == last + 1 or (first == 0 and last == MAX_SEQUENCE)


class PartitionLog:
    """One replica's record log (see the module docstring). Offsets are message offsets; sizes bytes.

    ``truncations`` counts truncations: a leader waiting for acks=all compares it to know whether the
    batch it appended may have been removed meanwhile.
    """

    def __init__(self, directory: Path, topic_id: str | None) -> None:
        self.directory = directory
        self.topic_id = topic_id
        self.batches: list[StoredBatch] = []
        self._last_offsets: list[int] = []
        self.log_start = 0
        self.size_bytes = 0
        self.truncations = 0
        self.producers: dict[int, ProducerEntry] = {}
        self.epochs: list[tuple[int, int]] = []  # (leader epoch, start offset), as Kafka's leader-epoch-checkpoint

    # --- persistence ---------------------------------------------------------------------------
    @property
    def segment(self) -> Path:
        return self.directory / SEGMENT

    @classmethod
    def open(cls, directory: Path, topic_id: str | None) -> PartitionLog:
        """Open (or create) the log in ``directory``. A directory recorded for another topic id (the
        topic was deleted and created again while this broker was down) is wiped first."""
        plog = cls(directory, topic_id)
        meta = directory / "partition.metadata"
        if directory.exists() and topic_id and meta.exists():
            recorded = dict(
                line.split(": ", 1) for line in meta.read_text().splitlines() if ": " in line
            ).get("topic_id")
            if recorded and recorded != topic_id:
                log.warning("%s belongs to topic id %s, not %s: deleting it", directory, recorded, topic_id)
                shutil.rmtree(directory)
        directory.mkdir(parents=True, exist_ok=True)
        meta.write_text(f"version: 0\ntopic_id: {topic_id or ''}\n")
        if plog.segment.exists():
            data = plog.segment.read_bytes()
            try:
                batches = parse_batches(data)
            except BatchError as exc:  # a torn last write: keep what parses
                log.warning("%s: %s; keeping the valid prefix", plog.segment, exc)
                batches = parse_batches(data[: MemoryRecords(data).valid_bytes()])
            for batch in batches:
                plog._index(bytes(batch._buffer))
            with plog.segment.open("r+b") as handle:
                handle.truncate(plog.size_bytes)
        else:
            plog.segment.touch()
        return plog

    def delete(self) -> None:
        """Remove the log's directory (the replica was deleted or moved away)."""
        shutil.rmtree(self.directory, ignore_errors=True)

    # --- queries ------------------------------------------------------------------------------
    @property
    def leo(self) -> int:
        """Log end offset: the offset the next appended record gets."""
        return self.batches[-1].last_offset + 1 if self.batches else self.log_start

    @property
    def last_epoch(self) -> int:
        """Leader epoch of the last batch (-1 for an empty log)."""
        return self.batches[-1].leader_epoch if self.batches else -1

    def end_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch (KIP-101/KIP-279) on this log: ``(found, end)`` where ``found`` is the
        largest leader epoch ``<= epoch`` in the log and ``end`` the start offset of the next epoch
        (the log end offset when ``found`` is the last one). ``(-1, log start)`` when the log holds no
        such epoch."""
        index = bisect.bisect_right([e for e, _ in self.epochs], epoch) - 1
        if index < 0:
            return -1, self.log_start
        found = self.epochs[index][0]
        end = self.epochs[index + 1][1] if index + 1 < len(self.epochs) else self.leo
        return found, end

    def read(self, offset: int, max_bytes: int, upto: int) -> list[bytes]:
        """Batches holding offsets ``>= offset`` and ``< upto``, at most ``max_bytes`` bytes except that
        the first batch is always returned whole (KIP-74). ``upto`` is the high watermark for clients,
        the log end offset for followers."""
        index = bisect.bisect_left(self._last_offsets, offset)
        chunks, total = [], 0
        for batch in self.batches[index:]:
            if batch.base_offset >= upto or batch.last_offset >= upto:
                break
            if chunks and total + len(batch.data) > max_bytes:
                break
            chunks.append(batch.data)
            total += len(batch.data)
        return chunks

    def offset_for_timestamp(self, timestamp_ms: int) -> int | None:
        """Base offset of the first batch whose max timestamp is ``>= timestamp_ms`` (batch precision),
        None when there is none."""
        for batch in self.batches:
            if DefaultRecordBatch(batch.data).max_timestamp >= timestamp_ms:
                return batch.base_offset
        return None

    # --- producer state -------------------------------------------------------------------------
    def check_producer(self, batch: DefaultRecordBatch) -> StoredBatch | None:
        """Apply the idempotence rules (module docstring) to a batch about to be appended.

        Returns the stored duplicate when the batch was already appended, else None.

        Raises:
            BatchError: INVALID_PRODUCER_EPOCH or OUT_OF_ORDER_SEQUENCE_NUMBER.
        """
        pid = batch.producer_id
        if pid < 0 or not batch.has_sequence:
            return None
        entry = self.producers.get(pid)
        if entry is None:
            return None
        if batch.producer_epoch < entry.epoch:
            raise BatchError(ErrorCode.invalid_producer_epoch,
                             f"producer {pid} epoch {batch.producer_epoch} is older than {entry.epoch}")
        if batch.producer_epoch == entry.epoch:
            for stored in entry.batches:
                if (stored.base_sequence, stored.last_sequence) == (batch.base_sequence, batch.last_sequence):
                    return stored
            if not _in_sequence(entry.last_sequence, batch.base_sequence):
                raise BatchError(
                    ErrorCode.out_of_order_sequence_number,
                    f"producer {pid}: sequence {batch.base_sequence} does not follow {entry.last_sequence}")
        elif batch.base_sequence != 0:
            raise BatchError(ErrorCode.out_of_order_sequence_number,
                             f"producer {pid}: new epoch {batch.producer_epoch} must start at sequence 0")
        return None

    def _update_producer(self, stored: StoredBatch) -> None:
        if stored.producer_id < 0 or stored.base_sequence < 0:
            return
        entry = self.producers.get(stored.producer_id)
        if entry is None or entry.epoch != stored.producer_epoch:
            entry = self.producers[stored.producer_id] = ProducerEntry(epoch=stored.producer_epoch)
        entry.batches.append(stored)

    # --- writes -------------------------------------------------------------------------------
    def _index(self, data: bytes) -> StoredBatch:
        batch = DefaultRecordBatch(data)
        stored = StoredBatch(
            base_offset=batch.base_offset, last_offset=batch.last_offset, leader_epoch=batch.leader_epoch,
            producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
            base_sequence=batch.base_sequence, last_sequence=batch.last_sequence, data=data,
            position=self.size_bytes,
        )
        self.batches.append(stored)
        self._last_offsets.append(stored.last_offset)
        if not self.epochs or self.epochs[-1][0] != stored.leader_epoch:
            self.epochs.append((stored.leader_epoch, stored.base_offset))
        self.size_bytes += len(data)
        self._update_producer(stored)
        return stored

    def _write(self, data: bytes) -> None:
        with self.segment.open("ab") as handle:
            handle.write(data)

    def append_as_leader(self, batch: DefaultRecordBatch, leader_epoch: int) -> StoredBatch:
        """Assign offsets from the log end offset, stamp ``leader_epoch``, append; returns the stored
        batch (``base_offset`` / ``last_offset`` are the assigned offsets). A duplicate of a cached
        batch of the same producer is not appended: its stored original is returned.

        Raises:
            BatchError: see :meth:`check_producer`.
        """
        duplicate = self.check_producer(batch)
        if duplicate is not None:
            return duplicate
        data = bytearray(batch._buffer)
        _BASE_OFFSET.pack_into(data, 0, self.leo)
        _LEADER_EPOCH.pack_into(data, LEADER_EPOCH_AT, leader_epoch)
        stored = self._index(bytes(data))
        self._write(stored.data)
        return stored

    def append_replicated(self, data: bytes) -> StoredBatch | None:
        """Append a batch fetched from the leader as is (offsets already assigned). A batch that does
        not start at our log end offset is ignored (returns None): the next fetch asks again."""
        base_offset = _BASE_OFFSET.unpack_from(data, 0)[0]
        if base_offset != self.leo:
            return None
        stored = self._index(data)
        self._write(data)
        return stored

    def truncate_to(self, offset: int) -> None:
        """Drop every batch holding an offset ``>= offset`` (whole batches), rebuild producer state."""
        if offset >= self.leo:
            return
        keep = bisect.bisect_left(self._last_offsets, offset)
        while keep > 0 and self.batches[keep - 1].last_offset >= offset:
            keep -= 1
        size = self.batches[keep].position if keep < len(self.batches) else self.size_bytes
        log.info("truncating %s to offset %s (%s -> %s bytes)", self.directory.name, offset, self.size_bytes, size)
        self.batches = self.batches[:keep]
        self._last_offsets = self._last_offsets[:keep]
        self.size_bytes = size
        self.truncations += 1
        self.epochs = [(e, start) for e, start in self.epochs if start < offset]
        with self.segment.open("r+b") as handle:
            handle.truncate(size)
        self.producers = {}
        for stored in self.batches:
            self._update_producer(stored)
