"""The harness of tests/spark/sql/test_delta_docs.py: delta-spark's documentation pages the
examples come from, the registry of doc cases, and a small context each case runs in (the
enabled session, its own database in tmp_path, confs set only for the case, errors that must
commit nothing, and the oracles that are not tahoe: hand-derived rows, the table's `_delta_log`
read as JSON, and delta-rs reading the table in a subprocess)."""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pyarrow.parquet as pq
import pytest

from tests.maintenance.helpers import rows as arrow_rows

# the current docs.delta.io pages (their sources: delta-io/delta docs/src/content/docs/*.mdx)
PAGES = {
    "batch": "https://docs.delta.io/delta-batch/",
    "update": "https://docs.delta.io/delta-update/",
    "utility": "https://docs.delta.io/delta-utility/",
    "optimizations": "https://docs.delta.io/optimizations-oss/",
    "constraints": "https://docs.delta.io/delta-constraints/",
    "column-mapping": "https://docs.delta.io/delta-column-mapping/",
    "cdf": "https://docs.delta.io/delta-change-data-feed/",
    "clustering": "https://docs.delta.io/delta-clustering/",
}


@dataclasses.dataclass
class DocCase:
    page: str
    id: str
    examples: tuple[str, ...]      # the doc's SQL, as the page writes it (one entry per example)
    fn: Callable[["Ctx"], None]
    xfail: str | None = None

    @property
    def url(self) -> str:
        return PAGES[self.page]


CASES: list[DocCase] = []


def doc(page: str, case_id: str, *examples: str, xfail: str | None = None):
    """Register a doc case: `examples` are the page's SQL examples the case runs (counted in the
    report); `xfail` names why it cannot pass here (outside open-source delta-spark, or impossible
    without a JVM)."""
    assert page in PAGES, page

    def register(fn):
        CASES.append(DocCase(page, f"{page}:{case_id}", tuple(examples), fn, xfail))
        return fn
    return register


def params() -> list:
    out = []
    for c in CASES:
        marks = [pytest.mark.xfail(strict=True, reason=c.xfail)] if c.xfail else []
        out.append(pytest.param(c, id=c.id, marks=marks))
    return out


# --- oracles that are not tahoe -------------------------------------------------------------------

def log_versions(path: str | Path) -> list[int]:
    """The versions of the commits in the table's `_delta_log` (by file name)."""
    d = Path(path) / "_delta_log"
    if not d.exists():
        return []
    return sorted(int(p.name[:20]) for p in d.iterdir() if re.fullmatch(r"\d{20}\.json", p.name))


