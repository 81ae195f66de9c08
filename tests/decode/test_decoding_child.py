"""Scenario: a large capture is decoded whole in a forked child (fetchtool/decoding/forked.py) while the command
analyses the items; the engineer must get exactly what one process gives: the same items in the same order,
field for field and type for type, each connection's end at the same place between them, the same report, the
same one-line error, and no process left behind however the reading ends.

The captures here are small: the size rule is lowered (BACKGROUND_MIN_BYTES = 0) so that they take the child
path; `forked_children` counts the forks and checks each was reaped."""

from __future__ import annotations

import itertools
import json
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fetchtool.capture import streams
from fetchtool.decoder import CaptureError, decode_capture
from fetchtool.decoding import forked

from capture_files import forked_children, split_pcap

from .cut import cut_capture

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = sorted(p for p in (ROOT / "captures").rglob("*") if p.suffix in (".pcap", ".pcapng"))
DROP = ROOT / "captures" / "scenarios-real" / "kafka-python-session-drop.pcap"
EVICTIONS = ROOT / "captures" / "kafka" / "java-evictions.pcap"


@pytest.fixture
def large(monkeypatch):
    """Every capture counts as large: decoded in the child."""
    monkeypatch.setattr(streams, "BACKGROUND_MIN_BYTES", 0)
    monkeypatch.delenv("FETCHTOOL_ONE_PROCESS", raising=False)


def consumed(run) -> tuple[list, list]:
    """The items, and the connection ends as a consumer finds them: (items before it, ids) each time
    run.ended is not empty between two items (analysis.run drains it so)."""
    items, ends = [], []
    for item in run:
        if run.ended:
            ends.append((len(items), tuple(run.ended)))
            run.ended.clear()
        items.append(item)
    ends.append((len(items), tuple(run.ended)))
    return items, ends


def deep_types(items) -> list:
    return [(type(it).__name__, *(type(row).__name__ for name in ("request_partitions", "forgotten_partitions",
                                                                  "response_partitions")
                                  for row in (getattr(it, name, None) or ())))
            for it in items]


def one_process_and_child(paths):
    here = decode_capture(paths, in_child=False)
    want = consumed(here)
    with forked_children() as pids:
        child = decode_capture(paths)
        got = consumed(child)
    assert len(pids) == 1, "the decode run forked exactly one process"
    return (want, here.report), (got, child.report)


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_every_capture_gives_the_same_items_ends_and_report_from_the_child(path, large):
    (want, want_report), (got, got_report) = one_process_and_child([path])
    assert got == want
    assert deep_types(got[0]) == deep_types(want[0])
    assert got_report == want_report and got_report.to_dict() == want_report.to_dict()


def lossy(tmp_path, drop) -> Path:
    """java-evictions.pcap without the packet records `drop` (indexes): lost bytes, gaps, resynchronisation;
    without its first records, a capture that starts in the middle of messages."""
    data = EVICTIONS.read_bytes()
    pos, kept = 24, [data[:24]]
    for i in itertools.count():
        if pos + 16 > len(data):
            break
        caplen = struct.unpack_from("<I", data, pos + 8)[0]
        if i not in drop:
            kept.append(data[pos:pos + 16 + caplen])
        pos += 16 + caplen
    out = tmp_path / f"lossy-{min(drop)}.pcap"
    out.write_bytes(b"".join(kept))
    return out


def started_mid_message(tmp_path) -> Path:
    """java-rebalance.pcap from 40 bytes into a Produce request (test_capture_starts_mid_message's cut)."""
    path = tmp_path / "cut-java-rebalance.pcap"
    cut_capture(ROOT / "captures" / "kafka" / "java-rebalance.pcap", path, 1290, 40)
    return path


def test_a_capture_with_lost_packets_gives_the_same_from_the_child(tmp_path, large):
    (want, want_report), (got, got_report) = one_process_and_child([lossy(tmp_path, range(300, 3000, 97))])
    assert got == want and got_report == want_report


def test_a_capture_that_starts_mid_message_gives_the_same_from_the_child(tmp_path, large):
    (want, want_report), (got, got_report) = one_process_and_child([started_mid_message(tmp_path)])
    assert got == want and got_report == want_report


def test_the_captures_with_orphans_gaps_and_many_clients_are_among_them(tmp_path):
    # what the comparisons above cover, so that they cannot pass on captures that exercise nothing
    runs = [decode_capture(p, in_child=False) for p in CAPTURES]
    cut = [decode_capture(started_mid_message(tmp_path), in_child=False),
           decode_capture(lossy(tmp_path, range(300, 3000, 97)), in_child=False)]
    items = [it for run in runs for it in run]
    assert any(type(it).__name__ == "OrphanResponse" for it in items)
    for run in cut:
        list(run)
    assert cut[0].report.mid_message_starts and cut[1].report.gaps and cut[1].report.skipped_bytes
    assert any(len(run.report.client_software) > 1 for run in runs)
    assert any(run.ended for run in runs) and cut[0].report.warnings


