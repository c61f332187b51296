"""The write planner: every decision a write makes before any row is touched, for every writer (the Arrow
executor `tahoe.write.writer`, the Spark ones in `tahoe.spark`, and, through its parts, DML).

  1. `plan_write` reads the table once and returns a picklable `WritePlan`: save mode and idempotent
     txnAppId/txnVersion, schema enforcement and evolution (type widening as `delta.typeChanges`), what an
     overwrite replaces (replaceWhere, dynamic partition overwrite), computed columns, constraints, and
     the commitInfo (`WRITE` with delta-spark's parameters).
  2. Executors realise the plan and hand the files to `tahoe.write.commit.commit_write`.
  3. A plan on no table (`read_version` -1) commits as a new table: a table created meanwhile fails the
     write with ProtocolChangedException.
  4. `plan_rows` plans rows a DML writes; `plan_rewrite` rows an OPTIMIZE rewrites as they are."""

from __future__ import annotations

import dataclasses
import uuid
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

from ..errors import (
    APPEND_ONLY_MESSAGE, AppendOnlyViolationError, ConstraintViolationError, InvalidTableOperationError, SchemaError,
    TableNotFoundError, UnsupportedFeatureError,
)
from ..log.delta_log import DeltaLog
from ..protocol import column_mapping
from ..protocol.actions import Metadata
from ..protocol.clustering import check_clustering_columns
from ..protocol.properties import (
    COLUMN_DEFAULT, GENERATION_EXPRESSION, IDENTITY_ALLOW_EXPLICIT_INSERT, IDENTITY_HIGH_WATER_MARK,
    IDENTITY_START, IDENTITY_STEP, bool_property, normalize_properties,
)
from ..protocol.schema import (
    GeoType,
    StructField, StructType, check_write_compatible, merge_schemas, record_type_changes,
)
from ..protocol.table_features import check_writable, is_feature_supported
from ..protocol.timestamps import now_ms
from .constraints import constraint_expressions
from .replace_where import parse_replace_where, reads_data_columns

if TYPE_CHECKING:  # pragma: no cover
    from ..log.snapshot import Snapshot

__all__ = [
    "WritePlan", "plan_write", "plan_rows", "plan_rewrite", "WRITE_MODES", "SCHEMA_MODES", "OPERATION_MODE", "resolve_partition_columns",
    "use_dynamic_overwrite", "write_parameters", "tight_bounds", "computed_columns", "with_computed_columns",
    "identity_generation", "identity_range", "identity_values", "identity_overflow_message",
    "record_type_changes", "identity_mark", "merge_identity_marks",
]

WRITE_MODES = ("append", "overwrite", "error", "ignore")
SCHEMA_MODES = (None, "merge", "overwrite")
OPERATION_MODE = {"append": "Append", "overwrite": "Overwrite", "error": "ErrorIfExists", "ignore": "Ignore"}
PARTITION_OVERWRITE_MODES = ("static", "dynamic")

# How each API spells: mergeSchema, overwriteSchema, replaceWhere, the modes that accept an
# existing table, partitioning — for error messages that name what the user typed.
API_SPELLING = {
    "write_table": ("schema_mode='merge'", "schema_mode='overwrite'", "predicate (replaceWhere)",
                    "mode='append', 'overwrite' or 'ignore'", "partition_by"),
    "write_delta": ("merge_schema=True", "overwrite_schema=True", "replace_where",
                    "mode='append', 'overwrite' or 'ignore'", "partition_by"),
    "datasource": (".option('mergeSchema', 'true')", ".option('overwriteSchema', 'true')",
                   "option replaceWhere", "mode('append'), mode('overwrite') or mode('ignore')",
                   "option partitionBy"),
}


# --- the plan --------------------------------------------------------------------------------------

