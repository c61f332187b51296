"""The Spark executor of writes (`write_dataframe`: the file work of `write_delta`, OPTIMIZE and DML) and the
`format("delta")` data-source writer. Spark does the data work; every decision is the shared planner's
(`tahoe.write.plan.plan_write`) and every commit the shared commit step's (`tahoe.write.commit.commit_write`).

  1. The plan is made on the driver before any job runs.
  2. The DataFrame is shaped to the table (`_shape`): casts, defaults, generated and identity columns.
  3. Every row check is a `raise_error` column inside the one write job: a violation raises
     ConstraintViolationError naming the constraint and a sample row; nothing is committed.
  4. Files: local tables through a `<root>/_tahoe_staging_<uuid>` directory, stats from the footers; object
     stores through one `mapInArrow` job writing with pyarrow.
  5. ONE commit (`commit_write`); files of a commit that surely did not land are deleted, never on doubt.
The data-source writer (`prepare_datasource_write`, `datasource_write_task`, `datasource_commit`) maps its
options onto the same planner and commits through `commit_write`."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import logging
import os
import uuid
from concurrent.futures import ThreadPoolExecutor
import logging
from typing import Any, Callable, TypeVar
from zoneinfo import ZoneInfo

import pyarrow.parquet as pq
from pyspark.sql.datasource import WriterCommitMessage

from ..errors import ConstraintViolationError, ReplaceWhereMismatchError, SchemaError
from ..expressions import parse
from .columns import to_spark_column
from ..log import DeltaLog
from ..protocol import column_mapping
from ..protocol.actions import AddFile
from ..protocol.partition_values import (
    HIVE_DEFAULT_PARTITION, parse_partition_value, serialize_partition_value, unescape_path_name,
)
from ..protocol.schema import PrimitiveType, StructField, StructType
from ..protocol.properties import bool_property, data_skipping_settings, parquet_write_options
from ..protocol.stats import stats_columns
from ..write.auto_compact import AutoCompactSettings, auto_compact_hook
from ..write.commit import commit_write, delete_data_files
from ..write.footer_stats import footer_stats
from ..write.plan import (
    WRITE_MODES, WritePlan, identity_mark, identity_overflow_message, identity_range, merge_identity_marks,
    plan_write,
)
from .options import (
    OPTIMIZED_WRITE_OPTION, SAVE_MODE_OPTION, SESSION_AUTO_COMPACT_OPTION, SESSION_OVERWRITE_MODE_OPTION,
    SESSION_REPLACE_WHERE_OPTION, SESSION_UTC_PARTITION_VALUES_OPTION, option_time_zone, storage_options_of,
)
from .session import session_time_zone, utc_timestamp_partition_values
from .types import col, from_spark_schema, to_spark_schema, to_spark_type
from ..storage import log_store_for
from ..write.files import conform_to_schema, write_data_files, DEFAULT_TARGET_FILE_ROWS
from ..write.writer import prepare_rows, replace_rows
from .read import jvm_reaches, hadoop_location

__all__ = ["write_dataframe", "write_dataframes", "move_staged", "drop_staging", "session_plan", "shape_rows", "write_arrow_rows",
           "constraint_error", "violation_message", "prepare_datasource_write", "datasource_write_task", "datasource_commit",
           "datasource_abort", "guarded_commit", "schema_mode", "table_schema_of", "footer_stats"]

_log = logging.getLogger(__name__)
T = TypeVar("T")

_logger = logging.getLogger(__name__)

_ERR = "TAHOE_VIOLATION:"
_CHECK = "__tahoe_check"


# --- the public API ------------------------------------------------------------------------------

def write_dataframe(df, log: DeltaLog, plan: WritePlan, *, extra_columns: dict[str, str] | None = None,
                    subdir: str = "", file_prefix: str = "part", few_rows: bool = False
                    ) -> tuple[list[AddFile], dict[str, int]]:
    """The Spark executor's file work for `plan` (a WRITE's, or `tahoe.write.plan.plan_rows`'
    for the rows a DML writes): `df` shaped and checked inside one job (`_shape`), written as data
    files of the table — Spark's parquet writer for local tables, pyarrow in the tasks for object
    stores. Returns (AddFiles, identity high-water marks); nothing is committed (see
    `tahoe.write.commit`). `extra_columns` (columns of `df` outside the schema → the physical
    names they are written under, without stats), `subdir` and `file_prefix` as in
    `tahoe.write.files.write_data_files` (the materialized row-tracking columns of a DML's
    rewrite; change data files under `_change_data/`)."""
    return write_dataframes([(df, plan)], log, extra_columns=extra_columns, subdir=subdir, file_prefix=file_prefix,
                            few_rows=few_rows)


def session_plan(spark, plan: WritePlan) -> WritePlan:
    """`plan` as the session's confs shape a Spark write: under delta-spark's
    write.utcTimestampPartitionValues=false, timestamp partition values zone-less in the
    session's time zone."""
    if utc_timestamp_partition_values(spark):
        return plan
    return dataclasses.replace(plan, local_timestamp_partitions=True, time_zone=plan.time_zone or session_time_zone(spark))


