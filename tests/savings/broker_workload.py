"""One fetch workload run twice against `fetchtool broker`: without sessions (written as a capture) and with
sessions (FetchSessionHandler, bytes measured on the socket). The savings estimate made from the first capture
must match what the second run really sends and receives.

The broker's logs grow the same way in both runs (the same batches appended before the same rounds), and the
client reads everything it is given, so both runs fetch the same offsets and get the same records.
"""

from __future__ import annotations

import asyncio
import uuid

from fetchtool.broker.rawclient import make_batch
from fetchtool.broker.server import Broker
from fetchtool.broker.state import BrokerConfig
from fetchtool.capture.events import Endpoint
from fetchtool.capture.writer import LINKTYPE_ETHERNET, PcapWriter, TcpConversation
from fetchtool.exchange import ForgottenPartition, RequestPartition
from fetchtool.protocol.codec import decode_response
from fetchtool.protocol.headers import FETCH, response_body_offset
from fetchtool.protocol.messages import fetch_request
from fetchtool.sessions import FetchMetadata, FetchSessionHandler, PartitionData, TopicPartition

VERSION = 12
CLIENT_ID = "validation-consumer"


def schedule(rounds: int, partitions: int, changes_per_round: int) -> list[list[tuple[int, int]]]:
    """Per round: (partition, records to append) before the fetch. Deterministic, spread over partitions."""
    out = []
    for r in range(rounds):
        out.append([((r * 7 + i * 13) % partitions, 1 + (r + i) % 4) for i in range(changes_per_round)])
    return out


async def _run(topic: str, partitions: int, plan, sessions: bool, pcap_path=None, history: bool = True) -> dict:
    broker = Broker(BrokerConfig(host="127.0.0.1", port=0, session_seed=1))
    state = broker.core.state
    state.create_topic(topic, partitions, uuid.uuid5(uuid.NAMESPACE_DNS, topic))
    for p in range(partitions if history else 0):   # some history on every partition
        state.topics.partition(topic, p).append(make_batch([b"h" * 30] * 3))
    port = await broker.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    out = None
    conv = None
    t = 1_700_000_000.0
    if pcap_path is not None:
        out = PcapWriter(pcap_path, LINKTYPE_ETHERNET)
        conv = TcpConversation(out, Endpoint("10.9.0.1", 50000), Endpoint("10.9.0.100", 9092), client_isn=1,
                               server_isn=2)
        t = conv.handshake(t)
    handler = FetchSessionHandler(node_id=0)
    positions = {p: 0 for p in range(partitions)}
    sent = received = 0
    try:
        for corr, changes in enumerate(plan, start=1):
            for p, n in changes:
                state.topics.partition(topic, p).append(make_batch([b"v" * 50] * n))
            broker.notify_appended()
            if sessions:
                b = handler.new_builder()
                for p in range(partitions):
                    b.add(TopicPartition(topic, p), PartitionData(positions[p]))
                data = b.build()
                meta = data.metadata
                rows = [RequestPartition(tp.topic, None, tp.partition, d.fetch_offset, d.max_bytes, -1, -1, -1)
                        for tp, d in data.to_send.items()]
                forgotten = [ForgottenPartition(f.topic, None, f.partition) for f in data.forgotten_for_version(VERSION)]
            else:
                meta = FetchMetadata.LEGACY
                rows = [RequestPartition(topic, None, p, positions[p], 1048576, -1, -1, -1) for p in range(partitions)]
                forgotten = []
            frame = fetch_request(VERSION, corr, CLIENT_ID, meta.session_id, meta.epoch, rows, forgotten,
                                  max_wait_ms=0, min_bytes=0)
            writer.write(frame)
            await writer.drain()
            size = int.from_bytes(await reader.readexactly(4), "big")
            payload = await reader.readexactly(size)
            sent += len(frame)
            received += 4 + size
            if conv is not None:
                t = conv.send("client", frame, t + 0.001, ack=False)
                t = conv.send("server", size.to_bytes(4, "big") + payload, t + 0.001, ack=False)
            resp = decode_response(FETCH, VERSION, payload[response_body_offset(payload, FETCH, VERSION):])
            for r in resp.partitions:
                if r.records_bytes:
                    positions[r.partition] = r.high_watermark
            if sessions:
                handler.handle_response(resp.error_code, resp.session_id or 0, resp.throttle_time_ms,
                                        [TopicPartition(r.topic, r.partition) for r in resp.partitions], set(),
                                        VERSION)
            t += 1.0   # one fetch a second
    finally:
        writer.close()
        await broker.stop()
        if out is not None:
            out.close()
    return {"request_bytes": sent, "response_bytes": received, "positions": positions}


def run(topic: str, partitions: int, plan, sessions: bool, pcap_path=None, history: bool = True) -> dict:
    """history=False: the partitions start empty, so only the plan's changes move positions (no first catch-up
    round in which every partition changes)."""
    return asyncio.run(_run(topic, partitions, plan, sessions, pcap_path, history))
