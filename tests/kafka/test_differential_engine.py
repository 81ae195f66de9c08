"""Kafka 4.3.1 and `fetchtool broker` answer the same generated Fetch sequences alike (where they differ, Kafka is right).

Hypothesis writes sequences of Fetch requests over three connections: session creation (0,0), incremental requests
that add, change and forget partitions, stale, future and negative epochs, unknown, negative and out-of-shard session
ids, close (id,-1), close-and-recreate (id,0), sessionless (0,-1), v4-v12 with topic names and v13+ with topic ids
(unknown ones and the all-zero id too), repeated partitions, leader epochs, partition and response byte limits,
follower fetches from a replica id that is no replica (the node's own id too), the debugging (-2) and future replica
(-3) ids, read-committed reads, and produces in between. Each step goes to a real Kafka node and to a fetchtool broker
configured alike (same topics, 8 cache slots over Kafka's 8 shards, MaxWait 0) and the two answers must reduce to the
same summary (differential_peers.summarize). 200 derandomized examples (~10 s) plus one full-shard scenario.

What this live test cannot show: Kafka evicts by size or staleness only after a session is 120 s old
(MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS, not configurable), so within an example a consumer session that lands on
a full shard is refused (session id 0), and only a follower (privileged) session can evict, and only a consumer
session. Stale and size evictions are covered by tests/sessions (ported from Kafka's FetchSessionTest).

Examples share both brokers; each example closes every session either side granted, so it starts on empty caches.
Kafka's round-robin shard counter is JVM-wide and never resets: before each example fetchtool's counter is set to
Kafka's (read from Kafka's own session-cache log), every new session must land in the same shard on both, and the two
counters must still agree at the end.
"""

from __future__ import annotations

import pytest
from differential_peers import (CLIENTS, FUTURE, GHOST, NEXT, NULL, STALE, TOPICS, Fetch, Produce, Side,
                                kafka_full_contexts, kafka_sessions_created, wait_until_served)
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from fetchtool.broker.background import BrokerThread
from fetchtool.broker.state import BrokerConfig

pytestmark = pytest.mark.kafka

CACHE_SLOTS = 8            # one slot per shard: the ninth full fetch of an example may find its shard taken
KAFKA = {"nodes": 1, "cache_slots": CACHE_SLOTS}

PARTITIONS = [(t, p) for t, n in TOPICS.items() for p in range(n)] + [("a", 3), ("b", -1), (GHOST, 0), (NULL, 1)]
OFFSETS = st.sampled_from([0, 0, 1, 2, 50, -1])      # 50 and -1: outside the log, OFFSET_OUT_OF_RANGE
VERSIONS = st.sampled_from([4, 6, 7, 11, 12, 12, 13, 13, 15, 16, 17, 18])   # v4-v6: no sessions
CLIENT = st.integers(0, CLIENTS - 1)
PARTITION_MAX = st.sampled_from([1 << 20, 1 << 20, 40, 100, 0])   # KIP-74: below one batch, about one
MAX_BYTES = st.sampled_from([0x7FFFFFFF, 0x7FFFFFFF, 120, 0])
SESSION = st.integers(0, 3)                            # the k-th live session of each side, in grant order
LEADER_EPOCHS = st.sampled_from([-1, -1, -1, 0, 1])   # every topic's leader epoch is 0 on both brokers


def partitions(min_size: int = 0):
    """Up to 4 partitions with offsets; a topic may come back after another and a partition may repeat (both
    brokers keep its first place and its last offset)."""
    return st.lists(st.tuples(st.sampled_from(PARTITIONS), OFFSETS), min_size=min_size, max_size=4
                    ).map(lambda ps: tuple((t, p, o) for (t, p), o in ps))


def full(epoch: int, named: bool):
    return st.builds(Fetch, client=CLIENT, version=VERSIONS, epoch=st.just(epoch),
                     session_of=SESSION if named else st.none(), partitions=partitions(),
                     replica_id=st.sampled_from([-1, -1, -1, -1, 2, 1, -2, -3]), read_committed=st.booleans(),
                     leader_epoch=LEADER_EPOCHS, partition_max_bytes=PARTITION_MAX, max_bytes=MAX_BYTES)


incremental = st.builds(
    Fetch, client=CLIENT, version=VERSIONS, epoch=st.sampled_from([NEXT, NEXT, NEXT, STALE, FUTURE, -2]),
    session_of=SESSION, partitions=partitions(),
    forgotten=st.lists(st.sampled_from(PARTITIONS), max_size=3, unique=True).map(tuple),
    read_committed=st.booleans(), leader_epoch=LEADER_EPOCHS, partition_max_bytes=PARTITION_MAX,
    max_bytes=MAX_BYTES)

