"""TopicIdPartition, the broker's session key: Kafka's CachedPartition equality, now held as a tuple so that it
hashes in C. Equal by (topic id, partition) when the id is non-zero, by (topic, partition) otherwise; never equal
to the client's TopicPartition or a plain tuple; immutable; pickled and copied with its fields."""

from __future__ import annotations

import copy
import pickle
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fetchtool.sessions.partitions import ZERO_UUID, TopicIdPartition, TopicPartition

_ids = st.sampled_from([ZERO_UUID, uuid.UUID(int=7), uuid.UUID(int=2**127 + 5)])
_names = st.sampled_from([None, "orders", "payments"])


@given(_ids, _names, st.integers(0, 3), _ids, _names, st.integers(0, 3))
def test_equality_and_hash_follow_kafkas_cached_partition(id_a, name_a, p_a, id_b, name_b, p_b):
    a, b = TopicIdPartition(id_a, name_a, p_a), TopicIdPartition(id_b, name_b, p_b)
    if id_a.int and id_b.int:
        expected = (id_a, p_a) == (id_b, p_b)          # the name may be unknown on one side
    elif not id_a.int and not id_b.int:
        expected = (name_a, p_a) == (name_b, p_b)
    else:
        expected = False                               # different hashes: such a pair never meets in a map
    assert (a == b) is expected and (a != b) is not expected
    if expected:
        assert hash(a) == hash(b) and {a: 1}[b] == 1


def test_a_key_never_equals_the_clients_key_or_a_plain_tuple():
    key = TopicIdPartition(ZERO_UUID, "orders", 0)
    assert key != TopicPartition("orders", 0) and TopicPartition("orders", 0) != key
    assert key != ("orders", 0) and ("orders", 0) != key
    assert len({key, TopicPartition("orders", 0)}) == 2 and len({key, ("orders", 0)}) == 2


def test_fields_are_immutable_and_survive_pickle_and_copy():
    key = TopicIdPartition(uuid.UUID(int=7), None, 3)
    with pytest.raises(AttributeError):
        key.topic = "orders"  # type: ignore[misc]
    for again in (pickle.loads(pickle.dumps(key)), copy.copy(key), copy.deepcopy(key)):
        assert again == key and (again.topic_id, again.topic, again.partition) == (uuid.UUID(int=7), None, 3)
    assert repr(key) == "TopicIdPartition(topic_id=UUID('00000000-0000-0000-0000-000000000007'), topic=None, partition=3)"
    assert str(key) == "00000000-0000-0000-0000-000000000007:None-3"
