"""The expression tree: a small, typed, immutable representation of a Spark SQL expression, what tahoe works on
once a SQL string is parsed (`tahoe.expressions.parse`). Every node is a frozen dataclass.

  1. `Column(parts)`: the dotted path as written; alias or column is decided at resolution (`resolve`).
  2. `Literal(value, type)`: a Python value of a `tahoe.protocol.schema` type, or None (`void` when untyped).
  3. Operators: `Not`, `And`, `Or`, `Comparison`, `IsNull`, `In`, `Between`, `Like`, `Arithmetic`, `Negate`,
     `Case`, `Cast`, `Func` (a scalar function by its lower-case Spark name).
  4. `Opaque(sql, refs, what)`: what tahoe does not model; Spark evaluates it, the Arrow evaluator refuses
     it by name, data skipping keeps the file.
  5. `to_sql()` renders Spark SQL that parses back to the same meaning."""

from __future__ import annotations

import datetime as _dt
import math
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Iterable, Iterator, Sequence

from ..errors import AnalysisException
from ..protocol.column_paths import quote_identifier
from ..protocol.schema import (
    BINARY, BOOLEAN, DATE, DOUBLE, INTEGER, LONG, STRING, TIMESTAMP, TIMESTAMP_NTZ, VOID, DataType, DecimalType,
    PrimitiveType, ArrayType, MapType, StructType,
)

__all__ = [
    "Expression", "Column", "Literal", "Not", "And", "Or", "Comparison", "IsNull", "In", "Between",
    "Like", "Arithmetic", "Negate", "Case", "Cast", "Func", "Opaque",
    "col", "lit", "and_", "or_", "conjuncts", "disjuncts", "transform", "unqualify", "type_sql",
    "COMPARISON_OPS", "ARITHMETIC_OPS",
]

COMPARISON_OPS = ("=", "<>", "<", "<=", ">", ">=", "<=>")
ARITHMETIC_OPS = ("+", "-", "*", "/", "%", "div")


class Expression:
    """Base of every node."""

    __slots__ = ()

    def children(self) -> tuple["Expression", ...]:
        return ()

    def walk(self) -> Iterator["Expression"]:
        """This node and every node below it, depth first."""
        yield self
        for c in self.children():
            yield from c.walk()

    def columns(self) -> list["Column"]:
        """The column references the expression reads, in order of first appearance, each once."""
        out: list[Column] = []
        for n in self.walk():
            refs = n.refs if isinstance(n, Opaque) else ((n,) if isinstance(n, Column) else ())
            for c in refs:
                if c not in out:
                    out.append(c)
        return out

    def to_sql(self) -> str:  # pragma: no cover - every node overrides
        raise NotImplementedError

    def __str__(self) -> str:
        return self.to_sql()


def _p(e: Expression) -> str:
    """`e` as an operand: atoms bare, anything else in parentheses."""
    s = e.to_sql()
    return s if isinstance(e, (Column, Literal, Func, Cast, Case)) else f"({s})"


@dataclass(frozen=True, slots=True)
class Column(Expression):
    parts: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.parts or not all(isinstance(p, str) and p for p in self.parts):
            raise AnalysisException(f"invalid column reference {self.parts!r}")

    @property
    def name(self) -> str:
        """The dotted name as written (for messages)."""
        return ".".join(self.parts)

    def to_sql(self) -> str:
        return ".".join(quote_identifier(p) for p in self.parts)


@dataclass(frozen=True, slots=True)
class Literal(Expression):
    value: Any
    type: DataType = field(default=VOID)
    # True for a constant folded from an explicit CAST (`CAST(5 AS INT)`): Spark's analyzer sees a
    # cast there, not a literal (it matters to the decimal precision of a comparison, see
    # `tahoe.expressions.coercion` rule 4). Not part of equality.
    folded: bool = field(default=False, compare=False, repr=False)

    def to_sql(self) -> str:
        return literal_sql(self.value, self.type)


@dataclass(frozen=True, slots=True)
class Not(Expression):
    child: Expression

    def children(self):
        return (self.child,)

    def to_sql(self) -> str:
        return f"NOT {_p(self.child)}"


@dataclass(frozen=True, slots=True)
class And(Expression):
    left: Expression
    right: Expression

    def children(self):
        return (self.left, self.right)

    def to_sql(self) -> str:
        return f"{_p(self.left)} AND {_p(self.right)}"