stranger = st.builds(
    Fetch, client=CLIENT, version=VERSIONS, epoch=st.sampled_from([0, -1, 1, 7]), partitions=partitions(),
    # unknown in shard 0 and shard 5, negative in shard 0, negative past shard 0, beyond the last shard
    literal_id=st.sampled_from([99, 5 * 268435455 + 17, -5, -300_000_000, 2_147_483_645]))

produce = st.builds(Produce, topic=st.sampled_from(sorted(TOPICS)), partition=st.integers(0, 1),
                    records=st.integers(1, 3))

# Weighted by repetition; sampled_from + flatmap keeps the weights (one_of favours its first branches).
STEP = st.sampled_from([full(0, False), full(0, False), full(0, True), full(-1, True), full(-1, False),
                        incremental, incremental, incremental, incremental, incremental, stranger, produce]
                       ).flatmap(lambda kind: kind)


@pytest.fixture(scope="module")
def sides(kafka):
    for topic, n in TOPICS.items():
        kafka.create_topic(topic, n)
    node = kafka.nodes[0]
    config = BrokerConfig(host="127.0.0.1", port=0, node_id=node.node_id, cache_slots=CACHE_SLOTS,
                          auto_create_partitions=0)
    with BrokerThread(config, topics=dict(TOPICS)) as bt:
        ours, theirs = Side("fetchtool", bt.port), Side("kafka", node.port)
        for side in (ours, theirs):
            side.connect()
            wait_until_served(side)
        yield ours, theirs, bt, node
        for side in (ours, theirs):
            side.close()


@settings(max_examples=200, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(steps=st.lists(STEP, min_size=8, max_size=40))
def test_kafka_and_fetchtool_answer_generated_fetch_sequences_alike(sides, steps):
    run_on_both(sides, steps, tally=True)


def test_a_full_shard_refuses_a_consumer_session_and_a_follower_evicts_one(sides):
    # One slot per shard: eight sessions fill every shard, the ninth consumer session is refused (id 0), a follower's
    # (privileged) session evicts the consumer session of the shard it lands on, which then answers 70.
    a0 = (("a", 0, 0),)
    steps = [Fetch(k % CLIENTS, 12, 0, partitions=a0) for k in range(8)]
    steps += [Fetch(0, 12, 0, partitions=a0), Fetch(1, 12, 0, partitions=a0, replica_id=2)]
    steps += [Fetch(2, 12, NEXT, session_of=k) for k in range(8)]
    answers = run_on_both(sides, steps)
    assert [a[1] for a in answers[8:10]] == ["none", f"new in shard {answers[9][1][-1]}"]
    assert sorted(a[0] for a in answers[10:]) == [0] * 7 + [70], answers


def run_on_both(sides, steps, tally: bool = False) -> list[tuple]:
    """Every step to Kafka, then to fetchtool; the summaries must be equal (Kafka's are returned). Both caches
    are emptied afterwards."""
    ours, theirs, bt, node = sides
    answers = []
    _, log_start = kafka_sessions_created(node.sessions_log)
    bt.call(lambda: setattr(bt.broker.core.fetch.cache, "counter", kafka_full_contexts(node.sessions_log)))
    try:
        for i, step in enumerate(steps):
            expected, got = theirs.run(step), ours.run(step)
            assert got == expected, f"step {i} {step}:\n  kafka     {expected}\n  fetchtool {got}"
            answers.append(expected)
            if tally:
                _tally(step, expected)
    finally:
        ours.close_all(also={s["session_id"] for s in bt.call(bt.broker.sessions)})
        theirs.close_all(also=kafka_sessions_created(node.sessions_log, log_start)[0])
    assert bt.broker.core.fetch.cache.size == 0
    assert bt.broker.core.fetch.cache.counter == kafka_full_contexts(node.sessions_log)
    return answers


def _tally(step, summary) -> None:
    """What the examples covered (pytest --hypothesis-show-statistics)."""
    if isinstance(step, Produce):
        return
    error, session, parts = summary[:3]
    kind = {0: "full", -1: "close/sessionless"}.get(step.epoch, f"incremental ({step.epoch})")
    if step.version < 7:
        kind = "v4-v6, no session fields"
    event(f"{kind}: error {error}, session {session.split(' in ')[0]}")
    for code in sorted({p[2] for p in parts}):
        event(f"partition error {code}")