def write_dataframes(parts: list[tuple[Any, WritePlan]], log: DeltaLog, *, extra_columns: dict[str, str] | None = None,
                     subdir: str = "", file_prefix: str = "part", few_rows: bool = False
                     ) -> tuple[list[AddFile], dict[str, int]]:
    """`write_dataframe` of several DataFrames in ONE job: each shaped and checked by its own
    plan, then unioned and written as the files of the first plan's table (the plans must
    share the table's schema and layout; identity values are generated only by plans that have
    identity columns, and the high-water marks come from the written files). `few_rows` (the
    caller knows the rows are few, e.g. a MERGE's inserts from a broadcast source): pyarrow
    writes them in the tasks even where Spark's writer reaches the table — through a staging
    directory, moved here — skipping the writer's commit protocol and footer reads (~0.05-0.1 s
    a write)."""
    extras = dict(extra_columns or {})
    spark = parts[0][0].sparkSession
    parts = [(df, session_plan(spark, p)) for df, p in parts]
    shaped = None
    for df, plan in parts:
        one = _checked(_shape(df, plan, list(extras)))
        shaped = one if shaped is None else shaped.unionByName(one)
    df, plan = parts[0]
    if not _is_local(log.table_root, df.sparkSession):
        return _write_arrow(shaped, plan, extras, subdir, file_prefix)
    if not few_rows:
        return _write_native(df.sparkSession, shaped, log, plan, extras, subdir, file_prefix)
    staging = f"_tahoe_staging_{uuid.uuid4().hex}"
    try:
        adds, marks = _write_arrow(shaped, plan, extras, "/".join(p for p in (staging, subdir) if p), file_prefix)
    except BaseException:
        drop_staging(log, staging)
        raise
    return move_staged(log, adds, staging), marks


def move_staged(log: DeltaLog, adds: list[AddFile], staging: str) -> list[AddFile]:
    """Files written under the table's directory `staging` (`_tahoe_staging_<uuid>`), moved to
    where they belong without it (their partition directories), as AddFiles of their final
    paths; the staging directory goes. On a failure the files moved so far are deleted."""
    from urllib.parse import unquote

    from ..storage import encode_log_path

    store, root = log.store, log.table_root
    moved: list[AddFile] = []
    try:
        for a in adds:
            rel = unquote(a.path)
            final = rel[len(staging) + 1:]
            store.rename_data(store.join(root, *rel.split("/")), store.join(root, *final.split("/")))
            moved.append(dataclasses.replace(a, path=encode_log_path(final)))
    except BaseException:
        delete_data_files(store, root, moved)
        raise
    finally:
        drop_staging(log, staging)
    return moved


def drop_staging(log: DeltaLog, staging: str) -> None:
    """The staging directory `staging` of the table, gone (and whatever it still holds)."""
    try:
        log.store.delete_tree(log.store.join(log.table_root, staging))
    except OSError:
        pass


def schema_mode(merge_schema: bool, overwrite_schema: bool) -> str | None:
    """The planner's schema mode of delta-spark's mergeSchema / overwriteSchema flags
    (overwriteSchema wins, as in delta-spark)."""
    return "overwrite" if overwrite_schema else ("merge" if merge_schema else None)