@dataclass(frozen=True, slots=True)
class Or(Expression):
    left: Expression
    right: Expression

    def children(self):
        return (self.left, self.right)

    def to_sql(self) -> str:
        return f"{_p(self.left)} OR {_p(self.right)}"


@dataclass(frozen=True, slots=True)
class Comparison(Expression):
    op: str
    left: Expression
    right: Expression

    def __post_init__(self) -> None:
        if self.op not in COMPARISON_OPS:
            raise AnalysisException(f"unknown comparison operator {self.op!r}")

    def children(self):
        return (self.left, self.right)

    def to_sql(self) -> str:
        return f"{_p(self.left)} {self.op} {_p(self.right)}"


@dataclass(frozen=True, slots=True)
class IsNull(Expression):
    child: Expression

    def children(self):
        return (self.child,)

    def to_sql(self) -> str:
        return f"{_p(self.child)} IS NULL"


@dataclass(frozen=True, slots=True)
class In(Expression):
    value: Expression
    items: tuple[Expression, ...]

    def children(self):
        return (self.value, *self.items)

    def to_sql(self) -> str:
        return f"{_p(self.value)} IN ({', '.join(i.to_sql() for i in self.items)})"


@dataclass(frozen=True, slots=True)
class Between(Expression):
    value: Expression
    low: Expression
    high: Expression

    def children(self):
        return (self.value, self.low, self.high)

    def to_sql(self) -> str:
        return f"{_p(self.value)} BETWEEN {_p(self.low)} AND {_p(self.high)}"


@dataclass(frozen=True, slots=True)
class Like(Expression):
    value: Expression
    pattern: Expression
    escape: str | None = None
    case_insensitive: bool = False

    def children(self):
        return (self.value, self.pattern)

    def to_sql(self) -> str:
        op = "ILIKE" if self.case_insensitive else "LIKE"
        esc = f" ESCAPE {literal_sql(self.escape, STRING)}" if self.escape is not None else ""
        return f"{_p(self.value)} {op} {_p(self.pattern)}{esc}"


@dataclass(frozen=True, slots=True)
class Arithmetic(Expression):
    op: str
    left: Expression
    right: Expression

    def __post_init__(self) -> None:
        if self.op not in ARITHMETIC_OPS:
            raise AnalysisException(f"unknown arithmetic operator {self.op!r}")

    def children(self):
        return (self.left, self.right)

    def to_sql(self) -> str:
        return f"{_p(self.left)} {self.op} {_p(self.right)}"


@dataclass(frozen=True, slots=True)
class Negate(Expression):
    child: Expression

    def children(self):
        return (self.child,)

    def to_sql(self) -> str:
        return f"-{_p(self.child)}"


@dataclass(frozen=True, slots=True)
class Case(Expression):
    """CASE [operand] WHEN w THEN v ... [ELSE default] END: with an operand, a branch is taken
    when `operand = w` is TRUE; without, when `w` is TRUE. No branch taken: `default` (NULL when
    absent)."""
    operand: Expression | None
    branches: tuple[tuple[Expression, Expression], ...]
    default: Expression | None = None

    def __post_init__(self) -> None:
        if not self.branches:
            raise AnalysisException("CASE needs at least one WHEN branch")

    def children(self):
        out: list[Expression] = [] if self.operand is None else [self.operand]
        for w, v in self.branches:
            out += [w, v]
        if self.default is not None:
            out.append(self.default)
        return tuple(out)

    def to_sql(self) -> str:
        s = "CASE" + ("" if self.operand is None else f" {_p(self.operand)}")
        for w, v in self.branches:
            s += f" WHEN {w.to_sql()} THEN {v.to_sql()}"
        if self.default is not None:
            s += f" ELSE {self.default.to_sql()}"
        return s + " END"


@dataclass(frozen=True, slots=True)
class Cast(Expression):
    """CAST(child AS type); `safe` is TRY_CAST (NULL where the value does not convert)."""
    child: Expression
    type: DataType
    safe: bool = False

    def children(self):
        return (self.child,)

    def to_sql(self) -> str:
        return f"{'TRY_CAST' if self.safe else 'CAST'}({self.child.to_sql()} AS {type_sql(self.type)})"


