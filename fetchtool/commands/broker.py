"""Run a Kafka-protocol broker with in-memory logs and real KIP-227 fetch
sessions, driven by fetchtool's own session engine.

Real clients (kafka-python, confluent-kafka, aiokafka) can produce and
consume with manual partition assignment. Fetch v4-18 goes through the same
session engine as `simulate` and `replay`: session ids, epochs, errors
70/71/106 and evictions behave as in Apache Kafka. Prints
`listening on HOST:PORT` on stdout when ready, logs sessions created,
evicted and errors on stderr, stops on SIGINT/SIGTERM. Clients are sent
(Metadata, FindCoordinator) to --advertised-host: by default --host, or
127.0.0.1 when --host is 0.0.0.0; clients on other machines need it set.

Limits, as Kafka's: --max-connections in all and --max-connections-per-ip
from one address (default half the slots, so no single address can take
them all), --idle-timeout-ms (connections.max.idle.ms), and a request frame
must be complete within --frame-timeout-ms of its first byte (a
slowloris is closed then). A huge request (a Fetch of 100,000s of
partitions) is handled in slices: other clients are answered meanwhile.
Idempotent producers' retried batches are acknowledged, not appended twice.

Fault injection from another process: SIGUSR1 drops every fetch session
(as a broker restart; clients then get FETCH_SESSION_ID_NOT_FOUND).
With --admin-port, a line protocol on 127.0.0.1 takes one command per line
and answers one JSON line: sessions | metrics | counters | drop-sessions |
evict ID | drop-connections [IP:PORT] | history [N]
(e.g. `echo drop-sessions | nc 127.0.0.1 ADMIN_PORT`).
"""

from __future__ import annotations

import gc
import os
import sys
import typing

import typer

from fetchtool.commands.defaults import CACHE_SHARDS, CACHE_SLOTS, EVICTION_MS

if typing.TYPE_CHECKING:
    from fetchtool.broker.state import BrokerConfig

# The broker itself (asyncio, kio's wire format, the session engine) is imported inside the functions that run
# it: `broker --help` and a refused option import none of it.

# Kafka accepts socket.request.max.bytes >= 1, but every client opens with ApiVersions and Metadata requests
# of tens to hundreds of bytes (client id, software name, topic list): below 1 KiB the broker would refuse
# every client before its first fetch. 1 KiB still lets a scenario trip the limit with a Fetch or Produce.
MIN_FRAME_BYTES = 1024
# Partitions and shards are built up front, in memory: a typo such as 100000000 would stall start-up for
# minutes and take gigabytes. Kafka itself uses 8 cache shards and has no hard partition limit.
MAX_PARTITIONS = 100_000
MAX_SHARDS = 1024

T = typing.TypeVar("T")


class StartFailed(Exception):
    """The broker could not start: a socket that cannot be bound (the message names the address and its option)
    or a ready line that cannot be written."""


def _parse_topic(spec: str) -> tuple[str, int]:
    from fetchtool.commands.output import bad_option

    name, sep, count = spec.rpartition(":")
    if not sep or not name or not count.isdigit() or int(count) < 1:
        bad_option(f"--topic wants NAME:PARTITIONS, got {spec!r}")
    if int(count) > MAX_PARTITIONS:
        bad_option(f"--topic {name}: at most {MAX_PARTITIONS} partitions, got {count}")
    return name, int(count)


def _parse_topics(specs: list[str]) -> dict[str, int]:
    from fetchtool.commands.output import bad_option

    topics: dict[str, int] = {}
    for name, count in map(_parse_topic, specs):
        if name in topics:
            bad_option(f"--topic {name} given twice")
        topics[name] = count
    return topics


