"""OPTIMIZE and REORG TABLE ... APPLY (PURGE): rewriting a table's files without changing its rows
(delta-spark's OptimizeTableCommand), planned here once for the Arrow executor below and the Spark one
(`tahoe.spark.optimize`).

  1. `plan_optimize` picks the files: compaction (small files, files with many deleted rows), Z-order,
     clustering by ZCubes in Hilbert order, or REORG (files with deletion vectors).
  2. `run_optimize` commits ONE transaction, `dataChange=false`, operation OPTIMIZE or REORG with
     delta-spark's parameters and metrics; nothing to rewrite → no commit.
  3. Every candidate file is recorded as read: a concurrent DELETE conflicts (ConcurrentDeleteReadException),
     concurrent appends do not.
  4. Rewritten files never carry a deletion vector; on row-tracking tables the commit is tagged
     `delta.rowTracking.preserved=false`."""

from __future__ import annotations

import contextvars
import dataclasses
import json
import math
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, Callable, Iterable, Protocol as TypingProtocol, Sequence

import numpy as np
import pyarrow as pa

from ..expressions.catalyst import catalyst_string
from ..errors import AnalysisException, InvalidTableOperationError
from ..expressions import Expression, as_expression, file_mask
from ..protocol.timestamps import normalize_zone_name
from ..log.delta_log import DeltaLog
from ..log.snapshot import Snapshot
from ..protocol.actions import AddFile
from ..protocol.clustering import (
    CLUSTERING_FEATURE, CLUSTERING_PROVIDER, clustering_columns, split_column_name, zcube_of, zcube_tags,
)
from ..protocol.properties import data_skipping_settings, parse_size as parse_size_text, text_property
from ..protocol.schema import StructType
from ..protocol.stats import eligible_for_stats, stats_columns
from ..protocol.table_features import is_feature_supported
from ..read.arrow_reader import ArrowFileReader
from ..storage.local import LocalLogStore
from ..txn.transaction import Transaction
from .commit import commit_new_files, delete_data_files
from .curves import NUM_RANGE_IDS, bits_for, curve_keys, key_order, range_bounds, range_ids
from .files import write_data_files
from .plan import WritePlan, plan_rewrite

__all__ = [
    "OptimizeSettings", "Bin", "OptimizePlan", "BinExecutor", "BinRewriter", "ArrowBinExecutor", "default_threads",
    "plan_optimize", "run_optimize",
    "optimize", "reorg_purge", "parse_size", "curve_key_array", "optimize_metrics", "delta_rs_metrics",
    "DEFAULT_FILE_SIZE",
]

GiB = 1024 ** 3
DEFAULT_FILE_SIZE = 1 * GiB            # spark.databricks.delta.optimize.{min,max}FileSize
ROW_TRACKING_PRESERVED_TAG = "delta.rowTracking.preserved"

Progress = Callable[[int, int, "Bin"], Any]


def parse_size(value: Any, what: str = "size") -> int:
    """A size in bytes from an int or text such as '128mb' / '1g' / '134217728' (JVM byte
    strings, as delta-spark reads delta.targetFileSize)."""
    if isinstance(value, bool):
        raise InvalidTableOperationError(f"{what} must be a size in bytes, got {value!r}")
    if isinstance(value, (int, np.integer)):
        n = int(value)
    else:
        try:
            n = parse_size_text(str(value))
        except ValueError:
            raise InvalidTableOperationError(f"{what} must be a size in bytes such as 134217728 or '128mb', got {value!r}") from None
    if n <= 0:
        raise InvalidTableOperationError(f"{what} must be positive, got {value!r}")
    return n


@dataclasses.dataclass(frozen=True)
class OptimizeSettings:
    """The knobs of one OPTIMIZE (delta-spark's confs, with their defaults):
    `min_file_size` (spark.databricks.delta.optimize.minFileSize), `max_file_size`
    (...optimize.maxFileSize; both default to the table's delta.targetFileSize, else 1 GiB),
    `max_deleted_rows_ratio` (...optimize.maxDeletedRowsRatio, 0.05), `max_threads`
    (...optimize.maxThreads, 15: bins rewritten at once), `num_range_ids`
    (spark.databricks.io.skipping.mdc.rangeId.max, 1000), `min_cube_size` / `target_cube_size`
    (...optimize.clustering.mergeStrategy.minCubeSize.threshold / .targetCubeSize: 100 and 150
    times max_file_size's default)."""
    min_file_size: int | None = None
    max_file_size: int | None = None
    max_deleted_rows_ratio: float = 0.05
    max_threads: int = 15
    num_range_ids: int = NUM_RANGE_IDS
    min_cube_size: int = 100 * GiB
    target_cube_size: int = 150 * GiB

    def resolved(self, configuration: dict) -> "OptimizeSettings":
        """The settings with file sizes filled in from the table's delta.targetFileSize (else
        delta-spark's 1 GiB default); validated."""
        target = text_property(configuration, "delta.targetFileSize")
        default = parse_size(target, "delta.targetFileSize") if target is not None else DEFAULT_FILE_SIZE
        mx = parse_size(self.max_file_size, "max_file_size") if self.max_file_size is not None else default
        mn = self.min_file_size
        mn = mx if mn is None else (0 if mn == 0 else parse_size(mn, "min_file_size"))
        if not 0 <= float(self.max_deleted_rows_ratio) <= 1:
            raise InvalidTableOperationError(
                f"max_deleted_rows_ratio must be between 0 and 1, got {self.max_deleted_rows_ratio!r}")
        if self.max_threads < 1:
            raise InvalidTableOperationError(f"max_threads must be positive, got {self.max_threads}")
        bits_for(self.num_range_ids)
        return dataclasses.replace(self, min_file_size=mn, max_file_size=mx)


