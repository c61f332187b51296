"""Spark Connect Columns as Spark SQL text, so DML planned on the client reads them as it reads a string
condition. The tree is read in its wire form (the Connect protocol's `Expression`, `column.to_plan`).

  1. Column references keep the name as written; one made from a DataFrame takes its alias from `aliases`.
  2. Operators become Spark SQL's infix forms, other functions `name(args)`; `expr("...")` is kept as written.
  3. Literals are typed as Spark types them (timestamps written in UTC with their offset).
  4. What has no SQL text (a Python UDF, a lambda over a variable, a subquery) raises UnsupportedFeatureError."""

from __future__ import annotations

import datetime as dt
from typing import Any

from ..errors import UnsupportedFeatureError
from ..protocol.column_paths import quote_identifier
from .internals import connect_plan_id

__all__ = ["column_sql", "plan_id"]

_INFIX = {"==": "=", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">=", "<=>": "<=>", "+": "+",
          "-": "-", "*": "*", "/": "/", "%": "%", "&": "&", "|": "|", "^": "^", "and": "AND", "or": "OR",
          "||": "||"}
_EPOCH = dt.date(1970, 1, 1)
_EPOCH_TS = dt.datetime(1970, 1, 1)


def plan_id(df: Any) -> int | None:
    """The plan id of a Spark Connect DataFrame (what `df["col"]` references carry)."""
    return connect_plan_id(df)


def column_sql(column: Any, df: Any = None, aliases: dict[int, str] | None = None) -> str:
    """The Spark SQL text of a Spark Connect Column (see the module docstring). `df`: the
    DataFrame the column is over, whose own references need no qualifier."""
    known = dict(aliases or {})
    if df is not None:
        pid = plan_id(df)
        if pid is not None:
            known.setdefault(pid, "")
    return _sql(column.to_plan(None), known)


