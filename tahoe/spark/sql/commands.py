"""Running Delta's SQL statements with tahoe's operations: `execute(spark, statement)` returns the DataFrame
delta-spark returns, or None when the statement is not about a Delta table (it then goes to Spark).

  1. Each statement is one tahoe operation through the code the Python APIs use (`tahoe.spark.DeltaTable`,
     `tahoe.maintenance`, `tahoe.txn`, `tahoe.spark.write`); queries inside run on Spark after
     `relations.rewrite`.
  2. Session confs delta-spark reads at a statement are read here too (`confs`).
  3. Results as delta-spark's: DELETE / UPDATE `num_affected_rows`; MERGE `num_affected_rows,
     num_updated_rows, num_deleted_rows, num_inserted_rows`; OPTIMIZE `path, metrics`; VACUUM `path`
     (DRY RUN: the files); RESTORE / CLONE metrics; DESCRIBE HISTORY / DETAIL; DDL an empty frame."""

from __future__ import annotations

import datetime as dt
from typing import Any

from ...errors import AnalysisException, UnsupportedFeatureError
from ...log import DeltaLog
from ...protocol.column_paths import quote_identifier
from ..types import local_dataframe, to_spark_type, from_spark_schema
from . import confs
from . import statements as st
from .catalog import (
    SESSION_CATALOG, CatalogEntry, Resolved, create_entry, drop_entry, lookup, raw_sql, resolve, spark_ddl,
    table_not_found, with_table,
)
from .parser import TokenParser
from .relations import read_table, run_query
from ... import txn
from ...maintenance.clone import clone, clone_parquet
from ...maintenance.convert import convert_to_delta, scan_parquet
from ...maintenance.vacuum import RETENTION_CHECK_CONF, vacuum
from ...protocol import column_mapping
from ...protocol.properties import (
    COLUMN_DEFAULT, GENERATION_EXPRESSION, IDENTITY_ALLOW_EXPLICIT_INSERT, IDENTITY_START, IDENTITY_STEP,
)
from ...protocol.schema import StructField, StructType, ArrayType, MapType
from ...txn.ddl import parse_ddl
from ...txn.table_ops import create_table, add_columns, alter_column
from ..delta_table import DeltaTable, update_where, delete_where, affected_rows
from ..fast_write import write_delta
from ..optimize import optimize_full
from ..session import session_timestamp_ms

__all__ = ["execute"]


def _empty(spark: Any):
    from pyspark.sql.types import StructType

    return spark.createDataFrame([], StructType([]))


def _conf(spark: Any, key: str, default: str) -> str:
    try:
        v = spark.conf.get(key, None)
    except Exception:  # noqa: BLE001 - an unreadable conf is an unset one
        v = None
    return default if v is None else str(v)


def _delta(spark: Any, table: st.TableName) -> Resolved:
    """The Delta table a Delta-only statement names (anything else is an error, as in
    delta-spark)."""
    r = resolve(spark, table)
    if r is None:
        raise AnalysisException(f"[DELTA_TABLE_ONLY_OPERATION] {table.text} is not a Delta table")
    return r


def _delta_table(spark: Any, r: Resolved, alias: str | None = None):
    t = DeltaTable.forPath(spark, r.path)
    return t.alias(alias) if alias else t


def _query(spark: Any, text: str):
    return run_query(spark, text)


def execute(spark: Any, stmt: Any) -> Any:
    handler = _HANDLERS.get(type(stmt))
    if handler is None:
        return None
    return handler(spark, stmt)


# --- Delta's own statements ----------------------------------------------------------------------

def _vacuum(spark: Any, s: st.Vacuum):
    from pyspark.sql.types import StringType, StructField, StructType

    r = _delta(spark, s.table)
    log = DeltaLog.for_table(r.path)
    inventory = None
    if s.inventory_table is not None or s.inventory_query is not None:
        if s.lite:
            raise AnalysisException("VACUUM ... LITE takes no inventory: USING INVENTORY replaces the listing of "
                                    "VACUUM FULL")
        inventory = _inventory(spark, s)
    result = vacuum(log, s.retain_hours, dry_run=s.dry_run, inventory=inventory,
                    enforce_retention_duration=_conf(spark, RETENTION_CHECK_CONF, "true").lower() != "false",
                    full=not s.lite,
                    log_commits=_conf(spark, "spark.databricks.delta.vacuum.logging.enabled", "true").lower() != "false")
    root = log.table_root.rstrip("/")
    paths = [f"{root}/{p}" for p in result.paths] if s.dry_run else [root]
    return local_dataframe(spark, [(p,) for p in paths], StructType([StructField("path", StringType())]))


_INVENTORY_SCHEMA = (("path", ("string",)), ("length", ("bigint", "int")), ("isDir", ("boolean",)),
                     ("modificationTime", ("bigint", "int")))


