"""simulate's packed per-stream results (replay.tally.StreamTallies, StreamCounts) read back as the Tally objects and
the Counter they replace, whatever the size of the values (a column widens from one byte to eight)."""

from __future__ import annotations

import pickle
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from fetchtool.replay.tally import StreamCounts, StreamTallies, Tally

_value = st.one_of(st.integers(0, 100), st.integers(0, 2**61))
_tally = st.builds(Tally, requests=_value, responses=_value, sessions_created=_value, evictions=_value,
                   errors=st.dictionaries(st.sampled_from([70, 71, 6]), st.integers(1, 9)).map(Counter),
                   incremental=_value, request_bytes=_value, response_bytes=_value, records_bytes=_value)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.integers(0, 19), _tally), st.dictionaries(st.integers(0, 19), st.integers(1, 2**40)))
def test_a_packed_stream_reads_back_as_the_tally_put_in_with_its_evictions_added(tallies, added):
    packed = StreamTallies(20)
    for i, t in tallies.items():
        packed.put(i, t)
    for i, n in added.items():
        packed.add_to(i, "evictions", n)
    expected = [tallies.get(i, Tally()) for i in range(20)]
    for i, n in added.items():
        expected[i].evictions += n
    assert len(packed) == 20
    assert [t.to_json() for t in packed] == [t.to_json() for t in expected]
    assert packed[-1].to_json() == expected[-1].to_json() and [t.to_json() for t in packed[2:5]] == [
        t.to_json() for t in expected[2:5]]
    assert [t.to_json() for t in pickle.loads(pickle.dumps(packed))] == [t.to_json() for t in expected]


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.integers(0, 9), _tally), st.dictionaries(st.integers(0, 9), _tally))
def test_merging_the_tallies_of_two_runs_adds_them_stream_by_stream(a, b):
    left, right = StreamTallies(10), StreamTallies(10)
    for packed, tallies in ((left, a), (right, b)):
        for i, t in tallies.items():
            packed.put(i, t)
    left.merge(right)
    for i in range(10):
        expected = Tally()
        for tallies in (a, b):
            if i in tallies:
                expected.add(tallies[i])
        assert left[i].to_json() == expected.to_json()


def test_a_tally_read_from_the_pack_is_a_copy():
    packed = StreamTallies(2)
    packed.put(0, Tally(requests=3, errors=Counter({70: 1})))
    got = packed[0]
    got.requests += 1
    got.errors[70] += 1
    assert packed[0].requests == 3 and packed[0].errors == Counter({70: 1})


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 29), st.integers(1, 2**33))), st.lists(st.integers(0, 29)))
def test_evictions_caused_read_like_the_counter_they_replace(adds, more):
    packed, counter = StreamCounts(30), Counter()
    for i, n in adds:
        packed.add(i, n)
        counter[i] += n
    other, other_counter = StreamCounts(30), Counter()
    for i in more:
        other.add(i)
        other_counter[i] += 1
    packed.merge(other)
    counter.update(other_counter)
    assert dict(packed) == dict(counter) and len(packed) == len(counter)
    assert sorted(packed.items()) == sorted(counter.items())
    for i in range(-1, 31):
        assert packed.get(i, 0) == counter.get(i, 0) and packed[i] == counter[i] and (i in packed) == (i in counter)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abc"), _tally), min_size=1, max_size=12))
def test_totals_by_group_summed_by_column_are_the_sums_of_the_tallies(streams):
    packed = StreamTallies(len(streams))
    for i, (_, t) in enumerate(streams):
        packed.put(i, t)
    totals, groups = packed.totals_by([g for g, _ in streams])
    expected_totals, expected_groups = Tally(), {}
    for g, t in streams:
        expected_groups.setdefault(g, Tally()).add(t)
        expected_totals.add(t)
    assert totals.to_json() == expected_totals.to_json()
    assert list(groups) == list(expected_groups)
    assert {g: t.to_json() for g, t in groups.items()} == {g: t.to_json() for g, t in expected_groups.items()}
