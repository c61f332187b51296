"""tahoe's one expression engine: Spark SQL expressions (conditions, filters, CHECK constraints,
generated columns, replaceWhere, SET values) parsed once into a small typed tree, and what tahoe
does with that tree. Pure: no I/O, no Spark (the tree as a Spark Column: `tahoe.spark.columns`).

    from tahoe.expressions import parse, Scope, evaluate, matches, file_mask

    e = parse("day = 'mon' AND id > 10")          # tree: tahoe.expressions.tree (ParseException on bad SQL)
    e.columns()                                   # [Column(('day',)), Column(('id',))]
    matches(e, Scope.of(rows))                    # Arrow rows → BooleanArray (TRUE rows)
    evaluate(parse("x + 1"), rows)                # any scalar expression → Arrow array
    evaluate(parse("t.v + s.v"), Scope.joined({"t": target_rows, "s": source_rows}))   # MERGE
    file_mask(e, snapshot.files_table(), snapshot.schema, snapshot.partition_columns)   # skipping
    to_sharing_json(e, schema); from_sharing_json(tree)    # Delta Sharing JSON predicates
    check_columns(e, schema)                      # AnalysisException naming an unknown column

Modules: `tree` (the nodes, SQL rendering), `parse` (SQL text → tree; the one place SQL is
parsed), `resolve` (column references → values, aliases for two-sided conditions), `evaluate`
(over Arrow rows, Spark's semantics), `coercion` (Spark's type coercion of comparisons, shared
by evaluation and skipping), `skipping` (three-valued evaluation over partition values and file
stats), `sharing_json` (↔ the sharing JSON tree), `filters`
(SQL / expression / DNF tuples as a read filter).
"""

from .evaluate import FUNCTIONS, constant_value, evaluate, evaluate_predicate, matches
from .filters import as_expression, from_dnf
from .parse import parse, parse_type
from .resolve import Binding, Scope, check_columns
from .sharing_json import from_sharing_json, json_column_types, to_sharing_json
from .skipping import FileColumn, file_mask, may_match, schema_binder
from .tree import (
    And, Arithmetic, Between, Case, Cast, Column, Comparison, Expression, Func, In, IsNull, Like, Literal,
    Negate, Not, Opaque, Or, and_, col, conjuncts, disjuncts, lit, or_, transform, unqualify,
)

__all__ = [
    "parse", "parse_type", "as_expression", "from_dnf",
    "Expression", "Column", "Literal", "Not", "And", "Or", "Comparison", "IsNull", "In", "Between", "Like",
    "Arithmetic", "Negate", "Case", "Cast", "Func", "Opaque", "col", "lit", "and_", "or_", "conjuncts", "disjuncts",
    "transform", "unqualify", "Scope", "Binding", "check_columns",
    "evaluate", "evaluate_predicate", "matches", "constant_value", "FUNCTIONS",
    "file_mask", "may_match", "schema_binder", "FileColumn",
    "from_sharing_json", "to_sharing_json", "json_column_types",
]