def _is_local(table_root: str, spark=None) -> bool:
    """Whether Spark's own parquet writer reaches the table (local paths; an object store with a
    Hadoop connector in the session's JVM: `tahoe.spark.read.jvm_reaches`)."""
    return jvm_reaches(table_root, spark)


def table_schema_of(s: StructType) -> StructType:
    """A DataFrame's schema as a new table schema: Spark's column metadata dropped, except what
    Delta itself defines (generation expressions etc. are set through the builders)."""
    return from_spark_schema(to_spark_schema(s, strip_metadata=True, nullable=True))


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

    lo, hi = identity_range(f)
    first, step = gen
    if not lo <= first <= hi:
        raise ConstraintViolationError(identity_overflow_message(f))
    v = F.try_add(F.lit(first).cast("long"), F.try_multiply(F.lit(step).cast("long"), F.monotonically_increasing_id()))
    return v.try_cast(to_spark_type(f.type))


def _sql_column(sql: str):
    """The Spark Column of a table's SQL expression (a default, generation expression, CHECK
    constraint, replaceWhere) — parsed by tahoe's one expression engine, as the Arrow executor
    parses it, so both executors accept the same SQL and read it the same way whatever the
    session's parser settings (e.g. `spark.sql.ansi.doubleQuotedIdentifiers`)."""
    return to_spark_column(parse(sql))


def _shape(df, plan: WritePlan, passthrough: list[str] = (), where: str | None = None):
    """`df` with the table's columns (logical names, table types) as the plan says — given
    columns cast, identity values generated, column defaults and generated columns computed,
    other absent columns null — plus a check column that fails the job on a row breaking NOT
    NULL, a CHECK constraint, an invariant, a given generated column, an identity overflow or
    the replaceWhere predicate. `where`: a boolean column of `df` (passed through) — only the
    rows where it is TRUE are checked (the others are not written)."""
    from pyspark.sql import functions as F

    schema = plan.schema
    given = {f.name.lower(): f.name for f in from_spark_schema(df.schema).fields}
    generated = {name: (expr, is_given) for name, expr, is_given in plan.generated}
    cols = []
    for f in schema.fields:
        st = to_spark_type(f.type)
        src = given.get(f.name.lower())
        if f.name in plan.identity:
            c = _identity_column(f, plan.identity[f.name])
        elif src is not None:
            c = col(src).cast(st)
        elif f.name in generated:
            c = None  # computed below, once the other columns exist
        elif f.name in plan.defaults:
            c = _sql_column(plan.defaults[f.name]).cast(st)
        else:
            c = F.lit(None).cast(st)
        cols.append((f, c))
    shaped = df.select(*[c.alias(f.name) for f, c in cols if c is not None], *[col(n) for n in passthrough])
    computed = {f.name: _sql_column(generated[f.name][0]).cast(to_spark_type(f.type)) for f, c in cols if c is None}
    if computed:   # once the other columns exist, then in table order
        shaped = shaped.withColumns(computed)
        shaped = shaped.select(*[col(f.name) for f in schema.fields], *[col(n) for n in passthrough])

    names = [col(f.name) for f in schema.fields]
    checks = [(col(name).isNotNull(), identity_overflow_message(schema.field(name))) for name in plan.identity]
    for path, c in _not_null_columns(schema):
        checks.append((c.isNotNull(), f"NOT NULL constraint on column {path}"))
    for name, (expr, is_given) in generated.items():
        if is_given:
            checks.append((col(name).eqNullSafe(_sql_column(expr)), f"CHECK constraint Generated Column ({name} <=> {expr})"))
    for what, sql in plan.constraints:
        checks.append((_sql_column(sql), what))
    if plan.replace_where is not None and plan.check_replace_where:
        checks.append((_sql_column(plan.replace_where), f"{_RW_PREFIX}{plan.replace_where})"))
    if checks:
        if where is not None:
            gate = ~F.coalesce(F.col(where), F.lit(False))
            checks = [(gate | c, what) for c, what in checks]
        conds = [_violation(c, what, names) for c, what in checks]
        shaped = shaped.withColumn(_CHECK, F.coalesce(*conds) if len(conds) > 1 else conds[0])
    return shaped


