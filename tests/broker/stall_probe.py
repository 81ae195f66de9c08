"""How long one client's huge Fetch keeps the others waiting: a raw client sends a sessionless Fetch v12 of N
partitions while another fetches one partition over and over; returns (worst latency of the other client, time
the heavy fetch took, how many fetches the other client made meanwhile).

Used by test_heavy_requests.py and runnable as a benchmark against `fetchtool broker` on its own:

    python tests/broker/stall_probe.py [PARTITIONS] [--full]   # prints the figures
    (--full: the heavy fetch creates a session, epoch 0, instead of a sessionless one)
"""

from __future__ import annotations

import contextlib
import datetime
import importlib
import os
import re
import subprocess
import sys
import threading
import time
import typing

from fetchtool.broker import wire
from fetchtool.broker.rawclient import RawClient

TOPIC_PARTITIONS = 50_000  # the broker command's limit is 100,000 partitions a topic


def topics_for(partitions: int) -> dict[str, int]:
    count = -(-partitions // TOPIC_PARTITIONS)
    return {f"wide{k}": TOPIC_PARTITIONS for k in range(count)}


def heavy_fetch_frame(partitions: int, version: int = 12, epoch: int = -1) -> bytes:
    """A sessionless (epoch -1) or session-creating (epoch 0) Fetch of `partitions` partitions of the topics_for()
    topics, as one frame."""
    m = importlib.import_module(f"kio.schema.fetch.v{version}.request")
    topics = []
    for name, count in topics_for(partitions).items():
        n = min(count, partitions - len(topics) * TOPIC_PARTITIONS)
        parts = tuple(m.FetchPartition(partition=i, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                                       log_start_offset=-1, partition_max_bytes=1024) for i in range(n))
        topics.append(m.FetchTopic(topic=name, partitions=parts))
    request = m.FetchRequest(replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=0x7FFFFFFF,
                             isolation_level=0, session_id=0, session_epoch=epoch, topics=tuple(topics),
                             forgotten_topics_data=(), rack_id="")
    return wire.encode_request(1, 1, request, "heavy")


def small_fetch(version: int = 12) -> typing.Any:
    m = importlib.import_module(f"kio.schema.fetch.v{version}.request")
    part = m.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                            log_start_offset=-1, partition_max_bytes=1024)
    return m.FetchRequest(replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=0x7FFFFFFF,
                          isolation_level=0, session_id=0, session_epoch=-1,
                          topics=(m.FetchTopic(topic="wide0", partitions=(part,)),), forgotten_topics_data=(),
                          rack_id="")


def measure(port: int, frame: bytes, host: str = "127.0.0.1") -> tuple[float, float, int]:
    """(other client's worst latency s, heavy fetch s, other client's fetches) while `frame` is answered."""
    other = RawClient(host, port, timeout=60)
    heavy = RawClient(host, port, timeout=120)
    request = small_fetch()
    other.call(request)  # connected and served once before the heavy one goes out
    done = threading.Event()
    took: list[float] = []

    def send_heavy() -> None:
        started = time.perf_counter()
        heavy.send_raw(frame)
        response = heavy.read_frame()
        took.append(time.perf_counter() - started)
        assert len(response) > 8
        done.set()

    thread = threading.Thread(target=send_heavy)
    worst, count = 0.0, 0
    thread.start()
    try:
        time.sleep(0.05)  # the heavy frame is on its way
        while not done.is_set():
            started = time.perf_counter()
            response = other.call(request)
            worst = max(worst, time.perf_counter() - started)
            count += 1
            assert response.error_code == 0
    finally:
        thread.join(180)
        other.close()
        heavy.close()
    return worst, took[0], count


@contextlib.contextmanager
def broker_process(partitions: int) -> typing.Iterator[int]:
    """`fetchtool broker` on a free loopback port, in its own process as a user runs it, with the topics_for()
    topics; yields its port and stops it."""
    command = [sys.executable, "-m", "fetchtool", "broker", "--host", "127.0.0.1", "--port", "0",
               "--auto-create-partitions", "0"]
    for name, count in topics_for(partitions).items():
        command += ["--topic", f"{name}:{count}"]
    broker = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                              env=os.environ | {"PYTHONUNBUFFERED": "1"})
    try:
        assert broker.stdout is not None
        line = broker.stdout.readline()
        found = re.search(r":(\d+)$", line.strip())
        if not found:
            raise SystemExit(f"broker did not start: {line!r}")
        yield int(found.group(1))
    finally:
        broker.terminate()
        broker.wait(10)


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    partitions = int(args[0]) if args else 250_000
    epoch = 0 if "--full" in sys.argv else -1
    with broker_process(partitions) as port:
        frame = heavy_fetch_frame(partitions, epoch=epoch)
        worst, took, count = measure(port, frame)
        print(f"partitions={partitions} epoch={epoch} heavy_fetch_s={took:.2f} "
              f"other_client_worst_latency_ms={worst * 1000:.1f} other_client_fetches={count}")


if __name__ == "__main__":
    main()
