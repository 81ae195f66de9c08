"""The data the HTML report's charts draw, as one JSON blob embedded in the page.

Brokers carry their `timeline` and `cache_occupancy` exactly as `analyze --format json` gives them (so a test, or
a reader, can check the page against the JSON report); clients carry their sessions as lanes of points: each
session one lane, each request a point of its kind, from its SessionLife's steps.
"""

from __future__ import annotations

import json

from fetchtool.analysis.model import CLOSE, FULL, FULL_CREATE, INCREMENTAL, SESSIONLESS, Analysis, ClientSummary
from fetchtool.analysis.tracking.tracker import host_of
from fetchtool.printable import one_line

MAX_POINTS_PER_KIND = 5000  # per client and kind of point: a chart stays quick to draw on a long capture
MAX_LANES = 300  # sessions drawn per client (a churning client makes one per fetch); the JSON report has them all
MAX_CLIENT_CHARTS = 200  # clients with a session chart; the page stays light with thousands of clients
KINDS = ("created", "incremental", "full", "error", "end")


def clean(text) -> str:
    """Text from a capture, safe to show: control characters (terminal escapes, NULs, newlines) escaped, as
    `\\x1b` (fetchtool.printable): shown, not silently dropped."""
    return one_line(str(text))


def chart_data(a: Analysis) -> dict:
    brokers = []
    for i, b in enumerate(a.brokers):
        d = b.to_json()
        brokers.append({"broker": clean(b.broker), "traffic_id": f"traffic-{i}", "occupancy_id": f"occupancy-{i}",
                        "timeline": d["timeline"], "cache_occupancy": d["cache_occupancy"]})  # fmt: skip
    clients = [_client(i, c, a) if i < MAX_CLIENT_CHARTS else
               {"id": f"sessions-{i}", "client": clean(c.label), "lanes": [], "omitted": 0, "charted": False,
                "points": {k: _columns([]) for k in KINDS}}
               for i, c in enumerate(a.clients)]  # fmt: skip
    return {"brokers": brokers, "clients": clients}


def _client(i: int, c: ClientSummary, a: Analysis) -> dict:
    lives = sorted((s for s in a.sessions  # a session with no time at all (no response captured) has no place
                    if s.client is not None and host_of(s.client) == c.host and s.client_id == c.client_id
                    and _start(s) is not None),
                   key=lambda s: (_start(s), s.broker, s.session_id))  # fmt: skip
    omitted = max(0, len(lives) - MAX_LANES)
    lives = lives[:MAX_LANES]
    lanes = []
    points: dict[str, list[tuple[float, int]]] = {k: [] for k in KINDS}
    for lane, s in enumerate(lives):
        times = [st.ts for st in s.steps if st.ts is not None]
        start = _start(s)
        end = s.end_ts if s.end_ts is not None else max(times, default=start)
        lanes.append({"broker": clean(s.broker), "session_id": s.session_id, "start": start, "end": end,
                      "end_kind": s.end})  # fmt: skip
        for st in s.steps:
            if st.ts is None:
                continue
            if st.error_code:
                points["error"].append((st.ts, lane))
            elif st.kind == FULL_CREATE:
                points["created"].append((st.ts, lane))
            elif st.kind == INCREMENTAL:
                points["incremental"].append((st.ts, lane))
            elif st.kind in (FULL, SESSIONLESS, CLOSE):
                points["full"].append((st.ts, lane))
        if s.end_ts is not None and s.end != "alive":
            points["end"].append((s.end_ts, lane))
    return {"id": f"sessions-{i}", "client": clean(c.label), "lanes": lanes, "omitted": omitted, "charted": True,
            "points": {k: _columns(_thin(v)) for k, v in points.items()}}  # fmt: skip


def _start(s) -> float | None:
    if s.created_ts is not None:
        return s.created_ts
    return next((st.ts for st in s.steps if st.ts is not None), s.end_ts)


def _thin(points: list) -> list:
    """Every n-th point when there are too many (errors and ends are few; incremental fetches can be many)."""
    if len(points) <= MAX_POINTS_PER_KIND:
        return points
    step = -(-len(points) // MAX_POINTS_PER_KIND)
    return points[::step]


def _columns(points: list) -> dict:
    return {"t": [t for t, _ in points], "lane": [n for _, n in points]}


def script_json(data: dict) -> str:
    """JSON safe inside <script type="application/json">: no '</script>' or '<!--' can end or confuse it."""
    text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