def shape_rows(df, plan: WritePlan, passthrough: list[str] = (), where: str | None = None):
    """`df` as the rows of `plan`'s files (`_shape`: the table's columns, computed columns, and
    every row check — only on the rows where column `where` is TRUE, when given — evaluated
    inside the job), with the `passthrough` columns after them: for a job that writes them itself
    (`write_arrow_rows` in its tasks)."""
    return _checked(_shape(df, plan, list(passthrough), where))


def _not_null_columns(schema: StructType, prefix: str = "", parent=None) -> list:
    """(path, column) of every NOT NULL column and NOT NULL field of a struct column (not inside
    arrays or maps): null when the field or any parent struct is — delta-spark's NOT NULL of a
    nested field constrains its parents too."""
    out = []
    for f in schema.fields:
        c = col(f.name) if parent is None else parent.getField(f.name)
        if not f.nullable:
            out.append((f"{prefix}{f.name}", c))
        if isinstance(f.type, StructType):
            out += _not_null_columns(f.type, f"{prefix}{f.name}.", c)
    return out


def _checked(df):
    """`df` without its check column, the column still evaluated for every row: a filter on it
    (never false — a violation raises) keeps it in the plan."""
    from pyspark.sql import functions as F

    if _CHECK not in df.columns:
        return df
    return df.filter(F.col(_CHECK).isNull()).drop(_CHECK)


def _physical(df, schema: StructType, cm_mode: str, extras: dict[str, str] | None = None):
    """The logical-layout DataFrame in the files' physical layout: under column mapping, columns
    renamed to physical names and given `parquet.field.id` metadata; `extras` (column → physical
    name) after them."""
    mapped = cm_mode in ("name", "id")
    tail = [col(n).alias(p) for n, p in (extras or {}).items()]
    if not mapped:
        return df.select(*[col(f.name) for f in schema.fields], *tail) if tail else df
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
    return df.select(*out, *tail)


# --- writing the files ---------------------------------------------------------------------------

_RW_PREFIX = "replaceWhere predicate ("


def constraint_error(msg: str) -> Exception:
    """The error of a row check that failed inside a Spark job (`_violation`'s message): a
    replaceWhere predicate's is delta-spark's DELTA_REPLACE_WHERE_MISMATCH, the others a
    ConstraintViolationError."""
    if msg.startswith(_RW_PREFIX):
        end = msg.find(") violated by row with values: ")
        if end > 0:
            return ReplaceWhereMismatchError(msg[len(_RW_PREFIX):end],
                                             "A row that does not match the replaceWhere predicate: " + msg[end + len(") violated by row with values: "):])
    if msg.startswith("NOT NULL constraint on column "):   # delta-spark: DELTA_NOT_NULL_CONSTRAINT_VIOLATED
        column = msg[len("NOT NULL constraint on column "):].split(" violated by row", 1)[0]
        return ConstraintViolationError(f"NOT NULL constraint violated for column: {column}.",
                                        error_class="DELTA_NOT_NULL_CONSTRAINT_VIOLATED")
    if msg.startswith(("CHECK constraint ", "Invariant (")):
        return ConstraintViolationError(msg, error_class="DELTA_VIOLATE_CONSTRAINT_WITH_VALUES")
    return ConstraintViolationError(msg)


def violation_message(e: BaseException) -> str | None:
    """The message of a row check (`_shape`) that failed inside a Spark job, or None when `e` is
    another failure."""
    return _violation_message(e)


def _violation_message(e: BaseException) -> str | None:
    text = str(e)
    i = text.find(_ERR)
    if i < 0:
        return None
    rest = text[i + len(_ERR):]
    end = rest.find("\n")
    return (rest if end < 0 else rest[:end]).strip().rstrip(".").rstrip("'\"")


