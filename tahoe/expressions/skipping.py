"""Data skipping: which files may hold a row matching an expression, from the log alone (spec "Per-file
Statistics", "Partition Value Serialization"); `file_mask` gives a numpy mask over the files.

  1. Three-valued and conservative: per node `may_true` / `may_false`, combined as Kleene logic; a file is
     dropped only when `may_true` is surely False; anything unknown keeps the file.
  2. Partition columns are exact: expressions over them alone are evaluated by the Arrow evaluator.
  3. Bounds follow Spark's type coercion (`tahoe.expressions.coercion`); a NaN bound is unknown; a float /
     double max bounds only the numbers (`_Bounds.nan_hidden`: a NaN, above every value in Spark SQL, may
     hide behind it), so it proves `x = c`, `x < c`, `x IN (...)` false, never `x > c`; timestamp bounds
     widen by 1 ms, truncated string bounds never prove equality."""

from __future__ import annotations

import datetime as _dt
import functools
import math
import operator
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa

from ..protocol import column_mapping
from ..protocol.partition_values import parse_partition_value, partition_values_to_arrow
from ..protocol.schema import (
    DataType, DecimalType, PrimitiveType, StructField, StructType, from_arrow_type, to_arrow_type,
)
from ..protocol.stats import FileStats, JsonNumber, parse_stats
from .coercion import cast_number, comparison_types, in_type, int_literal, reduced_comparison
from .tree import (
    And, Between, Cast, Column, Comparison, Expression, Func, In, IsNull, Like, Literal, Not, Or,
)
from .evaluate import constant_value, evaluate
from .resolve import Scope

__all__ = ["FileColumn", "Binder", "schema_binder", "may_match", "file_mask"]


@dataclass(frozen=True)
class FileColumn:
    """What skipping needs about a referenced column: its type, whether it is a partition column,
    and its key — the partition value's key (physical name, then logical) or the path of the
    column in the stats (physical names)."""
    type: DataType
    partition: bool
    key: tuple[str, ...]
    name: str


Binder = Callable[[Column], "FileColumn | None"]


def schema_binder(schema: StructType, partition_columns: Sequence[str], mode: str = "none") -> Binder:
    """References resolved case-insensitively against the table schema: top-level partition
    columns, and data columns through nested structs (physical names under column mapping).
    An unknown reference binds to None (unknown: files are kept)."""
    pcs = {p.lower() for p in partition_columns}
    physical = mode in ("name", "id")

    def find(fields, name):
        exact = [f for f in fields if f.name == name]
        if exact:
            return exact[0]
        low = [f for f in fields if f.name.lower() == name.lower()]
        return low[0] if len(low) == 1 else None

    def bind(c: Column) -> FileColumn | None:
        parts = c.parts
        f = find(schema.fields, parts[0])
        if f is None:
            return None
        if f.name.lower() in pcs:
            if len(parts) != 1:
                return None
            key = column_mapping.physical_name(f) if physical else f.name
            return FileColumn(f.type, True, (key,), f.name)
        path = [column_mapping.physical_name(f) if physical else f.name]
        t = f.type
        for p in parts[1:]:
            if not isinstance(t, StructType):
                return None
            g = find(t.fields, p)
            if g is None:
                return None
            path.append(column_mapping.physical_name(g) if physical else g.name)
            t = g.type
        return FileColumn(t, False, tuple(path), ".".join(parts))

    return bind


def file_mask(expr: Expression | None, files: pa.Table, schema: StructType, partition_columns: Sequence[str],
              mode: str = "none", *, time_zone: str = "UTC") -> np.ndarray:
    """Boolean mask over `files` (columns `partitionValues` and `stats` of the log's add
    actions; either may be absent): True = the file may hold a row matching `expr`."""
    n = files.num_rows
    if expr is None or n == 0:
        return np.ones(n, dtype=bool)
    pvs = files.column("partitionValues") if "partitionValues" in files.column_names else [None] * n
    stats = files.column("stats") if "stats" in files.column_names else [None] * n
    return may_match(expr, pvs, stats, schema_binder(schema, partition_columns, mode), time_zone=time_zone)


def may_match(expr: Expression, partition_values: Sequence[Any], stats: Sequence[Any], bind: Binder, *,
              time_zone: str = "UTC", memo: dict | None = None) -> np.ndarray:
    """Per file: may it hold a row matching `expr`? `partition_values[i]` is a dict (or a list
    of key/value pairs, or None), `stats[i]` the stats JSON text, a decoded dict, a FileStats or
    None — or both are the Arrow columns of the log's add actions (a map and a string array);
    `bind` resolves column references (see `schema_binder`). A caller asking about one file at a
    time with the same `expr` and `bind` may pass the same `memo` dict to every call: what only
    depends on them is then worked out once."""
    files = _Files(partition_values, stats, bind, time_zone, memo)
    return np.array(files.may_true(expr), dtype=bool)