@dataclasses.dataclass
class WritePlan:
    """The decisions of one write (picklable: Spark ships it to its tasks and to the data
    source's commit, which runs in another Python process). Invariants: `schema`, `partition_columns` and
    `configuration` are the table's after the write; `new_metadata` is None when the write leaves the
    metadata alone; `read_version` is -1 exactly when the write creates the table; every refusal that needs
    no data has happened."""
    table_root: str
    storage_options: dict | None
    mode: str                        # append | overwrite | error | ignore
    read_version: int                # the snapshot planned on; -1: the write creates the table
    operation: str                   # commitInfo operation
    parameters: dict                 # commitInfo operationParameters
    schema_json: str                 # the table's schema after the write
    partition_columns: list          # ... its partition columns
    configuration: dict              # ... its configuration
    new_metadata: Metadata | None    # the metaData action to commit; None: unchanged
    incoming_json: str               # the data's schema: which columns the data gives
    replace_where: str | None = None
    check_replace_where: bool = True  # the written rows must satisfy replace_where (delta-spark's constraintCheck)
    replace_rows: bool = False       # replace_where reads data columns: the rows matching it are replaced
    time_zone: str | None = None     # where zone-less timestamps of replace_where are wall-clock time (None: UTC)
    # timestamp partition values written zone-less, as wall-clock time in `time_zone` (delta-spark's
    # write.utcTimestampPartitionValues=false); False: UTC instants with a Z (its default)
    local_timestamp_partitions: bool = False
    dynamic: bool = False            # dynamic partition overwrite
    tight_bounds: bool | None = None  # `tightBounds` for the new files' stats
    identity: dict = dataclasses.field(default_factory=dict)   # column → (first, step) generated here
    generated: list = dataclasses.field(default_factory=list)  # (column, SQL, given by the data)
    defaults: dict = dataclasses.field(default_factory=dict)   # omitted column → CURRENT_DEFAULT SQL
    constraints: list = dataclasses.field(default_factory=list)  # (description, SQL) every row satisfies
    user_metadata: str | None = None
    txn_app_id: str | None = None
    txn_version: int | None = None
    skip: bool = False               # write nothing, commit nothing (mode ignore on an existing
                                     # table, or txnAppId/txnVersion already recorded)
    replaces_table: bool = False     # REPLACE TABLE AS SELECT: a new definition of the table
    clustering: list | None = None   # the clustering columns a new (or replaced) table gets
    mapping_off: bool = False        # delta.columnMapping.mode set on a table whose protocol lacks the
                                     # feature: ignored (`column_mapping.effective_mode`)

    @property
    def schema(self) -> StructType:
        return StructType.from_json(self.schema_json)

    @property
    def incoming(self) -> StructType:
        return StructType.from_json(self.incoming_json)

    @property
    def column_mapping_mode(self) -> str:
        return "none" if self.mapping_off else column_mapping.mode(self.configuration)

    @property
    def creates_table(self) -> bool:
        return self.read_version < 0

    @property
    def computed(self) -> list[str]:
        """Columns the data omits that the writer fills (identity, generated, defaults)."""
        given = {f.name.lower() for f in self.incoming.fields}
        out = list(self.identity) + list(self.defaults)
        out += [name for name, _, is_given in self.generated if not is_given]
        return [c for c in out if c.lower() not in given]


# --- partition columns, modes, commitInfo -----------------------------------------------------------

def resolve_partition_columns(schema: StructType, partition_by: Iterable[str]) -> list[str]:
    """The partition columns as the schema spells them (matched case-insensitively)."""
    out = []
    for c in partition_by:
        f = schema.get(c, case_insensitive=True)
        if f is None:
            raise SchemaError(f"partition column '{c}' is not in the data's columns {schema.names}")
        if isinstance(f.type, GeoType):   # not orderable: delta-spark's PartitionUtils refuses them
            raise SchemaError(f"Using column {f.name} of type {f.type} as a partition column is not supported.",
                              error_class="DELTA_INVALID_PARTITION_COLUMN_TYPE")
        out.append(f.name)
    return out


def _overwrite_mode_value(value: str | None, what: str) -> str | None:
    if value is None:
        return None
    low = str(value).strip().lower()
    if low not in PARTITION_OVERWRITE_MODES:
        raise ValueError(f"invalid value {value!r} for {what}: must be 'static' or 'dynamic'")
    return low


