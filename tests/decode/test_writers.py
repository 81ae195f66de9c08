"""Scenario: `decode` writes its rows fast, and a user who compares them with what json.dumps and the old
dataframe path wrote finds the same bytes and the same tables."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from dataclasses import replace
from enum import IntEnum
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from fetchtool.decoder import decode_capture
from fetchtool.exchange import Exchange, ResponsePartition
from fetchtool.pipeline.jsonl import jsonl_line, jsonl_row
from fetchtool.pipeline.tables import PARTITION_COLUMNS, ParquetTables

from .sweep import write_sweep

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = sorted(p for p in (ROOT / "captures").rglob("*") if p.suffix in (".pcap", ".pcapng"))


@pytest.fixture(scope="module")
def exchanges(tmp_path_factory) -> list[Exchange]:
    sweep = tmp_path_factory.mktemp("writers") / "sweep.pcap"
    write_sweep(sweep)
    out = [it for it in decode_capture(sweep) if isinstance(it, Exchange)]
    for capture in CAPTURES:
        out += [it for it in decode_capture(capture) if isinstance(it, Exchange)]
    assert len(out) > 1000
    return out


def test_every_jsonl_line_is_what_json_dumps_writes(exchanges):
    for ex in exchanges:
        assert jsonl_line(ex) == json.dumps(jsonl_row(ex)) + "\n"


class Code(IntEnum):  # what a decoder handing on a library's enum would give
    NOT_LEADER = 6


@pytest.mark.parametrize("change", [
    {"ts": math.nan}, {"response_ts": math.inf}, {"ts": None}, {"response_ts": None, "response_frame": None},
    {"error_code": Code.NOT_LEADER}, {"isolation_level": True}, {"client_id": "caf\u00e9 \"q\" \\ \n\x00\u2603"},
    {"client_id": None, "client_software": "librdkafka/2.3.0"}, {"response_partitions": None},
    {"session_id": 2**40}, {"ts": 1.0e22}, {"ts": -0.0},
])
def test_unusual_values_are_written_as_json_dumps_writes_them(exchanges, change):
    ex = replace(exchanges[0], **change)
    assert jsonl_line(ex) == json.dumps(jsonl_row(ex)) + "\n"


def test_a_response_partition_with_an_int_subclass_error_is_counted_as_json_dumps_counts_it(exchanges):
    ex = next(e for e in exchanges if e.response_partitions)
    p = ex.response_partitions[0]
    odd = ResponsePartition(*p[:3], Code.NOT_LEADER, *p[4:])
    ex = replace(ex, response_partitions=(odd, *ex.response_partitions[1:]))
    assert jsonl_line(ex) == json.dumps(jsonl_row(ex)) + "\n"
    assert json.loads(jsonl_line(ex))["partition_errors"] >= 1


def _frames_the_old_way(batch: list[Exchange]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The tables as fetchtool built them before, with polars from row dicts: the oracle."""
    from fetchtool.pipeline.tables import EXCHANGE_SCHEMA, PARTITION_SCHEMA, exchange_row

    ex = pl.DataFrame([exchange_row(e) for e in batch], schema=EXCHANGE_SCHEMA, orient="row") if batch else \
        pl.DataFrame(schema=EXCHANGE_SCHEMA)
    rows = []
    for e in batch:
        key = {"file": e.file, "conn": e.conn, "request_frame": e.request_frame,
               "correlation_id": e.correlation_id, "api_key": e.api_key}
        for entry, attr in (("request", "request_partitions"), ("forgotten", "forgotten_partitions"),
                            ("response", "response_partitions")):
            rows += [(entry, key | {"entry": entry} | p._asdict()) for p in getattr(e, attr) or ()]
    order = {"request": 0, "forgotten": 1, "response": 2}
    rows.sort(key=lambda r: order[r[0]])  # each batch: its request entries, then forgotten, then response
    parts = pl.DataFrame([r for _, r in rows], schema=PARTITION_SCHEMA, orient="row") if rows else \
        pl.DataFrame(schema=PARTITION_SCHEMA)
    return ex, parts


