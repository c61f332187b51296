"""Oracles the maintenance tests share: delta-rs (in a subprocess: it may abort at exit, see
notes/peers.md) reading a table at a version through its QueryBuilder (the path that applies
deletion vectors and column mapping), and rows made comparable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tests.conftest import normalized_rows

_SCRIPT = r"""
import json, os, sys
import pyarrow as pa, pyarrow.parquet as pq
from deltalake import DeltaTable, QueryBuilder
req = json.loads(sys.argv[1])
for i, (path, version) in enumerate(req["tables"]):
    try:
        dt = DeltaTable(path, version=version, storage_options=req.get("options"))
        t = pa.table(QueryBuilder().register("t", dt).execute("select * from t").read_all())
        pq.write_table(t, os.path.join(req["out"], f"{i}.parquet"))
        print(json.dumps([i, "ok"]), flush=True)
    except Exception as e:
        print(json.dumps([i, type(e).__name__ + ": " + str(e)[:400]]), flush=True)
os._exit(0)
"""


def delta_rs_read(tables: list[tuple[str, int | None]], tmp: Path, options: dict | None = None) -> list:
    """For each (path, version): the rows delta-rs reads (an Arrow table) or its error text."""
    out = tmp / f"deltars-{time.monotonic_ns()}"
    out.mkdir(parents=True)
    req = {"tables": [[str(p), v] for p, v in tables], "out": str(out), "options": options}
    r = subprocess.run([sys.executable, "-c", _SCRIPT, json.dumps(req)], capture_output=True, text=True, timeout=180)
    status = dict(json.loads(line) for line in r.stdout.splitlines() if line.startswith("["))
    res = []
    for i in range(len(tables)):
        s = status.get(i)
        assert s is not None, r.stderr[-2000:]
        res.append(pq.read_table(out / f"{i}.parquet") if s == "ok" else s)
    return res


def rows(t: pa.Table, columns: list[str] | None = None) -> list:
    """Order-insensitive rows of the given columns (all when None)."""
    t = t.select(columns or sorted(t.column_names))
    return normalized_rows(t)


def tree(root: str | Path) -> set[str]:
    """Every file under `root` (relative paths), the oracle for what a command deleted."""
    root = str(root)
    return {os.path.relpath(os.path.join(d, f), root).replace(os.sep, "/")
            for d, _, fs in os.walk(root) for f in fs}
