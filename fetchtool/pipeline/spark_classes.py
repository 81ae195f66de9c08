"""Spark's JVM classes, archived once per machine (Java's application class-data sharing): every later Spark
command starts about 3 s sooner.

Most of a Spark command's start-up is its JVM loading classes: `analyze --engine spark --master local[2]` of a
0.5 MB capture took 7.3-7.5 s on this 2-core machine, 4.4-4.7 s with the archive. The archive is made once per
Java and PySpark installation, in the user's cache directory (~180 MB), by a process that the first Spark
command leaves running in the background. That process starts Spark with -XX:ArchiveClassesAtExit, runs the
engine's stages on a small synthetic capture, and stops Spark; its JVM writes the archive as it exits (~20 s of
one core, once). The archive is put in place only when that JVM exited cleanly, since a JVM given a cut archive
crashes. A JVM given an archive of other classes (another Java or Spark) ignores it, so a stale archive costs
only its start-up gain.

FETCHTOOL_CACHE_DIR chooses the directory (default: $XDG_CACHE_HOME/fetchtool, else ~/.cache/fetchtool);
set it to an empty value for no archive.

    python -m fetchtool.pipeline.spark_classes     # make the archive now (in the foreground), print its path
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MAKING_FOR_AT_MOST_S = 600  # a marker older than this belongs to a maker that died: another may start
RETRY_AFTER_S = 24 * 3600  # a maker whose JVM wrote no archive (a Java without class-data sharing) is not retried
# by every command: only after this long


def archive_path() -> Path | None:
    """Where this machine's archive is (made or not); None without a cache directory, Java or PySpark."""
    base = os.environ.get("FETCHTOOL_CACHE_DIR")
    if base is None:
        base = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "fetchtool")
    home = os.environ.get("JAVA_HOME")  # the java that Spark's launcher runs
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not base or not java or not os.path.exists(java):
        return None
    try:
        import pyspark
    except ImportError:
        return None
    java = os.path.realpath(java)
    key = "\n".join((java, str(os.stat(java).st_mtime_ns), pyspark.__version__, pyspark.__file__,
                     os.environ.get("SPARK_HOME", "")))
    path = Path(base).expanduser() / f"spark-classes-{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"
    # Spark splits its Java options at spaces: a path with one would not reach the JVM whole
    return None if any(c.isspace() or c in "'\"" for c in str(path)) else path


def java_options(path: Path | None, dump_to: Path | None = None) -> str:
    """The driver JVM's options for the archive: use it when it is there (or write one at exit to `dump_to`).
    The JVM's own warnings go to stderr (by default they go to stdout, which carries the report)."""
    quiet = "-Xlog:disable -Xlog:all=warning:stderr"
    if dump_to is not None:
        return f"{quiet} -XX:ArchiveClassesAtExit={dump_to}"
    if path is not None and path.is_file():
        return f"{quiet} -XX:SharedArchiveFile={path}"
    return quiet


def archive_later(path: Path) -> bool:
    """Start the background process that makes the archive, unless one is making it."""
    if not claim(path):
        return False
    subprocess.Popen([sys.executable, "-m", __name__, str(path)], stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    return True


def claim(path: Path) -> bool:
    """Mark the archive as being made (its `.making` file): False when another process has, unless its mark is
    older than any maker takes, or when the cache directory cannot be written."""
    marker = _marker(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        failed = _failed(path)
        if failed.exists() and time.time() - failed.stat().st_mtime < RETRY_AFTER_S:
            return False
        if marker.exists() and time.time() - marker.stat().st_mtime > MAKING_FOR_AT_MOST_S:
            marker.unlink(missing_ok=True)
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except OSError:
        return False
    return True


def _marker(path: Path) -> Path:
    return path.with_name(path.name + ".making")


def _failed(path: Path) -> Path:
    return path.with_name(path.name + ".failed")


def make(path: Path) -> bool:
    """Make the archive at `path` (this process starts its own Spark): True when it was put in place."""
    from pyspark import SparkContext

    from fetchtool.synth.scenarios import generate

    from .spark import analyze_spark, decode_spark, spark_session

    path.parent.mkdir(parents=True, exist_ok=True)
    _sweep(path)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    made: bool | None = None  # None: interrupted (Ctrl-C on a maker run in the foreground): no verdict on this Java
    try:
        with tempfile.TemporaryDirectory(prefix="fetchtool-classes-") as work:
            capture = Path(work) / "warm-up.pcap"
            generate("healthy", capture)
            spark = spark_session("local[2]", dump_classes_to=tmp)
            analyze_spark([capture], spark=spark)
            decode_spark([capture], str(Path(work) / "out"), spark=spark)
            proc = SparkContext._gateway.proc  # type: ignore[union-attr]
            spark.stop()
            proc.stdin.close()  # Spark's gateway exits at the end of its input, writing the archive
            clean = proc.wait(timeout=MAKING_FOR_AT_MOST_S) == 0
        made = bool(clean and tmp.is_file() and tmp.stat().st_size)
        if made:
            os.replace(tmp, path)
            for old in path.parent.glob("spark-classes-*.jsa"):  # another Java's or Spark's: never used again
                if old != path:
                    old.unlink(missing_ok=True)
        return made
    except Exception:
        made = False  # e.g. a JVM that will not start with the option
        raise
    finally:
        tmp.unlink(missing_ok=True)
        if made:
            _failed(path).unlink(missing_ok=True)
        elif made is False:
            _failed(path).touch()
        _marker(path).unlink(missing_ok=True)


def _sweep(path: Path) -> None:
    """Remove what makers that died left (a container stopped mid-way): their half-written archives."""
    for tmp in path.parent.glob(f"{path.name}.*.tmp"):
        pid = tmp.name[len(path.name) + 1:-len(".tmp")]
        if pid.isdigit() and not _alive(int(pid)):
            tmp.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else archive_path()
    if path is None:
        print("no archive: no cache directory (FETCHTOOL_CACHE_DIR), Java or PySpark", file=sys.stderr)
        return 1
    try:
        made = make(path)
    except Exception as exc:  # noqa: BLE001 - e.g. a JVM that will not start with the option: one line
        print(f"{path}: no class archive: {exc}", file=sys.stderr)
        return 1
    if not made:
        print(f"{path}: the JVM did not write its class archive", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    from fetchtool import hide_hypothesis

    hide_hypothesis()  # this process runs in the user's working directory
    sys.exit(main(sys.argv[1:]))
