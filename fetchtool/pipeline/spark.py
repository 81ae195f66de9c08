"""The Spark engine: decode and analyse many capture files across executors (PySpark, optional extra).

    from fetchtool.pipeline.spark import analyze_spark, decode_spark
    analysis = analyze_spark(["day/broker-*.pcap*"], master="spark://head:7077")   # same Analysis as polars
    report = decode_spark(["day/"], "out/")   # out/exchanges.parquet/, out/partitions.parquet/ (Spark datasets)

Stages (fetchtool.pipeline.spark_stages, spark_merge): count packets per file (and weigh its flows) -> per
rotated set and flow bucket, in frame order across the set's files: TcpReassembler + decode_events -> run-wide
connection ids and topic names -> in request order, in one job: the savings per broker and client, and per
broker the tracker + findings -> merged on the driver.
The cores are the polars engine's; only the grouping is Spark's. Frames count on across the files in natural
name order (as `mergecap -a` would number them); for one file they are Wireshark's.
"""

from __future__ import annotations

import glob
import logging
import marshal
import os
import pickle
import signal
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path

from fetchtool.capture.reader import CaptureError
from fetchtool.capture.rotation import natural_key, rotated_sets, set_label
from fetchtool.protocol.report import DecodeReport

from . import spark_stages as st
from .spark_classes import archive_later, archive_path, java_options
from .spark_early import CountedMeanwhile, counted_meanwhile

INSTALL_HINT = "the Spark engine needs PySpark and Java 17+: pip install 'fetchtool[spark]'"


class SparkUnavailable(RuntimeError):
    """PySpark (or Java) is missing: the message is one line saying what to install."""


# Spark's own logging, quiet: errors only, and those of Spark's internals not at all unless --verbose (the
# engine says what failed in one line). Written to a file because log4j2 reads its configuration before any
# Spark setting applies.
_LOG4J = """status = error
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %%d{HH:mm:ss} %%p %%c{1}: %%m%%n%%ex
rootLogger.level = %s
rootLogger.appenderRef.stderr.ref = console
"""


def _log_config(verbose: bool) -> str:
    path = os.path.join(tempfile.gettempdir(), f"fetchtool-spark-log4j2-{'verbose' if verbose else 'quiet'}.properties")
    text = _LOG4J % ("warn" if verbose else "off")
    try:
        with open(path) as fh:
            if fh.read() == text:
                return path
    except OSError:
        pass
    tmp = f"{path}.{os.getpid()}"
    with open(tmp, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)
    return path


