"""Creating and evolving tables: each operation is one `Transaction` (one commit), validated before anything is
written, returning the snapshot after the commit (the current one when nothing changed).

  1. `create_table`: CREATE [OR REPLACE] with the lowest protocol covering the features used.
  2. `set_properties` / `unset_properties`: enabling a feature upgrades the protocol; enabling row tracking
     backfills row ids in the same commit.
  3. `upgrade_protocol`, `add_feature` (never removes one).
  4. `add_constraint` / `drop_constraint`: CHECK constraints.
  5. `update_schema` (mergeSchema / overwriteSchema rules), `add_columns`, `alter_column` (type widening,
     NOT NULL, COMMENT, FIRST / AFTER), and under column mapping (`name` or `id`) `rename_column` / `drop_column`.
  6. `set_identity_high_water_mark`."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any, Callable, Iterable

import pyarrow as pa

from ..errors import (
    AnalysisException, ConstraintViolationError, InvalidTableOperationError, MetadataChangedException,
    ParseException, ProtocolChangedException, SchemaError, TableNotFoundError, UnsupportedFeatureError,
)
from ..expressions import parse
from ..log.delta_log import DeltaLog
from ..log.snapshot import Snapshot
from ..protocol import column_mapping
from ..protocol.actions import Metadata, Protocol
from ..protocol.clustering import check_clustering_columns, clustering_domain, clustering_paths, physical_path
from ..protocol.schema import (
    ArrayType, DataType, MapType, StructField, StructType, check_column_names, from_arrow_schema, is_type_widening,
    merge_schemas, record_type_changes,
)
from ..protocol.table_features import FEATURES, canonical_feature_name, merge_protocols
from ..protocol.properties import (
    CONSTRAINT_PREFIX, FEATURE_PREFIX, advance_identity_high_water_mark, check_identity_columns, constraint_key,
    constraints_of, bool_property, normalize_properties,
)
from ..protocol.timestamps import now_ms
from .transaction import Transaction, raise_protocol_versions, same_protocol
from .ddl import parse_schema

__all__ = [
    "create_table", "set_properties", "unset_properties", "upgrade_protocol", "add_feature",
    "add_constraint", "drop_constraint", "update_schema", "rename_column", "drop_column",
    "set_identity_high_water_mark", "expression_columns", "check_expression_columns", "add_columns",
    "alter_column",
]

_MODES = ("error", "ignore", "overwrite", "replace")


def _log(target: DeltaLog | str, storage_options: dict | None = None) -> DeltaLog:
    return target if isinstance(target, DeltaLog) else DeltaLog.for_table(target, storage_options)


def _as_schema(schema: StructType | pa.Schema | str) -> StructType:
    if isinstance(schema, StructType):
        return schema
    if isinstance(schema, pa.Schema):
        return from_arrow_schema(schema)
    if isinstance(schema, str):
        return parse_schema(schema)
    raise SchemaError(f"expected a StructType, a pyarrow schema or a schema string, got {type(schema).__name__}")


# --- schema checks --------------------------------------------------------------------------

def _check_schema(schema: StructType) -> None:
    if not schema.fields:
        raise SchemaError("a table needs at least one column")
    check_column_names(schema)


def _resolve_partition_columns(schema: StructType, partition_columns: Iterable[str]) -> tuple[str, ...]:
    out: list[str] = []
    for c in partition_columns:
        f = schema.get(c, case_insensitive=True)
        if f is None:
            raise SchemaError(f"partition column '{c}' is not in the schema {schema.names}")
        if isinstance(f.type, (StructType, ArrayType, MapType)):
            raise SchemaError(f"partition column '{f.name}' has type {f.type.simple_string()}; "
                              f"partition columns must be of an atomic type")
        if f.name in out:
            raise SchemaError(f"partition column '{f.name}' is given twice")
        out.append(f.name)
    if out and len(out) == len(schema.fields):
        raise SchemaError("cannot use all columns as partition columns: a table needs a data column")
    return tuple(out)


# --- CHECK constraint expressions -----------------------------------------------------------

def expression_columns(expression: str) -> list[tuple[str, ...]]:
    """The column references of a SQL boolean expression (each as its path of names; lambda
    parameters are not columns), parsed by `tahoe.expressions`. InvalidTableOperationError when
    the expression does not parse."""
    try:
        tree = parse(expression)
    except ParseException as e:
        raise InvalidTableOperationError(f"cannot parse the expression {expression!r}: {e}") from None
    return [c.parts for c in tree.columns()]


def check_expression_columns(expression: str, schema: StructType, what: str = "expression") -> None:
    """SchemaError naming the first column `expression` references that the schema lacks."""
    for parts in expression_columns(expression):
        current: DataType = schema
        for i, name in enumerate(parts):
            f = current.get(name, case_insensitive=True) if isinstance(current, StructType) else None
            if f is None:
                raise SchemaError(
                    f"{what} references column '{'.'.join(parts)}' which does not exist in the table "
                    f"(columns: {schema.names})")
            current = f.type


def _references(expression: str, column: str) -> bool:
    low = column.lower()
    try:
        return any(p and p[0].lower() == low for p in expression_columns(expression))
    except (InvalidTableOperationError, AnalysisException):
        return True


# --- create ---------------------------------------------------------------------------------

def create_table(uri: str | DeltaLog, schema: StructType | pa.Schema | str, partition_columns: Iterable[str] = (),
                 properties: dict[str, Any] | None = None, name: str | None = None,
                 description: str | None = None, storage_options: dict | None = None,
                 mode: str = "error", protocol: Protocol | None = None,
                 cluster_by: Iterable[str] | None = None, managed: bool = False) -> Snapshot:
    """Create a Delta table (version 0) with the lowest protocol covering the features its properties and schema
    use (or `protocol` raised to cover them); under column mapping every column gets an id and a physical name.

      1. mode: "error" refuses an existing table (InvalidTableOperationError); "ignore" leaves it alone;
         "overwrite" creates or replaces (files removed, features kept); "replace" needs one (TableNotFoundError).
      2. commitInfo as delta-spark's DeltaTableBuilder: CREATE TABLE, CREATE OR REPLACE TABLE, REPLACE TABLE.
      3. Another writer creating it meanwhile fails with ProtocolChangedException (mode="ignore": left alone).
      4. `cluster_by`: the `clustering` feature and `delta.clustering` domain; not with partition columns.
      5. `managed`: a catalog's managed table (commitInfo `isManaged`)."""
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {_MODES}, got {mode!r}")
    log = _log(uri, storage_options)
    try:
        existing = log.snapshot()
    except TableNotFoundError:
        existing = None
    if existing is None and mode == "replace":
        raise TableNotFoundError(f"cannot replace the table at {log.table_root}: there is no Delta table there")
    if existing is not None:
        if mode == "error":
            raise InvalidTableOperationError(f"a Delta table already exists at {log.table_root} "
                                             f"(version {existing.version}); use mode='overwrite' or 'ignore'")
        if mode == "ignore":
            return existing
    schema = _as_schema(schema)
    _check_schema(schema)
    pcols = _resolve_partition_columns(schema, partition_columns)
    check_identity_columns(schema, pcols)
    conf = normalize_properties(properties)
    for cname, expr in constraints_of(conf).items():
        check_expression_columns(expr, schema, f"CHECK constraint '{cname}'")
    given_conf = dict(conf)
    clustering = None if cluster_by is None else (
        [cluster_by] if isinstance(cluster_by, str) else list(cluster_by))
    if clustering is not None:
        if not clustering:
            raise InvalidTableOperationError("cluster_by names no column (leave it out for an unclustered table)")
        clustering = check_clustering_columns(schema, clustering, pcols)
        # the domain names physical columns: give the columns their ids and physical names now
        # (the transaction keeps them; a replaced table's ids count on from its maxColumnId)
        if existing is not None:
            old_max = existing.metadata.configuration.get(column_mapping.MAX_COLUMN_ID_KEY)
            if old_max is not None and column_mapping.MAX_COLUMN_ID_KEY not in conf:
                conf = {**conf, column_mapping.MAX_COLUMN_ID_KEY: old_max}
        schema, conf = column_mapping.assign_ids_for_table(schema, conf)
    replacing = existing is not None
    md = Metadata(
        id=existing.metadata.id if replacing else str(uuid.uuid4()),
        schema_string=schema.to_json(),
        partition_columns=pcols,
        configuration=conf,
        name=name,
        description=description,
        created_time=now_ms(),
    )
    operation = {"overwrite": "CREATE OR REPLACE TABLE", "replace": "REPLACE TABLE"}.get(mode, "CREATE TABLE")
    params = {
        "isManaged": str(bool(managed)).lower(),
        "description": description,
        "partitionBy": list(pcols),
        "clusterBy": list(clustering or []),
        "properties": {k: v for k, v in given_conf.items() if not k.startswith(FEATURE_PREFIX)},
    }
    txn = Transaction(log, operation, params, snapshot=existing, new_table=existing is None)
    if replacing:
        txn.replace_table()
        txn.read_whole_table()
        txn.remove_files(existing.add_files())
    txn.update_metadata(md)
    if protocol is not None:
        txn.update_protocol(protocol)
    if clustering:
        txn.set_system_domain_metadata(clustering_domain(
            [physical_path(schema, c, column_mapping.mode(conf)) for c in clustering]))
    elif replacing and clustering_paths(existing.domain_metadata):
        txn.set_system_domain_metadata(clustering_domain([]))   # the new definition is not clustered
    try:
        version = txn.commit()
    except (ProtocolChangedException, MetadataChangedException):
        if existing is None and mode == "ignore":
            return log.snapshot()
        raise
    return log.snapshot(version=version)


