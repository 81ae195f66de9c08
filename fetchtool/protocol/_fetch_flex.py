"""Fetch v12-v18 bodies read straight into fetchtool's rows: the decode fast path.

kio reads a body into its own entities and _fetch_kio turns those into rows; on the benchmark capture that is
70% of the Kafka layer's time (benchmarks/bench_codec.py prints both paths side by side). Here one precompiled
struct unpack per partition entry gives the row directly. The layouts are Kafka's FetchRequest.json and
FetchResponse.json for the flexible versions.

This path only takes the plain shape that real consumer traffic has: no tagged fields below the top level, no
null where the schema forbids it, error codes kio knows. Anything else raises Unhandled and the caller decodes
the body with kio (and kafka-python after it), so those layouts stay the judges of every unusual body. The
tests check that both paths give identical rows for every version (tests/protocol/test_codec_roundtrip.py).
"""

from __future__ import annotations

import uuid
from struct import Struct

from .._fast import fast_constructor
from ..exchange import ForgottenPartition, RequestPartition, ResponsePartition
from .codec import ZERO_UUID, CodecError, FetchRequestBody, FetchResponseBody, Rows
from .packed import READ_REPLICA, RESPONSE_LAYOUT, OddEntry, PackedEntries
from .records import summarize


class Unhandled(Exception):
    """Not the plain shape this path reads: decode the body with kio instead."""


# The error codes kio knows (kio.schema.errors.ErrorCode, kio 0.6.5: -1 to 133, every one), written out so that
# the fast path never imports kio: that import cost every decode ~20 ms with warm caches (python -X importtime),
# over 0.2 s cold. tests/protocol/test_codec_roundtrip.py holds it to kio's list.
KNOWN_ERRORS = frozenset(range(-1, 134))
_ZERO_ID = bytes(16)
_new = tuple.__new__
_request_body = fast_constructor(FetchRequestBody)  # one per Fetch request and response (fetchtool._fast)
_response_body = fast_constructor(FetchResponseBody)

_REQ_HEAD_14 = Struct(">iiiibii")  # replica id, max wait, min bytes, max bytes, isolation, session id, epoch
_REQ_HEAD_15 = Struct(">iiibii")  # v15+: the replica id moved into the ReplicaState tagged field
# partition, current leader epoch, fetch offset, last fetched epoch, log start offset, max bytes, tagged fields
_REQ_PART = Struct(">iiqiqiB")
_RESP_HEAD = Struct(">ihi")  # throttle ms, error code, session id
# partition, error code, high watermark, last stable offset, log start offset; then, when the aborted
# transactions are null (every read_uncommitted consumer), the null marker and the preferred read replica; then,
# when the records are null or empty (most partitions of most responses), their length and the tagged fields.
# The 37 bytes never reach past the partition entry itself: records or the enclosing tagged fields follow.
_RESP_PART = Struct(">ihqqqBiBB")
_RESP_PART_HEAD = 30
_RESP_PART_PLAIN = 35
_I32 = Struct(">i")
_ABORTED = 17  # producer id i64, first offset i64, no tagged fields


