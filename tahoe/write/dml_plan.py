"""The DML planner: every decision a DELETE, UPDATE or MERGE makes, for both executors (`tahoe.write.dml`,
`tahoe.spark.dml`), which only move rows and hand them to `tahoe.write.dml_commit.write_and_commit`.

  1. A DML is a program over rows (target, or target and source joined: `matched`, `notMatched`,
     `notMatchedBySource`); the first clause whose kind fits and condition is TRUE acts on a row.
  2. Each `CompiledClause` holds its presence test, condition and values; `rewrite_plan` / `insert_plan` write.
  3. Refused before any row is read, as delta-spark: unknown or ambiguous columns, a clause reading the wrong
     side, a value its column cannot store (AnalysisException); an identity column updated
     ([DELTA_IDENTITY_COLUMNS_UPDATE_NOT_SUPPORTED]); changes to append-only tables (InvalidTableOperationError).
  4. A target row matched twice fails ([DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE]) unless
     the only matched clause is an unconditional delete (`multiple_matches_allowed`).
  5. Settings: `dv`, `cdf`, `row_tracking`, `candidate_files`, `record_reads`, `operation`, `parameters`."""

from __future__ import annotations

import dataclasses
import json
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence


from ..errors import APPEND_ONLY_MESSAGE, AnalysisException, AppendOnlyViolationError
from ..expressions import (
    And, Column, Expression, IsNull, Literal, Not, Scope, check_columns, conjuncts, file_mask, parse,
    unqualify,
)
from ..expressions.resolve import unresolved_column
from ..expressions.tree import quote_identifier
from ..protocol import column_mapping
from ..protocol.actions import AddFile, Metadata
from ..protocol.properties import (
    COLUMN_DEFAULT, GENERATION_EXPRESSION, IDENTITY_ALLOW_EXPLICIT_INSERT, ROW_COMMIT_VERSION_COLUMN_PROP,
    ROW_ID_COLUMN_PROP, bool_property, text_property,
)
from ..protocol.schema import (
    BOOLEAN, VOID, ArrayType, DataType, DecimalType, MapType, PrimitiveType, StructField, StructType,
    is_numeric, merge_schemas,
)
from ..protocol.table_features import is_feature_supported
from ..protocol.timestamps import normalize_zone_name
from .plan import WritePlan, is_identity, plan_rows
from .replace_where import partition_predicate

if TYPE_CHECKING:  # pragma: no cover
    from ..log.snapshot import Snapshot
    from ..txn import Transaction

__all__ = [
    "MergeClause", "CompiledClause", "DmlPlan", "plan_delete", "plan_update", "plan_merge",
    "TARGET_PRESENT", "SOURCE_PRESENT", "CLAUSE", "ROW_ID", "ROW_COMMIT_VERSION", "CHANGE_TYPE",
    "candidate_files", "record_reads", "can_store_assign", "MULTIPLE_MATCHES_MESSAGE", "DEFAULT_TARGET_ALIAS", "DEFAULT_SOURCE_ALIAS", "KINDS",
]

TARGET_PRESENT = "__tahoe_target_present"
SOURCE_PRESENT = "__tahoe_source_present"
CLAUSE = "__tahoe_clause"                # index of the clause acting on a row (NULL: none)
ROW_ID = "__tahoe_row_id"                # a rewritten row's row id (materialized column)
ROW_COMMIT_VERSION = "__tahoe_row_commit_version"
CHANGE_TYPE = "_change_type"
DEFAULT_TARGET_ALIAS = "__tahoe_target"  # aliases used when the caller gave none
DEFAULT_SOURCE_ALIAS = "__tahoe_source"

KINDS = ("matched", "notMatched", "notMatchedBySource")
ACTIONS = {"matched": ("update", "delete"), "notMatched": ("insert",), "notMatchedBySource": ("update", "delete")}

MULTIPLE_MATCHES_MESSAGE = (
    "Cannot perform Merge as multiple source rows matched and attempted to modify the same target "
    "row in the Delta table in possibly conflicting ways. By SQL semantics of Merge, when multiple "
    "source rows match on the same target row, the result may be ambiguous as it is unclear which "
    "source row should be used to update or delete the matching target row. You can preprocess the "
    "source table to eliminate the possibility of multiple matches.")


# --- the user's clauses ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class MergeClause:
    """One WHEN clause as the user gave it. `kind`: matched | notMatched | notMatchedBySource;
    `action`: update | delete | insert; `condition`: SQL or a tree (None: always);
    `assignments`: {column: SQL or tree} — None with update/insert means every column (`*`:
    updateAll / insertAll), less `except_columns`."""
    kind: str
    action: str
    condition: Any = None
    assignments: Mapping[str, Any] | None = None
    except_columns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown MERGE clause kind {self.kind!r}; expected one of {KINDS}")
        if self.action not in ACTIONS[self.kind]:
            raise ValueError(f"a {self.kind} clause cannot {self.action} (it can {ACTIONS[self.kind]})")
        if self.action == "delete" and self.assignments:
            raise ValueError("a delete clause takes no assignments")


@dataclasses.dataclass(frozen=True)
class CompiledClause:
    """A clause ready to run. `presence`: the rows it may act on (a tree over the flag columns;
    None: every row of the relation); `condition`: None = TRUE; `values`: column → tree over the
    relation (update: every non-generated column of the table, and generated columns it assigns;
    insert: `DmlPlan.insert_columns`); `generated`: generated columns it assigns explicitly."""
    index: int
    kind: str
    action: str
    presence: Expression | None
    condition: Expression | None
    values: dict[str, Expression]
    description: dict       # {"predicate": sql?, "actionType": action} for commitInfo

    @property
    def guard(self) -> Expression | None:
        """presence AND condition (None: TRUE)."""
        parts = [p for p in (self.presence, self.condition) if p is not None]
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else And(parts[0], parts[1])


