"""OPTIMIZE beside delta-rs, in one run: bin-packing and Z-order of a table of small files.

    python -m bench.maintenance_optimize              # 2,000 files of 1,000 rows (2M rows)
    python -m bench.maintenance_optimize --quick      # 200 files
    python -m bench.maintenance_optimize --no-spark   # without the Spark executor

The table: id bigint, x bigint, y bigint (random 0..1M), v double, s string (8 chars); written
once by tahoe's Arrow writer as N files in one commit (`target_file_rows`), then copied afresh for
every contender so each starts from the same state (N active files, nothing compacted):

  compaction (target file size --target-mb, default 16 MB, given to everyone):
    - tahoe, Spark-free: `tahoe.Table(path).optimize(target_size=...)` (bins rewritten by threads)
    - tahoe on Spark:    `DeltaTable.forPath(spark, path).optimize().executeCompaction()` with
                         spark.databricks.delta.optimize.maxFileSize (local[2] session, started
                         before the clock)
    - delta-rs:          `deltalake.DeltaTable(path).optimize.compact(target_size=...)`
    - spark parquet:     (context, not a Delta operation) plain Spark rewriting the same files:
                         `spark.read.parquet(*files).coalesce(1).write.parquet(out)`
  Z-order by (x, y), same target:
    - tahoe, Spark-free: `tahoe.Table(path).optimize(zorder_by=["x", "y"], target_size=...)`
    - tahoe on Spark:    `.optimize().executeZOrderBy("x", "y")`
    - delta-rs:          `deltalake.DeltaTable(path).optimize.z_order(["x", "y"], target_size=...)`

Each timing is the operation alone (imports, table loading by the library's own entry point
included, Spark start excluded); delta-rs runs in a subprocess (it may abort at interpreter exit,
notes/peers.md) that times itself. Every run's result is checked: all N files removed, the row
count unchanged (read back by delta-rs). Best of --rounds (default 1, the note's "one run").
Ratios are tahoe / delta-rs (lower is better: < 1 means tahoe is faster).

Measured 2026-11-24 (2 cores shared with other jobs, load average 20-26: expect +-2x noise; both
runs of the default 2,000 files x 1,000 rows, 79 MB, 16 MB target):
  run 1 (with Spark; before the Arrow executor wrote a Z-order bin's files in parallel)
    compact: tahoe 15.95s, tahoe-spark 248.3s, delta-rs 6.34s, plain Spark rewrite 94.2s
             -> tahoe/delta-rs 2.52, tahoe-spark/delta-rs 39.2 (tahoe-spark/plain Spark 2.6)
    zorder:  tahoe 39.72s, tahoe-spark 388.2s, delta-rs 65.60s -> 0.61 and 5.92
  run 2 (--no-spark, parallel writes of a bin's files)
    compact: tahoe 13.62s, delta-rs 11.50s -> 1.18;  zorder: tahoe 74.90s, delta-rs 41.81s -> 1.79
Where tahoe's time goes (200-file profile): pyarrow's parquet writer spends most of a rewrite
building 1 MiB dictionaries for high-cardinality columns before falling back to plain encoding
(`dictionary_pagesize_limit=64 KiB` makes the write ~3.5x faster and the file smaller on this
data; not changed: it is the writer default of every tahoe write, tahoe/protocol/parquet_format.py),
then ~2 ms of pyarrow read per small file.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

DELTA_RS = r"""
import json, os, sys, time
from deltalake import DeltaTable
path, op, target = sys.argv[1], sys.argv[2], int(sys.argv[3])
t0 = time.perf_counter()
dt = DeltaTable(path)
if op == "compact":
    m = dt.optimize.compact(target_size=target)
else:
    m = dt.optimize.z_order(["x", "y"], target_size=target)
