"""`tahoe.spark.DeltaTable`: delta-spark's Python `DeltaTable` API over tahoe, plus `read_delta(spark, path, ...)`.

  1. `forPath`, `isDeltaTable`, `toDF`, `alias`, `history`, `detail`; reads through `tahoe.spark.read`.
  2. DML: `delete`, `update`, `merge` (`DeltaMergeBuilder`), planned by `tahoe.write.dml_plan`, run by
     `tahoe.spark.dml`; `optimize()` and `reorg()` (`tahoe.spark.optimize`).
  3. The `create` / `createIfNotExists` / `createOrReplace` builders, through `tahoe.txn.table_ops`.
  4. Maintenance, thin wrappers over `tahoe.maintenance` on the driver: `vacuum`, `restoreToVersion` /
     `restoreToTimestamp`, `clone*`, `convertToDelta`, `generate`, `upgradeTableProtocol`,
     `addFeatureSupport`, `dropFeatureSupport`, each honouring delta-spark's session confs."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any, Iterable

from ..errors import DeltaError, TableNotFoundError, AnalysisException, UnsupportedFeatureError
from ..log import DeltaLog
from ..protocol.column_paths import quote_identifier
from .read import jvm_reaches, read_snapshot
from .session import session_timestamp_ms
from .internals import is_connect
from .types import local_dataframe, from_spark_schema, to_spark_schema
from ..expressions import parse
from ..maintenance.clone import clone
from ..maintenance.convert import convert_to_delta
from ..maintenance.features import drop_feature
from ..maintenance.restore import restore
from ..maintenance.vacuum import RETENTION_CHECK_CONF, vacuum
from ..protocol.properties import GENERATION_EXPRESSION, IDENTITY_ALLOW_EXPLICIT_INSERT, IDENTITY_START, IDENTITY_STEP
from ..protocol.schema import StructField, StructType, is_void
from ..protocol.table_features import reader_features_of, writer_features_of, FEATURES, canonical_feature_name
from ..txn import table_clustering_columns, upgrade_protocol, add_feature
from ..txn.ddl import parse_ddl
from ..txn.table_ops import create_table
from ..uniform.symlink_manifest import generate
from ..write.dml_commit import operation_result
from ..write.dml_plan import (
    plan_delete, plan_update, DEFAULT_SOURCE_ALIAS, DEFAULT_TARGET_ALIAS, MergeClause, plan_merge,
)
from .connect_sql import column_sql, plan_id
from .datasource import read_via_datasource, register
from .dml import run_dml, spark_typer, column_sql as classic_column_sql, dataframe_alias
from .optimize import DeltaOptimizeBuilder, DeltaReorgBuilder
from .row_tracking import read_table
from .sql.catalog import lookup, resolve, table_name, with_table
from .storage import merged_storage_options
from .surfacing import spark_facing

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = ["DeltaTable", "DeltaTableBuilder", "DeltaMergeBuilder", "IdentityGenerator", "delete_where", "update_where",
           "read_delta"]


def _active_session(spark):
    """`spark`, or the active session (classic or Spark Connect) when None, as delta-spark. With no
    session at all a builder still creates a table at a `location()` (tahoe needs no Spark for that)."""
    if spark is not None:
        return spark
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession()


def _analysis_error(error_class: str, message: str, cls: type | None = None) -> BaseException:
    """An error of tahoe's class `cls` (AnalysisException by default) that is also PySpark's
    AnalysisException, carrying delta-spark's error class."""
    e = (cls or AnalysisException)(f"[{error_class}] {message}")
    e.error_class = error_class
    return spark_facing(e)


def affected_rows(spark, n) -> "DataFrame":
    """delta-spark's result of DELETE / UPDATE: one row, `num_affected_rows` (a nullable long)."""
    from pyspark.sql.types import LongType, StructField, StructType

    return local_dataframe(spark, [(None if n is None else int(n),)],
                           StructType([StructField("num_affected_rows", LongType(), True)]))


def _type_error(msg: str, *objs) -> TypeError:
    """delta-spark's DeltaTableBuilder TypeError text."""
    for obj in objs:
        msg += " Found %s with type %s" % (str(obj), str(type(obj)))
    return TypeError(msg)