def _inventory(spark: Any, s: st.Vacuum) -> list[tuple]:
    """VACUUM ... USING INVENTORY: the rows of the inventory (a table or a query) with
    delta-spark's schema (path string, length bigint, isDir boolean, modificationTime bigint)."""
    if s.inventory_table is not None:
        inv = s.inventory_table
        src = resolve(spark, inv, must_exist=False)
        df = read_table(spark, src.path, None) if src is not None else raw_sql(spark, f"SELECT * FROM {inv.text}")
    else:
        df = _query(spark, s.inventory_query)   # type: ignore[arg-type]
    types = {n.lower(): t for n, t in df.dtypes}
    bad = [f"{n} {'/'.join(ok)}" for n, ok in _INVENTORY_SCHEMA if types.get(n.lower()) not in ok]
    if bad:
        raise AnalysisException(f"[DELTA_INVALID_INVENTORY_SCHEMA] The schema for the specified INVENTORY does not "
                                f"contain all of the required fields ({', '.join(bad)}); it has {df.dtypes}")
    names = {n.lower(): n for n in df.columns}
    cols = [quote_identifier(names[n.lower()]) for n, _ in _INVENTORY_SCHEMA]
    return [tuple(row) for row in df.selectExpr(*cols).collect()]


def _describe_detail(spark: Any, s: st.DescribeDetail):
    from pyspark.sql import functions as F

    r = _delta(spark, s.table)
    detail = _delta_table(spark, r).detail()
    if r.entry is None:
        return detail
    # a table by name: its name in the catalog (delta-spark's catalogTable.qualifiedName)
    name = f"{SESSION_CATALOG}.{r.entry.database}.{r.entry.name}"
    return detail.withColumn("name", F.lit(name))


def _describe_history(spark: Any, s: st.DescribeHistory):
    return _delta_table(spark, _delta(spark, s.table)).history(s.limit)


def _generate(spark: Any, s: st.Generate):
    _delta_table(spark, _delta(spark, s.table)).generate(s.mode)
    return _empty(spark)


def _convert(spark: Any, s: st.Convert):
    if s.table.is_path:
        if s.table.format == "delta":
            raise AnalysisException(f"CONVERT TO DELTA: {s.table.text} is already a Delta table")
        if s.table.format == "iceberg":
            raise UnsupportedFeatureError(_ICEBERG.format(what="CONVERT TO DELTA", table=s.table.text))
        convert_to_delta(s.table.path, s.partition_schema, collect_stats=s.collect_stats)
        return _empty(spark)
    entry = lookup(spark, s.table.parts)
    if entry is None:
        raise table_not_found(s.table)
    if entry.is_delta:
        raise AnalysisException(f"CONVERT TO DELTA: {s.table.text} is already a Delta table")
    if (entry.provider or "").lower() != "parquet" or entry.location is None:
        raise UnsupportedFeatureError(f"CONVERT TO DELTA: {s.table.text} is a {entry.provider} table; tahoe converts "
                                      f"parquet tables (and parquet.`/path`)")
    if (entry.table_type or "").upper() != "EXTERNAL":
        raise UnsupportedFeatureError(
            f"CONVERT TO DELTA of the managed table {s.table.text} is not supported by tahoe (its catalog entry "
            f"cannot change provider without dropping its files): convert parquet.`{entry.location}` and register "
            f"it with CREATE TABLE ... USING delta LOCATION")
    partition_schema = s.partition_schema
    convert_to_delta(entry.location, partition_schema, collect_stats=s.collect_stats)
    snap = DeltaLog.for_table(entry.location).snapshot()
    drop_entry(spark, entry)   # external: the files stay
    create_entry(spark, (entry.database, entry.name), spark_ddl(snap.schema), list(snap.partition_columns),
                 entry.location, None)
    return _empty(spark)


def _restore(spark: Any, s: st.Restore):
    t = _delta_table(spark, _delta(spark, s.table))
    if s.temporal.version is not None:
        return t.restoreToVersion(s.temporal.version)
    return t.restoreToTimestamp(_timestamp_text(spark, s.temporal))


def _timestamp_text(spark: Any, temporal: st.Temporal) -> str:
    """A temporal clause's timestamp as text RESTORE / CLONE take (an expression evaluated)."""
    if temporal.timestamp is not None:
        return temporal.timestamp
    row = raw_sql(spark, f"SELECT unix_millis(CAST(({temporal.timestamp_expr}) AS TIMESTAMP)) AS ms").collect()[0]
    if row["ms"] is None:
        raise AnalysisException(f"the timestamp expression {temporal.timestamp_expr!r} is NULL")
    return dt.datetime.fromtimestamp(row["ms"] / 1000, tz=dt.timezone.utc).isoformat()


def _optimize(spark: Any, s: st.Optimize):
    if s.full:
        r = _delta(spark, s.table)
        return optimize_full(spark, DeltaLog.for_table(r.path))
    b = _delta_table(spark, _delta(spark, s.table)).optimize()
    if s.where:
        b = b.where(s.where)
    return b.executeZOrderBy(*s.zorder) if s.zorder else b.executeCompaction()