def spark_session(master: str | None = None, verbose: bool = False, dump_classes_to: Path | None = None):
    """The active SparkSession (reused by every stage and command of this process), or a new one on `master`
    (default local[*]), started quietly: nothing from the JVM or log4j on stderr unless ``verbose``. A new JVM
    loads its classes from this machine's archive (spark_classes), or leaves a process behind that makes it
    (``dump_classes_to``: this JVM writes one there as it exits)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise SparkUnavailable(INSTALL_HINT) from None
    active = SparkSession.getActiveSession()
    if active is not None and (master is None or active.sparkContext.master == master):
        return active
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # executors run this interpreter's fetchtool
    root = logging.getLogger()
    if not verbose and not root.handlers:
        # py4j logs through the root logger, which Python then sets up to print: a Ctrl-C during a job (PySpark's
        # handler cancels the jobs through the connection the interrupted call is reading) became two tracebacks
        root.addHandler(logging.NullHandler())
    from pyspark import SparkConf

    # The JVMs only move Arrow batches, cache, shuffle and sort them (the work is the Python workers'), and on a
    # local master the driver's is the executor too: C1 alone compiles what they run for half the CPU tiered
    # compilation spends (bench_spark.py: a local[2] JVM's CPU 19 -> 10 s on a 0.5 MB capture, 25 -> 14 s on
    # 1.1 GB), and the serial collector keeps GC threads off the cores the workers need. A standalone
    # executor is a JVM of its own that starts cold for each command: it gets the same flags (JIT_OPTIONS),
    # unless the user's executor options choose their own -XX: flags. PYSPARK_SUBMIT_ARGS'
    # --conf spark.driver.extraJavaOptions=... replaces the driver's.
    log_opts = f"-Dlog4j2.configurationFile=file:{_log_config(verbose)}"
    archive = archive_path()
    conf = (SparkConf().setAppName("fetchtool").setMaster(master or "local[*]")
            .set("spark.ui.enabled", "false").set("spark.ui.showConsoleProgress", "false")
            .set("spark.driver.extraJavaOptions",
                 f"{log_opts} {JIT_OPTIONS} {java_options(archive, dump_classes_to)}")
            .set("spark.executor.extraJavaOptions", f"{log_opts} {JIT_OPTIONS}")
            .set("spark.executorEnv.PYTHONPATH", os.environ.get("PYTHONPATH", ""))
            # stage 1's items are cached once: compressing them would only cost CPU
            .set("spark.sql.inMemoryColumnarStorage.compressed", "false")
            # every shuffle's partitions are fetchtool's own (a slot per broker, the savings' pairs spread by their
            # work), so adaptive execution had nothing to change but ran each shuffle as a job of its own, its
            # plan re-optimised in between: ~0.2 s a command (local[2], 0.5 MB and 1.1 GB)
            .set("spark.sql.adaptive.enabled", "false"))
    if (master or "local").startswith("local"):
        conf = (conf.set("spark.driver.bindAddress", "127.0.0.1").set("spark.driver.host", "127.0.0.1")
                # one machine: the shuffle never crosses a network, so compressing it would only cost CPU
                .set("spark.shuffle.compress", "false").set("spark.shuffle.spill.compress", "false"))
    log = None
    try:
        from pyspark import SparkContext

        if SparkContext._gateway is None:  # the JVM: started once a process, its own stderr kept aside
            from pyspark.java_gateway import launch_gateway

            log = None if verbose else tempfile.TemporaryFile()
            with _ctrl_c_after():
                SparkContext._gateway = launch_gateway(conf, None if log is None else {"stderr": log})
            SparkContext._jvm = SparkContext._gateway.jvm
            if (archive is not None and dump_classes_to is None and not archive.is_file()
                    and archive_later(archive) and (say := stage_lines(verbose))):
                say("archiving JVM classes in the background, once: later starts ~3 s faster")
        _keep_executor_options(conf, SparkContext._jvm, log_opts)
        spark = SparkSession.builder.config(conf=conf).getOrCreate()
    except Exception as exc:  # noqa: BLE001 - e.g. no Java: one line, not a JVM stack trace
        text = [line for line in (str(exc) + "\n" + _tail(log)).strip().splitlines() if line.strip()]
        raise SparkUnavailable(f"could not start Spark ({text[0] if text else type(exc).__name__}); "
                               f"{INSTALL_HINT}") from None
    if not verbose:
        spark.sparkContext.setLogLevel("OFF")
    return spark


@contextmanager
def _ctrl_c_after():
    """Ctrl-C held back while Spark's JVM starts (~2 s), and raised after: one that comes while PySpark waits for
    the JVM's address makes PySpark delete the file the JVM writes it to, and the JVM, failing to, stays on as an
    orphan (seen with PySpark 4). Started, the JVM ends with this process (at the end of its stdin)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


JIT_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# The executors' Python daemon: PySpark's, importing an installed PySpark compiled rather than the source zips
# Spark puts first on its path (spark_daemon: ~0.4 s a command)
DAEMON_KEY, DAEMON_MODULE = "spark.python.daemon.module", "fetchtool.pipeline.spark_daemon"


