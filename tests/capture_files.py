"""Test helpers for captures: rotated pieces cut out of the repo's captures, and the capture reader's forked
processes. Importable from any test dir (`from capture_files import ...`): tests/ is on sys.path through the
root conftest.py."""

from __future__ import annotations

import gzip
import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def split_pcap(src: Path, out_dir: Path, *, every: int | None = None, pieces: int = 3, name: str | None = None,
               ring: bool = False, gz: bool = False) -> list[Path]:
    """Cut a classic pcap at packet boundaries as tcpdump -C names the pieces: NAME, NAME1, NAME2, ...
    (ring: as dumpcap's ring buffer names them, NAME_00001_<start time>.pcap, ...).
    `every`: packets per piece (editcap -c); else `pieces` pieces of about equal size."""
    data = src.read_bytes()
    header, records, pos = data[:24], [], 24
    fmt = "<IIII" if data[:4] == b"\xd4\xc3\xb2\xa1" else ">IIII"
    while pos + 16 <= len(data):
        caplen = struct.unpack_from(fmt, data, pos)[2]
        records.append(data[pos:pos + 16 + caplen])
        pos += 16 + caplen
    if every is None:
        cuts = [len(records) * i // pieces for i in range(pieces + 1)]
    else:
        cuts = list(range(0, len(records), every)) + [len(records)]
    out_dir.mkdir(exist_ok=True)
    name = name or src.name
    paths = []
    for i in range(len(cuts) - 1):
        body = header + b"".join(records[cuts[i]:cuts[i + 1]])
        if ring:
            sec = struct.unpack_from(fmt, records[cuts[i]])[0]
            piece = f"{name}_{i + 1:05d}_{sec}.pcap"
        else:
            piece = name + (str(i) if i else "")
        p = out_dir / (piece + (".gz" if gz else ""))
        p.write_bytes(gzip.compress(body) if gz else body)
        paths.append(p)
    return paths


@contextmanager
def forked_children() -> Iterator[list[int]]:
    """The pids of the processes forked in this block; on leaving it, each must have been reaped. Only these
    children are checked: other children of the test process (a Spark JVM, a broker) are not ours to wait on."""
    pids: list[int] = []
    real_fork = os.fork

    def fork() -> int:
        pid = real_fork()
        if pid:
            pids.append(pid)
        return pid

    os.fork = fork
    try:
        yield pids
    finally:
        os.fork = real_fork
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue  # reaped
        raise AssertionError(f"the forked process {pid} was not reaped")