def _check_options(port: int, admin_port: int | None, cache_slots: int, cache_shards: int, eviction_ms: int,
                   auto_create_partitions: int, max_frame_bytes: int, idle_timeout_ms: int,
                   partial_frame_timeout_ms: int, max_connections: int, max_connections_per_ip: int | None) -> None:
    """Every bad value is refused before anything listens (exit 2, one line)."""
    from fetchtool.commands.output import bad_option, check_port, check_positive, warn_empty_shards

    check_port(port, "--port", allow_zero=True)
    check_port(admin_port, "--admin-port", allow_zero=True)
    check_positive(cache_slots, "--cache-slots", 0, strict=False)
    check_positive(cache_shards, "--cache-shards", 1, strict=False)
    if cache_shards > MAX_SHARDS:
        bad_option(f"--cache-shards must be at most {MAX_SHARDS}, got {cache_shards}")
    check_positive(eviction_ms, "--eviction-ms", 0, strict=False)
    check_positive(auto_create_partitions, "--auto-create-partitions", 0, strict=False)
    if auto_create_partitions > MAX_PARTITIONS:
        bad_option(f"--auto-create-partitions must be at most {MAX_PARTITIONS}, got {auto_create_partitions}")
    check_positive(max_frame_bytes, "--max-frame-bytes", MIN_FRAME_BYTES, strict=False)
    check_positive(idle_timeout_ms, "--idle-timeout-ms")
    check_positive(partial_frame_timeout_ms, "--frame-timeout-ms")
    check_positive(max_connections, "--max-connections", 1, strict=False)
    if max_connections_per_ip is not None:
        check_positive(max_connections_per_ip, "--max-connections-per-ip", 1, strict=False)
    warn_empty_shards(cache_slots, cache_shards)


def _advertised_host(value: str | None) -> str | None:
    """--advertised-host as Metadata carries it: no brackets around an IPv6 address ("[::1]" -> "::1")."""
    if value is None:
        return None
    from fetchtool.broker.state import WILDCARD_HOSTS
    from fetchtool.commands.output import bad_option

    host = value.strip().removeprefix("[").removesuffix("]")
    if host in WILDCARD_HOSTS:  # as Kafka, which refuses to start with 0.0.0.0 advertised: nobody can connect to it
        bad_option(f"--advertised-host must be an address clients can connect to, got {value!r}")
    return host


