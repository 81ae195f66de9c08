"""Everything the broker knows, in one plain object the request handlers share (no I/O)."""

from __future__ import annotations

import logging
import random
import uuid
from dataclasses import dataclass, field

from fetchtool.broker.logs import Topic, TopicMap
from fetchtool.sessions.cache import DEFAULT_EVICTION_MS, DEFAULT_MAX_SLOTS, DEFAULT_SHARDS


# Addresses that bind every interface: a client cannot connect to one, so the broker never advertises it.
WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::"})


def advertised_default(host: str | None) -> str:
    """The host the broker tells clients to connect to (Metadata, FindCoordinator) when no advertised host is
    given: the bound host, or for a wildcard bind the loopback address of its family. Kafka refuses to start
    with 0.0.0.0 advertised and, for a listener with no host, advertises the canonical host name; this test broker
    takes loopback instead: always connectable from this machine, no DNS lookup that may block or name a host that
    does not resolve. Clients on other machines need an explicit advertised host (the broker command's
    --advertised-host), as they need advertised.listeners in Kafka."""
    if host is None or host in WILDCARD_HOSTS:
        return "::1" if host == "::" else "127.0.0.1"
    return host


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    host: str = "127.0.0.1"  # the address to bind
    port: int = 9092
    advertised_host: str | None = None  # Kafka's advertised.listeners host; None: advertised_default(host)
    node_id: int = 0
    cluster_id: str = "fetchtool"
    cache_slots: int = DEFAULT_MAX_SLOTS
    cache_shards: int = DEFAULT_SHARDS
    eviction_ms: int = DEFAULT_EVICTION_MS
    auto_create_partitions: int = 1  # Kafka's auto.create.topics.enable + num.partitions; 0 disables
    fetch_max_bytes: int = 57_671_680  # Kafka's fetch.max.bytes default (55 MiB)
    max_frame_bytes: int = 104_857_600  # Kafka's socket.request.max.bytes default (100 MiB)
    # A request frame must be complete this long after its first byte, or the connection is closed (a slowloris
    # sending a byte every few seconds holds a slot this long at most). Kafka has no such bound; its
    # request.timeout.ms default, 30 s, is what clients already allow a request.
    partial_frame_timeout_ms: int = 30_000
    idle_timeout_ms: int = 600_000  # Kafka's connections.max.idle.ms: nothing received or sent for this long
    max_connections: int = 1000  # Kafka's max.connections
    # Kafka's max.connections.per.ip (Kafka: unlimited). None: half of max_connections, so that one address can
    # never take every slot.
    max_connections_per_ip: int | None = None
    session_seed: int | None = None  # seeds session ids (replays); None: unpredictable, as Kafka's
    # Where session ids come from: any random.Random (its randrange draws each new id), e.g. a replay's
    # CapturedSessionIds so the broker hands out the captured ids. None: random.Random(session_seed).
    # It is kept across reset() (a simulated restart must not hand out the old ids again).
    session_id_source: random.Random | None = field(default=None, compare=False, repr=False)


    @property
    def per_ip_limit(self) -> int:
        if self.max_connections_per_ip is not None:
            return self.max_connections_per_ip
        return max(1, self.max_connections // 2)


@dataclass
class BrokerState:
    config: BrokerConfig
    log: logging.Logger
    topics: TopicMap = field(default_factory=TopicMap)
    port: int = 0  # the bound port (config.port may be 0)
    committed: dict[tuple[str, str, int], tuple[int, str | None]] = field(default_factory=dict)
    next_producer_id: int = 999
    appended: int = 0  # bumped on every successful append; delayed fetches watch it
    duplicates: int = 0  # idempotent batches retried after they were appended: acknowledged, not appended again

    @property
    def host(self) -> str:
        """The advertised host, which Metadata and FindCoordinator send clients to (never a wildcard bind)."""
        return self.config.advertised_host or advertised_default(self.config.host)

    @property
    def node_id(self) -> int:
        return self.config.node_id

    @property
    def cluster_id(self) -> str:
        return self.config.cluster_id

    @property
    def auto_create_partitions(self) -> int:
        return self.config.auto_create_partitions

    def create_topic(self, name: str, partitions: int, topic_id: uuid.UUID | None = None) -> Topic:
        topic = self.topics.create(name, partitions, topic_id)
        self.log.info("topic created: %s partitions=%d id=%s", name, partitions, topic.topic_id)
        return topic
