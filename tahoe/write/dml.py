"""Spark-free DELETE, UPDATE and MERGE on pyarrow data: the Arrow executor of the DML planner
(`tahoe.write.dml_plan` decides, this module moves rows), one transaction each. The MERGE builder follows
delta-rs's `TableMerger` (`when_matched_update`, ..., `when_not_matched_by_source_delete`, `execute()`;
`merge_schema=True` evolves the schema); every operation returns delta-spark's metrics and `version`.

  1. Candidate files are read file by file, deletion vectors applied; a partition-only DELETE removes whole
     files unread, a DELETE with deletion vectors writes no data file.
  2. MERGE hash-joins the condition's target columns with the source first, then reads in full only files
     holding a match.
  3. Copy-on-write rewrites a file holding a changed row; with deletion vectors only updated rows are written.
  4. Rows pass the write plans' checks (`prepare_rows`) before any file is written; one commit
     (`dml_commit.write_and_commit`)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import DeltaUnsupportedOperationException, UnsupportedFeatureError
from ..expressions import Cast, Column, Comparison, Expression, Scope, conjuncts, evaluate, matches
from ..log import DeltaLog
from ..protocol.actions import AddCDCFile, AddFile
from ..protocol.schema import StructType, from_arrow_schema, from_arrow_type, to_arrow_schema
from ..read.arrow_reader import ArrowFileReader, logical_arrow_schema
from ..txn import Transaction
from .writer import prepare_rows
from .dml_plan import (
    CHANGE_TYPE, DEFAULT_SOURCE_ALIAS, DEFAULT_TARGET_ALIAS, MULTIPLE_MATCHES_MESSAGE, ROW_COMMIT_VERSION, ROW_ID, CompiledClause, DmlPlan,
    MergeClause, candidate_files, plan_delete, plan_merge, plan_update, record_reads,
)
from .dml_commit import Counts, cdc_needed, write_and_commit
from .files import DEFAULT_TARGET_FILE_ROWS, conform_to_schema, to_arrow_table, write_data_files

__all__ = ["delete", "update", "merge", "TableMerger", "execute_plan"]

_POS = "__tahoe_pos"
_FILE = "__tahoe_file"
CDC_DIR = "_change_data"
_THREADS = 4


# --- public API -------------------------------------------------------------------------------------

def delete(uri: str | DeltaLog, predicate: str | None = None, storage_options: dict | None = None) -> dict[str, Any]:
    """DELETE the rows matching `predicate` (a Spark SQL condition; all rows when None) — with
    deletion vectors when the table has `delta.enableDeletionVectors`, else copy-on-write.
    Returns delta-spark's DELETE metrics (numDeletedRows, numRemovedFiles, numAddedFiles,
    numCopiedRows, numDeletionVectorsAdded, ...) and `version` (unchanged when nothing matched)."""
    log = _log(uri, storage_options)
    snap = _snapshot(log, "DELETE from")
    plan = plan_delete(snap, predicate, storage_options=storage_options)
    return execute_plan(log, snap, plan)


def update(uri: str | DeltaLog, updates: Mapping[str, str] | None = None, new_values: Mapping[str, Any] | None = None,
           predicate: str | None = None, storage_options: dict | None = None) -> dict[str, Any]:
    """UPDATE the rows matching `predicate` (all rows when None): `updates` maps columns to Spark
    SQL expressions over the row (`{"v": "v + 1"}`), `new_values` to Python values (delta-rs's
    two arguments; give one or both). Returns delta-spark's UPDATE metrics (numUpdatedRows,
    numCopiedRows, numAddedFiles, numRemovedFiles, ...) and `version`."""
    from ..expressions import lit

    assignments: dict[str, Any] = dict(updates or {})
    for k, v in (new_values or {}).items():
        if k in assignments:
            raise ValueError(f"column {k!r} is given in both updates and new_values")
        assignments[k] = lit(v)
    log = _log(uri, storage_options)
    snap = _snapshot(log, "UPDATE")
    typer = _typer({None: _empty(snap.schema)})
    plan = plan_update(snap, predicate, assignments, typer=typer, storage_options=storage_options)
    return execute_plan(log, snap, plan)


def merge(uri: str | DeltaLog, source: Any, predicate: str, source_alias: str | None = None,
          target_alias: str | None = None, merge_schema: bool = False,
          storage_options: dict | None = None) -> "TableMerger":
    """Start a MERGE of `source` (a pyarrow Table / RecordBatch(es) / pandas DataFrame) into the
    table at `uri` ON `predicate` (Spark SQL over `target_alias.` and `source_alias.` columns);
    add clauses to the returned `TableMerger` and `execute()` it. `merge_schema=True`: MERGE
    with schema evolution (columns of the source that updateAll / insertAll carry and the table
    lacks are added)."""
    return TableMerger(uri, to_arrow_table(source), predicate, source_alias, target_alias, merge_schema,
                       storage_options)


class TableMerger:
    """A MERGE being built (delta-rs's `TableMerger`): clauses run in the order they were added;
    within a kind only the last clause may omit its predicate."""

    def __init__(self, uri, source: pa.Table, predicate: str, source_alias, target_alias, merge_schema: bool,
                 storage_options):
        if predicate is None:
            raise ValueError("'predicate' in merge cannot be None")
        self._uri = uri
        self._source = source
        self._predicate = predicate
        self._source_alias = source_alias
        self._target_alias = target_alias
        self._merge_schema = merge_schema
        self._storage_options = storage_options
        self._clauses: list[MergeClause] = []
        self.on_commit: Callable[[], Any] | None = None   # the facade's table moves to the new version

    def _add(self, clause: MergeClause) -> "TableMerger":
        self._clauses.append(clause)
        return self

    def when_matched_update(self, updates: Mapping[str, str], predicate: str | None = None) -> "TableMerger":
        """Update a matched target row: `updates` maps columns to SQL over both sides."""
        return self._add(MergeClause("matched", "update", predicate, _mapping(updates, "updates")))

    def when_matched_update_all(self, predicate: str | None = None, except_cols: list[str] | None = None) -> "TableMerger":
        """Update every column of a matched target row from the source's column of the same name."""
        return self._add(MergeClause("matched", "update", predicate, None, tuple(except_cols or ())))

    def when_matched_delete(self, predicate: str | None = None) -> "TableMerger":
        return self._add(MergeClause("matched", "delete", predicate))

    def when_not_matched_insert(self, updates: Mapping[str, str], predicate: str | None = None) -> "TableMerger":
        """Insert a source row no target row matched: `updates` maps columns to SQL over the source."""
        return self._add(MergeClause("notMatched", "insert", predicate, _mapping(updates, "updates")))

    def when_not_matched_insert_all(self, predicate: str | None = None, except_cols: list[str] | None = None) -> "TableMerger":
        return self._add(MergeClause("notMatched", "insert", predicate, None, tuple(except_cols or ())))

    def when_not_matched_by_source_update(self, updates: Mapping[str, str], predicate: str | None = None) -> "TableMerger":
        """Update a target row no source row matched: `updates` maps columns to SQL over the target."""
        return self._add(MergeClause("notMatchedBySource", "update", predicate, _mapping(updates, "updates")))

    def when_not_matched_by_source_delete(self, predicate: str | None = None) -> "TableMerger":
        return self._add(MergeClause("notMatchedBySource", "delete", predicate))

    def execute(self) -> dict[str, Any]:
        """Run the MERGE in one commit; delta-spark's MERGE metrics and `version`."""
        log = _log(self._uri, self._storage_options)
        snap = _snapshot(log, "MERGE into")
        source_schema = from_arrow_schema(self._source.schema)
        ta = self._target_alias or DEFAULT_TARGET_ALIAS
        sa = self._source_alias or DEFAULT_SOURCE_ALIAS
        typer = _typer({ta: _empty(snap.schema), sa: self._source.slice(0, 0)})
        plan = plan_merge(snap, source_schema, self._predicate, self._clauses, self._target_alias,
                          self._source_alias, schema_evolution=self._merge_schema, typer=typer,
                          storage_options=self._storage_options)
        metrics = execute_plan(log, snap, plan, self._source)
        if self.on_commit is not None:
            self.on_commit()
        return metrics


def _mapping(m: Any, what: str) -> dict:
    if not isinstance(m, Mapping) or not m:
        raise TypeError(f"{what} must be a non-empty dict of column name → SQL expression")
    return dict(m)


def _log(uri, storage_options) -> DeltaLog:
    return uri if isinstance(uri, DeltaLog) else DeltaLog.for_table(uri, storage_options)


def _snapshot(log: DeltaLog, what: str):
    from ..errors import TableNotFoundError

    try:
        return log.snapshot()
    except TableNotFoundError as e:
        raise TableNotFoundError(f"cannot {what} {log.table_root}: {e}") from None


def _empty(schema: StructType) -> pa.Table:
    return logical_arrow_schema(schema).empty_table()


def _typer(relations: dict):
    """The type of a value expression, evaluated over no rows of the relations (None: tahoe's
    Arrow evaluator cannot tell, e.g. a construct it does not model)."""
    scope = Scope(list(relations.items()))

    def typer(expr: Expression):
        try:
            arr = evaluate(expr, scope, num_rows=0)
        except UnsupportedFeatureError:
            return None
        return from_arrow_type(arr.type)
    return typer


# --- executing a plan --------------------------------------------------------------------------------

@dataclass
class _FileResult:
    """What the DML does to one target file."""
    add: AddFile
    removed: bool = False                  # the whole file goes (rewritten, or every row changed)
    dv_positions: np.ndarray | None = None  # rows to mark deleted (merge-on-read)
    rewritten: list[pa.Table] = field(default_factory=list)   # rows written (copies, updates)
    cdc: list[pa.Table] = field(default_factory=list)
    partial: bool = False                  # rows of the file stay (a rewrite with copies, a DV)
    counts: Counts = field(default_factory=Counts)


def _row_tracking_columns(plan: DmlPlan) -> dict[str, pa.DataType]:
    return {n: pa.int64() for n in plan.row_tracking} if plan.row_tracking else {}


def _with_row_tracking(plan: DmlPlan, rows: pa.Table, add: AddFile) -> pa.Table:
    """Rows read with their materialized row-tracking columns → the same rows with ROW_ID
    (materialized value, else baseRowId + position) and ROW_COMMIT_VERSION (materialized value,
    else the file's defaultRowCommitVersion), spec "Row Tracking"."""
    if not plan.row_tracking:
        return rows
    rid_col, rcv_col = plan.row_tracking
    pos = rows.column(_POS)
    if add.base_row_id is not None:
        fresh = pc.add(pos, pa.scalar(int(add.base_row_id), pa.int64()))
        rid = pc.coalesce(rows.column(rid_col), fresh)
    else:
        rid = rows.column(rid_col)
    rcv = rows.column(rcv_col)
    if add.default_row_commit_version is not None:
        rcv = pc.coalesce(rcv, pa.scalar(int(add.default_row_commit_version), pa.int64()))
    rows = rows.drop_columns([rid_col, rcv_col])
    return rows.append_column(ROW_ID, rid).append_column(ROW_COMMIT_VERSION, rcv)


def execute_plan(log: DeltaLog, snap, plan: DmlPlan, source: pa.Table | None = None) -> dict[str, Any]:
    """Run a planned DML (`tahoe.write.dml_plan`) with Arrow and commit it."""
    ex = _Executor(log, snap, plan, source)
    return ex.run()


class _Executor:
    def __init__(self, log: DeltaLog, snap, plan: DmlPlan, source: pa.Table | None):
        self.log = log
        self.snap = snap
        self.plan = plan
        self.schema = plan.schema
        self.read_schema = plan.read_schema
        self.source = source
        self.tracking = _row_tracking_columns(plan)
        self.reader = ArrowFileReader(snap.store, snap.table_root, self.read_schema, snap.partition_columns,
                                      snap.column_mapping_mode)
        # the rows a DML changes: with deletion vectors nothing is copied, so only the columns
        # the clauses read (`target_columns_read`; all with change data); copy-on-write: all
        needed = plan.target_columns_read() if plan.dv else None
        self.rows_reader = self.reader if needed is None else ArrowFileReader(
            snap.store, snap.table_root, self.read_schema, snap.partition_columns, snap.column_mapping_mode,
            columns=needed)
        self.ta = plan.user_target_alias if plan.operation != "MERGE" else plan.target_alias
        self._keys: ArrowFileReader | None = None

    # --- scopes --------------------------------------------------------------------------------
    def _target_rows(self, rows: pa.Table) -> pa.Table:
        return rows.select([f.name for f in self.read_schema.fields if f.name in rows.column_names])

    def _scope(self, t: pa.Table | None, s: pa.Table | None) -> Scope:
        if self.plan.operation != "MERGE":
            return Scope.of(t, self.ta)
        rels = []
        if t is not None:
            rels.append((self.plan.target_alias, t))
        if s is not None:
            rels.append((self.plan.source_alias, s))
        return Scope(rels)

    # --- clause choice and values -----------------------------------------------------------------
    def _choose(self, clauses: list[CompiledClause], n: int, t: pa.Table | None, s: pa.Table | None) -> np.ndarray:
        """Per row, the index of the first clause whose condition is TRUE (-1: none); each
        condition is evaluated only on the rows no earlier clause took (Spark's CASE order)."""
        out = np.full(n, -1, dtype=np.int64)
        remaining = np.arange(n)
        for c in clauses:
            if not len(remaining):
                break
            if c.condition is None:
                out[remaining] = c.index
                remaining = remaining[:0]
                continue
            sub_t = t.take(remaining) if t is not None else None
            sub_s = s.take(remaining) if s is not None else None
            hit = matches(c.condition, self._scope(sub_t, sub_s), num_rows=len(remaining))
            hit = np.asarray(hit.to_numpy(zero_copy_only=False), dtype=bool)
            out[remaining[hit]] = c.index
            remaining = remaining[~hit]
        return out

    def _evaluate_values(self, c: CompiledClause, t: pa.Table | None, s: pa.Table | None, n: int,
                         generated: Mapping[str, tuple[Expression, tuple[int, ...]]]) -> pa.Table:
        """The rows clause `c` writes (update: every column of the table; insert: the insert
        columns), stored into the table's types (struct fields by name, strings by ANSI cast:
        `_ansi_cast`), generated columns it does not assign recomputed."""
        scope = self._scope(t, s)
        cols = {name: evaluate(tree, scope, num_rows=n) for name, tree in c.values.items()}
        out = pa.table(cols) if cols else pa.table({"__x": pa.nulls(n)}).drop_columns(["__x"])
        fields = [self.schema.field(name) for name in cols]
        out = conform_to_schema(out, StructType(fields), cast_leaf=_ansi_cast)
        for name, (expr, recompute) in generated.items():
            if c.index in recompute:
                target = to_arrow_schema(StructType([self.schema.field(name)])).field(0).type
                value = evaluate(expr, Scope.of(out), num_rows=n)
                out = out.append_column(name, value.cast(target) if value.type != target else value)
        order = [f.name for f in self.schema.fields if f.name in out.column_names]
        return out.select(order)

    def _conform_old(self, t: pa.Table) -> pa.Table:
        """Target rows as the table's schema after the operation (new columns NULL)."""
        return conform_to_schema(t, self.schema)

    # --- running ---------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        plan, snap = self.plan, self.snap
        txn = Transaction(self.log, plan.operation, plan.parameters, snapshot=snap)
        candidates = candidate_files(plan, snap)
        record_reads(plan, txn, candidates)
        t0 = time.perf_counter()
        counts = Counts(source_rows=self.source.num_rows if self.source is not None else 0)
        if plan.operation == "MERGE":
            results, matched_source = self._merge_files(candidates)
        else:
            results, matched_source = self._target_files(candidates), None
        counts.scan_ms = int((time.perf_counter() - t0) * 1000)
        inserted = self._inserts(matched_source) if plan.operation == "MERGE" and plan.has_not_matched else None
        result = self._finish(txn, results, inserted, counts)
        if plan.operation == "MERGE":   # delta-spark's SQL metrics (not in the commit's operationMetrics)
            result["numTargetFilesBeforeSkipping"] = snap.num_files
            result["numTargetFilesAfterSkipping"] = len(candidates)
        return result

    def _target_files(self, candidates: list[AddFile]) -> list[_FileResult]:
        """DELETE / UPDATE: every candidate file, in parallel."""
        plan = self.plan
        if plan.operation == "DELETE" and self._partition_only_delete():
            return [self._whole_file_delete(a) for a in candidates]
        if plan.condition is not None:
            self._key_reader()        # made once, before the threads share it
        with ThreadPoolExecutor(max_workers=_THREADS) as pool:
            return [r for r in pool.map(self._one_target_file, candidates) if r is not None]

    def _partition_only_delete(self) -> bool:
        """A DELETE with no condition, or one on partition columns only: every candidate file is
        removed whole (candidate_files decided exactly on partition values)."""
        node = self.plan.target_filter
        if node is None:
            return True
        pcols = {c.lower() for c in self.plan.partition_columns}
        return bool(pcols) and all(len(c.parts) == 1 and c.parts[0].lower() in pcols for c in node.columns())

    def _whole_file_delete(self, add: AddFile) -> _FileResult:
        r = _FileResult(add, removed=True)
        n = add.num_records
        if n is not None and add.deletion_vector is not None:
            n -= add.deletion_vector.cardinality
        if n is None:
            n = self.reader.read_file(add.path, add.partition_values, add.deletion_vector).num_rows
        r.counts.deleted = n
        if add.deletion_vector is not None:
            r.counts.dv_removed = 1
        return r

    def _read(self, add: AddFile) -> pa.Table:
        rows = self.rows_reader.read_file(add.path, add.partition_values, add.deletion_vector, row_index=_POS,
                                          extra_columns=self.tracking or None)
        return _with_row_tracking(self.plan, rows, add)

    def _one_target_file(self, add: AddFile) -> _FileResult | None:
        """DELETE / UPDATE of one file. With a condition, only the columns it reads are read
        first: a file where no row matches is left unread; a DELETE that needs no other value
        (no change data; deletion vectors, or every row of the file deleted) finishes from them
        — the positions go into the deletion vector, no data is rewritten. Otherwise the whole
        file is read and the matched rows updated (their values, copies, change data)."""
        plan = self.plan
        (clause,) = plan.clauses
        chosen = None
        if clause.condition is not None:
            has_dv = add.deletion_vector is not None
            keys = self._key_reader().read_file(add.path, add.partition_values, add.deletion_vector,
                                                row_index=_POS if has_dv else None)
            if keys.num_rows == 0:
                return None
            hit = matches(clause.condition, self._scope(keys, None), num_rows=keys.num_rows)
            # positions in the file (the rows' indexes, unless a deletion vector dropped some)
            at = pc.indices_nonzero(hit)
            if not len(at):
                return None
            if plan.operation == "DELETE" and not plan.cdf and (plan.dv or len(at) == keys.num_rows):
                r = _FileResult(add)
                r.counts.deleted = len(at)
                positions = keys.column(_POS).take(at) if has_dv else at
                self._mark(r, positions.to_numpy().astype(np.int64, copy=False), len(at) == keys.num_rows)
                return r
            chosen = np.full(keys.num_rows, -1, dtype=np.int64)
            chosen[at.to_numpy()] = clause.index
        rows = self._read(add)
        n = rows.num_rows
        if n == 0:
            return None
        t = self._target_rows(rows)
        if chosen is None:
            chosen = self._choose(plan.clauses, n, t, None)
        return self._apply(add, rows, t, None, chosen, np.arange(n))

    def _key_reader(self) -> ArrowFileReader:
        """A reader of the columns the condition reads (the partition columns among them come
        from the file's partition values)."""
        if self._keys is None:
            self._keys = ArrowFileReader(self.snap.store, self.snap.table_root, self.read_schema,
                                         self.snap.partition_columns, self.snap.column_mapping_mode,
                                         columns=self._condition_target_columns())
        return self._keys

    def _mark(self, r: _FileResult, positions: np.ndarray | None, all_changed: bool) -> bool:
        """Record how the file's changed rows leave it: with deletion vectors (and rows left),
        their `positions` go into the file's deletion vector (True: the file stays); else the
        file is removed (False: with copy-on-write, its other rows are to be copied)."""
        add = r.add
        if self.plan.dv and not all_changed:
            r.dv_positions = positions
            r.partial = True
            if add.deletion_vector is None:
                r.counts.dv_added = 1
            else:
                r.counts.dv_updated = 1
            return True
        r.removed = True
        if add.deletion_vector is not None:
            r.counts.dv_removed = 1
        return False

    def _apply(self, add: AddFile, rows: pa.Table, t_rel: pa.Table, s_rel: pa.Table | None, chosen: np.ndarray,
               target_index: np.ndarray) -> _FileResult | None:
        """The outcome for one file from the clause chosen for each relation row (`target_index`:
        the file row each relation row is). Rows of the file outside the relation, or with no
        clause, are unchanged."""
        plan = self.plan
        by_index = {c.index: c for c in plan.clauses}
        deleted_idx: list[np.ndarray] = []
        updated_out: list[pa.Table] = []
        updated_idx: list[np.ndarray] = []
        r = _FileResult(add)
        for ci in np.unique(chosen[chosen >= 0]):
            c = by_index[int(ci)]
            sel = np.flatnonzero(chosen == ci)
            file_rows = target_index[sel]
            kind = "nmbs" if c.kind == "notMatchedBySource" else "matched"
            if c.action == "delete":
                uniq = np.unique(file_rows)
                deleted_idx.append(uniq)
                r.counts.deleted += len(uniq)
                if kind == "matched":
                    r.counts.matched_deleted += len(uniq)
                elif plan.operation == "MERGE":
                    r.counts.nmbs_deleted += len(uniq)
            else:
                t_sub = t_rel.take(sel)
                s_sub = s_rel.take(sel) if s_rel is not None else None
                out = self._evaluate_values(c, t_sub, s_sub, len(sel), plan.update_generated)
                if self.tracking:
                    out = out.append_column(ROW_ID, rows.column(ROW_ID).take(file_rows)).append_column(
                        ROW_COMMIT_VERSION, pa.nulls(len(sel), pa.int64()))
                updated_out.append(out)
                updated_idx.append(file_rows)
                r.counts.updated += len(sel)
                if kind == "matched":
                    r.counts.matched_updated += len(sel)
                elif plan.operation == "MERGE":
                    r.counts.nmbs_updated += len(sel)
        if not deleted_idx and not updated_idx:
            return None
        n = rows.num_rows
        changed = np.zeros(n, dtype=bool)
        for idx in deleted_idx + updated_idx:
            changed[idx] = True
        pos = rows.column(_POS).to_numpy()
        old = self._target_rows(rows)
        if plan.cdf:
            for idx in deleted_idx:
                r.cdc.append(_tag(self._conform_old(old.take(idx)), "delete"))
            for idx, out in zip(updated_idx, updated_out):
                r.cdc.append(_tag(self._conform_old(old.take(idx)), "update_preimage"))
                r.cdc.append(_tag(_strip_tracking(out), "update_postimage"))
        r.rewritten.extend(updated_out)
        all_changed = bool(changed.all())
        if self._mark(r, pos[changed] if plan.dv and not all_changed else None, all_changed):
            return r
        if not all_changed:       # copy-on-write: the other rows are copied
            keep = np.flatnonzero(~changed)
            copied = self._conform_old(old.take(keep))
            if self.tracking:
                copied = copied.append_column(ROW_ID, rows.column(ROW_ID).take(keep)).append_column(
                    ROW_COMMIT_VERSION, rows.column(ROW_COMMIT_VERSION).take(keep))
            r.rewritten.insert(0, copied)
            r.counts.copied = len(keep)
            r.partial = True
        return r

    # --- MERGE ------------------------------------------------------------------------------------
    def _merge_files(self, candidates: list[AddFile]) -> tuple[list[_FileResult], np.ndarray]:
        plan, source = self.plan, self.source
        assert source is not None
        ta, sa = plan.target_alias, plan.source_alias
        key_reader = self._key_reader()

        def keys_of(i_add):
            i, add = i_add
            t = key_reader.read_file(add.path, add.partition_values, add.deletion_vector, row_index=_POS)
            return t.append_column(_FILE, pa.repeat(pa.scalar(i, pa.int32()), t.num_rows))

        with ThreadPoolExecutor(max_workers=_THREADS) as pool:
            parts = [p for p in pool.map(keys_of, enumerate(candidates)) if p.num_rows]
        matched_source = np.zeros(source.num_rows, dtype=bool)
        by_file: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        if parts and source.num_rows:
            keys = pa.concat_tables(parts)
            ti, si = self._join(keys)
            if len(ti):
                f = keys.column(_FILE).to_numpy()[ti]
                p = keys.column(_POS).to_numpy()[ti]
                combined = (f.astype(np.int64) << 40) | p
                uniq, cnt = np.unique(combined, return_counts=True)
                if (cnt > 1).any() and not plan.multiple_matches_allowed:
                    raise DeltaUnsupportedOperationException(
                        MULTIPLE_MATCHES_MESSAGE, "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE")
                matched_source[si] = True
                order = np.argsort(f, kind="stable")
                f, p, si = f[order], p[order], si[order]
                starts = np.flatnonzero(np.r_[True, f[1:] != f[:-1]])
                ends = np.r_[starts[1:], len(f)]
                for s0, e0 in zip(starts, ends):
                    by_file[int(f[s0])] = (p[s0:e0], si[s0:e0])
        if plan.has_not_matched_by_source:
            todo = list(range(len(candidates)))
        elif plan.has_matched:
            todo = sorted(by_file)
        else:
            todo = []

        def one(i: int):
            return self._merge_one_file(candidates[i], *by_file.get(i, (np.zeros(0, np.int64), np.zeros(0, np.int64))))

        with ThreadPoolExecutor(max_workers=_THREADS) as pool:
            results = [r for r in pool.map(one, todo) if r is not None]
        return results, matched_source

    def _condition_target_columns(self) -> list[str]:
        plan = self.plan
        scope = Scope.of_schema(self.read_schema, plan.target_alias)
        names = []
        for c in plan.condition.columns():
            try:
                b = scope.resolve(c)
            except Exception:  # noqa: BLE001 - a source column
                continue
            if b.names[0] not in names:
                names.append(b.names[0])
        return names

    def _equi_keys(self) -> list[tuple[Expression, Expression]]:
        """The `=` conjuncts of the condition with a target-only side and a source-only side."""
        plan = self.plan
        tscope = Scope.of_schema(self.read_schema, plan.target_alias)
        sscope = Scope.of_schema(from_arrow_schema(self.source.schema), plan.source_alias)

        def side(e: Expression) -> str | None:
            cols = e.columns()
            if not cols:
                return None
            try:
                for c in cols:
                    tscope.resolve(c)
                return "t"
            except Exception:  # noqa: BLE001
                pass
            try:
                for c in cols:
                    sscope.resolve(c)
                return "s"
            except Exception:  # noqa: BLE001
                return None

        out = []
        for part in conjuncts(plan.condition):
            if isinstance(part, Comparison) and part.op == "=":
                a, b = side(part.left), side(part.right)
                if (a, b) == ("t", "s"):
                    out.append((part.left, part.right))
                elif (a, b) == ("s", "t"):
                    out.append((part.right, part.left))
        return out

    def _join(self, keys: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        """(target key row, source row) pairs for which the MERGE condition is TRUE: a hash join
        on the equality conjuncts (a superset of the matches), then the whole condition."""
        plan, source = self.plan, self.source
        ta, sa = plan.target_alias, plan.source_alias
        t_scope = Scope.of(keys, ta)
        s_scope = Scope.of(source, sa)
        kt: dict[str, pa.Array] = {}
        ks: dict[str, pa.Array] = {}
        for j, (te, se) in enumerate(self._equi_keys()):
            a = evaluate(te, t_scope, num_rows=keys.num_rows)
            b = evaluate(se, s_scope, num_rows=source.num_rows)
            a, b = _join_types(a, b)
            if a is None:
                continue
            kt[f"k{j}"], ks[f"k{j}"] = a, b
        if kt:
            left = pa.table({**kt, "__ti": pa.array(np.arange(keys.num_rows, dtype=np.int64))})
            right = pa.table({**ks, "__si": pa.array(np.arange(source.num_rows, dtype=np.int64))})
            j = left.join(right, keys=list(kt), join_type="inner", use_threads=True)
            ti = j.column("__ti").to_numpy()
            si = j.column("__si").to_numpy()
            return self._residual(keys, ti, si)
        # no equality to hash on: every pair, in chunks
        ns = source.num_rows
        step = max(1, 2_000_000 // max(ns, 1))
        tis, sis = [], []
        for start in range(0, keys.num_rows, step):
            n = min(step, keys.num_rows - start)
            ti = np.repeat(np.arange(start, start + n, dtype=np.int64), ns)
            si = np.tile(np.arange(ns, dtype=np.int64), n)
            ti, si = self._residual(keys, ti, si)
            tis.append(ti)
            sis.append(si)
        return (np.concatenate(tis), np.concatenate(sis)) if tis else (np.zeros(0, np.int64), np.zeros(0, np.int64))

    def _residual(self, keys: pa.Table, ti: np.ndarray, si: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if not len(ti):
            return ti, si
        plan = self.plan
        t = keys.drop_columns([c for c in (_POS, _FILE) if c in keys.column_names]).take(pa.array(ti))
        s = self.source.take(pa.array(si))
        ok = matches(plan.condition, Scope([(plan.target_alias, t), (plan.source_alias, s)]), num_rows=len(ti))
        ok = np.asarray(ok.to_numpy(zero_copy_only=False), dtype=bool)
        return ti[ok], si[ok]

    def _merge_one_file(self, add: AddFile, matched_pos: np.ndarray, matched_si: np.ndarray) -> _FileResult | None:
        plan = self.plan
        rows = self._read(add)
        n = rows.num_rows
        if n == 0:
            return None
        t_all = self._target_rows(rows)
        pos = rows.column(_POS).to_numpy()
        idx_m = np.searchsorted(pos, matched_pos)
        rel_t: list[pa.Table] = []
        rel_s: list[pa.Table] = []
        rel_idx: list[np.ndarray] = []
        chosen_parts: list[np.ndarray] = []
        if len(idx_m) and plan.has_matched:
            t_m = t_all.take(pa.array(idx_m))
            s_m = self.source.take(pa.array(matched_si))
            chosen_parts.append(self._choose(plan.clauses_of("matched"), len(idx_m), t_m, s_m))
            rel_t.append(t_m)
            rel_s.append(s_m)
            rel_idx.append(idx_m)
        if plan.has_not_matched_by_source:
            unmatched = np.ones(n, dtype=bool)
            unmatched[idx_m] = False
            idx_u = np.flatnonzero(unmatched)
            if len(idx_u):
                t_u = t_all.take(pa.array(idx_u))
                s_u = _nulls_like(self.source, len(idx_u))
                chosen_parts.append(self._choose(plan.clauses_of("notMatchedBySource"), len(idx_u), t_u, s_u))
                rel_t.append(t_u)
                rel_s.append(s_u)
                rel_idx.append(idx_u)
        if not chosen_parts:
            return None
        chosen = np.concatenate(chosen_parts)
        if not (chosen >= 0).any():
            return None
        t_rel = pa.concat_tables(rel_t)
        s_rel = pa.concat_tables(rel_s)
        return self._apply(add, rows, t_rel, s_rel, chosen, np.concatenate(rel_idx))

    def _inserts(self, matched_source: np.ndarray | None) -> pa.Table | None:
        """The rows insert clauses add: source rows no target row matched, first TRUE clause."""
        plan, source = self.plan, self.source
        assert source is not None
        idx = np.flatnonzero(~matched_source) if matched_source is not None else np.arange(source.num_rows)
        if not len(idx):
            return None
        s = source.take(pa.array(idx))
        clauses = plan.clauses_of("notMatched")
        chosen = self._choose(clauses, len(idx), None, s)
        outs = []
        for c in clauses:
            sel = np.flatnonzero(chosen == c.index)
            if len(sel):
                outs.append(self._evaluate_values(c, None, s.take(pa.array(sel)), len(sel), plan.insert_generated))
        if not outs:
            return None
        return pa.concat_tables(outs, promote_options="default")

    # --- writing and committing --------------------------------------------------------------------
    def _finish(self, txn: Transaction, results: list[_FileResult], inserted: pa.Table | None,
                counts: Counts) -> dict[str, Any]:
        plan, snap, log = self.plan, self.snap, self.log
        for r in results:
            for k in ("updated", "matched_updated", "nmbs_updated", "deleted", "matched_deleted", "nmbs_deleted",
                      "copied", "dv_added", "dv_updated", "dv_removed"):
                setattr(counts, k, getattr(counts, k) + getattr(r.counts, k))
        counts.inserted = inserted.num_rows if inserted is not None else 0
        removed = [r.add for r in results if r.removed]
        dv_rows = {r.add.path: r.dv_positions for r in results if r.dv_positions is not None}
        if not removed and not dv_rows and not counts.inserted:
            return write_and_commit(plan, txn, snap, counts, [], {}, lambda _new: ([], [], {}))
        rewrite_parts = [t for r in results for t in r.rewritten if t.num_rows]
        rewritten = _concat(rewrite_parts)
        extras = {ROW_ID: plan.row_tracking[0], ROW_COMMIT_VERSION: plan.row_tracking[1]} if plan.row_tracking else None
        marks: dict[str, int] = {}
        # every row check before any file is written
        prepared_rewrite = None
        if rewritten is not None and rewritten.num_rows:
            data = _strip_tracking(rewritten)
            prepared_rewrite, _ = prepare_rows(data, plan.rewrite_plan)
            if extras:
                prepared_rewrite = prepared_rewrite.append_column(ROW_ID, rewritten.column(ROW_ID)).append_column(
                    ROW_COMMIT_VERSION, rewritten.column(ROW_COMMIT_VERSION))
        prepared_insert = None
        if inserted is not None and inserted.num_rows:
            prepared_insert, marks = prepare_rows(inserted, plan.insert_plan)
            if extras:
                prepared_insert = prepared_insert.append_column(ROW_ID, pa.nulls(inserted.num_rows, pa.int64())) \
                    .append_column(ROW_COMMIT_VERSION, pa.nulls(inserted.num_rows, pa.int64()))
        partial = any(r.partial for r in results)
        cdc_rows = None
        if cdc_needed(plan, counts, partial):
            parts = [t for r in results for t in r.cdc]
            if prepared_insert is not None:
                parts.append(_tag(_strip_tracking(prepared_insert), "insert"))
            cdc_rows = _concat([p for p in parts if p.num_rows])

        def write(new_files: list) -> tuple[list[AddFile], list[AddCDCFile], dict[str, int]]:
            added: list[AddFile] = []
            wplan = plan.rewrite_plan or plan.insert_plan
            for prepared, wp in ((prepared_rewrite, plan.rewrite_plan), (prepared_insert, plan.insert_plan)):
                if prepared is None:
                    continue
                files = write_data_files(log.store, log.table_root, prepared, wp.schema, wp.partition_columns,
                                         wp.column_mapping_mode, wp.configuration, DEFAULT_TARGET_FILE_ROWS,
                                         tight_bounds=wp.tight_bounds, extra_columns=extras)
                added.extend(files)
                new_files.extend(files)
            cdcs: list[AddCDCFile] = []
            if cdc_rows is not None and cdc_rows.num_rows:
                files = write_data_files(log.store, log.table_root, cdc_rows, wplan.schema, wplan.partition_columns,
                                         wplan.column_mapping_mode, wplan.configuration, DEFAULT_TARGET_FILE_ROWS,
                                         extra_columns={CHANGE_TYPE: CHANGE_TYPE}, subdir=CDC_DIR, file_prefix="cdc")
                cdcs = [AddCDCFile(path=a.path, partition_values=a.partition_values, size=a.size) for a in files]
                new_files.extend(cdcs)
            return added, cdcs, marks

        return write_and_commit(plan, txn, snap, counts, removed, dv_rows, write)


def _ansi_cast(arr: pa.Array, target: pa.DataType, path: str) -> pa.Array | None:
    """A string value stored into a column of another type — or a boolean into a number, or a
    number into a boolean — as delta-spark's UPDATE / MERGE store it: Spark's ANSI CAST (tahoe's
    evaluator: trimmed, Spark's literals, a value that does not parse fails with
    [CAST_INVALID_INPUT] naming the column; true → 1, non-zero → true). Other leaves: None (the
    writer's cast)."""
    stringy = pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)
    numeric = (pa.types.is_integer, pa.types.is_floating, pa.types.is_decimal)
    flips = (pa.types.is_boolean(arr.type) and any(f(target) for f in numeric)) or \
        (pa.types.is_boolean(target) and any(f(arr.type) for f in numeric))
    if not (stringy or flips) or pa.types.is_string(target) or pa.types.is_large_string(target):
        return None
    out = evaluate(Cast(Column((path,)), from_arrow_type(target)), pa.table({path: arr}), num_rows=len(arr))
    if isinstance(out, pa.ChunkedArray):
        out = out.combine_chunks()
    return out if out.type == target else out.cast(target)


def _concat(parts: list[pa.Table]) -> pa.Table | None:
    if not parts:
        return None
    return pa.concat_tables(parts, promote_options="permissive") if len(parts) > 1 else parts[0]


def _strip_tracking(t: pa.Table) -> pa.Table:
    drop = [c for c in (ROW_ID, ROW_COMMIT_VERSION) if c in t.column_names]
    return t.drop_columns(drop) if drop else t


def _tag(t: pa.Table, change_type: str) -> pa.Table:
    t = _strip_tracking(t)
    return t.append_column(CHANGE_TYPE, pa.repeat(pa.scalar(change_type), t.num_rows))


def _nulls_like(t: pa.Table, n: int) -> pa.Table:
    return pa.table({f.name: pa.nulls(n, f.type) for f in t.schema}, schema=pa.schema(
        [f.with_nullable(True) for f in t.schema]))


def _join_types(a: pa.Array, b: pa.Array) -> tuple[pa.Array | None, pa.Array | None]:
    """Join keys of one type (a superset of the matches is enough: the whole condition is checked
    on the pairs); (None, None) when the two sides cannot be hashed together."""
    if pa.types.is_dictionary(a.type):
        a = a.dictionary_decode()
    if pa.types.is_dictionary(b.type):
        b = b.dictionary_decode()
    if a.type == b.type:
        return a, b
    T = pa.types
    if T.is_integer(a.type) and T.is_integer(b.type):
        return a.cast(pa.int64()), b.cast(pa.int64())
    numeric = lambda t: T.is_integer(t) or T.is_floating(t) or T.is_decimal(t)  # noqa: E731
    if numeric(a.type) and numeric(b.type):
        try:
            return a.cast(pa.float64()), b.cast(pa.float64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None, None
    if (T.is_string(a.type) or T.is_large_string(a.type)) and (T.is_string(b.type) or T.is_large_string(b.type)):
        return a.cast(pa.string()), b.cast(pa.string())
    if T.is_timestamp(a.type) and T.is_timestamp(b.type) and (a.type.tz is None) == (b.type.tz is None):
        t = pa.timestamp("us", a.type.tz)
        try:
            return a.cast(t), b.cast(t)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None, None
    return None, None
