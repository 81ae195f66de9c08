"""How the commands read a capture: one rule for a capture without Kafka Fetch traffic, --since/--until counted
against the decode's own `ts`, the refused and unused sessions, decode's time, latency and client id."""

from __future__ import annotations

import json
import struct
from datetime import datetime, timezone

import pytest

from cli_runs import CHURN, READERS, REBALANCE, fetchtool

NO_TRAFFIC = 3


def decoded(capture) -> list[dict]:
    proc = fetchtool("decode", capture)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


@pytest.mark.parametrize("command", READERS)
def test_a_wrong_port_fails_alike_in_every_command_naming_the_port_kafka_was_on(command):
    proc = fetchtool(command, REBALANCE, "--port", "9092", *READERS[command])
    assert proc.returncode == NO_TRAFFIC, proc.stderr
    assert proc.stdout == ""
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "port 9092" in errors[0] and "--port 46129" in errors[0], proc.stderr
    assert "files: -" not in proc.stderr


@pytest.mark.parametrize("command", READERS)
def test_a_window_outside_the_capture_fails_alike_saying_when_the_capture_runs(command):
    proc = fetchtool(command, REBALANCE, "--since", "+1h", *READERS[command])
    assert proc.returncode == NO_TRAFFIC, proc.stderr
    error = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "424 exchanges run from 2026-11-24T05:35:43" in error[0], proc.stderr


