"""In-memory partition logs: record batches (magic 2) appended as produced, read back by offset and bytes.

One broker, one replica: the high watermark is the log end offset. Batches are stored as sent by the
producer with only baseOffset rewritten (it lies outside the batch CRC, as in Kafka's own log append).
Only the 61-byte batch header is looked at, never the records inside.

Idempotent producers (a batch with a producer id >= 0) are checked as Kafka's ProducerStateManager does, per
partition: a batch repeating one of the producer's last five (same epoch, same first and last sequence) is a retry
of a batch already in the log, acknowledged with that batch's offset and not appended again; a sequence that does
not follow the last one is OUT_OF_ORDER_SEQUENCE_NUMBER; an epoch older than the producer's is
INVALID_PRODUCER_EPOCH.
"""

from __future__ import annotations

import bisect
import collections
import struct
import uuid
from dataclasses import dataclass, field

import crc32c  # native CRC-32C (a kio dependency)

# Record batch v2 header (Kafka's DefaultRecordBatch): the fields the log needs.
_BASE_OFFSET = struct.Struct(">q")  # offset 0
_LENGTH = struct.Struct(">i")  # offset 8, bytes after this field
_LAST_OFFSET_DELTA = struct.Struct(">i")  # offset 23
_CRC = struct.Struct(">I")  # offset 17, CRC-32C of everything from attributes (offset 21) on
_CRC_AT = 17
_MAGIC_AT = 16
_LAST_DELTA_AT = 23
_PRODUCER = struct.Struct(">qhi")  # offset 43: producerId, producerEpoch, baseSequence
_PRODUCER_AT = 43
BATCH_OVERHEAD = 12  # baseOffset + batchLength
MIN_BATCH_SIZE = 61
NO_PRODUCER_EPOCH = -1
MAX_INT = 2**31 - 1
RETAINED_BATCHES = 5  # ProducerStateEntry.NUM_BATCHES_TO_RETAIN: a producer has at most 5 requests in flight

OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47


class InvalidRecords(ValueError):
    """A produce record set the log refuses (Kafka: CORRUPT_MESSAGE / INVALID_RECORD)."""


class ProducerStateError(ValueError):
    """An idempotent batch Kafka refuses: `error_code` is OUT_OF_ORDER_SEQUENCE_NUMBER or INVALID_PRODUCER_EPOCH."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


@dataclass(frozen=True, slots=True)
class BatchInfo:
    """What the log keeps of an idempotent producer's batch: its sequence range and where it went."""

    first_seq: int
    last_seq: int
    first_offset: int


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    batches: collections.deque[BatchInfo] = field(
        default_factory=lambda: collections.deque(maxlen=RETAINED_BATCHES))

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchInfo | None:
        if epoch != self.epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None


@dataclass(frozen=True, slots=True)
class AppendResult:
    base_offset: int
    duplicate: BatchInfo | None = None  # the batch this one repeats (nothing appended), as Kafka's findDuplicateBatch


def _producer_fields(records: bytes, start: int, count: int) -> tuple[int, int, int, int]:
    """(producer id, epoch, first sequence, last sequence) of the batch at `start` holding `count` records."""
    producer_id, epoch, first_seq = _PRODUCER.unpack_from(records, start + _PRODUCER_AT)
    last_seq = first_seq + count - 1
    if last_seq > MAX_INT:  # DefaultRecordBatch.incrementSequence wraps at Integer.MAX_VALUE
        last_seq -= MAX_INT + 1
    return producer_id, epoch, first_seq, last_seq


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == MAX_INT)


@dataclass(frozen=True, slots=True)
class ReadResult:
    records: bytes
    high_watermark: int
    log_start_offset: int
    error_code: int = 0  # 1 OFFSET_OUT_OF_RANGE
    first_entry_incomplete: bool = False  # records dropped: the first batch is larger than the bytes left


def split_batches(records: bytes) -> list[tuple[int, int, int]]:
    """(start, size, record count) for each batch of a produce record set; raises InvalidRecords."""
    out = []
    pos = 0
    end = len(records)
    while pos < end:
        if end - pos < MIN_BATCH_SIZE:
            raise InvalidRecords(f"truncated record batch header at byte {pos}")
        (length,) = _LENGTH.unpack_from(records, pos + 8)
        size = BATCH_OVERHEAD + length
        if length < MIN_BATCH_SIZE - BATCH_OVERHEAD or pos + size > end:
            raise InvalidRecords(f"record batch at byte {pos} claims {size} bytes, {end - pos} present")
        magic = records[pos + _MAGIC_AT]
        if magic != 2:
            raise InvalidRecords(f"record batch magic {magic} (only magic 2 is accepted)")
        (crc,) = _CRC.unpack_from(records, pos + _CRC_AT)
        if crc32c.crc32c(memoryview(records)[pos + _CRC_AT + 4 : pos + size]) != crc:
            raise InvalidRecords(f"record batch at byte {pos} fails its CRC")
        (last_delta,) = _LAST_OFFSET_DELTA.unpack_from(records, pos + _LAST_DELTA_AT)
        if last_delta < 0:
            raise InvalidRecords(f"record batch at byte {pos} has lastOffsetDelta {last_delta}")
        out.append((pos, size, last_delta + 1))
        pos += size
    if not out:
        raise InvalidRecords("empty record set")
    return out


