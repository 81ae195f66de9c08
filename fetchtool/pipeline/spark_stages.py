"""The Spark engine's executor-side stages: plain Python functions over Arrow batches (no pyspark import here).

Stage 0 (per file): count packets, so every file gets its frame offset in its rotated set, and the set's end;
         weigh the file's flows by the bytes of every 8th packet.
Stage 1 (per set and flow bucket): one task reads the set's files in order and makes TCP segments of its
         bucket's flows only (the set's heaviest flows are spread over the buckets by weight, the others go by a
         stable hash of their addresses and ports, taken from the raw headers: iter_segments' keep_flow), feeding
         them straight to the same sans-IO cores the embedded engine runs: TcpReassembler -> decode_events.
         Segments and their payloads never leave the task that read them: a set's headers are walked once per
         bucket (the cheap part), and no payload byte crosses a shuffle. Out come Arrow rows: one per Exchange /
         OrphanResponse (its sort key and broker as columns, the item serialised once, LZ4-compressed), plus
         one row of facts the driver needs to make
         run-wide numbering agree with one sequential decode: where each connection's first event is
         (connection ids), which Metadata named which topic ids when (topic names), counters, file statistics.
Stage 2 (per broker and client: savings; per broker: the rest), the items in request order (sorted by Spark on
         the key columns) -> the item's run-wide connection id and topic names -> SavingsEstimator per (broker,
         client) group; SessionTracker + FindingsEngine per broker. Sessions are broker-scoped (Kafka's cache
         lives in one broker), so a broker is the natural group; the savings' state is per client stream, so
         they split further. Both kinds of task run in one job unless many exchanges may be sessionless (the
         findings then wait for the savings' sums). Clients, savings and findings are merged on the driver
         (fetchtool.pipeline.spark_merge).

Rotated sets (fetchtool.capture.rotation: the rule both engines share, applied by the driver to stage 0's time
spans): files of one directory whose names differ only in digits (tcpdump -C: cap.pcap, cap.pcap1, ...) and whose
packets follow each other in time are one capture cut in pieces, in natural name order. Within a set, frame
numbers count on across files, exactly as `mergecap -a` of the set's files would number them, so a flow that
continues in the next file is one stream; every row's `file` is the set's label (`set_label`). A file that is
not part of a rotation is a set of one: its frames are Wireshark's and its label is its name.
"""

from __future__ import annotations

import errno
import marshal
import os
import pickle
import tempfile
import time
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields, replace
from itertools import groupby, islice

from fetchtool.analysis.tracking.tracker import host_of
from fetchtool.capture.events import ConnectionClosed
from fetchtool.capture.packets import CaptureStats, iter_segments
from fetchtool.capture.links import NOT_TCP, LinkDecoder, link_decoder, parse_tcp
from fetchtool.capture.reader import CaptureError, read_records, unreadable_line
from fetchtool.decoding.items import plain, rebuilt
from fetchtool.exchange import Exchange
from fetchtool.protocol.connection import OrphanResponse
from fetchtool.protocol.report import DecodeReport
from fetchtool.sessions.metadata import FINAL_EPOCH

# Stage 1's rows. `kind` is "item" (one Exchange / OrphanResponse), "end" (a connection's end) or "facts" (one per
# task); `client` is an exchange's "host|client id" (the savings are estimated per broker and client), None for an
# orphan response. The sort key of an item is (set, frame, task, conn, corr, seq): frame is the request frame (a
# response's frame for an orphan), conn the task-local connection id (the driver maps (task, conn) to the
# run-wide id), seq the order in which the decoder gave it (ties of one frame, connection and correlation id).
# An end row sorts where one sequential decode tells the consumers that the connection ended (decoder.DecodeRun
# .ended: after every item of it, at the frame that closed it): frame = that frame, corr = END_CORR; one row for
# each (broker, client) its kept exchanges had, no blob. The savings estimate needs them: its models are per
# client ip:port, and a port used again by a later connection is a new client stream only once the first ended.
ITEM_COLUMNS = ("kind", "broker", "client", "set", "frame", "task", "conn", "corr", "seq", "blob")
ITEM_SCHEMA = ("kind string, broker string, client string, set int, frame long, task int, conn int, corr int, "
               "seq long, blob binary")