# --- properties -----------------------------------------------------------------------------

def _commit_metadata(log: DeltaLog, snap: Snapshot, operation: str, params: dict, md: Metadata,
                     prepare: Callable[[Transaction], None] | None = None) -> Snapshot:
    txn = Transaction(log, operation, params, snapshot=snap)
    if prepare is not None:
        prepare(txn)
    txn.update_metadata(md)
    version = txn.commit()
    return log.snapshot(version=version)


def set_properties(log: DeltaLog | str, props: dict[str, Any], storage_options: dict | None = None) -> Snapshot:
    """Set table properties. Known `delta.*` keys are validated; enabling a feature
    (delta.enableChangeDataFeed, delta.columnMapping.mode=name, delta.feature.X=supported, ...)
    upgrades the protocol in the same commit; enabling row tracking re-adds every file lacking
    row ids with fresh ones (dataChange=false) in the same commit."""
    log = _log(log, storage_options)
    snap = log.snapshot()
    norm = normalize_properties(props)
    for k in norm:
        if k.startswith(CONSTRAINT_PREFIX):
            raise InvalidTableOperationError(
                f"'{k}' cannot be set as a table property; use add_constraint")
        if k == column_mapping.MAX_COLUMN_ID_KEY:
            raise InvalidTableOperationError(f"'{k}' is maintained by tahoe and cannot be set")
    if not norm:
        return snap
    conf = dict(snap.metadata.configuration)
    conf.update(norm)
    md = dataclasses.replace(snap.metadata, configuration=conf)

    def prepare(txn: Transaction) -> None:
        if bool_property(conf, "delta.enableRowTracking") and not bool_property(snap.configuration, "delta.enableRowTracking"):
            missing = [a for a in snap.add_files() if a.base_row_id is None]
            if missing:
                txn.read_files(missing)
                txn.add_files(dataclasses.replace(a, data_change=False) for a in missing)

    return _commit_metadata(log, snap, "SET TBLPROPERTIES", {"properties": norm}, md, prepare)