@dataclasses.dataclass
class DmlPlan:
    """Everything a DML decided (see the module docstring). Picklable (Spark ships the write
    plans to its tasks)."""
    operation: str                             # DELETE | UPDATE | MERGE
    parameters: dict                           # commitInfo operationParameters
    table_root: str
    read_version: int
    target_alias: str                          # effective aliases (internal ones when none given)
    source_alias: str | None
    user_target_alias: str | None
    user_source_alias: str | None
    condition: Expression | None               # MERGE: ON; DELETE/UPDATE: WHERE (None: every row)
    clauses: list[CompiledClause]
    target_filter: Expression | None           # target-only predicate (bare names): skipping, read predicate
    scan_all_files: bool                       # notMatchedBySource clauses: every file is a candidate
    schema_json: str                           # the table's schema after the operation
    read_schema_json: str                      # the snapshot's
    new_metadata: Metadata | None              # schema evolution
    insert_columns: list[str]                  # columns inserted rows give (the rest: computed / null)
    update_generated: dict[str, tuple[Expression, tuple[int, ...]]]   # generated column → (expr, clauses)
    insert_generated: dict[str, tuple[Expression, tuple[int, ...]]]
    rewrite_plan: WritePlan | None             # rows copied / updated
    insert_plan: WritePlan | None              # rows inserted
    dv: bool                                   # merge-on-read (deletion vectors)
    cdf: bool                                  # change data feed enabled
    row_tracking: tuple[str, str] | None       # materialized (row id, row commit version) column names
    multiple_matches_allowed: bool             # MERGE: only one unconditional matched delete
    partition_columns: list[str]
    column_mapping_mode: str
    configuration: dict
    start: float = dataclasses.field(default_factory=time.perf_counter)

    @property
    def schema(self) -> StructType:
        return StructType.from_json(self.schema_json)

    @property
    def read_schema(self) -> StructType:
        return StructType.from_json(self.read_schema_json)

    @property
    def has_source(self) -> bool:
        return self.source_alias is not None

    def clauses_of(self, kind: str) -> list[CompiledClause]:
        return [c for c in self.clauses if c.kind == kind]

    @property
    def has_matched(self) -> bool:
        return any(c.kind == "matched" for c in self.clauses)

    @property
    def has_not_matched(self) -> bool:
        return any(c.kind == "notMatched" for c in self.clauses)

    @property
    def has_not_matched_by_source(self) -> bool:
        return any(c.kind == "notMatchedBySource" for c in self.clauses)

    @property
    def insert_only(self) -> bool:
        """A MERGE with only insert clauses: it appends, nothing is rewritten."""
        return self.has_source and all(c.kind == "notMatched" for c in self.clauses)

    @property
    def checks_multiple_matches(self) -> bool:
        """A MERGE that fails when two source rows match one target row (by the ON condition
        alone, whatever the clauses' conditions): every MERGE but an insert-only one — one with
        only WHEN NOT MATCHED BY SOURCE clauses too — unless its matched clauses are exactly one
        unconditional delete (delta-spark's findTouchedFiles / throwErrorOnMultipleMatches)."""
        return self.has_source and not self.insert_only and not self.multiple_matches_allowed

    @property
    def modifies_target(self) -> bool:
        return any(c.action in ("update", "delete") for c in self.clauses)

    @property
    def rewritten_columns(self) -> list[str]:
        """The columns rewritten rows carry before generated columns are recomputed."""
        return [f.name for f in self.schema.fields]

    def target_columns_read(self) -> list[str] | None:
        """The target's columns the operation reads from the rows it changes: those its
        condition, its clauses' conditions and their values name (an update's values name every
        column it keeps), in table order. None when it needs the old rows whole: change data
        (pre-images, deleted rows). Copy-on-write copies are read apart (the whole file)."""
        if self.cdf:
            return None
        scope = Scope.of_schema(self.read_schema, self.target_alias if self.has_source else self.user_target_alias)
        trees = [self.condition] + [t for c in self.clauses for t in (c.condition, *c.values.values())]
        wanted: set[str] = set()
        for tree in trees:
            if tree is None:
                continue
            for col in tree.columns():
                try:
                    wanted.add(scope.resolve(col).names[0])
                except AnalysisException:
                    continue      # a source column, or a flag column
        return [f.name for f in self.read_schema.fields if f.name in wanted]

    def target_column(self, name: str) -> Column:
        """The target's column `name` in the relation (qualified when it is a join)."""
        return Column((self.target_alias, name)) if self.has_source else Column((name,))


# --- store assignment -------------------------------------------------------------------------------

_DATETIME = ("date", "timestamp", "timestamp_ntz")


