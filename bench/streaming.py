"""tahoe's Structured Streaming on Spark: Delta -> Delta throughput beside parquet -> parquet, and
the end-to-end latency of a one-row append, in one run.

    python -m bench.streaming                 # 10M rows in 1,000 commits (the issue's size)
    python -m bench.streaming --quick         # 1M rows in 100 commits
    python -m bench.streaming --rows N --commits C --latency-runs K

One local[2] session (full JIT). The source: a Delta table (id bigint, v double, s string) written
with tahoe's Spark-free writer, one file per commit.
  - delta -> delta: `spark.readStream.format("delta").load(src)` -> `writeStream.format("delta")`
    with `Trigger.AvailableNow` (default maxFilesPerTrigger 1000): wall time from `start()` to the
    end of the query, rows/s.
  - parquet -> parquet: `spark.readStream.schema(...).parquet(<the same data files>)` ->
    `writeStream.parquet`, AvailableNow, `maxFilesPerTrigger` 1000 too.
  - latency: a Delta -> Delta query with `trigger(processingTime="1 second")` running; one row is
    appended to the source (a tahoe commit) and the time until the sink's log holds it is measured
    (polled every 20 ms), --latency-runs times; median and max reported (target < 3 s).
Ratio: delta / parquet rows per second (higher is better).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time


def _make_source(path: str, rows: int, commits: int) -> None:
    import numpy as np
    import pyarrow as pa

    from tahoe.write import write_table

    per = rows // commits
    rng = np.random.default_rng(7)
    for c in range(commits):
        ids = np.arange(c * per, (c + 1) * per, dtype=np.int64)
        write_table(path, pa.table({"id": ids, "v": rng.random(per), "s": pa.array([f"s{i % 97}" for i in ids])}),
                    mode="append")


def _sink_versions(sink: str) -> int:
    log = os.path.join(sink, "_delta_log")
    if not os.path.isdir(log):
        return 0
    return sum(1 for f in os.listdir(log) if f.endswith(".json"))


def _sink_has(sink: str, marker: int) -> bool:
    log = os.path.join(sink, "_delta_log")
    for f in sorted(os.listdir(log), reverse=True)[:5]:
        if not f.endswith(".json"):
            continue
        with open(os.path.join(log, f)) as fh:
            for line in fh:
                a = json.loads(line)
                if "add" in a and a["add"].get("stats") and json.loads(a["add"]["stats"]).get("maxValues", {}).get(
                        "id") == marker:
                    return True
    return False


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rows", type=int)
    ap.add_argument("--commits", type=int)
    ap.add_argument("--latency-runs", type=int, default=5)
    a = ap.parse_args()
    rows = a.rows or (1_000_000 if a.quick else 10_000_000)
    commits = a.commits or (100 if a.quick else 1000)

    from tahoe.spark.session import local_session

    spark = local_session("local[2]", "bench-streaming")
    import tahoe.spark  # noqa: F401 - tahoe's wrappers (format("delta") itself needs no register)

    work = tempfile.mkdtemp(prefix="tahoe-bench-streaming-")
    try:
        src = os.path.join(work, "src")
        t = time.perf_counter()
        _make_source(src, rows, commits)
        print(f"source: {rows:,} rows in {commits:,} commits, written in {time.perf_counter() - t:.1f} s")

        t = time.perf_counter()
        q = (spark.readStream.format("delta").load(src).writeStream.format("delta")
             .option("checkpointLocation", os.path.join(work, "ck1")).trigger(availableNow=True)
             .start(os.path.join(work, "sink1")))
        q.awaitTermination()
        delta_s = time.perf_counter() - t
        n = spark.read.format("delta").load(os.path.join(work, "sink1")).count()
        assert n == rows, (n, rows)

        schema = spark.read.format("delta").load(src).schema
        t = time.perf_counter()
        q = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1000).option("pathGlobFilter", "*.parquet")
             .parquet(src).writeStream.format("parquet").option("checkpointLocation", os.path.join(work, "ck2"))
             .trigger(availableNow=True).start(os.path.join(work, "sink2")))
        q.awaitTermination()
        parquet_s = time.perf_counter() - t
        n2 = spark.read.parquet(os.path.join(work, "sink2")).count()
        assert n2 == rows, (n2, rows)
        print(f"delta -> delta   (AvailableNow): {delta_s:7.1f} s  {rows / delta_s:12,.0f} rows/s")
        print(f"parquet -> parquet (AvailableNow): {parquet_s:7.1f} s  {rows / parquet_s:12,.0f} rows/s")
        print(f"ratio delta/parquet rows/s: {parquet_s / delta_s:.2f}")

        # latency of a one-row append through a running 1 s trigger
        sink = os.path.join(work, "sink3")
        q = (spark.readStream.format("delta").option("startingVersion", "latest").load(src)
             .writeStream.format("delta").option("checkpointLocation", os.path.join(work, "ck3"))
             .trigger(processingTime="1 second").start(sink))
        from tahoe.write import write_table
        import pyarrow as pa

        time.sleep(5)   # the query's first (empty) batches
        lat = []
        for k in range(a.latency_runs):
            marker = 10 ** 12 + k
            t = time.perf_counter()
            write_table(src, pa.table({"id": pa.array([marker], pa.int64()), "v": [0.0], "s": ["x"]}), mode="append")
            while not (_sink_versions(sink) and _sink_has(sink, marker)):
                if time.perf_counter() - t > 60:
                    raise SystemExit(f"no sink commit for the append after 60 s: {q.exception()}")
                time.sleep(0.02)
            lat.append(time.perf_counter() - t)
            time.sleep(1.5)
        q.stop()
        print(f"1-row append latency (1 s trigger, {len(lat)} runs): median {statistics.median(lat):.2f} s, "
              f"max {max(lat):.2f} s")
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
