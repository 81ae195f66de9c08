"""Hold off Python's full garbage collection while a heavy request is in flight.

A Fetch of 250,000 partitions allocates millions of small objects (request, context, response entities), nearly
all freed by reference counting when it is answered. Meanwhile CPython's generation-2 collection, which scans
every live object and pauses every thread, would run again and again, each pass longer (0.1-0.6 s measured):
the other clients would stall however finely the request is sliced. While at least one heavy request runs, the
full collection is postponed (young generations are still collected); the thresholds are restored when the last
one ends. The thresholds are the process's: one hold serves every broker in it (FULL_COLLECTION_HOLD).
"""

from __future__ import annotations

import gc

_POSTPONED = 1 << 30  # generation-1 collections before a full one: never, in practice


class FullCollectionHold:
    """Counted: enter() for each heavy request started, leave() for each finished (also on error)."""

    def __init__(self) -> None:
        self.active = 0
        self._saved: tuple[int, int, int] | None = None

    def enter(self) -> None:
        if self.active == 0:
            self._saved = gc.get_threshold()
            gen0, gen1, _ = self._saved
            gc.set_threshold(gen0, gen1, _POSTPONED)
        self.active += 1

    def leave(self) -> None:
        self.active -= 1
        if self.active == 0 and self._saved is not None:
            gc.set_threshold(*self._saved)
            self._saved = None


FULL_COLLECTION_HOLD = FullCollectionHold()
