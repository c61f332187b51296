"""Resolving column references: what `id`, `t.id` or `st.x.y` in an expression stands for.

A `Scope` lists the relations an expression may read, each with an optional alias: one table
(`Scope.of(rows)`), or several row-aligned ones (`Scope.joined({"t": target, "s": source})` for a
MERGE condition evaluated over joined rows). A reference resolves as Spark resolves it, case-
insensitively (an exact-case match wins):

1. `alias.col...` — when the first part names a relation's alias and the rest resolves in it;
2. otherwise the whole path in every relation: the first part a column, the rest struct fields;
   found in exactly one relation → that column; in several → `[AMBIGUOUS_REFERENCE]`; nowhere →
   `[UNRESOLVED_COLUMN.WITH_SUGGESTION]` naming the column and the columns there are.

Both errors are AnalysisException. A scope over schemas only (`Scope.of_schema(schema)`) checks
an expression before any row is read (`check_columns`).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import AnalysisException
from ..protocol.column_paths import quote_identifier
from .tree import Column, Expression
from ..protocol.schema import StructType, to_arrow_schema

__all__ = ["Scope", "Binding", "check_columns", "unresolved_column"]


@dataclass(frozen=True)
class Binding:
    """A resolved reference: the relation (its index and alias), the field indexes along the
    path, the field names as the schema spells them, and the Arrow type."""
    relation: int
    alias: str | None
    indexes: tuple[int, ...]
    names: tuple[str, ...]
    type: pa.DataType


def _as_arrow_schema(schema: Any) -> pa.Schema:
    if isinstance(schema, pa.Schema):
        return schema

    if isinstance(schema, StructType):
        return to_arrow_schema(schema)
    raise TypeError(f"expected a pyarrow or tahoe schema, got {type(schema).__name__}")


def _find(names: list[str], name: str, where: str) -> int:
    if name in names:
        return names.index(name)
    low = name.lower()
    hits = [i for i, n in enumerate(names) if n.lower() == low]
    if len(hits) > 1:
        raise AnalysisException(
            f"[AMBIGUOUS_REFERENCE] Reference {quote_identifier(name)} is ambiguous, could be: "
            f"{[names[i] for i in hits]} ({where})")
    return hits[0] if hits else -1


def _path(schema: pa.Schema, parts: tuple[str, ...]) -> tuple[tuple[int, ...], tuple[str, ...], pa.DataType] | None:
    i = _find(schema.names, parts[0], "columns")
    if i < 0:
        return None
    t = schema.field(i).type
    indexes, names = [i], [schema.field(i).name]
    for p in parts[1:]:
        if not pa.types.is_struct(t):
            return None
        j = _find([t.field(k).name for k in range(t.num_fields)], p, f"fields of {'.'.join(names)}")
        if j < 0:
            return None
        indexes.append(j)
        names.append(t.field(j).name)
        t = t.field(j).type
    return tuple(indexes), tuple(names), t


def unresolved_column(column: Column | str, candidates: Iterable[str]) -> AnalysisException:
    """Spark's `[UNRESOLVED_COLUMN.WITH_SUGGESTION]` error for `column`."""
    name = column.to_sql() if isinstance(column, Column) else quote_identifier(column)
    cands = list(dict.fromkeys(candidates))
    plain = column.name if isinstance(column, Column) else column
    close = difflib.get_close_matches(plain, cands, n=5, cutoff=0.0) if cands else []
    shown = ", ".join(quote_identifier(c) if "." not in c else c for c in (close or cands)[:5])
    return AnalysisException(
        f"[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter with name "
        f"{name} cannot be resolved. Did you mean one of the following? [{shown}]")


