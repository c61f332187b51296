"""Loopback load test of the sharing server: a thread pool of Python clients calling `/metadata`
and `/query` (alternately) on a small shared table for a fixed time.

    python -m bench.sharing_load                 # 60 s, 16 threads
    python -m bench.sharing_load --seconds 10 --threads 8

The server runs as its own process (`python -m tahoe sharing serve`). Reports requests/s, p50
and p99 latency per endpoint, and errors (non-200 answers or exceptions).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def build(root: Path, n_files: int = 50) -> None:
    import uuid

    (root / "_delta_log").mkdir(parents=True)
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}},
                                           {"name": "p", "type": "string", "nullable": True, "metadata": {}}]}
    lines = [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
             {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                           "schemaString": json.dumps(schema), "partitionColumns": ["p"], "configuration": {}}}]
    for i in range(n_files):
        rel = f"p={i % 5}/part-{i:04d}.parquet"
        (root / f"p={i % 5}").mkdir(exist_ok=True)
        pq.write_table(pa.table({"id": list(range(i * 10, i * 10 + 10))}), root / rel)
        lines.append({"add": {"path": rel, "partitionValues": {"p": str(i % 5)}, "size": (root / rel).stat().st_size,
                              "modificationTime": 0, "dataChange": True,
                              "stats": json.dumps({"numRecords": 10, "minValues": {"id": i * 10},
                                                   "maxValues": {"id": i * 10 + 9}, "nullCount": {"id": 0}})}})
    (root / "_delta_log" / "00000000000000000000.json").write_text("\n".join(json.dumps(x) for x in lines) + "\n")


def main() -> None:
    import httpx
    import yaml

    from bench.sharing import free_port, start

    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--threads", type=int, default=16)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="tahoe-sharing-load-"))
    proc = None
    try:
        build(tmp / "t")
        port = free_port()
        (tmp / "server.yaml").write_text(yaml.safe_dump({
            "shares": [{"name": "s", "schemas": [{"name": "d", "tables": [{"name": "t", "location": str(tmp / "t")}]}]}],
            "authorization": {"bearerToken": "load-token"}, "host": "127.0.0.1", "port": port}))
        proc = start(tmp / "server.yaml", port)
        base = f"http://127.0.0.1:{port}/delta-sharing/shares/s/schemas/d/tables/t"
        lat: dict[str, list[float]] = {"metadata": [], "query": []}
        errors: list[str] = []
        lock = threading.Lock()
        stop_at = time.perf_counter() + args.seconds

        def worker(k: int) -> None:
            mine = {"metadata": [], "query": []}
            errs = []
            with httpx.Client(headers={"Authorization": "Bearer load-token"}, timeout=30) as c:
                i = k
                while time.perf_counter() < stop_at:
                    kind = "metadata" if i % 2 == 0 else "query"
                    i += 1
                    t = time.perf_counter()
                    try:
                        r = c.get(base + "/metadata") if kind == "metadata" else c.post(base + "/query", json={})
                        ok = r.status_code == 200 and "Delta-Table-Version" in r.headers
                        if not ok:
                            errs.append(f"{kind}: {r.status_code}")
                    except Exception as e:  # noqa: BLE001 - counted, not raised
                        errs.append(f"{kind}: {type(e).__name__}")
                        continue
                    mine[kind].append(time.perf_counter() - t)
            with lock:
                for k2, v in mine.items():
                    lat[k2].extend(v)
                errors.extend(errs)

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(args.threads)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - t0
        total = sum(len(v) for v in lat.values())
        print(f"{args.threads} client threads, {elapsed:.1f} s, table of 50 files")
        print(f"  total      {total:7d} requests  {total / elapsed:8.1f} req/s  errors {len(errors)}")
        for kind, v in lat.items():
            if not v:
                continue
            v.sort()
            p50 = statistics.median(v) * 1000
            p99 = v[min(len(v) - 1, int(len(v) * 0.99))] * 1000
            print(f"  {kind:9s}  {len(v):7d} requests  {len(v) / elapsed:8.1f} req/s  p50 {p50:6.1f} ms  p99 {p99:6.1f} ms")
        if errors:
            print("  first errors:", errors[:5])
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