@dataclasses.dataclass
class Bin:
    """Files of one partition rewritten together: into one file (compaction, REORG), or ordered
    along a curve and cut into `num_files` files (Z-order, clustering: one ZCube)."""
    partition_values: dict
    files: list[AddFile]
    num_files: int = 1

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


@dataclasses.dataclass
class OptimizePlan:
    """What one OPTIMIZE / REORG rewrites (see the module docstring), planned on `snapshot`.
    Invariants: every bin's files are candidates of one partition; no file is in two bins;
    `mode` is compaction | zorder | clustering | reorg; `curve` (zorder | hilbert) and
    `curve_columns` are set exactly for zorder and clustering."""
    snapshot: Snapshot
    mode: str
    settings: OptimizeSettings
    operation: str
    parameters: dict
    candidates: list[AddFile]
    bins: list[Bin]
    curve: str | None = None
    curve_columns: list[str] = dataclasses.field(default_factory=list)
    read_predicate: Callable[[dict], bool] | None = None
    auto: bool = False
    clustering_stats: dict | None = None

    @property
    def removed(self) -> list[AddFile]:
        return [f for b in self.bins for f in b.files]

    def write_plan(self, storage_options: dict | None = None) -> WritePlan:
        return plan_rewrite(self.snapshot, self.operation, self.parameters, storage_options)


# --- planning ---------------------------------------------------------------------------------------

def _partition_only(expr: Expression, snapshot: Snapshot, text: str) -> None:
    """delta-spark's verifyPartitionPredicates: OPTIMIZE / REORG WHERE names partition columns only."""
    pcs = {c.lower(): c for c in snapshot.partition_columns}
    for c in expr.columns():
        if len(c.parts) != 1 or c.parts[0].lower() not in pcs:
            if c.parts[0].lower() not in {f.name.lower() for f in snapshot.schema.fields}:
                raise AnalysisException(
                    f"[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter with name "
                    f"`{c.name}` cannot be resolved. Did you mean one of the following? {snapshot.schema.names}")
            raise AnalysisException(
                f"[DELTA_NON_PARTITION_COLUMN_REFERENCE] Predicate references non-partition column '{c.name}'. "
                f"Only the partition columns may be referenced: [{', '.join(snapshot.partition_columns)}] "
                f"(predicate: {text})")


def _where_expression(where: Any, snapshot: Snapshot) -> tuple[Expression | None, list[str]]:
    """`where` (SQL text, a list of SQL texts — ANDed —, DNF tuples or an expression) as one
    expression on partition columns, and the predicate texts for the commitInfo (Catalyst's
    unresolved form, `tahoe.expressions.catalyst`)."""
    if where is None:
        return None, []
    items: list[Any]
    if isinstance(where, (list, tuple)) and where and all(isinstance(w, str) for w in where):
        items = list(where)
    else:
        items = [where]
    exprs, texts = [], []
    for w in items:
        e = as_expression(w)
        if e is None:
            continue
        text = w if isinstance(w, str) else e.to_sql()
        _partition_only(e, snapshot, text)
        exprs.append(e)
        texts.append(catalyst_string(e) if isinstance(w, str) else text)   # a user's where as delta-spark 4: ('key = a)
    if not exprs:
        return None, []
    from ..expressions import and_

    return (exprs[0] if len(exprs) == 1 else and_(*exprs)), texts


def _stats_schema(snapshot: Snapshot) -> StructType:
    s = data_skipping_settings(snapshot.configuration)
    return stats_columns(snapshot.schema, s.num_indexed_cols, s.stats_columns, snapshot.partition_columns)


