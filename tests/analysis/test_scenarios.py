"""Every scenario capture in captures/scenarios gives exactly the findings its construction implies, no others.

The expected files are written by the scenario scripts (fetchtool synth) from what they did; they are checked
here against a fresh analysis, and the committed capture is checked to be what the generator writes today.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from fetchtool.analysis.run import analyze_capture
from fetchtool.synth.scenarios import SCENARIOS, generate

ROOT = Path(__file__).resolve().parents[2] / "captures" / "scenarios"
NAMES = sorted(SCENARIOS)


def _frames_match(expected: dict, finding) -> bool:
    return all(getattr(finding, k) == expected[k] for k in ("request_frame", "response_frame", "session_id", "client",
                                                           "broker") if k in expected)


@pytest.mark.parametrize("name", NAMES)
def test_analyze_reports_exactly_the_constructed_findings(name):
    expected = json.loads((ROOT / f"{name}.expected.json").read_text())["findings"]
    analysis = analyze_capture([ROOT / f"{name}.pcap"])
    got = list(analysis.findings)
    assert Counter((f.code, f.cause) for f in got) == Counter((e["code"], e["cause"]) for e in expected), [
        (f.code, f.cause, f.message) for f in got]
    remaining = list(got)
    for e in expected:
        match = next((f for f in remaining if (f.code, f.cause) == (e["code"], e["cause"]) and _frames_match(e, f)),
                     None)
        assert match is not None, (e, [(f.code, f.request_frame, f.response_frame, f.client) for f in remaining])
        remaining.remove(match)


@pytest.mark.parametrize("name", NAMES)
def test_committed_capture_is_what_the_generator_writes(name, tmp_path):
    out = tmp_path / f"{name}.pcap"
    expected = generate(name, out)
    assert out.read_bytes() == (ROOT / f"{name}.pcap").read_bytes()
    assert expected == json.loads((ROOT / f"{name}.expected.json").read_text())["findings"]
    assert out.stat().st_size < 64_000  # scenario captures stay small


@pytest.mark.parametrize("name", ["healthy", "epoch-wrap-ok"])
def test_healthy_sessions_have_no_error_or_warning(name):
    analysis = analyze_capture([ROOT / f"{name}.pcap"])
    assert [f for f in analysis.findings if f.severity in ("error", "warning")] == []
    assert analysis.sessions and all(s.end == "alive" for s in analysis.sessions)
    assert all(s.errors == 0 for s in analysis.sessions)


def test_midstream_session_is_reconstructed_from_its_first_incremental():
    analysis = analyze_capture([ROOT / "midstream.pcap"])
    [s] = analysis.sessions
    assert s.started_before_capture and s.created_request_frame is None
    assert s.partitions == 3 and s.incremental_requests >= 4


def test_eviction_victims_end_evicted_and_evictors_are_named():
    analysis = analyze_capture([ROOT / "eviction-thrash.pcap"])
    evicted = [s for s in analysis.sessions if s.end == "evicted"]
    assert len(evicted) == 2
    [pressure] = [f for f in analysis.findings if f.code == "EVICTION_PRESSURE"]
    assert "big-d" in pressure.message and "big-e" in pressure.message


def test_given_cache_slots_settle_eviction_the_same_way():
    analysis = analyze_capture([ROOT / "eviction-thrash.pcap"], cache_slots=3, cache_shards=1)
    causes = [f.cause for f in analysis.findings if f.code == "FETCH_SESSION_ID_NOT_FOUND"]
    assert causes == ["evicted", "evicted"]


def test_a_large_cache_rules_eviction_out():
    # With 1000 slots the capture's 3 sessions cannot have filled the cache: the cause is unknown, and says why.
    analysis = analyze_capture([ROOT / "eviction-thrash.pcap"], cache_slots=1000, cache_shards=1)
    nf = [f for f in analysis.findings if f.code == "FETCH_SESSION_ID_NOT_FOUND"]
    assert [f.cause for f in nf] == ["unknown", "unknown"]
    assert all("longer capture" in f.message for f in nf)