def unset_properties(log: DeltaLog | str, keys: Iterable[str], if_exists: bool = False,
                     storage_options: dict | None = None) -> Snapshot:
    """Remove table properties. A missing key is an InvalidTableOperationError unless
    `if_exists`. Column mapping cannot be turned off this way, features are never removed."""
    log = _log(log, storage_options)
    snap = log.snapshot()
    conf = dict(snap.metadata.configuration)
    by_lower = {k.lower(): k for k in conf}
    removed = []
    for key in keys:
        if key.lower().startswith(FEATURE_PREFIX):
            raise InvalidTableOperationError(f"'{key}': table features cannot be removed")
        actual = by_lower.get(key.lower())
        if actual is None:
            if if_exists:
                continue
            raise InvalidTableOperationError(
                f"cannot unset table property '{key}': the table has no such property")
        if actual == column_mapping.MODE_KEY and column_mapping.mode(conf) != "none":
            raise InvalidTableOperationError(f"'{actual}' cannot be unset: column mapping cannot be turned off")
        if actual == column_mapping.MAX_COLUMN_ID_KEY:
            raise InvalidTableOperationError(f"'{actual}' is maintained by tahoe and cannot be unset")
        conf.pop(actual)
        removed.append(actual)
    if not removed:
        return snap
    md = dataclasses.replace(snap.metadata, configuration=conf)
    return _commit_metadata(log, snap, "UNSET TBLPROPERTIES",
                            {"properties": removed, "ifExists": if_exists}, md)


