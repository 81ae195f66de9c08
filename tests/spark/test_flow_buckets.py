"""Stage 1 splits a capture among tasks by TCP flow: each task (a flow bucket) reads the whole file but makes
segments only of its own flows (iter_segments' keep_flow, from the raw header fields). A bucket must get exactly
the segments of its flows, both directions of each, as if every segment had been made and filtered afterwards,
and the buckets together must decode to what one task reading everything decodes."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from fetchtool.capture.packets import CaptureStats, iter_segments
import marshal
from collections import Counter

from fetchtool.pipeline.spark_stages import (TaskPlan, bucket_filter, count_packets, decode_task, flow_bucket,
                                             flow_key, item_of, spread_flows)

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
FOLLOWERS = CAPTURES / "kafka" / "cluster-followers.pcap"  # 125 TCP flows to 4 real Kafka 4.3 brokers


def _direction(seg) -> tuple[bytes, int, int]:
    return ipaddress.ip_address(seg.src.ip).packed + ipaddress.ip_address(seg.dst.ip).packed, seg.src.port, \
        seg.dst.port


def test_each_bucket_gets_exactly_its_flows_segments_in_both_directions():
    every = list(iter_segments(FOLLOWERS))
    buckets = 3
    seen_frames: list[int] = []
    for bucket in range(buckets):
        kept: set = set()
        stats = CaptureStats()
        got = list(iter_segments(FOLLOWERS, stats, keep_flow=bucket_filter(bucket, buckets, kept)))
        filtered_after = [s for s in every if flow_bucket(*_direction(s), buckets) == bucket]
        assert got == filtered_after and got
        assert stats.tcp_segments == len(every)  # the file's counts, whichever flows the task keeps
        flows = {frozenset(((s.src.ip, s.src.port), (s.dst.ip, s.dst.port))) for s in got}
        assert len(kept) == len(flows)  # what the progress line counts: a flow, not a direction
        seen_frames.extend(s.frame for s in got)
    assert sorted(seen_frames) == [s.frame for s in every]  # every segment in exactly one bucket


def test_a_flow_and_its_reply_share_a_bucket():
    for seg in iter_segments(FOLLOWERS):
        addrs, sport, dport = _direction(seg)
        half = len(addrs) // 2
        assert flow_bucket(addrs, sport, dport, 5) == flow_bucket(addrs[half:] + addrs[:half], dport, sport, 5)


def _weights() -> Counter:
    """Stage 0's sampled bytes per flow of the capture."""
    return Counter(marshal.loads(count_packets(0, str(FOLLOWERS))[-1]))


def test_the_heaviest_flows_are_spread_over_the_buckets_by_their_bytes():
    weights = _weights()
    assert len(weights) > 20
    assigned = spread_flows(weights, 3)
    load = [0, 0, 0]
    for key, bucket in assigned.items():
        load[bucket] += weights[key]
    # no bucket gets more than its share and one flow: a greedy spread, whatever the flows' hashes say
    assert max(load) <= sum(load) / 3 + max(weights.values())
    assert set(assigned) == set(weights)
    for seg in iter_segments(FOLLOWERS):
        addrs, sport, dport = _direction(seg)
        key = flow_key(addrs, sport, dport)
        if key in assigned:
            assert flow_bucket(addrs, sport, dport, 3, assigned) == assigned[key]


def test_the_buckets_together_decode_what_one_task_decodes():
    assigned = spread_flows(_weights(), 3)

    def items(buckets: int, spread: dict | None = None) -> list:
        out = []
        for bucket in range(buckets):
            plan = TaskPlan(bucket, 0, bucket, buckets, ((0, str(FOLLOWERS), 0),), FOLLOWERS.name, 10**9, 2e9,
                            spread or {})
            out.extend(item_of(row[-1]) for row in decode_task(plan, None) if row[0] == "item")
        # Connection ids are task-local and topic names learnt from another task's Metadata are filled in by the
        # driver (spark.py): compare what the task itself decodes.
        return sorted((type(it).__name__, getattr(it, "request_frame", None), getattr(it, "response_frame", None),
                       it.correlation_id, it.client, it.broker, getattr(it, "session_epoch", None),
                       len(getattr(it, "response_partitions", None) or ()), getattr(it, "response_bytes", None))
                      for it in out)

    one = items(1)
    assert len(one) > 1500
    assert items(3) == one
    assert items(3, assigned) == one  # the heaviest flows spread by weight, the others by hash


