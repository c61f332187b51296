"""`write_table`: write Arrow data into a Delta table, Spark-free (the tahoe counterpart of
delta-rs's `write_deltalake` and of delta-spark's `df.write.format("delta").save(path)`).

Owns the WRITE operation end to end: creating the table when absent (with the data, in one
commit), the save modes (append / overwrite / error / ignore), replaceWhere (`predicate`, on
partition columns), schema enforcement and evolution (`schema_mode` merge / overwrite), casting
the data to the table's types, the row checks (NOT NULL, CHECK constraints, invariants, generated
and identity columns — `tahoe.write.constraints`), idempotent writes (application transaction
ids), writing the files (`tahoe.write.files`) and the single commit (`tahoe.txn.Transaction`).

Invariants of a call:
  1. everything that can be refused (arguments, schema, constraints, replaceWhere rows,
     append-only tables) is checked before any file is written;
  2. all changes land in one commit, or none (files written for a commit that then fails are
     deleted, best effort);
  3. a (txn_app_id, txn_version) the table already recorded writes nothing and returns the
     current version.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import (
    ConstraintViolationError, InvalidTableOperationError, MetadataChangedException,
    ProtocolChangedException, SchemaError, TableNotFoundError, UnsupportedFeatureError,
)
from ..log.delta_log import DeltaLog
from ..log.snapshot import Snapshot, add_files_from_table
from ..protocol import column_mapping
from ..protocol.actions import AddFile, Metadata
from ..protocol.partition_values import parse_partition_value, partition_values_to_arrow
from ..protocol.schema import (
    StructType, check_write_compatible, from_arrow_schema, merge_schemas, to_arrow_type,
)
from ..protocol.table_features import is_feature_supported
from ..txn.properties import (
    IDENTITY_ALLOW_EXPLICIT_INSERT, IDENTITY_HIGH_WATER_MARK, IDENTITY_START, IDENTITY_STEP, is_true,
)
from ..storage import resolve_data_path
from .constraints import (
    GENERATION_EXPRESSION_KEY, check_constraints, column_references, evaluate, parse_sql, table_resolver,
)
from .files import DEFAULT_TARGET_FILE_ROWS, conform_to_schema, to_arrow_table, write_data_files

if TYPE_CHECKING:  # pragma: no cover
    from ..txn import Transaction

__all__ = ["write_table"]

_log = logging.getLogger(__name__)

WRITE_MODES = ("append", "overwrite", "error", "ignore")
_SCHEMA_MODES = (None, "merge", "overwrite")
OPERATION_MODE = {"append": "Append", "overwrite": "Overwrite", "error": "ErrorIfExists", "ignore": "Ignore"}


def resolve_partition_columns(schema: StructType, partition_by: Iterable[str]) -> list[str]:
    """The partition columns as the schema spells them (matched case-insensitively)."""
    out = []
    for c in partition_by:
        f = schema.get(c, case_insensitive=True)
        if f is None:
            raise SchemaError(f"partition column '{c}' is not in the data's columns {schema.names}")
        out.append(f.name)
    return out


# --- generated and identity columns ------------------------------------------------------------

def _fill_special_columns(data: pa.Table, incoming: StructType, schema: StructType,
                          conf: dict) -> tuple[pa.Table, dict[str, int]]:
    """Compute generated columns the data omits and check the ones it has; generate identity
    values the data omits. Returns the data and the identity high-water marks to record."""
    given = {f.name.lower() for f in incoming.fields}
    hwm_updates: dict[str, int] = {}
    n = data.num_rows
    for f in schema.fields:
        md = f.metadata
        if IDENTITY_START in md or IDENTITY_STEP in md:
            if f.name.lower() in given:
                if str(md.get(IDENTITY_ALLOW_EXPLICIT_INSERT, "")).lower() != "true":
                    raise ConstraintViolationError(
                        f"column '{f.name}' is an identity column (GENERATED ALWAYS AS IDENTITY): "
                        f"its values cannot be written explicitly")
                continue
            if n == 0:
                continue
            start = int(md.get(IDENTITY_START, 1))
            step = int(md.get(IDENTITY_STEP, 1))
            hwm = md.get(IDENTITY_HIGH_WATER_MARK)
            first = start if hwm is None else int(hwm) + step
            values = first + step * np.arange(n, dtype=np.int64)
            i = data.schema.get_field_index(f.name)
            data = data.set_column(i, data.schema.field(i), pa.chunked_array([pa.array(values).cast(to_arrow_type(f.type))]))
            hwm_updates[f.name] = int(values[-1])
    resolve = table_resolver(data)
    for f in schema.fields:
        expr = f.metadata.get(GENERATION_EXPRESSION_KEY)
        if not expr:
            continue
        target = to_arrow_type(f.type)
        try:
            computed = evaluate(expr, resolve, n)
            computed = computed.cast(target) if computed.type != target else computed
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise UnsupportedFeatureError(f"cannot compute generated column '{f.name}' ({expr}) in Arrow: {e}") from None
        i = data.schema.get_field_index(f.name)
        if f.name.lower() not in given:
            data = data.set_column(i, data.schema.field(i), pa.chunked_array([computed]))
            resolve = table_resolver(data)
            continue
        actual = data.column(i).combine_chunks()
        same = pc.or_(pc.fill_null(pc.equal(actual, computed), False),
                      pc.and_(pc.is_null(actual), pc.is_null(computed)))
        if not pc.all(same).as_py():
            row = int(pc.index(same, False).as_py())
            raise ConstraintViolationError(
                f"CHECK constraint Generated Column ({f.name} <=> {expr}) violated by row with values:\n"
                f" - {f.name} : {actual[row].as_py()}\n - {expr} : {computed[row].as_py()}")
    return data, hwm_updates


# --- replaceWhere ------------------------------------------------------------------------------

def _typed_partitions(files: pa.Table, schema: StructType, partition_columns: list[str], mode: str) -> pa.Table:
    """The typed partition values of `files` (Arrow: logical names)."""
    cols = partition_values_to_arrow(files.column("partitionValues"), [schema.field(n) for n in partition_columns], mode)
    return pa.table(cols) if cols else pa.table({"_": pa.nulls(files.num_rows)}).drop(["_"])


def parse_replace_where(predicate: str, schema: StructType, partition_columns: list[str]):
    node = parse_sql(predicate)
    lower = {c.lower() for c in partition_columns}
    for parts in column_references(node):
        if len(parts) != 1 or parts[0].lower() not in lower:
            raise UnsupportedFeatureError(
                f"replaceWhere predicate {predicate!r} refers to '{'.'.join(parts)}', which is not a "
                f"partition column ({partition_columns}); only predicates on partition columns are supported")
    return node


# --- the operation -----------------------------------------------------------------------------

def _write_once(uri: str, data: Any, mode: str = "append", partition_by: str | Iterable[str] | None = None,
                schema_mode: str | None = None, predicate: str | None = None,
                properties: dict[str, Any] | None = None, name: str | None = None,
                description: str | None = None, txn_app_id: str | None = None, txn_version: int | None = None,
                user_metadata: str | None = None, storage_options: dict | None = None,
                target_file_rows: int = DEFAULT_TARGET_FILE_ROWS) -> int:
    """One attempt of `write_table` (see there)."""
    if mode not in WRITE_MODES:
        raise ValueError(f"mode must be one of {WRITE_MODES}, got {mode!r}")
    if schema_mode not in _SCHEMA_MODES:
        raise ValueError(f"schema_mode must be one of {_SCHEMA_MODES}, got {schema_mode!r}")
    if schema_mode == "overwrite" and mode != "overwrite":
        raise InvalidTableOperationError("schema_mode='overwrite' needs mode='overwrite'")
    if predicate is not None and mode != "overwrite":
        raise InvalidTableOperationError("a predicate (replaceWhere) needs mode='overwrite'")
    if (txn_app_id is None) != (txn_version is None):
        raise ValueError("give both txn_app_id and txn_version, or neither")
    if isinstance(partition_by, str):
        partition_by = [partition_by]
    partition_by = list(partition_by) if partition_by is not None else None

    from ..txn import Transaction
    from ..txn.properties import normalize_properties

    table = to_arrow_table(data)
    incoming = from_arrow_schema(table.schema)
    log = DeltaLog.for_table(uri, storage_options)
    try:
        snap: Snapshot | None = log.snapshot()
    except TableNotFoundError:
        snap = None

    if snap is not None and txn_app_id is not None:
        done = snap.txn_version(txn_app_id)
        if done is not None and done >= int(txn_version):  # type: ignore[arg-type]
            return snap.version

    new_metadata: Metadata | None = None
    if snap is None:
        # --- create the table with the data (CREATE TABLE AS SELECT) -------------------------
        conf = normalize_properties(properties)
        pcols = resolve_partition_columns(incoming, partition_by or [])
        schema, conf = column_mapping.assign_ids_for_table(incoming, conf)
        new_metadata = Metadata(id=str(uuid.uuid4()), schema_string=schema.to_json(),
                                partition_columns=tuple(pcols), configuration=conf, name=name,
                                description=description, created_time=int(time.time() * 1000))
        operation = "CREATE TABLE AS SELECT"
        params: dict[str, Any] = {"isManaged": "false", "description": description,
                                  "partitionBy": pcols, "properties": conf}
        read_conf = conf
    else:
        if mode == "error":
            raise InvalidTableOperationError(
                f"a Delta table already exists at {log.table_root} (version {snap.version}); "
                f"use mode='append', 'overwrite' or 'ignore'")
        if mode == "ignore":
            return snap.version
        read_conf = snap.configuration
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
            new_schema, conf = column_mapping.assign_ids_for_table(StructType(kept), dict(read_conf))
            new_metadata = dataclasses.replace(snap.metadata, schema_string=new_schema.to_json(),
                                               partition_columns=tuple(pcols), configuration=conf)
            schema = new_schema
        else:
            if partition_by is not None and [c.lower() for c in partition_by] != [c.lower() for c in pcols]:
                raise InvalidTableOperationError(
                    f"partition_by {partition_by} does not match the table's partition columns {pcols} "
                    f"(changing the partitioning needs mode='overwrite' and schema_mode='overwrite')")
            if schema_mode == "merge":
                widening = is_feature_supported(snap.protocol, "typeWidening") and \
                    is_true(read_conf, "delta.enableTypeWidening")
                merged = merge_schemas(schema, incoming, allow_type_widening=widening)
                if merged != schema:
                    merged, conf = column_mapping.assign_ids_for_table(merged, dict(read_conf))
                    new_metadata = dataclasses.replace(snap.metadata, schema_string=merged.to_json(),
                                                       configuration=conf)
                    schema = merged
            else:
                try:
                    check_write_compatible(schema, incoming)
                except SchemaError as e:
                    raise SchemaError(f"{e}. To change the table's schema use schema_mode='merge' "
                                      f"(or 'overwrite' with mode='overwrite')") from None
        if mode == "overwrite" and is_true(read_conf, "delta.appendOnly"):
            raise InvalidTableOperationError(
                f"table {log.table_root} is append-only (delta.appendOnly=true): an overwrite would "
                f"remove data")
        operation = "WRITE"
        params = {"mode": OPERATION_MODE[mode], "partitionBy": pcols}
        if predicate is not None:
            params["predicate"] = [predicate]
    conf_now = new_metadata.configuration if new_metadata is not None else read_conf
    cm_mode = column_mapping.mode(conf_now)

    # --- the rows: cast, fill generated/identity columns, check -------------------------------
    rows = conform_to_schema(table, schema)
    rows, identity_hwm = _fill_special_columns(rows, incoming, schema, conf_now)
    check_constraints(rows, schema, conf_now)

    removes: list[AddFile] = []
    replace_node = None
    if snap is not None and mode == "overwrite":
        if predicate is not None:
            replace_node = parse_replace_where(predicate, snap.schema, list(snap.partition_columns))
            ok = evaluate(replace_node, table_resolver(rows), rows.num_rows)
            bad = pc.invert(pc.fill_null(ok.cast(pa.bool_()), False)) if rows.num_rows else None
            if bad is not None and pc.any(bad).as_py():
                row = int(pc.index(bad, True).as_py())
                raise ConstraintViolationError(
                    f"data written with replaceWhere does not match the predicate {predicate!r}: row "
                    f"{rows.slice(row, 1).to_pylist()[0]}")
        removes = files_to_replace(snap, replace_node)

    # --- write files, then commit once ---------------------------------------------------------
    # refuses a protocol we cannot write; blind appends never conflict, so retrying long is safe
    txn = Transaction(log, operation, params, snapshot=snap)
    if snap is None and txn.read_snapshot is not None:
        raise _CreatedConcurrently()   # given no snapshot, the Transaction read the table just created
    if new_metadata is not None:
        txn.update_metadata(new_metadata)
    if snap is not None and mode == "overwrite":
        stage_overwrite(txn, snap, replace_node, removes)
    for col, value in identity_hwm.items():
        txn.update_identity_high_water_mark(col, value)
    if txn_app_id is not None:
        txn.set_txn(txn_app_id, int(txn_version))  # type: ignore[arg-type]
    tight = True if (is_true(conf_now, "delta.enableDeletionVectors") or
                     (snap is not None and is_feature_supported(snap.protocol, "deletionVectors"))) else None
    store = log.store
    adds = write_data_files(store, log.table_root, rows, schema, pcols, cm_mode, conf_now,
                            target_file_rows, tight_bounds=tight)
    try:
        txn.add_files(adds)
        metrics = {
            "numFiles": len(adds),
            "numOutputRows": rows.num_rows,
            "numOutputBytes": sum(a.size for a in adds),
        }
        if removes:
            metrics["numRemovedFiles"] = len(removes)
            metrics["numRemovedBytes"] = sum(r.size for r in removes)
        try:
            return txn.commit(operation_metrics=metrics, user_metadata=user_metadata)
        except (ProtocolChangedException, MetadataChangedException) as e:
            if snap is None:   # another writer created the table first
                raise _CreatedConcurrently() from e
            raise
    except BaseException:
        for a in adds:   # nothing committed: the new files are garbage
            try:
                store.filesystem.delete_file(store.to_fs_path(resolve_data_path(log.table_root, a.path)))
            except Exception:  # noqa: BLE001 - best effort; VACUUM removes what is left
                _log.debug("could not delete %s after a failed commit", a.path)
        raise


class _CreatedConcurrently(Exception):
    """Internal: the table this call was creating was created by another writer meanwhile."""


def write_table(uri: str, data: Any, mode: str = "append", partition_by: str | Iterable[str] | None = None,
                schema_mode: str | None = None, predicate: str | None = None,
                properties: dict[str, Any] | None = None, name: str | None = None,
                description: str | None = None, txn_app_id: str | None = None, txn_version: int | None = None,
                user_metadata: str | None = None, storage_options: dict | None = None,
                target_file_rows: int = DEFAULT_TARGET_FILE_ROWS) -> int:
    """Write `data` (a pyarrow Table / RecordBatch(es) / RecordBatchReader / pandas DataFrame) to
    the Delta table at `uri`; returns the table version after the write.

    mode: "append"; "overwrite" (every current file removed — or, with `predicate`, the files of
    the partitions matching it: replaceWhere, where every new row must match it); "error" (refuse
    an existing table); "ignore" (leave an existing table alone). A missing table is created with
    the data's schema, `partition_by`, `properties`, `name` and `description`.

    schema_mode: None — the data must fit the table's schema (SchemaError naming the columns
    otherwise; narrower types are cast); "merge" — new columns are added (mergeSchema);
    "overwrite" — with mode="overwrite", the table takes the data's schema and partitioning.

    txn_app_id / txn_version: an idempotent write; when the table already recorded this version
    (or a later one) for the app id, nothing is written and the current version is returned."""
    kwargs = dict(mode=mode, partition_by=partition_by, schema_mode=schema_mode, predicate=predicate,
                  properties=properties, name=name, description=description, txn_app_id=txn_app_id,
                  txn_version=txn_version, user_metadata=user_metadata, storage_options=storage_options,
                  target_file_rows=target_file_rows)
    if not isinstance(data, (pa.Table, pa.RecordBatch)):
        data = to_arrow_table(data)   # a stream can be read only once; a retry needs the rows
    try:
        return _write_once(uri, data, **kwargs)
    except _CreatedConcurrently:
        # Another writer created the table between our read and our commit: this write now
        # applies to that table (its schema is checked like any append/overwrite).
        if mode == "error":
            raise InvalidTableOperationError(
                f"a Delta table was created at {uri} by another writer while this write was creating it") from None
        return _write_once(uri, data, **kwargs)


def files_to_replace(snap: Snapshot, replace_node=None) -> list[AddFile]:
    """The active files an overwrite removes: all of them, or (replaceWhere) those whose partition
    values satisfy the parsed predicate. Shared by every writer (Arrow and Spark)."""
    files = snap.files_table(["path", "partitionValues", "size", "modificationTime", "stats", "tags",
                              "deletionVector", "baseRowId", "defaultRowCommitVersion"])
    if replace_node is not None and files.num_rows:
        typed = _typed_partitions(files, snap.schema, list(snap.partition_columns), snap.column_mapping_mode)
        hit = evaluate(replace_node, table_resolver(typed), files.num_rows)
        files = files.filter(pc.fill_null(hit.cast(pa.bool_()), False))
    return add_files_from_table(files)


def stage_overwrite(txn: Transaction, snap: Snapshot, replace_node, removes: list[AddFile]) -> None:
    """Record what an overwrite read (the whole table, or the replaceWhere partitions) and remove
    the files it replaces."""
    if replace_node is None:
        txn.read_whole_table()
    else:
        txn.read_predicate(_partition_predicate(replace_node, snap.schema, list(snap.partition_columns)))
    txn.read_files(removes)
    txn.remove_files(removes)


def _partition_predicate(node, schema: StructType, partition_columns: list[str]):
    """The replaceWhere predicate as the Transaction's partition filter (logical column name →
    serialized value), for conflict detection."""
    fields = {c: schema.field(c) for c in partition_columns}

    def matches(values: dict[str, str | None]) -> bool:
        lower = {k.lower(): v for k, v in values.items()}
        cols = {}
        for c, f in fields.items():
            raw = values.get(c, lower.get(c.lower()))
            cols[c] = pa.array([parse_partition_value(raw, f.type)], to_arrow_type(f.type))
        res = evaluate(node, table_resolver(pa.table(cols)), 1)
        return bool(res[0].as_py())

    return matches