def use_dynamic_overwrite(mode: str, partition_overwrite_mode: str | None, partition_columns: list[str],
                          predicate: str | None = None, overwrite_schema: bool = False,
                          session_mode: str | None = None) -> bool:
    """Whether an overwrite replaces only the partitions its data writes to — delta-spark's
    WriteIntoDelta rules. `partition_overwrite_mode` is the write's own setting (the
    DataFrameWriter option / keyword), `session_mode` Spark's `spark.sql.sources.
    partitionOverwriteMode`; the write's own wins. Values are 'static' or 'dynamic' (any case;
    anything else is a ValueError). Dynamic mode is ignored outside mode='overwrite' and on
    unpartitioned tables; with a replaceWhere predicate it is an error when the write itself asked
    for it, and ignored when only the session did; with overwriteSchema it is an error."""
    own = _overwrite_mode_value(partition_overwrite_mode, "partitionOverwriteMode")
    session = _overwrite_mode_value(session_mode, "spark.sql.sources.partitionOverwriteMode")
    if (own or session or "static") != "dynamic" or mode != "overwrite" or not partition_columns:
        return False
    if predicate is not None:
        if own == "dynamic":
            raise InvalidTableOperationError(
                "a replaceWhere predicate and partitionOverwriteMode='dynamic' cannot both be set "
                "for one write (they both say which data to overwrite)")
        return False
    if overwrite_schema:
        raise InvalidTableOperationError(
            "overwriteSchema cannot be used with partitionOverwriteMode='dynamic'")
    return True


def write_parameters(mode: str, partition_columns: list[str], predicate: str | None = None,
                     dynamic: bool = False, merge_schema: bool = False,
                     overwrite_schema: bool = False) -> dict[str, Any]:
    """The commitInfo operationParameters of a WRITE, as delta-spark records them: mode,
    partitionBy, the replaceWhere predicate, and `isDynamicPartitionOverwrite` /
    `canOverwriteSchema` / `canMergeSchema` only when true."""
    params: dict[str, Any] = {"mode": OPERATION_MODE[mode], "partitionBy": list(partition_columns)}
    if predicate is not None:
        params["predicate"] = [predicate]
    for key, on in (("isDynamicPartitionOverwrite", dynamic), ("canOverwriteSchema", overwrite_schema),
                    ("canMergeSchema", merge_schema)):
        if on:
            params[key] = True
    return params


def tight_bounds(conf: dict, protocol=None) -> bool | None:
    """The `tightBounds` to write into new files' stats: True on tables with deletion vectors (as
    delta-spark writes them), None (absent) elsewhere."""
    if bool_property(conf, "delta.enableDeletionVectors") or (
            protocol is not None and is_feature_supported(protocol, "deletionVectors")):
        return True
    return None


# --- identity, generated and default columns --------------------------------------------------------

_INT_RANGE = {"byte": (-(1 << 7), (1 << 7) - 1), "short": (-(1 << 15), (1 << 15) - 1),
              "integer": (-(1 << 31), (1 << 31) - 1), "long": (-(1 << 63), (1 << 63) - 1)}
_SQL_INT = {"byte": "TINYINT", "short": "SMALLINT", "integer": "INT", "long": "BIGINT"}


def is_identity(f: StructField) -> bool:
    return IDENTITY_START in f.metadata or IDENTITY_STEP in f.metadata


def identity_generation(f: StructField, given: bool) -> tuple[int, int] | None:
    """How the values of column `f` are generated by a write: `(first, step)` — value k of the
    write is `first + step * k`, `first` one step beyond the high-water mark (or the start) — or
    None when `f` is no identity column or the data gives its values (`given`), which only
    `delta.identity.allowExplicitInsert` permits (ConstraintViolationError otherwise)."""
    md = f.metadata
    if not is_identity(f):
        return None
    if given:
        if str(md.get(IDENTITY_ALLOW_EXPLICIT_INSERT, "")).lower() != "true":
            raise ConstraintViolationError(
                f"column '{f.name}' is an identity column (GENERATED ALWAYS AS IDENTITY): "
                f"its values cannot be written explicitly")
        return None
    start = int(md.get(IDENTITY_START, 1))
    step = int(md.get(IDENTITY_STEP, 1))
    if step == 0:
        raise SchemaError(f"identity column '{f.name}' has step 0")
    hwm = md.get(IDENTITY_HIGH_WATER_MARK)
    return (start if hwm is None else int(hwm) + step), step