def _reorg(spark: Any, s: st.Reorg):
    b = _delta_table(spark, _delta(spark, s.table)).reorg()
    if s.where:
        b = b.where(s.where)
    return b.executePurge()


_ICEBERG = ("{what} {table}: Iceberg tables are not supported by tahoe (delta-spark converts and clones them with "
            "delta-iceberg, a module apart from delta-spark); convert the table's data files with "
            "CONVERT TO DELTA parquet.`path` instead")


def _clone(spark: Any, s: st.Clone):
    if s.source.is_path and s.source.format == "iceberg":
        raise UnsupportedFeatureError(_ICEBERG.format(what="SHALLOW CLONE", table=s.source.text))
    if s.source.is_path and s.source.format == "parquet":
        return _clone_parquet(spark, s)
    source = _delta(spark, s.source)
    version = s.temporal.version if s.temporal is not None else None
    timestamp = None
    if s.temporal is not None and version is None:
        timestamp = session_timestamp_ms(spark, _timestamp_text(spark, s.temporal))
    props = {k: v for k, v in s.properties}

    def run(path: str, replace: bool) -> dict:
        return clone(source.path, path, version=version, timestamp=timestamp, shallow=s.shallow, replace=replace,
                     properties=props)

    metrics = with_table(spark, s.table, s.mode, s.location, None, lambda path, replace: run(path, replace),
                          schema_of=lambda: DeltaLog.for_table(source.path).snapshot(version=version).schema
                          if timestamp is None else DeltaLog.for_table(source.path).snapshot(timestamp=timestamp).schema)
    return _clone_result(spark, metrics)


def _clone_parquet(spark: Any, s: st.Clone):
    """CREATE [OR REPLACE] TABLE t SHALLOW CLONE parquet.`/path`: a Delta table naming the
    parquet files where they are."""
    if not s.shallow:
        raise UnsupportedFeatureError("DEEP CLONE of a parquet table is not supported: use SHALLOW CLONE")
    if s.temporal is not None:
        raise AnalysisException(f"{s.source.text} is a parquet table: it has no versions to time travel to")
    props = {k: v for k, v in s.properties}
    metrics = with_table(spark, s.table, s.mode, s.location, None,
                         lambda path, replace: clone_parquet(s.source.path, path, replace=replace, properties=props),
                         schema_of=lambda: scan_parquet(s.source.path, None, collect_stats=False).schema)
    return _clone_result(spark, metrics)


def _clone_result(spark: Any, metrics: dict | None):
    from pyspark.sql.types import LongType, StructField, StructType

    if metrics is None:
        return _empty(spark)
    cols = ["source_table_size", "source_num_of_files", "num_removed_files", "num_copied_files",
            "removed_files_size", "copied_files_size"]
    keys = ["sourceTableSize", "sourceNumOfFiles", "numRemovedFiles", "numCopiedFiles", "removedFilesSize",
            "copiedFilesSize"]
    return local_dataframe(spark, [tuple(int(metrics.get(k) or 0) for k in keys)],
                                 StructType([StructField(c, LongType()) for c in cols]))


# --- CREATE TABLE ----------------------------------------------------------------------------------

def _schema_from_columns(columns: tuple[st.ColumnDef, ...]):
    fields = []
    for c in columns:
        dtype = parse_ddl(f"{quote_identifier(c.name)} {c.type_sql}").fields[0].type
        md: dict[str, Any] = {}
        if c.comment is not None:
            md["comment"] = c.comment
        if c.generated_as is not None:
            md[GENERATION_EXPRESSION] = c.generated_as
        if c.identity is not None:
            md[IDENTITY_START], md[IDENTITY_STEP], md[IDENTITY_ALLOW_EXPLICIT_INSERT] = c.identity
        if c.default_sql is not None:
            md[COLUMN_DEFAULT] = c.default_sql
        _no_nested_not_null(dtype, c.name, None)
        fields.append(StructField(c.name, dtype, c.nullable, md))
    return StructType(fields)


_INVALID_CHARS = " ,;{}()\n\t="


def _check_column_names(schema: Any, configuration: dict) -> None:
    """delta-spark's DELTA_INVALID_CHARACTERS_IN_COLUMN_NAMES: without column mapping, no column
    name (nested ones included) holds one of ` ,;{}()\\n\\t=`."""
    if column_mapping.mode(configuration) != "none":
        return

    def names(dt: Any) -> list[str]:
        if isinstance(dt, StructType):
            return [n for f in dt.fields for n in [f.name] + names(f.type)]
        if isinstance(dt, ArrayType):
            return names(dt.element_type)
        if isinstance(dt, MapType):
            return names(dt.key_type) + names(dt.value_type)
        return []

    bad = [n for n in names(schema) if any(c in _INVALID_CHARS for c in n)]
    if bad:
        raise AnalysisException(
            f"[DELTA_INVALID_CHARACTERS_IN_COLUMN_NAMES] Found invalid character(s) among ' ,;{{}}()\\n\\t=' in the "
            f"column names of your schema: {bad}. Please use other characters and try again, or enable column "
            f"mapping (delta.columnMapping.mode = 'name') to keep using these characters.")


