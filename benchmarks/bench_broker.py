"""Fetch round trips per second against `fetchtool broker` on loopback.

Runs the broker as its own process (`fetchtool broker --port 0`), fills a topic, then measures:
  1. a kafka-python consumer (manual assignment, KIP-227 session, fetch.max.wait.ms=0) polling an idle topic:
     fetches the broker answered per second (from its admin counters);
  2. a raw kio client pipelining Fetch requests (frames pre-encoded, DEPTH in flight), sessionless (0,-1)
     and incremental (session epochs 1, 2, 3, ...), for a few partition counts.
Usage: python benchmarks/bench_broker.py [--seconds 3] [--depth 16]
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time

from kio.schema.fetch.v12 import request as fetch_v12

from fetchtool.broker import wire
from fetchtool.broker.rawclient import RawClient, make_batch


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def admin(port: int, command: str) -> dict:
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(command.encode() + b"\n")
        return json.loads(s.makefile().readline())


def fetch_request(partitions: int, session_id: int, epoch: int, with_partitions: bool = True):
    parts = tuple(
        fetch_v12.FetchPartition(partition=p, fetch_offset=10, partition_max_bytes=1 << 20)
        for p in range(partitions)
    ) if with_partitions else ()
    import datetime

    topics = (fetch_v12.FetchTopic(topic="bench", partitions=parts),) if parts else ()
    return fetch_v12.FetchRequest(max_wait=datetime.timedelta(0), min_bytes=1, session_id=session_id,
                                  session_epoch=epoch, topics=topics, forgotten_topics_data=())


def pipelined(port: int, frames: list[bytes], depth: int) -> float:
    """Send pre-encoded frames with `depth` in flight; returns responses per second."""
    with RawClient("127.0.0.1", port) as c:
        started = time.perf_counter()
        sent = received = 0
        while received < len(frames):
            while sent < len(frames) and sent - received < depth:
                c.send_raw(frames[sent])
                sent += 1
            frame = c.read_frame()
            received += 1
        elapsed = time.perf_counter() - started
        last = wire.decode_response(frame, 1, 12)[1]
        assert last.error_code == 0, last.error_code  # an epoch out of step would have answered 71
    return len(frames) / elapsed


def raw_rates(port: int, partitions: int, seconds: float, depth: int) -> tuple[float, float]:
    n = max(200, int(seconds * 3000))
    sessionless = [wire.encode_request(1, i, fetch_request(partitions, 0, -1)) for i in range(n)]
    rate_sessionless = pipelined(port, sessionless, depth)
    with RawClient("127.0.0.1", port) as c:
        session_id = c.call(fetch_request(partitions, 0, 0)).session_id
    assert session_id != 0
    incremental = [wire.encode_request(1, i, fetch_request(partitions, session_id, i + 1, with_partitions=False))
                   for i in range(n)]
    return rate_sessionless, pipelined(port, incremental, depth)


def kafka_python_rate(port: int, admin_port: int, partitions: int, seconds: float) -> float:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", group_id=None, enable_auto_commit=False,
                             fetch_max_wait_ms=0, client_id="bench-kp")
    consumer.assign([TopicPartition("bench", p) for p in range(partitions)])
    consumer.seek_to_end()
    consumer.poll(500)
    before = admin(admin_port, "counters")["counters"].get("api_1", 0)
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        consumer.poll(100)
    after = admin(admin_port, "counters")["counters"].get("api_1", 0)
    elapsed = time.perf_counter() - started
    consumer.close()
    return (after - before) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--depth", type=int, default=16)
    args = parser.parse_args()
    admin_port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "fetchtool.cli", "broker", "--port", "0", "--topic", "bench:100",
                             "--admin-port", str(admin_port)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    try:
        port = int(proc.stdout.readline().strip().rsplit(":", 1)[1])
        from kio.schema.produce.v9 import request as produce_v9
        import datetime

        with RawClient("127.0.0.1", port) as c:
            batch = make_batch([b"x" * 100] * 10)
            c.call(produce_v9.ProduceRequest(acks=-1, timeout=datetime.timedelta(seconds=5), topic_data=(
                produce_v9.TopicProduceData(name="bench", partition_data=tuple(
                    produce_v9.PartitionProduceData(index=p, records=batch) for p in range(100))),)))
        print(f"fetchtool broker fetch round trips on loopback ({args.seconds:.0f} s per figure, 2-core machine)")
        for partitions in (3, 100):
            rate = kafka_python_rate(port, admin_port, partitions, args.seconds)
            print(f"  kafka-python 3.0.12 consumer, {partitions:3d} partitions, session, one in flight: "
                  f"{rate:8.0f} fetches/s")
        for partitions in (1, 3, 100):
            sessionless, incremental = raw_rates(port, partitions, args.seconds, args.depth)
            print(f"  raw kio client, {partitions:3d} partitions, depth {args.depth}: sessionless {sessionless:8.0f}/s,"
                  f" incremental {incremental:8.0f}/s")
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    main()