def identity_range(f: StructField) -> tuple[int, int]:
    """The values identity column `f`'s type can hold (delta-spark allows BIGINT only; tahoe
    also generates the narrower integer types)."""
    name = getattr(f.type, "name", None)
    if name not in _INT_RANGE:
        raise SchemaError(f"identity column '{f.name}' has type {f.type.simple_string()}; "
                          f"identity columns must be integers (BIGINT)")
    return _INT_RANGE[name]


def identity_overflow_message(f: StructField) -> str:
    return (f"identity column '{f.name}' overflows {_SQL_INT.get(getattr(f.type, 'name', ''), 'its type')} "
            f"(values beyond its high-water mark do not fit)")


def identity_values(f: StructField, first: int, step: int, positions: np.ndarray) -> np.ndarray:
    """`first + step * positions` (int64) for identity column `f`; ConstraintViolationError when
    a value does not fit the column's type (checked exactly, before the int64 arithmetic)."""
    lo, hi = identity_range(f)
    if len(positions):
        ends = (first + step * int(positions.min()), first + step * int(positions.max()))
        if min(ends) < lo or max(ends) > hi:
            raise ConstraintViolationError(identity_overflow_message(f))
    return first + step * positions.astype(np.int64)


def identity_mark(f: StructField, lo: int, hi: int) -> int:
    """The high-water mark a write's values [lo, hi] of identity column `f` leave: the last value
    in the step's direction."""
    return int(hi) if int(f.metadata.get(IDENTITY_STEP, 1)) > 0 else int(lo)


def merge_identity_marks(schema: StructType, marks: Iterable[dict]) -> dict[str, int]:
    """The identity high-water marks of a write from those of its files / tasks."""
    out: dict[str, int] = {}
    for m in marks:
        for name, v in m.items():
            f = schema.field(name)
            prev = out.get(name)
            out[name] = v if prev is None else identity_mark(f, min(prev, v), max(prev, v))
    return out


def computed_columns(schema: StructType, incoming: StructType) -> list[StructField]:
    """The table's columns the data omits that the writer fills — identity, generated and
    default (`CURRENT_DEFAULT`) columns: the data may omit them even when they are NOT NULL."""
    given = {f.name.lower() for f in incoming.fields}
    return [f for f in schema.fields if f.name.lower() not in given and (
        is_identity(f) or f.metadata.get(GENERATION_EXPRESSION) or f.metadata.get(COLUMN_DEFAULT) is not None)]


def with_computed_columns(schema: StructType, incoming: StructType) -> StructType:
    """`incoming` plus the columns the writer computes (`computed_columns`), for schema checks."""
    return StructType(list(incoming.fields) + computed_columns(schema, incoming))


def _column_fills(schema: StructType, incoming: StructType) -> tuple[dict, list, dict]:
    """(identity column → (first, step), [(generated column, SQL, given)], omitted column →
    default SQL) of a write of `incoming` into `schema`."""
    given = {f.name.lower() for f in incoming.fields}
    identity: dict[str, tuple[int, int]] = {}
    generated: list[tuple[str, str, bool]] = []
    defaults: dict[str, str] = {}
    for f in schema.fields:
        is_given = f.name.lower() in given
        gen = identity_generation(f, is_given)
        if gen is not None:
            identity[f.name] = gen
            continue
        expr = f.metadata.get(GENERATION_EXPRESSION)
        if expr:
            generated.append((f.name, str(expr), is_given))
            continue
        default = f.metadata.get(COLUMN_DEFAULT)
        if default is not None and not is_given:
            defaults[f.name] = str(default)
    return identity, generated, defaults


# --- type widening ----------------------------------------------------------------------------------

