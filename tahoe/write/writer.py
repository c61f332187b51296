"""The Arrow executor of writes: `write_table` (delta-rs's `write_deltalake`, Spark-free) and `prepare_rows`, the
row work of every Arrow-side writer (also the `format("delta")` source's tasks). Planned by
`tahoe.write.plan.plan_write`, committed by `tahoe.write.commit.commit_write`. Invariants of a call:

  1. everything refusable (arguments, schema, constraints, replaceWhere rows, append-only) is refused
     before any file is written;
  2. all changes land in one commit, or none; files of a commit that surely did not land are deleted;
  3. a (txn_app_id, txn_version) the table already recorded writes nothing and returns the current version."""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ConstraintViolationError, UnsupportedFeatureError
from ..log.delta_log import DeltaLog
from ..protocol.actions import AddCDCFile, AddFile
from ..protocol.properties import bool_property
from ..protocol.schema import StructType, from_arrow_schema, to_arrow_type
from .auto_compact import auto_compact_hook
from .commit import commit_write, delete_data_files
from ..expressions import Scope, evaluate, parse, matches
from .constraints import check_constraints
from .files import DEFAULT_TARGET_FILE_ROWS, conform_to_schema, to_arrow_table, write_data_files
from .plan import WritePlan, identity_values, plan_write, plan_rewrite
from .replace_where import check_replace_where, files_with_matches
from ..read.arrow_reader import ArrowFileReader

__all__ = ["write_table", "write_rows", "prepare_rows", "fill_columns", "replace_rows"]


def fill_columns(rows: pa.Table, plan: WritePlan, first_position: int = 0) -> tuple[pa.Table, dict[str, int]]:
    """`rows` (the table's logical columns, see `conform_to_schema`) with the columns the plan
    computes: identity values — row i gets position `first_position + i` in the column's sequence
    (parallel writers give each task disjoint positions) —, column defaults for omitted columns
    (spec "Default Columns"), generated columns computed when omitted and checked
    (`<=>`) when given. Returns the rows and the identity high-water marks they reach."""
    schema = plan.schema
    n = rows.num_rows
    marks: dict[str, int] = {}

    def put(name: str, values: pa.Array | pa.ChunkedArray) -> None:
        nonlocal rows
        i = rows.schema.get_field_index(name)
        arr = values if isinstance(values, pa.ChunkedArray) else pa.chunked_array([values])
        rows = rows.set_column(i, rows.schema.field(i), arr)

    for name, (first, step) in plan.identity.items():
        if n == 0:
            continue
        f = schema.field(name)
        values = identity_values(f, first, step, first_position + np.arange(n, dtype=np.int64))
        put(name, pa.array(values).cast(to_arrow_type(f.type)))
        marks[name] = int(values[-1])

    for name, sql in plan.defaults.items():
        f = schema.field(name)
        target = to_arrow_type(f.type)
        try:
            value = evaluate(parse(sql), Scope.of(rows), num_rows=n)
            value = value.cast(target) if value.type != target else value
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, UnsupportedFeatureError) as e:
            raise UnsupportedFeatureError(
                f"cannot compute the default value of column '{name}' (CURRENT_DEFAULT {sql}) in Arrow: {e}") from None
        put(name, value)

    for name, expr, given in plan.generated:
        f = schema.field(name)
        target = to_arrow_type(f.type)
        try:
            computed = evaluate(parse(expr), Scope.of(rows), num_rows=n)
            computed = computed.cast(target) if computed.type != target else computed
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise UnsupportedFeatureError(f"cannot compute generated column '{name}' ({expr}) in Arrow: {e}") from None
        if not given:
            put(name, computed)
            continue
        actual = rows.column(name).combine_chunks()
        same = pc.or_(pc.fill_null(pc.equal(actual, computed), False),
                      pc.and_(pc.is_null(actual), pc.is_null(computed)))
        if not pc.all(same).as_py():
            row = int(pc.index(same, False).as_py())
            raise ConstraintViolationError(
                f"CHECK constraint Generated Column ({name} <=> {expr}) violated by row with values:\n"
                f" - {name} : {actual[row].as_py()}\n - {expr} : {computed[row].as_py()}",
                error_class="DELTA_VIOLATE_CONSTRAINT_WITH_VALUES")
    return rows, marks


