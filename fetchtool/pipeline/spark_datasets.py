"""`decode --engine spark --out DIR`: four Parquet datasets, partitioned by capture date and broker.

    DIR/exchanges/capture_date=2026-11-24/broker_dir=10.0.0.1_9092/part-*.parquet   one row per Fetch exchange
    DIR/partitions/...   one row per partition entry (request, forgotten, response)
    DIR/sessions/...     one row per broker fetch session (its life: created, epochs, how it ended)
    DIR/findings/...     one row per finding (frames and known bugs as lists)

The exchanges and partitions columns are the embedded engine's tables (fetchtool.pipeline.tables), written by the
executors from stage 1's items; sessions and findings come from the analysis. Partition values are plain
directory names (`broker_dir`: the broker address with ':' as '_'; the `broker` column keeps the address), so
Spark SQL, polars (hive partitioning) and DuckDB (hive_partitioning) read them alike.
"""

from __future__ import annotations

import time

from . import spark_stages as st

DATASETS = ("exchanges", "partitions", "sessions", "findings")
PARTITIONED_BY = ("capture_date", "broker_dir")

# sessions: SessionLife's plain fields (steps and traffic stay in the JSON report)
SESSION_TYPES = {
    "broker": "string", "session_id": "int32", "client": "string", "client_id": "string", "file": "string",
    "created_request_frame": "int64", "created_response_frame": "int64", "created_ts": "float64",
    "created_version": "int16", "started_before_capture": "bool_", "first_partitions": "int32",
    "partitions": "int32", "max_partitions": "int32", "incremental_requests": "int64", "errors": "int64",
    "last_epoch": "int32", "end": "string", "end_reason": "string", "end_frame": "int64", "end_ts": "float64",
    "connections": "int32", "steps_dropped": "int32", "replica_id": "int32", "privileged": "bool_",
}
FINDING_TYPES = {
    "code": "string", "severity": "string", "cause": "string", "client": "string", "client_id": "string",
    "broker": "string", "session_id": "int32", "epoch": "int32", "file": "string", "request_frame": "int64",
    "response_frame": "int64", "ts": "float64", "message": "string", "advice": "string", "count": "int64",
    "frames": "list<int64>", "known_bugs": "list<string>",
}


def _arrow_type(name: str):
    import pyarrow as pa

    if name.startswith("list<"):
        return pa.list_(_arrow_type(name[5:-1]))
    return getattr(pa, name)()


def _table(rows: list[dict], types: dict[str, str], when: str):
    """Rows -> an Arrow table with the partition columns (date of `when`, broker as a directory name)."""
    import pyarrow as pa

    cols = {name: pa.array([r.get(name) for r in rows], type=_arrow_type(t)) for name, t in types.items()}
    cols["capture_date"] = pa.array([st._date(r.get(when)) for r in rows], type=pa.string())
    cols["broker_dir"] = pa.array([st.dir_name(r.get("broker")) for r in rows], type=pa.string())
    return pa.table(cols)


def session_rows(analysis) -> list[dict]:
    rows = []
    for s in analysis.sessions:
        d = s.to_json()
        d["when"] = s.created_ts if s.created_ts is not None else s.end_ts
        rows.append(d)
    return rows


def write_datasets(spark, decoded, analysis, out: str, progress=None):
    """The four datasets under `out` (a directory the executors can write: local on one machine, shared or
    hdfs:/s3a: on a cluster) -> the decode report with exchanges_written and partitions_written."""
    t = time.perf_counter()
    from .spark import map_in_arrow

    sc = spark.sparkContext
    conn_ids, names = sc.broadcast(decoded.conn_ids), sc.broadcast(decoded.names)
    out = out.rstrip("/")
    ex_schema, part_schema = _spark_schema("exchanges"), _spark_schema("partitions")
    for which, schema in (("exchanges", ex_schema), ("partitions", part_schema)):
        def stage(batches, which=which):
            return st.table_stage(conn_ids.value, names.value, which)(batches)

        df = map_in_arrow(decoded.items, stage, schema)
        # Written by the tasks that made the rows, each its file of each capture date and broker it holds, sorted:
        # a shuffle by date and broker first moved every row once more (bench1g's partitions table: 697 MB
        # through the shuffle, 16 of the command's 30 s).
        (df.sortWithinPartitions(*PARTITIONED_BY, "request_frame", "conn", "correlation_id")
         .write.mode("overwrite").partitionBy(*PARTITIONED_BY).parquet(f"{out}/{which}"))
    sessions = session_rows(analysis)
    findings = [f.to_json() for f in analysis.findings]
    for which, rows, types, when in (("sessions", sessions, SESSION_TYPES, "when"),
                                     ("findings", findings, FINDING_TYPES, "ts")):
        table = _table(rows, types, when)
        spark.createDataFrame(table).coalesce(1).write.mode("overwrite").partitionBy(*PARTITIONED_BY).parquet(
            f"{out}/{which}")
    rep = decoded.report
    # counted by stage 1 (no job to read them back)
    rep.exchanges_written = sum(sum(f.groups.values()) for f in decoded.facts)
    rep.partitions_written = sum(f.partition_rows for f in decoded.facts)
    conn_ids.unpersist()
    names.unpersist()
    if progress:
        progress(f"wrote {', '.join(DATASETS)} to {out}/ in {time.perf_counter() - t:.1f} s")
    return rep


def _spark_schema(which: str) -> str:
    """The DDL schema of the exchanges or partitions rows stage 1's items give (the embedded engine's tables,
    then the partition columns)."""
    import polars as pl

    from .tables import EXCHANGE_SCHEMA, PARTITION_SCHEMA

    kinds = {pl.Utf8: "string", pl.Int64: "bigint", pl.Int32: "int", pl.Int16: "smallint", pl.Int8: "tinyint",
             pl.Float64: "double"}
    schema = EXCHANGE_SCHEMA if which == "exchanges" else PARTITION_SCHEMA
    return ", ".join([f"`{c}` {kinds[t]}" for c, t in schema.items()]
                     + ["capture_date string", "broker_dir string"])
