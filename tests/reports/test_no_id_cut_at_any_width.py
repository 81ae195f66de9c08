"""At 60, 80, 120 and 200 columns, and piped, no report cuts an id: every client id, ip:port, session id,
broker and finding code of the JSON appears whole, and no line is wider than the console (issue #17: at 80
columns `peerla…`, `127.0.…`, session 123456789 as `12…`, savings bars that cut ports off client ids)."""

from __future__ import annotations

import pytest

from .rendered import CAPTURES, WIDTHS, analysis, analyze_text, ids, markdown_text, savings_text


def _too_wide(out: str, width: int) -> list[str]:
    return [line for line in out.splitlines() if len(line) > width]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_analyze_shows_every_id_whole_within_the_width(path, width):
    a = analysis(path)
    out = analyze_text(a, width)
    assert not _too_wide(out, width)
    missing = sorted(i for i in ids(a) if i not in out)
    assert not missing, f"cut or left out at {width} columns: {missing}"


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_savings_shows_every_client_and_connection_whole_within_the_width(path, width):
    a = analysis(path)
    out = savings_text(a, width)
    assert not _too_wide(out, width)
    for c in a.savings["per_client"]:
        for whole in (f"{c['client_id'] or '?'}@{c['host']}", *c["addresses"]):
            assert whole in out, f"{whole} cut at {width} columns"


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_markdown_names_every_id(path):
    a = analysis(path)
    out = markdown_text(a)
    assert not sorted(i for i in ids(a) if i not in out)


def test_a_table_when_it_fits_cards_when_it_does_not():
    a = analysis(next(p for p in CAPTURES if p.name == "java-evictions.pcap"))
    wide, narrow = analyze_text(a, 200), analyze_text(a, 80)
    # 200 columns: the clients are a table, one row each
    assert "┃ client " in wide and "│ java-small-0@127.0.0.1 │ 127.0.0.1:37526" in wide
    # 80 columns: one card per client and session, the label on a line of its own
    lines = narrow.splitlines()
    at = lines.index("java-small-0@127.0.0.1")
    assert lines[at + 1].strip() == "connections: 127.0.0.1:37526"
    assert "session 155062128" in lines and "  client: java-small-0@127.0.0.1:37526" in lines


def test_the_savings_chart_tells_clients_on_one_host_apart_at_80_columns():
    # kafka-python-cache-full: consumers on one host whose ids differ only near the end
    a = analysis(next(p for p in CAPTURES if p.name == "kafka-python-cache-full.pcap"))
    out = savings_text(a, 80)
    labels = [f"{c['client_id']}@{c['host']}" for c in a.savings["per_client"]]
    assert len(set(labels)) == len(labels) >= 2
    chart = out[out.index("Actual vs incremental bytes per client"):]
    assert all(label in chart for label in labels)