SORT_KEY = ("set", "frame", "task", "conn", "corr", "seq")
END_CORR = (1 << 31) - 1  # after every correlation id of the connection's items at the closing frame
BATCH_ROWS = 4096  # rows per Arrow batch a stage yields, at most
# Stage 1's item batches are also cut at this many bytes of items: the JVM caches a batch as it arrives, so a
# task's items are cached while it decodes the next ones, not all after its last row (by rows alone, a task of a
# few thousand big items gave the JVM one batch at its end)
BATCH_BYTES = 1 << 20


@dataclass(frozen=True)
class TaskPlan:
    """What one stage-1 task reads: the files of a rotated set (index, path, frame offset) in order, and which
    of the set's flows it keeps (those whose bucket is `bucket` of `buckets`)."""

    task: int
    set_idx: int
    bucket: int
    buckets: int
    files: tuple[tuple[int, str, int], ...]
    label: str
    end_frame: int  # the set's last frame and time: where the reassembler finishes
    end_ts: float
    # flow key (flow_key) -> its bucket, for the set's heaviest flows (spread by their sampled bytes, stage 0);
    # every other flow goes by its hash (flow_bucket)
    assigned: dict[bytes, int] = field(default_factory=dict)


@dataclass(frozen=True)
class FileStats:
    """A file's capture statistics (the task of bucket 0 of its set reports them) and why it stopped, if so."""

    idx: int
    stats: CaptureStats
    error: str | None


@dataclass
class TaskFacts:
    """The small things a stage-1 task learnt besides its items (one pickled row)."""

    task: int
    set_idx: int
    conns: list  # (frame of the connection's first stream event, task-local id)
    names: list  # (broker, topic id, name, frame): where a Metadata response named a topic id
    software: list  # (client, frame): where an ApiVersions request named the client's software
    report: DecodeReport
    last_ts: float | None  # the latest exchange time (all, and inside the window)
    last_kept_ts: float | None
    files: list  # FileStats of the set's files (bucket 0 only)
    exchanges: int = 0
    flows: int = 0
    cpu_s: float = 0.0  # the task's CPU seconds (its Python worker's), for the progress line
    brokers: Counter = field(default_factory=Counter)  # items per broker
    groups: Counter = field(default_factory=Counter)  # exchanges per (broker, client)
    # partition entries per (broker, client) of the exchanges kept: the partitions table's rows, and with the
    # exchanges what a pair's savings estimate costs (clients with equal exchange counts differ 5x in entries:
    # bench1g's 20 pairs, 350 exchanges each, 40k-224k entries)
    entries: Counter = field(default_factory=Counter)
    # exchanges per (broker, client) that the tracker may count as sessionless (a superset: may_be_sessionless)
    sessionless: Counter = field(default_factory=Counter)

    @property
    def partition_rows(self) -> int:
        return sum(self.entries.values())

    def work(self) -> Counter:
        """Per (broker, client): its exchanges plus their partition entries (stage 2 spreads the pairs by it)."""
        return self.groups + self.entries


# -- items across the shuffle --------------------------------------------------------------------------------
# An item is written once (stage 1) and read by both later stages, so its form is what the shuffle costs in
# Python: marshal of the plain tuples the decoding child sends too (fetchtool.decoding.items), ~3x cheaper to
# write and ~1.5x cheaper to read than a pickle (whose named tuples are made one Python __new__ call each). An
# item with a value marshal cannot write is pickled. The marshal bytes are LZ4-compressed (pyarrow's codec):
# 3.7x fewer bytes for the JVMs to cache, shuffle and sort (bench1g: 134 -> 36 MB; a local[1] JVM's CPU on it
# 4.8 -> 2.7 s) for 0.16 s of Python CPU each way.
_LZ4, _PICKLE = b"z", b"p"


def item_blob(it) -> bytes:
    """An Exchange or OrphanResponse as the bytes stage 1 writes (item_of reads them back, equal)."""
    try:
        raw = marshal.dumps(plain(it))
    except ValueError:  # a value marshal does not know: pickle says the same
        return _PICKLE + pickle.dumps(it, pickle.HIGHEST_PROTOCOL)
    import pyarrow as pa

    return _LZ4 + len(raw).to_bytes(4, "little") + pa.compress(raw, codec="lz4_raw", asbytes=True)