def test_a_rotated_set_decodes_the_same_in_the_child(tmp_path, large):
    pieces = split_pcap(DROP, tmp_path, every=100, name="drop.pcap")
    (want, want_report), (got, got_report) = one_process_and_child(pieces)
    assert got == want and got_report == want_report
    assert got_report.files == ["drop.pcap", "drop.pcap1", "drop.pcap2"]


def test_a_file_that_fails_midway_is_reported_the_same(tmp_path, large):
    pieces = split_pcap(DROP, tmp_path, every=100, name="drop.pcap")
    middle = pieces[1].read_bytes()
    pieces[1].write_bytes(middle[:len(middle) // 2] + b"\xff" * 64)  # cut inside a packet, then junk
    other = tmp_path / "notes.pcap"
    other.write_text("not a capture at all\n")
    (want, want_report), (got, got_report) = one_process_and_child([*pieces, other])
    assert got == want and got_report == want_report
    assert want_report.warnings and "unreadable_file" in want_report.warnings


def test_nothing_readable_is_the_same_one_line_error(tmp_path, large):
    # pcap files whose packets are all of a link type fetchtool does not read (147, USER0)
    junk = [tmp_path / "a.pcap", tmp_path / "b.pcap"]
    record = struct.pack("<IIII", 1, 0, 20, 20) + b"x" * 20
    for p in junk:
        p.write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 147) + record * 3)
    with pytest.raises(CaptureError) as here:
        list(decode_capture(junk, in_child=False))
    with forked_children() as pids, pytest.raises(CaptureError) as child:
        list(decode_capture(junk))
    assert len(pids) == 1
    assert str(child.value) == str(here.value) and len(str(here.value).splitlines()) == 1


def test_a_consumer_that_stops_early_leaves_no_process_and_keeps_what_was_read(large, monkeypatch):
    # a default-sized (64 KB) pipe and one item per batch: the child is still decoding when the consumer stops
    monkeypatch.setattr(streams, "grow_pipe", lambda fd: None)
    monkeypatch.setattr(forked, "_BATCH_ITEMS", 1)
    whole = decode_capture(EVICTIONS, in_child=False)
    total = sum(1 for _ in whole)
    with forked_children() as pids:
        run = decode_capture(EVICTIONS)
        items = iter(run)
        first = [next(items) for _ in range(5)]
        items.close()  # what Ctrl-C or a closed stdout does to the reading
    assert len(pids) == 1
    assert first == list(decode_capture(EVICTIONS, in_child=False))[:5]
    # the report covers what the child decoded before it stopped: more than was consumed, not the whole file
    assert 5 <= run.report.exchanges < whole.report.exchanges == total
    assert 0 < run.report.packets < whole.report.packets


@pytest.mark.parametrize("large_file, in_child", [(False, False), (True, False), (True, True)],
                         ids=["one-process", "reader-child", "decoding-child"])
def test_a_consumer_that_stops_early_finds_the_packets_read_so_far_in_the_report(large_file, in_child, request):
    # (the old code reported 0 packets: in one process the reading was still suspended when the report took its
    # stats; the reader child's stats came only with its last message, never sent when the consumer stopped)
    if large_file:
        request.getfixturevalue("large")
    with forked_children() as pids:
        run = decode_capture(EVICTIONS, in_child=in_child)
        items = iter(run)
        for _ in range(5):
            next(items)
        items.close()
    assert len(pids) == int(large_file)
    assert run.report.packets > 0 and run.report.bytes > 0


def test_a_child_that_dies_is_a_one_line_error_not_a_hang(large, monkeypatch):
    real = forked._send

    def dies(items, ended, fd):
        os.kill(os.getpid(), signal.SIGKILL)  # in the child only: the OOM killer, a kill -9
        real(items, ended, fd)

    monkeypatch.setattr(forked, "_send", dies)
    with forked_children() as pids, pytest.raises(CaptureError, match="decoding process stopped unexpectedly"):
        list(decode_capture(EVICTIONS))
    assert len(pids) == 1


def test_a_decoder_bug_in_the_child_is_raised_here_with_its_text(large, monkeypatch):
    from fetchtool import decoder

    def broken(*args, **kwargs):
        raise ZeroDivisionError("the bug")
        yield  # a generator, as decode_events is

    monkeypatch.setattr(decoder, "decode_events", broken)
    with forked_children() as pids, pytest.raises(RuntimeError, match="ZeroDivisionError: the bug"):
        list(decode_capture(EVICTIONS))
    assert len(pids) == 1


def test_one_process_when_asked_or_when_small(monkeypatch):
    with forked_children() as pids:
        list(decode_capture(EVICTIONS))  # far below BACKGROUND_MIN_BYTES
    assert pids == []
    monkeypatch.setattr(streams, "BACKGROUND_MIN_BYTES", 0)
    monkeypatch.setenv("FETCHTOOL_ONE_PROCESS", "1")
    with forked_children() as pids:
        list(decode_capture(EVICTIONS))
    assert pids == []


