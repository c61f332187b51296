"""Fixtures of the sharing tests: a directory of shared tables (hand-built, written by tahoe, and —
where the conformance tables are on this machine — copies of 19 of them), recipients, the server
running as a real process (`python -m tahoe sharing serve`) on a free port of 127.0.0.1, and the
official `delta-sharing` client running in its own environment (`official`: see
tahoe/sharing/official_client.py), as a recipient runs it.

Without the conformance tables the server shares only the hand-built and written tables; tests
that read a conformance table are marked `conformance` (skipped there, failed in CI)."""

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

from tahoe.sharing.official_client import OfficialClient, ensure_env
from tahoe import Table
from tahoe.write.deletion_vectors import delete_rows
from tahoe.write.dml import delete
from tahoe.write.writer import write_table
from tests.conftest import GOLDEN, HAVE_GOLDEN, manifest_entry
from tests.sharing.tablegen import TableBuilder

REPO = Path(__file__).resolve().parents[2]
# the recipient's environment: the official client and its own pandas/pyarrow (make setup creates it)
RECIPIENT_ENV = REPO / ".venv-recipient"

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


def start_server(config_path: str, port: int, env: dict | None = None, args: list[str] | None = None) -> subprocess.Popen:
    import httpx

    proc = subprocess.Popen([sys.executable, "-m", "tahoe", "sharing", "serve", "--config", config_path,
                             "--port", str(port), *(args or [])], cwd=str(REPO), env={**os.environ, **(env or {})})
    deadline = time.time() + 180   # a start-up bound, not a timing check: machines under load start slowly
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sharing server exited with {proc.returncode}")
        try:
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
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
    w = str(root / "written")
    rows = lambda lo, n, cs: pa.table({"id": list(range(lo, lo + n)), "amount": [float(i % 50) for i in range(lo, lo + n)],
                                       "country": [cs[i % len(cs)] for i in range(n)]})
    write_table(w, rows(0, 300, ["FR", "DE", "US"]), partition_by=["country"],
                properties={"delta.enableChangeDataFeed": "true"})
    write_table(w, rows(300, 100, ["JP"]), mode="append")
    write_table(w, rows(500, 30, ["FR"]), mode="overwrite", predicate="country = 'FR'")
    delete(w, "amount < 10")
    out["written"] = w
    # deletion vectors (written by tahoe): rows 0 and 3 of one file and row 1 of another deleted
    dv = str(root / "dv")
    write_table(dv, pa.table({"id": list(range(20)), "g": ["x", "y"] * 10}), partition_by=["g"],
                properties={"delta.enableDeletionVectors": "true"})
    paths = sorted(Table(dv).files().column("path").to_pylist())
    delete_rows(dv, {paths[0]: [0, 3], paths[1]: [1]})
    out["dv"] = dv
    return out


# The hand-built `cdf` table's history, written down from what build_tables commits (commit v at
# 2024-01-01T00:00Z + v hours): the oracle of what clients read from it.
CDF_COLUMNS = ["id", "name", "score", "p"]
CDF_ROWS = {
    1: [(1, "a", 1.5, "a"), (2, "b", 2.5, "a"), (3, None, 3.5, "b")],
    2: [(1, "a", 1.5, "a"), (2, "b", 2.5, "a"), (3, None, 3.5, "b"), (4, "d", 4.5, "b"), (5, "e", None, "c")],
    3: [(1, "a", 1.5, "a"), (2, "b", 2.5, "a"), (3, None, 3.5, "b"), (4, "d", 4.5, "b")],
    4: [(1, "A", 1.5, "a"), (2, "b", 2.5, "a"), (3, None, 3.5, "b"), (4, "d", 4.5, "b")],
    5: [(1, "A", 1.5, "a"), (2, "b", 2.5, "a"), (3, None, 3.5, "b"), (4, "d", 4.5, "b"), (6, "f", 6.5, "d")],
}
CDF_CHANGES = [  # (row..., _change_type, _commit_version)
    ((1, "a", 1.5, "a"), "insert", 1), ((2, "b", 2.5, "a"), "insert", 1), ((3, None, 3.5, "b"), "insert", 1),
    ((4, "d", 4.5, "b"), "insert", 2), ((5, "e", None, "c"), "insert", 2),
    ((5, "e", None, "c"), "delete", 3),
    ((1, "a", 1.5, "a"), "update_preimage", 4), ((1, "A", 1.5, "a"), "update_postimage", 4),
    ((6, "f", 6.5, "d"), "insert", 5),
]


def cdf_rows(version: int = 5) -> pa.Table:
    """The `cdf` table's rows at `version`, as written down above."""
    return pa.table([pa.array(c) for c in zip(*CDF_ROWS[version])], names=CDF_COLUMNS)


def cdf_changes(start: int, end: int) -> pa.Table:
    """The `cdf` table's change rows of versions start..end, as written down above."""
    from datetime import datetime, timedelta, timezone

    sel = [c for c in CDF_CHANGES if start <= c[2] <= end]
    t0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    cols = [pa.array(c) for c in zip(*[r for r, _, _ in sel])]
    return pa.table(cols + [pa.array([k for _, k, _ in sel]), pa.array([v for _, _, v in sel], pa.int64()),
                            pa.array([t0 + timedelta(hours=v) for _, _, v in sel], pa.timestamp("ms", tz="UTC"))],
                    names=CDF_COLUMNS + ["_change_type", "_commit_version", "_commit_timestamp"])


@pytest.fixture(scope="session")
def server(tmp_path_factory) -> Server:
    d = tmp_path_factory.mktemp("sharing")
    tables = build_tables(d / "tables")
    if HAVE_GOLDEN:
        for g in PARQUET_GOLDEN + DELTA_GOLDEN:
            dst = d / "golden" / g
            shutil.copytree(GOLDEN / manifest_entry(g)["table"], dst)
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


@pytest.fixture(scope="session")
def official() -> OfficialClient:
    """The official `delta-sharing` client (1.4.2) in the recipient's own environment, created
    under the repository on first use when `make setup` has not made it yet."""
    client = OfficialClient(ensure_env(str(RECIPIENT_ENV)))
    yield client
    client.close()