def _record(blob: bytes):
    """The plain tuples an LZ4 blob holds."""
    import pyarrow as pa

    return marshal.loads(pa.decompress(memoryview(blob)[5:], decompressed_size=int.from_bytes(blob[1:5], "little"),
                                       codec="lz4_raw", asbytes=True))


def item_of(blob: bytes):
    """The item item_blob wrote."""
    if blob[:1] != _LZ4:
        return pickle.loads(memoryview(blob)[1:])
    return rebuilt(_record(blob))


def _batch(columns: tuple[str, ...], types: tuple[str, ...], rows: list[tuple]):
    """An Arrow batch of rows; types by name ("int64", "string", ...), as the stage's Spark schema says."""
    import pyarrow as pa

    return pa.RecordBatch.from_arrays([pa.array(list(col), type=getattr(pa, t)()) for col, t in zip(zip(*rows), types)],
                                      names=list(columns))


def _item_batch(rows: list[tuple]):
    import pyarrow as pa

    cols = list(zip(*rows))
    types = (pa.string(), pa.string(), pa.string(), pa.int32(), pa.int64(), pa.int32(), pa.int32(), pa.int32(), pa.int64(),
             pa.binary())
    return pa.RecordBatch.from_arrays([pa.array(c, type=t) for c, t in zip(cols, types)], names=list(ITEM_COLUMNS))


class _LocalCopy:
    """A local path for a capture: the path itself, or a temporary copy of a file a URI names (hdfs://, s3a://,
    read with pyarrow's filesystems on the executor)."""

    def __init__(self, path: str):
        self.path = path
        self.tmp: str | None = None

    def __enter__(self) -> str:
        if not is_uri(self.path):
            return self.path
        from pyarrow import fs

        uri = self.path.replace("s3a://", "s3://", 1).replace("s3n://", "s3://", 1)
        try:
            filesystem, inner = fs.FileSystem.from_uri(uri)
            fd, tmp = tempfile.mkstemp(suffix="-" + os.path.basename(self.path))
            self.tmp = tmp
            with os.fdopen(fd, "wb") as out, filesystem.open_input_stream(inner) as src:
                while chunk := src.read(1 << 22):
                    out.write(chunk)
        except Exception as exc:  # noqa: BLE001 - any filesystem failure is this file's one-line error
            detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise OSError(errno.EIO, f"cannot open ({detail})") from None
        return tmp

    def __exit__(self, *exc) -> None:
        if self.tmp:
            os.unlink(self.tmp)


def is_uri(f: str) -> bool:
    """hdfs://..., s3a://..., file:/... (a Windows drive letter is no scheme)."""
    head, sep, _rest = f.partition(":")
    return bool(sep) and len(head) > 1 and head.replace("+", "").replace(".", "").replace("-", "").isalnum() \
        and head[0].isalpha()


def is_remote(f: str) -> bool:
    """A URI read through Spark's Hadoop filesystems (hdfs://, s3a://, ...): not a local path, nor a file: URI."""
    return is_uri(f) and not f.startswith("file:")


def _error_line(exc: Exception, copy: _LocalCopy, path: str) -> str:
    line = unreadable_line(exc, path) if isinstance(exc, OSError) else unreadable_line(exc)
    return line.replace(copy.tmp, path) if copy.tmp else line


# -- stage 0 ----------------------------------------------------------------------------------------------------
COUNT_SCHEMA = "idx long, packets long, first_ts double, last_ts double, error string, flows binary"
SAMPLE_EVERY = 8  # stage 0 weighs the flows by the bytes of every 8th packet (its headers walked, not decoded)
FLOWS_PER_FILE = 256  # the heaviest flows a file reports


