"""records.summarize on real batches built by kafka-python's record builders."""

from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from fetchtool.protocol.records import summarize


def v2(n, codec=0):
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i in range(n):
        b.append(i, timestamp=1_700_000_000_000, key=b"k", value=b"value " * 50, headers=[])
    return bytes(b.build())


def legacy(magic, n, codec=0):
    b = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i in range(n):
        b.append(i, timestamp=1_700_000_000_000 if magic else None, key=None, value=b"value " * 50)
    return bytes(b.build())


def test_v2_batches_counts_and_codec():
    s = summarize(v2(5) + v2(7))
    assert (s.batches, s.records, s.compression, s.partial_bytes) == (2, 12, "none", 0)
    assert summarize(v2(3, codec=1)).compression == "gzip"
    assert summarize(v2(3) + v2(4, codec=1)).compression == "mixed"


def test_trailing_partial_batch_is_reported_not_an_error():
    whole, cut = v2(4), v2(9)[:40]
    s = summarize(whole + cut)
    assert (s.batches, s.records, s.partial_bytes) == (1, 4, 40)
    only_partial = summarize(v2(9)[:70])
    assert (only_partial.batches, only_partial.compression, only_partial.partial_bytes) == (0, None, 70)


def test_legacy_message_sets():
    s = summarize(legacy(1, 3))
    assert (s.batches, s.records, s.compression) == (3, 3, "none")
    wrapped = summarize(legacy(0, 5, codec=1))  # one gzip wrapper message: one record, never decompressed
    assert (wrapped.batches, wrapped.records, wrapped.compression) == (1, 1, "gzip")


def test_empty_and_null():
    assert summarize(None).batches == 0 and summarize(b"").compression is None
