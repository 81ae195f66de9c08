"""Rotated sets: one capture cut into several files (tcpdump -C / -G, dumpcap ring buffers), decoded as one.

    for files in rotation_groups(paths):     # ["drop.pcap", "drop.pcap1", "drop.pcap2"], ["other.pcap"]
        label = set_label([os.path.basename(f) for f in files])   # "drop.pcap+2", "other.pcap"

Files of one directory whose names differ only in digits (tcpdump -C: cap.pcap, cap.pcap1, ...; -G: strftime
names) and whose packets follow each other in time (no overlap) are one capture cut in pieces, ordered by name
(natural sort: cap.pcap2 before cap.pcap10). Decoded as a set, frame numbers count on across the files as
`mergecap -a` of the set's files would number them, and a TCP stream cut by a file boundary stays one stream.
Two captures taken side by side (broker-1.pcap, broker-2.pcap: overlapping in time) stay apart. Both engines
group files with these functions: the polars engine through `rotation_groups`, the Spark engine from the time
spans its stage 0 counts anyway.
"""

from __future__ import annotations

import os
import re
from collections import Counter

from .reader import CaptureError, read_records

__all__ = ["natural_key", "rotation_stem", "rotated_sets", "set_label", "time_span", "rotation_groups", "file_order"]


def natural_key(path: str) -> tuple:
    """Rotation order: the files of one stem together, ordered by the numbers in their names, a name without
    one first (cap.pcap2 before cap.pcap10; tcpdump -C -z gzip's cap.pcap.gz before cap.pcap1.gz)."""
    return rotation_stem(path), [int(t) for t in re.findall(r"\d+", os.path.basename(path))]


def rotation_stem(path: str) -> tuple[str, str]:
    """Files of one rotated set share this: their directory and their name without digits (tcpdump -C: cap.pcap, cap.pcap1, ...)."""
    return os.path.dirname(path), re.sub(r"\d+", "", os.path.basename(path))  # cap.pcap ~ cap.pcap1


def rotated_sets(files: list[str], spans: dict[int, tuple]) -> list[int]:
    """Set index of each file (files in natural order; spans: index -> (first ts, last ts) or (None, None))."""
    sets: list[int] = []
    open_sets: dict[tuple, tuple[int, float | None]] = {}  # stem -> (set index, last ts of the set so far)
    n = 0
    for i, f in enumerate(files):
        first, last = spans.get(i, (None, None))
        stem = rotation_stem(f)
        cur = open_sets.get(stem)
        if cur is not None and first is not None and cur[1] is not None and first >= cur[1]:
            sets.append(cur[0])
        else:
            sets.append(n)
            cur = (n, None)
            n += 1
        if last is not None:
            open_sets[stem] = (cur[0], last)
        elif stem not in open_sets:
            open_sets[stem] = cur
    return sets


def set_label(names: list[str]) -> str:
    """The `file` of every row: the file itself, or the first file of a rotated set and how many follow."""
    if not names:
        return ""
    return names[0] if len(names) == 1 else f"{names[0]}+{len(names) - 1}"


def time_span(path, whole: bool = True) -> tuple[float | None, float | None]:
    """(first, last) packet timestamp of a capture file, (None, None) when it has none or cannot be read.
    whole=False reads the first packet only and gives (first, first). Walks record headers only (no link or TCP
    decoding): about a tenth of a decode of the same file; its warnings are counted when the file is decoded."""
    first = last = None
    records = read_records(path, Counter())
    try:
        for _frame, ts, *_rest in records:
            if first is None:
                first = ts
                if not whole:
                    return first, first
            last = ts
    except (CaptureError, OSError):
        pass  # the decode reports it, as one line
    finally:
        records.close()
    return first, last


def rotation_groups(paths) -> list[list]:
    """The given capture files as rotated sets: each set in natural order, the sets in the order their first
    file was given (so files given in shell glob order, where cap.pcap10 sorts before cap.pcap2, come out right).
    Files that share no name stem with another given file are sets of one and are not read here; of the others,
    each file but the last of its stem is scanned for its time span (the last one's first packet is enough)."""
    given, original, by_stem = _given(paths)
    set_of: dict[str, tuple] = {}  # path -> (stem, set index) for files of multi-file stems
    members: dict[tuple, list[str]] = {}
    for stem, names in by_stem.items():
        if len(names) < 2:
            continue
        spans = {i: time_span(n, whole=i < len(names) - 1) for i, n in enumerate(names)}
        for name, idx in zip(names, rotated_sets(names, spans)):
            set_of[name] = (stem, idx)
            members.setdefault((stem, idx), []).append(name)
    groups: list[list] = []
    done: set = set()
    seen: set[str] = set()
    for name, p in given:
        key = set_of.get(name)
        if name in seen or key is None:  # a set of one (a file given twice is read twice, as before)
            groups.append([p])
        elif key not in done:
            done.add(key)
            groups.append([original[n] for n in members[key]])
        seen.add(name)
    return groups


def file_order(paths) -> list:
    """The files as a decode report lists them: as given, except that files sharing a name stem are listed in
    natural order where the first of them was given (the Spark engine lists every file in natural order; a
    broken piece in the middle of a set is its own set, and still listed between its neighbours)."""
    given, original, by_stem = _given(paths)
    out, seen, listed = [], set(), set()
    for name, p in given:
        stem = rotation_stem(name)
        if name in seen or len(by_stem[stem]) < 2:
            out.append(p)
        elif stem not in listed:
            listed.add(stem)
            out.extend(original[n] for n in by_stem[stem])
        seen.add(name)
    return out


def _given(paths) -> tuple[list[tuple[str, object]], dict[str, object], dict[tuple[str, str], list[str]]]:
    """The paths as given, as (name, path); each distinct name's first given path; the distinct names by name
    stem, each stem's in natural order."""
    given = [(os.fspath(p), p) for p in paths]
    original: dict[str, object] = {}
    for name, p in given:
        original.setdefault(name, p)
    by_stem: dict[tuple[str, str], list[str]] = {}
    for name in original:  # first-given order
        by_stem.setdefault(rotation_stem(name), []).append(name)
    for names in by_stem.values():
        names.sort(key=natural_key)
    return given, original, by_stem
