"""Translating an expression tree into a PySpark Column (the Spark wing's view of it).

    df.filter(to_spark_column(parse("day = 'mon' AND id > 10")))
    target.alias("t").join(source.alias("s"), to_spark_column(parse("t.id = s.id")))

Every node maps onto the Column API (`F.col`, operators, `isin`, `between`, `F.when`, `cast` /
`try_cast`, `F.call_function` for functions), so Spark's analyzer resolves names (qualified ones
against DataFrame aliases) and applies its own type coercion; literals and `Opaque` nodes go
through `F.expr` of their Spark SQL, so Spark reads them exactly as it reads the SQL text. The
result is the same as `df.filter(expr.to_sql())`. pyspark is imported on first use only.
"""

from __future__ import annotations

from typing import Any

from ..expressions.tree import (
    And, Arithmetic, Between, Case, Cast, Column, Comparison, Expression, Func, In, IsNull, Like, Literal,
    Negate, Not, Opaque, Or, type_sql,
)

__all__ = ["to_spark_column"]


def to_spark_column(expr: Expression) -> Any:
    """A `pyspark.sql.Column` computing `expr`."""
    from pyspark.sql import functions as F

    def tr(e: Expression):
        if isinstance(e, Column):
            return F.col(e.to_sql())
        if isinstance(e, Literal):
            return F.expr(e.to_sql())
        if isinstance(e, Not):
            return ~tr(e.child)
        if isinstance(e, And):
            return tr(e.left) & tr(e.right)
        if isinstance(e, Or):
            return tr(e.left) | tr(e.right)
        if isinstance(e, Comparison):
            a, b = tr(e.left), tr(e.right)
            return {"=": lambda: a == b, "<>": lambda: a != b, "<": lambda: a < b, "<=": lambda: a <= b,
                    ">": lambda: a > b, ">=": lambda: a >= b, "<=>": lambda: a.eqNullSafe(b)}[e.op]()
        if isinstance(e, IsNull):
            return tr(e.child).isNull()
        if isinstance(e, In):
            return tr(e.value).isin(*[tr(i) for i in e.items])
        if isinstance(e, Between):
            return tr(e.value).between(tr(e.low), tr(e.high))
        if isinstance(e, Like):
            if isinstance(e.pattern, Literal) and isinstance(e.pattern.value, str) and e.escape is None:
                v = tr(e.value)
                return v.ilike(e.pattern.value) if e.case_insensitive else v.like(e.pattern.value)
            return F.expr(e.to_sql())
        if isinstance(e, Arithmetic):
            a, b = tr(e.left), tr(e.right)
            if e.op == "div":
                return F.call_function("div", a, b)
            return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b,
                    "%": lambda: a % b}[e.op]()
        if isinstance(e, Negate):
            return -tr(e.child)
        if isinstance(e, Case):
            operand = tr(e.operand) if e.operand is not None else None
            out = None
            for w, v in e.branches:
                cond = (operand == tr(w)) if operand is not None else tr(w)
                out = F.when(cond, tr(v)) if out is None else out.when(cond, tr(v))
            return out.otherwise(tr(e.default)) if e.default is not None else out
        if isinstance(e, Cast):
            c = tr(e.child)
            return c.try_cast(type_sql(e.type)) if e.safe else c.cast(type_sql(e.type))
        if isinstance(e, Func):
            return F.call_function(e.name, *[tr(a) for a in e.args])
        if isinstance(e, Opaque):
            return F.expr(e.sql)
        raise TypeError(f"no Spark translation for {type(e).__name__}")  # pragma: no cover

    return tr(expr)