# --- protocol -------------------------------------------------------------------------------

def _commit_protocol(log: DeltaLog, snap: Snapshot, operation: str, params: dict, proto: Protocol) -> Snapshot:
    if same_protocol(proto, snap.protocol):
        return snap
    txn = Transaction(log, operation, params, snapshot=snap)
    txn.update_protocol(proto)
    version = txn.commit()
    return log.snapshot(version=version)


def upgrade_protocol(log: DeltaLog | str, reader_version: int | None = None, writer_version: int | None = None,
                     storage_options: dict | None = None) -> Snapshot:
    """Raise the protocol to at least (reader_version, writer_version); the table keeps every
    feature it has (going to writer 7 lists them explicitly). As delta-spark 3+ (its
    `upgradeTableProtocol` sets the versions as table properties, merged with the table's
    protocol): versions the table's protocol already covers — lower ones included — change
    nothing and commit nothing (delta-spark's "downgradeIgnored")."""
    log = _log(log, storage_options)
    snap = log.snapshot()
    p = snap.protocol
    for v, lo, hi, what in ((reader_version, 1, 3, "reader"), (writer_version, 1, 7, "writer")):
        if v is not None and not lo <= v <= hi:
            raise InvalidTableOperationError(f"{what} version must be between {lo} and {hi}, got {v}")
    proto = raise_protocol_versions(p, reader_version, writer_version)
    if proto == p:
        return snap
    return _commit_protocol(log, snap, "UPGRADE PROTOCOL",
                            {"newProtocol": proto.to_dict()}, proto)


def add_feature(log: DeltaLog | str, name: str, storage_options: dict | None = None) -> Snapshot:
    """Add table feature `name` (and the features it requires) to the protocol. Unknown names are
    an UnsupportedFeatureError listing the known ones; an already supported feature is a no-op."""
    log = _log(log, storage_options)
    canon = canonical_feature_name(name)
    if canon not in FEATURES:
        raise UnsupportedFeatureError(
            f"unknown table feature '{name}'; known features: {', '.join(sorted(FEATURES))}")
    snap = log.snapshot()
    proto = merge_protocols(snap.protocol, [canon])
    return _commit_protocol(log, snap, "SET TBLPROPERTIES",
                            {"properties": {f"{FEATURE_PREFIX}{canon}": "supported"}}, proto)


# --- constraints ----------------------------------------------------------------------------

def add_constraint(log: DeltaLog | str, name: str, expression: str,
                   validate: Callable[[str], int] | None = None,
                   storage_options: dict | None = None) -> Snapshot:
    """Add CHECK constraint `name`. The columns the expression names must exist (SchemaError
    naming the missing one). `validate(expression)` is the engine's hook that counts existing
    rows violating it; a nonzero count is a ConstraintViolationError and nothing is committed.
    The transaction reads the whole table, so a concurrent write of data conflicts with it."""
    log = _log(log, storage_options)
    if not name or not name.strip():
        raise InvalidTableOperationError("a constraint needs a name")
    if not expression or not expression.strip():
        raise InvalidTableOperationError(f"constraint '{name}' has an empty expression")
    snap = log.snapshot()
    key = constraint_key(name)
    if key in snap.metadata.configuration:
        raise InvalidTableOperationError(
            f"Constraint '{name}' already exists. Please delete the old constraint first.\nOld constraint:\n"
            f"{snap.metadata.configuration[key]}", error_class="DELTA_CONSTRAINT_ALREADY_EXISTS")
    check_expression_columns(expression, snap.schema, f"CHECK constraint '{name}'")
    if validate is not None:
        n = int(validate(expression) or 0)
        if n:
            raise ConstraintViolationError(
                f"{n} rows in {log.table_root} violate the new CHECK constraint ({expression}); nothing was committed",
                error_class="DELTA_NEW_CHECK_CONSTRAINT_VIOLATION")
    conf = dict(snap.metadata.configuration)
    conf[key] = expression
    md = dataclasses.replace(snap.metadata, configuration=conf)
    return _commit_metadata(log, snap, "ADD CONSTRAINT", {"name": name, "expr": expression}, md,
                            lambda txn: txn.read_whole_table())


