"""File skipping for Spark scans: partition pruning and min/max/nullCount data skipping.

Owns: turning filters (SQL strings, or PySpark Columns via their SQL text) into a sqlglot AST and
evaluating it per file against the file's partition values and stats, conservatively: a file is
dropped only when the predicate is surely false (or null) for every row of the file. Anything not
understood (functions, casts, column-vs-column comparisons, unknown columns) keeps the file.

    keep = file_mask(files, ["id > 10", F.col("p") == "a"], schema, partition_columns, mode, tz)
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from decimal import Decimal
from typing import Any, Iterable
from zoneinfo import ZoneInfo

import numpy as np
import pyarrow as pa

from ..protocol import column_mapping
from ..protocol.partition_values import parse_partition_value
from ..protocol.schema import DecimalType, PrimitiveType, StructType
from ..protocol.stats import parse_stats

__all__ = ["filter_sql", "parse_filters", "file_mask", "plan_files"]

MAYBE = None  # three-valued: True (some row may match), False (no row matches)


_SUFFIX = re.compile(r"(?<![\w.'])(\d+(?:\.\d*)?(?:E[+-]?\d+)?)(BD|L|S|Y|D|F)\b")


def filter_sql(f: Any, spark: Any = None, schema: Any = None) -> str | None:
    """SQL text of a filter: a string as is; a PySpark Column (classic) through Spark's analyzer
    over an empty DataFrame of the table's `schema` (Spark 4 Columns print in prefix form);
    literal suffixes (`5L`, `1.5D`, `2BD`) are dropped. None when it cannot be had."""
    if isinstance(f, str):
        return f
    if spark is not None and schema is not None:
        try:
            plan = spark.createDataFrame([], schema).filter(f)._jdf.queryExecution().analyzed()
            return _SUFFIX.sub(r"\1", plan.condition().sql())
        except Exception:
            pass
    s = str(f)  # Spark Connect
    if s.startswith("Column<'") and s.endswith("'>"):
        return s[len("Column<'"):-2]
    return None


def parse_filters(filters: Iterable[Any], spark: Any = None, schema: Any = None) -> list:
    import sqlglot

    out = []
    for f in filters:
        text = filter_sql(f, spark, schema)
        if not text:
            continue
        try:
            out.append(sqlglot.parse_one(text, read="spark"))
        except Exception:
            continue
    return out


class _Unknown(Exception):
    pass


class _FileCtx:
    """What is known about one file: exact partition values, and stats bounds of data columns."""

    def __init__(self, pv: dict, stats, cols: dict, tz: ZoneInfo):
        self.pv = pv
        self.stats = stats
        self.cols = cols  # lower-case logical name → (field, is_partition, physical key)
        self.tz = tz


def _literal(node, dt, tz):
    from sqlglot import exp

    if isinstance(node, exp.Neg):
        v = _literal(node.this, dt, tz)
        return -v
    if isinstance(node, exp.Paren):
        return _literal(node.this, dt, tz)
    if isinstance(node, exp.Cast):
        return _literal(node.this, dt, tz)
    if isinstance(node, (exp.Date, exp.TsOrDsToDate)) and node.args.get("this") is not None:
        return _literal(node.this, dt, tz)
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if not isinstance(node, exp.Literal):
        raise _Unknown()
    text = node.this
    name = dt.name if isinstance(dt, PrimitiveType) else ("decimal" if isinstance(dt, DecimalType) else None)
    if name is None:
        raise _Unknown()
    if node.is_string:
        if name == "string":
            return text
        if name == "date":
            return _dt.date.fromisoformat(text.strip()[:10])
        if name in ("timestamp", "timestamp_ntz"):
            t = text.strip().replace(" ", "T", 1)
            if t.endswith(("Z", "z")):
                t = t[:-1] + "+00:00"
            d = _dt.datetime.fromisoformat(t)
            if name == "timestamp_ntz":
                return d.replace(tzinfo=None)
            if d.tzinfo is None:
                d = d.replace(tzinfo=tz)
            return d.astimezone(_dt.timezone.utc)
    if name in ("byte", "short", "integer", "long", "float", "double", "decimal"):
        d = Decimal(text)
        if name in ("float", "double"):
            return float(d)
        return d
    if name == "string":
        return text
    raise _Unknown()


def _column(node, ctx: _FileCtx):
    from sqlglot import exp

    if isinstance(node, exp.Paren):
        return _column(node.this, ctx)
    if not isinstance(node, exp.Column) or node.table:
        raise _Unknown()
    entry = ctx.cols.get(node.name.lower())
    if entry is None:
        raise _Unknown()
    return entry


def _num(v):
    if isinstance(v, float) and math.isnan(v):
        raise _Unknown()
    if isinstance(v, (int, Decimal)) and not isinstance(v, bool):
        return Decimal(v)
    return v


def _cmp(op: str, a, b) -> bool:
    a, b = _num(a), _num(b)
    if op == "eq":
        return a == b
    if op == "neq":
        return a != b
    if op == "lt":
        return a < b
    if op == "lte":
        return a <= b
    if op == "gt":
        return a > b
    if op == "gte":
        return a >= b
    raise _Unknown()


_FLIP = {"eq": "eq", "neq": "neq", "lt": "gt", "lte": "gte", "gt": "lt", "gte": "lte"}
_NEG = {"eq": "neq", "neq": "eq", "lt": "gte", "lte": "gt", "gt": "lte", "gte": "lt"}


def _bounds(field, key, ctx):
    st = ctx.stats
    if st is None:
        raise _Unknown()
    lo = st.min_value(key, field.type)
    hi = st.max_value(key, field.type)
    if isinstance(hi, _dt.datetime):
        hi = hi + _dt.timedelta(milliseconds=1)  # stats keep milliseconds only
    if isinstance(lo, _dt.datetime):
        lo = lo - _dt.timedelta(milliseconds=1)
    return lo, hi


def _all_null(field, key, ctx) -> bool:
    st = ctx.stats
    if st is None or st.num_records is None:
        return False
    n = st.nulls(key)
    return n is not None and n == st.num_records and st.num_records > 0


def _may_compare(op: str, colnode, litnode, ctx: _FileCtx) -> bool:
    field, is_part, key = _column(colnode, ctx)
    value = _literal(litnode, field.type, ctx.tz)
    if value is None:
        return False  # comparison with NULL is never true
    if is_part:
        pv = ctx.pv.get(key, ctx.pv.get(field.name))
        v = parse_partition_value(pv, field.type)
        if v is None:
            return False
        return _cmp(op, v, value)
    if _all_null(field, key, ctx):
        return False
    if op == "neq":
        lo, hi = _bounds(field, key, ctx)
        if lo is None or hi is None:
            return True
        if isinstance(field.type, PrimitiveType) and field.type.name == "string":
            return True  # truncated bounds: equality of bounds does not mean all equal
        return not (_cmp("eq", lo, value) and _cmp("eq", hi, value))
    lo, hi = _bounds(field, key, ctx)
    if op == "eq":
        return not ((lo is not None and _cmp("lt", value, lo)) or (hi is not None and _cmp("gt", value, hi)))
    if op in ("lt", "lte"):
        return lo is None or _cmp(op, lo, value)
    if op in ("gt", "gte"):
        return hi is None or _cmp(op, hi, value)
    raise _Unknown()


def _may(node, ctx: _FileCtx, negate: bool = False) -> bool:
    """Whether some row of the file may satisfy `node` (or NOT node when negate)."""
    from sqlglot import exp

    try:
        if isinstance(node, exp.Paren):
            return _may(node.this, ctx, negate)
        if isinstance(node, exp.Not):
            return _may(node.this, ctx, not negate)
        if isinstance(node, exp.And):
            if negate:  # NOT (a AND b) = NOT a OR NOT b
                return _may(node.left, ctx, True) or _may(node.right, ctx, True)
            return _may(node.left, ctx) and _may(node.right, ctx)
        if isinstance(node, exp.Or):
            if negate:
                return _may(node.left, ctx, True) and _may(node.right, ctx, True)
            return _may(node.left, ctx) or _may(node.right, ctx)
        ops = {exp.EQ: "eq", exp.NEQ: "neq", exp.LT: "lt", exp.LTE: "lte", exp.GT: "gt", exp.GTE: "gte"}
        for cls, op in ops.items():
            if type(node) is cls:
                if negate:
                    op = _NEG[op]
                l, r = node.left, node.right
                if isinstance(l, (exp.Column, exp.Paren)) and not isinstance(r, exp.Column):
                    return _may_compare(op, l, r, ctx)
                if isinstance(r, (exp.Column, exp.Paren)) and not isinstance(l, exp.Column):
                    return _may_compare(_FLIP[op], r, l, ctx)
                return True
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
            field, is_part, key = _column(node.this, ctx)
            want_null = not negate
            if is_part:
                is_null = parse_partition_value(ctx.pv.get(key, ctx.pv.get(field.name)), field.type) is None
                return is_null == want_null
            st = ctx.stats
            if st is None:
                return True
            n = st.nulls(key)
            if n is None:
                return True
            if want_null:
                return n > 0
            return st.num_records is None or n < st.num_records
        if isinstance(node, exp.In) and not node.args.get("query"):
            if negate:
                return True
            return any(_may_compare("eq", node.this, v, ctx) for v in node.expressions)
        if isinstance(node, exp.Between) and not negate:
            return _may_compare("gte", node.this, node.args["low"], ctx) and \
                _may_compare("lte", node.this, node.args["high"], ctx)
        if isinstance(node, exp.Boolean):
            return bool(node.this) != negate
    except _Unknown:
        return True
    except Exception:
        return True
    return True


def file_mask(files: pa.Table, filters: Iterable[Any], schema: StructType, partition_columns: list[str],
              mode: str = "none", session_tz: str = "UTC", spark: Any = None) -> np.ndarray:
    """Boolean mask over `files` (ADD_SCHEMA columns incl. partitionValues, stats): True = the
    file may hold matching rows."""
    n = files.num_rows
    keep = np.ones(n, dtype=bool)
    filters = list(filters)
    spark_schema = None
    if spark is not None and any(not isinstance(f, str) for f in filters):
        from .types import to_spark_schema
        spark_schema = to_spark_schema(schema, strip_metadata=True)
    asts = parse_filters(filters, spark, spark_schema)
    if not asts or n == 0:
        return keep
    pcs = {p.lower() for p in partition_columns}
    cols = {}
    for f in schema.fields:
        key = column_mapping.physical_name(f) if mode in ("name", "id") else f.name
        cols[f.name.lower()] = (f, f.name.lower() in pcs, key)
    try:
        tz = ZoneInfo(session_tz)
    except Exception:
        tz = ZoneInfo("UTC")
    pvs = files.column("partitionValues").to_pylist() if "partitionValues" in files.column_names else [None] * n
    stats = files.column("stats").to_pylist() if "stats" in files.column_names else [None] * n
    for i in range(n):
        pv = dict(pvs[i]) if pvs[i] else {}
        try:
            st = parse_stats(stats[i])
        except Exception:
            st = None
        ctx = _FileCtx(pv, st, cols, tz)
        for a in asts:
            if not _may(a, ctx):
                keep[i] = False
                break
    return keep


def plan_files(snapshot, filters: Iterable[Any] | None = None, session_tz: str = "UTC", spark: Any = None) -> pa.Table:
    """The snapshot's active files that may hold rows matching `filters`."""
    files = snapshot.files_table(["path", "partitionValues", "size", "stats", "deletionVector"])
    if filters and files.num_rows:
        mask = file_mask(files, list(filters), snapshot.schema, snapshot.partition_columns,
                         snapshot.column_mapping_mode, session_tz, spark)
        if not mask.all():
            files = files.filter(pa.array(mask))
    return files
