"""tahoe's one expression engine: Spark SQL expressions (conditions, filters, CHECK constraints, generated
columns, replaceWhere, SET values) parsed once into a small typed tree. Pure: no I/O, no Spark.

  1. `tree`: the nodes and SQL rendering; `parse`: SQL text → tree, the one place SQL is parsed.
  2. `resolve`: column references → values; `evaluate`: over Arrow rows with Spark's semantics.
  3. `coercion`: Spark's type coercion of comparisons; `skipping`: `file_mask` over partition values and stats.
  4. `sharing_json`: ↔ Delta Sharing JSON predicates; `filters`: SQL / expression / DNF read filters."""

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