def count_packets(idx: int, path: str) -> tuple:
    """(index, packets, first ts, last ts, error or None, flows): rotated sets and their frame offsets come from
    these; `flows` (marshal of {flow key: sampled bytes}, the file's heaviest flows) lets the driver spread a
    set's flows over its buckets by weight."""
    packets, first_ts, last_ts, error = 0, None, None, None
    weights: Counter = Counter()
    decoders: dict[int, LinkDecoder | None] = {}
    copy = _LocalCopy(path)
    try:
        with copy as local:
            for _frame, ts, linktype, _iface, buf, off, caplen, origlen in read_records(local, Counter()):
                packets += 1
                if first_ts is None:
                    first_ts = ts
                last_ts = ts
                if packets % SAMPLE_EVERY:
                    continue
                if linktype not in decoders:
                    decoders[linktype] = link_decoder(linktype)
                decode = decoders[linktype]
                if decode is None:
                    continue
                end = off + caplen
                ip = decode(buf, off, end)
                tcp = parse_tcp(buf, ip, end, off + origlen) if ip >= 0 else NOT_TCP
                if not isinstance(tcp, int):
                    weights[flow_key(tcp[0], tcp[1], tcp[2])] += caplen
    except (CaptureError, OSError) as exc:
        error = _error_line(exc, copy, path)
    return idx, packets, first_ts, last_ts, error, marshal.dumps(dict(weights.most_common(FLOWS_PER_FILE)))


def count_stage(files: list[str]):
    """mapInArrow function: rows of file indexes -> one count row per file."""

    def run(batches):
        for batch in batches:
            rows = [count_packets(i, files[i]) for i in batch.column(0).to_pylist()]
            if rows:
                yield _batch(("idx", "packets", "first_ts", "last_ts", "error", "flows"),
                             ("int64", "int64", "float64", "float64", "string", "binary"), rows)

    return run


def spread_flows(weights: Counter, buckets: int, most: int = 4 * FLOWS_PER_FILE) -> dict[bytes, int]:
    """A set's heaviest flows (flow key -> sampled bytes) -> their buckets: each, heaviest first, to the bucket
    with the fewest bytes so far, so that a few big flows do not land in one task as their hashes fall."""
    if buckets < 2:
        return {}
    load = [0] * buckets
    out = {}
    for key, w in sorted(weights.most_common(most), key=lambda kw: (-kw[1], kw[0])):
        b = min(range(buckets), key=lambda i: (load[i], i))
        load[b] += w
        out[key] = b
    return out


# -- stage 1 ----------------------------------------------------------------------------------------------------
class _Names(dict):
    """DecodeContext.topic_names that remembers at which frame each broker learnt each topic id's name."""

    def __init__(self, now: list, learnt: list):
        super().__init__()
        self._now, self._learnt = now, learnt

    def setdefault(self, broker, default=None):
        if broker not in self:
            self[broker] = _BrokerNames(broker, self._now, self._learnt)
        return self[broker]


class _BrokerNames(dict):
    def __init__(self, broker: str, now: list, learnt: list):
        super().__init__()
        self._broker, self._now, self._learnt = broker, now, learnt

    def update(self, names):
        for topic_id, name in dict(names).items():
            if topic_id not in self:
                self._learnt.append((self._broker, topic_id, name, self._now[0]))
        super().update(names)


def flow_key(addrs: bytes, sport: int, dport: int) -> bytes:
    """A TCP flow's key, from the raw header fields iter_segments' keep_flow gets (the source and destination
    addresses' bytes, the ports): the same for both directions."""
    half = len(addrs) // 2
    a, b = addrs[:half] + sport.to_bytes(2, "big"), addrs[half:] + dport.to_bytes(2, "big")
    return a + b if a <= b else b + a


def flow_bucket(addrs: bytes, sport: int, dport: int, buckets: int, assigned: dict | None = None) -> int:
    """The bucket of a TCP flow: `assigned` to one (spread_flows), else by the hash of its key, the same in
    every process."""
    if buckets == 1:
        return 0
    key = flow_key(addrs, sport, dport)
    bucket = assigned.get(key) if assigned else None
    return zlib.crc32(key) % buckets if bucket is None else bucket