class DeltaTable:
    def __init__(self, spark, path: str, alias: str | None = None, storage_options: dict | None = None,
                 _frames: list | None = None):
        self._spark = spark
        self._path = path
        self._alias = alias
        # the session's Hadoop file-system confs, under the caller's (storage options or Hadoop keys)
        self._storage_options = merged_storage_options(spark, str(path), storage_options)
        self._log = DeltaLog.for_table(path, self._storage_options)
        self._frames = _frames if _frames is not None else []   # Spark Connect plan ids of toDF()'s frames

    # --- opening ----------------------------------------------------------------------------
    @classmethod
    def forPath(cls, sparkSession, path: str, hadoopConf: dict = {}) -> "DeltaTable":  # noqa: B006 - delta-spark's default
        """`hadoopConf`: Hadoop file-system keys, as delta-spark takes them (`fs.s3a.access.key`,
        `fs.azure.account.key.<account>.dfs.core.windows.net`, ...: `tahoe.storage.hadoop`), and / or
        tahoe's storage options (delta-rs's keys)."""
        t = cls(sparkSession, path, storage_options=hadoopConf or None)
        t._log.snapshot()  # fails now (TableNotFoundError) when there is no table
        register(sparkSession)  # only once the table is there: a failed forPath changes nothing
        return t

    @classmethod
    def forName(cls, sparkSession, tableOrViewName: str) -> "DeltaTable":
        """The Delta table of a catalog name (`db.t`, or `delta.`/path``); delta-spark's errors for
        an unknown name (TABLE_OR_VIEW_NOT_FOUND) and for a table that is not Delta
        (DELTA_MISSING_DELTA_TABLE). See `tahoe.spark.sql.catalog`."""
        try:
            name = table_name(tableOrViewName)
            r = resolve(sparkSession, name)
            if r is None:
                entry = lookup(sparkSession, name.parts) if not name.is_path else None
                shown = entry.qualified if entry is not None else tableOrViewName
                raise AnalysisException(f"[DELTA_MISSING_DELTA_TABLE] {shown} is not a Delta table. SQLSTATE: 42P01")
            t = cls(sparkSession, r.path)
            t._log.snapshot()
        except DeltaError as e:
            raise spark_facing(e) from None

        register(sparkSession)
        return t

    @classmethod
    def isDeltaTable(cls, sparkSession, identifier: str) -> bool:
        """True when `identifier` (a path) holds a Delta table; False for a missing path, a
        directory without a log, or a file — as delta-spark. A table tahoe cannot read (corrupt
        log, unsupported features) is still a Delta table: True. An identifier that is no path
        on disk but a catalog name of a Delta table (`db.t`) is True too."""
        try:
            DeltaLog.for_table(identifier).snapshot()
            return True
        except (TableNotFoundError, FileNotFoundError, NotADirectoryError, ValueError):
            pass
        except DeltaError:
            return True
        import os

        if sparkSession is None or os.path.exists(identifier):
            return False

        try:
            return resolve(sparkSession, table_name(identifier), must_exist=False) is not None
        except DeltaError:
            return False

    # --- reading ----------------------------------------------------------------------------
    def toDF(self) -> "DataFrame":
        df = snapshot_frame(self._spark, self._log.snapshot(), self._storage_options)
        df = df.alias(self._alias) if self._alias else df
        if is_connect(df):
            self._frames.append(plan_id(df))
        return df

    def alias(self, aliasName: str) -> "DeltaTable":
        """The same table (its storage options and log, as delta-spark's alias keeps its
        DeltaLog: the session's confs are not read again) under `aliasName`."""
        t = DeltaTable.__new__(DeltaTable)
        t.__dict__.update(self.__dict__)
        t._alias = aliasName
        return t

    def history(self, limit: int | None = None) -> "DataFrame":
        from pyspark.sql.types import (
            BooleanType, LongType, MapType, StringType, StructField, StructType, TimestampType,
        )
        import datetime as dt

        rows = []
        for e in self._log.history(limit):
            ci = e.commit_info
            params = ci.get("operationParameters") or {}
            metrics = ci.get("operationMetrics") or {}
            rows.append((
                e.version, dt.datetime.fromtimestamp(e.timestamp / 1000, tz=dt.timezone.utc),
                ci.get("userId"), ci.get("userName"), ci.get("operation"),
                {str(k): (v if v is None or isinstance(v, str) else json.dumps(v)) for k, v in params.items()},
                _job(ci.get("job")), _notebook(ci.get("notebook")),
                ci.get("clusterId"), ci.get("readVersion"), ci.get("isolationLevel"), ci.get("isBlindAppend"),
                {str(k): str(v) for k, v in metrics.items()}, ci.get("userMetadata"), ci.get("engineInfo"),
            ))
        schema = StructType([
            StructField("version", LongType()), StructField("timestamp", TimestampType()),
            StructField("userId", StringType()), StructField("userName", StringType()),
            StructField("operation", StringType()),
            StructField("operationParameters", MapType(StringType(), StringType())),
            StructField("job", StructType([StructField(n, StringType()) for n in _JOB_FIELDS])),
            StructField("notebook", StructType([StructField("notebookId", StringType())])),
            StructField("clusterId", StringType()), StructField("readVersion", LongType()),
            StructField("isolationLevel", StringType()), StructField("isBlindAppend", BooleanType()),
            StructField("operationMetrics", MapType(StringType(), StringType())),
            StructField("userMetadata", StringType()), StructField("engineInfo", StringType()),
        ])
        return self._spark.createDataFrame(rows, schema)

    def detail(self) -> "DataFrame":
        from pyspark.sql.types import (
            ArrayType, IntegerType, LongType, MapType, StringType, StructField, StructType, TimestampType,
        )
        import datetime as dt

        snap = self._log.snapshot()
        md = snap.metadata
        created = dt.datetime.fromtimestamp(md.created_time / 1000, tz=dt.timezone.utc) if md.created_time else None
        features = sorted(reader_features_of(snap.protocol) | writer_features_of(snap.protocol))
        row = ("delta", md.id, md.name, md.description, self._log.table_root, created,
               dt.datetime.fromtimestamp(snap.timestamp / 1000, tz=dt.timezone.utc),
               list(md.partition_columns), table_clustering_columns(snap), snap.num_files, snap.size_in_bytes, dict(md.configuration),
               snap.protocol.min_reader_version, snap.protocol.min_writer_version, features)
        schema = StructType([
            StructField("format", StringType()), StructField("id", StringType()), StructField("name", StringType()),
            StructField("description", StringType()), StructField("location", StringType()),
            StructField("createdAt", TimestampType()), StructField("lastModified", TimestampType()),
            StructField("partitionColumns", ArrayType(StringType())), StructField("clusteringColumns", ArrayType(StringType())),
            StructField("numFiles", LongType()), StructField("sizeInBytes", LongType()),
            StructField("properties", MapType(StringType(), StringType())),
            StructField("minReaderVersion", IntegerType()), StructField("minWriterVersion", IntegerType()),
            StructField("tableFeatures", ArrayType(StringType())),
        ])
        return self._spark.createDataFrame([row], schema)

    # --- maintenance (tahoe.maintenance) ---------------------------------------------------
    def _conf(self, key: str, default: str | None = None) -> str | None:
        try:
            v = self._spark.conf.get(key, None) if self._spark is not None else None
        except Exception:  # noqa: BLE001 - an unreadable conf is an unset one
            v = None
        return default if v is None else str(v)

    def vacuum(self, retentionHours: float | None = None) -> "DataFrame | None":
        """VACUUM: delete the files no version inside the retention window needs (delta-spark's
        `DeltaTable.vacuum`; returns an empty DataFrame). `retentionHours` shorter than the
        table's `delta.deletedFileRetentionDuration` is refused while
        `spark.databricks.delta.retentionDurationCheck.enabled` is true."""
        from pyspark.sql.types import StructType as SparkStructType

        hours = None if retentionHours is None else float(retentionHours)
        check = self._conf(RETENTION_CHECK_CONF, "true").lower() != "false"
        logging_on = self._conf("spark.databricks.delta.vacuum.logging.enabled", "true").lower() != "false"
        vacuum(self._log, hours, dry_run=False, enforce_retention_duration=check, full=True, log_commits=logging_on)
        if is_connect(self._spark):
            return None   # delta-spark's Spark Connect client returns None
        return self._spark.createDataFrame([], SparkStructType([]))

    def _restore(self, version: int | None, timestamp: str | None):
        from pyspark.sql.types import LongType, StructField as SF, StructType as ST

        ts: Any = timestamp
        if timestamp is not None:
            try:
                ts = session_timestamp_ms(self._spark, timestamp)
            except ValueError:
                raise _analysis_error("DELTA_TIMESTAMP_INVALID", f"The provided timestamp ('{timestamp}') cannot be "
                                      f"converted to a valid timestamp. SQLSTATE: 42816") from None
        m = restore(self._log, version=version, timestamp=ts,
                    ignore_missing_files=self._conf("spark.sql.files.ignoreMissingFiles", "false").lower() == "true",
                    protocol_downgrade_allowed=self._conf(
                        "spark.databricks.delta.restore.protocolDowngradeAllowed", "false").lower() == "true")
        cols = ["table_size_after_restore", "num_of_files_after_restore", "num_removed_files",
                "num_restored_files", "removed_files_size", "restored_files_size"]
        keys = ["tableSizeAfterRestore", "numOfFilesAfterRestore", "numRemovedFiles", "numRestoredFiles",
                "removedFilesSize", "restoredFilesSize"]
        return local_dataframe(self._spark, [tuple(int(m[k]) for k in keys)], ST([SF(c, LongType()) for c in cols]))

    def restoreToVersion(self, version: int) -> "DataFrame":
        """RESTORE the table to `version` in one commit; a DataFrame of delta-spark's metrics."""
        if not isinstance(version, int) or version is None:
            raise ValueError("version needs to be an int but got '%s'." % type(version))
        return self._restore(version, None)

    def restoreToTimestamp(self, timestamp: str) -> "DataFrame":
        """RESTORE the table to the version as of `timestamp` (`yyyy-MM-dd` or
        `yyyy-MM-dd HH:mm:ss`, in the session time zone)."""
        if not isinstance(timestamp, str):
            raise ValueError("timestamp needs to be a string but got '%s'." % type(timestamp))
        return self._restore(None, timestamp)

    def _clone(self, target: str, isShallow: bool, replace: bool, properties: dict | None,
               version: int | None = None, timestamp: str | None = None) -> "DeltaTable":
        if not isinstance(target, str):
            raise TypeError(f"target needs to be a string but got {type(target)}")
        if not isinstance(isShallow, bool):
            raise TypeError(f"isShallow needs to be a bool but got {type(isShallow)}")
        if not isinstance(replace, bool):
            raise TypeError(f"replace needs to be a bool but got {type(replace)}")
        if properties is not None and not isinstance(properties, dict):
            raise TypeError(f"properties needs to be a dict but got {type(properties)}")
        ts = session_timestamp_ms(self._spark, timestamp) if timestamp is not None else None
        clone(self._log, target, version=version, timestamp=ts, shallow=isShallow, replace=replace,
              properties={str(k): str(v) for k, v in (properties or {}).items()},
              storage_options=self._storage_options)
        return DeltaTable.forPath(self._spark, target, self._storage_options)

    def clone(self, target: str, isShallow: bool = False, replace: bool = False,
              properties: dict | None = None) -> "DeltaTable":
        """CLONE the latest version to `target` (shallow: the target's log names this table's
        files; deep: they are copied); returns the clone."""
        return self._clone(target, isShallow, replace, properties)

    def cloneAtVersion(self, version: int, target: str, isShallow: bool = False, replace: bool = False,
                       properties: dict | None = None) -> "DeltaTable":
        if not isinstance(version, int):
            raise TypeError(f"version needs to be an int but got {type(version)}")
        return self._clone(target, isShallow, replace, properties, version=version)

    def cloneAtTimestamp(self, timestamp: str, target: str, isShallow: bool = False, replace: bool = False,
                         properties: dict | None = None) -> "DeltaTable":
        if not isinstance(timestamp, str):
            raise TypeError(f"timestamp needs to be a string but got {type(timestamp)}")
        return self._clone(target, isShallow, replace, properties, timestamp=timestamp)

    @classmethod
    def convertToDelta(cls, sparkSession, identifier: str, partitionSchema: Any = None,
                       collectStats: bool = True) -> "DeltaTable":
        """CONVERT TO DELTA a parquet directory in place: `identifier` is "parquet.`/path`";
        `partitionSchema` Hive DDL ("day DATE, country STRING") or a pyspark StructType.

        As delta-spark's: idempotent — a directory that already holds a Delta table (or a
        "delta.`/path`" identifier) is left alone and returned; per-file stats are collected unless
        `collectStats=False` (tahoe's addition; SQL's NO STATISTICS) or the session sets
        spark.databricks.delta.stats.collect=false (the commit's collectStats parameter says
        which)."""
        import re

        m = re.match(r"^\s*([A-Za-z]+)\.`(.+)`\s*$", identifier or "")
        if m is None:
            raise UnsupportedFeatureError(
                f"convertToDelta: {identifier!r} is not a path identifier such as \"parquet.`/path`\" "
                f"(tahoe has no catalog: tables by name are not supported)")
        fmt, path = m.group(1).lower(), m.group(2)
        if fmt not in ("parquet", "delta"):
            raise UnsupportedFeatureError(f"convertToDelta: source format '{m.group(1)}' is not supported "
                                          f"(parquet only)")
        if fmt == "delta":               # delta-spark: already a Delta table, nothing to convert
            return cls.forPath(sparkSession, path)
        part = partitionSchema
        if part is not None and not isinstance(part, str):
            part = from_spark_schema(part)
        try:
            stats_conf = sparkSession.conf.get("spark.databricks.delta.stats.collect", None)
        except Exception:  # noqa: BLE001 - a remote session that refuses to read a conf
            stats_conf = None
        collect = bool(collectStats) and str(stats_conf or "true").strip().lower() != "false"
        convert_to_delta(path, part, collect_stats=collect, mode="ignore")
        return cls.forPath(sparkSession, path)

    def generate(self, mode: str) -> None:
        """Generate manifests: mode "symlink_format_manifest" (`_symlink_format_manifest/`)."""
        generate(self._log, mode)

    def upgradeTableProtocol(self, readerVersion: int, writerVersion: int) -> None:
        """Raise the protocol to (readerVersion, writerVersion); never downgrades."""
        if not isinstance(readerVersion, int):
            raise ValueError("The readerVersion needs to be an integer but got '%s'." % type(readerVersion))
        if not isinstance(writerVersion, int):
            raise ValueError("The writerVersion needs to be an integer but got '%s'." % type(writerVersion))
        upgrade_protocol(self._log, readerVersion, writerVersion)

    def addFeatureSupport(self, featureName: str) -> None:
        """Add a table feature to the protocol (upgrading it to table features if needed)."""
        if not isinstance(featureName, str):
            raise ValueError("featureName needs to be a string but got '%s'." % type(featureName))
        if canonical_feature_name(featureName) not in FEATURES:
            raise _analysis_error("DELTA_UNSUPPORTED_FEATURES_IN_CONFIG",
                                  "Table features configured in the following Spark configs or Delta table properties "
                                  f"are not recognized by this version of Delta Lake: delta.feature.{featureName}. "
                                  "SQLSTATE: 56038")
        add_feature(self._log, featureName)

    def dropFeatureSupport(self, featureName: str, truncateHistory: bool | None = None) -> None:
        """DROP FEATURE as current delta-spark (history protected by checkpointProtection unless
        `truncateHistory`); see `tahoe.maintenance.features`."""
        if not isinstance(featureName, str):
            raise ValueError("featureName needs to be a string but got '%s'." % type(featureName))
        if truncateHistory is not None and not isinstance(truncateHistory, bool):
            raise ValueError("truncateHistory needs to be a bool but got '%s'." % type(truncateHistory))
        drop_feature(self._log, featureName, bool(truncateHistory))
    # --- maintenance --------------------------------------------------------------------------
    def optimize(self) -> "DeltaOptimizeBuilder":
        """delta-spark's `DeltaTable.optimize()`: a DeltaOptimizeBuilder (`where(partitionFilter)`,
        `executeCompaction()`, `executeZOrderBy(*cols)`), run as Spark jobs."""
        return DeltaOptimizeBuilder(self._spark, self._log, self._storage_options)

    def reorg(self):
        """REORG TABLE ... [WHERE ...] APPLY (PURGE) (delta-spark: SQL only): a builder with
        `where(partitionFilter)` and `executePurge()`."""
        return DeltaReorgBuilder(self._spark, self._log, self._storage_options)

    # --- not yet --------------------------------------------------------------------------
    # --- DML ------------------------------------------------------------------------------------
    def delete(self, condition=None) -> "DataFrame | None":
        """delta-spark's `delete(condition=None)`: delete the rows where `condition` (a SQL
        string or a Column) is TRUE — all rows when None. Deletion vectors when the table has
        `delta.enableDeletionVectors`, else copy-on-write; one commit. Returns None, as
        delta-spark does; the counts are in the commit's operationMetrics (`history(1)`:
        numDeletedRows, ...). Over Spark Connect, delta-spark's client returns the command's result
        instead: a DataFrame of `num_affected_rows`."""
        metrics = delete_where(self, condition)
        if is_connect(self._spark):
            return affected_rows(self._spark, metrics.get("numDeletedRows"))
        return None

    def update(self, condition=None, set=None) -> "DataFrame | None":
        """delta-spark's `update(condition=None, set=None)`: `set` maps columns to new values (SQL
        strings or Columns) for the rows where `condition` is TRUE (all rows when None). Returns
        None, as delta-spark does; the counts are in the commit's operationMetrics (`history(1)`:
        numUpdatedRows, ...)."""
        if set is None:
            raise ValueError("'set' cannot be None")
        if type(set) is not dict:
            raise TypeError(f"'set' must be a dict, found to be {type(set)}")
        metrics = update_where(self, condition, set)
        if is_connect(self._spark):   # delta-spark's Spark Connect client: the command's result
            return affected_rows(self._spark, metrics.get("numUpdatedRows"))
        return None

    def merge(self, source, condition) -> "DeltaMergeBuilder":
        """delta-spark's `merge(source, condition)`: a `DeltaMergeBuilder` for MERGE INTO this
        table (its `alias()` names it in conditions) USING `source` (a DataFrame, `alias()`-ed
        to name it) ON `condition` (SQL string or Column)."""
        from pyspark.sql import DataFrame

        if source is None:
            raise ValueError("'source' in merge cannot be None")
        if not isinstance(source, DataFrame) and type(source).__name__ != "DataFrame":
            raise TypeError("Type of 'source' in merge must be DataFrame.")
        if condition is None:
            raise ValueError("'condition' in merge cannot be None")
        _check_condition_type(condition)
        return DeltaMergeBuilder(self, source, condition)

    def _result(self, metrics: dict):
        """delta-spark's MERGE result DataFrame (4.x: num_affected_rows, num_updated_rows,
        num_deleted_rows, num_inserted_rows; nullable longs, its command's output) from the
        operation's metrics."""
        from pyspark.sql.types import LongType, StructField, StructType

        row = operation_result(metrics)
        schema = StructType([StructField(k, LongType(), True) for k in row])
        return local_dataframe(self._spark, [tuple(row.values())], schema)

    # --- builders ---------------------------------------------------------------------------
    @classmethod
    def create(cls, sparkSession=None) -> "DeltaTableBuilder":
        return DeltaTableBuilder(_active_session(sparkSession), "error")

    @classmethod
    def createIfNotExists(cls, sparkSession=None) -> "DeltaTableBuilder":
        return DeltaTableBuilder(_active_session(sparkSession), "ignore")

    @classmethod
    def createOrReplace(cls, sparkSession=None) -> "DeltaTableBuilder":
        return DeltaTableBuilder(_active_session(sparkSession), "overwrite")

    @classmethod
    def replace(cls, sparkSession=None) -> "DeltaTableBuilder":
        return DeltaTableBuilder(_active_session(sparkSession), "replace")

    def __repr__(self) -> str:
        return f"DeltaTable({self._log.table_root!r})"


