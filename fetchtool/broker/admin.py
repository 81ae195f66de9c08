"""Fault injection and inspection from another process: a line protocol on a loopback port.

One command per line, one JSON object per answer line:
  sessions                  live fetch sessions (id, epoch, partitions, privileged)
  metrics                   the cache's Kafka metrics (NumIncrementalFetchSessions, ...)
  counters                  request / bad-input counters
  drop-sessions             forget every session (as a broker restart): clients then get error 70
  evict ID                  remove one session
  drop-connections [ADDR]   abort the connection from ip:port, or all client connections
  history [N]               the last N fetches the broker answered (default 20)
SIGUSR1 to the broker process is a shortcut for drop-sessions.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import typing

if typing.TYPE_CHECKING:
    from fetchtool.broker.server import Broker


def execute(broker: Broker, line: str) -> dict:
    words = line.split()
    if not words:
        return {"error": "empty command"}
    cmd, args = words[0].lower(), words[1:]
    try:
        if cmd == "sessions":
            return {"sessions": broker.sessions()}
        if cmd == "metrics":
            return {"metrics": broker.session_metrics()}
        if cmd == "counters":
            return {"counters": broker.counters}
        if cmd == "drop-sessions":
            return {"dropped": broker.drop_all_sessions()}
        if cmd == "evict" and len(args) == 1:
            return {"evicted": broker.evict_session(int(args[0]))}
        if cmd == "drop-connections" and len(args) <= 1:
            return {"dropped": broker.drop_connection(args[0] if args else None)}
        if cmd == "history" and len(args) <= 1:
            n = int(args[0]) if args else 20
            return {"history": [dataclasses.asdict(s) for s in list(broker.fetch_history)[-n:]]}
    except ValueError as exc:
        return {"error": f"bad argument: {exc}"}
    return {"error": f"unknown command {line.strip()!r}"}


async def serve_admin(broker: Broker, host: str, port: int) -> asyncio.Server:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                answer = execute(broker, line.decode("utf-8", "replace"))
                writer.write(json.dumps(answer, default=str).encode() + b"\n")
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(handle, host, port)
