"""OPTIMIZE on Spark: the Spark executor of `tahoe.write.optimize`'s plans, delta-spark's
`DeltaTable.optimize()` builder, the session confs delta-spark reads for OPTIMIZE, auto
compaction and optimized writes.

    DeltaTable.forPath(spark, path).optimize().where("day = 'mon'").executeCompaction()
    DeltaTable.forPath(spark, path).optimize().executeZOrderBy("x", "y")     # DataFrame(path, metrics)

`SparkBinExecutor` rewrites the bins of a plan as Spark jobs (bins in parallel driver threads,
at most spark.databricks.delta.optimize.maxThreads, as delta-spark's OptimizeExecutor): a bin's
files are read by the fast scan (`tahoe.spark.read.read_snapshot`, deletion vectors applied) and
written by the Spark write executor (`tahoe.spark.write.write_dataframe`): compaction coalesces a
bin into one task (one file); Z-order and clustering add the curve key — range ids of each column
from bounds sampled on the driver (about 100 rows per range, as Spark's RangePartitioner samples),
interleaved (Z-order) or mapped onto the Hilbert curve, computed by an Arrow UDF — plus a random
byte of noise, and `repartitionByRange` the bin into its number of files (delta-spark's
MultiDimClustering). Tables Spark's JVM cannot reach (object stores) are rewritten by the Arrow
executor. The plan, the commit and the metrics are `tahoe.write.optimize`'s.

Session confs (read when set; else the table's delta.targetFileSize, else delta-spark's defaults):
spark.databricks.delta.optimize.{minFileSize, maxFileSize, maxThreads, maxDeletedRowsRatio},
spark.databricks.io.skipping.mdc.{rangeId.max, addNoise},
spark.databricks.delta.optimize.clustering.mergeStrategy.minCubeSize.{threshold, targetCubeSize},
spark.databricks.delta.autoCompact.{enabled, minNumFiles, maxFileSize, minFileSize},
spark.databricks.delta.optimizeWrite.{enabled, binSize}.
"""

from __future__ import annotations

import dataclasses
import math
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

import pyarrow as pa

from ..log.delta_log import DeltaLog
from ..protocol.actions import AddFile
from ..protocol.properties import bool_property
from ..write.commit import delete_data_files
from ..write.curves import bits_for, curve_keys, key_bytes, range_bounds, range_ids
from ..write.optimize import (
    ArrowBinExecutor, Bin, OptimizePlan, OptimizeSettings, Progress, parse_size, plan_optimize, run_optimize,
)
from ..write.plan import WritePlan
from .session import DELTA_CONF, session_conf

__all__ = ["SparkBinExecutor", "DeltaOptimizeBuilder", "DeltaReorgBuilder", "optimize_full", "optimize_settings",
           "optimize_write_enabled", "optimized_write", "metrics_schema", "metrics_dataframe"]

_CONF = DELTA_CONF
_KEY = "__tahoe_curve_key"
_NOISE = "__tahoe_curve_noise"


def optimize_settings(spark, base: OptimizeSettings | None = None) -> OptimizeSettings:
    """OptimizeSettings from the session's delta-spark confs (those set)."""
    s = base or OptimizeSettings()
    changes: dict[str, Any] = {}
    for field, key, conv in (("min_file_size", "optimize.minFileSize", parse_size),
                             ("max_file_size", "optimize.maxFileSize", parse_size),
                             ("max_threads", "optimize.maxThreads", int),
                             ("max_deleted_rows_ratio", "optimize.maxDeletedRowsRatio", float),
                             ("min_cube_size", "optimize.clustering.mergeStrategy.minCubeSize.threshold", parse_size),
                             ("target_cube_size", "optimize.clustering.mergeStrategy.minCubeSize.targetCubeSize",
                              parse_size)):
        v = session_conf(spark, _CONF + key)
        if v is not None:
            changes[field] = conv(v) if conv is not parse_size else parse_size(v, _CONF + key)
    v = session_conf(spark, "spark.databricks.io.skipping.mdc.rangeId.max")
    if v is not None:
        changes["num_range_ids"] = int(v)
    return dataclasses.replace(s, **changes)


# --- the Spark executor ---------------------------------------------------------------------------

def _col(name: str):
    from pyspark.sql import functions as F

    from ..protocol.clustering import split_column_name

    return F.col(".".join(f"`{p.replace('`', '``')}`" for p in split_column_name(name)))


