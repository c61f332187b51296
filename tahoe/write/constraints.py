"""Row-level checks a writer makes on the rows it adds (spec "Column Invariants", "CHECK
Constraints", "Generated Columns", NOT NULL columns), evaluated in Arrow.

Owns the policy: which expressions a table asks to hold (`constraint_expressions`: CHECK
constraints `delta.constraints.<name>`, column invariants), NOT NULL columns (`check_not_null`,
fields of a null struct excepted), and the violation messages. The expressions themselves are
parsed and evaluated by `tahoe.expressions` (Spark SQL semantics over Arrow). A CHECK constraint or
invariant holds for a row only when it evaluates to TRUE (FALSE or NULL violate it); a check the
Arrow evaluator cannot evaluate raises UnsupportedFeatureError naming it — refused, never skipped.
"""

from __future__ import annotations

import json
from typing import Iterable

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ConstraintViolationError, UnsupportedFeatureError
from ..expressions import Expression, Scope, evaluate_predicate, parse
from ..protocol.schema import StructField, StructType

__all__ = ["check_not_null", "check_constraints", "constraint_expressions", "violation_row",
           "CONSTRAINT_PREFIX", "INVARIANTS_KEY", "GENERATION_EXPRESSION_KEY"]

CONSTRAINT_PREFIX = "delta.constraints."
INVARIANTS_KEY = "delta.invariants"
GENERATION_EXPRESSION_KEY = "delta.generationExpression"


# --- checks ------------------------------------------------------------------------------------

def violation_row(table: pa.Table, row: int, expr: Expression) -> str:
    """The values of row `row` of the columns `expr` reads, one ` - name : value` line each (the
    shape of delta-spark's violation messages)."""
    scope = Scope.of(table)
    out = []
    for c in expr.columns():
        try:
            value = scope.array(c)[row].as_py()
        except Exception:   # noqa: BLE001 - a message detail; the violation itself is certain
            value = "?"
        out.append(f" - {c.name} : {value}")
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
                    raise ConstraintViolationError(f"NOT NULL constraint violated for column: {path}.",
                                                   error_class="DELTA_NOT_NULL_CONSTRAINT_VIOLATED")
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
    scope = Scope.of(table)
    for desc, sql in constraint_expressions(schema, configuration):
        node = parse(sql)
        ok = evaluate_predicate(node, scope)
        bad = pc.invert(pc.fill_null(ok, False))
        if pc.any(bad).as_py():
            row = int(pc.index(bad, True).as_py())
            raise ConstraintViolationError(
                f"{desc} violated by row with values:\n{violation_row(table, row, node)}",
                error_class="DELTA_VIOLATE_CONSTRAINT_WITH_VALUES")
