"""Delta's SQL and tables by name on PySpark, without jars: `enable(spark)`, `disable`, `is_enabled` and
`configure_spark_with_delta_pip(builder, extra_packages=None)` (delta-spark's name and signature).

  1. In an enabled session `SparkSession.sql` parses with Delta's grammar (`parser`); Delta's statements and
     Spark's DML / DDL on Delta tables run with tahoe's operations (`commands`).
  2. Other statements go to Spark with their Delta table references pointed at tahoe's reads (`relations`).
  3. Tables by name live in Spark's session catalog (`catalog`); the catalog calls (`spark.table`,
     `saveAsTable`, `insertInto`, `writeTo`, `readStream.table`, `writeStream.toTable`) go through `hooks`."""

from __future__ import annotations

from typing import Any

from .state import ENABLED_CONF, is_enabled, mark

__all__ = ["enable", "disable", "is_enabled", "configure_spark_with_delta_pip", "ENABLED_CONF"]

_DELTA_SPARK_CONFS = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


def enable(spark: Any) -> Any:
    """Turn on Delta's SQL and tables by name in `spark` (see the module docstring); returns it."""
    from ..datasource import register
    from ..patches import install

    install()
    register(spark)
    mark(spark, True)
    return spark


def disable(spark: Any) -> Any:
    """Turn Delta's SQL off again in `spark` (statements go to Spark as written); returns it."""
    mark(spark, False)
    return spark


def configure_spark_with_delta_pip(spark_session_builder: Any, extra_packages: list | None = None) -> "SparkSession.Builder":
    """delta-spark's `configure_spark_with_delta_pip`: the builder, set up so that the session it
    builds has Delta's SQL and tables by name (tahoe's, in Python: no Delta jars are added). The delta-spark
    confs `spark.sql.extensions` / `spark.sql.catalog.spark_catalog` are taken out; `extra_packages` (Maven
    coordinates) are added to `spark.jars.packages`."""
    from ..session import RUNTIME_CONF

    builder = spark_session_builder
    options = getattr(builder, "_options", None)
    if isinstance(options, dict):
        for key, value in _DELTA_SPARK_CONFS.items():
            if str(options.get(key, "")).strip() == value:
                options.pop(key)
    if extra_packages:
        if not isinstance(extra_packages, list):
            raise TypeError("extra_packages must be a list of Maven coordinates")
        current = str(options.get("spark.jars.packages", "")) if isinstance(options, dict) else ""
        packages = [p for p in current.split(",") if p] + list(extra_packages)
        builder = builder.config("spark.jars.packages", ",".join(packages))
    builder = builder.config(ENABLED_CONF, "true")
    for key, value in RUNTIME_CONF.items():
        if not (isinstance(options, dict) and key in options):
            builder = builder.config(key, value)
    original = builder.getOrCreate

    def getOrCreate() -> Any:
        return enable(original())

    getOrCreate.__doc__ = original.__doc__
    builder.getOrCreate = getOrCreate
    return builder
