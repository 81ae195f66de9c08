"""fetchtool.printable: what a string from a capture looks like once it is safe to show."""

from __future__ import annotations

import io
import json
import logging
import sys
import unicodedata

from fetchtool.printable import log_handler, one_line, printable

UNSAFE_CATEGORIES = {"Cc", "Cf", "Zl", "Zp", "Cs"}


def test_every_control_format_and_separator_character_is_escaped():
    left = [f"U+{c:04X}" for c in range(sys.maxunicode + 1)
            if unicodedata.category(chr(c)) in UNSAFE_CATEGORIES and chr(c) != "\n" and printable(chr(c)) == chr(c)]
    assert not left, f"shown raw: {left[:20]}"


def test_terminal_escapes_read_as_a_terminal_user_knows_them():
    assert printable("\x1b]0;pwned\x07\x1b[5m") == "\\x1b]0;pwned\\x07\\x1b[5m"
    assert printable("\x00\x7f\x9b\r\x08") == "\\x00\\u007f\\u009b\\x0d\\x08"
    assert printable("a\u202eexe.gnp") == "a\\u202eexe.gnp"           # right-to-left override
    assert printable("tag\U000e0041") == "tag\\udb40\\udc41"          # an invisible tag character: a UTF-16 pair


def test_ordinary_text_is_returned_as_it_is():
    for text in ("consumer-1", "orders.v2", "日本語のクライアント", "café 😀", "[bold]x[/bold]", "C:\\path", ""):
        assert printable(text) is text


def test_newlines_stay_where_they_are_structure_and_go_in_one_line_text():
    assert printable("a\nb\tc") == "a\nb\\x09c"
    assert one_line("a\nb") == "a\\x0ab"


def test_a_json_document_escaped_stays_valid_and_gives_back_the_original_strings():
    hostile = {"client_id": "evil\x1b]0;pwned\x07\x9b\x7f\u2028\u202e\U000e0041 é", "n": 1}
    for ensure_ascii in (True, False):
        text = printable(json.dumps(hostile, ensure_ascii=ensure_ascii, indent=2))
        assert not any(unicodedata.category(c) in UNSAFE_CATEGORIES for c in text if c != "\n")
        assert json.loads(text) == hostile


def test_a_log_line_cannot_be_forged_or_drive_the_terminal():
    stream = io.StringIO()
    log = logging.getLogger("test_printable")
    log.propagate = False
    log.addHandler(log_handler(stream, "%(levelname)s %(message)s"))
    try:
        log.warning("client_id=%s", "x\x1b]0;pwned\x07\nWARNING forged")
        try:
            raise ValueError("bad \x1b[5m")
        except ValueError:
            log.exception("failed")
    finally:
        log.handlers.clear()
    lines = stream.getvalue().splitlines()
    assert lines[0] == "WARNING client_id=x\\x1b]0;pwned\\x07\\x0aWARNING forged"
    assert lines[1] == "ERROR failed" and lines[2].startswith("Traceback") and lines[-1] == "ValueError: bad \\x1b[5m"


def test_a_whole_report_is_checked_to_its_last_character():
    # reports of hundreds of MB are checked in slices, ASCII ones by bytes: a control at any place is still found
    for filler in ("x" * 3_000_000, "é\u00a0│" * 1_000_000):
        for hostile in ("\x1b", "\x9b", "\u202e", "\x7f"):
            text = filler + hostile + "end"
            assert printable(text) == filler + printable(hostile) + "end"
        assert printable(filler) is filler
