"""FetchMetadata: the (SessionId, SessionEpoch) pair of a Fetch request (Kafka's FetchMetadata.java).

| SessionId | Epoch | Meaning                                              |
|-----------|-------|------------------------------------------------------|
| 0         | -1    | full, sessionless; never creates a session (LEGACY)  |
| 0         | 0     | full; create a new session if possible (INITIAL)     |
| ID        | 0     | close ID, full fetch, try to create a new session    |
| ID        | n>0   | incremental, if ID and epoch are correct             |
| ID        | -1    | close ID, full fetch, no new session                 |
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

# Frozen dataclasses assign their fields through object.__setattr__; the generated __init__ looks it up on every
# field, which makes constructing one several times dearer than a plain object. The hot classes of the engine
# define their own __init__ with this pre-bound setter (same fields, same signature, same frozen behaviour).
_set = object.__setattr__

MAX_INT = 2**31 - 1
INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch``: FINAL stays FINAL, MAX_INT wraps to 1 (never to 0, which would mean "full")."""
    if epoch < 0:
        return FINAL_EPOCH
    if epoch == MAX_INT:
        return 1
    return epoch + 1


@dataclass(frozen=True, slots=True)
class FetchMetadata:
    session_id: int
    epoch: int

    INITIAL: ClassVar[FetchMetadata]
    LEGACY: ClassVar[FetchMetadata]

    def __init__(self, session_id: int, epoch: int) -> None:
        _set(self, "session_id", session_id)
        _set(self, "epoch", epoch)

    @property
    def is_full(self) -> bool:
        """Full requests list every partition; epoch 0 (maybe create a session) or -1 (sessionless)."""
        return self.epoch == INITIAL_EPOCH or self.epoch == FINAL_EPOCH

    @staticmethod
    def new_incremental(session_id: int) -> FetchMetadata:
        """The first incremental request of a session the broker just created: epoch 1."""
        return FetchMetadata(session_id, next_epoch(INITIAL_EPOCH))

    def next_incremental(self) -> FetchMetadata:
        epoch = self.epoch
        return FetchMetadata(self.session_id, FINAL_EPOCH if epoch < 0 else 1 if epoch == MAX_INT else epoch + 1)

    def next_close_existing(self) -> FetchMetadata:
        """Close this session and do not open a new one: (id, -1)."""
        return FetchMetadata(self.session_id, FINAL_EPOCH)

    def next_close_existing_attempt_new(self) -> FetchMetadata:
        """Close this session and try to open a new one: (id, 0)."""
        return FetchMetadata(self.session_id, INITIAL_EPOCH)

    def __str__(self) -> str:
        return f"(sessionId={'INVALID' if self.session_id == INVALID_SESSION_ID else self.session_id}, epoch=" + (
            "INITIAL" if self.epoch == INITIAL_EPOCH else "FINAL" if self.epoch == FINAL_EPOCH else str(self.epoch)
        ) + ")"


FetchMetadata.INITIAL = FetchMetadata(INVALID_SESSION_ID, INITIAL_EPOCH)
FetchMetadata.LEGACY = FetchMetadata(INVALID_SESSION_ID, FINAL_EPOCH)
