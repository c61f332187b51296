"""Expressions as Spark's Catalyst prints them before analysis (`Expression.toString` of the parsed,
unresolved tree): how delta-spark 4 records an OPTIMIZE `where` in the commit's `predicate`
parameter — `key = 'a'` becomes `('key = a)`.

1. A column: `'name` (a quote before the name, parts joined by dots).
2. A literal: its value as text, strings unquoted; NULL as `null`, booleans `true` / `false`.
3. Binary operators in parentheses, `(left op right)`; AND / OR likewise; NOT and IS [NOT] NULL
   as Catalyst's `NOT x`, `isnull(x)`, `isnotnull(x)`; IN as `x IN (a,b)`; functions `'name(args)`.
"""

from __future__ import annotations

from .tree import And, Arithmetic, Column, Comparison, Expression, Func, In, IsNull, Literal, Negate, Not, Or

__all__ = ["catalyst_string"]


def catalyst_string(e: Expression) -> str:
    if isinstance(e, Column):
        return "'" + ".".join(e.parts)
    if isinstance(e, Literal):
        v = e.value
        if v is None:
            return "null"
        if isinstance(v, bool):
            return "true" if v else "false"
        return str(v)
    if isinstance(e, Comparison):
        return f"({catalyst_string(e.left)} {e.op} {catalyst_string(e.right)})"
    if isinstance(e, (And, Or)):
        op = "AND" if isinstance(e, And) else "OR"
        return f"({catalyst_string(e.left)} {op} {catalyst_string(e.right)})"
    if isinstance(e, Not):
        if isinstance(e.child, IsNull):
            return f"isnotnull({catalyst_string(e.child.child)})"
        return f"NOT {catalyst_string(e.child)}"
    if isinstance(e, IsNull):
        return f"isnull({catalyst_string(e.child)})"
    if isinstance(e, In):
        return f"{catalyst_string(e.value)} IN ({','.join(catalyst_string(i) for i in e.items)})"
    if isinstance(e, Arithmetic):
        return f"({catalyst_string(e.left)} {e.op} {catalyst_string(e.right)})"
    if isinstance(e, Negate):
        return f"-{catalyst_string(e.child)}"
    if isinstance(e, Func):
        return f"'{e.name}({', '.join(catalyst_string(a) for a in e.args)})"
    return e.to_sql()