# delta-spark's history columns `job` (JobInfo) and `notebook` (NotebookInfo): structs of the
# commitInfo's `job` / `notebook` objects (null when the commit has none)
_JOB_FIELDS = ("jobId", "jobName", "runId", "jobOwnerId", "triggerType")


def read_delta(spark, path: str, version: int | None = None, timestamp: Any = None,
               filters: Iterable[Any] | str | None = None, storage_options: dict | None = None):
    """A DataFrame of the table at `path` (latest, `version` or `timestamp` — a zone-less one in the
    session time zone, as delta-spark's timestampAsOf), with `filters` (SQL strings or Columns)
    used to skip files and applied to the rows."""
    if filters is not None and not isinstance(filters, (list, tuple)):
        filters = [filters]

    storage_options = merged_storage_options(spark, str(path), storage_options)
    log = DeltaLog.for_table(path, storage_options)
    ts = session_timestamp_ms(spark, timestamp) if timestamp is not None else None
    df = snapshot_frame(spark, log.snapshot(version=version, timestamp=ts), storage_options, filters)
    for f in filters or ():
        df = df.filter(f)
    return df


def snapshot_frame(spark, snap, storage_options: dict | None, filters=None):
    """The native scan of `snap` (skipping files by `filters`), or the `delta` data source's
    read of it on a store the JVM cannot reach."""
    if jvm_reaches(snap.table_root, spark):
        return read_table(spark, snap, filters)   # with `_metadata.row_id` & co. on row-tracking tables

    return read_via_datasource(spark, snap.table_root, snap.version, storage_options)


