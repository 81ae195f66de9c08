"""A session's requests (EpochSteps), packed: one fixed-width record per request in a bytearray.

A session storm holds every session to the end (any of them may yet fail and be listed), and an EpochStep
object with its frame numbers, time and connection id costs about 250 bytes a request; packed, 76. The steps
come back as EpochStep objects, exactly as recorded, when a session's life is read (unpack). A value the record
cannot hold exactly (a time that is not a float, a number out of range) turns that session's log into a plain
list of EpochSteps.
"""

from __future__ import annotations

from struct import Struct
from struct import error as struct_error

from fetchtool.analysis.model import EpochStep

# kind, which of the optional fields are None, epoch, file, request frame, response frame, ts, conn, error code,
# sent, added, forgotten, returned
_RECORD = Struct("<BBiIqqdqiqqqq")
SIZE = _RECORD.size
_REQUEST, _RESPONSE, _TS, _ERROR, _RETURNED = 1, 2, 4, 8, 16

# Kinds and file names, numbered as they are met (a few per process: the record keeps their number). A log is
# read in the process that wrote it: TrackedSessions never leave it (the Spark engine ships SessionLives).
_kinds: list[str] = []
_kind_codes: dict[str, int] = {}
_files: list[str] = []
_file_codes: dict[str, int] = {}


def _code(value: str, codes: dict[str, int], values: list[str]) -> int:
    c = codes.get(value)
    if c is None:
        c = codes[value] = len(values)
        values.append(value)
    return c


StepLog = bytearray | list[EpochStep]


def append(log: StepLog, kind: str, epoch: int, file: str, request_frame: int | None, response_frame: int | None,
           ts: float | None, conn: int, error_code: int | None, sent: int, added: int, forgotten: int,
           returned: int | None) -> StepLog:
    """Append one request to ``log``; the log to keep (a list once a value cannot be packed exactly)."""
    if isinstance(log, bytearray) and (ts is None or type(ts) is float):
        none = ((request_frame is None) * _REQUEST | (response_frame is None) * _RESPONSE | (ts is None) * _TS
                | (error_code is None) * _ERROR | (returned is None) * _RETURNED)
        try:
            log += _RECORD.pack(_code(kind, _kind_codes, _kinds), none, epoch, _code(file, _file_codes, _files),
                                request_frame or 0, response_frame or 0, ts or 0.0, conn, error_code or 0, sent,
                                added, forgotten, returned or 0)
            return log
        except (struct_error, TypeError, OverflowError):
            pass
    steps = list(unpack(log)) if isinstance(log, bytearray) else log
    steps.append(EpochStep(kind, epoch, file, request_frame, response_frame, ts, conn, error_code, sent, added,
                           forgotten, returned))
    return steps


def count(log: StepLog) -> int:
    return len(log) // SIZE if isinstance(log, bytearray) else len(log)


def unpack(log: StepLog) -> tuple[EpochStep, ...]:
    """The steps of ``log``, in the order they were appended."""
    if not isinstance(log, bytearray):
        return tuple(log)
    out = []
    for kind, none, epoch, file, req, resp, ts, conn, err, sent, added, forgotten, ret in _RECORD.iter_unpack(log):
        out.append(EpochStep(
            kind=_kinds[kind], epoch=epoch, file=_files[file], request_frame=None if none & _REQUEST else req,
            response_frame=None if none & _RESPONSE else resp, ts=None if none & _TS else ts, conn=conn,
            error_code=None if none & _ERROR else err, sent=sent, added=added, forgotten=forgotten,
            returned=None if none & _RETURNED else ret,
        ))  # fmt: skip
    return tuple(out)
