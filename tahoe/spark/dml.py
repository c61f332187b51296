"""The Spark executor of DELETE, UPDATE and MERGE (behind `tahoe.spark.DeltaTable`): the planner
(`tahoe.write.dml_plan`) decides, Spark moves the rows; the driver sees only per-file counts and
deletion-vector bitmaps. `run_dml` runs a plan and makes one commit with delta-spark's metrics.

  1. Scan the candidate files with each row's file and position; a MERGE joins the source (broadcast under
     `spark.sql.autoBroadcastJoinThreshold`). Each row gets its first matching clause; the changed rows are
     summarized per file (`_summarize`), multiple matches found without a job of their own — a DELETE
     without change data collects its rows' file ordinals and positions straight, no Python worker
     (`_deleted_positions`, when `_collectable`).
  2. The inline path (every UPDATE and MERGE without change data): the same job writes the updated rows
     (`_summarize_and_write`); with change data they are kept and written afterwards with their pre-images.
  3. Write the rest with `tahoe.spark.write.write_dataframe(s)`: copy-on-write's untouched rows, MERGE
     inserts (a broadcast anti join), change data rows. A broadcast source's plain inserts (`_driver_inserts`)
     are collected with it while the driver plans step 1 and written by the driver, no inserts job.
  4. Commit once through `tahoe.write.dml_commit.write_and_commit`."""

from __future__ import annotations

import dataclasses
import time
import uuid
from typing import Any

import pyarrow as pa

from ..errors import DeltaUnsupportedOperationException, UnsupportedFeatureError
from ..expressions import Column as ColumnRef, Expression, Literal
from .columns import to_spark_column
from ..log import DeltaLog
from ..protocol.actions import AddCDCFile, AddFile
from ..protocol.deletion_vectors import inline_dv, load_deletion_vector
from ..protocol.schema import StructType as DeltaStruct, is_void
from ..storage import resolve_data_path
from ..txn import Transaction
from ..write.dml_plan import (
    CHANGE_TYPE, CLAUSE, MULTIPLE_MATCHES_MESSAGE, ROW_COMMIT_VERSION, ROW_ID, SOURCE_PRESENT, TARGET_PRESENT,
    DmlPlan, candidate_files, record_reads,
)
from ..write.commit import delete_data_files
from ..write.dml_commit import Counts, cdc_needed, write_and_commit
from . import internals
from .read import FILE_COLUMN, ROW_COLUMN, hadoop_uri, jvm_reaches, read_snapshot
from .session import session_time_zone
from .session import configure
from .types import assign_by_name, col, from_spark_schema, to_spark_type
from .write import (
    drop_staging, move_staged, session_plan, shape_rows, write_arrow_rows, write_dataframe, write_dataframes,
)

__all__ = ["run_dml", "column_sql", "dataframe_alias", "spark_typer"]

SID = "__tahoe_source_row"
_MATCHED = "__tahoe_matched"
_S_CLAUSE = "__tahoe_summary_clause"   # the summary's columns (see `_summarize`)
_S_SID = "__tahoe_summary_source_row"
_WRITE = "__tahoe_write"
CDC_DIR = "_change_data"


# --- helpers for the API layer ------------------------------------------------------------------------

def is_classic(df) -> bool:
    return not internals.is_connect(df)


def column_sql(df, column) -> str:
    """The Spark SQL text of a pyspark Column, resolved against `df` — how Column conditions and
    values reach the planner: classic Columns through Spark's analyzer (qualified names, implicit
    casts explicit), Spark Connect Columns (expression trees built on the client) written out as
    SQL (`tahoe.spark.connect_sql`)."""
    if internals.is_connect(column):
        from .connect_sql import column_sql as connect_column_sql

        return connect_column_sql(column, df)
    return internals.column_sql(df, column)


def dataframe_alias(df) -> str | None:
    """The alias a DataFrame was given (`df.alias("s")`), when every column carries it."""
    return internals.dataframe_alias(df)


def spark_typer(df, known: dict | None = None, fallback=None):
    """The type of an expression over `df` (Spark's analyzer), as a tahoe type. `df` may be a
    callable making the relation, built at the first expression that needs Spark. `known`
    ({alias: tahoe StructType} of the relation's sides): a reference to a top-level column —
    `alias.name`, or a bare name exactly one side has — is typed from its schema with no
    analysis (UPDATE SET *, MERGE ... UPDATE/INSERT *: every value is one). `fallback`: the
    relation (a callable) to type an expression `df` cannot analyse (`df` then an empty relation
    of the table's columns, cheap to build, and `fallback` the table's scan)."""
    from pyspark.errors import AnalysisException as SparkAnalysisException
    from pyspark.sql.types import StructField, StructType

    made: list = []

    def relation():
        if not made:
            made.append(df() if callable(df) else df)
        return made[0]

    def analysed(expr: Expression):
        with internals.internal_columns():
            try:
                return relation().select(to_spark_column(expr).alias("x")).schema.fields[0].dataType
            except SparkAnalysisException:
                if fallback is None:
                    raise
            made[:] = [fallback()]
            return relation().select(to_spark_column(expr).alias("x")).schema.fields[0].dataType

    def field_type(schema, name: str):
        hits = [f for f in schema.fields if f.name.lower() == name.lower()]
        return hits[0].type if len(hits) == 1 and not is_void(hits[0].type) else None

    def from_known(expr: Expression):
        if not known or not isinstance(expr, ColumnRef):
            return None
        if len(expr.parts) == 2 and expr.parts[0] in known:
            return field_type(known[expr.parts[0]], expr.parts[1])
        if len(expr.parts) == 1:
            types = [t for t in (field_type(sch, expr.parts[0]) for sch in known.values()) if t is not None]
            return types[0] if len(types) == 1 else None
        return None

    def typer(expr: Expression):
        t = from_known(expr)
        if t is not None:
            return t
        dt = analysed(expr)
        return from_spark_schema(StructType([StructField("x", dt)])).fields[0].type
    return typer


