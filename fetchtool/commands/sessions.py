"""Print fetch session timelines epoch by epoch (all clients, or one with --client)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich import box
from rich.table import Table

from fetchtool.analysis.reports.terminal import created_text, end_text, when
from fetchtool.commands.analyze import load
from fetchtool.commands.output import report_console
from fetchtool.sessions.errors import error_name


KIND = {"full_create": "full, new", "incremental": "incr."}


def main(
    capture: List[Path] = typer.Argument(..., help="pcap / pcapng files"),
    client: Optional[str] = typer.Option(None, "--client", help="client id, host or ip:port"),
    broker: Optional[str] = typer.Option(None, "--broker", help="broker ip:port or host"),
    port: Optional[List[int]] = typer.Option(None, "--port", help="broker port (repeatable)"),
    cache_slots: Optional[int] = typer.Option(
        None, "--cache-slots", help="the brokers' max.incremental.fetch.session.cache.slots, to explain evictions "
                                    "(default: infer)"),
    cache_shards: Optional[int] = typer.Option(
        None, "--cache-shards", help="fetch session cache shards (8 since Kafka 3.8, 1 before; default 8 with "
                                     "--cache-slots)"),
    eviction_ms: Optional[int] = typer.Option(
        None, "--eviction-ms", help="how long a session must be unused before a newcomer may evict it (Kafka: "
                                    "120000, not a config; set it for a broker that differs, e.g. fetchtool broker)"),
) -> None:
    analysis = load(capture, port, cache_slots, cache_shards, client, broker, eviction_ms=eviction_ms)
    console = report_console()
    if not analysis.sessions:
        console.print("No fetch sessions" + (f" for client {client}" if client else "") + " in the capture.")
        return
    for s in analysis.sessions:
        t = Table(title=f"session {s.session_id} on {s.broker} — client {s.owner} — "
                        f"created {created_text(s)} — {end_text(s)}", title_justify="left",
                  box=box.SIMPLE_HEAD, pad_edge=False)  # fmt: skip
        day = when(s.steps[0].ts)[:10] if s.steps else ""
        # Seven columns so a timeline fits an 80-column terminal; the date is said once, in the first header.
        for col in (f"{day} UTC", "frames", "conn", "kind", "epoch", "partitions", "result"):
            t.add_column(col, no_wrap=col != "result", overflow="fold")
        t.caption = "partitions: sent in the request (+added, -forgotten), and -> returned in the response"
        for st in s.steps:
            result = "no response" if st.error_code is None else ("ok" if st.error_code == 0 else
                                                                   error_name(st.error_code))  # fmt: skip
            back = "" if st.returned is None else f" -> {st.returned}"
            t.add_row(when(st.ts)[11:], f"{st.request_frame}/{st.response_frame or '-'}", str(st.conn),
                      KIND.get(st.kind, st.kind), str(st.epoch), f"{st.sent} (+{st.added} -{st.forgotten}){back}",
                      result)
        if s.steps_dropped:
            t.caption += f"; {s.steps_dropped} later requests not kept"
        console.print(t)
