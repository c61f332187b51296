"""The Spark write path: `write_delta(df, path, ...)` and the `format("delta")` data-source writer.

Owns writing a DataFrame into a Delta table with Spark doing the data work and tahoe the log work:

1. the table's schema/metadata is decided on the driver (`_plan_write`: create, append, overwrite,
   error, ignore, mergeSchema, overwriteSchema, replaceWhere, dynamic partition overwrite,
   idempotent txnAppId/txnVersion) with the same rules as the Spark-free `tahoe.write_table`;
2. the DataFrame is shaped to the table: columns cast to the table types, absent columns null,
   generated columns computed (or checked with `<=>` when given), identity values generated —
   `tahoe.write.writer.identity_generation` decides first value and step for every writer; here
   value k is `first + step * monotonically_increasing_id()` (unique, not dense, like
   delta-spark), computed with `try_add`/`try_multiply`/`try_cast` so an overflow is a violation,
   not a wrapped value; the high-water mark advances to the write's last value;
3. every row check — NOT NULL, CHECK constraints, invariants, generated columns, identity
   overflow, replaceWhere — is a `raise_error` column evaluated inside the single write job (no
   extra scan); a violation fails the job, ConstraintViolationError names the constraint and a
   sample row (as JSON), nothing is committed;
4. the files: for local tables `df.write.partitionBy(...).parquet(staging)` writes into
   `<root>/_tahoe_staging_<uuid>` (physical names and field ids under column mapping), the files
   are moved into the table's partition directories (the staging directory is deleted whatever
   happens), stats come from the parquet footers (pyarrow, ~0.2 ms a file; no second scan; float
   bounds only from writers that order NaN last, see `_nan_ordering_writer`), partitionValues are
   parsed from Spark's Hive directory names (unescaped, `__HIVE_DEFAULT_PARTITION__` = null,
   timestamps from the session time zone to UTC) and serialized per the Delta spec. Object stores
   (plain PySpark has no S3A connector): one `mapInArrow` job whose tasks write the files with
   pyarrow (`tahoe.write.files`, stats from the rows in memory) and return their AddFiles;
5. ONE `tahoe.txn.Transaction` commit through the table's log store (`_commit`: blind append;
   overwrite removes the files it read; replaceWhere the matching partitions' files; dynamic
   partition overwrite — `partition_overwrite_mode="dynamic"` or the session's
   `spark.sql.sources.partitionOverwriteMode` — the files of the partitions the new files are in,
   known once the files are written, recorded as a read partition predicate so concurrent writers
   into those partitions conflict; `tahoe.write.writer.stage_overwrite`).

The data-source writer (`prepare_datasource_write` on the driver, `datasource_write_task` on
executors, `datasource_commit`) shares the plan (`_plan_write`: its options are mapped onto
write_delta's arguments, `delta.*` options become the properties of a table it creates), the
identity generation (positions `partitionId << 33 + row`, as monotonically_increasing_id), the
replaceWhere row check (`tahoe.write.writer.check_replace_where`, in the tasks), the file writing
and the commit.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import os
import shutil
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from typing import Any, Iterable
from zoneinfo import ZoneInfo

import pyarrow.parquet as pq
from pyspark.sql.datasource import WriterCommitMessage

from ..errors import ConstraintViolationError, InvalidTableOperationError, SchemaError, TableNotFoundError
from ..log import DeltaLog
from ..protocol import column_mapping
from ..protocol.actions import AddFile, Metadata
from ..protocol.partition_values import (
    HIVE_DEFAULT_PARTITION, parse_partition_value, serialize_partition_value, unescape_path_name,
)
from ..protocol.parquet_format import ParquetWriteOptions
from ..protocol.schema import VARIANT, DecimalType, PrimitiveType, StructField, StructType, check_write_compatible, merge_schemas
from ..protocol.stats import (
    DEFAULT_NUM_INDEXED_COLS, DEFAULT_STRING_PREFIX_LENGTH, _emit, _fmt_float, stats_columns,
    truncate_max_string, truncate_min_string,
)
from ..protocol.table_features import check_writable
from ..protocol.properties import GENERATION_EXPRESSION, IDENTITY_STEP, is_true
from ..write.writer import (
    WRITE_MODES, parse_replace_where, resolve_partition_columns, stage_overwrite, tight_bounds,
    use_dynamic_overwrite, write_parameters,
)
from .session import configure, session_overwrite_mode, session_time_zone
from .types import col, from_spark_schema, quote, to_spark_schema, to_spark_type

__all__ = ["write_delta", "footer_stats"]

_ERR = "TAHOE_VIOLATION:"
_CHECK = "__tahoe_check"


# --- the public API ------------------------------------------------------------------------------

def write_delta(df, path: str, mode: str = "append", partition_by: str | Iterable[str] | None = None,
                replace_where: str | None = None, merge_schema: bool = False, overwrite_schema: bool = False,
                user_metadata: str | None = None, txn_app_id: str | None = None, txn_version: int | None = None,
                properties: dict | None = None, storage_options: dict | None = None,
                partition_overwrite_mode: str | None = None) -> int:
    """Write DataFrame `df` to the Delta table at `path` (created when absent); returns the table
    version after the write (the current version when nothing was written: mode='ignore' on an
    existing table, or an already-recorded txn_app_id/txn_version).

    partition_overwrite_mode: 'static' or 'dynamic' — with mode='overwrite' on a partitioned
    table, 'dynamic' replaces only the partitions `df` writes to; when None, the session's
    `spark.sql.sources.partitionOverwriteMode` decides (see
    `tahoe.write.writer.use_dynamic_overwrite` for delta-spark's rules)."""
    spark = df.sparkSession
    configure(spark)
    plan, snap = _plan_write(
        path, storage_options, from_spark_schema(df.schema), mode, partition_by, replace_where=replace_where,
        merge_schema=merge_schema, overwrite_schema=overwrite_schema,
        partition_overwrite_mode=partition_overwrite_mode, session_overwrite_mode=session_overwrite_mode(spark),
        properties=properties, user_metadata=user_metadata, txn_app_id=txn_app_id, txn_version=txn_version)
    if plan.skip:
        return plan.read_version
    schema = StructType.from_json(plan.schema_json)
    shaped, identity_cols = _shape(df, from_spark_schema(df.schema), schema, plan.conf, plan.replace_where)
    log = DeltaLog.for_table(path, storage_options)
    cm_mode = column_mapping.mode(plan.conf)
    if _is_local(log.table_root):
        adds, marks = _write_native(spark, shaped, log.table_root, schema, plan.pcols, cm_mode, plan.conf,
                                    identity_cols)
    else:
        target = _ArrowTarget(log.table_root, storage_options, plan.schema_json, plan.pcols, cm_mode, plan.conf,
                              identity_cols, tight_bounds(plan.conf, snap.protocol if snap else None))
        adds, marks = _write_arrow(shaped, target)
    try:
        return _commit(plan, log, snap, adds, marks)
    except BaseException:
        _delete_files(log.store, log.table_root, adds)
        raise


# --- the driver's plan and the commit, shared by write_delta and the data-source writer ----------

@dataclasses.dataclass
class _Plan:
    """The driver's decisions for one write (picklable: the data-source writer ships it to its
    tasks and to its commit, which runs in another Python process)."""
    table_root: str
    storage_options: dict | None
    mode: str
    read_version: int            # the snapshot the write is planned on; -1: the write creates the table
    operation: str
    params: dict
    schema_json: str             # the table's schema after the write
    pcols: list
    conf: dict                   # the table's configuration after the write
    new_metadata: Metadata | None
    replace_where: str | None
    dynamic: bool                # dynamic partition overwrite
    user_metadata: str | None = None
    txn_app_id: str | None = None
    txn_version: int | None = None
    skip: bool = False           # write nothing, commit nothing (mode 'ignore' on an existing table,
                                 # or the txn_app_id/txn_version is already recorded)


def _plan_write(path: str, storage_options: dict | None, incoming: StructType, mode: str,
                partition_by: str | Iterable[str] | None, replace_where: str | None = None,
                merge_schema: bool = False, overwrite_schema: bool = False,
                partition_overwrite_mode: str | None = None, session_overwrite_mode: str | None = None,
                properties: dict | None = None, user_metadata: str | None = None,
                txn_app_id: str | None = None, txn_version: int | str | None = None,
                api: str = "write_delta") -> tuple[_Plan, Any]:
    """The table's schema, partitioning and metadata after the write (create, append, overwrite,
    error, ignore, mergeSchema, overwriteSchema — the rules of `tahoe.write_table`), the overwrite
    flavour (all files, replaceWhere, dynamic partitions) and the commitInfo parameters; every
    refusal that needs no data happens here, before any job runs. Returns (plan, snapshot)."""
    from ..protocol.properties import normalize_properties

    if mode not in WRITE_MODES:
        raise ValueError(f"mode must be one of {WRITE_MODES}, got {mode!r}")
    if replace_where is not None and mode != "overwrite":
        raise InvalidTableOperationError(f"{_HOW[api][2]} needs mode='overwrite'")
    if overwrite_schema and mode != "overwrite":
        raise InvalidTableOperationError(f"{_HOW[api][1]} needs mode='overwrite'")
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
    incoming = _strip_metadata(incoming)
    properties = normalize_properties(properties)   # validated always, applied when creating (delta-spark)

    log = DeltaLog.for_table(path, storage_options)
    try:
        snap = log.snapshot()
    except TableNotFoundError:
        snap = None

    def plan(**kw) -> _Plan:
        base = dict(table_root=log.table_root, storage_options=storage_options, mode=mode,
                    read_version=snap.version if snap is not None else -1, replace_where=replace_where,
                    user_metadata=user_metadata, txn_app_id=txn_app_id, txn_version=txn_version)
        return _Plan(**{**base, **kw})

    if snap is not None:
        check_writable(snap.protocol)
        done = snap.txn_version(txn_app_id) if txn_app_id is not None else None
        if (done is not None and done >= txn_version) or mode == "ignore":
            return plan(operation="WRITE", params={}, schema_json=snap.schema.to_json(),
                        pcols=list(snap.partition_columns), conf=snap.configuration, new_metadata=None,
                        dynamic=False, skip=True), snap

    new_md: Metadata | None = None
    if snap is None:
        conf = normalize_properties(properties)
        pcols = resolve_partition_columns(incoming, partition_by or [])
        schema, conf = column_mapping.assign_ids_for_table(incoming, conf)
        new_md = Metadata(id=str(uuid.uuid4()), schema_string=schema.to_json(), partition_columns=tuple(pcols),
                          configuration=conf, created_time=int(time.time() * 1000))
        operation = "CREATE TABLE AS SELECT"
        params: dict[str, Any] = {"isManaged": "false", "description": None, "partitionBy": pcols,
                                  "properties": conf}
        conf_now = conf
    else:
        if mode == "error":
            raise InvalidTableOperationError(
                f"a Delta table already exists at {log.table_root} (version {snap.version}); use "
                f"{_HOW[api][3]}")
        conf_now = snap.configuration
        schema = snap.schema
        pcols = list(snap.partition_columns)
        if overwrite_schema:
            pcols = resolve_partition_columns(incoming, partition_by if partition_by is not None else
                                              [c for c in pcols if incoming.get(c, case_insensitive=True)])
            kept = []
            for f in incoming.fields:
                old = schema.get(f.name, case_insensitive=True)
                kept.append(f.with_metadata(dict(old.metadata)) if old is not None and old.type == f.type else f)
            schema, conf_now = column_mapping.assign_ids_for_table(StructType(kept), dict(conf_now))
            new_md = dataclasses.replace(snap.metadata, schema_string=schema.to_json(),
                                         partition_columns=tuple(pcols), configuration=conf_now)
        else:
            if partition_by is not None and [c.lower() for c in partition_by] != [c.lower() for c in pcols]:
                raise InvalidTableOperationError(
                    f"partition_by {partition_by} does not match the table's partition columns {pcols}")
            if merge_schema:
                merged = merge_schemas(schema, incoming)
                if merged != schema:
                    merged, conf_now = column_mapping.assign_ids_for_table(merged, dict(conf_now))
                    new_md = dataclasses.replace(snap.metadata, schema_string=merged.to_json(),
                                                 configuration=conf_now)
                    schema = merged
            else:
                _check_compatible(schema, incoming, api)
        if mode == "overwrite" and is_true(conf_now, "delta.appendOnly"):
            raise InvalidTableOperationError(f"table {log.table_root} is append-only (delta.appendOnly=true)")
        operation = "WRITE"
    dynamic = use_dynamic_overwrite(mode, partition_overwrite_mode, pcols, replace_where, overwrite_schema,
                                    session_overwrite_mode)
    if snap is not None:
        params = write_parameters(mode, pcols, replace_where, dynamic=dynamic, merge_schema=merge_schema,
                                  overwrite_schema=overwrite_schema)
        if replace_where is not None:   # refuse a predicate on non-partition columns before any job
            parse_replace_where(replace_where, snap.schema, list(snap.partition_columns))
    return plan(operation=operation, params=params, schema_json=schema.to_json(), pcols=pcols, conf=conf_now,
                new_metadata=new_md, dynamic=dynamic and snap is not None), snap


def _commit(plan: _Plan, log, snap, adds: list[AddFile], marks: dict[str, int]) -> int:
    """ONE transaction for the write: the metadata change, the overwrite's removes (all files, the
    replaceWhere partitions, or — dynamic — the partitions of `adds`; see
    `tahoe.write.writer.stage_overwrite`), the new files, identity high-water marks, the
    application transaction id. Conflicts raise the Concurrent*Exception of the transaction."""
    from ..txn import Transaction

    txn = Transaction(log, plan.operation, plan.params, snapshot=snap)
    if plan.new_metadata is not None:
        txn.update_metadata(plan.new_metadata)
    removes: list[AddFile] = []
    if snap is not None and plan.mode == "overwrite":
        replace_node = None if plan.replace_where is None else \
            parse_replace_where(plan.replace_where, snap.schema, list(snap.partition_columns))
        removes = stage_overwrite(txn, snap, replace_node, adds if plan.dynamic else None)
    txn.add_files(adds)
    for name, value in marks.items():
        txn.update_identity_high_water_mark(name, value)
    if plan.txn_app_id is not None:
        txn.set_txn(plan.txn_app_id, int(plan.txn_version))
    metrics = {"numFiles": len(adds), "numOutputRows": sum(a.num_records or 0 for a in adds),
               "numOutputBytes": sum(a.size for a in adds)}
    if removes:
        metrics["numRemovedFiles"] = len(removes)
        metrics["numRemovedBytes"] = sum(r.size for r in removes)
    return txn.commit(operation_metrics=metrics, user_metadata=plan.user_metadata)


def _is_local(table_root: str) -> bool:
    return "://" not in table_root or table_root.startswith("file:")


def _delete_files(store, table_root: str, adds: list[AddFile]) -> None:
    """Best effort: the data files of a write that did not commit (VACUUM removes what is left)."""
    from ..storage import resolve_data_path

    for a in adds:
        try:
            store.filesystem.delete_file(store.to_fs_path(resolve_data_path(table_root, a.path)))
        except Exception:  # noqa: BLE001
            pass


def _strip_metadata(s: StructType) -> StructType:
    """A DataFrame's schema as a new table schema: Spark's column metadata dropped, except what
    Delta itself defines (generation expressions etc. are set through the builders)."""
    from .types import to_spark_schema as _ts
    return from_spark_schema(_ts(s, strip_metadata=True, nullable=True))


# how each API spells: mergeSchema, overwriteSchema, replaceWhere, the modes that accept an existing table
_HOW = {"write_delta": ("merge_schema=True", "overwrite_schema=True", "replace_where",
                        "mode='append', 'overwrite' or 'ignore'"),
        "datasource": (".option('mergeSchema', 'true')", ".option('overwriteSchema', 'true')",
                       "option replaceWhere", "mode('append'), mode('overwrite') or mode('ignore')")}


def _check_compatible(schema: StructType, incoming: StructType, api: str = "write_delta") -> None:
    merge, overwrite = _HOW[api][:2]
    lower = {f.name.lower() for f in schema.fields}
    extra = [f.name for f in incoming.fields if f.name.lower() not in lower]
    if extra:
        raise SchemaError(f"the data has columns {extra} that the table does not have (table columns: "
                          f"{schema.names}); write with {merge} (mergeSchema) to add them")
    from ..write.writer import with_computed_columns

    try:
        check_write_compatible(schema, with_computed_columns(schema, _strip_metadata(incoming)))
    except SchemaError as e:
        raise SchemaError(f"{e}. To change the table's schema use {merge} or (overwriting) "
                          f"{overwrite}") from None


# --- shaping the rows ----------------------------------------------------------------------------

def _violation(cond, what: str, df_cols: list):
    """A column that raises (inside the job) when `cond` is not true for a row."""
    from pyspark.sql import functions as F

    sample = F.to_json(F.struct(*df_cols)) if df_cols else F.lit("")
    msg = F.concat(F.lit(f"{_ERR}{what} violated by row with values: "), sample)
    return F.when(F.coalesce(cond, F.lit(False)), F.lit(None)).otherwise(F.raise_error(msg))


def _identity_column(f: StructField, gen: tuple[int, int]):
    """The generated values of identity column `f`: `first + step * monotonically_increasing_id()`
    (unique, not dense, like delta-spark), null where the value overflows the column's type
    (`_shape` turns that null into an error inside the job)."""
    from pyspark.sql import functions as F

    from ..write.writer import identity_overflow_message, identity_range

    lo, hi = identity_range(f)
    first, step = gen
    if not lo <= first <= hi:
        raise ConstraintViolationError(identity_overflow_message(f))
    v = F.try_add(F.lit(first).cast("long"), F.try_multiply(F.lit(step).cast("long"), F.monotonically_increasing_id()))
    return v.try_cast(to_spark_type(f.type))


def _shape(df, incoming: StructType, schema: StructType, conf: dict, replace_where: str | None):
    """(DataFrame with the table's columns — logical names, table types — plus a check column,
    the identity columns this write generates)."""
    from pyspark.sql import functions as F

    from ..write.writer import identity_generation, identity_overflow_message

    given = {f.name.lower(): f.name for f in incoming.fields}
    logical_cols = []
    identity_cols = []
    for f in schema.fields:
        st = to_spark_type(f.type)
        src = given.get(f.name.lower())
        gen = identity_generation(f, src is not None)
        if gen is not None:
            c = _identity_column(f, gen)
            identity_cols.append(f.name)
        elif src is not None:
            c = col(src).cast(st)
        elif f.metadata.get(GENERATION_EXPRESSION):
            c = None  # computed below, once the other columns exist
        else:
            c = F.lit(None).cast(st)
        logical_cols.append((f, c))
    base_df = df.select(*[c.alias(f.name) for f, c in logical_cols if c is not None])
    for f, c in logical_cols:
        if c is None:
            base_df = base_df.withColumn(f.name, F.expr(f.metadata[GENERATION_EXPRESSION]).cast(to_spark_type(f.type)))
    base_df = base_df.select(*[col(f.name) for f in schema.fields])

    names = [col(f.name) for f in schema.fields]
    checks = [(col(name).isNotNull(), identity_overflow_message(schema.field(name))) for name in identity_cols]
    for f in schema.fields:
        if not f.nullable:
            checks.append((col(f.name).isNotNull(), f"NOT NULL constraint on column {f.name}"))
        expr = f.metadata.get(GENERATION_EXPRESSION)
        if expr and f.name.lower() in given:
            checks.append((F.expr(f"{quote(f.name)} <=> ({expr})"),
                           f"CHECK constraint Generated Column ({f.name} <=> {expr})"))
    from ..write.constraints import constraint_expressions
    for what, sql in constraint_expressions(schema, conf):
        checks.append((F.expr(sql), what))
    if replace_where is not None:
        checks.append((F.expr(replace_where), f"replaceWhere predicate ({replace_where})"))
    if checks:
        conds = [_violation(c, what, names) for c, what in checks]
        base_df = base_df.withColumn(_CHECK, F.coalesce(*conds) if len(conds) > 1 else conds[0])
    return base_df, identity_cols


def _checked(df):
    """`df` without its check column, the column still evaluated for every row: a filter on it
    (never false — a violation raises) keeps it in the plan."""
    from pyspark.sql import functions as F

    if _CHECK not in df.columns:
        return df
    return df.filter(F.col(_CHECK).isNull()).drop(_CHECK)


def _physical(df, schema: StructType, cm_mode: str):
    """The logical-layout DataFrame in the files' physical layout: under column mapping, columns
    renamed to physical names and given `parquet.field.id` metadata."""
    mapped = cm_mode in ("name", "id")
    if not mapped:
        return df
    out = []
    for f in schema.fields:
        pf = column_mapping.to_physical_schema(StructType([f]), cm_mode).fields[0]
        spark_pf = to_spark_schema(StructType([pf])).fields[0]
        md = {}
        fid = column_mapping.field_id(f)
        if fid is not None:
            md["parquet.field.id"] = fid
        c = col(f.name)
        if spark_pf.dataType.simpleString() != to_spark_type(f.type).simpleString():
            c = c.cast(spark_pf.dataType)
        out.append(c.alias(pf.name, metadata=md))
    return df.select(*out)


# --- writing the files ---------------------------------------------------------------------------

def _violation_message(e: BaseException) -> str | None:
    text = str(e)
    i = text.find(_ERR)
    if i < 0:
        return None
    rest = text[i + len(_ERR):]
    end = rest.find("\n")
    return (rest if end < 0 else rest[:end]).strip().rstrip(".").rstrip("'\"")


def _write_native(spark, df, table_root: str, schema: StructType, pcols: list[str], cm_mode: str, conf: dict,
                  identity_cols: list[str]) -> tuple[list[AddFile], dict[str, int]]:
    """Local tables: Spark's own parquet writer into a staging directory under the table root,
    files moved into place, stats from their footers. (AddFiles, identity high-water marks)."""
    mapped = cm_mode in ("name", "id")
    part_fields = [schema.field(c, case_insensitive=True) for c in pcols]
    part_phys = [column_mapping.physical_name(f) if mapped else f.name for f in part_fields]
    df = _physical(_checked(df), schema, cm_mode)
    staging_rel = f"_tahoe_staging_{uuid.uuid4().hex}"
    staging = os.path.join(table_root, staging_rel)
    w = df.write.mode("overwrite").options(**ParquetWriteOptions.for_configuration(conf).spark_options())
    if part_phys:
        w = w.partitionBy(*part_phys)
    try:
        w.parquet(staging)
    except Exception as e:  # noqa: BLE001
        shutil.rmtree(staging, ignore_errors=True)
        msg = _violation_message(e)
        if msg is not None:
            raise ConstraintViolationError(msg) from None
        raise
    try:
        files = []
        for dirpath, _dirs, names in os.walk(staging):
            for n in names:
                if n.endswith(".parquet") and not n.startswith((".", "_")):
                    files.append(os.path.relpath(os.path.join(dirpath, n), staging))
        tz = session_time_zone(spark)
        data_fields = [f for f in schema.fields if f.name.lower() not in {p.lower() for p in pcols}]
        stats_schema = _stats_schema(schema, pcols, conf)
        prefix_len = int(conf.get("delta.dataSkippingStringPrefixLength", DEFAULT_STRING_PREFIX_LENGTH))

        def one(rel: str):
            src = os.path.join(staging, rel)
            dst = os.path.join(table_root, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            os.replace(src, dst)
            st = os.stat(dst)
            md = pq.ParquetFile(dst).metadata
            stats, maxes = footer_stats(md, stats_schema, mapped, prefix_len, identity_cols, schema)
            pv = _partition_values(rel, part_fields, part_phys, tz)
            from ..write.files import encode_log_path
            add = AddFile(path=encode_log_path(rel.replace(os.sep, "/")), partition_values=pv, size=st.st_size,
                          modification_time=int(st.st_mtime * 1000), data_change=True, stats=stats)
            return add, maxes

        with ThreadPoolExecutor(max_workers=8) as ex:
            results = list(ex.map(one, files))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return [a for a, _ in results], _merge_marks(schema, [m for _, m in results])


def _identity_mark(f: StructField, lo, hi) -> int:
    """The high-water mark a write's values [lo, hi] of identity column `f` leave: the last value
    in the step's direction."""
    return int(hi) if int(f.metadata.get(IDENTITY_STEP, 1)) > 0 else int(lo)


def _merge_marks(schema: StructType, marks: Iterable[dict]) -> dict[str, int]:
    """The identity high-water marks of a write from those of its files/tasks."""
    out: dict[str, int] = {}
    for m in marks:
        for name, v in m.items():
            f = schema.field(name)
            prev = out.get(name)
            out[name] = v if prev is None else _identity_mark(f, min(prev, v), max(prev, v))
    return out


@dataclasses.dataclass
class _ArrowTarget:
    """What an executor needs to write rows as data files of a table with pyarrow (picklable):
    used by write_delta for object stores and by the data-source writer."""
    table_root: str
    storage_options: dict | None
    schema_json: str
    pcols: list
    cm_mode: str
    conf: dict
    identity_cols: list       # identity columns generated by this write: they advance high-water marks
    tight_bounds: bool | None = None


def _write_rows(target: _ArrowTarget, rows) -> tuple[list[str], dict[str, int]]:
    """Executor side: rows (Arrow, the table's logical columns) → data files (stats from the rows
    in memory) → (AddFile JSON lines, identity high-water marks of these rows)."""
    import pyarrow.compute as pc

    from ..storage import log_store_for
    from ..write.files import conform_to_schema, write_data_files

    schema = StructType.from_json(target.schema_json)
    rows = conform_to_schema(rows, schema)
    store, root = log_store_for(target.table_root, target.storage_options)
    adds = write_data_files(store, root, rows, schema, target.pcols, target.cm_mode, target.conf,
                            tight_bounds=target.tight_bounds)
    marks = {}
    for name in target.identity_cols:
        mm = pc.min_max(rows.column(name))
        if mm["min"].is_valid:
            marks[name] = _identity_mark(schema.field(name), mm["min"].as_py(), mm["max"].as_py())
    return [a.to_json() for a in adds], marks


def _arrow_task(target: _ArrowTarget):
    """A `mapInArrow` function writing each task's rows (flushed every DEFAULT_TARGET_FILE_ROWS)
    and yielding one row per flush: its AddFiles and identity marks, as JSON."""
    def task(batches):
        import pyarrow as pa

        from ..write.files import DEFAULT_TARGET_FILE_ROWS

        pending: list = []
        count = 0

        def flush():
            adds, marks = _write_rows(target, pa.Table.from_batches(pending))
            pending.clear()
            return pa.RecordBatch.from_pydict({"adds": [json.dumps(adds)], "marks": [json.dumps(marks)]})

        for b in batches:
            if b.num_rows:
                pending.append(b)
                count += b.num_rows
            if count >= DEFAULT_TARGET_FILE_ROWS:
                yield flush()
                count = 0
        if pending:
            yield flush()
    return task


def _write_arrow(df, target: _ArrowTarget) -> tuple[list[AddFile], dict[str, int]]:
    """Object stores (no Hadoop connector in plain PySpark): executors write the files with
    pyarrow's filesystem (`tahoe.write.files`) inside one `mapInArrow` job, stats from the rows
    in memory; the driver gets the AddFiles back. A violated check fails the job before that
    task writes; files of tasks that finished before a failure stay behind (unreferenced)."""
    out = _checked(df).mapInArrow(_arrow_task(target), "adds string, marks string")
    try:
        rows = out.collect()
    except Exception as e:  # noqa: BLE001
        msg = _violation_message(e)
        if msg is not None:
            raise ConstraintViolationError(msg) from None
        raise
    adds = [AddFile.from_dict(json.loads(a)["add"]) for r in rows for a in json.loads(r.adds)]
    schema = StructType.from_json(target.schema_json)
    return adds, _merge_marks(schema, [json.loads(r.marks) for r in rows])


def _partition_values(rel: str, part_fields: list[StructField], part_phys: list[str], tz: str) -> dict:
    segs = rel.replace(os.sep, "/").split("/")[:-1]
    raw: dict[str, str | None] = {}
    for s in segs:
        if "=" in s:
            k, v = s.split("=", 1)
            k = unescape_path_name(k)
            v = unescape_path_name(v)
            raw[k] = None if v == HIVE_DEFAULT_PARTITION else v
    out = {}
    for f, key in zip(part_fields, part_phys):
        v = raw.get(key)
        out[key] = _spark_pv_to_delta(v, f, tz)
    return out


def _spark_pv_to_delta(v: str | None, f: StructField, tz: str) -> str | None:
    """Spark's directory value (Cast to string in the session time zone) → the Delta spec's
    serialized partition value."""
    if v is None:
        return None
    dt = f.type
    if isinstance(dt, PrimitiveType) and dt.name == "timestamp":
        naive = parse_partition_value(v, PrimitiveType("timestamp_ntz"))
        aware = naive.replace(tzinfo=ZoneInfo(tz)).astimezone(_dt.timezone.utc)
        return serialize_partition_value(aware, dt)
    if isinstance(dt, PrimitiveType) and dt.name == "string":
        return v
    if isinstance(dt, PrimitiveType) and dt.name == "binary":
        return v
    try:
        return serialize_partition_value(parse_partition_value(v, dt), dt)
    except Exception:
        return v


# --- stats from parquet footers ------------------------------------------------------------------

def _stats_schema(schema: StructType, pcols: list[str], conf: dict) -> StructType:
    raw = conf.get("delta.dataSkippingStatsColumns")
    indexed = [c for c in raw.split(",") if c.strip()] if raw else None
    n = int(conf.get("delta.dataSkippingNumIndexedCols", DEFAULT_NUM_INDEXED_COLS))
    return stats_columns(schema, n, indexed, pcols)


def _leaf_paths(st: StructType, mapped: bool, prefix=()):
    from ..protocol.schema import ArrayType, MapType
    for f in st.fields:
        key = column_mapping.physical_name(f) if mapped else f.name
        if isinstance(f.type, StructType):
            yield from _leaf_paths(f.type, mapped, prefix + (key,))
        elif isinstance(f.type, (ArrayType, MapType)):
            continue
        else:
            yield prefix + (key,), f


def _json_value(v, f: StructField, is_max: bool, prefix_len: int):
    dt = f.type
    if v is None:
        return None
    if isinstance(dt, DecimalType):
        return Decimal(v) if not isinstance(v, Decimal) else v
    name = dt.name
    if name in ("byte", "short", "integer", "long"):
        return int(v)
    if name in ("float", "double"):
        v = float(v)
        if v == 0.0:  # a bound on zero covers both signed zeros (as parquet-mr reads it, PARQUET-1246)
            v = 0.0 if is_max else -0.0
        return _fmt_float(v, name == "float")
    if name == "date":
        return v.isoformat() if hasattr(v, "isoformat") else None
    if name in ("timestamp", "timestamp_ntz"):
        if not isinstance(v, _dt.datetime):
            return None
        if v.tzinfo is not None:
            v = v.astimezone(_dt.timezone.utc).replace(tzinfo=None)
        if is_max and v.microsecond % 1000:
            v = v + _dt.timedelta(microseconds=1000 - v.microsecond % 1000)
        s = v.strftime("%Y-%m-%dT%H:%M:%S") + f".{v.microsecond // 1000:03d}"
        return s + "Z" if name == "timestamp" else s
    if name == "string":
        if isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        return truncate_max_string(v, prefix_len) if is_max else truncate_min_string(v, prefix_len)
    return None


def _arrow_leaves(schema, prefix=()):
    """Leaf column paths (tuples of names) of an Arrow schema in parquet leaf order."""
    import pyarrow as pa

    def walk(t, pre):
        if pa.types.is_struct(t):
            for i in range(t.num_fields):
                yield from walk(t.field(i).type, pre + (t.field(i).name,))
        elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            yield from walk(t.value_type, pre + ("\0list",))
        elif pa.types.is_map(t):
            yield from walk(t.key_type, pre + ("\0key",))
            yield from walk(t.item_type, pre + ("\0value",))
        else:
            yield pre

    for f in schema:
        yield from walk(f.type, prefix + (f.name,))


def _is_floating(f: StructField) -> bool:
    return isinstance(f.type, PrimitiveType) and f.type.name in ("float", "double")


def _nan_ordering_writer(created_by: str | None) -> bool:
    """Whether a parquet writer's float/double min/max follow Spark's order — NaN above every
    value, so a NaN in the column makes the max NaN, as the Delta stats need. parquet-mr/-java
    orders with Float.compare/Double.compare (measured with 1.17, PySpark 4.3's: a NaN anywhere in
    a row group makes its max NaN, its min is NaN only when every value is; -0.0 < 0.0); versions
    before 1.13 (older than any PySpark 4 ships) are not trusted. Writers that leave NaN out of
    min/max (parquet-cpp/Arrow, parquet-rs) would give a finite max for a file holding NaN: their
    float bounds are dropped."""
    import re

    m = re.match(r"parquet-(?:mr|java) version (\d+)\.(\d+)", created_by or "")
    return bool(m) and (int(m.group(1)), int(m.group(2))) >= (1, 13)


def _float_bounds(mins: list, maxs: list) -> tuple[float, float]:
    """A file's float bounds from its row groups' (NaN-largest order, see `_nan_ordering_writer`):
    NaN is the max when any row group's max is; the min is NaN only when every min is."""
    import math

    finite_mins = [float(v) for v in mins if not math.isnan(v)]
    lo = min(finite_mins) if finite_mins else math.nan
    hi = math.nan if any(math.isnan(v) for v in maxs) else max(float(v) for v in maxs)
    return lo, hi


def footer_stats(md, stats_schema: StructType, mapped: bool, prefix_len: int = DEFAULT_STRING_PREFIX_LENGTH,
                 identity_cols: Iterable[str] = (), schema: StructType | None = None) -> tuple[str, dict]:
    """The Delta stats JSON of a parquet file from its footer (`pq.FileMetaData`), and the max (by
    step direction: min for negative steps) of identity columns."""
    n = md.num_rows
    by_path: dict[tuple, list] = {}
    arrow_schema = md.schema.to_arrow_schema()
    top_level = set(arrow_schema.names)
    if md.num_row_groups:
        leaf_paths = list(_arrow_leaves(arrow_schema))
        rg0 = md.row_group(0)
        if len(leaf_paths) == rg0.num_columns:
            for j in range(rg0.num_columns):
                by_path[leaf_paths[j]] = [md.row_group(i).column(j).statistics for i in range(md.num_row_groups)]
    mins: dict = {}
    maxs: dict = {}
    nulls: dict = {}
    floats_ok = _nan_ordering_writer(md.created_by)

    def put(d, path, v):
        cur = d
        for k in path[:-1]:
            cur = cur.setdefault(k, {})
        cur[path[-1]] = v

    for path, f in _leaf_paths(stats_schema, mapped):
        sts = by_path.get(path)
        if f.type == VARIANT:   # nullCount only (spec): the nulls of its required metadata leaf
            sts = by_path.get(path + ("metadata",))
            if sts is not None and all(s is not None and s.has_null_count for s in sts):
                put(nulls, path, sum(s.null_count for s in sts))
            elif sts is None and (n == 0 or path[0] not in top_level):
                put(nulls, path, n)
            continue
        if sts is None:
            if n == 0 or path[0] not in top_level:
                put(nulls, path, n)  # no rows, or the column is absent from the file: all null
            continue
        if all(s is not None and s.has_null_count for s in sts):
            put(nulls, path, sum(s.null_count for s in sts))
        if not all(s is not None and (s.has_min_max or s.null_count == s.num_values) for s in sts):
            continue
        with_mm = [s for s in sts if s.has_min_max]
        if not with_mm:
            continue
        if _is_floating(f):
            if not floats_ok:
                continue
            lo, hi = _float_bounds([s.min for s in with_mm], [s.max for s in with_mm])
        else:
            try:
                lo = min(s.min for s in with_mm)
                hi = max(s.max for s in with_mm)
            except TypeError:
                continue
        jlo, jhi = _json_value(lo, f, False, prefix_len), _json_value(hi, f, True, prefix_len)
        if jlo is not None:
            put(mins, path, jlo)
        if jhi is not None:
            put(maxs, path, jhi)
    out: dict[str, Any] = {"numRecords": n, "minValues": mins, "maxValues": maxs, "nullCount": nulls}
    ident = {}
    if identity_cols and schema is not None:
        for name in identity_cols:
            f = schema.field(name)
            key = (column_mapping.physical_name(f) if mapped else f.name,)
            sts = by_path.get(key)
            if not sts or not all(s is not None and s.has_min_max for s in sts):
                continue
            ident[name] = _identity_mark(f, min(s.min for s in sts), max(s.max for s in sts))
    return _emit(out), ident


# --- the data-source writer (format("delta").save) -----------------------------------------------

SAVE_MODE_OPTION = "saveMode"
# set by the `register` save wrapper: the session's partitionOverwriteMode, which the data source
# cannot read itself (its writer runs in a Python worker without the user's session)
SESSION_OVERWRITE_MODE_OPTION = "__tahoe_sessionPartitionOverwriteMode"


@dataclasses.dataclass
class _DSPlan:
    """The driver's decisions for one `format("delta")` write, shipped to its tasks and commit."""
    plan: _Plan
    target: _ArrowTarget
    incoming_json: str        # the DataFrame's schema (Delta JSON): which columns the data gives


def _option(options: dict, name: str):
    """An option by case-insensitive name (Spark hands data sources lower-cased keys)."""
    low = name.lower()
    for k, v in options.items():
        if k.lower() == low:
            return v
    return None


def _flag(options: dict, name: str) -> bool:
    return str(_option(options, name)).strip().lower() == "true"


def prepare_datasource_write(path: str, options: dict, spark_schema, overwrite: bool) -> _DSPlan:
    """Driver side of `df.write.format("delta")`: the options mapped onto `_plan_write` — saveMode
    (`tahoe.spark.datasource` maps Spark's `.mode("error"|"ignore")` onto it), partitionBy,
    replaceWhere, mergeSchema, overwriteSchema, partitionOverwriteMode (else the session's, passed
    by the save wrapper), userMetadata, txnAppId/txnVersion, `delta.*` table properties for a
    table the write creates (as delta-spark's DataFrameWriter), `storage.<key>` storage options —
    and the identity columns the tasks generate."""
    so = {k[len("storage."):]: v for k, v in options.items() if k.lower().startswith("storage.")} or None
    incoming = _strip_metadata(from_spark_schema(spark_schema))
    pb = _option(options, "partitionBy") or _option(options, "__partition_columns")
    part_by = (json.loads(pb) if pb.startswith("[") else [c.strip() for c in pb.split(",") if c.strip()]) if pb else None
    save_mode = str(_option(options, SAVE_MODE_OPTION) or ("overwrite" if overwrite else "append")).lower()
    if save_mode == "errorifexists":
        save_mode = "error"
    if save_mode not in WRITE_MODES:
        raise ValueError(f"option {SAVE_MODE_OPTION} must be one of {WRITE_MODES}, got {save_mode!r}")
    properties = {k: v for k, v in options.items() if k.lower().startswith("delta.")}
    plan, snap = _plan_write(
        path, so, incoming, save_mode, part_by, replace_where=_option(options, "replaceWhere"),
        merge_schema=_flag(options, "mergeSchema"), overwrite_schema=_flag(options, "overwriteSchema"),
        partition_overwrite_mode=_option(options, "partitionOverwriteMode"),
        session_overwrite_mode=_option(options, SESSION_OVERWRITE_MODE_OPTION), properties=properties,
        user_metadata=_option(options, "userMetadata"), txn_app_id=_option(options, "txnAppId"),
        txn_version=_option(options, "txnVersion"), api="datasource")
    from ..write.writer import identity_generation

    schema = StructType.from_json(plan.schema_json)
    given = {g.name.lower() for g in incoming.fields}
    identity_cols = [f.name for f in schema.fields if identity_generation(f, f.name.lower() in given) is not None]
    target = _ArrowTarget(plan.table_root, so, plan.schema_json, plan.pcols, column_mapping.mode(plan.conf),
                          plan.conf, identity_cols, tight_bounds(plan.conf, snap.protocol if snap else None))
    return _DSPlan(plan, target, incoming.to_json())


def datasource_write_task(ds: _DSPlan, batches) -> Any:
    """Executor side: the task's rows cast to the table, generated/identity columns filled
    (identity positions `partitionId << 33 + row`, as monotonically_increasing_id), constraints and
    the replaceWhere predicate checked, files written (`_write_rows`)."""
    import pyarrow as pa
    from pyspark import TaskContext

    from ..write.constraints import check_constraints, parse_sql
    from ..write.files import conform_to_schema
    from ..write.writer import _fill_special_columns, check_replace_where, computed_columns

    if ds.plan.skip:
        for _ in batches:  # drain: Spark streams the rows to this worker either way
            pass
        return AddsMessage([], {})
    target = ds.target
    batches = list(batches)
    if not batches:
        return AddsMessage([], {})
    schema = StructType.from_json(target.schema_json)
    incoming = StructType.from_json(ds.incoming_json)
    rows = conform_to_schema(pa.Table.from_batches(batches), schema,
                             computed=[f.name for f in computed_columns(schema, incoming)])
    ctx = TaskContext.get()
    first = (ctx.partitionId() if ctx is not None else 0) << 33
    rows, _ = _fill_special_columns(rows, incoming, schema, target.conf, first)
    check_constraints(rows, schema, target.conf)
    if ds.plan.replace_where is not None:
        check_replace_where(rows, parse_sql(ds.plan.replace_where), ds.plan.replace_where)
    adds, marks = _write_rows(target, rows)
    return AddsMessage(adds, marks)


@dataclasses.dataclass
class AddsMessage(WriterCommitMessage):
    """What a data-source write task sends the driver: its AddFile actions as JSON lines and the
    identity high-water marks of its rows."""
    adds: list
    marks: dict = dataclasses.field(default_factory=dict)


def datasource_commit(ds: _DSPlan, messages: list) -> int | None:
    """Driver side (a Python worker): one transaction with every task's AddFiles (`_commit`), on
    the snapshot the write was planned on."""
    plan = ds.plan
    if plan.skip:
        return None
    log = DeltaLog.for_table(plan.table_root, plan.storage_options)
    adds = [AddFile.from_dict(json.loads(a)["add"]) for m in messages for a in m.adds]
    snap = log.snapshot(version=plan.read_version) if plan.read_version >= 0 else None
    schema = StructType.from_json(plan.schema_json)
    marks = _merge_marks(schema, [getattr(m, "marks", {}) for m in messages])
    return _commit(plan, log, snap, adds, marks)


def datasource_abort(ds: _DSPlan, messages: list) -> None:
    from ..storage import log_store_for

    store, root = log_store_for(ds.target.table_root, ds.target.storage_options)
    adds = [AddFile.from_dict(json.loads(a)["add"]) for m in messages for a in getattr(m, "adds", [])]
    _delete_files(store, root, adds)
