"""decode_capture end to end: a pcap written with the capture layer's writer, read back through reassembly."""

import pytest
from kafka_wire import fetch_request, fetch_response, request_frame, response_frame

from fetchtool.capture.events import Endpoint
from fetchtool.decoder import CaptureError, decode_capture

conversation = pytest.importorskip("fetchtool.capture.conversation")
writer = pytest.importorskip("fetchtool.capture.writer")
pytest.importorskip("fetchtool.capture.reassembly")


def write_capture(path, broker_port=19092, drop=None):
    with writer.PcapWriter(str(path)) as out:
        conv = conversation.TcpConversation(out, Endpoint("10.0.0.1", 40000), Endpoint("10.0.0.2", broker_port),
                                            segment_size=1400)
        t = conv.handshake(1_700_000_000.0)
        for corr in range(1, 4):
            t = conv.send("client", request_frame(1, 12, corr, fetch_request(n=60)), t)
            kw = {"drop": drop} if (drop and corr == 2) else {}
            t = conv.send("server", response_frame(1, 12, corr, fetch_response(n=60, session_id=5)), t, **kw)
        conv.close(t)


def test_nonstandard_port_decodes_without_flags(tmp_path):
    path = tmp_path / "fetch.pcap"
    write_capture(path)
    run = decode_capture([path])
    items = list(run)
    assert [(x.correlation_id, x.broker, x.response_partition_count) for x in items] == [
        (1, "10.0.0.2:19092", 60), (2, "10.0.0.2:19092", 60), (3, "10.0.0.2:19092", 60)]
    assert all(x.request_frame < x.response_frame for x in items)
    assert run.report.packets > 0 and run.report.exchanges == 3 and not run.report.warnings


def test_lost_segment_costs_one_response_only(tmp_path):
    path = tmp_path / "lossy.pcap"
    write_capture(path, drop={1})
    run = decode_capture(path, ports=[19092])
    items = list(run)
    assert [(x.correlation_id, x.response_partition_count) for x in items] == [(1, 60), (2, None), (3, 60)]
    assert run.report.gaps >= 1


def test_unreadable_input_is_one_line_error(tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_text("not a capture\n")
    with pytest.raises(CaptureError) as err:
        list(decode_capture([bad]))
    assert "\n" not in str(err.value)
    good = tmp_path / "ok.pcap"
    write_capture(good)
    run = decode_capture([bad, good])
    assert len(list(run)) == 3 and run.report.warnings["unreadable_file"] == 1