def test_since_and_until_keep_the_exchanges_requested_inside_the_window_in_every_engine_path():
    rows = decoded(REBALANCE)
    times = sorted(r["ts"] for r in rows)
    since, until = times[100], times[300]
    iso = datetime.fromtimestamp(since, timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")
    # the window is half-open: since <= ts < until
    expected = sum(1 for t in times if since <= t < until)
    window = ["--since", iso, "--until", repr(until)]
    assert len(decoded_window := fetchtool("decode", REBALANCE, *window).stdout.splitlines()) == expected
    assert all(since <= json.loads(line)["ts"] < until for line in decoded_window)
    analysis = json.loads(fetchtool("analyze", REBALANCE, *window, "-f", "json").stdout)
    assert analysis["capture"]["exchanges"] == expected
    savings = fetchtool("savings", REBALANCE, *window, "-f", "jsonl").stdout.splitlines()
    assert len(savings) == expected
    simulated = json.loads(fetchtool("simulate", REBALANCE, *window, "-f", "json").stdout)
    assert simulated["plan"]["requests"] == expected


def test_an_offset_counts_from_the_captures_first_packet():
    with open(REBALANCE, "rb") as f:  # classic pcap, big-endian magic on disk: read its first record's time
        head = f.read(24 + 8)
    order = "<" if head[:4] == b"\xd4\xc3\xb2\xa1" else ">"
    seconds, micros = struct.unpack(order + "II", head[24:32])
    start = seconds + micros / 1e6
    times = [r["ts"] for r in decoded(REBALANCE)]
    expected = sum(1 for t in times if start + 10 <= t < start + 20)
    assert 0 < expected < len(times)
    assert len(fetchtool("decode", REBALANCE, "--since", "+10s", "--until", "+20s").stdout.splitlines()) == expected


def test_a_time_that_cannot_be_read_is_a_usage_error():
    proc = fetchtool("analyze", REBALANCE, "--since", "yesterday")
    assert proc.returncode == 2 and proc.stderr.startswith("error: --since wants an ISO 8601 UTC time")


def test_sessions_names_the_client_refused_and_the_sessions_never_used():
    rows = decoded(CHURN)
    refused = sum(1 for r in rows if r["client_id"] == "platformatic-2.2.3" and r["api_key"] == 1
                  and r["api_version"] >= 7 and r["session_id"] == 0 and r["session_epoch"] == 0
                  and r["error_code"] == 0 and r["response_session_id"] == 0)
    assert refused > 100
    table = fetchtool("sessions", CHURN, "--width", "200")
    assert table.returncode == 0, table.stderr
    assert (f"client platformatic-2.2.3@127.0.0.1: {refused:,} session-creating fetches refused (session id 0)"
            in table.stdout)
    assert "30 sessions created on 127.0.0.1:58869 but never used incrementally" in table.stdout
    doc = json.loads(fetchtool("sessions", CHURN, "-f", "json").stdout)
    assert {r["client"]: r["refused"] for r in doc["refused"]}["platformatic-2.2.3@127.0.0.1"] == refused
    assert len(doc["never_used"]) == 30 and doc["sessions"] and "steps" in doc["sessions"][0]
    assert "## Refused and unused" in fetchtool("sessions", CHURN, "-f", "markdown").stdout


def test_decode_shows_time_latency_and_client_id():
    rows = decoded(REBALANCE)
    first = rows[0]
    assert first["latency_ms"] == round((first["response_ts"] - first["ts"]) * 1000, 3)
    table = fetchtool("decode", REBALANCE, "-f", "table", "--width", "200").stdout
    row = next(line for line in table.splitlines() if f" {first['request_frame']} " in line)
    clock = datetime.fromtimestamp(first["ts"], timezone.utc).strftime("%H:%M:%S.%f")[:-3]
    assert clock in row and first["client_id"] in row and f"{first['latency_ms']:,.1f}" in row
    narrow = fetchtool("decode", REBALANCE, "-f", "table", env={"COLUMNS": "80"}).stdout
    assert max(map(len, narrow.splitlines())) <= 80 and clock in narrow


@pytest.fixture(scope="module")
def http_capture(tmp_path_factory):
    """A capture of one plain HTTP exchange on port 8080, written with fetchtool's own pcap writer."""
    from fetchtool.capture.conversation import TcpConversation
    from fetchtool.capture.events import Endpoint
    from fetchtool.capture.writer import PcapWriter

    path = tmp_path_factory.mktemp("http") / "web.pcap"
    with PcapWriter(path) as writer:
        conv = TcpConversation(writer, Endpoint("10.0.0.1", 51000), Endpoint("10.0.0.2", 8080))
        ts = conv.handshake(1_700_000_000.0)
        ts = conv.send("client", b"GET / HTTP/1.1\r\nHost: example\r\n\r\n", ts + 0.01)
        ts = conv.send("server", b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", ts + 0.01)
        conv.close(ts + 0.01)
    return path


@pytest.mark.parametrize("command", READERS)
def test_a_capture_without_kafka_fails_alike_saying_it_was_read(command, http_capture):
    proc = fetchtool(command, http_capture, *READERS[command])
    assert proc.returncode == NO_TRAFFIC, proc.stderr
    error = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1, proc.stderr
    assert error[0].startswith("error: no Kafka traffic in web.pcap: none of its 1 TCP connection (")
    assert error[0].endswith(" packets) carried Kafka")
    assert "files: -" not in proc.stderr and proc.stdout == ""


SHARE_GROUP = REBALANCE.parent / "share-group.pcap"  # Kafka 4.3.1 share group: ShareFetch, no Fetch


@pytest.mark.parametrize("command", READERS)
def test_kafka_traffic_without_fetch_is_reported_where_there_is_something_to_report(command):
    proc = fetchtool(command, SHARE_GROUP, *READERS[command])
    line = "no Kafka Fetch traffic in share-group.pcap: 9 Kafka connections carried only ApiVersions"
    if command in ("simulate", "replay"):  # nothing to run without Fetch: the one rule's exit and hint
        assert proc.returncode == NO_TRAFFIC and proc.stderr.startswith(f"error: {line}"), proc.stderr
    else:
        assert proc.returncode == 0, proc.stderr
        assert any(w.startswith(f"warning: {line}") and "ShareFetch" in w for w in proc.stderr.splitlines())
