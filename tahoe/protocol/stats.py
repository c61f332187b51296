"""Per-file statistics (spec "Per-file Statistics"): the `add.stats` JSON parsed (`parse_stats` → `FileStats`,
`typed_value`) and computed for rows about to be written (`compute_stats`), the way delta-spark does.

  1. `numRecords`; `minValues`/`maxValues`/`nullCount` nested like the schema, physical names under mapping.
  2. Indexed: the first `delta.dataSkippingNumIndexedCols` leaves (32) or `delta.dataSkippingStatsColumns`.
  3. min/max for numbers, dates, timestamps and strings only; strings cut to a 32-character prefix.
  4. Timestamps with milliseconds, the max rounded up; NaN the largest value, written "NaN"/"Infinity".
  5. Raw values stay exact (`JsonNumber`); `min_value` / `max_value` are trustworthy bounds, widened where
     another writer rounded a DECIMAL or BIGINT through a double (`bound_value`)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal, Inexact, InvalidOperation
from typing import Any, Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CorruptLogError, SchemaError
from .column_paths import split_column_path
from .properties import DEFAULT_NUM_INDEXED_COLS, DEFAULT_STRING_PREFIX_LENGTH
from .schema import DataType, DecimalType, PrimitiveType, StructField, StructType

__all__ = [
    "FileStats", "JsonNumber", "parse_stats", "typed_value", "bound_value", "get_nested", "compute_stats",
    "stats_columns", "truncate_min_string", "truncate_max_string", "stats_json",
    "format_float_stat", "eligible_for_stats", "DEFAULT_NUM_INDEXED_COLS", "DEFAULT_STRING_PREFIX_LENGTH",
]

_PHYSICAL_NAME_KEY = "delta.columnMapping.physicalName"
_EPOCH = datetime(1970, 1, 1)
_DEC_CTX = Context(prec=100)


# --- parsing -----------------------------------------------------------------------------------

class JsonNumber(float):
    """A non-integer JSON number: behaves as a float, remembers its exact source text."""

    __slots__ = ("text",)

    def __new__(cls, text: str) -> "JsonNumber":
        obj = super().__new__(cls, text)
        obj.text = text
        return obj

    def __reduce__(self):
        return (JsonNumber, (self.text,))


_DECODER = json.JSONDecoder(parse_float=JsonNumber)   # one decoder: stats are parsed per file


@dataclass
class FileStats:
    num_records: int | None
    min_values: dict = field(default_factory=dict)
    max_values: dict = field(default_factory=dict)
    null_count: dict = field(default_factory=dict)
    tight_bounds: bool | None = None

    def min_value(self, path: str | Sequence[str], dt: DataType) -> Any:
        """A lower bound of the (physical) column at `path` (its typed minimum, widened where the
        JSON number may be a double's rounding of it, see `bound_value`), or None when not
        recorded."""
        return bound_value(get_nested(self.min_values, path), dt, upper=False)

    def max_value(self, path: str | Sequence[str], dt: DataType) -> Any:
        """An upper bound of the column at `path` (see `min_value`)."""
        return bound_value(get_nested(self.max_values, path), dt, upper=True)

    def nulls(self, path: str | Sequence[str]) -> int | None:
        v = get_nested(self.null_count, path)
        return v if isinstance(v, int) and not isinstance(v, bool) else None


def parse_stats(text: str | None) -> FileStats | None:
    """The stats of an add/remove action (None when absent or empty). Malformed JSON, or a JSON
    value that is not a stats object, raises CorruptLogError."""
    if text is None or text == "":
        return None
    try:
        obj = _DECODER.decode(text if isinstance(text, str) else bytes(text).decode("utf-8"))
    except (TypeError, ValueError) as e:
        raise CorruptLogError(f"file statistics are not valid JSON ({e}): {str(text)[:200]!r}") from None
    if not isinstance(obj, dict):
        raise CorruptLogError(f"file statistics must be a JSON object: {str(text)[:200]!r}")
    n = obj.get("numRecords")
    if n is not None:
        if isinstance(n, float) and n.is_integer():
            n = int(n)
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise CorruptLogError(f"file statistics have an invalid numRecords: {n!r}")
    parts = {}
    for key in ("minValues", "maxValues", "nullCount"):
        v = obj.get(key)
        if v is None:
            v = {}
        if not isinstance(v, dict):
            raise CorruptLogError(f"file statistics field {key} must be an object, got {v!r}")
        parts[key] = v
    tb = obj.get("tightBounds")
    if tb is not None and not isinstance(tb, bool):
        raise CorruptLogError(f"file statistics have an invalid tightBounds: {tb!r}")
    return FileStats(n, parts["minValues"], parts["maxValues"], parts["nullCount"], tb)


def get_nested(d: dict | None, path: str | Sequence[str]) -> Any:
    """`d[p0][p1]...` or None when any step is missing. A string path is ONE name (column names
    may contain dots); pass a list for nested columns."""
    parts = [path] if isinstance(path, str) else list(path)
    cur: Any = d
    for p in parts:
        if not isinstance(cur, dict) or p not in cur:
            return None
        cur = cur[p]
    return cur


def _parse_iso_ts(s: str, ntz: bool) -> datetime:
    t = s.strip()
    if t.endswith(("Z", "z")):
        t = t[:-1] + "+00:00"
    d = datetime.fromisoformat(t)
    if ntz:
        return d.replace(tzinfo=None) if d.tzinfo is None else d.astimezone(timezone.utc).replace(tzinfo=None)
    if d.tzinfo is None:
        return d.replace(tzinfo=timezone.utc)
    return d.astimezone(timezone.utc)


def typed_value(raw: Any, dt: DataType) -> Any:
    """A stats JSON value as a Python value of the column type: ints, floats (NaN/Infinity
    strings accepted), exact Decimals, dates, UTC-aware datetimes for timestamp and naive ones
    for timestamp_ntz, str; struct types map a dict field by field. None stays None; a value that
    cannot be read as the type raises CorruptLogError."""
    if raw is None:
        return None
    try:
        if isinstance(dt, StructType):
            if not isinstance(raw, dict):
                raise ValueError("expected an object")
            return {f.name: typed_value(raw.get(f.name), f.type) for f in dt.fields if f.name in raw}
        if isinstance(dt, DecimalType):
            if isinstance(raw, bool):
                raise ValueError("boolean")
            d = Decimal(raw.text if isinstance(raw, JsonNumber) else str(raw))
            try:
                return d.quantize(Decimal(1).scaleb(-dt.scale),
                                  context=Context(prec=100, traps=[Inexact, InvalidOperation]))
            except (Inexact, InvalidOperation):
                return d
        if not isinstance(dt, PrimitiveType):
            return raw
        name = dt.name
        if name in ("byte", "short", "integer", "long"):
            if isinstance(raw, bool):
                raise ValueError("boolean")
            if isinstance(raw, int):
                return raw
            if isinstance(raw, float) and raw.is_integer():
                return int(raw)
            if isinstance(raw, str):
                return int(raw)
            raise ValueError("not an integer")
        if name in ("float", "double"):
            if isinstance(raw, bool):
                raise ValueError("boolean")
            if name == "float":   # a FLOAT column's values are float32s: so is its bound
                with np.errstate(over="ignore"):
                    return float(np.float32(float(raw)))
            return float(raw)
        if name == "string":
            return raw if isinstance(raw, str) else str(raw)
        if name == "date":
            text = str(raw).strip()
            return date.fromisoformat(text[:10] if len(text) > 10 and text[10] in "T " else text)
        if name == "timestamp":
            return _parse_iso_ts(str(raw), ntz=False)
        if name == "timestamp_ntz":
            return _parse_iso_ts(str(raw), ntz=True)
        if name == "boolean":
            if isinstance(raw, bool):
                return raw
            raise ValueError("not a boolean")
        if name == "binary":
            return raw.encode("utf-8") if isinstance(raw, str) else raw
        return raw
    except (ValueError, TypeError, InvalidOperation) as e:
        raise CorruptLogError(f"statistics value {raw!r} is not a valid {dt.simple_string()}: {e}") from None


def _rounded_through_double(raw: Any, dt: DataType) -> bool:
    """Whether a stats number may be a double's rounding of the column's true value, rather than
    the value itself: a JSON number with a fraction or exponent (`1.2345678901234567e+19`, as
    delta-rs writes decimals) for a DECIMAL that can hold values a double cannot (more than 15
    digits) or a BIGINT beyond 2^53 — unless its text has more digits than a double prints (18
    or more, as delta-spark and tahoe write a decimal: every digit of its scale), or is so small
    that every column value that size round-trips through a double (15 significant digits)."""
    if not isinstance(raw, JsonNumber):
        return False   # JSON integers and strings are read exactly
    if isinstance(dt, DecimalType):
        if dt.precision <= 15:
            return False
        d = Decimal(raw.text)
        if not d.is_finite() or len(d.as_tuple().digits) >= 18:
            return False
        return abs(d) >= Decimal(1).scaleb(15 - dt.scale)
    if isinstance(dt, PrimitiveType) and dt.name == "long":
        return math.isfinite(raw) and abs(float(raw)) >= 2.0 ** 53
    return False


def bound_value(raw: Any, dt: DataType, upper: bool) -> Any:
    """A stats min (`upper` False) or max as a typed bound (`typed_value`) that stays a true bound
    when the writer rounded the value through a double (`_rounded_through_double`): moved 8 ulps
    of that double outward (a round-to-nearest writer is off by half an ulp), to the column's
    scale (floor for a min, ceiling for a max)."""
    if not _rounded_through_double(raw, dt):
        return typed_value(raw, dt)
    d = float(raw)
    step = Decimal(math.ulp(d)) * 8
    exact = Decimal(d)
    v = _DEC_CTX.add(exact, step) if upper else _DEC_CTX.subtract(exact, step)
    if isinstance(dt, DecimalType):
        q = Decimal(1).scaleb(-dt.scale)
        return v.quantize(q, rounding=ROUND_CEILING if upper else ROUND_FLOOR, context=_DEC_CTX)
    return int(v.to_integral_value(rounding=ROUND_CEILING if upper else ROUND_FLOOR))


# --- string truncation (delta-spark's rules, lengths in UTF-16 code units like Java) ----------

_ASCII_MAX = "\x7f"
_UTF8_MAX = "\U0010ffff"


def _units(c: str) -> int:
    return 2 if ord(c) > 0xFFFF else 1


def _utf16_len(s: str) -> int:
    return len(s) + sum(1 for c in s if ord(c) > 0xFFFF)


def _prefix_chars(s: str, prefix_len: int) -> int:
    """Number of code points making up the first `prefix_len` UTF-16 units, never splitting a
    surrogate pair (a pair straddling the limit is included whole)."""
    acc = 0
    for i, c in enumerate(s):
        if acc >= prefix_len:
            return i
        acc += _units(c)
    return len(s)


def truncate_min_string(s: str | None, prefix_len: int) -> str | None:
    """A lower bound of `s` at most `prefix_len` characters long (a prefix)."""
    if s is None or _utf16_len(s) <= prefix_len:
        return s
    if prefix_len <= 0:
        return None
    return s[:_prefix_chars(s, prefix_len)]


def truncate_max_string(s: str | None, prefix_len: int) -> str | None:
    """An upper bound of `s` (in UTF-8 byte order) built from a short prefix plus a tie-breaker:
    DEL (U+007F) when the next character is below it, else U+10FFFF; the prefix grows past
    characters equal to U+10FFFF, up to twice `prefix_len`. None when no such bound exists."""
    if s is None or _utf16_len(s) <= prefix_len:
        return s
    if prefix_len <= 0:
        return None
    max_units = 2 * prefix_len
    i = _prefix_chars(s, prefix_len)
    units = _utf16_len(s[:i])
    while units <= max_units:
        if i >= len(s):
            return s
        c = s[i]
        if c == _UTF8_MAX:
            i += 1
            units += 2
        elif c < _ASCII_MAX:
            return s[:i] + _ASCII_MAX
        else:
            return s[:i] + _UTF8_MAX
    return None


# --- computing ---------------------------------------------------------------------------------

def _parse_column_path(text: str) -> list[str]:
    """`a.b.c` or with backticks `` `a.b`.c `` → parts (each stripped of surrounding spaces)."""
    parts = split_column_path(text)
    parts = [p.strip() for p in parts] if parts is not None else None
    if parts is None or any(p == "" for p in parts):
        raise SchemaError(f"invalid column name in the stats columns list: {text!r}")
    return parts


def _truncate_leaves(schema: StructType, budget: int) -> tuple[StructType, int]:
    used = 0
    out = []
    for f in schema.fields:
        if used >= budget:
            break
        if isinstance(f.type, StructType):
            inner, n = _truncate_leaves(f.type, budget - used)
            used += n
            out.append(f.with_type(inner))
        else:
            used += 1
            out.append(f)
    return StructType(out), used


def _filter_paths(schema: StructType, paths: list[list[str]]) -> StructType:
    groups: dict[str, list[list[str]]] = {}
    for p in paths:
        groups.setdefault(p[0].lower(), []).append(p[1:])
    out = []
    for f in schema.fields:
        rest = groups.get(f.name.lower())
        if rest is None:
            continue
        if any(len(r) == 0 for r in rest):
            out.append(f)
        elif isinstance(f.type, StructType):
            out.append(f.with_type(_filter_paths(f.type, rest)))
    return StructType(out)


def stats_columns(schema: StructType, num_indexed_cols: int = DEFAULT_NUM_INDEXED_COLS,
                  indexed_columns: Iterable[str] | None = None,
                  partition_columns: Iterable[str] = ()) -> StructType:
    """The (logical) part of `schema` statistics are collected on: partition columns removed, then
    either the columns named by `indexed_columns` (delta.dataSkippingStatsColumns; dotted,
    backtick-quoted, case-insensitive) or the first `num_indexed_cols` leaves (negative: all)."""
    parts = {c.lower() for c in partition_columns}
    data = StructType([f for f in schema.fields if f.name.lower() not in parts])
    if indexed_columns is not None:
        paths = [_parse_column_path(c) for c in indexed_columns if c.strip()]
        return _filter_paths(data, paths)
    if num_indexed_cols < 0:
        return data
    return _truncate_leaves(data, num_indexed_cols)[0]


def eligible_for_stats(dt: DataType) -> bool:
    """Whether data skipping collects min/max for a column of type `dt` (delta-spark's
    SkippingEligibleDataType: numbers, decimals, dates, timestamps, strings)."""
    if isinstance(dt, DecimalType):
        return True
    return isinstance(dt, PrimitiveType) and dt.name in (
        "byte", "short", "integer", "long", "float", "double", "date", "timestamp",
        "timestamp_ntz", "string")


def _find_child(names: list[str], wanted: Sequence[str]) -> int:
    for w in wanted:
        if w in names:
            return names.index(w)
    for w in wanted:
        low = w.lower()
        for i, n in enumerate(names):
            if n.lower() == low:
                return i
    return -1


def format_float_stat(v: float, is_float32: bool) -> Any:
    """A float/double stats bound as written in the stats JSON (NaN/Infinity as strings, float
    columns with the shortest text that round-trips in float32)."""
    return _fmt_float(v, is_float32)


def _fmt_float(v: float, is_float32: bool) -> Any:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    if is_float32:
        return float(str(np.float32(v)))
    return float(v)


_UNIT_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


def _fmt_millis(ms: int, with_zone: bool) -> str | None:
    try:
        d = _EPOCH + timedelta(milliseconds=ms)
    except OverflowError:
        return None
    s = (f"{d.year:04d}-{d.month:02d}-{d.day:02d}T{d.hour:02d}:{d.minute:02d}:{d.second:02d}"
         f".{d.microsecond // 1000:03d}")
    return s + "Z" if with_zone else s


def _min_max(arr: pa.Array | pa.ChunkedArray, dt: DataType, prefix_len: int) -> tuple[Any, Any]:
    """(min, max) as JSON-ready values (None when unknown) for an eligible column."""
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.cast(t.value_type)
        t = t.value_type
    if arr.null_count == len(arr):
        return None, None
    if isinstance(dt, DecimalType):
        if not pa.types.is_decimal(t):
            return None, None
        mm = pc.min_max(arr)
        return mm["min"].as_py(), mm["max"].as_py()
    name = dt.name  # type: ignore[union-attr]
    if name in ("byte", "short", "integer", "long"):
        if not pa.types.is_integer(t):
            return None, None
        mm = pc.min_max(arr)
        return mm["min"].as_py(), mm["max"].as_py()
    if name in ("float", "double"):
        if not pa.types.is_floating(t):
            return None, None
        if pa.types.is_float16(t):
            arr = arr.cast(pa.float32())
        mm = pc.min_max(arr)  # ignores NaN
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
        has_nan = pc.any(pc.is_nan(arr)).as_py()
        if has_nan:  # Spark orders NaN above every other value
            hi = float("nan")
            if lo is None:
                lo = float("nan")
        f32 = name == "float"
        return (None if lo is None else _fmt_float(lo, f32)), (None if hi is None else _fmt_float(hi, f32))
    if name == "date":
        if not pa.types.is_date(t):
            return None, None
        mm = pc.min_max(arr)
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
        return (None if lo is None else lo.isoformat()), (None if hi is None else hi.isoformat())
    if name in ("timestamp", "timestamp_ntz"):
        if not pa.types.is_timestamp(t):
            return None, None
        mm = pc.min_max(arr.cast(pa.int64()))
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
        if lo is None:
            return None, None
        per_ms = _UNIT_PER_SECOND[t.unit] // 1000 if t.unit != "s" else None
        if per_ms is None:  # seconds
            lo_ms, hi_ms = lo * 1000, hi * 1000
        else:
            lo_ms = lo // per_ms            # floor
            hi_ms = -((-hi) // per_ms)      # ceil: stays an upper bound
        z = name == "timestamp"
        return _fmt_millis(lo_ms, z), _fmt_millis(hi_ms, z)
    if name == "string":
        if not (pa.types.is_string(t) or pa.types.is_large_string(t)):
            if getattr(pa.types, "is_string_view", None) and pa.types.is_string_view(t):
                arr = arr.cast(pa.string())
            else:
                return None, None
        mm = pc.min_max(arr)
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
        return truncate_min_string(lo, prefix_len), truncate_max_string(hi, prefix_len)
    return None, None


def stats_json(v: Any) -> str:
    """A stats object (dicts of numbers, strings, Decimals, None) as the compact JSON delta-spark
    writes (Decimals exact, floats as produced by `format_float_stat`)."""
    return _emit(v)


def _emit(v: Any) -> str:
    if isinstance(v, dict):
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + _emit(x) for k, x in v.items()) + "}"
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, Decimal):
        return str(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(float(v))
    return json.dumps(v, ensure_ascii=False)


def compute_stats(table: pa.Table | pa.RecordBatch, schema: StructType,
                  num_indexed_cols: int = DEFAULT_NUM_INDEXED_COLS,
                  indexed_columns: list[str] | None = None,
                  string_prefix_length: int = DEFAULT_STRING_PREFIX_LENGTH, *,
                  column_mapping_mode: str = "none",
                  partition_columns: Iterable[str] = (),
                  tight_bounds: bool | None = None) -> str:
    """The stats JSON for `table`, the rows of one data file.

    `schema` is the table's logical schema (partition columns, if included, are skipped when
    named in `partition_columns`). Columns of `table` are found by physical name under column
    mapping (falling back to the logical name), else by name, case-insensitively as a last resort;
    a schema column absent from the data counts as all nulls. Under column mapping ('name'/'id')
    the stats are keyed by physical names. `indexed_columns` (delta.dataSkippingStatsColumns)
    takes precedence over `num_indexed_cols` (arrays and maps count as one leaf, partition columns not at
    all). min/max skip booleans, binaries, arrays and maps; a string max past the prefix gets delta-spark's
    tie-breaker, or no max; float columns use the shortest text that round-trips in float32. `tight_bounds`
    is written only when given."""
    mapped = column_mapping_mode in ("name", "id")
    target = stats_columns(schema, num_indexed_cols, indexed_columns, partition_columns)
    n = table.num_rows

    def out_name(f: StructField) -> str:
        if mapped:
            p = f.metadata.get(_PHYSICAL_NAME_KEY)
            if isinstance(p, str) and p:
                return p
        return f.name

    def candidates(f: StructField) -> list[str]:
        return [out_name(f), f.name] if mapped else [f.name]

    def collect(struct: StructType, columns: list[str], get) -> tuple[dict, dict, dict, bool]:
        mins: dict = {}
        maxs: dict = {}
        nulls: dict = {}
        any_eligible = False
        for f in struct.fields:
            key = out_name(f)
            idx = _find_child(columns, candidates(f))
            arr = get(idx) if idx >= 0 else None
            if isinstance(f.type, StructType):
                if arr is not None and pa.types.is_struct(arr.type):
                    child_names = [arr.type.field(i).name for i in range(arr.type.num_fields)]
                    parent = arr

                    def child_get(i: int, parent=parent):
                        return pc.struct_field(parent, [i])
                else:
                    child_names = []

                    def child_get(i: int):  # pragma: no cover - never called
                        return None
                cmin, cmax, cnull, celig = collect(f.type, child_names, child_get)
                if cnull:
                    nulls[key] = cnull
                if celig:
                    mins[key] = cmin
                    maxs[key] = cmax
                    any_eligible = True
                continue
            nulls[key] = n if arr is None else arr.null_count
            if arr is None or not eligible_for_stats(f.type):
                continue
            any_eligible = True
            lo, hi = _min_max(arr, f.type, string_prefix_length)
            if lo is not None:
                mins[key] = lo
            if hi is not None:
                maxs[key] = hi
        return mins, maxs, nulls, any_eligible

    names = list(table.schema.names)
    mins, maxs, nulls, eligible = collect(target, names, lambda i: table.column(i))
    out: dict[str, Any] = {"numRecords": n}
    if eligible:
        out["minValues"] = mins
        out["maxValues"] = maxs
    if nulls:
        out["nullCount"] = nulls
    if tight_bounds is not None:
        out["tightBounds"] = bool(tight_bounds)
    return _emit(out)