def _estimated_bytes(df) -> int | None:
    return internals.plan_size_in_bytes(df)


def _broadcast_threshold(spark) -> int:
    try:
        v = str(spark.conf.get("spark.sql.autoBroadcastJoinThreshold", "10485760")).strip().lower()
        mult = {"b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "g": 1 << 30, "gb": 1 << 30}
        for suffix in ("kb", "mb", "gb", "k", "m", "g", "b"):
            if v.endswith(suffix):
                return int(float(v[:-len(suffix)]) * mult[suffix])
        return int(v)
    except (ValueError, TypeError):
        return 10 << 20


# --- the executor ---------------------------------------------------------------------------------------

def run_dml(spark, log: DeltaLog, snap, plan: DmlPlan, source=None) -> dict[str, Any]:
    """Run a planned DML on Spark and commit it; delta-spark's metrics and `version`."""
    configure(spark)
    with internals.internal_columns():   # (PySpark's call sites of tahoe's own Columns: not sent)
        return _SparkDml(spark, log, snap, plan, source).run()


class _SparkDml:
    def __init__(self, spark, log: DeltaLog, snap, plan: DmlPlan, source):
        from pyspark.sql.types import LongType

        self.spark = spark
        self.log = log
        self.snap = snap
        self.plan = plan
        self.source = source
        self.schema = plan.schema
        self.read_schema = plan.read_schema
        self.tracking = {n: LongType() for n in plan.row_tracking} if plan.row_tracking else {}
        self.by_index = {c.index: c for c in plan.clauses}
        self.persisted: list = []
        self.matched_sources = None  # MERGE: BitMap64 of the matched source rows' ids (SID)
        # the inline path (module docstring): not with change data (its pre-images need the
        # changed rows again)
        self.inline = not plan.cdf
        self.inline_files: list[AddFile] = []
        self.inline_marks: dict[str, int] = {}
        self.inline_staging: str | None = None
        self.small_source = False
        self.fetching = None   # MERGE: the thread collecting the insert candidates (`_fetch_inserts`)

    # --- reading the target -------------------------------------------------------------------------
    def _files_table(self, adds: list[AddFile], dvs: dict[str, Any] | None = None) -> pa.Table:
        """The files table of `adds` for `read_snapshot` (`dvs`: replacement DV descriptors)."""
        ft = self.snap.files_table(["path", "partitionValues", "size", "stats", "deletionVector"])
        wanted = {a.path for a in adds}
        keep = [p in wanted for p in ft.column("path").to_pylist()]
        ft = ft.filter(pa.array(keep, pa.bool_()))
        if dvs:
            typ = ft.schema.field("deletionVector").type
            col_dv = [dvs[p].to_dict() if p in dvs else d
                      for p, d in zip(ft.column("path").to_pylist(), ft.column("deletionVector").to_pylist())]
            ft = ft.set_column(ft.schema.get_field_index("deletionVector"), "deletionVector",
                               pa.array(col_dv, typ))
        return ft

    def _uri(self, add: AddFile) -> str:
        return hadoop_uri(resolve_data_path(self.snap.table_root, add.path))

    def _target(self, adds: list[AddFile], dvs: dict[str, Any] | None = None, columns: list[str] | None = None):
        """The rows of `adds` (logical columns of the read schema: all, or `columns`) with
        FILE_COLUMN / ROW_COLUMN and, with row tracking, ROW_ID / ROW_COMMIT_VERSION."""
        from pyspark.sql import functions as F

        df = read_snapshot(self.spark, self.snap, files=self._files_table(adds, dvs), file_row=True,
                           extra_columns=self.tracking or None, columns=columns)   # Spark reads only these
        if not self.tracking:
            return df
        from pyspark.sql.types import LongType, StringType, StructField, StructType

        rid_col, rcv_col = self.plan.row_tracking
        info = self.spark.createDataFrame(
            [(self._uri(a), a.base_row_id, a.default_row_commit_version) for a in adds],
            StructType([StructField(FILE_COLUMN, StringType()), StructField("__tahoe_base", LongType()),
                        StructField("__tahoe_drcv", LongType())]))
        df = df.join(F.broadcast(info), on=FILE_COLUMN, how="left")
        df = df.withColumn(ROW_ID, F.coalesce(col(rid_col), F.col("__tahoe_base") + F.col(ROW_COLUMN)))
        df = df.withColumn(ROW_COMMIT_VERSION, F.coalesce(col(rcv_col), F.col("__tahoe_drcv")))
        return df.drop(rid_col, rcv_col, "__tahoe_base", "__tahoe_drcv")

    # --- trees → columns ------------------------------------------------------------------------------
    def _clause_column(self, clauses, with_presence: bool = True):
        from pyspark.sql import functions as F

        out = None
        for c in clauses:
            g = c.guard if with_presence else c.condition
            cond = F.lit(True) if g is None else to_spark_column(g)
            out = F.when(cond, F.lit(c.index)) if out is None else out.when(cond, F.lit(c.index))
        return out if out is not None else F.lit(None).cast("int")

    def _values(self, df, clauses, columns: list[str], generated: dict, keep_also: tuple = ()):
        """`df` (rows each taken by one of `clauses`, CLAUSE set) → the rows they write: the
        clauses' values stored into the table's types (`assign_by_name`: struct fields by name;
        the values' types read from one analysis of the projection), then generated columns
        recomputed. `keep_also`: more columns of `df` carried along."""
        from pyspark.sql import functions as F

        sel = []
        for name in columns:
            expr = None
            for c in clauses:
                if name in c.values:
                    v = to_spark_column(c.values[name])
                    cond = F.col(CLAUSE) == F.lit(c.index)
                    expr = F.when(cond, v) if expr is None else expr.when(cond, v)
            sel.append((F.lit(None) if expr is None else expr).alias(name))
        keep = [CLAUSE] + [n for n in (FILE_COLUMN, ROW_COLUMN, ROW_ID, ROW_COMMIT_VERSION, *keep_also)
                           if n in df.columns]
        raw = df.select(*sel, *[col(n) for n in keep])
        types = {f.name: f.dataType for f in raw.schema.fields}
        targets = {name: to_spark_type(self.schema.field(name).type) for name in columns}
        if all(types[name] == targets[name] for name in columns):
            out = raw   # (every value already of its column's type: no second projection to analyse)
        else:
            out = raw.select(*[assign_by_name(col(name), types[name], targets[name]).alias(name)
                               for name in columns], *[col(n) for n in keep])
        for name, (expr, recompute) in generated.items():
            f = self.schema.field(name)
            value = to_spark_column(expr).cast(to_spark_type(f.type))
            cur = col(name) if name in out.columns else F.lit(None).cast(to_spark_type(f.type))
            out = out.withColumn(name, F.when(F.col(CLAUSE).isin(*recompute), value).otherwise(cur))
        return out

    def _as_table(self, column, name: str):
        """The target's column `name` (pyspark Column) as the table's type after the operation
        (NULL for a column schema evolution adds; new struct fields NULL)."""
        from pyspark.sql import functions as F

        f = self.schema.field(name)
        old = self.read_schema.get(name)
        target = to_spark_type(f.type)
        if old is None:
            return F.lit(None).cast(target).alias(name)
        return assign_by_name(column, to_spark_type(old.type), target).alias(name)

    def _old_values(self, df):
        """The target's values of `df`'s rows, as the table's schema after the operation."""
        old = {f.name for f in self.read_schema.fields}
        return [self._as_table(to_spark_column(self.plan.target_column(f.name)) if f.name in old else None, f.name)
                for f in self.schema.fields]

    def _kept(self, df):
        """`df` kept on the executors by the first job that computes it and read from there by
        the later ones (a lazy local checkpoint: no separate job builds it, as AQE does for a
        persisted DataFrame); released when the DML ends."""
        df = df.localCheckpoint(eager=False)
        self.persisted.append(df)
        return df

    # --- running ----------------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        try:
            return self._run()
        finally:
            if self.fetching is not None:   # (its job reads the kept source: done before it goes)
                self.fetching.join()
            for df in self.persisted:    # the checkpoint's blocks (else freed only by a JVM GC)
                internals.release_checkpoint(df)

    def _run(self) -> dict[str, Any]:
        from pyspark.sql import functions as F

        plan, snap, spark = self.plan, self.snap, self.spark
        txn = Transaction(self.log, plan.operation, plan.parameters, snapshot=snap)
        tz = session_time_zone(spark)   # Spark evaluates the rows in it: prune files in it too
        candidates = candidate_files(plan, snap, tz)
        record_reads(plan, txn, candidates, tz)
        counts = Counts()
        t0 = time.perf_counter()
        source = None
        uses_sid = plan.has_not_matched and (plan.has_matched or plan.has_not_matched_by_source)
        if plan.operation == "MERGE":
            if uses_sid:
                # materialized by the first job that reads it (the matching), read again by the inserts
                source = self._kept(self.source.withColumns({SOURCE_PRESENT: F.lit(True),
                                                             SID: F.monotonically_increasing_id()}))
            else:
                source = self.source.withColumn(SOURCE_PRESENT, F.lit(True))
            source = source.alias(plan.source_alias)
            est = _estimated_bytes(self.source)
            if est is not None and est <= _broadcast_threshold(spark):
                source = F.broadcast(source)
                # its inserts: few rows, written in the tasks (`write_dataframe(few_rows=True)`; classic
                # sessions, where it was measured — over Spark Connect Spark's writer as before)
                self.small_source = not internals.is_connect(self.source)
        joins = bool(candidates) and (plan.operation != "MERGE" or plan.has_matched or plan.has_not_matched_by_source)
        if uses_sid and joins and self.inline and self.small_source and self._driver_inserts():
            self._fetch_inserts(source)
        modifying = [c for c in plan.clauses if c.action in ("update", "delete")]
        changed = None
        collect = False
        summary: dict[str, dict] = {}
        if joins:
            target = self._target(candidates, columns=plan.target_columns_read())
            if plan.operation == "DELETE" and not plan.cdf:
                # only the deleted rows' places are needed: Spark reads just the condition's columns
                (clause,) = plan.clauses
                target = target.alias(plan.target_alias) if plan.user_target_alias else target
                rows = target if clause.condition is None else target.filter(to_spark_column(clause.condition))
                collect = _collectable(candidates)
                if not collect:
                    rows = rows.select(FILE_COLUMN, ROW_COLUMN, F.lit(clause.index).cast("long").alias(CLAUSE),
                                       F.lit(False).alias(_MATCHED), F.lit(None).cast("long").alias(SID))
            else:
                if plan.operation == "MERGE":
                    target = target.withColumn(TARGET_PRESENT, F.lit(True)).alias(plan.target_alias)
                    how = "left" if plan.has_not_matched_by_source else "inner"
                    joined = target.join(source, on=to_spark_column(plan.condition), how=how)
                    clauses = [c for c in plan.clauses if c.kind != "notMatched"]
                    joined = joined.withColumn(CLAUSE, self._clause_column(clauses))
                    keep = F.col(CLAUSE).isNotNull() | F.col(SOURCE_PRESENT).isNotNull()
                else:
                    target = target.alias(plan.target_alias) if plan.user_target_alias else target
                    joined = target.withColumn(CLAUSE, self._clause_column(plan.clauses, with_presence=False))
                    keep = F.col(CLAUSE).isNotNull()
                if self.inline:
                    rows = joined.filter(keep)
                else:
                    changed = self._kept(joined.filter(keep))
            # one job: the changed rows' places per clause and, for a MERGE, every matched pair's
            # place (a target row matched twice: delta-spark's error)
            check = plan.checks_multiple_matches
            modified_idx = [c.index for c in modifying]
            if self.inline and plan.operation != "DELETE":
                summary, duplicates, sids = self._summarize_and_write(rows, modified_idx, check, uses_sid)
                self.matched_sources = sids if uses_sid else None
                if duplicates:
                    self._drop_inline()
                    raise DeltaUnsupportedOperationException(
                        MULTIPLE_MATCHES_MESSAGE, "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE")
            elif changed is None and plan.operation == "DELETE" and collect:
                summary = _deleted_positions(rows, [self._uri(a) for a in candidates], plan.clauses[0].index)
            elif changed is None:
                summary, _, _ = _summarize(rows)
            elif modified_idx or check:
                clause = F.when(F.col(CLAUSE).isin(*modified_idx), F.col(CLAUSE)) if modified_idx \
                    else F.lit(None).cast("int")
                matched = F.col(SOURCE_PRESENT).isNotNull() if check else F.lit(False)
                sid = F.when(F.col(SOURCE_PRESENT).isNotNull(), F.col(SID)) if uses_sid else F.lit(None).cast("long")
                rows = changed.select(FILE_COLUMN, ROW_COLUMN, clause.cast("long").alias(CLAUSE),
                                      matched.alias(_MATCHED), sid.alias(SID))
                summary, duplicates, sids = _summarize(rows)
                self.matched_sources = sids if uses_sid else None
                if duplicates:
                    raise DeltaUnsupportedOperationException(
                        MULTIPLE_MATCHES_MESSAGE, "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE")
        counts.scan_ms = int((time.perf_counter() - t0) * 1000)
        try:
            return self._write_and_commit(txn, candidates, changed, source, summary, counts)
        except BaseException:
            self._drop_inline()   # (write_and_commit deletes them too once it has them)
            raise

    def _summarize_and_write(self, rows, modified_idx: list[int], check: bool, uses_sid: bool):
        """The inline path's one job (see the module docstring): `rows` (the changed rows, and for
        a MERGE every matched pair) → the summary of `_summarize`, the updated rows written as
        data files by the same tasks (`write_arrow_rows`, the rewrite plan's checks evaluated on
        them only) into a staging directory, moved into place here (`self.inline_files`)."""
        from pyspark.sql import functions as F

        plan = self.plan
        update_clauses = [c for c in plan.clauses if c.action == "update"]
        clause = F.when(F.col(CLAUSE).isin(*modified_idx), F.col(CLAUSE)) if modified_idx else F.lit(None).cast("int")
        matched = F.col(SOURCE_PRESENT).isNotNull() if check else F.lit(False)
        sid = F.when(F.col(SOURCE_PRESENT).isNotNull(), F.col(SID)) if uses_sid else F.lit(None).cast("long")
        writes = F.coalesce(F.col(CLAUSE).isin(*[c.index for c in update_clauses]), F.lit(False)) \
            if update_clauses else F.lit(False)
        rows = rows.withColumns({_S_CLAUSE: clause.cast("long"), _MATCHED: matched, _S_SID: sid.cast("long"),
                                 _WRITE: writes})
        summary_cols = [FILE_COLUMN, ROW_COLUMN, _S_CLAUSE, _MATCHED, _S_SID, _WRITE]
        extras = {ROW_ID: plan.row_tracking[0], ROW_COMMIT_VERSION: plan.row_tracking[1]} if plan.row_tracking else {}
        out_cols = self._out_columns(update_clauses)
        values = self._values(rows, update_clauses, out_cols, plan.update_generated, keep_also=tuple(summary_cols))
        if extras:
            values = values.withColumn(ROW_COMMIT_VERSION, F.lit(None).cast("long"))
        wplan = session_plan(self.spark, plan.rewrite_plan)   # (write.utcTimestampPartitionValues)
        shaped = shape_rows(values, wplan, [*extras, *summary_cols], where=_WRITE)
        local = jvm_reaches(self.log.table_root, self.spark)
        staging = f"_tahoe_staging_{uuid.uuid4().hex}" if local else ""
        self.inline_staging = staging or None
        summary, duplicates, sids, adds, marks = _summarize(
            shaped.select(*summary_cols, *[col(f.name) for f in self.schema.fields], *[col(n) for n in extras]),
            _InlineWrite(wplan, [f.name for f in self.schema.fields], extras, staging))
        self.inline_files = move_staged(self.log, adds, staging) if staging else adds
        self.inline_staging = None
        self.inline_marks = marks
        return summary, duplicates, sids

    def _drop_staging(self) -> None:
        if self.inline_staging:
            drop_staging(self.log, self.inline_staging)
            self.inline_staging = None

    def _drop_inline(self) -> None:
        """The inline job's files (the DML failed before its commit)."""
        self._drop_staging()
        if self.inline_files:
            delete_data_files(self.log.store, self.log.table_root, self.inline_files)
            self.inline_files = []

    def _out_columns(self, update_clauses) -> list[str]:
        """The columns an update writes before `_shape` (generated ones only where a clause
        assigns them: else `_values` recomputes them)."""
        return [f.name for f in self.schema.fields if not f.metadata.get("delta.generationExpression")
                or any(f.name in c.values for c in update_clauses)]

    def _write_and_commit(self, txn: Transaction, candidates: list[AddFile], changed, source, summary: dict,
                          counts: Counts) -> dict[str, Any]:
        from pyspark.sql import functions as F

        plan, snap = self.plan, self.snap
        by_uri = {self._uri(a): a for a in candidates}
        removed: list[AddFile] = []
        dv_rows: dict[str, Any] = {}
        copy_dvs: dict[str, Any] = {}
        touched: list[AddFile] = []
        partial = False
        for uri, (bitmaps, _) in summary.items():
            add = by_uri[uri]
            from pyroaring import BitMap64

            allbm = BitMap64()
            for bm in bitmaps.values():
                allbm |= bm
            for ci, bm in bitmaps.items():
                c = self.by_index[ci]
                n = len(bm)
                if c.action == "delete":
                    counts.deleted += n
                    if c.kind == "matched":
                        counts.matched_deleted += n
                    elif plan.operation == "MERGE":
                        counts.nmbs_deleted += n
                else:
                    counts.updated += n
                    if c.kind == "matched":
                        counts.matched_updated += n
                    elif plan.operation == "MERGE":
                        counts.nmbs_updated += n
            live = (add.num_records or 0) - (add.deletion_vector.cardinality if add.deletion_vector else 0)
            whole = add.num_records is not None and len(allbm) >= live
            if plan.dv and not whole:
                dv_rows[add.path] = allbm
                partial = True
                if add.deletion_vector is None:
                    counts.dv_added += 1
                else:
                    counts.dv_updated += 1
                continue
            removed.append(add)
            if add.deletion_vector is not None:
                counts.dv_removed += 1
            if not whole:
                touched.append(add)
                before = load_deletion_vector(add.deletion_vector, snap.table_root, snap.store.read_range) \
                    if add.deletion_vector is not None else BitMap64()
                copy_dvs[add.path] = inline_dv(before | allbm)
                counts.copied += live - len(allbm)
                partial = True
        update_clauses = [c for c in plan.clauses if c.action == "update"]
        extras = {ROW_ID: plan.row_tracking[0], ROW_COMMIT_VERSION: plan.row_tracking[1]} if plan.row_tracking else None
        out_cols = self._out_columns(update_clauses)

        def write(new_files: list) -> tuple[list[AddFile], list[AddCDCFile], dict[str, int]]:
            added: list[AddFile] = list(self.inline_files)   # the updated rows, written by the scan job
            new_files += self.inline_files
            self.inline_files = []   # write_and_commit owns them now
            cdcs: list[AddCDCFile] = []
            marks: dict[str, int] = dict(self.inline_marks)
            updated = None
            if changed is not None and counts.updated:
                upd = changed.filter(F.col(CLAUSE).isin(*[c.index for c in update_clauses]))
                updated = self._values(upd, update_clauses, out_cols, plan.update_generated)
                if extras:
                    updated = updated.withColumn(ROW_COMMIT_VERSION, F.lit(None).cast("long"))
            parts = []
            if updated is not None:
                if touched:   # unioned with the copies: the same columns
                    updated = updated.select(*[col(f.name) for f in self.schema.fields],
                                             *([col(ROW_ID), col(ROW_COMMIT_VERSION)] if extras else []))
                parts.append(updated)   # (alone, the write's shaping keeps only the table's columns)
            if touched:
                copies = self._target(touched, copy_dvs)
                copies = copies.select(*self._plain_old(copies),
                                       *([col(ROW_ID), col(ROW_COMMIT_VERSION)] if extras else []))
                parts.insert(0, copies)
            fetched = self.fetching.result() if self.fetching is not None else None
            inserts = self._inserts(changed, source) \
                if plan.operation == "MERGE" and plan.has_not_matched and fetched is None else None
            inserted: list[AddFile] = []
            if fetched is not None:
                inserted = self._write_fetched(fetched)
                added += inserted
                new_files += inserted
                counts.inserted = sum(a.num_records or 0 for a in inserted)
            rewritten = None
            if parts:
                rewritten = parts[0]
                for p in parts[1:]:
                    rewritten = rewritten.unionByName(p)
            if rewritten is not None and inserts is not None and not plan.cdf and not extras \
                    and not plan.insert_plan.identity and plan.insert_plan.schema == plan.rewrite_plan.schema:
                # one job writes the rewritten and the inserted rows (the inserts counted on the way)
                files, job_marks = write_dataframes([(rewritten, plan.rewrite_plan), (inserts, plan.insert_plan)],
                                                    self.log)
                marks.update(job_marks)
                added += files
                new_files += files
                # every row written is a rewritten one (updated here, or copied) or an inserted one
                counts.inserted = sum(a.num_records or 0 for a in files) - counts.copied - \
                    (counts.updated if updated is not None else 0)
            else:
                if rewritten is not None:
                    files, _ = write_dataframe(rewritten, self.log, plan.rewrite_plan, extra_columns=extras)
                    added += files
                    new_files += files
                if inserts is not None:
                    inserted, job_marks = write_dataframe(inserts, self.log, plan.insert_plan, few_rows=self.small_source)
                    marks.update(job_marks)
                    added += inserted
                    new_files += inserted
                    counts.inserted = sum(a.num_records or 0 for a in inserted)
            if plan.operation == "MERGE":
                counts.source_rows = self._source_rows(source, counts)
            if cdc_needed(plan, counts, partial):
                cdc = self._cdc(changed, updated, inserted, update_clauses)
                if cdc is not None:
                    cdc_plan = dataclasses.replace(plan.rewrite_plan, constraints=[], generated=[])
                    files, _ = write_dataframe(cdc, self.log, cdc_plan, extra_columns={CHANGE_TYPE: CHANGE_TYPE},
                                               subdir=CDC_DIR, file_prefix="cdc")
                    cdcs = [AddCDCFile(path=a.path, partition_values=a.partition_values, size=a.size) for a in files]
                    new_files += cdcs
            return added, cdcs, marks

        return write_and_commit(plan, txn, snap, counts, removed, dv_rows, write)

    def _driver_inserts(self) -> bool:
        """Whether a MERGE's inserts can be collected with the source and written by the driver
        (`_fetch_inserts`): one unconditional insert clause whose values are bare columns or
        literals already of their column's type (checked on the analysed projection), nothing
        computed or checked (no identity, generated, default, NOT NULL, CHECK), a table Spark's
        JVM reaches. Then evaluating those values on every source row — matched ones too — can
        neither fail nor differ from evaluating them on the unmatched rows only."""
        plan, ip = self.plan, self.plan.insert_plan
        nm = plan.clauses_of("notMatched")
        if ip is None or len(nm) != 1 or nm[0].condition is not None or nm[0].action != "insert":
            return False
        if ip.identity or ip.generated or ip.defaults or ip.constraints or plan.insert_generated \
                or _has_not_null(ip.schema):
            return False
        names = [f.name for f in ip.schema.fields]
        values = nm[0].values
        if set(plan.insert_columns) != set(names) or \
                not all(isinstance(values.get(n), (ColumnRef, Literal)) for n in names):
            return False
        return jvm_reaches(self.log.table_root, self.spark)

    def _fetch_inserts(self, source) -> None:
        """MERGE with a broadcast source (`_driver_inserts`): a thread collects the source's
        rows as the insert clause writes them, with their source row ids (SID), while the driver
        plans the matching — its job also materializes the kept source the matching reads. Once
        the matching has given the matched ids, `_write_fetched` writes the others: no inserts
        job. `result()`: the Arrow table, or None (a value not of its column's type, or a source
        that failed to collect: the anti join as usual)."""
        from pyspark import InheritableThread
        from pyspark.sql import functions as F

        plan = self.plan
        (clause,) = plan.clauses_of("notMatched")
        out: dict[str, Any] = {}

        def fetch() -> None:
            try:
                targets = {f.name: to_spark_type(f.type) for f in plan.insert_plan.schema.fields}
                raw = source.select(*[to_spark_column(clause.values[n]).alias(n) for n in targets], F.col(SID))
                if any(f.dataType != targets[f.name] for f in raw.schema.fields if f.name in targets):
                    out["table"] = None
                    return
                out["table"] = raw.toArrow()   # (already shaped: the columns' types, nothing to compute or check)
            except Exception:  # noqa: BLE001 - e.g. a type Arrow does not carry: the anti join decides
                out["table"] = None
            except BaseException as e:  # noqa: BLE001 - raised where the result is taken
                out["error"] = e

        def result():
            thread.join()
            if "error" in out:
                raise out["error"]
            return out["table"]

        thread = InheritableThread(target=fetch, daemon=True)
        thread.result = result   # type: ignore[attr-defined]
        thread.start()
        self.fetching = thread

    def _write_fetched(self, table: pa.Table) -> list[AddFile]:
        """`_fetch_inserts`' rows no target row matched, written by the driver (as the tasks of
        `write_dataframe(few_rows=True)` write them: through a staging directory, moved into
        place)."""
        import json

        import numpy as np
        import pyarrow.compute as pc

        from ..write.files import DEFAULT_TARGET_FILE_ROWS

        matched = self.matched_sources
        if matched:
            ids = pa.array(np.frombuffer(matched.to_array(), np.uint64).astype(np.int64))
            table = table.filter(pc.invert(pc.is_in(table.column(SID), value_set=ids)))
        rows = table.drop_columns([SID])
        if not rows.num_rows:
            return []
        wplan = session_plan(self.spark, self.plan.insert_plan)
        staging = f"_tahoe_staging_{uuid.uuid4().hex}"
        adds: list[AddFile] = []
        try:
            for start in range(0, rows.num_rows, DEFAULT_TARGET_FILE_ROWS):
                lines, _ = write_arrow_rows(wplan, rows.slice(start, DEFAULT_TARGET_FILE_ROWS), None, staging)
                adds += [AddFile.from_dict(json.loads(a)["add"]) for a in lines]
        except BaseException:
            drop_staging(self.log, staging)
            raise
        return move_staged(self.log, adds, staging)

    def _source_rows(self, source, counts: Counts) -> int:
        """numSourceRows. A MERGE whose last insert clause takes every unmatched source row
        (no condition) inserted each source row no target row matched: the matched ones (their
        ids, from the summary job) and the inserted ones are all of them, no job needed. Else a
        count of the source (kept on the executors when the MERGE reads it twice)."""
        nm = self.plan.clauses_of("notMatched")
        if self.matched_sources is not None and nm and any(c.condition is None for c in nm):
            return len(self.matched_sources) + counts.inserted
        return source.count()

    def _plain_old(self, df):
        """A plain scan's rows (no join: bare names) as the table's schema after the operation."""
        old = {f.name for f in self.read_schema.fields}
        return [self._as_table(col(f.name) if f.name in old else None, f.name) for f in self.schema.fields]

    def _inserts(self, changed, source):
        """MERGE: the rows insert clauses add (source rows no target row matched)."""
        from pyspark.sql import functions as F

        plan = self.plan
        if plan.has_matched or plan.has_not_matched_by_source:
            if changed is None and self.matched_sources:
                # the inline path: the matched source rows' ids from the summary, a local relation
                # (broadcast with no job)
                import numpy as np

                ids = pa.table({_MATCHED: pa.array(np.frombuffer(self.matched_sources.to_array(), np.uint64)
                                                    .astype(np.int64))})
                matched = self.spark.createDataFrame(ids)
                unmatched = source.join(F.broadcast(matched), on=F.col(SID) == F.col(_MATCHED), how="left_anti")
            elif changed is not None:
                # no distinct (a shuffle): the broadcast hash relation takes repeated keys
                matched = changed.filter(F.col(SOURCE_PRESENT).isNotNull() & F.col(TARGET_PRESENT).isNotNull()) \
                    .select(F.col(SID).alias(_MATCHED))
                unmatched = source.join(F.broadcast(matched), on=F.col(SID) == F.col(_MATCHED), how="left_anti")
            else:
                unmatched = source
        else:   # insert-only: one anti join against the candidate files (only the condition's columns are read)
            candidates = candidate_files(plan, self.snap, session_time_zone(self.spark))
            if candidates:
                target = self._target(candidates, columns=plan.target_columns_read()).alias(plan.target_alias)
                unmatched = source.join(target, on=to_spark_column(plan.condition), how="left_anti")
            else:
                unmatched = source
        clauses = plan.clauses_of("notMatched")
        rows = unmatched.withColumn(CLAUSE, self._clause_column(clauses, with_presence=False)) \
            .filter(F.col(CLAUSE).isNotNull())
        # (the write's shaping keeps only the table's columns of these)
        return self._values(rows, clauses, plan.insert_columns, plan.insert_generated)

    def _new_files_table(self, adds: list[AddFile]) -> pa.Table:
        cols = ["path", "partitionValues", "size", "stats", "deletionVector"]
        schema = self.snap.files_table(cols).schema
        return pa.Table.from_pylist([{"path": a.path, "partitionValues": list(a.partition_values.items()),
                                      "size": a.size, "stats": a.stats, "deletionVector": None} for a in adds],
                                    schema=schema)

    def _cdc(self, changed, updated, inserted: list[AddFile] | None, update_clauses):
        """The change rows of the commit: deleted rows, update pre- and post-images, inserts."""
        from pyspark.sql import functions as F

        plan = self.plan
        names = [f.name for f in self.schema.fields]
        parts = []
        if changed is not None:
            deletes = [c.index for c in plan.clauses if c.action == "delete"]
            if deletes:
                d = changed.filter(F.col(CLAUSE).isin(*deletes)).dropDuplicates([FILE_COLUMN, ROW_COLUMN])
                parts.append(d.select(*self._old_values(d), F.lit("delete").alias(CHANGE_TYPE)))
            if updated is not None:
                u = changed.filter(F.col(CLAUSE).isin(*[c.index for c in update_clauses]))
                parts.append(u.select(*self._old_values(u), F.lit("update_preimage").alias(CHANGE_TYPE)))
                parts.append(updated.select(*[col(n) for n in names], F.lit("update_postimage").alias(CHANGE_TYPE)))
        if inserted:   # the rows the insert write wrote (identity values, defaults), read back
            back = read_snapshot(self.spark, self.snap, files=self._new_files_table(inserted), schema=self.schema)
            parts.append(back.select(*[col(n) for n in names], F.lit("insert").alias(CHANGE_TYPE)))
        if not parts:
            return None
        out = parts[0]
        for p in parts[1:]:
            out = out.unionByName(p)
        return out


def _has_not_null(schema) -> bool:
    """Whether some column, or some field of a struct column, is NOT NULL (the columns
    `tahoe.spark.write._shape` checks)."""
    return any(not f.nullable or (isinstance(f.type, DeltaStruct) and _has_not_null(f.type)) for f in schema.fields)


# a DELETE collects its rows' positions straight (a file ordinal and a position, 12 bytes a row)
# when its candidate files are at most this many and hold at most this many live rows; else the
# positions are summarized in the tasks (`_summarize`: serialized bitmaps, bounded by the files)
_COLLECT_MAX_FILES = 64
_COLLECT_MAX_ROWS = 1 << 24


def _collectable(candidates: list[AddFile]) -> bool:
    if not 0 < len(candidates) <= _COLLECT_MAX_FILES:
        return False
    live = 0
    for a in candidates:
        if a.num_records is None:
            return False
        live += a.num_records - (a.deletion_vector.cardinality if a.deletion_vector else 0)
    return live <= _COLLECT_MAX_ROWS


def _deleted_positions(rows, uris: list[str], clause: int) -> dict[str, tuple[dict, dict]]:
    """`rows` (FILE_COLUMN, ROW_COLUMN of the rows a DELETE removes; their files among `uris`) →
    {file URI: ({clause: BitMap64 of the positions}, {})}: the positions collected straight
    with each file's ordinal in `uris` (no Python worker, no path strings moved)."""
    import numpy as np
    from pyroaring import BitMap64
    from pyspark.sql import functions as F

    # the URIs as hex literals: no SQL string escaping (whatever spark.sql.parser settings)
    arr = ", ".join(f"cast(X'{u.encode().hex()}' as string)" for u in uris)
    ordinal = F.expr(f"array_position(array({arr}), `{FILE_COLUMN}`)")
    t = rows.select(ordinal.cast("int").alias("f"), F.col(ROW_COLUMN)).toArrow()
    out: dict = {}
    if not t.num_rows:
        return out
    f = t.column(0).to_numpy()
    if (f < 1).any():   # (a row of a file outside the candidates: never, the scan reads only these)
        raise RuntimeError("tahoe: a DELETE found rows of a file it did not plan to read")
    pos = t.column(1).to_numpy().astype(np.uint64)
    order = np.argsort(f, kind="stable")
    f, pos = f[order], pos[order]
    cuts = np.flatnonzero(np.diff(f)) + 1
    for start, part in zip(np.concatenate([[0], cuts]), np.split(pos, cuts)):
        out[uris[int(f[start]) - 1]] = ({clause: BitMap64(part)}, {})
    return out


@dataclasses.dataclass
class _InlineWrite:
    """What `_summarize`'s tasks need to write the rows flagged `_WRITE` (picklable): the write
    plan, the table's columns and the extra (row tracking) ones, the staging directory."""
    plan: Any
    columns: list
    extras: dict
    subdir: str


def _summarize(df, write: _InlineWrite | None = None):
    """`df` (file URI, row position, clause index or null, matched flag, source row id or null;
    with `write`, also a write flag and the rows' table columns) → (per file URI ({clause index:
    BitMap64 of the rows it changes}, {}), whether some row is flagged more than once — a target
    row two source rows match —, BitMap64 of the source row ids) and, with `write`, (the AddFiles
    the tasks wrote — the rows flagged for writing, as `tahoe.spark.write.write_arrow_rows` writes
    them —, their identity high-water marks). One job: each task builds one bitmap per file and
    clause, per file the bitmap of its flagged rows with their count, and the bitmap of the source
    row ids it saw; the driver merges them — flagged pairs outnumbering the distinct flagged rows
    means a row matched twice (exact whatever the partitioning: every pair is counted once)."""
    import json

    from pyroaring import BitMap64

    from ..write.plan import merge_identity_marks

    def task(batches):
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc
        from pyroaring import BitMap64 as BM

        from ..write.files import DEFAULT_TARGET_FILE_ROWS

        acc: dict = {}
        pairs: dict = {}
        sids = BM()
        pending: list = []
        count = 0
        written: list = []

        def flush():
            adds, marks = write_arrow_rows(write.plan, pa.Table.from_batches(pending), write.extras or None,
                                           write.subdir)
            pending.clear()
            written.append((json.dumps(adds), json.dumps(marks)))

        for b in batches:
            if not b.num_rows:
                continue
            files = pc.dictionary_encode(b.column(0))
            names = files.dictionary.to_pylist()
            fidx = files.indices.to_numpy(zero_copy_only=False)
            rows = b.column(1).to_numpy(zero_copy_only=False).astype(np.uint64)
            clauses = pc.fill_null(b.column(2), -1).to_numpy(zero_copy_only=False)
            flagged = pc.fill_null(b.column(3), False).to_numpy(zero_copy_only=False)
            if b.column(4).null_count < b.num_rows:
                # (BitMap64(array) takes a numpy array whole; .update() iterates it element by element)
                sids |= BM(b.column(4).drop_null().to_numpy(zero_copy_only=False).astype(np.uint64))
            one_file = len(names) == 1
            for fi, name in enumerate(names):
                in_file = None if one_file else fidx == fi
                f_rows = rows if one_file else rows[in_file]
                f_clauses = clauses if one_file else clauses[in_file]
                f_flag = flagged if one_file else flagged[in_file]
                for c in np.unique(f_clauses):
                    if c >= 0:     # -1: a matched pair no clause takes
                        bm = BM(f_rows[f_clauses == c])
                        key = (name, int(c))
                        acc[key] = acc[key] | bm if key in acc else bm
                n = int(f_flag.sum())
                if n:
                    bm = BM(f_rows[f_flag])
                    acc[(name, -2)] = acc[(name, -2)] | bm if (name, -2) in acc else bm
                    pairs[name] = pairs.get(name, 0) + n
            if write is not None:
                keep = pc.fill_null(b.column(5), False)
                if pc.any(keep).as_py():
                    part = b.filter(keep).select(list(write.columns) + list(write.extras))
                    pending.append(part)
                    count += part.num_rows
                    if count >= DEFAULT_TARGET_FILE_ROWS:
                        flush()
                        count = 0
        if pending:
            flush()
        keys = list(acc)
        if sids:
            acc[("", -3)] = sids
            keys.append(("", -3))
        schema = pa.schema([("file", pa.string()), ("clause", pa.int64()), ("bitmap", pa.binary()),
                            ("pairs", pa.int64()), ("adds", pa.string()), ("marks", pa.string())])
        if keys:
            yield pa.RecordBatch.from_pydict({
                "file": [k[0] for k in keys], "clause": [k[1] for k in keys],
                "bitmap": [acc[k].serialize() for k in keys],
                "pairs": [pairs.get(k[0], 0) if k[1] == -2 else 0 for k in keys],
                "adds": [None] * len(keys), "marks": [None] * len(keys)}, schema=schema)
        if written:
            yield pa.RecordBatch.from_pydict({
                "file": [None] * len(written), "clause": [-4] * len(written), "bitmap": [None] * len(written),
                "pairs": [0] * len(written), "adds": [a for a, _ in written], "marks": [m for _, m in written]},
                schema=schema)

    try:
        rows = df.mapInArrow(task, "file string, clause long, bitmap binary, pairs long, adds string, marks string") \
            .toArrow()
    except Exception as e:  # noqa: BLE001 - a row check of the written rows failed inside the job
        if write is not None:
            from .write import constraint_error, violation_message

            msg = violation_message(e)
            if msg is not None:
                raise constraint_error(msg) from None
        raise
    out: dict[str, tuple[dict, dict]] = {}
    flagged: dict[str, Any] = {}
    sids = BitMap64()
    pairs = 0
    adds: list[AddFile] = []
    marks: list[dict] = []
    cols = [rows.column(i).to_pylist() for i in range(6)]
    for f, c, data, n, a, m in zip(*cols):
        if c == -4:
            adds += [AddFile.from_dict(json.loads(x)["add"]) for x in json.loads(a)]
            marks.append(json.loads(m))
            continue
        bm = BitMap64.deserialize(data)
        if c == -3:
            sids |= bm
        elif c == -2:
            flagged[f] = flagged[f] | bm if f in flagged else bm
            pairs += n
        else:
            bitmaps, _ = out.setdefault(f, ({}, {}))
            bitmaps[c] = bitmaps[c] | bm if c in bitmaps else bm
    duplicates = pairs > sum(len(bm) for bm in flagged.values())
    if write is None:
        return out, duplicates, sids
    return out, duplicates, sids, adds, merge_identity_marks(write.plan.schema, marks)
