"""Scenario: captures of real clients against noida-db, a broker that never creates fetch sessions and answers
every Fetch at once, decode to what their README says (captures/noida/manifest.json, written by
examples/make_noida_captures.py from the decode) and tshark 4.4 sees the same Fetch traffic.
(Field-by-field agreement with tshark and kafka-python: tests/decode/test_differential.py covers these captures.)"""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

from fetchtool.decoder import decode_capture
from fetchtool.exchange import Exchange

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
MANIFEST = json.loads((CAPTURES / "noida" / "manifest.json").read_text())


@pytest.mark.parametrize("entry", MANIFEST, ids=lambda e: e["file"])
def test_each_noida_capture_decodes_to_its_documented_fetch_traffic(entry):
    run = decode_capture([CAPTURES / entry["file"]])
    fetches = [x for x in run if isinstance(x, Exchange) and x.api_key == 1]
    assert len(fetches) == entry["fetches"] and entry["fetches"] > 0
    assert sorted({x.api_version for x in fetches}) == entry["fetch_versions"]
    assert dict(collections.Counter(f"({x.session_id}, {x.session_epoch})" for x in fetches)) == entry["request_sessions"]
    # noida-db never creates a session and never errs at the top level: session id 0, error 0, every response.
    answered = [x for x in fetches if x.response_frame is not None]
    assert len(answered) == entry["answered"]
    assert {(x.response_session_id, x.error_code) for x in answered} == {(0, 0)}
    assert not run.report.warnings, run.report.warning_lines()


@pytest.mark.tshark
@pytest.mark.parametrize("entry", MANIFEST, ids=lambda e: e["file"])
def test_tshark_sees_as_many_fetches_in_each_noida_capture(entry, tshark_fields):
    rows = tshark_fields(CAPTURES / entry["file"], entry["broker_port"], ["tcp.dstport", "kafka.fetch_session_id"],
                         "kafka.api_key == 1")
    requests = [r for r in rows if r[0] == str(entry["broker_port"])]
    assert len(requests) == entry["fetches"]
    assert len(rows) - len(requests) == entry["answered"]
