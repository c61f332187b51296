"""Sharing server benchmarks on loopback (the server runs as a separate process).

    python -m bench.sharing            # 100k-file /query; ~1 GB load_as_pandas; Spark scans
    python -m bench.sharing --quick    # 20k files; ~100 MB

1. `/query` over a table of N files (one JSON commit with N adds, hard links to a few real small
   parquet files, each with stats): time to first byte and to the last line, cold (first request:
   snapshot load) and warm (snapshot cached). Targets (issue 18), cold: first byte < 100 ms, last
   line < 1 s. `--query-only` runs this section alone. Measured (2-core machine shared with
   other sessions): load 15.5, cold: first byte 150 ms, last line 1.67 s, server CPU 0.60 s;
   warm: 95 ms / 428 ms (server CPU 30 ms: the client reading 64.6 MB is most of it); load 18.8,
   cold: 306 ms / 3.85 s (server CPU 0.79 s); load 10.3, cold: 83 ms / 789 ms (server CPU
   0.54 s) — both targets met. Before (main, load 20-33): 71 ms / 1.53 s.
2. `load_as_pandas` of a ~1 GB table through the server — tahoe's client
   (`tahoe.sharing.load_as_pandas`) and the official client (`delta_sharing.load_as_pandas`, parquet
   format, run in its own environment `.venv-recipient` as a recipient runs it; timed inside that
   process) — beside pyarrow reading the same files locally (`pq.read_table(...).to_pandas()`).
   Targets: tahoe's client / local ≤ 1.1; official client / local ≤ 1.3. Also printed: the
   official client's own conversion work on the same files read locally (its per-file steps and
   final concat, without HTTP) — the floor no server can go below for it — and the server
   process's CPU time per load.
3. Spark (`--no-spark` skips it; `--spark-only` runs only it): a full scan
   (`write.format("noop")`) of the same table through `spark.read.format("deltaSharing")`
   (tahoe's Python data source, via the server) beside `spark.read.parquet` of the same files,
   and beside the floor of any jar-free reader: a minimal Python data source reading the same
   local files with pyarrow (no HTTP, no tahoe), best of 3 interleaved. Target ratio ≤ 1.5.

The machine's load average is printed with each section: on a shared machine, read the numbers
beside it.

Figures of 2026-11-27 16:35 (`--no-spark --files 2000`, load 1.4-1.7): /query of 2,000 files cold
  32.7 ms / 36.4 ms; load_as_pandas of the 1,023 MB table, best of 3: local 3.47 s (runs 6.55, 3.47,
  4.82), tahoe 3.48 s = 1.00x (target <= 1.1 met; CPU 0.92x, server 0.53 s), official client
  10.49 s = 3.03x; tahoe / official 0.33x. `--spark-only` at 16:37 (load 2.5): parquet 2.59 s,
  format("deltaSharing") 5.85 s = 2.26x (target <= 1.5 missed), the pyarrow-only Python data source
  floor 5.46 s = 2.11x; deltaSharing / floor 1.07x — the floor, a data source with no HTTP and no
  tahoe, is already past the target: the Python data source API costs ~2x a native scan here.
Figures of 2026-11-27 13:57 (`--no-spark --files 2000`, load 1.2-1.5): load_as_pandas of the
  1,023 MB table, best of 3: local 2.56 s (runs 6.09, 2.56, 3.94), tahoe 3.29 s = 1.29x (target
  <= 1.1 missed; CPU 1.09x), official client 8.34 s = 3.26x; tahoe / official 0.39x. The local
  read's to_pandas alone varies 0.73-2.85 s between runs of one process (its system time 0.07-3.0 s:
  the kernel zeroing and faulting in ~2 GB), more than the gap measured.
  `--spark-only` at 15:12 (load 2.9): parquet 2.75 s, format("deltaSharing") 5.99 s = 2.17x (target
  <= 1.5 missed), the pyarrow-only Python data source floor 5.43 s = 1.97x; deltaSharing / floor 1.10x.
Figures of 2026-11-27, a quiet machine (load average 1.4-2.6), one full run:
  /query over 100,000 files, cold: first byte 80.4 ms, last line 307.8 ms (server CPU 330 ms) —
  targets < 100 ms / < 1 s met; warm 20 ms / 70-76 ms.
  load_as_pandas of the 1,023 MB table (29 files, 58M rows), best of 3 interleaved:
    pyarrow local read + to_pandas 2.70 s (runs 5.87, 2.70, 4.70: page cache and allocation)
    tahoe.sharing.load_as_pandas   4.95 s  ratio 1.83x (target <= 1.1: MISSED); CPU ratio 1.50x
    delta_sharing.load_as_pandas  10.62 s  ratio 3.93x; tahoe / official 0.47x
  In a separate check (same table, same hour) tahoe's load_as_arrow took 1.73-1.76 s against a
  local pq.read_table of 1.06-1.56 s, and to_pandas 1.3-1.7 s on either side: the gap is the
  HTTP transfer of 1 GB through a server process on the same 2 cores.
  Spark full scan, best of 3: parquet 2.53 s, format("deltaSharing") 4.88 s = 1.92x (target <=
  1.5: MISSED); a minimal pyarrow-only Python data source on the local files 4.35 s = 1.72x
  parquet; deltaSharing / that floor 1.12x.
Figures (one full run, `python -m bench.sharing`; this 2-core machine shared with other sessions,
load average 9.4 -> 20.2 during the loads, 19.1 during the Spark scans):
  /query over 100,000 files: first request first byte 258 ms, last line 1.90 s; warm 40 ms / 213-242 ms
  (targets < 200 ms / < 2 s: met warm; the first byte of the cold request, which loads the
  snapshot, 258 ms).
  load_as_pandas of the 1,023 MB table (29 files, 58M rows), best of 3 interleaved:
    pyarrow local read + to_pandas 22.28 s (runs 22.28, 36.64, 37.70: the load swings)
    tahoe.sharing.load_as_pandas   28.84 s  ratio 1.29x (target <= 1.1: MISSED); CPU ratio 1.15x
                                   (client + server 9.44 s, server 0.57 s, vs 8.19 s)
    delta_sharing.load_as_pandas   45.16 s  ratio 2.03x (reported); tahoe / official 0.64x
  Spark full scan of the same files, best of 3: spark.read.parquet 17.89 s, format("deltaSharing")
    36.40 s: ratio 2.03x (target <= 1.5: MISSED); the floor of any jar-free reader (a minimal
    Python data source reading the local files) 26.30 s = 1.47x parquet; deltaSharing / floor 1.38x.
Reading the misses: at load 20 on 2 cores the runs of one variant differ by up to 1.7x, more than
the gaps measured; a 250 MB version of the same comparison in the same hour gave tahoe's
load_as_pandas 6.04 s vs local 7.08 s (0.85x). In Spark, the Python data source path alone costs
~1.5x native parquet (the floor), which leaves no room for the 1.5x target: tahoe's task decodes at
the floor's speed (profiled: `iter_batches` dominates; ~0.45 s of 2.5 s waiting for downloads per
250 MB), and the rest is the HTTP transfer (server and client on the same 2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .floors import python_floor_source

REPO = Path(__file__).resolve().parents[1]
SCHEMA = {"type": "struct", "fields": [
    {"name": "id", "type": "long", "nullable": True, "metadata": {}},
    {"name": "value", "type": "double", "nullable": True, "metadata": {}},
    {"name": "name", "type": "string", "nullable": True, "metadata": {}},
]}


def _commit0(root: Path, adds: list[dict]) -> None:
    log = root / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    md = {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
          "schemaString": json.dumps(SCHEMA), "partitionColumns": [], "configuration": {}, "createdTime": 0}
    with open(log / "00000000000000000000.json", "w") as f:
        f.write(json.dumps({"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "WRITE"}}) + "\n")
        f.write(json.dumps({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}) + "\n")
        f.write(json.dumps({"metaData": md}) + "\n")
        for a in adds:
            f.write(json.dumps({"add": a}, separators=(",", ":")) + "\n")


def _table(n_rows: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(n_rows, dtype=np.int64) + seed * n_rows
    return pa.table({"id": ids, "value": rng.random(n_rows),
                     "name": pa.array(np.char.add("name-", (ids % 100_000).astype(str)))})


def build_many_files(root: Path, n_files: int) -> None:
    data = root / "data"
    data.mkdir(parents=True)
    srcs = []
    for i in range(4):
        p = data / f"src-{i}.parquet"
        pq.write_table(_table(100, i), p)
        srcs.append(p)
    adds = []
    for i in range(n_files):
        name = f"part-{i:06d}-{uuid.uuid4()}.parquet"
        os.link(srcs[i % 4], data / name)
        lo = i * 100
        adds.append({"path": f"data/{name}", "partitionValues": {}, "size": srcs[i % 4].stat().st_size,
                     "modificationTime": 1700000000000, "dataChange": True,
                     "stats": json.dumps({"numRecords": 100, "minValues": {"id": lo, "value": 0.0, "name": "name-0"},
                                          "maxValues": {"id": lo + 99, "value": 1.0, "name": "name-99999"},
                                          "nullCount": {"id": 0, "value": 0, "name": 0}})})
    _commit0(root, adds)


def build_big(root: Path, total_mb: int) -> list[Path]:
    data = root / "data"
    data.mkdir(parents=True)
    rows_per_file = 2_000_000          # ~ 40 MB per file with these columns
    files, adds, size = [], [], 0
    i = 0
    while size < total_mb * 1_000_000:
        p = data / f"part-{i:05d}.parquet"
        t = _table(rows_per_file, i)
        pq.write_table(t, p, compression="snappy")
        files.append(p)
        s = p.stat().st_size
        size += s
        adds.append({"path": f"data/{p.name}", "partitionValues": {}, "size": s, "modificationTime": 0,
                     "dataChange": True, "stats": json.dumps({"numRecords": rows_per_file})})
        i += 1
    _commit0(root, adds)
    return files


def start(config: Path, port: int) -> subprocess.Popen:
    import httpx

    proc = subprocess.Popen([sys.executable, "-m", "tahoe", "sharing", "serve", "--config", str(config),
                             "--port", str(port)], cwd=str(REPO))
    for _ in range(300):
        try:
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
            return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("server did not start")


def free_port() -> int:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def time_query(endpoint: str, token: str, table: str, body: dict | None = None) -> tuple[float, float, int, int]:
    import httpx

    t0 = time.perf_counter()
    first = None
    lines = 0
    nbytes = 0
    with httpx.stream("POST", f"{endpoint}/shares/s/schemas/b/tables/{table}/query", json=body or {},
                      headers={"Authorization": f"Bearer {token}"}, timeout=120) as r:
        assert r.status_code == 200, r.read()
        for chunk in r.iter_bytes():
            if first is None:
                first = time.perf_counter() - t0
            lines += chunk.count(b"\n")
            nbytes += len(chunk)
    return first, time.perf_counter() - t0, lines, nbytes


def client_work_local(files: list[Path], phases: dict[str, float] | None = None):
    """What `delta_sharing.load_as_pandas` (1.4.2, parquet format) does with the files once it has
    them, on the same files read from local disk: `DeltaSharingReader._to_pandas` per file (it
    opens a ParquetFile, then reads a one-file dataset and converts it with use_threads=False),
    then `to_pandas`'s concat and column selection (reader.py). The client's code itself cannot
    be called on local paths (its fsspec filesystem for a file:// URL is refused by pyarrow).
    `phases` gets the seconds of each step."""
    import pandas as pd
    from pyarrow.dataset import dataset

    ph = {"read": 0.0, "to_pandas": 0.0}
    pdfs = []
    for f in files:
        t0 = time.perf_counter()
        pq.ParquetFile(str(f))
        t = dataset(source=str(f), format="parquet").to_table()
        t1 = time.perf_counter()
        pdfs.append(t.to_pandas(date_as_object=True, use_threads=False, split_blocks=False, self_destruct=True))
        ph["read"] += t1 - t0
        ph["to_pandas"] += time.perf_counter() - t1
    t0 = time.perf_counter()
    merged = pd.concat(pdfs, axis=0, ignore_index=True, copy=False)
    t1 = time.perf_counter()
    col_map = {c.lower(): c for c in merged.columns}
    out = merged[[col_map[f["name"].lower()] for f in SCHEMA["fields"]]]
    ph["concat"], ph["column selection"] = t1 - t0, time.perf_counter() - t1
    if phases is not None:
        phases.update(ph)
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc)."""
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def load_avg() -> str:
    return f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"


def spark_scans(files: list[Path], url: str, rounds: int = 3) -> None:
    """Full scans (every column, `write.format("noop")`) of the shared table through
    `format("deltaSharing")` and of the same files with `spark.read.parquet`, interleaved."""
    from tahoe.spark import register
    from tahoe.spark.session import local_session

    spark = local_session("local[2]", "bench-sharing")
    register(spark)
    paths = [str(f) for f in files]
    spark.dataSource.register(python_floor_source(paths))
    variants = {
        "parquet": lambda: spark.read.parquet(*paths).write.format("noop").mode("overwrite").save(),
        "deltaSharing": lambda: spark.read.format("deltaSharing").load(url).write.format("noop").mode("overwrite").save(),
        "pyFloor": lambda: spark.read.format("benchPythonFloor").load().write.format("noop").mode("overwrite").save(),
    }
    counts = {"parquet": spark.read.parquet(*paths).count(), "deltaSharing": spark.read.format("deltaSharing").load(url).count(),
              "pyFloor": spark.read.format("benchPythonFloor").load().count()}
    assert counts["parquet"] == counts["deltaSharing"] == counts["pyFloor"], counts
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(rounds):
        for k, fn in variants.items():
            t = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t)
    best = {k: min(v) for k, v in times.items()}
    print(f"\nSpark full scan of the same {len(files)} files ({counts['parquet']} rows; best of {rounds}; {load_avg()}):")
    for k in variants:
        print(f"  {k:13s} {best[k]:6.2f} s   runs: {', '.join(f'{x:.2f}' for x in times[k])}")
    print(f"  RATIO format('deltaSharing') / spark.read.parquet: {best['deltaSharing'] / best['parquet']:.2f}x "
          f"(target <= 1.5); the Python data source floor / spark.read.parquet: "
          f"{best['pyFloor'] / best['parquet']:.2f}x; format('deltaSharing') / the floor: "
          f"{best['deltaSharing'] / best['pyFloor']:.2f}x")
    spark.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--files", type=int, default=None)
    ap.add_argument("--mb", type=int, default=None)
    ap.add_argument("--no-spark", action="store_true", help="skip the Spark scans")
    ap.add_argument("--spark-only", action="store_true", help="only the Spark scans (section 3)")
    ap.add_argument("--query-only", action="store_true", help="only the /query timings (section 1)")
    args = ap.parse_args()
    from bench.sharing_load import _cpu_of, _tree

    n_files = args.files or (20_000 if args.quick else 100_000)
    mb = args.mb or (100 if args.quick else 1000)
    tmp = Path(tempfile.mkdtemp(prefix="tahoe-sharing-bench-"))
    proc = None
    try:
        t = time.perf_counter()
        if not args.spark_only:
            build_many_files(tmp / "many", n_files)
            print(f"built {n_files}-file table in {time.perf_counter() - t:.1f}s", flush=True)
        t = time.perf_counter()
        files = build_big(tmp / "big", 1 if args.query_only else mb)
        total = sum(f.stat().st_size for f in files)
        print(f"built {total / 1e6:.0f} MB table ({len(files)} files) in {time.perf_counter() - t:.1f}s", flush=True)
        port = free_port()
        import yaml

        cfg = {"shares": [{"name": "s", "schemas": [{"name": "b", "tables": [
            {"name": "many", "location": str(tmp / "many")}, {"name": "big", "location": str(tmp / "big")}]}]}],
            "authorization": {"bearerToken": "bench-token"}, "host": "127.0.0.1", "port": port}
        (tmp / "server.yaml").write_text(yaml.safe_dump(cfg))
        proc = start(tmp / "server.yaml", port)
        endpoint = f"http://127.0.0.1:{port}/delta-sharing"
        prof = tmp / "bench.share"
        prof.write_text(json.dumps({"shareCredentialsVersion": 1, "endpoint": endpoint, "bearerToken": "bench-token"}))
        if args.spark_only:
            spark_scans(files, f"{prof}#s.b.big")
            return

        print(f"\n/query over {n_files} files (NDJSON streamed; {load_avg()}):")
        for label, body in (("first", {}), ("warm", {}), ("warm", {}),
                            ("warm, lines rendered (not from the line cache: limitHint path)", {"limitHint": 10 ** 12})):
            c0 = _cpu_of(_tree(proc.pid))
            first, last, lines, nbytes = time_query(endpoint, "bench-token", "many", body)
            cpu = _cpu_of(_tree(proc.pid)) - c0
            target = "   (targets, cold: first byte < 100 ms, last line < 1000 ms)" if label == "first" else ""
            print(f"  {label:5s}\n      first byte {first * 1000:7.1f} ms   last line {last * 1000:7.1f} ms   "
                  f"{lines} lines, {nbytes / 1e6:.1f} MB, server CPU {cpu * 1000:.0f} ms{target}")
        if args.query_only:
            return

        import tahoe.sharing as tds
        from tahoe.sharing.official_client import OfficialClient, ensure_env

        official = OfficialClient(ensure_env(str(REPO / ".venv-recipient")))

        print(f"\nload of the {total / 1e6:.0f} MB table ({len(files)} files of ~{total / len(files) / 1e6:.0f} MB), "
              f"best of 3, the variants interleaved (first runs pay imports; {load_avg()}):")
        variants = {
            "local": lambda: pq.read_table([str(f) for f in files]).to_pandas(),
            "client work, local files": lambda: client_work_local(files, phases),
            "official": lambda: official.timed("load_as_pandas", f"{prof}#s.b.big", use_delta_format=False),
            "tahoe": lambda: tds.load_as_pandas(f"{prof}#s.b.big"),
        }
        phases: dict[str, float] = {}
        phase_runs: list[dict[str, float]] = []
        times: dict[str, list[float]] = {k: [] for k in variants}
        server_cpu: dict[str, list[float]] = {k: [] for k in variants}
        own_cpu: dict[str, list[float]] = {k: [] for k in variants}
        rows: dict[str, int] = {}
        for _ in range(3):
            for k, fn in variants.items():
                c = cpu_seconds(proc.pid)
                u = resource.getrusage(resource.RUSAGE_SELF)
                t = time.perf_counter()
                out = fn()
                elapsed = time.perf_counter() - t
                u2 = resource.getrusage(resource.RUSAGE_SELF)
                if k == "official":   # timed in the recipient's process, its own CPU
                    rows[k], elapsed, client_cpu = out
                else:
                    rows[k], client_cpu = len(out), u2.ru_utime + u2.ru_stime - u.ru_utime - u.ru_stime
                times[k].append(elapsed)
                if k == "client work, local files":
                    phase_runs.append(dict(phases))
                own_cpu[k].append(client_cpu)
                server_cpu[k].append(cpu_seconds(proc.pid) - c)
        best = {k: min(v) for k, v in times.items()}
        t_local = best["local"]
        labels = {"local": "pyarrow local read + to_pandas        ",
                  "client work, local files": "official client's own work, local   ",
                  "official": "delta_sharing.load_as_pandas (parquet)",
                  "tahoe": "tahoe.sharing.load_as_pandas         "}
        cpu = {k: min(a + b for a, b in zip(own_cpu[k], server_cpu[k])) for k in variants}
        for k, label in labels.items():
            extra = f"  ratio {best[k] / t_local:.2f}x" if k != "local" else ""
            print(f"  {label} {best[k]:6.2f} s  ({rows[k]} rows){extra}   runs: {', '.join(f'{x:.2f}' for x in times[k])}")
            print(f"  {'':38s} CPU {cpu[k]:6.2f} s (client + server; server {min(server_cpu[k]):.2f} s)  "
                  f"CPU ratio {cpu[k] / cpu['local']:.2f}x")
        fastest = phase_runs[times["client work, local files"].index(best["client work, local files"])]
        print("  the client's own work (fastest run): " + ", ".join(f"{k} {v:.2f} s" for k, v in fastest.items())
              + " (per file: read one-file dataset, then to_pandas on one thread)")
        print(f"  official client / its own work on local files: {best['official'] / best['client work, local files']:.2f}x "
              f"(what HTTP and the server add); {load_avg()}")
        print(f"  RATIO tahoe load_as_pandas / local: {best['tahoe'] / t_local:.2f}x (target <= 1.1); "
              f"official / local: {best['official'] / t_local:.2f}x; tahoe / official: "
              f"{best['tahoe'] / best['official']:.2f}x")
        if not args.no_spark:
            spark_scans(files, f"{prof}#s.b.big")
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
