"""DELETE / UPDATE / MERGE: deletion vectors vs copy-on-write, tahoe vs delta-rs, Spark-free and Spark.

    python -m bench.dml                      # 10M rows (the issue's size)
    python -m bench.dml --rows 1000000       # smaller, for a loaded machine
    python -m bench.dml --no-spark           # Spark-free executor and delta-rs only

The table: id bigint, v double, k string; 10 files (rows / 10 per file), unpartitioned, written
once by tahoe and copied for every run, so each operation starts from the same files.
Operations (each on a fresh copy, one commit each):
  - DELETE of 0.1% of rows (`id % 1000 = 7`), in DV mode and copy-on-write,
  - UPDATE of 1% of rows (`id % 100 = 3`, `v = v + 1`), both modes,
  - MERGE upsert of a 1% source (half ids that exist: updates, half new ids: inserts) on
    `t.id = s.id`, whenMatchedUpdateAll + whenNotMatchedInsertAll, both modes.
Runners: tahoe's Spark-free executor (`tahoe.delete/update/merge`), delta-rs (`deltalake`, in a
subprocess: copy-on-write, its only mode for these), and tahoe on Spark (`tahoe.spark.DeltaTable`,
local[2], one session; the first operation also pays the session's warm-up, so a throwaway
DELETE runs first). Wall-clock seconds, one run each; ratios printed at the end.

Measured (2026-11-24, `--rows 200000 --no-spark`, on a 2-core machine at load average ~18 — shared
with other jobs, so only rough; the 10M-row and Spark runs are still to be done on a quiet machine):
tahoe-arrow delete dv 1.81 s (includes first-call warm-up) / cow 1.75 s, delta-rs 0.62 s;
update dv 0.41 s / cow 1.35 s, delta-rs 0.30 s; merge dv 0.86 s / cow 1.61 s, delta-rs 5.17 s.
Ratios: update dv/cow 0.30, merge dv/cow 0.54, merge dv/delta-rs 0.17, merge cow/delta-rs 0.31;
delete and update are slower than delta-rs at this size (delete dv/delta-rs 2.9, update dv/delta-rs 1.4).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

DELETE = "id % 1000 = 7"
UPDATE = ("id % 100 = 3", {"v": "v + 1"})


def base(rows: int) -> pa.Table:
    rng = np.random.default_rng(7)
    return pa.table({"id": pa.array(np.arange(rows, dtype=np.int64)),
                     "v": pa.array(rng.random(rows)),
                     "k": pa.array(np.char.add("k", (np.arange(rows) % 97).astype(str)).astype(object))})


def source(rows: int) -> pa.Table:
    n = rows // 100
    ids = np.concatenate([np.arange(0, n // 2, dtype=np.int64) * 200 + 11, rows + np.arange(n - n // 2, dtype=np.int64)])
    return pa.table({"id": ids, "v": np.full(len(ids), -1.0), "k": np.full(len(ids), "src").astype(object)})


_RS = r"""
import json, sys, time, os
import pyarrow.parquet as pq
from deltalake import DeltaTable
job = json.load(open(sys.argv[1]))
out = {}
for name, path, op in job["runs"]:
    dt = DeltaTable(path)
    t = time.perf_counter()
    if op == "delete":
        dt.delete(job["delete"])
    elif op == "update":
        dt.update(updates=job["update"][1], predicate=job["update"][0])
    else:
        src = pq.read_table(job["source"])
        (dt.merge(src, "t.id = s.id", source_alias="s", target_alias="t")
           .when_matched_update_all().when_not_matched_insert_all().execute())
    out[name] = time.perf_counter() - t
print(json.dumps(out), flush=True)
os._exit(0)
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--no-spark", action="store_true")
    args = ap.parse_args()

    import tahoe
    from tahoe.write.arrow import write_table

    work = tempfile.mkdtemp(prefix="tahoe-bench-dml-")
    try:
        t0 = time.perf_counter()
        data = base(args.rows)
        tables = {}
        for mode, props in (("dv", {"delta.enableDeletionVectors": "true"}), ("cow", {})):
            p = f"{work}/base-{mode}"
            write_table(p, data, target_file_rows=max(1, args.rows // 10), properties=props)
            tables[mode] = p
        src = source(args.rows)
        src_path = f"{work}/source.parquet"
        pq.write_table(src, src_path)
        print(f"{args.rows} rows, 10 files; setup {time.perf_counter() - t0:.1f} s", flush=True)
        n = [0]

        def fresh(mode: str) -> str:
            n[0] += 1
            p = f"{work}/run-{n[0]}"
            shutil.copytree(tables[mode], p)
            return p

        def run_tahoe(op: str, path: str) -> float:
            t = time.perf_counter()
            if op == "delete":
                tahoe.delete(path, DELETE)
            elif op == "update":
                tahoe.update(path, UPDATE[1], predicate=UPDATE[0])
            else:
                (tahoe.merge(path, src, "t.id = s.id", source_alias="s", target_alias="t")
                 .when_matched_update_all().when_not_matched_insert_all().execute())
            return time.perf_counter() - t

        results: dict[str, float] = {}
        for op in ("delete", "update", "merge"):
            for mode in ("dv", "cow"):
                results[f"tahoe-arrow {op} {mode}"] = run_tahoe(op, fresh(mode))
                print(f"tahoe-arrow {op} {mode}: {results[f'tahoe-arrow {op} {mode}']:.2f} s", flush=True)
        runs = [[f"delta-rs {op} cow", fresh("cow"), op] for op in ("delete", "update", "merge")]
        job = f"{work}/rs.json"
        with open(job, "w") as fh:
            json.dump({"runs": runs, "delete": DELETE, "update": UPDATE, "source": src_path}, fh)
        r = subprocess.run([sys.executable, "-c", _RS, job], capture_output=True, text=True, timeout=3600)
        rs = json.loads([x for x in r.stdout.splitlines() if x.startswith("{")][-1])
        for k, v in rs.items():
            print(f"{k}: {v:.2f} s", flush=True)
        results.update(rs)

        if not args.no_spark:
            from tahoe.spark import DeltaTable, register
            from tahoe.spark.session import local_session

            spark = local_session("local[2]", "bench-dml")
            register(spark)
            sdf = spark.read.parquet(src_path)
            DeltaTable.forPath(spark, fresh("dv")).delete("id = 1")      # warm-up
            for op in ("delete", "update", "merge"):
                for mode in ("dv", "cow"):
                    dt = DeltaTable.forPath(spark, fresh(mode))
                    t = time.perf_counter()
                    if op == "delete":
                        dt.delete(DELETE)
                    elif op == "update":
                        dt.update(UPDATE[0], UPDATE[1])
                    else:
                        (dt.alias("t").merge(sdf.alias("s"), "t.id = s.id").whenMatchedUpdateAll()
                         .whenNotMatchedInsertAll().execute())
                    results[f"tahoe-spark {op} {mode}"] = time.perf_counter() - t
                    print(f"tahoe-spark {op} {mode}: {results[f'tahoe-spark {op} {mode}']:.2f} s", flush=True)
            spark.stop()

        print("\nratios (lower is better for the first):")
        for ex in ("tahoe-arrow", "tahoe-spark"):
            for op in ("delete", "update", "merge"):
                dv, cow = results.get(f"{ex} {op} dv"), results.get(f"{ex} {op} cow")
                rs_t = results.get(f"delta-rs {op} cow")
                if dv is None:
                    continue
                print(f"  {ex} {op}: dv/cow {dv / cow:.3f}  dv/delta-rs {dv / rs_t:.3f}  cow/delta-rs {cow / rs_t:.3f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
