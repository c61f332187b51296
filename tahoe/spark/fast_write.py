"""`write_delta(df, path, ...)`: the fast write of a DataFrame to a Delta table — the shared
planner (`tahoe.write.plan.plan_write`), delta-spark's optimized writes (`tahoe.spark.optimized_write`),
the Spark executor's file work (`tahoe.spark.write.write_dataframe`), ONE commit
(`tahoe.write.commit.commit_write`) and auto compaction after it (Spark jobs). A replaceWhere
over data columns replaces rows: the files that may hold a matching row are read, their other
rows written again (`plan_rewrite`), and they are removed in the same commit.

Owns composing those steps for the Python API; the steps are the modules named above (this
module sits above both the executor and OPTIMIZE, which writes through the executor).
"""

from __future__ import annotations

import dataclasses
from typing import Iterable

from ..log import DeltaLog
from ..protocol.actions import AddCDCFile, AddFile
from ..write.auto_compact import auto_compact_hook
from ..write.commit import commit_write, delete_data_files
from ..write.plan import WritePlan, plan_rewrite, plan_write
from ..write.replace_where import files_with_matches
from ..write.writer import CDC_DIR, CHANGE_TYPE, change_data_feed_enabled
from .optimize import SparkBinExecutor
from .optimized_write import optimize_write_enabled, optimized_write
from .session import (
    auto_compact_session_value, auto_compact_settings, configure, replace_where_settings, session_overwrite_mode,
    session_time_zone,
)
from .types import col, from_spark_schema
from .write import schema_mode, table_schema_of, write_dataframe
from ..expressions import parse
from .read import read_snapshot
from .storage import merged_storage_options

__all__ = ["write_delta"]


def write_delta(df, path: str | DeltaLog, mode: str = "append", partition_by: str | Iterable[str] | None = None,
                replace_where: str | None = None, merge_schema: bool = False, overwrite_schema: bool = False,
                user_metadata: str | None = None, txn_app_id: str | None = None, txn_version: int | None = None,
                properties: dict | None = None, storage_options: dict | None = None,
                partition_overwrite_mode: str | None = None, optimize_write: bool | None = None, *,
                description: str | None = None, replace_table: bool = False, cluster_by: Iterable[str] | None = None,
                operation: tuple[str, dict] | None = None, check_replace_where: bool | None = None,
                replace_where_data_columns: bool | None = None) -> int:
    """Write DataFrame `df` to the Delta table at `path` (a path / URI or a `DeltaLog`; created when absent);
    returns the version after the write (the current one when nothing was written: mode='ignore' on an existing
    table, or a recorded txn_app_id/txn_version). A table created meanwhile fails with ProtocolChangedException.

      1. partition_overwrite_mode: 'static' / 'dynamic'; None: `spark.sql.sources.partitionOverwriteMode`.
      2. optimize_write: rows shuffled by the partition columns first (unpartitioned: files of about
         spark.databricks.delta.optimizeWrite.binSize); None: spark.databricks.delta.optimizeWrite.enabled,
         else delta.autoOptimize.optimizeWrite. Auto compaction (spark.databricks.delta.autoCompact.enabled,
         else delta.autoOptimize.autoCompact) runs after the commit, never failing the write.
      3. description, replace_table, cluster_by, operation: the SQL layer's CREATE / REPLACE TABLE AS SELECT.
      4. check_replace_where=False writes rows outside replace_where (replaceWhere.constraintCheck.enabled);
         else they fail with DELTA_REPLACE_WHERE_MISMATCH (ReplaceWhereMismatchError).
      5. replace_where_data_columns (replaceWhere.dataColumns.enabled): any column, the touched files' other
         rows written again in the same commit; False refuses a predicate on other than partition columns.
    Both default to the session's confs; zone-less timestamps in replace_where are in the session time zone."""
    spark = df.sparkSession
    configure(spark)
    session_check, session_data_columns = replace_where_settings(spark)
    if check_replace_where is None:
        check_replace_where = session_check
    if replace_where_data_columns is None:
        replace_where_data_columns = session_data_columns
    if not isinstance(path, DeltaLog):
        storage_options = merged_storage_options(spark, str(path), storage_options)
    log = path if isinstance(path, DeltaLog) else DeltaLog.for_table(path, storage_options)
    plan, snap = plan_write(
        log, table_schema_of(from_spark_schema(df.schema)), mode=mode, partition_by=partition_by,
        replace_where=replace_where, schema_mode=schema_mode(merge_schema, overwrite_schema),
        partition_overwrite_mode=partition_overwrite_mode, session_overwrite_mode=session_overwrite_mode(spark),
        properties=properties, user_metadata=user_metadata, txn_app_id=txn_app_id, txn_version=txn_version,
        storage_options=storage_options, api="write_delta", description=description, replace_table=replace_table,
        cluster_by=cluster_by, operation=operation, check_replace_where=check_replace_where,
        replace_where_data_columns=replace_where_data_columns, time_zone=session_time_zone(spark))
    if plan.skip:
        return plan.read_version
    if optimize_write_enabled(spark, plan.configuration, optimize_write):
        df = optimized_write(df, plan.partition_columns)
    adds, marks = write_dataframe(df, log, plan)
    replaced = None
    num_rows = None
    cdcs: list = []
    if plan.replace_rows:
        try:
            replaced, kept, cdcs = _replace_rows(spark, log, snap, plan, adds)
        except BaseException:
            delete_data_files(log.store, log.table_root, adds)
            raise
        num_rows = sum(a.num_records or 0 for a in adds)
        adds = adds + kept
    hook = auto_compact_hook(lambda: SparkBinExecutor(spark), auto_compact_session_value(spark),
                             auto_compact_settings(spark))
    return commit_write(plan, log, snap, adds, marks, num_rows=num_rows, post_commit=[hook], replaced=replaced,
                        cdc_files=cdcs)