def test_parquet_tables_read_back_as_the_rows_they_came_from(exchanges, tmp_path):
    batch = exchanges[:300]
    with ParquetTables(tmp_path, batch_exchanges=10_000, batch_partitions=10**9) as tables:
        for ex in batch:
            tables.add(ex)
    want_ex, want_parts = _frames_the_old_way(batch)
    got_ex = pl.read_parquet(tmp_path / "exchanges.parquet")
    got_parts = pl.read_parquet(tmp_path / "partitions.parquet")
    assert got_ex.equals(want_ex) and got_parts.equals(want_parts)
    assert pq.ParquetFile(tmp_path / "partitions.parquet").schema_arrow.names == list(PARTITION_COLUMNS)


def _odd_exchanges(exchanges: list[Exchange]) -> list[Exchange]:
    """Values the decoder rarely or never gives, among ordinary ones: no request frame, a partition with an
    IntEnum error code and topic id but no topic or compression, a second file, a response never seen."""
    with_resp = [e for e in exchanges if e.response_partitions]
    ex = with_resp[0]
    p = ex.response_partitions[0]
    odd_partition = ResponsePartition(None, "0f" * 16, *p[2:3], Code.NOT_LEADER, *p[4:13], None, *p[14:])
    return [replace(exchanges[1], request_frame=None),
            replace(ex, response_partitions=(odd_partition, *ex.response_partitions[1:])),
            replace(with_resp[1], file="other.pcap"), replace(with_resp[2], response_partitions=None)]


@pytest.mark.parametrize("batch_exchanges", [1, 7, 64])
def test_parquet_tables_in_many_row_groups_read_back_as_the_rows_they_came_from(exchanges, batch_exchanges,
                                                                                tmp_path):
    # Each batch's columns are built by kind of entry and written as pieces of one row group; odd values, a
    # second file name and repeated key values across runs go through the same path as the rest.
    batch = exchanges[:150] + _odd_exchanges(exchanges) + exchanges[150:200]
    with ParquetTables(tmp_path, batch_exchanges=batch_exchanges, batch_partitions=10**9) as tables:
        for ex in batch:
            tables.add(ex)
    chunks = [batch[i:i + batch_exchanges] for i in range(0, len(batch), batch_exchanges)]
    frames = [_frames_the_old_way(chunk) for chunk in chunks]
    want_ex = pl.concat([f[0] for f in frames])
    want_parts = pl.concat([f[1] for f in frames])
    assert pl.read_parquet(tmp_path / "exchanges.parquet").equals(want_ex)
    assert pl.read_parquet(tmp_path / "partitions.parquet").equals(want_parts)
    # a batch of exchanges without partition entries adds no empty row group (it did, one per such batch)
    meta = pq.ParquetFile(tmp_path / "partitions.parquet").metadata
    assert all(meta.row_group(i).num_rows for i in range(meta.num_row_groups))


def test_an_empty_decode_still_writes_both_tables_with_their_columns(tmp_path):
    ParquetTables(tmp_path).close()
    assert pl.read_parquet(tmp_path / "exchanges.parquet").height == 0
    assert pl.read_parquet(tmp_path / "partitions.parquet").columns == list(PARTITION_COLUMNS)