def bucket_filter(bucket: int, buckets: int, kept: set | None = None, assigned: dict | None = None):
    """iter_segments' keep_flow for one bucket: True for the flows of `bucket` (each kept flow's flow_key is
    added to `kept`). `assigned`: see flow_bucket."""

    def keep(addrs: bytes, sport: int, dport: int) -> bool:
        if flow_bucket(addrs, sport, dport, buckets, assigned) != bucket:
            return False
        if kept is not None:
            kept.add(flow_key(addrs, sport, dport))
        return True

    return keep


def savings_client(ex: Exchange) -> str:
    """An exchange's `client` column, "host|client id": the savings are estimated per broker and this client."""
    return f"{host_of(ex.client)}|{ex.client_id or ''}"


def may_be_sessionless(ex: Exchange) -> bool:
    """Whether the tracker could count this exchange as sessionless (a full request with epoch -1, with no session
    id or one the connection named before: savings.model.request_kind; or any Fetch below v7): a superset, so that
    every pair the findings ask the savings about is known before the analysis (the SESSIONLESS_CLIENT finding
    reads the savings estimate of the sessionless pairs only)."""
    return ex.api_version < 7 or ex.session_epoch in (None, FINAL_EPOCH)


def decode_task(plan: TaskPlan, ports: frozenset[int] | None, window=None) -> Iterator[tuple]:
    """Stage 1 for one task: item rows (ITEM_COLUMNS), then one facts row."""
    from fetchtool.capture.reassembly import TcpReassembler
    from fetchtool.decoder import decode_events

    cpu = time.process_time()
    report = DecodeReport()
    now = [0]
    firsts: list[int] = []
    seen: dict[int, int] = {}  # the reassembler's connection id -> decode_events' (task-local) one
    closed_at: dict[int, int] = {}  # task-local connection id -> the frame that closed it
    ended: list[int] = []  # decode_events' connection ends, drained before each item
    kept_pairs: dict[int, set] = {}  # task-local connection id -> (broker, client) of its kept items
    learnt: list = []
    software = report.client_software
    named: list = []  # (client, frame): where this task's clients named their software
    files: list[FileStats] = []
    flows: set[bytes] = set()  # the flows this task kept (flow_key)
    keep = bucket_filter(plan.bucket, plan.buckets, flows, plan.assigned)

    def _first(ev):
        # decode_events numbers connections in order of their first data/gap event: remember where that was.
        if isinstance(ev, ConnectionClosed):
            if ev.conn in seen:
                closed_at[seen[ev.conn]] = ev.frame
        elif ev.conn not in seen:
            firsts.append(ev.frame)
            seen[ev.conn] = len(firsts)

    def _software():
        # The report's client_software is in the order one sequential decode learns it: remember where.
        if len(software) > len(named):
            named.extend((client, now[0]) for client in islice(software, len(named), None))

    def events():
        reasm = TcpReassembler()
        for idx, path, offset in plan.files:
            stats = CaptureStats()
            error = None
            copy = _LocalCopy(path)
            try:
                with copy as local:
                    # the other buckets' flows are skipped before any Segment is made for them
                    for s in iter_segments(local, stats, offset, keep):
                        now[0] = s.frame
                        for ev in reasm.feed(s):
                            _first(ev)
                            yield ev
                            _software()  # decode_events asks for the next event once it has decoded this one
            except CaptureError as exc:
                # Stage 0 reports what the reader finds; only the packet layer sees an unsupported link type.
                error = _error_line(exc, copy, path)
            except OSError:
                pass  # reported by stage 0
            if plan.bucket == 0:
                files.append(FileStats(idx, stats, error))
        now[0] = plan.end_frame
        for ev in reasm.finish(plan.end_frame, plan.end_ts):
            _first(ev)
            yield ev
            _software()

    last: float | None = None
    last_kept: float | None = None
    exchanges = 0
    brokers: Counter = Counter()
    groups: Counter = Counter()
    sessionless: Counter = Counter()
    entries: Counter = Counter()
    seq = 0

    def ends():
        for conn in ended:
            for broker, client in sorted(kept_pairs.pop(conn, ()), key=lambda bc: (bc[0], bc[1] or "")):
                yield ("end", broker, client, plan.set_idx, closed_at[conn], plan.task, conn, END_CORR, seq, b"")
        ended.clear()

    for it in decode_events(events(), plan.label, ports, report, _Names(now, learnt), ended):
        if ended:
            yield from ends()
        kept = window is None or window.keeps(it)
        if isinstance(it, Exchange):
            exchanges += 1
            frame, ts = it.request_frame, it.response_ts or it.ts
            if ts is not None:
                if last is None or ts > last:
                    last = ts  # the FindingsEngine's "end of capture" (RESPONSE_MISSING)
                if kept and (last_kept is None or ts > last_kept):
                    last_kept = ts
        else:
            frame = it.frame
        if kept:
            brokers[it.broker] += 1
            client = None
            if isinstance(it, Exchange):
                client = savings_client(it)
                groups[(it.broker, client)] += 1
                if may_be_sessionless(it):
                    sessionless[(it.broker, client)] += 1
                entries[(it.broker, client)] += (len(it.request_partitions) + len(it.forgotten_partitions)
                                                 + len(it.response_partitions or ()))
            kept_pairs.setdefault(it.conn, set()).add((it.broker, client))
            yield ("item", it.broker, client, plan.set_idx, frame, plan.task, it.conn, it.correlation_id, seq,
                   item_blob(it))
        seq += 1
    yield from ends()
    facts = TaskFacts(plan.task, plan.set_idx, [(frame, i) for i, frame in enumerate(firsts, 1)], learnt, named,
                      report, last, last_kept, files, exchanges, len(flows), time.process_time() - cpu, brokers, groups, entries,
                      sessionless)
    yield ("facts", None, None, plan.set_idx, None, plan.task, None, None, None, pickle.dumps(facts, pickle.HIGHEST_PROTOCOL))


