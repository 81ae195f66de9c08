"""The replay's socket edge: connecting to a broker and reading whole response frames."""

from __future__ import annotations

import asyncio


class ReplayError(Exception):
    """A replay that cannot start (unreachable broker, missing topics); one line for the user."""


def reason(exc: BaseException) -> str:
    """Why a connection failed, never empty: asyncio's TimeoutError and some OSErrors have no message."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    if str(exc):
        return str(exc)
    return "timed out" if isinstance(exc, TimeoutError) else type(exc).__name__


async def connect(host: str, port: int, timeout: float):
    try:
        return await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except (OSError, asyncio.TimeoutError) as exc:
        raise ReplayError(f"cannot connect to {host}:{port}: {reason(exc)}") from None


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    size = int.from_bytes(await reader.readexactly(4), "big", signed=True)
    if size < 4:
        raise ConnectionError(f"bad response frame size {size}")
    return await reader.readexactly(size)
