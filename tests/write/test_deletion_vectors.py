"""Marking rows deleted with deletion vectors (`tahoe.write.delete_rows`): the rows tahoe and
delta-rs read, the descriptors and stats the spec asks for, DVs that grow, skipping over wide
bounds, and bad input refused before anything is written."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

from tahoe import Table
from tahoe.errors import InvalidTableOperationError
from tahoe.log import DeltaLog
from tahoe.write import delete_rows, write_table
from tests.write.test_writer import delta_rs_rows, same_rows


def _table(path: str, **props) -> list:
    data = pa.table({"id": pa.array(range(200), pa.int64()), "day": ["a", "b"] * 100,
                     "v": [f"x{i}" for i in range(200)]})
    write_table(path, data, partition_by=["day"],
                properties={"delta.enableDeletionVectors": "true", **props})
    return DeltaLog.for_table(path).snapshot().add_files()


def _ids(path: str) -> list[int]:
    return sorted(Table(path).to_arrow(columns=["id"]).column("id").to_pylist())


def test_deleted_rows_are_gone_for_tahoe_and_delta_rs(tmp_path):
    path = str(tmp_path / "t")
    a, b = sorted(_table(path), key=lambda f: f.partition_values["day"])  # day=a: even ids, b: odd
    v = delete_rows(path, {a.path: [0, 1, 99], b.path: [5]}, predicate="id in (0, 2, 198, 11)")
    assert v == 1
    gone = {0, 2, 198, 11}
    assert _ids(path) == [i for i in range(200) if i not in gone]
    snap = DeltaLog.for_table(path).snapshot()
    for add in snap.add_files():
        dv = add.deletion_vector
        assert dv.storage_type == "u" and dv.cardinality == (3 if add.path == a.path else 1)
        st = json.loads(add.stats)
        assert st["numRecords"] == 100 and st["tightBounds"] is False  # physical rows; wide bounds
    commit = DeltaLog.for_table(path).history(1)[0].commit_info
    assert commit["operation"] == "DELETE"
    expected = Table(path).to_arrow()
    same_rows(delta_rs_rows([path], tmp_path, sql=True)[path], expected, "delta-rs")


def test_a_second_delete_grows_the_deletion_vector(tmp_path):
    path = str(tmp_path / "t")
    a = sorted(_table(path), key=lambda f: f.partition_values["day"])[0]
    delete_rows(path, {a.path: [1, 2]})
    assert delete_rows(path, {a.path: [2]}) is None  # nothing new: no commit
    assert Table(path).version == 1
    delete_rows(path, {a.path: [3]})
    (now,) = [f for f in DeltaLog.for_table(path).snapshot().add_files() if f.path == a.path]
    assert now.deletion_vector.cardinality == 3
    assert _ids(path) == [i for i in range(200) if i not in {2, 4, 6}]
    # the log keys logical files by (path, DV): the version-2 remove names the version-1 DV
    with open(os.path.join(path, "_delta_log", f"{2:020d}.json")) as f:
        acts = [json.loads(line) for line in f]
    (rm,) = [x["remove"] for x in acts if "remove" in x]
    assert rm["deletionVector"]["cardinality"] == 2


def test_skipping_still_uses_the_wide_bounds(tmp_path):
    """After a DV the min/max still bound the valid rows: files are kept or skipped by them."""
    from tahoe.spark.skipping import file_mask  # pure: no Spark needed for SQL filters

    path = str(tmp_path / "t")
    a = sorted(_table(path), key=lambda f: f.partition_values["day"])[0]  # ids 0, 2, ..., 198
    delete_rows(path, {a.path: [0, 99]})   # ids 0 and 198: its min and max rows are gone
    snap = DeltaLog.for_table(path).snapshot()
    files = snap.files_table(["path", "partitionValues", "stats", "deletionVector"])
    by_path = files.column("path").to_pylist()

    def kept(sql: str) -> set[str]:
        mask = file_mask(files, [sql], snap.schema, snap.partition_columns, snap.column_mapping_mode)
        return {p for p, m in zip(by_path, mask) if m}

    assert a.path in kept("id = 2") and a.path in kept("id = 0")  # wide: 0 is within [0, 198]
    assert a.path not in kept("id > 198")
    assert 2 in _ids(path) and 0 not in _ids(path) and 198 not in _ids(path)


@pytest.mark.parametrize("case, match", [
    ("no-feature", "does not support deletion vectors"),
    ("unknown-path", "not active files"),
    ("past-the-end", "row index 100 is outside"),
    ("negative", "row index -1 is outside"),
    ("append-only", "append-only"),
])
def test_bad_input_is_refused_and_writes_nothing(tmp_path, case, match):
    path = str(tmp_path / "t")
    if case == "no-feature":
        write_table(path, pa.table({"id": pa.array(range(10), pa.int64())}))
        adds = DeltaLog.for_table(path).snapshot().add_files()
    else:
        adds = _table(path, **({"delta.appendOnly": "true"} if case == "append-only" else {}))
    before = sorted(os.listdir(path))
    rows = {"unknown-path": {"day=a/nope.parquet": [1]}, "past-the-end": {adds[0].path: [100]},
            "negative": {adds[0].path: [-1, 3]}}.get(case, {adds[0].path: [1]})
    with pytest.raises(InvalidTableOperationError, match=match):
        delete_rows(path, rows)
    assert Table(path).version == 0
    if case != "append-only":  # refused before the DV file is written
        assert sorted(os.listdir(path)) == before
