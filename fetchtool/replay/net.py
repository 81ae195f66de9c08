"""The replay's socket edge: connecting to a broker, reading whole response frames, and the open-files limit."""

from __future__ import annotations

import asyncio
import errno
import sys

try:
    import resource
except ImportError:  # not on Windows: no limit to read or raise
    resource = None  # type: ignore[assignment]

# Descriptors the process needs besides the replay's connections: the interpreter, the capture files, the
# embedded broker's listening socket, the admin connection to a target, the event loop's own.
RESERVED_FILES = 64
_OUT_OF_FILES = (errno.EMFILE, errno.ENFILE)


class ReplayError(Exception):
    """A replay that cannot start (unreachable broker, missing topics); one line for the user."""


class OutOfFiles(ReplayError):
    """The process (or the system) ran out of file descriptors: the whole replay stops, one line for the user."""


def reason(exc: BaseException) -> str:
    """Why a connection failed, never empty: asyncio's TimeoutError and some OSErrors have no message."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    if str(exc):
        return str(exc)
    return "timed out" if isinstance(exc, TimeoutError) else type(exc).__name__


def open_files_limit() -> int | None:
    """The soft limit of open files (ulimit -n); None where there is none to read."""
    if resource is None:
        return None
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else soft


def allow_open_files(needed: int) -> int | None:
    """Raise the soft limit of open files to `needed` where the hard limit allows (as far as it allows);
    returns the soft limit then in force (None: unlimited)."""
    if resource is None:
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            pass
    return open_files_limit()


def _out_of_files(exc: OSError) -> bool:
    # asyncio joins the errors of several addresses into one OSError without an errno
    return exc.errno in _OUT_OF_FILES or "Too many open files" in str(exc)


async def connect(host: str, port: int, timeout: float) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    try:
        return await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except OSError as exc:
        if _out_of_files(exc):
            limit = open_files_limit()
            raise OutOfFiles(f"out of open files connecting to {host}:{port}"
                             + (f" (ulimit -n is {limit:,})" if limit else "")
                             + ": raise the limit (ulimit -n) or close other programs' files") from None
        raise ReplayError(f"cannot connect to {host}:{port}: {reason(exc)}") from None
    except asyncio.TimeoutError as exc:
        raise ReplayError(f"cannot connect to {host}:{port}: {reason(exc)}") from None


async def read_frame_within(reader: asyncio.StreamReader, timeout: float) -> bytes:
    """read_frame, or asyncio.TimeoutError after `timeout` seconds. On Python 3.11+ without wait_for's extra task
    per call: a replay reads one frame per request, and an as-fast replay waits for each in turn."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(timeout):
            return await read_frame(reader)
    return await asyncio.wait_for(read_frame(reader), timeout)


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    size = int.from_bytes(await reader.readexactly(4), "big", signed=True)
    if size < 4:
        raise ConnectionError(f"bad response frame size {size}")
    return await reader.readexactly(size)