def _keep_executor_options(conf, jvm, log_opts: str) -> None:
    """Executor JVM options the user gave (PYSPARK_SUBMIT_ARGS' --conf, spark-defaults.conf: spark-submit made
    them the driver JVM's system properties) are kept, with fetchtool's log configuration after them: setting
    the key alone would replace them. fetchtool's JIT_OPTIONS follow unless the user's choose -XX: flags. The
    executors' Python daemon is spark_daemon unless the user named one."""
    given = jvm.java.lang.System.getProperty("spark.executor.extraJavaOptions")
    if given and log_opts not in given:
        conf.set("spark.executor.extraJavaOptions",
                 f"{given} {log_opts}" if "-XX:" in given else f"{given} {log_opts} {JIT_OPTIONS}")
    if not jvm.java.lang.System.getProperty(DAEMON_KEY):
        conf.set(DAEMON_KEY, DAEMON_MODULE)


def stage_lines(verbose: bool = False):
    """Progress for the CLI: each stage's line on stderr ("spark: decoded ...") when stderr is a terminal or
    with --verbose; else None (quiet)."""
    if not (verbose or sys.stderr.isatty()):
        return None

    def say(msg: str) -> None:
        print(f"spark: {msg}", file=sys.stderr, flush=True)

    return say


def _tasks(count: int, cpu_s: Iterable[float]) -> str:
    """A stage's tasks for its progress line: "(4 tasks, 6.1 CPU-s)"."""
    return f"({count:,} task{'s' if count != 1 else ''}, {sum(cpu_s):.1f} CPU-s)"


# Spark 4.1+ (SPARK-52921): a union of equally partitioned children keeps their partitioning, so partition i of
# the brokers and partition i of the savings become one task that runs both, one after the other. With as many
# broker as savings partitions (a storm of one client on one broker: one each) the analysis then had half the
# tasks, a core idle (the 100,000-session storm's analysis: 29.7 s, 20.7 s without). Off, each branch's partitions
# are tasks of their own (an unknown key on Spark 4.0, which has no such union).
UNION_KEEPS_PARTITIONING = "spark.sql.unionOutputPartitioning"


@contextmanager
def _session_conf(spark, key: str, value: str):
    """`key` set to `value` for the queries run inside, as it was afterwards (the session may be the user's)."""
    before = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


def _tail(log) -> str:
    if log is None:
        return ""
    log.seek(0)
    return log.read().decode(errors="replace")[-2000:]


def map_in_arrow(df, func, schema: str):
    """df.mapInArrow(func, schema), without the pandas check PySpark makes first (Arrow-only stages need no
    pandas; fetchtool[spark] does not install it). PySpark 4's internals, hence pyspark>=4.0 in pyproject."""
    from pyspark.sql import DataFrame
    from pyspark.sql.udf import _create_udf
    from pyspark.util import PythonEvalType

    udf = _create_udf(func, schema, PythonEvalType.SQL_MAP_ARROW_ITER_UDF)
    column = udf(*[df[c] for c in df.columns])
    return DataFrame(df._jdf.mapInArrow(column._jc, False, None), df.sparkSession)


def expand_paths(paths, spark=None) -> list[str]:
    return _expand(paths, spark)[0]


def _expand(paths, spark=None) -> tuple[list[str], dict[str, str]]:
    """Files, directories and globs -> capture files in natural name order, local ones as absolute paths (the
    executors do not run in this directory). URIs (hdfs://, s3a://, ...) are listed through the Spark
    installation's Hadoop filesystems and passed on as they are. Also: absolute path -> the path as given, for
    the files named one by one (messages name them as the user did)."""
    out: list[str] = []
    given: dict[str, str] = {}
    for p in map(str, paths):
        if st.is_remote(p):
            out.extend(_hadoop_list(p, spark))
            continue
        original = p
        p = _resolve(_local(p))
        if os.path.isdir(p):
            out.extend(str(f) for f in Path(p).rglob("*") if f.is_file() and not f.name.startswith("."))
        elif glob.has_magic(p):
            out.extend(f for f in glob.glob(p) if os.path.isfile(f))
        else:
            out.append(p)  # a missing file is reported like the polars engine does (unreadable_file)
            given[p] = original
    seen = dict.fromkeys(out)
    return sorted(seen, key=natural_key), given


