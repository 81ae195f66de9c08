"""Text from a capture or a peer, made safe to show: every character that could drive a terminal, forge a line
or hide what a name really is becomes visible escape text (`\\x1b`, `\\u202e`).

Client ids, client software names and versions (ApiVersions), topic names and rack ids come off the wire as any
UTF-8 the peer chose. A capture from a hostile network could hold `ESC ] 0 ; title BEL` (set the window title),
`ESC [ 5 m`, a CSI as the single C1 character U+009B, or a right-to-left override that makes one id read as
another. What is escaped:

- the C0 controls U+0000-U+001F (except what the caller keeps as structure: a report's newlines), as `\\x1b`:
  the form every engineer knows from terminals, free to use because JSON never writes a C0 control raw;
- DEL and the C1 controls U+007F-U+009F (U+009B is a CSI on many terminals, U+0085 a line break);
- the format characters (Unicode category Cf): bidi embeddings, overrides and isolates (U+202A-U+202E,
  U+2066-U+2069, "Trojan Source"), zero-width spaces and joiners, the BOM, the invisible tag characters;
- the line and paragraph separators U+2028/U+2029 (line breaks to some editors, viewers and old JavaScript);
- lone surrogates (a stream refuses to encode them: a traceback instead of a report).

Everything but the C0 controls is written `\\uNNNN` (a UTF-16 pair above U+FFFF): JSON's own escape, so the
same pass over a JSON document keeps it valid and decoding it gives back the original string. A backslash is
left as it is: reports stay readable, and the JSON report is the lossless record.
"""

from __future__ import annotations

import copy
import logging
import re
import sys
from typing import TextIO

# Unicode 14-15 format characters (Cf), line/paragraph separators and surrogates; tests/reports/test_printable.py
# checks this covers every such character of the running Python's unicodedata.
_WIDE = ("\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064"
         "\u2066-\u206f\ufeff\ufff9-\ufffb\ud800-\udfff\U000110bd\U000110cd\U00013430-\U0001343f"
         "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f")
_PATTERNS: dict[str, tuple[re.Pattern[str], bytes]] = {}
# A whole report (a JSON document of hundreds of MB) is checked in slices: an ASCII slice by bytes.translate,
# ~1 GB/s, any other by str.isprintable, where the regular expression reads ~40 MB/s; slices keep the copies
# small.
_SLICE = 1 << 20


def _pattern(keep: str) -> tuple[re.Pattern[str], bytes]:
    """The characters to escape, and the ASCII bytes that are safe (printable ASCII and `keep`)."""
    found = _PATTERNS.get(keep)
    if found is None:
        c0 = "".join(f"\\x{c:02x}" for c in range(0x20) if chr(c) not in keep)
        found = _PATTERNS[keep] = (re.compile(f"[{c0}\\x7f-\\x9f{_WIDE}]"),
                                   bytes(range(0x20, 0x7F)) + keep.encode("ascii"))
    return found


def _is_safe(text: str, keep: str, pattern: re.Pattern[str], safe: bytes) -> bool:
    if len(text) < 4096:  # an id, a table cell: the expression is quickest
        return pattern.search(text) is None
    for start in range(0, len(text), _SLICE):
        piece = text[start:start + _SLICE]  # the text itself when it is shorter
        if piece.isascii():
            if piece.encode("ascii").translate(None, safe):
                return False
            continue
        for kept in keep:
            piece = piece.replace(kept, "")
        # isprintable() is false for every character escaped here (and for a few harmless ones, such as a
        # no-break space): only then is the slower expression asked
        if not piece.isprintable() and pattern.search(piece) is not None:
            return False
    return True


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return f"\\x{code:02x}"
    if code > 0xFFFF:
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def printable(text: str, keep: str = "\n") -> str:
    """`text` with every character that is not safe to show escaped (module docstring); the characters in
    `keep` (C0 controls only: newline, tab) are left as they are, where the caller uses them as structure."""
    pattern, safe = _pattern(keep)
    if _is_safe(text, keep, pattern, safe):  # the common case: nothing to copy
        return text
    return pattern.sub(_escape, text)


def one_line(text: str) -> str:
    """`text` escaped to one line: a newline from a capture must not forge a second log or warning line."""
    return printable(text, keep="")


class PrintableFormatter(logging.Formatter):
    """Log lines with every message (and the arguments put into it) escaped to one line, and tracebacks kept
    to their own lines: a client id sent to `fetchtool broker` cannot drive the terminal the log is read on,
    nor forge a log line."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        safe = copy.copy(record)  # the record is shared with the other handlers: escape a copy
        safe.message = one_line(record.message)
        return super().formatMessage(safe)

    def formatException(self, ei) -> str:
        return printable(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:
        return printable(super().formatStack(stack_info))


def log_handler(stream: TextIO, fmt: str) -> logging.Handler:
    """A stream handler writing `fmt` lines through PrintableFormatter."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(PrintableFormatter(fmt))
    return handler


class _CurrentStderr(logging.StreamHandler):
    """logging's handler of last resort, escaping: writes to whatever sys.stderr is when a record comes."""

    def __init__(self) -> None:
        logging.Handler.__init__(self, logging.WARNING)  # not StreamHandler's: the stream is looked up each time
        self.setFormatter(PrintableFormatter("%(message)s"))

    @property  # StreamHandler keeps the stream it was given; this one follows sys.stderr
    def stream(self) -> TextIO:
        return sys.stderr


def last_resort_handler() -> logging.Handler:
    """For logging.lastResort: the warnings of a logger nobody configured (the broker `replay` runs in-process)
    reach stderr escaped, as logging's own last resort would write them raw."""
    return _CurrentStderr()
