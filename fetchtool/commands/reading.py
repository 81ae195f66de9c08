"""How a command reads captures: one decode run, kept to --since/--until, with a progress bar, Ctrl-C stopping
the reading (not the command: what was read is still reported), and one rule for a capture without Kafka traffic.

    reading = Reading(captures, ports, window)
    analysis = analyze_items(reading.items(), ...)
    reading.require_traffic()          # exit NO_TRAFFIC with a hint, or go on
    ...print the report...
    reading.finish()                   # exit 130 if Ctrl-C cut the reading short
"""

from __future__ import annotations

import gc
import signal
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from fetchtool.commands.output import error_console, fail, warn
from fetchtool.commands.progress import CaptureProgress
from fetchtool.commands.window import TimeWindow
from fetchtool.commands.wording import plural
from fetchtool.exchange import Exchange

if TYPE_CHECKING:
    from fetchtool.protocol.codec import Rows

# Exit codes beside output.py's 1 (unusable input) and 2 (usage): the capture was read but held no Kafka Fetch
# exchange for the options given (wrong --port, a window outside the capture, not Kafka at all), and Ctrl-C
# (128 + SIGINT, as shells and click report it).
NO_TRAFFIC = 3
INTERRUPTED = 130


class Reading:
    def __init__(self, captures: list[Path], ports: list[int] | None, window: TimeWindow | None = None,
                 decode_in_child: bool = True, rows: Rows = True) -> None:
        """`decode_in_child`: a large capture is decoded whole in a forked child, for a command whose own work
        on the items is the larger half (analyze, sessions, savings, simulate, replay); `decode`, whose writing
        is lighter than the Kafka layer, keeps only the reading in the child (decoder.DecodeRun.in_child).
        `rows`: False, the exchanges' partition tuples only count; "packed", they carry the entries' packed
        fields for the partitions table (decoder.DecodeRun.rows)."""
        from fetchtool.decoder import decode_capture

        self.captures = captures
        self.ports = ports or None
        self.window = window or TimeWindow()
        self.run = decode_capture([str(p) for p in captures], self.ports, in_child=decode_in_child, rows=rows)
        self.exchanges = 0      # Fetch / FetchSnapshot exchanges kept (inside the window)
        self.seen = 0           # ... and before the window
        self.first_ts: float | None = None
        self.last_ts: float | None = None
        self.interrupted = False
        self.last_frame: int | None = None
        self._in_decode = False

    @property
    def report(self):
        return self.run.report

    def items(self):
        """The run's items inside the window. Raises the decoder's CaptureError when nothing can be read."""
        # Everything the command imported and set up so far (kio's hundreds of schema classes, polars, its own
        # modules, all imported when it runs: fetchtool.cli) lives as long as it: frozen, the collector stops
        # re-walking it each time decoding's millions of row tuples trigger a pass.
        gc.freeze()
        # A capture's analysis allocates millions of small objects it keeps: with the default 700-allocation
        # young generation the collector ran ~12% of analyze's CPU (storm20k: 7.65 s, 6.76 s at 50,000).
        gc.set_threshold(50_000, 20, 100)
        err = error_console()
        previous = _catch_sigint(self._on_sigint)
        it = iter(self.run)
        window = self.window
        try:
            with CaptureProgress(self.captures, err) as progress:
                while not self.interrupted:
                    self._in_decode = True
                    try:
                        item = next(it)
                    except (StopIteration, KeyboardInterrupt):
                        break
                    finally:
                        self._in_decode = False
                    if isinstance(item, Exchange):
                        progress.advance(item)
                        self.seen += 1
                        if item.ts is not None:
                            self.first_ts = item.ts if self.first_ts is None else min(self.first_ts, item.ts)
                            self.last_ts = item.ts if self.last_ts is None else max(self.last_ts, item.ts)
                    if window and not window.keeps(item):
                        continue
                    if isinstance(item, Exchange):
                        self.exchanges += 1
                        self.last_frame = item.request_frame
                    yield item
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)

    def _on_sigint(self, _sig, _frame) -> None:
        # While the decoder waits (on a slow file, a pipe) stop it at once; while the caller works on an item,
        # let it finish that item and stop at the next: either way what was read so far is reported.
        self.interrupted = True
        if self._in_decode:
            raise KeyboardInterrupt

    def require_traffic(self, exchanges: int | None = None, to_run: bool = False) -> None:
        """The one rule for a capture that gave no Fetch exchange (`exchanges`: the count when the items were
        not read through items(), e.g. by the Spark engine): no Kafka traffic at all (a wrong --port, not
        Kafka) or none inside --since/--until exits NO_TRAFFIC with a one-line hint. Kafka traffic without
        Fetch (a share group's ShareFetch, producers only) is a report of its own, with a warning saying so;
        but not for a command that has nothing `to_run` without Fetch (simulate, replay)."""
        found = self.exchanges if exchanges is None else exchanges
        if found or self.interrupted:
            return
        line = no_traffic_line(self.captures, self.ports, self.window, self.report, self.seen,
                               (self.first_ts, self.last_ts))
        if self.report.kafka_connections and not (self.seen and self.window) and not to_run:
            warn(line)
            return
        fail(line, NO_TRAFFIC)

    def finish(self) -> None:
        """After the report: say the reading was cut short, and exit 130."""
        if self.interrupted:
            interrupted_exit(self.last_frame)


