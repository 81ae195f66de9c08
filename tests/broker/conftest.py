"""Fixtures for broker tests: brokers started on 127.0.0.1 and a free port, stopped by the test that started them."""

from __future__ import annotations

import logging
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # broker_scenarios helpers

from fetchtool.broker.background import BrokerThread  # noqa: E402
from fetchtool.broker.handler import BrokerCore  # noqa: E402
from fetchtool.broker.state import BrokerConfig  # noqa: E402


@pytest.fixture
def start_broker():
    """start_broker(topics={...}, **BrokerConfig fields) -> a running BrokerThread; stopped after the test."""
    started: list[BrokerThread] = []

    def start(topics=None, clock=None, speed=1.0, **config) -> BrokerThread:
        config.setdefault("port", 0)
        bt = BrokerThread(BrokerConfig(host="127.0.0.1", **config), topics=topics or {}, clock=clock, speed=speed)
        bt.start()
        started.append(bt)
        return bt

    yield start
    for bt in started:
        bt.stop()


@pytest.fixture
def core():
    """core(topics={...}, **config) -> a sans-IO BrokerCore (no sockets)."""

    def make(topics=None, **config) -> BrokerCore:
        c = BrokerCore(BrokerConfig(**config), logging.getLogger("fetchtool.broker.test"))
        for name, n in (topics or {}).items():
            c.state.create_topic(name, n)
        return c

    return make