class Scope:
    """Relations an expression may read (see the module docstring)."""

    def __init__(self, relations: Iterable[tuple[str | None, Any]]):
        rels = list(relations)
        if not rels:
            raise ValueError("a scope needs at least one relation")
        self.aliases: list[str | None] = []
        self.schemas: list[pa.Schema] = []
        self.tables: list[pa.Table | None] = []
        for alias, rel in rels:
            self.aliases.append(alias)
            if isinstance(rel, pa.RecordBatch):
                rel = pa.Table.from_batches([rel])
            if isinstance(rel, pa.Table):
                self.tables.append(rel)
                self.schemas.append(rel.schema)
            else:
                self.tables.append(None)
                self.schemas.append(_as_arrow_schema(rel))
        sizes = {t.num_rows for t in self.tables if t is not None}
        if len(sizes) > 1:
            raise ValueError(f"the relations of a scope must have the same number of rows, got {sorted(sizes)}")
        self.num_rows: int | None = sizes.pop() if sizes else None
        self._cache: dict[Column, pa.Array] = {}

    # --- constructors ------------------------------------------------------------------------
    @classmethod
    def of(cls, rows: pa.Table | pa.RecordBatch, alias: str | None = None) -> "Scope":
        """One table of rows, its columns referenced bare or as `alias.col`."""
        return cls([(alias, rows)])

    @classmethod
    def joined(cls, relations: Mapping[str, pa.Table | pa.RecordBatch]) -> "Scope":
        """Row-aligned tables by alias (row i of each is one joined row), e.g. MERGE's
        `{"t": target_rows, "s": source_rows}`."""
        return cls(list(relations.items()))

    @classmethod
    def of_schema(cls, schema: Any, alias: str | None = None) -> "Scope":
        """A schema only (tahoe StructType or pyarrow Schema): for checking references."""
        return cls([(alias, schema)])

    @classmethod
    def of_schemas(cls, schemas: Mapping[str, Any]) -> "Scope":
        return cls(list(schemas.items()))

    # --- resolving ---------------------------------------------------------------------------
    def candidates(self) -> list[str]:
        out = []
        for alias, schema in zip(self.aliases, self.schemas):
            for n in schema.names:
                out.append(f"{quote_identifier(alias)}.{quote_identifier(n)}" if alias and len(self.aliases) > 1 else n)
        return out

    def resolve(self, column: Column) -> Binding:
        parts = column.parts
        found: list[Binding] = []
        if len(parts) > 1:
            for r, alias in enumerate(self.aliases):
                if alias is not None and alias.lower() == parts[0].lower():
                    p = _path(self.schemas[r], parts[1:])
                    if p is not None:
                        found.append(Binding(r, alias, *p))
        if not found:
            for r, alias in enumerate(self.aliases):
                p = _path(self.schemas[r], parts)
                if p is not None:
                    found.append(Binding(r, alias, *p))
        if len(found) > 1:
            shown = [f"{quote_identifier(b.alias)}.{quote_identifier('.'.join(b.names))}" if b.alias
                     else quote_identifier(".".join(b.names)) for b in found]
            raise AnalysisException(
                f"[AMBIGUOUS_REFERENCE] Reference {column.to_sql()} is ambiguous, could be: [{', '.join(shown)}]")
        if not found:
            raise unresolved_column(column, self.candidates())
        return found[0]

    def array(self, column: Column) -> pa.Array:
        """The values of `column` (one per row; a struct's nulls apply to its fields)."""
        hit = self._cache.get(column)
        if hit is not None:
            return hit
        b = self.resolve(column)
        table = self.tables[b.relation]
        if table is None:
            raise AnalysisException(f"{column.to_sql()} has no values here (a scope over schemas only)")
        col = table.column(b.indexes[0])
        arr = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
        if isinstance(arr, pa.ChunkedArray):   # a table of zero chunks
            arr = pa.array([], col.type)
        for j in b.indexes[1:]:
            arr = pc.struct_field(arr, [j])
        self._cache[column] = arr
        return arr


def check_columns(expr: Expression, scope: Scope | Any) -> list[Binding]:
    """Resolve every column `expr` reads in `scope` (a Scope, or a schema / table); raises
    AnalysisException naming the first that does not resolve or is ambiguous."""
    if not isinstance(scope, Scope):
        scope = Scope.of(scope) if isinstance(scope, (pa.Table, pa.RecordBatch)) else Scope.of_schema(scope)
    return [scope.resolve(c) for c in expr.columns()]