@dataclass(frozen=True, slots=True)
class Func(Expression):
    name: str
    args: tuple[Expression, ...] = ()

    def __post_init__(self) -> None:
        if self.name != self.name.lower():
            raise AnalysisException(f"function names are lower case in the tree: {self.name!r}")

    def children(self):
        return self.args

    def to_sql(self) -> str:
        return f"{self.name}({', '.join(a.to_sql() for a in self.args)})"


@dataclass(frozen=True, slots=True)
class Opaque(Expression):
    """A sub-expression tahoe does not model: Spark SQL text and the columns it reads."""
    sql: str
    refs: tuple[Column, ...] = ()
    what: str = ""   # a short name of the construct, for messages (e.g. the function's name)

    def to_sql(self) -> str:
        return f"({self.sql})"


# --- building ----------------------------------------------------------------------------------

def col(name: str | Sequence[str]) -> Column:
    """A column reference: `col("t.id")` (dots separate parts) or `col(["a.b"])` (one part)."""
    return Column(tuple(name.split(".")) if isinstance(name, str) else tuple(name))


def lit(value: Any, type: DataType | None = None) -> Literal:
    """A literal of a Python value, typed as Spark types the same literal (int: INT when it fits
    32 bits, else BIGINT; float: DOUBLE; Decimal: DECIMAL(p, s) of its digits; str: STRING; ...)."""
    return Literal(value, type if type is not None else infer_type(value))


def infer_type(value: Any) -> DataType:
    if value is None:
        return VOID
    if isinstance(value, bool):
        return BOOLEAN
    if isinstance(value, int):
        return INTEGER if -(1 << 31) <= value < (1 << 31) else LONG
    if isinstance(value, float):
        return DOUBLE
    if isinstance(value, Decimal):
        return decimal_type_of(value)
    if isinstance(value, str):
        return STRING
    if isinstance(value, (bytes, bytearray)):
        return BINARY
    if isinstance(value, _dt.datetime):
        return TIMESTAMP if value.tzinfo is not None else TIMESTAMP_NTZ
    if isinstance(value, _dt.date):
        return DATE
    raise AnalysisException(f"no SQL literal for the Python value {value!r} ({type(value).__name__})")


def decimal_type_of(d: Decimal) -> DecimalType:
    """DECIMAL(p, s) of a decimal literal's digits, as Spark types `1.50` (decimal(3,2))."""
    sign, digits, exp = d.as_tuple()
    if not isinstance(exp, int):
        raise AnalysisException(f"no decimal literal for {d}")
    scale = max(-exp, 0)
    precision = max(len(digits) + max(exp, 0), scale, 1)
    if precision > 38:
        raise AnalysisException(f"decimal literal {d} needs more than 38 digits")
    return DecimalType(precision, scale)


def and_(*exprs: Expression) -> Expression:
    """The conjunction of `exprs` (left-deep); TRUE when none."""
    out: Expression | None = None
    for e in exprs:
        out = e if out is None else And(out, e)
    return out if out is not None else Literal(True, BOOLEAN)


def or_(*exprs: Expression) -> Expression:
    out: Expression | None = None
    for e in exprs:
        out = e if out is None else Or(out, e)
    return out if out is not None else Literal(False, BOOLEAN)


def conjuncts(e: Expression) -> list[Expression]:
    """The AND-ed parts of `e` (`a AND (b AND c)` → [a, b, c])."""
    if isinstance(e, And):
        return conjuncts(e.left) + conjuncts(e.right)
    return [e]


def disjuncts(e: Expression) -> list[Expression]:
    if isinstance(e, Or):
        return disjuncts(e.left) + disjuncts(e.right)
    return [e]


def transform(e: Expression, fn) -> Expression:
    """`e` rebuilt bottom-up: every node's children are transformed first, then `fn(node)` gives
    the node to use (return the node itself to keep it)."""
    import dataclasses

    def conv(v):
        if isinstance(v, Expression):
            return transform(v, fn)
        if isinstance(v, tuple):
            return tuple(conv(x) for x in v)
        return v

    if isinstance(e, (Column, Literal, Opaque)):
        return fn(e)
    changes = {f.name: conv(getattr(e, f.name)) for f in dataclasses.fields(e)}
    return fn(dataclasses.replace(e, **changes))


