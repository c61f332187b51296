"""Spark 4's type coercion for comparing numbers of two types (binary comparisons, BETWEEN, IN), shared by the
Arrow evaluator and data skipping, so a file is dropped only when Spark could match none of its rows:
  1. Two integers: the wider.
  2. An integer and a FLOAT or DOUBLE: DOUBLE (non-ANSI: integer and FLOAT meet as FLOAT).
  3. A DECIMAL and a FLOAT or DOUBLE: DOUBLE.
  4. An integer and a DECIMAL: the integer as DECIMAL(3|5|10|20, 0); a literal as DECIMAL(its digits, 0).
  5. Two DECIMALs: DECIMAL(r+s, s), capped at 38 digits with the scale giving way (rounded HALF_UP).
  6. An integer compared with a DECIMAL literal beyond BIGINT is a constant (`reduced_comparison`).
  7. `CAST(CAST(integer AS FLOAT) AS DOUBLE)` is the integer as DOUBLE (`float_cast_operand`).
An IN list folds rules 1-5 left to right (`in_type`; a STRING meets an integer as BIGINT, else DOUBLE).
Data skipping keeps a file when either ANSI mode could match (`comparison_types`)."""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation
from typing import Any, Sequence

from ..protocol.schema import DOUBLE, FLOAT, LONG, STRING, DataType, DecimalType, PrimitiveType
from .tree import Expression, Literal, Cast

__all__ = [
    "comparison_type", "comparison_types", "in_type", "wider_type", "integral_as_decimal", "int_literal",
    "decimal_literal", "reduced_comparison", "float_cast_operand",
    "is_numeric_type", "to_double", "to_float32", "to_decimal", "cast_number", "cast_array",
]

MAX_PRECISION = 38
_INTEGRAL = ("byte", "short", "integer", "long")
_INTEGRAL_DIGITS = {"byte": 3, "short": 5, "integer": 10, "long": 20}
_CTX = Context(prec=200)


def _name(t: DataType) -> str | None:
    if isinstance(t, DecimalType):
        return "decimal"
    return t.name if isinstance(t, PrimitiveType) else None


def is_numeric_type(t: DataType) -> bool:
    return _name(t) in (*_INTEGRAL, "float", "double", "decimal")


def integral_as_decimal(t: DataType, literal: Any = None) -> DecimalType:
    """An integer type as the DECIMAL Spark widens it to; with `literal` (an int), the decimal of
    that literal's digits."""
    if literal is not None and not isinstance(literal, bool) and isinstance(literal, int):
        return DecimalType(max(len(str(abs(literal))), 1), 0)
    return DecimalType(_INTEGRAL_DIGITS[_name(t)], 0)


def _wider_decimal(a: DecimalType, b: DecimalType) -> DecimalType:
    scale = max(a.scale, b.scale)
    digits = max(a.precision - a.scale, b.precision - b.scale)
    if digits + scale <= MAX_PRECISION:
        return DecimalType(digits + scale, scale)
    return DecimalType(MAX_PRECISION, max(0, MAX_PRECISION - digits))


def wider_type(a: DataType, b: DataType, *, ansi: bool = True) -> DataType | None:
    """The type two numbers meet in (rules 1-5, integers as their whole type); None when `a`
    and `b` are not both numbers (or NULL)."""
    na, nb = _name(a), _name(b)
    if na == "void":
        return b if is_numeric_type(b) else None
    if nb == "void":
        return a if is_numeric_type(a) else None
    if not (is_numeric_type(a) and is_numeric_type(b)):
        return None
    if a == b:
        return a
    if na in _INTEGRAL and nb in _INTEGRAL:
        return a if _INTEGRAL.index(na) >= _INTEGRAL.index(nb) else b
    if "double" in (na, nb):
        return DOUBLE
    if "float" in (na, nb):
        other = nb if na == "float" else na
        if other == "float":
            return FLOAT
        if other in _INTEGRAL and not ansi:
            return FLOAT
        return DOUBLE
    da = a if na == "decimal" else integral_as_decimal(a)
    db = b if nb == "decimal" else integral_as_decimal(b)
    return _wider_decimal(da, db)


def int_literal(e: Expression) -> int | None:
    """The value of an integer literal as Spark's analyzer sees one (`5`, `5L`, `-5`; not a
    folded `CAST(5 AS INT)`), else None — it decides the decimal precision of a comparison with
    a DECIMAL (`tahoe.expressions.coercion`, rule 4)."""
    if isinstance(e, Literal) and not e.folded and isinstance(e.value, int) and not isinstance(e.value, bool):
        return e.value
    return None


