"""Spark-free copy-on-write DELETE: rows, files, metrics, change data, and delta-rs agreeing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow as pa
import pytest

import tahoe
from tahoe.errors import InvalidTableOperationError
from tahoe.write.dml import delete
from tahoe.write.writer import write_table


def _table(path, **props):
    data = pa.table({"id": pa.array(range(10), pa.int64()),
                     "day": ["a", "b"] * 5,
                     "v": [f"x{i}" for i in range(10)]})
    write_table(str(path), data, partition_by=["day"], properties=props or None)


def _deltars(path: str, code: str) -> dict:
    """Run delta-rs in a subprocess (it can abort at interpreter exit) and return its JSON."""
    script = f"import json, os, sys, deltalake\ndt = deltalake.DeltaTable({path!r})\n{code}\nsys.stdout.flush()\nos._exit(0)\n"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.stdout, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_delete_rewrites_only_touched_files(tmp_path):
    _table(tmp_path)
    before = {r["path"] for r in tahoe.Table(str(tmp_path)).files(["path"]).to_pylist()}
    m = delete(str(tmp_path), "id < 3 AND day = 'a'")
    assert m["numDeletedRows"] == 2 and m["numRemovedFiles"] == 1 and m["numAddedFiles"] == 1
    assert m["numCopiedRows"] == 3 and m["version"] == 1
    t = tahoe.Table(str(tmp_path))
    assert sorted(t.to_arrow().column("id").to_pylist()) == [1, 3, 4, 5, 6, 7, 8, 9]
    after = {r["path"] for r in t.files(["path"]).to_pylist()}
    assert len(before & after) == 1  # the 'b' partition's file is untouched
    assert t.history()[0]["operation"] == "DELETE"
    rs = _deltars(str(tmp_path), "print(json.dumps({'v': dt.version(), 'ids': sorted(dt.to_pyarrow_table().column('id').to_pylist())}))")
    assert rs == {"v": 1, "ids": [1, 3, 4, 5, 6, 7, 8, 9]}


def test_delete_no_match_commits_nothing_and_delete_all(tmp_path):
    _table(tmp_path)
    assert delete(str(tmp_path), "id > 100")["version"] == 0
    assert tahoe.Table(str(tmp_path)).version == 0
    m = delete(str(tmp_path))
    assert m["numDeletedRows"] == 10 and m["numAddedFiles"] == 0
    assert tahoe.Table(str(tmp_path)).to_arrow().num_rows == 0


def test_delete_writes_change_data_that_delta_rs_reads(tmp_path):
    _table(tmp_path, **{"delta.enableChangeDataFeed": "true"})
    m = delete(str(tmp_path), "v = 'x4' OR id = 5")
    assert m["numAddedChangeFiles"] == 2
    rs = _deltars(str(tmp_path), "import pyarrow as pa\nt = pa.table(dt.load_cdf(starting_version=1).read_all())\n"
                                 "print(json.dumps(sorted([r['id'], r['_change_type']] for r in t.select(['id','_change_type']).to_pylist())))")
    assert rs == [[4, "delete"], [5, "delete"]]


def test_delete_refused_on_append_only_table(tmp_path):
    _table(tmp_path, **{"delta.appendOnly": "true"})
    with pytest.raises(InvalidTableOperationError, match="DELTA_CANNOT_MODIFY_APPEND_ONLY.*only allow appends"):
        delete(str(tmp_path), "id = 1")
    assert tahoe.Table(str(tmp_path)).version == 0


def test_delete_on_missing_table(tmp_path):
    with pytest.raises(tahoe.errors.DeltaError):
        delete(str(tmp_path / "nope"), "id = 1")


def test_delete_predicate_with_an_unknown_column_is_an_analysis_exception(tmp_path):
    from tahoe.errors import AnalysisException

    _table(tmp_path / "t")
    before = sorted(os.listdir(tmp_path / "t" / "_delta_log"))
    with pytest.raises(AnalysisException, match="UNRESOLVED_COLUMN.*`nope`"):
        delete(str(tmp_path / "t"), "nope = 1 OR id = 1")
    with pytest.raises(AnalysisException, match="`v`.`x`|`v.x`"):          # a nested path into a string column
        delete(str(tmp_path / "t"), "v.x = 1")
    assert sorted(os.listdir(tmp_path / "t" / "_delta_log")) == before   # nothing committed
    assert delete(str(tmp_path / "t"), "ID = 1")["numDeletedRows"] == 1  # names match case-insensitively
