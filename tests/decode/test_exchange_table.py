"""decode --format table: printed in pieces from rows kept on disk, reading as the one table rich would draw, and
never a column squeezed away."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from fetchtool.analysis.reports.fit import Steps, cell_len
from fetchtool.commands.exchange_table import ExchangeRows

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS_DIR = ROOT / "captures" / "scenarios"


def printed(parts, width: int) -> str:
    out = io.StringIO()
    console = Console(file=out, width=width, color_system=None)
    for part in parts:
        console.print(part)
    return out.getvalue()


def one_rich_table(head, rows, title, width: int) -> str:
    """What rich draws for all the rows at once: Steps' layouts as a single Table (the way it was printed)."""
    widths = [max([cell_len(h)] + [cell_len(r[i]) for r in rows]) for i, h in enumerate(head)]
    if sum(widths) + 3 * (len(widths) - 1) <= width:
        t = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
        for h, w in zip(head, widths):
            t.add_column(h, no_wrap=True, min_width=w)
        for r in rows:
            t.add_row(*r)
        return printed([t], width)
    g = Table.grid(padding=(0, 2))
    g.add_column(no_wrap=True)
    g.add_column()
    g.add_row(Text(head[0], style="bold"), Text("  ".join(head[1:]), style="bold"))
    for r in rows:
        g.add_row(r[0], "  ".join(r[1:]))
    return printed([Text(title, style="bold italic"), g], width)


cells = st.text(st.characters(codec="utf-8", categories=("L", "N", "P", "Zs")), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(cells, cells, cells, cells), max_size=12), st.integers(20, 70))
def test_rows_printed_three_at_a_time_read_as_one_table(rows, width):
    head = ("time", "frames", "client id", "error")
    steps = Steps(head, rows, "some exchanges")
    steps.CHUNK_ROWS = 3
    assert printed(steps.parts(width), width) == one_rich_table(head, rows, "some exchanges", width)


def test_a_table_too_wide_by_its_column_gaps_becomes_rows_of_fields_not_a_table_without_its_last_column():
    # 8 columns whose widths and 2-space gaps fit 80 columns but whose 3-space gaps do not: rich used to squeeze
    # the records column away (decode's table lost it on four of the scenario captures)
    out = subprocess.run([sys.executable, "-m", "fetchtool", "decode", "-f", "table", "--width", "80",
                          str(SCENARIOS_DIR / "sessionless-many.pcap")], capture_output=True, text=True,
                         check=True).stdout
    assert "records" in out.splitlines()[1]
    assert all(line.rstrip().endswith("0 B") for line in out.splitlines()[2:4])
    assert max(cell_len(line) for line in out.splitlines()) <= 80


def test_rows_kept_on_disk_come_back_whole_on_every_pass():
    from fetchtool.exchange import Exchange

    rows = ExchangeRows()
    for i in range(2500):  # past a block of the file
        rows.add(Exchange("cap.pcap", 1, 2 * i + 1, 2 * i + 2, 1_700_000_000 + i, 1_700_000_000.001 + i,
                          "10.0.0.1:5000", "10.0.0.2:9092", 1, 12, i, f"c-{i}", None, -1, 0, -1, 500, 1, 52428800, 0,
                          None, 0, 0, 0, 60, 40))
    first, second = list(rows), list(rows)
    assert first == second and len(first) == 2500 and rows.count == 2500
    assert [r[5] for r in first] == [f"c-{i}" for i in range(2500)]
    assert rows.days == {"2023-11-14"}
    rows.close()
