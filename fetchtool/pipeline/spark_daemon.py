"""The Python daemon of the Spark executors: PySpark's own (pyspark.daemon), with PySpark imported compiled.

Spark starts an executor's Python daemon (`python -m <spark.python.daemon.module> pyspark.worker`) with its
installation's pyspark.zip and py4j zip first on the path. Those zips hold sources only and zipimport caches no
bytecode, so the daemon and every worker it forks compiled PySpark from source on every command: the daemon's
imports took 0.5 s, against 0.15 s compiled, at the start of each command's first job. Where this Python has the
same release installed (a pip install of pyspark, as `fetchtool[spark]` makes: its zips are copies of the
installed package), the zips leave the path and the installed, compiled modules are imported; an installation
whose zips differ from what this Python has keeps them. The workers also never import hypothesis
(fetchtool.hide_hypothesis), which left a .hypothesis/ folder in the user's working directory.
"""

from __future__ import annotations

import os
import sys
import zipfile
from importlib.machinery import PathFinder

ZIPPED = ("pyspark", "py4j")  # the packages Spark puts on the executors' path as zips


def without_source_zips(path: list[str]) -> list[str]:
    """`path` without the pyspark and py4j zips whose release (version.py, byte for byte) is the one the rest
    of `path` imports."""
    zips = {entry: package for entry in path for package in ZIPPED
            if entry.endswith(".zip") and os.path.basename(entry).startswith(package)}
    rest = [entry for entry in path if entry not in zips]
    same = {entry for entry, package in zips.items()
            if (installed := _installed_version(package, rest)) is not None
            and installed == _zipped_version(entry, package)}
    return [entry for entry in path if entry not in same]


def _installed_version(package: str, path: list[str]) -> bytes | None:
    spec = PathFinder.find_spec(package, path)
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        with open(os.path.join(list(spec.submodule_search_locations)[0], "version.py"), "rb") as fh:
            return fh.read()
    except OSError:
        return None


def _zipped_version(zip_path: str, package: str) -> bytes | None:
    try:
        with zipfile.ZipFile(zip_path) as zipped:
            return zipped.read(f"{package}/version.py")
    except (OSError, KeyError, zipfile.BadZipFile):
        return None


if __name__ == "__main__":
    from fetchtool import hide_hypothesis

    hide_hypothesis()  # before the workers are forked: they inherit it
    sys.path[:] = without_source_zips(sys.path)
    from pyspark.daemon import manager

    manager()