def comparison_type(a: DataType, b: DataType, *, ansi: bool = True, a_literal: Any = None,
                    b_literal: Any = None) -> DataType | None:
    """The type both sides of a binary comparison of numbers are cast to; `a_literal` /
    `b_literal` are the values of sides that are integer literals (rule 4). None when the sides
    are not both numbers."""
    na, nb = _name(a), _name(b)
    if na in _INTEGRAL and nb == "decimal":
        a = integral_as_decimal(a, a_literal)
    elif nb in _INTEGRAL and na == "decimal":
        b = integral_as_decimal(b, b_literal)
    return wider_type(a, b, ansi=ansi)


def comparison_types(a: DataType, b: DataType, *, a_literal: Any = None, b_literal: Any = None) -> list[DataType]:
    """The comparison types of ANSI and of legacy mode (one when they agree)."""
    out = []
    for ansi in (True, False):
        t = comparison_type(a, b, ansi=ansi, a_literal=a_literal, b_literal=b_literal)
        if t is not None and t not in out:
            out.append(t)
    return out


def in_type(types: Sequence[DataType], *, ansi: bool = True) -> DataType | None:
    """The one type of `value IN (items...)` (`types` = the value's, then the items'): the wider
    type folded left to right, in that order (no literal rule here: Spark widens an IN list as
    whole types). A STRING meets an integer as BIGINT and any other number as DOUBLE in ANSI mode
    (so `l IN ('1', 2.5)` is DECIMAL(21,1) but `l IN (2.5, '1')` DOUBLE, as in Spark); in legacy
    mode a STRING makes the whole list STRING. None when the types are not numbers, NULLs and
    such strings."""
    names = [_name(t) for t in types]
    if not any(is_numeric_type(t) for t in types):
        return None
    if any(n not in ("string", "void") and not is_numeric_type(t) for n, t in zip(names, types)):
        return None
    if "string" in names and not ansi:
        return STRING
    out: DataType | None = None
    for t in types:
        nt = _name(t)
        if nt == "void":   # NULL takes any type
            continue
        if out is None:
            out = t
            continue
        no = _name(out)
        if no == "string" and nt == "string":
            continue
        if no == "string" or nt == "string":
            out = LONG if (nt if no == "string" else no) in _INTEGRAL else DOUBLE
            continue
        out = wider_type(out, t, ansi=ansi)
        if out is None:
            return None
    return out


# --- Spark's rewrites of comparisons ------------------------------------------------------------

_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


def decimal_literal(e: Expression) -> Decimal | None:
    """The value of a DECIMAL literal as Spark's analyzer sees one (`2.5`, `-1.5BD`,
    `99999999999999999999`; not a folded `CAST(... AS DECIMAL(p,s))`), else None."""
    if isinstance(e, Literal) and not e.folded and isinstance(e.type, DecimalType) and isinstance(e.value, Decimal):
        return e.value
    return None


def reduced_comparison(op: str, left_type: DataType, right_type: DataType, left: Expression,
                       right: Expression) -> bool | None:
    """Spark's strength reduction of an integer compared with a DECIMAL literal (DecimalPrecision:
    `i > 2.5` is `i > 2`): a literal beyond BIGINT's range makes `<`, `<=`, `>`, `>=` a constant —
    TRUE or FALSE for every row, NULL ones included (`i8 > -99999999999999999999.5` is TRUE where
    i8 is NULL). That constant, else None (the comparison is evaluated as it stands, which gives
    the same answers as the reduced one)."""
    if op not in _FLIP:
        return None
    lv, rv = decimal_literal(left), decimal_literal(right)
    if _name(left_type) in _INTEGRAL and rv is not None:
        v = rv
    elif _name(right_type) in _INTEGRAL and lv is not None:
        v, op = lv, _FLIP[op]
    else:
        return None
    if v < _LONG_MIN:
        return op in (">", ">=")
    if v > _LONG_MAX:
        return op in ("<", "<=")
    return None


def float_cast_operand(e: Expression) -> Expression | None:
    """For `CAST(x AS FLOAT)` (or TRY_CAST), `x`: Spark's optimizer (SimplifyCasts) drops a FLOAT
    cast of an integer that is cast on to DOUBLE — explicitly, or by a comparison that meets a
    DOUBLE — so `CAST(i AS FLOAT) = 2147483647` compares i as a DOUBLE (TRUE for i = 2147483647,
    though the FLOAT is 2147483648). The caller checks that `x` is an integer."""
    if isinstance(e, Cast) and _name(e.type) == "float":
        return e.child
    return None


# --- values ------------------------------------------------------------------------------------

