"""The decoder's items as plain tuples marshal can carry between processes, and back.

    records = [plain(item) for item in items]          # in the decoding process
    blob = marshal.dumps(records)
    for record in marshal.loads(blob):                 # in the consuming process
        item = rebuilt(record)                         # equal to the item, field for field, type for type

marshal is several times faster than pickle here: it knows only exact tuples, ints, floats, strings and None, so
the frozen dataclasses and the partition NamedTuples become plain tuples (one C call each way), and repeated
strings (topic names, client ids, addresses) travel once per blob. An Exchange is (its 26 scalar fields, request
rows, forgotten rows, response rows or None); an OrphanResponse is (its fields,).
"""

from __future__ import annotations

import dataclasses
from itertools import repeat
from operator import attrgetter

from .._fast import fast_constructor
from ..exchange import Exchange, ForgottenPartition, RequestPartition, ResponsePartition
from ..protocol.connection import OrphanResponse

_ROWS = ("request_partitions", "forgotten_partitions", "response_partitions")
_EXCHANGE_FIELDS = tuple(f.name for f in dataclasses.fields(Exchange))
assert _EXCHANGE_FIELDS[-3:] == _ROWS, "the row tuples are Exchange's last three fields"
_exchange_head = attrgetter(*_EXCHANGE_FIELDS[:-3])
_orphan_fields = attrgetter(*(f.name for f in dataclasses.fields(OrphanResponse)))
_exchange = fast_constructor(Exchange)
_orphan = fast_constructor(OrphanResponse)
# tuple.__new__(Row, plain): the NamedTuple holding the same values (what Row._make does, without a Python call)
_new = tuple.__new__


def plain(item: Exchange | OrphanResponse) -> tuple:
    """The item as nested plain tuples (marshal-able)."""
    if type(item) is Exchange:
        resp = item.response_partitions
        return (_exchange_head(item), tuple(map(tuple, item.request_partitions)),
                tuple(map(tuple, item.forgotten_partitions)), None if resp is None else tuple(map(tuple, resp)))
    return (_orphan_fields(item),)


def rows(item: Exchange | OrphanResponse) -> int:
    """How many partition rows `plain(item)` carries (a batch's size, for the sender to bound it)."""
    if type(item) is Exchange:
        return len(item.request_partitions) + len(item.response_partitions or ())
    return 0


def rebuilt(record: tuple) -> Exchange | OrphanResponse:
    """The item `plain` made `record` of."""
    if len(record) == 1:
        return _orphan(*record[0])
    head, req, forgotten, resp = record
    return _exchange(*head, tuple(map(_new, repeat(RequestPartition, len(req)), req)),
                     tuple(map(_new, repeat(ForgottenPartition, len(forgotten)), forgotten)),
                     None if resp is None else tuple(map(_new, repeat(ResponsePartition, len(resp)), resp)))