def _has_type_changes(old: StructType, new: StructType) -> bool:
    return record_type_changes(old, new) != new


# --- planning -----------------------------------------------------------------------------------------

def plan_write(log: DeltaLog, incoming: StructType, *, mode: str = "append",
               partition_by: str | Iterable[str] | None = None, replace_where: str | None = None,
               schema_mode: str | None = None, partition_overwrite_mode: str | None = None,
               session_overwrite_mode: str | None = None, properties: dict | None = None,
               name: str | None = None, description: str | None = None, user_metadata: str | None = None,
               txn_app_id: str | None = None, txn_version: int | str | None = None,
               storage_options: dict | None = None, api: str = "write_table",
               replace_table: bool = False, cluster_by: Iterable[str] | None = None,
               operation: tuple[str, dict] | None = None,
               check_replace_where: bool = True,
               replace_where_data_columns: bool = True,
               time_zone: str | None = None,
               utc_timestamp_partition_values: bool = True) -> tuple[WritePlan, "Snapshot | None"]:
    """Plan a write of data with schema `incoming` into the table of `log`; returns the plan and the snapshot it was
    planned on (None: the table does not exist). `api` names the caller so errors spell options as typed.

      1. schema_mode: None (enforce the table's schema), "merge" (mergeSchema) or "overwrite" (overwriteSchema).
      2. SQL's CREATE / REPLACE TABLE AS SELECT: `replace_table` (a new definition, features kept), `cluster_by`,
         `operation` (recorded instead of WRITE).
      3. `check_replace_where=False` (replaceWhere.constraintCheck.enabled=false) writes rows outside it too.
      4. `replace_where_data_columns` (replaceWhere.dataColumns.enabled): a predicate on any column sets
         `replace_rows`, the other rows of the touched files written again in the same commit; off, only
         partition columns. With the change data feed the replaced rows are deletes, the written ones inserts.
      5. `time_zone`: where zone-less timestamps of replace_where are wall-clock time (UTC by default)."""
    how = API_SPELLING[api]
    if mode not in WRITE_MODES:
        raise ValueError(f"mode must be one of {WRITE_MODES}, got {mode!r}")
    if schema_mode not in SCHEMA_MODES:
        raise ValueError(f"schema_mode must be one of {SCHEMA_MODES}, got {schema_mode!r}")
    if schema_mode == "overwrite" and mode != "overwrite":
        raise InvalidTableOperationError(f"{how[1]} needs mode='overwrite'")
    if replace_where is not None and mode != "overwrite":
        raise InvalidTableOperationError(f"a {how[2]} needs mode='overwrite'")
    if (txn_app_id is None) != (txn_version is None):
        raise ValueError("give both txn_app_id and txn_version (txnAppId and txnVersion), or neither")
    if txn_version is not None:
        try:
            txn_version = int(txn_version)
        except (TypeError, ValueError):
            txn_version = -1
        if txn_version < 0:
            raise ValueError(f"txnVersion must be a non-negative integer, got {txn_version!r}")
    if isinstance(partition_by, str):
        partition_by = [partition_by]
    partition_by = list(partition_by) if partition_by is not None else None
    properties = normalize_properties(properties)   # validated always, applied when creating (delta-spark)

    try:
        snap = log.snapshot()
    except TableNotFoundError:
        snap = None

    base = dict(table_root=log.table_root, storage_options=_options_of(log.store, storage_options), mode=mode,
                read_version=snap.version if snap is not None else -1, incoming_json=incoming.to_json(),
                replace_where=replace_where, user_metadata=user_metadata, txn_app_id=txn_app_id,
                txn_version=txn_version, check_replace_where=check_replace_where, time_zone=time_zone,
                local_timestamp_partitions=not utc_timestamp_partition_values)
    if snap is not None:
        check_writable(snap.protocol)
        done = snap.txn_version(txn_app_id) if txn_app_id is not None else None
        if (done is not None and done >= txn_version) or mode == "ignore":
            return WritePlan(**base, operation="WRITE", parameters={}, schema_json=snap.schema.to_json(),
                             partition_columns=list(snap.partition_columns), configuration=snap.configuration,
                             new_metadata=None, skip=True), snap

    if replace_table and mode != "overwrite":
        raise InvalidTableOperationError("replacing a table's definition needs mode='overwrite'")
    new_md: Metadata | None = None
    clustering = None if cluster_by is None else ([cluster_by] if isinstance(cluster_by, str) else list(cluster_by))
    if snap is None or replace_table:
        pcols = resolve_partition_columns(incoming, partition_by or [])
        conf = dict(properties)
        if clustering:
            clustering = check_clustering_columns(incoming, clustering, pcols)
        old_max = snap.configuration.get(column_mapping.MAX_COLUMN_ID_KEY) if snap is not None else None
        if old_max is not None and (clustering or column_mapping.mode(conf) != "none"):
            conf.setdefault(column_mapping.MAX_COLUMN_ID_KEY, old_max)   # ids count on from the old table's
        schema, conf = column_mapping.assign_ids_for_table(incoming, conf)
        new_md = Metadata(id=snap.metadata.id if snap is not None else str(uuid.uuid4()),
                          schema_string=schema.to_json(), partition_columns=tuple(pcols),
                          configuration=conf, name=name, description=description,
                          created_time=now_ms())
    else:
        if clustering is not None:
            raise InvalidTableOperationError("clustering columns are given when a table is created or replaced")
        if mode == "error":
            raise InvalidTableOperationError(
                f"Cannot write to already existent path {log.table_root} without setting OVERWRITE = 'true'. "
                f"(a Delta table already exists there, version {snap.version}; use {how[3]})", error_class="DELTA_PATH_EXISTS")
        conf = snap.configuration
        schema = snap.schema
        pcols = list(snap.partition_columns)
        if schema_mode == "overwrite":
            pcols = resolve_partition_columns(incoming, partition_by if partition_by is not None else
                                              [c for c in pcols if incoming.get(c, case_insensitive=True)])
            # columns the table already has keep their column mapping metadata
            kept = []
            for f in incoming.fields:
                old = schema.get(f.name, case_insensitive=True)
                kept.append(f.with_metadata(dict(old.metadata)) if old is not None and old.type == f.type else f)
            schema, conf = column_mapping.assign_ids_for_table(StructType(kept), dict(conf))
            new_md = dataclasses.replace(snap.metadata, schema_string=schema.to_json(),
                                         partition_columns=tuple(pcols), configuration=conf)
        else:
            if partition_by is not None and [c.lower() for c in partition_by] != [c.lower() for c in pcols]:
                raise InvalidTableOperationError(
                    f"{how[4]} {partition_by} does not match the table's partition columns {pcols} "
                    f"(changing the partitioning needs mode='overwrite' and {how[1]})")
            if schema_mode == "merge":
                merged = _merge(snap, incoming)
                if merged != schema:
                    merged, conf = column_mapping.assign_ids_for_table(merged, dict(conf))
                    new_md = dataclasses.replace(snap.metadata, schema_string=merged.to_json(), configuration=conf)
                    schema = merged
            else:
                _check_compatible(schema, incoming, how, snap.metadata.id)
        if mode == "overwrite" and bool_property(conf, "delta.appendOnly"):
            raise AppendOnlyViolationError(
                f"{APPEND_ONLY_MESSAGE} (table {log.table_root}: an overwrite would remove data)",
                error_class="DELTA_CANNOT_MODIFY_APPEND_ONLY")

    dynamic = use_dynamic_overwrite(mode, partition_overwrite_mode, pcols, replace_where, schema_mode == "overwrite",
                                    session_overwrite_mode) and snap is not None and not replace_table
    replace_rows = False
    if replace_where is not None:   # refused before any file is written
        node = parse_replace_where(replace_where, schema, pcols, data_columns=replace_where_data_columns)
        replace_rows = snap is not None and reads_data_columns(node, pcols)
    identity, generated, defaults = _column_fills(schema, incoming)
    params = write_parameters(mode, pcols, replace_where, dynamic=dynamic, merge_schema=schema_mode == "merge",
                              overwrite_schema=schema_mode == "overwrite")
    op_name, op_params = operation if operation is not None else ("WRITE", params)
    return WritePlan(**base, operation=op_name, parameters=op_params, schema_json=schema.to_json(),
                     partition_columns=pcols, configuration=dict(conf), new_metadata=new_md, dynamic=dynamic,
                     tight_bounds=tight_bounds(conf, snap.protocol if snap is not None else None),
                     identity=identity, generated=generated, defaults=defaults,
                     constraints=constraint_expressions(schema, conf), replaces_table=replace_table and snap is not None,
                     replace_rows=replace_rows,
                     clustering=clustering, mapping_off=_mapping_off(snap) and new_md is None), snap


