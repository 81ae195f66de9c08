"""No finding gives advice the capture does not support, on every real capture in captures/ (real clients against
tansu, noida-db and Apache Kafka 4.3.1).

Whether a broker keeps sessions is read here from the decoded rows themselves (an error-free Fetch response with a
session id), and for Apache Kafka also from the broker's own log ("Created fetch session" lines); the analysis
must agree with both before it may talk about a broker's cache.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fetchtool.analysis.run import analyze_capture
from fetchtool.decoder import decode_capture
from fetchtool.exchange import Exchange

ROOT = Path(__file__).resolve().parents[2] / "captures"
REAL = sorted(p for p in ROOT.rglob("*.pcap*") if "scenarios" != p.parent.name)
CACHE_ADVICE = {"CACHE_FULL", "EVICTION_PRESSURE"}
CREATED = re.compile(r"Created fetch session")


def _granting_brokers(path: Path) -> set[str]:
    return {ex.broker for ex in decode_capture([path]) if isinstance(ex, Exchange)
            and ex.error_code == 0 and ex.response_session_id}


def _kafka_created_sessions(path: Path) -> int | None:
    """How many sessions Apache Kafka's own log says it created (None: no broker log beside the capture)."""
    logs = sorted(path.parent.glob(path.name.removesuffix(".pcap") + "*.sessions.log"))
    if not logs:
        return None
    return sum(len(CREATED.findall(p.read_text())) for p in logs)


@pytest.mark.parametrize("path", REAL, ids=lambda p: str(p.relative_to(ROOT)))
def test_cache_advice_only_where_the_broker_is_seen_keeping_sessions(path):
    analysis = analyze_capture([path])
    granting = _granting_brokers(path)
    created_by_kafka = _kafka_created_sessions(path)
    if created_by_kafka == 0:
        assert not granting  # the decode and Kafka's own log agree that no session was created
    for f in analysis.findings:
        if f.code in CACHE_ADVICE:
            assert f.broker in granting, (f.code, f.broker, f.message)
    lost = {(t.get("broker"), cause) for t in analysis.savings.get("per_broker", [])
            for cause, b in t["lost_by_cause"].items() if b}
    for broker, cause in lost:
        if cause == "cache_full":
            assert broker in granting, broker
        if cause == "not_granted":
            assert broker not in granting, broker


@pytest.mark.parametrize("path", REAL, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_findings_name_every_sessionless_client_the_savings_panel_shows_saving(path):
    """A client the savings panel shows could save a fifth of its fetch bytes (and 100 B a fetch: more than one
    partition's entries) has a SESSIONLESS_CLIENT finding, and no SESSIONLESS_CLIENT finding names a client the
    panel shows saving nothing."""
    analysis = analyze_capture([path])
    named = {(f.client_id, f.broker) for f in analysis.findings if f.code == "SESSIONLESS_CLIENT"}
    per_broker_ids = {}
    for ex in decode_capture([path]):
        if isinstance(ex, Exchange) and ex.session_epoch == -1 and ex.session_id == 0:
            per_broker_ids.setdefault(ex.client_id, set()).add(ex.broker)
    for c in analysis.savings["per_client"]:
        share = c["potential_bytes"] / c["actual_bytes"] if c["actual_bytes"] else 0
        per_fetch = c["potential_bytes"] / max(1, c["requests"].get("sessionless", 0))
        if share >= 0.2 and per_fetch >= 100 and len(per_broker_ids.get(c["client_id"], ())) == 1:
            (broker,) = per_broker_ids[c["client_id"]]
            assert (c["client_id"], broker) in named, (c["client"], share)
    potential = {c["client_id"] for c in analysis.savings["per_client"] if c["potential_bytes"] > 0}
    for client_id, _broker in named:
        assert client_id in potential


def test_a_broker_without_sessions_is_never_told_to_raise_its_cache(tmp_path):
    """Real tansu with kafka-python (which asks for a session on every fetch): refusals are SESSIONS_NOT_GRANTED,
    never CACHE_FULL, and the savings book them as not granted, not as a full cache."""
    path = ROOT / "kafka-python-tansu.pcap"
    out = subprocess.run([sys.executable, "-m", "fetchtool", "analyze", "--format", "json", str(path)],
                         capture_output=True, text=True, check=True)
    report = json.loads(out.stdout)
    codes = {f["code"] for f in report["findings"]}
    assert "SESSIONS_NOT_GRANTED" in codes and not codes & CACHE_ADVICE
    lost = report["savings"]["total"]["lost_by_cause"]
    assert lost.get("not_granted") and "cache_full" not in lost
    assert "max.incremental.fetch.session.cache.slots" not in " ".join(
        f["advice"] for f in report["findings"] if f["code"] != "SESSIONS_NOT_GRANTED")



def test_a_known_bug_is_named_only_where_the_capture_shows_the_affected_software_and_version():
    """platformatic-churn: @platformatic/kafka 2.2.3 names itself on its bootstrap connection only (ApiVersions);
    its churn is matched to platformatic/kafka#315 (fixed in 2.3.0), the Java 4.3.1 clients' findings to nothing."""
    path = ROOT / "kafka" / "platformatic-churn.pcap"
    run = decode_capture([path])
    for _ in run:
        pass
    named = {run.report.software_client_ids[a]: s for a, s in run.report.client_software.items()}
    analysis = analyze_capture([path])
    churn = [f for f in analysis.findings if f.code == "SESSION_CHURN"]
    assert churn and all(named.get(f.client_id, "").startswith("platformatic-kafka/2.2.") for f in churn)
    assert all(f.known_bugs == ("platformatic/kafka#315",) and "fixed in 2.3.0" in f.advice for f in churn)
    for f in analysis.findings:
        if named.get(f.client_id, "").startswith("apache-kafka-java/4.3.1"):
            assert f.known_bugs == (), f


def test_a_sessionless_client_is_told_whether_its_software_has_sessions_at_all():
    """confluent-kafka (librdkafka 2.16) against tansu: sessionless by design, said once, as information."""
    analysis = analyze_capture([ROOT / "confluent-kafka-tansu.pcap"])
    (f,) = [f for f in analysis.findings if f.code == "SESSIONLESS_CLIENT"]
    assert f.severity == "info" and f.count == analysis.capture.fetch_exchanges
    assert "librdkafka" in f.message or "rdkafka" in f.message
    assert "does not implement KIP-227" in f.message


def test_a_capture_started_inside_a_response_is_a_capture_gap_not_a_bad_frame(tmp_path):
    """java-evictions cut at frame 203, inside a response: the analysis says where the capture began and that
    nothing after it was lost; no decode warning calls it a bad frame size."""
    from tests.decode.cut import cut_capture

    path = tmp_path / "late-start.pcap"
    cut_capture(ROOT / "kafka" / "java-evictions.pcap", path, 203)
    analysis = analyze_capture([path])
    assert "bad_frame_size" not in analysis.capture.decode.get("warnings", {})
    starts = [f for f in analysis.findings if f.code == "CAPTURE_GAP" and f.cause == "started_mid_message"]
    assert len(starts) == len(analysis.capture.decode["mid_message_starts"]) >= 1
    assert all("started in the middle of a" in f.message and f.severity == "info" for f in starts)
    assert not [f for f in analysis.findings if f.code == "CAPTURE_GAP" and f.cause is None]
