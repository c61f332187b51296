"""Spark's discovery hook for tahoe's `delta` data source: PySpark (4.0 and later) imports every
installed top-level module whose name starts with `pyspark_` at its first data source lookup and
registers the `DefaultSource` it defines under `DefaultSource.name()`. With tahoe installed where
Spark's Python workers run, `spark.read.format("delta")`, `df.write.format("delta")`,
`spark.readStream.format("delta")` and `df.writeStream.format("delta")` work in any new session —
no `tahoe.spark.register(spark)` call, no `addPyFile`."""

from tahoe.spark.datasource import DeltaDataSource as DefaultSource

__all__ = ["DefaultSource"]