def _replace_rows(spark, log: DeltaLog, snap, plan: WritePlan, written: list[AddFile]) -> tuple:
    """A replaceWhere that reads data columns: ((the files that may hold a matching row, the
    count of their other rows), the files those other rows were written to again, the change
    data files — on a table with the change data feed on: the replaced rows as deletes, the
    `written` rows (read back) as inserts, written by a Spark job as delta-spark records them)."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    files = files_with_matches(snap, parse(plan.replace_where), plan.time_zone)
    cdf = change_data_feed_enabled(plan.configuration)
    adds: list[AddFile] = []
    parts = []
    names = [f.name for f in plan.schema.fields]
    cols = ["path", "partitionValues", "size", "stats", "deletionVector"]
    if files:
        wanted = {a.path for a in files}
        table = snap.files_table(cols)
        table = table.filter(pa.array([p in wanted for p in table.column("path").to_pylist()], pa.bool_()))
        old = read_snapshot(spark, snap, files=table)
        hit = F.coalesce(F.expr(plan.replace_where), F.lit(False))
        kept = old.filter(~hit)
        adds, _ = write_dataframe(kept, log, plan_rewrite(snap, "WRITE"))
        if cdf:
            gone = old.filter(hit)
            have = set(gone.columns)
            parts.append(gone.select(*[col(n) if n in have else F.lit(None).alias(n) for n in names],
                                     F.lit("delete").alias(CHANGE_TYPE)))
    cdcs: list = []
    if cdf and written:
        new = pa.Table.from_pylist([{"path": a.path, "partitionValues": list(a.partition_values.items()),
                                     "size": a.size, "stats": a.stats, "deletionVector": None} for a in written],
                                   schema=snap.files_table(cols).schema)
        back = read_snapshot(spark, snap, files=new, schema=plan.schema)
        parts.append(back.select(*[col(n) for n in names], F.lit("insert").alias(CHANGE_TYPE)))
    if parts:
        cdc = parts[0]
        for p in parts[1:]:
            cdc = cdc.unionByName(p)
        cdc_plan = dataclasses.replace(plan_rewrite(snap, "WRITE"), schema_json=plan.schema_json, constraints=[],
                                       generated=[], identity={}, defaults={})
        try:
            files_written, _ = write_dataframe(cdc, log, cdc_plan, extra_columns={CHANGE_TYPE: CHANGE_TYPE},
                                               subdir=CDC_DIR, file_prefix="cdc")
        except BaseException:
            delete_data_files(log.store, log.table_root, adds)
            raise
        cdcs = [AddCDCFile(path=a.path, partition_values=a.partition_values, size=a.size) for a in files_written]
    return (files, sum(a.num_records or 0 for a in adds)), adds, cdcs
