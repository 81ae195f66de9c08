"""Walk a Records blob's batch headers without decompressing anything.

A Fetch response's Records field is a concatenation of record batches (magic 2) or legacy message sets
(magic 0/1). Counts and sizes come from the headers alone; the payload is never touched. Brokers may cut the
last batch short to honour byte limits (KIP-74), so a trailing partial batch is reported, never an error.
"""

from __future__ import annotations

from struct import Struct
from typing import NamedTuple

_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
_OFFSET_SIZE = Struct(">qi")  # baseOffset / offset, batchLength / message size
_MAGIC_AT = 16  # offset i64 + length i32 + (partitionLeaderEpoch | crc) i32
_V2_ATTR = Struct(">h")  # at 21
_V2_COUNT = Struct(">i")  # at 57
_V2_HEADER = 61  # bytes of a magic 2 batch header
# batchLength at 8, magic at 16, attributes at 21, recordCount at 57 (baseOffset, epoch, crc and the rest skipped)
_V2_FIELDS = Struct(">8xi4xb4xh34xi")
_LEGACY_HEADER = 12 + 4 + 1 + 1  # offset, size, crc, magic, attributes


class RecordsSummary(NamedTuple):
    batches: int  # whole batches (legacy: whole top-level messages)
    records: int  # records in the whole batches (a compressed legacy wrapper counts as one)
    compression: str | None  # codec name, "mixed", or None when there is no whole batch
    partial_bytes: int  # bytes of a trailing partial batch (0 when the blob ends on a boundary)


EMPTY = RecordsSummary(0, 0, None, 0)


def summarize(blob: bytes | bytearray | memoryview | None) -> RecordsSummary:
    """Batches, records, compression and trailing partial bytes of a Records blob."""
    if not blob:
        return EMPTY
    end = len(blob)
    pos = 0
    batches = records = 0
    codecs = 0  # bit set of codec ids seen; compression name derived at the end
    unpack_v2 = _V2_FIELDS.unpack_from
    unpack_os = _OFFSET_SIZE.unpack_from
    # Magic 2 batches (all of a modern broker's output) are read with one unpack of the 61-byte header.
    while end - pos >= _V2_HEADER:
        length, magic, attributes, count = unpack_v2(blob, pos)
        nxt = pos + 12 + length
        if magic < 2 or length < 0 or nxt > end or length + 12 < _V2_HEADER:
            break
        codecs |= 1 << (attributes & 7)
        records += count
        batches += 1
        pos = nxt
    while end - pos >= 12:
        _, length = unpack_os(blob, pos)
        nxt = pos + 12 + length
        if length < 0 or nxt > end or end - pos < _MAGIC_AT + 1:
            break
        magic = blob[pos + _MAGIC_AT]
        if magic >= 2:
            if length + 12 < _V2_HEADER:
                break  # a batch too short for its own header: treat the rest as unusable
            codecs |= 1 << (_V2_ATTR.unpack_from(blob, pos + 21)[0] & 7)
            records += _V2_COUNT.unpack_from(blob, pos + 57)[0]
        else:
            if length + 12 < _LEGACY_HEADER:
                break
            codecs |= 1 << (blob[pos + 17] & 7)
            records += 1  # a compressed wrapper is one record as far as we look
        batches += 1
        pos = nxt
    if not batches:
        return RecordsSummary(0, 0, None, end - pos)
    if codecs & (codecs - 1):
        name = "mixed"
    else:
        idx = codecs.bit_length() - 1
        name = _CODECS[idx] if idx < len(_CODECS) else f"codec{idx}"
    return RecordsSummary(batches, records, name, end - pos)
