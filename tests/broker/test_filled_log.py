"""replay pre-fills the embedded broker's partitions with copies of one batch, made when read (PartitionLog.fill):
a filled log must answer every read, delayed-fetch count and error exactly as a log with each copy appended."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fetchtool.broker.logs import PartitionLog
from fetchtool.broker.rawclient import make_batch

BATCH = make_batch([b"x" * 16] * 5)
TAIL = make_batch([b"y" * 7] * 3)


def _logs(times: int, tail: bool) -> tuple[PartitionLog, PartitionLog]:
    appended, filled = PartitionLog(), PartitionLog()
    for _ in range(times):
        appended.append(BATCH)
    filled.fill(BATCH, times)
    if tail:
        appended.append(TAIL)
        filled.append(TAIL)
    return appended, filled


@settings(max_examples=300)
@given(times=st.integers(1, 6), tail=st.booleans(), offset=st.integers(-1, 40), max_bytes=st.integers(0, 2000),
       min_one=st.booleans(), hard=st.booleans())
def test_a_filled_log_reads_as_the_same_batches_appended(times, tail, offset, max_bytes, min_one, hard):
    appended, filled = _logs(times, tail)
    assert (filled.log_end_offset, filled.high_watermark) == (appended.log_end_offset, appended.high_watermark)
    assert filled.read(offset, max_bytes, min_one, hard) == appended.read(offset, max_bytes, min_one, hard)
    if offset >= 0:
        assert filled.bytes_available(offset) == appended.bytes_available(offset)


def test_a_produce_after_the_filler_gets_the_next_offset_and_reads_back():
    appended, filled = _logs(4, tail=False)
    assert filled.append(TAIL) == appended.append(TAIL) == 20
    assert filled.read(20, 10_000, True, False) == appended.read(20, 10_000, True, False)