def plan_rows(snapshot: "Snapshot", incoming: StructType, operation: str, parameters: dict | None = None,
              storage_options: dict | None = None, user_metadata: str | None = None, *,
              rewrite: bool = False, schema: StructType | None = None) -> WritePlan:
    """A plan for writing rows of schema `incoming` into the existing table of `snapshot` without
    changing its partitioning — the rows an UPDATE rewrites or a MERGE inserts: the same column
    rules (identity values for columns the rows omit, defaults, generated columns, constraints)
    and file settings as a WRITE's, for the same executors (`tahoe.write.writer.write_rows`,
    `tahoe.spark.write.write_dataframe`). The operation stages its own removes and commits with
    `tahoe.write.commit.commit_new_files` on a transaction opened on `snapshot`.

    `rewrite=True`: the rows are rows of the table rewritten (copied or updated by a DML): they
    carry every column, identity values included, which are kept as they are (neither generated
    nor refused as explicit inserts); generated columns are checked (`<=>`) like given ones.
    `schema`: the table's schema after the operation when it evolves it (MERGE with schema
    evolution; the metadata change is the operation's to commit), else the snapshot's."""
    check_writable(snapshot.protocol)
    schema = schema if schema is not None else snapshot.schema
    conf = snapshot.configuration
    _check_compatible(schema, incoming, API_SPELLING["write_table"], snapshot.metadata.id)
    if rewrite:
        identity: dict = {}
        defaults: dict = {}
        generated = [(f.name, str(f.metadata[GENERATION_EXPRESSION]), True) for f in schema.fields
                     if f.metadata.get(GENERATION_EXPRESSION)]
    else:
        identity, generated, defaults = _column_fills(schema, incoming)
    return WritePlan(table_root=snapshot.table_root, storage_options=_options_of(snapshot.store, storage_options), mode="append",
                     read_version=snapshot.version, operation=operation, parameters=dict(parameters or {}),
                     schema_json=schema.to_json(), partition_columns=list(snapshot.partition_columns),
                     configuration=dict(conf), new_metadata=None, incoming_json=incoming.to_json(),
                     tight_bounds=tight_bounds(conf, snapshot.protocol), identity=identity, generated=generated,
                     defaults=defaults, constraints=constraint_expressions(schema, conf),
                     user_metadata=user_metadata, mapping_off=_mapping_off(snapshot))