def drop_constraint(log: DeltaLog | str, name: str, if_exists: bool = True,
                    storage_options: dict | None = None) -> Snapshot:
    log = _log(log, storage_options)
    snap = log.snapshot()
    key = constraint_key(name)
    conf = dict(snap.metadata.configuration)
    if key not in conf:
        if if_exists:
            return snap
        raise InvalidTableOperationError(f"constraint '{name}' does not exist")
    expr = conf.pop(key)
    md = dataclasses.replace(snap.metadata, configuration=conf)
    return _commit_metadata(log, snap, "DROP CONSTRAINT", {"constraint": name, "expr": expr}, md)


# --- schema ---------------------------------------------------------------------------------

def _carry_mapping(old: DataType, new: DataType) -> DataType:
    """`new` with the column-mapping metadata (id, physical name) of same-named fields of `old`
    carried over where `new` has none — so a replaced schema keeps reading existing data."""
    if isinstance(old, StructType) and isinstance(new, StructType):
        fields = []
        for nf in new.fields:
            of = old.get(nf.name, case_insensitive=True)
            if of is None:
                fields.append(nf)
                continue
            md = dict(nf.metadata)
            for k in (column_mapping.ID_KEY, column_mapping.PHYSICAL_NAME_KEY):
                if k not in md and k in of.metadata:
                    md[k] = of.metadata[k]
            fields.append(StructField(nf.name, _carry_mapping(of.type, nf.type), nf.nullable, md))
        return StructType(fields)
    if isinstance(old, ArrayType) and isinstance(new, ArrayType):
        return ArrayType(_carry_mapping(old.element_type, new.element_type), new.contains_null)
    if isinstance(old, MapType) and isinstance(new, MapType):
        return MapType(_carry_mapping(old.key_type, new.key_type),
                       _carry_mapping(old.value_type, new.value_type), new.value_contains_null)
    return new


def _check_replace(old: DataType, new: DataType, path: str, allow_drop: bool) -> None:
    """Existing data (written with `old`) must stay readable under `new`: no dropped columns
    (unless column mapping), no type changes, no nullable → non-nullable, no new non-nullable
    columns."""
    if isinstance(old, StructType) and isinstance(new, StructType):
        p = f"{path}." if path else ""
        for of in old.fields:
            nf = new.get(of.name, case_insensitive=True)
            if nf is None:
                if not allow_drop:
                    raise SchemaError(
                        f"replacing the schema would drop column '{p}{of.name}' which existing data "
                        f"files hold; drop columns with column mapping (drop_column)")
                continue
            if of.nullable and not nf.nullable:
                raise SchemaError(f"column '{p}{of.name}' cannot become NOT NULL: existing rows may hold nulls")
            _check_replace(of.type, nf.type, f"{p}{of.name}", allow_drop)
        for nf in new.fields:
            if old.get(nf.name, case_insensitive=True) is None and not nf.nullable:
                raise SchemaError(f"new column '{p}{nf.name}' must be nullable: existing rows have no value for it")
        return
    if isinstance(old, ArrayType) and isinstance(new, ArrayType):
        _check_replace(old.element_type, new.element_type, f"{path}.element", allow_drop)
        return
    if isinstance(old, MapType) and isinstance(new, MapType):
        _check_replace(old.key_type, new.key_type, f"{path}.key", allow_drop)
        _check_replace(old.value_type, new.value_type, f"{path}.value", allow_drop)
        return
    if old != new:
        raise SchemaError(
            f"cannot change the type of column '{path}' from {old.simple_string()} to "
            f"{new.simple_string()}: existing data files would not read back")


