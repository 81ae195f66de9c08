"""A Fetch body's partition entries kept as the wire packs them, for the partitions table (`decode --out`).

    run = decode_capture(paths, rows="packed")
    ex.request_partitions            # PackedEntries: len() and the stand-ins count as rows=False gives
    ex.request_partitions.blocks     # [(topic, topic id, entries, their bytes)], one per topic of the body

Making a row tuple per partition entry and then turning the rows into columns was most of what `decode --out`
cost beyond `decode --format jsonl`. Here the fast path (_fetch_flex.py) reads and checks every entry as for the
counts, and keeps each topic's run of fixed-size entries as one bytes object; pipeline/tables.py turns a batch's
bytes into columns with a few slice operations per field, with no per-entry Python work. Entries whose size
varies (a response entry with records or aborted transactions) are kept as a fixed-size record of the same
layout, the rest of their fields in `odd`. A body the fast path does not take (other versions, kio's fallback)
has row tuples as usual: the table writer takes both.
"""

from __future__ import annotations

# Each kind of entry as it lies in `blocks`: bytes per entry, and each field's (offset, width) in them, big-endian
# as on the wire. A request entry is Fetch v12+'s whole fixed entry (its tagged-field count, always 0, last); a
# response entry a plain entry's 37 bytes (no aborted transactions, null or empty records), the entries with
# records or aborted transactions rewritten to that shape: their fixed fields, and their preferred read replica
# at READ_REPLICA, where a plain entry has it; a forgotten entry is its partition.
REQUEST_LAYOUT = (33, {"partition": (0, 4), "current_leader_epoch": (4, 4), "fetch_offset": (8, 8),
                       "last_fetched_epoch": (16, 4), "log_start_offset": (20, 8), "partition_max_bytes": (28, 4)})
FORGOTTEN_LAYOUT = (4, {"partition": (0, 4)})
RESPONSE_LAYOUT = (37, {"partition": (0, 4), "error_code": (4, 2), "high_watermark": (6, 8),
                        "last_stable_offset": (14, 8), "log_start_offset": (22, 8), "preferred_read_replica": (31, 4)})
READ_REPLICA = RESPONSE_LAYOUT[1]["preferred_read_replica"][0]


# A response entry with records or aborted transactions: what its fixed-size record does not hold, as a plain
# tuple (index, then these fields; index: the entry's place among the body's response entries).
ODD_FIELDS = ("aborted_transactions", "records_bytes", "record_batches", "record_count", "compression")
OddEntry = tuple[int, int, int, int, int, "str | None"]


class PackedEntries(tuple):
    """A body's entries of one kind: the tuple holds the counting stand-ins (protocol/_fetch_flex.py, rows=False),
    so len() and the exchange's counts are what rows give; `blocks` the entries' fields, a topic at a time, and
    `odd` (response entries only) the fields of entries with records or aborted transactions."""

    blocks: list[tuple[str | None, str | None, int, bytes]]
    odd: list[OddEntry]

    def __new__(cls, stand_ins: tuple, blocks: list[tuple[str | None, str | None, int, bytes]],
                odd: list[OddEntry] | None = None) -> PackedEntries:
        self = super().__new__(cls, stand_ins)
        self.blocks = blocks
        self.odd = odd or []
        return self
