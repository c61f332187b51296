"""Fixtures of the sharing tests: a directory of shared tables (hand-built and conformance copies),
recipients, and the server running as a real process (`python -m tahoe sharing serve`) on a free
port of 127.0.0.1, stopped after the session."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from tests.conftest import GOLDEN
from tests.sharing.tablegen import TableBuilder

REPO = Path(__file__).resolve().parents[2]

# conformance tables served in parquet format (no reader features) and in delta format
PARQUET_GOLDEN = ["basic-decimal-table", "data-reader-partition-values", "data-reader-primitives",
                  "basic-with-inserts-deletes-checkpoint", "multi-part-checkpoint", "data-reader-escaped-chars",
                  "125-iterator-bug", "data-reader-nested-struct", "data-reader-array-primitives",
                  "data-skipping-partition-and-data-column", "kernel-timestamp-pst", "decimal-various-scale-precision"]
DELTA_GOLDEN = ["dv-partitioned-with-checkpoint", "dv-with-columnmapping", "data-reader-timestamp_ntz",
                "data-reader-timestamp_ntz-name-mode", "data-skipping-basic-stats-all-types-columnmapping-name",
                "log-replay-dv-key-cases", "data-reader-timestamp_ntz-id-mode"]


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def tname(golden: str) -> str:
    return golden.replace("-", "_").lower()


def start_server(config_path: str, port: int, env: dict | None = None) -> subprocess.Popen:
    import httpx

    proc = subprocess.Popen([sys.executable, "-m", "tahoe", "sharing", "serve", "--config", config_path,
                             "--port", str(port)], cwd=str(REPO), env={**os.environ, **(env or {})})
    deadline = time.time() + 30
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sharing server exited with {proc.returncode}")
        try:
            httpx.get(f"http://127.0.0.1:{port}/openapi.json", timeout=1)
            return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.terminate()
    raise RuntimeError("sharing server did not start")


def stop_server(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@dataclass
class Server:
    url: str                       # endpoint (with prefix)
    base: str                      # http://127.0.0.1:port
    dir: Path
    config: str
    profiles: dict[str, str] = field(default_factory=dict)   # recipient -> profile path
    tokens: dict[str, str] = field(default_factory=dict)
    tables: dict[str, str] = field(default_factory=dict)     # table name -> location

    def table_url(self, who: str, share: str, table: str, schema: str = "sc") -> str:
        return f"{self.profiles[who]}#{share}.{schema}.{table}"


def build_tables(root: Path) -> dict[str, str]:
    """The hand-built tables: name -> location."""
    out = {}
    sch = pa.schema([("id", pa.int64()), ("name", pa.string()), ("score", pa.float64()), ("p", pa.string())])
    # cdf: v0 create, v1 append, v2 append, v3 delete p=c (cdc), v4 update id=1 (cdc), v5 append (no cdc)
    tb = TableBuilder(root / "cdf", sch, ["p"], {"delta.enableChangeDataFeed": "true"})
    tb.append(pa.table({"id": [1, 2, 3], "name": ["a", "b", None], "score": [1.5, 2.5, 3.5], "p": ["a", "a", "b"]}, schema=sch))
    tb.append(pa.table({"id": [4, 5], "name": ["d", "e"], "score": [4.5, None], "p": ["b", "c"]}, schema=sch))
    pc_ = [k for k, v in tb.files.items() if v["partitionValues"]["p"] == "c"]
    tb.remove(pc_, cdc=pa.table({"id": [5], "name": ["e"], "score": [None], "p": ["c"],
                                 "_change_type": ["delete"]}, schema=sch.append(pa.field("_change_type", pa.string()))))
    pa_ = [k for k, v in tb.files.items() if v["partitionValues"]["p"] == "a"]
    tb.rewrite(pa_, pa.table({"id": [1, 2], "name": ["A", "b"], "score": [1.5, 2.5], "p": ["a", "a"]}, schema=sch),
               cdc=pa.table({"id": [1, 1], "name": ["a", "A"], "score": [1.5, 1.5], "p": ["a", "a"],
                             "_change_type": ["update_preimage", "update_postimage"]},
                            schema=sch.append(pa.field("_change_type", pa.string()))))
    tb.append(pa.table({"id": [6], "name": ["f"], "score": [6.5], "p": ["d"]}, schema=sch))
    out["cdf"] = str(root / "cdf")
    # many small files, one per id, unpartitioned with stats: for predicate and limit pruning
    nb = TableBuilder(root / "stats", pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC"))]))
    for i in range(10):
        nb.append(pa.table({"id": [i * 10 + j for j in range(10)],
                            "ts": pa.array([1704067200_000_000 + (i * 10 + j) * 3600_000_000 for j in range(10)],
                                           pa.timestamp("us", tz="UTC"))}))
    out["stats"] = str(root / "stats")
    # no CDF
    nc = TableBuilder(root / "nocdf", pa.schema([("x", pa.int64())]))
    nc.append(pa.table({"x": [1, 2, 3]}))
    out["nocdf"] = str(root / "nocdf")
    # written by tahoe's own writer (append, replaceWhere overwrite, copy-on-write DELETE with CDF)
    try:
        from tahoe.write.dml import delete
        from tahoe.write.arrow import write_table
    except ImportError:  # the writer is optional for these tests
        return out
    w = str(root / "written")
    rows = lambda lo, n, cs: pa.table({"id": list(range(lo, lo + n)), "amount": [float(i % 50) for i in range(lo, lo + n)],
                                       "country": [cs[i % len(cs)] for i in range(n)]})
    write_table(w, rows(0, 300, ["FR", "DE", "US"]), partition_by=["country"],
                properties={"delta.enableChangeDataFeed": "true"})
    write_table(w, rows(300, 100, ["JP"]), mode="append")
    write_table(w, rows(500, 30, ["FR"]), mode="overwrite", predicate="country = 'FR'")
    delete(w, "amount < 10")
    out["written"] = w
    return out


@pytest.fixture(scope="session")
def server(tmp_path_factory) -> Server:
    d = tmp_path_factory.mktemp("sharing")
    tables = build_tables(d / "tables")
    for g in PARQUET_GOLDEN + DELTA_GOLDEN:
        dst = d / "golden" / g
        shutil.copytree(GOLDEN / g / "delta", dst)
        tables[tname(g)] = str(dst)
    share_tables = [{"name": n, "location": loc, "historyShared": True} for n, loc in tables.items()]
    share_tables.append({"name": "nohist", "location": tables["cdf"], "historyShared": False})
    cfg = {
        "shares": [
            {"name": "s1", "schemas": [{"name": "sc", "tables": share_tables},
                                       {"name": "other", "tables": [{"name": "t", "location": tables["nocdf"]}]}]},
            {"name": "secret", "schemas": [{"name": "sc", "tables": [{"name": "t", "location": tables["nocdf"]}]}]},
            {"name": "Extra", "schemas": [{"name": "sc", "tables": [{"name": "t", "location": tables["nocdf"]}]}]},
        ],
        "host": "127.0.0.1",
        "endpoint": "/delta-sharing",
        "preSignedUrlTimeoutSeconds": 900,
    }
    port = free_port()
    cfg["port"] = port
    config_path = str(d / "server.yaml")
    Path(config_path).write_text(yaml.safe_dump(cfg))
    srv = Server(url=f"http://127.0.0.1:{port}/delta-sharing", base=f"http://127.0.0.1:{port}", dir=d,
                 config=config_path, tables=tables)

    def add(name, shares, days=None):
        args = [sys.executable, "-m", "tahoe", "sharing", "recipient", "add", name, "--config", config_path]
        for s in shares:
            args += ["--share", s]
        if days is not None:
            args += ["--expires-in-days", str(days)]
        out = subprocess.run(args, cwd=str(REPO), capture_output=True, text=True, check=True).stdout
        prof = json.loads(out)
        p = d / f"{name}.share"
        p.write_text(json.dumps(prof))
        srv.profiles[name] = str(p)
        srv.tokens[name] = prof["bearerToken"]

    add("alice", ["s1", "extra"], days=30)
    add("bob", ["secret"])
    add("expired", ["s1"], days=-1)
    add("revoked", ["s1"])
    subprocess.run([sys.executable, "-m", "tahoe", "sharing", "recipient", "revoke", "revoked", "--config",
                    config_path], cwd=str(REPO), check=True, capture_output=True)
    proc = start_server(config_path, port)
    yield srv
    stop_server(proc)