def _job(job: Any) -> tuple | None:
    if not isinstance(job, dict):
        return None
    return tuple(None if job.get(n) is None else str(job.get(n)) for n in _JOB_FIELDS)


def _notebook(notebook: Any) -> tuple | None:
    if not isinstance(notebook, dict):
        return None
    return (None if notebook.get("notebookId") is None else str(notebook["notebookId"]),)


def _typing_relation(table: DeltaTable, snap):
    """An empty relation of `table`'s columns as its scan types them (aliased as `toDF`): the
    values of an UPDATE are typed on it without planning a scan of the table."""
    fields = [f for f in snap.schema.fields if not is_void(f.type)]
    df = table._spark.createDataFrame([], to_spark_schema(StructType(fields), strip_metadata=True))
    return df.alias(table._alias) if table._alias else df


def delete_where(table: DeltaTable, condition=None) -> dict:
    """DELETE on `table` (see `DeltaTable.delete`); the operation's metrics (the SQL statement's
    result: `tahoe.spark.sql`)."""
    cond = _condition(table, condition)
    snap = table._log.snapshot()
    plan = plan_delete(snap, cond, table._alias, storage_options=table._storage_options)
    return run_dml(table._spark, table._log, snap, plan)


def update_where(table: DeltaTable, condition, values: dict) -> dict:
    """UPDATE on `table` (see `DeltaTable.update`); the operation's metrics."""
    cond = _condition(table, condition)
    assignments = _assignments(table, values, "'set'")
    snap = table._log.snapshot()
    plan = plan_update(snap, cond, assignments, table._alias,
                       typer=spark_typer(lambda: _typing_relation(table, snap), {table._alias: snap.schema},
                                         fallback=table.toDF),
                       storage_options=table._storage_options)
    return run_dml(table._spark, table._log, snap, plan)


