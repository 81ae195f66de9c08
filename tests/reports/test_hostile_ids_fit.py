"""A client id full of control characters is shown escaped (`\\x1b]0;pwned\\x07`: 15 columns where the raw
string measured 7), and the reports are laid out for the escaped text: at every width no line is wider than
the console, no table cuts the escaped id with an ellipsis, and nothing raw reaches the console."""

from __future__ import annotations

import io
import re

import pytest
from hostile_capture import CLIENT_ID, OTHER_CLIENT_ID, SHOWN, write_hostile_capture
from rich.cells import cell_len

from fetchtool.analysis.reports import savings_panel, terminal
from fetchtool.analysis.run import analyze_capture
from fetchtool.commands.output import report_console
from fetchtool.printable import printable

from .rendered import WIDTHS

RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e\u2028]")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    return analyze_capture([str(write_hostile_capture(tmp_path_factory.mktemp("hostile") / "hostile.pcap"))])


def shown(render, width: int) -> str:
    buf = io.StringIO()
    render(report_console(buf, width=width))
    return buf.getvalue()


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("report", ["analyze", "savings"])
def test_an_escaped_client_id_fits_the_width_whole(hostile, report, width):
    if report == "analyze":
        out = shown(lambda console: terminal.render(hostile, console), width)
    else:
        out = shown(lambda console: console.print(savings_panel.terminal(hostile.savings)), width)
    assert not RAW.search(out)
    assert not [line for line in out.splitlines() if cell_len(line) > width]
    assert "…" not in out, "a table measured the raw id and cut the escaped one"
    assert SHOWN in out
    for client_id in (CLIENT_ID, OTHER_CLIENT_ID):
        escaped = printable(client_id)
        if len(escaped) + 20 < width:  # room for the id and a column beside it: it must be on one line, whole
            assert escaped in out, f"{escaped} cut at {width} columns"