def _catch_sigint(handler):
    """Install `handler` for SIGINT; the handler it replaces, or None when SIGINT stays as it is: ignored (a
    background job, nohup: the user asked for no Ctrl-C) or not ours to set (not the main thread)."""
    try:
        if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
            return None
        return signal.signal(signal.SIGINT, handler)
    except ValueError:
        return None


def interrupted_exit(last_frame: int | None = None, done: str = "read") -> None:
    where = f" (up to request frame {last_frame:,})" if last_frame is not None else ""
    typer.echo(f"interrupted: the report covers what was {done} before Ctrl-C{where}", err=True)
    raise typer.Exit(INTERRUPTED)


def no_traffic_line(captures, ports, window: TimeWindow, report, seen: int, span) -> str:
    """Why a capture that was read gave no Fetch exchange, and what to try."""
    from fetchtool.analysis.reports.timefmt import iso

    names = ", ".join(Path(str(c)).name for c in captures)
    if seen and window:
        first, last = span
        return (f"no Kafka Fetch exchange in {names} {window.describe()}: its {seen:,} "
                f"{plural(seen, 'exchange')} run from {iso(first)} to {iso(last)}")
    if ports:
        found = kafka_ports(captures)
        given = ", ".join(map(str, ports))
        if found:
            ports_seen = ", ".join(str(p) for p, _n in found.most_common())
            return (f"no Kafka Fetch traffic on port {given} in {names}: the capture carries Kafka Fetch traffic "
                    f"on port {ports_seen} (try --port {found.most_common(1)[0][0]}, or leave --port out)")
        return f"no Kafka Fetch traffic in {names} on port {given}, nor on any other port"
    if report.kafka_connections:
        apis = sorted({_api(k) for k, _v in report.requests})
        return (f"no Kafka Fetch traffic in {names}: {report.kafka_connections:,} Kafka "
                f"{plural(report.kafka_connections, 'connection')} carried only {', '.join(apis) or 'no requests'}")
    return (f"no Kafka traffic in {names}: none of its {report.connections:,} TCP "
            f"{plural(report.connections, 'connection')} ({report.packets:,} {plural(report.packets, 'packet')}) "
            "carried Kafka")


def kafka_ports(captures) -> Counter:
    """Broker port -> Fetch exchanges, decoding the captures again with the broker side detected (the hint for
    a wrong --port: a second pass, on the failure path only)."""
    from fetchtool.decoder import CaptureError, decode_capture

    ports: Counter = Counter()
    try:
        for item in decode_capture([str(c) for c in captures]):
            if isinstance(item, Exchange):
                ports[int(item.broker.rsplit(":", 1)[1])] += 1
    except (CaptureError, ValueError, IndexError):
        pass
    return ports


def _api(key: int) -> str:
    from fetchtool.protocol.headers import api_name

    return api_name(key)
