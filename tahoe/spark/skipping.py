"""File skipping for Spark scans: the Spark-specific glue around `tahoe.expressions`.

Owns turning the filters a Spark read is given — SQL strings, PySpark Columns (through the SQL
text Spark's analyzer gives them), or the filters Spark pushes into a Python data source
(`pushed_filter`: `EqualTo`, `In`, `IsNull`, `Not`, ... — no SQL text in between) — into
expression trees, and planning a snapshot's files with them (`tahoe.read.scan.plan_files`: partition pruning and stats skipping, conservative: a file is
dropped only when no row of it can match). A filter that cannot be had as SQL, or does not
parse, is not used for skipping (Spark still applies it to the rows).

    keep = file_mask(files, ["id > 10", F.col("p") == "a"], schema, partition_columns, mode, tz)
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np
import pyarrow as pa

from ..errors import AnalysisException, DeltaError
from ..expressions import (
    Column, Comparison, Expression, In, IsNull, Not, and_, file_mask as _expression_file_mask, lit, parse,
)
from ..protocol.schema import StructType
from . import internals
from ..read.scan import plan_files as plan
from .connect_sql import column_sql
from .types import to_spark_schema

__all__ = ["filter_sql", "parse_filters", "pushed_filter", "file_mask", "plan_files"]



def pushed_filter(f: Any) -> Expression | None:
    """A filter Spark pushed into a Python data source (`pyspark.sql.datasource.Filter`) as an
    expression tree, or None when it has none here (string prefix/suffix/contains filters, a NULL
    or unrepresentable value). Values are typed as Spark hands them over: a TIMESTAMP value is
    an aware datetime (an instant, `TIMESTAMP`), a TIMESTAMP_NTZ one naive (`TIMESTAMP_NTZ`)."""
    from pyspark.sql import datasource as ds

    comparisons = {ds.EqualTo: "=", ds.EqualNullSafe: "<=>", ds.GreaterThan: ">", ds.GreaterThanOrEqual: ">=",
                   ds.LessThan: "<", ds.LessThanOrEqual: "<="}

    def value(v: Any) -> Expression | None:
        if v is None:
            return None
        try:
            return lit(v)
        except AnalysisException:
            return None

    attribute = getattr(f, "attribute", None)
    column = Column(tuple(attribute)) if attribute else None
    op = comparisons.get(type(f))
    if op is not None and column is not None:
        v = value(f.value)
        return None if v is None else Comparison(op, column, v)
    if isinstance(f, ds.In) and column is not None:
        items = [value(v) for v in f.value]
        return In(column, tuple(items)) if items and all(i is not None for i in items) else None  # type: ignore[arg-type]
    if isinstance(f, ds.IsNull) and column is not None:
        return IsNull(column)
    if isinstance(f, ds.IsNotNull) and column is not None:
        return Not(IsNull(column))
    if isinstance(f, ds.Not):
        inner = pushed_filter(f.child)
        return None if inner is None else Not(inner)
    return None


def filter_sql(f: Any, spark: Any = None, schema: Any = None) -> str | None:
    """SQL text of a filter: a string as is; a PySpark Column (classic) through Spark's analyzer
    over an empty DataFrame of the table's `schema` (Spark 4 Columns print in prefix form); a
    Spark Connect Column from its string form. None when it cannot be had."""
    if isinstance(f, str):
        return f

    if internals.is_connect(f):
        try:
            return column_sql(f)
        except DeltaError:   # an expression with no SQL form (a UDF, ...): no skipping by it
            return None
    if spark is not None and schema is not None:
        from pyspark.errors import AnalysisException as SparkAnalysisException

        try:
            filtered = spark.createDataFrame([], schema).filter(f)
        except SparkAnalysisException:   # not over the table's columns: Spark's filter says so later
            return None
        return internals.filter_sql(filtered)
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
    expr = _filters_expression(filters or (), snapshot.schema, spark) if filters else None
    return plan(snapshot, expr, time_zone=session_tz,
                columns=["path", "partitionValues", "size", "stats", "deletionVector"])