def plan_rewrite(snapshot: "Snapshot", operation: str, parameters: dict | None = None,
                 storage_options: dict | None = None) -> WritePlan:
    """A plan for rewriting rows already in the table of `snapshot` as they are — OPTIMIZE,
    REORG ... APPLY (PURGE), auto compaction: the table's own schema, partitioning and file
    settings, nothing computed (identity, generated and default values are in the rows
    already) and nothing checked (the rows passed the checks when they were written). For the
    same executors as `plan_rows`; the operation stages its removes and commits with
    `tahoe.write.commit.commit_new_files`."""
    check_writable(snapshot.protocol)
    schema = snapshot.schema
    conf = snapshot.configuration
    return WritePlan(table_root=snapshot.table_root, storage_options=_options_of(snapshot.store, storage_options), mode="append",
                     read_version=snapshot.version, operation=operation, parameters=dict(parameters or {}),
                     schema_json=schema.to_json(), partition_columns=list(snapshot.partition_columns),
                     configuration=dict(conf), new_metadata=None, incoming_json=schema.to_json(),
                     tight_bounds=tight_bounds(conf, snapshot.protocol), mapping_off=_mapping_off(snapshot))


def _mapping_off(snap: "Snapshot | None") -> bool:
    """Whether `snap` sets delta.columnMapping.mode without the protocol's feature (the files carry
    the logical names: the property is ignored, spec "Column Mapping")."""
    return snap is not None and snap.column_mapping_mode == "none" and column_mapping.mode(snap.configuration) != "none"