def decode_stage(plans: list[TaskPlan], ports: frozenset[int] | None, window=None):
    """mapInArrow function: rows of task ids -> each task's item rows and facts row."""

    def run(batches):
        for batch in batches:
            for task in batch.column(0).to_pylist():
                chunk: list[tuple] = []
                size = 0
                for row in decode_task(plans[task], ports, window):
                    chunk.append(row)
                    size += len(row[-1])
                    if len(chunk) >= BATCH_ROWS or size >= BATCH_BYTES:
                        yield _item_batch(chunk)
                        chunk, size = [], 0
                if chunk:
                    yield _item_batch(chunk)

    return run


# -- between stage 1 and 2: run-wide connection ids and topic names ------------------------------------------
def run_wide_ids(facts: Iterable[TaskFacts]) -> dict[tuple[int, int], int]:
    """(task, task-local connection id) -> the run-wide id: in order of each connection's first stream event, as
    one sequential decode numbers them."""
    firsts = sorted((f.set_idx, frame, f.task, local) for f in facts for frame, local in f.conns)
    return {(task, local): gid for gid, (_s, _f, task, local) in enumerate(firsts, 1)}


def finish_item(it, set_idx: int, gid: int, names: dict):
    """The item with its run-wide connection id and the topic names other connections taught."""
    if isinstance(it, Exchange):
        it = _with_names(it, names.get(it.broker), set_idx)
        return replace(it, conn=gid)
    return OrphanResponse(gid, it.frame, it.ts, it.client, it.broker, it.correlation_id, it.file)


def _with_names(ex: Exchange, known: dict | None, set_idx: int) -> Exchange:
    """Name topic ids the way one sequential decode would have: from Metadata answered before this frame."""
    if not known:
        return ex

    def fill(parts, frame):
        if not parts or frame is None:
            return parts, False
        out, changed = [], False
        for p in parts:
            if p.topic is None and p.topic_id is not None:
                hit = known.get(p.topic_id)
                if hit is not None and hit[1] < (set_idx, frame):  # files of earlier sets come first
                    p = p._replace(topic=hit[0])
                    changed = True
            out.append(p)
        return tuple(out), changed

    req, c1 = fill(ex.request_partitions, ex.request_frame)
    fgt, c2 = fill(ex.forgotten_partitions, ex.request_frame)
    rsp, c3 = fill(ex.response_partitions, ex.response_frame)
    if not (c1 or c2 or c3):
        return ex
    return replace(ex, request_partitions=req, forgotten_partitions=fgt, response_partitions=rsp)