def _no_nested_not_null(dtype: Any, name: str, inside: str | None) -> None:
    """delta-spark's DELTA_NESTED_NOT_NULL_CONSTRAINT: no NOT NULL inside an array or a map (it
    could not be enforced)."""
    if isinstance(dtype, StructType):
        for f in dtype.fields:
            if inside is not None and not f.nullable:
                raise AnalysisException(
                    f"[DELTA_NESTED_NOT_NULL_CONSTRAINT] The {inside} type of the field {name} contains a NOT NULL "
                    f"constraint. Delta does not support NOT NULL constraints nested within arrays or maps.")
            _no_nested_not_null(f.type, f"{name}.{f.name}", inside)
    elif isinstance(dtype, ArrayType):
        _no_nested_not_null(dtype.element_type, name, "array")
    elif isinstance(dtype, MapType):
        _no_nested_not_null(dtype.key_type, name, "map")
        _no_nested_not_null(dtype.value_type, name, "map")


def _properties(s: st.CreateTable) -> dict[str, str]:
    props = {k: v for k, v in s.properties}
    for k, v in s.options:
        if k.lower() == "path":
            continue
        if k.startswith("delta."):
            props.setdefault(k, v)
        else:
            raise UnsupportedFeatureError(f"CREATE TABLE ... USING delta OPTIONS ({k!r}): tahoe takes table settings "
                                          f"as TBLPROPERTIES (delta.* keys)")
    return props


def _create_table(spark: Any, s: st.CreateTable):
    provider = s.provider
    if provider is None and not s.table.is_path:
        if _conf(spark, "spark.sql.sources.default", "parquet").lower() != "delta":
            return None
    elif provider is not None and provider != "delta":
        if s.table.is_path and s.table.format == "delta":
            raise AnalysisException(f"CREATE TABLE {s.table.text} USING {provider}: a delta.`path` table is Delta")
        return None
    location = s.location
    for k, v in s.options:
        if k.lower() == "path":
            if location is not None and location != v:
                raise AnalysisException("LOCATION and OPTIONS (path ...) name different locations")
            location = v
    props = _properties(s)
    if s.partition_columns and s.columns is not None:
        raise AnalysisException("PARTITIONED BY with column types is for a CREATE TABLE without a column list")
    if s.query is not None:
        if s.columns is not None:
            raise AnalysisException("[DELTA_OPERATION_NOT_ALLOWED] CREATE TABLE AS SELECT cannot also define "
                                    "columns")
        return _create_table_as_select(spark, s, location, props)
    columns = s.columns if s.columns is not None else (s.partition_columns or None)

    def schema_of():
        if columns is not None:
            return _schema_from_columns(columns)
        if location is not None and DeltaLog.for_table(location).exists():
            return DeltaLog.for_table(location).snapshot().schema
        if s.table.is_path and DeltaLog.for_table(s.table.path).exists():
            return DeltaLog.for_table(s.table.path).snapshot().schema
        raise AnalysisException(f"[DELTA_SCHEMA_NOT_PROVIDED] CREATE TABLE {s.table.text}: give the columns, or a "
                                f"LOCATION that holds a Delta table")

    def make(path: str, existing: bool) -> None:
        log = DeltaLog.for_table(path)
        if existing and s.mode not in ("replace", "overwrite"):
            # registering an existing table: what the statement says must be what the table is
            snap = log.snapshot()
            if columns is not None and _plain(_schema_from_columns(columns)) != _plain(snap.schema):
                raise AnalysisException(
                    f"[DELTA_CREATE_TABLE_SCHEME_MISMATCH] The specified schema does not match the existing schema at "
                    f"{path}.\n== Specified ==\n{_schema_from_columns(columns).simple_string()}\n== Existing ==\n"
                    f"{snap.schema.simple_string()}")
            if s.partition_by and [c.lower() for c in s.partition_by] != [c.lower() for c in snap.partition_columns]:
                raise AnalysisException(
                    f"[DELTA_CREATE_TABLE_WITH_DIFFERENT_PARTITIONING] The specified partitioning {list(s.partition_by)} "
                    f"does not match the existing partitioning {list(snap.partition_columns)} at {path}")
            if props and any(snap.configuration.get(k) != v for k, v in props.items()):
                raise AnalysisException(
                    f"[DELTA_CREATE_TABLE_WITH_DIFFERENT_PROPERTY] The specified properties do not match the existing "
                    f"properties at {path}")
            return None
        mode = {"error": "error", "ignore": "ignore", "replace": "replace", "overwrite": "overwrite"}[s.mode]
        if columns is not None:
            _check_column_names(schema_of(), {**confs.default_properties(spark), **props})
        create_table(log, schema_of(),
                     list(s.partition_by), {**confs.default_properties(spark), **props}, description=s.comment,
                     mode=mode,
                     cluster_by=list(s.cluster_by) if s.cluster_by is not None else None,
                     managed=location is None and not s.table.is_path)
        return None

    with_table(spark, s.table, s.mode, location, s.comment, make, schema_of, lambda: list(s.partition_by))
    return _empty(spark)


