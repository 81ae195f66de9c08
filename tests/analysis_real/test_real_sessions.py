"""Scenario: a support engineer runs `fetchtool analyze` on REAL kafka-python fetch sessions and it tells the truth.

The captures in captures/scenarios-real/ were made by examples/make_session_captures.py: kafka-python 3.0.12 against
`fetchtool broker`, recorded with tcpdump. What really happened is taken from the script's own record
(<name>.record.json: the fault times it injected, the session ids, evictions and errors the broker logged, and the
broker's own history of every Fetch it answered), never from analyze's output.
"""

from __future__ import annotations

import collections
import functools
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# the installed command when it is on PATH, else the same module through this interpreter
FETCHTOOL = [shutil.which("fetchtool")] if shutil.which("fetchtool") else [sys.executable, "-m", "fetchtool"]

DIR = Path(__file__).resolve().parents[2] / "captures" / "scenarios-real"


def record(name: str) -> dict:
    return json.loads((DIR / f"{name}.record.json").read_text())


@functools.cache
def analyze(name: str, *extra: str) -> dict:
    out = subprocess.run([*FETCHTOOL, "analyze", str(DIR / f"{name}.pcap"), "--format", "json", *extra],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return json.loads(out)


@functools.cache
def decode(name: str) -> list[dict]:
    out = subprocess.run([*FETCHTOOL, "decode", str(DIR / f"{name}.pcap")],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def history(rec: dict, client_id: str) -> list[dict]:
    return [h for h in rec["broker_fetch_history"] if h["client_id"] == client_id]


def findings(report: dict, code: str) -> list[dict]:
    return [f for f in report["findings"] if f["code"] == code]


# ---------------------------------------------------------------------------------------------------------------
# a) one consumer, one session, epochs rising


def test_one_session_granted_and_used_incrementally():
    rec, report = record("kafka-python-sessions"), analyze("kafka-python-sessions")
    created = [c["session_id"] for c in rec["broker_log"]["created"]]
    assert len(created) == 1 and not rec["broker_log"]["errors"]
    broker_saw = history(rec, rec["client_ids"][0])
    incremental = [h for h in broker_saw if h["context"] == "incremental"]

    assert [s["session_id"] for s in report["sessions"]] == created
    (session,) = report["sessions"]
    assert session["end"] == "alive"
    assert session["incremental_requests"] == len(incremental)
    assert session["last_epoch"] == max(h["epoch"] for h in incremental)
    assert report["brokers"][0]["sessions_created"] == 1
    assert report["brokers"][0]["errors"] == {}
    assert not [f for f in report["findings"] if f["severity"] == "error"]


def test_decoded_epochs_rise_by_one_as_the_broker_saw_them():
    rec = record("kafka-python-sessions")
    fetches = [x for x in decode("kafka-python-sessions") if x["api_key"] == 1]
    broker_saw = history(rec, rec["client_ids"][0])
    # The broker records a fetch when it answers it; the client's last one may be cut off by its close.
    decoded = [(x["session_id"], x["session_epoch"]) for x in fetches if x["response_frame"] is not None]
    assert decoded == [(h["session_id"], h["epoch"]) for h in broker_saw]
    epochs = [e for _, e in decoded]
    assert epochs[0] == 0 and epochs[1:] == list(range(1, len(epochs)))


# ---------------------------------------------------------------------------------------------------------------
# b) SIGUSR1 drops every session mid-run


def test_the_drop_shows_as_one_70_on_the_first_fetch_after_it():
    rec, report = record("kafka-python-session-drop"), analyze("kafka-python-session-drop")
    (drop,) = rec["faults"]
    (logged,) = rec["broker_log"]["errors"]
    assert logged["code"] == 70

    (f,) = findings(report, "FETCH_SESSION_ID_NOT_FOUND")
    assert not [x for x in report["findings"] if x["code"] != "FETCH_SESSION_ID_NOT_FOUND" and x["severity"] == "error"]
    assert (f["session_id"], f["epoch"]) == (logged["session_id"], logged["epoch"])
    assert f["cause"] != "evicted"  # nothing was evicted; the broker forgot its sessions as a restart does

    # The 70 answers the first Fetch the client sent after the drop (a fetch already held then still succeeds).
    fetches = [x for x in decode("kafka-python-session-drop") if x["api_key"] == 1]
    first_after = min((x for x in fetches if x["ts"] > drop["time"]), key=lambda x: x["ts"])
    assert f["request_frame"] == first_after["request_frame"]


def test_the_client_recovers_with_a_new_session():
    rec, report = record("kafka-python-session-drop"), analyze("kafka-python-session-drop")
    created = [c["session_id"] for c in rec["broker_log"]["created"]]
    assert len(created) == 2
    assert [s["session_id"] for s in report["sessions"]] == created
    old, new = report["sessions"]
    assert (old["end"], old["end_reason"]) == ("lost", "FETCH_SESSION_ID_NOT_FOUND")
    assert new["end"] == "alive" and new["created_request_frame"] > old["end_frame"] - 3
    broker_saw = history(rec, rec["client_ids"][0])
    for s in (old, new):
        incremental = [h for h in broker_saw if h["session_id"] == s["session_id"] and h["context"] == "incremental"]
        assert s["incremental_requests"] == len(incremental)
        assert s["last_epoch"] == max(h["epoch"] for h in incremental)
    assert report["brokers"][0]["sessions_created"] == 2 and report["brokers"][0]["errors"] == {"70": 1}


# ---------------------------------------------------------------------------------------------------------------
# c) a one-slot session cache shared by three consumers


def test_every_eviction_is_reported_as_a_70_on_the_evicted_session():
    rec = record("kafka-python-cache-full")
    logged = {(e["session_id"], e["epoch"]) for e in rec["broker_log"]["errors"]}
    evicted = {e["session_id"] for e in rec["broker_log"]["evicted"]}
    assert logged and {s for s, _ in logged} == evicted
    for extra in ((), ("--cache-slots", "1", "--cache-shards", "1")):
        report = analyze("kafka-python-cache-full", *extra)
        assert {(f["session_id"], f["epoch"]) for f in findings(report, "FETCH_SESSION_ID_NOT_FOUND")} == logged
        assert [s["session_id"] for s in report["sessions"]] == [c["session_id"] for c in rec["broker_log"]["created"]]


def test_told_the_cache_size_analyze_names_the_evicting_session():
    rec = record("kafka-python-cache-full")
    evictor = {e["session_id"]: e["evicted_by"] for e in rec["broker_log"]["evicted"]}
    # that broker (fetchtool broker) evicts after 1 s unused, not Kafka's 120 s: told its whole cache config
    report = analyze("kafka-python-cache-full", "--cache-slots", "1", "--cache-shards", "1", "--eviction-ms", "1000")
    for f in findings(report, "FETCH_SESSION_ID_NOT_FOUND"):
        assert f["cause"] == "evicted"
        assert f"session {evictor[f['session_id']]} was created" in f["message"]


def test_refused_sessions_are_counted_per_client_as_the_broker_answered_them():
    rec, report = record("kafka-python-cache-full"), analyze("kafka-python-cache-full")
    refused = collections.Counter(h["client_id"] for h in rec["broker_fetch_history"]
                                  if h["context"] == "full" and h["response_session_id"] == 0)
    assert refused  # the scenario did make the broker refuse sessions
    assert {f["client_id"]: f["count"] for f in findings(report, "CACHE_FULL")} == dict(refused)
    assert report["brokers"][0]["refused_creations"] == sum(refused.values())


def cached_at_most(rec: dict) -> int:
    """The most sessions the broker's cache held at once, from its own log lines and the injected faults."""
    events = [(int(e["line"].split("now_ms=")[1].split()[0]), 1, +1) for e in rec["broker_log"]["created"]]
    # an eviction makes room for the newcomer logged at the same now_ms, so it sorts first
    events += [(int(e["line"].split("now_ms=")[1].split()[0]), 0, -1) for e in rec["broker_log"]["evicted"]]
    events += [(int(f["time"] * 1000), 0, None) for f in rec["faults"] if f["action"] == "drop all fetch sessions"]
    live = peak = 0
    for _t, _order, step in sorted(events):
        live = 0 if step is None else live + step
        peak = max(peak, live)
    return peak


@pytest.mark.parametrize("name", ["kafka-python-sessions", "kafka-python-session-drop", "kafka-python-cache-full"])
def test_max_live_sessions_is_what_the_broker_held(name):
    # Without the cache size: an evicted session must not be counted after its last success (the 70 that shows
    # it gone comes later), nor a dropped one next to its replacement.
    held = cached_at_most(record(name))
    assert held >= 1
    assert analyze(name)["brokers"][0]["max_live_sessions"] == held
    assert analyze(name, "--cache-slots", "1", "--cache-shards", "1")["brokers"][0]["max_live_sessions"] == held