def _write_native(spark, df, log: DeltaLog, plan: WritePlan, extras: dict[str, str] | None = None,
                  subdir: str = "", file_prefix: str = "part") -> tuple[list[AddFile], dict[str, int]]:
    """Tables Spark's JVM reaches: Spark's own parquet writer into a staging directory under the
    table root, partition values parsed from the directory names (a value that does not parse
    fails the write before any file is moved), files moved into place, stats from their footers —
    the staging directory listed, its files moved, sized and their footers read through the
    table's store (a rename on local disk; a copy and a delete on an object store).
    (AddFiles, identity high-water marks)."""
    store, table_root = log.store, log.table_root
    schema = plan.schema
    pcols = plan.partition_columns
    cm_mode = plan.column_mapping_mode
    mapped = cm_mode in ("name", "id")
    part_fields = [schema.field(c, case_insensitive=True) for c in pcols]
    part_phys = [column_mapping.physical_name(f) if mapped else f.name for f in part_fields]
    df = _physical(_checked(df), schema, cm_mode, extras)
    staging_rel = f"_tahoe_staging_{uuid.uuid4().hex}"
    staging = store.join(table_root, staging_rel)
    w = df.write.mode("overwrite").options(**parquet_write_options(plan.configuration).spark_options())
    if part_phys:
        w = w.partitionBy(*part_phys)

    try:
        w.parquet(hadoop_location(staging) or staging)
    except Exception as e:  # noqa: BLE001
        drop_staging(log, staging_rel)
        msg = _violation_message(e)
        if msg is not None:
            raise constraint_error(msg) from None
        raise
    moved: list[str] = []
    try:
        files = []
        prefix = staging.rstrip("/").rstrip(os.sep) + ("/" if "://" in staging else os.sep)
        for st in store.walk(staging):
            rel = st.path[len(prefix):] if st.path.startswith(prefix) else os.path.relpath(st.path, staging)
            n = st.name
            if n.endswith(".parquet") and not n.startswith((".", "_")) and \
                    not any(part.startswith((".", "_")) and "=" not in part for part in rel.split("/")[:-1]):
                files.append(rel.replace(os.sep, "/"))
        tz = session_time_zone(spark)
        local = plan.local_timestamp_partitions
        values = {rel: _partition_values(rel, part_fields, part_phys, tz, local) for rel in files}
        skipping = data_skipping_settings(plan.configuration)
        stats_schema = stats_columns(schema, skipping.num_indexed_cols, skipping.stats_columns, pcols)
        identity_cols = list(plan.identity)

        def one(rel: str):
            src = store.join(staging, *rel.split("/"))
            name = rel.rsplit("/", 1)[-1]
            if file_prefix != "part" and name.startswith("part-"):
                name = file_prefix + name[len("part"):]
            parent = rel.rsplit("/", 1)[0] if "/" in rel else ""
            out_rel = "/".join(p for p in (subdir, parent, name) if p)
            dst = store.join(table_root, *out_rel.split("/"))
            store.rename_data(src, dst)
            moved.append(dst)
            st = store.status(dst)
            with store.open_input_file(dst, st.size) as f:
                md = pq.ParquetFile(f).metadata
            stats, maxes = footer_stats(md, stats_schema, mapped, skipping.string_prefix_length, identity_cols,
                                        schema)
            from ..storage import encode_log_path
            add = AddFile(path=encode_log_path(out_rel), partition_values=values[rel],
                          size=st.size, modification_time=st.modification_time, data_change=True, stats=stats)
            return add, maxes

        with ThreadPoolExecutor(max_workers=8) as ex:
            results = list(ex.map(one, files))
    except BaseException:
        try:   # nothing was committed: the moved files are garbage
            store.delete_many(moved)
        except OSError:
            pass
        raise
    finally:
        drop_staging(log, staging_rel)
    return [a for a, _ in results], merge_identity_marks(schema, [m for _, m in results])


def _write_rows(plan: WritePlan, rows, extras: dict[str, str] | None = None, subdir: str = "",
                file_prefix: str = "part") -> tuple[list[str], dict[str, int]]:
    """Executor side: rows (Arrow, the table's logical columns, shaped and checked) → data files
    (stats from the rows in memory) → (AddFile JSON lines, identity high-water marks of these
    rows)."""
    import pyarrow.compute as pc

    schema = plan.schema
    extras = dict(extras or {})
    tail = {n: rows.column(n) for n in extras}
    rows = conform_to_schema(rows.drop_columns(list(extras)) if extras else rows, schema)
    for n, c in tail.items():
        rows = rows.append_column(n, c)
    store, root = log_store_for(plan.table_root, plan.storage_options)
    adds = write_data_files(store, root, rows, schema, plan.partition_columns, plan.column_mapping_mode,
                            plan.configuration, tight_bounds=plan.tight_bounds, extra_columns=extras or None,
                            subdir=subdir, file_prefix=file_prefix,
                            local_timestamp_zone=(plan.time_zone or "UTC") if plan.local_timestamp_partitions else None)
    marks = {}
    for name in plan.identity:
        mm = pc.min_max(rows.column(name))
        if mm["min"].is_valid:
            marks[name] = identity_mark(schema.field(name), mm["min"].as_py(), mm["max"].as_py())
    return [a.to_json() for a in adds], marks