def _check_constraints_against(conf: dict[str, str], schema: StructType) -> None:
    for cname, expr in constraints_of(conf).items():
        check_expression_columns(expr, schema, f"CHECK constraint '{cname}'")


def update_schema(log: DeltaLog | str, new_schema: StructType | pa.Schema | str, merge: bool = True,
                  storage_options: dict | None = None) -> Snapshot:
    """Evolve the schema. merge=True: `merge_schemas(current, new_schema)` (new columns appended,
    compatible types kept; incompatible ones are a SchemaError). merge=False: replace it with
    `new_schema` (overwriteSchema-style), provided existing data stays readable (see
    `_check_replace`). Under column mapping new fields get ids and physical names, same-named
    fields keep theirs, and maxColumnId only grows."""
    log = _log(log, storage_options)
    snap = log.snapshot()
    new_schema = _as_schema(new_schema)
    _check_schema(new_schema)
    current = snap.schema
    mode = column_mapping.mode(snap.configuration)
    if merge:
        result = merge_schemas(current, new_schema)
        operation = "UPDATE SCHEMA"
    else:
        result = new_schema
        if mode != "none":
            carried = _carry_mapping(current, new_schema)
            assert isinstance(carried, StructType)
            result = carried
        if snap.num_files:
            _check_replace(current, result, "", allow_drop=mode != "none")
        operation = "REPLACE COLUMNS"
    for pc in snap.partition_columns:
        if pc not in result.names:
            raise SchemaError(f"the new schema lacks partition column '{pc}'")
    _check_constraints_against(snap.configuration, result)
    if result == current:
        return snap
    md = dataclasses.replace(snap.metadata, schema_string=result.to_json())
    return _commit_metadata(log, snap, operation,
                            {"oldSchema": current.to_json_obj(), "newSchema": result.to_json_obj()}, md)


def _place(fields: list[StructField], field: StructField, position: tuple | None) -> None:
    """Insert `field` into `fields` at `position`: None (the end), ("first",), ("after", name)."""
    if position is None:
        fields.append(field)
    elif position[0] == "first":
        fields.insert(0, field)
    else:
        names = [f.name.lower() for f in fields]
        if position[1].lower() not in names:
            raise SchemaError(f"AFTER {position[1]}: the table has no column '{position[1]}' (columns: "
                              f"{[f.name for f in fields]})")
        fields.insert(names.index(position[1].lower()) + 1, field)


def _position_text(position: tuple | None) -> str | None:
    if position is None:
        return None
    return "FIRST" if position[0] == "first" else f"AFTER {position[1]}"


def _in_struct(schema: StructType, path: tuple[str, ...], change: Callable[[list[StructField]], list[StructField]],
               what: str) -> StructType:
    """`schema` with the fields of the struct at `path` (() for the top level) replaced by
    `change(fields)`; SchemaError when `path` is not a struct column (Delta adds and changes
    nested fields of structs only, not of arrays or maps)."""
    if not path:
        return StructType(change(list(schema.fields)))
    fields = list(schema.fields)
    idx = next((i for i, f in enumerate(fields) if f.name.lower() == path[0].lower()), None)
    if idx is None:
        raise SchemaError(f"{what}: there is no column '{path[0]}' (columns: {schema.names})")
    f = fields[idx]
    if not isinstance(f.type, StructType):
        raise SchemaError(f"{what}: '{f.name}' is a {f.type.simple_string()}, not a struct (nested fields are "
                          f"supported inside structs only)")
    fields[idx] = dataclasses.replace(f, type=_in_struct(f.type, path[1:], change, what))
    return StructType(fields)


