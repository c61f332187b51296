"""Evaluating an expression over Arrow rows (`evaluate`, `evaluate_predicate`, `matches` on a `Scope`) with
Spark 4's semantics in ANSI mode.

  1. Three-valued logic as Spark's: comparisons with NULL are NULL, AND/OR Kleene's, `<=>` never NULL.
  2. Implicit casts as Spark makes them; numbers of two types meet as `tahoe.expressions.coercion` says.
  3. Overflow and a zero divisor raise ArithmeticException; a failed CAST NumberFormatException (TRY_CAST:
     NULL); CAST rounds decimals HALF_UP.
  4. Zone-less timestamps are read in `time_zone` (the session's; UTC by default).
  5. Unknown or ambiguous names, and operand types that do not combine (`[DATATYPE_MISMATCH]`), raise
     AnalysisException; a construct not implemented raises UnsupportedFeatureError, never skipped."""

from __future__ import annotations

import datetime as _dt
import math
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation
from typing import Any, Callable
from zoneinfo import ZoneInfo

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import (
    AnalysisException, ArithmeticException, NumberFormatException, UnsupportedFeatureError,
)
from ..protocol.schema import DOUBLE, STRING, VOID, from_arrow_type, to_arrow_type
from .coercion import (
    cast_array, comparison_type, float_cast_operand, in_type, int_literal, reduced_comparison, wider_type,
)
from .resolve import Scope, unresolved_column
from .tree import (
    And, Arithmetic, Between, Case, Cast, Column, Comparison, Expression, Func, In, IsNull, Like, Literal,
    Negate, Not, Opaque, Or, type_sql,
)

__all__ = ["evaluate", "evaluate_predicate", "matches", "constant_value", "FUNCTIONS"]

Value = Any   # pa.Array | pa.Scalar
_WIDE = Context(prec=100)   # decimal arithmetic on 38-digit values (the default context keeps 28 digits)


def evaluate(expr: Expression, scope: Scope | pa.Table | pa.RecordBatch | None = None, *,
             time_zone: str = "UTC", num_rows: int | None = None) -> pa.Array:
    """The value of `expr` for every row of `scope` (a constant is repeated). `num_rows` gives the
    length when the scope has no rows (or there is no scope: an expression without columns)."""
    if scope is not None and not isinstance(scope, Scope):
        scope = Scope.of(scope)
    n = num_rows if num_rows is not None else (scope.num_rows if scope is not None else None)
    if n is None:
        n = 1
    out = _Evaluator(scope, time_zone).ev(expr)
    return _broadcast(out, n)


def evaluate_predicate(expr: Expression, scope: Scope | pa.Table | pa.RecordBatch | None = None, *,
                       time_zone: str = "UTC", num_rows: int | None = None) -> pa.BooleanArray:
    """`expr` as a condition: a boolean per row, NULL where SQL's answer is unknown.
    AnalysisException when `expr` is not boolean."""
    out = evaluate(expr, scope, time_zone=time_zone, num_rows=num_rows)
    if pa.types.is_null(out.type):
        return out.cast(pa.bool_())
    if not pa.types.is_boolean(out.type):
        raise AnalysisException(
            f"[DATATYPE_MISMATCH] the condition {expr.to_sql()} is of type {out.type}, not boolean")
    return out


def matches(expr: Expression, scope: Scope | pa.Table | pa.RecordBatch | None = None, *,
            time_zone: str = "UTC", num_rows: int | None = None) -> pa.BooleanArray:
    """TRUE for the rows where `expr` is TRUE, FALSE where it is FALSE or NULL (a WHERE clause)."""
    return pc.fill_null(evaluate_predicate(expr, scope, time_zone=time_zone, num_rows=num_rows), False)


def constant_value(expr: Expression, *, time_zone: str = "UTC") -> tuple[Any, pa.DataType]:
    """(Python value, Arrow type) of an expression that reads no column."""
    out = _Evaluator(None, time_zone).ev(expr)
    if _is_arr(out):
        out = out[0]
    return out.as_py(), out.type


# --- helpers -----------------------------------------------------------------------------------

def _is_arr(v: Any) -> bool:
    return isinstance(v, (pa.Array, pa.ChunkedArray))


def _broadcast(v: Value, n: int) -> pa.Array:
    if isinstance(v, pa.ChunkedArray):
        v = v.combine_chunks()
    if _is_arr(v):
        return v
    if pa.types.is_null(v.type):
        return pa.nulls(n)
    return pa.repeat(v, n) if v.is_valid else pa.nulls(n, v.type)


def _null_scalar(t: pa.DataType) -> pa.Scalar:
    return pa.scalar(None, t)


def _numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