def commit_actions(path: str | Path, version: int) -> list[dict]:
    """The actions of one commit file, parsed as JSON."""
    text = (Path(path) / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def commit_info(path: str | Path, version: int) -> dict:
    return next(a["commitInfo"] for a in commit_actions(path, version) if "commitInfo" in a)


def last_metadata(path: str | Path) -> dict:
    """The latest metaData action of the log (by replaying the JSON commits)."""
    md = None
    for v in log_versions(path):
        for a in commit_actions(path, v):
            if "metaData" in a:
                md = a["metaData"]
    assert md is not None
    return md


def last_protocol(path: str | Path) -> dict:
    p = None
    for v in log_versions(path):
        for a in commit_actions(path, v):
            if "protocol" in a:
                p = a["protocol"]
    assert p is not None
    return p


def schema_fields(path: str | Path) -> list[dict]:
    return json.loads(last_metadata(path)["schemaString"])["fields"]


def set_commit_time(path: str | Path, version: int, epoch_seconds: float) -> None:
    """Make a commit look as if written at `epoch_seconds` (a table without in-commit timestamps
    takes a version's time from its commit file's modification time)."""
    f = Path(path) / "_delta_log" / f"{version:020d}.json"
    os.utime(f, (epoch_seconds, epoch_seconds))


def data_files(path: str | Path) -> set[str]:
    """The parquet files under the table directory (relative, `_delta_log` excluded)."""
    root = Path(path)
    return {str(p.relative_to(root)) for p in root.rglob("*.parquet") if "_delta_log" not in p.parts}


def norm(rows: list) -> list:
    """Rows (Spark Rows or tuples) as sorted tuples."""
    return sorted((tuple(r) for r in rows), key=repr)


# delta-rs in one long-lived subprocess (its import costs seconds; it may abort at exit, see
# notes/peers.md — so it never exits normally): a request per line, the tables' rows as parquet
_WORKER = r"""
import json, os, sys
import pyarrow as pa, pyarrow.parquet as pq
from deltalake import DeltaTable, QueryBuilder
for line in sys.stdin:
    req = json.loads(line)
    status = []
    for i, (path, version) in enumerate(req["tables"]):
        try:
            dt = DeltaTable(path, version=version)
            t = pa.table(QueryBuilder().register("t", dt).execute("select * from t").read_all())
            pq.write_table(t, os.path.join(req["out"], f"{i}.parquet"))
            status.append("ok")
        except Exception as e:
            status.append(type(e).__name__ + ": " + str(e)[:400])
    print(json.dumps(status), flush=True)
os._exit(0)
"""
_worker: dict[str, Any] = {}
_worker_lock = threading.Lock()


def _stop_worker() -> None:
    proc = _worker.pop("proc", None)
    if proc is not None:
        try:
            proc.stdin.close()
            proc.wait(timeout=30)
        except Exception:  # noqa: BLE001 - it is going away either way
            proc.kill()


def delta_rs_read(tables: list[tuple[str, int | None]], tmp: Path) -> list:
    """For each (path, version): the rows delta-rs reads (an Arrow table) or its error text."""
    out = tmp / f"deltars-{time.monotonic_ns()}"
    out.mkdir(parents=True)
    with _worker_lock:
        proc = _worker.get("proc")
        if proc is None or proc.poll() is not None:
            proc = subprocess.Popen([sys.executable, "-c", _WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    text=True)
            _worker["proc"] = proc
            atexit.register(_stop_worker)
        proc.stdin.write(json.dumps({"tables": [[str(p), v] for p, v in tables], "out": str(out)}) + "\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
    assert line, "the delta-rs reader died"
    status = json.loads(line)
    return [pq.read_table(out / f"{i}.parquet") if st == "ok" else st for i, st in enumerate(status)]


# --- the context a case runs in -------------------------------------------------------------------

class Ctx:
    def __init__(self, spark: Any, db: str, tmp: Path):
        self.spark = spark
        self.db = db
        self.tmp = tmp
        self._deltars: list[tuple[str, int | None, list[str], list]] = []

    # statements
    def sql(self, text: str):
        """Run a statement through the enabled session; its rows."""
        return self.spark.sql(text).collect()

    def df(self, text: str):
        return self.spark.sql(text)

    def rows(self, text: str) -> list:
        return norm(self.sql(text))

    def fails(self, text: str, *patterns: str, table: str | Path | None = None) -> BaseException:
        """The statement fails with an error whose text matches one of `patterns` (regexes, any
        case); with `table`, no commit was added to that table."""
        before = log_versions(table) if table is not None else None
        with pytest.raises(Exception) as info:
            self.spark.sql(text).collect()
        message = f"{type(info.value).__name__}: {info.value}"
        assert any(re.search(p, message, re.I | re.S) for p in patterns), \
            f"{text!r} failed with\n{message[:1500]}\nnot matching {patterns}"
        if table is not None:
            assert log_versions(table) == before, f"{text!r} failed but committed"
        return info.value

    @contextlib.contextmanager
    def conf(self, settings: dict[str, str]):
        """Session confs set for the block only (as `SET key=value` does), restored after."""
        old = {k: self.spark.conf.get(k, None) for k in settings}
        try:
            for k, v in settings.items():
                self.sql(f"SET {k}={v}")
            yield
        finally:
            for k, v in old.items():
                if v is None:
                    self.spark.conf.unset(k)
                else:
                    self.spark.conf.set(k, v)

    # places
    def path(self, name: str) -> str:
        """A fresh directory for a path-based table."""
        p = self.tmp / "paths" / name
        p.parent.mkdir(parents=True, exist_ok=True)
        return str(p)

    def managed(self, name: str) -> str:
        """Where Spark places the managed table `name` of the case's database."""
        return str(self.tmp / "db" / name.lower())

    def tables(self) -> set[str]:
        return {r["tableName"] for r in self.sql(f"SHOW TABLES IN {self.db}") if not r["isTemporary"]}

    # the independent reader
    def deltars(self, path: str | Path, columns: list[str], expected: list, version: int | None = None) -> None:
        """delta-rs must read `columns` of the table (at `version`) as `expected` — checked at the
        end of the case, all tables in one subprocess."""
        self._deltars.append((str(path), version, columns, expected))

    def finish(self) -> None:
        """Run the delta-rs checks asked for so far (the case may call it before it drops what
        they read)."""
        checks, self._deltars = self._deltars, []
        if not checks:
            return
        tables = delta_rs_read([(p, v) for p, v, _, _ in checks], self.tmp)
        for (p, v, cols, expected), t in zip(checks, tables):
            assert not isinstance(t, str), f"delta-rs could not read {p}@{v}: {t}"
            assert arrow_rows(t, cols) == sorted((tuple(r) for r in expected), key=repr), \
                f"delta-rs reads {p}@{v} differently"


def now() -> float:
    return time.time()