elapsed = time.perf_counter() - t0
rows = DeltaTable(path).to_pyarrow_dataset().count_rows()
print(json.dumps({"seconds": elapsed, "removed": m["numFilesRemoved"], "added": m["numFilesAdded"], "rows": rows}))
sys.stdout.flush()
os._exit(0)
"""


def build(path: str, files: int, rows_per_file: int) -> None:
    import numpy as np
    import pyarrow as pa

    from tahoe.write.arrow import write_table

    n = files * rows_per_file
    rng = np.random.default_rng(42)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    s = ["".join(r) for r in letters[rng.integers(0, 26, (n, 8))]]
    data = pa.table({"id": pa.array(np.arange(n), pa.int64()),
                     "x": pa.array(rng.integers(0, 1_000_000, n), pa.int64()),
                     "y": pa.array(rng.integers(0, 1_000_000, n), pa.int64()),
                     "v": pa.array(rng.random(n)),
                     "s": pa.array(s)})
    write_table(path, data, target_file_rows=rows_per_file)


def fresh(src: str, scratch: str, name: str) -> str:
    dst = os.path.join(scratch, name)
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    return dst


def delta_rs_count(path: str) -> int:
    code = ("import json, os, sys\nfrom deltalake import DeltaTable\n"
            "print(DeltaTable(sys.argv[1]).to_pyarrow_dataset().count_rows()); sys.stdout.flush(); os._exit(0)\n")
    out = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, timeout=600)
    return int(out.stdout.strip().splitlines()[-1])


def run_delta_rs(path: str, op: str, target: int) -> dict:
    out = subprocess.run([sys.executable, "-c", DELTA_RS, path, op, str(target)], capture_output=True, text=True,
                         timeout=3600)
    lines = [x for x in out.stdout.splitlines() if x.startswith("{")]
    if not lines:
        raise RuntimeError(f"delta-rs failed: {out.stderr[-2000:]}")
    return json.loads(lines[-1])


def run_tahoe(path: str, op: str, target: int) -> dict:
    import tahoe

    t0 = time.perf_counter()
    t = tahoe.Table(path)
    m = t.optimize(target_size=target) if op == "compact" else t.optimize(zorder_by=["x", "y"], target_size=target)
    elapsed = time.perf_counter() - t0
    return {"seconds": elapsed, "removed": m["numFilesRemoved"], "added": m["numFilesAdded"],
            "rows": delta_rs_count(path)}


def run_spark(spark, path: str, op: str, target: int) -> dict:
    from tahoe.spark import DeltaTable

    spark.conf.set("spark.databricks.delta.optimize.maxFileSize", str(target))
    try:
        t0 = time.perf_counter()
        b = DeltaTable.forPath(spark, path).optimize()
        row = (b.executeCompaction() if op == "compact" else b.executeZOrderBy("x", "y")).collect()[0]
        elapsed = time.perf_counter() - t0
    finally:
        spark.conf.unset("spark.databricks.delta.optimize.maxFileSize")
    return {"seconds": elapsed, "removed": row.metrics.numFilesRemoved, "added": row.metrics.numFilesAdded,
            "rows": delta_rs_count(path)}


def run_spark_parquet(spark, path: str) -> dict:
    import glob

    files = glob.glob(os.path.join(path, "*.parquet"))
    out = path + "-plain"
    t0 = time.perf_counter()
    spark.read.parquet(*files).coalesce(1).write.mode("overwrite").parquet(out)
    elapsed = time.perf_counter() - t0
    rows = spark.read.parquet(out).count()
    shutil.rmtree(out, ignore_errors=True)
    return {"seconds": elapsed, "removed": len(files), "added": 1, "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="200 files instead of 2,000")
    ap.add_argument("--files", type=int, default=None)
    ap.add_argument("--rows-per-file", type=int, default=1000)
    ap.add_argument("--target-mb", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--no-spark", action="store_true")
    args = ap.parse_args()
    files = args.files or (200 if args.quick else 2000)
    target = args.target_mb * 1024 * 1024
    scratch = tempfile.mkdtemp(prefix="tahoe-bench-optimize-")
    try:
        src = os.path.join(scratch, "source")
        t0 = time.perf_counter()
        build(src, files, args.rows_per_file)
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(src) for f in fs
                   if f.endswith(".parquet"))
        print(f"table: {files} files, {files * args.rows_per_file:,} rows, {size / 1e6:.1f} MB "
              f"(built in {time.perf_counter() - t0:.1f}s); target file size {args.target_mb} MB; "
              f"{os.cpu_count()} cores", flush=True)
        spark = None
        if not args.no_spark:
            from tahoe.spark.session import local_session

            spark = local_session("local[2]", "bench-optimize")
        results: dict[tuple[str, str], dict] = {}
        for op in ("compact", "zorder"):
            contenders = [("tahoe", lambda p: run_tahoe(p, op, target))]
            if spark is not None:
                contenders.append(("tahoe-spark", lambda p: run_spark(spark, p, op, target)))
            contenders.append(("delta-rs", lambda p: run_delta_rs(p, op, target)))
            if spark is not None and op == "compact":
                contenders.append(("spark-parquet", lambda p: run_spark_parquet(spark, p)))
            for who, fn in contenders:
                best = None
                for r in range(args.rounds):
                    path = fresh(src, scratch, f"{op}-{who}")
                    res = fn(path)
                    assert res["removed"] == files, (op, who, res)
                    assert res["rows"] == files * args.rows_per_file, (op, who, res)
                    best = res if best is None or res["seconds"] < best["seconds"] else best
                    shutil.rmtree(path, ignore_errors=True)
                results[(op, who)] = best
                print(f"  {op:8s} {who:13s} {best['seconds']:8.2f}s  files {best['removed']} -> {best['added']}",
                      flush=True)
        print("\nratios (tahoe / delta-rs; < 1: tahoe faster)")
        for op in ("compact", "zorder"):
            base = results[(op, "delta-rs")]["seconds"]
            for who in ("tahoe", "tahoe-spark", "spark-parquet"):
                if (op, who) in results:
                    print(f"  {op:8s} {who:13s} {results[(op, who)]['seconds'] / base:6.2f}")
        if spark is not None:
            spark.stop()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
