"""Exchanges as columnar tables: the `exchanges` and `partitions` tables that `decode --out` writes as Parquet.

Rows are streamed: partition entries are buffered in small batches (32,768 entries, or those of 512 exchanges)
and the exchanges' rows by 512, each batch written as one Parquet row group, so decoding a 1 GB capture never
holds more than a few batches of rows in memory. Batches are Arrow record batches built column by column and handed straight to pyarrow's Parquet
writer: no per-row dicts, and no dataframe library in between (importing polars alone cost `decode --out` a third
of a second). `decode --out` reads Fetch v12+ bodies packed (protocol/packed.py): each topic's partition entries
are the wire's bytes, and a column is made of a batch's bytes with a few slice assignments per field, with no
Python work per entry. Entries that come as rows (other versions, kio's fallback, the Spark engine) are
transposed with one zip per kind, their integer columns packed by struct in one call each; columns that repeat
a value (the exchange's keys per entry, -1 for what does not apply, a batch's one topic) are built from repeated
bytes either way. One thread writes the batches, pyarrow encoding and compressing them without the GIL while
the decoder goes on.
"""

from __future__ import annotations

import gc
import queue
import sys
import threading
from array import array
from collections.abc import Iterable, Sequence
from itertools import chain, groupby, repeat
from operator import attrgetter
from pathlib import Path
from struct import Struct, pack
from struct import error as StructError
from typing import Any

import pyarrow as pa

# The writer that pyarrow.parquet.ParquetWriter wraps, given here the options that wrapper fills in (_OPTIONS):
# importing pyarrow.parquet also imports pyarrow's filesystems (and ssl), 20-45 ms of every `decode --out`
# (python -X importtime, perf stat) for nothing this module uses. pyarrow._parquet is not pyarrow's public API:
# a pyarrow that moves it gets the public wrapper, which takes the same arguments.
try:
    from pyarrow._parquet import ParquetWriter
except ImportError:  # pragma: no cover - pyarrow 14-26 have it
    from pyarrow.parquet import ParquetWriter

from fetchtool.exchange import Exchange, ForgottenPartition, RequestPartition, ResponsePartition
from fetchtool.protocol.packed import FORGOTTEN_LAYOUT, ODD_FIELDS, REQUEST_LAYOUT, RESPONSE_LAYOUT, PackedEntries

# Column types by kind; the polars names are what the Spark engine's schemas are written in (EXCHANGE_SCHEMA).
_ARROW = {"utf8": pa.large_string(), "i64": pa.int64(), "i32": pa.int32(), "i16": pa.int16(), "i8": pa.int8(),
          "f64": pa.float64()}
_POLARS = {"utf8": "Utf8", "i64": "Int64", "i32": "Int32", "i16": "Int16", "i8": "Int8", "f64": "Float64"}

EXCHANGE_COLUMNS: dict[str, str] = {
    "file": "utf8",
    "conn": "i64",
    "request_frame": "i64",
    "response_frame": "i64",
    "ts": "f64",
    "response_ts": "f64",
    "client": "utf8",
    "broker": "utf8",
    "api_key": "i16",
    "api_version": "i16",
    "correlation_id": "i32",
    "client_id": "utf8",
    "client_software": "utf8",
    "replica_id": "i32",
    "session_id": "i32",
    "session_epoch": "i32",
    "max_wait_ms": "i32",
    "min_bytes": "i32",
    "max_bytes": "i32",
    "isolation_level": "i8",
    "rack_id": "utf8",
    "partitions": "i32",
    "forgotten": "i32",
    "error_code": "i16",
    "response_session_id": "i32",
    "throttle_time_ms": "i32",
    "response_partitions": "i32",
    "partition_errors": "i32",
    "records_bytes": "i64",
    "request_bytes": "i64",
    "response_bytes": "i64",
}

# One partitions table for the three kinds of entry; columns a kind does not have are null.
_KEY_COLUMNS: dict[str, str] = {
    "file": "utf8",
    "conn": "i64",
    "request_frame": "i64",
    "correlation_id": "i32",
    "api_key": "i16",
    "entry": "utf8",  # "request" | "forgotten" | "response"
}
# record_count sums the batches' int32 counts, so it can pass an int32 (two damaged batch headers do)
_INT64 = {"fetch_offset", "log_start_offset", "high_watermark", "last_stable_offset", "records_bytes",
          "record_count", "snapshot_end_offset"}
_UTF8 = {"topic", "topic_id", "compression"}