def can_store_assign(src: DataType | None, dst: DataType, allow_missing_fields: bool = False) -> bool:
    """Whether a value of type `src` may be written into a column of type `dst` by an UPDATE or
    a MERGE — delta-spark's rule (`UpdateExpressionsSupport.castIfNeeded` under
    `spark.sql.storeAssignmentPolicy=ANSI`): an ANSI cast, so besides Spark's store assignment
    (numeric ↔ numeric, atomic → string, datetime ↔ datetime) a string converts to a number, a
    boolean, a date, a timestamp or binary (checked per value at run time: CAST_INVALID_INPUT),
    and a boolean to a number and back (true → 1, non-zero → true);
    structs match BY NAME (case-insensitively), recursively inside arrays and maps: every field
    of `src` must exist in `dst`, and `dst` may have more fields only with
    `allow_missing_fields` (schema evolution; they are NULL). None (unknown) passes."""
    if src is None or src == dst or src == VOID:
        return True
    if is_numeric(src) and is_numeric(dst):
        return True
    if (src == BOOLEAN and is_numeric(dst)) or (is_numeric(src) and dst == BOOLEAN):   # ANSI CAST: true → 1
        return True
    if isinstance(dst, PrimitiveType) and dst.name == "string" and \
            isinstance(src, (PrimitiveType, DecimalType)) and not _complex(src):
        return True
    if isinstance(src, PrimitiveType) and src.name == "string" and \
            (is_numeric(dst) or (isinstance(dst, PrimitiveType) and dst.name in ("boolean", "binary", *_DATETIME))):
        return True
    if isinstance(src, PrimitiveType) and isinstance(dst, PrimitiveType) and \
            src.name in _DATETIME and dst.name in _DATETIME:
        return True
    if isinstance(src, ArrayType) and isinstance(dst, ArrayType):
        return can_store_assign(src.element_type, dst.element_type, allow_missing_fields)
    if isinstance(src, MapType) and isinstance(dst, MapType):
        return can_store_assign(src.key_type, dst.key_type, allow_missing_fields) and \
            can_store_assign(src.value_type, dst.value_type, allow_missing_fields)
    if isinstance(src, StructType) and isinstance(dst, StructType):
        if len(src.fields) != len(dst.fields) and not allow_missing_fields:
            return False
        for a in src.fields:
            b = dst.get(a.name, case_insensitive=True)
            if b is None or not can_store_assign(a.type, b.type, allow_missing_fields):
                return False
        return True
    return False


def _has_struct(t: DataType | None) -> bool:
    if isinstance(t, StructType):
        return True
    if isinstance(t, ArrayType):
        return _has_struct(t.element_type)
    if isinstance(t, MapType):
        return _has_struct(t.key_type) or _has_struct(t.value_type)
    return False


def _complex(t: DataType) -> bool:
    return isinstance(t, (ArrayType, MapType, StructType))


def _type_sql(t: DataType) -> str:
    from ..expressions.tree import type_sql
    return type_sql(t)


# --- building the plan ------------------------------------------------------------------------------

Typer = Callable[[Expression], "DataType | None"]


def _as_tree(value: Any, what: str) -> Expression:
    if isinstance(value, Expression):
        return value
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a SQL string (or a tahoe expression), got {type(value).__name__}")
    return parse(value)


def _field(schema: StructType, name: str, what: str) -> StructField:
    f = schema.get(name, case_insensitive=True)
    if f is None:
        raise unresolved_column(name, schema.names)
    return f


def _path_sql(path: Sequence[str]) -> str:
    return ".".join(quote_identifier(p) for p in path)


def _set_path(schema: StructType, name: str, alias: str | None, what: str) -> tuple[tuple[str, ...], StructField]:
    """The column, or nested struct field, a SET / VALUES key names — its path as the schema
    spells it, and the field.
    A key is a column's own name, or a multi-part name as delta-spark reads it (`s.a`, `` `a.b` ``
    for a name with a dot), optionally qualified by the target's alias (`t.s.a`: the alias is
    tried first, as Spark resolves names)."""
    f = schema.get(name, case_insensitive=True)
    if f is not None:
        return (f.name,), f
    try:
        node = parse(name)
    except Exception:
        node = None
    if not isinstance(node, Column):
        raise unresolved_column(name, schema.names)
    parts = node.parts
    if alias and len(parts) > 1 and parts[0].lower() == alias.lower() and \
            schema.get(parts[1], case_insensitive=True) is not None:
        parts = parts[1:]
    top = schema.get(parts[0], case_insensitive=True)
    if top is None:
        raise unresolved_column(node, schema.names)
    path, f = [top.name], top
    for part in parts[1:]:
        t = f.type
        if not isinstance(t, StructType):
            raise AnalysisException(
                f"[DELTA_UNSUPPORTED_FIELD_UPDATE_NON_STRUCT] Updating nested fields is only supported for "
                f"StructType, but you are trying to update a field of {_path_sql(path)}, which is of type: "
                f"{_type_sql(t)}.")
        sub = t.get(part, case_insensitive=True)
        if sub is None:
            raise AnalysisException(
                f"[DELTA_MISSING_SET_COLUMN] {_path_sql(path + [part])} column not found given columns: "
                f"[{', '.join(_path_sql(path + [x.name]) for x in t.fields)}] (in {what}).")
        path.append(sub.name)
        f = sub
    return tuple(path), f


def _struct_value(t: StructType, old: Column | None, old_type: DataType | None,
                  ops: dict[tuple[str, ...], Expression]) -> Expression:
    """The new value of a struct whose fields `ops` assigns (paths below it → values): a struct of
    every field, the assigned ones from their values, the others from `old` (of type `old_type`
    as the table was read; a field it lacks — added by schema evolution — is NULL) — delta-spark's
    CreateNamedStruct, so the result is a struct even where `old` is NULL."""
    from ..expressions.tree import Func, lit

    args: list[Expression] = []
    for f in t.fields:
        sub = {p[1:]: e for p, e in ops.items() if p[0] == f.name}
        was = old_type.get(f.name) if isinstance(old_type, StructType) and old is not None else None
        here = Column(old.parts + (was.name,)) if was is not None and old is not None else None
        if sub and () in sub:
            value = sub[()]
        elif sub:
            value = _struct_value(f.type, here, was.type if was is not None else None, sub)   # type: ignore[arg-type]
        else:
            # (typed: an untyped NULL made the field void, and Spark refused the CASE of clauses —
            # DATATYPE_MISMATCH.DATA_DIFF_TYPES — beside an UPDATE SET * of the evolved struct)
            value = _widened(f.type, was.type, here) if here is not None and was is not None \
                else Literal(None, f.type)
        args += [lit(f.name), value]
    return Func("named_struct", tuple(args))