def write_arrow_rows(plan: WritePlan, rows, extras: dict[str, str] | None = None, subdir: str = "",
                     file_prefix: str = "part") -> tuple[list[str], dict[str, int]]:
    """Executor side: rows shaped by `shape_rows` (an Arrow table) written as data files of
    `plan`'s table (`_write_rows`): (AddFile JSON lines, identity high-water marks)."""
    return _write_rows(plan, rows, extras, subdir, file_prefix)


def _arrow_task(plan: WritePlan, extras: dict[str, str] | None = None, subdir: str = "", file_prefix: str = "part"):
    """A `mapInArrow` function writing each task's rows (flushed every DEFAULT_TARGET_FILE_ROWS)
    and yielding one row per flush: its AddFiles and identity marks, as JSON."""
    def task(batches):
        import pyarrow as pa

        pending: list = []
        count = 0

        def flush():
            adds, marks = _write_rows(plan, pa.Table.from_batches(pending), extras, subdir, file_prefix)
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


def _write_arrow(df, plan: WritePlan, extras: dict[str, str] | None = None, subdir: str = "",
                 file_prefix: str = "part") -> tuple[list[AddFile], dict[str, int]]:
    """Object stores (no Hadoop connector in plain PySpark): executors write the files with
    pyarrow's filesystem (`tahoe.write.files`) inside one `mapInArrow` job, stats from the rows
    in memory; the driver gets the AddFiles back. A violated check fails the job before that
    task writes; files of tasks that finished before a failure stay behind (unreferenced)."""
    out = _checked(df).mapInArrow(_arrow_task(plan, extras, subdir, file_prefix), "adds string, marks string")
    try:
        rows = out.collect()
    except Exception as e:  # noqa: BLE001
        msg = _violation_message(e)
        if msg is not None:
            raise constraint_error(msg) from None
        raise
    adds = [AddFile.from_dict(json.loads(a)["add"]) for r in rows for a in json.loads(r.adds)]
    return adds, merge_identity_marks(plan.schema, [json.loads(r.marks) for r in rows])


def _partition_values(rel: str, part_fields: list[StructField], part_phys: list[str], tz: str,
                      local: bool = False) -> dict:
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
        out[key] = _spark_pv_to_delta(v, f, tz, local)
    return out


def _spark_pv_to_delta(v: str | None, f: StructField, tz: str, local: bool = False) -> str | None:
    """Spark's directory value (Cast to string in the session time zone) → the Delta spec's
    serialized partition value (`local`: a timestamp kept as that session-zone wall-clock time,
    delta-spark's utcTimestampPartitionValues=false)."""
    if v is None:
        return None
    dt = f.type
    if isinstance(dt, PrimitiveType) and dt.name in ("string", "binary"):
        return v
    try:
        if isinstance(dt, PrimitiveType) and dt.name == "timestamp":
            naive = parse_partition_value(v, PrimitiveType("timestamp_ntz"))
            if local:
                return serialize_partition_value(naive, PrimitiveType("timestamp_ntz"))
            aware = naive.replace(tzinfo=ZoneInfo(tz)).astimezone(_dt.timezone.utc)
            return serialize_partition_value(aware, dt)
        return serialize_partition_value(parse_partition_value(v, dt), dt)
    except Exception as e:  # noqa: BLE001 - never commit a value readers cannot parse
        raise SchemaError(
            f"partition column '{f.name}' ({dt.simple_string()}): Spark wrote the partition value {v!r}, "
            f"which is not a valid {dt.simple_string()} partition value as the Delta spec serializes "
            f"them ({e}); nothing was committed") from None


# --- the data-source writer (format("delta").save) -----------------------------------------------



