"""Scenario: a support engineer's capture began while a message was on the wire.

Real captures (Java consumers and producers against Apache Kafka 4.3.1, captures/kafka) are cut so that they begin
inside a Fetch response, inside a response whose first bytes happen to read as a plausible size, and inside a
Produce request. fetchtool must say the capture started mid-message on that connection (never "bad frame size"),
find the next real frame boundary, and decode every exchange after it exactly as it decodes the same exchange in
the uncut capture; tshark 4.4, reading the cut capture on its own, must agree on those exchanges.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fetchtool.decoder import OrphanResponse, decode_capture
from fetchtool.exchange import Exchange

from .cut import cut_capture
from .independent import tshark_frames
from .test_differential import TSHARK_MAX_FETCH, check_request, check_response, ints

KAFKA = Path(__file__).resolve().parents[2] / "captures" / "kafka"


class Cut:
    """A real capture cut at `first_frame` (and `trim` payload bytes into that packet)."""

    def __init__(self, name: str, first_frame: int, trim: int, client: str, broker: str, direction: str):
        self.name, self.first_frame, self.trim = name, first_frame, trim
        self.client, self.broker, self.direction = client, broker, direction

    def __repr__(self) -> str:
        return f"{self.name}@{self.first_frame}+{self.trim}"


# Frame 203 of java-evictions is the second segment of a 4,380-byte Fetch response: it begins with zeros.
INSIDE_A_RESPONSE = Cut("java-evictions.pcap", 203, 0, "127.0.0.1:37576", "127.0.0.1:58329", "response")
# 703 bytes into frame 188 of java-rebalance (a Fetch response's segment) the bytes read as size 107,020 and
# correlation id 2: a framer that believes them swallows the next 107 kB, every later response on the connection.
INSIDE_A_RESPONSE_PLAUSIBLE_SIZE = Cut("java-rebalance.pcap", 188, 703, "127.0.0.1:45708", "127.0.0.1:46129",
                                       "response")
# Frame 1290 of java-rebalance is one whole 341-byte Produce request; the cut starts 40 bytes into it.
INSIDE_A_REQUEST = Cut("java-rebalance.pcap", 1290, 40, "127.0.0.1:45646", "127.0.0.1:46129", "request")
CUTS = [INSIDE_A_RESPONSE, INSIDE_A_RESPONSE_PLAUSIBLE_SIZE, INSIDE_A_REQUEST]


def decoded(path):
    run = decode_capture([path])
    items = list(run)
    return [x for x in items if isinstance(x, Exchange)], run.report


def row(ex: Exchange, shift: int) -> dict:
    """The jsonl row, its frames in the uncut capture's numbering. Not compared: the file name, and the client's
    software name, which fetchtool learns from an ApiVersions request the cut capture no longer holds."""
    r = ex.to_json_row()
    del r["file"], r["client_software"]
    r["request_frame"] += shift
    if r["response_frame"] is not None:
        r["response_frame"] += shift
    return r


@pytest.fixture(scope="module")
def uncut() -> dict[str, list[Exchange]]:
    return {name: decoded(KAFKA / name)[0] for name in {c.name for c in CUTS}}


@pytest.mark.parametrize("cut", CUTS, ids=repr)
def test_a_capture_that_begins_mid_message_decodes_every_exchange_after_it(cut, uncut, tmp_path):
    path = tmp_path / f"cut-{cut.name}"
    shift = cut_capture(KAFKA / cut.name, path, cut.first_frame, cut.trim)
    exchanges, report = decoded(path)

    assert "bad_frame_size" not in report.warnings, report.warning_lines()
    starts = report.mid_message_starts
    assert [(m.client, m.broker, m.direction, m.frame) for m in starts] == [(cut.client, cut.broker, cut.direction, 1)]
    assert starts[0].resumed_frame is not None and starts[0].skipped_bytes > 0
    assert report.warnings["capture_started_mid_message"] == 1
    assert "capture started mid-message" in report.warning_examples["capture_started_mid_message"][0]

    # Every exchange whose request the cut capture holds whole, row for row; nothing invented.
    expected = [row(ex, 0) for ex in uncut[cut.name] if ex.request_frame > cut.first_frame]
    assert [row(ex, shift) for ex in exchanges] == expected


def test_the_request_cut_by_the_capture_start_leaves_its_response_without_a_request(tmp_path):
    # The Produce request (correlation id 140) cut at its start is not taken for a request; the broker's answer
    # to it is a response without a request (REQUEST_MISSING), the only one on that connection.
    path = tmp_path / "cut.pcap"
    cut_capture(KAFKA / INSIDE_A_REQUEST.name, path, INSIDE_A_REQUEST.first_frame, INSIDE_A_REQUEST.trim)
    orphans = [x for x in decode_capture([path]) if isinstance(x, OrphanResponse)]
    assert [(o.broker, o.correlation_id) for o in orphans if o.client == INSIDE_A_REQUEST.client] == [
        (INSIDE_A_REQUEST.broker, 140)]


@pytest.mark.tshark
@pytest.mark.parametrize("cut", CUTS, ids=repr)
def test_tshark_agrees_on_the_exchanges_after_the_cut(cut, tshark, tmp_path):
    path = tmp_path / f"cut-{cut.name}"
    cut_capture(KAFKA / cut.name, path, cut.first_frame, cut.trim)
    exchanges, _ = decoded(path)
    frames = tshark_frames(tshark, path, {int(ex.broker.rsplit(":", 1)[1]) for ex in exchanges})

    tshark_requests = {n for n, f in frames.items() if f["kafka.api_key"][:1] == ["1"] and not f["kafka.request_frame"]}
    assert tshark_requests == {ex.request_frame for ex in exchanges}
    ours = {ex.request_frame: ex for ex in exchanges}
    paired = 0
    for n, f in frames.items():
        if f["kafka.api_key"][:1] != ["1"] or not f["kafka.request_frame"]:
            continue
        # tshark pairs a response by its own framing; where it pairs one, it is ours, field for field.
        ex = ours[ints(f["kafka.request_frame"])[0]]
        assert ex.response_frame == n
        if ex.api_version <= TSHARK_MAX_FETCH:
            check_request(ex, frames[ex.request_frame])
            check_response(ex, f)
        paired += 1
    assert paired