def _check_condition_type(condition, argname: str = "'condition'") -> None:
    from pyspark.sql import Column

    if condition is not None and not isinstance(condition, (str, Column)):
        raise TypeError(f"{argname} must be a Spark SQL Column or a string (expression in SQL syntax), "
                        f"found to be of type {type(condition)}")


def _condition(table: "DeltaTable", condition, source=None, argname: str = "'condition'"):
    """A condition (SQL string or Column) as the planner takes it: SQL text, or a Column's
    analyzed SQL (resolved against the target — and the source, for a MERGE)."""

    _check_condition_type(condition, argname)
    if condition is None or isinstance(condition, str):
        return condition

    return parse(_column_sql(table, condition, source))


def _assignments(table: "DeltaTable", mapping, argname: str, source=None) -> dict:
    from pyspark.sql import Column

    if mapping is None:
        raise ValueError(f"{argname} cannot be None")
    if type(mapping) is not dict:
        raise TypeError(f"{argname} must be a dict, found to be {type(mapping)}")
    out = {}
    for k, v in mapping.items():
        if type(k) is not str:
            raise TypeError(f"Keys of dict in {argname} must contain only strings with column names, "
                            f"found '{k}' of type '{type(k)}")
        if isinstance(v, str):
            out[k] = v
        elif isinstance(v, Column):
            out[k] = parse(_column_sql(table, v, source))
        else:
            raise TypeError(f"Values of dict in {argname} must contain only Spark SQL Columns or strings "
                            f"(expressions in SQL syntax) as values, found '{v}' of type '{type(v)}'")
    return out