def test_writing_parquet_does_not_import_a_dataframe_library(exchanges, tmp_path):
    code = ("import sys; from fetchtool.pipeline.tables import ParquetTables; t = ParquetTables(sys.argv[1]); "
            "t.close(); assert 'polars' not in sys.modules, 'polars imported'")
    run = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_decode_out_imports_neither_pyarrow_parquet_nor_its_filesystems(tmp_path):
    # pyarrow.parquet imports pyarrow's filesystems (and ssl): 20-45 ms of every `decode --out`, for a writer that
    # only writes a local file. The tables are the ones pyarrow.parquet reads back.
    out = tmp_path / "out"
    code = ("import sys\nfrom fetchtool.__main__ import main\ntry:\n    main()\nexcept SystemExit as exc:\n"
            "    assert not exc.code, exc.code\nassert 'pyarrow._parquet' in sys.modules\n"
            "assert not {'pyarrow.parquet', 'pyarrow.fs'} & set(sys.modules)")
    run = subprocess.run([sys.executable, "-c", code, "decode", "--out", str(out),
                          str(ROOT / "captures" / "aiokafka-tansu.pcap")], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert pq.read_table(out / "partitions.parquet").num_rows > 0


def test_exchanges_are_written_in_row_groups_of_batch_exchanges_while_partitions_go_on_sooner(exchanges, tmp_path):
    # A capture of many partitions per Fetch fills a partitions row group every few exchanges: the exchanges table
    # followed it, in row groups of a few rows (68 of ~100 rows for a 1.1 GB capture, the file 2.5 times as big
    # and three times as long to write as in row groups of 512).
    batch = exchanges[:300]
    size = [len(e.request_partitions) + len(e.forgotten_partitions) + len(e.response_partitions or ()) for e in batch]
    per_group = sum(size) // 75  # about 4 exchanges' entries
    with ParquetTables(tmp_path, batch_exchanges=64, batch_partitions=per_group) as tables:
        for ex in batch:
            tables.add(ex)
    groups = pq.ParquetFile(tmp_path / "exchanges.parquet").metadata
    assert [groups.row_group(i).num_rows for i in range(groups.num_row_groups)] == [64, 64, 64, 64, 44]
    assert pl.read_parquet(tmp_path / "exchanges.parquet").equals(_frames_the_old_way(batch)[0])
    # The partitions' row groups are cut where they always were (64 exchanges' entries, or per_group entries,
    # whichever comes first), each holding its requests, then its forgotten partitions, then its responses.
    chunks, chunk, entries = [], [], 0
    for ex, n in zip(batch, size):
        chunk.append(ex)
        entries += n
        if len(chunk) >= 64 or entries >= per_group:
            chunks.append(chunk)
            chunk, entries = [], 0
    want_parts = pl.concat([_frames_the_old_way(c)[1] for c in [*chunks, chunk] if c])
    assert len(chunks) > 20
    assert pl.read_parquet(tmp_path / "partitions.parquet").equals(want_parts)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("table", ["exchanges", "partitions"])
def test_a_full_disk_under_out_is_one_line_not_a_traceback(table, tmp_path):
    # /dev/full fails every write with ENOSPC, as a full disk does. The one batch of this capture is written
    # when the decode ends: the error came out of the cleanup as a traceback (and again from the second table).
    out = tmp_path / "out"
    out.mkdir()
    (out / f"{table}.parquet").symlink_to("/dev/full")
    run = subprocess.run([sys.executable, "-m", "fetchtool", "decode", "--out", str(out),
                          str(ROOT / "captures" / "aiokafka-tansu.pcap")], capture_output=True, text=True)
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines()[-1].startswith(f"error: cannot write {out}:")
    assert "No space left on device" in run.stderr


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("table", ["exchanges", "partitions"])
def test_a_disk_that_fills_up_while_batches_wait_for_the_writer_is_raised_once_and_nothing_hangs(exchanges, table,
                                                                                                 tmp_path):
    # The writer thread takes batches from a queue: after the first write fails, the batches handed on after it
    # are taken and dropped (the decoder blocked on a full queue would never end), and the failure comes out
    # once, in the decoding thread.
    (tmp_path / f"{table}.parquet").symlink_to("/dev/full")
    tables = ParquetTables(tmp_path, batch_exchanges=2, batch_partitions=10**9)
    with pytest.raises(OSError, match="No space left on device"):
        try:
            for ex in exchanges[:200]:
                tables.add(ex)
        finally:
            tables.close()
    tables.close()  # again: nothing more to raise


@pytest.mark.skipif(sys.platform == "darwin", reason="macOS refuses file names that are not UTF-8")
def test_a_capture_whose_file_name_is_not_utf8_is_written_to_parquet_with_its_name_escaped(tmp_path):
    # The name reaches Python with a lone surrogate (b"\xff" -> "\udcff"), which Arrow's UTF-8 cannot hold: the
    # tables were a traceback. They hold the name as the reports show it.
    capture = tmp_path / os.fsdecode(b"cap\xff.pcap")
    capture.write_bytes((ROOT / "captures" / "scenarios" / "eviction-thrash.pcap").read_bytes())
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "fetchtool", "decode", "--out", str(out), str(capture)],
                         capture_output=True, text=True)
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    for table in ("exchanges", "partitions"):
        files = set(pq.read_table(out / f"{table}.parquet").column("file").to_pylist())
        assert files == {"cap\\udcff.pcap"}


