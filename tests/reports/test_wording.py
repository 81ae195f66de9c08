"""What the reports say reads as prose: no `None`, no "-738 B more", numbers with thousands separators and words
that agree with them, no empty tables, and the Markdown report carries the decode warnings the terminal shows
(issue #17)."""

from __future__ import annotations

import re

import pytest

from fetchtool.analysis.run import analyze_capture

from .rendered import CAPTURES, analysis, analyze_text, markdown_text, savings_text

NEGATIVE_PROSE = re.compile(r"-\d[\d,.]* [KMGT]?B (more|less|fewer)|saving -\d|lose -\d|save -\d|carry -\d")
ONE_PLURAL = re.compile(r"(?<![\d,.])1 (exchanges|clients|sessions|packets|connections|gaps|errors|warnings|"
                        r"requests|Fetch exchanges)\b")
NO_SEPARATOR = re.compile(r"(?<![\d,./:@-])\d{4,} (exchanges|refused|packets|connections|Fetch exchanges)\b")


def _reports(a) -> dict[str, str]:
    return {"terminal": analyze_text(a, 80), "markdown": markdown_text(a), "savings": savings_text(a, 80)}


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_reports_read_as_prose(path):
    for name, out in _reports(analysis(path)).items():
        assert "None" not in out, name
        assert not NEGATIVE_PROSE.search(out), (name, NEGATIVE_PROSE.search(out))
        assert not ONE_PLURAL.search(out), (name, ONE_PLURAL.search(out))
        assert not NO_SEPARATOR.search(out), (name, NO_SEPARATOR.search(out))
        assert "re-size differently" not in out


def test_negative_figures_are_said_with_less_not_a_minus():
    # java-evictions: closed sessions and sessionless fetches cost a few bytes less than a working session
    a = analysis(next(p for p in CAPTURES if p.name == "java-evictions.pcap"))
    t = a.savings["total"]
    assert t["potential_bytes"] < 0 and t["lost_by_cause"]["close"] < 0
    out = savings_text(a, 200)
    assert "Sessionless clients would send 88 B more with sessions" in out
    assert "closed sessions: 216 B fewer" in out


def test_thousands_and_plurals_in_the_broker_line():
    a = analysis(next(p for p in CAPTURES if p.name == "java-evictions.pcap"))
    (b,) = a.brokers
    assert b.exchanges >= 1000
    line = f"{b.exchanges:,} exchanges, {b.clients} clients, {b.sessions_created} sessions created"
    assert line in analyze_text(a, 200)


def test_no_empty_tables_one_sentence_instead():
    a = analysis(next(p for p in CAPTURES if p.name == "share-group.pcap"))
    assert not a.sessions and not a.clients
    for out in (analyze_text(a, 80), markdown_text(a)):
        assert "No fetch sessions in the capture." in out
        assert "Sessions (0)" not in out and "Clients (0)" not in out


def test_markdown_carries_the_decode_warnings(tmp_path):
    whole = next(p for p in CAPTURES if p.name == "java-rebalance.pcap").read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(whole[:-30])  # a capture cut mid-record, as a full disk leaves it
    a = analyze_capture([str(cut)])
    assert len(a.capture.decode["warnings"]) == 1
    md = markdown_text(a)
    assert "Decode warning: cut.pcap: file cut mid-record" in md
    assert "file cut mid-record" in analyze_text(a, 80)


def test_markdown_names_frames_without_none():
    # midstream: a response whose request is not in the capture (no request frame)
    md = markdown_text(analysis(next(p for p in CAPTURES if p.name == "midstream.pcap")))
    assert "response frame 1" in md and "None" not in md
