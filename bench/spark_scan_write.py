"""tahoe on Spark: scan and write throughput beside plain Spark parquet, in one run.

    python -m bench.spark_scan_write            # ~2 GB partitioned table (115M rows)
    python -m bench.spark_scan_write --quick    # ~180 MB (10M rows)

One local[2] session. The table: id bigint, a double (random), s string, ts timestamp,
partitioned by p (8 values), one file per partition per write task.

Writes (same DataFrame, same partitioning):
  - tahoe write_delta: native `df.write.parquet` into a staging dir + footer stats + one commit
  - spark parquet:     `df.write.partitionBy("p").parquet(dir)`
Scans (an aggregate touching every column, so nothing is pruned):
  - tahoe fast path:   `read_delta(spark, table)` — a native parquet scan of the snapshot's files
  - spark parquet:     `spark.read.parquet(<the same files>)` with the partition column
  - tahoe fast path with 10% of rows deleted by deletion vectors (`tahoe.write.delete_rows`: one
    DV file, one commit): the DV bitmaps as 64-row words in one array shipped with the query,
    each row's bit tested on the scan (file located by `_metadata.file_size`, word by the row
    index Spark's parquet reader fills)
  - format('delta'): `spark.read.format("delta").load(table)` as a user writes it — the native
    scan of the fast path where the JVM reaches the table, as here (`tahoe.spark.calls`, rule 5)
  - tahoe data source: the same load with `spark.tahoe.read.nativeScan=false` — Arrow batches from
    tahoe's Python reader in Python workers, one row group at a time (with and without the DVs):
    the path of tables on stores the JVM cannot reach
Floors (bench/floors.py), each also beside `spark.read.parquet` in the same run:
  - Python data source: PySpark's `DataSource` API reading the same files with pyarrow alone (no
    tahoe, no log) — the least the data-source path can cost
  - row index, 10% dropped: `spark.read.parquet` with the row index the reader fills and a per-row
    test of it dropping one row in ten — the least any DV scan on this Spark costs (no file lookup,
    no bitmap)
Each tahoe scan alternates with the Spark parquet scan for --rounds rounds (default 3) and the best
of each is reported, so JIT warm-up, the OS cache and machine load fall on both alike. The
session runs the JVM's full JIT (no `quick_start`).
Ratios are tahoe / spark (lower is better), wall and CPU (this process + the JVM + Python workers),
each line with the load average. Targets (issue 18): write <= 1.05, fast path with 10% DV <= 1.15,
data source <= 1.5.

Measured 2026-11-27 21:05 (`--quick --rounds 4`, load 2.0-2.3) and 21:14 (115M rows, 2,069 MB,
  `--rounds 3`, load 2.2-3.1), ratio to `spark.read.parquet` of the same files, same run:
                              10M     115M
    write                     1.02    1.01   (target <= 1.05)
    fast path                 1.06    1.02
    format('delta')           0.91    0.99   (target <= 1.5)
    data source               2.18    2.42   (target <= 1.5)
    floor: Python data source 2.21    2.46   (tahoe data source / floor 0.96 / 1.02)
    fast + 10% DV             1.31    1.25   (target <= 1.15)
    floor: row index, 10% off 1.17    1.04   (tahoe fast + 10% DV / floor 1.15 / 1.22)
    format('delta') + 10% DV  1.19    1.25
    DS + 10% DV               2.23    2.45
  The data-source target is below its floor at both sizes, and the DV target below its floor at
  10M rows. At 115M the DV scan's cost over the floor is its per-row file lookup and bit test:
  on a 40M-row copy (same layout, experiments of 21:20-22:15) a constant run offset (no file
  lookup) measured 1.01-1.08x against 1.14-1.30x for the `_metadata.file_size` CASE tree — Spark
  builds `_metadata` as a struct per row, and no cheaper column tells a row's file apart without
  JVM code (keying by the partition column measured in between, and only fits tables with one
  file per partition; `input_file_block_length()` measured slower, 1.38x; one scan per file with
  its offset as a literal, unioned, 1.28-1.37x at 40M and 1.76-1.82x at 10M, against 1.15-1.22x and
  1.23-1.31x for the CASE tree in the same runs).
Measured 2026-11-27 16:53 (`--quick --rounds 4`, load 2.4-2.5), after `format("delta")` reads of
  tables the JVM reaches became the native scan (`tahoe.spark.calls`, rule 5): write 0.92 (4.40 s
  vs 4.78 s); fast path 0.91; format('delta') 0.95 (0.49 s vs 0.52 s; target <= 1.5 met — it was
  the data source's 2.1-2.3); the data source itself (`spark.tahoe.read.nativeScan=false`, the path
  of object stores the JVM cannot reach) 2.30 (cpu 1.60); fast + 10% DV 1.30 (0.65 s vs 0.50 s;
  target <= 1.15 missed), format('delta') + 10% DV 1.23. An earlier run the same hour (16:31, load
  1.8-2.5, before the change): write 1.10, fast path 0.93, data source 2.27, fast + 10% DV 1.47.
Measured 2026-11-27 14:04 (`--quick --rounds 4`, load 1.6-2.0): write 0.97; fast path 0.82;
  fast + 10% DV 1.19 (0.59 s vs 0.50 s; target <= 1.15 missed); data source 2.12 (cpu 1.67),
  DS + DV 2.23. Split of the DV overhead on the same 10M rows (best of 6, 0.45 s without DVs):
  requesting the row index and keying the file ~0.06 s, shipping the 156k words ~0.05 s, the bit
  test ~0.02 s. Keying the file by its partition value instead of `_metadata.file_size` (each
  DV'd file alone in its partition) measured the same (0.596 vs 0.603 s): not adopted.
Measured 2026-11-27 (`--quick`, 10M rows, 177 MB in 8 files, load 2.2-2.4): write 4.39 s vs
  parquet 4.42 s = 0.99 (target <= 1.05 met); fast path 1.14; fast + 10% DV 1.29 (target <= 1.15
  missed); data source 2.30 (cpu 1.58), DS + 10% DV 2.04 (target <= 1.5 missed).
  Again with `--rounds 6` (load 1.8-2.1): write 0.97; fast path 0.88 (0.41 s vs 0.46 s); fast +
  10% DV 1.38 (0.60 s vs 0.44 s: the DV test costs ~0.3 s of CPU per 10M rows — the per-row
  `_metadata.file_size` CASE and word lookup; building the DataFrame costs 0.07-0.08 s against
  parquet's 0.05-0.07 s); data source 2.16, DS + DV 2.18.
Measured (`--quick`, 10M rows, 2-core machine shared with other sessions; best of 3 rounds):
  before (main, load 19): write 0.51 (order effect: the first write paid the JIT, since fixed
      by alternating), fast path 1.27, data source 3.51 (cpu 2.03), fast + 10% DV 1.69 (cpu 1.38),
      DS + DV 2.68
  after (load 15-20): write 1.16 (cpu 0.97), fast path 1.02 (cpu 0.92), data source 2.28
      (cpu 1.49), fast + 10% DV 1.63 (cpu 1.79), DS + DV 3.03 (cpu 1.47)
  The 115M-row run was not repeated on the loaded machine (last figures: DV 1.19).

Findings (issue 18, items 3 and 4), from experiments on the same 10M-row table:
  - DV fast path, fixed cost: building the DataFrame takes 0.4-0.6 s wall (0.2-0.3 s CPU) a
    read, mostly the JVM analysing the filter through py4j (0.28 s for the filter carrying the
    scalar subquery); decoding the DVs and building the word array 0.06 + 0.07 s. Shipping the
    words as a foldable literal instead (`from_json(lit(text), 'array<bigint>')`, constant-folded
    into the plan, no subquery) measured the same (0.47-0.59 s against 0.42-0.49 s): not adopted.
  - DV fast path, per row: the CASE tree reads `_metadata.file_size`, so Spark builds the
    `_metadata` struct for every row (`knownnotnull(named_struct(...))`); aliasing the size to a
    column first is folded back by CollapseProject. One scan per DV'd file with a literal run
    offset (no `_metadata`, no CASE) unioned was 1.9x slower (8 scans' fixed costs). The DV'd
    scan's CPU stays 1.2-1.8x parquet's at this size.
  - Data source: PySpark 4.3 passes the `pyarrow.RecordBatch`es a reader yields to the JVM as
    they are (no re-batching; `spark.sql.execution.arrow.maxRecordsPerBatch` only sizes the
    batches built from tuples) after checking the schema matches exactly. A minimal reader of
    the same files with pyarrow alone (no tahoe) is 1.47-1.70x `spark.read.parquet` wall
    (1.2-1.4x CPU) at loads 13-21 — the floor of the API here; 64k-row batches beat 1M-row
    ones (1.70x against 2.38x). tahoe's reader packed a small table into fewer tasks than cores
    (128 MB input partitions: 8 files of 22 MB became 5 + 3 on 2 cores); it now splits as
    Spark's file scan does (the session's default parallelism, FilePartition.maxSplitBytes):
    2.66x -> 1.72x (CPU 1.15x parquet) in the experiment, 3.51x -> 2.28x in this bench.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

from .floors import python_floor_source, row_index_floor


def _cpu() -> float:
    """User + system CPU seconds of this process and its descendants (the JVM, Python workers),
    from /proc: the figure a loaded machine disturbs least."""
    tick = os.sysconf("SC_CLK_TCK")
    total, todo = 0, [os.getpid()]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo.extend(int(x) for x in f.read().split())
        except (OSError, IndexError, ValueError):
            continue
    return total / tick


class Best:
    """Best wall time of repeated runs, with the CPU time of that run."""

    def __init__(self):
        self.wall = self.cpu = None

    def add(self, wall: float, cpu: float) -> None:
        if self.wall is None or wall < self.wall:
            self.wall, self.cpu = wall, cpu


def _run(fn, best: Best):
    c, t = _cpu(), time.perf_counter()
    out = fn()
    best.add(time.perf_counter() - t, _cpu() - c)
    return out


def _timed(fn, repeat: int = 2):
    best = Best()
    out = None
    for _ in range(repeat):
        out = _run(fn, best)
    return best, out


def _interleaved(tahoe_fn, spark_fn, rounds: int):
    """Best of `rounds` for each of two scans run alternately (tahoe first, then Spark, each
    round), so warm-up and machine load fall on both alike; returns ((best, result), ...)."""
    best = [Best(), Best()]
    out: list = [None, None]
    for _ in range(rounds):
        for i, fn in enumerate((tahoe_fn, spark_fn)):
            out[i] = _run(fn, best[i])
    return (best[0], out[0]), (best[1], out[1])


def _line(what: str, ours: Best, theirs: Best, target: str, extra: str = "", who: str = "tahoe") -> None:
    print(f"{what:<33} {who} {ours.wall:7.2f} s (cpu {ours.cpu:6.2f})   spark parquet {theirs.wall:7.2f} s "
          f"(cpu {theirs.cpu:6.2f})   ratio {ours.wall / theirs.wall:5.2f} (cpu {ours.cpu / theirs.cpu:5.2f})   "
          f"target {target}   load {os.getloadavg()[0]:.1f}{extra}", flush=True)


def _agg(df):
    from pyspark.sql import functions as F

    r = df.agg(F.count(F.lit(1)).alias("n"), F.sum("a").alias("a"), F.sum(F.length("s")).alias("s"),
               F.max("ts").alias("ts"), F.sum("p").alias("p"), F.sum("id").alias("id")).collect()[0]
    return r


def _file_rows(path: str) -> dict[str, int]:
    """numRecords of each active file (from the log's stats), by the path its add names."""
    from tahoe.log import DeltaLog
    from tahoe.protocol.stats import parse_stats

    return {a.path: parse_stats(a.stats).num_records for a in DeltaLog.for_table(path).snapshot().add_files()}


def _du(path: str) -> int:
    total = 0
    for d, _, names in os.walk(path):
        for n in names:
            if n.endswith(".parquet"):
                total += os.path.getsize(os.path.join(d, n))
    return total


def add_deletion_vectors(path: str, fraction: float = 0.1, seed: int = 7) -> int:
    """Delete `fraction` of each file's rows with deletion vectors (one DV file, one commit);
    returns the number of rows deleted."""
    import numpy as np

    from tahoe.write import delete_rows

    rng = np.random.default_rng(seed)
    rows = {p: rng.choice(n, size=int(n * fraction), replace=False) for p, n in _file_rows(path).items()}
    delete_rows(path, rows, predicate="bench")
    return sum(len(r) for r in rows.values())


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rows", type=int, default=None)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--rounds", type=int, default=3, help="tahoe/spark scan pairs, alternated (best of)")
    args = ap.parse_args(argv)
    rows = args.rows or (10_000_000 if args.quick else 115_000_000)

    from pyspark.sql import functions as F

    from tahoe import Table
    from tahoe.spark import local_session, read_delta, register, write_delta
    from tahoe.spark.calls import NATIVE_READ_CONF
    from tahoe.spark.read import glob_escape

    spark = local_session("local[2]", "tahoe-bench", extra={"spark.driver.memory": "2g"})
    register(spark)
    base = tempfile.mkdtemp(prefix="tahoe-spark-bench-", dir=args.dir)
    table, plain = os.path.join(base, "delta"), os.path.join(base, "plain")
    try:
        df = (spark.range(0, rows, 1, 16)
              .select(F.col("id"), F.rand(1).alias("a"),
                      F.concat(F.lit("s-"), (F.col("id") % 100_003).cast("string")).alias("s"),
                      (F.lit(1_700_000_000).cast("timestamp") + F.make_interval(secs=(F.col("id") % 86400).cast("int"))).alias("ts"),
                      (F.col("id") % 8).cast("int").alias("p"))
              .repartition(16, "p"))
        print(f"rows: {rows:,}")
        # writes alternate too (the first write of a session pays the JIT's warm-up): each round a
        # fresh tahoe table; the last one is scanned below
        t_plain, t_write = Best(), Best()
        for r in range(2):
            if r:
                shutil.rmtree(table, ignore_errors=True)
            _run(lambda: df.write.mode("overwrite").partitionBy("p").parquet(plain), t_plain)
            _run(lambda: write_delta(df, table, partition_by=["p"],
                                     properties={"delta.enableDeletionVectors": "true"}), t_write)
        size = _du(table)
        files = Table(table).file_uris()
        print(f"table: {size / 1e6:,.0f} MB in {len(files)} files")
        _line("write  tahoe write_delta", t_write, t_plain, "<= 1.05")

        def pq_scan():
            return _agg(spark.read.option("basePath", table).parquet(*[glob_escape(f) for f in files]))

        (t_fast, r_fast), (t_pq, r_pq) = _interleaved(lambda: _agg(read_delta(spark, table)), pq_scan, args.rounds)
        assert r_fast.n == r_pq.n == rows and (r_fast.s, r_fast.p, r_fast.id) == (r_pq.s, r_pq.p, r_pq.id), (r_fast, r_pq)
        _line("scan   tahoe fast path", t_fast, t_pq, "-", f"   ({rows / t_fast.wall / 1e6:,.1f} M rows/s)")
        (t_fd, r_fd), (t_pq_fd, _) = _interleaved(lambda: _agg(spark.read.format("delta").load(table)), pq_scan,
                                                  args.rounds)
        assert r_fd.n == rows
        _line("scan   format('delta')", t_fd, t_pq_fd, "<= 1.5")

        def ds_load():
            """The Python data source (what object stores the JVM cannot reach get)."""
            spark.conf.set(NATIVE_READ_CONF, "false")
            try:
                return spark.read.format("delta").load(table)
            finally:
                spark.conf.unset(NATIVE_READ_CONF)

        (t_ds, r_ds), (t_pq_ds, _) = _interleaved(lambda: _agg(ds_load()), pq_scan, args.rounds)
        assert r_ds.n == rows
        _line("scan   tahoe data source", t_ds, t_pq_ds, "<= 1.5")
        # the floor of that path: PySpark's Python data source API reading the same files with
        # pyarrow alone (no tahoe, no log), the partition value from each file's directory
        spark.dataSource.register(python_floor_source(files, df.schema, {   # local paths here
            f: {"p": int(os.path.basename(os.path.dirname(f)).split("=", 1)[1])} for f in files}))
        (t_dsf, r_dsf), (t_pq_dsf, _) = _interleaved(lambda: _agg(spark.read.format("benchPythonFloor").load()),
                                                     pq_scan, args.rounds)
        assert (r_dsf.n, r_dsf.s, r_dsf.p, r_dsf.id) == (r_pq.n, r_pq.s, r_pq.p, r_pq.id), (r_dsf, r_pq)
        _line("floor  Python data source", t_dsf, t_pq_dsf, "-",
              f"   (tahoe data source / floor {t_ds.wall / t_dsf.wall:.2f})", who="floor")

        t0 = time.perf_counter()
        deleted = add_deletion_vectors(table, 0.1)
        t_dv_commit = time.perf_counter() - t0
        (t_dv, r_dv), (t_pq2, _) = _interleaved(lambda: _agg(read_delta(spark, table)), pq_scan, args.rounds)
        assert r_dv.n == rows - deleted, (r_dv.n, rows, deleted)
        _line("scan   tahoe fast + 10% DV", t_dv, t_pq2, "<= 1.15",
              f"   ({deleted:,} rows deleted; DV file + commit {t_dv_commit:.2f} s)")
        # the floor of any DV scan on this Spark: the row index the parquet reader fills and a
        # per-row test of it dropping 10% of the rows (no file lookup, no bitmap)
        data_schema = df.drop("p").schema

        def floor_dv():
            return _agg(row_index_floor(spark, [glob_escape(f) for f in files], data_schema, table, 10))

        (t_fl, r_fl), (t_pq_fl, _) = _interleaved(floor_dv, pq_scan, args.rounds)
        assert rows - r_fl.n == sum(-(-n // 10) for n in _file_rows(table).values()), r_fl.n
        _line("floor  row index, 10% dropped", t_fl, t_pq_fl, "-",
              f"   (tahoe fast + 10% DV / floor {t_dv.wall / t_fl.wall:.2f})", who="floor")
        (t_fddv, r_fddv), (t_pq_fddv, _) = _interleaved(lambda: _agg(spark.read.format("delta").load(table)),
                                                        pq_scan, args.rounds)
        assert r_fddv.n == rows - deleted
        _line("scan   format('delta') + 10% DV", t_fddv, t_pq_fddv, "<= 1.5")
        (t_dsdv, r_dsdv), (t_pq_dsdv, _) = _interleaved(lambda: _agg(ds_load()), pq_scan, args.rounds)
        assert r_dsdv.n == rows - deleted
        _line("scan   tahoe DS + 10% DV", t_dsdv, t_pq_dsdv, "<= 1.5")
    finally:
        spark.stop()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