# --- vectors ---------------------------------------------------------------------------------
# Per-file facts are plain Python lists: bounds are Python values (dates, Decimals, strings, ...)
# whose comparisons run in Python either way, and lists keep one file (a sharing server asks per
# file) as cheap as many.

_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "=": operator.eq}


def _compare(op: str, x: list, y: list) -> tuple[list, list]:
    """(result, known) of `x op y` per file; None is unknown, and so is a pair Python cannot
    compare."""
    fn = _OPS[op]
    res, known = [], []
    for a, b in zip(x, y):
        if a is None or b is None:
            res.append(False)
            known.append(False)
            continue
        try:
            res.append(bool(fn(a, b)))
            known.append(True)
        except TypeError:
            res.append(False)
            known.append(False)
    return res, known


def _and(*vs: list) -> list:
    return [all(t) for t in zip(*vs)]


def _or(*vs: list) -> list:
    return [any(t) for t in zip(*vs)]


def _not(v: list) -> list:
    return [not x for x in v]


def _maybe(res: list, known: list) -> list:
    """True where the comparison holds or is unknown."""
    return [r or not k for r, k in zip(res, known)]


@dataclass
class _Bounds:
    """Per file: a lower and an upper bound (None: unknown) of the non-null values of a value
    expression, whether it may be NULL and whether it may be non-NULL. `exact`: lo == hi is the
    value itself (partition values, constants). `nan_hidden`: `hi` bounds the numbers only — a
    row may also be NaN (a float / double column's max: writers that leave NaN out of min/max,
    delta-rs, Arrow, footer-based stats, give a finite max for a file holding NaN)."""
    type: DataType
    lo: list
    hi: list
    may_null: list
    may_value: list
    exact: bool
    nan_hidden: bool = False


_TIMES = ("date", "timestamp_ntz", "timestamp")   # an IN list of these meets in the last present


def _name(t: DataType) -> str | None:
    if isinstance(t, DecimalType):
        return "decimal"
    return t.name if isinstance(t, PrimitiveType) else None


_INTEGRAL = {"byte", "short", "integer", "long"}
_NUMERIC = _INTEGRAL | {"float", "double", "decimal"}
_MS = _dt.timedelta(milliseconds=1)


def _clean(v: Any) -> Any:
    """A bound as a comparable Python value: NaN is unknown; JSON floats are plain floats."""
    if isinstance(v, float):
        if math.isnan(v):
            return None
        return float(v) if isinstance(v, JsonNumber) else v
    return v


@functools.lru_cache(maxsize=64)
def _zone(name: str):
    from zoneinfo import ZoneInfo

    try:
        return ZoneInfo(name)
    except Exception:
        return ZoneInfo("UTC")