def _copy(entry: ProducerEntry | None) -> ProducerEntry | None:
    return None if entry is None else ProducerEntry(entry.epoch, collections.deque(entry.batches,
                                                                                    maxlen=RETAINED_BATCHES))


def _check(entry: ProducerEntry, current: ProducerEntry | None, producer_id: int, epoch: int, first_seq: int) -> None:
    """ProducerAppendInfo.checkProducerEpoch and checkSequence (Kafka 4.3.1)."""
    if epoch < entry.epoch:
        raise ProducerStateError(INVALID_PRODUCER_EPOCH, f"producer {producer_id} epoch {epoch} is older than its "
                                                         f"current epoch {entry.epoch}")
    if epoch != entry.epoch:
        if first_seq != 0 and entry.epoch != NO_PRODUCER_EPOCH:
            raise ProducerStateError(OUT_OF_ORDER_SEQUENCE_NUMBER, f"producer {producer_id} new epoch {epoch} starts "
                                                                   f"at sequence {first_seq}, not 0")
        return
    # A producer this partition has no state for may start at any sequence (its records may have been deleted).
    if current is not None and current.epoch != NO_PRODUCER_EPOCH and not _in_sequence(entry.last_seq, first_seq):
        raise ProducerStateError(OUT_OF_ORDER_SEQUENCE_NUMBER, f"producer {producer_id} epoch {epoch} sent sequence "
                                                               f"{first_seq} after {entry.last_seq}")