def _field_kinds(fields: Iterable[str]) -> dict[str, str]:
    return {f: "utf8" if f in _UTF8 else "i64" if f in _INT64 else "i32" for f in fields}


PARTITION_COLUMNS: dict[str, str] = {**_KEY_COLUMNS, **_field_kinds(RequestPartition._fields),
                                     **_field_kinds(ResponsePartition._fields)}
EXCHANGE_ARROW = pa.schema([(c, _ARROW[k]) for c, k in EXCHANGE_COLUMNS.items()])
PARTITION_ARROW = pa.schema([(c, _ARROW[k]) for c, k in PARTITION_COLUMNS.items()])

# The exchanges table's row of an exchange, its columns as Exchange attributes (the count of response partitions
# is a property), in one call.
_EXCHANGE_ROW = attrgetter(*("response_partition_count" if c == "response_partitions" else c
                             for c in EXCHANGE_COLUMNS))
_KINDS = (("request", "request_partitions", RequestPartition._fields),
          ("forgotten", "forgotten_partitions", ForgottenPartition._fields),
          ("response", "response_partitions", ResponsePartition._fields))
_VALUE_TYPES = [(c, _ARROW[k]) for c, k in PARTITION_COLUMNS.items() if c not in _KEY_COLUMNS]
_KEY_FIELDS = ("file", "conn", "request_frame", "correlation_id", "api_key")