def _column_sql(table: "DeltaTable", column, source=None) -> str:
    """A Column argument as SQL text: classic Columns resolved by Spark's analyzer against the
    target (and source); Spark Connect Columns written out on the client, references made from the
    source DataFrame or the table's `toDF()` frames (`df["id"]`) qualified by their aliases."""
    if is_connect(column):
        target = table._alias or (DEFAULT_TARGET_ALIAS if source is not None else "")
        aliases = {pid: target for pid in table._frames if pid is not None}
        if source is not None and plan_id(source) is not None:
            aliases[plan_id(source)] = dataframe_alias(source) or DEFAULT_SOURCE_ALIAS
        return column_sql(column, aliases=aliases)

    return classic_column_sql(_resolution_frame(table, source), column)


def _resolution_frame(table: "DeltaTable", source=None):
    """What Column arguments are resolved against: the target (its alias, or the planner's
    default one), joined with the source for a MERGE (no rows are read)."""
    target = table.toDF()
    if source is None:
        return target
    if table._alias is None:
        target = target.alias(DEFAULT_TARGET_ALIAS)
    if dataframe_alias(source) is None:
        source = source.alias(DEFAULT_SOURCE_ALIAS)
    return target.crossJoin(source)


class DeltaMergeBuilder:
    """delta-spark's `DeltaMergeBuilder` (from `DeltaTable.merge`): WHEN clauses in the order
    given — matched (update / updateAll / delete), not matched (insert / insertAll), not
    matched by source (update / delete), conditions and values as SQL strings or Columns —
    `withSchemaEvolution()`, and `execute()`, which runs the MERGE in one commit and returns
    delta-spark's result DataFrame (num_affected_rows, num_updated_rows, num_deleted_rows,
    num_inserted_rows). Within a kind only the last clause may omit its condition; a target row
    matched by several source rows fails the MERGE
    ([DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE]) unless the only matched clause
    is an unconditional delete."""

    def __init__(self, table: DeltaTable, source, condition):
        self._table = table
        self._source = source
        self._condition = condition
        self._clauses: list = []
        self._schema_evolution = False

    def _add(self, kind: str, action: str, condition, values=None, argname: str = "") -> "DeltaMergeBuilder":
        from pyspark.sql import Column

        _check_condition_type(condition)
        if values is not None and type(values) is not dict:
            raise TypeError(f"{argname} must be a dict, found to be {type(values)}")
        for k, v in (values or {}).items():   # checked as the clause is added, as delta-spark
            if type(k) is not str:
                raise TypeError(f"Keys of dict in {argname} must contain only strings with column names, "
                                f"found '{k}' of type '{type(k)}")
            if not isinstance(v, (str, Column)):
                raise TypeError(f"Values of dict in {argname} must contain only Spark SQL Columns or strings "
                                f"(expressions in SQL syntax) as values, found '{v}' of type '{type(v)}'")
        self._clauses.append((kind, action, condition, values, argname))
        return self

    def whenMatchedUpdate(self, condition=None, set=None) -> "DeltaMergeBuilder":
        if set is None:
            raise ValueError("'set' in whenMatchedUpdate cannot be None")
        return self._add("matched", "update", condition, set, "'set' in whenMatchedUpdate")

    def whenMatchedUpdateAll(self, condition=None) -> "DeltaMergeBuilder":
        return self._add("matched", "update", condition)

    def whenMatchedDelete(self, condition=None) -> "DeltaMergeBuilder":
        return self._add("matched", "delete", condition)

    def whenNotMatchedInsert(self, condition=None, values=None) -> "DeltaMergeBuilder":
        if values is None:
            raise ValueError("'values' in whenNotMatchedInsert cannot be None")
        return self._add("notMatched", "insert", condition, values, "'values' in whenNotMatchedInsert")

    def whenNotMatchedInsertAll(self, condition=None) -> "DeltaMergeBuilder":
        return self._add("notMatched", "insert", condition)

    def whenNotMatchedBySourceUpdate(self, condition=None, set=None) -> "DeltaMergeBuilder":
        if set is None:
            raise ValueError("'set' in whenNotMatchedBySourceUpdate cannot be None")
        return self._add("notMatchedBySource", "update", condition, set, "'set' in whenNotMatchedBySourceUpdate")

    def whenNotMatchedBySourceDelete(self, condition=None) -> "DeltaMergeBuilder":
        return self._add("notMatchedBySource", "delete", condition)

    def withSchemaEvolution(self) -> "DeltaMergeBuilder":
        self._schema_evolution = True
        return self

    def execute(self) -> "DataFrame":
        t = self._table
        source = self._source
        sa = dataframe_alias(source)
        clauses = []
        for kind, action, cond, values, argname in self._clauses:
            c = _condition(t, cond, source)
            v = _assignments(t, values, argname, source) if values is not None else None
            clauses.append(MergeClause(kind, action, c, v))
        on = _condition(t, self._condition, source)
        snap = t._log.snapshot()
        src = source if sa is not None else source.alias(DEFAULT_SOURCE_ALIAS)
        source_schema = from_spark_schema(source.schema)

        def relation():
            target = t.toDF() if t._alias else t.toDF().alias(DEFAULT_TARGET_ALIAS)
            return target.crossJoin(src)
        known = {t._alias or DEFAULT_TARGET_ALIAS: snap.schema, sa or DEFAULT_SOURCE_ALIAS: source_schema}
        # delta-spark: withSchemaEvolution(), or the session's spark.databricks.delta.schema.autoMerge.enabled
        from .sql import confs   # (the Delta SQL wing's reader of delta-spark's session confs)

        evolve = self._schema_evolution or confs.auto_merge(t._spark)
        plan = plan_merge(snap, source_schema, on, clauses, t._alias, sa,
                          schema_evolution=evolve, typer=spark_typer(relation, known),
                          storage_options=t._storage_options)
        return t._result(run_dml(t._spark, t._log, snap, plan, src))