def _widened(t: DataType, old_type: DataType, old: Column) -> Expression:
    """`old` (of `old_type`, as the table was read) as a value of `t`, the type schema evolution
    gave it: a struct that gained fields is rebuilt with them NULL (a NULL struct stays NULL), so
    every clause's value of the column has the evolved type (a clause leaving it alone included:
    fuzzer seed 30140). Other types as they are."""
    from ..expressions.tree import Case

    if isinstance(t, StructType) and isinstance(old_type, StructType) and t != old_type:
        return Case(None, ((Not(IsNull(old)), _struct_value(t, old, old_type, {})),))
    return old


def _explicit_assignments(schema: StructType, assignments: Mapping[str, Any], what: str, verb: str, *,
                          alias: str | None = None, old: Callable[[str], Column] | None = None,
                          read_schema: StructType | None = None,
                          ) -> tuple[dict[str, Expression], list[tuple[tuple[str, ...], Expression, StructField]]]:
    """{column or field: SQL or tree} as the user gave it → ({the table's column name: tree},
    [(path, the value given, the field it is stored in)]): every key names a column of `schema`
    (case-insensitively; qualified by `alias` or not) or, when `old` is given (an update: the
    column's current value), a nested struct field — its column's value becomes the struct with
    that field replaced. No column or field assigned twice, or together with a field inside it."""
    paths: dict[tuple[str, ...], Expression] = {}
    leaves = []
    for name, value in assignments.items():
        if not isinstance(name, str):
            raise TypeError(f"the columns to {verb} must be named by strings, got {name!r}")
        path, field = _set_path(schema, name, alias, what)
        if len(path) > 1 and old is None:
            raise AnalysisException(
                f"[DELTA_MERGE_INSERT_NESTED_FIELD] {what} names the nested field {_path_sql(path)}: the values "
                f"of an insert are given per top-level column (a struct value for {quote_identifier(path[0])})")
        if path in paths:
            raise AnalysisException(f"[DUPLICATE_ASSIGNMENTS] The column {_path_sql(path)} is assigned "
                                    f"more than once in {what}")
        paths[path] = _as_tree(value, f"the value of {name!r}")
        leaves.append((path, paths[path], field))
    for a in paths:
        clash = [b for b in paths if b != a and b[:len(a)] == a]
        if clash:
            raise AnalysisException(
                f"[DELTA_CONFLICT_SET_COLUMN] There is a conflict from these SET columns: "
                f"[{', '.join(_path_sql(p) for p in [a, *clash])}] (in {what}).")
    given: dict[str, Expression] = {}
    was = read_schema if read_schema is not None else schema
    for top in dict.fromkeys(p[0] for p in paths):
        mine = {p[1:]: e for p, e in paths.items() if p[0] == top}
        if () in mine:
            given[top] = mine[()]
            continue
        before = was.get(top)
        given[top] = _struct_value(schema.field(top).type, old(top) if before is not None else None,  # type: ignore[misc]
                                   before.type if before is not None else None, mine)   # type: ignore[arg-type]
    return given, leaves


def _identity_update_error(name: str) -> AnalysisException:
    return AnalysisException(f"[DELTA_IDENTITY_COLUMNS_UPDATE_NOT_SUPPORTED] IDENTITY column "
                             f"{quote_identifier(name)} cannot be updated.")


def _check_refs(expr: Expression, scope: Scope, clause: str, allowed: Scope | None = None) -> None:
    """Every column `expr` reads resolves in `scope`; with `allowed`, in that narrower scope too
    (delta-spark's DELTA_MERGE_UNRESOLVED_EXPRESSION for a clause reading the wrong side)."""
    check_columns(expr, scope)
    if allowed is None:
        return
    for c in expr.columns():
        try:
            allowed.resolve(c)
        except AnalysisException:
            cols = ", ".join(allowed.candidates())
            raise AnalysisException(
                f"[DELTA_MERGE_UNRESOLVED_EXPRESSION] Cannot resolve {c.to_sql()} in {clause} given "
                f"columns {cols}.") from None


def _check_type(value_type: DataType | None, f: StructField, what: str, evolution: bool = False) -> None:
    if can_store_assign(value_type, f.type, allow_missing_fields=evolution):
        return
    if _has_struct(value_type) and _has_struct(f.type):
        raise AnalysisException(
            f"[DELTA_UPDATE_SCHEMA_MISMATCH_EXPRESSION] Cannot cast \"{_type_sql(value_type)}\" to "  # type: ignore[arg-type]
            f"\"{_type_sql(f.type)}\" in {what}. All nested columns must match (struct fields are matched by "
            f"name; a field of the value the column lacks needs schema evolution, and so does a field of the "
            f"column the value lacks).")
    raise AnalysisException(
        f"[INCOMPATIBLE_DATA_FOR_TABLE.CANNOT_SAFELY_CAST] Cannot write incompatible data for the "
        f"table in {what}: cannot safely cast {quote_identifier(f.name)} "
        f"\"{_type_sql(value_type)}\" to \"{_type_sql(f.type)}\".")  # type: ignore[arg-type]


def _common(snapshot: "Snapshot", operation: str) -> dict:
    conf = snapshot.configuration
    proto = snapshot.protocol
    rt = None
    names = (text_property(conf, ROW_ID_COLUMN_PROP), text_property(conf, ROW_COMMIT_VERSION_COLUMN_PROP))
    if is_feature_supported(proto, "rowTracking") and not bool_property(conf, "delta.rowTrackingSuspended") \
            and all(names):
        rt = names
    return dict(
        table_root=snapshot.table_root, read_version=snapshot.version,
        dv=bool_property(conf, "delta.enableDeletionVectors") and is_feature_supported(proto, "deletionVectors"),
        cdf=bool_property(conf, "delta.enableChangeDataFeed"), row_tracking=rt,
        partition_columns=list(snapshot.partition_columns), column_mapping_mode=snapshot.column_mapping_mode,
        configuration=dict(conf), read_schema_json=snapshot.schema.to_json())