def _stringy(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _time_list_type(types: list[pa.DataType]) -> pa.DataType | None:
    """The one type of an IN list of dates, timestamps, strings and NULLs (at least one date or
    timestamp): the widest of DATE < TIMESTAMP_NTZ < TIMESTAMP; None for any other list."""
    def rank(t):
        if pa.types.is_date(t):
            return 0
        if pa.types.is_timestamp(t):
            return 1 if t.tz is None else 2
        return None
    best = None
    for t in types:
        r = rank(t)
        if r is None:
            if not (_stringy(t) or pa.types.is_null(t)):
                return None
            continue
        if best is None or r > rank(best):
            best = t
    if best is not None and pa.types.is_timestamp(best):
        best = pa.timestamp("us", tz=best.tz)
    return best


def _temporal(t: pa.DataType) -> bool:
    return pa.types.is_date(t) or pa.types.is_timestamp(t)


def _tahoe_type(t: pa.DataType):
    try:
        return from_arrow_type(t)
    except Exception:
        return None


def _sql_type(t: pa.DataType) -> str:
    try:
        from ..protocol.schema import from_arrow_type

        return type_sql(from_arrow_type(t))
    except Exception:
        return str(t)


_INT_LIMITS = {8: (-(1 << 7), (1 << 7) - 1), 16: (-(1 << 15), (1 << 15) - 1),
               32: (-(1 << 31), (1 << 31) - 1), 64: (-(1 << 63), (1 << 63) - 1)}
_BOOL_TEXT = {"true": True, "t": True, "yes": True, "y": True, "1": True,
              "false": False, "f": False, "no": False, "n": False, "0": False}


def _java_double_str(x: float, float32: bool = False) -> str:
    """Java's Double.toString / Float.toString (how Spark casts floats to strings): the shortest
    digits that read back, plain between 1e-3 and 1e7, else `d.dddE±n`."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    r = np.format_float_scientific(np.float32(x), unique=True) if float32 else repr(x)
    d = Decimal(r)
    if 1e-3 <= abs(x) < 1e7:
        s = format(d.normalize(), "f")
        return s if "." in s else s + ".0"
    sign, digits, exp = d.normalize().as_tuple()
    ds = "".join(map(str, digits))
    e = exp + len(digits) - 1
    return ("-" if sign else "") + ds[0] + "." + (ds[1:] or "0") + f"E{e}"


# --- the evaluator -----------------------------------------------------------------------------

class _Evaluator:
    def __init__(self, scope: Scope | None, time_zone: str):
        self.scope = scope
        self.tz_name = time_zone or "UTC"
        try:
            self.tz = ZoneInfo(self.tz_name)
        except Exception:
            raise AnalysisException(f"[INVALID_TIMEZONE] unknown time zone {time_zone!r}") from None

    # --- errors ------------------------------------------------------------------------------
    def call(self, fn: Callable, *args: Any, node: Expression) -> Any:
        try:
            return fn(*args)
        except (AnalysisException, ArithmeticException, NumberFormatException, UnsupportedFeatureError):
            raise
        except pa.ArrowInvalid as e:
            msg = str(e)
            low = msg.lower()
            if "overflow" in low:
                raise ArithmeticException(f"[ARITHMETIC_OVERFLOW] {msg} in {node.to_sql()}") from None
            if "divide by zero" in low:
                raise ArithmeticException(f"[DIVIDE_BY_ZERO] Division by zero in {node.to_sql()}") from None
            raise AnalysisException(f"[DATATYPE_MISMATCH] cannot evaluate {node.to_sql()}: {msg}") from None
        except (pa.ArrowNotImplementedError, pa.ArrowTypeError, TypeError) as e:
            types = ", ".join(_sql_type(a.type) for a in args if hasattr(a, "type"))
            raise AnalysisException(
                f"[DATATYPE_MISMATCH] cannot evaluate {node.to_sql()} on operands of types ({types}): "
                f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from None

    # --- dispatch ----------------------------------------------------------------------------
    def ev(self, n: Expression) -> Value:
        m = getattr(self, "ev_" + type(n).__name__, None)
        if m is None:   # pragma: no cover - every node type has a method
            raise UnsupportedFeatureError(f"cannot evaluate {n.to_sql()} in Arrow")
        return m(n)

    def ev_Column(self, n: Column) -> Value:
        if self.scope is None:
            raise unresolved_column(n, [])
        return self.scope.array(n)

    def ev_Literal(self, n: Literal) -> Value:
        t = to_arrow_type(n.type)
        try:
            return pa.scalar(n.value, t)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as e:
            raise AnalysisException(f"invalid literal {n.to_sql()}: {e}") from None

    def ev_Opaque(self, n: Opaque) -> Value:
        what = f"the function {n.what}()" if n.what and n.what.isidentifier() else (n.what or "this construct")
        raise UnsupportedFeatureError(
            f"cannot evaluate {n.sql} without Spark: {what} is not supported by tahoe's Arrow evaluator")

    # --- booleans ----------------------------------------------------------------------------
    def boolean(self, v: Value, node: Expression) -> Value:
        t = v.type
        if pa.types.is_boolean(t):
            return v
        if pa.types.is_null(t):
            return v.cast(pa.bool_()) if _is_arr(v) else _null_scalar(pa.bool_())
        raise AnalysisException(
            f"[DATATYPE_MISMATCH] {node.to_sql()} is of type {_sql_type(t)}, not boolean")

    def ev_Not(self, n: Not) -> Value:
        return self.call(pc.invert, self.boolean(self.ev(n.child), n.child), node=n)

    def ev_And(self, n: And) -> Value:
        a = self.boolean(self.ev(n.left), n.left)
        b = self.boolean(self.ev(n.right), n.right)
        return self.call(pc.and_kleene, a, b, node=n)

    def ev_Or(self, n: Or) -> Value:
        a = self.boolean(self.ev(n.left), n.left)
        b = self.boolean(self.ev(n.right), n.right)
        return self.call(pc.or_kleene, a, b, node=n)

    def ev_IsNull(self, n: IsNull) -> Value:
        v = self.ev(n.child)
        return pc.is_null(v) if _is_arr(v) else pa.scalar(not v.is_valid)

    # --- coercion ----------------------------------------------------------------------------
    def unify(self, a: Value, b: Value, node: Expression) -> tuple[Value, Value]:
        """Spark's implicit casts between two operands."""
        ta, tb = a.type, b.type
        if ta == tb:
            return a, b
        if pa.types.is_null(ta):
            return self.cast_value(a, tb, node), b
        if pa.types.is_null(tb):
            return a, self.cast_value(b, ta, node)
        if _stringy(ta) and not _stringy(tb):
            return self.string_to(a, tb, node), b
        if _stringy(tb) and not _stringy(ta):
            return a, self.string_to(b, ta, node)
        if pa.types.is_date(ta) and pa.types.is_timestamp(tb):
            return self.cast_value(a, tb, node), b
        if pa.types.is_timestamp(ta) and pa.types.is_date(tb):
            return a, self.cast_value(b, ta, node)
        if pa.types.is_timestamp(ta) and pa.types.is_timestamp(tb):
            # Spark compares TIMESTAMP_NTZ with TIMESTAMP by reading the NTZ in the session zone
            if ta.tz is None:
                return self.cast_value(a, tb, node), b
            if tb.tz is None:
                return a, self.cast_value(b, ta, node)
            return a, b
        if _numeric(ta) and _numeric(tb):
            return a, b
        if (_stringy(ta) and _stringy(tb)) or (pa.types.is_binary(ta) and pa.types.is_binary(tb)):
            return a, b
        raise AnalysisException(
            f"[DATATYPE_MISMATCH] {node.to_sql()}: {_sql_type(ta)} and {_sql_type(tb)} cannot be compared "
            f"or combined")

    def string_to(self, v: Value, target: pa.DataType, node: Expression) -> Value:
        """A string operand read as `target` (a number: Spark 4 reads the string as that type)."""
        if pa.types.is_integer(target):
            target = pa.int64()
        elif pa.types.is_floating(target):
            target = pa.float64()
        elif pa.types.is_decimal(target):
            target = pa.float64()
        return self.cast_value(v, target, node)

    def numbers_to(self, vals: list[Value], t, node: Expression) -> list[Value]:
        """Numbers (and NULLs) cast to the tahoe type `t` as Spark casts them for a comparison."""
        target = to_arrow_type(t)
        out = []
        for v in vals:
            if v.type == target:
                out.append(v)
            elif pa.types.is_null(v.type):
                out.append(self.cast_value(v, target, node))
            else:
                out.append(self.call(cast_array, v, target, node=node))
        return out

    def coerce(self, a: Value, b: Value, node: Expression, lit_a: Any = None, lit_b: Any = None) -> tuple[Value, Value]:
        """The two sides of a comparison in one type, as Spark's analyzer casts them (strings
        first, `unify`; then numbers of two types by `tahoe.expressions.coercion`)."""
        a, b = self.unify(a, b, node)
        if a.type != b.type and _numeric(a.type) and _numeric(b.type):
            t = comparison_type(from_arrow_type(a.type), from_arrow_type(b.type), a_literal=lit_a, b_literal=lit_b)
            if t is not None:
                a, b = self.numbers_to([a, b], t, node)
        return a, b

    # --- comparisons -------------------------------------------------------------------------
    _CMP = {"=": pc.equal, "<>": pc.not_equal, "<": pc.less, "<=": pc.less_equal, ">": pc.greater,
            ">=": pc.greater_equal}

    def compare(self, op: str, a: Value, b: Value, node: Expression, lit_a: Any = None, lit_b: Any = None) -> Value:
        a, b = self.coerce(a, b, node, lit_a, lit_b)
        return self.compare_same(op, a, b, node)

    def compare_same(self, op: str, a: Value, b: Value, node: Expression) -> Value:
        """`a op b` for operands already of one type."""
        if op == "<=>":
            if pa.types.is_floating(a.type) or pa.types.is_floating(b.type):
                eq = self.float_compare("=", a, b, node)   # NaN <=> NaN is TRUE
            else:
                eq = self.call(pc.equal, a, b, node=node)
            both_null = pc.and_(pc.is_null(a) if _is_arr(a) else pa.scalar(not a.is_valid),
                                pc.is_null(b) if _is_arr(b) else pa.scalar(not b.is_valid))
            return pc.or_(pc.fill_null(eq, False), both_null) if (_is_arr(eq) or eq.is_valid) \
                else both_null
        if pa.types.is_floating(a.type) or pa.types.is_floating(b.type):
            return self.float_compare(op, a, b, node)
        return self.call(self._CMP[op], a, b, node=node)

    def float_compare(self, op: str, a: Value, b: Value, node: Expression) -> Value:
        """Spark's float ordering: NaN = NaN, and NaN is larger than any other value."""
        res = self.call(self._CMP[op], a, b, node=node)
        na = pc.is_nan(a) if pa.types.is_floating(a.type) else pa.scalar(False)
        nb = pc.is_nan(b) if pa.types.is_floating(b.type) else pa.scalar(False)
        if not _is_arr(na) and not _is_arr(nb) and not (na.as_py() or nb.as_py()):
            return res
        na, nb = pc.fill_null(na, False), pc.fill_null(nb, False)
        both, only_a, only_b = pc.and_(na, nb), pc.and_(na, pc.invert(nb)), pc.and_(nb, pc.invert(na))
        nan_result = {"=": (True, False, False), "<>": (False, True, True), "<": (False, False, True),
                      "<=": (True, False, True), ">": (False, True, False), ">=": (True, True, False)}[op]
        out = pc.if_else(both, pa.scalar(nan_result[0]), res)
        out = pc.if_else(only_a, pa.scalar(nan_result[1]), out)
        out = pc.if_else(only_b, pa.scalar(nan_result[2]), out)
        valid = pc.and_(pc.is_valid(a) if _is_arr(a) else pa.scalar(a.is_valid),
                        pc.is_valid(b) if _is_arr(b) else pa.scalar(b.is_valid))
        return pc.if_else(valid, out, _null_scalar(pa.bool_()))

    def ev_Comparison(self, n: Comparison) -> Value:
        a, b = self.ev(n.left), self.ev(n.right)
        return self.compare_nodes(n.op, a, b, n.left, n.right, n)

    def compare_nodes(self, op: str, a: Value, b: Value, left: Expression, right: Expression, node: Expression,
                      simplify: bool = True) -> Value:
        """`left op right` with their values `a`, `b`, as Spark rewrites and coerces it
        (`tahoe.expressions.coercion`: the literal rules 4 and 6; with `simplify`, rule 7)."""
        if not (pa.types.is_null(a.type) or pa.types.is_null(b.type)):
            const = reduced_comparison(op, _tahoe_type(a.type), _tahoe_type(b.type), left, right)
            if const is not None:
                return pa.scalar(const)
        if simplify and a.type != b.type and _numeric(a.type) and _numeric(b.type):
            t = comparison_type(from_arrow_type(a.type), from_arrow_type(b.type), a_literal=int_literal(left),
                                b_literal=int_literal(right))
            if t == DOUBLE:
                a, b = self.unfloat(left, a), self.unfloat(right, b)
        elif simplify and pa.types.is_float32(a.type) and _stringy(b.type):   # a FLOAT meets a string as DOUBLE
            a = self.unfloat(left, a)
        elif simplify and pa.types.is_float32(b.type) and _stringy(a.type):
            b = self.unfloat(right, b)
        return self.compare(op, a, b, node, int_literal(left), int_literal(right))

    def unfloat(self, e: Expression, v: Value) -> Value:
        """`v`, or for `CAST(integer AS FLOAT)` about to be cast to DOUBLE, the integer itself
        (`coercion` rule 7)."""
        inner = float_cast_operand(e)
        if inner is None:
            return v
        x = self.ev(inner)
        return x if pa.types.is_integer(x.type) else v

    def ev_In(self, n: In) -> Value:
        v = self.ev(n.value)
        items = [self.ev(x) for x in n.items]
        vals = [v, *items]
        top = _time_list_type([x.type for x in vals])
        if top is not None and any(x.type != top and not pa.types.is_null(x.type) for x in vals):
            # dates, timestamps and strings: Spark casts the value and every item to the list's
            # one type (DATE < TIMESTAMP_NTZ < TIMESTAMP), not pairwise
            vals = [self.cast_value(x, top, n) for x in vals]
            v, items = vals[0], vals[1:]
        if any(_numeric(x.type) for x in vals) and all(
                _numeric(x.type) or pa.types.is_null(x.type) or _stringy(x.type) for x in vals):
            # Spark casts the value and every item to one type: the wider type of them all, folded
            # left to right (`tahoe.expressions.coercion.in_type`; strings read as that type)
            t = in_type([STRING if _stringy(x.type) else VOID if pa.types.is_null(x.type) else from_arrow_type(x.type)
                         for x in vals])
            if t is not None:
                target = to_arrow_type(t)
                if t == DOUBLE:
                    vals = [self.unfloat(e, x) for e, x in zip((n.value, *n.items), vals)]
                vals = [self.cast_value(x, target, n) if _stringy(x.type) else x for x in vals]
                vals = self.numbers_to(vals, t, n)
                v, items = vals[0], vals[1:]
        if all(not _is_arr(x) for x in items) and _is_arr(v) and not pa.types.is_floating(v.type):
            coerced = []
            for x in items:
                _, cx = self.coerce(v.slice(0, 0), x, n)
                coerced.append(cx)
            if all(c.type == v.type or pa.types.is_null(c.type) for c in coerced):
                has_null = any(not c.is_valid for c in coerced)
                values = pa.array([c.as_py() for c in coerced if c.is_valid], v.type)
                hit = self.call(lambda a: pc.is_in(a, value_set=values), v, node=n)
                res = pc.if_else(pc.is_null(v), _null_scalar(pa.bool_()), hit)
                if has_null:
                    res = pc.if_else(res, True, _null_scalar(pa.bool_()))
                return res
        out: Value = pa.scalar(False)
        for x in items:
            out = pc.or_kleene(out, self.compare("=", v, x, n))
        return out

    def ev_Between(self, n: Between) -> Value:
        # Spark's BETWEEN is `value >= low AND value <= high`, each comparison coerced on its own
        # (its value is computed once: no FLOAT cast is dropped, coercion rule 7)
        v = self.ev(n.value)
        lo = self.compare_nodes(">=", v, self.ev(n.low), n.value, n.low, n, simplify=False)
        hi = self.compare_nodes("<=", v, self.ev(n.high), n.value, n.high, n, simplify=False)
        return pc.and_kleene(lo, hi)

    def ev_Like(self, n: Like) -> Value:
        v = self.ev(n.value)
        pat = self.ev(n.pattern)
        if _is_arr(pat):
            raise UnsupportedFeatureError(f"LIKE with a pattern that is not a constant: {n.to_sql()}")
        if not pat.is_valid:
            return _null_scalar(pa.bool_())
        if not _stringy(pat.type):
            raise AnalysisException(f"[DATATYPE_MISMATCH] the LIKE pattern of {n.to_sql()} is not a string")
        if not _stringy(v.type) and not pa.types.is_null(v.type):
            v = self.cast_value(v, pa.string(), n)
        pattern = pat.as_py()
        if n.escape is not None and n.escape != "\\":
            pattern = _reescape(pattern, n.escape)
        return self.call(lambda a: pc.match_like(a, pattern, ignore_case=n.case_insensitive), v, node=n)

    # --- arithmetic --------------------------------------------------------------------------
    def ev_Negate(self, n: Negate) -> Value:
        v = self.ev(n.child)
        if _stringy(v.type):
            v = self.string_to(v, pa.float64(), n)
        return self.call(pc.negate_checked, v, node=n)

    def ev_Arithmetic(self, n: Arithmetic) -> Value:
        a, b = self.ev(n.left), self.ev(n.right)
        if _stringy(a.type) and _stringy(b.type) and n.op != "+":
            a, b = self.string_to(a, pa.float64(), n), self.string_to(b, pa.float64(), n)
        if n.op in ("+", "-") and pa.types.is_date(a.type) and pa.types.is_integer(b.type):
            return self.date_add(a, b if n.op == "+" else self.call(pc.negate_checked, b, node=n), n)
        if n.op == "+" and pa.types.is_integer(a.type) and pa.types.is_date(b.type):
            return self.date_add(b, a, n)
        if n.op == "-" and pa.types.is_date(a.type) and pa.types.is_date(b.type):
            raise UnsupportedFeatureError(f"date subtraction (an interval) is not supported by tahoe's Arrow evaluator: {n.to_sql()}")
        a, b = self.unify(a, b, n)
        if pa.types.is_null(a.type) or pa.types.is_null(b.type):
            return _null_scalar(pa.null())
        if not (_numeric(a.type) and _numeric(b.type)):
            raise AnalysisException(
                f"[DATATYPE_MISMATCH] {n.to_sql()}: {n.op} needs numbers, got {_sql_type(a.type)} and {_sql_type(b.type)}")
        if a.type != b.type and (pa.types.is_floating(a.type) or pa.types.is_floating(b.type)):
            # a float with anything else: both DOUBLE, cast as Spark casts (never Arrow's checked
            # integer -> double cast, which refuses values beyond 2^53)
            a, b = self.numbers_to([a, b], DOUBLE, n)
        if n.op in ("+", "-", "*") and (pa.types.is_decimal(a.type) or pa.types.is_decimal(b.type)) \
                and not (pa.types.is_floating(a.type) or pa.types.is_floating(b.type)):
            return self.decimal_arithmetic(n.op, a, b, n)
        if n.op == "+":
            return self.call(pc.add_checked, a, b, node=n)
        if n.op == "-":
            return self.call(pc.subtract_checked, a, b, node=n)
        if n.op == "*":
            return self.call(pc.multiply_checked, a, b, node=n)
        self.check_divisor(b, n)
        if n.op == "/":
            return self.divide(a, b, n)
        if n.op == "div":
            if pa.types.is_integer(a.type) and pa.types.is_integer(b.type):
                return self.call(pc.divide_checked, pc.cast(a, pa.int64()), pc.cast(b, pa.int64()), node=n)
            q = self.divide(a, b, n)
            return self.cast_value(self.call(pc.trunc, q, node=n) if pa.types.is_floating(q.type) else q, pa.int64(), n)
        return self.remainder(a, b, n)

    def check_divisor(self, b: Value, n: Expression) -> None:
        zero = pc.equal(b, pa.scalar(0, b.type) if not pa.types.is_decimal(b.type) else pa.scalar(Decimal(0), b.type))
        hit = pc.any(zero).as_py() if _is_arr(zero) else zero.as_py()
        if hit:
            raise ArithmeticException(f"[DIVIDE_BY_ZERO] Division by zero in {n.to_sql()}")

    def divide(self, a: Value, b: Value, n: Expression) -> Value:
        exact = lambda t: pa.types.is_integer(t) or pa.types.is_decimal(t)  # noqa: E731
        if (pa.types.is_decimal(a.type) or pa.types.is_decimal(b.type)) and exact(a.type) and exact(b.type):
            return self.decimal_divide(a, b, n)
        fa = self.call(pc.cast, a, pa.float64(), node=n)
        fb = self.call(pc.cast, b, pa.float64(), node=n)
        return self.call(pc.divide, fa, fb, node=n)

    @staticmethod
    def _dec_type(v: Value) -> tuple[int, int]:
        """(precision, scale) of an exact number as Spark's decimal arithmetic sees it: a decimal's
        own; an integer column's widest (TINYINT 3 digits ... BIGINT 20); an integer constant's
        digits (Spark types integer literals by their digits in decimal arithmetic)."""
        t = v.type if hasattr(v, "type") else v
        if pa.types.is_decimal(t):
            return t.precision, t.scale
        if isinstance(v, pa.Scalar) and v.is_valid:
            return max(len(str(abs(int(v.as_py())))), 1), 0
        return {8: (3, 0), 16: (5, 0), 32: (10, 0), 64: (20, 0)}[t.bit_width]

    def decimal_arithmetic(self, op: str, a: Value, b: Value, n: Arithmetic) -> Value:
        """`+ - *` with a DECIMAL, as Spark types it: `+ -` scale max(s1, s2), precision
        max(p1-s1, p2-s2) + scale + 1; `*` precision p1 + p2 + 1, scale s1 + s2; above 38 digits
        the integer digits are kept and the scale gives way down to 6 (allowPrecisionLoss, the
        default). Integers count as DECIMAL(3|5|10|20, 0), integer literals as their digits. The
        exact result is rounded HALF_UP to the scale; a value that does not fit is an overflow."""
        def dec(v: Value, e: Expression) -> tuple[int, int]:
            if pa.types.is_decimal(v.type):
                return v.type.precision, v.type.scale
            lit = int_literal(e)
            if lit is not None:
                return max(len(str(abs(lit))), 1), 0
            return {8: (3, 0), 16: (5, 0), 32: (10, 0), 64: (20, 0)}[v.type.bit_width]

        (p1, s1), (p2, s2) = dec(a, n.left), dec(b, n.right)
        if op == "*":
            prec, scale = p1 + p2 + 1, s1 + s2
        else:
            scale = max(s1, s2)
            prec = max(p1 - s1, p2 - s2) + scale + 1
        if prec > 38:
            scale = max(38 - (prec - scale), min(scale, 6))
            prec = 38
        out_t = pa.decimal128(prec, scale)
        fn = {"+": pc.add_checked, "-": pc.subtract_checked, "*": pc.multiply_checked}[op]
        try:   # vectorized: exact in 256-bit decimals, then rounded to Spark's type
            wide = [cast_array(v, pa.decimal256(p, s)) for v, (p, s) in ((a, (p1, s1)), (b, (p2, s2)))]
            return cast_array(fn(*wide), out_t)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
        exact = {"+": _WIDE.add, "-": _WIDE.subtract, "*": _WIDE.multiply}[op]
        q = Decimal(1).scaleb(-scale)

        def one(x, y):
            if x is None or y is None:
                return None
            r = exact(Decimal(x), Decimal(y)).quantize(q, rounding=ROUND_HALF_UP, context=_WIDE)
            if r != 0 and r.adjusted() + 1 > prec - scale:
                raise ArithmeticException(
                    f"[NUMERIC_VALUE_OUT_OF_RANGE] {r} cannot be represented as DECIMAL({prec},{scale}) in {n.to_sql()}")
            return r

        return self.elementwise(one, [a, b], out_t)

    def decimal_divide(self, a: Value, b: Value, n: Expression) -> Value:
        """Spark's decimal division: scale max(6, s1 + p2 + 1), precision p1 - s1 + s2 + scale,
        bounded to 38 digits (keeping at least 6 of scale), rounded HALF_UP."""
        p1, s1 = self._dec_type(a)
        p2, s2 = self._dec_type(b)
        scale = max(6, s1 + p2 + 1)
        prec = p1 - s1 + s2 + scale
        if prec > 38:
            int_digits = prec - scale
            scale = max(38 - int_digits, min(scale, 6))
            prec = 38
        out_t = pa.decimal128(prec, scale)
        q = Decimal(1).scaleb(-scale)

        def one(x, y):
            if x is None or y is None:
                return None
            r = _WIDE.divide(Decimal(x), Decimal(y)).quantize(q, rounding=ROUND_HALF_UP, context=_WIDE)
            if len(r.as_tuple().digits) > prec:
                raise ArithmeticException(f"[NUMERIC_VALUE_OUT_OF_RANGE] {r} does not fit DECIMAL({prec},{scale}) in {n.to_sql()}")
            return r

        return self.elementwise(one, [a, b], out_t)

    def remainder(self, a: Value, b: Value, n: Expression) -> Value:
        if pa.types.is_integer(a.type) and pa.types.is_integer(b.type):
            if _is_arr(a) and a.null_count == 0 and isinstance(b, pa.Scalar) and b.is_valid:
                # a column % a constant (`id % 1000 = 7`): one numpy pass; fmod keeps the
                # dividend's sign, as Java's % does (and MIN % -1 is 0, as there)
                x = a.to_numpy() if isinstance(a, pa.Array) else a.combine_chunks().to_numpy()
                return pa.array(np.fmod(x, np.array(b.as_py(), dtype=b.type.to_pandas_dtype())))
            q = self.call(pc.divide, a, b, node=n)
            return self.call(pc.subtract, a, pc.multiply(q, b), node=n)
        if pa.types.is_floating(a.type) or pa.types.is_floating(b.type):
            return self.elementwise(lambda x, y: None if x is None or y is None else math.fmod(x, y),
                                    [self.call(pc.cast, a, pa.float64(), node=n),
                                     self.call(pc.cast, b, pa.float64(), node=n)], pa.float64())
        p1, s1 = self._dec_type(a)
        p2, s2 = self._dec_type(b)
        scale = max(s1, s2)
        out_t = pa.decimal128(min(38, min(p1 - s1, p2 - s2) + scale), scale)
        return self.elementwise(lambda x, y: None if x is None or y is None else _WIDE.remainder(Decimal(x), Decimal(y)),
                                [a, b], out_t)

    def elementwise(self, fn: Callable, args: list[Value], out_type: pa.DataType) -> Value:
        """`fn` applied to Python values row by row (scalars broadcast); a scalar when every
        argument is one."""
        if not any(_is_arr(x) for x in args):
            return pa.scalar(fn(*[x.as_py() for x in args]), out_type)
        n = next(len(x) for x in args if _is_arr(x))
        cols = [x.to_pylist() if _is_arr(x) else [x.as_py()] * n for x in args]
        return pa.array([fn(*row) for row in zip(*cols)], out_type)

    def date_add(self, d: Value, days: Value, n: Expression) -> Value:
        as_int = self.call(pc.cast, d, pa.int32(), node=n)
        s = self.call(pc.add_checked, as_int, self.call(pc.cast, days, pa.int32(), node=n), node=n)
        return self.call(pc.cast, s, pa.date32(), node=n)

    # --- CASE ----------------------------------------------------------------------------------
    def ev_Case(self, n: Case) -> Value:
        operand = self.ev(n.operand) if n.operand is not None else None
        conds, values = [], []
        for w, v in n.branches:
            c = self.compare("=", operand, self.ev(w), n) if operand is not None else self.boolean(self.ev(w), w)
            conds.append(c)
            values.append(self.ev(v))
        default = self.ev(n.default) if n.default is not None else _null_scalar(pa.null())
        *values, default = self.common([*values, default], n)
        out = default
        for c, v in zip(reversed(conds), reversed(values)):
            out = self.call(pc.if_else, pc.fill_null(c, False), v, out, node=n)
        return out

    def common(self, vals: list[Value], n: Expression) -> list[Value]:
        """The values cast to one type (Spark's type coercion for CASE / IF / COALESCE branches)."""
        types = [v.type for v in vals if not pa.types.is_null(v.type)]
        if not types:
            return vals
        target = types[0]
        for t in types[1:]:
            if t == target:
                continue
            if _numeric(t) and _numeric(target):
                target = to_arrow_type(wider_type(from_arrow_type(target), from_arrow_type(t)))
            elif _stringy(t) or _stringy(target):
                target = pa.string()
            elif pa.types.is_timestamp(t) and pa.types.is_date(target):
                target = t
            elif pa.types.is_date(t) and pa.types.is_timestamp(target):
                pass
            else:
                raise AnalysisException(
                    f"[DATATYPE_MISMATCH] {n.to_sql()}: values of types {_sql_type(target)} and {_sql_type(t)} "
                    f"cannot be combined")
        return [v if v.type == target else self.cast_value(v, target, n) for v in vals]

    # --- CAST ----------------------------------------------------------------------------------
    def ev_Cast(self, n: Cast) -> Value:
        if n.type == DOUBLE:   # CAST(CAST(integer AS FLOAT) AS DOUBLE): the integer (coercion rule 7)
            inner = float_cast_operand(n.child)
            if inner is not None:
                x = self.ev(inner)
                if pa.types.is_integer(x.type):
                    return self.cast_value(x, pa.float64(), n)
        v = self.ev(n.child)
        try:
            target = to_arrow_type(n.type)
        except Exception:
            raise UnsupportedFeatureError(f"CAST to {type_sql(n.type)} is not supported by tahoe's Arrow evaluator") from None
        if n.safe:
            return self.try_cast(v, target, n)
        return self.cast_value(v, target, n)

    def try_cast(self, v: Value, target: pa.DataType, n: Expression) -> Value:
        try:
            return self.cast_value(v, target, n)
        except (NumberFormatException, ArithmeticException):
            pass
        one = lambda x: self.cast_value(pa.scalar(x, v.type), target, n).as_py()  # noqa: E731

        def safe(x):
            if x is None:
                return None
            try:
                return one(x)
            except (NumberFormatException, ArithmeticException):
                return None

        return self.elementwise(safe, [v], target)

    def cast_value(self, v: Value, target: pa.DataType, n: Expression) -> Value:
        src = v.type
        if src == target:
            return v
        if pa.types.is_null(src):
            return v.cast(target) if _is_arr(v) else _null_scalar(target)
        try:
            if _stringy(src):
                return self.cast_from_string(v, target, n)
            if _stringy(target):
                return self.cast_to_string(v, n)
            if pa.types.is_floating(src) and pa.types.is_integer(target):
                self.check_finite(v, n, target)
                return pc.cast(pc.trunc(v), target)
            if pa.types.is_decimal(src) and pa.types.is_integer(target):
                lo, hi = _INT_LIMITS[target.bit_width]

                def one(x):
                    if x is None:
                        return None
                    i = int(x)   # truncates toward zero
                    if not lo <= i <= hi:
                        raise ArithmeticException(f"[CAST_OVERFLOW] {x} does not fit {_sql_type(target)} in {n.to_sql()}")
                    return i
                return self.elementwise(one, [v], target)
            if pa.types.is_floating(target) and _numeric(src):   # rounded to nearest, never an error
                return cast_array(v, target)
            if pa.types.is_decimal(target) and (pa.types.is_decimal(src) or pa.types.is_floating(src)):
                q = Decimal(1).scaleb(-target.scale)

                def one(x):
                    if x is None:
                        return None
                    if isinstance(x, float) and not math.isfinite(x):
                        raise ArithmeticException(f"[CAST_OVERFLOW] {x} cannot be cast to {_sql_type(target)}")
                    d = (Decimal(repr(x)) if isinstance(x, float) else Decimal(x)).quantize(q, rounding=ROUND_HALF_UP, context=_WIDE)
                    if len(d.as_tuple().digits) > target.precision and d != 0:
                        raise ArithmeticException(
                            f"[NUMERIC_VALUE_OUT_OF_RANGE] {x} does not fit {_sql_type(target)} in {n.to_sql()}")
                    return d
                return self.elementwise(one, [v], target)
            if pa.types.is_date(src) and pa.types.is_timestamp(target):
                naive = pc.cast(v, pa.timestamp("us"))
                if target.tz is None:
                    return naive.cast(target) if naive.type != target else naive
                local = pc.assume_timezone(naive, self.tz_name) if _is_arr(naive) else \
                    pc.assume_timezone(pa.array([naive.as_py()], naive.type), self.tz_name)[0]
                return pc.cast(local, target)
            if pa.types.is_timestamp(src) and pa.types.is_date(target):
                if src.tz is not None:
                    v = self.to_local(v)
                return pc.cast(pc.floor_temporal(v, unit="day"), target) if _is_arr(v) else \
                    pa.scalar(v.as_py().date() if v.is_valid else None, target)
            if pa.types.is_timestamp(src) and pa.types.is_timestamp(target):
                if src.tz is None and target.tz is not None:
                    arr = v if _is_arr(v) else pa.array([v.as_py()], src)
                    out = pc.cast(pc.assume_timezone(pc.cast(arr, pa.timestamp("us")), self.tz_name), target)
                    return out if _is_arr(v) else out[0]
                if src.tz is not None and target.tz is None:
                    return pc.cast(self.to_local(v), target)
                return pc.cast(v, target)
            if pa.types.is_boolean(src) and _numeric(target):   # true → 1 (via int8 for a decimal)
                return pc.cast(pc.cast(v, pa.int8()) if pa.types.is_decimal(target) else v, target)
            if _numeric(src) and pa.types.is_boolean(target):
                return pc.not_equal(v, pa.scalar(0, src) if not pa.types.is_decimal(src) else pa.scalar(Decimal(0), src))
            if _numeric(src) and _numeric(target):
                return cast_array(v, target)
            if pa.types.is_binary(target) and _stringy(src):
                return pc.cast(v, target)
        except pa.ArrowInvalid as e:
            low = str(e).lower()
            if any(w in low for w in ("overflow", "out of bounds", "would", "not in range", "out of range")):
                raise ArithmeticException(f"[CAST_OVERFLOW] {str(e).splitlines()[0]} in {n.to_sql()}") from None
            raise NumberFormatException(f"[CAST_INVALID_INPUT] {str(e).splitlines()[0]} in {n.to_sql()}") from None
        raise AnalysisException(
            f"[DATATYPE_MISMATCH.CAST_WITHOUT_SUGGESTION] cannot cast {_sql_type(src)} to {_sql_type(target)}: {n.to_sql()}")

    def check_finite(self, v: Value, n: Expression, target: pa.DataType) -> None:
        bad = pc.invert(pc.is_finite(v))
        hit = pc.any(bad).as_py() if _is_arr(bad) else bad.as_py()
        if hit:
            raise ArithmeticException(f"[CAST_OVERFLOW] a non-finite value cannot be cast to {_sql_type(target)} in {n.to_sql()}")

    def to_local(self, v: Value) -> Value:
        """A timestamp (with zone) as the naive local time of the session's zone."""
        local = pc.cast(v, pa.timestamp(v.type.unit, tz=self.tz_name))
        return pc.local_timestamp(local) if _is_arr(local) else pc.local_timestamp(pa.array([local.as_py()], local.type))[0]

    def cast_from_string(self, v: Value, target: pa.DataType, n: Expression) -> Value:
        if pa.types.is_integer(target) or pa.types.is_floating(target) or pa.types.is_decimal(target) \
                or pa.types.is_boolean(target):
            v = pc.utf8_trim_whitespace(v)
        if pa.types.is_boolean(target):
            def one(x):
                if x is None:
                    return None
                b = _BOOL_TEXT.get(x.lower())
                if b is None:
                    raise NumberFormatException(f"[CAST_INVALID_INPUT] the value '{x}' cannot be cast to BOOLEAN in {n.to_sql()}")
                return b
            return self.elementwise(one, [v], target)
        if pa.types.is_decimal(target):
            q = Decimal(1).scaleb(-target.scale)

            def one(x):
                if x is None:
                    return None
                try:
                    d = Decimal(x).quantize(q, rounding=ROUND_HALF_UP, context=_WIDE)
                except InvalidOperation:
                    raise NumberFormatException(
                        f"[CAST_INVALID_INPUT] the value '{x}' cannot be cast to {_sql_type(target)} in {n.to_sql()}") from None
                if len(d.as_tuple().digits) > target.precision and d != 0:
                    raise ArithmeticException(f"[NUMERIC_VALUE_OUT_OF_RANGE] {x} does not fit {_sql_type(target)}")
                return d
            return self.elementwise(one, [v], target)
        if pa.types.is_date(target):
            def one(x):
                if x is None:
                    return None
                t = x.strip()
                try:
                    return _dt.date.fromisoformat(t[:10] if len(t) > 10 and t[10] in "T " else t)
                except ValueError:
                    raise NumberFormatException(f"[CAST_INVALID_INPUT] the value '{x}' cannot be cast to DATE in {n.to_sql()}") from None
            return self.elementwise(one, [v], target)
        if pa.types.is_timestamp(target):
            def one(x):
                if x is None:
                    return None
                return self.parse_timestamp(x, target, n)
            return self.elementwise(one, [v], pa.timestamp("us", tz=target.tz) if target.tz else pa.timestamp("us"))
        if pa.types.is_binary(target):
            return pc.cast(v, target)
        try:
            return pc.cast(v, target)
        except pa.ArrowInvalid as e:
            raise NumberFormatException(
                f"[CAST_INVALID_INPUT] {str(e).splitlines()[0]}: cannot be cast to {_sql_type(target)} in {n.to_sql()}") from None

    def parse_timestamp(self, x: str, target: pa.DataType, n: Expression) -> _dt.datetime:
        t = x.strip().replace(" ", "T", 1)
        if t.endswith(("Z", "z")):
            t = t[:-1] + "+00:00"
        try:
            d = _dt.datetime.fromisoformat(t)
        except ValueError:
            raise NumberFormatException(
                f"[CAST_INVALID_INPUT] the value '{x}' cannot be cast to {_sql_type(target)} in {n.to_sql()}") from None
        if target.tz is None:
            return d.replace(tzinfo=None) if d.tzinfo is None else d.astimezone(self.tz).replace(tzinfo=None)
        if d.tzinfo is None:
            d = d.replace(tzinfo=self.tz)
        return d.astimezone(_dt.timezone.utc)

    def cast_to_string(self, v: Value, n: Expression) -> Value:
        src = v.type
        if pa.types.is_integer(src) or pa.types.is_boolean(src) or pa.types.is_date(src) or pa.types.is_decimal(src):
            return pc.cast(v, pa.string())
        if pa.types.is_floating(src):
            f32 = pa.types.is_float32(src)
            return self.elementwise(lambda x: None if x is None else _java_double_str(x, f32), [v], pa.string())
        if pa.types.is_timestamp(src):
            local = self.to_local(v) if src.tz is not None else v

            def one(x):
                if x is None:
                    return None
                s = x.strftime("%Y-%m-%d %H:%M:%S")
                if x.microsecond:
                    s += ("." + f"{x.microsecond:06d}").rstrip("0")
                return s
            return self.elementwise(one, [local], pa.string())
        if pa.types.is_binary(src):
            return self.elementwise(lambda x: None if x is None else x.decode("utf-8", "replace"), [v], pa.string())
        raise AnalysisException(f"[DATATYPE_MISMATCH] cannot cast {_sql_type(src)} to STRING: {n.to_sql()}")

    # --- functions -----------------------------------------------------------------------------
    def ev_Func(self, n: Func) -> Value:
        impl = FUNCTIONS.get(n.name)
        if impl is None:
            raise UnsupportedFeatureError(
                f"cannot evaluate {n.to_sql()} without Spark: the function {n.name}() is not supported by "
                f"tahoe's Arrow evaluator")
        arity, fn = impl
        if not (arity[0] <= len(n.args) <= (arity[1] if arity[1] is not None else len(n.args))):
            raise AnalysisException(
                f"[WRONG_NUM_ARGS] {n.name}() takes {arity[0]}"
                f"{'' if arity[1] == arity[0] else ' or more' if arity[1] is None else f' to {arity[1]}'} "
                f"arguments, got {len(n.args)}: {n.to_sql()}")
        return fn(self, n, [self.ev(a) for a in n.args])

    def as_string(self, v: Value, n: Expression) -> Value:
        if _stringy(v.type):
            return v
        if pa.types.is_null(v.type):
            return self.cast_value(v, pa.string(), n)
        return self.cast_to_string(v, n)

    def constant(self, v: Value, n: Expression, what: str) -> Any:
        if _is_arr(v):
            raise UnsupportedFeatureError(f"{what} of {n.to_sql()} must be a constant for tahoe's Arrow evaluator")
        return v.as_py()

    def temporal(self, v: Value, n: Expression, want: str) -> Value:
        """`v` as a date / timestamp for the date-part functions (strings are cast)."""
        if _stringy(v.type):
            v = self.cast_value(v, pa.date32() if want == "date" else pa.timestamp("us", tz="UTC"), n)
        if pa.types.is_null(v.type):
            return v
        if not _temporal(v.type):
            raise AnalysisException(f"[DATATYPE_MISMATCH] {n.to_sql()} needs a date or timestamp, got {_sql_type(v.type)}")
        if pa.types.is_timestamp(v.type) and v.type.tz is not None:
            v = self.to_local(v)
        return v


def _reescape(pattern: str, esc: str) -> str:
    """A LIKE pattern with escape character `esc` rewritten for Arrow's backslash escapes."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == esc and i + 1 < len(pattern):
            out.append("\\" + pattern[i + 1])
            i += 2
            continue
        out.append("\\\\" if ch == "\\" else ch)
        i += 1
    return "".join(out)


# --- the function table -----------------------------------------------------------------------

def _f_coalesce(ev: _Evaluator, n, args):
    args = ev.common(args, n)
    if len(args) == 1:
        return args[0]
    return ev.call(pc.coalesce, *args, node=n)


def _f_if(ev: _Evaluator, n, args):
    c = ev.boolean(args[0], n.args[0])
    a, b = ev.common([args[1], args[2]], n)
    if pa.types.is_null(a.type) and pa.types.is_null(b.type):
        return _null_scalar(pa.null())
    return ev.call(pc.if_else, pc.fill_null(c, False), a, b, node=n)


def _f_named_struct(ev: _Evaluator, n, args):
    """named_struct(name1, value1, ...): a struct (never NULL itself) of the values."""
    if len(args) % 2:
        raise AnalysisException(f"[WRONG_NUM_ARGS] named_struct() takes an even number of arguments: {n.to_sql()}")
    names = [ev.constant(a, n, "a field name") for a in args[0::2]]
    if not all(isinstance(x, str) for x in names):
        raise AnalysisException(f"[DATATYPE_MISMATCH] the field names of {n.to_sql()} must be string literals")
    values = args[1::2]
    length = next((len(v) for v in values if _is_arr(v)), None)
    if length is None:   # all constants: a struct scalar
        arrays = [pa.array([v.as_py()], v.type) for v in values]
        return pa.StructArray.from_arrays(arrays, names=names)[0] if names else pa.scalar({}, pa.struct([]))
    arrays = [(v.combine_chunks() if isinstance(v, pa.ChunkedArray) else v) if _is_arr(v)
              else pa.repeat(v, length) for v in values]
    return pa.StructArray.from_arrays(arrays, names=names)


def _f_nullif(ev: _Evaluator, n, args):
    eq = ev.compare("=", args[0], args[1], n)
    return ev.call(pc.if_else, pc.fill_null(eq, False), _null_scalar(args[0].type), args[0], node=n)


def _f_isnan(ev: _Evaluator, n, args):
    v = args[0]
    if _stringy(v.type):
        v = ev.cast_value(v, pa.float64(), n)
    if not pa.types.is_floating(v.type):   # NULL and exact numbers are never NaN
        return pa.repeat(pa.scalar(False), len(v)) if _is_arr(v) else pa.scalar(False)
    return pc.fill_null(pc.is_nan(v), False)


def _f_nanvl(ev: _Evaluator, n, args):
    a, b = (ev.cast_value(x, pa.float64(), n) if not pa.types.is_floating(x.type) else x for x in args)
    a, b = ev.common([a, b], n)
    return ev.call(pc.if_else, pc.fill_null(pc.is_nan(a), False), b, a, node=n)


def _f_greatest(ev: _Evaluator, n, args):
    args = ev.common(args, n)
    return ev.call(lambda *xs: pc.max_element_wise(*xs, skip_nulls=True), *args, node=n)


def _f_least(ev: _Evaluator, n, args):
    args = ev.common(args, n)
    return ev.call(lambda *xs: pc.min_element_wise(*xs, skip_nulls=True), *args, node=n)


def _string_fn(fn):
    def impl(ev: _Evaluator, n, args):
        return ev.call(fn, ev.as_string(args[0], n), node=n)
    return impl


def _f_length(ev: _Evaluator, n, args):
    v = args[0]
    if pa.types.is_binary(v.type):
        return ev.call(pc.binary_length, v, node=n)
    return ev.call(lambda x: pc.cast(pc.utf8_length(x), pa.int32()), ev.as_string(v, n), node=n)


def _f_substring(ev: _Evaluator, n, args):
    s = ev.as_string(args[0], n)
    pos_v = args[1]
    len_v = args[2] if len(args) > 2 else None

    def one(x, pos, length):
        if x is None or pos is None or (len_v is not None and length is None):
            return None
        total = len(x)
        start = pos - 1 if pos > 0 else (total + pos if pos < 0 else 0)
        end = (1 << 62) if length is None else start + length
        start = max(start, 0)
        if start >= end:
            return ""
        return x[start:end]

    return ev.elementwise(one, [s, pos_v, len_v if len_v is not None else pa.scalar(None, pa.int64())], pa.string())


def _f_concat(ev: _Evaluator, n, args):
    if not args:
        return pa.scalar("")
    strs = [ev.as_string(a, n) for a in args]
    if len(strs) == 1:
        return strs[0]
    return ev.call(lambda *xs: pc.binary_join_element_wise(*xs, "", null_handling="emit_null"), *strs, node=n)


def _f_concat_ws(ev: _Evaluator, n, args):
    sep = ev.as_string(args[0], n)
    strs = [ev.as_string(a, n) for a in args[1:]]
    if not strs:
        return ev.call(pc.if_else, pc.is_valid(sep) if _is_arr(sep) else pa.scalar(sep.is_valid), pa.scalar(""),
                       _null_scalar(pa.string()), node=n)
    return ev.call(lambda *xs: pc.binary_join_element_wise(*xs, null_handling="skip"), *strs, sep, node=n)


def _trim(fn):
    def impl(ev: _Evaluator, n, args):
        return ev.call(lambda x: fn(x, " "), ev.as_string(args[0], n), node=n)
    return impl


def _f_replace(ev: _Evaluator, n, args):
    s = ev.as_string(args[0], n)
    search = ev.constant(args[1], n, "the search string")
    rep = ev.constant(args[2], n, "the replacement") if len(args) > 2 else ""
    if search is None or rep is None:
        return _null_scalar(pa.string())
    if search == "":
        return s
    return ev.call(lambda x: pc.replace_substring(x, search, rep), s, node=n)


def _pattern_fn(fn):
    def impl(ev: _Evaluator, n, args):
        s = ev.as_string(args[0], n)
        p = ev.constant(args[1], n, "the pattern")
        if p is None:
            return _null_scalar(pa.bool_())
        return ev.call(lambda x: fn(x, p), s, node=n)
    return impl


def _f_abs(ev: _Evaluator, n, args):
    return ev.call(pc.abs_checked, args[0], node=n)


def _f_negative(ev: _Evaluator, n, args):
    return ev.call(pc.negate_checked, args[0], node=n)


def _f_positive(ev: _Evaluator, n, args):
    return args[0]


def _f_round(ev: _Evaluator, n, args):
    v = args[0]
    d = ev.constant(args[1], n, "the scale") if len(args) > 1 else 0
    if d is None:
        return _null_scalar(v.type)
    if pa.types.is_integer(v.type):
        if d >= 0:
            return v
        return ev.elementwise(lambda x: None if x is None else
                              int(Decimal(x).quantize(Decimal(1).scaleb(-d), rounding=ROUND_HALF_UP, context=_WIDE)), [v], v.type)
    if pa.types.is_decimal(v.type):
        scale = max(min(d, v.type.scale), 0)
        out_t = pa.decimal128(min(38, v.type.precision - v.type.scale + scale + 1), scale)
        return ev.elementwise(lambda x: None if x is None else
                              Decimal(x).quantize(Decimal(1).scaleb(-d), rounding=ROUND_HALF_UP, context=_WIDE), [v], out_t)
    if pa.types.is_floating(v.type):
        def one(x):
            if x is None or not math.isfinite(x):
                return x
            return float(Decimal(repr(x)).quantize(Decimal(1).scaleb(-d), rounding=ROUND_HALF_UP))
        return ev.elementwise(one, [v], v.type)
    raise AnalysisException(f"[DATATYPE_MISMATCH] round() needs a number: {n.to_sql()}")


def _floor_ceil(fn):
    def impl(ev: _Evaluator, n, args):
        v = args[0]
        if pa.types.is_integer(v.type):
            return ev.call(pc.cast, v, pa.int64(), node=n)
        if pa.types.is_decimal(v.type):
            return ev.call(lambda x: pc.cast(fn(x), pa.decimal128(min(38, v.type.precision - v.type.scale + 1), 0)),
                           v, node=n)
        if _stringy(v.type):
            v = ev.cast_value(v, pa.float64(), n)
        lo, hi = _INT_LIMITS[64]

        def one(x):   # as Spark (ANSI): NaN is 0, beyond BIGINT's range an overflow
            if x is None:
                return None
            if math.isnan(x):
                return 0
            r = int(math.floor(x) if fn is pc.floor else math.ceil(x)) if math.isfinite(x) else None
            if r is None or not lo <= r <= hi:
                raise ArithmeticException(f"[ARITHMETIC_OVERFLOW] {x} does not fit BIGINT in {n.to_sql()}")
            return r
        return ev.elementwise(one, [v], pa.int64())
    return impl


def _f_sign(ev: _Evaluator, n, args):
    return ev.call(lambda x: pc.cast(pc.sign(pc.cast(x, pa.float64())), pa.float64()), args[0], node=n)


def _f_sqrt(ev: _Evaluator, n, args):
    return ev.call(lambda x: pc.sqrt(pc.cast(x, pa.float64())), args[0], node=n)


def _f_exp(ev: _Evaluator, n, args):
    return ev.call(lambda x: pc.exp(pc.cast(x, pa.float64())), args[0], node=n)


def _f_power(ev: _Evaluator, n, args):
    return ev.call(lambda x, y: pc.power(pc.cast(x, pa.float64()), pc.cast(y, pa.float64())), *args, node=n)


def _f_pmod(ev: _Evaluator, n, args):
    a, b = ev.unify(args[0], args[1], n)
    ev.check_divisor(b, n)
    r = ev.remainder(a, b, n)
    fix = pc.less(r, pa.scalar(0, r.type) if not pa.types.is_decimal(r.type) else pa.scalar(Decimal(0), r.type))
    return ev.call(pc.if_else, pc.fill_null(fix, False), ev.remainder(pc.add(r, b), b, n), r, node=n)


def _date_part(name: str, want: str):
    fns = {"year": pc.year, "month": pc.month, "day": pc.day, "hour": pc.hour, "minute": pc.minute,
           "second": pc.second}

    def impl(ev: _Evaluator, n, args):
        v = ev.temporal(args[0], n, want)
        if pa.types.is_null(v.type):
            return _null_scalar(pa.int32())
        if want == "time" and pa.types.is_date(v.type):
            v = pc.cast(v, pa.timestamp("us"))
        return ev.call(lambda x: pc.cast(fns[name](x), pa.int32()), v, node=n)
    return impl


def _f_to_date(ev: _Evaluator, n, args):
    v = args[0]
    if pa.types.is_date(v.type):
        return v
    return ev.cast_value(v, pa.date32(), n)


def _f_rlike(ev: _Evaluator, n, args):
    s = ev.as_string(args[0], n)
    p = ev.constant(args[1], n, "the regular expression")
    if p is None:
        return _null_scalar(pa.bool_())
    return ev.call(lambda x: pc.match_substring_regex(x, p), s, node=n)


FUNCTIONS: dict[str, tuple[tuple[int, int | None], Callable]] = {
    "coalesce": ((1, None), _f_coalesce),
    "if": ((3, 3), _f_if),
    "nullif": ((2, 2), _f_nullif),
    "named_struct": ((0, None), _f_named_struct),
    "isnan": ((1, 1), _f_isnan),
    "nanvl": ((2, 2), _f_nanvl),
    "greatest": ((2, None), _f_greatest),
    "least": ((2, None), _f_least),
    "lower": ((1, 1), _string_fn(pc.utf8_lower)),
    "upper": ((1, 1), _string_fn(pc.utf8_upper)),
    "length": ((1, 1), _f_length),
    "substring": ((2, 3), _f_substring),
    "concat": ((0, None), _f_concat),
    "concat_ws": ((1, None), _f_concat_ws),
    "trim": ((1, 1), _trim(pc.utf8_trim)),
    "ltrim": ((1, 1), _trim(pc.utf8_ltrim)),
    "rtrim": ((1, 1), _trim(pc.utf8_rtrim)),
    "replace": ((2, 3), _f_replace),
    "startswith": ((2, 2), _pattern_fn(lambda x, p: pc.starts_with(x, p))),
    "endswith": ((2, 2), _pattern_fn(lambda x, p: pc.ends_with(x, p))),
    "contains": ((2, 2), _pattern_fn(lambda x, p: pc.match_substring(x, p))),
    "rlike": ((2, 2), _f_rlike),
    "abs": ((1, 1), _f_abs),
    "negative": ((1, 1), _f_negative),
    "positive": ((1, 1), _f_positive),
    "round": ((1, 2), _f_round),
    "floor": ((1, 1), _floor_ceil(pc.floor)),
    "ceil": ((1, 1), _floor_ceil(pc.ceil)),
    "sign": ((1, 1), _f_sign),
    "sqrt": ((1, 1), _f_sqrt),
    "exp": ((1, 1), _f_exp),
    "power": ((2, 2), _f_power),
    "pmod": ((2, 2), _f_pmod),
    "year": ((1, 1), _date_part("year", "date")),
    "month": ((1, 1), _date_part("month", "date")),
    "day": ((1, 1), _date_part("day", "date")),
    "hour": ((1, 1), _date_part("hour", "time")),
    "minute": ((1, 1), _date_part("minute", "time")),
    "second": ((1, 1), _date_part("second", "time")),
    "to_date": ((1, 1), _f_to_date),
}
"""The scalar functions tahoe evaluates in Arrow: name → ((min, max arguments), implementation)."""
