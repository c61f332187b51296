"""Oracles of the sharing tests and how rows are compared with them.

What a client read through the server (the official client's DataFrame, brought back as Arrow) is
compared with rows that do not come from tahoe's own reader: the conformance tables' expected rows
(`expected_rows`), delta-rs reading the table directly (`delta_rs_rows`, `delta_rs_changes`), or
rows written down by hand from the known history of a hand-built table. Values are normalised
for what pandas does to them (nullable integers become floats, timestamps become naive or
nanosecond, maps become lists of pairs), never beyond.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from datetime import date, datetime, timezone
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tests.conftest import manifest_entry, read_expected


def _norm(v):
    if v is None:
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, np.generic):
        v = v.item()
    if hasattr(v, "to_pydatetime"):     # pandas Timestamp (nanosecond timestamps)
        v = v.to_pydatetime()
    if isinstance(v, datetime):
        if v.tzinfo is not None:
            v = v.astimezone(timezone.utc).replace(tzinfo=None)
        return ("ts", v.isoformat())
    if isinstance(v, date):
        return ("d", v.isoformat())
    if isinstance(v, Decimal):
        return ("dec", format(v.normalize(), "f") if v == v else "nan")
    if isinstance(v, bool):
        return v
    if isinstance(v, float):
        if v.is_integer() and abs(v) < 2 ** 53:   # an integer column with nulls, as pandas holds it
            return int(v)
        return float(f"{v:.12g}")
    if isinstance(v, bytes):
        return ("b", v.hex())
    if isinstance(v, dict):
        return tuple(sorted((k, _norm(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple, np.ndarray)):
        items = list(v)
        if items and all(isinstance(x, (tuple, dict)) and len(x) == 2 and
                         (isinstance(x, tuple) or set(x) == {"key", "value"}) for x in items):
            pairs = [(x["key"], x["value"]) if isinstance(x, dict) else x for x in items]
            return ("map", tuple(sorted((repr(_norm(k)), _norm(x)) for k, x in pairs)))
        return tuple(_norm(x) for x in items)
    return v


def rows(t: pa.Table, columns=None) -> list:
    """The rows of `t` as normalised, sorted tuples (of `columns`, default all)."""
    cols = list(columns or t.column_names)
    return sorted((tuple(_norm(r[c]) for c in cols) for r in t.select(cols).to_pylist()), key=repr)


def assert_same_rows(actual: pa.Table, expected: pa.Table, context: str = "") -> None:
    """The same column names and the same multiset of (normalised) rows."""
    assert sorted(actual.column_names) == sorted(expected.column_names), \
        f"{context}: columns {actual.column_names} vs expected {expected.column_names}"
    a = rows(actual, expected.column_names)
    b = rows(expected)
    assert len(a) == len(b), f"{context}: {len(a)} rows, expected {len(b)}"
    assert a == b, (f"{context}: rows differ; only read: {[x for x in a if x not in b][:3]}; "
                    f"only expected: {[x for x in b if x not in a][:3]}")


def expected_rows(golden: str) -> pa.Table:
    """The rows the conformance manifest says the table holds at its latest version."""
    return read_expected(manifest_entry(golden))


# --- delta-rs ----------------------------------------------------------------------------------------
_DELTA_RS = r"""
import json, os, sys
import pyarrow as pa, pyarrow.parquet as pq
from deltalake import DeltaTable, QueryBuilder
req = json.loads(sys.argv[1])
try:
    if req["kind"] == "rows" and req["sql"]:  # the path that applies deletion vectors
        dt = DeltaTable(req["path"], version=req["version"])
        t = pa.table(QueryBuilder().register("t", dt).execute("select * from t").read_all())
    elif req["kind"] == "rows":
        t = DeltaTable(req["path"], version=req["version"]).to_pyarrow_table()
    else:
        dt = DeltaTable(req["path"])
        t = pa.table(dt.load_cdf(starting_version=req["start"], ending_version=req["end"]).read_all())
    pq.write_table(t, req["out"])
    print("ok", flush=True)
except Exception as e:
    print("error", type(e).__name__, str(e)[:1000], flush=True)
os._exit(0)  # delta-rs may abort at interpreter exit (notes/peers.md)
"""

_cache: dict[tuple, pa.Table] = {}


def _delta_rs(req: dict) -> pa.Table:
    key = tuple(sorted(req.items()))
    if key not in _cache:
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "t.parquet")
            r = subprocess.run([sys.executable, "-c", _DELTA_RS, json.dumps({**req, "out": out})],
                               capture_output=True, text=True, timeout=120)
            assert r.stdout.startswith("ok"), (req, r.stdout, r.stderr[-2000:])
            _cache[key] = pq.read_table(out)
    return _cache[key]


def delta_rs_rows(path: str | Path, version: int | None = None, sql: bool = False) -> pa.Table:
    """The table's rows as delta-rs reads them (at `version`, default the latest); `sql`: through
    its QueryBuilder, the path that reads deletion-vector tables."""
    return _delta_rs({"kind": "rows", "path": str(path), "version": version, "sql": sql})


def delta_rs_changes(path: str | Path, start: int, end: int | None = None) -> pa.Table:
    """The table's change data feed from `start` to `end` as delta-rs's `load_cdf` reads it."""
    return _delta_rs({"kind": "cdf", "path": str(path), "start": start, "end": end})


def commit_ms_to_timestamp(t: pa.Table) -> pa.Table:
    """`_commit_timestamp` as a UTC timestamp where the client gave epoch milliseconds."""
    col = t.column("_commit_timestamp")
    if pa.types.is_integer(col.type) or pa.types.is_floating(col.type):
        col = pa.array([None if v is None else datetime.fromtimestamp(v / 1000, tz=timezone.utc)
                        for v in col.to_pylist()], pa.timestamp("ms", tz="UTC"))
    return t.set_column(t.schema.get_field_index("_commit_timestamp"), "_commit_timestamp", col)