@dataclasses.dataclass
class _DSPlan:
    """One `format("delta")` write, shipped to its tasks, its commit and its abort."""
    plan: WritePlan
    write_id: str             # names the marker a commit leaves for abort (`guarded_commit`)
    auto_compact: str | None = None   # the session's auto compaction confs (JSON), for the commit


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
    """Driver side of `df.write.format("delta")`: the options mapped onto the planner
    (`plan_write`) — saveMode (`tahoe.spark.datasource` maps Spark's `.mode("error"|"ignore")`
    onto it), partitionBy, replaceWhere, mergeSchema, overwriteSchema, partitionOverwriteMode
    (else the session's, passed by the save wrapper), userMetadata, txnAppId/txnVersion, `delta.*`
    table properties for a table the write creates (as delta-spark's DataFrameWriter),
    `storage.<key>` storage options."""
    so = storage_options_of({**options, "path": path})
    pb = _option(options, "partitionBy") or _option(options, "__partition_columns")
    part_by = (json.loads(pb) if pb.startswith("[") else [c.strip() for c in pb.split(",") if c.strip()]) if pb else None
    save_mode = str(_option(options, SAVE_MODE_OPTION) or ("overwrite" if overwrite else "append")).lower()
    if save_mode == "errorifexists":
        save_mode = "error"
    if save_mode not in WRITE_MODES:
        raise ValueError(f"option {SAVE_MODE_OPTION} must be one of {WRITE_MODES}, got {save_mode!r}")
    properties = {k: v for k, v in options.items() if k.lower().startswith("delta.")}
    # the session's replaceWhere confs and time zone, handed over by the save wrapper (else
    # delta-spark's defaults: checked, data columns allowed; UTC)
    rw = str(_option(options, SESSION_REPLACE_WHERE_OPTION) or "true,true").split(",")
    check, data_columns = (rw + ["true", "true"])[0].strip() == "true", (rw + ["true", "true"])[1].strip() == "true"
    plan, _snap = plan_write(
        DeltaLog.for_table(path, so), table_schema_of(from_spark_schema(spark_schema)), mode=save_mode,
        partition_by=part_by, replace_where=_option(options, "replaceWhere"),
        schema_mode=schema_mode(_flag(options, "mergeSchema"), _flag(options, "overwriteSchema")),
        partition_overwrite_mode=_option(options, "partitionOverwriteMode"),
        session_overwrite_mode=_option(options, SESSION_OVERWRITE_MODE_OPTION), properties=properties,
        user_metadata=_option(options, "userMetadata"), txn_app_id=_option(options, "txnAppId"),
        txn_version=_option(options, "txnVersion"), storage_options=so, api="datasource",
        check_replace_where=check, replace_where_data_columns=data_columns, time_zone=option_time_zone(options),
        utc_timestamp_partition_values=str(_option(options, SESSION_UTC_PARTITION_VALUES_OPTION) or "true").lower()
        != "false")
    if _option(options, OPTIMIZED_WRITE_OPTION) is None and bool_property(
            plan.configuration, "delta.autoOptimize.optimizeWrite"):
        _logger.warning("table %s has delta.autoOptimize.optimizeWrite=true but this write was not shuffled for "
                        "it: tahoe's save wrapper does that in the driver (install tahoe there, or import tahoe.spark)",
                        plan.table_root)
    return _DSPlan(plan, uuid.uuid4().hex, _option(options, SESSION_AUTO_COMPACT_OPTION))


def datasource_write_task(ds: _DSPlan, batches) -> Any:
    """Executor side: the task's rows prepared as every Arrow-side writer prepares them
    (`tahoe.write.writer.prepare_rows`: cast, identity positions `partitionId << 33 + row` as
    monotonically_increasing_id, defaults and generated columns, constraints, the replaceWhere
    predicate), files written (`_write_rows`)."""
    import pyarrow as pa
    from pyspark import TaskContext

    if ds.plan.skip:
        for _ in batches:  # drain: Spark streams the rows to this worker either way
            pass
        return AddsMessage([], {})
    batches = list(batches)
    if not batches:
        return AddsMessage([], {})
    ctx = TaskContext.get()
    first = (ctx.partitionId() if ctx is not None else 0) << 33
    rows, _ = prepare_rows(pa.Table.from_batches(batches), ds.plan, first)
    adds, marks = _write_rows(ds.plan, rows)
    return AddsMessage(adds, marks)