def test_decode_out_writes_from_packed_entries_the_tables_rows_give(tmp_path):
    # `decode --out` reads Fetch v12+ entries packed as on the wire (protocol/packed.py), every other body as
    # rows, both kinds side by side in one batch (the sweep holds every Fetch version): the tables hold what the
    # rows give, for the sweep and every capture of the project.
    from fetchtool.protocol.packed import PackedEntries

    sweep = tmp_path / "sweep.pcap"
    write_sweep(sweep)
    packed_seen = 0
    for i, capture in enumerate([sweep, *CAPTURES]):
        tables = {}
        for rows in (True, "packed"):
            out = tmp_path / f"{i}-{rows}"
            items = [it for it in decode_capture(capture, rows=rows) if isinstance(it, Exchange)]
            packed_seen += sum(type(it.request_partitions) is PackedEntries for it in items)
            with ParquetTables(out, batch_exchanges=7, batch_partitions=10**9) as writer:
                for it in items:
                    writer.add(it)
            tables[rows] = [pq.read_table(out / f"{t}.parquet") for t in ("exchanges", "partitions")]
        assert tables[True][0].equals(tables["packed"][0]), capture.name
        assert tables[True][1].equals(tables["packed"][1]), capture.name
    assert packed_seen > 100


def test_record_counts_that_sum_past_an_int32_are_written_not_a_traceback(tmp_path):
    # A record batch header's count is an int32 and a partition's record_count sums them: two damaged headers
    # claiming 2**31 - 1 records each made `decode --out` end in a traceback (ArrowInvalid: the column was int32).
    from kafka.record.default_records import DefaultRecordBatchBuilder

    from fetchtool.capture.events import Endpoint
    from fetchtool.capture.writer import LINKTYPE_ETHERNET, PcapWriter, TcpConversation
    from fetchtool.exchange import RequestPartition
    from fetchtool.protocol import codec
    from fetchtool.protocol.headers import FETCH
    from fetchtool.protocol.messages import request_frame, response_frame

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    builder.append(0, timestamp=1_700_000_000_000, key=None, value=b"v", headers=[])
    one = bytearray(builder.build())
    one[57:61] = (2**31 - 1).to_bytes(4, "big")  # the header's record count
    asked = (RequestPartition("orders", None, 0, 5, 1048576, -1, -1, -1),)
    answered = (ResponsePartition("orders", None, 0, 0, 10, 10, 0, -1, -1, -1, 0, 0, 0, None),)
    capture = tmp_path / "counts.pcap"
    with PcapWriter(capture, LINKTYPE_ETHERNET) as pcap:
        link = TcpConversation(pcap, Endpoint("10.0.0.1", 50001), Endpoint("10.0.0.9", 9092))
        t = link.handshake(1_700_000_000.0)
        request = codec.encode_request(FETCH, 12, codec.FetchRequestBody(max_wait_ms=500, min_bytes=1,
                                                                         partitions=asked))
        response = codec.encode_response(FETCH, 12, codec.FetchResponseBody(0, 0, 0, answered, (bytes(one) * 2,)))
        t = link.send("client", request_frame(FETCH, 12, 1, "consumer-1", request), t + 0.01)
        link.close(link.send("server", response_frame(FETCH, 12, 1, response), t + 0.002))
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "fetchtool", "decode", "--out", str(out), str(capture)],
                         capture_output=True, text=True)
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    rows = pq.read_table(out / "partitions.parquet").to_pylist()
    assert [(r["entry"], r["record_batches"], r["record_count"]) for r in rows if r["entry"] == "response"] == [
        ("response", 2, 2 * (2**31 - 1))]
