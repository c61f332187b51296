"""Delta's SQL and tables by name on PySpark, without jars.

delta-spark gets these from a JVM session extension and catalog; tahoe from Python, at the
calls where a PySpark user reaches them:

    from tahoe.spark import configure_spark_with_delta_pip
    spark = configure_spark_with_delta_pip(SparkSession.builder.appName("app")).getOrCreate()
    # or, on any session (classic or Spark Connect):  tahoe.spark.enable(spark)

    spark.sql("CREATE TABLE events (id BIGINT, day DATE) USING delta PARTITIONED BY (day)")
    spark.sql("MERGE INTO events t USING updates s ON t.id = s.id WHEN MATCHED THEN UPDATE SET *")
    spark.sql("SELECT * FROM events VERSION AS OF 3")
    DeltaTable.forName(spark, "events"); spark.table("events"); df.write.saveAsTable("events")

In an enabled session `SparkSession.sql` first parses the statement with Delta's grammar
(`parser`): Delta's statements — and Spark's DML / DDL on Delta tables — run with tahoe's
operations (`commands`); every other statement goes to Spark, its Delta table references first
pointed at tahoe's reads (`relations`: time travel, `delta.`/path``, `table_changes`). Tables by
name live in Spark's session catalog (`catalog`: in memory, or the Hive metastore with
`enableHiveSupport()`), and the catalog calls — `spark.table`, `spark.read.table`,
`saveAsTable`, `insertInto`, `writeTo(...)`, `readStream.table`, `writeStream.toTable` — reach
Delta tables through tahoe (`hooks`).

Owns: `enable(spark)`, `disable(spark)`, `is_enabled(spark)`, `configure_spark_with_delta_pip(builder,
extra_packages=None)` (delta-spark's name and signature: returns the builder; the delta-spark
session confs `spark.sql.extensions` / `spark.sql.catalog.spark_catalog`, which name JVM classes
tahoe does not need, are taken out of it; `extra_packages` are Maven coordinates added to
`spark.jars.packages` as delta-spark does).
"""

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
    builds has Delta's SQL and tables by name (tahoe's, in Python: no Delta jars are added)."""
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
