"""Stage 0 while Spark starts: on a local master, the files are counted by forked children of the driver.

Starting the JVM and the session takes seconds (bench_spark.py: 4.5-5 s, 8 s without spark_classes' archive),
the driver only waiting for them. Stage 0 (each file's packets, time span and heaviest flows: what the rotated
sets, the frame offsets and the flow buckets come from) reads every record header of every file, so on Spark it
was a job of its own after the start-up: ~0.5 s of a 6 s local[2] run of 1.1 GB, on top of the first job's cost.
Here the same function (spark_stages.count_packets) runs in children forked before the JVM is launched (a
process with no threads yet), one per core of the master, and stage 1 starts from their counts.

Only for files on this machine and a master on it: a cluster's executors may read files the driver cannot, and
a driver walking every file of a large set would be the bottleneck the executors are there to avoid.
"""

from __future__ import annotations

import os
import re

from fetchtool.capture.streams import fork_child, read_final, reap

from . import spark_stages as st

_LOCAL = re.compile(r"local(?:\[(\d+|\*)(?:,\d+)?\])?")


def local_cores(master: str | None) -> int | None:
    """The cores of a local master (None: local[*]), or None for any other master."""
    m = _LOCAL.fullmatch(master or "local[*]")
    if m is None:
        return None
    n = m.group(1)
    if n is None:
        return 1  # "local": one thread
    return (os.cpu_count() or 1) if n == "*" else int(n)


def spark_starting() -> bool:
    """Whether this process has no JVM yet, so the session it asks for starts one (a start-up to overlap)."""
    try:
        from pyspark import SparkContext
    except ImportError:
        return False  # spark_session says what to install
    return SparkContext._gateway is None


class CountedMeanwhile:
    """count_packets for every file, in forked children: start() before the session, counts() after it."""

    def __init__(self, files: list[str], given: dict[str, str], children: list[tuple[int, int]]):
        self.files, self.given = files, given
        self._children = children  # (pid, final message's pipe)

    @classmethod
    def start(cls, files: list[str], given: dict[str, str], cores: int) -> CountedMeanwhile:
        children = []
        n = min(cores, len(files))
        try:
            for k in range(n):
                idxs = list(range(k, len(files), n))  # every n-th file: rotated pieces are of one size

                def count(_fd: int, idxs=idxs) -> list[tuple]:
                    return [st.count_packets(i, files[i]) for i in idxs]

                pid, pipe, final = fork_child(count, child_writes=False)
                os.close(pipe)  # the child reads nothing: its counts come as its final message
                children.append((pid, final))
        except BaseException:
            cls(files, given, children).cancel()
            raise
        return cls(files, given, children)

    def counts(self) -> list[tuple] | None:
        """Every file's count row (as count_stage gives them), or None when a child died (Spark counts then)."""
        rows: list[tuple] = []
        try:
            for _pid, final in self._children:
                got = read_final(final, None)
                if got is None:
                    return None
                rows.extend(got)
        finally:
            self.cancel()
        return rows

    def cancel(self) -> None:
        for pid, final in self._children:
            os.close(final)
            reap(pid)
        self._children = []


def counted_meanwhile(paths, master: str | None, spark) -> CountedMeanwhile | None:
    """Counts begun in children when this call will start a local Spark for local files; else None."""
    cores = local_cores(master)
    if spark is not None or cores is None or any(st.is_remote(str(p)) for p in paths) or not spark_starting():
        return None
    from .spark import _expand  # noqa: PLC0415 - spark imports this module

    files, given = _expand(paths)
    return CountedMeanwhile.start(files, given, cores) if files else None