def __getattr__(name: str) -> Any:
    """EXCHANGE_SCHEMA / PARTITION_SCHEMA: the columns with polars types, for the Spark engine. Made on first
    use, so writing Parquet never imports polars."""
    if name in ("EXCHANGE_SCHEMA", "PARTITION_SCHEMA"):
        import polars as pl

        columns = EXCHANGE_COLUMNS if name == "EXCHANGE_SCHEMA" else PARTITION_COLUMNS
        return {c: getattr(pl, _POLARS[k]) for c, k in columns.items()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def exchange_row(ex: Exchange) -> dict:
    """One row of the exchanges table (both engines): the JSONL row plus the connection id and rack id."""
    return ex.to_json_row() | {"conn": ex.conn, "rack_id": ex.rack_id}


def exchanges_batch(exchanges: list[Exchange]) -> pa.RecordBatch:
    return _exchange_rows_batch(list(map(_EXCHANGE_ROW, exchanges)))


def _exchange_rows_batch(rows: list[tuple]) -> pa.RecordBatch:
    """The exchanges table's rows (_EXCHANGE_ROW) as a batch, a column at a time."""
    if not rows:
        return _empty(EXCHANGE_ARROW)
    columns = [_array(values, t) for values, t in zip(zip(*rows), EXCHANGE_ARROW.types)]
    return pa.RecordBatch.from_arrays(columns, schema=EXCHANGE_ARROW)


def partitions_batch(exchanges: list[Exchange]) -> pa.RecordBatch:
    """Every request entry of the batch, then every forgotten one, then every response one (as the rows of
    each kind, in exchange order)."""
    pieces = partition_pieces(exchanges)
    if not pieces:
        return _empty(PARTITION_ARROW)
    if len(pieces) == 1:
        return pieces[0]
    return pa.RecordBatch.from_arrays([pa.concat_arrays([p.column(i) for p in pieces])
                                       for i in range(len(PARTITION_ARROW))], schema=PARTITION_ARROW)


def partition_pieces(exchanges: list[Exchange]) -> list[pa.RecordBatch]:
    """partitions_batch's rows as record batches, a kind of entry after the other (none for a kind without
    entries), each kind's exchanges with packed entries (protocol/packed.py) in a batch of their own: the
    Parquet writer takes them as they are, one row group, without copying them into one batch first."""
    pieces = []
    for entry, attr, fields in _KINDS:
        owners = [ex for ex in exchanges if getattr(ex, attr)]  # the exchanges with entries of this kind
        for packed, run in groupby(owners, lambda ex: type(getattr(ex, attr)) is PackedEntries):  # noqa: B023
            group = list(run)
            entries = [getattr(ex, attr) for ex in group]
            counts = list(map(len, entries))
            n = sum(counts)
            if packed:
                values = _packed_columns(entry, entries, n)
            else:
                values = dict(zip(fields, _kind_columns(list(chain.from_iterable(entries)), fields)))
            columns = [_repeated([getattr(ex, k) for ex in group], counts, k) for k in _KEY_FIELDS]
            columns.append(_repeated([entry], [n], "entry"))
            columns += [values[c] if c in values else _filled(None, n, t) for c, t in _VALUE_TYPES]
            pieces.append(pa.RecordBatch.from_arrays(columns, schema=PARTITION_ARROW))
    return pieces


# -- packed entries (protocol/packed.py): columns straight from the wire's bytes ----------------------------
_LAYOUTS = {"request": REQUEST_LAYOUT, "forgotten": FORGOTTEN_LAYOUT, "response": RESPONSE_LAYOUT}
_WIDTHS = {"i64": 8, "i32": 4}
_SIGN = bytes(0xFF if b >= 0x80 else 0 for b in range(256))  # a byte -> the bytes extending its sign
_LITTLE = sys.byteorder == "little"
# Fields of a kind that are not in its packed bytes, and hold one value in every plain entry: a response entry
# with records or aborted transactions has its own (PackedEntries.odd).
_PLAIN = {"snapshot_end_offset": -1, "snapshot_epoch": -1, "diverging_epoch": -1, "aborted_transactions": -1,
          "records_bytes": 0, "record_batches": 0, "record_count": 0, "compression": None}
_PLAIN_INTS = {f: v for f, v in _PLAIN.items() if v is not None}
_KIND_FIELDS = {entry: fields for entry, _attr, fields in _KINDS}


def _packed_columns(entry: str, packed: list[PackedEntries], n: int) -> dict[str, pa.Array]:
    """The columns of a kind's n packed entries (the bodies' `packed`, in order), by field."""
    stride, layout = _LAYOUTS[entry]
    blocks = list(chain.from_iterable(body.blocks for body in packed))
    topics, ids, sizes, data = zip(*blocks) if blocks else ((), (), (), ())
    block = b"".join(data)
    assert len(block) == n * stride, "packed entries of another layout"
    values = {f: _wire_column(block, n, stride, offset, width, PARTITION_COLUMNS[f])
              for f, (offset, width) in layout.items()}
    values["topic"] = _repeated(topics, sizes, "topic")
    values["topic_id"] = _repeated(ids, sizes, "topic_id")
    if any(body.odd for body in packed):
        values.update(_odd_columns(packed, n))
    for f in _KIND_FIELDS[entry]:
        if f not in values:
            values[f] = _filled(_PLAIN[f], n, _ARROW[PARTITION_COLUMNS[f]])
    return values


_FILLED: dict[tuple[pa.DataType, int | None], pa.Array] = {}  # the longest column of each made so far
_FILLED_KEPT = 1 << 16  # rows kept per column (512 KB): a `decode --out` batch is about half that


def _filled(value: int | None, n: int, arrow_type: pa.DataType) -> pa.Array:
    """A column of n times `value` (None: nulls): the fields a kind of entry does not have, and those that hold
    one value in every plain entry, are the same columns batch after batch, so each is a slice of one made once
    (making them anew cost as much as a few columns' worth of real values: fresh memory, zeroed)."""
    made = _FILLED.get((arrow_type, value))
    if made is None or len(made) < n:
        if value is None:
            made = pa.nulls(n, arrow_type)
        else:
            packer = _PACKERS[_KIND_OF[arrow_type]]
            made = pa.Array.from_buffers(arrow_type, n, [None, pa.py_buffer(packer.pack(value) * n)])
        if n <= _FILLED_KEPT:
            _FILLED[arrow_type, value] = made
    return made if len(made) == n else made.slice(0, n)


def _odd_columns(packed: list[PackedEntries], n: int) -> dict[str, pa.Array]:
    """The response entries' fields their packed bytes do not hold: each a column of the plain entries' value
    but where an entry has its own (PackedEntries.odd), written in place (a Python step per odd entry)."""
    # Every value fits its column: a count is bounded by the body's length, record_count is an int64.
    aborted, size, batches, count = ints = [array(_TYPECODES[PARTITION_COLUMNS[f]], [_PLAIN_INTS[f]]) * n
                                            for f in ODD_FIELDS[:-1]]
    compression: list[str | None] = [None] * n
    first = 0  # the row of the body's first entry
    for body in packed:
        for i, n_aborted, n_bytes, n_batches, n_records, codec in body.odd:
            row = first + i
            aborted[row] = n_aborted
            size[row] = n_bytes
            batches[row] = n_batches
            count[row] = n_records
            compression[row] = codec
        first += len(body)
    columns = {f: pa.Array.from_buffers(_ARROW[PARTITION_COLUMNS[f]], n, [None, pa.py_buffer(data)])
               for f, data in zip(ODD_FIELDS, ints)}
    columns["compression"] = _array(compression, pa.large_string())
    return columns


def _wire_column(block: bytes, n: int, stride: int, offset: int, width: int, kind: str) -> pa.Array:
    """The big-endian integer of `width` bytes at `offset` in each of the n `stride`-byte entries of `block`, as
    an Arrow column of `kind`: its bytes moved into place a byte of every entry at a time (a slice each), the
    sign extended the same way to a wider column (a Kafka error code is an int16, the table's column int32)."""
    size = _WIDTHS[kind]
    out = bytearray(n * size)
    for k in range(width):  # the wire's k-th byte, most significant first
        out[(width - 1 - k if _LITTLE else size - width + k)::size] = block[offset + k::stride]
    if size > width:
        sign = block[offset::stride].translate(_SIGN)
        for at in range(width, size) if _LITTLE else range(size - width):
            out[at::size] = sign
    return pa.Array.from_buffers(_ARROW[kind], n, [None, pa.py_buffer(out)])


def _kind_columns(rows: list[tuple], fields: tuple[str, ...]) -> list[pa.Array]:
    """The entries of one kind as one typed column per field: zip turns the rows into columns in one call."""
    n = len(rows)
    # zip makes an iterator per row, each freed at once: counted as allocations, they set off a collection
    # every few batches that walked every live object (a sixth of this function's cost), for nothing to free
    collecting = gc.isenabled()
    gc.disable()
    try:
        return [_column(values, f, n) for values, f in zip(zip(*rows), fields)]
    finally:
        if collecting:
            gc.enable()


# The key columns repeat a value for every entry of an exchange: built from bytes repeated per run of rows,
# not from a Python list with a value per row.
_PACKERS = {"i64": Struct("=q"), "i32": Struct("=i"), "i16": Struct("=h"), "i8": Struct("=b")}
_KIND_OF = {t: k for k, t in _ARROW.items()}
_TYPECODES = {"i64": "q", "i32": "i"}  # array's, of the machine's byte order as Arrow's buffers


def _repeated(values: Sequence, counts: Sequence[int], name: str) -> pa.Array:
    """A column holding values[i] counts[i] times over, for each i in order."""
    kind = PARTITION_COLUMNS[name]
    try:
        if kind != "utf8":
            pack_one = _PACKERS[kind].pack
            data = b"".join([pack_one(v) * c for v, c in zip(values, counts)])
            return pa.Array.from_buffers(_ARROW[kind], sum(counts), [None, pa.py_buffer(data)])
        first = values[0] if values else None
        if values.count(first) == len(values):  # one text throughout (a batch's file, its kind of entry) or none
            if first is None:  # no topic id (before Fetch v13)
                return _filled(None, sum(counts), _ARROW[kind])
            return _repeated_text(first.encode(), sum(counts))
        # many runs (a batch's topics): a list converts faster than an array per run, and a list of their UTF-8
        # bytes faster than one of the texts (str.encode made them valid UTF-8: pyarrow need not check each)
        encoded = [v.encode() for v in values]
        return pa.array(list(chain.from_iterable(map(repeat, encoded, counts))),
                        pa.large_binary()).view(pa.large_string())
    except (AttributeError, TypeError, StructError, UnicodeEncodeError):  # a None, a value of another type, a
        pass  # lone surrogate: pa.array takes it or says what it is
    return _array(list(chain.from_iterable(map(repeat, values, counts))), _ARROW[kind])


_STEPS: dict[int, bytes] = {}  # by text length: the offsets 0, length, 2 * length, ... (as int64 bytes)
_STEPS_KEPT = 1 << 18  # rows of offsets kept per length (2 MB): a batch's run of one text is far shorter


def _repeated_text(text: bytes, count: int) -> pa.Array:
    """A large_string column of `count` times `text`: its offsets are a slice of the same steps every time."""
    size = len(text)
    steps = _STEPS.get(size, b"")
    need = 8 * (count + 1)
    if len(steps) < need:
        rows = count if count >= _STEPS_KEPT else min(_STEPS_KEPT, max(count, len(steps) // 4))  # room to grow
        steps = pack(f"={rows + 1}q", *(range(0, size * (rows + 1), size) if size else repeat(0, rows + 1)))
        if rows <= _STEPS_KEPT:
            _STEPS[size] = steps
    offsets = pa.py_buffer(steps)[:need] if len(steps) > need else pa.py_buffer(steps)
    return pa.Array.from_buffers(pa.large_string(), count, [None, offsets, pa.py_buffer(text * count)])


def _column(values: tuple, name: str, n: int) -> pa.Array:
    """One column of n values. The integers are packed by struct in one call (a few times faster than
    pa.array converts them); a column holding one value throughout (-1 for what does not apply, a batch's
    error code 0) is that value's bytes repeated, a text column holding one text or only None likewise."""
    kind = PARTITION_COLUMNS[name]
    first = values[0]
    if kind == "utf8":
        if (first is None or type(first) is str) and values[-1] == first and values.count(first) == n:
            if first is None:  # no topic id (before Fetch v13), or no topic name (v13+ without Metadata)
                return pa.nulls(n, _ARROW[kind])
            try:
                return _repeated_text(first.encode(), n)  # one topic, one compression codec
            except UnicodeEncodeError:  # a lone surrogate: _array writes it escaped
                pass
        return _array(values, _ARROW[kind])
    code = _PACKERS[kind].format[-1]
    try:
        # the last and middle values tell a column that varies at no cost; count() makes sure of the rest
        if type(first) is int and values[-1] == first == values[n >> 1] and values.count(first) == n:
            data = _PACKERS[kind].pack(first) * n
        else:
            data = pack(f"={n}{code}", *values)
    except StructError:  # a None, or a value out of range: pa.array says what it is
        return pa.array(values, type=_ARROW[kind])
    return pa.Array.from_buffers(_ARROW[kind], n, [None, pa.py_buffer(data)])


def _array(values: list | tuple, arrow_type: pa.DataType) -> pa.Array:
    """pa.array, but a text UTF-8 cannot hold (a lone surrogate: a capture file name that is not UTF-8, as Python
    reads it) is written escaped, as every report shows it (`cap\\udcff.pcap`), not refused with a traceback."""
    try:
        return pa.array(values, type=arrow_type)
    except UnicodeEncodeError:
        return pa.array([v.encode("utf-8", "backslashreplace").decode() if type(v) is str else v for v in values],
                        type=arrow_type)


def _empty(schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([], type=t) for t in schema.types], schema=schema)


# Batches handed to the writer thread and not yet taken: room for the writer to fall behind for a moment (on a
# busy machine) without stopping the decoder, a few MB each.
_IN_FLIGHT = 2
_WRITE_BATCH = 1 << 15
# What pyarrow.parquet.ParquetWriter passes by default (pyarrow 14 to 26): the same files as it writes.
_OPTIONS = {"version": "2.6", "data_page_version": "1.0", "writer_engine_version": "V2", "write_statistics": True,
            "use_compliant_nested_type": True, "store_schema": True}


class ParquetTables:
    """Streams exchanges into <out>/exchanges.parquet and <out>/partitions.parquet, one row group per batch."""

    def __init__(self, out_dir: str | Path, batch_exchanges: int = 512, batch_partitions: int = 32_768) -> None:
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.batch_exchanges = batch_exchanges  # exchanges per row group of either table, at most
        self.batch_partitions = batch_partitions  # partition entries (all three kinds) per row group, about
        # The exchanges' rows wait for a whole batch_exchanges (a row group of a hundred rows, on a capture of
        # many partitions per Fetch, took the writer three times as long as rows: in a row group of 512); their
        # partition entries go on as soon as there are batch_partitions.
        self._rows: list[tuple] = []
        self._pending: list[Exchange] = []
        self._pending_partitions = 0
        self._writers: dict[str, ParquetWriter] = {}
        # One thread writes the batches in order, as the decoder hands them on (_IN_FLIGHT at most waiting).
        self._writing: threading.Thread | None = None
        self._batches: queue.Queue[tuple[pa.RecordBatch | None, list[pa.RecordBatch]] | None] = \
            queue.Queue(_IN_FLIGHT)
        self._failed: BaseException | None = None  # what stopped the writer thread, until the decoder raises it
        self._broken = False  # a write failed: nothing more is written
        self._closed = False
        self.exchanges_written = 0
        self.partitions_written = 0

    def add(self, exchange: Exchange) -> None:
        self._rows.append(_EXCHANGE_ROW(exchange))
        self._pending.append(exchange)
        self._pending_partitions += (len(exchange.request_partitions) + len(exchange.forgotten_partitions)
                                     + len(exchange.response_partitions or ()))
        exchanges = len(self._rows) >= self.batch_exchanges
        partitions = len(self._pending) >= self.batch_exchanges or self._pending_partitions >= self.batch_partitions
        if exchanges or partitions:
            self._hand_on(exchanges, partitions)

    def flush(self) -> None:
        """Hand every row held so far to the writer thread."""
        self._hand_on(True, True)

    def _hand_on(self, with_exchanges: bool, with_partitions: bool) -> None:
        """The exchanges' rows, the pending partition entries, or both, each as a row group to the writer
        thread."""
        exchanges = None
        if with_exchanges and self._rows:
            rows, self._rows = self._rows, []
            exchanges = _exchange_rows_batch(rows)
        partitions = []
        if with_partitions:
            batch, self._pending = self._pending, []
            self._pending_partitions = 0
            partitions = partition_pieces(batch)
        if exchanges is None and not partitions:
            return
        self._raise_failure()
        if self._writing is None:
            self._writing = threading.Thread(target=self._write_batches, name="parquet-writer", daemon=True)
            self._writing.start()
        self._batches.put((exchanges, partitions))  # waits while the writer is _IN_FLIGHT batches behind
        self.exchanges_written += 0 if exchanges is None else exchanges.num_rows
        self.partitions_written += sum(p.num_rows for p in partitions)

    def _write_batches(self) -> None:
        """The writer thread: encoding and compressing a row group runs in pyarrow without the GIL, while the
        decoder goes on with the next batches. After a failed write it only takes what it is handed, unwritten,
        until the end (None)."""
        while (item := self._batches.get()) is not None:
            if self._failed is not None:
                continue
            exchanges, partitions = item
            try:
                if exchanges is not None:
                    self._write("exchanges", exchanges)
                if partitions:
                    self._write("partitions", *partitions)
            except BaseException as exc:  # noqa: BLE001  (handed to the decoding thread by _raise_failure)
                self._failed = exc

    def _raise_failure(self) -> None:
        """A failed write (a full disk: OSError) raised here, in the decoding thread."""
        if self._failed is not None:
            exc, self._failed = self._failed, None
            self._broken = True
            raise exc

    def _wait(self) -> None:
        """Wait for the writer thread to write every batch it was given, and end; then raise its failure."""
        if self._writing is not None:
            self._batches.put(None)
            self._writing.join()
            self._writing = None
        self._raise_failure()

    def _write(self, name: str, *batches: pa.RecordBatch) -> None:
        """The batches as one row group (a partitions batch comes as a piece per kind of entry)."""
        writer = self._writers.get(name)
        if writer is None:
            schema = batches[0].schema
            # Dictionary pages for the text columns (topics, addresses, the file) and the partitions' keys (an
            # exchange's, repeated for each of its entries: a tenth off the file, and a little off the writer's
            # time); the other integer columns rarely repeat enough to keep one, and trying cost the writer a
            # sixth of its time.
            # The writer takes a column _WRITE_BATCH values at a time, not 1,024 (pyarrow's default): the same
            # bytes, a twentieth sooner.
            writer = self._writers[name] = ParquetWriter(
                str(self.out_dir / f"{name}.parquet"), schema, compression="zstd", write_batch_size=_WRITE_BATCH,
                use_dictionary=[f.name for f in schema if f.type == pa.large_string()
                                or (name == "partitions" and f.name in _KEY_FIELDS)], **_OPTIONS)
        writer.write_table(pa.Table.from_batches(batches))

    def close(self) -> None:
        """Write what is left and close both files. Call it where a write error is handled: a full disk shows
        here first when every row fits in the last batch. Closing again does nothing, and after a failed write
        it only releases the files (the failure was raised once, where it happened)."""
        if self._closed:
            return
        self._closed = True
        try:
            if not self._broken:
                self.flush()
                self._wait()
                for name, schema in (("exchanges", EXCHANGE_ARROW), ("partitions", PARTITION_ARROW)):
                    if name not in self._writers:  # nothing decoded: still leave a valid, empty table
                        self._write(name, _empty(schema))
        except BaseException:
            self._broken = True
            raise
        finally:
            self._close_writers()

    def _close_writers(self) -> None:
        if self._writing is not None:  # the decoder failed: the batches given are written (or skipped) first
            self._batches.put(None)
            self._writing.join()
            self._writing = None
        first: OSError | None = None
        for writer in self._writers.values():
            try:
                writer.close()  # writes the footer: the disk can fill up here too
            except OSError as exc:
                first = first or exc
        self._writers.clear()
        if first is not None and not self._broken:
            self._broken = True
            raise first

    def __enter__(self) -> ParquetTables:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
