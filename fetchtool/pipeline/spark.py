"""The Spark engine: decode and analyse many capture files across executors (PySpark, optional extra).

    from fetchtool.pipeline.spark import analyze_spark, decode_spark
    analysis = analyze_spark(["day/broker-*.pcap*"], master="spark://head:7077")   # same Analysis as polars
    report = decode_spark(["day/"], "out/")   # out/exchanges.parquet/, out/partitions.parquet/ (Spark datasets)

Stages (fetchtool.pipeline.spark_stages, spark_merge): count packets per file -> TCP segments per file, shuffled
by flow -> per flow, in frame order across rotated files: TcpReassembler + decode_events -> run-wide connection
ids and topic names -> per broker, in request order: tracker + findings + savings -> merged on the driver.
The cores are the polars engine's; only the grouping is Spark's. Frames count on across the files in natural
name order (as `mergecap -a` would number them); for one file they are Wireshark's.
"""

from __future__ import annotations

import glob
import os
import re
import sys
from collections import Counter
from itertools import groupby
from pathlib import Path

from fetchtool.capture.packets import CaptureStats
from fetchtool.capture.reader import CaptureError
from fetchtool.capture.rotation import natural_key, rotated_sets, set_label
from fetchtool.protocol.report import DecodeReport

from . import spark_stages as st

INSTALL_HINT = "the Spark engine needs PySpark and Java 17+: pip install 'fetchtool[spark]'"


class SparkUnavailable(RuntimeError):
    """PySpark (or Java) is missing: the message is one line saying what to install."""


