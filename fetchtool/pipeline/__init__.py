"""The data pipeline: polars on one machine (the default engine), Spark through PySpark for captures that outgrow it."""

ENGINES = ("polars", "spark")
