"""`fetchtool sessions`: each fetch session's timeline, epoch by epoch, at any console width.

A table when its columns fit whole; otherwise one line per step, its fields separated by two spaces, wrapped at
spaces beside the step's time: an error name (FETCH_SESSION_ID_NOT_FOUND) or a frame pair moves to the next line
whole instead of being broken over four. A card per step (fit.Fit) would take eight lines for each of hundreds of steps.
"""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from fetchtool.analysis.model import Analysis, SessionLife
from fetchtool.analysis.reports.fit import Steps
from fetchtool.analysis.reports.terminal import created_text, end_text, when
from fetchtool.sessions.errors import error_name
from fetchtool.printable import one_line

KIND = {"full_create": "full, new", "incremental": "incr."}
NOTE = "partitions: sent in the request (+added, -forgotten), and -> returned in the response"


def heading(s: SessionLife) -> str:
    return f"session {s.session_id} on {s.broker}, client {one_line(s.owner)}, created {created_text(s)}, {end_text(s)}"


def rows(s: SessionLife) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for st in s.steps:
        result = "no response" if st.error_code is None else "ok" if st.error_code == 0 else error_name(st.error_code)
        back = "" if st.returned is None else f" -> {st.returned}"
        out.append((when(st.ts)[11:], f"{st.request_frame}/{st.response_frame or '-'}", str(st.conn),
                    KIND.get(st.kind, st.kind), str(st.epoch), f"{st.sent} (+{st.added} -{st.forgotten}){back}",
                    result))  # fmt: skip
    return out


class Timeline:
    """One session's steps (module docstring)."""

    def __init__(self, s: SessionLife) -> None:
        self.s, self.rows = s, rows(s)
        day = when(s.steps[0].ts)[:10] if s.steps else ""
        self.head = (f"{day} UTC", "frames", "conn", "kind", "epoch", "partitions", "result")

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Text(heading(self.s), style="bold")
        yield Steps(self.head, self.rows)
        note = NOTE + (f"; {self.s.steps_dropped:,} later requests not kept" if self.s.steps_dropped else "")
        yield Text(note, style="dim")
        yield Text("")


def render(analysis: Analysis, console: Console, client: str | None = None) -> None:
    if not analysis.sessions:
        console.print("No fetch sessions" + (f" for client {client}" if client else "") + " in the capture.")
        return
    for s in analysis.sessions:
        console.print(Timeline(s))