@dataclasses.dataclass(frozen=True)
class IdentityGenerator:
    """delta-spark's identity column spec for `DeltaTableBuilder.addColumn`: generated values
    are `start + k * step` (k = 0, 1, ...), beyond the column's high-water mark."""

    start: int = 1
    step: int = 1

    def __post_init__(self):
        for name in ("start", "step"):
            v = getattr(self, name)
            if type(v) is not int:
                raise TypeError(f"IdentityGenerator {name} must be int. Found {v!r} with type {type(v)}")
        if self.step == 0:
            raise ValueError("IdentityGenerator step cannot be 0.")


class DeltaTableBuilder:
    """delta-spark's DeltaTableBuilder: collect the definition, `execute()` creates the table."""

    def __init__(self, spark, mode: str):
        self._spark = spark
        self._mode = mode
        self._location: str | None = None
        self._fields: list = []
        self._partition: list[str] = []
        self._cluster: list[str] | None = None
        self._props: dict[str, str] = {}
        self._comment: str | None = None
        self._name: str | None = None

    def tableName(self, identifier: str) -> "DeltaTableBuilder":
        if type(identifier) is not str:
            raise _type_error("Identifier must be str.", identifier)
        self._name = identifier
        return self

    def location(self, location: str) -> "DeltaTableBuilder":
        if type(location) is not str:
            raise _type_error("Location must be str.", location)
        self._location = location
        return self

    def comment(self, comment: str) -> "DeltaTableBuilder":
        if type(comment) is not str:
            raise _type_error("Table comment must be str.", comment)
        self._comment = comment
        return self

    def property(self, key: str, value: str) -> "DeltaTableBuilder":
        if type(key) is not str or type(value) is not str:
            raise _type_error("Key and value of property must be string.", key, value)
        self._props[key] = value
        return self

    def partitionedBy(self, *cols) -> "DeltaTableBuilder":
        if len(cols) == 1 and isinstance(cols[0], (list, tuple)):
            cols = tuple(cols[0])
        for c in cols:
            if type(c) is not str:
                raise _type_error("Partitioning column must be str.", c)
        self._partition.extend(cols)
        return self

    def clusterBy(self, *cols) -> "DeltaTableBuilder":
        """delta-spark's `clusterBy`: the table's clustering columns (liquid clustering; not with
        partitionedBy)."""
        if len(cols) == 1 and isinstance(cols[0], (list, tuple)):
            cols = tuple(cols[0])
        for c in cols:
            if type(c) is not str:
                raise TypeError(f"Clustering column must be str. Found {c!r} with type {type(c)}")
        self._cluster = list(cols)
        return self

    def addColumn(self, colName: str, dataType, nullable: bool = True,
                  generatedAlwaysAs: "str | IdentityGenerator | None" = None,
                  generatedByDefaultAs: "IdentityGenerator | None" = None,
                  comment: str | None = None) -> "DeltaTableBuilder":
        """delta-spark's `addColumn`: `generatedAlwaysAs` is a generation expression (SQL) or an
        `IdentityGenerator` (an identity column whose values are always generated);
        `generatedByDefaultAs` an `IdentityGenerator` (explicit values allowed)."""
        if type(colName) is not str:
            raise _type_error("Column name must be str.", colName)
        if not isinstance(dataType, str):
            from pyspark.sql.types import DataType

            if not isinstance(dataType, DataType):
                raise _type_error("Column data type must be str or DataType.", dataType)
        if type(nullable) is not bool:
            raise _type_error("Column nullable must be bool.", nullable)
        if generatedAlwaysAs is not None and generatedByDefaultAs is not None:
            raise ValueError("generatedByDefaultAs and generatedAlwaysAs cannot both be set.")
        if generatedAlwaysAs is not None and not isinstance(generatedAlwaysAs, (str, IdentityGenerator)):
            raise _type_error("Generated always as expression must be str or IdentityGenerator.", generatedAlwaysAs)
        if generatedByDefaultAs is not None and not isinstance(generatedByDefaultAs, IdentityGenerator):
            raise _type_error("Generated by default expression must be IdentityGenerator.", generatedByDefaultAs)
        if comment is not None and type(comment) is not str:
            raise _type_error("Column comment must be str.", comment)
        if isinstance(dataType, str):
            dt = parse_ddl(f"{quote_identifier(colName)} {dataType}").fields[0].type
        else:
            from pyspark.sql.types import DataType, StructField as SF, StructType as SS
            if not isinstance(dataType, DataType):
                raise TypeError(f"Column data type must be str or DataType. Found {dataType!r} with type {type(dataType)}")
            dt = from_spark_schema(SS([SF("x", dataType)])).fields[0].type
        md: dict[str, Any] = {}
        if comment:
            md["comment"] = comment
        if isinstance(generatedAlwaysAs, str):
            md[GENERATION_EXPRESSION] = generatedAlwaysAs
        identity = generatedByDefaultAs or (generatedAlwaysAs if isinstance(generatedAlwaysAs, IdentityGenerator) else None)
        if identity is not None:
            md[IDENTITY_START] = identity.start
            md[IDENTITY_STEP] = identity.step
            md[IDENTITY_ALLOW_EXPLICIT_INSERT] = generatedByDefaultAs is not None
        self._fields.append(StructField(colName, dt, nullable, md))
        return self

    def addColumns(self, cols) -> "DeltaTableBuilder":
        """delta-spark's `addColumns`: a StructType, or a list of StructFields."""
        from pyspark.sql.types import StructField as SparkField, StructType as SparkStruct

        if type(cols) is list:
            for c in cols:
                if type(c) is not SparkField:
                    raise _type_error("Column in existing schema must be StructField.", c)
            cols = SparkStruct(cols)
        if type(cols) is not SparkStruct:
            raise _type_error("Schema must be StructType or a list of StructField.", cols)
        for f in from_spark_schema(cols).fields:
            self._fields.append(f)
        return self

    def execute(self) -> DeltaTable:
        if not self._location and not self._name:
            raise ValueError("give the table a tableName() (a catalog table) or a location()")
        mode = self._mode
        schema = StructType(self._fields)

        def make(path: str, existing: bool) -> None:
            create_table(path, schema, self._partition, self._props, description=self._comment, mode=mode,
                         cluster_by=self._cluster)

        if self._name:
            if self._spark is None:
                raise ValueError("a table by name needs the SparkSession: DeltaTable.create(spark)")
            try:
                name = table_name(self._name)
                with_table(self._spark, name, mode, self._location, self._comment, make, lambda: schema,
                           lambda: list(self._partition))
            except DeltaError as e:
                raise spark_facing(e) from None
            return DeltaTable.forName(self._spark, self._name)
        if mode == "replace" and not DeltaTable.isDeltaTable(self._spark, self._location):
            raise _analysis_error("TABLE_OR_VIEW_NOT_FOUND", f"The table or view delta.`{self._location}` cannot be "
                                  f"found: it did not exist, so it cannot be replaced. Use DeltaTable.createOrReplace "
                                  f"to create it. SQLSTATE: 42P01", TableNotFoundError)
        create_table(self._location, schema, self._partition, self._props,
                     name=self._name, description=self._comment, mode=mode, cluster_by=self._cluster)
        return DeltaTable.forPath(self._spark, self._location) if self._spark is not None else \
            DeltaTable(None, self._location)
