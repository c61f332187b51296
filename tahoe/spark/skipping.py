"""File skipping for Spark scans: the Spark-specific glue around `tahoe.expressions`.

Owns turning the filters a Spark read is given — SQL strings, or PySpark Columns (through the SQL
text Spark's analyzer gives them) — into expression trees, and planning a snapshot's files with
them (`tahoe.read.scan.plan_files`: partition pruning and stats skipping, conservative: a file is
dropped only when no row of it can match). A filter that cannot be had as SQL, or does not
parse, is not used for skipping (Spark still applies it to the rows).

    keep = file_mask(files, ["id > 10", F.col("p") == "a"], schema, partition_columns, mode, tz)
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np
import pyarrow as pa

from ..errors import AnalysisException
from ..expressions import Expression, and_, file_mask as _expression_file_mask, parse
from ..protocol.schema import StructType

__all__ = ["filter_sql", "parse_filters", "file_mask", "plan_files"]


def filter_sql(f: Any, spark: Any = None, schema: Any = None) -> str | None:
    """SQL text of a filter: a string as is; a PySpark Column (classic) through Spark's analyzer
    over an empty DataFrame of the table's `schema` (Spark 4 Columns print in prefix form); a
    Spark Connect Column from its string form. None when it cannot be had."""
    if isinstance(f, str):
        return f
    if spark is not None and schema is not None:
        try:
            plan = spark.createDataFrame([], schema).filter(f)._jdf.queryExecution().analyzed()
            return plan.condition().sql()
        except Exception:
            pass
    s = str(f)  # Spark Connect
    if s.startswith("Column<'") and s.endswith("'>"):
        return s[len("Column<'"):-2]
    return None


def parse_filters(filters: Iterable[Any], spark: Any = None, schema: Any = None) -> list[Expression]:
    """The filters that can be had as SQL and parse, as expression trees (the others are left
    out: they only cost skipping)."""
    out = []
    for f in filters:
        if isinstance(f, Expression):
            out.append(f)
            continue
        text = filter_sql(f, spark, schema)
        if not text:
            continue
        try:
            out.append(parse(text))
        except AnalysisException:
            continue
    return out


def _filters_expression(filters: Iterable[Any], table_schema: StructType, spark: Any) -> Expression | None:
    filters = list(filters)
    spark_schema = None
    if spark is not None and any(not isinstance(f, (str, Expression)) for f in filters):
        from .types import to_spark_schema
        spark_schema = to_spark_schema(table_schema, strip_metadata=True)
    exprs = parse_filters(filters, spark, spark_schema)
    return and_(*exprs) if exprs else None


def file_mask(files: pa.Table, filters: Iterable[Any], schema: StructType, partition_columns: list[str],
              mode: str = "none", session_tz: str = "UTC", spark: Any = None) -> np.ndarray:
    """Boolean mask over `files` (the log's add columns, incl. partitionValues and stats): True =
    the file may hold rows matching every filter."""
    expr = _filters_expression(filters, schema, spark)
    return _expression_file_mask(expr, files, schema, partition_columns, mode, time_zone=session_tz)


def plan_files(snapshot, filters: Iterable[Any] | None = None, session_tz: str = "UTC", spark: Any = None) -> pa.Table:
    """The snapshot's active files (path, partitionValues, size, stats, deletionVector) that may
    hold rows matching `filters`."""
    from ..read.scan import plan_files as plan

    expr = _filters_expression(filters or (), snapshot.schema, spark) if filters else None
    return plan(snapshot, expr, time_zone=session_tz,
                columns=["path", "partitionValues", "size", "stats", "deletionVector"])