def test_a_task_hands_its_items_over_in_batches_of_about_a_megabyte_while_it_decodes(monkeypatch):
    # The JVM caches a batch as it arrives: a task that kept its items to the end made the cache wait for it.
    import pyarrow as pa

    from fetchtool.pipeline import spark_stages

    monkeypatch.setattr(spark_stages, "BATCH_BYTES", 64 << 10, raising=False)  # the capture's items are ~1 MB in all
    plan = TaskPlan(0, 0, 0, 1, ((0, str(FOLLOWERS), 0),), FOLLOWERS.name, 10**9, 2e9)
    rows = list(decode_task(plan, None))
    batches = list(spark_stages.decode_stage([plan], None)([pa.record_batch([pa.array([0])], names=["id"])]))
    sizes = [sum(len(b) for b in batch.column("blob").to_pylist()) for batch in batches]
    biggest = max(len(row[-1]) for row in rows)
    assert len(batches) > 5
    assert all(64 << 10 <= size < (64 << 10) + biggest for size in sizes[:-1])
    def same(rows):  # items compared decoded (marshal's bytes depend on reference counts; an end row has none);
        # the facts row last
        return [(*r[:-1], item_of(r[-1]) if r[0] == "item" else r[-1]) for r in rows[:-1]], rows[-1][0]

    assert same([tuple(r.values()) for b in batches for r in b.to_pylist()]) == same(rows)


def test_a_tasks_facts_weigh_each_client_broker_pair_by_its_partition_entries_not_its_exchanges():
    # Stage 2 spreads the savings' (broker, client) pairs over the cores by this weight: bench1g's 20 pairs have 350
    # exchanges each but 40k-224k partition entries, so counting exchanges left one task five times another's work.
    import pickle

    from fetchtool.exchange import Exchange
    from fetchtool.pipeline.spark_stages import savings_client

    plan = TaskPlan(0, 0, 0, 1, ((0, str(FOLLOWERS), 0),), FOLLOWERS.name, 10**9, 2e9)
    rows = list(decode_task(plan, None))
    facts = pickle.loads(rows[-1][-1])
    entries: Counter = Counter()
    for it in (item_of(r[-1]) for r in rows[:-1] if r[0] == "item"):
        if isinstance(it, Exchange):
            entries[(it.broker, savings_client(it))] += 1 + len(it.request_partitions) + len(
                it.forgotten_partitions) + len(it.response_partitions or ())
    assert facts.work() == entries
    assert len(set(facts.work().values())) > 1 and facts.work() != facts.groups


def test_end_rows_sort_where_one_sequential_decode_ends_each_connection():
    # The savings estimate hears of a connection's end between the same two items in both engines: the embedded
    # run lists it in DecodeRun.ended, stage 1 writes an end row that the later stages' sort puts in that place.
    # A real broker restart (connections end mid-capture), decoded by three flow buckets.
    import pickle

    import pyarrow as pa

    from fetchtool.decoder import decode_capture
    from fetchtool.pipeline.spark_stages import ITEM_COLUMNS, SORT_KEY, finished_items, run_wide_ids

    capture = CAPTURES / "kafka" / "java-broker-restart.pcap"
    run = decode_capture([str(capture)], None, in_child=False)
    expected: list = []
    had_items: set = set()
    for it in run:
        expected.extend(("end", conn) for conn in run.ended)
        run.ended.clear()
        expected.append(("item", it.conn, it.correlation_id))
        had_items.add(it.conn)
    expected.extend(("end", conn) for conn in run.ended)
    expected = [e for e in expected if e[0] == "item" or e[1] in had_items]  # only those are told (stage 1)
    assert sum(e[0] == "end" for e in expected) >= 5

    rows, facts = [], []
    for bucket in range(3):
        plan = TaskPlan(bucket, 0, bucket, 3, ((0, str(capture), 0),), capture.name, 10**9, 2e9)
        *task_rows, last = decode_task(plan, None)
        rows.extend(task_rows)
        facts.append(pickle.loads(last[-1]))
    index = [ITEM_COLUMNS.index(c) for c in SORT_KEY]
    rows.sort(key=lambda r: [r[i] for i in index])  # as stage 2 sorts them
    batch = pa.RecordBatch.from_pylist([dict(zip(ITEM_COLUMNS, r)) for r in rows])
    got = [("end", it) if type(it) is int else ("item", it.conn, it.correlation_id)
           for _b, _key, it in finished_items([batch], run_wide_ids(facts), {})]
    assert got == expected
