"""Filters as users give them to a read: SQL text, an expression tree, or delta-rs / pyarrow's
disjunctive normal form — `[("day", "=", "mon"), ("id", ">", 10)]` (AND-ed tuples) or a list of
such lists (OR-ed) with ops `=`, `==`, `!=`, `<`, `<=`, `>`, `>=`, `in`, `not in`.

    as_expression("day = 'mon' AND id > 10") == as_expression([("day", "=", "mon"), ("id", ">", 10)])
"""

from __future__ import annotations

from typing import Any

from ..errors import AnalysisException
from .parse import parse
from .tree import Comparison, Expression, In, Not, and_, col, lit, or_

__all__ = ["as_expression", "from_dnf"]

_DNF_OPS = {"=": "=", "==": "=", "!=": "<>", "<>": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


def _term(t: Any) -> Expression:
    if not (isinstance(t, (tuple, list)) and len(t) == 3 and isinstance(t[0], str) and isinstance(t[1], str)):
        raise AnalysisException(f"a filter term is (column, op, value), got {t!r}")
    name, op, value = t
    c = col(name)
    low = op.strip().lower()
    if low in ("in", "not in"):
        if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
            raise AnalysisException(f"the value of {op!r} in {t!r} must be a list")
        e: Expression = In(c, tuple(lit(v) for v in value))
        return Not(e) if low == "not in" else e
    if low not in _DNF_OPS:
        raise AnalysisException(f"unknown filter op {op!r} in {t!r}; use one of {sorted(_DNF_OPS) + ['in', 'not in']}")
    return Comparison(_DNF_OPS[low], c, lit(value))


def from_dnf(filters: list) -> Expression:
    """The expression of filters in disjunctive normal form (see the module docstring)."""
    if not filters:
        raise AnalysisException("an empty filter list")
    if all(isinstance(f, (list,)) and f and isinstance(f[0], (tuple, list)) for f in filters):
        return or_(*[and_(*[_term(t) for t in conj]) for conj in filters])
    return and_(*[_term(t) for t in filters])


def as_expression(f: Any) -> Expression | None:
    """`f` (SQL text, an Expression, DNF tuples, or None) as an expression (None stays None)."""
    if f is None or isinstance(f, Expression):
        return f
    if isinstance(f, str):
        return parse(f)
    if isinstance(f, (list, tuple)):
        return from_dnf(list(f))
    raise AnalysisException(f"a filter is SQL text, an expression or DNF tuples, got {type(f).__name__}")
