"""Partition errors in Fetch responses, counted per (client, broker, partition, error code), and whether the
partition recovered (a later response from that broker to that client carried it without error).

Sans-IO: `PartitionErrors.feed(exchange, client key)`. The cost on a response without partition errors is one
pass in C over its partitions' error codes (and one more while a partition of the same client and broker is
failing, to see it recover); state grows with the failing partitions only, never with the exchanges.
Each row belongs to one broker, so the Spark engine's per-broker parts just concatenate.
"""

from __future__ import annotations

from operator import itemgetter

from fetchtool.exchange import FETCH, Exchange

from fetchtool.analysis.diagnosis.partition_codes import name_of
from fetchtool.analysis.model import PartitionErrorRow

MAX_FRAMES = 20
_error = itemgetter(3)


class _Count:
    __slots__ = ("first", "host", "count", "frames", "last_ts", "recovered", "topic", "topic_id", "partition", "code")

    def __init__(self, ex: Exchange, host: str, p, code: int) -> None:
        self.first = ex
        self.host = host
        self.topic, self.topic_id, self.partition, self.code = p.topic, p.topic_id, p.partition, code
        self.count = 0
        self.frames: list[int] = []
        self.last_ts: float | None = None
        self.recovered = False

    def row(self) -> PartitionErrorRow:
        ex = self.first
        return PartitionErrorRow(
            client=ex.client, client_id=ex.client_id, host=self.host, broker=ex.broker, topic=self.topic,
            topic_id=self.topic_id, partition=self.partition, error_code=self.code, error=name_of(self.code),
            count=self.count, file=ex.file, first_request_frame=ex.request_frame,
            first_response_frame=ex.response_frame, first_ts=ex.ts, last_ts=self.last_ts, recovered=self.recovered,
            frames=tuple(self.frames),
        )  # fmt: skip


class PartitionErrors:
    def __init__(self) -> None:
        self.counts: dict[tuple, _Count] = {}  # (host, client id, broker, topic key, partition, code)
        self.failing: dict[tuple, dict[tuple, list[_Count]]] = {}  # pair -> partition -> its unrecovered errors

    def feed(self, ex: Exchange, host: str) -> None:
        rp = ex.response_partitions
        if not rp or ex.api_key != FETCH:
            return
        pair = (host, ex.client_id, ex.broker)
        failing = self.failing.get(pair)
        if failing:
            for p in rp:
                if not p.error_code:
                    done = failing.pop((p.topic_id or p.topic, p.partition), None)
                    if done:
                        for gone in done:
                            gone.recovered = True
        if not any(map(_error, rp)):
            return
        for p in rp:
            code = p.error_code
            if not code:
                continue
            pkey = (p.topic_id or p.topic, p.partition)
            key = pair + pkey + (code,)
            c = self.counts.get(key)
            if c is None:
                c = self.counts[key] = _Count(ex, host, p, code)
            c.count += 1
            c.last_ts = ex.ts
            if len(c.frames) < MAX_FRAMES and ex.response_frame is not None:
                c.frames.append(ex.response_frame)
            if failing is None:
                failing = self.failing[pair] = {}
            open_errors = failing.setdefault(pkey, [])
            if c not in open_errors:
                open_errors.append(c)
            c.recovered = False

    def rows(self) -> list[PartitionErrorRow]:
        """Every (client, broker, partition, code), in the order a support engineer reads them."""
        return sorted((c.row() for c in self.counts.values()), key=row_order)


def row_order(r: PartitionErrorRow) -> tuple:
    return (r.first_ts if r.first_ts is not None else float("inf"), r.broker, r.host, r.client_id or "",
            r.topic or r.topic_id or "", r.partition, r.error_code)


__all__ = ["PartitionErrors", "row_order"]
