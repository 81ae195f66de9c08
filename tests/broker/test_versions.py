"""Every advertised (api, version) pair decodes and answers through kio, with content where it matters."""

from __future__ import annotations

import dataclasses
import datetime
import importlib

import pytest
from broker_scenarios import _make, call, fetch_request, metadata_request, produce, produce_request, response_partitions

from fetchtool.broker import apis, wire
from fetchtool.broker.rawclient import make_batch

PAIRS = [(key, v) for key, (low, high) in sorted(apis.SUPPORTED.items()) for v in range(low, high + 1)]


@pytest.mark.parametrize(("api_key", "version"), PAIRS)
def test_an_empty_request_of_every_advertised_version_is_answered(core, api_key, version):
    broker = core(topics={"t": 1})
    request = wire.zero_entity(wire.load_request_schema(api_key, version), 0)  # zero values: empty arrays, 0, ""
    if hasattr(request, "acks"):
        request = dataclasses.replace(request, acks=-1)  # acks=0 would get no response at all
    response = call(broker, request)
    assert type(response).__name__.endswith("Response"), response


@pytest.mark.parametrize("version", range(4, 19))
def test_fetch_reads_records_at_every_version_and_sessions_start_at_v7(core, version):
    broker = core(topics={"t": 2})
    produce(broker, "t", 1, [b"x", b"y"])
    ids = {"t": broker.state.topics.get("t").topic_id}
    response = call(broker, fetch_request(version, [("t", 0, 0, 1000), ("t", 1, 0, 1000)], epoch=0, topic_ids=ids))
    parts = response_partitions(response)
    assert [(p[1], p[2], p[3]) for p in parts] == [(0, 0, 0), (1, 0, 2)]
    assert parts[1][4] == len(make_batch([b"x", b"y"]))
    if version >= 7:
        assert response.session_id != 0
    else:
        assert broker.fetch.cache.size == 0  # v4-6 decode as (0, -1): sessionless


@pytest.mark.parametrize("version", range(3, 13))
def test_produce_appends_at_every_version_by_name(core, version):
    broker = core(topics={"t": 1})
    response = call(broker, produce_request("t", 0, make_batch([b"a"]), version=version))
    assert response.responses[0].partition_responses[0].error_code == 0
    assert broker.state.topics.partition("t", 0).log_end_offset == 1


@pytest.mark.parametrize("version", range(1, 14))
def test_metadata_lists_topics_at_every_version(core, version):
    broker = core(topics={"t": 2})
    response = call(broker, metadata_request(version, ["t"]))
    assert [(t.name, len(t.partitions)) for t in response.topics] == [("t", 2)]


@pytest.mark.parametrize("version", range(1, 12))
def test_list_offsets_at_every_version(core, version):
    broker = core(topics={"t": 1})
    produce(broker, "t", 0, [b"a", b"b", b"c"])
    m = importlib.import_module(f"kio.schema.list_offsets.v{version}.request")
    part = _make(m.ListOffsetsPartition, partition_index=0, timestamp=-1)
    req = _make(m.ListOffsetsRequest, replica_id=-1, isolation_level=0, timeout=datetime.timedelta(seconds=1),
                topics=(_make(m.ListOffsetsTopic, name="t", partitions=(part,)),))
    assert call(broker, req).topics[0].partitions[0].offset == 3