class SparkBinExecutor:
    """Rewrites a plan's bins as Spark jobs (see the module docstring)."""

    def __init__(self, spark, max_threads: int | None = None, add_noise: bool | None = None):
        self.spark = spark
        self.max_threads = max_threads
        if add_noise is None:
            v = session_conf(spark, "spark.databricks.io.skipping.mdc.addNoise")
            add_noise = True if v is None else v.strip().lower() == "true"
        self.add_noise = add_noise

    def __call__(self, plan: OptimizePlan, write_plan: WritePlan, log: DeltaLog,
                 progress: Progress | None = None) -> list[list[AddFile]]:
        from .read import jvm_reaches, read_snapshot
        from .write import write_dataframe

        if not jvm_reaches(log.table_root):   # no Hadoop connector for the store: Arrow executor
            return ArrowBinExecutor(self.max_threads)(plan, write_plan, log, progress)
        snap = plan.snapshot
        files = snap.files_table(["path", "partitionValues", "size", "stats", "deletionVector"])
        paths = files.column("path")

        def one(b: Bin) -> list[AddFile]:
            import pyarrow.compute as pc

            chosen = files.filter(pc.is_in(paths, value_set=pa.array([f.path for f in b.files], pa.string())))
            df = read_snapshot(self.spark, snap, files=chosen)
            if plan.curve is not None:
                df = self._clustered(df, b, plan)
            else:
                df = df.coalesce(1)
            adds, _marks = write_dataframe(df, log, write_plan)
            return adds

        total = len(plan.bins)
        workers = max(1, min(self.max_threads or plan.settings.max_threads, total or 1))
        out: list[list[AddFile] | None] = [None] * total
        ex = ThreadPoolExecutor(max_workers=workers)
        futures = {ex.submit(one, b): i for i, b in enumerate(plan.bins)}
        try:
            done = 0
            for fut in as_completed(futures):
                i = futures[fut]
                out[i] = fut.result()
                done += 1
                if progress is not None:
                    progress(done, total, plan.bins[i])
        except BaseException:
            ex.shutdown(wait=True, cancel_futures=True)
            for fut in futures:
                if fut.done() and not fut.cancelled() and fut.exception() is None:
                    delete_data_files(log.store, log.table_root, fut.result())
            raise
        ex.shutdown(wait=True)
        return [o or [] for o in out]

    def _clustered(self, df, b: Bin, plan: OptimizePlan):
        """`df` range-partitioned by the curve key into `b.num_files` partitions."""
        from pyspark.sql import functions as F

        num_ranges = plan.settings.num_range_ids
        cols = [_col(c) for c in plan.curve_columns]
        rows = 0
        for f in b.files:
            n = f.num_records
            if n is None:
                rows = None
                break
            rows += n - (f.deletion_vector.cardinality if f.deletion_vector is not None else 0)
        if rows is None:
            rows = df.count()
        fraction = min(1.0, 100.0 * num_ranges / max(1, rows))
        sample = (df.select(*cols) if fraction >= 1.0 else df.select(*cols).sample(fraction=fraction, seed=17)).toArrow()
        bounds = [range_bounds(sample.column(i), num_ranges) for i in range(sample.num_columns)]
        key = _key_udf(bounds, plan.curve, num_ranges)(*cols)
        out = df.withColumn(_KEY, key)
        keys = [F.col(_KEY)]
        if self.add_noise:
            out = out.withColumn(_NOISE, (F.rand() * 255 - 128).cast("byte"))
            keys.append(F.col(_NOISE))
        out = out.repartitionByRange(max(1, int(b.num_files)), *keys)
        return out.drop(_KEY, _NOISE)


def _key_udf(bounds: list[pa.Array], curve: str, num_ranges: int):
    """An Arrow UDF computing the curve key (big-endian binary) of the clustering columns."""
    from pyspark.sql.functions import arrow_udf

    bits = bits_for(num_ranges)

    def key(*arrays: pa.Array) -> pa.Array:
        ids = [range_ids(a, b) for a, b in zip(arrays, bounds)]
        return pa.array(key_bytes(curve_keys(ids, curve, bits)), pa.binary())

    return arrow_udf(key, "binary")


# --- optimized writes ------------------------------------------------------------------------------