@dataclass(slots=True)
class PartitionLog:
    data: bytearray = field(default_factory=bytearray)
    positions: list[int] = field(default_factory=list)  # byte position of each batch in data
    bases: list[int] = field(default_factory=list)  # base offset of each batch
    log_start_offset: int = 0
    log_end_offset: int = 0
    producers: dict[int, ProducerEntry] = field(default_factory=dict)  # producer id -> its state on this partition
    # The log's first `filled` offsets as copies of one batch (`filler`, of `filler_records` records), made when
    # read (fill): a replay pre-fills thousands of partitions with millions of records it only ever reads back.
    filler: bytes = b""
    filler_records: int = 0
    filled: int = 0

    @property
    def high_watermark(self) -> int:
        return self.log_end_offset

    def fill(self, batch: bytes, times: int) -> None:
        """Start an empty log with `times` copies of one batch (base offsets 0, n, 2n, ...), made on read: the
        same bytes as appending each, a batch's base offset being outside its CRC."""
        if self.log_end_offset or times <= 0:
            raise ValueError("only an empty log is filled, with at least one batch")
        ((_start, size, count),) = split_batches(batch)
        self.filler, self.filler_records = bytes(batch[:size]), count
        self.filled = self.log_end_offset = times * count

    def append(self, records: bytes) -> int:
        """Append a produced record set; returns the base offset assigned to its first batch."""
        return self.append_produced(records).base_offset

    def append_produced(self, records: bytes) -> AppendResult:
        """Append a produced record set, checking idempotent producers' sequences first (UnifiedLog
        .analyzeAndValidateProducerState): raises InvalidRecords or ProducerStateError, nothing appended then."""
        batches = split_batches(records)
        updates: dict[int, ProducerEntry] = {}
        offset = self.log_end_offset
        for start, _, count in batches:
            producer_id, epoch, first_seq, last_seq = _producer_fields(records, start, count)
            if producer_id >= 0:
                current = self.producers.get(producer_id)
                duplicate = current.find_duplicate(epoch, first_seq, last_seq) if current else None
                if duplicate is not None:
                    return AppendResult(duplicate.first_offset, duplicate)
                entry = updates.get(producer_id) or _copy(current) or ProducerEntry(NO_PRODUCER_EPOCH)
                _check(entry, current, producer_id, epoch, first_seq)
                if epoch != entry.epoch:
                    entry.epoch = epoch
                    entry.batches.clear()
                entry.batches.append(BatchInfo(first_seq, last_seq, offset))
                updates[producer_id] = entry
            offset += count
        self.producers.update(updates)
        first = self.log_end_offset
        for start, size, count in batches:
            batch = bytearray(records[start : start + size])
            _BASE_OFFSET.pack_into(batch, 0, self.log_end_offset)
            self.positions.append(len(self.data))
            self.bases.append(self.log_end_offset)
            self.data += batch
            self.log_end_offset += count
        return AppendResult(first)

    def bytes_available(self, fetch_offset: int) -> int:
        """Bytes from the batch holding fetch_offset to the log end (what a delayed fetch counts)."""
        if 0 <= fetch_offset < self.filled:
            return self._filler_bytes(fetch_offset) + len(self.data)
        pos = self._position(fetch_offset)
        return 0 if pos is None else len(self.data) - pos

    def _filler_bytes(self, fetch_offset: int) -> int:
        """Bytes of filler from the batch holding fetch_offset on."""
        return (self.filled // self.filler_records - fetch_offset // self.filler_records) * len(self.filler)

    def _filler_read(self, fetch_offset: int, size: int) -> bytes:
        """`size` bytes of the log from the filler batch holding fetch_offset (into the appended data beyond)."""
        n, template = self.filler_records, bytearray(self.filler)
        first = fetch_offset // n
        batches = -(-min(size, self._filler_bytes(fetch_offset)) // len(template))  # (rounded up)
        out = bytearray()
        for k in range(first, first + batches):
            _BASE_OFFSET.pack_into(template, 0, k * n)
            out += template
        del out[size:]
        if len(out) < size:
            out += self.data[: size - len(out)]
        return bytes(out)

    def read(self, fetch_offset: int, max_bytes: int, min_one_message: bool, hard_max_bytes_limit: bool) -> ReadResult:
        """Kafka's LogSegment.read + ReplicaManager.readFromLog for one partition.

        minOneMessage lets the first batch exceed max_bytes; otherwise the slice is cut at max_bytes, which can
        leave a partial batch. If even the first batch does not fit and the request is v3+, return no records.
        """
        if fetch_offset < self.log_start_offset or fetch_offset > self.log_end_offset:
            return ReadResult(b"", self.high_watermark, self.log_start_offset, error_code=1)
        in_filler = fetch_offset < self.filled
        start = 0  # where the read starts in the appended data
        if in_filler:
            first_size, available = len(self.filler), self._filler_bytes(fetch_offset) + len(self.data)
        else:
            pos = self._position(fetch_offset)
            if pos is None:
                return ReadResult(b"", self.high_watermark, self.log_start_offset)
            start = pos
            first_size, available = self._batch_size(bisect.bisect_right(self.positions, pos) - 1), len(self.data) - pos
        adjusted = max(max_bytes, first_size) if min_one_message else max_bytes
        fetch_size = max(min(available, adjusted), 0)
        if adjusted < first_size and not hard_max_bytes_limit:
            # Kafka's LogSegment returns no records for a 0-byte limit, else the cut batch that readFromLog then
            # drops (firstEntryIncomplete); only the latter loses the read's aborted-transaction list.
            return ReadResult(b"", self.high_watermark, self.log_start_offset, first_entry_incomplete=adjusted > 0)
        records = self._filler_read(fetch_offset, fetch_size) if in_filler else bytes(self.data[start : start + fetch_size])
        return ReadResult(records, self.high_watermark, self.log_start_offset)

    def _position(self, offset: int) -> int | None:
        if offset >= self.log_end_offset or not self.bases:
            return None
        index = bisect.bisect_right(self.bases, offset) - 1
        return self.positions[max(index, 0)]

    def _batch_size(self, index: int) -> int:
        end = self.positions[index + 1] if index + 1 < len(self.positions) else len(self.data)
        return end - self.positions[index]

    def offset_for_timestamp(self, timestamp: int) -> int:
        """ListOffsets: -2 earliest, -1 latest; other timestamps answered with the log end (not indexed)."""
        if timestamp == -2:
            return self.log_start_offset
        return self.log_end_offset


@dataclass(slots=True)
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: list[PartitionLog]


class TopicMap:
    """All topics of the broker, by name and by id (the metadata cache's topicIdsToNames)."""

    def __init__(self) -> None:
        self._by_name: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}

    def create(self, name: str, partitions: int, topic_id: uuid.UUID | None = None) -> Topic:
        if name in self._by_name:
            raise KeyError(name)
        topic = Topic(name, topic_id or uuid.uuid4(), [PartitionLog() for _ in range(partitions)])
        self._by_name[name] = topic
        self._by_id[topic.topic_id] = topic
        return topic

    def get(self, name: str | None) -> Topic | None:
        return self._by_name.get(name) if name is not None else None

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def names_by_id(self) -> dict[uuid.UUID, str]:
        return {tid: t.name for tid, t in self._by_id.items()}

    def partition(self, name: str | None, index: int) -> PartitionLog | None:
        topic = self.get(name)
        if topic is None or not 0 <= index < len(topic.partitions):
            return None
        return topic.partitions[index]

    def __iter__(self):
        return iter(self._by_name.values())

    def __contains__(self, name: str) -> bool:
        return name in self._by_name
