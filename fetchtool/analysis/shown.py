"""Which sessions a report lists: all of them on request (--sessions all), else a bounded number, the ones that
matter first, with exact counts of the rest. The choice streams (a heap of the kept ones), so a capture of
100,000 sessions costs the memory of the sessions shown, not of every session.

What matters, in order: a session that failed (lost or evicted, or answered with an error), one that ended
(closed), then the others; within each, capture order. The kept ones are listed in capture order.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from fetchtool.analysis.model import ALIVE, CLOSED, SessionLife

DEFAULT_SESSIONS = 1000  # sessions a report lists unless --sessions says otherwise
UNUSED_IDS = 5  # session ids named per client in the never-used line


def parse_sessions(value: str | None) -> int | None:
    """--sessions: "all" (None: no bound) or a number >= 0; ValueError otherwise."""
    if value is None:
        return DEFAULT_SESSIONS
    if value.strip().lower() == "all":
        return None
    n = int(value)
    if n < 0:
        raise ValueError(value)
    return n


def importance(s: SessionLife) -> int:
    """0: it failed; 1: it ended; 2: the rest."""
    if s.errors or s.end not in (ALIVE, CLOSED):
        return 0
    return 1 if s.end == CLOSED else 2


def never_used(s: SessionLife) -> bool:
    """Created in the capture and never used by an incremental fetch."""
    return not s.started_before_capture and s.incremental_requests == 0


@dataclass(frozen=True, slots=True)
class NeverUsed:
    """Sessions created in the capture that no incremental fetch used: how many, the first ones (as many as the
    report lists), and per (owner, broker) how many with the first ids, in the order they were first seen."""

    total: int
    first: tuple[SessionLife, ...]
    groups: tuple[tuple[str, str, int, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class Shown:
    sessions: tuple[SessionLife, ...]  # in capture order
    total: int
    never_used: NeverUsed


def choose(lives: Iterable[Any], limit: int | None, life: Callable[[Any], SessionLife] | None = None) -> Shown:
    """The sessions to list out of ``lives`` (in capture order), at most ``limit`` (None: all). ``life``: makes
    the SessionLife of an item, when the items are something cheaper that has the fields read here (errors,
    end, started_before_capture, incremental_requests, owner, broker, session_id): only the sessions listed
    are then made (a storm's 100,000 sessions cost their SessionLives only for the ones shown)."""
    heap: list[tuple[int, int, Any]] = []  # (-importance, -index, item): the root is the least wanted
    kept: list[Any] = []
    unused_first: list[Any] = []
    groups: dict[tuple[str, str], list] = {}
    unused = total = 0
    for i, s in enumerate(lives):
        total += 1
        if never_used(s):
            unused += 1
            if limit is None or len(unused_first) < limit:
                unused_first.append(s)
            g = groups.get(k := (s.owner, s.broker))
            if g is None:
                g = groups[k] = [0, []]
            g[0] += 1
            if len(g[1]) < UNUSED_IDS:
                g[1].append(s.session_id)
        if limit is None:
            kept.append(s)
        elif limit:
            item = (-importance(s), -i, s)
            if len(heap) < limit:
                heapq.heappush(heap, item)
            elif item > heap[0]:
                heapq.heapreplace(heap, item)
    if limit is not None:
        kept = [s for _imp, _i, s in sorted(heap, key=lambda t: -t[1])]
    if life is not None:  # one SessionLife per session, whichever lists hold it
        made: dict[int, SessionLife] = {}

        def one(s: Any) -> SessionLife:
            got = made.get(id(s))
            if got is None:
                got = made[id(s)] = life(s)
            return got

        kept = list(map(one, kept))
        unused_first = list(map(one, unused_first))
    return Shown(tuple(kept), total, NeverUsed(unused, tuple(unused_first),
                                                tuple((o, b, n, tuple(ids)) for (o, b), (n, ids) in groups.items())))


def more_text(shown: int, total: int, what: str = "sessions") -> str:
    """The caption of a bounded list."""
    return f"{total - shown:,} more {what}, --sessions all to list them"


ADDRESSES_SHOWN = 10  # a client's connections named in a table cell; the rest counted


def some(items, limit: int = ADDRESSES_SHOWN) -> tuple[str, ...]:
    """The first ``limit`` items and "(+N more)" for the rest: a table cell that a client with 100,000
    connections does not turn into 100,000 lines."""
    items = tuple(items)
    if len(items) <= limit:
        return items
    return (*items[:limit], f"(+{len(items) - limit:,} more)")
