"""Building findings from exchanges: one Finding for one exchange, or an aggregate (a count and the first
frames) for a pattern that repeats, so a capture gives one finding per problem, not one alarm per fetch."""

from __future__ import annotations

from dataclasses import dataclass, field

from fetchtool.analysis.diagnosis.advice import SEVERITY, advice
from fetchtool.analysis.model import Finding

MAX_FRAMES = 20  # frames listed per aggregated finding, so the engineer can jump to the first ones in Wireshark


@dataclass(slots=True)
class Agg:
    """An aggregated finding under construction: the first exchange, a count and the first frames."""

    ex: object
    count: int = 0
    frames: list[int] = field(default_factory=list)
    extra: dict = field(default_factory=dict)

    def add(self, frame: int | None) -> None:
        self.count += 1
        if frame is not None and len(self.frames) < MAX_FRAMES:
            self.frames.append(frame)


def finding(code: str, cause: str | None, ex, message: str, count: int = 1, frames=(),
            advice_text: str | None = None) -> Finding:  # fmt: skip
    """A finding anchored on exchange ``ex`` (its client, broker, session and frames)."""
    return Finding(
        code=code, severity=SEVERITY[code], cause=cause, client=ex.client, client_id=ex.client_id,
        broker=ex.broker, session_id=ex.session_id, epoch=ex.session_epoch, file=ex.file,
        request_frame=ex.request_frame, response_frame=ex.response_frame, ts=ex.ts, message=message,
        advice=advice(code, cause) if advice_text is None else advice_text, count=count,
        frames=tuple(f for f in frames if f is not None),
    )  # fmt: skip
