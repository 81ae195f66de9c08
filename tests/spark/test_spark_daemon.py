"""The executors' Python daemon imports the installed, compiled PySpark, not the source zips Spark puts first on
its path (which cost every command ~0.4 s of compiling), its workers leave nothing in the user's working directory,
and a daemon the user names is still the one run."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from importlib.machinery import PathFinder
from pathlib import Path

import pytest

from fetchtool.pipeline.spark_daemon import without_source_zips

pytestmark = pytest.mark.spark


def test_the_executors_daemon_imports_the_installed_pyspark(spark):
    import py4j
    import pyspark

    def where_workers_import_from(_):  # (defined here: sent to the workers by value)
        import sys

        import py4j
        import pyspark

        yield sys.argv[0], pyspark.__file__, py4j.__file__, [p for p in sys.path if "pyspark" in p or "py4j" in p]

    ((daemon, worker_pyspark, worker_py4j, zips),) = spark.sparkContext.parallelize([0], 1).mapPartitions(
        where_workers_import_from).collect()
    assert daemon.endswith(os.path.join("fetchtool", "pipeline", "spark_daemon.py"))
    assert (worker_pyspark, worker_py4j) == (pyspark.__file__, py4j.__file__)
    assert not [p for p in zips if p.endswith(".zip")]


def _installed_version_py(package: str) -> bytes:
    spec = PathFinder.find_spec(package, sys.path)
    assert spec is not None and spec.submodule_search_locations
    return (Path(list(spec.submodule_search_locations)[0]) / "version.py").read_bytes()


def _zip(path: Path, package: str, version_py: bytes) -> str:
    with zipfile.ZipFile(path, "w") as zipped:
        zipped.writestr(f"{package}/version.py", version_py)
        zipped.writestr(f"{package}/__init__.py", b"")
    return str(path)


def test_only_zips_of_the_installed_release_leave_the_path(tmp_path):
    same_pyspark = _zip(tmp_path / "pyspark.zip", "pyspark", _installed_version_py("pyspark"))
    same_py4j = _zip(tmp_path / "py4j-0.10.9.9-src.zip", "py4j", _installed_version_py("py4j"))
    (tmp_path / "other").mkdir()
    other_release = _zip(tmp_path / "other" / "pyspark.zip", "pyspark", b'__version__: str = "3.5.0"\n')
    damaged = tmp_path / "py4j-damaged.zip"
    damaged.write_bytes(b"PK not a zip")
    unrelated = _zip(tmp_path / "deps.zip", "pyspark", _installed_version_py("pyspark"))
    path = [same_pyspark, same_py4j, other_release, str(damaged), *sys.path, unrelated]
    assert without_source_zips(path) == [other_release, str(damaged), *sys.path, unrelated]
    # without an installed PySpark on the rest of the path, the zips are all there is: they stay
    bare = [same_pyspark, same_py4j, str(tmp_path)]
    assert without_source_zips(bare) == bare


_PROBE = """
import sys
from fetchtool.pipeline.spark import spark_session

def where(_):
    yield sys.argv[0]

spark = spark_session("local[1]")
print(spark.sparkContext.parallelize([0], 1).mapPartitions(where).collect()[0])
spark.stop()
"""


def test_a_daemon_the_user_names_is_the_one_run(spark_available, tmp_path):
    env = dict(os.environ, PYSPARK_SUBMIT_ARGS="--conf spark.python.daemon.module=pyspark.daemon pyspark-shell")
    run = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, env=env, cwd=tmp_path,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip().endswith(os.path.join("pyspark", "daemon.py"))


def test_a_spark_command_leaves_nothing_in_the_working_directory(spark_available, tmp_path):
    # hypothesis is importable here (the tests use it): kio, imported by the workers, would register its
    # strategies and leave a .hypothesis/ folder in the directory the command was run from
    capture = Path(__file__).resolve().parents[2] / "captures" / "kafka-python-tansu.pcap"
    run = subprocess.run([sys.executable, "-m", "fetchtool", "analyze", str(capture), "--engine", "spark",
                          "--master", "local[1]", "--format", "json"], capture_output=True, text=True, cwd=tmp_path,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert list(tmp_path.iterdir()) == []
