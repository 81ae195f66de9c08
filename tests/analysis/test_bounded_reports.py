"""Reports bounded by what they show (issue #18): folding each closed connection's state as the capture is read
changes no figure, and a report that lists some sessions lists those that failed first, counting the rest."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fetchtool.analysis.run import analyze_capture, analyze_items, bounded
from fetchtool.analysis.shown import choose, importance, never_used
from fetchtool.decoder import decode_capture

REPO = Path(__file__).resolve().parents[2]
CAPTURES = sorted(p for p in (REPO / "captures").rglob("*.pcap*") if p.stat().st_size < 3_000_000)


def _analysis(path: Path, fold: bool) -> dict:
    run = decode_capture([str(path)])
    a = analyze_items(run, decode_report=run.report, ended=run.ended if fold else None)
    if fold:
        assert not run.ended or all(isinstance(c, int) for c in run.ended)
    return a.to_json()


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_folding_closed_connections_leaves_every_figure_as_it_was(path):
    assert _analysis(path, fold=True) == _analysis(path, fold=False)


def test_the_decoder_says_each_closed_connection_once_after_its_last_exchange():
    path = REPO / "captures" / "kafka" / "platformatic-churn.pcap"
    run = decode_capture([str(path)])
    ended: list[int] = []
    seen_after_end = []
    for item in run:
        ended.extend(run.ended)
        run.ended.clear()
        if getattr(item, "conn", None) in ended:
            seen_after_end.append(item)
    assert ended and len(ended) == len(set(ended)) and not seen_after_end


def test_a_bounded_session_list_shows_the_failed_sessions_first_and_counts_every_one():
    path = REPO / "captures" / "kafka" / "java-evictions.pcap"
    full = analyze_capture([str(path)])
    assert any(importance(s) == 0 for s in full.sessions) and any(importance(s) > 0 for s in full.sessions)
    limit = sum(1 for s in full.sessions if importance(s) == 0)
    some = bounded(full, limit)
    assert some.sessions_total == len(full.sessions) and some.sessions_more == len(full.sessions) - limit
    assert all(importance(s) == 0 for s in some.sessions)
    order = [full.sessions.index(s) for s in some.sessions]
    assert order == sorted(order)  # in capture order
    assert some.never_used.total == sum(1 for s in full.sessions if never_used(s))
    assert choose(full.sessions, None).sessions == full.sessions


def test_analyze_json_lists_sessions_on_request_only(tmp_path):
    path = REPO / "captures" / "kafka" / "java-evictions.pcap"

    def doc(*args: str) -> dict:
        out = subprocess.run([sys.executable, "-m", "fetchtool", "analyze", "--format", "json", *args, str(path)],
                             check=True, capture_output=True, text=True).stdout
        return json.loads(out)

    every, two = doc("--sessions", "all"), doc("--sessions", "2")
    assert "sessions_total" not in every and len(two["sessions"]) == 2
    assert two["sessions_total"] == len(every["sessions"])
    assert two["sessions_more"] == f"{len(every['sessions']) - 2:,} more sessions, --sessions all to list them"
    assert all(s in every["sessions"] for s in two["sessions"])
    for key in ("capture", "brokers", "clients", "findings", "savings"):
        assert two[key] == every[key]


@pytest.mark.parametrize("limit", [0, 1, 3])
@pytest.mark.parametrize("name", ["java-evictions.pcap", "platformatic-churn.pcap"])
def test_a_report_listing_some_sessions_lists_those_a_choice_over_every_session_would(name, limit):
    # analyze_items chooses among the tracked sessions and makes the lives of the listed ones only
    path = str(REPO / "captures" / "kafka" / name)
    run = decode_capture([path])
    listed = analyze_items(run, decode_report=run.report, sessions=limit)
    every = bounded(analyze_capture([path]), limit)
    assert listed.sessions == every.sessions and listed.sessions_total == every.sessions_total
    assert listed.never_used == every.never_used
    assert listed.to_json() == every.to_json()