def spark_session(master: str | None = None):
    """The active SparkSession, or a new one on `master` (default local[*])."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise SparkUnavailable(INSTALL_HINT) from None
    active = SparkSession.getActiveSession()
    if active is not None and (master is None or active.sparkContext.master == master):
        return active
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # executors run this interpreter's fetchtool
    builder = (SparkSession.builder.appName("fetchtool").master(master or "local[*]")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false"))
    if (master or "local").startswith("local"):
        builder = builder.config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # noqa: BLE001 - e.g. no Java: one line, not a JVM stack trace
        text = str(exc).strip().splitlines()
        raise SparkUnavailable(f"could not start Spark ({text[0] if text else type(exc).__name__}); "
                               f"{INSTALL_HINT}") from None
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def expand_paths(paths, spark=None) -> list[str]:
    """Files, directories and globs -> capture files in natural name order. URIs (hdfs://, s3a://, ...) are
    listed through the Spark installation's Hadoop filesystems."""
    out: list[str] = []
    for p in map(str, paths):
        if "://" in p and not p.startswith("file://"):
            out.extend(_hadoop_list(p, spark))
            continue
        p = p.removeprefix("file://")
        if os.path.isdir(p):
            out.extend(str(f) for f in Path(p).rglob("*") if f.is_file() and not f.name.startswith("."))
        elif glob.has_magic(p):
            out.extend(f for f in glob.glob(p) if os.path.isfile(f))
        else:
            out.append(p)  # a missing file is reported like the polars engine does (unreadable_file)
    seen = dict.fromkeys(out)
    return sorted(seen, key=natural_key)


def _hadoop_list(uri: str, spark) -> list[str]:
    spark = spark or spark_session()
    jvm, conf = spark._jvm, spark._jsc.hadoopConfiguration()
    path = jvm.org.apache.hadoop.fs.Path(uri)
    fs = path.getFileSystem(conf)
    statuses = fs.globStatus(path) or []
    files = []
    for s in statuses:
        if s.isDirectory():
            it = fs.listFiles(s.getPath(), True)
            while it.hasNext():
                files.append(it.next().getPath().toString())
        else:
            files.append(s.getPath().toString())
    # Hadoop names local files "file:/..."; executors read those from their path like any local file.
    return [f.removeprefix("file:") if f.startswith("file:/") and not f.startswith("file://") else f for f in files]


def _is_uri(f: str) -> bool:
    return re.match(r"[a-zA-Z][a-zA-Z0-9+.-]+:", f) is not None


def _sources(sc, files: list[str]):
    """RDD of (file index, path, bytes or None): local files are read by the executors from their path."""
    remote = [i for i, f in enumerate(files) if _is_uri(f)]
    local = [(i, f, None) for i, f in enumerate(files) if not _is_uri(f)]
    rdd = sc.parallelize(local, max(1, len(local))) if local else None
    if remote:
        index = {files[i]: i for i in remote}
        by_name = {os.path.basename(files[i]): i for i in remote}
        blobs = sc.binaryFiles(",".join(files[i] for i in remote), len(remote)).map(
            lambda pd: (index.get(pd[0], by_name.get(os.path.basename(pd[0]))), pd[0], bytes(pd[1])))
        rdd = blobs if rdd is None else rdd.union(blobs)
    return rdd


class _Decoded:
    """Stages 0-2 and the run-wide numbering: `items` is an RDD of (broker, sort key, item)."""

    def __init__(self, spark, paths, ports, timings: dict | None = None):
        import time

        t0 = time.perf_counter()
        from pyspark import StorageLevel
        from pyspark.rdd import portable_hash

        sc = spark.sparkContext
        files = expand_paths(paths, spark)
        if not files:
            raise CaptureError("no capture files found in " + ", ".join(map(str, paths)))
        src = _sources(sc, files)
        if any(_is_uri(f) for f in files):
            src = src.persist(StorageLevel.MEMORY_AND_DISK)
        # Stage 0: packet counts and time spans -> rotated sets and each file's frame offset in its set.
        counts = sorted(src.map(lambda r: st.count_packets(*r)).collect())
        sets = rotated_sets(files, {i: (first, last) for i, _n, first, last, _e in counts})
        names = [os.path.basename(f.rstrip("/")) for f in files]
        offsets: dict[int, int] = {}
        ends: dict[int, tuple[int, float]] = {}  # set -> (last frame, last ts)
        members: dict[int, list[str]] = {}
        errors: list[tuple[int, str, int]] = []
        for idx, packets, _first, last_ts, error in counts:
            s = sets[idx]
            frame, ts = ends.get(s, (0, 0.0))
            offsets[idx] = frame
            ends[s] = (frame + packets, max(ts, last_ts) if last_ts is not None else ts)
            members.setdefault(s, []).append(names[idx])
            if error:
                errors.append((idx, error, packets))
        labels = {s: set_label(m) for s, m in members.items()}
        self.labels = labels
        ports = None if ports is None else frozenset(int(p) for p in ports)
        n = max(2, sc.defaultParallelism * 2)

        t1 = time.perf_counter()
        # Stage 1 (per file) and 2 (per flow, in frame order across files).
        def flow_key(kv):
            key, row = kv
            return (key, row[0]), row

        segments = src.flatMap(lambda r: st.file_segments(r[0], r[1], offsets[r[0]], sets[r[0]], r[2])).map(flow_key)
        ordered = segments.repartitionAndSortWithinPartitions(n, partitionFunc=lambda k: portable_hash(k[0]))
        decoded = ordered.mapPartitions(lambda rows: st.decode_flows(rows, labels, ports, ends))
        decoded = decoded.persist(StorageLevel.MEMORY_AND_DISK)
        small = decoded.filter(lambda r: r[0] != "item").collect()
        if timings is not None:
            timings["files_and_counts_s"] = t1 - t0
            timings["segments_reassembly_decode_s"] = time.perf_counter() - t1
        stats = {idx: (CaptureStats(packets=packets, bytes=nbytes, tcp_segments=segments, skipped_non_tcp=other,
                                   warnings=Counter(warnings)), error)
                 for _t, idx, packets, nbytes, segments, other, warnings, error in (r for r in small if r[0] == "stats")}
        seen = {idx for idx, _e, _n in errors}
        errors.extend((idx, error, fs.packets) for idx, (fs, error) in stats.items() if error and idx not in seen)
        self.report = _report(names, small, stats, errors)
        self.last_ts = max((r[2] for r in small if r[0] == "report" and r[2] is not None), default=None)
        # A file is read as fetchtool.decoder.DecodeRun decides: a packet of it decoded, or a clean empty capture.
        failed = {idx for idx, _e, _n in errors}
        if not any(fs.decoded_any or (idx not in failed and not fs.gave_nothing) for idx, (fs, _e) in stats.items()):
            msgs = [e for _i, e, _n in sorted(errors)] + [
                fs.nothing_read(names[idx]) for idx, (fs, _e) in sorted(stats.items()) if idx not in failed]
            raise CaptureError(msgs[0] if len(msgs) == 1 else f"{msgs[0]} (and {len(msgs) - 1} more)")
        conn_ids = {(flow, local): gid for gid, (_f, flow, local) in
                    enumerate(sorted((r[1], r[2], r[3]) for r in small if r[0] == "conn"), 1)}
        known: dict[str, dict[str, tuple[str, int]]] = {}
        for _t, broker, topic_id, name, frame in (r for r in small if r[0] == "name"):
            b = known.setdefault(broker, {})
            if topic_id not in b or frame < b[topic_id][1]:
                b[topic_id] = (name, frame)
        cb, kb = sc.broadcast(conn_ids), sc.broadcast(known)
        self.items = decoded.filter(lambda r: r[0] == "item").map(
            lambda r: st.finish_item(r, cb.value, kb.value))
        self.partitions = n
        self._persisted = [decoded, src]

    def keep(self, window) -> None:
        """Only the items inside a time window (--since / --until)."""
        self.items = self.items.filter(lambda bki: window.keeps(bki[2]))

    def release(self) -> None:
        for rdd in self._persisted:
            rdd.unpersist()


def _last_exchange_ts(items) -> float | None:
    from fetchtool.exchange import Exchange

    times = (items.map(lambda bki: bki[2]).filter(lambda it: isinstance(it, Exchange))
             .map(lambda ex: ex.response_ts or ex.ts).filter(lambda ts: ts is not None))
    return None if times.isEmpty() else times.max()


def _report(names: list[str], small: list, stats: dict[int, tuple[CaptureStats, str | None]],
            errors: list) -> DecodeReport:
    """One DecodeReport from the per-file capture statistics and the per-partition protocol counters."""
    rep = DecodeReport(files=list(names))
    for _idx, msg, _n in sorted(errors):  # in file order (as the report lists the files), not stage order
        rep.warn("unreadable_file", msg)
    for idx in sorted(stats):
        rep.add_capture(stats[idx][0])
    for _t, part, _last in (r for r in small if r[0] == "report"):
        rep.merge(part)
    # Dicts in the order one sequential decode fills them: by where each key was first learnt.
    rep.client_software = _by_first(rep.client_software, ((r[1], r[2]) for r in small if r[0] == "software"))
    rep.topic_names = _by_first(rep.topic_names, ((r[2], r[4]) for r in small if r[0] == "name"))
    return rep


def _by_first(d: dict, places) -> dict:
    """``d`` ordered by the least (set, frame) each key has in ``places`` ((key, (set, frame)) pairs)."""
    first: dict = {}
    for key, place in places:
        if key not in first or place < first[key]:
            first[key] = place
    return {k: d[k] for k in sorted(d, key=lambda k: first.get(k, (float("inf"),)))}


def analyze_spark(paths, *, master: str | None = None, ports=None, cache_slots: int | None = None,
                  cache_shards: int | None = None, client: str | None = None, broker: str | None = None,
                  spark=None, timings: dict | None = None, window=None):
    """Decode and analyse captures on Spark -> fetchtool.analysis.model.Analysis (as analyze_capture, with the
    same --client / --broker filtering). ``window``: keep the items whose time it keeps (--since / --until, a
    fetchtool.commands.window.TimeWindow), as the embedded engine does.

    `timings`, when given, gets wall seconds per stage (for benchmarks/bench_spark.py)."""
    import time

    spark = spark or spark_session(master)  # first: without PySpark this is the one-line SparkUnavailable
    from pyspark.rdd import portable_hash

    from fetchtool.analysis.run import filtered, savings_filter

    from .spark_merge import analyze_broker, merge

    d = _Decoded(spark, paths, ports, timings)
    last_ts = d.last_ts
    if window:
        d.keep(window)
        # the end of the capture the embedded engine sees: its latest exchange inside the window
        last_ts = _last_exchange_ts(d.items)
    t = time.perf_counter()
    savings_of = savings_filter(client, broker)

    def per_broker(rows):
        # Streamed: a broker's exchanges go through the tracker one by one, never all in memory.
        for name, group in groupby(rows, key=lambda bk: bk[0][0]):
            yield analyze_broker(name, ((key, it) for (_b, key), it in group), last_ts, cache_slots,
                                 cache_shards, savings_of)

    keyed = d.items.map(lambda bki: ((bki[0], bki[1]), bki[2]))
    parts = (keyed.repartitionAndSortWithinPartitions(d.partitions, partitionFunc=lambda k: portable_hash(k[0]))
             .mapPartitions(per_broker).collect())
    t2 = time.perf_counter()
    d.release()
    analysis = filtered(merge(parts, d.report, cache_slots, cache_shards), client, broker)
    if timings is not None:
        timings["per_broker_analysis_s"] = t2 - t
        timings["driver_merge_s"] = time.perf_counter() - t2
    return analysis


def decode_spark(paths, out_dir: str, *, master: str | None = None, ports=None, spark=None,
                 window=None) -> DecodeReport:
    """Write <out_dir>/exchanges.parquet and <out_dir>/partitions.parquet (Spark Parquet datasets: directories);
    ``window`` as for analyze_spark."""
    from fetchtool.exchange import Exchange

    from .tables import EXCHANGE_SCHEMA, PARTITION_SCHEMA, exchange_row

    spark = spark or spark_session(master)
    d = _Decoded(spark, paths, ports)
    if window:
        d.keep(window)
    exchanges = d.items.map(lambda bki: bki[2]).filter(lambda it: isinstance(it, Exchange))
    ex_cols, part_cols = list(EXCHANGE_SCHEMA), list(PARTITION_SCHEMA)
    ex_rows = exchanges.map(lambda ex: tuple(exchange_row(ex).get(c) for c in ex_cols))
    part_rows = exchanges.flatMap(lambda ex: _partition_rows(ex, part_cols))
    out = str(out_dir).rstrip("/")
    for name, rows, schema, order in (
            ("exchanges", ex_rows, EXCHANGE_SCHEMA, ["request_frame", "conn", "correlation_id"]),
            ("partitions", part_rows, PARTITION_SCHEMA, ["request_frame", "conn", "correlation_id"])):
        df = spark.createDataFrame(rows, _spark_schema(schema)).orderBy(*order)
        df.write.mode("overwrite").parquet(f"{out}/{name}.parquet")
    rep = d.report
    rep.exchanges_written = spark.read.parquet(f"{out}/exchanges.parquet").count()
    rep.partitions_written = spark.read.parquet(f"{out}/partitions.parquet").count()
    d.release()
    return rep


def _partition_rows(ex, cols: list[str]):
    key = {"file": ex.file, "conn": ex.conn, "request_frame": ex.request_frame,
           "correlation_id": ex.correlation_id, "api_key": ex.api_key}
    for entry, parts in (("request", ex.request_partitions), ("forgotten", ex.forgotten_partitions),
                         ("response", ex.response_partitions or ())):
        for p in parts:
            row = key | {"entry": entry} | p._asdict()
            yield tuple(row.get(c) for c in cols)


def _spark_schema(schema: dict):
    import polars as pl
    from pyspark.sql import types as T

    kinds = {pl.Utf8: T.StringType(), pl.Int64: T.LongType(), pl.Int32: T.IntegerType(), pl.Int16: T.ShortType(),
             pl.Int8: T.ByteType(), pl.Float64: T.DoubleType()}
    return T.StructType([T.StructField(c, kinds[t], True) for c, t in schema.items()])


__all__ = ["analyze_spark", "decode_spark", "spark_session", "expand_paths", "SparkUnavailable"]