def main(
    host: str = typer.Option("127.0.0.1", "--host", help="address to listen on."),
    advertised_host: str = typer.Option(
        None, "--advertised-host", help="host clients are told to connect to (Metadata, FindCoordinator), as "
                                        "Kafka's advertised.listeners; default: --host, or loopback when --host "
                                        "binds every interface (0.0.0.0, ::, \"\")."),
    port: int = typer.Option(9092, "--port", help="port to listen on; 0 picks a free port."),
    cache_slots: int = typer.Option(CACHE_SLOTS, "--cache-slots", help="max.incremental.fetch.session.cache.slots."),
    cache_shards: int = typer.Option(CACHE_SHARDS, "--cache-shards", help="session cache shards (8 since Kafka 3.8, 1 before)."),
    eviction_ms: int = typer.Option(EVICTION_MS, "--eviction-ms", help="session eviction time (Kafka: 120000)."),
    topic: list[str] = typer.Option(None, "--topic", help="a topic NAME with N partitions, created at start; repeatable."),
    auto_create_partitions: int = typer.Option(1, "--auto-create-partitions",
                                               help="partitions for topics auto-created by Metadata; 0 disables."),
    max_frame_bytes: int = typer.Option(104_857_600, "--max-frame-bytes",
                                        help="largest request frame accepted (socket.request.max.bytes); "
                                             f"at least {MIN_FRAME_BYTES}."),
    idle_timeout_ms: int = typer.Option(600_000, "--idle-timeout-ms",
                                        help="close a connection idle this long (connections.max.idle.ms)."),
    partial_frame_timeout_ms: int = typer.Option(30_000, "--frame-timeout-ms",
                                                 help="close a connection whose request frame is not complete this "
                                                      "long after its first byte (a slowloris holds a slot no "
                                                      "longer)."),
    max_connections: int = typer.Option(1000, "--max-connections", help="refuse connections beyond this many."),
    max_connections_per_ip: int = typer.Option(
        None, "--max-connections-per-ip", help="refuse connections from an address that already has this many "
                                               "(max.connections.per.ip); default: half of --max-connections."),
    admin_port: int = typer.Option(None, "--admin-port",
                                   help="serve the admin line protocol on 127.0.0.1:PORT (0 = free port)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="also log every connection."),
) -> None:
    _check_options(port, admin_port, cache_slots, cache_shards, eviction_ms, auto_create_partitions,
                   max_frame_bytes, idle_timeout_ms, partial_frame_timeout_ms, max_connections, max_connections_per_ip)
    advertised = _advertised_host(advertised_host)
    topics = _parse_topics(topic or [])
    # every option is good: now the broker itself
    import asyncio
    import logging

    from fetchtool.broker.state import BrokerConfig
    from fetchtool.commands.output import fail
    from fetchtool.printable import log_handler

    config = BrokerConfig(host=host, port=port, advertised_host=advertised, cache_slots=cache_slots,
                          cache_shards=cache_shards, eviction_ms=eviction_ms,
                          auto_create_partitions=auto_create_partitions, max_frame_bytes=max_frame_bytes,
                          idle_timeout_ms=idle_timeout_ms, partial_frame_timeout_ms=partial_frame_timeout_ms,
                          max_connections_per_ip=max_connections_per_ip,
                          max_connections=max_connections)
    logging.basicConfig(level=logging.INFO, handlers=[log_handler(sys.stderr, "%(asctime)s %(message)s")])
    if not verbose:  # routine connection lines only; a client closed for breaking the protocol is a WARNING
        logging.getLogger("fetchtool.broker").addFilter(
            lambda r: r.levelno > logging.INFO or not r.getMessage().startswith("connection "))
    try:
        asyncio.run(_serve(config, topics, admin_port))
    except StartFailed as exc:
        fail(str(exc))


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _reason(exc: Exception) -> str:
    """Why a bind failed, without asyncio's wrapping ("error while attempting to bind on address ...")."""
    import socket

    if isinstance(exc, UnicodeError):  # the idna codec refusing a host name such as "a..b"
        return "not a valid host name"
    if isinstance(exc, OSError) and not isinstance(exc, socket.gaierror) and exc.errno and exc.errno > 0:
        return os.strerror(exc.errno)
    return (exc.strerror if isinstance(exc, OSError) else None) or str(exc)


async def _listen(option: str, host: str, port: int, start: typing.Awaitable[T]) -> T:
    try:
        return await start
    except (OSError, UnicodeError) as exc:
        raise StartFailed(f"cannot listen on {_address(host, port)} ({option}): {_reason(exc)}") from None


async def _serve(config: BrokerConfig, topics: dict[str, int], admin_port: int | None) -> None:
    import asyncio
    import signal

    from fetchtool.broker.admin import serve_admin
    from fetchtool.broker.server import Broker

    broker = Broker(config, topics=topics)
    # The start-up topics live as long as the process (100,000s of partition logs at most): moved out of the
    # garbage collector's sight, a full collection (which pauses every client) no longer scans them each time.
    gc.freeze()
    bound = await _listen("--host/--port", config.host, config.port, broker.start())
    admin = None
    try:
        if admin_port is not None:
            admin = await _listen("--admin-port", "127.0.0.1", admin_port,
                                  serve_admin(broker, "127.0.0.1", admin_port))
            broker.log.info("admin protocol on 127.0.0.1:%d", admin.sockets[0].getsockname()[1])
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, stop.set)
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        loop.add_signal_handler(signal.SIGUSR1, broker.drop_all_sessions)
        try:
            print(f"listening on {config.host}:{bound}", flush=True)
        except OSError as exc:  # stdout on a full disk or a closed pipe: nobody would learn the port
            raise StartFailed(f"cannot write the ready line to stdout: {_reason(exc)}") from None
        await stop.wait()
        broker.log.info("stopping")
    finally:
        # Also when the admin port cannot be bound: the broker already listens and must close before the error.
        if admin is not None:
            admin.close()
        await broker.stop()