def _check_zorder_columns(snapshot: Snapshot, columns: Sequence[str]) -> list[str]:
    """delta-spark's validateZorderByColumns: data columns that exist and have stats."""
    out = []
    stats = _stats_schema(snapshot)
    pcs = {c.lower() for c in snapshot.partition_columns}
    no_stats = []
    for name in columns:
        if not isinstance(name, str) or not name.strip():
            raise InvalidTableOperationError(f"a Z-order column must be a column name, got {name!r}")
        parts = split_column_name(name)
        if parts[0].lower() in pcs and len(parts) == 1:
            raise AnalysisException(
                f"[DELTA_ZORDERING_ON_PARTITION_COLUMN] {name} is a partition column. Z-Ordering can only "
                f"be performed on data columns")
        current: Any = snapshot.schema
        fields = []
        for p in parts:
            f = current.get(p, case_insensitive=True) if isinstance(current, StructType) else None
            if f is None:
                raise AnalysisException(
                    f"[DELTA_ZORDERING_COLUMN_DOES_NOT_EXIST] Z-Ordering column {name} does not exist in "
                    f"data schema.")
            fields.append(f)
            current = f.type
        resolved = ".".join(f.name for f in fields)
        cur_stats: Any = stats
        for f in fields:
            cur_stats = cur_stats.get(f.name, case_insensitive=True) if isinstance(cur_stats, StructType) else None
            cur_stats = cur_stats.type if cur_stats is not None else None
        if cur_stats is None or isinstance(cur_stats, StructType) or not eligible_for_stats(fields[-1].type):
            no_stats.append(resolved)
        if resolved.lower() in {o.lower() for o in out}:
            raise InvalidTableOperationError(f"Z-order column '{resolved}' is given twice")
        out.append(resolved)
    if no_stats:
        raise AnalysisException(
            f"[DELTA_ZORDERING_ON_COLUMN_WITHOUT_STATS] Z-Ordering on [{', '.join(no_stats)}] will be "
            f"ineffective, because we currently do not collect stats for these columns. Please refer to "
            f"the data skipping settings (delta.dataSkippingNumIndexedCols / delta.dataSkippingStatsColumns) "
            f"for more information on data skipping and z-ordering.")
    return out


def _deleted_ratio(f: AddFile) -> float | None:
    if f.deletion_vector is None:
        return 0.0
    n = f.num_records
    if not n:
        return None
    return f.deletion_vector.cardinality / n


def _pv_key(pv: dict) -> tuple:
    return tuple(sorted((k, v) for k, v in pv.items()))


def _pack(files: list[AddFile], max_bin: float) -> list[list[AddFile]]:
    """Consecutive files into bins of at most `max_bin` bytes (a larger file is a bin alone)."""
    bins: list[list[AddFile]] = []
    cur: list[AddFile] = []
    size = 0
    for f in files:
        if cur and f.size + size > max_bin:
            bins.append(cur)
            cur, size = [], 0
        cur.append(f)
        size += f.size
    if cur:
        bins.append(cur)
    return bins


def _clustering_candidates(files: list[AddFile], columns: list[str], s: OptimizeSettings, full: bool = False
                           ) -> tuple[list[AddFile], dict]:
    """delta-spark's ClusteringStrategy.prepareFilesPerPartition / applyMinZCube: the files to
    recluster (unclustered files first, then by ZCube) and the clustering stats of the input.
    `full` (OPTIMIZE ... FULL): files clustered by other columns, or by another provider, are
    reclustered too."""
    def zid(f: AddFile) -> str:
        z = zcube_of(f.tags)
        return "" if z is None else z[0]

    ordered = sorted(files, key=zid)
    candidates, other = [], []
    for f in ordered:
        z = zcube_of(f.tags)
        same_provider = f.clustering_provider in (None, CLUSTERING_PROVIDER)
        matching = z is None or [c.lower() for c in z[1]] == [c.lower() for c in columns]
        (candidates if full or (same_provider and matching) else other).append(f)
    cube_files = [f for f in candidates if zcube_of(f.tags) is not None]
    input_stats = {
        "inputZCubeFiles": {"numFiles": len(cube_files), "size": sum(f.size for f in cube_files)},
        "inputOtherFiles": {"numFiles": len(files) - len(cube_files),
                            "size": sum(f.size for f in files) - sum(f.size for f in cube_files)},
        "inputNumZCubes": len({zid(f) for f in cube_files}),
    }
    # ZCubes at least min_cube_size large are final
    cube_size: dict[str, int] = {}
    for f in cube_files:
        cube_size[zid(f)] = cube_size.get(zid(f), 0) + f.size
    def stale(f: AddFile) -> bool:   # FULL: a file not clustered by the current columns
        z = zcube_of(f.tags)
        return full and (z is None or f.clustering_provider not in (None, CLUSTERING_PROVIDER)
                         or [c.lower() for c in z[1]] != [c.lower() for c in columns])

    small = [f for f in candidates if zcube_of(f.tags) is None or cube_size[zid(f)] < s.min_cube_size or stale(f)]
    # one single ZCube and nothing else: already clustered
    ids = {zid(f) for f in small}
    if small and "" not in ids and len(ids) == 1 and not any(stale(f) for f in small):
        small = []
    return small, input_stats


