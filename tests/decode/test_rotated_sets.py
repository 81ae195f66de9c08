"""Scenario: the customer ran `tcpdump -C` (or -G), so the capture arrives cut into drop.pcap, drop.pcap1, ...

The engineer runs `fetchtool analyze drop.pcap*` (the default, polars engine). The files are one capture cut at
packet boundaries, mid-connection, so a request can be in one file and its response in the next: read file by
file, that is a request without a response, a response without a request and a broken TCP stream. Read as one
rotated set (as the Spark engine reads it), the report is the unsplit capture's. Exactly one thing is mapped in
the comparison, and it is said here: the rows of a set are labelled with the set's label ("drop.pcap+2": the
first file and how many follow) where the unsplit capture's rows name that file, and the decode report lists the
files it read. Frames are not mapped: they count on across the files as `mergecap -a` numbers them, which is
the unsplit file's numbering.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from fetchtool.analysis.reports.json_report import render
from fetchtool.analysis.run import analyze_capture
from fetchtool.capture import streams
from fetchtool.capture.rotation import rotation_groups
from fetchtool.decoder import decode_capture
from fetchtool.exchange import Exchange

from capture_files import forked_children, split_pcap

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
DROP = CAPTURES / "scenarios-real" / "kafka-python-session-drop.pcap"
# Real captures of real clients and brokers (the synthetic scenarios' packets share timestamps too often to be
# cut into pieces that follow each other in time).
REAL = sorted(CAPTURES.glob("*.pcap")) + sorted((CAPTURES / "scenarios-real").glob("*.pcap"))


def as_json(analysis) -> dict:
    return json.loads(render(analysis))


def unsplit_view(report: dict, label: str, name: str) -> dict:
    """The report of a rotated set as the unsplit file's report would read: the set's label is the file's name
    and the decode report lists that one file."""
    report = json.loads(json.dumps(report).replace(json.dumps(label), json.dumps(name)))
    report["capture"]["decode"]["files"] = [name]
    return report


def test_the_audit_case_a_session_drop_capture_cut_every_100_packets(tmp_path):
    pieces = split_pcap(DROP, tmp_path, every=100, name="drop.pcap")
    assert [p.name for p in pieces] == ["drop.pcap", "drop.pcap1", "drop.pcap2"]
    expected = as_json(analyze_capture([DROP]))
    # File by file, the cuts break request/response pairs apart: the pieces really are cut mid-exchange.
    one_by_one = [as_json(analyze_capture([p]))["capture"]["decode"] for p in pieces]
    assert sum(d["orphan_responses"] for d in one_by_one) > expected["capture"]["decode"]["orphan_responses"]
    assert sum(d["connections"] for d in one_by_one) > expected["capture"]["decode"]["connections"]

    got = as_json(analyze_capture(pieces))
    assert got["capture"]["decode"]["files"] == ["drop.pcap", "drop.pcap1", "drop.pcap2"]
    assert "REQUEST_MISSING" not in json.dumps(got["findings"])
    assert unsplit_view(got, "drop.pcap+2", DROP.name) == expected


@pytest.mark.parametrize("capture", REAL, ids=lambda p: p.name)
def test_every_real_capture_cut_in_three_gives_the_unsplit_report(tmp_path, capture):
    pieces = split_pcap(capture, tmp_path)
    got = as_json(analyze_capture(pieces))
    assert got["capture"]["decode"]["files"] == [p.name for p in pieces]
    assert unsplit_view(got, f"{capture.name}+2", capture.name) == as_json(analyze_capture([capture]))


def test_the_exchanges_keep_the_unsplit_frames_and_only_the_file_label_changes(tmp_path):
    pieces = split_pcap(DROP, tmp_path, every=100, name="drop.pcap")
    whole = list(decode_capture([DROP]))
    assert any(isinstance(x, Exchange) and x.response_frame and x.response_frame > 200 for x in whole)
    got = list(decode_capture(pieces))
    assert {x.file for x in got} == {"drop.pcap+2"}
    assert [replace(x, file=DROP.name) for x in got] == whole


def test_files_given_in_shell_glob_order_are_read_in_rotation_order(tmp_path):
    # 12 pieces: the shell expands drop.pcap* as drop.pcap, drop.pcap1, drop.pcap10, drop.pcap11, drop.pcap2, ...
    pieces = split_pcap(DROP, tmp_path, pieces=12, name="drop.pcap")
    glob_order = sorted(pieces, key=lambda p: p.name)
    assert glob_order != pieces
    got = as_json(analyze_capture(glob_order))
    assert got["capture"]["decode"]["files"] == [p.name for p in pieces]
    assert unsplit_view(got, "drop.pcap+11", DROP.name) == as_json(analyze_capture([DROP]))


def test_a_gzip_compressed_ring_buffer_is_a_rotated_set_too(tmp_path):
    # The README's `fetchtool analyze broker-*.pcap.gz` on dumpcap -b files: broker_00001_<time>.pcap.gz, ...
    pieces = split_pcap(DROP, tmp_path, every=100, name="broker", ring=True, gz=True)
    assert pieces[1].name.startswith("broker_00002_17") and pieces[1].name.endswith(".pcap.gz")
    got = as_json(analyze_capture(pieces[::-1]))
    assert got["capture"]["decode"]["files"] == [p.name for p in pieces]
    assert unsplit_view(got, f"{pieces[0].name}+2", DROP.name) == as_json(analyze_capture([DROP]))


def test_tcpdump_gzip_rotation_names_put_the_unnumbered_first_file_first(tmp_path):
    # tcpdump -C 1 -z gzip -w drop.pcap: drop.pcap.gz, drop.pcap1.gz, drop.pcap2.gz (plain name order would put
    # drop.pcap1.gz first, and the real first piece would be left out of the set)
    pieces = split_pcap(DROP, tmp_path, every=100, name="drop.pcap", gz=True)
    assert [p.name for p in pieces] == ["drop.pcap.gz", "drop.pcap1.gz", "drop.pcap2.gz"]
    got = as_json(analyze_capture(sorted(pieces)))
    assert got["capture"]["decode"]["files"] == [p.name for p in pieces]
    assert unsplit_view(got, "drop.pcap.gz+2", DROP.name) == as_json(analyze_capture([DROP]))


def test_a_large_set_is_read_by_the_forked_reader_with_the_same_items(tmp_path, monkeypatch):
    pieces = split_pcap(DROP, tmp_path, every=100, name="drop.pcap")
    here = list(decode_capture(pieces))
    monkeypatch.setattr(streams, "BACKGROUND_MIN_BYTES", 0)
    assert streams.worth_a_child(*pieces)
    with forked_children() as pids:  # leaving the block checks that the reader process was reaped
        forked = decode_capture(pieces)
        assert list(forked) == here
    assert len(pids) == 1
    assert forked.report.files == [p.name for p in pieces]
    assert forked.report.packets == as_json(analyze_capture([DROP]))["capture"]["decode"]["packets"]


def test_captures_that_overlap_in_time_are_not_a_rotation(tmp_path):
    """Two brokers captured side by side: broker1.pcap and broker2.pcap share a name stem, not a timeline."""
    a, b = tmp_path / "broker1.pcap", tmp_path / "broker2.pcap"
    shutil.copy(CAPTURES / "scenarios" / "healthy.pcap", a)
    shutil.copy(CAPTURES / "scenarios" / "starvation.pcap", b)
    assert rotation_groups([b, a]) == [[b], [a]]  # as given: nothing to reorder
    both = list(decode_capture([a, b]))
    alone = list(decode_capture([a])) + list(decode_capture([b]))
    key = lambda x: (x.file, getattr(x, "request_frame", None), x.correlation_id, x.client, x.broker)  # noqa: E731
    assert [key(x) for x in both] == [key(x) for x in alone]
    assert {x.file for x in both} == {"broker1.pcap", "broker2.pcap"}


def test_a_piece_from_another_capture_starts_its_own_set(tmp_path):
    # cap.pcap, cap.pcap1 are one capture; cap.pcap2 is an earlier capture that happens to share the name stem.
    pieces = split_pcap(DROP, tmp_path, pieces=2, name="cap.pcap")
    other = tmp_path / "cap.pcap2"
    shutil.copy(CAPTURES / "kafka-python-tansu.pcap", other)  # captured before the session-drop run
    assert rotation_groups(pieces + [other]) == [pieces, [other]]
    run = decode_capture(pieces + [other])
    files = {x.file for x in run}
    assert files == {"cap.pcap+1", "cap.pcap2"}
    assert run.report.files == ["cap.pcap", "cap.pcap1", "cap.pcap2"]


def test_an_unreadable_piece_is_named_and_the_rest_is_still_read(tmp_path):
    pieces = split_pcap(DROP, tmp_path, every=100, name="drop.pcap")
    pieces[1].write_text("not a capture\n")  # the middle piece lost: the set is two captures now
    run = decode_capture(pieces)
    items = list(run)
    assert items and run.report.warnings["unreadable_file"] == 1
    assert "drop.pcap1: not a pcap or pcapng capture" in json.dumps(run.report.to_dict())
    assert run.report.files == ["drop.pcap", "drop.pcap1", "drop.pcap2"]


@pytest.mark.spark
def test_the_spark_and_polars_engines_give_the_same_json_on_a_rotated_set(spark, tmp_path):
    from fetchtool.pipeline.spark import analyze_spark

    pieces = split_pcap(DROP, tmp_path / "rot", every=100, name="drop.pcap")
    polars_text = render(analyze_capture(sorted(pieces, key=lambda p: p.name)))
    assert '"drop.pcap+2"' in polars_text
    assert render(analyze_spark([tmp_path / "rot"], spark=spark)) == polars_text
