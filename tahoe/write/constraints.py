"""Row-level checks a writer makes on the rows it adds (spec "Column Invariants", "CHECK
Constraints", "Generated Columns", NOT NULL columns), evaluated in Arrow.

Owns: a small SQL-expression evaluator — sqlglot (Spark dialect) → pyarrow.compute — for the
boolean expressions these features store as text, and the checks themselves. Supported: column
references (nested with dots, backtick-quoted, case-insensitive), literals (numbers, strings,
booleans, NULL; a string compared with a date/timestamp/decimal/numeric column is read as that
type), comparisons, AND/OR/NOT, IS [NOT] NULL, [NOT] IN (...), [NOT] BETWEEN, [NOT] LIKE, + - * /
% and unary minus, parentheses. Anything else raises UnsupportedFeatureError: a check this writer
cannot evaluate is refused, never skipped.

SQL semantics: three-valued logic (Kleene AND/OR, NULL propagates through comparisons); a CHECK
constraint or invariant holds for a row only when it evaluates to TRUE (false or NULL violates).
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ConstraintViolationError, UnsupportedFeatureError
from ..protocol.partition_values import parse_partition_value
from ..protocol.schema import StructField, StructType, from_arrow_type

__all__ = ["parse_sql", "evaluate", "column_references", "table_resolver", "check_not_null",
           "check_constraints", "constraint_expressions", "CONSTRAINT_PREFIX", "INVARIANTS_KEY",
           "GENERATION_EXPRESSION_KEY"]

CONSTRAINT_PREFIX = "delta.constraints."
INVARIANTS_KEY = "delta.invariants"
GENERATION_EXPRESSION_KEY = "delta.generationExpression"

Resolver = Callable[[list[str]], "pa.Array | None"]


def parse_sql(text: str):
    """Parse a boolean SQL expression (Spark dialect); UnsupportedFeatureError if sqlglot cannot."""
    import sqlglot
    from sqlglot.errors import ParseError

    try:
        return sqlglot.parse_one(text, read="spark")
    except ParseError as e:
        raise UnsupportedFeatureError(f"cannot parse the SQL expression {text!r}: {e}") from None


def _column_parts(node) -> list[str]:
    from sqlglot import exp

    if isinstance(node, exp.Column):
        return [p.name for p in node.parts]
    if isinstance(node, exp.Dot):
        return _column_parts(node.this) + [node.expression.name]
    raise UnsupportedFeatureError(f"unsupported column reference {node.sql()}")


def column_references(node) -> list[list[str]]:
    """Every column path the expression reads."""
    from sqlglot import exp

    out = []
    for n in node.walk():
        if isinstance(n, exp.Column) and not isinstance(n.parent, exp.Dot):
            out.append(_column_parts(n))
        elif isinstance(n, exp.Dot) and not isinstance(n.parent, exp.Dot):
            out.append(_column_parts(n))
    return out


def table_resolver(table: pa.Table) -> Resolver:
    """Column paths resolved case-insensitively against `table`, through nested structs."""
    def resolve(parts: list[str]) -> pa.Array | None:
        names = table.column_names
        idx = _find(names, parts[0])
        if idx < 0:
            return None
        col = table.column(idx)
        arr = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
        for p in parts[1:]:
            if not pa.types.is_struct(arr.type):
                return None
            child = [arr.type.field(i).name for i in range(arr.type.num_fields)]
            j = _find(child, p)
            if j < 0:
                return None
            arr = pc.struct_field(arr, [j])
        return arr
    return resolve


def _find(names: list[str], name: str) -> int:
    if name in names:
        return names.index(name)
    low = name.lower()
    for i, n in enumerate(names):
        if n.lower() == low:
            return i
    return -1


# --- evaluation --------------------------------------------------------------------------------

def _is_arr(v: Any) -> bool:
    return isinstance(v, (pa.Array, pa.ChunkedArray))


def _coerce_scalar(s: pa.Scalar, t: pa.DataType) -> pa.Scalar:
    """A literal read as the type of the column it is compared with."""
    if s.type == t:
        return s
    if not s.is_valid:
        return pa.scalar(None, t)
    if pa.types.is_string(s.type) and not (pa.types.is_string(t) or pa.types.is_large_string(t)):
        try:
            return pa.scalar(parse_partition_value(s.as_py(), from_arrow_type(t)), t)
        except Exception as e:
            raise UnsupportedFeatureError(f"cannot compare {t} with the string {s.as_py()!r}: {e}") from None
    if (pa.types.is_decimal(t) or pa.types.is_date(t) or pa.types.is_timestamp(t)) and \
            (pa.types.is_integer(s.type) or pa.types.is_floating(s.type)):
        try:
            return s.cast(t)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return s
    return s


def _align(a: Any, b: Any) -> tuple[Any, Any]:
    if _is_arr(a) and isinstance(b, pa.Scalar):
        return a, _coerce_scalar(b, a.type)
    if isinstance(a, pa.Scalar) and _is_arr(b):
        return _coerce_scalar(a, b.type), b
    if _is_arr(a) and _is_arr(b) and a.type != b.type:
        if pa.types.is_null(a.type):
            return a.cast(b.type), b
        if pa.types.is_null(b.type):
            return a, b.cast(a.type)
    if isinstance(a, pa.Scalar) and isinstance(b, pa.Scalar) and a.type != b.type:
        if not a.is_valid:
            a = pa.scalar(None, b.type)
        elif not b.is_valid:
            b = pa.scalar(None, a.type)
    return a, b


def _call(fn: Callable, *args: Any, what: str) -> Any:
    try:
        return fn(*args)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as e:
        raise UnsupportedFeatureError(f"cannot evaluate {what} in Arrow: {e}") from None


def _to_bool(v: Any, what: str) -> Any:
    t = v.type
    if pa.types.is_boolean(t):
        return v
    if pa.types.is_null(t):
        return v.cast(pa.bool_()) if _is_arr(v) else pa.scalar(None, pa.bool_())
    raise UnsupportedFeatureError(f"{what} is not a boolean expression (it is {t})")


def evaluate(node_or_sql: Any, resolve: Resolver, num_rows: int) -> pa.Array:
    """Evaluate a SQL expression over `num_rows` rows whose columns `resolve` supplies; returns an
    Arrow array of `num_rows` values (a constant result is broadcast)."""
    from sqlglot import exp

    node = parse_sql(node_or_sql) if isinstance(node_or_sql, str) else node_or_sql
    cmp = {exp.EQ: pc.equal, exp.NEQ: pc.not_equal, exp.GT: pc.greater, exp.GTE: pc.greater_equal,
           exp.LT: pc.less, exp.LTE: pc.less_equal}
    arith = {exp.Add: pc.add_checked, exp.Sub: pc.subtract_checked, exp.Mul: pc.multiply_checked}

    def ev(n) -> Any:
        what = n.sql(dialect="spark")
        if isinstance(n, exp.Paren):
            return ev(n.this)
        if isinstance(n, (exp.Column, exp.Dot)):
            parts = _column_parts(n)
            arr = resolve(parts)
            if arr is None:
                raise UnsupportedFeatureError(f"the expression refers to an unknown column '{'.'.join(parts)}'")
            return arr
        if isinstance(n, exp.Literal):
            if n.is_string:
                return pa.scalar(n.this, pa.string())
            text = n.this
            try:
                return pa.scalar(int(text), pa.int64())
            except ValueError:
                return pa.scalar(float(text), pa.float64())
        if isinstance(n, exp.Boolean):
            return pa.scalar(bool(n.this), pa.bool_())
        if isinstance(n, exp.Null):
            return pa.scalar(None, pa.null())
        if isinstance(n, exp.Neg):
            return _call(pc.negate_checked, ev(n.this), what=what)
        if type(n) in cmp:
            a, b = _align(ev(n.this), ev(n.expression))
            return _call(cmp[type(n)], a, b, what=what)
        if type(n) in arith:
            a, b = _align(ev(n.this), ev(n.expression))
            return _call(arith[type(n)], a, b, what=what)
        if isinstance(n, exp.Div):   # Spark's `/` is fractional division
            a, b = ev(n.this), ev(n.expression)
            return _call(lambda x, y: pc.divide(pc.cast(x, pa.float64()), pc.cast(y, pa.float64())), a, b, what=what)
        if isinstance(n, exp.Mod):
            a, b = _align(ev(n.this), ev(n.expression))
            return _call(lambda x, y: pc.subtract(x, pc.multiply(pc.divide(x, y), y)), a, b, what=what)
        if isinstance(n, exp.And):
            return _call(pc.and_kleene, _to_bool(ev(n.this), what), _to_bool(ev(n.expression), what), what=what)
        if isinstance(n, exp.Or):
            return _call(pc.or_kleene, _to_bool(ev(n.this), what), _to_bool(ev(n.expression), what), what=what)
        if isinstance(n, exp.Not):
            return _call(pc.invert, _to_bool(ev(n.this), what), what=what)
        if isinstance(n, exp.Is):
            if not isinstance(n.expression, exp.Null):
                raise UnsupportedFeatureError(f"cannot evaluate {what} in Arrow")
            v = ev(n.this)
            return pc.is_null(v) if _is_arr(v) else pa.scalar(not v.is_valid)
        if isinstance(n, exp.In):
            if n.args.get("query") is not None or n.args.get("unnest") is not None:
                raise UnsupportedFeatureError(f"cannot evaluate {what} in Arrow")
            v = ev(n.this)
            items = [ev(x) for x in n.expressions]
            if any(_is_arr(x) for x in items):
                raise UnsupportedFeatureError(f"IN with column values is not supported: {what}")
            if not _is_arr(v):
                v = pa.array([v.as_py()], v.type)
                broadcast = True
            else:
                broadcast = False
            coerced = [_coerce_scalar(x, v.type) for x in items]
            has_null = any(not x.is_valid for x in coerced)
            values = pa.array([x.as_py() for x in coerced if x.is_valid], v.type)
            hit = _call(lambda a: pc.is_in(a, value_set=values), v, what=what)
            # SQL: NULL IN (...) is NULL; x IN (.., NULL) is NULL when x is not found
            res = pc.if_else(pc.is_null(v), pa.scalar(None, pa.bool_()), hit)
            if has_null:
                res = pc.if_else(res, True, pa.scalar(None, pa.bool_()))
            return res[0] if broadcast else res
        if isinstance(n, exp.Between):
            v = ev(n.this)
            a1, lo = _align(v, ev(n.args["low"]))
            a2, hi = _align(v, ev(n.args["high"]))
            return pc.and_kleene(_call(pc.greater_equal, a1, lo, what=what), _call(pc.less_equal, a2, hi, what=what))
        if isinstance(n, exp.Like):
            v = ev(n.this)
            pat = ev(n.expression)
            if _is_arr(pat) or not pa.types.is_string(pat.type):
                raise UnsupportedFeatureError(f"LIKE needs a string literal pattern: {what}")
            if not pat.is_valid:
                return pa.scalar(None, pa.bool_())
            return _call(lambda a: pc.match_like(a, pat.as_py()), v, what=what)
        raise UnsupportedFeatureError(f"cannot evaluate {what!r} in Arrow (unsupported {type(n).__name__})")

    out = ev(node)
    if isinstance(out, pa.ChunkedArray):
        out = out.combine_chunks()
    if isinstance(out, pa.Scalar):
        out = pa.array([out.as_py()] * num_rows, out.type if not pa.types.is_null(out.type) else pa.bool_())
    return out


# --- checks ------------------------------------------------------------------------------------

def _row_values(table: pa.Table, row: int, paths: Iterable[list[str]]) -> str:
    resolve = table_resolver(table)
    out = []
    for p in paths:
        arr = resolve(p)
        out.append(f" - {'.'.join(p)} : {arr[row].as_py() if arr is not None else '?'}")
    return "\n".join(out)


def check_not_null(table: pa.Table, schema: StructType) -> None:
    """Every non-nullable column (and non-nullable field of a present struct) has no nulls."""
    def walk(arr: pa.Array, fields: Iterable[StructField], prefix: str, parent_valid: pa.Array | None):
        for i, f in enumerate(fields):
            child = arr.field(i) if parent_valid is not None else arr
            path = f"{prefix}{f.name}"
            if not f.nullable and child.null_count:
                bad = pc.is_null(child)
                if parent_valid is not None:
                    bad = pc.and_(bad, parent_valid)
                if pc.any(bad).as_py():
                    raise ConstraintViolationError(f"NOT NULL constraint violated for column: {path}")
            if isinstance(f.type, StructType):
                valid = pc.is_valid(child)
                if parent_valid is not None:
                    valid = pc.and_(valid, parent_valid)
                walk(child, f.type.fields, path + ".", valid)

    for f in schema.fields:
        if f.name not in table.column_names:
            continue
        col = table.column(f.name)
        for chunk in col.chunks:
            walk(chunk, [f], "", None)


def constraint_expressions(schema: StructType, configuration: dict) -> list[tuple[str, str]]:
    """(description, SQL) of every CHECK constraint (`delta.constraints.<name>`) and column
    invariant (`delta.invariants` field metadata) of the table."""
    out: list[tuple[str, str]] = []
    for k, v in sorted(configuration.items()):
        if k.lower().startswith(CONSTRAINT_PREFIX) and v is not None:
            out.append((f"CHECK constraint {k[len(CONSTRAINT_PREFIX):]} ({v})", v))

    def walk(fields: Iterable[StructField], prefix: str):
        for f in fields:
            raw = f.metadata.get(INVARIANTS_KEY)
            if raw:
                try:
                    obj = json.loads(raw) if isinstance(raw, str) else raw
                    sql = obj["expression"]["expression"]
                except (ValueError, KeyError, TypeError):
                    raise UnsupportedFeatureError(f"cannot read the invariant of column {prefix}{f.name}: {raw!r}") from None
                out.append((f"Invariant ({sql}) on column {prefix}{f.name}", sql))
            if isinstance(f.type, StructType):
                walk(f.type.fields, f"{prefix}{f.name}.")
    walk(schema.fields, "")
    return out


def check_constraints(table: pa.Table, schema: StructType, configuration: dict) -> None:
    """Raise ConstraintViolationError when a row of `table` (logical names) violates a NOT NULL
    column, a CHECK constraint or an invariant; UnsupportedFeatureError when one cannot be
    evaluated in Arrow."""
    check_not_null(table, schema)
    if table.num_rows == 0:
        return
    resolve = table_resolver(table)
    for desc, sql in constraint_expressions(schema, configuration):
        node = parse_sql(sql)
        ok = evaluate(node, resolve, table.num_rows)
        if not pa.types.is_boolean(ok.type) and not pa.types.is_null(ok.type):
            raise UnsupportedFeatureError(f"{desc} is not a boolean expression")
        bad = pc.invert(pc.fill_null(ok.cast(pa.bool_()), False))
        if pc.any(bad).as_py():
            row = int(pc.index(bad, True).as_py())
            raise ConstraintViolationError(
                f"{desc} violated by row with values:\n{_row_values(table, row, column_references(node))}")
