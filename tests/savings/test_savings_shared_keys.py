"""The models of one estimator share their partition keys (a session storm's 100,000 connections fetch the same few
partitions): every connection must still be estimated exactly as if it were the only one, also after a pickle
(the Spark engine ships estimators between processes), and the shortcuts for empty requests and responses must
give the sizes the general sizing gives."""

from __future__ import annotations

import pickle
import random
from dataclasses import replace

from test_savings_model_paths import _stream

from fetchtool.analysis.savings import sizes as size
from fetchtool.analysis.savings.estimator import SavingsEstimator
from fetchtool.analysis.savings import model as model_module
from fetchtool.analysis.savings.model import Replay, StreamModel


def _connections(n: int) -> list[list]:
    """n client connections to one broker, each its own odd stream (versions 4-13, name-less v13 rows, aborted
    transactions, repeats, errors), from its own host (so that no connection continues another's session)."""
    return [[replace(ex, client=f"10.0.{k}.1:40000", conn=k + 1) for ex in _stream(100 + k, 40)] for k in range(n)]


def test_each_connection_of_a_storm_is_estimated_as_if_it_were_alone():
    conns = _connections(12)
    together = SavingsEstimator()
    for exchanges in conns:
        for ex in exchanges:
            together.feed(ex)
    assert together.directory, "the connections share their partition keys"
    shared = {id(k) for m in together.streams.values() for _, k, _, _ in m.keys.values()}
    assert len(shared) < sum(len(m.keys) for m in together.streams.values())
    for exchanges in conns:
        alone = StreamModel(exchanges[0].client, exchanges[0].broker)
        mine = together.streams[(exchanges[0].client, exchanges[0].broker)]
        assert mine.directory is together.directory and alone.directory is not together.directory
    # the sums of all connections fed together equal those of each fed to an estimator of its own
    apart = SavingsEstimator()
    for exchanges in conns:
        one = SavingsEstimator()
        for ex in exchanges:
            one.feed(ex)
        apart.merge(one)
    assert together.result().to_json() == apart.result().to_json()


def test_a_model_pickled_mid_stream_finds_its_partitions_again():
    exchanges = _stream(7, 160)
    assert any(r.aborted_transactions > 0 for ex in exchanges[80:] for r in ex.response_partitions or ()), \
        "the part after the pickle answers with aborted transactions (sized from the partitions' captured rows)"
    whole = StreamModel("10.0.0.1:40000", "10.0.0.9:9092", random.Random(1))
    first = StreamModel("10.0.0.1:40000", "10.0.0.9:9092", random.Random(1))
    expected = [whole.feed(ex) for ex in exchanges]
    for ex in exchanges[:80]:
        first.feed(ex)
    resumed = pickle.loads(pickle.dumps(first))
    assert [resumed.feed(ex) for ex in exchanges[80:]] == expected[80:]


def test_empty_requests_and_responses_size_as_the_general_sizing_does():
    for version in range(4, 18):
        for client_id, replica_id, rack in ((None, None, None), ("storm-consumer", -1, ""), ("é" * 200, 3, "rack-a")):
            assert size.empty_request_frame(version, client_id, replica_id, rack) == size.request_frame_size(
                version, client_id, replica_id, rack, [], [])
            assert size.empty_request_frame(version, client_id, replica_id, rack) == size.request_frame_size(
                version, client_id, replica_id, rack, (), [], [])
        assert size.empty_response_frame(version) == size.response_frame_size(version, [], [], [], [])
        assert size.empty_response_frame(version) == (size.empty_response_frame(version)
                                                      + size.response_topics_size(version, [])
                                                      + size.response_values_size(version, [], [], 0))


def _continued_on_a_new_connection(seed: int) -> tuple[list, list] | None:
    """A stream whose first few exchanges (at most REPLAYABLE) come on one connection, which closes, and the rest
    on a new one that starts with an incremental fetch of the session the first one had (a client reconnecting)."""
    exchanges = _stream(seed, 40)
    for i in range(1, 5):
        ex = exchanges[i]
        if (ex.session_epoch or 0) > 0 and any(e.response_session_id == ex.session_id for e in exchanges[:i]):
            first = exchanges[:i]
            rest = [replace(e, client="10.0.0.1:40001", conn=2) for e in exchanges[i:]]
            return first, rest
    return None


def _estimate(first: list, rest: list, monkeypatch, replayable: int) -> tuple[dict, SavingsEstimator]:
    monkeypatch.setattr(model_module, "REPLAYABLE", replayable)
    monkeypatch.setattr(model_module, "REPLAYABLE_ROWS", 10**6)   # (these streams' fetches are many partitions)
    est = SavingsEstimator()
    for ex in first:
        est.feed(ex)
    est.connection_ended(first[0].conn)
    parked = list(est.parked.values())
    for ex in rest:
        est.feed(ex)
    continued = est.streams[(rest[0].client, rest[0].broker)]
    assert continued.exchanges == len(first) + len(rest), "the new connection continues the first one's model"
    return est.result().to_json(), parked


def test_a_session_continued_after_its_connection_closed_is_estimated_as_by_the_model_kept_whole(monkeypatch):
    streams = [s for s in map(_continued_on_a_new_connection, range(200, 260)) if s is not None]
    assert len(streams) >= 5
    for first, rest in streams:
        replayed, parked = _estimate(first, rest, monkeypatch, 4)
        assert [type(p) for p in parked] == [Replay], "a closed connection's model is kept as its exchanges"
        whole, parked = _estimate(first, rest, monkeypatch, 0)
        assert [type(p) for p in parked] == [StreamModel]
        assert replayed == whole
        assert "continued a session" not in " ".join(replayed["notes"])


def test_a_closed_connection_of_big_fetches_keeps_its_model():
    """A Replay would hold every row of its exchanges, where the model holds one per partition."""
    est = SavingsEstimator()
    big = [ex for ex in _stream(9, 120) if len(ex.request_partitions) + len(ex.response_partitions or ()) > 16]
    assert len(big) >= 4
    for ex in big[:4]:   # (more than REPLAYABLE_ROWS rows in all, in REPLAYABLE exchanges)
        est.feed(ex)
    model = est.streams[(big[0].client, big[0].broker)]
    assert model.fed is None
