"""Spark's discovery hook for tahoe's `deltaSharing` data source (see `pyspark_tahoe_delta`):
`spark.read.format("deltaSharing").load("profile.share#share.schema.table")` and
`spark.readStream.format("deltaSharing")` in any new session where tahoe is installed."""

from tahoe.spark.sharing import DeltaSharingDataSource as DefaultSource

__all__ = ["DefaultSource"]