class _Files:
    def __init__(self, partition_values: Sequence[Any], stats: Sequence[Any], bind: Binder, time_zone: str,
                 memo: dict | None = None):
        self.memo: dict = memo if memo is not None else {}   # id(node) → facts of the (live) tree
        self.n = len(partition_values)
        if len(stats) != self.n:
            raise ValueError("partition_values and stats must describe the same files")
        self.raw_pvs = partition_values
        self.raw_stats = stats
        self.bind = bind
        self.time_zone = time_zone or "UTC"
        self.tz = _zone(self.time_zone)
        self._pvs: list[dict] | None = None
        self._stats: list[FileStats | None] | None = None
        self._columns: dict[FileColumn, _Bounds | None] = {}

    def ones(self) -> list:
        return [True] * self.n

    def zeros(self) -> list:
        return [False] * self.n

    def unknown(self) -> tuple[list, list]:
        return self.ones(), self.ones()

    # --- the files' facts ----------------------------------------------------------------------
    @property
    def pvs(self) -> list[dict]:
        if self._pvs is None:
            raw = self.raw_pvs.to_pylist() if isinstance(self.raw_pvs, (pa.Array, pa.ChunkedArray)) else self.raw_pvs
            self._pvs = [dict(p) if p else {} for p in raw]
        return self._pvs

    @property
    def stats(self) -> list[FileStats | None]:
        if self._stats is None:
            out: list[FileStats | None] = []
            raw = self.raw_stats.to_pylist() if isinstance(self.raw_stats, (pa.Array, pa.ChunkedArray)) \
                else self.raw_stats
            for s in raw:
                try:
                    if s is None or isinstance(s, FileStats):
                        out.append(s)
                    elif isinstance(s, dict):
                        out.append(FileStats(s.get("numRecords") if isinstance(s.get("numRecords"), int) else None,
                                             s.get("minValues") or {}, s.get("maxValues") or {},
                                             s.get("nullCount") or {}, s.get("tightBounds")))
                    else:
                        out.append(parse_stats(s))
                except Exception:   # unreadable stats: nothing is known about the file
                    out.append(None)
            self._stats = out
        return self._stats

    def subset(self, idx: Sequence[int]) -> "_Files":
        """The files at positions `idx` (what is already parsed is kept)."""
        def take(raw):
            if isinstance(raw, (pa.Array, pa.ChunkedArray)):
                return raw.take(pa.array(idx, pa.int64()))
            return [raw[i] for i in idx]
        sub = _Files(take(self.raw_pvs), take(self.raw_stats), self.bind, self.time_zone, self.memo)
        if self._stats is not None:
            sub._stats = [self._stats[i] for i in idx]
        if self._pvs is not None:
            sub._pvs = [self._pvs[i] for i in idx]
        return sub

    def partition_value(self, pv: dict, fc: FileColumn) -> str | None:
        key = fc.key[0]
        if key in pv:
            return pv[key]
        if fc.name in pv:
            return pv[fc.name]
        low = key.lower()
        for k, v in pv.items():
            if k.lower() == low:
                return v
        return None

    def column(self, fc: FileColumn) -> _Bounds | None:
        if fc in self._columns:
            return self._columns[fc]
        try:
            b = self._partition_column(fc) if fc.partition else self._data_column(fc)
        except Exception:   # a value that does not parse as the column's type: unknown
            b = None
        self._columns[fc] = b
        return b

    def typed_partition_values(self, fc: FileColumn) -> list:
        """The partition column's typed Python values, one per file (parsed through Arrow, once
        per distinct value, when the files come as the log's Arrow columns)."""
        if isinstance(self.raw_pvs, (pa.Array, pa.ChunkedArray)):
            field = StructField(fc.name, fc.type, metadata={column_mapping.PHYSICAL_NAME_KEY: fc.key[0]})
            mode = "none" if fc.key[0] == fc.name else "name"
            return partition_values_to_arrow(self.raw_pvs, [field], mode, time_zone=self.time_zone)[fc.name].to_pylist()
        return [parse_partition_value(self.partition_value(pv, fc), fc.type, time_zone=self.time_zone) for pv in self.pvs]

    def _partition_column(self, fc: FileColumn) -> _Bounds:
        vals = self.typed_partition_values(fc)
        is_null = [v is None for v in vals]
        cleaned = [_clean(v) for v in vals]   # a NaN value: not null, but no usable bound
        return _Bounds(fc.type, cleaned, cleaned, is_null, _not(is_null), True)

    def _data_column(self, fc: FileColumn) -> _Bounds:
        n = self.n
        lo, hi = [None] * n, [None] * n
        may_null, may_value = [True] * n, [True] * n
        name = _name(fc.type)
        orderable = name in _NUMERIC or name in ("string", "date", "timestamp", "timestamp_ntz", "boolean")
        widen = name in ("timestamp", "timestamp_ntz")
        # a float's max bounds its numbers only: NaN sorts above every value in Spark SQL, and writers
        # that leave NaN out of min/max (delta-rs, Arrow, footer-based stats) give a finite max for a
        # file holding NaN — `x > 1000` must keep it (`compare_same`); the min is a bound (no
        # comparison with a number is true below it for NaN)
        floating = name in ("float", "double")
        path = list(fc.key)
        for i, st in enumerate(self.stats):
            if st is None:
                continue
            nulls = st.nulls(path)
            rows = st.num_records
            if rows == 0:
                may_null[i] = may_value[i] = False
                continue
            if nulls == 0:
                may_null[i] = False
            if nulls is not None and rows is not None and nulls == rows:
                may_value[i] = False
            if not orderable:
                continue
            try:
                a = _clean(st.min_value(path, fc.type))
                b = _clean(st.max_value(path, fc.type))
            except Exception:
                continue
            if isinstance(a, dict) or isinstance(b, dict):
                continue
            if widen:   # stats keep milliseconds
                a = a - _MS if a is not None else None
                b = b + _MS if b is not None else None
            lo[i], hi[i] = a, b
        return _Bounds(fc.type, lo, hi, may_null, may_value, False, nan_hidden=floating)

    # --- value expressions ---------------------------------------------------------------------
    def constant(self, e: Expression) -> _Bounds | None:
        try:
            v, t = constant_value(e, time_zone=self.time_zone)
            dt = from_arrow_type(t)
        except Exception:
            return None
        return self.const_bounds(v, dt)

    def const_bounds(self, v: Any, dt: DataType) -> _Bounds:
        is_null = v is None
        vals = [_clean(v)] * self.n
        return _Bounds(dt, vals, vals, [is_null] * self.n, [not is_null] * self.n, True)

    def columns(self, e: Expression) -> list[Column]:
        key = ("columns", id(e))
        hit = self.memo.get(key)
        if hit is None:
            hit = self.memo[key] = e.columns()
        return hit

    def binding(self, c: Column) -> FileColumn | None:
        key = ("bind", id(c))
        if key not in self.memo:
            self.memo[key] = self.bind(c)
        return self.memo[key]

    def partition_only(self, e: Expression) -> bool:
        key = ("partition_only", id(e))
        hit = self.memo.get(key)
        if hit is None:
            cols = self.columns(e)
            hit = bool(cols) and all(
                (fc := self.binding(c)) is not None and fc.partition and len(c.parts) == 1 for c in cols)
            self.memo[key] = hit
        return hit

    def exact(self, e: Expression) -> pa.Array | None:
        """`e` (reading partition columns only) evaluated over the typed partition values."""
        cols: dict[str, pa.Array] = {}
        for c in self.columns(e):
            fc = self.binding(c)
            if fc is None or c.parts[0].lower() in {k.lower() for k in cols}:
                continue
            try:
                cols[c.parts[0]] = pa.array(self.typed_partition_values(fc), to_arrow_type(fc.type))
            except Exception:
                return None
        try:
            return evaluate(e, Scope.of(pa.table(cols)), time_zone=self.time_zone, num_rows=self.n)
        except Exception:
            return None

    def bounds(self, e: Expression) -> _Bounds | None:
        if isinstance(e, Column):
            fc = self.binding(e)
            return self.column(fc) if fc is not None else None
        if isinstance(e, Literal):
            return self.const_bounds(e.value, e.type)
        if not self.columns(e):
            return self.constant(e)
        if isinstance(e, Cast) and not e.safe:
            inner = self.bounds(e.child)
            return self.cast_bounds(inner, e.type) if inner is not None else None
        if self.partition_only(e):
            arr = self.exact(e)
            if arr is None:
                return None
            try:
                dt = from_arrow_type(arr.type)
            except Exception:
                return None
            raw = arr.to_pylist()
            is_null = [v is None for v in raw]
            vals = [_clean(v) for v in raw]
            return _Bounds(dt, vals, vals, is_null, _not(is_null), True)
        return None

    # --- coercion ------------------------------------------------------------------------------
    def cast_bounds(self, b: _Bounds, to: DataType) -> _Bounds | None:
        """Bounds of CAST(x AS to) where the cast keeps the order: numbers to numbers (Spark's
        casts, `tahoe.expressions.coercion`, are monotone: rounding and truncation never swap
        two values), date → timestamp, timestamp_ntz ↔ timestamp; None otherwise. A bound that
        does not survive the cast (out of the target's range, NaN, ±Infinity into an exact
        type) makes the file's bounds unknown — out of range, a legacy cast wraps around."""
        src, dst = _name(b.type), _name(to)
        if b.type == to:
            return b
        if b.nan_hidden and dst not in ("float", "double"):
            # NaN cast to an exact type is 0 (legacy), NULL (decimal) or an error (ANSI): anywhere
            unknown = [None] * len(b.lo)
            return _Bounds(to, unknown, unknown, [True] * len(b.lo), b.may_value, False)
        if src in _NUMERIC and dst in _NUMERIC:
            def conv(v):
                try:
                    return cast_number(v, to)
                except (ArithmeticError, ValueError, TypeError):
                    return None
            lo = [None if v is None else conv(v) for v in b.lo]
            hi = lo if b.exact else [None if v is None else conv(v) for v in b.hi]
            exact = b.exact
            if src in _INTEGRAL and dst == "float":
                # Spark may drop this FLOAT rounding (coercion rule 7): bounds for both readings
                lo = [v if v is None else min(v, float(x)) for v, x in zip(lo, b.lo)]
                hi = [v if v is None else max(v, float(x)) for v, x in zip(hi, b.hi)]
                exact = exact and lo == hi
            if not b.exact:
                gone = [(x is not None and y is None) or (u is not None and w is None)
                        for x, y, u, w in zip(b.lo, lo, b.hi, hi)]
                lo = [None if g else v for v, g in zip(lo, gone)]
                hi = [None if g else v for v, g in zip(hi, gone)]
            return _Bounds(to, [_clean(v) for v in lo], [_clean(v) for v in hi], b.may_null, b.may_value, exact,
                           b.nan_hidden)
        if dst in ("timestamp", "timestamp_ntz") and src in ("date", "timestamp", "timestamp_ntz"):
            return self.map_bounds(b, to, lambda v: self.to_timestamp(v, dst))
        return None

    def map_bounds(self, b: _Bounds, to: DataType, fn: Callable[[Any], Any]) -> _Bounds:
        lo = [None if v is None else fn(v) for v in b.lo]
        hi = lo if b.exact else [None if v is None else fn(v) for v in b.hi]
        return _Bounds(to, lo, hi, b.may_null, b.may_value, b.exact)

    def to_timestamp(self, v: Any, dst: str) -> Any:
        if isinstance(v, _dt.datetime):
            if dst == "timestamp":
                return v if v.tzinfo is not None else v.replace(tzinfo=self.tz).astimezone(_dt.timezone.utc)
            return v if v.tzinfo is None else v.astimezone(self.tz).replace(tzinfo=None)
        if isinstance(v, _dt.date):
            d = _dt.datetime(v.year, v.month, v.day)
            return d.replace(tzinfo=self.tz).astimezone(_dt.timezone.utc) if dst == "timestamp" else d
        return v

    def convert_exact(self, b: _Bounds, to: DataType) -> _Bounds | None:
        """Exact values (constants, partition values) read as type `to`, as Spark casts the
        string side of a comparison; None when one does not convert."""
        done: dict[Any, Any] = {}
        out = []
        for v in b.lo:
            if v is None:
                out.append(None)
                continue
            key = (type(v), v)
            if key not in done:
                try:
                    done[key] = _clean(constant_value(Cast(Literal(v, b.type), to), time_zone=self.time_zone)[0])
                except Exception:
                    return None
            out.append(done[key])
        return _Bounds(to, out, out, b.may_null, b.may_value, True)

    def unify(self, a: _Bounds, b: _Bounds, lit_a: Any = None, lit_b: Any = None) -> list[tuple[_Bounds, _Bounds]] | None:
        """The two sides of a comparison in one comparable type (Spark's implicit casts), or
        None when that cannot be done on bounds. Where ANSI mode and legacy mode cast
        differently, both pairs: a file is kept when either may match. `lit_a` / `lit_b`: the
        value of a side that is an integer literal (`coercion` rule 4)."""
        na, nb = _name(a.type), _name(b.type)
        if a.type == b.type or "void" in (na, nb):
            return [(a, b)]
        if na in _NUMERIC and nb in _NUMERIC:
            out = []
            for t in comparison_types(a.type, b.type, a_literal=lit_a, b_literal=lit_b):
                ca, cb = self.cast_bounds(a, t), self.cast_bounds(b, t)
                if ca is None or cb is None:
                    return None
                out.append((ca, cb))
            return out
        if na == "string" or nb == "string":
            if na == "string" and a.exact:
                pairs = self.string_pairs(b, a) if nb in _NUMERIC else None
                out = [(y, x) for x, y in pairs] if pairs is not None else None
                if out is None:
                    ca = self.convert_exact(a, b.type)
                    out = [(ca, b)] if ca is not None else None
                return out
            if nb == "string" and b.exact:
                out = self.string_pairs(a, b) if na in _NUMERIC else None
                if out is None:
                    cb = self.convert_exact(b, a.type)
                    out = [(a, cb)] if cb is not None else None
                return out
            return None
        times = ("date", "timestamp", "timestamp_ntz")
        if na in times and nb in times:
            target = "timestamp" if "timestamp" in (na, nb) else "timestamp_ntz"
            ta = a if na == target else self.cast_bounds(a, PrimitiveType(target))
            tb = b if nb == target else self.cast_bounds(b, PrimitiveType(target))
            return [(ta, tb)] if ta is not None and tb is not None else None
        return None

    def string_pairs(self, num: _Bounds, text: _Bounds) -> list[tuple[_Bounds, _Bounds]] | None:
        """A number compared with exact strings: ANSI mode casts both to BIGINT (an integer
        side) or DOUBLE; legacy mode reads the string as the number's type (an integer
        truncated: `i = '1.5'` is `i = 1`; a DECIMAL as DOUBLE). None when a string does not
        read."""
        integral = _name(num.type) in _INTEGRAL
        out = []
        ansi_t = PrimitiveType("long") if integral else PrimitiveType("double")
        ct = self.convert_exact(text, ansi_t)
        cn = self.cast_bounds(num, ansi_t)
        if ct is None or cn is None:
            return None
        out.append((cn, ct))
        if _name(num.type) == "float":
            cf = self.convert_exact(text, num.type)
            if cf is None:
                return None
            out.append((num, cf))
        if integral:
            def legacy(v):
                try:
                    f = Decimal(str(v).strip())
                except Exception:
                    raise ValueError(v) from None
                return cast_number(int(f), num.type) if f.is_finite() else None
            try:
                vals = [None if v is None else legacy(v) for v in text.lo]
            except ValueError:
                return None
            out.append((num, _Bounds(num.type, vals, vals, text.may_null, text.may_value, True)))
        return out

    # --- predicates ----------------------------------------------------------------------------
    def may_true(self, e: Expression) -> list:
        """may_true only (the answer for the whole expression). AND / OR evaluate their right side
        only on the files the left side leaves open, as a per-file evaluation would: a selective
        partition condition spares parsing the stats of the files it rules out."""
        if isinstance(e, (And, Or)):
            left = self.may_true(e.left)
            want = isinstance(e, And)
            todo = [i for i, v in enumerate(left) if v == want]
            if not todo:
                return left
            right = (self if len(todo) == self.n else self.subset(todo)).may_true(e.right)
            out = list(left)
            for i, v in zip(todo, right):
                out[i] = v
            return out
        t, _ = self.tf(e)
        return t

    def tf(self, e: Expression) -> tuple[list, list]:
        """(may_true, may_false) per file."""
        try:
            return self._tf(e)
        except RecursionError:
            raise
        except Exception:   # anything not understood keeps the file
            return self.unknown()

    def _tf(self, e: Expression) -> tuple[list, list]:
        if isinstance(e, Not):
            t, f = self.tf(e.child)
            return f, t
        if isinstance(e, And):
            lt, lf = self.tf(e.left)
            rt, rf = self.tf(e.right)
            return _and(lt, rt), _or(lf, rf)
        if isinstance(e, Or):
            lt, lf = self.tf(e.left)
            rt, rf = self.tf(e.right)
            return _or(lt, rt), _and(lf, rf)
        if not self.columns(e):
            b = self.const_bounds(e.value, e.type) if isinstance(e, Literal) else self.constant(e)
            if b is None:
                return self.unknown()
            v = b.lo[0] if self.n else None
            return [v is True] * self.n, [v is False] * self.n
        if isinstance(e, Comparison):
            a, b = self.bounds(e.left), self.bounds(e.right)
            if a is not None and b is not None:
                const = reduced_comparison(e.op, a.type, b.type, e.left, e.right)
                if const is not None:   # Spark's constant, NULL rows included (coercion rule 6)
                    return [const] * self.n, [not const] * self.n
                return self.compare(e.op, a, b, int_literal(e.left), int_literal(e.right))
        elif isinstance(e, IsNull):
            b = self.bounds(e.child)
            if b is not None:
                return list(b.may_null), list(b.may_value)
        elif isinstance(e, In):
            v = self.bounds(e.value)
            items = [self.bounds(x) for x in e.items]
            if v is not None and all(x is not None for x in items):
                return self.in_list(v, items)
        elif isinstance(e, Between):
            v, lo, hi = self.bounds(e.value), self.bounds(e.low), self.bounds(e.high)
            if v is not None and lo is not None and hi is not None:
                at, af = self.half(">=", v, lo, e.value, e.low)
                bt, bf = self.half("<=", v, hi, e.value, e.high)
                return _and(at, bt), _or(af, bf)
        elif isinstance(e, Column) or (isinstance(e, Cast) and isinstance(e.child, Column)):
            b = self.bounds(e)
            if b is not None and _name(b.type) == "boolean":
                return self.boolean(b)
        if self.partition_only(e):
            arr = self.exact(e)
            if arr is not None and (pa.types.is_boolean(arr.type) or pa.types.is_null(arr.type)):
                vals = arr.to_pylist()
                return [v is True for v in vals], [v is False for v in vals]
            return self.unknown()
        if isinstance(e, Like) and not e.case_insensitive and e.escape in (None, "\\"):
            return self.like_prefix(e.value, e.pattern, like=True)
        if isinstance(e, Func) and e.name == "startswith" and len(e.args) == 2:
            return self.like_prefix(e.args[0], e.args[1], like=False)
        return self.unknown()

    def half(self, op: str, a: _Bounds, b: _Bounds, left: Expression, right: Expression) -> tuple[list, list]:
        """One comparison of a BETWEEN."""
        const = reduced_comparison(op, a.type, b.type, left, right)
        if const is not None:
            return [const] * self.n, [not const] * self.n
        return self.compare(op, a, b, int_literal(left), int_literal(right))

    def in_list(self, v: _Bounds, items: list[_Bounds]) -> tuple[list, list]:
        """`v IN (items)`: numbers are first cast to the one type of the whole list (per mode:
        a file is kept when either may match); anything else compares item by item."""
        types = [v.type, *(x.type for x in items)]
        modes = []
        if any(_name(t) in _NUMERIC for t in types) and \
                all(_name(t) in _NUMERIC or _name(t) in ("void", "string") for t in types):
            for ansi in (True, False):
                t = in_type(types, ansi=ansi)
                if t is None or _name(t) == "string":   # legacy: numbers compared as text
                    return self.unknown()
                if t not in modes:
                    modes.append(t)
        if not modes:
            items = self.time_items(v, items)
            if items is None:
                return self.unknown()
            t, f = self.zeros(), self.ones()
            for x in items:
                xt, xf = self.compare("=", v, x)
                t, f = _or(t, xt), _and(f, xf)
            return t, f
        t_all, f_all = self.zeros(), self.zeros()
        for target in modes:
            cv, *cis = [x if _name(x.type) == "void" else self.to_type(x, target) for x in (v, *items)]
            if cv is None or any(c is None for c in cis):
                return self.unknown()
            t, f = self.zeros(), self.ones()
            for x in cis:
                xt, xf = self.compare_same("=", cv, x)
                t, f = _or(t, xt), _and(f, xf)
            t_all, f_all = _or(t_all, t), _or(f_all, f)
        return t_all, f_all

    def time_items(self, v: _Bounds, items: list[_Bounds]) -> list[_Bounds] | None:
        """The items of `v IN (items)` as Spark compares them where dates, timestamps and
        strings meet: Spark casts the value and every item to the list's one type (DATE <
        TIMESTAMP_NTZ < TIMESTAMP, a string taking the other side's type), so an item whose own
        comparison with `v` would meet in another type is cast to the list's first (`d IN
        ('2024-03-31 01:30:00', TIMESTAMP '...')` compares as TIMESTAMPs, not DATEs). None when
        an item does not convert."""
        names = [_name(x.type) for x in (v, *items)]
        if not any(n in _TIMES for n in names) or not all(n in _TIMES or n in ("string", "void") for n in names):
            return items
        top = max((n for n in names if n in _TIMES), key=_TIMES.index)
        nv = names[0]
        out = []
        for x, nx in zip(items, names[1:]):
            if nx in ("string", "void"):
                pair = nv
            elif nv in ("string", "void"):
                pair = nx
            else:
                pair = max(nv, nx, key=_TIMES.index)
            if pair != top and nx != "void":
                x = self.to_type(x, PrimitiveType(top))
                if x is None:
                    return None
            out.append(x)
        return out

    def to_type(self, b: _Bounds, to: DataType) -> _Bounds | None:
        """`b` cast to `to`: numbers by Spark's casts, exact strings as Spark reads them."""
        if _name(b.type) == "string":
            return self.convert_exact(b, to) if b.exact else None
        return self.cast_bounds(b, to)

    def boolean(self, b: _Bounds) -> tuple[list, list]:
        hi_true, hi_known = _compare("=", b.hi, [True] * self.n)
        lo_false, lo_known = _compare("=", b.lo, [False] * self.n)
        return _and(b.may_value, _maybe(hi_true, hi_known)), _and(b.may_value, _maybe(lo_false, lo_known))

    def compare(self, op: str, a: _Bounds, b: _Bounds, lit_a: Any = None, lit_b: Any = None) -> tuple[list, list]:
        pairs = self.unify(a, b, lit_a, lit_b)
        if pairs is None:
            return self.unknown()
        t, f = self.zeros(), self.zeros()
        for x, y in pairs:
            xt, xf = self.compare_same(op, x, y)
            t, f = _or(t, xt), _or(f, xf)
        return t, f

    def compare_same(self, op: str, a: _Bounds, b: _Bounds) -> tuple[list, list]:
        """(may_true, may_false) of `a op b`, both sides of one type."""
        if op == "<=>":
            et, ef = self.compare_same("=", a, b)
            both_null = _and(a.may_null, b.may_null)
            one_null = _or(_and(a.may_null, b.may_value), _and(b.may_null, a.may_value))
            return _or(et, both_null), _or(ef, one_null)
        if op == "<>":
            et, ef = self.compare_same("=", a, b)
            return ef, et
        if a.nan_hidden or b.nan_hidden:
            return self.compare_nan(op, a, b)
        both = _and(a.may_value, b.may_value)
        if op == "=":
            below, k1 = _compare("<", a.hi, b.lo)
            above, k2 = _compare(">", a.lo, b.hi)
            t = [not ((x and p) or (y and q)) for x, p, y, q in zip(below, k1, above, k2)]
            trust = all(x.exact or _name(x.type) not in ("string", "binary") for x in (a, b))
            if trust:   # every row equal to the one value: the comparison cannot be false
                e1, q1 = _compare("=", a.lo, a.hi)
                e2, q2 = _compare("=", a.lo, b.lo)
                e3, q3 = _compare("=", b.lo, b.hi)
                f = _not(_and(e1, q1, e2, q2, e3, q3))
            else:
                f = self.ones()
            return _and(t, both), _and(f, both)
        strict = op in ("<", ">")
        if op in ("<", "<="):
            t, kt = _compare(op, a.lo, b.hi)
            f, kf = _compare(">=" if strict else ">", a.hi, b.lo)
        else:
            t, kt = _compare(op, a.hi, b.lo)
            f, kf = _compare("<=" if strict else "<", a.lo, b.hi)
        return _and(_maybe(t, kt), both), _and(_maybe(f, kf), both)

    def compare_nan(self, op: str, a: _Bounds, b: _Bounds) -> tuple[list, list]:
        """`compare_same` where a side's max bounds its numbers only (`nan_hidden`). Against an
        exact number (a constant, a partition value) the numbers are compared by their bounds and
        a hidden NaN row by Spark SQL's order — NaN above every value: `NaN > c`, `NaN >= c` hold,
        `NaN = c`, `NaN < c`, `NaN <= c` do not. Anything else (NaN on both sides, a NaN or
        unknown constant) drops the max."""
        none = [None] * self.n
        if a.nan_hidden and b.nan_hidden or not (b.exact if a.nan_hidden else a.exact):
            a = replace(a, hi=none, nan_hidden=False) if a.nan_hidden else a
            b = replace(b, hi=none, nan_hidden=False) if b.nan_hidden else b
            return self.compare_same(op, a, b)
        side, other = (a, b) if a.nan_hidden else (b, a)
        t, f = self.compare_same(op, replace(a, nan_hidden=False), replace(b, nan_hidden=False))
        t0, f0 = self.compare_same(op, replace(a, hi=none, nan_hidden=False) if a is side else a,
                                   replace(b, hi=none, nan_hidden=False) if b is side else b)
        holds = op in (">", ">=") if side is a else op in ("<", "<=")   # NaN (left) > c; c < NaN (right)
        nan_rows = _and(side.may_value, other.may_value)
        if holds:
            t = _or(t, nan_rows)
        else:
            f = _or(f, nan_rows)
        number = [v is not None for v in other.lo]   # an exact number (NaN and unknown are None)
        return ([x if k else y for x, y, k in zip(t, t0, number)],
                [x if k else y for x, y, k in zip(f, f0, number)])

    def like_prefix(self, value: Expression, pattern: Expression, like: bool) -> tuple[list, list]:
        b = self.bounds(value)
        if b is None or _name(b.type) != "string" or self.columns(pattern):
            return self.unknown()
        p = self.constant(pattern)
        if p is None:
            return self.unknown()
        text = p.lo[0] if self.n else None
        if text is None:   # LIKE NULL is NULL
            return self.zeros(), self.zeros()
        if not isinstance(text, str):
            return self.unknown()
        prefix = _like_prefix(text) if like else text
        if not prefix:
            return list(b.may_value), list(b.may_value)
        pre = [prefix] * self.n
        hi_ok, k1 = _compare(">=", b.hi, pre)
        lo_ok, k2 = _compare("<=", [None if v is None else v[:len(prefix)] for v in b.lo], pre)
        return _and(_maybe(hi_ok, k1), _maybe(lo_ok, k2), b.may_value), list(b.may_value)


def _like_prefix(pattern: str) -> str:
    """The literal characters a LIKE pattern starts with (before its first wildcard)."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out.append(pattern[i + 1])
            i += 2
            continue
        if ch in "%_":
            break
        out.append(ch)
        i += 1
    return "".join(out)
