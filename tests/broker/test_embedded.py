"""The broker embedded in an asyncio program: start/stop API, injected clock and speed, delayed fetches."""

from __future__ import annotations

import asyncio
import struct
import time

from broker_scenarios import fetch_request, produce_request

from fetchtool.broker import wire
from fetchtool.broker.rawclient import make_batch
from fetchtool.broker.server import Broker
from fetchtool.broker.state import BrokerConfig


class Link:
    """One asyncio client connection speaking kio entities."""

    def __init__(self, reader, writer) -> None:
        self.reader, self.writer, self.corr = reader, writer, 0

    @classmethod
    async def open(cls, port: int) -> "Link":
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    async def call(self, request):
        self.corr += 1
        self.writer.write(wire.encode_request(int(request.__api_key__), self.corr, request))
        (size,) = struct.unpack(">i", await self.reader.readexactly(4))
        corr, response = wire.decode_response(await self.reader.readexactly(size), int(request.__api_key__),
                                              int(request.__version__))
        assert corr == self.corr
        return response

    def close(self) -> None:
        self.writer.close()


def test_injected_clock_drives_eviction_and_speed_shortens_max_wait():
    async def scenario():
        now = [0]
        broker = Broker(BrokerConfig(port=0, cache_slots=1, cache_shards=1, eviction_ms=60_000),
                        topics={"t": 2}, clock=lambda: now[0], speed=1000.0)
        port = await broker.start()
        try:
            a, b = await Link.open(port), await Link.open(port)
            first = await a.call(fetch_request(12, [("t", 0, 0, 100)], epoch=0))
            assert first.session_id != 0 and broker.sessions()[0]["session_id"] == first.session_id
            now[0] = 60_001  # a minute of broker time passes in no real time: the session is now stale
            second = await b.call(fetch_request(12, [("t", 1, 0, 100)], epoch=0))
            assert second.session_id not in (0, first.session_id)
            evicted = await a.call(fetch_request(12, [], session_id=first.session_id, epoch=1))
            assert evicted.error_code == 70

            started = time.monotonic()  # MaxWaitMs 20 s of broker time at speed 1000: about 20 ms
            empty = await b.call(fetch_request(12, [], session_id=second.session_id, epoch=1, max_wait_ms=20_000))
            assert empty.error_code == 0 and empty.responses == ()
            assert time.monotonic() - started < 5
            a.close()
            b.close()
        finally:
            await broker.stop()

    asyncio.run(scenario())


def test_delayed_fetch_completes_early_when_a_produce_brings_the_bytes():
    async def scenario():
        broker = Broker(BrokerConfig(port=0), topics={"t": 1})
        port = await broker.start()
        try:
            consumer, producer = await Link.open(port), await Link.open(port)
            started = time.monotonic()
            waiting = asyncio.create_task(
                consumer.call(fetch_request(12, [("t", 0, 0, 1 << 20)], max_wait_ms=10_000, min_bytes=1)))
            await asyncio.sleep(0.2)
            assert not waiting.done()  # parked: nothing to read yet
            produced = await producer.call(produce_request("t", 0, make_batch([b"wake up"])))
            assert produced.responses[0].partition_responses[0].error_code == 0
            response = await asyncio.wait_for(waiting, 5)
            assert time.monotonic() - started < 5  # far below MaxWaitMs
            part = response.responses[0].partitions[0]
            assert part.high_watermark == 1 and len(part.records) == len(make_batch([b"wake up"]))
            consumer.close()
            producer.close()
        finally:
            await broker.stop()

    asyncio.run(scenario())


def test_stop_closes_connections_with_a_fetch_still_waiting():
    async def scenario():
        broker = Broker(BrokerConfig(port=0), topics={"t": 1})
        port = await broker.start()
        link = await Link.open(port)
        waiting = asyncio.create_task(link.call(fetch_request(12, [("t", 0, 0, 100)], max_wait_ms=30_000)))
        await asyncio.sleep(0.1)
        await asyncio.wait_for(broker.stop(), 5)
        try:
            await asyncio.wait_for(waiting, 5)
            raise AssertionError("a response arrived from a stopped broker")
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        assert broker.connections == {}

    asyncio.run(scenario())


def test_admin_eviction_of_one_session_leaves_the_others():
    async def scenario():
        broker = Broker(BrokerConfig(port=0), topics={"t": 2})
        port = await broker.start()
        try:
            a, b = await Link.open(port), await Link.open(port)
            sa = (await a.call(fetch_request(12, [("t", 0, 0, 100)], epoch=0))).session_id
            sb = (await b.call(fetch_request(12, [("t", 1, 0, 100)], epoch=0))).session_id
            assert broker.evict_session(sa) and not broker.evict_session(sa)
            assert (await a.call(fetch_request(12, [], session_id=sa, epoch=1))).error_code == 70
            assert (await b.call(fetch_request(12, [], session_id=sb, epoch=1))).error_code == 0
            assert [s["session_id"] for s in broker.sessions()] == [sb]
            a.close()
            b.close()
        finally:
            await broker.stop()

    asyncio.run(scenario())
