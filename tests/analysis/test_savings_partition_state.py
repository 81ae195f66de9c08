"""What a working session would have carried, exchange by exchange, for a sessionless consumer whose partitions
change one at a time: the savings model keeps each partition's last request row and last response values (the
engine's inputs), and a wrong reuse of either shows in what the incremental equivalent sends or returns."""

from __future__ import annotations

from fetchtool.analysis.savings.estimator import SavingsEstimator

from tests.analysis.builders import Capture

PARTS = [("orders", p) for p in range(4)]


def _fetch(cap: Capture, offsets: dict[int, int], response: list[tuple]) -> None:
    cap.fetch(partitions=[(t, p, offsets[p]) for t, p in PARTS], epoch=-1, response=response)


def _equivalents(cap: Capture) -> list[tuple[int, int]]:
    est = SavingsEstimator()
    rows = [est.feed(ex) for ex in cap.exchanges]
    return [(s.incremental_sent, s.incremental_returned) for s in rows if s is not None]


def test_a_session_would_carry_only_the_partitions_that_changed_since_the_last_fetch():
    cap = Capture()
    offsets = dict.fromkeys(range(4), 10)
    quiet = [("orders", p, 10, 0, 0) for p in range(4)]
    _fetch(cap, offsets, quiet)                                   # creates the session: everything
    _fetch(cap, offsets, quiet)                                   # nothing changed: nothing either way
    offsets[2] = 12
    with_records = [("orders", 2, 14, 300, 0)]
    _fetch(cap, offsets, quiet[:2] + with_records + quiet[3:])   # p2 moved on and got records
    _fetch(cap, offsets, quiet[:2] + with_records + quiet[3:])   # the same records again: returned again
    _fetch(cap, offsets, quiet[:2] + quiet[3:])                   # p2 not mentioned: unchanged, no records
    offsets[1], offsets[3] = 11, 11
    _fetch(cap, offsets, [("orders", 0, 11, 0, 0)])               # two requests rows moved on; p0's watermark
    _fetch(cap, offsets, [("orders", 0, 11, 0, 0)])               # all as before
    assert _equivalents(cap) == [(4, 4), (0, 0), (1, 1), (0, 1), (0, 0), (2, 1), (0, 0)]


def test_an_error_on_one_partition_is_returned_once_then_the_recovered_value():
    cap = Capture()
    offsets = dict.fromkeys(range(4), 10)
    quiet = [("orders", p, 10, 0, 0) for p in range(4)]
    _fetch(cap, offsets, quiet)
    _fetch(cap, offsets, quiet[:1] + [("orders", 1, 10, 0, 6)] + quiet[2:])   # NOT_LEADER on p1
    _fetch(cap, offsets, quiet)                                               # p1 recovered, same watermark
    _fetch(cap, offsets, quiet)
    assert _equivalents(cap) == [(4, 4), (0, 1), (0, 1), (0, 0)]


def test_estimates_made_per_broker_add_up_to_the_one_pass_estimate_with_its_released_session_note():
    # The Spark engine estimates each broker's exchanges apart and merges the sums. A connection that continues
    # a session whose model was released long ago is noted; merge() dropped that count, so only the embedded
    # report said so.
    from fetchtool.analysis.savings.estimator import PARKED_MODELS

    cap = Capture()
    cap.fetch(client="10.0.0.1:40000", conn=1, epoch=0, response_session_id=5)
    for i in range(PARKED_MODELS + 1):  # enough closed sessions that the first one's model is released
        cap.fetch(client=f"10.0.0.2:{20000 + i}", conn=10 + i, epoch=0, response_session_id=100 + i)
    cap.fetch(client="10.0.0.1:40001", conn=2, session_id=5, epoch=1, response_session_id=5)
    cap.fetch(client="10.0.0.3:30000", broker="10.0.0.8:9092", conn=3, epoch=0, response_session_id=7)

    def estimate(exchanges) -> SavingsEstimator:
        savings = SavingsEstimator()
        for ex in exchanges:
            savings.feed(ex)
            savings.connection_ended(ex.conn)
        return savings

    one_pass = estimate(cap.exchanges)
    assert one_pass.released_misses == 1
    merged = SavingsEstimator()
    for broker in ("10.0.0.9:9092", "10.0.0.8:9092"):
        part = estimate([ex for ex in cap.exchanges if ex.broker == broker])
        part.drop_models()  # as an executor sends it
        merged.merge(part)
    assert merged.result().to_json() == one_pass.result().to_json()
    assert any("continued a session" in note for note in merged.result().notes)
