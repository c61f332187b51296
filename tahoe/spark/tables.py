"""delta-spark's `delta.tables`, under tahoe: `from tahoe.spark.tables import DeltaTable` where
delta-spark code says `from delta.tables import DeltaTable` (tests/spark/test_delta_spark_surface.py
pins the names against delta-spark 4.4)."""

from .delta_table import DeltaMergeBuilder, DeltaTable, DeltaTableBuilder, IdentityGenerator
from .optimize import DeltaOptimizeBuilder

__all__ = ["DeltaMergeBuilder", "DeltaOptimizeBuilder", "DeltaTable", "DeltaTableBuilder", "IdentityGenerator"]
