"""Run a Broker on its own event-loop thread, for synchronous callers (tests with blocking clients, scripts).

    with BrokerThread(BrokerConfig(port=0), topics={"t": 1}) as bt:
        KafkaConsumer(bootstrap_servers=bt.address, ...)
        bt.call(bt.broker.drop_all_sessions)
"""

from __future__ import annotations

import asyncio
import threading
import typing

from fetchtool.broker.server import Broker

T = typing.TypeVar("T")


class BrokerThread:
    def __init__(self, *args: typing.Any, **kwargs: typing.Any) -> None:
        self._args, self._kwargs = args, kwargs
        self.loop = asyncio.new_event_loop()
        self.broker: Broker
        self.port = 0
        self._thread = threading.Thread(target=self.loop.run_forever, name="fetchtool-broker", daemon=True)

    @property
    def address(self) -> str:
        return f"{self.broker.config.host}:{self.port}"

    def start(self) -> int:
        self._thread.start()

        async def _start() -> int:
            self.broker = Broker(*self._args, **self._kwargs)
            return await self.broker.start()

        self.port = asyncio.run_coroutine_threadsafe(_start(), self.loop).result(10)
        return self.port

    def call(self, fn: typing.Callable[..., T], *args: typing.Any) -> T:
        """Run fn(*args) on the broker's loop thread and return its result."""

        async def _call() -> T:
            return fn(*args)

        return asyncio.run_coroutine_threadsafe(_call(), self.loop).result(10)

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        asyncio.run_coroutine_threadsafe(self.broker.stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()

    def __enter__(self) -> BrokerThread:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
