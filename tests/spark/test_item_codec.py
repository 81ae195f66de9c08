"""Stage 1 writes each decoded item once and both later stages read it back: what they read must be the item
the decoder gave, field for field, on every capture of the repo (Fetch v4-v18, FetchSnapshot, orphan
responses, topic ids with and without names). Exchanges take the fast form (LZ4-compressed marshal of plain
tuples, not pickle): a field marshal cannot write would silently fall back to the slow one, so that is checked
too."""

from __future__ import annotations

from pathlib import Path

import pytest

from fetchtool.decoder import decode_capture
from fetchtool.exchange import Exchange
from fetchtool.pipeline.spark_stages import item_blob, item_of

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
EVERY = sorted(p for p in CAPTURES.rglob("*.pcap*") if not p.name.endswith((".gz", ".json", ".log")))


@pytest.mark.parametrize("capture", EVERY, ids=lambda p: str(p.relative_to(CAPTURES)))
def test_an_item_read_back_is_the_item_the_decoder_gave(capture):
    items = list(decode_capture(capture))
    if not items:
        pytest.skip("no Fetch exchange in this capture")
    for it in items:
        blob = item_blob(it)
        back = item_of(blob)
        assert type(back) is type(it)
        assert back == it
        if isinstance(it, Exchange):
            assert blob[:1] == b"z", f"{it} took the pickle path"
            # the partition entries keep their named-tuple types (the cores read them by name)
            for field in ("request_partitions", "forgotten_partitions", "response_partitions"):
                assert [type(p) for p in getattr(back, field) or ()] == [type(p) for p in getattr(it, field) or ()]