def plan_optimize(snapshot: Snapshot, where: Any = None, zorder_by: Sequence[str] | None = None, *,
                  partitions: Iterable[dict] | None = None, reorg: bool = False, auto: bool = False,
                  settings: OptimizeSettings | None = None, full: bool = False,
                  time_zone: str | None = None) -> OptimizePlan:
    """Plan an OPTIMIZE (or, with `reorg`, a REORG TABLE ... APPLY (PURGE)) of `snapshot`; refusals come first.
    Candidates are the active files matching `where` (partition columns only; SQL or DNF tuples) or in
    `partitions` (auto compaction's touched partition values):

      1. compaction: files under `min_file_size` or with over `max_deleted_rows_ratio` rows deleted, packed per
         partition into bins of at most `max_file_size`; bins of two or more files rewritten;
      2. Z-order (`zorder_by`, columns with stats): every candidate, one bin per partition, in curve order;
      3. clustered tables (`where`/`zorder_by` refused): unclustered files and small ZCubes rewritten in
         Hilbert order as one ZCube (ZCUBE_ID / ZCUBE_ZORDER_BY / ZCUBE_ZORDER_CURVE); `full` reclusters
         every file not clustered by the current columns (other tables: refused);
      4. REORG: files with deletion vectors, every bin rewritten.
    `time_zone`: where zone-less timestamps of `where` and partition values are wall-clock time (UTC default)."""
    tz = normalize_zone_name(time_zone)
    s = (settings or OptimizeSettings()).resolved(snapshot.configuration)
    zorder_by = list(zorder_by or [])
    clustered = is_feature_supported(snapshot.protocol, CLUSTERING_FEATURE)
    cluster_cols = clustering_columns(snapshot.schema, snapshot.domain_metadata, snapshot.column_mapping_mode) \
        if clustered else []
    expr, texts = _where_expression(where, snapshot)
    if full and not cluster_cols:
        raise InvalidTableOperationError(
            "[DELTA_OPTIMIZE_FULL_NOT_SUPPORTED] OPTIMIZE FULL is only supported for clustered tables with "
            "non-empty clustering columns.")
    if clustered and not reorg and not auto:
        if texts:
            raise InvalidTableOperationError(
                f"[DELTA_CLUSTERING_WITH_PARTITION_PREDICATE] OPTIMIZE command for Delta table with Liquid "
                f"clustering doesn't support partition predicates. Please remove the predicates: {texts}")
        if zorder_by:
            raise InvalidTableOperationError(
                f"[DELTA_CLUSTERING_WITH_ZORDER_BY] OPTIMIZE command for Delta table with Liquid clustering "
                f"cannot specify ZORDER BY. Please remove ZORDER BY ({', '.join(zorder_by)}).")
    if reorg and zorder_by:
        raise InvalidTableOperationError("REORG TABLE ... APPLY (PURGE) takes no Z-order columns")
    if zorder_by:
        zorder_by = _check_zorder_columns(snapshot, zorder_by)

    files = snapshot.files_table(["path", "partitionValues", "size", "modificationTime", "stats", "tags",
                                  "deletionVector", "baseRowId", "defaultRowCommitVersion", "clusteringProvider"])
    if expr is not None and files.num_rows:
        files = files.filter(pa.array(file_mask(expr, files.select(["partitionValues"]), snapshot.schema,
                                                snapshot.partition_columns, snapshot.column_mapping_mode,
                                                time_zone=tz)))
    from ..log.snapshot import add_files_from_table

    candidates = add_files_from_table(files)
    part_filter = None
    if partitions is not None:
        wanted = {_pv_key(p) for p in partitions}
        candidates = [f for f in candidates if _pv_key(f.partition_values) in wanted]
        part_filter = lambda values: _pv_key(values) in wanted  # noqa: E731 - a predicate
    elif expr is not None:
        part_filter = _partition_filter(expr, snapshot, tz)

    if reorg:
        mode = "reorg"
    elif clustered and cluster_cols and not auto:
        mode = "clustering"
    elif zorder_by:
        mode = "zorder"
    else:
        mode = "compaction"

    by_partition: dict[tuple, list[AddFile]] = {}
    clustering_stats = None
    if mode == "reorg":
        chosen = [f for f in candidates if f.deletion_vector is not None]
    elif mode == "compaction":
        chosen = []
        for f in candidates:
            ratio = _deleted_ratio(f)
            if f.size < s.min_file_size or ratio is None or ratio > s.max_deleted_rows_ratio:
                chosen.append(f)
    elif mode == "clustering":
        chosen, clustering_stats = _clustering_candidates(candidates, cluster_cols, s, full)
    else:
        chosen = list(candidates)
    for f in chosen:
        by_partition.setdefault(_pv_key(f.partition_values), []).append(f)

    bins: list[Bin] = []
    for _key, group in by_partition.items():
        pv = dict(group[0].partition_values)
        if mode == "zorder":
            packed = [group]
        elif mode == "clustering":
            packed = _pack(group, max(s.target_cube_size, s.min_cube_size))   # (sorted by ZCube already)
        else:
            packed = _pack(sorted(group, key=lambda f: f.size), s.max_file_size)
        for b in packed:
            if len(b) > 1 or mode != "compaction":
                num = max(1, sum(f.size for f in b) // s.max_file_size) if mode in ("zorder", "clustering") else 1
                bins.append(Bin(pv, b, int(num)))
    if clustering_stats is not None:
        merged = [f for b in bins for f in b.files]
        clustering_stats["mergedFiles"] = {"numFiles": len(merged), "size": sum(f.size for f in merged)}
        clustering_stats["numOutputZCubes"] = len(bins)

    if mode == "reorg":
        operation, params = "REORG", {"predicate": texts, "applyPurge": True}
    else:
        operation = "OPTIMIZE"
        params = {"predicate": texts, "zOrderBy": zorder_by, "auto": auto}
        if clustered:
            params["clusterBy"] = cluster_cols
    curve = {"zorder": "zorder", "clustering": "hilbert"}.get(mode)
    curve_columns = zorder_by if mode == "zorder" else (cluster_cols if mode == "clustering" else [])
    return OptimizePlan(snapshot, mode, s, operation, params, candidates, bins, curve, curve_columns,
                        part_filter, auto, clustering_stats)


def _partition_filter(expr: Expression, snapshot: Snapshot, time_zone: str = "UTC") -> Callable[[dict], bool]:
    """`expr` (on partition columns) as the transaction's partition filter (logical column name
    → serialized value)."""
    from ..expressions import matches, Scope
    from ..protocol.partition_values import parse_partition_value
    from ..protocol.schema import to_arrow_type

    fields = {c: snapshot.schema.field(c) for c in snapshot.partition_columns}

    def selects(values: dict) -> bool:
        lower = {k.lower(): v for k, v in values.items()}
        cols = {c: pa.array([parse_partition_value(values.get(c, lower.get(c.lower())), f.type, time_zone=time_zone)],
                            to_arrow_type(f.type))
                for c, f in fields.items()}
        return bool(matches(expr, Scope.of(pa.table(cols)), time_zone=time_zone)[0].as_py())

    return selects


# --- executing ------------------------------------------------------------------------------------------

class BinExecutor(TypingProtocol):
    """Writes the new files of each bin of a plan (rows read with deletion vectors applied,
    ordered along the plan's curve, cut into `bin.num_files` files) and returns their AddFiles
    per bin, in bin order (as the file writer made them: dataChange=true, no tags)."""

    def __call__(self, plan: OptimizePlan, write_plan: WritePlan, log: DeltaLog,
                 progress: Progress | None = None) -> list[list[AddFile]]: ...


def curve_key_array(columns: Sequence[pa.Array | pa.ChunkedArray], curve: str, num_range_ids: int,
                    bounds: Sequence[pa.Array] | None = None) -> np.ndarray:
    """The curve keys of rows given the clustering columns' values: range ids per column (bounds
    computed from the values themselves unless given), then Z-order or Hilbert keys."""
    ids = []
    for i, c in enumerate(columns):
        if isinstance(c, pa.ChunkedArray):     # combined once for both the bounds and the ids
            c = c.combine_chunks() if c.num_chunks != 1 else c.chunk(0)
        b = bounds[i] if bounds is not None else range_bounds(c, num_range_ids)
        ids.append(range_ids(c, b))
    return curve_keys(ids, curve, bits_for(num_range_ids))


def _column(rows: pa.Table, name: str) -> pa.ChunkedArray | pa.Array:
    parts = split_column_name(name)
    idx = {n.lower(): i for i, n in enumerate(rows.column_names)}
    arr: Any = rows.column(idx[parts[0].lower()])
    for p in parts[1:]:
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        t = arr.type
        names = [t.field(i).name for i in range(t.num_fields)]
        j = next(i for i, n in enumerate(names) if n.lower() == p.lower())
        arr = arr.field(j)
    return arr


@dataclasses.dataclass(frozen=True)
class BinRewriter:
    """How the bins of one plan are rewritten with Arrow — rows read with
    `tahoe.read.ArrowFileReader` (deletion vectors applied), ordered by the curve keys, written
    by `tahoe.write.files` — shared by the thread executor below and the Spark one (picklable:
    Spark ships it to the tasks that rewrite bins)."""
    write_plan: WritePlan
    schema_json: str                 # the snapshot's schema, to read the files with
    partition_columns: tuple
    column_mapping_mode: str
    curve: str | None
    curve_columns: tuple
    num_range_ids: int

    @classmethod
    def for_plan(cls, plan: OptimizePlan, write_plan: WritePlan) -> "BinRewriter":
        snap = plan.snapshot
        return cls(write_plan, snap.schema.to_json(), tuple(snap.partition_columns), snap.column_mapping_mode,
                   plan.curve, tuple(plan.curve_columns), plan.settings.num_range_ids)

    def open(self) -> tuple[Any, str, ArrowFileReader]:
        """(store, table root, reader) of the table, in this process."""
        from ..storage import log_store_for

        store, root = log_store_for(self.write_plan.table_root, self.write_plan.storage_options)
        reader = ArrowFileReader(store, root, StructType.from_json(self.schema_json), list(self.partition_columns),
                                 self.column_mapping_mode)
        return store, root, reader

    def rewrite(self, b: Bin, store: Any, root: str, reader: ArrowFileReader,
                pool: ThreadPoolExecutor, parallel_reads: bool = True) -> list[AddFile]:
        """Bin `b` rewritten into `b.num_files` new files (their AddFiles); `pool` writes the
        files of a bin cut into several and, with `parallel_reads`, reads the bin's files in
        parallel (pyarrow releases the GIL while reading: worth it where reads wait on storage, or
        when a core has no other bin to work on; else the reads are done in this thread — on a
        local disk, threads handing the GIL back and forth between small files cost more than
        they gain). On failure the files written so far are deleted."""
        wp = self.write_plan

        def read(f: AddFile) -> pa.Table:
            return reader.read_file(f.path, f.partition_values, f.deletion_vector, size=f.size)

        parts = list(pool.map(read, b.files)) if parallel_reads else [read(f) for f in b.files]
        rows = pa.concat_tables(parts) if parts else reader.out_schema.empty_table()
        order = None
        if self.curve is not None and rows.num_rows:
            # one chunk per column (a bin of many small files is as many chunks): the keys and
            # the reordering below each walk a column once, not once per file
            rows = rows.combine_chunks()
            keys = curve_key_array([_column(rows, c) for c in self.curve_columns], self.curve, self.num_range_ids)
            order = key_order(keys)
        per_file = max(1, math.ceil(rows.num_rows / max(1, b.num_files)))

        def write(at: int) -> list[AddFile]:
            # the rows of the file starting at row `at` of the bin's order: each file's rows are
            # gathered by the thread that writes it
            chunk = rows.slice(at, per_file) if order is None else rows.take(pa.array(order[at:at + per_file]))
            return write_data_files(store, root, chunk, wp.schema, wp.partition_columns, wp.column_mapping_mode,
                                    wp.configuration, per_file, tight_bounds=wp.tight_bounds)

        if rows.num_rows <= per_file:
            return write(0)
        # a bin cut into several files (Z-order, clustering): the files are written in parallel
        writes = [pool.submit(contextvars.copy_context().run, write, at)   # the operation's writer settings
                  for at in range(0, rows.num_rows, per_file)]
        adds: list[AddFile] = []
        failed: BaseException | None = None
        for w in writes:
            try:
                adds.extend(w.result())
            except BaseException as e:  # noqa: BLE001 - the others are awaited, then it is raised
                failed = failed or e
        if failed is not None:
            delete_data_files(store, root, adds)
            raise failed
        return adds


def default_threads(local: bool = True) -> tuple[int, int]:
    """(bins rewritten at once, threads reading their files) without Spark: a bin per core —
    more only contend for the GIL and the caches (measured on 2 cores: 4 bins at once cost a
    third more CPU than 1) — and, on local disks, a reader per core too (a small file is read in
    one call: more threads only add contention, 15 % more CPU with two per core); on object
    stores, where a read waits on the network, two readers per core, at most 8."""
    import os

    cores = os.cpu_count() or 1
    return max(1, cores), (max(1, cores) if local else max(2, min(8, 2 * cores)))


class ArrowBinExecutor:
    """The Spark-free executor: bins rewritten in parallel threads (`BinRewriter`), at most
    `max_workers` at once (default: the plan's max_threads, delta-spark's optimize.maxThreads,
    capped by `default_threads()`), their files read by a shared pool or, on a local disk with
    enough bins to keep the cores busy, by the bin's own thread."""

    def __init__(self, max_workers: int | None = None):
        self.max_workers = max_workers

    def __call__(self, plan: OptimizePlan, write_plan: WritePlan, log: DeltaLog,
                 progress: Progress | None = None) -> list[list[AddFile]]:
        rewriter = BinRewriter.for_plan(plan, write_plan)
        store, root, reader = rewriter.open()
        total = len(plan.bins)
        done = [0]
        local = isinstance(store, LocalLogStore)
        bins_at_once, reading = default_threads(local)
        limit = self.max_workers or min(plan.settings.max_threads, bins_at_once)
        workers = max(1, min(limit, total or 1))
        # the files of a bin are read by a shared pool (a bin of many small files is read in
        # parallel even when it is the only bin) — on a local disk only while fewer bins than
        # cores are rewritten at once: else each bin thread reads its own files (measured, 2,000
        # files of 1k rows on 2 cores: a third less wall time, half the system time)
        parallel_reads = not local or workers < bins_at_once
        readers = ThreadPoolExecutor(max_workers=max(1, min(8, max(reading, limit))))

        out: list[list[AddFile] | None] = [None] * total
        ex = ThreadPoolExecutor(max_workers=workers)
        futures = {ex.submit(contextvars.copy_context().run, rewriter.rewrite, b, store, root, reader, readers,
                             parallel_reads): i
                   for i, b in enumerate(plan.bins)}
        try:
            for fut in as_completed(futures):
                i = futures[fut]
                out[i] = fut.result()
                done[0] += 1
                if progress is not None:
                    progress(done[0], total, plan.bins[i])
        except BaseException:
            ex.shutdown(wait=True, cancel_futures=True)
            for fut in futures:   # files of bins that were written: nothing will reference them
                if fut.done() and not fut.cancelled() and fut.exception() is None:
                    delete_data_files(store, root, fut.result())
            raise
        finally:
            readers.shutdown(wait=True)
        ex.shutdown(wait=True)
        return [o or [] for o in out]


# --- committing and metrics --------------------------------------------------------------------------------

def _size_stats(sizes: list[int]) -> dict:
    """delta-spark's FileSizeMetrics."""
    if not sizes:
        return {"min": None, "max": None, "avg": 0.0, "totalFiles": 0, "totalSize": 0}
    return {"min": min(sizes), "max": max(sizes), "avg": sum(sizes) / len(sizes), "totalFiles": len(sizes),
            "totalSize": sum(sizes)}


def _operation_metrics(adds: list[AddFile], removes: list[AddFile]) -> dict:
    """The commitInfo operationMetrics of an OPTIMIZE / REORG (delta-spark's createMetrics)."""
    sizes = sorted(a.size for a in adds)
    n = len(sizes)
    dvs = [r.deletion_vector for r in removes if r.deletion_vector is not None]
    m: dict[str, Any] = {}
    if n:
        m.update({"minFileSize": sizes[0], "p25FileSize": sizes[n // 4], "p50FileSize": sizes[n // 2],
                  "p75FileSize": sizes[n * 3 // 4], "maxFileSize": sizes[-1]})
    m.update({"numAddedFiles": n, "numRemovedFiles": len(removes), "numAddedBytes": sum(sizes),
              "numRemovedBytes": sum(r.size for r in removes),
              "numDeletionVectorsRemoved": len(dvs)})   # delta-spark's DeltaOperationMetrics.OPTIMIZE: no more
    return m


def _finish_adds(plan: OptimizePlan, per_bin: list[list[AddFile]]) -> list[AddFile]:
    """The new files as an OPTIMIZE commits them: dataChange=false; the partition values of their
    bin's files verbatim (a bin is one partition: a zone-less timestamp value, which every reader
    reads in its own zone, must not come back as the writer's instant with a Z); in clustering,
    one ZCube per bin (tags) and clusteringProvider "liquid"."""
    out = []
    for b, adds in zip(plan.bins, per_bin):
        tags = zcube_tags(plan.curve_columns, "hilbert") if plan.mode == "clustering" else None
        for a in adds:
            changes: dict[str, Any] = {"data_change": False, "partition_values": dict(b.partition_values)}
            if tags is not None:
                changes["tags"] = {**(a.tags or {}), **tags}
                changes["clustering_provider"] = CLUSTERING_PROVIDER
            out.append(dataclasses.replace(a, **changes))
    return out


def run_optimize(log: DeltaLog, plan: OptimizePlan, executor: BinExecutor, *, progress: Progress | None = None,
                 storage_options: dict | None = None, parallelism: int | None = None) -> dict:
    """Execute `plan` with `executor` and commit it (see the module docstring); returns the
    metrics (delta-spark's OptimizeMetrics, plus `version`: the committed version, or the
    snapshot's when nothing was rewritten)."""
    start = int(time.time() * 1000)
    snap = plan.snapshot
    removes_src = plan.removed
    adds: list[AddFile] = []
    version = snap.version
    if plan.bins:
        write_plan = plan.write_plan(storage_options)
        per_bin = executor(plan, write_plan, log, progress)
        adds = _finish_adds(plan, per_bin)
        txn = Transaction(log, plan.operation, plan.parameters, snapshot=snap)
        now = int(time.time() * 1000)

        def stage(t: Transaction) -> dict:
            if plan.read_predicate is not None:
                t.read_predicate(plan.read_predicate)
            t.read_files(plan.candidates)
            t.remove_files([f.remove(now, data_change=False) for f in removes_src])
            t.add_files(adds)
            if is_feature_supported(snap.protocol, "rowTracking"):
                t.set_tag(ROW_TRACKING_PRESERVED_TAG, "false")
            return _operation_metrics(adds, removes_src)

        version = commit_new_files(txn, adds, stage)
    return optimize_metrics(plan, adds, removes_src, start, int(time.time() * 1000), version,
                            parallelism=parallelism)


def optimize_metrics(plan: OptimizePlan, adds: list[AddFile], removes: list[AddFile], start_ms: int, end_ms: int,
                     version: int, parallelism: int | None = None) -> dict:
    """delta-spark's OptimizeMetrics of a run, as a dict (and `version`)."""
    snap = plan.snapshot
    partitions = {_pv_key(b.partition_values) for b in plan.bins}
    dvs = [r.deletion_vector for r in removes if r.deletion_vector is not None]
    num_cols = len(snap.schema.fields)
    skipping = data_skipping_settings(snap.configuration)
    with_stats = num_cols if skipping.num_indexed_cols < 0 else min(skipping.num_indexed_cols, num_cols)
    metrics: dict[str, Any] = {
        "numFilesAdded": len(adds),
        "numFilesRemoved": len(removes),
        "filesAdded": _size_stats([a.size for a in adds]),
        "filesRemoved": _size_stats([r.size for r in removes]),
        "partitionsOptimized": len(partitions),
        "zOrderStats": None,
        "clusteringStats": None,
        "numBins": len(plan.bins),
        "numBatches": len(plan.bins),
        "totalConsideredFiles": len(plan.candidates),
        "totalFilesSkipped": len(plan.candidates) - len(removes),
        "preserveInsertionOrder": False,
        "numFilesSkippedToReduceWriteAmplification": 0,
        "numBytesSkippedToReduceWriteAmplification": 0,
        "startTimeMs": start_ms,
        "endTimeMs": end_ms,
        "totalClusterParallelism": parallelism or plan.settings.max_threads,
        "totalScheduledTasks": len(plan.bins),
        "autoCompactParallelismStats": None,
        "deletionVectorStats": ({"numDeletionVectorsRemoved": len(dvs),
                                 "numDeletionVectorRowsRemoved": sum(d.cardinality for d in dvs)} if dvs else None),
        "numTableColumns": num_cols,
        "numTableColumnsWithStats": with_stats,
    }
    if plan.mode == "zorder":
        size = sum(r.size for r in removes)
        metrics["zOrderStats"] = {
            "strategyName": "all", "inputCubeFiles": {"num": 0, "size": 0},
            "inputOtherFiles": {"num": len(removes), "size": size}, "inputNumCubes": 0,
            "mergedFiles": {"num": len(removes), "size": size}, "numOutputCubes": len(partitions),
            "mergedNumCubes": None}
    if plan.mode == "clustering" and plan.clustering_stats is not None:
        metrics["clusteringStats"] = dict(plan.clustering_stats)
    metrics["version"] = version
    return metrics


def delta_rs_metrics(metrics: dict) -> dict:
    """The metrics as delta-rs's `optimize.compact()` / `z_order()` return them (filesAdded /
    filesRemoved as JSON text; min and max 0 when no file), plus tahoe's `version`."""
    def fs(d: dict) -> str:
        return json.dumps({"avg": float(d["avg"]), "max": d["max"] or 0, "min": d["min"] or 0,
                           "totalFiles": d["totalFiles"], "totalSize": d["totalSize"]}, separators=(",", ":"))

    return {"numFilesAdded": metrics["numFilesAdded"], "numFilesRemoved": metrics["numFilesRemoved"],
            "filesAdded": fs(metrics["filesAdded"]), "filesRemoved": fs(metrics["filesRemoved"]),
            "partitionsOptimized": metrics["partitionsOptimized"], "numBatches": metrics["numBatches"],
            "totalConsideredFiles": metrics["totalConsideredFiles"],
            "totalFilesSkipped": metrics["totalFilesSkipped"],
            "preserveInsertionOrder": metrics["preserveInsertionOrder"], "version": metrics["version"]}


# --- the Spark-free entry points ----------------------------------------------------------------------

def _log_of(table: Any, storage_options: dict | None) -> DeltaLog:
    if isinstance(table, DeltaLog):
        return table
    if hasattr(table, "log") and isinstance(getattr(table, "log"), DeltaLog):
        return table.log
    return DeltaLog.for_table(str(table), storage_options)


def optimize(table: Any, where: Any = None, zorder_by: Sequence[str] | None = None, *,
             settings: OptimizeSettings | None = None, max_workers: int | None = None,
             progress: Progress | None = None, storage_options: dict | None = None,
             snapshot: Snapshot | None = None) -> dict:
    """OPTIMIZE the table at `table` (a path, `DeltaLog` or `tahoe.Table`) without Spark:
    bin-packing, Z-order (`zorder_by`) or, on a clustered table, clustering. Returns
    delta-spark's OptimizeMetrics as a dict, plus `version`."""
    log = _log_of(table, storage_options)
    snap = snapshot if snapshot is not None else log.snapshot()
    plan = plan_optimize(snap, where, zorder_by, settings=settings)
    return run_optimize(log, plan, ArrowBinExecutor(max_workers), progress=progress, storage_options=storage_options)


def reorg_purge(table: Any, where: Any = None, *, settings: OptimizeSettings | None = None,
                max_workers: int | None = None, progress: Progress | None = None,
                storage_options: dict | None = None) -> dict:
    """REORG TABLE ... [WHERE ...] APPLY (PURGE) without Spark: rewrite the files carrying
    deletion vectors so the deleted rows are physically gone (history operation "REORG")."""
    log = _log_of(table, storage_options)
    base = settings or OptimizeSettings()
    plan = plan_optimize(log.snapshot(), where, reorg=True,
                         settings=dataclasses.replace(base, min_file_size=0, max_deleted_rows_ratio=0.0))
    return run_optimize(log, plan, ArrowBinExecutor(max_workers), progress=progress, storage_options=storage_options)