def _plain(schema: Any) -> Any:
    """A schema without field metadata (comments, column mapping ids) for comparing definitions."""
    return StructType([StructField(f.name.lower(), f.type, f.nullable) for f in schema.fields])


def _create_table_as_select(spark: Any, s: st.CreateTable, location: str | None, props: dict):
    df = _query(spark, s.query)   # type: ignore[arg-type]
    operation = {"error": "CREATE TABLE AS SELECT", "ignore": "CREATE TABLE AS SELECT",
                 "overwrite": "CREATE OR REPLACE TABLE AS SELECT", "replace": "REPLACE TABLE AS SELECT"}[s.mode]

    def make(path: str, existing: bool) -> None:
        if existing and s.mode not in ("replace", "overwrite"):
            raise AnalysisException(f"[DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION] Cannot create table {s.table.text}: "
                                    f"the location {path} already holds a Delta table")
        params = {"isManaged": str(location is None and not s.table.is_path).lower(), "description": s.comment,
                  "partitionBy": list(s.partition_by), "clusterBy": list(s.cluster_by or ()), "properties": props}
        write_delta(df, path, mode="overwrite" if existing else "error", partition_by=list(s.partition_by),
                    properties={**confs.default_properties(spark), **props}, description=s.comment,
                    replace_table=existing, user_metadata=confs.user_metadata(spark),
                    cluster_by=list(s.cluster_by) if s.cluster_by is not None else None, operation=(operation, params))

    def schema_of():
        return from_spark_schema(df.schema)

    with_table(spark, s.table, s.mode, location, s.comment, make, schema_of, lambda: list(s.partition_by))
    return _empty(spark)


# --- ALTER TABLE -----------------------------------------------------------------------------------

def _alter_table(spark: Any, s: st.AlterTable):
    kind = s.action[0]
    if kind in ("add_constraint", "drop_constraint", "drop_feature", "cluster_by"):
        r = _delta(spark, s.table)
    else:
        r = resolve(spark, s.table)
        if r is None:
            return None
    log = DeltaLog.for_table(r.path)
    if kind == "add_constraint":
        _, name, expr = s.action

        def violations(e: str) -> int:
            return _delta_table(spark, r).toDF().where(f"NOT coalesce(({e}), false)").count()

        txn.add_constraint(log, name, expr, validate=violations)
    elif kind == "drop_constraint":
        _, name, if_exists = s.action
        txn.drop_constraint(log, name, if_exists=if_exists)
    elif kind == "drop_feature":
        _, name, truncate = s.action
        _delta_table(spark, r).dropFeatureSupport(name, truncate)
    elif kind == "cluster_by":
        txn.cluster_by(log, list(s.action[1]) if s.action[1] is not None else None)
    elif kind == "add_columns":
        _, cols, positions = s.action
        _check_column_names(_schema_from_columns(cols), log.snapshot().configuration)
        add_columns(log, _schema_from_columns(cols).fields, positions, parents=[c.parent for c in cols])
    elif kind == "rename_column":
        txn.rename_column(log, s.action[1], s.action[2])
    elif kind == "drop_columns":
        _, names, if_exists = s.action
        schema = log.snapshot().schema
        for name in names:
            if schema.get(name.split(".")[0], case_insensitive=True) is None:
                if if_exists:
                    continue
                raise AnalysisException(f"[UNRESOLVED_COLUMN] cannot drop column {name}: the table has no such column")
            txn.drop_column(log, name)
    elif kind == "replace_columns":
        _check_column_names(_schema_from_columns(s.action[1]), log.snapshot().configuration)
        txn.update_schema(log, _schema_from_columns(s.action[1]), merge=False)
    elif kind == "sync_identity":
        _sync_identity(spark, r, log, s.action[1])
    elif kind == "alter_column":
        _, name, changes = s.action
        kw: dict[str, Any] = {}
        if "new_name" in changes:
            # CHANGE COLUMN's Hive form names the column again, with its type
            name = _change_column_name(log, name, changes["new_name"])
        if "type" in changes:
            kw["data_type"] = _schema_from_columns((st.ColumnDef("x", changes["type"]),)).fields[0].type
        if "nullable" in changes:
            kw["nullable"] = changes["nullable"]
        if "comment" in changes:
            kw["comment"] = changes["comment"]
        if "position" in changes:
            kw["position"] = changes["position"]
        if "default" in changes:
            raise UnsupportedFeatureError("ALTER COLUMN ... SET / DROP DEFAULT is not supported by tahoe")

        def nulls(column: str) -> int:
            return _delta_table(spark, r).toDF().where(f"{quote_identifier(column)} IS NULL").count()

        alter_column(log, name, check_no_nulls=nulls, **kw)
    elif kind == "set_properties":
        txn.set_properties(log, dict(s.action[1]))
    elif kind == "unset_properties":
        txn.unset_properties(log, list(s.action[1]), if_exists=s.action[2])
    else:   # pragma: no cover - the grammar makes no other action
        return None
    return _empty(spark)