def _merge(snap: "Snapshot", incoming: StructType) -> StructType:
    """The schema after a mergeSchema write (`merge_schemas`): with `delta.enableTypeWidening` the
    widened columns record their type changes (`delta.typeChanges`; the property brings the
    typeWidening feature into the protocol); on a table that has the typeWidening feature but not
    the property, a type change is refused (spec "Type Widening": writers must reject widening
    type changes when the property isn't true)."""
    schema = snap.schema
    widening = bool_property(snap.configuration, "delta.enableTypeWidening")
    merged = merge_schemas(schema, incoming, allow_type_widening=widening)
    if widening:
        return record_type_changes(schema, merged)
    if is_feature_supported(snap.protocol, "typeWidening") and _has_type_changes(schema, merged):
        changed = [f.name for f in merged.fields
                   if schema.get(f.name, case_insensitive=True) is not None
                   and schema.get(f.name, case_insensitive=True).type != f.type]
        raise SchemaError(f"the data would change the type of columns {changed}, but type widening is not "
                          f"enabled on this table (set delta.enableTypeWidening=true)")
    return merged


def _check_compatible(schema: StructType, incoming: StructType, how: tuple, table_id: str | None = None) -> None:
    """Schema enforcement: the data fits the table as it is (columns it omits are null or
    computed by the writer). Refusals carry delta-spark's error classes: columns the table lacks
    `_LEGACY_ERROR_TEMP_DELTA_0007` (its schema-mismatch message first), a column of another
    type `DELTA_FAILED_TO_MERGE_FIELDS`."""
    lower = {f.name.lower() for f in schema.fields}
    extra = [f.name for f in incoming.fields if f.name.lower() not in lower]
    if extra:
        raise SchemaError(f"{schema_mismatch_message(table_id)}\n\nthe data has columns {extra} that the table does "
                          f"not have (table columns: {schema.names}); write with {how[0]} (mergeSchema) to add them",
                          error_class="_LEGACY_ERROR_TEMP_DELTA_0007")
    try:
        check_write_compatible(schema, with_computed_columns(schema, incoming))
    except SchemaError as e:
        column = getattr(e, "column", None)
        if column is None:
            raise SchemaError(f"{e}. To change the table's schema use {how[0]} or (overwriting) {how[1]}") from None
        raise SchemaError(f"Failed to merge fields '{column}' and '{column}'. {e}. To change the table's schema use "
                          f"{how[0]} or (overwriting) {how[1]}", error_class="DELTA_FAILED_TO_MERGE_FIELDS") from None


def schema_mismatch_message(table_id: str | None) -> str:
    """The first lines of delta-spark's schema-mismatch error (`_LEGACY_ERROR_TEMP_DELTA_0007`)."""
    return (f"A schema mismatch detected when writing to the Delta table (Table ID: {table_id}).\n"
            "To enable schema migration using DataFrameWriter or DataStreamWriter, please set:\n"
            "'.option(\"mergeSchema\", \"true\")'.\n"
            "For other operations, set the session configuration\n"
            "spark.databricks.delta.schema.autoMerge.enabled to \"true\". See the documentation\n"
            "specific to the operation for details.")


def _options_of(store, storage_options: dict | None) -> dict | None:
    """The storage options a plan carries to whoever writes its files (a Spark task, a pool):
    the ones given, else those the table's store was made with — so that a table opened with
    options (`Table(uri, storage_options=...)`) is written back with them."""
    if storage_options is not None:
        return storage_options
    return dict(getattr(store, "options", None) or {}) or None