def optimize_write_enabled(spark, configuration: dict | None, option: bool | None = None) -> bool:
    """delta-spark's precedence: the write's own `optimizeWrite` option, else the session's
    spark.databricks.delta.optimizeWrite.enabled, else the table's delta.autoOptimize.optimizeWrite
    (off when none is set)."""
    if option is not None:
        return bool(option)
    v = session_conf(spark, _CONF + "optimizeWrite.enabled")
    if v is not None:
        low = v.strip().lower()
        if low not in ("true", "false"):
            from ..errors import InvalidOptionError

            raise InvalidOptionError(f"{_CONF}optimizeWrite.enabled must be true or false, got {v!r}")
        return low == "true"
    return bool(bool_property(configuration, "delta.autoOptimize.optimizeWrite"))


def optimized_write(df, partition_columns: list[str]):
    """`df` shuffled for an optimized write: by the partition columns, so that each partition's
    rows meet in one task and it gets one file; unpartitioned, into as many tasks as bins of
    spark.databricks.delta.optimizeWrite.binSize (512 MiB) the data's estimated size makes (at
    most spark.sql.shuffle.partitions; without an estimate, Spark's REBALANCE)."""
    spark = df.sparkSession
    if partition_columns:
        return df.repartition(*[_col(c) for c in partition_columns])
    v = session_conf(spark, _CONF + "optimizeWrite.binSize")      # a number is MiB, as in delta-spark
    if v is None:
        bin_size = 512 * 1024 * 1024
    elif v.strip().isdigit():
        bin_size = parse_size(int(v) * 1024 * 1024, _CONF + "optimizeWrite.binSize")
    else:
        bin_size = parse_size(v, _CONF + "optimizeWrite.binSize")
    shuffle = int(session_conf(spark, "spark.sql.shuffle.partitions") or 200)
    size = _estimated_size(df)
    if size is None or size >= 2 ** 63 - 1:
        # no estimate (Spark says Long.MaxValue when it knows nothing): Spark's REBALANCE, whose
        # adaptive execution packs the shuffled rows into partitions of the advisory size
        return df.hint("rebalance")
    return df.repartition(int(max(1, min(math.ceil(size / bin_size), shuffle))))


def _estimated_size(df) -> int | None:
    try:
        return int(str(df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()))
    except Exception:  # noqa: BLE001 - Spark Connect / no stats: unknown
        return None


# --- delta-spark's builder and its result -----------------------------------------------------------

def metrics_schema():
    """The Spark schema of delta-spark's OPTIMIZE result: (path, metrics OptimizeMetrics)."""
    from pyspark.sql.types import (
        BooleanType, DoubleType, LongType, StringType, StructField as F, StructType as S,
    )

    L = LongType()
    size = S([F("min", L), F("max", L), F("avg", DoubleType(), False), F("totalFiles", L, False),
              F("totalSize", L, False)])
    zfiles = S([F("num", L, False), F("size", L, False)])
    cfiles = S([F("numFiles", L, False), F("size", L, False)])
    zorder = S([F("strategyName", StringType()), F("inputCubeFiles", zfiles), F("inputOtherFiles", zfiles),
                F("inputNumCubes", L, False), F("mergedFiles", zfiles), F("numOutputCubes", L, False),
                F("mergedNumCubes", L)])
    clustering = S([F("inputZCubeFiles", cfiles), F("inputOtherFiles", cfiles), F("inputNumZCubes", L, False),
                    F("mergedFiles", cfiles), F("numOutputZCubes", L, False)])
    parallelism = S([F("maxClusterActiveParallelism", L), F("minClusterActiveParallelism", L),
                     F("maxSessionActiveParallelism", L), F("minSessionActiveParallelism", L)])
    dv = S([F("numDeletionVectorsRemoved", L, False), F("numDeletionVectorRowsRemoved", L, False)])
    metrics = S([
        F("numFilesAdded", L, False), F("numFilesRemoved", L, False), F("filesAdded", size), F("filesRemoved", size),
        F("partitionsOptimized", L, False), F("zOrderStats", zorder), F("clusteringStats", clustering),
        F("numBins", L, False), F("numBatches", L, False), F("totalConsideredFiles", L, False),
        F("totalFilesSkipped", L, False), F("preserveInsertionOrder", BooleanType(), False),
        F("numFilesSkippedToReduceWriteAmplification", L, False),
        F("numBytesSkippedToReduceWriteAmplification", L, False), F("startTimeMs", L, False),
        F("endTimeMs", L, False), F("totalClusterParallelism", L, False), F("totalScheduledTasks", L, False),
        F("autoCompactParallelismStats", parallelism), F("deletionVectorStats", dv),
        F("numTableColumns", L, False), F("numTableColumnsWithStats", L, False)])
    return S([F("path", StringType()), F("metrics", metrics)])