def unqualify(e: Expression, alias: str) -> Expression:
    """`e` with the references qualified by `alias` (`t.id`, any case) made bare (`id`): what a
    condition on one side of a MERGE says about that table alone (e.g. for its data skipping).
    `Opaque` nodes keep their SQL text as it is."""
    low = alias.lower()

    def fn(n):
        if isinstance(n, Column) and len(n.parts) > 1 and n.parts[0].lower() == low:
            return Column(n.parts[1:])
        return n
    return transform(e, fn)


# --- rendering ---------------------------------------------------------------------------------

_TYPE_SQL = {"long": "BIGINT", "integer": "INT", "short": "SMALLINT", "byte": "TINYINT", "float": "FLOAT",
             "double": "DOUBLE", "boolean": "BOOLEAN", "string": "STRING", "binary": "BINARY", "date": "DATE",
             "timestamp": "TIMESTAMP", "timestamp_ntz": "TIMESTAMP_NTZ", "void": "VOID"}


def type_sql(t: DataType) -> str:
    """Spark SQL's name of a type (`BIGINT`, `DECIMAL(10,2)`, `ARRAY<INT>`, ...)."""
    if isinstance(t, PrimitiveType) and t.name in _TYPE_SQL:
        return _TYPE_SQL[t.name]
    if isinstance(t, DecimalType):
        return f"DECIMAL({t.precision},{t.scale})"
    if isinstance(t, ArrayType):
        return f"ARRAY<{type_sql(t.element_type)}>"
    if isinstance(t, MapType):
        return f"MAP<{type_sql(t.key_type)}, {type_sql(t.value_type)}>"
    if isinstance(t, StructType):
        return "STRUCT<" + ", ".join(f"{quote_identifier(f.name)}: {type_sql(f.type)}" for f in t.fields) + ">"
    raise AnalysisException(f"type {t} has no SQL name")


def _string_sql(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _ts_text(v: _dt.datetime) -> str:
    if v.tzinfo is not None:
        v = v.astimezone(_dt.timezone.utc)
        return v.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds") + "Z"
    return v.isoformat(sep=" ", timespec="microseconds")


def literal_sql(value: Any, t: DataType) -> str:
    """Spark SQL text of a typed literal."""
    name = t.name if isinstance(t, PrimitiveType) else None
    if value is None:
        return "NULL" if name == "void" else f"CAST(NULL AS {type_sql(t)})"
    if name == "boolean":
        return "TRUE" if value else "FALSE"
    if name in ("integer", "long", "short", "byte"):
        v = int(value)
        if name == "integer" or (name == "long" and not -(1 << 31) <= v < (1 << 31)):
            return str(v)   # Spark types an integer literal INT when it fits, else BIGINT
        return str(v) + {"long": "L", "short": "S", "byte": "Y"}[name]
    if name in ("double", "float"):
        f = float(value)
        if math.isnan(f) or math.isinf(f):
            text = "NaN" if math.isnan(f) else ("Infinity" if f > 0 else "-Infinity")
            return f"CAST('{text}' AS {type_sql(t)})"
        return f"{repr(f)}D" if name == "double" else f"CAST({repr(f)}D AS FLOAT)"
    if isinstance(t, DecimalType):
        d = Decimal(value)
        text = format(d, "f") + "BD"
        try:
            own = decimal_type_of(d)
        except AnalysisException:
            own = None
        return text if own == t else f"CAST({text} AS {type_sql(t)})"
    if name == "string":
        return _string_sql(str(value))
    if name == "binary":
        return "X'" + bytes(value).hex().upper() + "'"
    if name == "date":
        return f"DATE '{value.isoformat()}'"
    if name == "timestamp":
        v = value if isinstance(value, _dt.datetime) else _dt.datetime.fromisoformat(str(value))
        if v.tzinfo is None:
            v = v.replace(tzinfo=_dt.timezone.utc)
        return f"TIMESTAMP '{_ts_text(v)}'"
    if name == "timestamp_ntz":
        return f"TIMESTAMP_NTZ '{_ts_text(value.replace(tzinfo=None))}'"
    raise AnalysisException(f"no SQL literal of type {t}")


def all_columns(exprs: Iterable[Expression]) -> list[Column]:
    out: list[Column] = []
    for e in exprs:
        for c in e.columns():
            if c not in out:
                out.append(c)
    return out
