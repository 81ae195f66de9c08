"""Exchanges as columnar tables: the `exchanges` and `partitions` tables that `decode --out` writes as Parquet.

Rows are streamed: exchanges are buffered in small batches (512 exchanges or 32,768 partition entries) and
each batch is written as one Parquet row group, so decoding a 1 GB capture never holds more than a batch of rows
in memory. Frames are built column by column (one typed Series per field), not from row tuples: that is several
times faster and needs no per-row dicts.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import chain, repeat
from operator import itemgetter
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from fetchtool.exchange import Exchange, ForgottenPartition, RequestPartition, ResponsePartition

# A column's type as polars takes it: a data type class (pl.Int64) or instance (pl.Int64())
ColumnType = pl.DataType | type[pl.DataType]

EXCHANGE_SCHEMA: dict[str, ColumnType] = {
    "file": pl.Utf8,
    "conn": pl.Int64,
    "request_frame": pl.Int64,
    "response_frame": pl.Int64,
    "ts": pl.Float64,
    "response_ts": pl.Float64,
    "client": pl.Utf8,
    "broker": pl.Utf8,
    "api_key": pl.Int16,
    "api_version": pl.Int16,
    "correlation_id": pl.Int32,
    "client_id": pl.Utf8,
    "client_software": pl.Utf8,
    "replica_id": pl.Int32,
    "session_id": pl.Int32,
    "session_epoch": pl.Int32,
    "max_wait_ms": pl.Int32,
    "min_bytes": pl.Int32,
    "max_bytes": pl.Int32,
    "isolation_level": pl.Int8,
    "rack_id": pl.Utf8,
    "partitions": pl.Int32,
    "forgotten": pl.Int32,
    "error_code": pl.Int16,
    "response_session_id": pl.Int32,
    "throttle_time_ms": pl.Int32,
    "response_partitions": pl.Int32,
    "partition_errors": pl.Int32,
    "records_bytes": pl.Int64,
    "request_bytes": pl.Int64,
    "response_bytes": pl.Int64,
}

# One partitions table for the three kinds of entry; columns a kind does not have are null.
_KEY_SCHEMA: dict[str, ColumnType] = {
    "file": pl.Utf8,
    "conn": pl.Int64,
    "request_frame": pl.Int64,
    "correlation_id": pl.Int32,
    "api_key": pl.Int16,
    "entry": pl.Utf8,  # "request" | "forgotten" | "response"
}
_INT64 = {"fetch_offset", "log_start_offset", "high_watermark", "last_stable_offset", "records_bytes",
          "snapshot_end_offset"}
_UTF8 = {"topic", "topic_id", "compression"}


def _fields_schema(fields: Iterable[str]) -> dict[str, ColumnType]:
    return {f: pl.Utf8 if f in _UTF8 else pl.Int64 if f in _INT64 else pl.Int32 for f in fields}


_REQUEST_SCHEMA = _fields_schema(RequestPartition._fields)
_FORGOTTEN_SCHEMA = _fields_schema(ForgottenPartition._fields)
_RESPONSE_SCHEMA = _fields_schema(ResponsePartition._fields)
PARTITION_SCHEMA: dict[str, ColumnType] = {**_KEY_SCHEMA, **_REQUEST_SCHEMA, **_RESPONSE_SCHEMA}


def exchange_row(ex: Exchange) -> dict:
    """One row of the exchanges table (both engines): the JSONL row plus the connection id and rack id."""
    return ex.to_json_row() | {"conn": ex.conn, "rack_id": ex.rack_id}


def exchanges_frame(exchanges: list[Exchange]) -> pl.DataFrame:
    if not exchanges:
        return pl.DataFrame(schema=EXCHANGE_SCHEMA)
    rows = [exchange_row(ex) for ex in exchanges]
    return pl.DataFrame([pl.Series(c, [r[c] for r in rows], dtype=t) for c, t in EXCHANGE_SCHEMA.items()])


_KEY_FIELDS = ("file", "conn", "request_frame", "correlation_id", "api_key")


def partitions_frame(exchanges: list[Exchange]) -> pl.DataFrame:
    parts = []
    for entry, attr, schema in (("request", "request_partitions", _REQUEST_SCHEMA),
                                ("forgotten", "forgotten_partitions", _FORGOTTEN_SCHEMA),
                                ("response", "response_partitions", _RESPONSE_SCHEMA)):
        owners, counts, rows = [], [], []
        for ex in exchanges:
            entries = getattr(ex, attr) or ()
            if entries:
                owners.append(ex)
                counts.append(len(entries))
                rows.extend(entries)
        if not rows:
            continue
        n = len(rows)
        cols = [pl.Series(k, list(chain.from_iterable(repeat(getattr(ex, k), c) for ex, c in zip(owners, counts))),
                          dtype=_KEY_SCHEMA[k]) for k in _KEY_FIELDS]
        cols.append(pl.Series("entry", [entry] * n, dtype=pl.Utf8))
        # One list per column via itemgetter: zip(*rows) would make a tuple per row and wake the cyclic GC.
        cols.extend(pl.Series(f, list(map(itemgetter(i), rows)), dtype=t) for i, (f, t) in enumerate(schema.items()))
        parts.append(pl.DataFrame(cols))
    if not parts:
        return pl.DataFrame(schema=PARTITION_SCHEMA)
    return _conform(pl.concat(parts, how="diagonal"))


def _conform(df: pl.DataFrame) -> pl.DataFrame:
    """Give every batch the full partitions schema, in order, so row groups agree."""
    return df.select([pl.col(c).cast(t) if c in df.columns else pl.lit(None, dtype=t).alias(c)
                      for c, t in PARTITION_SCHEMA.items()])


class ParquetTables:
    """Streams exchanges into <out>/exchanges.parquet and <out>/partitions.parquet, one row group per batch."""

    def __init__(self, out_dir: str | Path, batch_exchanges: int = 512, batch_partitions: int = 32_768) -> None:
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.batch_exchanges = batch_exchanges
        self.batch_partitions = batch_partitions  # partition entries (all three kinds) per row group, about
        self._pending: list[Exchange] = []
        self._pending_partitions = 0
        self._writers: dict[str, pq.ParquetWriter] = {}
        self.exchanges_written = 0
        self.partitions_written = 0

    def add(self, exchange: Exchange) -> None:
        self._pending.append(exchange)
        self._pending_partitions += (len(exchange.request_partitions) + len(exchange.forgotten_partitions)
                                     + len(exchange.response_partitions or ()))
        if len(self._pending) >= self.batch_exchanges or self._pending_partitions >= self.batch_partitions:
            self.flush()

    def flush(self) -> None:
        if not self._pending:
            return
        batch, self._pending = self._pending, []
        self._pending_partitions = 0
        ex_df, part_df = exchanges_frame(batch), partitions_frame(batch)
        self._write("exchanges", ex_df)
        self._write("partitions", part_df)
        self.exchanges_written += ex_df.height
        self.partitions_written += part_df.height

    def _write(self, name: str, df: pl.DataFrame) -> None:
        table = df.to_arrow()
        writer = self._writers.get(name)
        if writer is None:
            writer = self._writers[name] = pq.ParquetWriter(self.out_dir / f"{name}.parquet", table.schema,
                                                            compression="zstd")
        writer.write_table(table)

    def close(self) -> None:
        self.flush()
        for name, schema in (("exchanges", EXCHANGE_SCHEMA), ("partitions", PARTITION_SCHEMA)):
            if name not in self._writers:  # nothing decoded: still leave a valid, empty table
                self._write(name, pl.DataFrame(schema=schema))
        for writer in self._writers.values():
            writer.close()
        self._writers.clear()

    def __enter__(self) -> ParquetTables:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