def metrics_dataframe(spark, path: str, metrics: dict):
    """delta-spark's one-row OPTIMIZE result DataFrame."""
    schema = metrics_schema()
    names = [f.name for f in schema["metrics"].dataType.fields]
    row = (path, {k: metrics.get(k) for k in names})
    return spark.createDataFrame([row], schema)


def _run(spark, log: DeltaLog, plan: OptimizePlan, storage_options: dict | None) -> dict:
    return run_optimize(log, plan, SparkBinExecutor(spark), storage_options=storage_options,
                        parallelism=spark.sparkContext.defaultParallelism
                        if hasattr(spark, "sparkContext") else None)


class DeltaOptimizeBuilder:
    """delta-spark's DeltaOptimizeBuilder (`DeltaTable.optimize()`): `where` limits the
    partitions, `executeCompaction` / `executeZOrderBy` run it (clustered tables: clustering)."""

    def __init__(self, spark, log: DeltaLog, storage_options: dict | None = None):
        self._spark = spark
        self._log = log
        self._storage_options = storage_options
        self._filters: list[str] = []

    def where(self, partitionFilter: str) -> "DeltaOptimizeBuilder":
        """Apply partition filter on this optimize command builder to limit the operation on
        selected partitions (SQL on partition columns; several `where`s are ANDed)."""
        if type(partitionFilter) is not str:
            raise TypeError(f"partitionFilter must be str. Found {partitionFilter!r} with type {type(partitionFilter)}")
        self._filters.append(partitionFilter)
        return self

    def executeCompaction(self):
        """Compact the small files in selected partitions; a DataFrame (path, metrics)."""
        return self._execute([])

    def executeZOrderBy(self, *cols: Any):
        """Z-Order the data in selected partitions using the given columns; a DataFrame
        (path, metrics)."""
        if len(cols) == 1 and isinstance(cols[0], (list, tuple)):
            cols = tuple(cols[0])
        for c in cols:
            if type(c) is not str:
                raise TypeError(f"Z-order column must be str. Found {c!r} with type {type(c)}")
        return self._execute(list(cols))

    def _execute(self, zorder: list[str]):
        snap = self._log.snapshot()
        plan = plan_optimize(snap, self._filters or None, zorder, settings=optimize_settings(self._spark))
        metrics = _run(self._spark, self._log, plan, self._storage_options)
        return metrics_dataframe(self._spark, self._log.table_root, metrics)


def optimize_full(spark, log: DeltaLog, storage_options: dict | None = None):
    """OPTIMIZE ... FULL (SQL; clustered tables): every file not clustered by the table's current
    clustering columns is reclustered; a DataFrame (path, metrics) as OPTIMIZE's."""
    plan = plan_optimize(log.snapshot(), None, [], settings=optimize_settings(spark), full=True)
    metrics = _run(spark, log, plan, storage_options)
    return metrics_dataframe(spark, log.table_root, metrics)


class DeltaReorgBuilder:
    """REORG TABLE ... [WHERE ...] APPLY (PURGE) (`DeltaTable.reorg()`; delta-spark has SQL
    only): `where` limits the partitions, `executePurge` rewrites the files carrying deletion
    vectors (history operation REORG); a DataFrame (path, metrics) as OPTIMIZE's."""

    def __init__(self, spark, log: DeltaLog, storage_options: dict | None = None):
        self._spark = spark
        self._log = log
        self._storage_options = storage_options
        self._filters: list[str] = []

    def where(self, partitionFilter: str) -> "DeltaReorgBuilder":
        if type(partitionFilter) is not str:
            raise TypeError(f"partitionFilter must be str. Found {partitionFilter!r} with type {type(partitionFilter)}")
        self._filters.append(partitionFilter)
        return self

    def executePurge(self):
        base = optimize_settings(self._spark)
        plan = plan_optimize(self._log.snapshot(), self._filters or None, reorg=True,
                             settings=dataclasses.replace(base, min_file_size=0, max_deleted_rows_ratio=0.0))
        metrics = _run(self._spark, self._log, plan, self._storage_options)
        return metrics_dataframe(self._spark, self._log.table_root, metrics)

