"""The Spark write path: `write_delta(df, path, ...)` and the `format("delta")` data-source writer.

Owns writing a DataFrame into a Delta table with Spark doing the data work and tahoe the log work:

1. the table's schema/metadata is decided on the driver (create, append, overwrite, mergeSchema,
   overwriteSchema) with the same rules as the Spark-free `tahoe.write_table`;
2. the DataFrame is shaped to the table: columns cast to the table types and renamed to physical
   names with `parquet.field.id` metadata (column mapping), absent columns null, generated columns
   computed (or checked with `<=>` when given), identity values generated (`start + step * k`,
   k from `monotonically_increasing_id()` — unique, not dense, like delta-spark);
3. every row check — NOT NULL, CHECK constraints, invariants, generated columns, replaceWhere —
   is a `raise_error` column evaluated inside the single write job (no extra scan); a violation
   fails the job, the staged files are deleted, ConstraintViolationError names the constraint and
   a sample row (as JSON), nothing is committed;
4. `df.write.partitionBy(...).parquet(staging)` writes into `<root>/_tahoe_staging_<uuid>`; the
   files are moved into the table's partition directories, stats come from the parquet footers
   (pyarrow, ~0.2 ms a file; no second scan), partitionValues are parsed from Spark's Hive
   directory names (unescaped, `__HIVE_DEFAULT_PARTITION__` = null, timestamps from the session
   time zone to UTC) and serialized per the Delta spec;
5. ONE `tahoe.txn.Transaction` commit (blind append; overwrite removes the files it read;
   replaceWhere removes the matching partitions' files).
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
from urllib.parse import unquote
from zoneinfo import ZoneInfo

import pyarrow.parquet as pq
from pyspark.sql.datasource import WriterCommitMessage

from ..errors import (
    ConstraintViolationError, InvalidTableOperationError, SchemaError, TableNotFoundError,
    UnsupportedFeatureError,
)
from ..log import DeltaLog
from ..protocol import column_mapping
from ..protocol.actions import AddFile, Metadata
from ..protocol.partition_values import (
    HIVE_DEFAULT_PARTITION, parse_partition_value, serialize_partition_value, unescape_path_name,
)
from ..protocol.schema import DecimalType, PrimitiveType, StructField, StructType, check_write_compatible, merge_schemas
from ..protocol.stats import (
    DEFAULT_NUM_INDEXED_COLS, DEFAULT_STRING_PREFIX_LENGTH, _emit, _fmt_float, stats_columns,
    truncate_max_string, truncate_min_string,
)
from ..protocol.table_features import check_writable, is_feature_supported
from ..txn.properties import (
    GENERATION_EXPRESSION, IDENTITY_ALLOW_EXPLICIT_INSERT, IDENTITY_HIGH_WATER_MARK, IDENTITY_START, IDENTITY_STEP,
    INVARIANTS, is_true,
)
from ..write.writer import (
    OPERATION_MODE, WRITE_MODES, files_to_replace, parse_replace_where, resolve_partition_columns, stage_overwrite,
)
from .session import configure
from .types import col, from_spark_schema, quote, to_spark_schema, to_spark_type

__all__ = ["write_delta", "footer_stats"]

_ERR = "TAHOE_VIOLATION:"


def _is_identity(f: StructField) -> bool:
    return IDENTITY_START in f.metadata or IDENTITY_STEP in f.metadata


# --- the public API ------------------------------------------------------------------------------

def write_delta(df, path: str, mode: str = "append", partition_by: str | Iterable[str] | None = None,
                replace_where: str | None = None, merge_schema: bool = False, overwrite_schema: bool = False,
                user_metadata: str | None = None, txn_app_id: str | None = None, txn_version: int | None = None,
                properties: dict | None = None, storage_options: dict | None = None) -> int:
    """Write DataFrame `df` to the Delta table at `path` (created when absent); returns the table
    version after the write (the current version when nothing was written: mode='ignore' on an
    existing table, or an already-recorded txn_app_id/txn_version)."""
    if mode not in WRITE_MODES:
        raise ValueError(f"mode must be one of {WRITE_MODES}, got {mode!r}")
    if replace_where is not None and mode != "overwrite":
        raise InvalidTableOperationError("replace_where needs mode='overwrite'")
    if overwrite_schema and mode != "overwrite":
        raise InvalidTableOperationError("overwrite_schema needs mode='overwrite'")
    if (txn_app_id is None) != (txn_version is None):
        raise ValueError("give both txn_app_id and txn_version, or neither")
    if isinstance(partition_by, str):
        partition_by = [partition_by]
    partition_by = list(partition_by) if partition_by is not None else None

    from ..txn import Transaction
    from ..txn.properties import normalize_properties

    spark = df.sparkSession
    configure(spark)
    log = DeltaLog.for_table(path, storage_options)
    if "://" in log.table_root:
        raise UnsupportedFeatureError(
            f"write_delta writes through Spark's file system; {log.table_root} is not local — use "
            f"df.write.format('delta') (the Python data source) for object stores")
    try:
        snap = log.snapshot()
    except TableNotFoundError:
        snap = None
    if snap is not None:
        check_writable(snap.protocol)
        if txn_app_id is not None:
            done = snap.txn_version(txn_app_id)
            if done is not None and done >= int(txn_version):
                return snap.version

    incoming = from_spark_schema(df.schema)
    new_md: Metadata | None = None
    if snap is None:
        conf = normalize_properties(properties)
        pcols = resolve_partition_columns(incoming, partition_by or [])
        schema, conf = column_mapping.assign_ids_for_table(_strip_metadata(incoming), conf)
        new_md = Metadata(id=str(uuid.uuid4()), schema_string=schema.to_json(), partition_columns=tuple(pcols),
                          configuration=conf, created_time=int(time.time() * 1000))
        operation = "CREATE TABLE AS SELECT"
        params: dict[str, Any] = {"isManaged": "false", "description": None, "partitionBy": pcols,
                                  "properties": conf}
        conf_now = conf
    else:
        if mode == "error":
            raise InvalidTableOperationError(f"a Delta table already exists at {log.table_root} "
                                             f"(version {snap.version})")
        if mode == "ignore":
            return snap.version
        conf_now = snap.configuration
        schema = snap.schema
        pcols = list(snap.partition_columns)
        if overwrite_schema:
            pcols = resolve_partition_columns(incoming, partition_by if partition_by is not None else
                             [c for c in pcols if incoming.get(c, case_insensitive=True)])
            kept = []
            for f in _strip_metadata(incoming).fields:
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
                merged = merge_schemas(schema, _strip_metadata(incoming))
                if merged != schema:
                    merged, conf_now = column_mapping.assign_ids_for_table(merged, dict(conf_now))
                    new_md = dataclasses.replace(snap.metadata, schema_string=merged.to_json(),
                                                 configuration=conf_now)
                    schema = merged
            else:
                _check_compatible(schema, incoming)
        if mode == "overwrite" and is_true(conf_now, "delta.appendOnly"):
            raise InvalidTableOperationError(f"table {log.table_root} is append-only (delta.appendOnly=true)")
        operation = "WRITE"
        params = {"mode": OPERATION_MODE[mode], "partitionBy": pcols}
        if replace_where is not None:
            params["predicate"] = [replace_where]
    cm_mode = column_mapping.mode(conf_now)

    replace_node = None
    if replace_where is not None and snap is not None:
        replace_node = parse_replace_where(replace_where, snap.schema, list(snap.partition_columns))

    shaped, identity_cols = _shape(df, incoming, schema, pcols, conf_now, cm_mode, replace_where)
    adds, stats_max = _write_files(spark, shaped, log.table_root, schema, pcols, cm_mode, conf_now,
                                   identity_cols)

    removes: list[AddFile] = []
    try:
        if snap is not None and mode == "overwrite":
            removes = files_to_replace(snap, replace_node)
        txn = Transaction(log, operation, params, snapshot=snap)
        if new_md is not None:
            txn.update_metadata(new_md)
        if snap is not None and mode == "overwrite":
            stage_overwrite(txn, snap, replace_node, removes)
        txn.add_files(adds)
        for name, value in stats_max.items():
            txn.update_identity_high_water_mark(name, value)
        if txn_app_id is not None:
            txn.set_txn(txn_app_id, int(txn_version))
        metrics = {"numFiles": len(adds), "numOutputRows": sum(a.num_records or 0 for a in adds),
                   "numOutputBytes": sum(a.size for a in adds)}
        if removes:
            metrics["numRemovedFiles"] = len(removes)
        return txn.commit(operation_metrics=metrics, user_metadata=user_metadata)
    except BaseException:
        from ..storage import resolve_data_path
        for a in adds:
            try:
                os.remove(resolve_data_path(log.table_root, a.path))
            except OSError:
                pass
        raise


def _strip_metadata(s: StructType) -> StructType:
    """A DataFrame's schema as a new table schema: Spark's column metadata dropped, except what
    Delta itself defines (generation expressions etc. are set through the builders)."""
    from .types import to_spark_schema as _ts
    return from_spark_schema(_ts(s, strip_metadata=True, nullable=True))


def _check_compatible(schema: StructType, incoming: StructType) -> None:
    lower = {f.name.lower() for f in schema.fields}
    extra = [f.name for f in incoming.fields if f.name.lower() not in lower]
    if extra:
        raise SchemaError(f"the data has columns {extra} that the table does not have (table columns: "
                          f"{schema.names}); write with merge_schema=True (mergeSchema) to add them")
    try:
        check_write_compatible(schema, _strip_metadata(incoming))
    except SchemaError as e:
        raise SchemaError(f"{e}. To change the table's schema use merge_schema=True or "
                          f"overwrite_schema=True") from None


# --- shaping the rows ----------------------------------------------------------------------------

def _violation(cond, what: str, df_cols: list):
    """A column that raises (inside the job) when `cond` is not true for a row."""
    from pyspark.sql import functions as F

    sample = F.to_json(F.struct(*df_cols)) if df_cols else F.lit("")
    msg = F.concat(F.lit(f"{_ERR}{what} violated by row with values: "), sample)
    return F.when(F.coalesce(cond, F.lit(False)), F.lit(None)).otherwise(F.raise_error(msg))


def _shape(df, incoming: StructType, schema: StructType, pcols: list[str], conf: dict, cm_mode: str,
           replace_where: str | None):
    """(DataFrame in the table's physical layout with check columns, identity column names)."""
    from pyspark.sql import functions as F

    given = {f.name.lower(): f.name for f in incoming.fields}
    logical_cols = []
    identity_cols = []
    for f in schema.fields:
        st = to_spark_type(f.type)
        src = given.get(f.name.lower())
        if _is_identity(f):
            if src is not None:
                if str(f.metadata.get(IDENTITY_ALLOW_EXPLICIT_INSERT, "")).lower() != "true":
                    raise ConstraintViolationError(
                        f"column '{f.name}' is an identity column (GENERATED ALWAYS AS IDENTITY): its values "
                        f"cannot be written explicitly")
                c = col(src).cast(st)
            else:
                start = int(f.metadata.get(IDENTITY_START, 1))
                step = int(f.metadata.get(IDENTITY_STEP, 1))
                hwm = f.metadata.get(IDENTITY_HIGH_WATER_MARK)
                base = start if hwm is None else int(hwm) + step
                c = (F.lit(base).cast("long") + F.lit(step).cast("long") * F.monotonically_increasing_id()).cast(st)
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
    checks = []
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
        base_df = base_df.withColumn("__tahoe_check", F.coalesce(*conds) if len(conds) > 1 else conds[0])

    # physical layout: data columns renamed/cast to physical names with field ids
    mapped = cm_mode in ("name", "id")
    out = []
    for f in schema.fields:
        if not mapped:
            out.append(col(f.name))
            continue
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
    if checks:
        out.append(F.col("__tahoe_check"))
    return base_df.select(*out), identity_cols


# --- writing the files ---------------------------------------------------------------------------

def _violation_message(e: BaseException) -> str | None:
    text = str(e)
    i = text.find(_ERR)
    if i < 0:
        return None
    rest = text[i + len(_ERR):]
    end = rest.find("\n")
    return (rest if end < 0 else rest[:end]).strip().rstrip(".").rstrip("'\"")


def _write_files(spark, df, table_root: str, schema: StructType, pcols: list[str], cm_mode: str, conf: dict,
                 identity_cols: list[str]) -> tuple[list[AddFile], dict[str, int]]:
    from pyspark.sql import functions as F

    mapped = cm_mode in ("name", "id")
    part_fields = [schema.field(c, case_insensitive=True) for c in pcols]
    part_phys = [column_mapping.physical_name(f) if mapped else f.name for f in part_fields]
    has_check = "__tahoe_check" in df.columns
    if has_check:
        # keep the check column in the plan but out of the files: filter on it (never true)
        df = df.filter(F.col("__tahoe_check").isNull()).drop("__tahoe_check")
    staging_rel = f"_tahoe_staging_{uuid.uuid4().hex}"
    staging = os.path.join(table_root, staging_rel)
    w = df.write.mode("overwrite").option("compression", "snappy")
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
        tz = _session_tz(spark)
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
    adds = [a for a, _ in results]
    hwm: dict[str, int] = {}
    for name in identity_cols:
        f = schema.field(name)
        step = int(f.metadata.get(IDENTITY_STEP, 1))
        vals = [m[name] for _, m in results if m.get(name) is not None]
        if vals:
            hwm[name] = max(vals) if step > 0 else min(vals)
    return adds, hwm


def _session_tz(spark) -> str:
    try:
        return spark.conf.get("spark.sql.session.timeZone") or "UTC"
    except Exception:
        return "UTC"


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
        return None  # parquet-mr ignores NaN in min/max; Spark orders NaN last: no safe bound
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

    def put(d, path, v):
        cur = d
        for k in path[:-1]:
            cur = cur.setdefault(k, {})
        cur[path[-1]] = v

    for path, f in _leaf_paths(stats_schema, mapped):
        sts = by_path.get(path)
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
            step = int(f.metadata.get(IDENTITY_STEP, 1))
            ident[name] = int(max(s.max for s in sts)) if step > 0 else int(min(s.min for s in sts))
    return _emit(out), ident


# --- the data-source writer (format("delta").save) -----------------------------------------------

@dataclasses.dataclass
class _DSPlan:
    path: str
    table_root: str
    storage_options: dict | None
    overwrite: bool
    exists: bool
    read_version: int
    schema_json: str
    pcols: list
    cm_mode: str
    conf: dict
    new_table: bool
    partition_by: list


def prepare_datasource_write(path: str, options: dict, spark_schema, overwrite: bool) -> _DSPlan:
    from ..storage import log_store_for
    so = {k[len("storage."):]: v for k, v in options.items() if k.lower().startswith("storage.")} or None
    log = DeltaLog.for_table(path, so)
    incoming = _strip_metadata(from_spark_schema(spark_schema))
    pb = options.get("partitionBy") or options.get("__partition_columns")
    part_by = json.loads(pb) if pb and pb.startswith("[") else ([c for c in pb.split(",") if c] if pb else [])
    try:
        snap = log.snapshot()
    except TableNotFoundError:
        snap = None
    if snap is None:
        schema, conf = incoming, {}
        pcols = resolve_partition_columns(incoming, part_by)
        return _DSPlan(path, log.table_root, so, overwrite, False, -1, schema.to_json(), pcols, "none", conf, True, pcols)
    check_writable(snap.protocol)
    schema = snap.schema
    if str(options.get("mergeSchema", "")).lower() == "true":
        schema = merge_schemas(schema, incoming)
    elif overwrite and str(options.get("overwriteSchema", "")).lower() == "true":
        schema = incoming
    else:
        _check_compatible(schema, incoming)
    if any(_is_identity(f) and f.name.lower() not in {g.name.lower() for g in incoming.fields} for f in schema.fields):
        raise UnsupportedFeatureError("format('delta') cannot generate identity values; use tahoe.spark.write_delta")
    schema, conf = column_mapping.assign_ids_for_table(schema, dict(snap.configuration))
    return _DSPlan(path, log.table_root, so, overwrite, True, snap.version, schema.to_json(),
                   list(snap.partition_columns), column_mapping.mode(conf), conf, False, part_by)


def datasource_write_task(plan: _DSPlan, batches) -> Any:
    import pyarrow as pa

    from ..storage import log_store_for
    from ..write.constraints import check_constraints
    from ..write.files import conform_to_schema, write_data_files
    from ..write.writer import _fill_special_columns
    from ..protocol.schema import from_arrow_schema

    store, root = log_store_for(plan.table_root, plan.storage_options)
    schema = StructType.from_json(plan.schema_json)
    adds = []
    batches = list(batches)
    if batches:
        t = pa.Table.from_batches(batches)
        incoming = from_arrow_schema(t.schema)
        rows = conform_to_schema(t, schema)
        rows, _ = _fill_special_columns(rows, incoming, schema, plan.conf)
        check_constraints(rows, schema, plan.conf)
        adds = write_data_files(store, root, rows, schema, plan.pcols, plan.cm_mode, plan.conf)

    return _adds_message([a.to_json() for a in adds])


@dataclasses.dataclass
class AddsMessage(WriterCommitMessage):
    """What a data-source write task sends the driver: its AddFile actions as JSON lines."""
    adds: list


def _adds_message(adds: list[str]) -> AddsMessage:
    return AddsMessage(adds)


def datasource_commit(plan: _DSPlan, messages: list) -> int:
    from ..txn import Transaction

    log = DeltaLog.for_table(plan.table_root, plan.storage_options)
    adds = [AddFile.from_dict(json.loads(a)["add"]) for m in messages for a in m.adds]
    schema = StructType.from_json(plan.schema_json)
    try:
        snap = log.snapshot() if plan.exists else None
    except TableNotFoundError:
        snap = None
    if plan.exists and snap is not None and snap.version != plan.read_version:
        snap = log.snapshot(version=plan.read_version)
    txn = Transaction(log, "CREATE TABLE AS SELECT" if plan.new_table else "WRITE",
                      {"mode": "Overwrite" if plan.overwrite else "Append", "partitionBy": plan.pcols},
                      snapshot=snap)
    if plan.new_table:
        txn.update_metadata(Metadata(id=str(uuid.uuid4()), schema_string=schema.to_json(),
                                     partition_columns=tuple(plan.pcols), configuration=plan.conf,
                                     created_time=int(time.time() * 1000)))
    elif snap is not None and schema != snap.schema:
        txn.update_metadata(dataclasses.replace(snap.metadata, schema_string=schema.to_json(), configuration=plan.conf))
    if plan.overwrite and snap is not None:
        txn.read_whole_table()
        existing = snap.add_files()
        txn.read_files(existing)
        txn.remove_files(existing)
    txn.add_files(adds)
    return txn.commit(operation_metrics={"numFiles": len(adds)})


def datasource_abort(plan: _DSPlan, messages: list) -> None:
    from ..storage import log_store_for, resolve_data_path

    store, root = log_store_for(plan.table_root, plan.storage_options)
    for m in messages:
        for a in getattr(m, "adds", []):
            try:
                p = json.loads(a)["add"]["path"]
                store.filesystem.delete_file(store.to_fs_path(resolve_data_path(root, p)))
            except Exception:  # noqa: BLE001
                pass