def to_double(v: Any) -> float:
    """A number as Spark casts it to DOUBLE: integers and decimals correctly rounded (Python's
    float() of an int or a Decimal is), floats as they are."""
    return float(v)


_F32_MAX_HALF = Decimal("340282356779733661637539395458142568448")   # float32 max + half an ulp


def to_float32(v: Any) -> float:
    """A number (or a numeric string) as Spark casts it to FLOAT: rounded to the nearest float32
    from its exact value (Java's Float.parseFloat / BigDecimal.floatValue — not through a
    double), ±Infinity beyond the range; returned as the Python float of that float32."""
    import numpy as np

    if isinstance(v, str):
        text = v.strip()
        low = text.lower().lstrip("+")
        if low in ("nan", "-nan"):
            return math.nan
        if low in ("inf", "infinity"):
            return math.inf
        if low in ("-inf", "-infinity"):
            return -math.inf
        if "_" in text:
            raise ValueError(f"not a number: {v!r}")
        v = Decimal(text)
    if isinstance(v, float):
        if not math.isfinite(v):
            return v
        with np.errstate(over="ignore"):
            return float(np.float32(v))
    d = Decimal(v)
    if not d.is_finite():
        return float(d)
    if abs(d) >= _F32_MAX_HALF:
        return math.copysign(math.inf, d)
    with np.errstate(over="ignore"):
        f = np.float32(float(d))   # the nearest double, then float32: off by one ulp at most
    best, best_dist = None, None
    for c in (np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))):
        if not np.isfinite(c):
            continue
        dist = abs(_CTX.subtract(Decimal(float(c)), d))
        if best is None or dist < best_dist or (dist == best_dist and int(c.view(np.uint32)) % 2 == 0):
            best, best_dist = c, dist
    return float(best)


def to_decimal(v: Any, t: DecimalType) -> Decimal | None:
    """A number as Spark casts it to DECIMAL(p, s): rounded HALF_UP to the scale; None when it
    does not fit (ANSI raises, legacy gives NULL) or is not finite."""
    if isinstance(v, float):
        if not math.isfinite(v):
            return None
        d = Decimal(repr(v))
    else:
        d = Decimal(v)
    try:
        q = d.quantize(Decimal(1).scaleb(-t.scale), rounding=ROUND_HALF_UP, context=_CTX)
    except InvalidOperation:
        return None
    if q != 0 and q.adjusted() + 1 > t.precision - t.scale:
        return None
    return q


def cast_number(v: Any, t: DataType) -> Any:
    """A Python number as Spark casts it to the numeric type `t` (rules above; None: it does not
    fit)."""
    n = _name(t)
    if v is None:
        return None
    if n == "double":
        return to_double(v)
    if n == "float":
        return to_float32(v)
    if n == "decimal":
        return to_decimal(v, t)
    if n in _INTEGRAL:
        if isinstance(v, float):
            if not math.isfinite(v):
                return None
            v = int(v)
        elif isinstance(v, Decimal):
            v = int(v)
        lo = -(1 << ({"byte": 7, "short": 15, "integer": 31, "long": 63}[n]))
        return v if lo <= v < -lo else None
    raise TypeError(f"not a numeric type: {t}")


# --- Arrow arrays --------------------------------------------------------------------------------

def cast_array(v, target):
    """An Arrow array or scalar of numbers cast to the numeric Arrow type `target` as Spark casts
    (integers to floating point rounded to nearest, never an error; decimals to floating point
    correctly rounded, through their exact text; decimals to a smaller scale rounded HALF_UP).
    Raises pyarrow's ArrowInvalid where the value does not fit an integer or decimal target."""
    import pyarrow as pa
    import pyarrow.compute as pc

    src = v.type
    if src == target:
        return v
    if pa.types.is_floating(target):
        if pa.types.is_decimal(src):
            return pc.cast(pc.cast(v, pa.string()), target)
        return pc.cast(v, target, safe=False)
    if pa.types.is_decimal(target) and pa.types.is_integer(src):
        # Arrow wants room for the integer type's every value first; the narrowing is checked
        room = pa.decimal256({8: 3, 16: 5, 32: 10, 64: 20}[src.bit_width] + target.scale, target.scale)
        return pc.cast(pc.cast(v, room), target)
    if pa.types.is_decimal(target) and pa.types.is_decimal(src) and src.scale > target.scale:
        room = pa.decimal256(src.precision + 1, src.scale)   # rounding up may need one more digit
        v = pc.round(pc.cast(v, room), ndigits=target.scale, round_mode="half_towards_infinity")
        return pc.cast(v, target)
    return pc.cast(v, target)

