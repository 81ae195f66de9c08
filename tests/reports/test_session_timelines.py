"""`fetchtool sessions` timelines at 60 and 80 columns: an error name, a frame pair or a session id is moved to
the next line whole, never broken (issue #17: FETCH_SESSION_ID_NOT_FOUND over 4 lines). The renderer is
fetchtool.analysis.reports.timeline; a table when the columns fit."""

from __future__ import annotations

import pytest

from fetchtool.analysis.reports import timeline
from fetchtool.sessions.errors import error_name

from .rendered import CAPTURES, analysis, text

WITH_SESSIONS = [p for p in CAPTURES if analysis(p).sessions]


@pytest.mark.parametrize("width", (60, 80))
@pytest.mark.parametrize("path", WITH_SESSIONS, ids=lambda p: p.name)
def test_timelines_keep_every_error_name_and_frame_whole(path, width):
    a = analysis(path)
    out = text(lambda console: timeline.render(a, console), width)
    assert max(len(line) for line in out.splitlines()) <= width
    words = set(out.split())
    for s in a.sessions:
        assert f"session {s.session_id} on" in out
        for st in s.steps:
            assert f"{st.request_frame}/{st.response_frame or '-'}" in words
            if st.error_code:
                assert error_name(st.error_code) in words


def test_an_evicted_sessions_error_stays_on_one_line_at_80_columns():
    a = analysis(next(p for p in CAPTURES if p.name == "java-evictions.pcap"))
    out = text(lambda console: timeline.render(a, console), 80)
    assert "FETCH_SESSION_ID_NOT_FOUND" in out.split()
    wide = text(lambda console: timeline.render(a, console), 200)
    assert "result" in wide and "─" in wide  # a table when it fits