_EXCHANGE_CONN = [f.name for f in fields(Exchange)].index("conn")
_ORPHAN_CONN = [f.name for f in fields(OrphanResponse)].index("conn")


def finished_item(blob: bytes, set_idx: int, gid: int, names: dict):
    """item_of(blob) finished (finish_item) in one step: the run-wide connection id goes into the plain tuple
    before the item is made, not into a copy of it."""
    if blob[:1] != _LZ4:
        return finish_item(item_of(blob), set_idx, gid, names)
    record = _record(blob)
    head = record[0]
    at = _ORPHAN_CONN if len(record) == 1 else _EXCHANGE_CONN
    it = rebuilt(((*head[:at], gid, *head[at + 1:]), *record[1:]))
    if names and type(it) is Exchange:
        return _with_names(it, names.get(it.broker), set_idx)
    return it


def finished_items(batches, conn_ids: dict, names: dict) -> Iterator[tuple[str, tuple, object]]:
    """Stage 1's item and end rows (Arrow batches, in order) -> (broker, run-wide sort key, finished item, or for
    an end row the connection's run-wide id: an int, as between the items of a decode in a child)."""
    for batch in batches:
        cols = batch.to_pydict()
        for kind, broker, set_idx, frame, task, conn, corr, seq, blob in zip(
                cols["kind"], cols["broker"], cols["set"], cols["frame"], cols["task"], cols["conn"], cols["corr"],
                cols["seq"], cols["blob"]):
            gid = conn_ids[(task, conn)]
            item = gid if kind == "end" else finished_item(blob, set_idx, gid, names)
            yield broker, (set_idx, frame, gid, corr, seq), item


def spark_hash_int(value: int, seed: int = 42) -> int:
    """Spark's hash() of an int column (Murmur3_x86_32.hashInt), so the driver can choose which partition of a
    repartition(n, col) each value lands in: pmod(hash, n)."""
    m = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & m

    k1 = rotl((value & m) * 0xCC9E2D51 & m, 15) * 0x1B873593 & m
    h1 = (rotl(seed ^ k1, 13) * 5 + 0xE6546B64) & m
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & m
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & m
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def broker_slots(counts: Counter, partitions: int) -> dict[str, int]:
    """broker -> an int whose Spark hash puts it in its own partition of `partitions` (the biggest brokers
    first, each to the least loaded partition), so that few brokers never share a core by accident."""
    keys: dict[int, int] = {}  # partition -> the smallest int that hashes there
    v = 0
    while len(keys) < partitions:
        keys.setdefault(spark_hash_int(v) % partitions, v)
        v += 1
    load = [0] * partitions
    out = {}
    for broker, n in sorted(counts.items(), key=lambda bn: (-bn[1], bn[0])):
        p = min(range(partitions), key=lambda i: (load[i], i))
        load[p] += n
        out[broker] = keys[p]
    return out


# -- stage 2 ----------------------------------------------------------------------------------------------------
# What stage 2's tasks send the driver: a savings estimate ("savings": key = its group's first sort key, pickled)
# or a broker's part ("broker": key = the broker's name); both kinds can come from one job.
RESULT_COLUMNS = ("what", "key", "part", "cpu_s")
RESULT_TYPES = ("string", "binary", "binary", "float64")
RESULT_SCHEMA = "what string, key binary, part binary, cpu_s double"


def savings_stage(conn_ids: dict, names: dict, savings_of):
    """mapInArrow function: the exchange rows of (broker, client) groups (sorted by broker, client, then
    SORT_KEY) -> per group, its first sort key, its pickled SavingsEstimator and the CPU seconds it took (reading
    its items included)."""
    from .spark_merge import estimate_savings

    def run(batches):
        rows = _with_client(batches, conn_ids, names)
        cpu = time.process_time()
        for _group, group in groupby(rows, key=lambda r: r[0]):
            first: list = []
            savings = estimate_savings(_noting_first(group, first), savings_of)
            spent, cpu = time.process_time() - cpu, time.process_time()
            yield _batch(RESULT_COLUMNS, RESULT_TYPES, [("savings", pickle.dumps(first[0]),
                                                         pickle.dumps(savings, pickle.HIGHEST_PROTOCOL), spent)])

    return run