def _append_only(snapshot: "Snapshot", what: str) -> None:
    if bool_property(snapshot.configuration, "delta.appendOnly"):
        raise AppendOnlyViolationError(
            f"{APPEND_ONLY_MESSAGE} (cannot {what} table {snapshot.table_root})", error_class="DELTA_CANNOT_MODIFY_APPEND_ONLY")


def _predicate_param(expr: Expression | None) -> str:
    return json.dumps([expr.to_sql()] if expr is not None else [])


def plan_delete(snapshot: "Snapshot", condition: Any = None, target_alias: str | None = None,
                storage_options: dict | None = None) -> DmlPlan:
    """DELETE FROM the table WHERE `condition` (None: every row)."""
    _append_only(snapshot, "DELETE from")
    node = _as_tree(condition, "the DELETE condition") if condition is not None else None
    scope = Scope.of_schema(snapshot.schema, target_alias)
    if node is not None:
        check_columns(node, scope)
    clause = CompiledClause(0, "notMatchedBySource", "delete", None, node, {}, {})
    base = _common(snapshot, "DELETE")
    return DmlPlan(operation="DELETE", parameters={"predicate": _predicate_param(node)},
                   target_alias=target_alias or DEFAULT_TARGET_ALIAS, source_alias=None, user_target_alias=target_alias,
                   user_source_alias=None, condition=node, clauses=[clause],
                   target_filter=unqualify(node, target_alias) if node is not None and target_alias else node,
                   scan_all_files=node is None, schema_json=snapshot.schema.to_json(), new_metadata=None,
                   insert_columns=[], update_generated={}, insert_generated={}, rewrite_plan=_rewrite_plan(
                       snapshot, snapshot.schema, "DELETE", storage_options),
                   insert_plan=None, multiple_matches_allowed=False, **base)


def plan_update(snapshot: "Snapshot", condition: Any = None, assignments: Mapping[str, Any] | None = None,
                target_alias: str | None = None, typer: Typer | None = None,
                storage_options: dict | None = None) -> DmlPlan:
    """UPDATE the table SET `assignments` WHERE `condition` (None: every row). `typer` gives the
    type of a value expression (None: unknown) for the store-assignment check."""
    _append_only(snapshot, "UPDATE")
    if not assignments:
        raise ValueError("UPDATE needs at least one column to set ('set' / 'updates' cannot be empty)")
    if not isinstance(assignments, Mapping):
        raise TypeError(f"the columns to set must be a dict of column name → value, got {type(assignments).__name__}")
    schema = snapshot.schema
    node = _as_tree(condition, "the UPDATE condition") if condition is not None else None
    scope = Scope.of_schema(schema, target_alias)
    if node is not None:
        check_columns(node, scope)

    def target_ref(name: str) -> Column:
        return Column((target_alias, name)) if target_alias else Column((name,))

    values, assigned = _update_values(schema, schema, assignments, scope, None, typer, "UPDATE", target_ref,
                                      alias=target_alias)
    clause = CompiledClause(0, "notMatchedBySource", "update", None, node, values, {})
    base = _common(snapshot, "UPDATE")
    return DmlPlan(operation="UPDATE", parameters={"predicate": _predicate_param(node)},
                   target_alias=target_alias or DEFAULT_TARGET_ALIAS, source_alias=None, user_target_alias=target_alias,
                   user_source_alias=None, condition=node, clauses=[clause],
                   target_filter=unqualify(node, target_alias) if node is not None and target_alias else node,
                   scan_all_files=node is None, schema_json=schema.to_json(), new_metadata=None, insert_columns=[],
                   update_generated=_generated_steps(schema, [(0, assigned)]), insert_generated={},
                   rewrite_plan=_rewrite_plan(snapshot, schema, "UPDATE", storage_options), insert_plan=None,
                   multiple_matches_allowed=False, **base)


def _update_values(schema: StructType, read_schema: StructType, assignments: Mapping[str, Any] | None,
                   scope: Scope, allowed: Scope | None, typer: Typer | None, what: str,
                   target_ref: Callable[[str], Column], *,
                   star_source: Callable[[str], Expression | None] | None = None,
                   except_columns: Sequence[str] = (), evolution: bool = False,
                   alias: str | None = None) -> tuple[dict[str, Expression], set[str]]:
    """(values, assigned columns) of an update: every non-generated column of `schema` gets its
    assignment or the target's own value (NULL for a column schema evolution adds); generated
    columns only when assigned. `assignments` None: updateAll — `star_source(col)` gives the
    source's column (None when the source lacks it: an error, or with `evolution` the target's
    value kept)."""
    values: dict[str, Expression] = {}
    given: dict[str, Expression] = {}
    leaves: list[tuple[tuple[str, ...], Expression, StructField]] = []
    if assignments is None:
        excluded = {c.lower() for c in except_columns}
        for c in except_columns:
            _field(schema, c, what)
        for f in schema.fields:
            if f.name.lower() in excluded:
                continue
            src = star_source(f.name) if star_source is not None else None
            if src is None:
                if is_identity(f) or f.metadata.get(GENERATION_EXPRESSION) or evolution:
                    continue           # kept / recomputed
                raise AnalysisException(
                    f"[DELTA_MERGE_UNRESOLVED_EXPRESSION] Cannot resolve {quote_identifier(f.name)} in {what} "
                    f"given columns {', '.join(allowed.candidates() if allowed is not None else scope.candidates())} "
                    f"(the source has no column {quote_identifier(f.name)}; with schema evolution the "
                    f"target's value is kept)")
            if is_identity(f):
                raise _identity_update_error(f.name)
            given[f.name] = src
        leaves = [((name,), tree, schema.field(name)) for name, tree in given.items()]
    else:
        given, leaves = _explicit_assignments(schema, assignments, what, "set", alias=alias, old=target_ref,
                                              read_schema=read_schema)
    for name in given:
        if is_identity(schema.field(name)):
            raise _identity_update_error(name)
    for path, tree, f in leaves:   # each value given, checked against the column or field it is stored in
        _check_refs(tree, scope, what, allowed)
        _check_type(typer(tree) if typer is not None else None, f, f"{what} (column {'.'.join(path)})", evolution)
    old = {f.name for f in read_schema.fields}
    for f in schema.fields:
        if f.name in given:
            values[f.name] = given[f.name]
        elif not f.metadata.get(GENERATION_EXPRESSION):
            values[f.name] = _widened(f.type, read_schema.field(f.name).type, target_ref(f.name)) \
                if f.name in old else Literal(None)
    return values, set(given)


