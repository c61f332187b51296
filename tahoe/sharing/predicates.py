"""File pruning for `/query` (spec "SQL Expressions for Filtering", "JSON predicates for
Filtering"): the sharing-specific glue around `tahoe.expressions`.

Owns what the protocol adds to the engine: hints are best effort — an invalid JSON tree means no
filtering at all, an SQL hint that does not parse is skipped (the others are AND-ed) — the limits
a server puts on untrusted input (tree depth, node count, hint length), and what a column is read
as: in a JSON tree the column's `valueType`, in an SQL hint the table schema's type. Whether a
file may hold a matching row is decided by `tahoe.expressions.may_match` from the file's
partition values and stats (three-valued, conservative: anything unknown keeps the file).

Rows: the client applies the hints it sends to the rows it returns (`json_predicate` refuses an
invalid tree by name; `row_filter` is the conjunction of the hints as one expression).
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import AnalysisException, DeltaError
from ..expressions import (
    Expression, FileColumn, and_, from_sharing_json, json_column_types, may_match, parse, to_sharing_json,
)
from ..protocol.schema import DataType

__all__ = ["Predicate", "PredicateError", "parse_json_predicate", "parse_sql_predicates", "FileContext",
           "json_predicate", "row_filter"]

_MAX_DEPTH = 64
_MAX_NODES = 10_000
_MAX_HINT_CHARS = 10_000


class PredicateError(DeltaError, ValueError):
    """A predicate tree that cannot be used (filtering is skipped)."""


def _check_limits(tree: Any) -> None:
    count = 0
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        count += 1
        if depth > _MAX_DEPTH or count > _MAX_NODES:
            raise PredicateError("predicate too deep or too large")
        if isinstance(node, dict):
            kids = node.get("children") or []
            if isinstance(kids, list):
                stack.extend((k, depth + 1) for k in kids)


class Predicate:
    """A usable predicate: its expression and the type each column is read as (lower-case name →
    type). Built from a JSON tree (`Predicate(tree)`, validated) or from SQL hints."""

    def __init__(self, tree: dict | None = None, *, expr: Expression | None = None,
                 types: dict[str, DataType] | None = None):
        if tree is not None:
            _check_limits(tree)
            try:
                expr = from_sharing_json(tree)
            except (AnalysisException, RecursionError) as e:
                raise PredicateError(str(e)) from None
            types = json_column_types(tree)
        if expr is None:
            raise PredicateError("a predicate needs a tree or an expression")
        self.expr = expr
        self.types = {k.lower(): v for k, v in (types or {}).items()}
        self._tree = tree
        self._ctx: tuple | None = None   # (physical, partition_cols, binder, memo) of the last file asked about

    @property
    def tree(self) -> dict:
        """The predicate as a JSON tree (for SQL hints: the conjuncts JSON can express)."""
        if self._tree is None:
            self._tree = to_sharing_json(self.expr, self.types, partial=True)
        return self._tree

    def may_match(self, ctx: "FileContext") -> bool:
        try:
            # the files of one request share their column mapping: bind the columns once
            c = self._ctx
            if c is None or c[0] is not ctx.physical or c[1] is not ctx.partition_cols:
                c = self._ctx = (ctx.physical, ctx.partition_cols, ctx.binder(self.types), {})
            return bool(may_match(self.expr, [ctx.pv], [ctx.stats], c[2], memo=c[3])[0])
        except Exception:   # best effort: a file is never dropped on doubt
            return True


class FileContext:
    """What is known about one file: partition values and decoded stats; column names are matched
    case-insensitively and mapped to physical names (column mapping) by `physical`."""

    __slots__ = ("pv", "stats", "physical", "partition_cols")

    def __init__(self, partition_values: dict | None, stats: dict | None, physical: dict[str, str],
                 partition_cols: set[str]):
        self.pv = partition_values or {}
        self.stats = stats
        self.physical = physical if physical is not None else {}
        self.partition_cols = partition_cols

    def binder(self, types: dict[str, DataType]):
        physical = {k.lower(): v for k, v in self.physical.items()}
        partition_cols = {c.lower() for c in self.partition_cols}

        def bind(c) -> FileColumn | None:
            name = ".".join(c.parts)
            low = name.lower()
            t = types.get(low)
            if t is None:
                return None
            phys = physical.get(low, name)
            if low in partition_cols:
                return FileColumn(t, True, (phys,), name)
            return FileColumn(t, False, tuple(phys.split(".")), name)
        return bind


def parse_json_predicate(text: Any) -> Predicate | None:
    """A Predicate from `jsonPredicateHints` (a JSON string, or an already-decoded object); None
    when it is absent or invalid (no filtering)."""
    if text is None:
        return None
    try:
        tree = json.loads(text) if isinstance(text, str) else text
        return Predicate(tree)
    except (ValueError, PredicateError, RecursionError):
        return None


def parse_sql_predicates(hints: Any, schema) -> Predicate | None:
    """The conjunction of the SQL hints that parse (others are skipped); None when none does.
    Columns are read as the table schema types them."""
    if not isinstance(hints, list):
        return None
    exprs = []
    for h in hints:
        if not isinstance(h, str) or len(h) > _MAX_HINT_CHARS:
            continue
        try:
            exprs.append(parse(h))
        except (AnalysisException, RecursionError):
            continue
    if not exprs:
        return None
    return Predicate(expr=and_(*exprs), types={f.name: f.type for f in schema.fields})


# --- rows (the client applies the hints it sends to the rows it returns) ----------------------------

def json_predicate(text: Any) -> Predicate:
    """A Predicate from `jsonPredicateHints` (a JSON string or object), or PredicateError saying
    what is wrong with it (the client refuses hints it cannot apply)."""
    try:
        tree = json.loads(text) if isinstance(text, (str, bytes)) else text
    except ValueError as e:
        raise PredicateError(f"jsonPredicateHints is not valid JSON: {e}") from None
    return Predicate(tree)


def row_filter(preds: list[Predicate]) -> Expression:
    """The conjunction of `preds` as one expression over rows (evaluate with
    `tahoe.expressions.matches`: SQL semantics, rows kept where it is TRUE)."""
    return and_(*[p.expr for p in preds])
