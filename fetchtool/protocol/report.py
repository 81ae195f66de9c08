"""DecodeReport: what a decode run saw, counted (not a log): packets, bytes, exchanges, other APIs, warnings."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from fetchtool.printable import one_line

from .headers import api_name

EXAMPLES_PER_WARNING = 3
# Warnings whose examples each name a different thing to act on (an unreadable file each): their summary line names
# every kept example, not the first only, and counts the rest ("and 2 more").
NAMES_EACH_EXAMPLE = frozenset({"unreadable_file"})


@dataclass(frozen=True, slots=True)
class MidMessageStart:
    """One direction of a connection whose captured bytes began inside a message (the capture started while
    it was on the wire): CAPTURE_GAP material, not damage. Its bytes before `resumed_frame` were skipped."""

    file: str
    conn: int
    client: str
    broker: str
    direction: str  # "request" | "response"
    frame: int  # first packet of that direction
    resumed_frame: int | None  # packet where the first whole message starts (None: none before the end)
    skipped_bytes: int

    def to_dict(self) -> dict:
        return {"file": self.file, "conn": self.conn, "client": self.client, "broker": self.broker,
                "direction": self.direction, "frame": self.frame, "resumed_frame": self.resumed_frame,
                "skipped_bytes": self.skipped_bytes}


@dataclass
class DecodeReport:
    files: list[str] = field(default_factory=list)
    packets: int = 0
    bytes: int = 0  # captured TCP payload bytes
    connections: int = 0
    kafka_connections: int = 0
    exchanges: int = 0  # Fetch + FetchSnapshot exchanges emitted
    responses_missing: int = 0  # exchanges emitted without a response
    orphan_responses: int = 0  # responses whose request was not captured
    requests: Counter = field(default_factory=Counter)  # (api key, version) -> requests seen, every API
    gaps: int = 0
    lost_bytes: int = 0
    skipped_bytes: int = 0  # stream bytes not framed (resynchronisation, cut frames)
    # Directions whose capture began inside a message, one entry each (their skipped bytes are in skipped_bytes)
    mid_message_starts: list[MidMessageStart] = field(default_factory=list)
    warnings: Counter = field(default_factory=Counter)  # code -> count
    warning_examples: dict[str, list[str]] = field(default_factory=dict)
    client_software: dict[str, str] = field(default_factory=dict)  # client "ip:port" -> "name/version"
    # client "ip:port" -> the client id its ApiVersions named the software under: lets the analysis give a
    # client's software to its other connections (clients that send ApiVersions on one connection only)
    software_client_ids: dict[str, str | None] = field(default_factory=dict)
    topic_names: dict[str, str] = field(default_factory=dict)  # topic id -> name (all brokers)
    # Rows a `decode --out` run wrote (the Spark engine counts them back from its Parquet datasets); not in to_dict
    exchanges_written: int = 0
    partitions_written: int = 0

    def warn(self, code: str, message: str) -> None:
        self.warnings[code] += 1
        examples = self.warning_examples.setdefault(code, [])
        if len(examples) < EXAMPLES_PER_WARNING:
            examples.append(message)

    def add_capture(self, stats) -> None:
        """Count one file's capture.packets.CaptureStats: its packets, bytes and capture-layer warnings (a
        capture warning is its own text, so it is its own example)."""
        self.packets += stats.packets
        self.bytes += stats.bytes
        for text, n in stats.warnings.items():
            self.warnings[text] += n
            self.warning_examples.setdefault(text, [text])

    def merge(self, other: DecodeReport) -> None:
        """Add another part's counts (the Spark engine's per-partition reports); files are the caller's."""
        for name in ("packets", "bytes", "connections", "kafka_connections", "exchanges", "responses_missing",
                     "orphan_responses", "gaps", "lost_bytes", "skipped_bytes"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.requests.update(other.requests)
        self.mid_message_starts.extend(other.mid_message_starts)
        for code, n in other.warnings.items():
            self.warnings[code] += n
            examples = self.warning_examples.setdefault(code, [])
            examples.extend(other.warning_examples.get(code, [])[: max(0, EXAMPLES_PER_WARNING - len(examples))])
        self.client_software.update(other.client_software)
        self.software_client_ids.update(other.software_client_ids)
        self.topic_names.update(other.topic_names)

    @property
    def other_apis(self) -> dict[tuple[int, int], int]:
        """Requests of every API except Fetch (1) and FetchSnapshot (59), by (api key, version)."""
        return {k: n for k, n in self.requests.items() if k[0] not in (1, 59)}

    def to_dict(self) -> dict:
        return {
            "files": list(self.files),
            "packets": self.packets,
            "bytes": self.bytes,
            "connections": self.connections,
            "kafka_connections": self.kafka_connections,
            "exchanges": self.exchanges,
            "responses_missing": self.responses_missing,
            "orphan_responses": self.orphan_responses,
            "requests": [
                {"api_key": k, "api_version": v, "api": api_name(k), "count": n}
                for (k, v), n in sorted(self.requests.items())
            ],
            "gaps": self.gaps,
            "lost_bytes": self.lost_bytes,
            "skipped_bytes": self.skipped_bytes,
            # Only when there are any (the key is new); in capture order, however the engine gathered them.
            **({"mid_message_starts": [m.to_dict() for m in sorted(
                self.mid_message_starts, key=lambda m: (m.file, m.frame, m.conn, m.direction))]}
               if self.mid_message_starts else {}),
            "warnings": {c: {"count": n, "examples": self.warning_examples.get(c, [])}
                         for c, n in _most_frequent_first(self.warnings.items())},
            "client_software": dict(self.client_software),
            "topic_names": dict(self.topic_names),
        }

    def lines(self) -> list[str]:
        """Plain-text summary lines, for a CLI to print as they are or inside a rich panel."""
        out = [
            f"files: {', '.join(self.files) or '-'}",
            f"packets: {self.packets:,}  bytes: {self.bytes:,}",
            f"connections: {self.connections:,} ({self.kafka_connections:,} Kafka)",
            f"exchanges: {self.exchanges:,} (responses missing: {self.responses_missing:,}, "
            f"responses without request: {self.orphan_responses:,})",
        ]
        if self.gaps:
            out.append(f"capture gaps: {self.gaps:,} ({self.lost_bytes:,} bytes lost, "
                       f"{self.skipped_bytes:,} bytes skipped to resynchronise)")
        if self.mid_message_starts:
            out.append(f"capture started mid-message on {_count(len(self.mid_message_starts), 'connection direction')}"
                       f" ({sum(m.skipped_bytes for m in self.mid_message_starts):,} bytes skipped)")
        for (k, v), n in sorted(self.requests.items()):
            out.append(f"  {api_name(k)} v{v} (key {k}): {_count(n, 'request')}")
        for sw_client, sw in sorted(self.client_software.items()):
            # names a peer chose: a newline in one must not start a forged line of this report
            out.append(one_line(f"  client {sw_client}: {sw}"))
        out.extend(f"warning: {line}" for line in self.warning_lines())
        return out

    def warning_lines(self) -> list[str]:
        """One line per kind of warning, most frequent first, with its count."""
        return _warning_lines(_most_frequent_first(self.warnings.items()), self.warning_examples)


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def warning_lines(decode: dict) -> list[str]:
    """DecodeReport.warning_lines of a report in its to_dict() form (an Analysis keeps it so)."""
    warnings = decode.get("warnings", {})
    counts = _most_frequent_first((code, w["count"]) for code, w in warnings.items())
    return _warning_lines(counts, {code: w["examples"] for code, w in warnings.items()})


def _most_frequent_first(counts) -> list[tuple[str, int]]:
    """(code, count) pairs by count, then code: the same order however the counts were gathered (one decode
    in frame order, or the Spark engine's per-partition reports merged)."""
    return sorted(counts, key=lambda cn: (-cn[1], cn[0]))


def _warning_lines(counts: list[tuple[str, int]], examples: dict[str, list[str]]) -> list[str]:
    out = []
    for code, n in counts:
        kept = examples.get(code) or [code]
        # capture-layer warnings are their own text; protocol ones are a code plus an example
        if kept[0] == code:
            out.append(f"{code} (x{n})")
        elif code in NAMES_EACH_EXAMPLE:
            more = f"; and {n - len(kept)} more" if n > len(kept) else ""
            out.append(f"{code} (x{n}): {'; '.join(kept)}{more}")
        else:
            out.append(f"{code} (x{n}): {kept[0]}")
    return out