def _string(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _sql(e: Any, aliases: dict[int, str]) -> str:
    kind = e.WhichOneof("expr_type")
    if kind == "unresolved_attribute":
        a = e.unresolved_attribute
        name = a.unparsed_identifier
        if a.HasField("plan_id") and a.plan_id in aliases:
            alias = aliases[a.plan_id]
            return f"{quote_identifier(alias)}.{name}" if alias else name
        return name
    if kind == "literal":
        return _literal(e.literal, aliases)
    if kind == "expression_string":
        return f"({e.expression_string.expression})"
    if kind == "unresolved_function":
        f = e.unresolved_function
        if f.is_user_defined_function:
            raise UnsupportedFeatureError(f"a Column calling the user-defined function {f.function_name} has no SQL "
                                          f"form tahoe can plan with: give this condition or value as a SQL string")
        return _function(f.function_name, [_sql(a, aliases) for a in f.arguments], f.is_distinct)
    if kind == "call_function":
        f = e.call_function
        return _function(f.function_name, [_sql(a, aliases) for a in f.arguments], False)
    if kind == "alias":
        return _sql(e.alias.expr, aliases)
    if kind == "cast":
        c = e.cast
        target = c.type_str if c.WhichOneof("cast_to_type") == "type_str" else _type_sql(c.type)
        mode = "TRY_CAST" if c.eval_mode == c.EvalMode.EVAL_MODE_TRY else "CAST"
        return f"{mode}({_sql(c.expr, aliases)} AS {target})"
    if kind == "unresolved_extract_value":
        v = e.unresolved_extract_value
        child = _sql(v.child, aliases)
        x = v.extraction
        if x.WhichOneof("expr_type") == "literal" and x.literal.WhichOneof("literal_type") == "string":
            return f"{child}.{quote_identifier(x.literal.string)}"
        return f"{child}[{_sql(x, aliases)}]"
    if kind == "unresolved_star":
        target = e.unresolved_star.unparsed_target
        return target if target else "*"
    if kind == "update_fields":
        u = e.update_fields
        base = _sql(u.struct_expression, aliases)
        if u.HasField("value_expression"):
            raise UnsupportedFeatureError("Column.withField has no SQL form tahoe can plan with: give this value "
                                          "as a SQL string (named_struct(...))")
        raise UnsupportedFeatureError(f"Column.dropFields on {base} has no SQL form tahoe can plan with")
    raise UnsupportedFeatureError(f"a Spark Connect Column holding a {kind} expression has no SQL form tahoe can "
                                  f"plan with: give this condition or value as a SQL string")


def _function(name: str, args: list[str], distinct: bool) -> str:
    low = name.lower()
    if name in _INFIX and len(args) == 2:
        return f"({args[0]} {_INFIX[name]} {args[1]})"
    if low == "and" or low == "or":
        return "(" + f" {low.upper()} ".join(args) + ")"
    if low in ("not", "!") and len(args) == 1:
        return f"(NOT {args[0]})"
    if low == "negative" and len(args) == 1:
        return f"(- {args[0]})"
    if low == "isnull" and len(args) == 1:
        return f"({args[0]} IS NULL)"
    if low == "isnotnull" and len(args) == 1:
        return f"({args[0]} IS NOT NULL)"
    if low == "in" and args:
        return f"({args[0]} IN ({', '.join(args[1:])}))"
    if low in ("like", "ilike", "rlike") and len(args) == 2:
        return f"({args[0]} {low.upper()} {args[1]})"
    if low == "when":
        parts = ["CASE"]
        for i in range(0, len(args) - 1, 2):
            parts.append(f"WHEN {args[i]} THEN {args[i + 1]}")
        if len(args) % 2:
            parts.append(f"ELSE {args[-1]}")
        return " ".join(parts + ["END"])
    fn = name if name.replace("_", "").isalnum() else quote_identifier(name)
    return f"{fn}({'DISTINCT ' if distinct else ''}{', '.join(args)})"


def _literal(lit: Any, aliases: dict[int, str]) -> str:
    kind = lit.WhichOneof("literal_type")
    if kind == "null":
        return "NULL"
    if kind == "boolean":
        return "TRUE" if lit.boolean else "FALSE"
    if kind == "byte":
        return f"{lit.byte}Y"
    if kind == "short":
        return f"{lit.short}S"
    if kind == "integer":
        return str(lit.integer)
    if kind == "long":
        return f"{lit.long}L"
    if kind in ("float", "double"):
        v = getattr(lit, kind)
        t = "FLOAT" if kind == "float" else "DOUBLE"
        if v != v or v in (float("inf"), float("-inf")):
            return f"CAST('{'NaN' if v != v else ('Infinity' if v > 0 else '-Infinity')}' AS {t})"
        return f"CAST({v!r} AS {t})"
    if kind == "decimal":
        return f"{lit.decimal.value}BD"   # typed by its digits, as Spark types lit(Decimal(...))
    if kind == "string":
        return _string(lit.string)
    if kind == "binary":
        return f"X'{lit.binary.hex().upper()}'"
    if kind == "date":
        return f"DATE'{(_EPOCH + dt.timedelta(days=lit.date)).isoformat()}'"
    if kind == "timestamp":
        ts = _EPOCH_TS + dt.timedelta(microseconds=lit.timestamp)
        return f"TIMESTAMP'{ts.isoformat(sep=' ')}+00:00'"
    if kind == "timestamp_ntz":
        ts = _EPOCH_TS + dt.timedelta(microseconds=lit.timestamp_ntz)
        return f"TIMESTAMP_NTZ'{ts.isoformat(sep=' ')}'"
    if kind == "array":
        return f"array({', '.join(_literal(x, aliases) for x in lit.array.elements)})"
    if kind == "map":
        kv = [s for k, v in zip(lit.map.keys, lit.map.values) for s in (_literal(k, aliases), _literal(v, aliases))]
        return f"map({', '.join(kv)})"
    if kind == "struct":
        names = [f.name for f in lit.struct.struct_type.struct.fields]
        values = [_literal(x, aliases) for x in lit.struct.elements]
        return f"named_struct({', '.join(s for n, v in zip(names, values) for s in (_string(n), v))})"
    raise UnsupportedFeatureError(f"a Spark Connect literal of kind {kind} has no SQL form tahoe can plan with: "
                                  f"give this condition or value as a SQL string")


def _type_sql(t: Any) -> str:
    from pyspark.sql.connect.types import proto_schema_to_pyspark_data_type

    return proto_schema_to_pyspark_data_type(t).simpleString()
