"""Per-file statistics of a parquet file from its footer (spec "Per-file Statistics"), without
reading its rows: the Delta stats JSON (`numRecords`, `minValues`, `maxValues`, `nullCount`) from the
row groups' statistics, for files a writer did not compute stats for in memory — files Spark wrote
(`tahoe.spark.write`) and the parquet files CONVERT TO DELTA adopts (`tahoe.maintenance.convert`).

Rules: a column's bounds are kept only when every row group has them (or is all null); float and
double bounds only from writers that order NaN above every value, as the Delta stats need
(`nan_ordering_writer`); strings are truncated to the table's prefix length (max bumped);
timestamps to milliseconds (max rounded up); columns absent from the file count as all null.
"""

from __future__ import annotations

import datetime as _dt
from decimal import Decimal
from typing import Any, Iterable

from ..protocol import column_mapping
from ..protocol.schema import VARIANT, DecimalType, GeoType, PrimitiveType, StructField, StructType, ArrayType, MapType
from ..protocol.stats import (
    DEFAULT_STRING_PREFIX_LENGTH, format_float_stat, stats_json, truncate_max_string, truncate_min_string,
)
from .plan import identity_mark

__all__ = ["footer_stats", "nan_ordering_writer", "float_bounds"]


def _leaf_paths(st: StructType, mapped: bool, prefix=()):
    for f in st.fields:
        key = column_mapping.physical_name(f) if mapped else f.name
        if isinstance(f.type, StructType):
            yield from _leaf_paths(f.type, mapped, prefix + (key,))
        elif isinstance(f.type, (ArrayType, MapType)):
            continue
        else:
            yield prefix + (key,), f


def _json_value(v, f: StructField, is_max: bool, prefix_len: int):
    dt = f.type
    if v is None:
        return None
    if isinstance(dt, DecimalType):
        return Decimal(v) if not isinstance(v, Decimal) else v
    name = dt.name
    if name in ("byte", "short", "integer", "long"):
        return int(v)
    if name in ("float", "double"):
        v = float(v)
        if v == 0.0:  # a bound on zero covers both signed zeros (as parquet-mr reads it, PARQUET-1246)
            v = 0.0 if is_max else -0.0
        return format_float_stat(v, name == "float")
    if name == "date":
        return v.isoformat() if hasattr(v, "isoformat") else None
    if name in ("timestamp", "timestamp_ntz"):
        if not isinstance(v, _dt.datetime):
            return None
        if v.tzinfo is not None:
            v = v.astimezone(_dt.timezone.utc).replace(tzinfo=None)
        if is_max and v.microsecond % 1000:
            v = v + _dt.timedelta(microseconds=1000 - v.microsecond % 1000)
        s = v.strftime("%Y-%m-%dT%H:%M:%S") + f".{v.microsecond // 1000:03d}"
        return s + "Z" if name == "timestamp" else s
    if name == "string":
        if isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        return truncate_max_string(v, prefix_len) if is_max else truncate_min_string(v, prefix_len)
    return None


def _arrow_leaves(schema, prefix=()):
    """Leaf column paths (tuples of names) of an Arrow schema in parquet leaf order."""
    import pyarrow as pa

    def walk(t, pre):
        if pa.types.is_struct(t):
            for i in range(t.num_fields):
                yield from walk(t.field(i).type, pre + (t.field(i).name,))
        elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            yield from walk(t.value_type, pre + ("\0list",))
        elif pa.types.is_map(t):
            yield from walk(t.key_type, pre + ("\0key",))
            yield from walk(t.item_type, pre + ("\0value",))
        else:
            yield pre

    for f in schema:
        yield from walk(f.type, prefix + (f.name,))


def _is_floating(f: StructField) -> bool:
    return isinstance(f.type, PrimitiveType) and f.type.name in ("float", "double")


def nan_ordering_writer(created_by: str | None) -> bool:
    """Whether a parquet writer's float/double min/max follow Spark's order — NaN above every
    value, so a NaN in the column makes the max NaN, as the Delta stats need. parquet-mr/-java
    orders with Float.compare/Double.compare (measured with 1.17, PySpark 4.3's: a NaN anywhere in
    a row group makes its max NaN, its min is NaN only when every value is; -0.0 < 0.0); versions
    before 1.13 (older than any PySpark 4 ships) are not trusted. Writers that leave NaN out of
    min/max (parquet-cpp/Arrow, parquet-rs) would give a finite max for a file holding NaN: their
    float bounds are dropped."""
    import re

    m = re.match(r"parquet-(?:mr|java) version (\d+)\.(\d+)", created_by or "")
    return bool(m) and (int(m.group(1)), int(m.group(2))) >= (1, 13)