def _generated_steps(schema: StructType, clauses: list[tuple[int, set[str]]]) -> dict[str, tuple[Expression, tuple[int, ...]]]:
    """Generated column → (generation expression, the clauses that recompute it: those not
    assigning it)."""
    out: dict[str, tuple[Expression, tuple[int, ...]]] = {}
    for f in schema.fields:
        expr = f.metadata.get(GENERATION_EXPRESSION)
        if not expr:
            continue
        recompute = tuple(i for i, assigned in clauses if f.name not in assigned)
        out[f.name] = (parse(str(expr)), recompute)
    return out


def _rewrite_plan(snapshot: "Snapshot", schema: StructType, operation: str, storage_options: dict | None) -> WritePlan:
    incoming = StructType([f for f in schema.fields])
    return plan_rows(snapshot, incoming, operation, storage_options=storage_options, rewrite=True, schema=schema)


def plan_merge(snapshot: "Snapshot", source_schema: StructType, condition: Any, clauses: Sequence[MergeClause],
               target_alias: str | None = None, source_alias: str | None = None, *, schema_evolution: bool = False,
               typer: Typer | None = None, storage_options: dict | None = None) -> DmlPlan:
    """MERGE INTO the table (`target_alias`) USING a source of `source_schema` (`source_alias`)
    ON `condition` with `clauses` in order. `typer` types value expressions over the joined
    relation (None: unknown)."""
    if condition is None:
        raise ValueError("'condition' in merge cannot be None")
    if not clauses:
        raise AnalysisException("[DELTA_MERGE_MISSING_WHEN] There must be at least one WHEN clause in a MERGE statement.")
    if target_alias is not None and source_alias is not None and target_alias.lower() == source_alias.lower():
        raise AnalysisException(f"the target and the source of a MERGE have the same alias {quote_identifier(target_alias)}")
    for kind in KINDS:
        of_kind = [c for c in clauses if c.kind == kind]
        for c in of_kind[:-1]:
            if c.condition is None:
                label = {"matched": "MATCHED", "notMatched": "NOT MATCHED", "notMatchedBySource": "NOT MATCHED BY SOURCE"}[kind]
                raise AnalysisException(
                    f"[NON_LAST_{label.replace(' ', '_')}_CLAUSE_OMIT_CONDITION] When there are more than one "
                    f"{label} clauses in a MERGE statement, only the last {label} clause can omit the condition.")
    if any(c.action in ("update", "delete") for c in clauses):
        _append_only(snapshot, "MERGE (UPDATE / DELETE clauses) into")
    ta = target_alias or DEFAULT_TARGET_ALIAS
    sa = source_alias or DEFAULT_SOURCE_ALIAS
    read_schema = snapshot.schema
    schema, new_md = _evolve(snapshot, source_schema, clauses, ta) if schema_evolution else (read_schema, None)
    tscope = Scope.of_schema(read_schema, ta)
    sscope = Scope.of_schema(source_schema, sa)
    joined = Scope.of_schemas({ta: read_schema, sa: source_schema})
    on = _as_tree(condition, "the MERGE condition")
    check_columns(on, joined)

    def source_column(name: str) -> Expression | None:
        f = source_schema.get(name, case_insensitive=True)
        return Column((sa, f.name)) if f is not None else None

    present_t = Not(IsNull(Column((TARGET_PRESENT,))))
    present_s = Not(IsNull(Column((SOURCE_PRESENT,))))
    presence = {"matched": And(present_t, present_s), "notMatched": And(Not(IsNull(Column((SOURCE_PRESENT,)))),
                                                                       IsNull(Column((TARGET_PRESENT,)))),
                "notMatchedBySource": And(present_t, IsNull(Column((SOURCE_PRESENT,))))}
    compiled: list[CompiledClause] = []
    update_assigned: list[tuple[int, set[str]]] = []
    insert_given: list[tuple[int, dict[str, Expression]]] = []
    for i, c in enumerate(clauses):
        what = {"matched": f"WHEN MATCHED clause {i}", "notMatched": f"WHEN NOT MATCHED (INSERT) clause {i}",
                "notMatchedBySource": f"WHEN NOT MATCHED BY SOURCE clause {i}"}[c.kind]
        allowed = {"matched": None, "notMatched": sscope, "notMatchedBySource": tscope}[c.kind]
        cond = _as_tree(c.condition, f"the condition of {what}") if c.condition is not None else None
        if cond is not None:
            _check_refs(cond, joined, what, allowed)
        values: dict[str, Expression] = {}
        if c.action == "update":
            assignments = None if c.assignments is None else dict(c.assignments)
            values, assigned = _update_values(
                schema, read_schema, assignments, joined, allowed, typer, what, lambda n: Column((ta, n)),
                star_source=source_column, except_columns=c.except_columns, evolution=schema_evolution,
                alias=target_alias)
            update_assigned.append((i, assigned))
        elif c.action == "insert":
            given = _insert_given(schema, c, joined, sscope, typer, what, source_column, schema_evolution,
                                  target_alias)
            insert_given.append((i, given))
        desc = {"predicate": cond.to_sql()} if cond is not None else {}
        desc["actionType"] = c.action
        compiled.append(CompiledClause(i, c.kind, c.action, presence[c.kind], cond, values, desc))

    insert_columns, insert_generated = _insert_values(schema, insert_given, compiled)
    target_only = []
    for part in conjuncts(on):
        try:
            for col in part.columns():
                tscope.resolve(col)
        except AnalysisException:
            continue
        if part.columns():
            target_only.append(unqualify(part, ta))
    target_filter = None
    for p in target_only:
        target_filter = p if target_filter is None else And(target_filter, p)
    matched = [c for c in compiled if c.kind == "matched"]
    params = {
        "predicate": _predicate_param(on),
        "matchedPredicates": json.dumps([c.description for c in compiled if c.kind == "matched"]),
        "notMatchedPredicates": json.dumps([c.description for c in compiled if c.kind == "notMatched"]),
        "notMatchedBySourcePredicates": json.dumps([c.description for c in compiled if c.kind == "notMatchedBySource"]),
    }
    base = _common(snapshot, "MERGE")
    insert_plan = None
    if insert_given:
        incoming = StructType([schema.field(c) for c in insert_columns])
        insert_plan = plan_rows(snapshot, incoming, "MERGE", storage_options=storage_options, schema=schema)
    return DmlPlan(operation="MERGE", parameters=params, target_alias=ta, source_alias=sa,
                   user_target_alias=target_alias, user_source_alias=source_alias, condition=on, clauses=compiled,
                   target_filter=target_filter, scan_all_files=any(c.kind == "notMatchedBySource" for c in compiled),
                   schema_json=schema.to_json(), new_metadata=new_md, insert_columns=insert_columns,
                   update_generated=_generated_steps(schema, update_assigned), insert_generated=insert_generated,
                   rewrite_plan=_rewrite_plan(snapshot, schema, "MERGE", storage_options)
                   if any(c.action in ("update", "delete") for c in compiled) else None,
                   insert_plan=insert_plan,
                   multiple_matches_allowed=len(matched) == 1 and matched[0].action == "delete"
                   and matched[0].condition is None, **base)