def _noting_first(group, first: list):
    """(key, item) of a group's rows, the first key also appended to `first`."""
    for _g, key, it in group:
        if not first:
            first.append(key)
        yield key, it


def _with_client(batches, conn_ids: dict, names: dict):
    """((broker, client) group, run-wide sort key, finished item)."""
    for batch in batches:
        clients = batch.column("client").to_pylist()
        for (broker, key, it), client in zip(finished_items([batch], conn_ids, names), clients):
            yield (broker, client), key, it


def analysis_stage(conn_ids: dict, names: dict, last_ts: float | None, cache_slots, cache_shards, savings_of,
                   per_pair: dict | None = None, sessionless: dict[str, set[str]] | None = None):
    """mapInArrow function: one broker's item rows (sorted by broker, then SORT_KEY) -> one pickled BrokerPart.
    The savings were estimated before (``per_pair``: their per-pair sums) or are being estimated at the same
    time (``sessionless``: broker -> the clients whose sums the findings may read, estimated here)."""
    from .spark_merge import analyze_broker

    def run(batches):
        items = finished_items(batches, conn_ids, names)
        # Streamed: a broker's exchanges go through the tracker one by one, never all in memory.
        cpu = time.process_time()
        for broker, group in groupby(items, key=lambda bki: bki[0]):
            part = analyze_broker(broker, ((key, it) for _b, key, it in group), last_ts, cache_slots,
                                  cache_shards, savings_of,
                                  None if per_pair is None else {k: v for k, v in per_pair.items() if k[2] == broker},
                                  None if sessionless is None else sessionless.get(broker, set()))
            part.cpu_s, cpu = time.process_time() - cpu, time.process_time()
            yield _batch(RESULT_COLUMNS, RESULT_TYPES, [("broker", broker.encode(),
                                                         pickle.dumps(part, pickle.HIGHEST_PROTOCOL), part.cpu_s)])

    return run


def table_stage(conn_ids: dict, names: dict, which: str):
    """mapInArrow function for decode --out: stage 1's item rows -> rows of the exchanges or partitions table,
    with the capture date and broker the datasets are partitioned by."""
    import pyarrow as pa

    from .tables import exchanges_batch, partitions_batch

    batch_of = exchanges_batch if which == "exchanges" else partitions_batch

    def run(batches):
        chunk: list[Exchange] = []

        def flush():
            batch = batch_of(chunk)
            ex_date = {(ex.conn, ex.request_frame, ex.correlation_id): (_date(ex.ts), ex.broker) for ex in chunk}
            keys = zip(*(batch.column(c).to_pylist() for c in ("conn", "request_frame", "correlation_id")))
            dates = [ex_date[k] for k in keys]
            batch = pa.RecordBatch.from_arrays(
                [*batch.columns, pa.array([d for d, _b in dates], pa.string()),
                 pa.array([dir_name(b) for _d, b in dates], pa.string())],
                names=[*batch.schema.names, "capture_date", "broker_dir"])
            yield from _plain_types(pa.Table.from_batches([batch])).to_batches()

        for _broker, _key, it in finished_items(batches, conn_ids, names):
            if isinstance(it, Exchange):
                chunk.append(it)
                if len(chunk) >= 512:
                    yield from flush()
                    chunk = []
        if chunk:
            yield from flush()

    return run


def _plain_types(table):
    """The tables' large_string columns as string: Spark's Arrow reader takes string."""
    import pyarrow as pa

    return table.cast(pa.schema([pa.field(f.name, pa.string() if f.type == pa.large_string() else f.type)
                                 for f in table.schema]))


def _date(ts: float | None) -> str:
    return "unknown" if ts is None else time.strftime("%Y-%m-%d", time.gmtime(ts))


def dir_name(broker: str | None) -> str:
    """A broker address as a directory name every reader takes as it is: 10.0.0.1:9092 -> 10.0.0.1_9092."""
    return "unknown" if not broker else "".join(c if c.isalnum() or c in ".-" else "_" for c in broker)


def file_stats(facts: Iterable[TaskFacts]) -> dict[int, FileStats]:
    return {fs.idx: fs for f in facts for fs in f.files}