def prepare_rows(data: pa.Table, plan: WritePlan, first_position: int = 0) -> tuple[pa.Table, dict[str, int]]:
    """The rows a writer writes for `plan`: cast to the table's columns and types, computed
    columns filled (`fill_columns`), then every row check — NOT NULL, CHECK constraints,
    invariants, the replaceWhere predicate. Returns the rows and their identity high-water marks."""
    schema = plan.schema
    rows = conform_to_schema(data, schema, computed=plan.computed)
    rows, marks = fill_columns(rows, plan, first_position)
    check_constraints(rows, schema, plan.configuration)
    if plan.replace_where is not None and plan.check_replace_where:
        check_replace_where(rows, parse(plan.replace_where), plan.replace_where, plan.time_zone)
    return rows, marks


def write_table(uri: str | DeltaLog, data: Any, mode: str = "append", partition_by: str | Iterable[str] | None = None,
                schema_mode: str | None = None, predicate: str | None = None,
                properties: dict[str, Any] | None = None, name: str | None = None,
                description: str | None = None, txn_app_id: str | None = None, txn_version: int | None = None,
                user_metadata: str | None = None, storage_options: dict | None = None,
                target_file_rows: int = DEFAULT_TARGET_FILE_ROWS, partition_overwrite_mode: str | None = None) -> int:
    """Write `data` (a pyarrow Table / RecordBatch(es) / RecordBatchReader / pandas DataFrame) to the Delta table
    at `uri` (a path / URI, or a `DeltaLog`); returns the table version after the write.

      1. mode: "append"; "overwrite"; "error" (refuse an existing table); "ignore" (leave it alone).
      2. `predicate` with "overwrite" is replaceWhere: on partition columns the matching partitions' files go,
         on other columns the files that may hold a match (their other rows written again, same commit); every
         new row must match (ReplaceWhereMismatchError, DELTA_REPLACE_WHERE_MISMATCH); zone-less timestamps UTC.
      3. partition_overwrite_mode: delta-spark's 'static' (default) or 'dynamic' (`plan.use_dynamic_overwrite`).
      4. A missing table is created with the data's schema, `partition_by`, `properties`, `name`, `description`;
         one another writer creates first fails the write with ProtocolChangedException, no file left behind.
      5. schema_mode: None (the data must fit: SchemaError; narrower types cast); "merge" (mergeSchema, widening
         with `delta.enableTypeWidening`); "overwrite" (with mode="overwrite": the data's schema, partitioning).
      6. Omitted columns are null or computed (identity, generated, `CURRENT_DEFAULT`); a txn_app_id /
         txn_version already recorded writes nothing; `delta.autoOptimize.autoCompact` compacts after the
         commit, never failing the write."""
    log = uri if isinstance(uri, DeltaLog) else DeltaLog.for_table(uri, storage_options)
    table = to_arrow_table(data)
    plan, snap = plan_write(log, from_arrow_schema(table.schema), mode=mode, partition_by=partition_by,
                            replace_where=predicate, schema_mode=schema_mode,
                            partition_overwrite_mode=partition_overwrite_mode, properties=properties, name=name,
                            description=description, user_metadata=user_metadata, txn_app_id=txn_app_id,
                            txn_version=txn_version, storage_options=storage_options)
    if plan.skip:
        return plan.read_version
    adds, marks, num_rows = write_rows(log, table, plan, target_file_rows)
    replaced = None
    cdcs: list = []
    if plan.replace_rows:
        replaced, kept, cdcs = replace_rows(log, snap, plan, adds, target_file_rows)
        adds = adds + kept
    return commit_write(plan, log, snap, adds, marks, num_rows=num_rows, post_commit=[auto_compact_hook()],
                        replaced=replaced, cdc_files=cdcs)


