"""Delta Sharing of object-store tables: what the server's own URLs (checked on every download,
redirected to a URL the store signed) cost against the store's own signed URLs in the response
(`fileUrls: store`, the reference server's behaviour), in one run, on each emulator.

    python -m bench.sharing_object_stores                 # S3 (moto), Azure (Azurite), GCS (fake-gcs-server)
    python -m bench.sharing_object_stores --files 400 --stores s3 azure

For each store: one table of F small files (one commit), shared by two server processes (one per
mode); per mode, the median of R rounds of
  1. `/query` of the whole table (every file's URL made: the server's HMAC, or the store's
     signature — SigV4, Azure SAS, GCS V4 RSA);
  2. downloading every file through its URL with 8 threads (server mode: a request to tahoe,
     a 302, then the store);
and the floor: the same downloads straight from the store with obstore (no signing, no server).
Ratios: store-mode time / server-mode time (lower: store mode is faster).

Measured 2026-11-29 (2-core machine shared with other sessions; `--files 200 --rounds 3`; a query's
lines are cached for the minute their URLs share, so rounds after the first mostly measure the
cache — in both modes alike):
    store   mode     query    download (200 files, 8 threads)
    s3      server   0.007 s  0.678 s      store/server: query 0.92x, download 1.16x; floor 0.556 s
    s3      store    0.006 s  0.789 s
    azure   server   0.013 s  1.436 s      store/server: query 0.52x, download 0.36x; floor 0.464 s
    azure   store    0.007 s  0.519 s
    gcs     server   0.010 s  0.591 s      store/server: query 0.54x, download 0.53x; floor 0.115 s
    gcs     store    0.005 s  0.316 s
On loopback the redirect costs one extra round trip to tahoe per file (plus the store's
signature, made per redirect): on Azurite and fake-gcs-server the direct URLs download 2-3x
faster; on moto, whose own request handling dominates (the floor is 0.56 s), the two are within
noise. Over a WAN to a real store the extra round trip to the server is what `fileUrls: store`
saves, per file.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa


def _server(config: Path, port: int) -> subprocess.Popen:
    import httpx

    proc = subprocess.Popen([sys.executable, "-m", "tahoe", "sharing", "serve", "--config", str(config), "--port",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
            return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the sharing server did not start")


def _token(config: Path) -> str:
    out = subprocess.run([sys.executable, "-m", "tahoe", "sharing", "recipient", "add", "bench", "--share", "b",
                          "--config", str(config)], capture_output=True, text=True, check=True).stdout
    return json.loads(out)["bearerToken"]


def run(stores: list[str], files: int, rounds: int) -> None:
    import httpx
    import yaml

    import tahoe
    from tahoe.storage import store_for
    from tests.fixtures.emulators import free_port, start_azurite, start_gcs, start_s3

    starts = {"s3": start_s3, "azure": start_azurite, "gcs": start_gcs}
    results = {}
    for kind in stores:
        em = starts[kind]()
        try:
            bucket = f"bench-{uuid.uuid4().hex[:10]}"
            em.make_bucket(bucket)
            uri = em.uri(bucket, "t")
            tahoe.write_table(uri, pa.table({"id": list(range(files * 10)), "p": [f"v {i % files}" for i in range(files * 10)]}),
                              partition_by=["p"], storage_options=em.options)
            store, _ = store_for(uri, em.options)
            paths = tahoe.Table(uri, storage_options=em.options).file_uris()
            assert len(paths) == files, len(paths)
            client = httpx.Client(timeout=60)
            per_mode = {}
            for mode in ("server", "store"):
                d = Path(tempfile.mkdtemp(prefix=f"bench-{mode}-"))
                cfg = {"shares": [{"name": "b", "schemas": [{"name": "s", "tables": [
                    {"name": "t", "location": uri, "storageOptions": em.options}]}]}],
                       "fileUrls": mode, "audit": {"enabled": False}}
                (d / "sharing.yaml").write_text(yaml.safe_dump(cfg))
                token = _token(d / "sharing.yaml")
                port = free_port()
                proc = _server(d / "sharing.yaml", port)
                try:
                    q_times, d_times = [], []
                    url = f"http://127.0.0.1:{port}/delta-sharing/shares/b/schemas/s/tables/t/query"
                    for r in range(rounds + 1):
                        t0 = time.perf_counter()
                        resp = client.post(url, json={}, headers={"Authorization": f"Bearer {token}"})
                        q = time.perf_counter() - t0
                        urls = [json.loads(ln)["file"]["url"] for ln in resp.text.splitlines() if '"file"' in ln]
                        assert len(urls) == files
                        t0 = time.perf_counter()
                        with ThreadPoolExecutor(8) as ex:
                            sizes = list(ex.map(lambda u: len(client.get(u, follow_redirects=True).content), urls))
                        dl = time.perf_counter() - t0
                        assert all(sizes)
                        if r:   # the first round warms the server's snapshot cache
                            q_times.append(q)
                            d_times.append(dl)
                    per_mode[mode] = (statistics.median(q_times), statistics.median(d_times))
                finally:
                    proc.terminate()
                    proc.wait(10)
            t0 = time.perf_counter()
            floor = []
            for _ in range(rounds):
                t0 = time.perf_counter()
                with ThreadPoolExecutor(8) as ex:
                    list(ex.map(store.read, paths))
                floor.append(time.perf_counter() - t0)
            results[kind] = (per_mode, statistics.median(floor))
        finally:
            em.stop()
    print(f"\n{files} files per table, median of {rounds} rounds (seconds)")
    print(f"{'store':8} {'mode':7} {'query':>8} {'download':>9}")
    for kind, (per_mode, floor) in results.items():
        for mode, (q, dl) in per_mode.items():
            print(f"{kind:8} {mode:7} {q:8.3f} {dl:9.3f}")
        (qs, ds), (qd, dd) = per_mode["server"], per_mode["store"]
        print(f"{kind:8} ratio store/server: query {qd / qs:.2f}x, download {dd / ds:.2f}x; "
              f"floor (obstore straight from the store) {floor:.3f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stores", nargs="+", default=["s3", "azure", "gcs"])
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    run(a.stores, a.files, a.rounds)


if __name__ == "__main__":
    main()
