"""One SparkSession (local[2]) for the Spark tests of this directory: Spark takes ~10 s to start, so it starts
once. `spark_session` hands back the active session, so a run that also collects tests/spark shares its JVM.

Without pyspark (or Java) the tests skip, except under CI (CI set), where a missing Spark is a failure.
"""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def spark():
    try:
        from fetchtool.pipeline.spark import SparkUnavailable, spark_session

        session = spark_session("local[2]")
    except SparkUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"Spark is required in CI: {exc}")
        pytest.skip(str(exc))
    session.conf.set("spark.sql.shuffle.partitions", "4")
    yield session
    session.stop()
