"""The Spark engine's executor-side stages: plain Python functions over plain tuples (no pyspark import here).

Stage 0 (per file): count packets, so every file gets its frame offset in the ordered set of files.
Stage 1 (per file): TCP segments out of the file, keyed by flow (the unordered 4-tuple), with the global frame.
Stage 2 (per flow, across files): the flow's segments in frame order -> TcpReassembler -> decode_events (the
         same sans-IO cores the polars engine runs) -> Exchange / OrphanResponse items, plus the small facts the
         driver needs to make run-wide numbering agree with one sequential decode: where each connection's
         first event is (connection ids), which Metadata named which topic ids when (topic names), counters.
Stage 3 (per broker): the broker's items in request order -> SessionTracker + FindingsEngine + SavingsEstimator.
         Sessions are broker-scoped (Kafka's cache lives in one broker), so a broker is the natural group;
         clients, savings and findings are merged on the driver (fetchtool.pipeline.spark_merge).

Rotated sets (fetchtool.capture.rotation: the rule both engines share, applied by the driver to stage 0's time
spans): files of one directory whose names differ only in digits (tcpdump -C: cap.pcap, cap.pcap1, ...) and whose
packets follow each other in time are one capture cut in pieces, in natural name order. Within a set, frame
numbers count on across files, exactly as `mergecap -a` of the set's files would number them, so a flow that
continues in the next file is one stream; every row's `file` is the set's label (`set_label`). A file that is
not part of a rotation is a set of one: its frames are Wireshark's and its label is its name.
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator
from itertools import groupby, islice

from fetchtool.capture.events import ConnectionClosed, Endpoint, Segment
from fetchtool.capture.packets import CaptureStats, iter_segments
from fetchtool.capture.reader import CaptureError, read_records, unreadable_line
from fetchtool.exchange import Exchange
from fetchtool.protocol.connection import OrphanResponse
from fetchtool.protocol.report import DecodeReport

STATS_KEY = (-1,)  # the flow key of per-file capture statistics travelling with the segments (sorts first)


class _LocalCopy:
    """A local path for a capture: the path itself, or a temporary copy of a remote file's bytes."""

    def __init__(self, path: str, data: bytes | None):
        self.path, self.data = path, data
        self.tmp: str | None = None

    def __enter__(self) -> str:
        if self.data is None:
            return self.path
        fd, tmp = tempfile.mkstemp(suffix="-" + os.path.basename(self.path))
        self.tmp = tmp
        with os.fdopen(fd, "wb") as fh:
            fh.write(self.data)
        return tmp

    def __exit__(self, *exc) -> None:
        if self.tmp:
            os.unlink(self.tmp)


# -- stage 0 ----------------------------------------------------------------------------------------------------
def count_packets(idx: int, path: str, data: bytes | None = None) -> tuple:
    """(index, packets, first ts, last ts, error or None): rotated sets and their frame offsets come from these."""
    packets, first_ts, last_ts, error = 0, None, None, None
    copy = _LocalCopy(path, data)
    try:
        with copy as local:
            for _frame, ts, *_rest in read_records(local, Counter()):
                packets += 1
                if first_ts is None:
                    first_ts = ts
                last_ts = ts
    except (CaptureError, OSError) as exc:
        error = unreadable_line(exc, path)
    if error and copy.tmp:
        error = error.replace(copy.tmp, path)
    return idx, packets, first_ts, last_ts, error


# -- stage 1 ----------------------------------------------------------------------------------------------------
def file_segments(idx: int, path: str, offset: int, set_idx: int, data: bytes | None = None):
    """Yield (flow key, segment row) for every TCP segment of one file, then (STATS_KEY, stats row)."""
    stats = CaptureStats()
    error = None
    copy = _LocalCopy(path, data)
    try:
        with copy as local:
            for s in iter_segments(local, stats, offset):
                a, b = s.src, s.dst
                key = ((set_idx, a.ip, a.port, b.ip, b.port) if (a.ip, a.port) <= (b.ip, b.port)
                       else (set_idx, b.ip, b.port, a.ip, a.port))
                yield key, (s.frame, s.ts, a.ip, a.port, b.ip, b.port, s.seq, s.flags, s.payload, s.ack,
                            s.truncated)
    except CaptureError as exc:
        # Stage 0 reports what the reader finds; only the packet layer sees an unsupported link type.
        error = unreadable_line(exc)
        if copy.tmp:
            error = error.replace(copy.tmp, path)
    except OSError:
        pass  # reported by stage 0
    yield STATS_KEY, (idx, stats.packets, stats.bytes, stats.tcp_segments, stats.skipped_non_tcp,
                      dict(stats.warnings), error)


# -- stage 2 ----------------------------------------------------------------------------------------------------
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


