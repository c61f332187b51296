"""delta-spark's optimized writes on Spark: whether a write is optimized
(`optimize_write_enabled`: the write's `optimizeWrite` option, else the session's
spark.databricks.delta.optimizeWrite.enabled, else the table's delta.autoOptimize.optimizeWrite)
and the shuffle that makes it so (`optimized_write`: by the partition columns, so each partition
a write touches gets one file; unpartitioned, into bins of spark.databricks.delta.optimizeWrite.
binSize). Used by `write_delta` (`tahoe.spark.fast_write`) and by the `format("delta")` save
wrapper (`tahoe.spark.calls`).
"""

from __future__ import annotations

import math
from typing import Callable

from ..protocol.properties import bool_property
from ..write.optimize import parse_size
from .session import DELTA_CONF, session_conf
from .types import nested_col
from ..errors import InvalidOptionError
from .internals import plan_size_in_bytes

__all__ = ["optimize_write_enabled", "optimized_write"]

_CONF = DELTA_CONF


def optimize_write_enabled(spark, configuration: "dict | Callable[[], dict | None] | None",
                           option: bool | None = None) -> bool:
    """delta-spark's precedence: the write's own `optimizeWrite` option, else the session's
    spark.databricks.delta.optimizeWrite.enabled, else the table's delta.autoOptimize.optimizeWrite
    (off when none is set). `configuration`: the table's, or a function returning it (called only
    when neither the option nor the session decides)."""
    if option is not None:
        return bool(option)
    v = session_conf(spark, _CONF + "optimizeWrite.enabled")
    if v is not None:
        low = v.strip().lower()
        if low not in ("true", "false"):
            raise InvalidOptionError(f"{_CONF}optimizeWrite.enabled must be true or false, got {v!r}")
        return low == "true"
    if callable(configuration):
        configuration = configuration()
    return bool(bool_property(configuration, "delta.autoOptimize.optimizeWrite"))


def optimized_write(df, partition_columns: list[str]):
    """`df` shuffled for an optimized write: by the partition columns, so that each partition's
    rows meet in one task and it gets one file; unpartitioned, into as many tasks as bins of
    spark.databricks.delta.optimizeWrite.binSize (512 MiB) the data's estimated size makes (at
    most spark.sql.shuffle.partitions; without an estimate, Spark's REBALANCE)."""
    spark = df.sparkSession
    if partition_columns:
        return df.repartition(*[nested_col(c) for c in partition_columns])
    v = session_conf(spark, _CONF + "optimizeWrite.binSize")      # a number is MiB, as in delta-spark
    if v is None:
        bin_size = 512 * 1024 * 1024
    elif v.strip().isdigit():
        bin_size = parse_size(int(v) * 1024 * 1024, _CONF + "optimizeWrite.binSize")
    else:
        bin_size = parse_size(v, _CONF + "optimizeWrite.binSize")
    shuffle = int(session_conf(spark, "spark.sql.shuffle.partitions") or 200)
    size = _estimated_size(df)
    if size is None or size >= 2 ** 63 - 1:
        # no estimate (Spark says Long.MaxValue when it knows nothing): Spark's REBALANCE, whose
        # adaptive execution packs the shuffled rows into partitions of the advisory size
        return df.hint("rebalance")
    return df.repartition(int(max(1, min(math.ceil(size / bin_size), shuffle))))


def _estimated_size(df) -> int | None:
    return plan_size_in_bytes(df)   # None on Spark Connect: unknown