def replace_rows(log: DeltaLog, snap: Any, plan: WritePlan, written: list[AddFile],
                 target_file_rows: int = DEFAULT_TARGET_FILE_ROWS) -> tuple[tuple[list[AddFile], int], list[AddFile], list]:
    """A replaceWhere that reads data columns (`plan.replace_rows`), the Arrow way: the files that
    may hold a row matching the predicate (partition values and stats) are read, their rows that
    do not match it (FALSE or NULL) written again. Returns ((those files, the count of their
    other rows), the files the other rows were written to, change data files) — what
    `commit_write(replaced=..., cdc_files=...)` takes. On a table with the change data feed on
    the change data is delta-spark's for such a write: every replaced row a `delete`, every row
    written (`written`, read back: identity values and defaults as stored) an `insert`; the
    rows written again are no change. On failure the files of `written` and of this step are
    deleted."""
    kept_adds: list[AddFile] = []
    cdc_adds: list[AddFile] = []
    cdf = change_data_feed_enabled(plan.configuration)
    try:
        node = parse(plan.replace_where)
        files = files_with_matches(snap, node, plan.time_zone)
        reader = ArrowFileReader(snap.store, snap.table_root, snap.schema, snap.partition_columns,
                                 snap.column_mapping_mode, time_zone=plan.time_zone)
        parts, gone = [], []
        for f in files:
            t = reader.read_file(f.path, f.partition_values, f.deletion_vector)
            if t.num_rows:
                hit = pc.fill_null(matches(node, Scope.of(t), time_zone=plan.time_zone or "UTC"), False)
                parts.append(t.filter(pc.invert(hit)))
                if cdf:
                    gone.append(t.filter(hit))
        kept = pa.concat_tables(parts) if parts else None
        if kept is not None and kept.num_rows:
            rewrite = plan_rewrite(snap, "WRITE", storage_options=plan.storage_options)
            kept_adds, _, _ = write_rows(log, kept, rewrite, target_file_rows)
        if cdf:
            cdc_adds = _write_replace_changes(log, plan, gone, written, target_file_rows)
        cdcs = [AddCDCFile(path=a.path, partition_values=a.partition_values, size=a.size) for a in cdc_adds]
        return (files, kept.num_rows if kept is not None else 0), kept_adds, cdcs
    except BaseException:
        delete_data_files(log.store, log.table_root, list(written) + kept_adds + cdc_adds)
        raise


CHANGE_TYPE = "_change_type"
CDC_DIR = "_change_data"


def change_data_feed_enabled(configuration: dict | None) -> bool:
    return bool(bool_property(configuration or {}, "delta.enableChangeDataFeed"))


def _write_replace_changes(log: DeltaLog, plan: WritePlan, gone: list[pa.Table], written: list[AddFile],
                           target_file_rows: int) -> list[AddFile]:
    """The change data files of a replaceWhere on data columns: `gone` (the replaced rows) as
    deletes, the rows of `written` (read back) as inserts, in the table's schema after the write."""
    schema: StructType = plan.schema
    parts = []
    for t in gone:
        if t.num_rows:
            t = conform_to_schema(t, schema)
            parts.append(t.append_column(CHANGE_TYPE, pa.array(["delete"] * t.num_rows, pa.string())))
    reader = ArrowFileReader(log.store, log.table_root, schema, plan.partition_columns, plan.column_mapping_mode)
    for a in written:
        t = reader.read_file(a.path, a.partition_values, None)
        if t.num_rows:
            t = conform_to_schema(t, schema)
            parts.append(t.append_column(CHANGE_TYPE, pa.array(["insert"] * t.num_rows, pa.string())))
    if not parts:
        return []
    rows = pa.concat_tables(parts)
    return write_data_files(log.store, log.table_root, rows, schema, plan.partition_columns, plan.column_mapping_mode,
                            plan.configuration, target_file_rows, extra_columns={CHANGE_TYPE: CHANGE_TYPE},
                            subdir=CDC_DIR, file_prefix="cdc")


def write_rows(log: DeltaLog, data: pa.Table, plan: WritePlan, target_file_rows: int = DEFAULT_TARGET_FILE_ROWS,
               first_position: int = 0) -> tuple[list[AddFile], dict[str, int], int]:
    """The Arrow executor's file work for `plan`: `data` prepared (`prepare_rows`) and written as
    data files of the table. Returns (AddFiles, identity high-water marks, rows written); nothing
    is committed (see `tahoe.write.commit`)."""
    rows, marks = prepare_rows(data, plan, first_position)
    schema: StructType = plan.schema
    adds = write_data_files(log.store, log.table_root, rows, schema, plan.partition_columns,
                            plan.column_mapping_mode, plan.configuration, target_file_rows,
                            tight_bounds=plan.tight_bounds)
    return adds, marks, rows.num_rows
