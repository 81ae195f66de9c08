"""simulate's JSON report is written piece by piece (replay/jsonout.py) and must read, byte for byte, as
json.dumps(doc, indent=2) of the whole document would."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from fetchtool.replay.jsonout import Rows, json_text

_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
_DOCS = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
                     | st.dictionaries(st.text(max_size=5), inner, max_size=4), max_leaves=20)


def _written(doc) -> str:
    return "".join(json_text(doc, size=7))  # small pieces: every seam between them is crossed


@given(_DOCS)
def test_a_document_written_in_pieces_is_what_json_dumps_writes(doc):
    assert _written(doc) == json.dumps(doc, indent=2) + "\n"


@given(st.lists(_DOCS, max_size=5), st.dictionaries(st.text(max_size=3), _DOCS, max_size=3))
def test_rows_made_as_they_are_written_read_as_the_list_they_stand_for(rows, head):
    doc = {**head, "clients": Rows(len(rows), rows.__getitem__), "after": [rows]}
    assert _written(doc) == json.dumps({**head, "clients": rows, "after": [rows]}, indent=2) + "\n"