@dataclasses.dataclass
class AddsMessage(WriterCommitMessage):
    """What a data-source write task sends the driver: its AddFile actions as JSON lines and the
    identity high-water marks of its rows."""
    adds: list
    marks: dict = dataclasses.field(default_factory=dict)


def _attempt_marker(ds: _DSPlan, key: str = "") -> tuple[Any, str]:
    """(store, path) of the marker a commit leaves in the table root before it sends anything
    (`guarded_commit`): while it is there, the files of the write may be referenced by a version.
    `key` tells apart the commits of one plan (a stream's batches)."""
    store, root = log_store_for(ds.plan.table_root, ds.plan.storage_options)
    return store, store.join(root, f"_tahoe_commit_attempt_{ds.write_id}{'_' + key if key else ''}")


def guarded_commit(ds: _DSPlan, commit: Callable[[], T], key: str = "") -> T:
    """Run `commit()` (a commit of the files `ds`'s tasks wrote) so that `datasource_abort`, which
    Spark calls in another Python worker when the commit fails, never deletes files a version may
    reference. The marker is written before anything is sent: a failure to write it fails the
    commit with nothing sent (abort then deletes the files); once it is written, any failure —
    an unknown outcome, a store that stops answering, a crash of the worker — leaves it, and abort
    keeps the files (`commit_write` has already deleted them when the commit surely did not land;
    VACUUM collects true orphans). A commit that landed removes it (best effort: a marker left
    behind is a hidden `_` file that readers and VACUUM ignore)."""
    store, marker = _attempt_marker(ds, key)
    store.write(marker, b"", overwrite=True)
    out = commit()
    try:
        store.delete(marker)
    except Exception as e:  # noqa: BLE001 - the commit landed; a stale marker only keeps files
        _log.warning("could not remove the commit marker %s: %s: %s", marker, type(e).__name__, e)
    return out


def datasource_commit(ds: _DSPlan, messages: list) -> int | None:
    """Driver side (a Python worker): one commit with every task's AddFiles (`commit_write`), on
    the snapshot the write was planned on, guarded so that `datasource_abort` never deletes on
    doubt (`guarded_commit`)."""
    plan = ds.plan
    if plan.skip:
        return None
    log = DeltaLog.for_table(plan.table_root, plan.storage_options)
    adds = [AddFile.from_dict(json.loads(a)["add"]) for m in messages for a in m.adds]
    snap = log.snapshot(version=plan.read_version) if plan.read_version >= 0 else None
    marks = merge_identity_marks(plan.schema, [getattr(m, "marks", {}) for m in messages])
    ac = json.loads(ds.auto_compact or "{}")
    hook = auto_compact_hook(None, ac.get("enabled"), AutoCompactSettings(**ac.get("settings", {})))
    num_rows = replaced = None
    cdcs: list = []
    if plan.replace_rows:   # a replaceWhere on data columns: the matching rows' files, their other rows again

        num_rows = sum(a.num_records or 0 for a in adds)
        replaced, kept, cdcs = replace_rows(log, snap, plan, adds)
        adds = adds + kept
    return guarded_commit(ds, lambda: commit_write(plan, log, snap, adds, marks, num_rows=num_rows,
                                                   post_commit=[hook], replaced=replaced, cdc_files=cdcs))


def datasource_abort(ds: _DSPlan, messages: list, key: str = "") -> None:
    """Spark calls this when a task or the commit failed. The written files are deleted only when
    no commit was attempted (no marker of `guarded_commit`): a failed task, or a commit that
    failed before sending anything. A marker — or a store that cannot say whether there is one —
    keeps them: they may be referenced by a version."""
    store, marker = _attempt_marker(ds, key)
    try:
        attempted = store.exists(marker)
    except Exception as e:  # noqa: BLE001 - cannot tell: keep the files
        _log.warning("could not check the commit marker %s (%s: %s): the written files are kept",
                     marker, type(e).__name__, e)
        return
    if attempted:
        try:
            store.delete(marker)
        except Exception:  # noqa: BLE001 - a stale marker only keeps files
            pass
        return
    adds = [AddFile.from_dict(json.loads(a)["add"]) for m in messages for a in getattr(m, "adds", [])]
    delete_data_files(store, ds.plan.table_root, adds)