def _change_column_name(log: DeltaLog, name: str, new_name: str) -> str:
    """CHANGE COLUMN a b ...: the column renamed first when `b` differs from `a` (which needs
    column mapping, as RENAME COLUMN); the name the other changes then apply to."""
    path = name.split(".")
    if new_name.lower() == path[-1].lower():
        return name
    txn.rename_column(log, name, new_name)
    return ".".join(path[:-1] + [new_name])


def _sync_identity(spark: Any, r: Resolved, log: DeltaLog, column: str) -> None:
    """ALTER TABLE ... ALTER COLUMN c SYNC IDENTITY: the high-water mark of identity column `c`
    moved up to the values the table holds — `start + n * step` for the smallest n with
    `start + n * step >= max(c)` (`<= min(c)` for a negative step), so that the next value
    generated is past every value written (delta-spark's; the mark never moves back)."""
    from pyspark.sql import functions as F

    f = log.snapshot().schema.get(column, case_insensitive=True)
    if f is None:
        raise AnalysisException(f"[UNRESOLVED_COLUMN] the table has no column {column!r}")
    if IDENTITY_START not in f.metadata:
        raise AnalysisException(f"[DELTA_IDENTITY_COLUMNS_ALTER_NON_IDENTITY_COLUMN] ALTER TABLE ALTER COLUMN SYNC "
                                f"IDENTITY cannot be called on a non IDENTITY column ({f.name})")
    start, step = int(f.metadata[IDENTITY_START]), int(f.metadata[IDENTITY_STEP])
    agg = F.max if step > 0 else F.min
    edge = _delta_table(spark, r).toDF().agg(agg(F.col(quote_identifier(f.name)))).collect()[0][0]
    if edge is None:
        return
    n = max(0, -((start - int(edge)) // step)) if step > 0 else max(0, -((int(edge) - start) // -step))
    txn.set_identity_high_water_mark(log, f.name, start + n * step)


# --- DML -------------------------------------------------------------------------------------------

def _target_alias(table: st.TableName, alias: str | None) -> str | None:
    if alias is not None:
        return alias
    return table.parts[-1] if table.parts else None


def _strip_alias(column: str, alias: str | None) -> str:
    if alias and column.lower().startswith(alias.lower() + "."):
        return column[len(alias) + 1:]
    return column


def _view_target(spark: Any, table: st.TableName) -> Resolved | None:
    """The Delta table a view over it stands for as a DML target — a view defined exactly as
    `SELECT * FROM delta_table` (delta-spark: "You can apply a SQL MERGE operation on a SQL VIEW
    only if the view has been defined as CREATE VIEW viewName AS SELECT * FROM deltaTable")."""
    if table.is_path:
        return None
    entry = lookup(spark, table.parts)
    if entry is None or entry.view_text is None:
        return None
    p = TokenParser(entry.view_text)
    try:
        p.expect("SELECT")
        p.expect_op("*")
        p.expect("FROM")
        inner = p.table_name()
        p.alias()
        p.done()
    except AnalysisException:
        return None
    if not inner.is_path and len(inner.parts) == 1 and not entry.temporary and entry.view_database:
        inner = st.TableName(parts=(entry.view_database,) + inner.parts, text=inner.text)
    return resolve(spark, inner, must_exist=False)


def _merge(spark: Any, s: st.Merge):
    r = resolve(spark, s.target)
    if r is None:
        r = _view_target(spark, s.target)
    if r is None:
        return None
    target_alias = _target_alias(s.target, s.target_alias)
    if s.source_query is not None:
        source = _query(spark, s.source_query)
        source_alias = s.source_alias
    else:
        src = resolve(spark, s.source_table, must_exist=False)   # type: ignore[arg-type]
        if src is not None:
            source = read_table(spark, src.path, s.source_temporal)
        else:
            if s.source_temporal is not None:
                raise AnalysisException(f"time travel needs a Delta table: {s.source_table.text} is not one")  # type: ignore[union-attr]
            source = raw_sql(spark, f"SELECT * FROM {s.source_table.text}")   # type: ignore[union-attr]
        source_alias = s.source_alias or (s.source_table.parts[-1] if s.source_table.parts else None)  # type: ignore[union-attr]
    if source_alias:
        source = source.alias(source_alias)
    b = _delta_table(spark, r, target_alias).merge(source, s.condition)
    for c in s.clauses:
        values = None if c.assignments is None else {_strip_alias(k, target_alias): v for k, v in c.assignments}
        if c.kind == "matched":
            if c.action == "delete":
                b = b.whenMatchedDelete(c.condition)
            elif values is None:
                b = b.whenMatchedUpdateAll(c.condition)
            else:
                b = b.whenMatchedUpdate(c.condition, values)
        elif c.kind == "notMatched":
            b = b.whenNotMatchedInsertAll(c.condition) if values is None else b.whenNotMatchedInsert(c.condition, values)
        elif c.action == "delete":
            b = b.whenNotMatchedBySourceDelete(c.condition)
        else:
            b = b.whenNotMatchedBySourceUpdate(c.condition, values)
    if s.schema_evolution or confs.auto_merge(spark):
        b = b.withSchemaEvolution()
    return b.execute()


def _update(spark: Any, s: st.Update):
    r = resolve(spark, s.table)
    if r is None:
        return None
    alias = _target_alias(s.table, s.alias)
    values = {_strip_alias(k, alias): v for k, v in s.assignments}
    metrics = update_where(_delta_table(spark, r, alias), s.where, values)
    return _affected(spark, metrics.get("numUpdatedRows"))


def _delete(spark: Any, s: st.Delete):
    r = resolve(spark, s.table)
    if r is None:
        return None
    metrics = delete_where(_delta_table(spark, r, _target_alias(s.table, s.alias)), s.where)
    return _affected(spark, metrics.get("numDeletedRows"))


def _truncate(spark: Any, s: st.Truncate):
    r = resolve(spark, s.table)
    if r is None:
        return None
    delete_where(_delta_table(spark, r))
    return _empty(spark)


def _affected(spark: Any, n: Any):
    """delta-spark's result of DELETE / UPDATE: one row, `num_affected_rows` (a nullable long)."""
    return affected_rows(spark, n)


def _insert(spark: Any, s: st.Insert):
    from pyspark.sql import functions as F

    r = resolve(spark, s.table)
    if r is None:
        return None
    snap = DeltaLog.for_table(r.path).snapshot()
    df = _query(spark, s.query)
    static = {k.lower(): v for k, v in (s.partition_spec or ()) if v is not None}
    schema = snap.schema
    evolve = s.schema_evolution or confs.auto_merge(spark)
    if s.by_name:
        names = list(df.columns)
    elif s.columns is not None:
        if len(s.columns) != len(df.columns):
            raise AnalysisException(f"[INSERT_COLUMN_ARITY_MISMATCH] {s.table.text}: {len(s.columns)} columns named, "
                                    f"{len(df.columns)} given")
        names = list(s.columns)
    else:
        names = _insert_columns(schema, len(df.columns), set(static), s.table.text,
                                list(df.columns) if evolve else None)
    cols = []
    for have, want in zip(df.columns, names):
        f = schema.get(want, case_insensitive=True)
        if f is None:
            if not evolve:
                raise AnalysisException(f"[UNRESOLVED_COLUMN] {s.table.text} has no column {want!r}")
            cols.append(F.col(quote_identifier(have)).alias(want))    # a new column (schema evolution)
            continue
        cols.append(F.col(quote_identifier(have)).cast(to_spark_type(f.type)).alias(f.name))
    for name, value in static.items():
        f = schema.get(name, case_insensitive=True)
        if f is None:
            raise AnalysisException(f"[UNRESOLVED_COLUMN] {s.table.text} has no partition column {name!r}")
        cols.append(F.lit(value).cast(to_spark_type(f.type)).alias(f.name))
    df = df.select(*cols)
    replace_where = s.replace_where
    if s.overwrite and static and replace_where is None:
        replace_where = " AND ".join(f"{quote_identifier(schema.get(k, case_insensitive=True).name)} = "  # type: ignore[union-attr]
                                     f"CAST({_sql_literal(v)} AS {schema.get(k, case_insensitive=True).type.simple_string()})"  # type: ignore[union-attr]
                                     for k, v in static.items())
    mode = "overwrite" if s.overwrite or replace_where is not None else "append"
    app_id, txn_version = confs.idempotent_write(spark)
    check, data_columns = confs.replace_where_settings(spark)
    write_delta(df, r.path, mode=mode, replace_where=replace_where, merge_schema=evolve,
                user_metadata=confs.user_metadata(spark), txn_app_id=app_id, txn_version=txn_version,
                check_replace_where=check or s.replace_where is None, replace_where_data_columns=data_columns)
    confs.after_write(spark)
    return _empty(spark)


def _sql_literal(v: str) -> str:
    return "'" + str(v).replace("\\", "\\\\").replace("'", "\\'") + "'"


def _insert_columns(schema: Any, n: int, static: set[str], name: str, evolving: list[str] | None = None) -> list[str]:
    """The columns an INSERT without a column list fills, by position: every column but the static
    partition columns — or, when fewer values are given, the ones that are not generated or
    identity columns (the table computes those). With schema evolution (`evolving`: the query's
    column names), values past the table's columns are new columns named as the query names
    them."""
    every = [f.name for f in schema.fields if f.name.lower() not in static]
    if n == len(every):
        return every
    if evolving is not None and n > len(every):
        return every + evolving[len(every):]
    given = [f.name for f in schema.fields if f.name.lower() not in static
             and GENERATION_EXPRESSION not in f.metadata and IDENTITY_START not in f.metadata]
    if n == len(given):
        return given
    kind = "TOO_MANY_DATA_COLUMNS" if n > len(every) else "NOT_ENOUGH_DATA_COLUMNS"
    raise AnalysisException(f"[INSERT_COLUMN_ARITY_MISMATCH.{kind}] Cannot write to {name}: the table "
                            f"has {len(every)} columns ({', '.join(every)}) but the data has {n}"
                            + (" (INSERT WITH SCHEMA EVOLUTION, or spark.databricks.delta.schema.autoMerge.enabled, "
                               "adds the others)" if n > len(every) else ""))


# --- catalog views of Delta tables -----------------------------------------------------------------

def _describe_table(spark: Any, s: st.DescribeTable):
    from pyspark.sql.types import StringType, StructField, StructType

    r = resolve(spark, s.table, must_exist=False)
    if r is None:
        return None
    snap = DeltaLog.for_table(r.path).snapshot()
    rows = []
    if s.column is not None:
        f = snap.schema.get(s.column, case_insensitive=True)
        if f is None:
            raise AnalysisException(f"[UNRESOLVED_COLUMN] {s.table.text} has no column {s.column!r}")
        rows = [("col_name", f.name), ("data_type", to_spark_type(f.type).simpleString()),
                ("comment", f.metadata.get("comment"))]
        return local_dataframe(spark, rows, StructType([StructField("info_name", StringType()),
                                                       StructField("info_value", StringType())]))
    for f in snap.schema.fields:
        rows.append((f.name, to_spark_type(f.type).simpleString(), f.metadata.get("comment")))
    if snap.partition_columns:
        rows += [("# Partition Information", "", ""), ("# col_name", "data_type", "comment")]
        for c in snap.partition_columns:
            f = snap.schema.get(c)
            rows.append((c, to_spark_type(f.type).simpleString(), f.metadata.get("comment")))   # type: ignore[union-attr]
    if s.extended:
        md = snap.metadata
        entry: CatalogEntry | None = r.entry
        rows += [("", "", ""), ("# Detailed Table Information", "", "")]
        if entry is not None:
            rows += [("Catalog", "spark_catalog", ""), ("Database", entry.database, ""), ("Table", entry.name, ""),
                     ("Type", entry.table_type or "", "")]
        rows += [("Name", md.name or "", ""), ("Description", md.description or "", ""),
                 ("Location", r.path, ""), ("Provider", "delta", ""),
                 ("Table Properties", "[" + ",".join(f"{k}={v}" for k, v in sorted(md.configuration.items())) + "]", "")]
    return local_dataframe(spark, rows, StructType([StructField("col_name", StringType()),
                                                   StructField("data_type", StringType()),
                                                   StructField("comment", StringType())]))


def _show_tblproperties(spark: Any, s: st.ShowTblProperties):
    from pyspark.sql.types import StringType, StructField, StructType

    r = resolve(spark, s.table, must_exist=False)
    if r is None:
        return None
    snap = DeltaLog.for_table(r.path).snapshot()
    props = dict(snap.metadata.configuration)
    props.setdefault("delta.minReaderVersion", str(snap.protocol.min_reader_version))
    props.setdefault("delta.minWriterVersion", str(snap.protocol.min_writer_version))
    for feature in sorted(set(snap.protocol.reader_features or ()) | set(snap.protocol.writer_features or ())):
        props.setdefault(f"delta.feature.{feature}", "supported")
    if s.key is not None:
        if s.key not in props:
            return local_dataframe(spark, [(s.key, f"Table {s.table.text} does not have property: {s.key}")],
                                         StructType([StructField("key", StringType()), StructField("value", StringType())]))
        items = [(s.key, props[s.key])]
    else:
        items = sorted(props.items())
    return local_dataframe(spark, items, StructType([StructField("key", StringType()), StructField("value", StringType())]))


def _show_columns(spark: Any, s: st.ShowColumns):
    """SHOW COLUMNS of a Delta table: the columns of its schema now (the catalog entry's may be
    older)."""
    from pyspark.sql.types import StringType, StructField, StructType

    r = resolve(spark, s.table, must_exist=False)
    if r is None:
        return None
    snap = DeltaLog.for_table(r.path).snapshot()
    return local_dataframe(spark, [(f.name,) for f in snap.schema.fields],
                                 StructType([StructField("col_name", StringType(), False)]))


_HANDLERS = {
    st.Vacuum: _vacuum, st.DescribeDetail: _describe_detail, st.DescribeHistory: _describe_history,
    st.Generate: _generate, st.Convert: _convert, st.Restore: _restore, st.Optimize: _optimize, st.Reorg: _reorg,
    st.Clone: _clone, st.CreateTable: _create_table, st.AlterTable: _alter_table, st.Merge: _merge, st.Update: _update,
    st.Delete: _delete, st.Insert: _insert, st.Truncate: _truncate, st.DescribeTable: _describe_table,
    st.ShowTblProperties: _show_tblproperties, st.ShowColumns: _show_columns,
}
