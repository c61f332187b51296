"""delta-spark's `delta.pip_utils`, under tahoe: `configure_spark_with_delta_pip` (see
`tahoe.spark.sql`)."""

from .sql import configure_spark_with_delta_pip

__all__ = ["configure_spark_with_delta_pip"]
