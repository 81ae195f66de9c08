"""decode_capture: capture files in, Fetch / FetchSnapshot exchanges out (plus a DecodeReport).

    run = decode_capture(["broker.pcapng"])
    for item in run:            # Exchange, or OrphanResponse for a response whose request was not captured
        ...
    print("\n".join(run.report.lines()))

Chains capture/ (reader -> TCP segments -> reassembly) into protocol/ (framing -> pairing -> codec). Items come
out in request order within each capture (a file, or a rotated set of files decoded as one) by the frame that
completed the request, streamed: completed exchanges wait only while an earlier request on some connection still
waits for its response. Bad input never raises a traceback: unreadable files are counted warnings, and
CaptureError (one line) only when nothing could be read.

On a large capture the work is spread over processes (DecodeRun.in_child): the reading and reassembly in a
forked child (capture/streams.py), and for a busy consumer the Kafka layer too (decoding/forked.py), which then
sends the finished items; the items, `ended` and the report are the same either way.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from .capture.events import ConnectionClosed, StreamData, StreamGap, StreamRun
from .capture.reader import CaptureError, unreadable_line
from .capture.rotation import file_order, rotation_groups, set_label
from .capture.streams import FileRead, stream_set_events, worth_a_child
from .exchange import Exchange
from .protocol.codec import Rows
from .protocol.connection import DecodeContext, KafkaConnection, OrphanResponse
from .protocol.report import DecodeReport

if TYPE_CHECKING:
    from .decoding.forked import SideConsumer

_AFTER_EVERY_ITEM = 1 << 62  # sorts after any correlation id


class _Ended:
    """A connection's end, queued behind its items (decode_events' ``ended``)."""

    __slots__ = ("conn",)

    def __init__(self, conn: int) -> None:
        self.conn = conn


__all__ = ["decode_capture", "decode_events", "DecodeRun", "DecodeReport", "OrphanResponse", "CaptureError"]


class DecodeRun:
    """Iterate it once for the items; `report` is complete when the iteration ends.

    Files that are one capture cut in pieces (a rotated set: cap.pcap, cap.pcap1, ... following each other in
    time; capture/rotation.py) are decoded as one capture, as the Spark engine does: one TCP reassembly across
    the files, frames counting on from file to file (`mergecap -a` numbering), rows labelled with the set's
    label ("cap.pcap+2"); the report lists every file. Other files are decoded each on its own."""

    def __init__(self, paths: Iterable[str | os.PathLike] | str | os.PathLike, ports: Iterable[int] | None = None,
                 in_child: bool = True, rows: Rows = True):
        self.paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
        self.ports = None if ports is None else frozenset(int(p) for p in ports)
        self.report = DecodeReport()
        self._topic_names: dict[str, dict[str, str]] = {}  # broker -> topic id -> name, across files
        # Ids (Exchange.conn) of connections that closed and whose every item has been yielded, in that order:
        # a consumer may drain it between items and drop what it keeps per connection (analysis.run).
        self.ended: list[int] = []
        # Whether a large capture is decoded whole in a forked child (decoding/forked.py), this process only
        # rebuilding the items: for a consumer busier than the decoding (the analysis). Else only the reading
        # and reassembly are forked (capture/streams.py), and the Kafka layer runs here. (The decoding child
        # forks that reader in turn: three processes, the two decoding halves sharing the second core.)
        self.in_child = in_child
        # False: the Fetch exchanges' partition tuples may be stand-ins that only count (protocol/_fetch_flex.py),
        # for a consumer that uses their counts alone (`decode --format jsonl`): the rows' fields are not made.
        # "packed": those stand-ins also carry the entries' fields as the wire packs them (protocol/packed.py),
        # for the partitions table (`decode --out`); never decoded in a child, whose items carry plain tuples.
        self.rows = rows
        # A second consumer of the items, in a process of its own, when the run is decoded in a child
        # (decoding/forked.py SideConsumer): set before iterating.
        self.side: SideConsumer | None = None

    def __iter__(self) -> Iterator[Exchange | OrphanResponse]:
        if self.in_child and self.rows != "packed" and worth_a_child(*self.paths):
            from .decoding.forked import decoded_in_child

            return decoded_in_child(self._decode, self.ended, self.report, self.side)
        return self._decode()

    def _decode(self) -> Iterator[Exchange | OrphanResponse]:
        """The run in this process (large files still read in a forked child: capture/streams.py)."""
        read_any = False
        errors: list[str] = []

        def unreadable(msg: str) -> None:
            errors.append(msg)
            self.report.warn("unreadable_file", msg)

        self.report.files.extend(os.path.basename(os.fspath(path)) for path in file_order(self.paths))
        for group in rotation_groups(self.paths):
            names = [os.path.basename(os.fspath(path)) for path in group]
            reads = [FileRead(path) for path in group]
            events = stream_set_events(reads, runs=True)
            try:
                yield from decode_events(events, set_label(names), self.ports, self.report, self._topic_names,
                                          self.ended, self.rows)
            except (CaptureError, OSError) as exc:  # the reader process stopped: the set's files are not all read
                unreadable(unreadable_line(exc))
            finally:
                # A consumer that stopped early (Ctrl-C, a closed stdout) leaves the reading suspended: end it now,
                # so that the packets read so far are counted before the report takes the files' stats.
                events.close()
                for read, name in zip(reads, names):
                    stats, failure = read.stats, read.error
                    if failure is not None:
                        unreadable(unreadable_line(failure, read.path))
                        read_any = read_any or stats.decoded_any
                    elif stats.gave_nothing:  # its damage is a counted warning; the error if no file is read
                        errors.append(stats.nothing_read(name))
                    else:
                        read_any = True
                    self.report.add_capture(stats)
        if not read_any and errors:
            raise CaptureError(errors[0] if len(errors) == 1 else f"{errors[0]} (and {len(errors) - 1} more)")


def decode_capture(paths: Iterable[str | os.PathLike] | str | os.PathLike, ports: Iterable[int] | None = None,
                   in_child: bool = True, rows: Rows = True) -> DecodeRun:
    """Decode capture files. `ports`: the brokers' ports (else each connection's broker side is detected).
    `in_child`, `rows`: see DecodeRun."""
    return DecodeRun(paths, ports, in_child, rows)


def decode_events(
    events: Iterable[StreamData | StreamGap | ConnectionClosed | StreamRun],
    file: str = "",
    ports: frozenset[int] | None = None,
    report: DecodeReport | None = None,
    topic_names: dict[str, dict[str, str]] | None = None,
    ended: list[int] | None = None,
    rows: Rows = True,
) -> Iterator[Exchange | OrphanResponse]:
    """The protocol half on its own: stream events (of one file) in, items out in request order. ``ended``: where
    to append the id of each connection that closed once its last item has been yielded. ``rows``: see
    DecodeRun.rows."""
    report = report if report is not None else DecodeReport()
    pending: list[tuple[int, int, int]] = []  # heap of (request frame, conn, correlation id) awaiting responses
    resolved: dict[tuple[int | None, int, int], int] = {}
    ready: list[tuple[tuple[int | None, int, int], int, object]] = []
    seq = 0
    ctx = DecodeContext(file, report, ports, topic_names if topic_names is not None else {},
                        lambda key: heapq.heappush(pending, key), rows)
    conns: dict[int, KafkaConnection] = {}
    detecting: set[KafkaConnection] = set()  # connections still holding events back

    def opened(conn: int) -> KafkaConnection:
        report.connections += 1   # ids are unique within a decode run, across files: the count so far
        c = conns[conn] = KafkaConnection(report.connections, ctx)
        detecting.add(c)
        return c

    def push(items: Iterable) -> None:
        nonlocal seq
        for it in items:
            if isinstance(it, Exchange):
                key = (it.request_frame, it.conn, it.correlation_id)
                resolved[key] = resolved.get(key, 0) + 1
            else:
                key = (it.frame, it.conn, it.correlation_id)
            heapq.heappush(ready, (key, seq, it))
            seq += 1

    def drain(final: bool):
        while pending and resolved.get(pending[0]):
            key = heapq.heappop(pending)
            n = resolved[key] - 1
            if n:
                resolved[key] = n
            else:
                del resolved[key]
        limit = None if (final or not pending) else pending[0]
        if not final:
            for c in list(detecting):
                since = c.holding_since
                if since is None:
                    detecting.discard(c)  # decided (or ignored): its requests are in `pending` now
                elif limit is None or (since, 0, 0) < limit:
                    limit = (since, 0, 0)
        while ready and (limit is None or ready[0][0] < limit):
            it = heapq.heappop(ready)[2]
            if type(it) is _Ended:
                ended.append(it.conn)  # type: ignore[union-attr]  # markers are only pushed with a list
            else:
                yield it

    for ev in events:
        if isinstance(ev, StreamRun):
            # A message's many packets at once: those that only fill a frame are taken in one call; any other
            # piece goes through as its own event, exactly as without runs.
            c = conns.get(ev.conn)
            if c is None:
                c = opened(ev.conn)
            i, n = 0, len(ev.pieces)
            while i < n:
                i = c.feed_within_frames(ev, i)  # takes nothing while the connection is not framed as Kafka
                if i == n:
                    break
                items = c.feed(ev.event(i))
                i += 1
                if items:
                    push(items)
                    yield from drain(False)
            continue
        if isinstance(ev, ConnectionClosed):
            c = conns.pop(ev.conn, None)
            if c is not None:
                items = c.close()
                if ended is not None:
                    # after every item of the connection: they all completed by the frame that closed it
                    heapq.heappush(ready, ((ev.frame, c.conn, _AFTER_EVERY_ITEM), seq, _Ended(c.conn)))
                    seq += 1
                if items:
                    push(items)
                if items or ended is not None:
                    yield from drain(False)
            continue
        c = conns.get(ev.conn)
        if c is None:
            c = opened(ev.conn)
        if isinstance(ev, StreamGap):
            report.gaps += 1
            report.lost_bytes += ev.lost_bytes
        items = c.feed(ev)
        if items:
            push(items)
            yield from drain(False)
    for c in conns.values():
        push(c.close())
    conns.clear()
    yield from drain(True)

