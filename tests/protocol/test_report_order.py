"""A decode report reads the same however its parts were gathered: the Spark engine merges per-partition reports
in whatever order its stages finish, the polars engine counts in frame order."""

from __future__ import annotations

import json

from fetchtool.protocol.report import DecodeReport, warning_lines


def part(*warnings: tuple[str, str]) -> DecodeReport:
    rep = DecodeReport()
    for code, message in warnings:
        rep.warn(code, message)
    return rep


def merged(*parts: DecodeReport) -> DecodeReport:
    out = DecodeReport()
    for p in parts:
        out.merge(p)
    return out


def test_warning_kinds_come_out_in_one_order_whichever_part_is_merged_first():
    # Two flows, one with a malformed response and one with an unknown API version: equally frequent kinds.
    a = part(("malformed_response", "flow a: frame 12: cut short"))
    b = part(("unsupported_version", "flow b: Fetch v99"))
    ab, ba = merged(a, b), merged(b, a)
    assert json.dumps(ab.to_dict()["warnings"]) == json.dumps(ba.to_dict()["warnings"])
    assert ab.warning_lines() == ba.warning_lines()
    # The most frequent kind leads, in the report and in its printed lines alike.
    c = merged(b, a, part(("malformed_response", "flow c: frame 3: cut short")))
    assert list(c.to_dict()["warnings"]) == ["malformed_response", "unsupported_version"]
    assert warning_lines(c.to_dict()) == c.warning_lines()
    assert c.warning_lines()[0].startswith("malformed_response (x2)")