@pytest.fixture(scope="module")
def twenty_mb(tmp_path_factory) -> Path:
    """A 20 MB generated Fetch capture (benchmarks/make_bench_capture.py): above BACKGROUND_MIN_BYTES."""
    path = tmp_path_factory.mktemp("big") / "bench.pcapng"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "make_bench_capture.py"), str(path), "--size-mb", "20"],
                   check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert path.stat().st_size > streams.BACKGROUND_MIN_BYTES
    return path


def fetchtool_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "fetchtool", *args]


@pytest.mark.slow
def test_ctrl_c_in_analyze_of_a_large_capture_leaves_no_process(twenty_mb):
    # sixteen times the capture: the command still reads when Ctrl-C comes, once its decoding child is there;
    # its own session, to find every process it started afterwards
    proc = subprocess.Popen(fetchtool_command("analyze", *[str(twenty_mb)] * 16, "-f", "json"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 60
    children: list[int] = []
    while not children and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
        children = _children(proc.pid)
    assert children, "a large capture is decoded in a forked child"
    time.sleep(0.5)  # into the reading
    assert proc.poll() is None, "the command ended before Ctrl-C: the capture is too small"
    os.killpg(proc.pid, signal.SIGINT)  # as the terminal sends it: to every process of the foreground group
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted: the report covers what was read before Ctrl-C" in err and "Traceback" not in err
    doc = json.loads(out)
    assert doc["capture"]["exchanges"] > 0 and doc["capture"]["decode"]["packets"] > 0
    time.sleep(0.2)
    with pytest.raises(ProcessLookupError):
        os.killpg(proc.pid, 0)  # nothing of the command's session is left, not even a zombie


@pytest.mark.slow
def test_analyze_of_a_large_capture_is_the_same_in_one_process(twenty_mb):
    def analyze(**env):
        run = subprocess.run(fetchtool_command("analyze", str(twenty_mb), "-f", "json"), capture_output=True,
                             text=True, env={**os.environ, "PYTHONPATH": str(ROOT), **env}, timeout=300)
        assert run.returncode == 0, run.stderr
        return run.stdout

    assert analyze() == analyze(FETCHTOOL_ONE_PROCESS="1")


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(p) for p in fh.read().split()]
    except OSError:
        return []


# -- a side consumer (forked.SideConsumer): a second process fed the same items ------------------------------
def _seen(items, ended) -> tuple[list, list]:
    """What a consumer finds, as `consumed` records it (runs in the side consumer's process)."""
    got, ends = [], []
    for item in items:
        if ended:
            ends.append((len(got), tuple(ended)))
            ended.clear()
        got.append(item)
    ends.append((len(got), tuple(ended)))
    return got, ends


@pytest.mark.parametrize("path", [DROP, EVICTIONS, ROOT / "captures" / "kafka" / "java-rebalance.pcap"],
                         ids=lambda p: p.name)
def test_a_side_consumer_gets_the_same_items_and_ends_as_this_process(path, large):
    want = consumed(decode_capture(path, in_child=False))
    with forked_children() as pids:
        run = decode_capture(path)
        run.side = side = forked.SideConsumer(_seen)
        got = consumed(run)
        assert side.running
        result = side.wait()  # (reaped here)
    assert len(pids) == 2, "the decoding child and the side consumer"
    assert got == want
    assert result == side.result == want  # items equal field for field; the ends at the same places
    assert deep_types(side.result[0]) == deep_types(want[0])


def test_a_side_consumer_runs_only_where_the_run_is_decoded_in_a_child():
    with forked_children() as pids:
        run = decode_capture(EVICTIONS)  # small: decoded here
        run.side = side = forked.SideConsumer(_seen)
        list(run)
    assert pids == [] and not side.running and side.wait() is None


def test_a_side_consumer_that_dies_leaves_the_run_whole_and_no_result(large):
    def dies(items, ended):
        next(items)
        os.kill(os.getpid(), signal.SIGKILL)

    want = consumed(decode_capture(EVICTIONS, in_child=False))
    with forked_children() as pids:
        run = decode_capture(EVICTIONS)
        run.side = side = forked.SideConsumer(dies)
        got = consumed(run)
        assert side.wait() is None
    assert len(pids) == 2 and got == want and side.running


def test_a_side_consumer_of_a_run_stopped_early_ends_with_what_it_read(large, monkeypatch):
    monkeypatch.setattr(streams, "grow_pipe", lambda fd: None)
    monkeypatch.setattr(forked, "_BATCH_ITEMS", 1)
    whole = list(decode_capture(EVICTIONS, in_child=False))
    with forked_children() as pids:
        run = decode_capture(EVICTIONS)
        run.side = side = forked.SideConsumer(lambda items, ended: list(items))
        items = iter(run)
        first = [next(items) for _ in range(5)]
        items.close()  # (waits for the side consumer: its process is reaped)
    assert len(pids) == 2
    assert first == whole[:5]
    # a little ahead of what was consumed, as the report is; never more than was decoded
    assert isinstance(side.result, list) and 5 <= len(side.result) < len(whole)
    assert side.result == whole[:len(side.result)]
