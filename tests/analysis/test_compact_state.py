"""What the analysis keeps per session and per event in compact form (packed steps, cache events in columns,
occupancy points in columns) comes back exactly as recorded: a session storm's report is the one it would be
with plain objects (issue #18: memory bounded by what the report shows)."""

from __future__ import annotations

import random

from fetchtool.analysis.diagnosis.occupancy import MAX_POINTS, OccupancyRecorder, thin
from fetchtool.analysis.diagnosis.shadow import Shape, infer, replay
from fetchtool.analysis.model import EpochStep
from fetchtool.analysis.tracking import steps
from fetchtool.analysis.tracking.cache_events import CLOSE, CREATE, TOUCH, CacheEvent, CacheLog


def _step(rng: random.Random) -> EpochStep:
    def maybe(v):
        return None if rng.random() < 0.3 else v

    return EpochStep(kind=rng.choice(["full_create", "incremental", "close", "full"]), epoch=rng.randrange(-1, 1 << 31),
                     file=rng.choice(["a.pcap", "b.pcapng"]), request_frame=maybe(rng.randrange(1 << 40)),
                     response_frame=maybe(rng.randrange(1 << 40)), ts=maybe(rng.uniform(0, 2e9)),
                     conn=rng.randrange(1 << 40), error_code=maybe(rng.randrange(-1, 120)),
                     sent=rng.randrange(300_000), added=rng.randrange(1000), forgotten=rng.randrange(1000),
                     returned=maybe(rng.randrange(300_000)))  # fmt: skip


def _append(log, st: EpochStep):
    return steps.append(log, st.kind, st.epoch, st.file, st.request_frame, st.response_frame, st.ts, st.conn,
                        st.error_code, st.sent, st.added, st.forgotten, st.returned)


def test_a_sessions_requests_come_back_exactly_as_recorded():
    rng = random.Random(18)
    recorded = [_step(rng) for _ in range(500)]
    log = bytearray()
    for st in recorded:
        log = _append(log, st)
    assert isinstance(log, bytearray) and steps.count(log) == 500
    back = steps.unpack(log)
    assert back == tuple(recorded)
    assert [type(st.ts) for st in back] == [type(st.ts) for st in recorded]


def test_a_value_the_record_cannot_hold_keeps_every_step_as_it_was():
    rng = random.Random(19)
    first = [_step(rng) for _ in range(3)]
    odd = [EpochStep("incremental", 1, "a.pcap", 5, 6, 12, 1, 0, 1, 0, 0, 1),  # an int time stays an int
           EpochStep("incremental", 2, "a.pcap", 1 << 70, None, 1.5, 1, 0, 1, 0, 0, 1)]  # a frame past 64 bits
    log = bytearray()
    for st in first + odd + first:
        log = _append(log, st)
    assert isinstance(log, list) and steps.count(log) == 8
    back = steps.unpack(log)
    assert back == tuple(first + odd + first) and type(back[3].ts) is int


def test_cache_events_in_columns_replay_as_the_events_they_stand_for():
    rng = random.Random(20)
    log, plain = CacheLog(), []
    t = 1_700_000_000_000
    for seq in range(3000):
        t += rng.choice([0, 0, 1, 7])  # equal times: the replay orders them by kind, then as recorded
        kind = rng.choice([CREATE, TOUCH, TOUCH, CLOSE])
        sid, size, privileged = rng.randrange(1, 60), rng.randrange(1, 50), rng.random() < 0.1
        key = ("session", sid)
        log.append(t, kind, sid, size, privileged, key)
        plain.append(CacheEvent(t, kind, seq, sid, size, privileged, key))
    assert list(log) == plain and len(log) == len(plain)
    ordered = sorted(plain, key=lambda e: (e.t_ms, e.kind, e.seq))
    assert list(log.ordered()) == ordered and list(log.ordered()) == ordered  # re-iterable
    for shape in (Shape(8, None), Shape(8, 2), Shape(1, 5)):
        a, b = replay(log.ordered(), shape), replay(ordered, shape)
        assert (a.consistent, a.peak, a.contradiction, a.evictions) == (b.consistent, b.peak, b.contradiction,
                                                                          b.evictions)
    assert infer(log, None, None, evidence=True) == infer(plain, None, None, evidence=True)


def test_an_absurd_time_in_the_cache_log_is_kept_not_raised():
    log = CacheLog()
    log.append(5, CREATE, 1, 2, False, "a")
    log.append(1 << 80, TOUCH, 1, 2, False, "a")
    assert [e.t_ms for e in log] == [5, 1 << 80]
    assert [e.t_ms for e in log.ordered()] == [5, 1 << 80]


class _Shard:
    def __init__(self) -> None:
        self.size = 0


def test_occupancy_points_in_columns_thin_as_the_points_did():
    rng = random.Random(21)
    shards = [_Shard() for _ in range(8)]
    rec = OccupancyRecorder(8)
    # the points as the recorder noted them before (a list of tuples per series)
    per_shard: list[list[tuple[int, int]]] = [[] for _ in shards]
    total: list[tuple[int, int]] = []
    sizes = [0] * 8
    t = 0
    for _ in range(3 * MAX_POINTS):
        t += rng.randrange(1, 50)
        k = rng.randrange(8)
        shards[k].size = max(0, shards[k].size + rng.choice([-1, 1, 1]))
        if shards[k].size != sizes[k]:
            sizes[k] = shards[k].size
            per_shard[k].append((t, sizes[k]))
            total.append((t, sum(sizes)))
        rec.note(t, shards)
    oc = rec.result(Shape(8, None))
    assert list(zip(oc.total.t_ms, oc.total.live)) == thin(total)
    assert len(oc.total.t_ms) <= MAX_POINTS < len(total)
    for k, series in oc.per_shard:
        assert list(zip(series.t_ms, series.live)) == thin(per_shard[k])