def _insert_given(schema: StructType, c: MergeClause, joined: Scope, sscope: Scope, typer: Typer | None,
                  what: str, source_column, evolution: bool, target_alias: str | None) -> dict[str, Expression]:
    """The values an insert clause gives, by column (insertAll: the source's column of each
    table column it has; computed columns it lacks are left to the writer, nullable ones are
    NULL with schema evolution and an error without)."""
    given: dict[str, Expression] = {}
    if c.assignments is None:
        excluded = {x.lower() for x in c.except_columns}
        for x in c.except_columns:
            _field(schema, x, what)
        for f in schema.fields:
            if f.name.lower() in excluded:
                continue
            src = source_column(f.name)
            if src is None:
                if is_identity(f) or f.metadata.get(GENERATION_EXPRESSION) or \
                        f.metadata.get(COLUMN_DEFAULT) is not None or (f.nullable and evolution):
                    continue
                if f.nullable:
                    raise AnalysisException(
                        f"[DELTA_MERGE_UNRESOLVED_EXPRESSION] Cannot resolve {quote_identifier(f.name)} in {what} "
                        f"given columns {', '.join(sscope.candidates())} (the source has no column "
                        f"{quote_identifier(f.name)}; MERGE with schema evolution inserts NULL)")
                raise AnalysisException(
                    f"[DELTA_MERGE_UNRESOLVED_EXPRESSION] Cannot resolve {quote_identifier(f.name)} in {what} "
                    f"given columns {', '.join(sscope.candidates())}")
            if is_identity(f) and str(f.metadata.get(IDENTITY_ALLOW_EXPLICIT_INSERT, "")).lower() != "true":
                continue   # GENERATED ALWAYS: insert * leaves it to the identity generator
            given[f.name] = src
    else:
        given, _ = _explicit_assignments(schema, c.assignments, what, "insert", alias=target_alias)
    for name, tree in given.items():
        f = schema.field(name)
        _check_refs(tree, joined, what, sscope)
        _check_type(typer(tree) if typer is not None else None, f, f"{what} (column {f.name})", evolution)
    return given


def _insert_values(schema: StructType, insert_given: list[tuple[int, dict[str, Expression]]],
                   compiled: list[CompiledClause]) -> tuple[list[str], dict[str, tuple[Expression, tuple[int, ...]]]]:
    """The columns inserted rows give (any insert clause assigns them) and each insert clause's
    values for them: its assignment, else the column's default, else NULL — or, for a generated
    column, its generation expression (recomputed from the new row: returned per clause)."""
    union: list[str] = []
    for _, given in insert_given:
        for name in given:
            if name not in union:
                union.append(name)
    union = [f.name for f in schema.fields if f.name in union]   # table order
    generated: dict[str, tuple[Expression, tuple[int, ...]]] = {}
    for name in union:
        f = schema.field(name)
        if is_identity(f):
            missing = [i for i, g in insert_given if name not in g]
            if missing:
                raise AnalysisException(
                    f"identity column {quote_identifier(name)} is given by some INSERT clauses of this MERGE "
                    f"and not by others (clause {missing[0]}); tahoe generates identity values only for "
                    f"a column no INSERT clause gives")
        gen = f.metadata.get(GENERATION_EXPRESSION)
        if gen:
            recompute = tuple(i for i, g in insert_given if name not in g)
            if recompute:
                generated[name] = (parse(str(gen)), recompute)
    by_index = {c.index: c for c in compiled}
    for i, given in insert_given:
        vals = by_index[i].values
        for name in union:
            if name in given:
                vals[name] = given[name]
            elif name in generated:
                continue
            else:
                default = schema.field(name).metadata.get(COLUMN_DEFAULT)
                vals[name] = parse(str(default)) if default is not None else Literal(None)
    return union, generated


