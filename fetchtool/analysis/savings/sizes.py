"""Exact Fetch frame sizes without building messages: per-version constants measured with the real codec.

Encoding every equivalent request and response with kio would cost microseconds per partition entry, several
times the whole decode. But a Fetch body is fixed-width fields plus a few length prefixes, so its size is a sum:
the empty body, plus per topic entry, plus per partition entry, plus the variable parts (names, record blobs,
aborted transactions, the diverging-epoch tag) and the growth of varint length prefixes in flexible versions
(v12+). The constants are measured once per version by encoding tiny bodies with fetchtool.protocol.codec, so
the layout knowledge stays in the codec; tests/savings check the sums against full encodes.
"""

from __future__ import annotations

from functools import lru_cache
from itertools import compress, groupby, islice
from operator import ne, sub

from fetchtool.exchange import ForgottenPartition, RequestPartition, ResponsePartition
from fetchtool.protocol.codec import FetchRequestBody, FetchResponseBody, encode_request, encode_response
from fetchtool.protocol.headers import (FETCH, encode_request_header, encode_response_header,
                                        is_flexible)

_TID = "5f1a0e4c-0d4e-4c3b-9a57-111111111111"


def uvarint_size(n: int) -> int:
    size = 1
    while n >= 0x80:
        n >>= 7
        size += 1
    return size


def _req(version: int, parts=(), forgotten=(), replica_id: int = -1, rack_id: str = "") -> int:
    body = FetchRequestBody(replica_id=replica_id, partitions=tuple(parts), forgotten=tuple(forgotten),
                            rack_id=rack_id)
    return len(encode_request(FETCH, version, body))


def _resp(version: int, parts=(), records=None) -> int:
    body = FetchResponseBody(partitions=tuple(parts), records=records)
    return len(encode_response(FETCH, version, body))


def _rp(version: int, partition: int = 0) -> RequestPartition:
    tid = _TID if version >= 13 else None
    return RequestPartition("" if version < 13 else None, tid, partition, 0, 0, -1, -1, -1)


def _sp(version: int, aborted: int = -1, diverging: int = -1, records: int = 0) -> ResponsePartition:
    tid = _TID if version >= 13 else None
    return ResponsePartition("" if version < 13 else None, tid, 0, 0, 0, 0, -1, -1, diverging, aborted, records,
                             0, 0, None)


class VersionSizes:
    """The measured constants of one Fetch version (see the module docstring)."""

    __slots__ = ("version", "flexible", "names", "name_sizes", "topics_memo", "req_empty", "req_topic", "req_partition",
                 "forgot_topic", "forgot_partition", "resp_empty", "resp_topic", "resp_partition", "aborted_entry", "diverging",
                 "response_header")

    def __init__(self, version: int) -> None:
        v = self.version = version
        self.flexible = is_flexible(FETCH, v)
        self.names = v < 13  # topics are named (else a fixed 16-byte id)
        self.name_sizes: dict = {}   # name -> name_size(name), filled as names are met
        self.topics_memo: dict[tuple, int] = {}   # (per topic, per partition, *keys) -> _keys_topics (short lists)
        self.req_empty = _req(v)
        one_topic = _req(v, [_rp(v)])
        two_parts = _req(v, [_rp(v), _rp(v, 1)])
        self.req_partition = two_parts - one_topic
        self.req_topic = one_topic - self.req_partition - self.req_empty
        if v >= 7:
            f1 = _req(v, forgotten=[ForgottenPartition("" if v < 13 else None, _TID if v >= 13 else None, 0)])
            f2 = _req(v, forgotten=[ForgottenPartition("" if v < 13 else None, _TID if v >= 13 else None, p)
                                    for p in (0, 1)])
            self.forgot_partition = f2 - f1
            self.forgot_topic = f1 - self.forgot_partition - self.req_empty
        else:
            self.forgot_partition = self.forgot_topic = 0
        self.resp_empty = _resp(v)
        one = _resp(v, [_sp(v)])
        two = _resp(v, [_sp(v), _sp(v)._replace(partition=1)])
        self.resp_partition = two - one
        self.resp_topic = one - self.resp_partition - self.resp_empty
        self.aborted_entry = (_resp(v, [_sp(v, aborted=1)]) - one) if v >= 4 else 0
        self.diverging = (_resp(v, [_sp(v, diverging=3)]) - one) if v >= 12 else 0
        self.response_header = len(encode_response_header(FETCH, v, 0))

    # -- the variable parts -------------------------------------------------------------------------------
    def name_size(self, name) -> int:
        """Bytes a topic name adds beyond the empty name used for calibration (0 when topics are ids)."""
        if not self.names or not name:
            return 0
        n = _utf8_len(name)
        return n + (uvarint_size(n + 1) - 1 if self.flexible else 0)

    def aborted_size(self, n: int) -> int:
        if n <= 0:
            return 0
        return n * self.aborted_entry + (uvarint_size(n + 1) - 1 if self.flexible else 0)


