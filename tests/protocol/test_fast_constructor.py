"""The decoder's cheap constructors (fetchtool._fast) make the very objects the dataclasses' own __init__ makes,
however they are called: in order, by name, or leaving out a field that has a default."""

from __future__ import annotations

from dataclasses import dataclass, field

from fetchtool._fast import fast_constructor
from fetchtool.protocol.codec import FetchRequestBody, FetchResponseBody


def test_a_body_built_by_name_leaving_out_defaulted_fields_is_the_one_init_makes():
    build = fast_constructor(FetchRequestBody)
    assert build is not FetchRequestBody  # the cheap path, not the fallback
    made = build(session_id=7, session_epoch=3)
    assert type(made) is FetchRequestBody and made == FetchRequestBody(session_id=7, session_epoch=3)
    assert fast_constructor(FetchResponseBody)() == FetchResponseBody()


def test_a_class_whose_default_is_made_per_instance_keeps_its_own_init():
    @dataclass(frozen=True, slots=True)
    class Rows:
        rows: list = field(default_factory=list)

    assert fast_constructor(Rows) is Rows