def _evolve(snapshot: "Snapshot", source_schema: StructType, clauses: Sequence[MergeClause],
            target_alias: str | None = None) -> tuple[StructType, Metadata | None]:
    """MERGE with schema evolution: the table's schema merged with the part of the source's
    schema the clauses carry (delta-spark 2.3+): with an updateAll / insertAll clause, all of it;
    else each source column or nested struct field that an update / insert clause assigns by
    name — a key naming it exactly keeps it whole (`set={"s": ...}` carries the source's struct
    `s` with its new fields), a key naming a field inside it keeps that field (`"s.c"`). Carried
    columns the table lacks are added (nullable, at the end in the source's order, column mapping
    ids assigned); struct fields it lacks (at any depth, inside arrays and maps too) are added at
    the end of their struct; leaf types stay the table's (values are cast to them, checked per
    clause)."""
    schema = snapshot.schema
    star = any(c.assignments is None and c.action in ("update", "insert") for c in clauses)
    keys: set[tuple[str, ...]] = set()
    for c in clauses:
        if c.action in ("update", "insert") and c.assignments is not None:
            keys.update(_key_parts(name, target_alias, schema, source_schema)
                        for name in dict(c.assignments) if isinstance(name, str))

    def carried(t: StructType, base: tuple[str, ...]) -> list[StructField]:
        out = []
        for f in t.fields:
            path = base + (f.name.lower(),)
            if star or path in keys:
                out.append(f)
            elif isinstance(f.type, StructType) and any(k[:len(path)] == path for k in keys):
                out.append(StructField(f.name, StructType(carried(f.type, path)), f.nullable, f.metadata))
        return out

    migration = StructType([StructField(f.name, f.type, True, {}) for f in carried(source_schema, ())])
    merged = merge_schemas(schema, migration, keep_table_type=lambda _table, _source: True)
    if merged == schema:
        return schema, None
    merged, conf = column_mapping.assign_ids_for_table(merged, dict(snapshot.configuration))
    md = dataclasses.replace(snapshot.metadata, schema_string=merged.to_json(), configuration=conf)
    return merged, md


def _key_parts(name: str, target_alias: str | None, schema: StructType, source_schema: StructType) -> tuple[str, ...]:
    """The name parts of a SET / VALUES key, lower-cased, the target's alias dropped: a column's
    own name (a source or table column whose name has a dot) is one part, else the key is read as
    a multi-part name (`s.a`, `` `a.b` ``, `t.s.a`) as `_set_path` reads it."""
    if schema.get(name, case_insensitive=True) is not None or source_schema.get(name, case_insensitive=True) is not None:
        return (name.lower(),)
    try:
        node = parse(name)
    except Exception:
        return (name.lower(),)
    if not isinstance(node, Column):
        return (name.lower(),)
    parts = [p.lower() for p in node.parts]
    if target_alias and len(parts) > 1 and parts[0] == target_alias.lower() and (
            schema.get(node.parts[1], case_insensitive=True) is not None
            or source_schema.get(node.parts[1], case_insensitive=True) is not None):
        parts = parts[1:]
    return tuple(parts)


# --- what to read, what was read --------------------------------------------------------------------

def candidate_files(plan: DmlPlan, snapshot: "Snapshot", time_zone: str | None = None) -> list[AddFile]:
    """The active files that may hold a row the DML acts on: all of them when it has
    notMatchedBySource clauses or no condition, else those partition pruning and stats skipping
    keep for the target-only predicate — its zone-less timestamps (literals, the zone-less form of
    timestamp partition values) read in `time_zone`, where the executor evaluates the rows (the
    Spark session's; UTC for the Arrow executor), so that no file holding an affected row is
    left out."""
    adds = snapshot.add_files()
    if plan.scan_all_files or plan.target_filter is None or not adds:
        return adds
    files = snapshot.files_table(["partitionValues", "stats"])
    keep = file_mask(plan.target_filter, files, snapshot.schema, snapshot.partition_columns,
                     snapshot.column_mapping_mode, time_zone=normalize_zone_name(time_zone))
    return [a for a, k in zip(adds, keep) if k]


def record_reads(plan: DmlPlan, txn: "Transaction", scanned: Iterable[AddFile], time_zone: str | None = None) -> None:
    """What the DML read, as delta-spark's `filterFiles` records it: the partition-column part of
    the target-only predicate (TRUE when there is none: every concurrently added file
    conflicts) and the files scanned (a concurrent removal of one conflicts)."""
    schema = plan.read_schema
    pcols = [c.lower() for c in plan.partition_columns]
    parts = []
    if plan.target_filter is not None and not plan.scan_all_files:
        for p in conjuncts(plan.target_filter):
            cols = p.columns()
            if cols and all(len(c.parts) == 1 and c.parts[0].lower() in pcols for c in cols):
                parts.append(p)
    if parts and plan.partition_columns:
        node = parts[0]
        for p in parts[1:]:
            node = And(node, p)
        txn.read_predicate(partition_predicate(node, schema, plan.partition_columns, time_zone))
    else:
        txn.read_predicate(lambda _values: True)
    txn.read_files(list(scanned))

