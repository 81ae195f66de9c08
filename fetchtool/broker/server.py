"""The asyncio edge of the broker: listening socket, connections, delayed-fetch waits, fault injection.

    broker = Broker(BrokerConfig(port=0), topics={"orders": 3})
    port = await broker.start()
    ...
    broker.drop_all_sessions()     # as after a restart: clients get FETCH_SESSION_ID_NOT_FOUND
    await broker.stop()

`clock` gives now_ms to the session engine; with `speed` > 1 the clock is expected to run that many times
faster than real time, and MaxWaitMs waits are shortened by the same factor (replays compress time).

Connection limits, as Kafka's SocketServer has them: at most max_connections in all and
max_connections_per_ip from one address (Kafka's max.connections.per.ip); a connection beyond either is accepted
and closed at once, with one log line and a counter. Time limits are the connection's (connection.py).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import time
import typing

from fetchtool.broker.connection import Connection
from fetchtool.broker.fetch import PendingFetch
from fetchtool.broker.gcpause import FULL_COLLECTION_HOLD
from fetchtool.broker.handler import BrokerCore
from fetchtool.broker.state import BrokerConfig


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


def _worker() -> concurrent.futures.ThreadPoolExecutor:
    return concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="fetchtool-broker-worker")


class Broker:
    def __init__(self, config: BrokerConfig | None = None, *, topics: typing.Mapping[str, int] | None = None,
                 clock: typing.Callable[[], int] | None = None, speed: float = 1.0,
                 log: logging.Logger | None = None) -> None:
        self.config = config or BrokerConfig()
        self.log = log or logging.getLogger("fetchtool.broker")
        self.core = BrokerCore(self.config, self.log)
        self.clock = clock or wall_clock_ms
        self.speed = speed
        self.connections: dict[str, Connection] = {}
        self.connections_per_ip: collections.Counter[str] = collections.Counter()
        # Decoding and encoding large frames (pure work) runs here, off the event loop; one thread is enough, the
        # point is that the loop keeps answering other clients meanwhile.
        self.worker = _worker()
        self.gc_hold = FULL_COLLECTION_HOLD
        self._server: asyncio.AbstractServer | None = None
        self._appended = asyncio.Event()
        for name, partitions in (topics or {}).items():
            self.core.state.create_topic(name, partitions)

    # -- lifecycle ------------------------------------------------------------------------------------------
    async def start(self) -> int:
        """Bind and start accepting; returns the bound port (config.port 0 picks a free one)."""
        self._appended = asyncio.Event()
        if self.worker._shutdown:  # started again after stop()
            self.worker = _worker()
        self._server = await asyncio.start_server(self._accept, self.config.host, self.config.port,
                                                  reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        self.core.state.port = self.port
        c = self.config
        self.log.info("broker listening on %s:%d (cache slots=%d shards=%d eviction_ms=%d; connections max=%d "
                      "per_ip=%d idle_ms=%d request_frame_ms=%d)", c.host, self.port, c.cache_slots, c.cache_shards,
                      c.eviction_ms, c.max_connections, c.per_ip_limit, c.idle_timeout_ms,
                      c.partial_frame_timeout_ms)
        if self.core.state.host != self.config.host:  # said once: clients connect to this, not to the bind address
            self.log.info("advertising %s:%d to clients (Metadata, FindCoordinator)", self.core.state.host, self.port)
        return self.port

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for conn in list(self.connections.values()):
            if conn.task is not None:
                conn.task.cancel()
        tasks = [c.task for c in self.connections.values() if c.task is not None]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        await self._server.wait_closed()
        self._server = None
        self.worker.shutdown(wait=False, cancel_futures=True)
        self.log.info("broker stopped")

    def now_ms(self) -> int:
        return self.clock()

    # -- connections ----------------------------------------------------------------------------------------
    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Connection(self, reader, writer)
        ip = conn.ip
        if len(self.connections) >= self.config.max_connections:
            self.core.count("refused_connections")
            self.log.info("connection %s refused: %d connections open (limit)", conn.client, len(self.connections))
            writer.close()
            return
        if self.connections_per_ip[ip] >= self.config.per_ip_limit:
            # Kafka: "Too many connections from /ip (maximum = N)"; said once per refusal, counted.
            self.core.count("refused_connections_per_ip")
            self.log.info("connection %s refused: %d connections already open from %s "
                          "(max.connections.per.ip=%d)", conn.client, self.connections_per_ip[ip], ip,
                          self.config.per_ip_limit)
            writer.close()
            return
        conn.task = asyncio.current_task()
        self.connections[conn.client] = conn
        self.connections_per_ip[ip] += 1
        try:
            await conn.run()
        except asyncio.CancelledError:
            pass
        finally:
            self.connections_per_ip[ip] -= 1
            if not self.connections_per_ip[ip]:
                del self.connections_per_ip[ip]

    def notify_appended(self) -> None:
        """A produce appended data: wake every delayed fetch so it can re-check MinBytes."""
        self._appended.set()
        self._appended = asyncio.Event()

    async def wait_for_fetch(self, pending: PendingFetch) -> None:
        """DelayedFetch: return when enough bytes arrived or MaxWaitMs passed (scaled by speed); the caller then
        completes the fetch."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (pending.deadline_ms - pending.received_ms) / 1000 / self.speed
        fetch = self.core.fetch
        while True:
            event = self._appended
            if fetch.ready(pending):
                break
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            try:
                await asyncio.wait_for(event.wait(), remaining)
            except asyncio.TimeoutError:
                break

    # -- fault injection and observation (admin) ------------------------------------------------------------
    def drop_all_sessions(self) -> int:
        """Forget every fetch session, as a restarted broker would. Returns how many were dropped."""
        dropped = self.core.fetch.cache.size
        self.core.fetch.reset()
        self.log.info("admin: dropped all %d fetch sessions", dropped)
        return dropped

    def evict_session(self, session_id: int) -> bool:
        cache = self.core.fetch.cache
        if cache.get(session_id) is None:
            return False
        self.log.info("admin: evicting fetch session %d", session_id)
        cache.remove(session_id, self.now_ms(), "admin")
        self.core.fetch.log_cache_events()
        return True

    def drop_connection(self, client: str | None = None) -> int:
        """Abort the connection from `client` ("ip:port"), or every connection when None. Returns the count."""
        victims = [c for addr, c in self.connections.items() if client is None or addr == client]
        for conn in victims:
            conn.abort()
        self.log.info("admin: dropped %d connection(s)%s", len(victims), f" from {client}" if client else "")
        return len(victims)

    def session_metrics(self) -> dict:
        return dict(self.core.fetch.cache.metrics())

    def sessions(self) -> list[dict]:
        return [
            {"session_id": s.id, "epoch": s.epoch, "partitions": s.size, "privileged": s.privileged}
            for s in self.core.fetch.cache.sessions()
        ]

    @property
    def fetch_history(self):
        return self.core.fetch.history

    @property
    def counters(self) -> dict[str, int]:
        counters = dict(self.core.counters)
        if self.core.state.duplicates:  # idempotent retries acknowledged without a second append
            counters["duplicate_batches"] = self.core.state.duplicates
        return counters

    def create_topic(self, name: str, partitions: int):
        return self.core.state.create_topic(name, partitions)