def float_bounds(mins: list, maxs: list) -> tuple[float, float]:
    """A file's float bounds from its row groups' (NaN-largest order, see `nan_ordering_writer`):
    NaN is the max when any row group's max is; the min is NaN only when every min is."""
    import math

    finite_mins = [float(v) for v in mins if not math.isnan(v)]
    lo = min(finite_mins) if finite_mins else math.nan
    hi = math.nan if any(math.isnan(v) for v in maxs) else max(float(v) for v in maxs)
    return lo, hi


def footer_stats(md, stats_schema: StructType, mapped: bool, prefix_len: int = DEFAULT_STRING_PREFIX_LENGTH,
                 identity_cols: Iterable[str] = (), schema: StructType | None = None) -> tuple[str, dict]:
    """The Delta stats JSON of a parquet file from its footer (`pq.FileMetaData`), and the max (by
    step direction: min for negative steps) of identity columns."""
    n = md.num_rows
    by_path: dict[tuple, list] = {}
    arrow_schema = md.schema.to_arrow_schema()
    top_level = set(arrow_schema.names)
    if md.num_row_groups:
        leaf_paths = list(_arrow_leaves(arrow_schema))
        rg0 = md.row_group(0)
        if len(leaf_paths) == rg0.num_columns:
            for j in range(rg0.num_columns):
                by_path[leaf_paths[j]] = [md.row_group(i).column(j).statistics for i in range(md.num_row_groups)]
    mins: dict = {}
    maxs: dict = {}
    nulls: dict = {}
    floats_ok = nan_ordering_writer(md.created_by)

    def put(d, path, v):
        cur = d
        for k in path[:-1]:
            cur = cur.setdefault(k, {})
        cur[path[-1]] = v

    for path, f in _leaf_paths(stats_schema, mapped):
        sts = by_path.get(path)
        if isinstance(f.type, GeoType):   # nullCount only (no WKT bounding boxes)
            if sts is not None and all(s is not None and s.has_null_count for s in sts):
                put(nulls, path, sum(s.null_count for s in sts))
            elif sts is None and (n == 0 or path[0] not in top_level):
                put(nulls, path, n)
            continue
        if f.type == VARIANT:   # nullCount only (spec): the nulls of its required metadata leaf
            sts = by_path.get(path + ("metadata",))
            if sts is not None and all(s is not None and s.has_null_count for s in sts):
                put(nulls, path, sum(s.null_count for s in sts))
            elif sts is None and (n == 0 or path[0] not in top_level):
                put(nulls, path, n)
            continue
        if sts is None:
            if n == 0 or path[0] not in top_level:
                put(nulls, path, n)  # no rows, or the column is absent from the file: all null
            continue
        if all(s is not None and s.has_null_count for s in sts):
            put(nulls, path, sum(s.null_count for s in sts))
        if not all(s is not None and (s.has_min_max or s.null_count == s.num_values) for s in sts):
            continue
        with_mm = [s for s in sts if s.has_min_max]
        if not with_mm:
            continue
        if _is_floating(f):
            if not floats_ok:
                continue
            lo, hi = float_bounds([s.min for s in with_mm], [s.max for s in with_mm])
        else:
            try:
                lo = min(s.min for s in with_mm)
                hi = max(s.max for s in with_mm)
            except TypeError:
                continue
        jlo, jhi = _json_value(lo, f, False, prefix_len), _json_value(hi, f, True, prefix_len)
        if jlo is not None:
            put(mins, path, jlo)
        if jhi is not None:
            put(maxs, path, jhi)
    out: dict[str, Any] = {"numRecords": n, "minValues": mins, "maxValues": maxs, "nullCount": nulls}
    ident = {}
    if identity_cols and schema is not None:
        for name in identity_cols:
            f = schema.field(name)
            key = (column_mapping.physical_name(f) if mapped else f.name,)
            sts = by_path.get(key)
            if not sts or not all(s is not None and s.has_min_max for s in sts):
                continue
            ident[name] = identity_mark(f, min(s.min for s in sts), max(s.max for s in sts))
    return stats_json(out), ident
