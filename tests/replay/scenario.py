"""Hand-written captures for the replay tests: Exchange rows as a decoder would produce them.

`Consumer` writes the exchanges of one client connection: full and incremental requests, with the broker's
answers as given. Used where a test needs a precise workload (the plan's reconstruction, a scenario with a
known eviction); the scenario captures made with `fetchtool synth` cover the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from fetchtool.exchange import Exchange, ForgottenPartition, RequestPartition, ResponsePartition

BROKER = "10.0.0.1:9092"


def req(topic: str, partition: int, offset: int = 0, max_bytes: int = 1048576) -> RequestPartition:
    return RequestPartition(topic, None, partition, offset, max_bytes, -1, 0, -1)


def resp(topic: str, partition: int, hw: int = 0, records: int = 0, error: int = 0) -> ResponsePartition:
    return ResponsePartition(topic, None, partition, error, hw, hw, 0, -1, -1, -1, records,
                             1 if records else 0, 1 if records else 0, "none" if records else None)


@dataclass
class Consumer:
    client: str
    broker: str = BROKER
    client_id: str = "consumer"
    version: int = 12
    conn: int = 0
    max_wait_ms: int = 500
    exchanges: list[Exchange] = field(default_factory=list)
    _corr: int = 0

    def fetch(self, t: float, session_id: int, epoch: int, partitions: list, response: list | None = None, *,
              forgotten: tuple = (), error: int = 0, response_session_id: int = 0, rtt: float = 0.002,
              records: int = 0, answered: bool = True, throttle_ms: int = 0) -> Exchange:
        """One exchange at time t (seconds). `response` None: answer every sent partition with no data.
        `answered` False: the capture has the request only. `throttle_ms`: the broker throttled the client."""
        self._corr += 1
        if response is None:
            response = [] if error else [resp(p.topic, p.partition, hw=p.fetch_offset) for p in partitions]
        ex = Exchange(
            file="scenario.pcap", conn=self.conn, request_frame=2 * self._corr, response_frame=2 * self._corr + 1,
            ts=1_700_000_000.0 + t, response_ts=1_700_000_000.0 + t + rtt, client=self.client, broker=self.broker,
            api_key=1, api_version=self.version, correlation_id=self._corr, client_id=self.client_id,
            client_software=None, replica_id=-1, session_id=session_id, session_epoch=epoch, max_wait_ms=self.max_wait_ms,
            min_bytes=1, max_bytes=52428800, isolation_level=0, rack_id="", error_code=error,
            response_session_id=response_session_id, throttle_time_ms=0,
            request_bytes=60 + 33 * len(partitions), response_bytes=30 + 37 * len(response) + records,
            request_partitions=tuple(partitions),
            forgotten_partitions=tuple(ForgottenPartition(*f) if isinstance(f, tuple) else f for f in forgotten),
            response_partitions=tuple(response),
        )
        if throttle_ms:
            ex = replace(ex, throttle_time_ms=throttle_ms)
        if not answered:
            ex = replace(ex, response_frame=None, response_ts=None, error_code=None, response_session_id=None,
                         throttle_time_ms=None, response_bytes=None, response_partitions=None)
        self.exchanges.append(ex)
        return ex

    def session_workload(self, session_id: int, topic: str, partitions: int, start: float, every: float,
                         count: int) -> list[Exchange]:
        """A well-behaved session client: one full (0,0) fetch, then incremental fetches that send nothing new."""
        parts = [req(topic, p) for p in range(partitions)]
        self.fetch(start, 0, 0, parts, response_session_id=session_id)
        for n in range(1, count):
            self.fetch(start + n * every, session_id, n, [], response=[], response_session_id=session_id)
        return self.exchanges
