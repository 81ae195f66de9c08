"""fetchtool's response times, per broker, held to Kafka's own record of each Fetch (kafka.request.logger's
totalTimeMs), and its MaxWait verdict on every real Kafka 4.3.1 capture of captures/kafka/.

Kafka's totalTimeMs runs from the request read off the socket to the response written to it; fetchtool's response
time runs between the two frames on the wire. On loopback the two differ by well under a millisecond, so fetchtool's
p50 (p99) must lie within Kafka's own quantile, give or take the few requests at the edges of the capture (RANK),
the sketch's 1% relative error and NETWORK_MS.
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

import pytest

import broker_record as br
from fetchtool.analysis.run import analyze_capture
from fetchtool.analysis.tracking.latency import RELATIVE_ERROR

ROOT = Path(__file__).resolve().parents[2]
KAFKA_CAPTURES = sorted((ROOT / "captures" / "kafka").glob("*.pcap"))
EDGE_S = 0.01  # a request this close to the capture's first or last packet may be on either side
RANK = 0.02  # quantile rank tolerance: requests at the capture's edges, seen by one side only
NETWORK_MS = 1.0  # loopback: socket to wire and back


def _quantile(values: list[float], q: float) -> float:
    q = min(max(q, 0.0), 1.0)
    return values[max(1, math.ceil(q * len(values))) - 1]


@lru_cache(maxsize=None)
def _kafka_times(pcap: Path) -> dict[str, list[float]]:
    """broker listener -> sorted totalTimeMs of every Fetch Kafka logged inside the capture's window."""
    run = br.load_run(pcap)
    lo, hi = run.window
    out: dict[str, list[float]] = {}
    for r in run.record.fetches:
        if r.received_ts >= lo + EDGE_S and r.ts <= hi - EDGE_S:
            out.setdefault(r.broker, []).append(r.total_ms)
    return {b: sorted(v) for b, v in out.items()}


@lru_cache(maxsize=None)
def _analysis(pcap: Path):
    return analyze_capture([pcap])


def _pcaps_with_request_logs() -> list[Path]:
    return [p for p in KAFKA_CAPTURES if _kafka_times(p)]


@pytest.mark.parametrize("pcap", _pcaps_with_request_logs(), ids=lambda p: p.name)
@pytest.mark.parametrize("q", [0.5, 0.99])
def test_broker_response_times_match_kafkas_request_log(pcap, q):
    kafka = _kafka_times(pcap)
    checked = 0
    for b in _analysis(pcap).brokers:
        times = kafka.get(b.broker)
        if not times or b.traffic is None:
            continue
        ours = b.traffic.response_ms["p50" if q == 0.5 else "p99"]
        low = _quantile(times, q - RANK) * (1 - RELATIVE_ERROR) - NETWORK_MS
        high = _quantile(times, q + RANK) * (1 + RELATIVE_ERROR) + NETWORK_MS
        assert low <= ours <= high, (b.broker, q, ours, (low, high), len(times), b.traffic.response_ms)
        checked += 1
    assert checked, f"no broker of {pcap.name} has both a request log and fetches in the capture"


@pytest.mark.parametrize("pcap", KAFKA_CAPTURES, ids=lambda p: p.name)
def test_apache_kafka_holds_empty_fetches_for_max_wait(pcap):
    """Kafka 4.3.1 parks an empty fetch in the purgatory until MaxWaitMs, and the answers it gives at once
    (ReplicaManager.fetchMessages: no partitions, MinBytes 0, errors, ...; Raft's on the controller listener) are
    the ones the check leaves out: no checked answer came early, every broker that had enough empty fetches to
    judge is called honoured, and no MAX_WAIT_IGNORED finding appears."""
    a = _analysis(pcap)
    assert not [f for f in a.findings if f.code == "MAX_WAIT_IGNORED"]
    assert [b.traffic.max_wait_early for b in a.brokers if b.traffic is not None] == \
        [0 for b in a.brokers if b.traffic is not None]
    judged = [b for b in a.brokers if b.traffic is not None and b.traffic.max_wait_honoured is not None]
    assert all(b.traffic.max_wait_honoured for b in judged), [(b.broker, b.traffic) for b in judged]
    if pcap.name != "share-group.pcap":  # share consumers use ShareFetch, not Fetch
        assert judged


def test_kafka_and_fetchtool_agree_empty_fetches_wait_for_max_wait():
    """The MaxWait check's premise, from Kafka's own log: an empty answer to a consumer's MaxWait 1000 fetch took
    about MaxWait (never under half of it, bar a handful), and fetchtool counts the same responses as held."""
    pcap = ROOT / "captures" / "kafka" / "java-evictions.pcap"
    run = br.load_run(pcap)
    empty = [r for r in run.record.fetches
             if not r.is_follower and r.min_bytes >= 1 and r.max_wait_ms > 0 and not r.records_bytes
             and not r.partition_errors and not r.error_code and not r.throttle_time_ms]
    early = [r for r in empty if r.total_ms < r.max_wait_ms / 2]
    assert len(empty) > 1000 and len(early) * 100 < len(empty)
    [b] = _analysis(pcap).brokers
    assert b.traffic.max_wait_honoured and b.traffic.max_wait_early * 100 < b.traffic.max_wait_checked


@pytest.mark.tshark
@pytest.mark.parametrize("pcap", KAFKA_CAPTURES, ids=lambda p: p.stem)
def test_a_request_its_connection_closed_on_is_not_blamed_on_the_capture(pcap, tshark_fields):
    """RESPONSE_MISSING's last_on_connection cause, held to tshark 4.4 reading the same bytes: the connection's next
    packets after the request carry no Kafka response, and end in a FIN or a RST. franz-go closes the connection of
    a fetch the broker is holding for MaxWaitMs when its group rebalances (franz-group-restart)."""
    findings = [f for f in analyze_capture([pcap]).findings if f.code == "RESPONSE_MISSING"]
    if pcap.stem == "franz-group-restart":
        assert [f.cause for f in findings] == ["last_on_connection"]
    for f in findings:
        if f.cause != "last_on_connection":
            continue
        broker_port, client_port = int(f.broker.rsplit(":", 1)[1]), int(f.client.rsplit(":", 1)[1])
        rows = tshark_fields(pcap, broker_port, ["frame.number", "tcp.srcport", "tcp.flags.fin", "tcp.flags.reset",
                                                 "kafka.len"],
                             display_filter=f"tcp.port=={client_port} && tcp.port=={broker_port}")
        for request in f.frames:
            [sent] = [r for r in rows if int(r[0]) == request]
            assert int(sent[1]) == client_port and sent[4], f"frame {request} is not a Kafka request to {f.broker}"
            after = [r for r in rows if int(r[0]) > request]
            ends = [r for r in after if r[2] in ("1", "True") or r[3] in ("1", "True")]
            assert ends, f"frame {request}: no FIN or RST after it on {f.client}"
            first_end = int(ends[0][0])
            answered = [r for r in after if int(r[0]) < first_end and int(r[1]) == broker_port and r[4]]
            assert not answered, f"frame {request}: tshark sees Kafka responses before the close: {answered}"