def _uvarint(buf, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise Unhandled("varint too long")


def _string(buf, pos: int) -> tuple[str, int]:
    n, pos = _uvarint(buf, pos)
    if n == 0:
        raise Unhandled("null string")
    end = pos + n - 1
    if end > len(buf):
        raise Unhandled("string past the end")
    return str(buf[pos:end], "utf-8"), end


def _count(buf, pos: int) -> tuple[int, int]:
    """A non-null compact array's length."""
    b = buf[pos]
    if b < 0x80:
        n, pos = b, pos + 1
    else:
        n, pos = _uvarint(buf, pos)
        if n > len(buf) - pos + 1:
            # More entries than bytes left: damaged beyond doubt, so fail here rather than fall back. (kio_guard
            # keeps such a count from kio either way; the fallbacks would only end in kafka-python's vaguer
            # "index out of bounds" instead of this line.)
            raise CodecError(f"array of {n - 1:,} entries in {len(buf) - pos:,} bytes")
    if n == 0:
        raise Unhandled("null array")
    return n - 1, pos


class _TopicIds(dict):
    """16 wire bytes -> the UUID string (a topic's id repeats in every request of a session)."""

    def __missing__(self, raw: bytes) -> str:
        s = self[raw] = ZERO_UUID if raw == _ZERO_ID else str(uuid.UUID(bytes=raw))
        return s


_topic_ids = _TopicIds()


def _topic(buf, pos: int, version: int, names) -> tuple[str | None, str | None, int]:
    if version >= 13:
        raw = bytes(buf[pos:pos + 16])
        if len(raw) < 16:
            raise Unhandled("topic id past the end")
        if len(_topic_ids) > 65536:
            _topic_ids.clear()  # a bound for adversarial input; real captures hold a few hundred topics
        tid = _topic_ids[raw]
        return (names.get(tid) if names else None), tid, pos + 16
    name, pos = _string(buf, pos)
    return name, None, pos


def _no_tags(buf, pos: int) -> int:
    if buf[pos]:
        raise Unhandled("tagged fields")
    return pos + 1


# A consumer's requests repeat most partition entries byte for byte (a partition's fetch offset stays until it
# gets records: 92% of the entries on the benchmark capture), so each topic's entries are kept by their bytes
# and a repeated one is the row already made: rows are immutable tuples, equal whichever request made them.
_ROWS: dict[tuple[str | None, str | None], dict[bytes, RequestPartition]] = {}
_ROWS_KEPT = 1 << 16  # rows kept, all topics together (~20 MB), then forgotten all at once: a bound for a
_kept = [0]           # capture of many sessions or many offsets; [rows kept now]


def _request_rows(name: str | None, tid: str | None) -> dict[bytes, RequestPartition]:
    """The rows made so far of the topic's entries, by their bytes."""
    if _kept[0] >= _ROWS_KEPT:
        _ROWS.clear()
        _kept[0] = 0
    made = _ROWS.get((name, tid))
    if made is None:
        made = _ROWS[name, tid] = {}
    return made


def read_request(body, version: int, names, rows: Rows = True) -> FetchRequestBody:
    buf = body if type(body) is memoryview else memoryview(body)
    if version <= 14:
        replica_id, max_wait, min_bytes, max_bytes, isolation, session_id, epoch = _REQ_HEAD_14.unpack_from(buf, 0)
        pos = _REQ_HEAD_14.size
    else:
        max_wait, min_bytes, max_bytes, isolation, session_id, epoch = _REQ_HEAD_15.unpack_from(buf, 0)
        replica_id, pos = -1, _REQ_HEAD_15.size
    if rows is True:
        partitions, forgotten, pos = _request_entries(body, buf, pos, version, names)
    else:
        partitions, forgotten, pos = _counted_request_entries(buf, pos, version, names, rows == "packed")
    rack_id, pos = _string(buf, pos)
    pos = _no_tags(buf, pos)
    if pos != len(buf):
        raise Unhandled("bytes after the body")
    return _request_body(
        replica_id=replica_id, max_wait_ms=max_wait, min_bytes=min_bytes, max_bytes=max_bytes,
        isolation_level=isolation, session_id=session_id, session_epoch=epoch, rack_id=rack_id,
        partitions=partitions, forgotten=forgotten,
    )


def _request_entries(body, buf: memoryview, pos: int, version: int, names
                     ) -> tuple[tuple[RequestPartition, ...], tuple[ForgottenPartition, ...], int]:
    """The request's partitions and forgotten partitions from `pos`, and the position after them."""
    entries: list[RequestPartition] = []
    append = entries.append
    unpack = _REQ_PART.unpack_from
    size = _REQ_PART.size
    RP = RequestPartition
    data = body if type(body) is bytes else bytes(buf)  # entries' bytes, as keys of the rows made of them
    kept = _kept
    topics, pos = _count(buf, pos)
    for _ in range(topics):
        name, tid, pos = _topic(buf, pos, version, names)
        n, pos = _count(buf, pos)
        made = _request_rows(name, tid)
        for _ in range(n):
            raw = data[pos:pos + size]
            row = made.get(raw)
            if row is None:
                p, cle, offset, lfe, lso, max_part, tags = unpack(buf, pos)
                if tags:
                    raise Unhandled("tagged fields")
                row = made[raw] = _new(RP, (name, tid, p, offset, max_part, lso, cle, lfe, -1, -1))
                kept[0] += 1
            append(row)
            pos += size
        pos = _no_tags(buf, pos)
    forgotten: list[ForgottenPartition] = []
    topics, pos = _count(buf, pos)
    for _ in range(topics):
        name, tid, pos = _topic(buf, pos, version, names)
        n, pos = _count(buf, pos)
        for _ in range(n):
            forgotten.append(ForgottenPartition(name, tid, _I32.unpack_from(buf, pos)[0]))
            pos += 4
        pos = _no_tags(buf, pos)
    return tuple(entries), tuple(forgotten), pos


def read_response(body, version: int, names, keep_records: bool, rows: Rows = True) -> FetchResponseBody:
    buf = body if type(body) is memoryview else memoryview(body)  # record blobs are sliced, not copied
    throttle, error, session_id = _RESP_HEAD.unpack_from(buf, 0)
    if error not in KNOWN_ERRORS:
        raise Unhandled("unknown error code")
    if rows is True or keep_records:
        entries, blobs, pos = _response_entries(buf, _RESP_HEAD.size, version, names, keep_records)
    else:
        entries, blobs, pos = _counted_response_entries(buf, _RESP_HEAD.size, version, names, rows == "packed")
    pos = _no_tags(buf, pos)
    if pos != len(buf):
        raise Unhandled("bytes after the body")
    return _response_body(
        throttle_time_ms=throttle, error_code=error, session_id=session_id, partitions=entries, records=blobs,
    )


def _response_entries(buf: memoryview, pos: int, version: int, names, keep_records: bool
                      ) -> tuple[tuple[ResponsePartition, ...], tuple[bytes | None, ...] | None, int]:
    """The response's partitions from `pos` (and, `keep_records`, each one's records), and the position after
    them."""
    end = len(buf)
    entries: list[ResponsePartition] = []
    append = entries.append
    blobs: list[bytes | None] | None = [] if keep_records else None
    unpack = _RESP_PART.unpack_from
    size = _RESP_PART.size
    known = KNOWN_ERRORS
    RP = ResponsePartition
    topics, pos = _count(buf, pos)
    for _ in range(topics):
        name, tid, pos = _topic(buf, pos, version, names)
        n, pos = _count(buf, pos)
        for _ in range(n):
            index, err, hw, lso, log_start, b, prr, n_rec, tags = unpack(buf, pos)
            if err not in known:
                raise Unhandled("unknown error code")
            if b == 0 and n_rec < 2:  # no aborted transactions, no records: the whole entry is read
                if tags:
                    raise Unhandled("tagged fields")
                pos += size
                append(_new(RP, (name, tid, index, err, hw, lso, log_start, prr, -1, -1, 0, 0, 0, None, -1, -1)))
                if blobs is not None:
                    blobs.append(b"" if n_rec else None)
                continue
            aborted, prr, recs, pos = _entry_rest(buf, pos, b, prr, end)
            if recs:
                batches, count, compression, _partial = summarize(recs)
                n_bytes = len(recs)
            else:
                n_bytes = batches = count = 0
                compression = None
            append(_new(RP, (name, tid, index, err, hw, lso, log_start, prr, -1, aborted, n_bytes, batches, count,
                             compression, -1, -1)))
            if blobs is not None:
                blobs.append(None if recs is None else bytes(recs))
        pos = _no_tags(buf, pos)
    return tuple(entries), None if blobs is None else tuple(blobs), pos


def _entry_rest(buf: memoryview, pos: int, b: int, prr: int, end: int
                ) -> tuple[int, int, memoryview | None, int]:
    """The rest of a response entry that has aborted transactions or records (`pos`: the entry's start, `b`: the
    first byte of its aborted transactions, `prr`: its preferred read replica if they are null): (aborted
    transactions, -1 for null; the preferred read replica; the records, None for null; the position after the
    entry)."""
    if b == 0:  # aborted transactions null
        aborted = -1
        pos += _RESP_PART_PLAIN
    else:  # a compact array of them (read_committed)
        n_ab, pos = (b, pos + _RESP_PART_HEAD + 1) if b < 0x80 else _uvarint(buf, pos + _RESP_PART_HEAD)
        aborted = n_ab - 1
        for _ in range(aborted):
            if buf[pos + 16]:
                raise Unhandled("tagged fields")
            pos += _ABORTED
        prr = _I32.unpack_from(buf, pos)[0]
        pos += 4
    b = buf[pos]  # records: compact nullable bytes
    if b < 0x80:
        n_rec = b
        pos += 1
    else:
        n_rec, pos = _uvarint(buf, pos)
    recs = None
    if n_rec:
        stop = pos + n_rec - 1
        if stop > end:
            raise Unhandled("records past the end")
        recs = buf[pos:stop]
        pos = stop
    if buf[pos]:
        raise Unhandled("tagged fields")  # e.g. a diverging epoch: kio reads those
    return aborted, prr, recs, pos + 1


# -- counts only, and packed -------------------------------------------------------------------------------
# `decode --format jsonl` writes each exchange's counts (partitions, forgotten, response partitions, partition
# errors, records bytes), never a partition's fields. With rows=False the bodies are read and checked exactly as
# above, entry for entry (what raises there raises here, so the same bodies go to kio), but each entry becomes
# a stand-in row holding only what the counts are made of: the error code and the records' length of a
# response entry; nothing of a request entry. Only the loops over the entries differ: the head, the tail and a
# response entry's part after its fixed fields (_entry_rest) are the same code. tests/protocol/
# test_fetch_fast_path.py holds the counts to the rows'. Such bodies are only for a caller that uses nothing else
# (decoder.DecodeRun(rows=False)).
# rows="packed" (`decode --out`): the same loops also keep each topic's entries as their bytes (packed.py), a
# copy per topic; only an entry with records or aborted transactions costs more than its count.
REQUEST_STAND_IN = RequestPartition(None, None, -1, -1, -1, -1, -1, -1)
FORGOTTEN_STAND_IN = ForgottenPartition(None, None, -1)
_TAGS_AT = _REQ_PART.size - 1
_RESP_COUNTED = Struct(">4xh24xB4xBB")  # error code, aborted transactions marker, records length, tagged fields
assert _RESP_COUNTED.size == _RESP_PART.size == RESPONSE_LAYOUT[0] and READ_REPLICA == _RESP_PART_HEAD + 1
_READ_REPLICA_ON = Struct(">xixx")  # packed: an odd entry's preferred read replica and the rest of its record


def _response_stand_in(error_code: int, records_bytes: int) -> ResponsePartition:
    return _new(ResponsePartition, (None, None, -1, error_code, -1, -1, -1, -1, -1, -1, records_bytes, 0, 0, None,
                                    -1, -1))


class _PlainStandIns(dict):
    """error code -> the stand-in of an entry without records (one row shared by them all)."""

    def __missing__(self, error_code: int) -> ResponsePartition:
        row = self[error_code] = _response_stand_in(error_code, 0)
        return row


_plain_stand_ins = _PlainStandIns()


def _counted_request_entries(buf: memoryview, pos: int, version: int, names, packed: bool = False
                             ) -> tuple[tuple[RequestPartition, ...], tuple[ForgottenPartition, ...], int]:
    """_request_entries' checks and counts, as stand-ins (`packed`: PackedEntries)."""
    blocks: list | None = [] if packed else None
    gone: list | None = [] if packed else None
    partitions, pos = _counted_topics(buf, pos, version, names, _REQ_PART.size, _TAGS_AT, "partitions", blocks)
    forgotten, pos = _counted_topics(buf, pos, version, names, 4, None, "forgotten partitions", gone)
    requested = (REQUEST_STAND_IN,) * partitions
    dropped = (FORGOTTEN_STAND_IN,) * forgotten
    if blocks is not None and gone is not None:
        return PackedEntries(requested, blocks), PackedEntries(dropped, gone), pos
    return requested, dropped, pos


def _counted_topics(buf: memoryview, pos: int, version: int, names, size: int, tags_at: int | None, what: str,
                    kept: list | None) -> tuple[int, int]:
    """An array of topics whose entries are `size` bytes each (a request's partitions, or its forgotten ones),
    checked as _request_entries checks them (each entry's tagged-field count at `tags_at`, where it has one):
    how many entries, and the position after the array. `kept`: each topic's entries appended as their bytes."""
    entries = 0
    topics, pos = _count(buf, pos)
    for _ in range(topics):
        name, tid, pos = _topic(buf, pos, version, names)
        n, pos = _count(buf, pos)
        stop = pos + n * size
        if stop > len(buf):
            raise Unhandled(f"{what} past the end")
        if tags_at is not None and n and bytes(buf[pos + tags_at:stop:size]).count(0) != n:
            raise Unhandled("tagged fields")
        if kept is not None and n:
            kept.append((name, tid, n, bytes(buf[pos:stop])))
        entries += n
        pos = _no_tags(buf, stop)
    return entries, pos


def _counted_response_entries(buf: memoryview, pos: int, version: int, names, packed: bool = False
                              ) -> tuple[tuple[ResponsePartition, ...], None, int]:
    """_response_entries' checks, each entry a stand-in holding its error code and records length (`packed`:
    PackedEntries, each topic's entries as their bytes, an odd one as a record of the plain entry's size)."""
    end = len(buf)
    rows: list[ResponsePartition] = []
    append = rows.append
    unpack = _RESP_COUNTED.unpack_from
    size = _RESP_COUNTED.size
    known = KNOWN_ERRORS
    plain = _plain_stand_ins
    blocks: list | None = [] if packed else None
    odd: list[OddEntry] = []
    topics, pos = _count(buf, pos)
    for _ in range(topics):
        name, tid, pos = _topic(buf, pos, version, names)
        n, pos = _count(buf, pos)
        run = pos  # packed: where the plain entries not yet kept begin
        pieces: list = []
        for _ in range(n):
            err, b, n_rec, tags = unpack(buf, pos)
            if err not in known:
                raise Unhandled("unknown error code")
            if b == 0 and n_rec < 2:  # no aborted transactions, no records: the whole entry is read
                if tags:
                    raise Unhandled("tagged fields")
                pos += size
                append(plain[err])
                continue
            start = pos
            aborted, prr, recs, pos = _entry_rest(buf, pos, b, -1, end)
            append(_response_stand_in(err, len(recs)) if recs else plain[err])
            if blocks is not None:  # the entries before it, and its own record
                if b == 0:  # the preferred read replica is where a plain entry has it
                    pieces += (buf[run:start + _RESP_PART_PLAIN], b"\0\0")
                else:
                    pieces += (buf[run:start + _RESP_PART_HEAD], _READ_REPLICA_ON.pack(prr))
                batches, count, compression, _partial = summarize(recs) if recs else (0, 0, None, 0)
                odd.append((len(rows) - 1, aborted, len(recs) if recs else 0, batches, count, compression))
                run = pos
        if blocks is not None and n:
            pieces.append(buf[run:pos])
            blocks.append((name, tid, n, b"".join(pieces)))
        pos = _no_tags(buf, pos)
    if blocks is not None:
        return PackedEntries(tuple(rows), blocks, odd), None, pos
    return tuple(rows), None, pos