def _local(p: str) -> str:
    """file:/x, file:///x -> /x."""
    if p.startswith("file://"):
        return p[len("file://"):]
    return p.removeprefix("file:")


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


def _resolve(p: str) -> str:
    """A path as the executors must see it: relative paths are resolved here, on the driver (executors run in
    their workers' directories); URIs (file:, hdfs:, s3a:, ...) are passed as given."""
    if st.is_uri(p):
        return p
    return os.path.abspath(os.path.expanduser(p))


class _Decoded:
    """Stages 0-1 and the run-wide numbering: `items` is the DataFrame of stage 1's item rows (cached)."""

    def __init__(self, spark, paths, ports, timings: dict | None = None, window=None, progress=None,
                 early: CountedMeanwhile | None = None):
        import time

        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        say = progress or (lambda _msg: None)
        t0 = time.perf_counter()
        files, given = (early.files, early.given) if early else _expand(paths, spark)
        rows = early.counts() if early else None  # None: no children, or one died (Spark counts then)
        if not files:
            raise CaptureError("no capture files found in " + ", ".join(map(str, paths)))
        # Stage 0: packet counts and time spans -> rotated sets and each file's frame offset in its set, counted
        # while Spark started (spark_early) or else by Spark. A task counts several files when they outnumber the
        # cores: counting a rotated piece takes milliseconds, a task's round trip to its Python worker a tenth of
        # a second (bench_spark.py: 40 files, 40 -> 8 tasks).
        n_files = len(files)
        cores = max(1, spark.sparkContext.defaultParallelism)
        meanwhile = rows is not None
        if rows is None:
            rows = map_in_arrow(spark.range(0, n_files, 1, min(n_files, 4 * cores)), st.count_stage(files),
                                st.COUNT_SCHEMA).collect()
        counts = sorted(tuple(r) for r in rows)
        sets = rotated_sets(files, {i: (first, last) for i, _n, first, last, _e, _f in counts})
        names = [os.path.basename(f.rstrip("/")) for f in files]
        offsets: dict[int, int] = {}
        ends: dict[int, tuple[int, float]] = {}  # set -> (last frame, last ts)
        members: dict[int, list[int]] = {}
        errors: list[tuple[int, str, int]] = []
        weights: dict[int, Counter] = {}  # set -> flow key -> sampled bytes
        for idx, packets, _first, last_ts, error, flows in counts:
            s = sets[idx]
            weights.setdefault(s, Counter()).update(marshal.loads(flows))
            frame, ts = ends.get(s, (0, 0.0))
            offsets[idx] = frame
            ends[s] = (frame + packets, max(ts, last_ts) if last_ts is not None else ts)
            members.setdefault(s, []).append(idx)
            if error:
                errors.append((idx, error.replace(files[idx], given.get(files[idx], files[idx])), packets))
        t1 = time.perf_counter()
        say(f"read {n_files:,} file{'s' if n_files != 1 else ''} ({len(members):,} capture"
            f"{'s' if len(members) != 1 else ''}) " + ("while Spark started" if meanwhile else f"in {t1 - t0:.1f} s"))

        # Stage 1: per set and flow bucket, reassembly + Kafka decode where the packets are read.
        buckets = max(1, min(cores, -(-cores // len(members))))  # few captures: split each by flow
        plans: list[st.TaskPlan] = []
        for s, idxs in sorted(members.items()):
            label = set_label([names[i] for i in idxs])
            assigned = st.spread_flows(weights[s], buckets)
            for b in range(buckets):
                plans.append(st.TaskPlan(len(plans), s, b, buckets, tuple((i, files[i], offsets[i]) for i in idxs),
                                         label, *ends[s], assigned))
        ports = None if ports is None else frozenset(int(p) for p in ports)
        # Cached as the JVM's column batches, not serialised: PySpark's MEMORY_AND_DISK is the serialised level, so
        # every batch was Java-serialised and LZ4-compressed going in and undone on each of the three reads (the
        # items are LZ4 already): ~0.4 of the JVM's ~2 CPU-s a 1.1 GB run, which local[2]'s workers pay for.
        decoded = map_in_arrow(spark.range(0, len(plans), 1, len(plans)), st.decode_stage(plans, ports, window),
                               st.ITEM_SCHEMA).persist(StorageLevel.MEMORY_AND_DISK_DESER)
        facts = [pickle.loads(r[0]) for r in decoded.filter(F.col("kind") == "facts").select("blob").collect()]
        facts.sort(key=lambda f: f.task)
        t2 = time.perf_counter()
        say(f"decoded {sum(f.flows for f in facts):,} TCP flows, {sum(f.exchanges for f in facts):,} exchanges "
            f"in {t2 - t1:.1f} s {_tasks(len(plans), (f.cpu_s for f in facts))}")
        if timings is not None:
            timings["files_and_counts_s"] = t1 - t0
            timings["segments_reassembly_decode_s"] = t2 - t1
        stats = st.file_stats(facts)
        seen = {idx for idx, _e, _n in errors}
        errors.extend((idx, fs.error.replace(files[idx], given.get(files[idx], files[idx])), fs.stats.packets)
                      for idx, fs in stats.items() if fs.error and idx not in seen)
        self.report = _report(names, facts, stats, errors)
        self.last_ts = max((f.last_ts for f in facts if f.last_ts is not None), default=None)
        self.last_kept_ts = max((f.last_kept_ts for f in facts if f.last_kept_ts is not None), default=None)
        # A file is read as fetchtool.decoder.DecodeRun decides: a packet of it decoded, or a clean empty capture.
        failed = {idx for idx, _e, _n in errors}
        if not any(fs.stats.decoded_any or (idx not in failed and not fs.stats.gave_nothing)
                   for idx, fs in stats.items()):
            msgs = [e for _i, e, _n in sorted(errors)] + [
                fs.stats.nothing_read(names[idx]) for idx, fs in sorted(stats.items()) if idx not in failed]
            decoded.unpersist()
            raise CaptureError(msgs[0] if len(msgs) == 1 else f"{msgs[0]} (and {len(msgs) - 1} more)")
        self.conn_ids = st.run_wide_ids(facts)
        known: dict[str, dict[str, tuple[str, tuple[int, int]]]] = {}
        for f in facts:
            for broker, topic_id, name, frame in f.names:
                learnt = known.setdefault(broker, {})
                if topic_id not in learnt or (f.set_idx, frame) < learnt[topic_id][1]:
                    learnt[topic_id] = (name, (f.set_idx, frame))
        self.names = known
        self.items = decoded.filter(F.col("kind") == "item")
        self.items_and_ends = decoded.filter(F.col("kind") != "facts")  # what the analysis reads
        self.decoded = decoded
        self.facts = facts
        self.cores = cores

    def release(self) -> None:
        self.decoded.unpersist()


def _started(paths, master: str | None, spark, verbose: bool):
    """(The session, the files counted while it started or None): `spark`, or a new session on `master` (first:
    without PySpark, the one-line SparkUnavailable comes before any file is read)."""
    early = counted_meanwhile(paths, master, spark)
    try:
        return spark or spark_session(master, verbose=verbose), early
    except BaseException:
        if early is not None:
            early.cancel()
        raise


def _report(names: list[str], facts: list, stats: dict, errors: list) -> DecodeReport:
    """One DecodeReport from the per-file capture statistics and the per-task protocol counters."""
    rep = DecodeReport(files=list(names))
    for _idx, msg, _n in sorted(errors):  # in file order (as the report lists the files), not stage order
        rep.warn("unreadable_file", msg)
    for idx in sorted(stats):
        rep.add_capture(stats[idx].stats)
    for f in facts:
        rep.merge(f.report)
    # Dicts in the order one sequential decode fills them: by where each key was first learnt.
    rep.client_software = _by_first(rep.client_software,
                                    ((client, (f.set_idx, frame)) for f in facts for client, frame in f.software))
    rep.topic_names = _by_first(rep.topic_names,
                                ((tid, (f.set_idx, frame)) for f in facts for _b, tid, _n, frame in f.names))
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
                  spark=None, timings: dict | None = None, window=None, progress=None, verbose: bool = False):
    """Decode and analyse captures on Spark -> fetchtool.analysis.model.Analysis (as analyze_capture, with the
    same --client / --broker filtering). ``window``: keep the items whose time it keeps (--since / --until, a
    fetchtool.commands.window.TimeWindow), as the embedded engine does. ``progress``: called with one line per
    stage done.

    `timings`, when given, gets wall seconds per stage (for benchmarks/bench_spark.py)."""
    spark, early = _started(paths, master, spark, verbose)
    d = _Decoded(spark, paths, ports, timings, window, progress, early)
    try:
        return _analyze(spark, d, cache_slots, cache_shards, client, broker, timings, window, progress)
    finally:
        d.release()


def _analyze(spark, d: _Decoded, cache_slots, cache_shards, client, broker, timings, window, progress):
    import time

    from pyspark.sql import functions as F

    from fetchtool.analysis.run import filtered, savings_filter

    from .spark_merge import merge, merged_savings

    t = time.perf_counter()
    # the end of the capture the embedded engine sees: its latest exchange (inside the window)
    last_ts = d.last_kept_ts if window else d.last_ts
    sc = spark.sparkContext
    conn_ids, names = sc.broadcast(d.conn_ids), sc.broadcast(d.names)
    savings_of = savings_filter(client, broker)
    # The savings per broker and client (most of the analysis' work, and it splits: its state is per client
    # stream), on every core; the per-broker pass (tracker, findings), one task a broker. The findings read the
    # savings' per-pair sums of sessionless clients only: when stage 1 saw few exchanges that may be sessionless,
    # a broker's task estimates those pairs itself and both run as one job (no stage waits for the other, and
    # the cores take the tasks as they come); else the savings first, then the brokers with their sums.
    groups: Counter = Counter()
    maybe: Counter = Counter()
    counts: Counter = Counter()
    work: Counter = Counter()
    for f in d.facts:
        groups.update(f.groups)
        work.update(f.work())
        maybe.update(f.sessionless)
        counts.update(f.brokers)
    together = sum(maybe.values()) * SESSIONLESS_SHARE <= sum(groups.values())
    n_savings = max(1, min(len(groups), 4 * d.cores))
    exchanges = d.items_and_ends.filter(F.col("client").isNotNull())
    if len(groups) <= 64:
        slots = st.broker_slots(Counter({f"{b}\n{c}": k for (b, c), k in work.items()}), n_savings)
        keyed = exchanges.withColumn("slot", _lookup(F.concat_ws("\n", "broker", "client"), slots))
        spread = keyed.repartition(n_savings, "slot").drop("slot")
    else:
        spread = exchanges.repartition(n_savings, "broker", "client")

    def savings_stage(batches):
        return st.savings_stage(conn_ids.value, names.value, savings_of)(batches)

    savings_df = map_in_arrow(spread.sortWithinPartitions("broker", "client", *st.SORT_KEY), savings_stage,
                              st.RESULT_SCHEMA)
    # One partition per broker (as many as there are cores, at most): a broker is one ordered pass.
    n_brokers = max(1, min(len(counts), 4 * d.cores))
    keyed = d.items_and_ends.withColumn("slot", _lookup(F.col("broker"), st.broker_slots(counts, n_brokers)))
    by_broker = keyed.repartition(n_brokers, "slot").sortWithinPartitions("broker", *st.SORT_KEY).drop("slot")

    def brokers_df(per_pair, sessionless):
        def stage(batches):
            return st.analysis_stage(conn_ids.value, names.value, last_ts, cache_slots, cache_shards, savings_of,
                                     per_pair, sessionless)(batches)

        return map_in_arrow(by_broker, stage, st.RESULT_SCHEMA)

    if together:
        sessionless: dict[str, set[str]] = {}
        for b, c in maybe:
            sessionless.setdefault(b, set()).add(c)
        # the brokers' tasks first: each is longer than a savings task, and the scheduler takes them in order
        with _session_conf(spark, UNION_KEEPS_PARTITIONING, "false"):
            rows = brokers_df(None, sessionless).union(savings_df).collect()
    else:
        rows = savings_df.collect()
    estimates = sorted(((pickle.loads(r["key"]), pickle.loads(r["part"]), r["cpu_s"]) for r in rows
                        if r["what"] == "savings"),
                       key=lambda kec: kec[0])  # merged in order of first sight, as one pass fills its dicts
    savings = [e for _k, e, _c in estimates]
    t1 = time.perf_counter()
    # Each line fits 80 columns whatever the task count: the tasks' CPU seconds summed, not listed.
    pairs = f"{len(groups):,} client-broker " + ("pairs'" if len(groups) != 1 else "pair's")
    when = "alongside" if together else f"in {t1 - t:.1f} s"
    estimated = f"estimated {pairs} savings {when} {_tasks(n_savings, (c for _k, _e, c in estimates))}"
    if not together:
        if progress:
            progress(estimated)
        rows = brokers_df(merged_savings(savings).per_pair, None).collect()
    parts = [pickle.loads(r["part"]) for r in rows if r["what"] == "broker"]
    t2 = time.perf_counter()
    if progress:
        progress(f"analysed {len(parts):,} broker{'s' if len(parts) != 1 else ''} in {t2 - (t if together else t1):.1f}"
                 f" s {_tasks(n_brokers, (p.cpu_s for p in parts))}")
        if together:
            progress(estimated)
    analysis = filtered(merge(parts, d.report, cache_slots, cache_shards, savings), client, broker)
    conn_ids.unpersist()
    names.unpersist()
    if timings is not None:
        timings["per_broker_analysis_s"] = t2 - t
        timings["driver_merge_s"] = time.perf_counter() - t2
    return analysis


SESSIONLESS_SHARE = 4  # the brokers' tasks estimate the sessionless pairs when they have at most 1/4 of the exchanges


def _lookup(column, slots: dict):
    """The slot of each row's `column` value (a literal map; 0 when there is none)."""
    from pyspark.sql import functions as F

    if not slots:
        return F.lit(0)
    return F.create_map(*[F.lit(x) for key, slot in slots.items() for x in (key, slot)])[column]


def decode_spark(paths, out_dir: str, *, master: str | None = None, ports=None, spark=None,
                 window=None, progress=None, verbose: bool = False, cache_slots=None, cache_shards=None
                 ) -> DecodeReport:
    """Write the Parquet datasets <out_dir>/exchanges, partitions, sessions and findings (directories,
    partitioned by capture_date and broker_dir: fetchtool.pipeline.spark_datasets); ``window`` as for
    analyze_spark. Returns the decode report, with exchanges_written and partitions_written."""
    from .spark_datasets import write_datasets

    spark, early = _started(paths, master, spark, verbose)
    d = _Decoded(spark, paths, ports, None, window, progress, early)
    try:
        analysis = _analyze(spark, d, cache_slots, cache_shards, None, None, None, window, progress)
        return write_datasets(spark, d, analysis, _resolve(str(out_dir)), progress)
    finally:
        d.release()


__all__ = ["analyze_spark", "decode_spark", "spark_session", "expand_paths", "stage_lines", "SparkUnavailable"]