def decode_flows(rows, labels: dict[int, str], ports: frozenset[int] | None, ends: dict[int, tuple[int, float]]):
    """Stage 2 over one Spark partition: rows ((flow key, frame), segment row) sorted by flow then frame.
    A flow key starts with its rotated set's index; `labels` and `ends` (last frame, last ts) are per set.

    Yields tagged records:
      ("item", sort key, flow key, item)          Exchange / OrphanResponse with flow-local connection ids
      ("conn", (set, frame), flow key, local id)  where each connection's first stream event is
      ("name", broker, topic id, name, (set, frame))  a Metadata response named a topic id
      ("software", client, (set, frame))          an ApiVersions request named the client's software
      ("report", DecodeReport, last ts)           this partition's protocol counters, latest exchange time
      ("stats", file index, packets, bytes, TCP segments, non-TCP packets, warnings, error or None)
    """
    report = DecodeReport()
    last: list[float | None] = [None]  # the latest exchange time, shared with _decode_flow
    # Streamed: one flow's segments are never all in memory (a long flow can be most of a capture).
    for key, group in groupby(rows, key=lambda kr: kr[0][0]):
        if key == STATS_KEY:
            for _k, row in group:
                yield ("stats", *row)
            continue
        segs = (row for _k, row in group)
        yield from _decode_flow(key, segs, labels[key[0]], ports, report, *ends[key[0]], last)
    yield ("report", report, last[0])


def _decode_flow(flow: tuple, rows: Iterable[tuple], label: str, ports: frozenset[int] | None, report: DecodeReport,
                 end_frame: int, end_ts: float, last: list[float | None]) -> Iterator[tuple]:
    from fetchtool.capture.reassembly import TcpReassembler
    from fetchtool.decoder import decode_events

    eps: dict[tuple, Endpoint] = {}

    def ep(ip, port):
        e = eps.get((ip, port))
        if e is None:
            e = eps[(ip, port)] = Endpoint(ip, port)
        return e

    now = [0]
    firsts: list[int] = []
    seen: set[int] = set()
    learnt: list = []
    software = report.client_software
    named: list = []  # (client, frame): where this flow's clients named their software

    def events():
        reasm = TcpReassembler()
        for frame, ts, sip, sport, dip, dport, seq, flags, payload, ack, truncated in rows:
            now[0] = frame
            for ev in reasm.feed(Segment(frame, ts, ep(sip, sport), ep(dip, dport), seq, flags, payload, ack,
                                         truncated)):
                _first(ev)
                yield ev
                _software()  # decode_events asks for the next event once it has decoded this one
        now[0] = end_frame
        for ev in reasm.finish(end_frame, end_ts):
            _first(ev)
            yield ev
            _software()

    def _software():
        # The report's client_software is in the order one sequential decode learns it: remember where.
        if len(software) > len(named) + known:
            named.extend((client, now[0]) for client in islice(software, len(named) + known, None))

    def _first(ev):
        # decode_events numbers connections in order of their first data/gap event: remember where that was.
        if not isinstance(ev, ConnectionClosed) and ev.conn not in seen:
            seen.add(ev.conn)
            firsts.append(ev.frame)

    set_idx = flow[0]
    base = report.connections  # decode_events numbers this flow's connections base+1, base+2, ...
    known = len(software)  # clients other flows of this partition named
    seq = 0
    for it in decode_events(events(), label, ports, report, _Names(now, learnt)):
        if isinstance(it, Exchange):
            frame, ts = it.request_frame, it.response_ts or it.ts
            if ts is not None and (last[0] is None or ts > last[0]):
                last[0] = ts  # the FindingsEngine's "end of capture" (RESPONSE_MISSING)
        else:
            frame = it.frame
        yield ("item", (set_idx, frame, it.conn, it.correlation_id, seq), flow, it)
        seq += 1
    for i, frame in enumerate(firsts):
        yield ("conn", (set_idx, frame), flow, base + 1 + i)
    for broker, topic_id, name, frame in learnt:
        yield ("name", broker, topic_id, name, (set_idx, frame))
    for client, frame in named:
        yield ("software", client, (set_idx, frame))


# -- between stage 2 and 3: run-wide connection ids and topic names ------------------------------------------
def finish_item(rec, conn_ids: dict, names: dict):
    """(broker, sort key, item) with the run-wide connection id and the topic names other connections taught."""
    _tag, (set_idx, frame, conn, corr, seq), flow, it = rec
    gid = conn_ids[(flow, conn)]
    if isinstance(it, Exchange):
        it = _with_names(it, names.get(it.broker), set_idx)
        it = _replace(it, conn=gid)
    else:
        it = OrphanResponse(gid, it.frame, it.ts, it.client, it.broker, it.correlation_id, it.file)
    return it.broker, (set_idx, frame, gid, corr, seq), it


def _replace(ex: Exchange, **kw) -> Exchange:
    from dataclasses import replace

    return replace(ex, **kw)


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
    return _replace(ex, request_partitions=req, forgotten_partitions=fgt, response_partitions=rsp)