def _length_growth(lengths) -> int:
    """sum(uvarint_size(n + 1) - 1 for n in lengths if n >= 127): the bytes compact length prefixes add beyond
    one (a uvarint of m takes ceil(bit_length(m) / 7) bytes)."""
    if not lengths or max(lengths) < 127:
        return 0
    return sum([((n + 1).bit_length() + 6) // 7 - 1 for n in lengths if n >= 127])


@lru_cache(maxsize=65536)
def _utf8_len(name: str) -> int:
    return len(name.encode())


@lru_cache(maxsize=None)
def version_sizes(version: int) -> VersionSizes:
    return VersionSizes(version)


@lru_cache(maxsize=4096)
def request_header_size(version: int, client_id: str | None) -> int:
    return len(encode_request_header(FETCH, version, 0, client_id))


@lru_cache(maxsize=256)
def _request_fixed(version: int, replica_id: int, rack_id: str) -> int:
    # replica_id and rack_id can change the empty body (v15+ puts a follower's ReplicaState in a tagged field)
    return _req(version, replica_id=replica_id, rack_id=rack_id)


def request_frame_size(version: int, client_id: str | None, replica_id: int | None, rack_id: str | None,
                       keys, forgotten_keys=(), runs: list | None = None) -> int:
    """Whole frame (size prefix, header with client id, body) of a Fetch request.

    `keys`: the topic key (topic_key()) of each partition entry, in wire order; consecutive entries with the
    same key share one topic entry. `forgotten_keys`: the same for forgotten partitions. `runs`, if given,
    is topic_runs(keys), already known (then `keys` is not read).
    """
    vs = version_sizes(version)
    rid = -1 if replica_id is None else replica_id
    size = 4 + request_header_size(version, client_id) + _request_fixed(version, rid, rack_id or "")
    if runs is None:
        size += _keys_topics(vs, keys, vs.req_topic, vs.req_partition)
    else:
        size += _topics(vs, runs, vs.req_topic, vs.req_partition)
    if version >= 7 and forgotten_keys:
        size += _keys_topics(vs, forgotten_keys, vs.forgot_topic, vs.forgot_partition)
    return size


def topic_runs(keys) -> list[tuple[object, int]]:
    """(key, count) of each run of equal consecutive keys: the topic entries a list of partition entries makes."""
    return [(key, len(list(run))) for key, run in groupby(keys)]


_MEMO_KEYS = 8         # lists of at most this many keys are remembered by _keys_topics
_MEMO_ENTRIES = 4096   # ... up to this many per version


def _keys_topics(vs: VersionSizes, keys, per_topic: int, per_partition: int) -> int:
    """_topics(vs, topic_runs(keys), ...) in C-level passes whatever the number of runs (an incremental
    response in session order can switch topic at almost every entry)."""
    if not isinstance(keys, (list, tuple)):
        keys = list(keys)
    n = len(keys)
    if not n:
        return 0
    if n > _MEMO_KEYS:
        return _count_topics(vs, keys, n, per_topic, per_partition)
    # A few partitions (a storm's connections all fetch the same ones): remembered, as a lookup costs less
    # than the count
    memo = vs.topics_memo
    k = (per_topic, per_partition, *keys)
    total = memo.get(k)
    if total is None:
        if len(memo) >= _MEMO_ENTRIES:
            memo.clear()
        total = memo[k] = _count_topics(vs, keys, n, per_topic, per_partition)
    return total


def _count_topics(vs: VersionSizes, keys: list | tuple, n: int, per_topic: int, per_partition: int) -> int:
    """_keys_topics of ``n`` > 0 keys, counted."""
    # where a run starts: 0, then every entry unequal to the one before (what groupby splits on)
    starts = [0]
    starts += compress(range(1, n), map(ne, islice(keys, 1, None), keys))
    runs = len(starts)
    total = runs * per_topic + n * per_partition
    if vs.names:
        heads = [keys[0]] if runs == 1 else list(map(keys.__getitem__, starts))
        cache = vs.name_sizes
        try:
            total += sum(map(cache.__getitem__, heads))
        except KeyError:
            for key in heads:
                if key not in cache:
                    cache[key] = vs.name_size(key)
            total += sum(map(cache.__getitem__, heads))
    if vs.flexible:
        if n >= 127:
            ends = starts[1:]
            ends.append(n)
            total += sum([uvarint_size(k + 1) - 1 for k in map(sub, ends, starts) if k >= 127])
        if runs >= 127:
            total += uvarint_size(runs + 1) - 1
    return total


def _topics(vs: VersionSizes, runs: list[tuple[object, int]], per_topic: int, per_partition: int) -> int:
    """Topic entries (with their length prefixes and the outer array's) and partition entries."""
    total = 0
    n = 0
    flexible, name_size = vs.flexible, vs.name_size
    for key, k in runs:
        n += k
        total += per_topic + name_size(key)
        if flexible and k >= 127:
            total += uvarint_size(k + 1) - 1
    if flexible and len(runs) >= 127:
        total += uvarint_size(len(runs) + 1) - 1
    return total + n * per_partition


def response_frame_size(version: int, keys, records, aborted=(), diverging=(), runs: list | None = None) -> int:
    """Whole frame of a Fetch response, from columns: the topic key of each partition entry in wire order, the
    records bytes of each, and the aborted-transaction counts (> 0 only) and diverging epochs (>= 0 only) that
    are present (their order does not matter). `runs`, if given, is topic_runs(keys), already known."""
    vs = version_sizes(version)
    topics = (_keys_topics(vs, keys, vs.resp_topic, vs.resp_partition) if runs is None
              else _topics(vs, runs, vs.resp_topic, vs.resp_partition))
    return (4 + vs.response_header + vs.resp_empty + topics
            + response_values_size(version, records, aborted, sum([1 for d in diverging if d >= 0])))


def response_topics_size(version: int, keys) -> int:
    """The part of response_frame_size that depends on the partition entries' topic keys only."""
    vs = version_sizes(version)
    return _keys_topics(vs, keys, vs.resp_topic, vs.resp_partition)


def response_values_size(version: int, records, aborted=(), diverging_count: int = 0) -> int:
    """The part of response_frame_size that depends on the entries' values only, whatever their order: records
    bytes of each entry, aborted-transaction counts (> 0 only count) and how many carry a diverging epoch."""
    vs = version_sizes(version)
    size = sum(records)
    if vs.flexible:
        size += _length_growth(records)
    for a in aborted:
        if a > 0:
            size += vs.aborted_size(a)
    if vs.diverging:
        size += vs.diverging * diverging_count
    return size


@lru_cache(maxsize=4096)
def empty_request_frame(version: int, client_id: str | None, replica_id: int | None, rack_id: str | None) -> int:
    return request_frame_size(version, client_id, replica_id, rack_id, ())


@lru_cache(maxsize=None)
def empty_response_frame(version: int) -> int:
    vs = version_sizes(version)
    return 4 + vs.response_header + vs.resp_empty


def topic_key(version: int, topic: str | None, topic_id) -> object:
    """What makes two consecutive partition entries share a topic entry on the wire: the name before v13
    (its length counts), the id from v13 (fixed size)."""
    return topic_id if version >= 13 else topic
