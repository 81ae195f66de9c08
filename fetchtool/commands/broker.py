"""Run a Kafka-protocol broker with in-memory logs and real KIP-227 fetch
sessions, driven by fetchtool's own session engine.

Real clients (kafka-python, confluent-kafka, aiokafka) can produce and
consume with manual partition assignment. Fetch v4-17 goes through the same
session engine as `simulate` and `replay`: session ids, epochs, errors
70/71/106 and evictions behave as in Apache Kafka. Prints
`listening on HOST:PORT` on stdout when ready, logs sessions created,
evicted and errors on stderr, stops on SIGINT/SIGTERM.

Fault injection from another process: SIGUSR1 drops every fetch session
(as a broker restart; clients then get FETCH_SESSION_ID_NOT_FOUND).
With --admin-port, a line protocol on 127.0.0.1 takes one command per line
and answers one JSON line: sessions | metrics | counters | drop-sessions |
evict ID | drop-connections [IP:PORT] | history [N]
(e.g. `echo drop-sessions | nc 127.0.0.1 ADMIN_PORT`).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

import typer

from fetchtool.broker.admin import serve_admin
from fetchtool.broker.server import Broker
from fetchtool.broker.state import BrokerConfig


def _parse_topic(spec: str) -> tuple[str, int]:
    name, sep, count = spec.rpartition(":")
    if not sep or not name or not count.isdigit() or int(count) < 1:
        raise typer.BadParameter(f"--topic wants NAME:PARTITIONS, got {spec!r}")
    return name, int(count)


def main(
    host: str = typer.Option("127.0.0.1", "--host", help="address to listen on."),
    port: int = typer.Option(9092, "--port", help="port to listen on; 0 picks a free port."),
    cache_slots: int = typer.Option(1000, "--cache-slots", help="max.incremental.fetch.session.cache.slots."),
    cache_shards: int = typer.Option(8, "--cache-shards", help="session cache shards (8 since Kafka 3.8, 1 before)."),
    eviction_ms: int = typer.Option(120_000, "--eviction-ms", help="session eviction time (Kafka: 120000)."),
    topic: list[str] = typer.Option(None, "--topic", help="NAME:PARTITIONS to create at start; repeatable."),
    auto_create_partitions: int = typer.Option(1, "--auto-create-partitions",
                                               help="partitions for topics auto-created by Metadata; 0 disables."),
    max_frame_bytes: int = typer.Option(104_857_600, "--max-frame-bytes",
                                        help="largest request frame accepted (socket.request.max.bytes)."),
    idle_timeout_ms: int = typer.Option(600_000, "--idle-timeout-ms", help="close idle connections after this."),
    partial_frame_timeout_ms: int = typer.Option(30_000, "--partial-frame-timeout-ms",
                                                 help="close a peer stalled in the middle of a frame after this."),
    max_connections: int = typer.Option(1000, "--max-connections", help="refuse connections beyond this many."),
    admin_port: int = typer.Option(None, "--admin-port",
                                   help="serve the admin line protocol on 127.0.0.1:PORT (0 = free port)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="also log every connection."),
) -> None:
    topics = dict(_parse_topic(t) for t in topic or [])
    config = BrokerConfig(host=host, port=port, cache_slots=cache_slots, cache_shards=cache_shards,
                          eviction_ms=eviction_ms, auto_create_partitions=auto_create_partitions,
                          max_frame_bytes=max_frame_bytes, idle_timeout_ms=idle_timeout_ms,
                          partial_frame_timeout_ms=partial_frame_timeout_ms, max_connections=max_connections)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(message)s")
    if not verbose:
        logging.getLogger("fetchtool.broker").addFilter(lambda r: not r.getMessage().startswith("connection "))
    try:
        asyncio.run(_serve(config, topics, admin_port))
    except OSError as exc:
        typer.echo(f"error: cannot listen on {host}:{port}: {exc.strerror or exc}", err=True)
        raise typer.Exit(1) from None


async def _serve(config: BrokerConfig, topics: dict[str, int], admin_port: int | None) -> None:
    broker = Broker(config, topics=topics)
    bound = await broker.start()
    admin = None
    if admin_port is not None:
        admin = await serve_admin(broker, "127.0.0.1", admin_port)
        broker.log.info("admin protocol on 127.0.0.1:%d", admin.sockets[0].getsockname()[1])
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, stop.set)
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGUSR1, broker.drop_all_sessions)
    print(f"listening on {config.host}:{bound}", flush=True)
    await stop.wait()
    broker.log.info("stopping")
    if admin is not None:
        admin.close()
    await broker.stop()