def add_columns(log: DeltaLog | str, columns: Iterable[StructField], positions: Iterable[tuple | None] | None = None,
                storage_options: dict | None = None, parents: Iterable[tuple[str, ...]] | None = None) -> Snapshot:
    """ALTER TABLE ADD COLUMNS: columns, nullable (existing rows have no value for them), each at
    the end or at its position (("first",) / ("after", name)) of the table — or, with
    `parents[i]` a path of struct columns (("colB",)), of that struct; names already there are a
    SchemaError. One commit, operation ADD COLUMNS (delta-spark's parameters)."""
    log = _log(log, storage_options)
    snap = log.snapshot()
    columns = list(columns)
    positions = list(positions) if positions is not None else [None] * len(columns)
    parent_paths = list(parents) if parents is not None else [()] * len(columns)
    new = snap.schema
    params = []
    for col, pos, parent in zip(columns, positions, parent_paths):
        full = ".".join((*parent, col.name))
        if not col.nullable:
            raise SchemaError(f"column '{full}' cannot be added as NOT NULL: the existing rows have no value "
                              f"for it (add it nullable)")

        def place(fields: list[StructField], col=col, pos=pos, full=full) -> list[StructField]:
            if any(f.name.lower() == col.name.lower() for f in fields):
                raise SchemaError(f"the table already has a column '{full}'")
            _place(fields, col, pos)
            return fields

        new = _in_struct(new, tuple(parent), place, f"ADD COLUMNS {full}")
        entry: dict[str, Any] = {"column": dataclasses.replace(col, name=full).to_json_obj()}
        if pos is not None:
            entry["position"] = _position_text(pos)
        params.append(entry)
    _check_schema(new)
    if column_mapping.mode(snap.configuration) != "none":
        new, conf = column_mapping.assign_ids_for_table(new, dict(snap.configuration))
    else:
        conf = snap.configuration
    md = dataclasses.replace(snap.metadata, schema_string=new.to_json(), configuration=conf)
    return _commit_metadata(log, snap, "ADD COLUMNS", {"columns": params}, md)


def alter_column(log: DeltaLog | str, column: str, *, data_type: DataType | None = None,
                 nullable: bool | None = None, comment: Any = ..., position: tuple | None = None,
                 check_no_nulls: Callable[[str], int] | None = None,
                 storage_options: dict | None = None) -> Snapshot:
    """ALTER TABLE ALTER / CHANGE COLUMN of a column — top-level, or a struct's field by its
    dotted path (`colB.field2`): `data_type` a widening the spec allows ("Type Widening"; the table
    needs delta.enableTypeWidening, and the change is recorded in delta.typeChanges), `nullable`
    (False: SET NOT NULL — `check_no_nulls(column)` counts the existing nulls, any is a
    ConstraintViolationError), `comment` (None removes it), `position` (among its siblings). One
    commit, operation CHANGE COLUMN."""
    log = _log(log, storage_options)
    snap = log.snapshot()
    path = tuple(column.split("."))
    found: dict[str, StructField] = {}

    def change(fields: list[StructField]) -> list[StructField]:
        idx = next((i for i, f in enumerate(fields) if f.name.lower() == path[-1].lower()), None)
        if idx is None:
            raise SchemaError(f"the table has no column '{column}' (columns: {[f.name for f in fields]})")
        old = fields.pop(idx)
        new = old
        full = ".".join((*path[:-1], old.name))
        if data_type is not None and data_type != old.type:
            if not is_type_widening(old.type, data_type):
                raise InvalidTableOperationError(
                    f"[DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP] ALTER TABLE ALTER COLUMN is not supported for "
                    f"changing column {full} from {old.type.simple_string()} to {data_type.simple_string()}")
            if not bool_property(snap.configuration, "delta.enableTypeWidening"):
                raise InvalidTableOperationError(
                    f"changing the type of column {full} from {old.type.simple_string()} to "
                    f"{data_type.simple_string()} needs type widening: set delta.enableTypeWidening = true first")
            new = dataclasses.replace(new, type=data_type)
        if nullable is not None and nullable != old.nullable:
            if not nullable:
                if check_no_nulls is not None:
                    n = int(check_no_nulls(full) or 0)
                    if n:
                        raise ConstraintViolationError(
                            f"{n} rows in {log.table_root} violate the new NOT NULL constraint on {full}; "
                            f"nothing was committed", error_class="DELTA_NEW_NOT_NULL_VIOLATION")
                elif snap.num_files:
                    raise InvalidTableOperationError(f"SET NOT NULL on column {full} needs the existing rows checked")
            new = dataclasses.replace(new, nullable=nullable)
        if comment is not ...:
            md_ = dict(new.metadata)
            if comment is None:
                md_.pop("comment", None)
            else:
                md_["comment"] = comment
            new = new.with_metadata(md_)
        _place(fields, new, position if position is not None else
               ("after", fields[idx - 1].name) if idx else ("first",))
        found["old"], found["new"] = old, new
        return fields

    schema = _in_struct(snap.schema, path[:-1], change, f"ALTER COLUMN {column}")
    old, new = found["old"], found["new"]
    if new.type != old.type:
        schema = record_type_changes(snap.schema, schema)
    if schema == snap.schema:
        return snap
    _check_constraints_against(snap.configuration, schema)
    params: dict[str, Any] = {"column": dataclasses.replace(new, name=".".join((*path[:-1], new.name))).to_json_obj()}
    if position is not None:
        params["position"] = _position_text(position)
    md = dataclasses.replace(snap.metadata, schema_string=schema.to_json())
    return _commit_metadata(log, snap, "CHANGE COLUMN", params, md)


