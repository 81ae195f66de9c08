"""Mutated but framed requests for every api and version the broker serves, fed to the sans-IO core: each gets an
answer or a Close naming what was wrong, never an escaping exception and never a Close for a broker bug. The
mutation run found the crash sites of issue 18 (null arrays reaching the Fetch, Produce, ListOffsets,
FindCoordinator, OffsetCommit, OffsetFetch and CreateTopics handlers); the named cases below keep them fixed."""

from __future__ import annotations

import logging
import random

import pytest
from broker_scenarios import fetch_request, metadata_request, produce_request
from kio.index import load_request_schema
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from fetchtool.broker import apis, wire
from fetchtool.broker.handler import BrokerCore, Close, Wait
from fetchtool.broker.rawclient import make_batch
from fetchtool.broker.state import BrokerConfig

MUTATIONS = 3000


def seeds() -> list[bytes]:
    frames = [wire.encode_request(1, 1, fetch_request(v, [("t", 0, 0, 1000), ("t", 1, 0, 100)], topic_ids={}))
              for v in range(4, 19)]
    frames += [wire.encode_request(0, 1, produce_request("t", 0, make_batch([b"a"]), version=v)) for v in (3, 9, 12)]
    frames += [wire.encode_request(3, 1, metadata_request(v, ["t"])) for v in (0, 1, 12, 13)]
    frames.append(wire.encode_request(18, 1, ApiVersionsRequest(client_software_name="t",
                                                                client_software_version="1")))
    for key, (low, high) in apis.SUPPORTED.items():
        frames += [wire.encode_request(key, 1, wire.zero_entity(load_request_schema(key, v)))
                   for v in range(low, high + 1)]
    return [f[4:] for f in frames]


def mutate(rng: random.Random, frame: bytes) -> bytes:
    out = bytearray(frame)
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(8, len(out)) if len(out) > 8 else 0
        kind = rng.random()
        if kind < 0.4:
            out[at] = rng.randrange(256)
        elif kind < 0.6:
            out[at] = 0xFF
        elif kind < 0.75:
            out[at] = 0        # a compact array or string length of 0: null
        elif kind < 0.85:
            out[at:at + 4] = b"\xff\xff\xff\xff"   # an int32 length of -1: null
        else:
            out[at:at + 16] = bytes(16)            # the zero uuid
    return bytes(out)


def answer(frame: bytes):
    core = BrokerCore(BrokerConfig(port=0), logging.getLogger("fetchtool.broker.fuzz"))
    core.state.create_topic("t", 2)
    action = core.handle_frame(frame, "127.0.0.1:1", 0)
    if isinstance(action, Wait):
        action = core.complete_fetch(action.pending, 60_000)
    return action, core.counters


def test_mutated_requests_of_every_api_never_raise_nor_close_for_a_broker_bug():
    rng = random.Random(18)
    corpus = seeds()
    bugs = []
    for _ in range(MUTATIONS):
        frame = mutate(rng, rng.choice(corpus))
        action, counters = answer(frame)
        if isinstance(action, Close) and action.internal or "internal_error" in counters:
            bugs.append((frame.hex(), action))
    assert not bugs, bugs[:3]


def _null_at_first_difference(empty: bytes, one: bytes) -> bytes:
    at = next(i for i, (a, b) in enumerate(zip(empty, one)) if a != b)
    return empty[:at] + b"\x00" + empty[at + 1:]


@pytest.mark.parametrize("version", [12, 13, 18])
def test_a_fetch_with_null_topics_is_closed_as_unparseable_as_kafka_does(version):
    empty = wire.encode_request(1, 1, fetch_request(version, []))[4:]
    one = wire.encode_request(1, 1, fetch_request(version, [("t", 0, 0, 1)], topic_ids={}))[4:]
    action, counters = answer(_null_at_first_difference(empty, one))
    assert isinstance(action, Close) and not action.internal
    assert "non-nullable field topics was serialized as null" in action.reason
    assert counters.get("malformed") == 1