def _require_mapping(snap: Snapshot, what: str) -> None:
    mode = snap.column_mapping_mode
    if mode == "none":   # delta-spark refuses only NoMapping (RENAME: DELTA_UNSUPPORTED_RENAME_COLUMN, DROP)
        raise InvalidTableOperationError(
            f"{what} needs column mapping (mode 'name' or 'id'; the table's is '{mode}'); enable it first: "
            f"set_properties(..., {{'delta.columnMapping.mode': 'name'}})")


def rename_column(log: DeltaLog | str, column: str, new_name: str, storage_options: dict | None = None) -> Snapshot:
    """Rename a column (dotted path for nested fields) without rewriting data (column mapping
    mode 'name' or 'id'; without column mapping an InvalidTableOperationError)."""
    log = _log(log, storage_options)
    snap = log.snapshot()
    _require_mapping(snap, "renaming a column")
    top = column.split(".")[0]
    for cname, expr in constraints_of(snap.configuration).items():
        if _references(expr, top):
            raise InvalidTableOperationError(
                f"cannot rename column '{column}': CHECK constraint '{cname}' ({expr}) uses it")
    schema = column_mapping.rename_column(snap.schema, column, new_name)
    pcols = list(snap.partition_columns)
    if "." not in column:
        pcols = [new_name if p.lower() == column.lower() else p for p in pcols]
    md = dataclasses.replace(snap.metadata, schema_string=schema.to_json(), partition_columns=tuple(pcols))
    return _commit_metadata(log, snap, "RENAME COLUMN",
                            {"oldColumnPath": column, "newColumnPath": new_name}, md)


def drop_column(log: DeltaLog | str, column: str, storage_options: dict | None = None) -> Snapshot:
    """Drop a column (dotted path for nested fields) without rewriting data (column mapping mode
    'name' or 'id'). Partition columns and columns used by CHECK constraints cannot be dropped."""
    log = _log(log, storage_options)
    snap = log.snapshot()
    _require_mapping(snap, "dropping a column")
    top = column.split(".")[0]
    if "." not in column and any(p.lower() == column.lower() for p in snap.partition_columns):
        raise InvalidTableOperationError(f"cannot drop partition column '{column}'")
    for cname, expr in constraints_of(snap.configuration).items():
        if _references(expr, top):
            raise InvalidTableOperationError(
                f"cannot drop column '{column}': CHECK constraint '{cname}' ({expr}) uses it")
    schema = column_mapping.drop_column(snap.schema, column)
    md = dataclasses.replace(snap.metadata, schema_string=schema.to_json())
    return _commit_metadata(log, snap, "DROP COLUMNS", {"columns": [column]}, md)


def set_identity_high_water_mark(log: DeltaLog | str, column: str, value: int,
                                 storage_options: dict | None = None) -> Snapshot:
    """Advance identity column `column`'s `delta.identity.highWaterMark` to `value` (only forward
    along the column's step; otherwise nothing is committed)."""
    log = _log(log, storage_options)
    snap = log.snapshot()
    if advance_identity_high_water_mark(snap.schema, column, value) is None:
        return snap
    txn = Transaction(log, "SYNC IDENTITY", {"column": column, "highWaterMark": value}, snapshot=snap)
    txn.update_identity_high_water_mark(column, value)
    version = txn.commit()
    return log.snapshot(version=version)
